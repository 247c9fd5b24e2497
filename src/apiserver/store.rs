//! The in-memory store: collections of objects keyed by (namespace, name), one global
//! resourceVersion counter, a bounded history of changes for watch resumption, and one
//! broadcast channel per collection for live watchers.
//!
//! Everything lives behind one mutex (see `Shared::state`), never held across an
//! `.await`: a write is a map insert, a ring push and a channel send — O(log n) in the
//! collection size plus O(1) per event; each watcher does its own filtering, and the
//! watchers of a change share one serialisation of it (`Change::line`).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

use super::meta::{meta_mut, name_of, namespace_of};
use super::registry::{Registry, StorageKey};

/// Room in each collection's channel for events a slow watcher has not read yet; a
/// watcher that falls further behind is closed (it resumes from its last resourceVersion).
const CHANNEL_CAPACITY: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventKind {
    Added = 0,
    Modified = 1,
    Deleted = 2,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, as kept in history and sent to watchers (objects in stored form).
#[derive(Debug)]
pub(crate) struct Change {
    pub rv: u64,
    pub key: StorageKey,
    pub kind: EventKind,
    pub object: Arc<Value>,
    /// The object before a modification (for selector transitions).
    pub old: Option<Arc<Value>>,
    /// The whole watch line (`{"type":…,"object":…}\n`) of each event type, with
    /// `object` unconverted: serialised once per change and shared by every watcher
    /// that needs it (a clone of `Bytes` is a reference count, not a copy).
    lines: [OnceLock<Bytes>; 3],
}

impl Change {
    pub fn new(
        rv: u64,
        key: StorageKey,
        kind: EventKind,
        object: Arc<Value>,
        old: Option<Arc<Value>>,
    ) -> Self {
        Self {
            rv,
            key,
            kind,
            object,
            old,
            lines: Default::default(),
        }
    }

    /// The line for an event of type `kind` carrying `object` as stored.
    pub fn line(&self, kind: EventKind) -> Bytes {
        self.lines[kind as usize]
            .get_or_init(|| {
                let mut line = Vec::with_capacity(512);
                line.extend_from_slice(b"{\"type\":\"");
                line.extend_from_slice(kind.as_str().as_bytes());
                line.extend_from_slice(b"\",\"object\":");
                // Serialising a `Value` into a Vec cannot fail.
                let _ = serde_json::to_writer(&mut line, &*self.object);
                line.extend_from_slice(b"}\n");
                Bytes::from(line)
            })
            .clone()
    }
}

type ObjKey = (String, String);

#[derive(Debug)]
pub(crate) struct State {
    /// The last resourceVersion handed out.
    pub rv: u64,
    pub registry: Registry,
    collections: HashMap<StorageKey, BTreeMap<ObjKey, Arc<Value>>>,
    history: VecDeque<Arc<Change>>,
    history_cap: usize,
    /// Changes at or below this resourceVersion are no longer in history.
    compacted: u64,
    channels: HashMap<StorageKey, broadcast::Sender<Arc<Change>>>,
}

/// What a watcher gets when it subscribes: changes to replay, then the live feed.
pub(crate) struct Subscription {
    pub replay: Vec<Arc<Change>>,
    pub live: broadcast::Receiver<Arc<Change>>,
    pub rv: u64,
}

impl State {
    pub fn new(history_cap: usize) -> Self {
        Self {
            rv: 0,
            registry: Registry::default(),
            collections: HashMap::new(),
            history: VecDeque::with_capacity(history_cap.min(1 << 16)),
            history_cap: history_cap.max(1),
            compacted: 0,
            channels: HashMap::new(),
        }
    }

    pub fn get(&self, key: &StorageKey, ns: &str, name: &str) -> Option<&Arc<Value>> {
        self.collections
            .get(key)?
            .get(&(ns.to_owned(), name.to_owned()))
    }

    /// Objects of a collection in (namespace, name) order, optionally one namespace only,
    /// starting after `after`.
    pub fn list<'a>(
        &'a self,
        key: &StorageKey,
        ns: Option<&'a str>,
        after: Option<&ObjKey>,
    ) -> impl Iterator<Item = &'a Arc<Value>> + 'a {
        use std::ops::Bound;
        let coll = self.collections.get(key);
        let start = match (after, ns) {
            (Some(a), _) => Bound::Excluded(a.clone()),
            (None, Some(n)) => Bound::Included((n.to_owned(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        coll.into_iter()
            .flat_map(move |c| c.range((start.clone(), Bound::Unbounded)))
            .take_while(move |((n, _), _)| ns.is_none_or(|want| n == want))
            .map(|(_, v)| v)
    }

    /// Stores (or, for `Deleted`, removes) `obj` under the next resourceVersion, records
    /// the change and tells the collection's watchers. Returns the stored object.
    pub fn commit(&mut self, key: &StorageKey, kind: EventKind, mut obj: Value) -> Arc<Value> {
        self.rv += 1;
        let rv = self.rv;
        meta_mut(&mut obj).insert("resourceVersion".into(), Value::String(rv.to_string()));
        let obj = Arc::new(obj);
        let okey = (namespace_of(&obj).to_owned(), name_of(&obj).to_owned());
        let coll = self.collections.entry(key.clone()).or_default();
        let old = if kind == EventKind::Deleted {
            coll.remove(&okey)
        } else {
            coll.insert(okey, obj.clone())
        };
        let change = Arc::new(Change::new(rv, key.clone(), kind, obj.clone(), old));
        if self.history.len() >= self.history_cap
            && let Some(dropped) = self.history.pop_front()
        {
            self.compacted = dropped.rv;
        }
        self.history.push_back(change.clone());
        if let Some(tx) = self.channels.get(key) {
            // No receivers is fine: nobody is watching.
            let _ = tx.send(change);
        }
        obj
    }

    /// Subscribes to a collection. With `since`, also returns the recorded changes after
    /// that resourceVersion, or `Err(oldest available)` if history no longer reaches back.
    pub fn subscribe(&mut self, key: &StorageKey, since: Option<u64>) -> Result<Subscription, u64> {
        let replay = match since {
            Some(rv) if rv < self.compacted => return Err(self.compacted),
            Some(rv) => {
                // History is ordered by rv: skip to the first change after `rv`.
                let start = self.history.partition_point(|c| c.rv <= rv);
                self.history
                    .range(start..)
                    .filter(|c| &c.key == key)
                    .cloned()
                    .collect()
            }
            None => Vec::new(),
        };
        let live = self
            .channels
            .entry(key.clone())
            .or_insert_with(|| broadcast::channel(CHANNEL_CAPACITY).0)
            .subscribe();
        Ok(Subscription {
            replay,
            live,
            rv: self.rv,
        })
    }

    /// Forgets all history: any watch or continue token from a resourceVersion handed
    /// out before now gets 410. The counter moves on by one so that a fresh list's
    /// resourceVersion is newer than the compaction point and watches from it work.
    pub fn compact(&mut self) {
        self.history.clear();
        self.rv += 1;
        self.compacted = self.rv;
    }

    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    /// Drops a collection's live channel, which ends its watches (after a CRD is deleted).
    pub fn close_channel(&mut self, key: &StorageKey) {
        self.channels.remove(key);
    }

    /// Every collection key (for cascading a namespace deletion).
    pub fn collection_keys(&self) -> Vec<StorageKey> {
        self.collections.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn history_is_bounded_and_compaction_is_reported() {
        let mut st = State::new(2);
        let key: StorageKey = Arc::from("g/things");
        for i in 0..4 {
            st.commit(
                &key,
                EventKind::Added,
                json!({"metadata": {"name": format!("t{i}")}}),
            );
        }
        assert!(st.subscribe(&key, Some(1)).is_err());
        let sub = st.subscribe(&key, Some(2)).unwrap();
        assert_eq!(sub.replay.iter().map(|c| c.rv).collect::<Vec<_>>(), [3, 4]);
        assert_eq!(st.list(&key, None, None).count(), 4);
        assert_eq!(st.list(&key, Some(""), None).count(), 4);
        assert_eq!(st.list(&key, Some("x"), None).count(), 0);
    }

    #[test]
    fn a_change_is_serialised_once_per_event_type() {
        let mut st = State::new(4);
        let key: StorageKey = Arc::from("g/things");
        let mut sub = st.subscribe(&key, None).unwrap();
        st.commit(&key, EventKind::Added, json!({"metadata": {"name": "t"}}));
        let change = sub.live.try_recv().unwrap();
        let (a, b) = (change.line(EventKind::Added), change.line(EventKind::Added));
        assert_eq!(a.as_ptr(), b.as_ptr(), "watchers share one buffer");
        let line: Value = serde_json::from_slice(&a).unwrap();
        assert_eq!(line["type"], "ADDED");
        assert_eq!(line["object"], *change.object);
        assert!(a.ends_with(b"}\n"));
        let deleted: Value = serde_json::from_slice(&change.line(EventKind::Deleted)).unwrap();
        assert_eq!(deleted["type"], "DELETED");
    }
}
