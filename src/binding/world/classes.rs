//! Server classes (docs/binding.md, "Server classes"): which class a claim takes a
//! server of, whether its namespace may use that class, and what the claim gets from it.
//! Pure data fed by the watches, and one function that folds a claim's class into the
//! claim the decisions read ([`ClassCatalog::resolve_ref`]): its selector narrowed to the
//! class's servers, its tolerations widened by the class's. Every decision, both
//! controllers' and the matching's, then reads the class through the claim, and no rule
//! needs to know classes exist.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::api::names::ANNOTATION_DEFAULT_CLASS;
use crate::api::{
    CachedClaim, CachedServer, SelectorOperator, SelectorRequirement, ServerClass,
    ServerClassStatus, ServerPhase, ServerSelector,
};

use crate::binding::meta;
use crate::binding::selector::selector_matches;

/// The label every Namespace carries with its own name (Kubernetes sets it), so a
/// namespace selector can name namespaces even before their labels are known.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

pub use crate::binding::state::class_labels::{
    CLASSED_KEY, MEMBER_PREFIX, NO_SERVER_KEY, is_view_only, member_key,
};

/// How a claim stands with the classes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ClassCheck {
    /// No class applies: the claim names none and no class is the default.
    NoClass,
    /// The claim's class (named, or the default), which lets its namespace in.
    Of(String),
    /// The claim names none, and this is the default class, which the claim controller
    /// writes into an unbound claim (as Kubernetes assigns a default StorageClass).
    Default(String),
    /// The claim names a class that does not exist.
    Missing(String),
    /// The class does not let the claim's namespace in.
    NotAllowed(String),
}

impl ClassCheck {
    /// The class's name, if one applies.
    pub fn class(&self) -> Option<&str> {
        match self {
            Self::NoClass => None,
            Self::Of(c) | Self::Default(c) | Self::Missing(c) | Self::NotAllowed(c) => Some(c),
        }
    }
}

/// The classes and the namespaces' labels, as the watches show them.
#[derive(Clone, Debug, Default)]
pub struct ClassCatalog {
    classes: BTreeMap<String, Arc<ServerClass>>,
    namespaces: HashMap<String, BTreeMap<String, String>>,
}

impl ClassCatalog {
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    pub fn upsert_class(&mut self, class: Arc<ServerClass>) {
        self.classes.insert(meta::name(&*class).to_string(), class);
    }

    pub fn remove_class(&mut self, name: &str) {
        self.classes.remove(name);
    }

    pub fn replace_classes(&mut self, all: impl IntoIterator<Item = Arc<ServerClass>>) {
        self.classes = all
            .into_iter()
            .map(|c| (meta::name(&*c).to_string(), c))
            .collect();
    }

    /// A namespace's labels (`None`: deleted). Returns whether they changed.
    pub fn put_namespace(&mut self, name: &str, labels: Option<BTreeMap<String, String>>) -> bool {
        if self.namespaces.get(name) == labels.as_ref() {
            return false;
        }
        match labels {
            Some(l) => self.namespaces.insert(name.to_string(), l),
            None => self.namespaces.remove(name),
        };
        true
    }

    pub fn replace_namespaces(&mut self, all: HashMap<String, BTreeMap<String, String>>) {
        self.namespaces = all;
    }

    /// Every class, as the watch shows it.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<ServerClass>> {
        self.classes.values()
    }

    pub fn class(&self, name: &str) -> Option<&ServerClass> {
        self.classes.get(name).map(|c| &**c)
    }

    /// The default class: the one annotated `is-default-class: "true"`; of several, the
    /// newest, then the lowest name (Kubernetes' rule for default StorageClasses).
    pub fn default_class(&self) -> Option<&str> {
        let defaults = self.classes.values().filter(|c| {
            let annotations = c.metadata.annotations.as_ref();
            annotations
                .and_then(|a| a.get(ANNOTATION_DEFAULT_CLASS))
                .is_some_and(|v| v == "true")
        });
        let newest = defaults.max_by(|a, b| {
            let created = |c: &ServerClass| c.metadata.creation_timestamp.clone();
            created(a)
                .cmp(&created(b))
                .then_with(|| meta::name(&***b).cmp(meta::name(&***a)))
        });
        newest.map(|c| meta::name(&**c))
    }

    /// The release gates of `server` from its classes, for a server that names none: the
    /// gates of every class whose selector takes it in and that names gates, each once
    /// (`None`: no such class, so the controller's default applies). A claim binds only
    /// within its class, so the gates of the class of any claim released from the server
    /// are among them.
    pub fn release_gates_of(&self, server: &CachedServer) -> Option<Vec<String>> {
        let mut gates: Option<Vec<String>> = None;
        for class in self.classes.values() {
            let member = class.spec.server_selector.as_ref();
            let member = member.is_none_or(|s| selector_matches(s, meta::labels(server)));
            if let (true, Some(own)) = (member, &class.spec.release_gates) {
                let all = gates.get_or_insert_with(Vec::new);
                all.extend(own.iter().map(|g| g.name.clone()));
            }
        }
        if let Some(all) = gates.as_mut() {
            all.sort();
            all.dedup();
        }
        gates
    }

    /// The classes that take `server` in, by name.
    pub fn classes_of<'a>(
        &'a self,
        server: &'a CachedServer,
    ) -> impl Iterator<Item = &'a str> + 'a {
        self.classes.iter().filter_map(|(name, c)| {
            let selector = c.spec.server_selector.as_ref();
            let member = selector.is_none_or(|s| selector_matches(s, meta::labels(server)));
            member.then_some(name.as_str())
        })
    }

    /// The server as the decisions read it: labelled [`CLASSED_KEY`] while some class
    /// takes it in, and [`member_key`] for each such class (`None`: as it is). Its
    /// writes never start from this copy.
    pub fn resolve_server(&self, server: &CachedServer) -> Option<CachedServer> {
        let mut members = self.classes_of(server).peekable();
        members.peek()?;
        let mut view = server.clone();
        let labels = view.labels_mut();
        for class in members {
            labels.insert(member_key(class), "true".into());
        }
        labels.insert(CLASSED_KEY.into(), "true".into());
        Some(view)
    }

    /// How `claim` stands with the classes.
    pub fn check(&self, claim: &CachedClaim) -> ClassCheck {
        if self.classes.is_empty() && claim.spec.server_class_name.is_none() {
            return ClassCheck::NoClass;
        }
        let (name, default) = match &claim.spec.server_class_name {
            Some(name) => (name.as_str(), false),
            None => match self.default_class() {
                Some(name) => (name, true),
                None => return ClassCheck::NoClass,
            },
        };
        let Some(class) = self.class(name) else {
            return ClassCheck::Missing(name.to_string());
        };
        if !self.lets_in(class, meta::namespace(claim)) {
            return ClassCheck::NotAllowed(name.to_string());
        }
        match default {
            true => ClassCheck::Default(name.to_string()),
            false => ClassCheck::Of(name.to_string()),
        }
    }

    /// Whether `class` lets claims of `namespace` in: its namespace selector matches the
    /// namespace's labels, which always include its name ([`NAMESPACE_NAME_LABEL`]).
    fn lets_in(&self, class: &ServerClass, namespace: &str) -> bool {
        let Some(selector) = &class.spec.namespace_selector else {
            return true;
        };
        let mut labels = self.namespaces.get(namespace).cloned().unwrap_or_default();
        labels.insert(NAMESPACE_NAME_LABEL.into(), namespace.into());
        selector_matches(selector, &labels)
    }

    /// The claim the decisions read, and how it stands: `claim` itself when no class
    /// applies; otherwise with its selector narrowed to the class's servers (none at all
    /// when the class is missing or does not let its namespace in) and the class's
    /// tolerations added to its own.
    pub fn resolve_ref<'c>(&self, claim: &'c CachedClaim) -> (Cow<'c, CachedClaim>, ClassCheck) {
        let check = self.check(claim);
        match self.narrowed(claim, &check) {
            Some(effective) => (Cow::Owned(effective), check),
            None => (Cow::Borrowed(claim), check),
        }
    }

    /// The claim as its class makes it, by the class check already made for it (`None`:
    /// no class applies and none exists).
    pub fn narrowed(&self, claim: &CachedClaim, check: &ClassCheck) -> Option<CachedClaim> {
        let class = match check {
            ClassCheck::NoClass if self.classes.is_empty() => return None,
            // No class of its own: only servers no class takes in.
            ClassCheck::NoClass => {
                let mut effective = claim.clone();
                let spec = &mut effective.spec;
                let unclassed = ServerSelector {
                    match_expressions: vec![SelectorRequirement {
                        key: CLASSED_KEY.into(),
                        operator: SelectorOperator::DoesNotExist,
                        values: vec![],
                    }],
                    ..ServerSelector::default()
                };
                spec.server_selector = Some(narrow(spec.server_selector.take(), unclassed));
                return Some(effective);
            }
            ClassCheck::Of(name) | ClassCheck::Default(name) => self.class(name),
            ClassCheck::Missing(_) | ClassCheck::NotAllowed(_) => None,
        };
        let mut effective = claim.clone();
        let spec = &mut effective.spec;
        // The class's servers are those its view-only label marks (resolve_server).
        let narrowed = match class {
            Some(c) => ServerSelector {
                match_expressions: vec![SelectorRequirement {
                    key: member_key(meta::name(c)),
                    operator: SelectorOperator::Exists,
                    values: vec![],
                }],
                ..ServerSelector::default()
            },
            None => no_server(),
        };
        spec.server_selector = Some(narrow(spec.server_selector.take(), narrowed));
        if let Some(c) = class {
            spec.tolerations.extend(c.spec.tolerations.iter().cloned());
        }
        Some(effective)
    }
}

/// How many of `servers` belong to `class`, by phase, each counted once: `Bound`,
/// `Cleaning` and `Released` by their phase; any other that nobody may claim (cordoned,
/// being deleted) as unclaimable; the rest available.
pub fn capacity<'s>(
    class: &ServerClass,
    servers: impl Iterator<Item = &'s CachedServer>,
) -> ServerClassStatus {
    let mut status = ServerClassStatus::default();
    let members = servers.filter(|s| {
        let selector = class.spec.server_selector.as_ref();
        selector.is_none_or(|sel| selector_matches(sel, meta::labels(*s)))
    });
    for server in members {
        status.servers += 1;
        let count = match server.status.as_ref().and_then(|st| st.phase) {
            Some(ServerPhase::Bound) => &mut status.bound,
            Some(ServerPhase::Cleaning) => &mut status.cleaning,
            Some(ServerPhase::Released) => &mut status.released,
            _ if server.spec.unclaimable || meta::is_deleting(server) => &mut status.unclaimable,
            _ => &mut status.available,
        };
        *count += 1;
    }
    status
}

/// `claim` with its selector narrowed to no server at all: how the decisions read a
/// claim that may take none now (over quota, [`crate::binding::world::quota`]).
pub fn without_servers(claim: &CachedClaim) -> CachedClaim {
    let mut shut = claim.clone();
    let spec = &mut shut.spec;
    spec.server_selector = Some(narrow(spec.server_selector.take(), no_server()));
    shut
}

/// A selector no server satisfies.
fn no_server() -> ServerSelector {
    ServerSelector {
        match_expressions: vec![SelectorRequirement {
            key: NO_SERVER_KEY.into(),
            operator: SelectorOperator::In,
            values: vec![],
        }],
        ..ServerSelector::default()
    }
}

/// Both selectors at once: every `matchLabels` pair and every expression of each. A key
/// both pair with different values can match no server.
fn narrow(mine: Option<ServerSelector>, class: ServerSelector) -> ServerSelector {
    let mut both = mine.unwrap_or_default();
    for (key, value) in class.match_labels {
        match both.match_labels.get(&key) {
            Some(v) if *v != value => both.match_expressions.extend(no_server().match_expressions),
            _ => {
                both.match_labels.insert(key, value);
            }
        }
    }
    both.match_expressions.extend(class.match_expressions);
    both
}

/// `planned`, a write the decisions planned on the claim as its class makes it, carried
/// over to `claim` as it is: only what the claim controller writes to a claim object
/// (`serverRef`, `serverClassName`, its two annotations), never the class's selector or
/// tolerations.
pub fn rebase(planned: &CachedClaim, claim: &CachedClaim) -> CachedClaim {
    use crate::api::names::{ANNOTATION_BIND_COMPLETED, ANNOTATION_PRE_BOUND};
    let mut object = claim.clone();
    object.spec.server_ref = planned.spec.server_ref.clone();
    object.spec.server_class_name = planned.spec.server_class_name.clone();
    for key in [ANNOTATION_PRE_BOUND, ANNOTATION_BIND_COMPLETED] {
        match meta::has_annotation(planned, key) {
            true => meta::set_annotation(&mut object, key),
            false => meta::remove_annotation(&mut object, key),
        }
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ServerClaimSpec, ServerClassSpec, Toleration};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn selector(pairs: &[(&str, &str)]) -> ServerSelector {
        ServerSelector {
            match_labels: labels(pairs),
            ..ServerSelector::default()
        }
    }

    fn class(name: &str, servers: &[(&str, &str)], default: bool, created: i64) -> ServerClass {
        let mut c = ServerClass::new(
            name,
            ServerClassSpec {
                server_selector: Some(selector(servers)),
                ..ServerClassSpec::default()
            },
        );
        if default {
            c.metadata.annotations =
                Some([(ANNOTATION_DEFAULT_CLASS.to_string(), "true".to_string())].into());
        }
        c.metadata.creation_timestamp = Some(Time(
            Timestamp::from_second(1_700_000_000 + created).unwrap(),
        ));
        c
    }

    fn claim(ns: &str, class: Option<&str>) -> Arc<CachedClaim> {
        let mut c = CachedClaim::new(
            "c",
            ServerClaimSpec {
                server_class_name: class.map(str::to_string),
                ..ServerClaimSpec::default()
            },
        );
        c.meta_mut().namespace = Some(ns.into());
        Arc::new(c)
    }

    fn catalog(classes: Vec<ServerClass>) -> ClassCatalog {
        let mut catalog = ClassCatalog::default();
        catalog.replace_classes(classes.into_iter().map(Arc::new));
        catalog
    }

    #[test]
    fn without_classes_a_claim_is_itself() {
        let c = claim("a", None);
        let (effective, check) = ClassCatalog::default().resolve_ref(&c);
        assert_eq!(check, ClassCheck::NoClass);
        assert!(matches!(effective, Cow::Borrowed(_)));
    }

    #[test]
    fn a_class_narrows_the_selector_and_adds_its_tolerations() {
        let mut gpu = class("gpu", &[("kind", "gpu")], false, 0);
        gpu.spec.tolerations = vec![Toleration {
            key: "gpu".into(),
            ..Toleration::default()
        }];
        let mut c = (*claim("a", Some("gpu"))).clone();
        c.spec.server_selector = Some(selector(&[("rack", "r1")]));
        let catalog = catalog(vec![gpu]);
        let (effective, check) = catalog.resolve_ref(&c);
        assert_eq!(check, ClassCheck::Of("gpu".into()));
        let s = effective.spec.server_selector.as_ref().unwrap();
        // Matched against servers as the classes make them (their view-only labels).
        let seen = |pairs: &[(&str, &str)]| {
            let mut server = CachedServer::new("s", Default::default());
            *server.labels_mut() = labels(pairs).into_iter().collect();
            let view = catalog.resolve_server(&server).unwrap_or(server);
            view.labels().clone()
        };
        assert!(selector_matches(
            s,
            &seen(&[("kind", "gpu"), ("rack", "r1")])
        ));
        assert!(!selector_matches(
            s,
            &seen(&[("kind", "gpu"), ("rack", "r2")])
        ));
        assert!(!selector_matches(s, &seen(&[("rack", "r1")])));
        assert_eq!(effective.spec.tolerations.len(), 1);
    }

    /// The classes' views are the objects as they are but for what the class changes:
    /// they hold the objects' metadata itself, not a second copy of it.
    #[test]
    fn a_view_shares_the_metadata_of_the_object_as_it_is() {
        let catalog = catalog(vec![class("gpu", &[("kind", "gpu")], false, 0)]);
        let mut server = CachedServer::new("s", Default::default());
        *server.labels_mut() = labels(&[("kind", "gpu")]).into_iter().collect();
        let view = catalog
            .resolve_server(&server)
            .expect("the class takes it in");
        assert_ne!(view.labels(), server.labels());
        assert!(view.shares_metadata_with(&server));
        let c = claim("a", Some("gpu"));
        let (effective, _) = catalog.resolve_ref(&c);
        assert_ne!(effective.spec, c.spec);
        assert!(effective.shares_metadata_with(&c));
    }

    #[test]
    fn a_missing_or_forbidding_class_leaves_no_server() {
        let mut gpu = class("gpu", &[], false, 0);
        gpu.spec.namespace_selector = Some(selector(&[(NAMESPACE_NAME_LABEL, "team-a")]));
        let catalog = catalog(vec![gpu]);
        let any = labels(&[]);
        for (c, check) in [
            (
                claim("team-b", Some("gpu")),
                ClassCheck::NotAllowed("gpu".into()),
            ),
            (
                claim("team-a", Some("cpu")),
                ClassCheck::Missing("cpu".into()),
            ),
        ] {
            let (effective, got) = catalog.resolve_ref(&c);
            assert_eq!(got, check);
            assert!(!selector_matches(
                effective.spec.server_selector.as_ref().unwrap(),
                &any
            ));
        }
        let (_, ok) = catalog.resolve_ref(&claim("team-a", Some("gpu")));
        assert_eq!(ok, ClassCheck::Of("gpu".into()));
    }

    #[test]
    fn the_newest_default_class_is_the_default() {
        let catalog = catalog(vec![
            class("old", &[], true, 0),
            class("new", &[], true, 10),
            class("other", &[], false, 20),
        ]);
        assert_eq!(catalog.default_class(), Some("new"));
        let (_, check) = catalog.resolve_ref(&claim("a", None));
        assert_eq!(check, ClassCheck::Default("new".into()));
    }

    #[test]
    fn capacity_counts_each_server_of_the_class_once() {
        use crate::api::{ServerSpec, ServerStatus};
        let server = |name: &str, kind: &str, phase: Option<ServerPhase>, cordoned: bool| {
            let mut s = CachedServer::new(
                name,
                ServerSpec {
                    unclaimable: cordoned,
                    ..ServerSpec::default()
                },
            );
            *s.labels_mut() = labels(&[("kind", kind)]).into_iter().collect();
            s.status = phase.map(|phase| ServerStatus {
                phase: Some(phase),
                ..ServerStatus::default()
            });
            s
        };
        let fleet = [
            server("g1", "gpu", Some(ServerPhase::Available), false),
            server("g2", "gpu", Some(ServerPhase::Bound), true),
            server("g3", "gpu", Some(ServerPhase::Cleaning), false),
            server("g4", "gpu", None, true),
            server("c1", "cpu", Some(ServerPhase::Available), false),
        ];
        let gpu = class("gpu", &[("kind", "gpu")], false, 0);
        let counted = capacity(&gpu, fleet.iter());
        let expected = ServerClassStatus {
            servers: 4,
            available: 1,
            bound: 1,
            cleaning: 1,
            released: 0,
            unclaimable: 1,
        };
        assert_eq!(counted, expected);
    }

    #[test]
    fn a_server_gets_the_release_gates_of_every_class_it_is_in() {
        use crate::api::{ReleaseGate, ServerSpec};
        let gated = |name: &str, servers: &[(&str, &str)], gates: &[&str]| {
            let mut c = class(name, servers, false, 0);
            let gates = gates.iter().map(|g| ReleaseGate {
                name: g.to_string(),
            });
            c.spec.release_gates = Some(gates.collect());
            c
        };
        let catalog = catalog(vec![
            gated("gpu", &[("kind", "gpu")], &["x.io/wipe", "x.io/power"]),
            gated("big", &[("size", "big")], &["x.io/wipe"]),
            class("cpu", &[("kind", "cpu")], false, 0),
        ]);
        let mut server = CachedServer::new("s", ServerSpec::default());
        *server.labels_mut() = labels(&[("kind", "gpu"), ("size", "big")])
            .into_iter()
            .collect();
        assert_eq!(
            catalog.release_gates_of(&server),
            Some(vec!["x.io/power".to_string(), "x.io/wipe".to_string()])
        );
        *server.labels_mut() = labels(&[("kind", "cpu")]).into_iter().collect();
        assert_eq!(
            catalog.release_gates_of(&server),
            None,
            "the default applies"
        );
    }

    #[test]
    fn a_claim_without_a_class_takes_only_servers_no_class_takes_in() {
        use crate::api::ServerSpec;
        let catalog = catalog(vec![class("gpu", &[("kind", "gpu")], false, 0)]);
        let server = |kind: &str| {
            let mut s = CachedServer::new("s", ServerSpec::default());
            *s.labels_mut() = labels(&[("kind", kind)]).into_iter().collect();
            catalog.resolve_server(&s).unwrap_or(s)
        };
        let plain = claim("a", None);
        let (plain, check) = catalog.resolve_ref(&plain);
        assert_eq!(check, ClassCheck::NoClass);
        let selector = plain.spec.server_selector.as_ref().expect("narrowed");
        assert!(!selector_matches(selector, meta::labels(&server("gpu"))));
        assert!(selector_matches(selector, meta::labels(&server("cpu"))));
    }

    #[test]
    fn conflicting_label_pairs_match_no_server() {
        let both = narrow(
            Some(selector(&[("rack", "r1")])),
            selector(&[("rack", "r2")]),
        );
        assert!(!selector_matches(&both, &labels(&[("rack", "r1")])));
        assert!(!selector_matches(&both, &labels(&[("rack", "r2")])));
    }
}
