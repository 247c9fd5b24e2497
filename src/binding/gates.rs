//! Release gates: a server released under `Recycle` is cleaned before the next tenant
//! gets it (docs/binding.md, "Release gates"). The release and the start of cleaning are
//! one write: the server controller clears the ref and sets the
//! `metal.binder.dev/cleaning` annotation to the generation that write produces. A
//! cleaner passes a gate by setting the condition of the gate's name to "True" with an
//! `observedGeneration` at least that generation, so a pass recorded for an earlier
//! release never counts. While the annotation is there the server is not claimable; the
//! write that removes it (once every gate passed) makes it Available.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::Server;
use crate::api::names::ANNOTATION_CLEANING;

/// The gates a release of `server` must pass: its own `spec.releaseGates`, or when it
/// names none, `default` (the controller's `--release-gates`). An empty list is no gates.
pub fn release_gates<'a>(server: &'a Server, default: &'a [String]) -> Vec<&'a str> {
    match &server.spec.release_gates {
        Some(gates) => gates.iter().map(|g| g.name.as_str()).collect(),
        None => default.iter().map(String::as_str).collect(),
    }
}

/// The generation of the release `server` is being cleaned after, if it is. A value
/// that is not a number (a hand edit) counts as a release no pass can reach: the server
/// stays out of use until someone fixes or removes the annotation.
pub fn cleaning_after(server: &Server) -> Option<i64> {
    let value = server
        .metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_CLEANING)?;
    Some(value.trim().parse().unwrap_or(i64::MAX))
}

/// The annotation value a release written over `server` as read sets: the generation
/// the write produces (it changes the spec, so the API server adds one).
pub fn release_generation(server: &Server) -> i64 {
    server.metadata.generation.unwrap_or(0) + 1
}

/// Whether a cleaner passed `gate` for the release at `generation`.
pub fn passed(server: &Server, gate: &str, generation: i64) -> bool {
    server.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == gate && c.status == "True" && c.observed_generation >= Some(generation)
        })
    })
}

/// The gates of the release `server` is being cleaned after that are not passed yet
/// (empty: clean). `None`: the server is not being cleaned.
pub fn pending_gates(server: &Server, default: &[String]) -> Option<Vec<String>> {
    let generation = cleaning_after(server)?;
    Some(
        release_gates(server, default)
            .into_iter()
            .filter(|g| !passed(server, g, generation))
            .map(str::to_string)
            .collect(),
    )
}

/// The condition a cleaner writes to pass `gate` on `server` as it read it: the gate's
/// type, "True", and the generation it read as `observedGeneration`. The tests, the
/// model check and the example cleaner (manifests/examples/cleaner.sh) write this.
pub fn pass_condition(server: &Server, gate: &str, now: &Time) -> Condition {
    Condition {
        type_: gate.to_string(),
        status: "True".into(),
        observed_generation: server.metadata.generation,
        reason: "Passed".into(),
        message: "passed by the cleaner".into(),
        last_transition_time: now.clone(),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::api::{ReleaseGate, ServerSpec, ServerStatus};

    fn server(gates: Option<&[&str]>, cleaning: Option<&str>, passes: &[(&str, i64)]) -> Server {
        let mut s = Server::new("s1", ServerSpec::default());
        s.spec.release_gates = gates.map(|g| {
            g.iter()
                .map(|n| ReleaseGate {
                    name: n.to_string(),
                })
                .collect()
        });
        if let Some(v) = cleaning {
            s.metadata.annotations = Some([(ANNOTATION_CLEANING.into(), v.into())].into());
        }
        s.status = Some(ServerStatus {
            conditions: passes
                .iter()
                .map(|(gate, generation)| Condition {
                    type_: gate.to_string(),
                    status: "True".into(),
                    observed_generation: Some(*generation),
                    reason: "Done".into(),
                    message: String::new(),
                    last_transition_time: Time(Timestamp::UNIX_EPOCH),
                })
                .collect(),
            ..ServerStatus::default()
        });
        s
    }

    #[test]
    fn the_server_s_own_gates_win_over_the_default_and_empty_means_none() {
        let default = vec!["wipe".to_string()];
        assert_eq!(release_gates(&server(None, None, &[]), &default), ["wipe"]);
        let own = server(Some(&["power-off"]), None, &[]);
        assert_eq!(release_gates(&own, &default), ["power-off"]);
        assert!(release_gates(&server(Some(&[]), None, &[]), &default).is_empty());
    }

    #[test]
    fn only_a_pass_for_this_release_counts() {
        let gates = Some(&["wipe", "power-off"][..]);
        let stale = server(gates, Some("7"), &[("wipe", 6), ("power-off", 7)]);
        assert_eq!(pending_gates(&stale, &[]), Some(vec!["wipe".to_string()]));
        let later = server(gates, Some("7"), &[("wipe", 9), ("power-off", 7)]);
        assert_eq!(pending_gates(&later, &[]), Some(vec![]));
        assert_eq!(pending_gates(&server(gates, None, &[]), &[]), None);
    }

    #[test]
    fn a_mangled_annotation_is_never_passed() {
        let s = server(Some(&["wipe"]), Some("soon"), &[("wipe", 1_000)]);
        assert_eq!(pending_gates(&s, &[]), Some(vec!["wipe".to_string()]));
    }
}
