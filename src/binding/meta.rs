//! Small, total accessors for object metadata, so decisions never unwrap.

use std::sync::Arc;

use kube::Resource;

use crate::api::names::{ANNOTATION_BIND_COMPLETED, ANNOTATION_PRE_BOUND, ANNOTATION_YES};
use crate::api::{CachedClaim, CachedObject, Labels, Parts, Projected, ServerClaimRef};

/// A claim's namespace and name: how the binding core keys claims. One key is held by
/// a dozen maps per claim (the catalog, the waiting claims' queues and counts, the picks
/// in flight), so it is shared, not copied: a clone is a pointer (docs/performance.md,
/// "Memory, measured"). Compared, ordered and hashed by namespace, then name.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClaimKey(Arc<KeyParts>);

/// What a [`ClaimKey`] names (read through the key: `key.namespace`, `key.name`).
#[derive(Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyParts {
    pub namespace: String,
    pub name: String,
}

impl std::ops::Deref for ClaimKey {
    type Target = KeyParts;
    fn deref(&self) -> &KeyParts {
        &self.0
    }
}

impl std::fmt::Debug for ClaimKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaimKey")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .finish()
    }
}

impl ClaimKey {
    pub fn of(namespace: &str, name: &str) -> Self {
        Self(Arc::new(KeyParts {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }))
    }

    /// The claim a server's `serverClaimRef` names.
    pub fn of_ref(r: &ServerClaimRef) -> Self {
        Self::of(&r.namespace, &r.name)
    }
}

impl std::fmt::Display for ClaimKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

pub fn name<K: Resource>(obj: &K) -> &str {
    obj.meta().name.as_deref().unwrap_or("")
}

pub fn namespace<K: Resource>(obj: &K) -> &str {
    obj.meta().namespace.as_deref().unwrap_or("")
}

pub fn uid<K: Resource>(obj: &K) -> Option<&str> {
    obj.meta().uid.as_deref()
}

pub fn labels<K: Parts>(obj: &CachedObject<K>) -> &Labels {
    obj.labels()
}

pub fn is_deleting<K: Resource>(obj: &K) -> bool {
    obj.meta().deletion_timestamp.is_some()
}

/// Whether the annotation is present with the value `yes`.
pub fn has_annotation<K: Parts>(obj: &CachedObject<K>, key: &str) -> bool {
    obj.annotations()
        .get(key)
        .is_some_and(|v| v == ANNOTATION_YES)
}

/// Sets the annotation to `yes`. Only one the cache keeps: a plan writing one it drops
/// would find it missing on every read, and write it again.
pub fn set_annotation<K: Projected>(obj: &mut CachedObject<K>, key: &str) {
    debug_assert!(K::ANNOTATIONS.contains(&key), "{key} is not cached");
    obj.annotations_mut()
        .insert(key.to_string(), ANNOTATION_YES.to_string());
}

/// Sets an annotation of ours to a value of its own (a record, not a flag).
pub fn set_annotation_to<K: Projected>(obj: &mut CachedObject<K>, key: &str, value: String) {
    debug_assert!(K::ANNOTATIONS.contains(&key), "{key} is not cached");
    obj.annotations_mut().insert(key.to_string(), value);
}

pub fn remove_annotation<K: Parts>(obj: &mut CachedObject<K>, key: &str) {
    obj.annotations_mut().remove(key);
}

pub fn has_finalizer<K: Resource>(obj: &K, finalizer: &str) -> bool {
    obj.meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

pub fn add_finalizer<K: Resource>(obj: &mut K, finalizer: &str) {
    if !has_finalizer(obj, finalizer) {
        obj.meta_mut()
            .finalizers
            .get_or_insert_with(Vec::new)
            .push(finalizer.to_string());
    }
}

pub fn remove_finalizer<K: Resource>(obj: &mut K, finalizer: &str) {
    if let Some(finalizers) = obj.meta_mut().finalizers.as_mut() {
        finalizers.retain(|x| x != finalizer);
    }
}

/// Whether a claim is on the bound path (both sides agreed once).
pub fn is_bind_completed<K: Parts>(obj: &CachedObject<K>) -> bool {
    has_annotation(obj, ANNOTATION_BIND_COMPLETED)
}

/// Whether the claim controller (not a user) chose the claim's `serverRef`.
pub fn is_controller_chosen(claim: &CachedClaim) -> bool {
    has_annotation(claim, ANNOTATION_PRE_BOUND)
}

/// The reference that binds a server to this claim object.
pub fn claim_ref_of(claim: &CachedClaim) -> ServerClaimRef {
    ServerClaimRef {
        namespace: namespace(claim).to_string(),
        name: name(claim).to_string(),
        uid: uid(claim).map(str::to_string),
    }
}
