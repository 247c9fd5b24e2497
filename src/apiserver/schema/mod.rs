//! Admission of custom resources against a CRD version's `openAPIV3Schema`:
//! defaulting, pruning of unknown fields, structural validation and CEL
//! `x-kubernetes-validations` (including transition rules with `oldSelf`).
//!
//! This module is pure (no I/O); the HTTP layer turns its errors into a
//! `422 Invalid` metav1 `Status` (or `400` for unknown fields under
//! `fieldValidation=Strict`).

use std::sync::Arc;

use serde_json::Value;

mod cel;
mod defaults;
mod format;
mod node;
mod path;
mod prune;
mod structural;
#[cfg(test)]
mod tests;

use node::Node;

/// One field-level error, formatted the way the Kubernetes API server formats them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field path, e.g. `spec.serverRef` or `spec.taints[0].effect`.
    pub field: String,
    /// What kind of problem it is.
    pub kind: FieldErrorKind,
    /// The offending value as the API server renders it (`"object"`, `"Foo"`, `3`), if any.
    pub bad_value: Option<String>,
    /// A human-readable detail, e.g. the CEL rule's message.
    pub detail: String,
}

/// The kinds of field errors the API server reports, as in `k8s.io/apimachinery/pkg/util/validation/field`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    Required,
    Invalid,
    NotSupported,
    TypeInvalid,
    Forbidden,
    TooLong,
    TooMany,
    Duplicate,
}

impl FieldErrorKind {
    /// The `metav1.StatusCause.reason` for this kind (`FieldValueRequired`, ...).
    pub fn cause_reason(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::TypeInvalid => "FieldValueTypeInvalid",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Duplicate => "FieldValueDuplicate",
        }
    }
}

impl std::fmt::Display for FieldError {
    /// `spec.serverRef: Invalid value: "object": serverRef may not be switched`
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Invalid => "Invalid value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::TypeInvalid => "Invalid value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
            FieldErrorKind::Duplicate => "Duplicate value",
        };
        write!(f, "{}: {kind}", self.field)?;
        if let Some(v) = &self.bad_value {
            write!(f, ": {v}")?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// A CRD version's schema, compiled once when the CRD is installed.
#[derive(Debug, Clone)]
pub struct CompiledSchema {
    schema: Value,
    root: Arc<Node>,
}

impl CompiledSchema {
    /// Compiles `spec.versions[].schema.openAPIV3Schema`. Fails on a schema (or a CEL rule)
    /// that cannot be compiled, so a bad CRD is refused at install time.
    ///
    /// Error paths start at `openAPIV3Schema` (e.g.
    /// `openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule`); the caller
    /// prefixes them with `spec.versions[i].schema.` as the real server reports them.
    pub fn new(open_api_v3_schema: &Value) -> Result<Self, Vec<FieldError>> {
        let mut errs = Vec::new();
        let root = Node::compile_root(open_api_v3_schema, &mut errs);
        if !errs.is_empty() {
            return Err(errs);
        }
        Ok(Self {
            schema: open_api_v3_schema.clone(),
            root: Arc::new(root),
        })
    }

    /// The schema as given.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Admits `obj` (a whole object: apiVersion, kind, metadata, spec, status) on create
    /// (`old` is `None`) or update (`old` is the stored object, for transition rules):
    /// prunes fields the schema does not know (except under
    /// `x-kubernetes-preserve-unknown-fields` and `metadata`, which the server owns),
    /// applies defaults, then validates types, required, enum, formats and CEL rules.
    ///
    /// Returns the paths of pruned unknown fields (so the caller can reject them under
    /// `fieldValidation=Strict` or warn), or every field error found.
    ///
    /// The steps and their order are apiextensions-apiserver's: pruning and dropping of
    /// non-nullable `null`s (decoding), defaulting, then OpenAPI validation, embedded-resource
    /// and list-type invariants and, only if none of those found a type/required/enum/size error, the
    /// CEL rules (else one `<nil>: Invalid value: "null": some validation rules were not
    /// checked ...` error says so).
    pub fn admit(
        &self,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, Vec<FieldError>> {
        let root = &*self.root;
        let pruned = prune::prune_root(obj, root);
        prune::prune_non_nullable_nulls(obj, root, true);
        defaults::apply(obj, root, true);

        // The stored object is defaulted when read back, as the real server does.
        let old = old.map(|o| {
            let mut o = o.clone();
            defaults::apply(&mut o, root, true);
            o
        });

        let mut errs = Vec::new();
        structural::validate(root, obj, old.as_ref(), "", &mut errs);
        structural::validate_embedded(root, obj, "", true, &mut errs);
        structural::validate_list_types(root, obj, "", &mut errs);
        if errs.iter().any(|e| e.kind.blocks_cel()) {
            errs.push(FieldError {
                field: path::NIL_PATH.into(),
                kind: FieldErrorKind::Invalid,
                bad_value: Some(path::go_quote("null")),
                detail: "some validation rules were not checked because the object was invalid; \
                         correct the existing errors to complete validation"
                    .into(),
            });
        } else {
            cel::validate(root, obj, old.as_ref(), &mut errs);
        }
        if errs.is_empty() {
            Ok(pruned)
        } else {
            Err(errs)
        }
    }
}

impl FieldErrorKind {
    /// The OpenAPI errors after which the real server does not run CEL rules (`hasBlockingErr`).
    fn blocks_cel(self) -> bool {
        matches!(
            self,
            Self::NotSupported | Self::Required | Self::TooLong | Self::TooMany | Self::TypeInvalid
        )
    }
}

/// JSON equality with numbers compared by value (`1 == 1.0`), as Go sees decoded JSON.
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

#[allow(dead_code)]
fn assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<CompiledSchema>();
}
