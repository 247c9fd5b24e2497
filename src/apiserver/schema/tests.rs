//! Admission tests against schemas generated the way kube-derive + schemars 1 generate them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::core::crd::CustomResourceExt;
use kube::{CustomResource, KubeSchema};
use schemars::{Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;

use super::{CompiledSchema, FieldError, FieldErrorKind};

/// A claim shaped like the project's own CRDs.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug)]
#[kube(
    group = "metal.binder.dev",
    version = "v1alpha1",
    kind = "TestClaim",
    namespaced,
    status = "TestClaimStatus"
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(
    "!has(oldSelf.serverRef) || !has(self.serverRef) || self.serverRef.name == oldSelf.serverRef.name"
).message("serverRef may be set and cleared but never switched"))]
pub struct TestClaimSpec {
    /// Which servers may satisfy the claim.
    #[x_kube(validation = Rule::new("self == oldSelf").message("serverSelector is immutable"))]
    #[schemars(schema_with = "label_selector")]
    pub server_selector: LabelSelector,
    pub server_ref: Option<ServerRef>,
    #[serde(default)]
    pub reclaim_policy: ReclaimPolicy,
    pub replicas: Option<i32>,
    #[serde(default)]
    #[schemars(schema_with = "optional_int_or_string")]
    pub port: Option<IntOrString>,
    #[serde(default)]
    pub taints: Vec<Taint>,
    pub labels: Option<BTreeMap<String, String>>,
    #[x_kube(validation = Rule::new("self.size() <= 3"))]
    pub tags: Option<Vec<String>>,
    pub boot: Option<BootSource>,
}

/// k8s-openapi's schema of `metav1.LabelSelector` (the project builds k8s-openapi
/// without its `schemars` feature, so the two k8s-openapi types here carry theirs).
fn label_selector(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "properties": {
            "matchExpressions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "key": {"type": "string"},
                        "operator": {"type": "string"},
                        "values": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["key", "operator"],
                },
            },
            "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    })
}

/// k8s-openapi's schema of `IntOrString`, optional.
fn optional_int_or_string(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"x-kubernetes-int-or-string": true, "nullable": true})
}

/// An externally tagged enum: kube-derive turns its `oneOf` into properties plus
/// `oneOf: [{required: [image]}, {required: [pxe]}]`.
#[derive(Serialize, Deserialize, Clone, Debug, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum BootSource {
    Image { url: String },
    Pxe { server: String },
}

#[derive(Serialize, Deserialize, Clone, Debug, KubeSchema)]
pub struct ServerRef {
    pub name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, schemars::JsonSchema)]
pub enum ReclaimPolicy {
    Recycle,
    #[default]
    Retain,
}

#[derive(Serialize, Deserialize, Clone, Debug, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    pub key: String,
    #[serde(default = "default_effect")]
    pub effect: String,
}

fn default_effect() -> String {
    "NoSchedule".into()
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct TestClaimStatus {
    pub phase: Option<String>,
}

fn claim_schema() -> Value {
    let crd = serde_json::to_value(TestClaim::crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

fn claim() -> CompiledSchema {
    CompiledSchema::new(&claim_schema()).expect("the generated schema compiles")
}

/// A whole object around `spec`.
fn obj(spec: Value) -> Value {
    json!({
        "apiVersion": "metal.binder.dev/v1alpha1",
        "kind": "TestClaim",
        "metadata": {"name": "c1", "namespace": "default"},
        "spec": spec,
    })
}

fn selector() -> Value {
    json!({"matchLabels": {"rack": "r1"}})
}

/// The errors of a rejected admission, as the API server prints them.
fn rejected(r: Result<Vec<String>, Vec<FieldError>>) -> Vec<String> {
    match r {
        Ok(p) => panic!("expected errors, got Ok({p:?})"),
        Err(errs) => errs.iter().map(ToString::to_string).collect(),
    }
}

fn admit(
    s: &CompiledSchema,
    mut o: Value,
    old: Option<&Value>,
) -> Result<Vec<String>, Vec<FieldError>> {
    s.admit(&mut o, old)
}

/// A schema with one `spec` object holding `props` (and optional extras merged into `spec`).
fn spec_schema(props: Value, spec_extra: Value) -> CompiledSchema {
    let mut spec = json!({"type": "object", "properties": props});
    if let (Some(m), Value::Object(extra)) = (spec.as_object_mut(), spec_extra) {
        m.extend(extra);
    }
    CompiledSchema::new(&json!({"type": "object", "properties": {"spec": spec}}))
        .expect("schema compiles")
}

// ── pruning ─────────────────────────────────────────────────────────────

#[test]
fn unknown_fields_are_pruned_and_reported_but_metadata_is_untouched() {
    let s = claim();
    let mut o = obj(json!({
        "serverSelector": {"matchLabels": {"rack": "r1"}, "bogus": true},
        "serverRef": {"name": "s1", "uid": "x"},
        "taints": [{"key": "a", "effect": "NoExecute", "colour": "red"}],
        "foo": 1,
    }));
    o["metadata"]["labels"] = json!({"app": "x"});
    o["metadata"]["somethingOdd"] = json!({"kept": true});
    o["status"] = json!({"phase": "Bound", "junk": 1});
    o["extraTopLevel"] = json!("gone");
    let pruned = s.admit(&mut o, None).expect("admitted");
    assert_eq!(
        pruned,
        vec![
            "extraTopLevel",
            "spec.foo",
            "spec.serverRef.uid",
            "spec.serverSelector.bogus",
            "spec.taints[0].colour",
            "status.junk",
        ]
    );
    assert_eq!(
        o,
        json!({
            "apiVersion": "metal.binder.dev/v1alpha1",
            "kind": "TestClaim",
            "metadata": {"name": "c1", "namespace": "default", "labels": {"app": "x"}, "somethingOdd": {"kept": true}},
            "spec": {
                "serverSelector": {"matchLabels": {"rack": "r1"}},
                "serverRef": {"name": "s1"},
                "reclaimPolicy": "Retain",
                "taints": [{"key": "a", "effect": "NoExecute"}],
            },
            "status": {"phase": "Bound"},
        })
    );
}

#[test]
fn preserve_unknown_fields_is_honoured() {
    let s = spec_schema(
        json!({
            "config": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}},
            },
            "items": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
        }),
        json!({}),
    );
    let mut o = obj(json!({
        "config": {"anything": {"deep": [1, 2]}, "known": {"a": "x", "b": "pruned"}},
        "items": [{"free": "form"}],
        "other": 1,
    }));
    let pruned = s.admit(&mut o, None).expect("admitted");
    assert_eq!(pruned, vec!["spec.config.known.b", "spec.other"]);
    assert_eq!(
        o["spec"],
        json!({"config": {"anything": {"deep": [1, 2]}, "known": {"a": "x"}}, "items": [{"free": "form"}]})
    );

    // A schema-less root that preserves everything prunes nothing.
    let open = CompiledSchema::new(
        &json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    )
    .unwrap();
    let mut o = obj(json!({"x": 1}));
    assert_eq!(open.admit(&mut o, None), Ok(vec![]));
    assert_eq!(o["spec"], json!({"x": 1}));
}

#[test]
fn maps_prune_inside_their_values() {
    let s = spec_schema(
        json!({"ports": {"type": "object", "additionalProperties": {"type": "object", "properties": {"port": {"type": "integer"}}}}}),
        json!({}),
    );
    let mut o = obj(json!({"ports": {"http": {"port": 80, "proto": "tcp"}}}));
    assert_eq!(
        s.admit(&mut o, None),
        Ok(vec!["spec.ports.http.proto".to_string()])
    );
    assert_eq!(o["spec"], json!({"ports": {"http": {"port": 80}}}));
}

// ── defaulting ──────────────────────────────────────────────────────────

#[test]
fn defaults_are_applied_scalar_nested_and_in_array_items() {
    let s = claim();
    let mut o = obj(
        json!({"serverSelector": selector(), "taints": [{"key": "a"}, {"key": "b", "effect": "NoExecute"}]}),
    );
    s.admit(&mut o, None).expect("admitted");
    assert_eq!(o["spec"]["reclaimPolicy"], json!("Retain"));
    assert_eq!(
        o["spec"]["taints"],
        json!([{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}])
    );

    // Absent array gets its default; an existing value is never overwritten.
    let mut o = obj(json!({"serverSelector": selector(), "reclaimPolicy": "Recycle"}));
    s.admit(&mut o, None).expect("admitted");
    assert_eq!(o["spec"]["reclaimPolicy"], json!("Recycle"));
    assert_eq!(o["spec"]["taints"], json!([]));
}

#[test]
fn nested_defaults_need_their_parent_and_apply_inside_defaults() {
    let s = spec_schema(
        json!({
            "opts": {"type": "object", "properties": {"x": {"type": "integer", "default": 1}}},
            "withDefault": {"type": "object", "default": {}, "properties": {"y": {"type": "string", "default": "d"}}},
            "level": {"type": "string", "default": "info"},
        }),
        json!({}),
    );
    let mut o = obj(json!({}));
    s.admit(&mut o, None).expect("admitted");
    assert_eq!(
        o["spec"],
        json!({"withDefault": {"y": "d"}, "level": "info"})
    );

    let mut o = obj(json!({"opts": {}, "level": null}));
    s.admit(&mut o, None).expect("admitted");
    // A non-nullable null is replaced by the default.
    assert_eq!(
        o["spec"],
        json!({"opts": {"x": 1}, "withDefault": {"y": "d"}, "level": "info"})
    );
}

// ── structural validation ───────────────────────────────────────────────

#[test]
fn type_errors() {
    let s = claim();
    let errs = rejected(admit(
        &s,
        obj(
            json!({"serverSelector": selector(), "replicas": "three", "serverRef": "s1", "tags": "a"}),
        ),
        None,
    ));
    assert_eq!(
        errs,
        vec![
            r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
            r#"spec.serverRef: Invalid value: "string": spec.serverRef in body must be of type object: "string""#,
            r#"spec.tags: Invalid value: "string": spec.tags in body must be of type array: "string""#,
            r#"<nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#,
        ]
    );
    let Err(raw) = admit(
        &s,
        obj(json!({"serverSelector": selector(), "replicas": 1.5})),
        None,
    ) else {
        panic!()
    };
    assert_eq!(
        raw[0],
        FieldError {
            field: "spec.replicas".into(),
            kind: FieldErrorKind::TypeInvalid,
            bad_value: Some(r#""number""#.into()),
            detail: r#"spec.replicas in body must be of type integer: "number""#.into(),
        }
    );
    // An integral float is an integer.
    assert!(
        admit(
            &s,
            obj(json!({"serverSelector": selector(), "replicas": 2.0})),
            None
        )
        .is_ok()
    );
}

#[test]
fn required_fields() {
    let s = claim();
    let mut no_spec = obj(json!({}));
    no_spec.as_object_mut().unwrap().remove("spec");
    assert_eq!(
        rejected(admit(&s, no_spec, None))[0],
        "spec: Required value"
    );

    let errs = rejected(admit(
        &s,
        obj(json!({
            "serverSelector": {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["a"]}, {"key": "zone"}]},
            "serverRef": {},
        })),
        None,
    ));
    assert_eq!(
        &errs[..2],
        [
            "spec.serverRef.name: Required value",
            "spec.serverSelector.matchExpressions[1].operator: Required value"
        ]
    );
    let Err(raw) = admit(&s, obj(json!({})), None) else {
        panic!()
    };
    assert_eq!(
        raw[0],
        FieldError {
            field: "spec.serverSelector".into(),
            kind: FieldErrorKind::Required,
            bad_value: None,
            detail: String::new(),
        }
    );
}

#[test]
fn enum_reports_supported_values() {
    let s = claim();
    let Err(errs) = admit(
        &s,
        obj(json!({"serverSelector": selector(), "reclaimPolicy": "Delete"})),
        None,
    ) else {
        panic!("expected rejection")
    };
    assert_eq!(
        errs[0],
        FieldError {
            field: "spec.reclaimPolicy".into(),
            kind: FieldErrorKind::NotSupported,
            bad_value: Some(r#""Delete""#.into()),
            detail: r#"supported values: "Recycle", "Retain""#.into(),
        }
    );
    assert_eq!(
        errs[0].to_string(),
        r#"spec.reclaimPolicy: Unsupported value: "Delete": supported values: "Recycle", "Retain""#
    );
    // Non-string enum values are listed as their JSON text.
    let n = spec_schema(
        json!({"size": {"type": "integer", "enum": [1, 2]}}),
        json!({}),
    );
    assert_eq!(
        rejected(admit(&n, obj(json!({"size": 3})), None))[0],
        r#"spec.size: Unsupported value: 3: supported values: "1", "2""#
    );
}

#[test]
fn int_or_string() {
    let s = claim();
    for port in [json!(8080), json!("http"), json!(null)] {
        assert!(
            admit(
                &s,
                obj(json!({"serverSelector": selector(), "port": port})),
                None
            )
            .is_ok(),
            "{port}"
        );
    }
    assert_eq!(
        rejected(admit(
            &s,
            obj(json!({"serverSelector": selector(), "port": true})),
            None
        ))[0],
        r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#
    );
}

#[test]
fn nullable_and_non_nullable_nulls() {
    let s = claim();
    // Nullable fields keep their null.
    let mut o = obj(json!({"serverSelector": selector(), "serverRef": null, "replicas": null}));
    o["status"] = Value::Null;
    s.admit(&mut o, None).expect("admitted");
    assert_eq!(o["spec"]["serverRef"], Value::Null);
    assert_eq!(o["status"], Value::Null);

    // A non-nullable property set to null is dropped (not an error, not "unknown").
    let mut o = obj(json!({"serverSelector": {"matchLabels": null, "matchExpressions": []}}));
    assert_eq!(s.admit(&mut o, None), Ok(vec![]));
    assert_eq!(o["spec"]["serverSelector"], json!({"matchExpressions": []}));

    // A null list item or map value is a type error.
    let errs = rejected(admit(
        &s,
        obj(json!({"serverSelector": selector(), "tags": [null], "labels": {"a": null}})),
        None,
    ));
    assert_eq!(
        &errs[..2],
        [
            r#"spec.labels.a: Invalid value: "null": spec.labels.a in body must be of type string: "null""#,
            r#"spec.tags[0]: Invalid value: "null": spec.tags[0] in body must be of type string: "null""#,
        ]
    );
}

fn bounds_schema() -> CompiledSchema {
    spec_schema(
        json!({
            "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
            "count": {"type": "integer", "minimum": 1, "maximum": 10},
            "ratio": {"type": "number", "maximum": 1, "exclusiveMaximum": true},
            "big": {"type": "integer", "maximum": 1000000},
            "list": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
        }),
        json!({}),
    )
}

#[test]
fn min_max_length_and_items() {
    let s = bounds_schema();
    let errs = rejected(admit(
        &s,
        obj(
            json!({"name": "abcdefg", "count": 11, "ratio": 1.5, "big": 1000001, "list": ["a", "b", "c"]}),
        ),
        None,
    ));
    assert_eq!(
        errs,
        vec![
            "spec.big: Invalid value: 1000001: spec.big in body should be less than or equal to 1000000",
            "spec.count: Invalid value: 11: spec.count in body should be less than or equal to 10",
            "spec.list: Too many: 3: must have at most 2 items",
            "spec.name: Too long: may not be more than 5 bytes",
            "spec.ratio: Invalid value: 1.5: spec.ratio in body should be less than 1",
        ]
    );
    let errs = rejected(admit(
        &s,
        obj(json!({"name": "a", "count": 0, "ratio": 1, "list": []})),
        None,
    ));
    assert_eq!(
        errs,
        vec![
            "spec.count: Invalid value: 0: spec.count in body should be greater than or equal to 1",
            "spec.list: Invalid value: 0: spec.list in body should have at least 1 items",
            r#"spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long"#,
            "spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1",
        ]
    );
    assert!(
        admit(
            &s,
            obj(json!({"name": "ab", "count": 10, "ratio": 0.5, "list": ["a"]})),
            None
        )
        .is_ok()
    );
}

#[test]
fn pattern() {
    let s = bounds_schema();
    assert_eq!(
        rejected(admit(&s, obj(json!({"name": "Ab1"})), None)),
        vec![r#"spec.name: Invalid value: "Ab1": spec.name in body should match '^[a-z]+$'"#]
    );
}

#[test]
fn maps_validate_their_values() {
    let s = claim();
    let errs = rejected(admit(
        &s,
        obj(json!({"serverSelector": {"matchLabels": {"rack": 7}}, "labels": {"team": ["x"]}})),
        None,
    ));
    assert_eq!(
        &errs[..2],
        [
            r#"spec.labels.team: Invalid value: "array": spec.labels.team in body must be of type string: "array""#,
            r#"spec.serverSelector.matchLabels.rack: Invalid value: "integer": spec.serverSelector.matchLabels.rack in body must be of type string: "integer""#,
        ]
    );
}

#[test]
fn formats_checked_where_the_real_server_checks_them() {
    let s = spec_schema(
        json!({"at": {"type": "string", "format": "date-time"}, "n": {"type": "integer", "format": "int32"}}),
        json!({}),
    );
    assert_eq!(
        rejected(admit(&s, obj(json!({"at": "yesterday"})), None))[0],
        r#"spec.at: Invalid value: "yesterday": spec.at in body must be of type date-time: "yesterday""#
    );
    // `int32` is stripped by the real server (StripUnsupportedFormatsPostProcess): no range check.
    assert!(
        admit(
            &s,
            obj(json!({"at": "2024-05-01T10:00:00Z", "n": 3_000_000_000u64})),
            None
        )
        .is_ok()
    );
}

#[test]
fn list_type_set_and_map_reject_duplicates() {
    let s = spec_schema(
        json!({
            "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "ports": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}},
            },
        }),
        json!({}),
    );
    let errs = rejected(admit(
        &s,
        obj(
            json!({"set": ["a", "b", "a"], "ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}]}),
        ),
        None,
    ));
    assert_eq!(
        errs,
        vec![
            r#"spec.ports[1]: Duplicate value: {"name":"http"}"#,
            r#"spec.set[2]: Duplicate value: "a""#
        ]
    );
}

// ── CEL ─────────────────────────────────────────────────────────────────

#[test]
fn cel_rule_without_message_reports_failed_rule() {
    let s = claim();
    let Err(errs) = admit(
        &s,
        obj(json!({"serverSelector": selector(), "tags": ["a", "b", "c", "d"]})),
        None,
    ) else {
        panic!("expected rejection")
    };
    assert_eq!(
        errs,
        vec![FieldError {
            field: "spec.tags".into(),
            kind: FieldErrorKind::Invalid,
            bad_value: Some(r#""array""#.into()),
            detail: "failed rule: self.size() <= 3".into(),
        }]
    );
}

#[test]
fn cel_rule_with_message_message_expression_field_path_and_reason() {
    let s = spec_schema(
        json!({
            "min": {"type": "integer"},
            "max": {"type": "integer"},
            "mode": {"type": "string"},
        }),
        json!({"x-kubernetes-validations": [
            {"rule": "self.min <= self.max", "message": "min must not exceed max"},
            {"rule": "self.max < 100", "messageExpression": "'max is ' + string(self.max) + ', must be below 100'"},
            {"rule": "self.mode != 'legacy'", "message": "legacy mode is gone", "fieldPath": ".mode", "reason": "FieldValueForbidden"},
            {"rule": "self.min >= 0", "messageExpression": "''", "message": "fallback message"},
        ]}),
    );
    let errs = rejected(admit(
        &s,
        obj(json!({"min": -5, "max": -10, "mode": "legacy"})),
        None,
    ));
    assert_eq!(
        errs,
        vec![
            r#"spec: Invalid value: "object": min must not exceed max"#,
            "spec.mode: Forbidden: legacy mode is gone",
            r#"spec: Invalid value: "object": fallback message"#,
        ]
    );
    assert_eq!(
        rejected(admit(
            &s,
            obj(json!({"min": 1, "max": 200, "mode": "new"})),
            None
        )),
        vec![r#"spec: Invalid value: "object": max is 200, must be below 100"#]
    );
}

fn with_ref(name: Option<&str>) -> Value {
    let mut spec = json!({"serverSelector": selector()});
    if let Some(n) = name {
        spec["serverRef"] = json!({"name": n});
    }
    obj(spec)
}

#[test]
fn transition_rule_on_spec_set_clear_switch_unchanged_create() {
    let s = claim();
    // On create the transition rule is not evaluated at all (oldSelf has no value).
    assert!(admit(&s, with_ref(Some("s1")), None).is_ok());
    // Set, clear, unchanged: fine.
    assert!(
        admit(&s, with_ref(Some("s1")), Some(&with_ref(None))).is_ok(),
        "set"
    );
    assert!(
        admit(&s, with_ref(None), Some(&with_ref(Some("s1")))).is_ok(),
        "clear"
    );
    assert!(
        admit(&s, with_ref(Some("s1")), Some(&with_ref(Some("s1")))).is_ok(),
        "unchanged"
    );
    // Switch: rejected with the rule's message, on the object holding the rule.
    let Err(errs) = admit(&s, with_ref(Some("s2")), Some(&with_ref(Some("s1")))) else {
        panic!("switch admitted")
    };
    assert_eq!(
        errs,
        vec![FieldError {
            field: "spec".into(),
            kind: FieldErrorKind::Invalid,
            bad_value: Some(r#""object""#.into()),
            detail: "serverRef may be set and cleared but never switched".into(),
        }]
    );
}

#[test]
fn transition_rule_with_field_path_reports_on_the_field() {
    let s = spec_schema(
        json!({"serverRef": {"type": "object", "nullable": true, "properties": {"name": {"type": "string"}}}}),
        json!({"x-kubernetes-validations": [{
            "rule": "!has(oldSelf.serverRef) || !has(self.serverRef) || self.serverRef.name == oldSelf.serverRef.name",
            "message": "serverRef may be set and cleared but never switched",
            "fieldPath": ".serverRef",
        }]}),
    );
    let old = obj(json!({"serverRef": {"name": "a"}}));
    assert_eq!(
        rejected(admit(
            &s,
            obj(json!({"serverRef": {"name": "b"}})),
            Some(&old)
        )),
        vec![
            r#"spec.serverRef: Invalid value: "object": serverRef may be set and cleared but never switched"#
        ]
    );
}

#[test]
fn immutable_field_rule_on_the_field_schema() {
    let s = claim();
    let old = obj(json!({"serverSelector": {"matchLabels": {"rack": "r1"}}}));
    let changed = obj(json!({"serverSelector": {"matchLabels": {"rack": "r2"}}}));
    assert!(
        admit(&s, changed.clone(), None).is_ok(),
        "create is not a transition"
    );
    assert!(admit(&s, old.clone(), Some(&old)).is_ok(), "unchanged");
    assert_eq!(
        rejected(admit(&s, changed, Some(&old))),
        vec![r#"spec.serverSelector: Invalid value: "object": serverSelector is immutable"#]
    );
}

#[test]
fn rules_on_array_items_and_map_values_run_per_element() {
    let s = spec_schema(
        json!({
            "taints": {"type": "array", "items": {
                "type": "object",
                "properties": {"key": {"type": "string"}, "effect": {"type": "string"}},
                "x-kubernetes-validations": [{"rule": "self.key != ''", "message": "key must not be empty"}],
            }},
            "limits": {"type": "object", "additionalProperties": {
                "type": "integer",
                "x-kubernetes-validations": [{"rule": "self > 0", "message": "must be positive"}],
            }},
        }),
        json!({}),
    );
    let errs = rejected(admit(
        &s,
        obj(
            json!({"taints": [{"key": "a"}, {"key": ""}, {"key": ""}], "limits": {"cpu": 0, "mem": 2}}),
        ),
        None,
    ));
    assert_eq!(
        errs,
        vec![
            r#"spec.limits[cpu]: Invalid value: "integer": must be positive"#,
            r#"spec.taints[1]: Invalid value: "object": key must not be empty"#,
            r#"spec.taints[2]: Invalid value: "object": key must not be empty"#,
        ]
    );
}

#[test]
fn has_on_optional_fields_and_underscored_or_escaped_names() {
    let s = spec_schema(
        json!({
            "log_level": {"type": "string"},
            "x-y": {"type": "string"},
            "namespace": {"type": "string"},
            "opt": {"type": "object", "properties": {"a": {"type": "string"}}},
        }),
        json!({"x-kubernetes-validations": [
            {"rule": "!has(self.opt) || has(self.opt.a)", "message": "opt.a is required when opt is set"},
            {"rule": "!has(self.log_level) || self.log_level in ['debug', 'info']", "message": "bad log_level"},
            {"rule": "!has(self.x__dash__y) || self.x__dash__y != 'no'", "message": "x-y must not be no"},
            {"rule": "!has(self.__namespace__) || self.__namespace__ != 'kube-system'", "message": "bad namespace"},
        ]}),
    );
    assert!(admit(&s, obj(json!({})), None).is_ok());
    assert!(
        admit(
            &s,
            obj(json!({"opt": {"a": "x"}, "log_level": "info", "x-y": "yes", "namespace": "a"})),
            None
        )
        .is_ok()
    );
    assert_eq!(
        rejected(admit(
            &s,
            obj(json!({"opt": {}, "log_level": "trace", "x-y": "no", "namespace": "kube-system"})),
            None
        )),
        vec![
            r#"spec: Invalid value: "object": opt.a is required when opt is set"#,
            r#"spec: Invalid value: "object": bad log_level"#,
            r#"spec: Invalid value: "object": x-y must not be no"#,
            r#"spec: Invalid value: "object": bad namespace"#,
        ]
    );
}

#[test]
fn root_rules_see_metadata_name_and_report_at_nil() {
    let root = json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
        "x-kubernetes-validations": [
            {"rule": "self.metadata.name == 'singleton'", "message": "there can be only one"},
            {"rule": "self.kind == 'TestClaim' && self.apiVersion.startsWith('metal.binder.dev/')"},
            {"rule": "!has(self.metadata.namespace)", "message": "only name and generateName are visible"},
        ],
    });
    let s = CompiledSchema::new(&root).unwrap();
    assert!(admit(&s, json!({"apiVersion": "metal.binder.dev/v1alpha1", "kind": "TestClaim", "metadata": {"name": "singleton", "namespace": "x"}, "spec": {}}), None).is_ok());
    assert_eq!(
        rejected(admit(&s, obj(json!({})), None)),
        vec![r#"<nil>: Invalid value: "object": there can be only one"#]
    );
}

#[test]
fn list_map_items_correlate_by_key_for_transition_rules() {
    let s = spec_schema(
        json!({"disks": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "size": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.size >= oldSelf.size", "message": "disks cannot shrink"}],
            },
        }}),
        json!({}),
    );
    let old = obj(json!({"disks": [{"name": "a", "size": 10}, {"name": "b", "size": 20}]}));
    // Reordered and one grown: fine; a new disk has no old value.
    assert!(admit(&s, obj(json!({"disks": [{"name": "c", "size": 1}, {"name": "b", "size": 20}, {"name": "a", "size": 11}]})), Some(&old)).is_ok());
    assert_eq!(
        rejected(admit(
            &s,
            obj(json!({"disks": [{"name": "b", "size": 5}, {"name": "a", "size": 10}]})),
            Some(&old)
        )),
        vec![r#"spec.disks[0]: Invalid value: "object": disks cannot shrink"#]
    );
}

#[test]
fn optional_old_self_runs_on_create() {
    let s = spec_schema(
        json!({"phase": {"type": "string", "x-kubernetes-validations": [{
            "rule": "oldSelf.hasValue() ? (oldSelf.value() != 'Done' || self == 'Done') : self == 'New'",
            "message": "must start New and stay Done",
            "optionalOldSelf": true,
        }]}}),
        json!({}),
    );
    assert!(admit(&s, obj(json!({"phase": "New"})), None).is_ok());
    assert_eq!(
        rejected(admit(&s, obj(json!({"phase": "Running"})), None)),
        vec![r#"spec.phase: Invalid value: "string": must start New and stay Done"#]
    );
    let done = obj(json!({"phase": "Done"}));
    assert!(
        admit(
            &s,
            obj(json!({"phase": "Running"})),
            Some(&obj(json!({"phase": "New"})))
        )
        .is_ok()
    );
    assert_eq!(
        rejected(admit(&s, obj(json!({"phase": "Running"})), Some(&done))),
        vec![r#"spec.phase: Invalid value: "string": must start New and stay Done"#]
    );
}

#[test]
fn runtime_errors_are_reported_with_the_rule() {
    let s = spec_schema(
        json!({"ref": {"type": "object", "properties": {"name": {"type": "string"}}}}),
        json!({"x-kubernetes-validations": [{"rule": "self.ref.name == 'x'", "message": "ref must be x"}]}),
    );
    assert_eq!(
        rejected(admit(&s, obj(json!({})), None)),
        vec![r#"spec: Invalid value: "object": no such key: ref evaluating rule: ref must be x"#]
    );
}

#[test]
fn ratcheting_keeps_unchanged_invalid_values() {
    let s = spec_schema(
        json!({
            "name": {"type": "string", "maxLength": 3},
            "other": {"type": "string"},
            "n": {"type": "integer", "x-kubernetes-validations": [{"rule": "self < 10", "message": "n must be below 10"}]},
        }),
        json!({}),
    );
    // Stored before the schema got stricter.
    let old = obj(json!({"name": "toolong", "n": 50, "other": "a"}));
    assert!(
        admit(
            &s,
            obj(json!({"name": "toolong", "n": 50, "other": "b"})),
            Some(&old)
        )
        .is_ok()
    );
    assert_eq!(
        rejected(admit(
            &s,
            obj(json!({"name": "toolongstill", "n": 60, "other": "b"})),
            Some(&old)
        )),
        vec![
            "spec.name: Too long: may not be more than 3 bytes",
            r#"<nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#,
        ]
    );
    assert_eq!(
        rejected(admit(&s, obj(json!({"name": "ok", "n": 60})), Some(&old))),
        vec![r#"spec.n: Invalid value: "integer": n must be below 10"#]
    );
}

#[test]
fn multiple_errors_are_collected() {
    let s = claim();
    let errs = rejected(admit(
        &s,
        obj(json!({
            "serverSelector": {"matchExpressions": [{"key": "a"}]},
            "reclaimPolicy": "Delete",
            "replicas": "x",
            "serverRef": {},
        })),
        None,
    ));
    assert_eq!(
        errs,
        vec![
            r#"spec.reclaimPolicy: Unsupported value: "Delete": supported values: "Recycle", "Retain""#,
            r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
            "spec.serverRef.name: Required value",
            "spec.serverSelector.matchExpressions[0].operator: Required value",
            r#"<nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#,
        ]
    );
    // Without blocking errors, every failing CEL rule is reported together.
    let old = obj(json!({"serverSelector": selector(), "serverRef": {"name": "a"}}));
    let errs = rejected(admit(
        &s,
        obj(
            json!({"serverSelector": {"matchLabels": {"rack": "r9"}}, "serverRef": {"name": "b"}, "tags": ["1", "2", "3", "4"]}),
        ),
        Some(&old),
    ));
    assert_eq!(
        errs,
        vec![
            r#"spec: Invalid value: "object": serverRef may be set and cleared but never switched"#,
            r#"spec.serverSelector: Invalid value: "object": serverSelector is immutable"#,
            r#"spec.tags: Invalid value: "array": failed rule: self.size() <= 3"#,
        ]
    );
}

// ── install-time compilation ────────────────────────────────────────────

fn compile_errors(rules: Value, props: Value) -> Vec<String> {
    let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "properties": props,
        "x-kubernetes-validations": rules,
    }}});
    match CompiledSchema::new(&schema) {
        Ok(_) => panic!("schema compiled"),
        Err(errs) => errs.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn a_rule_that_does_not_compile_fails_new() {
    let errs = compile_errors(
        json!([{"rule": "self.a >="}]),
        json!({"a": {"type": "integer"}}),
    );
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].starts_with(
            r#"openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "self.a >=": compilation failed: ERROR: <input>:1:10: Syntax error:"#
        ),
        "{}",
        errs[0]
    );
}

#[test]
fn undefined_fields_and_variables_fail_new() {
    assert_eq!(
        compile_errors(
            json!([{"rule": "self.serverRf.name == 'a'"}]),
            json!({"serverRef": {"type": "object"}})
        ),
        vec![
            r#"openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "self.serverRf.name == 'a'": compilation failed: ERROR: <input>: undefined field 'serverRf'"#
        ]
    );
    assert_eq!(
        compile_errors(
            json!([{"rule": "self.items.all(i, i.nme != '')"}]),
            json!({"items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}})
        ),
        vec![
            r#"openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "self.items.all(i, i.nme != '')": compilation failed: ERROR: <input>: undefined field 'nme'"#
        ]
    );
    assert_eq!(
        compile_errors(json!([{"rule": "object.spec == 1"}]), json!({})),
        vec![
            r#"openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "object.spec == 1": compilation failed: ERROR: <input>: undeclared reference to 'object'"#
        ]
    );
}

#[test]
fn bad_rule_definitions_fail_new() {
    let errs = compile_errors(
        json!([
            {"rule": ""},
            {"rule": "self.a > 0", "reason": "FieldValueBogus"},
            {"rule": "self.a > 0", "messageExpression": "'a' +"},
            {"rule": "self.a > 0", "optionalOldSelf": true},
        ]),
        json!({"a": {"type": "integer"}}),
    );
    assert_eq!(errs.len(), 4, "{errs:#?}");
    assert_eq!(
        errs[0],
        "openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Required value: rule is not specified"
    );
    assert_eq!(
        errs[1],
        r#"openAPIV3Schema.properties[spec].x-kubernetes-validations[1].reason: Unsupported value: "FieldValueBogus": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#
    );
    assert!(errs[2].starts_with("openAPIV3Schema.properties[spec].x-kubernetes-validations[2].messageExpression: Invalid value:"));
    assert_eq!(
        errs[3],
        "openAPIV3Schema.properties[spec].x-kubernetes-validations[3].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"
    );
}

#[test]
fn transition_rules_on_uncorrelatable_list_items_fail_new() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"items": {
        "type": "array",
        "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]},
    }}}}});
    let errs: Vec<String> = CompiledSchema::new(&schema)
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        errs,
        vec![
            r#"openAPIV3Schema.properties[spec].properties[items].items.x-kubernetes-validations[0].rule: Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within openAPIV3Schema.properties[spec].properties[items].items"#
        ]
    );
}

#[test]
fn the_generated_claim_schema_is_kept_as_given() {
    let s = claim();
    assert_eq!(s.schema(), &claim_schema());
}

#[test]
fn one_of_from_a_tagged_enum() {
    let s = claim();
    let boot = |b: Value| obj(json!({"serverSelector": selector(), "boot": b}));
    assert!(admit(&s, boot(json!({"pxe": {"server": "10.0.0.1"}})), None).is_ok());
    assert!(
        admit(&s, boot(Value::Null), None).is_ok(),
        "Option::None serializes as null"
    );
    assert_eq!(
        rejected(admit(
            &s,
            boot(json!({"pxe": {"server": "a"}, "image": {"url": "b"}})),
            None
        )),
        vec![
            r#"<nil>: Invalid value: "": "spec.boot" must validate one and only one schema (oneOf). Found 2 valid alternatives"#
        ]
    );
    assert_eq!(
        rejected(admit(&s, boot(json!({})), None)),
        vec![
            r#"<nil>: Invalid value: "": "spec.boot" must validate one and only one schema (oneOf). Found none valid"#,
            "spec.boot.image: Required value",
            r#"<nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#,
        ]
    );
}

#[test]
fn embedded_resources_keep_and_require_type_meta() {
    let s = spec_schema(
        json!({"template": {
            "type": "object",
            "x-kubernetes-embedded-resource": true,
            "properties": {"spec": {"type": "object", "properties": {"image": {"type": "string"}}}},
            "x-kubernetes-validations": [{"rule": "self.kind == 'Pod'", "message": "only Pods"}],
        }}),
        json!({}),
    );
    let mut o = obj(json!({"template": {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"a": "b"}},
        "spec": {"image": "x", "junk": 1},
    }}));
    assert_eq!(
        s.admit(&mut o, None),
        Ok(vec!["spec.template.spec.junk".to_string()])
    );
    assert_eq!(
        o["spec"]["template"]["metadata"],
        json!({"name": "p", "labels": {"a": "b"}})
    );
    assert_eq!(
        rejected(admit(
            &s,
            obj(json!({"template": {"kind": "Service", "spec": {}}})),
            None
        )),
        vec![
            "spec.template.apiVersion: Required value: must not be empty",
            r#"<nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#,
        ]
    );
    assert_eq!(
        rejected(admit(
            &s,
            obj(json!({"template": {"apiVersion": "v1", "kind": "Service"}})),
            None
        )),
        vec![r#"spec.template: Invalid value: "object": only Pods"#]
    );
}

#[test]
fn message_expressions_and_root_old_self_are_checked_at_install() {
    let root = |rules: Value| {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}},
               "x-kubernetes-validations": rules})
    };
    let ok = CompiledSchema::new(&root(json!([
        {"rule": "self.metadata.name == oldSelf.metadata.name", "message": "name is immutable"},
        {"rule": "self.spec.a != ''", "messageExpression": "'a is ' + self.spec.a"},
    ])));
    assert!(ok.is_ok(), "{ok:?}");
    let errs: Vec<String> = CompiledSchema::new(&root(
        json!([{"rule": "true", "messageExpression": "self.spec.b"}]),
    ))
    .unwrap_err()
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(
        errs,
        vec![
            r#"openAPIV3Schema.x-kubernetes-validations[0].messageExpression: Invalid value: "self.spec.b": messageExpression compilation failed: ERROR: <input>: undefined field 'b'"#
        ]
    );
}

#[test]
fn ratcheting_items_of_an_unchanged_atomic_list() {
    let s = spec_schema(
        json!({
            "hosts": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [
                {"rule": "self.endsWith('.example.com')", "message": "hosts must be in example.com"},
            ]}},
            "note": {"type": "string"},
        }),
        json!({}),
    );
    let old = obj(json!({"hosts": ["a.other.org"], "note": "x"}));
    // The list is unchanged, so its (uncorrelatable) items are ratcheted.
    assert!(
        admit(
            &s,
            obj(json!({"hosts": ["a.other.org"], "note": "y"})),
            Some(&old)
        )
        .is_ok()
    );
    // Once the list changes, every item is checked again.
    assert_eq!(
        rejected(admit(
            &s,
            obj(json!({"hosts": ["a.other.org", "b.example.com"]})),
            Some(&old)
        )),
        vec![r#"spec.hosts[0]: Invalid value: "string": hosts must be in example.com"#]
    );
}

#[test]
fn rules_inside_all_of_run_on_the_node() {
    let s = spec_schema(
        json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
        json!({"allOf": [{"x-kubernetes-validations": [{"rule": "self.a < self.b", "message": "a must be below b"}]}]}),
    );
    assert!(admit(&s, obj(json!({"a": 1, "b": 2})), None).is_ok());
    assert_eq!(
        rejected(admit(&s, obj(json!({"a": 3, "b": 2})), None)),
        vec![r#"spec: Invalid value: "object": a must be below b"#]
    );
}

#[test]
fn embedded_resources_expose_only_name_and_generate_name_of_metadata() {
    let s = spec_schema(
        json!({"template": {
            "type": "object",
            "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true,
            "x-kubernetes-validations": [
                {"rule": "self.metadata.name.startsWith('web-')", "message": "template name must start with web-"},
                {"rule": "!has(self.metadata.labels)", "message": "labels are not visible"},
            ],
        }}),
        json!({}),
    );
    let tpl = |name: &str| {
        obj(
            json!({"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"a": "b"}}}}),
        )
    };
    assert!(admit(&s, tpl("web-1"), None).is_ok());
    assert_eq!(
        rejected(admit(&s, tpl("db-1"), None)),
        vec![r#"spec.template: Invalid value: "object": template name must start with web-"#]
    );
}

#[test]
fn field_paths_are_checked_at_install_and_normalized() {
    let s = spec_schema(
        json!({
            "limits": {"type": "object", "additionalProperties": {"type": "integer"}},
            "ref": {"type": "object", "properties": {"name": {"type": "string"}}},
        }),
        json!({"x-kubernetes-validations": [
            {"rule": "!has(self.limits) || !('cpu' in self.limits) || self.limits['cpu'] > 0", "message": "cpu must be positive", "fieldPath": ".limits['cpu']"},
            {"rule": "!has(self.ref) || self.ref.name != ''", "message": "name must be set", "fieldPath": "['ref'].name"},
        ]}),
    );
    assert_eq!(
        rejected(admit(
            &s,
            obj(json!({"limits": {"cpu": 0}, "ref": {"name": ""}})),
            None
        )),
        vec![
            r#"spec.limits[cpu]: Invalid value: "object": cpu must be positive"#,
            r#"spec.ref.name: Invalid value: "object": name must be set"#,
        ]
    );
    assert_eq!(
        compile_errors(
            json!([{"rule": "true", "fieldPath": ".nope"}]),
            json!({"a": {"type": "string"}})
        ),
        vec![
            r#"openAPIV3Schema.properties[spec].x-kubernetes-validations[0].fieldPath: Invalid value: ".nope": fieldPath must be a valid path: does not refer to a valid field"#
        ]
    );
}

#[test]
fn optional_field_selection_and_library_functions() {
    let s = spec_schema(
        json!({
            "ref": {"type": "object", "properties": {"name": {"type": "string"}}},
            "cpu": {"x-kubernetes-int-or-string": true},
            "url": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
        }),
        json!({"x-kubernetes-validations": [
            {"rule": "self.?ref.?name.orValue('default') != 'forbidden'", "message": "name is forbidden"},
            {"rule": "!has(self.cpu) || quantity(string(self.cpu)).isLessThan(quantity('8'))", "message": "at most 8 cpus"},
            {"rule": "!has(self.url) || isURL(self.url)", "message": "url must be a URL"},
            {"rule": "!has(self.tags) || self.tags.all(t, t.matches('^[a-z]+$'))", "message": "tags must be lowercase"},
        ]}),
    );
    assert!(admit(&s, obj(json!({})), None).is_ok());
    assert!(admit(&s, obj(json!({"ref": {"name": "a"}, "cpu": "500m", "url": "https://x.example", "tags": ["a"]})), None).is_ok());
    assert_eq!(
        rejected(admit(
            &s,
            obj(
                json!({"ref": {"name": "forbidden"}, "cpu": "16", "url": "not a url", "tags": ["A"]})
            ),
            None
        )),
        vec![
            r#"spec: Invalid value: "object": name is forbidden"#,
            r#"spec: Invalid value: "object": at most 8 cpus"#,
            r#"spec: Invalid value: "object": url must be a URL"#,
            r#"spec: Invalid value: "object": tags must be lowercase"#,
        ]
    );
}

#[test]
fn null_for_a_nullable_enum_still_fails_the_enum() {
    // kube-derive renders `Option<Enum>` as `{enum: [..], nullable: true}`; like
    // kube-openapi (and OpenAPI 3.0.3), `nullable` does not add `null` to `enum`,
    // so a serialized `None` must be skipped (`skip_serializing_if`), not sent as null.
    let s = spec_schema(
        json!({"level": {"type": "string", "nullable": true, "enum": ["Debug", "Info"]}}),
        json!({}),
    );
    assert!(admit(&s, obj(json!({"level": "Info"})), None).is_ok());
    assert!(admit(&s, obj(json!({})), None).is_ok());
    assert_eq!(
        rejected(admit(&s, obj(json!({"level": null})), None))[0],
        r#"spec.level: Unsupported value: "null": supported values: "Debug", "Info""#
    );
}
