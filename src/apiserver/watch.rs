//! Watch streams: newline-delimited `WatchEvent`s. A watch starts with synthetic ADDED
//! events for the current state (no resourceVersion, or "0"), or replays history after
//! a resourceVersion (410 Expired, as an ERROR event, when history no longer reaches
//! back), then follows live changes; BOOKMARKs when asked; selector transitions become
//! ADDED/DELETED as in the real watch cache.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::time::Instant;

use super::builtin::{to_view, view_is_identity};
use super::http::Format;
use super::meta::{labels_of, meta_mut, namespace_of};
use super::registry::ResourceDef;
use super::selectors::{FieldSelector, LabelSelector};
use super::server::Shared;
use super::status::ApiError;
use super::store::{Change, EventKind};
use super::table;

/// Most events in one write of a watch stream.
const MAX_CHUNK: usize = 256;

pub(crate) struct WatchParams {
    /// `None`: start with the current state.
    pub since: Option<u64>,
    pub timeout: Duration,
    pub bookmarks: bool,
    pub send_initial_events: bool,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub namespace: Option<String>,
    pub format: Format,
}

struct Filter {
    def: Arc<ResourceDef>,
    labels: LabelSelector,
    fields: FieldSelector,
    namespace: Option<String>,
    format: Format,
}

/// Does a stored object satisfy a request's namespace and selectors? (List and watch.)
pub(crate) fn selected(
    def: &ResourceDef,
    namespace: Option<&str>,
    labels: &LabelSelector,
    fields: &FieldSelector,
    stored: &Value,
) -> bool {
    if let Some(ns) = namespace
        && namespace_of(stored) != ns
    {
        return false;
    }
    if !labels.is_empty() {
        let set: Vec<(&str, &str)> = labels_of(stored).collect();
        let get = |k: &str| set.iter().find(|(lk, _)| *lk == k).map(|(_, v)| *v);
        if !labels.matches(get) {
            return false;
        }
    }
    fields.is_empty()
        || fields.matches(|f| super::builtin::field_value(def, stored, f).unwrap_or_default())
}

impl Filter {
    fn passes(&self, stored: &Value) -> bool {
        selected(
            &self.def,
            self.namespace.as_deref(),
            &self.labels,
            &self.fields,
            stored,
        )
    }

    fn line(&self, kind: &str, stored: &Value) -> Bytes {
        let object = match &self.format {
            Format::Json => to_view(&self.def, stored),
            Format::Metadata => table::partial_metadata(stored),
            Format::Table(include) => {
                let view = to_view(&self.def, stored);
                table::table(&self.def, [&view], json!({}), *include)
            }
        };
        let mut line = json!({"type": kind, "object": object}).to_string();
        line.push('\n');
        Bytes::from(line)
    }

    /// The event this watcher sees for a change, if any.
    fn render(&self, c: &Change) -> Option<Bytes> {
        let now = self.passes(&c.object);
        let before = c.old.as_deref().is_some_and(|o| self.passes(o));
        let kind = match c.kind {
            EventKind::Added if now => EventKind::Added,
            EventKind::Modified if now && before => EventKind::Modified,
            EventKind::Modified if now => EventKind::Added,
            EventKind::Modified if before => {
                // Stopped matching: a DELETED of the old state at the new resourceVersion.
                let mut old = c.old.as_deref().cloned().unwrap_or(Value::Null);
                meta_mut(&mut old).insert("resourceVersion".into(), json!(c.rv.to_string()));
                return Some(self.line("DELETED", &old));
            }
            EventKind::Deleted if now => EventKind::Deleted,
            _ => return None,
        };
        // The common case: plain JSON of the stored form, the line every such watcher
        // shares (serialised once per change, not once per watcher).
        if matches!(self.format, Format::Json) && view_is_identity(&self.def, &c.object) {
            return Some(c.line(kind));
        }
        Some(self.line(kind.as_str(), &c.object))
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj =
            json!({"kind": self.def.kind, "apiVersion": self.def.api_version(), "metadata": meta});
        let mut line = json!({"type": "BOOKMARK", "object": obj}).to_string();
        line.push('\n');
        Bytes::from(line)
    }
}

fn error_line(e: &ApiError) -> Bytes {
    let mut line = json!({"type": "ERROR", "object": e.to_status()}).to_string();
    line.push('\n');
    Bytes::from(line)
}

fn streaming(body: Body) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("cache-control", "no-cache, private")
        .body(body)
        .unwrap_or_default()
}

/// A watch's subscription as it is followed: the changes still to replay, the live
/// feed, this watcher's filter, and the newest resourceVersion it has passed.
struct Feed {
    filter: Filter,
    replay: Vec<Arc<Change>>,
    live: broadcast::Receiver<Arc<Change>>,
    /// The store's resourceVersion when the watch subscribed.
    subscribed_at: u64,
    last: u64,
}

/// How a watch follows the live feed once it has sent what it started with.
struct Pace {
    timeout: Duration,
    bookmarks: bool,
    bookmark_every: Duration,
    coalesce: Duration,
}

impl Feed {
    /// Takes changes already queued, until `out` holds `max` lines, rendering those
    /// this watcher sees into `out`. True if the feed ended: the collection went away,
    /// or this watcher fell so far behind that the channel dropped changes it needed
    /// (the client resumes from its last resourceVersion).
    fn drain(&mut self, out: &mut Vec<Bytes>, max: usize) -> bool {
        while out.len() < max {
            match self.live.try_recv() {
                Ok(c) => {
                    self.last = self.last.max(c.rv);
                    out.extend(self.filter.render(&c));
                }
                Err(TryRecvError::Empty) => return false,
                Err(_) => return true,
            }
        }
        false
    }

    /// A burst that started with `first`, as one chunk of at most `MAX_CHUNK` lines:
    /// one write per burst instead of one per event. While events keep coming (the
    /// last write was less than `coalesce` ago) it waits out the rest of that window
    /// once and takes what queued meanwhile; after a quiet spell it goes out at once.
    /// Also returns whether the feed ended.
    async fn burst(
        &mut self,
        first: &Change,
        last_write: Option<Instant>,
        coalesce: Duration,
    ) -> (Vec<Bytes>, bool) {
        self.last = self.last.max(first.rv);
        let mut chunk: Vec<Bytes> = self.filter.render(first).into_iter().collect();
        let mut held = false;
        loop {
            let ended = self.drain(&mut chunk, MAX_CHUNK);
            let hold = last_write.and_then(|t| t.checked_add(coalesce));
            match hold {
                Some(hold)
                    if !held && !ended && chunk.len() < MAX_CHUNK && Instant::now() < hold =>
                {
                    held = true;
                    tokio::time::sleep_until(hold).await;
                }
                _ => return (chunk, ended),
            }
        }
    }
}

/// Starts a watch on `def`'s collection.
pub(crate) fn watch(shared: Arc<Shared>, def: Arc<ResourceDef>, p: WatchParams) -> Response {
    let filter = Filter {
        def: def.clone(),
        labels: p.labels,
        fields: p.fields,
        namespace: p.namespace,
        format: p.format,
    };
    // Snapshot and subscription are taken under one lock: the live feed then carries
    // exactly the changes after the snapshot, with no gap and no duplicate.
    let (initial, sub) = {
        let mut st = shared.state.lock();
        let initial: Vec<Arc<Value>> = if p.since.is_none() || p.send_initial_events {
            st.list(&def.storage, filter.namespace.as_deref(), None)
                .filter(|o| filter.passes(o))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        let since = if p.send_initial_events { None } else { p.since };
        (initial, st.subscribe(&def.storage, since))
    };
    let sub = match sub {
        Ok(sub) => sub,
        Err(oldest) => {
            let e = ApiError::expired(format!(
                "too old resource version: {} ({oldest})",
                p.since.unwrap_or(0)
            ));
            return streaming(Body::from(error_line(&e)));
        }
    };
    let feed = Feed {
        filter,
        replay: sub.replay,
        live: sub.live,
        subscribed_at: sub.rv,
        last: sub.rv,
    };
    let pace = Pace {
        timeout: p.timeout,
        bookmarks: p.bookmarks,
        bookmark_every: shared.config.bookmark_interval,
        coalesce: shared.config.watch_coalesce,
    };
    let send_initial = p.send_initial_events;
    // Subscribed now, not when the live part starts: a bump from here on ends the watch.
    let epoch = shared.watch_epoch.subscribe();
    let stream = async_stream::stream! {
        let mut feed = feed;
        for obj in &initial {
            yield Ok::<Bytes, Infallible>(feed.filter.line("ADDED", obj));
        }
        if send_initial {
            yield Ok(feed.filter.bookmark(feed.subscribed_at, true));
        }
        for change in std::mem::take(&mut feed.replay) {
            feed.last = feed.last.max(change.rv);
            if let Some(line) = feed.filter.render(&change) {
                yield Ok(line);
            }
        }
        for await line in follow(shared, feed, pace, epoch) {
            yield line;
        }
    };
    streaming(Body::from_stream(stream))
}

/// The live part of a watch: changes as they come, bookmarks when asked, until the
/// timeout, the server's shutdown (or a watch epoch bump), or the feed ends.
fn follow(
    shared: Arc<Shared>,
    mut feed: Feed,
    pace: Pace,
    mut epoch: tokio::sync::watch::Receiver<u64>,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> {
    async_stream::stream! {
        let shutdown = shared.shutdown.clone();
        let deadline = tokio::time::sleep(pace.timeout);
        tokio::pin!(deadline);
        let every = pace.bookmark_every;
        let mut tick = tokio::time::interval_at(Instant::now() + every, every);
        // Made once, not once per event: each of these registers with a notifier that
        // every watch shares, and re-registering per event made them contended.
        let stop = async {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = epoch.changed() => {}
            }
        };
        tokio::pin!(stop);
        let mut last_write: Option<Instant> = None;
        loop {
            tokio::select! {
                _ = &mut stop => break,
                _ = &mut deadline => break,
                _ = tick.tick(), if pace.bookmarks => {
                    // Everything up to `now` is already queued for us: drain it, then
                    // the bookmark may claim `now`.
                    let now = shared.state.lock().rv;
                    let mut out = Vec::new();
                    let ended = feed.drain(&mut out, usize::MAX);
                    for line in out {
                        yield Ok(line);
                    }
                    if ended {
                        break;
                    }
                    feed.last = feed.last.max(now);
                    yield Ok(feed.filter.bookmark(feed.last, false));
                }
                msg = feed.live.recv() => match msg {
                    Ok(c) => {
                        let (mut chunk, ended) = feed.burst(&c, last_write, pace.coalesce).await;
                        last_write = Some(Instant::now());
                        match chunk.len() {
                            0 => {}
                            1 => yield Ok(chunk.swap_remove(0)),
                            _ => yield Ok(Bytes::from(chunk.concat())),
                        }
                        if ended {
                            break;
                        }
                    }
                    // Too slow (the client resumes from its last resourceVersion) or the
                    // collection went away (its CRD was deleted).
                    Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => break,
                },
            }
        }
    }
}
