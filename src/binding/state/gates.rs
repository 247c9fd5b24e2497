//! Release gates: a server released under `Recycle` is cleaned before the next tenant
//! gets it (docs/binding.md, "Release gates"). The release and the start of cleaning are
//! one write: the server controller clears the ref, sets the `metal.binder.dev/cleaning`
//! annotation to the release's id (the generation that write produces) and records the
//! gates in force in `metal.binder.dev/cleaning-gates`. A cleaner passes a gate by
//! setting the condition of the gate's name to "True" with `observedGeneration` equal to
//! the release's id it read when it started, so a pass for another release never
//! counts. While the annotation is there the server is not claimable; the write that
//! removes it (once every gate passed) makes it Available.

use std::fmt;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use serde::{Deserialize, Serialize};

use crate::api::CachedServer;
use crate::api::names::{
    ANNOTATION_BOUND_CLASS, ANNOTATION_CLEANING, ANNOTATION_CLEANING_GATES, CONDITION_CLEANING,
};

use crate::binding::state::status::OWN_CONDITIONS;

/// The gates a release of `server` must pass, as the release records them (the one
/// precedence, docs/binding.md "Release gates"): the server's own `spec.releaseGates`
/// and the gates of the class its claim bound under (`class`, [`class_gates`]), each
/// once; where neither names any (both absent), `default`, the controller's
/// `--release-gates`. An empty list (`[]`) names none on purpose: it adds no gate, and
/// keeps the default away.
pub fn release_gates(
    server: &CachedServer,
    class: Option<&[String]>,
    default: &[String],
) -> Vec<String> {
    let own = server.spec.release_gates.as_ref();
    if own.is_none() && class.is_none() {
        return default.to_vec();
    }
    let own = own.into_iter().flatten().map(|g| g.name.clone());
    let mut gates: Vec<String> = Vec::new();
    for gate in own.chain(class.into_iter().flatten().cloned()) {
        if !gates.contains(&gate) {
            gates.push(gate);
        }
    }
    gates
}

/// What a server records of the class its claim bound under
/// ([`ANNOTATION_BOUND_CLASS`]): the class, and the release gates it named then
/// (`None`: it named none, so the default applies unless the server names its own).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BoundClass {
    pub class: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_gates: Option<Vec<String>>,
}

impl BoundClass {
    /// The record's annotation value.
    pub fn annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The class record on `server`, if it has one that parses. A record that does not
/// parse (a hand edit) is no record: the release falls back to the classes that take
/// the server in now ([`class_gates`]).
pub fn bound_class(server: &CachedServer) -> Option<BoundClass> {
    let raw = server.annotations().get(ANNOTATION_BOUND_CLASS)?;
    serde_json::from_str(raw).ok()
}

/// [`class_gates`], or a model check's mutant.
pub type ClassGatesRule = fn(&CachedServer, Option<Vec<String>>) -> Option<Vec<String>>;

/// The class gates a release of `server` waits for: those its record names (the class
/// its claim bound under, as it was then), or, for a server bound without a record (by
/// a version before the record, or a claim without a class), `now`: the gates of the
/// classes that take it in now (`ClassCatalog::release_gates_of`). `None`: no class
/// names any.
pub fn class_gates(server: &CachedServer, now: Option<Vec<String>>) -> Option<Vec<String>> {
    match bound_class(server) {
        Some(record) => record.release_gates,
        None => now,
    }
}

/// What a server records of the release it is being cleaned after: its annotations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReleaseRecord<'a> {
    /// The `cleaning` annotation as written.
    pub raw: &'a str,
    /// The release's id, which a pass copies into `observedGeneration`: `None` when the
    /// value is not a whole number of at least 1, which no cleaner can copy.
    pub release: Option<i64>,
    /// The gates in force at the release; `None` when not recorded (a hand edit, or a
    /// server restored from an object written before the record existed).
    pub gates: Option<Vec<&'a str>>,
}

/// The release `server` is being cleaned after, if it is.
pub fn release_record(server: &CachedServer) -> Option<ReleaseRecord<'_>> {
    let annotations = server.annotations();
    let raw = annotations.get(ANNOTATION_CLEANING)?.as_str();
    let release = raw.trim().parse().ok().filter(|id: &i64| *id >= 1);
    let gates = annotations.get(ANNOTATION_CLEANING_GATES).map(|g| {
        g.split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .collect()
    });
    Some(ReleaseRecord {
        raw,
        release,
        gates,
    })
}

/// Whether `server` is being cleaned (not claimable until its gates pass).
pub fn is_cleaning(server: &CachedServer) -> bool {
    release_record(server).is_some()
}

/// How long the server's cleaning took, by `now`: since its `Cleaning` condition turned
/// True (for the cleaning duration metric, when the cleaning ends).
pub fn cleaning_took(server: &CachedServer, now: Timestamp) -> Option<Duration> {
    let began = server
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_CLEANING && c.status == "True")?
        .last_transition_time
        .0;
    Duration::try_from(now.duration_since(began)).ok()
}

/// The id a release written over `server` as read gets: the generation the write
/// produces (it changes the spec, so the API server adds one).
pub fn release_generation(server: &CachedServer) -> i64 {
    server.meta().generation.unwrap_or(0) + 1
}

/// The annotation value recording `gates`.
pub fn gates_annotation(gates: &[String]) -> String {
    gates.join(",")
}

/// The gates this cleaning waits for: those recorded at the release, and any added to
/// `spec.releaseGates` since (an admin asking for more). Removing a gate from the spec
/// does not drop it from a cleaning in progress, and the controller's default gates are
/// never read here: they were recorded at the release.
pub fn gates_in_force<'a>(server: &'a CachedServer, record: &ReleaseRecord<'a>) -> Vec<&'a str> {
    let mut gates: Vec<&str> = record.gates.clone().unwrap_or_default();
    for gate in server.spec.release_gates.iter().flatten() {
        if !gates.contains(&gate.name.as_str()) {
            gates.push(&gate.name);
        }
    }
    gates
}

/// Whether a cleaner passed `gate` for `release`: the condition of the gate's name is
/// "True" with `observedGeneration` equal to the release's id. A condition the
/// controllers write never counts, whatever a gate is called: else a gate named
/// `Cleaning` would pass itself.
pub fn passed(server: &CachedServer, gate: &str, release: i64) -> bool {
    !OWN_CONDITIONS.contains(&gate)
        && gate_conditions(server, gate).any(|c| c.observed_generation == Some(release))
}

fn gate_conditions<'a>(
    server: &'a CachedServer,
    gate: &'a str,
) -> impl Iterator<Item = &'a Condition> {
    let conditions = server.status.iter().flat_map(|s| s.conditions.iter());
    conditions.filter(move |c| c.type_ == gate && c.status == "True")
}

/// The gates of this cleaning not passed yet (empty: clean), and what a cleaner must
/// hear about each.
pub fn pending_gates(
    server: &CachedServer,
    record: &ReleaseRecord<'_>,
    release: i64,
) -> Vec<Pending> {
    gates_in_force(server, record)
        .into_iter()
        .filter(|g| !passed(server, g, release))
        .map(|gate| Pending {
            gate: gate.to_string(),
            note: pending_note(server, gate, release),
        })
        .collect()
}

fn pending_note(server: &CachedServer, gate: &str, release: i64) -> Option<PendingNote> {
    if OWN_CONDITIONS.contains(&gate) {
        return Some(PendingNote::ControllerCondition);
    }
    let other = gate_conditions(server, gate).find_map(|c| c.observed_generation);
    other
        .filter(|og| *og != release)
        .map(PendingNote::PassForOtherRelease)
}

/// A gate not passed for this release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub gate: String,
    pub note: Option<PendingNote>,
}

impl Pending {
    /// A gate with nothing more to say about it (none of its passes is there yet).
    pub fn named(gate: &str) -> Self {
        Self {
            gate: gate.to_string(),
            note: None,
        }
    }
}

/// Why a pending gate deserves a word beyond its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PendingNote {
    /// A pass is there, but for another release (this `observedGeneration`).
    PassForOtherRelease(i64),
    /// The gate is named after a condition the controllers write: it can never pass.
    ControllerCondition,
}

impl fmt::Display for Pending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.note {
            None => write!(f, "{}", self.gate),
            Some(PendingNote::PassForOtherRelease(og)) => {
                write!(f, "{} (its pass is for release {og})", self.gate)
            }
            Some(PendingNote::ControllerCondition) => write!(
                f,
                "{} (can never pass: the controllers write that condition; remove it from spec.releaseGates and {ANNOTATION_CLEANING_GATES})",
                self.gate
            ),
        }
    }
}

/// The condition a cleaner writes to pass `gate` for `release`, the value of the
/// `cleaning` annotation it read when it started cleaning. The tests, the model check
/// and the example cleaner (manifests/examples/cleaner.sh) write this.
pub fn pass_condition(gate: &str, release: i64, now: &Time) -> Condition {
    Condition {
        type_: gate.to_string(),
        status: "True".into(),
        observed_generation: Some(release),
        reason: "Passed".into(),
        message: "passed by the cleaner".into(),
        last_transition_time: now.clone(),
    }
}

/// Why a name cannot be a release gate.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GateNameError {
    #[error(
        "release gate {0:?} has no domain prefix: name it like example.com/disk-wiped (a condition type only its cleaner writes)"
    )]
    NoDomain(String),
    #[error(
        "release gate {0:?} is not a qualified name: a DNS subdomain with a dot, a slash, then up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, like example.com/disk-wiped"
    )]
    Malformed(String),
    #[error(
        "release gate {0:?} is in metal.binder.dev, whose conditions the controllers write: a gate named after one would pass itself; use your cleaner's own domain, like example.com/disk-wiped"
    )]
    BindersOwn(String),
}

/// The rule a release gate's name follows, the same as the CRD's CEL rule
/// ([`crate::api::GATE_NAME_RULE`]): a qualified name whose prefix is a DNS subdomain
/// with at least one dot, outside metal.binder.dev. So a gate is never a condition the
/// controllers write (`Bound`, `Cleaning`).
pub fn check_gate_name(name: &str) -> Result<(), GateNameError> {
    let Some((prefix, local)) = name.split_once('/') else {
        return Err(GateNameError::NoDomain(name.to_string()));
    };
    let label = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let labels: Vec<&str> = prefix.split('.').collect();
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    let local_ok = (1..=63).contains(&local.len())
        && local
            .bytes()
            .all(|b| alnum(b) || matches!(b, b'-' | b'_' | b'.'))
        && local.bytes().next().is_some_and(alnum)
        && local.bytes().last().is_some_and(alnum);
    if labels.len() < 2 || !labels.iter().all(|l| label(l)) || !local_ok || name.len() > 316 {
        return Err(GateNameError::Malformed(name.to_string()));
    }
    if crate::api::names::in_our_domain(prefix) {
        return Err(GateNameError::BindersOwn(name.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::api::{ReleaseGate, ServerSpec, ServerStatus};

    fn server(
        gates: Option<&[&str]>,
        record: Option<(&str, &str)>,
        passes: &[(&str, i64)],
    ) -> CachedServer {
        let mut s = CachedServer::new("s1", ServerSpec::default());
        s.spec.release_gates = gates.map(|g| {
            g.iter()
                .map(|n| ReleaseGate {
                    name: n.to_string(),
                })
                .collect()
        });
        if let Some((release, gates)) = record {
            *s.annotations_mut() = [
                (ANNOTATION_CLEANING.into(), release.into()),
                (ANNOTATION_CLEANING_GATES.into(), gates.into()),
            ]
            .into_iter()
            .collect();
        }
        s.status = Some(ServerStatus {
            conditions: passes
                .iter()
                .map(|(gate, release)| pass_condition(gate, *release, &Time(Timestamp::UNIX_EPOCH)))
                .collect(),
            ..ServerStatus::default()
        });
        s
    }

    fn pending(s: &CachedServer) -> Vec<String> {
        let record = release_record(s).expect("cleaning");
        let release = record.release.expect("a usable release");
        pending_gates(s, &record, release)
            .into_iter()
            .map(|p| p.to_string())
            .collect()
    }

    /// The precedence, as docs/binding.md's table writes it: the server's own and its
    /// bind's class's gates, each once; the default only where neither names any; `[]`
    /// names none on purpose.
    #[test]
    fn the_gates_of_a_release_follow_the_precedence_table() {
        let default = ["d.io/default".to_string()];
        let class = |g: &[&str]| Some(g.iter().map(|g| g.to_string()).collect::<Vec<_>>());
        type Row<'a> = (Option<&'a [&'a str]>, Option<Vec<String>>, &'a [&'a str]);
        let rows: [Row<'_>; 8] = [
            (None, None, &["d.io/default"]),
            (Some(&[]), None, &[]),
            (None, class(&[]), &[]),
            (Some(&[]), class(&[]), &[]),
            (Some(&["s.io/own"]), None, &["s.io/own"]),
            (None, class(&["c.io/wipe"]), &["c.io/wipe"]),
            (Some(&[]), class(&["c.io/wipe"]), &["c.io/wipe"]),
            (
                Some(&["s.io/own", "c.io/wipe"]),
                class(&["c.io/wipe", "c.io/power"]),
                &["s.io/own", "c.io/wipe", "c.io/power"],
            ),
        ];
        for (own, class, want) in rows {
            let s = server(own, None, &[]);
            assert_eq!(
                release_gates(&s, class.as_deref(), &default),
                want,
                "server {own:?}, class {class:?}"
            );
        }
    }

    /// The class a bind recorded is what a release reads, whatever the classes say now;
    /// a server bound without a record reads the classes that take it in now.
    #[test]
    fn a_release_reads_the_class_of_its_bind() {
        let now = Some(vec!["now.io/gate".to_string()]);
        let unrecorded = server(None, None, &[]);
        assert_eq!(class_gates(&unrecorded, now.clone()), now);
        for (named, want) in [
            (
                Some(vec!["c.io/wipe".to_string()]),
                Some(vec!["c.io/wipe".to_string()]),
            ),
            (None, None),
        ] {
            let record = BoundClass {
                class: "gpu".into(),
                release_gates: named,
            };
            let mut recorded = unrecorded.clone();
            recorded
                .annotations_mut()
                .insert(ANNOTATION_BOUND_CLASS.into(), record.annotation());
            assert_eq!(bound_class(&recorded), Some(record));
            assert_eq!(class_gates(&recorded, now.clone()), want);
        }
        assert_eq!(
            BoundClass {
                class: "gpu".into(),
                release_gates: Some(vec!["c.io/wipe".into()]),
            }
            .annotation(),
            r#"{"class":"gpu","releaseGates":["c.io/wipe"]}"#
        );
    }

    #[test]
    fn only_a_pass_naming_this_release_counts() {
        let record = Some(("7", "x.io/wipe,x.io/power-off"));
        let stale = server(None, record, &[("x.io/wipe", 6), ("x.io/power-off", 7)]);
        assert_eq!(pending(&stale), ["x.io/wipe (its pass is for release 6)"]);
        let later = server(None, record, &[("x.io/wipe", 9), ("x.io/power-off", 7)]);
        assert_eq!(pending(&later), ["x.io/wipe (its pass is for release 9)"]);
        let clean = server(None, record, &[("x.io/wipe", 7), ("x.io/power-off", 7)]);
        assert!(pending(&clean).is_empty());
        assert!(release_record(&server(None, None, &[])).is_none());
    }

    #[test]
    fn the_recorded_gates_hold_and_a_gate_added_since_is_waited_for() {
        let record = Some(("3", "x.io/wipe"));
        let dropped = server(Some(&[]), record, &[]);
        assert_eq!(pending(&dropped), ["x.io/wipe"]);
        let added = server(
            Some(&["x.io/wipe", "x.io/burn-in"]),
            record,
            &[("x.io/wipe", 3)],
        );
        assert_eq!(pending(&added), ["x.io/burn-in"]);
    }

    #[test]
    fn a_gate_named_after_a_controller_condition_never_passes() {
        let own = server(None, Some(("4", "Cleaning")), &[("Cleaning", 4)]);
        let pending = pending(&own);
        assert_eq!(pending.len(), 1);
        assert!(pending[0].contains("can never pass"), "{pending:?}");
    }

    #[test]
    fn a_record_no_cleaner_can_copy_has_no_release() {
        for raw in ["soon", "0", "-3", ""] {
            let s = server(None, Some((raw, "x.io/wipe")), &[]);
            assert_eq!(release_record(&s).unwrap().release, None, "{raw:?}");
        }
        let mut legacy = server(None, Some(("5", "")), &[]);
        legacy.annotations_mut().remove(ANNOTATION_CLEANING_GATES);
        assert_eq!(release_record(&legacy).unwrap().gates, None);
    }

    #[test]
    fn gate_names_are_qualified_names_outside_the_binder_s_domain() {
        for good in [
            "example.com/disk-wiped",
            "a.b/c",
            "wipe.example.com/Power_Off.1",
        ] {
            assert_eq!(check_gate_name(good), Ok(()), "{good}");
        }
        for bad in [
            "Cleaning",
            "Bound",
            "disk-wiped",
            "example/wiped",
            "Example.com/x",
        ] {
            assert!(check_gate_name(bad).is_err(), "{bad}");
        }
        for bad in [
            "example.com/",
            "example.com/-x",
            "a..b/x",
            "-a.b/x",
            "a.b/x/y",
        ] {
            assert!(check_gate_name(bad).is_err(), "{bad}");
        }
        for own in ["metal.binder.dev/wiped", "gates.metal.binder.dev/wiped"] {
            assert!(
                matches!(check_gate_name(own), Err(GateNameError::BindersOwn(_))),
                "{own}"
            );
        }
        assert!(check_gate_name(&format!("a.b/{}", "x".repeat(64))).is_err());
    }
}
