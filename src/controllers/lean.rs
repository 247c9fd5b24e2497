//! Objects as the watches read them off the wire ([`Lean`]): every field but
//! `managedFields`, and of the annotations only this project's. Both are skipped while the
//! JSON is parsed, not built and dropped after: `managedFields` (one entry per writer,
//! each a tree of JSON values) comes with every watch event, and building and dropping it
//! was about a tenth of the operator's CPU (docs/performance.md, item 7 of "Placement at
//! a flat cost"). No decision reads them, and the writes are merge patches of what a plan
//! changed (`super::writes`, which reads only the version of its answers), so what the
//! cache lacks is never sent, and never erased.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Namespace, NamespaceSpec, NamespaceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use serde::de::{DeserializeOwned, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::api::names::in_our_domain;
use crate::api::{
    Server, ServerClaim, ServerClaimSpec, ServerClaimStatus, ServerClass, ServerClassSpec,
    ServerClassStatus, ServerQuota, ServerQuotaSpec, ServerQuotaStatus, ServerSpec, ServerStatus,
};

/// A `K` read lean; `.0` is the object.
#[derive(Clone, Debug)]
pub struct Lean<K>(pub K);

/// A kind made of metadata, spec and status, as every kind the controllers read is.
pub trait Parts: Sized {
    type Spec: Serialize + DeserializeOwned + Default;
    type Status: Serialize + DeserializeOwned;
    fn from_parts(metadata: ObjectMeta, spec: Self::Spec, status: Option<Self::Status>) -> Self;
    fn spec(&self) -> &Self::Spec;
    fn status(&self) -> Option<&Self::Status>;
}

macro_rules! parts {
    ($($kind:ty => $spec:ty, $status:ty;)*) => {$(
        impl Parts for $kind {
            type Spec = $spec;
            type Status = $status;
            fn from_parts(metadata: ObjectMeta, spec: $spec, status: Option<$status>) -> Self {
                Self { metadata, spec, status }
            }
            fn spec(&self) -> &$spec {
                &self.spec
            }
            fn status(&self) -> Option<&$status> {
                self.status.as_ref()
            }
        }
    )*};
}

parts! {
    Server => ServerSpec, ServerStatus;
    ServerClaim => ServerClaimSpec, ServerClaimStatus;
    ServerClass => ServerClassSpec, ServerClassStatus;
    ServerQuota => ServerQuotaSpec, ServerQuotaStatus;
    Namespace => Option<NamespaceSpec>, NamespaceStatus;
}

impl<'de, K: Parts> Deserialize<'de> for Lean<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Wire::<K::Spec, K::Status>::deserialize(deserializer)?;
        Ok(Lean(K::from_parts(
            wire.metadata.into(),
            wire.spec,
            wire.status,
        )))
    }
}

/// An object on the wire; `apiVersion` and `kind` are the endpoint's.
#[derive(Deserialize)]
#[serde(bound(deserialize = "S: DeserializeOwned + Default, T: DeserializeOwned"))]
struct Wire<S, T> {
    metadata: LeanMeta,
    #[serde(default)]
    spec: S,
    status: Option<T>,
}

/// `ObjectMeta` without `managedFields` (an unknown key: skipped unbuilt), and with
/// only this project's annotations.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeanMeta {
    #[serde(default, deserialize_with = "our_annotations")]
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl From<LeanMeta> for ObjectMeta {
    fn from(m: LeanMeta) -> Self {
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: None,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: m.self_link,
            uid: m.uid,
        }
    }
}

/// The annotations in this project's domain (the only ones a decision reads, tenants'
/// included); the values of the others, such as kubectl's
/// `last-applied-configuration` (a copy of the whole object), are skipped unbuilt.
fn our_annotations<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    struct Ours;
    impl<'de> Visitor<'de> for Ours {
        type Value = Option<BTreeMap<String, String>>;
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
            let mut ours = BTreeMap::new();
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                if is_ours(&key) {
                    ours.insert(key.into_owned(), map.next_value()?);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(Some(ours))
        }
    }
    deserializer.deserialize_option(Ours)
}

/// Whether an annotation key is in this project's domain.
fn is_ours(key: &str) -> bool {
    key.split_once('/')
        .is_some_and(|(prefix, _)| in_our_domain(prefix))
}

impl<K: Resource> Resource for Lean<K> {
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
        let lean: Lean<Server> = serde_json::from_value(on_the_wire()).unwrap();
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
        let claim: Lean<ServerClaim> = serde_json::from_value(wire).unwrap();
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
        let lean: Lean<Server> = serde_json::from_value(bare).unwrap();
        assert_eq!(lean.0.metadata.annotations, None);
        assert_eq!(lean.0.status, None);
        let ns: Lean<Namespace> =
            serde_json::from_value(json!({"metadata": {"name": "t", "labels": {"a": "b"}}}))
                .unwrap();
        assert_eq!(
            ns.0.metadata.labels,
            Some([("a".into(), "b".into())].into())
        );
    }
}
