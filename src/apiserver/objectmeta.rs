//! `metadata` as apimachinery checks it for every kind on every write: label keys are
//! qualified names and values valid label values, annotation keys are qualified names
//! (case-insensitively) and all annotations together fit in 256 KiB. And as the Go types
//! store it: empty collections are dropped (`omitempty`), never stored or returned.

use serde_json::{Map, Value};

use super::schema::{FieldError, FieldErrorKind};

/// `metav1.ObjectMeta` collections that Go omits when empty.
const OMIT_WHEN_EMPTY: &[&str] = &[
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "managedFields",
];

/// The most all annotations of an object may hold, keys and values together.
const TOTAL_ANNOTATION_SIZE: usize = 256 * 1024;

const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;

const QUALIFIED_NAME_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_RULE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const DNS1123_SUBDOMAIN_RULE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Drops empty labels, annotations, finalizers, ownerReferences and managedFields.
pub(crate) fn drop_empty_collections(obj: &mut Value) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    meta.retain(|k, v| {
        let empty = v.is_null()
            || v.as_array().is_some_and(Vec::is_empty)
            || v.as_object().is_some_and(Map::is_empty);
        !(empty && OMIT_WHEN_EMPTY.contains(&k.as_str()))
    });
}

/// What is wrong with an object's labels and annotations, as field errors on
/// `metadata.labels` / `metadata.annotations` worded as the real server words them.
pub(crate) fn validate(obj: &Value) -> Vec<FieldError> {
    let meta = obj.get("metadata");
    let mut errors = Vec::new();
    if let Some(labels) = meta.and_then(|m| m.get("labels")) {
        check_labels(labels, &mut errors);
    }
    if let Some(annotations) = meta.and_then(|m| m.get("annotations")) {
        check_annotations(annotations, &mut errors);
    }
    errors
}

fn invalid(field: &str, bad: &str, detail: String) -> FieldError {
    FieldError {
        field: field.into(),
        kind: FieldErrorKind::Invalid,
        bad_value: Some(format!("{bad:?}")),
        detail,
    }
}

fn not_string_map(field: &str, errors: &mut Vec<FieldError>) {
    errors.push(FieldError {
        field: field.into(),
        kind: FieldErrorKind::TypeInvalid,
        bad_value: None,
        detail: "must be a map of strings to strings".into(),
    });
}

fn check_labels(labels: &Value, errors: &mut Vec<FieldError>) {
    const FIELD: &str = "metadata.labels";
    let Some(map) = labels.as_object() else {
        return not_string_map(FIELD, errors);
    };
    for (key, value) in map {
        for why in qualified_name(key) {
            errors.push(invalid(FIELD, key, why));
        }
        let Some(value) = value.as_str() else {
            return not_string_map(FIELD, errors);
        };
        for why in label_value(value) {
            errors.push(invalid(FIELD, value, why));
        }
    }
}

fn check_annotations(annotations: &Value, errors: &mut Vec<FieldError>) {
    const FIELD: &str = "metadata.annotations";
    let Some(map) = annotations.as_object() else {
        return not_string_map(FIELD, errors);
    };
    let mut size = 0;
    for (key, value) in map {
        // The rule is the qualified-name one, except that case does not matter.
        for why in qualified_name(&key.to_lowercase()) {
            errors.push(invalid(FIELD, key, why));
        }
        let Some(value) = value.as_str() else {
            return not_string_map(FIELD, errors);
        };
        size += key.len() + value.len();
    }
    if size > TOTAL_ANNOTATION_SIZE {
        errors.push(FieldError {
            field: FIELD.into(),
            kind: FieldErrorKind::TooLong,
            bad_value: None,
            detail: format!("may not be more than {TOTAL_ANNOTATION_SIZE} bytes"),
        });
    }
}

fn max_len(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`: the name part of a qualified name, and
/// (or empty) a label value.
fn is_qualified_name_part(s: &str) -> bool {
    let inner = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars().all(inner)
}

/// apimachinery's `IsQualifiedName`: `[prefix/]name`, the prefix a DNS-1123 subdomain.
pub(crate) fn qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_RULE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errs.push(format!("name part {}", max_len(QUALIFIED_NAME_MAX)));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!("name part {QUALIFIED_NAME_RULE}"));
    }
    errs
}

/// apimachinery's `IsValidLabelValue`.
fn label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        errs.push(max_len(LABEL_VALUE_MAX));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(LABEL_VALUE_RULE.to_owned());
    }
    errs
}

/// apimachinery's `IsDNS1123Subdomain`.
fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len(DNS1123_SUBDOMAIN_MAX));
    }
    let label_ok = |l: &str| {
        l.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && l.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && l.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
    };
    if !value.split('.').all(label_ok) {
        errs.push(DNS1123_SUBDOMAIN_RULE.to_owned());
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn qualified_names_follow_apimachinery() {
        for ok in [
            "a",
            "MyName",
            "my.name",
            "123-abc",
            "example.com/My_Name",
            "a/b",
        ] {
            assert!(qualified_name(ok).is_empty(), "{ok}");
        }
        assert_eq!(
            qualified_name("bad key!"),
            [format!("name part {QUALIFIED_NAME_RULE}")]
        );
        assert_eq!(qualified_name("/x"), ["prefix part must be non-empty"]);
        assert_eq!(qualified_name("a/b/c").len(), 1);
        assert_eq!(
            qualified_name(""),
            [
                "name part must be non-empty".to_owned(),
                format!("name part {QUALIFIED_NAME_RULE}")
            ]
        );
        assert_eq!(
            qualified_name(&"x".repeat(64)),
            ["name part must be no more than 63 characters"]
        );
        assert!(qualified_name("Example.com/x")[0].starts_with("prefix part a lowercase"));
    }

    #[test]
    fn label_values_may_be_empty_but_not_long_or_odd() {
        assert!(label_value("").is_empty());
        assert!(label_value("v.1_2-3").is_empty());
        assert_eq!(label_value("-x"), [LABEL_VALUE_RULE]);
        assert_eq!(label_value(&"x".repeat(64)), [max_len(63)]);
    }

    #[test]
    fn empty_collections_are_dropped_and_others_kept() {
        let mut o = json!({"metadata": {"name": "n", "labels": {}, "finalizers": [], "annotations": {"a": ""}, "ownerReferences": [], "generateName": ""}});
        drop_empty_collections(&mut o);
        assert_eq!(
            o,
            json!({"metadata": {"name": "n", "annotations": {"a": ""}, "generateName": ""}})
        );
    }
}
