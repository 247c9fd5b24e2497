//! The waiting claims' index kept up to date one watch event at a time
//! ([`WaitingClaims::put`]) holds what an index built afresh from the claims as they
//! end up holds: an update re-files only what changed, and must leave nothing stale.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

use super::*;
use crate::api::names::{ANNOTATION_BIND_COMPLETED, ANNOTATION_PRE_BOUND, ANNOTATION_YES};
use crate::api::{
    ServerClaimSpec, ServerClaimStatus, ServerRef, ServerSelector, Toleration, TolerationOperator,
};

/// One claim's state, as a watch event delivers it.
#[derive(Clone, Debug)]
struct State {
    created: Option<i64>,
    server: Option<&'static str>,
    pre_bound: bool,
    completed: bool,
    rack: Option<&'static str>,
    tolerates: bool,
    bound_at: Option<i64>,
}

fn arb_state() -> impl Strategy<Value = State> {
    (
        prop::option::of(1i64..4),
        prop::option::of(prop::sample::select(vec!["s1", "s2"])),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(prop::sample::select(vec!["r1", "r2"])),
        any::<bool>(),
        prop::option::of(10i64..13),
    )
        .prop_map(
            |(created, server, pre_bound, completed, rack, tolerates, bound_at)| State {
                created,
                server,
                pre_bound,
                completed,
                rack,
                tolerates,
                bound_at,
            },
        )
}

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).expect("a small timestamp"))
}

fn claim(namespace: &str, name: &str, s: &State) -> CachedClaim {
    let mut annotations = BTreeMap::new();
    for (set, key) in [
        (s.pre_bound, ANNOTATION_PRE_BOUND),
        (s.completed, ANNOTATION_BIND_COMPLETED),
    ] {
        if set {
            annotations.insert(key.to_string(), ANNOTATION_YES.to_string());
        }
    }
    let selector = s.rack.map(|rack| ServerSelector {
        match_labels: BTreeMap::from([("rack".to_string(), rack.to_string())]),
        match_expressions: Vec::new(),
    });
    let tolerations = s.tolerates.then(|| Toleration {
        key: "gpu".into(),
        operator: TolerationOperator::Exists,
        value: None,
        effect: None,
        toleration_seconds: None,
    });
    CachedClaim::from(crate::api::ServerClaim {
        metadata: ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            creation_timestamp: s.created.map(at),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: ServerClaimSpec {
            server_ref: s.server.map(|name| ServerRef { name: name.into() }),
            server_selector: selector,
            tolerations: tolerations.into_iter().collect(),
            ..Default::default()
        },
        status: s.bound_at.map(|t| ServerClaimStatus {
            bound_time: Some(at(t)),
            ..Default::default()
        }),
    })
}

/// What the index holds, with each shared shape by its contents (the two indexes share
/// no copies) and the caches of a pick left out.
fn contents(w: &WaitingClaims) -> String {
    let shapes = |m: &HashMap<ClaimKey, (Arc<ClaimShape>, Waiter)>| {
        let sorted: BTreeMap<_, _> = m.iter().map(|(k, (s, w))| (k, (&**s, w))).collect();
        format!("{sorted:?}")
    };
    let by_shape: Vec<String> = {
        let mut v: Vec<String> = w
            .by_shape
            .values()
            .map(|(s, members)| format!("{:?} {members:?}", &**s))
            .collect();
        v.sort();
        v
    };
    let known: BTreeMap<String, usize> = w
        .known
        .iter()
        .map(|(s, n)| (format!("{:?}", &**s), *n))
        .collect();
    let known_of: BTreeMap<_, _> = w.known_of.iter().map(|(k, s)| (k, &**s)).collect();
    let served: BTreeMap<_, _> = w.served.iter().collect();
    let served_at: BTreeMap<_, _> = w.served_at.iter().collect();
    let created_at: BTreeMap<_, _> = w.created_at.iter().collect();
    let pick_of: BTreeMap<_, _> = w.pick_of.iter().collect();
    format!(
        "by_shape {by_shape:?}\nshape_of {}\nserving {:?}\npicks {:?}\npick_of {pick_of:?}\n\
         served {served:?}\nserved_at {served_at:?}\ncreated {:?}\ncreated_at {created_at:?}\n\
         taking {:?}\nknown {known:?}\nknown_of {known_of:?}",
        shapes(&w.shape_of),
        w.serving,
        w.picks,
        w.created,
        w.taking,
    )
}

const KEYS: [(&str, &str); 4] = [("a", "c1"), ("a", "c2"), ("b", "c1"), ("b", "c3")];

proptest! {
    #[test]
    fn updates_one_at_a_time_hold_what_a_fresh_index_holds(
        events in prop::collection::vec((0..KEYS.len(), arb_state()), 1..40),
    ) {
        let mut kept = WaitingClaims::default();
        let mut last = BTreeMap::new();
        for (k, state) in &events {
            let (namespace, name) = KEYS[*k];
            let claim = claim(namespace, name, state);
            kept.put(&ClaimKey::of(namespace, name), Some(&claim));
            last.insert(*k, claim);
        }
        let mut fresh = WaitingClaims::default();
        for (k, claim) in &last {
            let (namespace, name) = KEYS[*k];
            fresh.put(&ClaimKey::of(namespace, name), Some(claim));
        }
        prop_assert_eq!(contents(&kept), contents(&fresh));
    }
}
