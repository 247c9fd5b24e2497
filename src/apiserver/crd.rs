//! CustomResourceDefinitions: turning a CRD object into the resources it serves, and the
//! status the real server's controllers would give it (NamesAccepted, Established).

use std::sync::Arc;

use serde_json::{Value, json};

use super::crd_finalizer;
use super::meta::{name_of, now_rfc3339, path_get};
use super::registry::{Flavor, PrinterColumn, ResourceDef, storage_key};
use super::schema::{CompiledSchema, FieldError, FieldErrorKind};
use super::status::ApiError;

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn s<'a>(v: &'a Value, path: &str) -> &'a str {
    path_get(v, path).and_then(Value::as_str).unwrap_or("")
}

fn invalid(name: &str, errors: Vec<FieldError>) -> ApiError {
    ApiError::invalid(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        name,
        &errors,
    )
}

fn required(field: &str) -> FieldError {
    FieldError {
        field: field.into(),
        kind: FieldErrorKind::Required,
        bad_value: None,
        detail: String::new(),
    }
}

/// The resources a CRD serves, one per served version; validates what the server
/// cannot do without (names, scope, one storage version, compilable schemas).
pub(crate) fn resource_defs(crd: &Value) -> Result<Vec<ResourceDef>, ApiError> {
    let name = name_of(crd).to_owned();
    let group = s(crd, "spec.group");
    let plural = s(crd, "spec.names.plural");
    let kind = s(crd, "spec.names.kind");
    let scope = s(crd, "spec.scope");
    let mut errors = Vec::new();
    for (value, field) in [
        (group, "spec.group"),
        (plural, "spec.names.plural"),
        (kind, "spec.names.kind"),
        (scope, "spec.scope"),
    ] {
        if value.is_empty() {
            errors.push(required(field));
        }
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        errors.push(FieldError {
            field: "metadata.name".into(),
            kind: FieldErrorKind::Invalid,
            bad_value: Some(format!("{name:?}")),
            detail: "must be spec.names.plural+\".\"+spec.group".into(),
        });
    }
    if !scope.is_empty() && scope != "Namespaced" && scope != "Cluster" {
        errors.push(FieldError {
            field: "spec.scope".into(),
            kind: FieldErrorKind::NotSupported,
            bad_value: Some(format!("{scope:?}")),
            detail: "supported values: \"Cluster\", \"Namespaced\"".into(),
        });
    }
    let versions = path_get(crd, "spec.versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        errors.push(required("spec.versions"));
    }
    let storage_count = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if !versions.is_empty() && storage_count != 1 {
        errors.push(FieldError {
            field: "spec.versions".into(),
            kind: FieldErrorKind::Invalid,
            bad_value: None,
            detail: "must have exactly one version marked as storage version".into(),
        });
    }
    let mut defs = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let version = s(v, "name");
        if version.is_empty() {
            errors.push(required(&format!("spec.versions[{i}].name")));
            continue;
        }
        let schema = match path_get(v, "schema.openAPIV3Schema") {
            Some(raw) => match CompiledSchema::new(raw) {
                Ok(c) => Some(Arc::new(c)),
                Err(errs) => {
                    let prefix = format!("spec.versions[{i}].schema.openAPIV3Schema");
                    errors.extend(errs.into_iter().map(|mut e| {
                        e.field = if e.field.is_empty() {
                            prefix.clone()
                        } else {
                            format!("{prefix}.{}", e.field)
                        };
                        e
                    }));
                    None
                }
            },
            None => None,
        };
        if v.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let mut columns: Vec<PrinterColumn> = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        name: s(c, "name").into(),
                        type_: s(c, "type").into(),
                        format: s(c, "format").into(),
                        description: s(c, "description").into(),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        json_path: s(c, "jsonPath").into(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        if columns.is_empty() {
            // What the real server shows for a CRD without printer columns.
            columns.push(PrinterColumn::new(
                "Age",
                "date",
                ".metadata.creationTimestamp",
            ));
        }
        let selectable = v
            .get("selectableFields")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|f| s(f, "jsonPath").trim_start_matches('.').to_owned())
                    .collect()
            })
            .unwrap_or_default();
        let singular = match s(crd, "spec.names.singular") {
            "" => kind.to_lowercase(),
            other => other.to_owned(),
        };
        defs.push(ResourceDef {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            singular,
            kind: kind.into(),
            list_kind: match s(crd, "spec.names.listKind") {
                "" => format!("{kind}List"),
                other => other.to_owned(),
            },
            namespaced: scope == "Namespaced",
            short_names: strings(path_get(crd, "spec.names.shortNames")),
            categories: strings(path_get(crd, "spec.names.categories")),
            status_subresource: path_get(v, "subresources.status").is_some(),
            columns,
            flavor: Flavor::Custom {
                crd: name.clone(),
                schema,
                selectable,
            },
            storage: storage_key(group, plural),
        });
    }
    if errors.is_empty() {
        Ok(defs)
    } else {
        Err(invalid(&name, errors))
    }
}

/// Sets the status the apiextensions controllers would: names accepted, established,
/// stored versions. Condition times are kept while a condition does not change.
pub(crate) fn set_status(crd: &mut Value, old: Option<&Value>) {
    let now = now_rfc3339();
    let old_time = |ty: &str| -> Option<Value> {
        old?.get("status")?
            .get("conditions")?
            .as_array()?
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))?
            .get("lastTransitionTime")
            .cloned()
    };
    let condition = |ty: &str, reason: &str, message: &str| {
        json!({
            "type": ty,
            "status": "True",
            "lastTransitionTime": old_time(ty).unwrap_or_else(|| json!(now)),
            "reason": reason,
            "message": message,
        })
    };
    let mut stored = old
        .map(|o| strings(path_get(o, "status.storedVersions")))
        .unwrap_or_default();
    if let Some(storage) = path_get(crd, "spec.versions")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name"))
        .and_then(Value::as_str)
        && !stored.iter().any(|s| s == storage)
    {
        stored.push(storage.to_owned());
    }
    let names = path_get(crd, "spec.names").cloned().unwrap_or(json!({}));
    let mut conditions = vec![
        condition("NamesAccepted", "NoConflicts", "no conflicts found"),
        condition(
            "Established",
            "InitialNamesAccepted",
            "the initial names have been accepted",
        ),
    ];
    // The CRD finalizer's condition outlives any update made while it terminates.
    conditions.extend(old.and_then(crd_finalizer::terminating_condition));
    let status = json!({
        "conditions": conditions,
        "acceptedNames": names,
        "storedVersions": stored,
    });
    if let Some(m) = crd.as_object_mut() {
        m.insert("status".into(), status);
    }
}
