//! Publishing events, with repeats folded into a series as kube's `Recorder` does, but
//! at a constant cost per event.
//!
//! kube's `Recorder` keeps every event of the last six minutes and sweeps that whole cache
//! on each publish, under one lock: at fleet scale (two events per bind, thousands of
//! binds a minute) the sweep made each publish cost O(binds in the window), and the
//! cache held a full copy of each event. Here the series cache keeps a 64-bit hash of an
//! event's identity, its name and count, and expires entries in time order: O(1)
//! amortised per event, about a hundred bytes per entry.
//!
//! An event is named `<object name>.<hex nanoseconds>`, as client-go's recorders name
//! theirs; for an object name too long for that, the name is cut short so the event can
//! still be written. Its note is cut to the 1 KiB the API server takes (`event_note`:
//! every event is built by `new_event`, so none escapes the bound). Two events repeat each other (one series) only when everything a
//! reader sees of them is the same: type, reason, action, note, the object they regard
//! and the one they relate to.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::Request;
use kube::runtime::events::{Event, EventType, Reporter};
use kube::{Client, Resource};
use parking_lot::Mutex;

use crate::binding::bounded::event_note;

/// The longest name an API object may have (a DNS-1123 subdomain).
const NAME_MAX: usize = 253;
/// How long a repeat of an event still joins its series (kube's `Recorder` uses the same).
const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);

/// Writes events for the controllers; see the module docs.
pub struct EventRecorder {
    client: Client,
    reporter: Reporter,
    series: Mutex<SeriesCache>,
}

impl EventRecorder {
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            series: Mutex::default(),
        }
    }

    /// Publishes `ev` about `regarding`: a new event, or the next count of its series.
    pub async fn publish(
        &self,
        ev: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = identity(ev, regarding);
        // Cluster-scoped objects' events go to `default`, as kube's `Recorder` puts them.
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let events = Request::new(K8sEvent::url_path(&(), Some(namespace)));
        let repeat = self.series.lock().repeat(key, now);
        if let Some((name, count)) = repeat {
            let series = serde_json::json!({ "series": EventSeries {
                count,
                last_observed_time: MicroTime(now),
            }});
            let patch = events.patch(&name, &PatchParams::default(), &Patch::Merge(&series));
            // Gone (expired from the API server, or deleted): start a new series.
            if self.send(patch, "patch").await.is_ok() {
                return Ok(());
            }
        }
        let event = new_event(&self.reporter, ev, regarding, now);
        let name = event.metadata.name.clone().unwrap_or_default();
        let body = serde_json::to_vec(&event).map_err(kube::Error::SerdeError)?;
        self.send(events.create(&PostParams::default(), body), "create")
            .await?;
        self.series.lock().start(key, name, now);
        Ok(())
    }

    /// Sends a request about an event; the event it answers with is not parsed, as
    /// nothing reads it (an error status still is, into the error).
    async fn send(
        &self,
        request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
        operation: &'static str,
    ) -> Result<(), kube::Error> {
        let mut request = request.map_err(kube::Error::BuildRequest)?;
        request.extensions_mut().insert(operation);
        self.client.request_text(request).await?;
        Ok(())
    }
}

/// The identity of an event for its series: what a reader sees of it, hashed.
fn identity(ev: &Event, regarding: &ObjectReference) -> u64 {
    let mut h = DefaultHasher::new();
    let type_ = matches!(ev.type_, EventType::Warning);
    (type_, &ev.reason, &ev.action, &ev.note).hash(&mut h);
    for r in std::iter::once(regarding).chain(ev.secondary.as_ref()) {
        (&r.kind, &r.namespace, &r.name, &r.uid).hash(&mut h);
    }
    h.finish()
}

/// Recent events by identity, expired in the order they were last seen.
#[derive(Default)]
struct SeriesCache {
    entries: HashMap<u64, Series>,
    /// (last seen, identity), oldest first; an entry seen again is queued again, and a
    /// stale queue entry (older than its series' last sighting) expires nothing.
    expiry: VecDeque<(Timestamp, u64)>,
}

struct Series {
    name: String,
    count: i32,
    last: Timestamp,
}

impl SeriesCache {
    /// The series `key` continues at `now`, with its new count, if one is open.
    fn repeat(&mut self, key: u64, now: Timestamp) -> Option<(String, i32)> {
        self.expire(now);
        let series = self.entries.get_mut(&key)?;
        series.count += 1;
        series.last = now;
        self.expiry.push_back((now, key));
        Some((series.name.clone(), series.count))
    }

    /// Opens a series for `key` with the event just written as `name`.
    fn start(&mut self, key: u64, name: String, now: Timestamp) {
        let series = Series {
            name,
            count: 1,
            last: now,
        };
        self.entries.insert(key, series);
        self.expiry.push_back((now, key));
    }

    fn expire(&mut self, now: Timestamp) {
        while let Some(&(seen, key)) = self.expiry.front() {
            if seen + SERIES_WINDOW > now {
                break;
            }
            self.expiry.pop_front();
            if self.entries.get(&key).is_some_and(|s| s.last == seen) {
                self.entries.remove(&key);
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// A new event about `regarding` at `now`, as kube's `Recorder` writes one.
fn new_event(
    reporter: &Reporter,
    ev: &Event,
    regarding: &ObjectReference,
    now: Timestamp,
) -> K8sEvent {
    let object = regarding.name.as_deref().unwrap_or(&reporter.controller);
    K8sEvent {
        metadata: ObjectMeta {
            namespace: regarding.namespace.clone(),
            name: Some(event_name(object, &format!("{:x}", now.as_nanosecond()))),
            ..ObjectMeta::default()
        },
        action: Some(ev.action.clone()),
        reason: Some(ev.reason.clone()),
        note: ev.note.as_deref().map(|note| event_note(note).into_owned()),
        event_time: Some(MicroTime(now)),
        regarding: Some(regarding.clone()),
        related: ev.secondary.clone(),
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(
            reporter
                .instance
                .clone()
                .unwrap_or_else(|| reporter.controller.clone()),
        ),
        type_: Some(
            match ev.type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .into(),
        ),
        ..K8sEvent::default()
    }
}

/// `<object>.<suffix>`, with `object` cut short so that the whole fits in [`NAME_MAX`]
/// (as the API server's name generator cuts a `generateName` base). A cut that ends on
/// `-` or `.` is trimmed back further: each dot-separated label of a DNS subdomain must
/// end with a letter or digit.
fn event_name(object: &str, suffix: &str) -> String {
    let room = NAME_MAX.saturating_sub(suffix.len() + 1);
    let base = if object.len() <= room {
        object
    } else {
        // Object names are ASCII; the boundary search only keeps a bad name from panicking.
        let cut = (0..=room)
            .rev()
            .find(|&i| object.is_char_boundary(i))
            .unwrap_or(0);
        object[..cut].trim_end_matches(['-', '.'])
    };
    format!("{base}.{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The API server's rule for a name: a DNS-1123 subdomain of at most 253 characters.
    fn is_dns_subdomain(name: &str) -> bool {
        name.len() <= NAME_MAX
            && name.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    }

    const SUFFIX: &str = "18d2a3b4c5d6e7f8";
    /// The most a name's suffix adds: a dot and 16 hex digits.
    const RECORDER_SUFFIX_MAX: usize = 1 + 16;

    #[test]
    fn a_name_that_fits_is_kept_whole() {
        let object = "a".repeat(NAME_MAX - RECORDER_SUFFIX_MAX);
        let name = event_name(&object, SUFFIX);
        assert_eq!(name, format!("{object}.{SUFFIX}"));
        assert_eq!(name.len(), NAME_MAX);
    }

    #[test]
    fn a_long_name_is_cut_to_fit_and_stays_a_subdomain() {
        let object = format!("{}.{}", "a".repeat(200), "b".repeat(52));
        assert_eq!(object.len(), NAME_MAX);
        let name = event_name(&object, SUFFIX);
        assert_eq!(name.len(), NAME_MAX);
        assert!(name.starts_with(&object[..NAME_MAX - RECORDER_SUFFIX_MAX]));
        assert!(name.ends_with(&format!(".{SUFFIX}")));
        assert!(is_dns_subdomain(&name), "{name}");
    }

    #[test]
    fn a_cut_ending_on_a_dash_or_dot_is_trimmed() {
        let room = NAME_MAX - RECORDER_SUFFIX_MAX;
        for tail in ["-", ".", "-.-", "--"] {
            let head = "x".repeat(room - tail.len());
            let object = format!("{head}{tail}{}", "y".repeat(20));
            let name = event_name(&object, SUFFIX);
            assert_eq!(name, format!("{head}.{SUFFIX}"), "tail {tail:?}");
            assert!(is_dns_subdomain(&name), "{name}");
        }
    }

    #[test]
    fn a_long_name_event_is_what_the_recorder_writes_but_for_its_name() {
        let regarding = ObjectReference {
            kind: Some("ServerClaim".into()),
            namespace: Some("default".into()),
            name: Some("c".repeat(NAME_MAX)),
            uid: Some("u1".into()),
            ..ObjectReference::default()
        };
        let reporter = Reporter {
            controller: "server-binder".into(),
            instance: Some("host-1".into()),
        };
        let ev = Event {
            type_: EventType::Warning,
            reason: "Lost".into(),
            note: Some("gone".into()),
            action: "Bind".into(),
            secondary: None,
        };
        let now = Timestamp::now();
        let event = new_event(&reporter, &ev, &regarding, now);
        let name = event.metadata.name.clone().unwrap();
        assert!(name.len() <= NAME_MAX && is_dns_subdomain(&name), "{name}");
        assert!(name.ends_with(&format!(".{:x}", now.as_nanosecond())));
        assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(event.regarding.as_ref(), Some(&regarding));
        assert_eq!(event.type_.as_deref(), Some("Warning"));
        assert_eq!(event.reason.as_deref(), Some("Lost"));
        assert_eq!(event.action.as_deref(), Some("Bind"));
        assert_eq!(event.note.as_deref(), Some("gone"));
        assert_eq!(event.reporting_controller.as_deref(), Some("server-binder"));
        assert_eq!(event.reporting_instance.as_deref(), Some("host-1"));
        assert_eq!(event.event_time, Some(MicroTime(now)));
        assert!(event.series.is_none() && event.related.is_none());
    }

    #[test]
    fn a_note_over_the_api_limit_is_cut_where_the_event_is_built() {
        let regarding = ObjectReference {
            name: Some("c".into()),
            ..ObjectReference::default()
        };
        let reporter = Reporter {
            controller: "server-binder".into(),
            instance: None,
        };
        let ev = Event {
            type_: EventType::Normal,
            reason: "FailedBinding".into(),
            note: Some("é".repeat(20_000)),
            action: "Binding".into(),
            secondary: None,
        };
        let event = new_event(&reporter, &ev, &regarding, Timestamp::now());
        let note = event.note.expect("a note");
        assert!(note.len() <= 1024, "{} bytes", note.len());
        assert!(note.ends_with(" more characters)"), "{note}");
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    #[test]
    fn a_repeat_within_the_window_continues_the_series() {
        let mut cache = SeriesCache::default();
        assert_eq!(cache.repeat(7, at(0)), None);
        cache.start(7, "e1".into(), at(0));
        assert_eq!(cache.repeat(7, at(60)), Some(("e1".into(), 2)));
        // The window runs from the last sighting, not the first.
        assert_eq!(cache.repeat(7, at(60 + 359)), Some(("e1".into(), 3)));
        assert_eq!(cache.repeat(8, at(400)), None, "another identity");
    }

    #[test]
    fn a_series_expires_a_window_after_its_last_sighting() {
        let mut cache = SeriesCache::default();
        cache.start(1, "e1".into(), at(0));
        cache.start(2, "e2".into(), at(100));
        assert_eq!(
            cache.repeat(1, at(360)),
            None,
            "six minutes after: a new event"
        );
        assert_eq!(cache.len(), 1, "only e2 is left");
        assert_eq!(cache.repeat(2, at(459)), Some(("e2".into(), 2)));
        assert_eq!(cache.repeat(2, at(459 + 360)), None);
        assert_eq!(cache.len(), 0);
        assert!(
            cache.expiry.is_empty(),
            "stale queue entries are dropped too"
        );
    }

    #[test]
    fn events_that_read_differently_are_different_series() {
        let claim = |name: &str| ObjectReference {
            kind: Some("ServerClaim".into()),
            namespace: Some("team-a".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectReference::default()
        };
        let server = ObjectReference {
            kind: Some("Server".into()),
            name: Some("server-01".into()),
            ..ObjectReference::default()
        };
        let claimed = |by: &str| Event {
            type_: EventType::Normal,
            reason: "Claimed".into(),
            note: Some(format!("server is claimed by team-a/{by}")),
            action: "Binding".into(),
            secondary: Some(claim(by)),
        };
        let first = identity(&claimed("any-server"), &server);
        assert_eq!(first, identity(&claimed("any-server"), &server));
        assert_ne!(first, identity(&claimed("second-tenant"), &server));
        let mut unrelated = claimed("any-server");
        unrelated.secondary = None;
        assert_ne!(first, identity(&unrelated, &server));
    }
}
