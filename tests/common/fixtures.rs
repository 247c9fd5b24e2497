//! The one builder of `Server` and `ServerClaim` fixtures, for the pure tests
//! (tests/binding, through `binding::support`) and the end-to-end tests
//! (tests/controllers, through `controllers::stage`, which creates the objects through
//! the API).
//!
//! [`server`] and [`claim`] build the objects as stored (uid, generation,
//! resourceVersion, creation time); [`cached_server`] and [`cached_claim`] build the same as
//! the binder caches them ([`CachedServer`], [`CachedClaim`]), for the pure tests. The
//! builders, for both, speak one vocabulary, after docs/binding.md's wording:
//!
//! | builder | on | means |
//! |---|---|---|
//! | `names(server)` | claim | a user-written `serverRef` (no `pre-bound`) |
//! | `chose(server)` | claim | a controller-chosen `serverRef`: `names` plus `pre_bound()` |
//! | `pre_bound()` | claim | the `pre-bound` annotation alone |
//! | `selects(&[(key, value)])`, `expression(…)` | claim | `serverSelector` |
//! | `tolerates(key)` | claim | a toleration of a `NoBind` taint |
//! | `bind_completed()` | claim | the `bind-completed` annotation |
//! | `uid(uid)`, `created(seconds)` | claim | its uid, its creation time |
//! | `labelled(&[(key, value)])` | server | labels |
//! | `taint(key)`, `unclaimable()`, `retain()` | server | a `NoBind` taint, the cordon, `reclaimPolicy: Retain` |
//! | `gates(&[name])` | server | `spec.releaseGates` |
//! | `deleting()` | server | a deletion timestamp (pure tests only: the API sets it) |
//! | `finalizer()` | server | the `server-protection` finalizer |
//! | `foreign_finalizer()` | server | [`FOREIGN_FINALIZER`], someone else's |
//! | `by_controller()` | server | the `bound-by-controller` annotation alone |
//! | `reserved_for(claim)` | server | a user's reservation by name (no uid) |
//! | `uid_ref(uid)` | server | the uid of the ref as written (`""` included: a reservation as Go tools write it) |
//! | `uid_filled_for(claim, uid)` | server | a user-made ref with the uid, as `FillUid` leaves it: uid, finalizer |
//! | `claimed_for(claim, uid)` | server | the ref as `ClaimForWinner` writes it: `uid_filled_for` plus `by_controller()`; no status |
//!
//! The status has two builders, for the two kinds of test:
//!
//! | builder | on | means |
//! |---|---|---|
//! | `phase(phase)` | server | `status.phase` alone (pure tests) |
//! | `phase(phase)` | claim | `status.phase`; a `Bound` or `Lost` one also `boundTime` and the record of its server (pure tests) |
//! | `records(server)`, `no_record()` | claim | the status's record of a bind, or none |
//! | `cleaning(release)`, `passed(gate, release)` | server | a release being cleaned, a cleaner's pass |
//! | `controller_status(phase)` | server | the whole status as the server controller writes it, with the `Bound` condition, at the time of the call (objects staged through the API) |
//! | `controller_status(phase, reason)` | claim | the same as the claim controller writes it, with this `Bound` reason |
//!
//! and three shorthands for objects staged through the API: `bound_to(&stored_claim)`,
//! `bound_to_deleted(claim)` (servers) and `bound(server)` (claims).
//!
//! The predicates on stored objects (tests/controllers/stage.rs) say the same:
//! `has_finalizer`, `has_annotation`, `server_ref`, `claim_ref`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use server_binder::api::names::*;
use server_binder::api::*;

use crate::common::names::NS;

/// The uid of a claim incarnation that no longer exists.
pub const DELETED_UID: &str = "uid-of-a-deleted-claim";

/// The finalizer [`ServerExt::foreign_finalizer`] adds.
pub const FOREIGN_FINALIZER: &str = "provisioner.example.com/wipe";

/// A fixed moment, `seconds` after the fixtures' epoch.
pub fn t(seconds: i64) -> Time {
    Time(Timestamp::from_second(1_700_000_000 + seconds).expect("valid timestamp"))
}

pub fn now() -> Time {
    t(1_000)
}

fn yes() -> String {
    ANNOTATION_YES.to_string()
}

/// A free, untainted, claimable server with no labels.
pub fn server(name: &str) -> Server {
    Server {
        metadata: ObjectMeta {
            name: Some(name.into()),
            uid: Some(format!("uid-server-{name}")),
            generation: Some(1),
            resource_version: Some("1".into()),
            creation_timestamp: Some(t(0)),
            ..ObjectMeta::default()
        },
        spec: ServerSpec::default(),
        status: None,
    }
}

/// A claim in [`NS`] with uid `uid-<name>`, no selector, nothing chosen.
pub fn claim(name: &str) -> ServerClaim {
    ServerClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            uid: Some(format!("uid-{name}")),
            generation: Some(1),
            resource_version: Some("1".into()),
            creation_timestamp: Some(t(10)),
            ..ObjectMeta::default()
        },
        spec: ServerClaimSpec::default(),
        status: None,
    }
}

/// The server builders (see the module's table).
pub trait ServerExt: Sized {
    /// The server's labels are exactly these.
    fn labelled(self, pairs: &[(&str, &str)]) -> Self;
    fn taint(self, key: &str) -> Self;
    fn unclaimable(self) -> Self;
    fn deleting(self) -> Self;
    fn retain(self) -> Self;
    /// `status.phase`, and nothing else of the status.
    fn phase(self, phase: ServerPhase) -> Self;
    /// A user's reservation by name (no uid, no controller annotation).
    fn reserved_for(self, claim: &str) -> Self;
    /// The ref as the server controller's `ClaimForWinner` writes it: this claim's name
    /// and uid, `bound-by-controller`, the finalizer (the status is the caller's).
    fn claimed_for(self, claim: &str, uid: &str) -> Self;
    /// A user-made ref with a uid, as `FillUid` leaves it: the uid and the finalizer, no
    /// `bound-by-controller`.
    fn uid_filled_for(self, claim: &str, uid: &str) -> Self;
    /// The `bound-by-controller` annotation.
    fn by_controller(self) -> Self;
    /// The `server-protection` finalizer.
    fn finalizer(self) -> Self;
    /// A finalizer of someone else's (a provisioner's), which keeps a deleted server
    /// around whatever the controllers do.
    fn foreign_finalizer(self) -> Self;
    /// Sets the uid of the server's ref as written (`""` included).
    fn uid_ref(self, uid: &str) -> Self;
    /// `spec.releaseGates` with these names.
    fn gates(self, names: &[&str]) -> Self;
    /// Being cleaned after the release `release` (the `cleaning` annotation), with the
    /// server's own `spec.releaseGates` recorded as the gates in force.
    fn cleaning(self, release: i64) -> Self;
    /// A cleaner's pass of `gate` for the release `release`.
    fn passed(self, gate: &str, release: i64) -> Self;
    /// The status as the server controller writes it for this phase: the claim its ref
    /// names, `observedGeneration` 1 and the `Bound` condition (reason: the phase), at
    /// the time of the call. For a server staged through the API.
    fn controller_status(self, phase: ServerPhase) -> Self;
    /// Bound to a stored `claim`, as the server controller leaves it: `claimed_for` its
    /// name and uid, with the status of phase Bound (unlike `claimed_for`).
    fn bound_to(self, claim: &impl kube::Resource) -> Self;
    /// Bound, as the server controller writes it, to a claim `claim` that has since been
    /// deleted (its uid, [`DELETED_UID`], is gone).
    fn bound_to_deleted(self, claim: &str) -> Self;
}

impl ServerExt for Server {
    fn gates(mut self, names: &[&str]) -> Self {
        let gates = names.iter().map(|n| ReleaseGate {
            name: n.to_string(),
        });
        self.spec.release_gates = Some(gates.collect());
        self
    }
    fn cleaning(mut self, release: i64) -> Self {
        let gates: Vec<String> = self
            .spec
            .release_gates
            .iter()
            .flatten()
            .map(|g| g.name.clone())
            .collect();
        let annotations = self.metadata.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(ANNOTATION_CLEANING.into(), release.to_string());
        annotations.insert(ANNOTATION_CLEANING_GATES.into(), gates.join(","));
        self
    }
    fn passed(mut self, gate: &str, release: i64) -> Self {
        let pass = server_binder::binding::state::gates::pass_condition(gate, release, &t(400));
        let status = self.status.get_or_insert_with(Default::default);
        status.conditions.retain(|c| c.type_ != gate);
        status.conditions.push(pass);
        self
    }
    fn uid_ref(mut self, uid: &str) -> Self {
        if let Some(r) = self.spec.server_claim_ref.as_mut() {
            r.uid = Some(uid.into());
        }
        self
    }
    fn labelled(mut self, pairs: &[(&str, &str)]) -> Self {
        self.metadata.labels = Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        );
        self
    }
    fn taint(mut self, key: &str) -> Self {
        self.spec.taints.push(Taint {
            key: key.into(),
            value: None,
            effect: TaintEffect::NoBind,
            time_added: None,
            hard_deadline: None,
        });
        self
    }
    fn unclaimable(mut self) -> Self {
        self.spec.unclaimable = true;
        self
    }
    fn deleting(mut self) -> Self {
        self.metadata.deletion_timestamp = Some(t(500));
        self
    }
    fn retain(mut self) -> Self {
        self.spec.reclaim_policy = ReclaimPolicy::Retain;
        self
    }
    fn phase(mut self, phase: ServerPhase) -> Self {
        self.status.get_or_insert_with(Default::default).phase = Some(phase);
        self
    }
    fn reserved_for(mut self, claim: &str) -> Self {
        self.spec.server_claim_ref = Some(ServerClaimRef {
            namespace: NS.into(),
            name: claim.into(),
            uid: None,
        });
        self
    }
    fn claimed_for(self, claim: &str, uid: &str) -> Self {
        self.uid_filled_for(claim, uid).by_controller()
    }
    fn uid_filled_for(mut self, claim: &str, uid: &str) -> Self {
        self.spec.server_claim_ref = Some(ServerClaimRef {
            namespace: NS.into(),
            name: claim.into(),
            uid: Some(uid.into()),
        });
        self.finalizer()
    }
    fn by_controller(mut self) -> Self {
        self.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ANNOTATION_BOUND_BY_CONTROLLER.into(), yes());
        self
    }
    fn finalizer(mut self) -> Self {
        let f = self.metadata.finalizers.get_or_insert_with(Vec::new);
        if !f.iter().any(|x| x == FINALIZER_SERVER_PROTECTION) {
            f.push(FINALIZER_SERVER_PROTECTION.into());
        }
        self
    }
    fn foreign_finalizer(mut self) -> Self {
        let f = self.metadata.finalizers.get_or_insert_with(Vec::new);
        f.push(FOREIGN_FINALIZER.into());
        self
    }
    fn controller_status(mut self, phase: ServerPhase) -> Self {
        let claim = self.spec.server_claim_ref.as_ref();
        self.status = Some(ServerStatus {
            phase: Some(phase),
            claim: claim.map(|r| format!("{}/{}", r.namespace, r.name)),
            observed_generation: Some(1),
            conditions: vec![bound_condition(
                &format!("{phase:?}"),
                phase == ServerPhase::Bound,
            )],
            ..ServerStatus::default()
        });
        self
    }
    fn bound_to(self, claim: &impl kube::Resource) -> Self {
        let name = claim.meta().name.as_deref().expect("a named claim");
        let uid = claim.meta().uid.as_deref().expect("a stored claim");
        self.claimed_for(name, uid)
            .controller_status(ServerPhase::Bound)
    }
    fn bound_to_deleted(self, claim: &str) -> Self {
        self.claimed_for(claim, DELETED_UID)
            .controller_status(ServerPhase::Bound)
    }
}

/// The claim builders (see the module's table).
pub trait ClaimExt: Sized {
    fn uid(self, uid: &str) -> Self;
    fn created(self, seconds: i64) -> Self;
    /// Adds these to `serverSelector.matchLabels`.
    fn selects(self, pairs: &[(&str, &str)]) -> Self;
    fn expression(self, key: &str, operator: SelectorOperator, values: &[&str]) -> Self;
    fn tolerates(self, key: &str) -> Self;
    /// A user-written serverRef (no pre-bound annotation).
    fn names(self, server: &str) -> Self;
    /// A controller-chosen serverRef: `names` with the pre-bound annotation.
    fn chose(self, server: &str) -> Self;
    /// The pre-bound annotation.
    fn pre_bound(self) -> Self;
    fn bind_completed(self) -> Self;
    fn phase(self, phase: ClaimPhase) -> Self;
    /// The status's record of a bind to `server` (as [`server`] builds it: its uid is
    /// `uid-server-<name>`), which only a Bound status carries.
    fn records(self, server: &str) -> Self;
    /// No record of a bind in the status (a status written before records existed).
    fn no_record(self) -> Self;
    /// The status as the claim controller writes it, at the time of the call: the
    /// phase, the `Bound` condition with this reason, `boundTime`, and for a `Bound` or
    /// `Lost` claim the record of the server its `serverRef` names, with an empty uid
    /// (`Env::put_claim` and `Env::put_server` fill in the stored server's). For a claim
    /// staged through the API.
    fn controller_status(self, phase: ClaimPhase, reason: &str) -> Self;
    /// Bound to `server` as the claim controller leaves it: `chose` it,
    /// `bind_completed`, and the status of phase Bound.
    fn bound(self, server: &str) -> Self;
}

impl ClaimExt for ServerClaim {
    fn uid(mut self, uid: &str) -> Self {
        self.metadata.uid = Some(uid.into());
        self
    }
    fn created(mut self, seconds: i64) -> Self {
        self.metadata.creation_timestamp = Some(t(seconds));
        self
    }
    fn selects(mut self, pairs: &[(&str, &str)]) -> Self {
        let selector = self
            .spec
            .server_selector
            .get_or_insert_with(Default::default);
        for (k, v) in pairs {
            selector.match_labels.insert(k.to_string(), v.to_string());
        }
        self
    }
    fn expression(mut self, key: &str, operator: SelectorOperator, values: &[&str]) -> Self {
        let selector = self
            .spec
            .server_selector
            .get_or_insert_with(Default::default);
        selector.match_expressions.push(SelectorRequirement {
            key: key.into(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
        });
        self
    }
    fn tolerates(mut self, key: &str) -> Self {
        self.spec.tolerations.push(Toleration {
            key: key.into(),
            operator: TolerationOperator::Exists,
            value: None,
            effect: None,
            toleration_seconds: None,
        });
        self
    }
    fn names(mut self, server: &str) -> Self {
        self.spec.server_ref = Some(ServerRef {
            name: server.into(),
        });
        self
    }
    fn chose(self, server: &str) -> Self {
        self.names(server).pre_bound()
    }
    fn pre_bound(mut self) -> Self {
        self.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ANNOTATION_PRE_BOUND.into(), yes());
        self
    }
    fn bind_completed(mut self) -> Self {
        self.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ANNOTATION_BIND_COMPLETED.into(), yes());
        self
    }
    /// A status with this phase; a `Bound` or `Lost` claim was bound once, so it also
    /// gets a `boundTime` and the record of the server its `serverRef` names, if any (as
    /// the claim controller leaves them).
    fn phase(mut self, phase: ClaimPhase) -> Self {
        let named = self.spec.server_ref.as_ref().map(|r| r.name.clone());
        let status = self.status.get_or_insert_with(Default::default);
        status.phase = Some(phase);
        if phase != ClaimPhase::Pending {
            status.bound_time.get_or_insert_with(|| t(5));
        }
        status.bound_server_ref = None;
        match (phase, named) {
            (ClaimPhase::Bound | ClaimPhase::Lost, Some(server)) => self.records(&server),
            _ => self,
        }
    }
    fn records(mut self, server: &str) -> Self {
        let status = self.status.get_or_insert_with(Default::default);
        status.bound_server_ref = Some(BoundServerRef {
            name: server.into(),
            uid: format!("uid-server-{server}"),
        });
        self
    }
    fn no_record(mut self) -> Self {
        if let Some(status) = self.status.as_mut() {
            status.bound_server_ref = None;
        }
        self
    }
    fn controller_status(mut self, phase: ClaimPhase, reason: &str) -> Self {
        let named = self.spec.server_ref.as_ref().map(|r| r.name.clone());
        self.status = Some(ServerClaimStatus {
            phase: Some(phase),
            conditions: vec![bound_condition(reason, phase == ClaimPhase::Bound)],
            bound_time: Some(Time(Timestamp::now())),
            bound_server_ref: named.filter(|_| phase != ClaimPhase::Pending).map(|name| {
                BoundServerRef {
                    name,
                    uid: String::new(),
                }
            }),
            given_back_server_ref: None,
        });
        self
    }
    fn bound(self, server: &str) -> Self {
        self.chose(server)
            .bind_completed()
            .controller_status(ClaimPhase::Bound, "Bound")
    }
}

/// The `Bound` condition a controller writes, now, with this reason.
fn bound_condition(reason: &str, status: bool) -> Condition {
    Condition {
        type_: CONDITION_BOUND.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message: format!("staged by the test: {reason}"),
        last_transition_time: Time(Timestamp::now()),
        observed_generation: Some(1),
    }
}

/// [`server`] as the binder caches it.
pub fn cached_server(name: &str) -> CachedServer {
    server(name).into()
}

/// [`claim`] as the binder caches it.
pub fn cached_claim(name: &str) -> CachedClaim {
    claim(name).into()
}

/// Each builder of a cached object is its stored object's, applied to the object as
/// stored: one vocabulary, one meaning.
macro_rules! cached_builders {
    ($trait:ident for $lean:ty: $($method:ident($($arg:ident: $ty:ty),*);)*) => {
        impl $trait for $lean {
            $(fn $method(self, $($arg: $ty),*) -> Self {
                <$lean>::from($trait::$method(self.to_full(), $($arg),*))
            })*
        }
    };
}

cached_builders!(ServerExt for CachedServer:
    labelled(pairs: &[(&str, &str)]);
    taint(key: &str);
    unclaimable();
    deleting();
    retain();
    phase(phase: ServerPhase);
    reserved_for(claim: &str);
    claimed_for(claim: &str, uid: &str);
    uid_filled_for(claim: &str, uid: &str);
    by_controller();
    finalizer();
    foreign_finalizer();
    uid_ref(uid: &str);
    gates(names: &[&str]);
    cleaning(release: i64);
    passed(gate: &str, release: i64);
    controller_status(phase: ServerPhase);
    bound_to(claim: &impl kube::Resource);
    bound_to_deleted(claim: &str);
);

cached_builders!(ClaimExt for CachedClaim:
    uid(uid: &str);
    created(seconds: i64);
    selects(pairs: &[(&str, &str)]);
    expression(key: &str, operator: SelectorOperator, values: &[&str]);
    tolerates(key: &str);
    names(server: &str);
    chose(server: &str);
    pre_bound();
    bind_completed();
    phase(phase: ClaimPhase);
    records(server: &str);
    no_record();
    controller_status(phase: ClaimPhase, reason: &str);
    bound(server: &str);
);
