//! The schemas of the two k8s-openapi types the CRDs embed (`metav1.Condition` and
//! `metav1.Time`), written out here: k8s-openapi's `schemars` feature would derive a
//! schema for every one of its types (a fifth of its build) for three fields. The text
//! is k8s-openapi's (Kubernetes' own); `tests/crd_drift.rs` keeps the CRDs as they were.

use schemars::{Schema, SchemaGenerator, json_schema};

/// `[]metav1.Condition`, as k8s-openapi's schema for `Vec<Condition>`.
pub(crate) fn conditions(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "description": "Condition contains details for one aspect of the current state of this API Resource.",
            "type": "object",
            "properties": {
                "lastTransitionTime": {
                    "description": "lastTransitionTime is the last time the condition transitioned from one status to another. This should be when the underlying condition changed.  If that is not known, then using the time when the API field changed is acceptable.",
                    "type": "string",
                    "format": "date-time",
                },
                "message": {
                    "description": "message is a human readable message indicating details about the transition. This may be an empty string.",
                    "type": "string",
                },
                "observedGeneration": {
                    "description": "observedGeneration represents the .metadata.generation that the condition was set based upon. For instance, if .metadata.generation is currently 12, but the .status.conditions[x].observedGeneration is 9, the condition is out of date with respect to the current state of the instance.",
                    "type": "integer",
                    "format": "int64",
                },
                "reason": {
                    "description": "reason contains a programmatic identifier indicating the reason for the condition's last transition. Producers of specific condition types may define expected values and meanings for this field, and whether the values are considered a guaranteed API. The value should be a CamelCase string. This field may not be empty.",
                    "type": "string",
                },
                "status": {
                    "description": "status of the condition, one of True, False, Unknown.",
                    "type": "string",
                },
                "type": {
                    "description": "type of condition in CamelCase or in foo.example.com/CamelCase.",
                    "type": "string",
                },
            },
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
        },
    })
}

/// An optional `metav1.Time`: an RFC 3339 date-time, or null.
pub(crate) fn optional_time(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": ["string", "null"],
        "format": "date-time",
    })
}

/// A `metav1.Time`, as Kubernetes' own schemas say it.
pub(crate) fn time(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "format": "date-time",
    })
}

/// An optional `intstr.IntOrString` (a number, or a percentage such as `"25%"`), as
/// Kubernetes' own schemas say it.
pub(crate) fn optional_int_or_string(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-int-or-string": true,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "nullable": true,
    })
}
