//! Errors as the API server sends them: a metav1 `Status` with the right code and
//! reason, so clients (kube's `ErrorResponse`, kubectl) react as they would to a real
//! server (409 → retry, 410 → relist, 422 → show causes).

use serde_json::{Value, json};

use super::schema::FieldError;

/// A failed request, rendered as a `Status` object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// Seconds for a `Retry-After` header (429 and friends).
    pub retry_after: Option<u64>,
}

/// `widgets.test.example.dev` or `namespaces` (core group): how errors name a resource.
pub(crate) fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_owned()
    } else {
        format!("{plural}.{group}")
    }
}

fn details(group: &str, kind: &str, name: &str) -> Value {
    let mut d = serde_json::Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    if !kind.is_empty() {
        d.insert("kind".into(), json!(kind));
    }
    Value::Object(d)
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self {
            details: Some(details(group, plural, name)),
            ..Self::new(
                404,
                "NotFound",
                format!("{} \"{name}\" not found", qualified(group, plural)),
            )
        }
    }

    /// A path the server does not serve at all.
    pub fn no_route() -> Self {
        Self {
            details: Some(json!({})),
            ..Self::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )
        }
    }

    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self {
            details: Some(details(group, plural, name)),
            ..Self::new(
                409,
                "AlreadyExists",
                format!("{} \"{name}\" already exists", qualified(group, plural)),
            )
        }
    }

    /// 409 Conflict: `Operation cannot be fulfilled on ...: <why>`.
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self {
            details: Some(details(group, plural, name)),
            ..Self::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} \"{name}\": {why}",
                    qualified(group, plural)
                ),
            )
        }
    }

    /// The optimistic-lock failure every controller retries on.
    pub fn stale(group: &str, plural: &str, name: &str) -> Self {
        Self::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid with field causes, worded like the real server:
    /// `Kind.group "name" is invalid: <err>` or `... is invalid: [<err>, <err>]`.
    pub fn invalid(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Self {
        let gk = if group.is_empty() {
            kind.to_owned()
        } else {
            format!("{kind}.{group}")
        };
        let rendered: Vec<String> = errors.iter().map(ToString::to_string).collect();
        let joined = match rendered.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let causes: Vec<Value> = errors
            .iter()
            .zip(&rendered)
            .map(|(e, text)| {
                let body = text.strip_prefix(&format!("{}: ", e.field)).unwrap_or(text);
                json!({"reason": e.kind.cause_reason(), "message": body, "field": e.field})
            })
            .collect();
        let mut d = details(group, kind, name);
        if let Value::Object(m) = &mut d {
            m.insert("causes".into(), Value::Array(causes));
        }
        Self {
            details: Some(d),
            ..Self::new(
                422,
                "Invalid",
                format!("{gk} \"{name}\" is invalid: {joined}"),
            )
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn method_not_allowed() -> Self {
        Self {
            details: Some(json!({})),
            ..Self::new(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )
        }
    }

    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    pub fn unsupported_patch(accepted: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted}"
            ),
        )
    }

    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    pub fn forbidden(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self {
            details: Some(details(group, plural, name)),
            ..Self::new(
                403,
                "Forbidden",
                format!(
                    "{} \"{name}\" is forbidden: {why}",
                    qualified(group, plural)
                ),
            )
        }
    }

    /// An error with a chosen code (fault injection), with the reason the real server
    /// would give that code.
    pub fn injected(code: u16, retry_after: Option<u64>) -> Self {
        let (reason, message) = match code {
            400 => ("BadRequest", "injected bad request"),
            403 => ("Forbidden", "injected forbidden"),
            404 => ("NotFound", "injected not found"),
            409 => (
                "Conflict",
                "Operation cannot be fulfilled (injected): the object has been modified; please apply your changes to the latest version and try again",
            ),
            410 => ("Expired", "injected expiry"),
            422 => ("Invalid", "injected invalid"),
            429 => (
                "TooManyRequests",
                "Too many requests, please try again later.",
            ),
            503 => ("ServiceUnavailable", "injected service unavailable"),
            504 => ("Timeout", "The request did not complete in time (injected)"),
            _ => ("InternalError", "Internal error occurred: injected fault"),
        };
        Self {
            retry_after,
            details: retry_after.map(|s| json!({"retryAfterSeconds": s})),
            ..Self::new(code, reason, message)
        }
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Value::Object(m) = &mut s {
            // An error with no reason (kube-apiserver passing on one from etcd) has none
            // in its Status, as Go's omitempty leaves it out.
            if self.reason.is_empty() {
                m.remove("reason");
            }
            if let Some(d) = &self.details {
                m.insert("details".into(), d.clone());
            }
        }
        s
    }
}

/// A `Status` reporting success (what DELETE answers for an object that is gone).
pub(crate) fn success(group: &str, kind: &str, name: &str, uid: &str) -> Value {
    let mut d = details(group, kind, name);
    if let (Value::Object(m), false) = (&mut d, uid.is_empty()) {
        m.insert("uid".into(), json!(uid));
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d})
}

#[cfg(test)]
mod tests {
    use super::super::schema::FieldErrorKind;
    use super::*;

    #[test]
    fn invalid_reads_like_the_real_server() {
        let e = FieldError {
            field: "spec.ref".into(),
            kind: FieldErrorKind::Invalid,
            bad_value: Some("\"object\"".into()),
            detail: "ref may not change".into(),
        };
        let err = ApiError::invalid("test.example.dev", "Gadget", "g1", std::slice::from_ref(&e));
        assert_eq!(
            err.message,
            "Gadget.test.example.dev \"g1\" is invalid: spec.ref: Invalid value: \"object\": ref may not change"
        );
        let s = err.to_status();
        assert_eq!(
            s["details"]["causes"][0]["message"],
            "Invalid value: \"object\": ref may not change"
        );
        assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueInvalid");
        let two = ApiError::invalid("g", "K", "n", &[e.clone(), e]);
        assert!(two.message.contains("is invalid: [spec.ref: "));
    }
}
