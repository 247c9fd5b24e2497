//! The built-in kinds the controllers and kubectl need: Namespaces, Events (core/v1 and
//! events.k8s.io/v1 over one collection), Leases and CustomResourceDefinitions.
//! They are checked by decoding into the k8s-openapi type, which also canonicalises
//! them (unknown fields dropped, as the real server's decoder does).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Namespace};
use k8s_openapi::api::events::v1::Event as EventV1;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::events;
use super::meta::path_get;
use super::registry::{Flavor, PrinterColumn, Registry, ResourceDef, storage_key};
use super::schema::FieldError;
use super::status::ApiError;

/// The namespaces present at start, as in a fresh cluster.
pub(crate) const INITIAL_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// `metadata.creationTimestamp`'s description, which the default table convertor gives
/// its `Created At` column.
const CREATION_TIMESTAMP_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// Namespaces the real server refuses to delete.
pub(crate) const UNDELETABLE_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

#[allow(clippy::too_many_arguments)]
fn def(
    group: &str,
    version: &str,
    plural: &str,
    singular: &str,
    kind: &str,
    namespaced: bool,
    short: &[&str],
    status: bool,
    columns: Vec<PrinterColumn>,
    flavor: Flavor,
    storage_plural: &str,
) -> ResourceDef {
    let storage_group = if matches!(flavor, Flavor::EventsV1) {
        ""
    } else {
        group
    };
    ResourceDef {
        group: group.into(),
        version: version.into(),
        plural: plural.into(),
        singular: singular.into(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        namespaced,
        short_names: short.iter().map(|s| (*s).to_owned()).collect(),
        categories: Vec::new(),
        status_subresource: status,
        columns,
        flavor,
        storage: storage_key(storage_group, storage_plural),
    }
}

/// Registers every built-in resource.
pub(crate) fn register(reg: &mut Registry) {
    let age = || PrinterColumn::new("Age", "date", ".metadata.creationTimestamp");
    reg.insert(def(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        false,
        &["ns"],
        true,
        vec![
            PrinterColumn::new("Status", "string", ".status.phase"),
            age(),
        ],
        Flavor::Namespace,
        "namespaces",
    ));
    reg.insert(def(
        "",
        "v1",
        "events",
        "event",
        "Event",
        true,
        &["ev"],
        false,
        Vec::new(),
        Flavor::CoreEvent,
        "events",
    ));
    reg.insert(def(
        "events.k8s.io",
        "v1",
        "events",
        "event",
        "Event",
        true,
        &["ev"],
        false,
        Vec::new(),
        Flavor::EventsV1,
        "events",
    ));
    reg.insert(def(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        true,
        &[],
        false,
        vec![
            PrinterColumn::new("Holder", "string", ".spec.holderIdentity"),
            age(),
        ],
        Flavor::Lease,
        "leases",
    ));
    reg.insert(def(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
        true,
        vec![PrinterColumn {
            description: CREATION_TIMESTAMP_DESCRIPTION.into(),
            ..PrinterColumn::new("Created At", "date", ".metadata.creationTimestamp")
        }],
        Flavor::Crd,
        "customresourcedefinitions",
    ));
}

/// Paths of fields in `input` that the canonical form dropped (unknown to the type).
fn dropped_fields(input: &Value, canonical: &Value, prefix: &str, out: &mut Vec<String>) {
    match (input, canonical) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match b.get(k) {
                    None if !v.is_null() => out.push(path),
                    None => {}
                    Some(w) => dropped_fields(v, w, &path, out),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                dropped_fields(v, w, &format!("{prefix}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn roundtrip<T: DeserializeOwned + Serialize>(
    obj: &Value,
    kind: &str,
    version: &str,
) -> Result<(Value, Vec<String>), ApiError> {
    let typed: T = serde_json::from_value(obj.clone()).map_err(|e| {
        ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {e}"
        ))
    })?;
    let canonical = serde_json::to_value(&typed)
        .map_err(|e| ApiError::internal(format!("re-encoding {kind}: {e}")))?;
    let mut dropped = Vec::new();
    dropped_fields(obj, &canonical, "", &mut dropped);
    Ok((canonical, dropped))
}

/// Decodes a built-in object (in its view form) into its k8s-openapi type and back.
/// Returns the canonical object and the unknown fields that were dropped.
pub(crate) fn canonicalize(
    def: &ResourceDef,
    obj: &Value,
) -> Result<(Value, Vec<String>), ApiError> {
    let v = def.version.as_str();
    match def.flavor {
        Flavor::Namespace => roundtrip::<Namespace>(obj, "Namespace", v),
        Flavor::CoreEvent => roundtrip::<CoreEvent>(obj, "Event", v),
        Flavor::EventsV1 => roundtrip::<EventV1>(obj, "Event", v),
        Flavor::Lease => roundtrip::<Lease>(obj, "Lease", v),
        Flavor::Crd => roundtrip::<CustomResourceDefinition>(obj, "CustomResourceDefinition", v),
        Flavor::Custom { .. } => Ok((obj.clone(), Vec::new())),
    }
}

/// What a built-in kind's own validation finds wrong with an object in view form
/// (canonical): an event's text over the limit ([`events::validate`]).
pub(crate) fn validate(def: &ResourceDef, view: &Value) -> Vec<FieldError> {
    match def.flavor {
        Flavor::CoreEvent => events::validate(view),
        Flavor::EventsV1 => events::validate(&events::v1_to_core(view)),
        _ => Vec::new(),
    }
}

/// The form clients see through `def` of an object in stored form.
pub(crate) fn to_view(def: &ResourceDef, stored: &Value) -> Value {
    match &def.flavor {
        Flavor::EventsV1 => events::core_to_v1(stored),
        Flavor::CoreEvent => events::core_view(stored),
        Flavor::Custom { .. } => {
            let mut v = stored.clone();
            let want = def.api_version();
            if v.get("apiVersion").and_then(Value::as_str) != Some(want.as_str())
                && let Some(m) = v.as_object_mut()
            {
                m.insert("apiVersion".into(), Value::String(want));
            }
            v
        }
        _ => stored.clone(),
    }
}

/// Does `to_view` leave the stored form as is? (Then watchers can share one encoding.)
pub(crate) fn view_is_identity(def: &ResourceDef, stored: &Value) -> bool {
    match &def.flavor {
        Flavor::EventsV1 | Flavor::CoreEvent => false,
        Flavor::Custom { .. } => stored
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| def.is_api_version(v)),
        _ => true,
    }
}

/// The stored form of an object written through `def`.
pub(crate) fn from_view(def: &ResourceDef, view: Value) -> Value {
    match def.flavor {
        Flavor::EventsV1 => events::v1_to_core(&view),
        _ => view,
    }
}

/// The value of a field selector term on a stored object, or `None` if `def` does not
/// support that field (the real server answers 400 then).
pub(crate) fn field_value(def: &ResourceDef, stored: &Value, field: &str) -> Option<String> {
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    match field {
        "metadata.name" => return Some(text(path_get(stored, "metadata.name"))),
        "metadata.namespace" if def.namespaced || def.is_custom() => {
            return Some(text(path_get(stored, "metadata.namespace")));
        }
        _ => {}
    }
    match &def.flavor {
        Flavor::CoreEvent | Flavor::EventsV1 => events::field(stored, field),
        Flavor::Namespace if field == "status.phase" => {
            Some(text(path_get(stored, "status.phase")))
        }
        Flavor::Custom { selectable, .. } if selectable.iter().any(|f| f == field) => {
            Some(text(path_get(stored, field)))
        }
        _ => None,
    }
}
