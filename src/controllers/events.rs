//! Publishing events, also about objects whose names are too long for kube's `Recorder`.
//!
//! The `Recorder` names an event `<object name>.<hex nanoseconds>` (as client-go's
//! recorders do). For a name longer than 236 characters that exceeds the 253 a name may
//! have, the API server refuses the event, and the object would never get one. Such an
//! event is written here instead, exactly as the `Recorder` would write it but named
//! `<shortened name>.<hex nanoseconds>`. Every other object keeps the `Recorder`, and with
//! it the aggregation of repeats into a series.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::events::{Event, EventType, Reporter};

use super::context::Context;

/// The longest name an API object may have (a DNS-1123 subdomain).
const NAME_MAX: usize = 253;
/// The most the `Recorder` appends to the object's name: a dot and the hex form of an
/// i64 count of nanoseconds (16 digits at most).
const RECORDER_SUFFIX_MAX: usize = 1 + 16;

/// Publishes `ev` about `regarding` through the `Recorder`, or, when the `Recorder`'s
/// event name would be too long, creates the event under a shortened name.
pub(super) async fn publish(
    ctx: &Context,
    ev: &Event,
    regarding: &ObjectReference,
) -> Result<(), kube::Error> {
    let name = regarding.name.as_deref().unwrap_or_default();
    if name.len() + RECORDER_SUFFIX_MAX <= NAME_MAX {
        return ctx.recorder.publish(ev, regarding).await;
    }
    let event = long_name_event(&ctx.reporter, ev, regarding, Timestamp::now());
    // Cluster-scoped objects' events go to `default`, as the Recorder puts them.
    let namespace = regarding.namespace.as_deref().unwrap_or("default");
    Api::<K8sEvent>::namespaced(ctx.client.clone(), namespace)
        .create(&PostParams::default(), &event)
        .await
        .map(drop)
}

/// The event the `Recorder` would create at `now` (its `generate_event`), but for the name.
fn long_name_event(
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
        note: ev.note.clone(),
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
    fn the_long_name_event_is_what_the_recorder_writes_but_for_its_name() {
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
        let event = long_name_event(&reporter, &ev, &regarding, now);
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
}
