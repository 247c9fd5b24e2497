//! Builders for servers and claims, and shorthands for deciding on a small world.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use server_binder::api::names::*;
use server_binder::api::*;
use server_binder::binding::*;

// The vocabulary the builders share with tests/controllers/stage.rs, and the namespace.
use crate::common::names;
pub use names::NS;

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

/// Builders in the vocabulary of tests/common/names.rs.
pub trait ServerExt: Sized {
    /// The server's labels are exactly these.
    fn labels(self, pairs: &[(&str, &str)]) -> Self;
    fn taint(self, key: &str) -> Self;
    fn unclaimable(self) -> Self;
    fn deleting(self) -> Self;
    fn retain(self) -> Self;
    fn phase(self, phase: ServerPhase) -> Self;
    /// A user's reservation by name (no uid, no controller annotation).
    fn reserved_for(self, claim: &str) -> Self;
    /// The ref as the server controller's `ClaimForWinner` writes it: this claim's name
    /// and uid, `bound-by-controller`, the finalizer (the status is the caller's).
    fn claimed_for(self, claim: &str, uid: &str) -> Self;
    /// A user-made ref with a uid, as `FillUid` leaves it: the uid and the finalizer, no
    /// `bound-by-controller`.
    fn uid_filled_for(self, claim: &str, uid: &str) -> Self;
    /// The `server-protection` finalizer.
    fn finalizer(self) -> Self;
    /// Sets the uid of the server's ref as written (`""` included).
    fn uid_ref(self, uid: &str) -> Self;
    /// `spec.releaseGates` with these names.
    fn gates(self, names: &[&str]) -> Self;
    /// Being cleaned after the release `release` (the `cleaning` annotation), with the
    /// server's own `spec.releaseGates` recorded as the gates in force.
    fn cleaning(self, release: i64) -> Self;
    /// A cleaner's pass of `gate` for the release `release`.
    fn passed(self, gate: &str, release: i64) -> Self;
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
        let pass = server_binder::binding::gates::pass_condition(gate, release, &t(400));
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
    fn labels(mut self, pairs: &[(&str, &str)]) -> Self {
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
        let mut s = self.uid_filled_for(claim, uid);
        s.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ANNOTATION_BOUND_BY_CONTROLLER.into(), yes());
        s
    }
    fn uid_filled_for(mut self, claim: &str, uid: &str) -> Self {
        self.spec.server_claim_ref = Some(ServerClaimRef {
            namespace: NS.into(),
            name: claim.into(),
            uid: Some(uid.into()),
        });
        self.finalizer()
    }
    fn finalizer(mut self) -> Self {
        let f = self.metadata.finalizers.get_or_insert_with(Vec::new);
        if !f.iter().any(|x| x == FINALIZER_SERVER_PROTECTION) {
            f.push(FINALIZER_SERVER_PROTECTION.into());
        }
        self
    }
}

/// Builders in the vocabulary of tests/common/names.rs.
pub trait ClaimExt: Sized {
    fn uid(self, uid: &str) -> Self;
    fn created(self, seconds: i64) -> Self;
    /// Adds these to `serverSelector.matchLabels`.
    fn selects(self, pairs: &[(&str, &str)]) -> Self;
    fn expression(self, key: &str, operator: SelectorOperator, values: &[&str]) -> Self;
    fn tolerates(self, key: &str) -> Self;
    /// A user-written serverRef (no pre-bound annotation).
    fn names(self, server: &str) -> Self;
    /// A controller-chosen serverRef (with the pre-bound annotation).
    fn chose(self, server: &str) -> Self;
    fn bind_completed(self) -> Self;
    fn phase(self, phase: ClaimPhase) -> Self;
    /// The status's record of a bind to `server` (as [`server`] builds it: its uid is
    /// `uid-server-<name>`), which only a Bound status carries.
    fn records(self, server: &str) -> Self;
    /// No record of a bind in the status (a status written before records existed).
    fn no_record(self) -> Self;
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
        let mut c = self.names(server);
        c.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ANNOTATION_PRE_BOUND.into(), yes());
        c
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
}

pub fn servers(list: Vec<Server>) -> ServerCatalog {
    ServerCatalog::from_servers(list)
}

pub fn claims(list: Vec<ServerClaim>) -> ClaimCatalog {
    ClaimCatalog::from_claims(list)
}

static NO_WAITING: std::sync::LazyLock<WaitingClaims> = std::sync::LazyLock::new(Default::default);
static NO_ASSUMED: std::sync::LazyLock<AssumedChoices> =
    std::sync::LazyLock::new(AssumedChoices::new);

/// What a pick weighs when no other claim waits and nothing is in flight: the claim is
/// alone, so the matching changes nothing and the pick is the plain best fit.
pub fn alone<'a>(skip: &'a dyn Fn(&str) -> bool) -> PickInputs<'a> {
    PickInputs {
        skip,
        waiting: &NO_WAITING,
        assumed: &NO_ASSUMED,
    }
}

/// The server a lone claim would pick.
pub fn pick_alone<'a>(
    servers: &'a ServerCatalog,
    claim: &ServerClaim,
    skip: &dyn Fn(&str) -> bool,
) -> Option<&'a str> {
    match servers.place(claim, &alone(skip)) {
        Placement::Pick(name) => Some(name),
        Placement::WaitForTurn | Placement::NoMatch => None,
    }
}

/// The claim controller's decision with an empty assumed cache, on the cache.
pub fn decide_c(claim: &ServerClaim, world: &[Server]) -> ClaimDecision {
    let servers = servers(world.to_vec()).tracking([claim]);
    decide_claim(claim, &servers, &alone(&|_| false), Liveness::Cached)
}

/// The same after a live read confirmed what the view says.
pub fn decide_c_live(claim: &ServerClaim, world: &[Server]) -> ClaimDecision {
    let servers = servers(world.to_vec()).tracking([claim]);
    decide_claim(claim, &servers, &alone(&|_| false), Liveness::Confirmed)
}

/// The server controller's decision, on the cache.
pub fn decide_s(server: &Server, world: &[ServerClaim]) -> ServerDecision {
    decide_server(server, &claims(world.to_vec()), Liveness::Cached, &[])
}

pub fn decide_s_live(server: &Server, world: &[ServerClaim]) -> ServerDecision {
    decide_server(server, &claims(world.to_vec()), Liveness::Confirmed, &[])
}

pub fn holder(claim: &str, uid: Option<&str>) -> ServerClaimRef {
    ServerClaimRef {
        namespace: NS.into(),
        name: claim.into(),
        uid: uid.map(str::to_string),
    }
}

pub fn s(name: &str) -> String {
    name.to_string()
}

pub fn annotation(obj: &impl kube::Resource, key: &str) -> Option<String> {
    obj.meta().annotations.as_ref()?.get(key).cloned()
}

/// The mutant of the placement's properties: the reference's pick, claim by claim,
/// lowest name first, seeing no other waiting claim.
pub fn lowest_name_first(
    claim: &ServerClaim,
    servers: &dyn ServerView,
    pick: &PickInputs<'_>,
    liveness: Liveness,
) -> ClaimDecision {
    let nobody = WaitingClaims::default();
    let alone = PickInputs {
        waiting: &nobody,
        ..*pick
    };
    decide_claim(claim, servers, &alone, liveness)
}
