//! Objects as the watches read them off the wire, and as the binder caches them.
//!
//! Every object is read without `managedFields`, and with only this project's
//! annotations: both are skipped while the JSON is parsed, not built and dropped after.
//! `managedFields` (one entry per writer, each a tree of JSON values) comes with every
//! watch event, and building and dropping it was about a tenth of the operator's CPU
//! (docs/performance.md, "CPU per bind"). No decision reads them,
//! and the writes are merge patches of what a plan changed (`controllers::writes`, which
//! reads only the version of its answers), so what the cache lacks is never sent, and
//! never erased.
//!
//! Servers and claims, of which a fleet has thousands, are cached as [`CachedObject`]s: a
//! projection of what the decisions read ([`Projected`]: a server's labels, and the
//! protocol's annotations of each kind), with labels and annotations in sorted vectors
//! rather than B-trees (a `BTreeMap` is a node of 544 bytes however few entries it
//! holds: two of them were a third of a cached object, docs/performance.md, "Memory,
//! measured"). The other kinds are few and read whole ([`Trimmed`]).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Namespace, NamespaceSpec, NamespaceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use litemap::LiteMap;
use serde::de::{DeserializeOwned, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::claim::{ServerClaim, ServerClaimSpec, ServerClaimStatus};
use super::disruption_budget::{
    ServerDisruptionBudget, ServerDisruptionBudgetSpec, ServerDisruptionBudgetStatus,
};
use super::names::{
    ANNOTATION_BIND_COMPLETED, ANNOTATION_BOUND_BY_CONTROLLER, ANNOTATION_BOUND_CLASS,
    ANNOTATION_CLEANING, ANNOTATION_CLEANING_GATES, ANNOTATION_PRE_BOUND, in_our_domain,
};
use super::server::{Server, ServerSpec, ServerStatus};
use super::server_class::{ServerClass, ServerClassSpec, ServerClassStatus};
use super::server_quota::{ServerQuota, ServerQuotaSpec, ServerQuotaStatus};
use super::shared::Shared;

/// Labels or annotations as a [`CachedObject`] holds them: sorted by key, in one vector.
pub type Labels = LiteMap<String, String>;

/// A `K` read lean; `.0` is the object.
#[derive(Clone, Debug)]
pub struct Trimmed<K>(pub K);

/// A kind made of metadata, spec and status, as every kind the controllers read is.
pub trait Parts: Sized {
    type Spec: Serialize + DeserializeOwned + Default + Clone + fmt::Debug + PartialEq;
    type Status: Serialize + DeserializeOwned + Clone + fmt::Debug + PartialEq;
    fn from_parts(metadata: ObjectMeta, spec: Self::Spec, status: Option<Self::Status>) -> Self;
    fn into_parts(self) -> (ObjectMeta, Self::Spec, Option<Self::Status>);
    fn spec(&self) -> &Self::Spec;
    fn status(&self) -> Option<&Self::Status>;
    /// The object's `metadata` as JSON, as a merge patch compares it.
    fn metadata_json(&self) -> serde_json::Result<serde_json::Value>;
}

macro_rules! parts {
    ($($kind:ty => $spec:ty, $status:ty;)*) => {$(
        impl Parts for $kind {
            type Spec = $spec;
            type Status = $status;
            fn from_parts(metadata: ObjectMeta, spec: $spec, status: Option<$status>) -> Self {
                Self { metadata, spec, status }
            }
            fn into_parts(self) -> (ObjectMeta, $spec, Option<$status>) {
                (self.metadata, self.spec, self.status)
            }
            fn spec(&self) -> &$spec {
                &self.spec
            }
            fn status(&self) -> Option<&$status> {
                self.status.as_ref()
            }
            fn metadata_json(&self) -> serde_json::Result<serde_json::Value> {
                serde_json::to_value(&self.metadata)
            }
        }
    )*};
}

parts! {
    Server => ServerSpec, ServerStatus;
    ServerClaim => ServerClaimSpec, ServerClaimStatus;
    ServerClass => ServerClassSpec, ServerClassStatus;
    ServerQuota => ServerQuotaSpec, ServerQuotaStatus;
    ServerDisruptionBudget => ServerDisruptionBudgetSpec, ServerDisruptionBudgetStatus;
    Namespace => Option<NamespaceSpec>, NamespaceStatus;
}

impl<'de, K: Parts> Deserialize<'de> for Trimmed<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Wire::<K::Spec, K::Status, BTreeMap<String, String>>::deserialize(deserializer)?;
        let (metadata, labels, annotations) = wire.metadata.split();
        let mut metadata = metadata;
        metadata.labels = labels;
        metadata.annotations = annotations;
        Ok(Trimmed(K::from_parts(metadata, wire.spec, wire.status)))
    }
}

/// What the decisions read of a kind the binder caches as [`CachedObject`]s, beside its
/// spec, status and metadata: whether its labels, and which annotations. The cache keeps
/// nothing else, so what a tenant puts on its claims beyond that (labels, annotations,
/// this project's domain included) costs the operator no memory, and is never written.
/// The pure tests build their objects through this projection: a decision that read an
/// annotation not named here would fail the rows that set it (dropping `cleaning` from
/// a server's, or `bind-completed` from a claim's, fails 7 and 22).
pub trait Projected: Parts {
    /// Whether any decision reads the labels.
    const LABELS: bool;
    /// The annotations the decisions read.
    const ANNOTATIONS: &'static [&'static str];
}

/// A server's labels are what claims' selectors and classes match; its annotations are
/// the server controller's record of a bind and of a cleaning.
impl Projected for Server {
    const LABELS: bool = true;
    const ANNOTATIONS: &'static [&'static str] = &[
        ANNOTATION_BOUND_BY_CONTROLLER,
        ANNOTATION_BOUND_CLASS,
        ANNOTATION_CLEANING,
        ANNOTATION_CLEANING_GATES,
    ];
}

/// A claim's labels are what disruption budgets select; its annotations are the claim
/// controller's record of a pick and of a completed bind.
impl Projected for ServerClaim {
    const LABELS: bool = true;
    const ANNOTATIONS: &'static [&'static str] = &[ANNOTATION_PRE_BOUND, ANNOTATION_BIND_COMPLETED];
}

/// A server or a claim as the binder caches it: what the decisions read, and only that.
///
/// Its `metadata` (kube-runtime's store keys by it, and reads the name, namespace and
/// version) holds what the decisions read: name, namespace, uid, version, generation,
/// creation and deletion times, finalizers. It never holds owners, a generated-name
/// prefix or a grace period, and never labels or annotations: those are
/// [`CachedObject::labels`] and [`CachedObject::annotations`], sorted vectors, and only
/// those [`Projected`] names. The metadata is private so that no decision reads the
/// empty maps there: the methods of this type, which shadow `ResourceExt`'s, are the
/// only way to them.
///
/// The metadata is shared between clones until one of them changes it
/// ([`CachedObject::meta_mut`]): the classes' view of an object
/// (`ClassCatalog::resolve_server`, `ClassCatalog::resolve_ref`) is a clone that changes
/// its labels or its spec, and shares its metadata with the object as it is.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedObject<K: Parts> {
    metadata: Shared<ObjectMeta>,
    labels: Labels,
    annotations: Labels,
    pub spec: K::Spec,
    pub status: Option<K::Status>,
}

/// A [`Server`] as the binder caches it.
pub type CachedServer = CachedObject<Server>;
/// A [`ServerClaim`] as the binder caches it.
pub type CachedClaim = CachedObject<ServerClaim>;

impl<K: Parts> CachedObject<K> {
    /// An object of this name with `spec` and nothing else, as kube-derive's `new`.
    pub fn new(name: &str, spec: K::Spec) -> Self {
        let metadata = ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        };
        Self {
            metadata: Shared::new(metadata),
            labels: Labels::new(),
            annotations: Labels::new(),
            spec,
            status: None,
        }
    }

    /// The metadata, without labels and annotations ([`Self::labels`],
    /// [`Self::annotations`]).
    pub fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    pub fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }

    /// Whether `other` holds this object's metadata itself, not a copy of it.
    pub fn shares_metadata_with(&self, other: &Self) -> bool {
        Shared::ptr_eq(&self.metadata, &other.metadata)
    }

    /// The labels: none for a kind whose labels no decision reads ([`Projected::LABELS`]).
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    pub fn labels_mut(&mut self) -> &mut Labels {
        &mut self.labels
    }

    /// The annotations [`Projected::ANNOTATIONS`] names (no others are kept).
    pub fn annotations(&self) -> &Labels {
        &self.annotations
    }

    pub fn annotations_mut(&mut self) -> &mut Labels {
        &mut self.annotations
    }

    /// Every part, to be read whole (the model check's fingerprints): the metadata
    /// (whose labels and annotations are always `None`), the labels, the annotations,
    /// the spec and the status.
    pub fn parts(&self) -> (&ObjectMeta, &Labels, &Labels, &K::Spec, Option<&K::Status>) {
        let Self {
            metadata,
            labels,
            annotations,
            spec,
            status,
        } = self;
        (&**metadata, labels, annotations, spec, status.as_ref())
    }

    /// The object as its kind's type, labels and annotations back in its metadata.
    pub fn to_full(&self) -> K {
        let mut metadata = (*self.metadata).clone();
        metadata.labels = to_map(&self.labels);
        metadata.annotations = to_map(&self.annotations);
        K::from_parts(metadata, self.spec.clone(), self.status.clone())
    }
}

/// `K`'s metadata, labels and annotations as the cache keeps them: only what
/// [`Projected`] names, and none of who owns the object, how its name was generated or
/// its grace period, which no decision reads either (and so no patch names).
fn projected<K: Projected>(
    mut metadata: ObjectMeta,
    mut labels: Labels,
    mut annotations: Labels,
) -> (ObjectMeta, Labels, Labels) {
    metadata.owner_references = None;
    metadata.generate_name = None;
    metadata.self_link = None;
    metadata.deletion_grace_period_seconds = None;
    metadata.labels = None;
    metadata.annotations = None;
    if !K::LABELS {
        labels = Labels::new();
    }
    annotations.retain(|k, _| K::ANNOTATIONS.contains(&k.as_str()));
    (metadata, labels, annotations)
}

/// A map of the API's types: absent when empty, as the API server would send it.
fn to_map(labels: &Labels) -> Option<BTreeMap<String, String>> {
    (!labels.is_empty()).then(|| labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
}

impl<K: Projected> Parts for CachedObject<K> {
    type Spec = K::Spec;
    type Status = K::Status;

    /// Keeps what [`Projected`] names, as a watch would.
    fn from_parts(mut metadata: ObjectMeta, spec: K::Spec, status: Option<K::Status>) -> Self {
        let labels = metadata.labels.take().into_iter().flatten().collect();
        let annotations = metadata.annotations.take().into_iter().flatten().collect();
        let (metadata, labels, annotations) = projected::<K>(metadata, labels, annotations);
        Self {
            metadata: Shared::new(metadata),
            labels,
            annotations,
            spec,
            status,
        }
    }

    fn into_parts(self) -> (ObjectMeta, K::Spec, Option<K::Status>) {
        let full = self.to_full();
        full.into_parts()
    }

    fn spec(&self) -> &K::Spec {
        &self.spec
    }

    fn status(&self) -> Option<&K::Status> {
        self.status.as_ref()
    }

    /// The metadata with the labels and annotations in it, each always a map (an empty
    /// one when there are none): between two versions, a merge patch then removes just
    /// the keys that went, never the whole map.
    fn metadata_json(&self) -> serde_json::Result<serde_json::Value> {
        let object = |labels: &Labels| {
            let pairs = labels.iter();
            let pairs = pairs.map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())));
            serde_json::Value::Object(pairs.collect())
        };
        let mut json = serde_json::to_value(&self.metadata)?;
        json["labels"] = object(&self.labels);
        json["annotations"] = object(&self.annotations);
        Ok(json)
    }
}

impl<K: Projected + Resource> From<K> for CachedObject<K> {
    fn from(full: K) -> Self {
        let (metadata, spec, status) = full.into_parts();
        Self::from_parts(metadata, spec, status)
    }
}

impl<'de, K: Projected> Deserialize<'de> for CachedObject<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Wire::<K::Spec, K::Status, Labels>::deserialize(deserializer)?;
        let (metadata, labels, annotations) = wire.metadata.split();
        let (labels, annotations) = (labels.unwrap_or_default(), annotations.unwrap_or_default());
        let (metadata, labels, annotations) = projected::<K>(metadata, labels, annotations);
        Ok(Self {
            metadata: Shared::new(metadata),
            labels,
            annotations,
            spec: wire.spec,
            status: wire.status,
        })
    }
}

impl<K: Parts + Resource<DynamicType = ()>> Resource for CachedObject<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// An object on the wire; `apiVersion` and `kind` are the endpoint's. `M` is the type
/// its labels and annotations are read into.
#[derive(Deserialize)]
#[serde(bound(
    deserialize = "S: DeserializeOwned + Default, T: DeserializeOwned, M: DeserializeOwned + FromIterator<(String, String)>"
))]
struct Wire<S, T, M> {
    metadata: CachedMeta<M>,
    #[serde(default)]
    spec: S,
    status: Option<T>,
}

/// `ObjectMeta` without `managedFields` (an unknown key: skipped unbuilt), and with
/// only this project's annotations.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(bound(deserialize = "M: DeserializeOwned + FromIterator<(String, String)>"))]
struct CachedMeta<M> {
    #[serde(default, deserialize_with = "our_annotations")]
    annotations: Option<M>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<M>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl<M> CachedMeta<M> {
    /// The metadata without labels and annotations, then those.
    fn split(self) -> (ObjectMeta, Option<M>, Option<M>) {
        let metadata = ObjectMeta {
            creation_timestamp: self.creation_timestamp,
            deletion_grace_period_seconds: self.deletion_grace_period_seconds,
            deletion_timestamp: self.deletion_timestamp,
            finalizers: self.finalizers,
            generate_name: self.generate_name,
            generation: self.generation,
            name: self.name,
            namespace: self.namespace,
            owner_references: self.owner_references,
            resource_version: self.resource_version,
            self_link: self.self_link,
            uid: self.uid,
            ..ObjectMeta::default()
        };
        (metadata, self.labels, self.annotations)
    }
}

/// The annotations in this project's domain (the only ones a decision reads, tenants'
/// included); the values of the others, such as kubectl's
/// `last-applied-configuration` (a copy of the whole object), are skipped unbuilt.
fn our_annotations<'de, D, M>(deserializer: D) -> Result<Option<M>, D::Error>
where
    D: Deserializer<'de>,
    M: FromIterator<(String, String)>,
{
    struct Ours<M>(std::marker::PhantomData<M>);
    impl<'de, M: FromIterator<(String, String)>> Visitor<'de> for Ours<M> {
        type Value = Option<M>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of annotations")
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut ours = Vec::new();
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                if is_ours(&key) {
                    ours.push((key.into_owned(), map.next_value()?));
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(Some(ours.into_iter().collect()))
        }
    }
    deserializer.deserialize_option(Ours(std::marker::PhantomData))
}

/// Whether an annotation key is in this project's domain.
fn is_ours(key: &str) -> bool {
    key.split_once('/')
        .is_some_and(|(prefix, _)| in_our_domain(prefix))
}

impl<K: Resource> Resource for Trimmed<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A server as the API server sends it: with `managedFields` and a kubectl
    /// annotation.
    fn on_the_wire() -> serde_json::Value {
        json!({
            "apiVersion": "metal.binder.dev/v1alpha1",
            "kind": "Server",
            "metadata": {
                "name": "s1",
                "uid": "u1",
                "resourceVersion": "7",
                "generation": 2,
                "creationTimestamp": "2026-12-05T13:02:12Z",
                "labels": {"rack": "r1"},
                "finalizers": ["metal.binder.dev/server-protection"],
                "generateName": "s",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u9"}],
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": "{\"a\": 1}",
                    "metal.binder.dev/bound-by-controller": "yes",
                    "example.com/other": "x",
                },
                "managedFields": [{
                    "manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:unclaimable": {}}},
                }],
            },
            "spec": {"unclaimable": true, "serverClaimRef": {"namespace": "t", "name": "c"}},
            "status": {"phase": "Available"},
        })
    }

    #[test]
    fn a_lean_object_is_the_full_one_without_managed_fields_and_foreign_annotations() {
        let lean: Trimmed<Server> = serde_json::from_value(on_the_wire()).unwrap();
        let mut full: Server = serde_json::from_value(on_the_wire()).unwrap();
        full.metadata.managed_fields = None;
        full.metadata
            .annotations
            .as_mut()
            .unwrap()
            .retain(|k, _| is_ours(k));
        assert_eq!(lean.0, full);
        assert_eq!(
            lean.0.metadata.annotations,
            Some([("metal.binder.dev/bound-by-controller".into(), "yes".into())].into())
        );
    }

    #[test]
    fn a_cached_server_is_the_lean_one_with_its_labels_and_annotations_apart() {
        let cached: CachedServer = serde_json::from_value(on_the_wire()).unwrap();
        let Trimmed(lean) = serde_json::from_value::<Trimmed<Server>>(on_the_wire()).unwrap();
        assert_eq!(cached.meta().labels, None, "never in the metadata");
        assert_eq!(cached.meta().annotations, None, "never in the metadata");
        assert_eq!(cached.labels().get("rack").map(String::as_str), Some("r1"));
        assert_eq!(
            cached.annotations().iter().collect::<Vec<_>>(),
            [(
                &"metal.binder.dev/bound-by-controller".to_string(),
                &"yes".to_string()
            )]
        );
        let mut lean = lean;
        lean.metadata.owner_references = None;
        lean.metadata.generate_name = None;
        assert_eq!(cached.to_full(), lean, "nothing else is lost");
        assert_eq!(CachedServer::from(lean), cached, "as a watch reads it");
    }

    #[test]
    fn a_cached_objects_metadata_json_holds_its_labels_and_annotations_as_maps() {
        let cached: CachedServer = serde_json::from_value(on_the_wire()).unwrap();
        let json = cached.metadata_json().unwrap();
        assert_eq!(json["labels"], json!({"rack": "r1"}));
        assert_eq!(
            json["annotations"],
            json!({"metal.binder.dev/bound-by-controller": "yes"})
        );
        let mut bare = cached;
        bare.labels_mut().clear();
        bare.annotations_mut().clear();
        let json = bare.metadata_json().unwrap();
        assert_eq!(
            (&json["labels"], &json["annotations"]),
            (&json!({}), &json!({}))
        );
        assert_eq!(json["name"], "s1");
    }

    /// A claim as a tenant may write it: labels, and annotations in and out of this
    /// project's domain, one the decisions read on servers only.
    fn tenant_claim() -> serde_json::Value {
        json!({
            "metadata": {
                "name": "c", "namespace": "t", "resourceVersion": "3",
                "labels": {"app": "db", "team": "a"},
                "annotations": {
                    "metal.binder.dev/pre-bound": "yes",
                    "metal.binder.dev/bound-by-controller": "yes",
                    "metal.binder.dev/anything": "x".repeat(1000),
                    "example.com/ticket": "T-9",
                },
            },
            "spec": {"serverRef": {"name": "s1"}},
        })
    }

    #[test]
    fn a_cached_claim_keeps_its_labels_and_only_the_annotations_a_decision_reads() {
        let cached: CachedClaim = serde_json::from_value(tenant_claim()).unwrap();
        let wire = tenant_claim();
        let labels = wire["metadata"]["labels"]
            .as_object()
            .map_or(0, |l| l.len());
        assert_eq!(
            cached.labels().len(),
            labels,
            "a claim's labels are what disruption budgets select"
        );
        let kept: Vec<&str> = cached
            .annotations()
            .iter()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(kept, ["metal.binder.dev/pre-bound"]);
        let full: ServerClaim = serde_json::from_value(tenant_claim()).unwrap();
        assert_eq!(CachedClaim::from(full), cached, "as a watch reads it");
        let server: CachedServer = serde_json::from_value(on_the_wire()).unwrap();
        assert_eq!(server.labels().len(), 1, "a server's labels are read");
    }

    #[test]
    fn only_annotations_in_this_projects_domain_are_kept() {
        use crate::api::names::{ANNOTATION_DEFAULT_CLASS, ANNOTATION_PRE_BOUND};
        let keys = [
            ANNOTATION_PRE_BOUND,
            ANNOTATION_DEFAULT_CLASS,
            "kubectl.kubernetes.io/last-applied-configuration",
            "other.example.com/owner",
            "evilmetal.binder.dev/x",
            "metal.binder.dev.example.com/x",
            "no-domain",
        ];
        let annotations: serde_json::Map<String, serde_json::Value> =
            keys.iter().map(|k| (k.to_string(), json!("v"))).collect();
        let wire = json!({"metadata": {"name": "c", "annotations": annotations}, "spec": {}});
        let claim: Trimmed<ServerClaim> = serde_json::from_value(wire).unwrap();
        let kept: Vec<&str> = claim
            .0
            .metadata
            .annotations
            .iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(kept, [ANNOTATION_PRE_BOUND, ANNOTATION_DEFAULT_CLASS]);
    }

    #[test]
    fn absent_parts_read_as_absent() {
        let bare = json!({"metadata": {"name": "s1", "annotations": null}, "spec": {}});
        let lean: Trimmed<Server> = serde_json::from_value(bare).unwrap();
        assert_eq!(lean.0.metadata.annotations, None);
        assert_eq!(lean.0.status, None);
        let ns: Trimmed<Namespace> =
            serde_json::from_value(json!({"metadata": {"name": "t", "labels": {"a": "b"}}}))
                .unwrap();
        assert_eq!(
            ns.0.metadata.labels,
            Some([("a".into(), "b".into())].into())
        );
    }
}
