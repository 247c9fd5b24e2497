//! The compiled form of an `openAPIV3Schema`: one [`Node`] per schema node,
//! with everything the admission passes need already parsed (regexes
//! compiled, CEL rules compiled and checked).

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::Value;

use super::cel::{self, CompiledRule};
use super::path;
use super::{FieldError, FieldErrorKind};

/// The string formats the real server validates; every other `format`
/// (notably `int32`, `int64`, `float`, `double`) is stripped before
/// validation by apiextensions-apiserver's `StripUnsupportedFormatsPostProcess`,
/// so it is not checked there either. Names are compared with `-` removed.
const SUPPORTED_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

/// One schema node.
#[derive(Debug, Default)]
pub(crate) struct Node {
    /// `type`; `None` for int-or-string and for untyped preserve-unknown-fields nodes.
    pub ty: Option<String>,
    pub nullable: bool,
    pub int_or_string: bool,
    pub preserve_unknown: bool,
    pub embedded: bool,
    pub properties: BTreeMap<String, Node>,
    /// CEL-escaped property name -> property name.
    pub cel_fields: BTreeMap<String, String>,
    /// `additionalProperties` as a schema (`true` is kept as an empty schema).
    pub additional: Option<Box<Node>>,
    /// `additionalProperties: false` (not structural, but honoured).
    pub additional_false: bool,
    pub items: Option<Box<Node>>,
    pub required: Vec<String>,
    pub enum_values: Option<Vec<Value>>,
    pub default: Option<Value>,
    pub maximum: Option<f64>,
    pub exclusive_maximum: bool,
    pub minimum: Option<f64>,
    pub exclusive_minimum: bool,
    pub multiple_of: Option<f64>,
    pub max_length: Option<u64>,
    pub min_length: Option<u64>,
    pub max_items: Option<u64>,
    pub min_items: Option<u64>,
    pub unique_items: bool,
    pub max_properties: Option<u64>,
    pub min_properties: Option<u64>,
    pub pattern: Option<(String, Regex)>,
    /// `format` as written, only if the real server validates it.
    pub format: Option<String>,
    /// `format` as written, whatever it is (CEL uses `date-time`/`duration`/`byte`).
    pub raw_format: Option<String>,
    pub list_type: Option<String>,
    pub list_map_keys: Vec<String>,
    pub all_of: Vec<Node>,
    pub any_of: Vec<Node>,
    pub one_of: Vec<Node>,
    pub not: Option<Box<Node>>,
    pub rules: Vec<CompiledRule>,
    /// Whether this node or any node below it carries CEL rules.
    pub has_rules_below: bool,
}

impl Node {
    /// The `type` names the type validator checks against (`integer,string` for int-or-string).
    pub fn type_names(&self) -> Option<String> {
        if self.int_or_string {
            Some("integer,string".into())
        } else {
            self.ty.clone()
        }
    }

    /// The type name CEL errors report as the bad value (`"object"`, `"string"`, ...).
    pub fn cel_type_name(&self) -> &str {
        self.ty.as_deref().unwrap_or("")
    }

    /// Whether `name` is a key field of this `x-kubernetes-list-type: map` list.
    pub fn is_list_map(&self) -> bool {
        self.list_type.as_deref() == Some("map")
    }

    /// Compiles the whole schema. `errs` collects every problem found.
    pub fn compile_root(schema: &Value, errs: &mut Vec<FieldError>) -> Node {
        Self::compile(schema, "openAPIV3Schema", true, None, errs, 0)
    }

    fn compile(
        schema: &Value,
        at: &str,
        correlatable: bool,
        uncorrelatable_at: Option<&str>,
        errs: &mut Vec<FieldError>,
        depth: usize,
    ) -> Node {
        let mut node = Node::default();
        let Some(obj) = schema.as_object() else {
            if !matches!(schema, Value::Bool(true)) {
                errs.push(invalid(at, schema, "must be a schema object"));
            }
            return node;
        };
        if depth > 64 {
            errs.push(FieldError {
                field: at.to_string(),
                kind: FieldErrorKind::Forbidden,
                bad_value: None,
                detail: "schema nesting is too deep".into(),
            });
            return node;
        }
        let flag = |k: &str| obj.get(k).and_then(Value::as_bool).unwrap_or(false);
        let num = |k: &str| obj.get(k).and_then(Value::as_f64);
        let uint = |k: &str| obj.get(k).and_then(Value::as_u64);

        node.ty = obj.get("type").and_then(Value::as_str).map(str::to_string);
        node.nullable = flag("nullable");
        node.int_or_string = flag("x-kubernetes-int-or-string");
        node.preserve_unknown = flag("x-kubernetes-preserve-unknown-fields");
        node.embedded = flag("x-kubernetes-embedded-resource");
        node.required = strings(obj.get("required"));
        node.enum_values = obj.get("enum").and_then(Value::as_array).cloned();
        node.default = obj.get("default").cloned();
        node.maximum = num("maximum");
        node.exclusive_maximum = flag("exclusiveMaximum");
        node.minimum = num("minimum");
        node.exclusive_minimum = flag("exclusiveMinimum");
        node.multiple_of = num("multipleOf");
        node.max_length = uint("maxLength");
        node.min_length = uint("minLength");
        node.max_items = uint("maxItems");
        node.min_items = uint("minItems");
        node.unique_items = flag("uniqueItems");
        node.max_properties = uint("maxProperties");
        node.min_properties = uint("minProperties");
        node.list_type = obj
            .get("x-kubernetes-list-type")
            .and_then(Value::as_str)
            .map(str::to_string);
        node.list_map_keys = strings(obj.get("x-kubernetes-list-map-keys"));
        node.raw_format = obj
            .get("format")
            .and_then(Value::as_str)
            .map(str::to_string);
        node.format = node
            .raw_format
            .clone()
            .filter(|f| SUPPORTED_FORMATS.contains(&f.replace('-', "").as_str()));

        if let Some(p) = obj.get("pattern").and_then(Value::as_str) {
            match Regex::new(p) {
                Ok(re) => node.pattern = Some((p.to_string(), re)),
                Err(e) => errs.push(invalid(
                    &path::child(at, "pattern"),
                    &Value::String(p.into()),
                    &format!("must be a valid regular expression, but isn't: {e}"),
                )),
            }
        }

        if let Some(props) = obj.get("properties").and_then(Value::as_object) {
            for (name, sub) in props {
                let sub_at = format!("{at}.properties[{name}]");
                let child = Self::compile(
                    sub,
                    &sub_at,
                    correlatable,
                    uncorrelatable_at,
                    errs,
                    depth + 1,
                );
                if let Some(escaped) = cel::escape(name) {
                    node.cel_fields.insert(escaped, name.clone());
                }
                node.properties.insert(name.clone(), child);
            }
        }
        match obj.get("additionalProperties") {
            Some(Value::Bool(false)) => node.additional_false = true,
            Some(Value::Bool(true)) => node.additional = Some(Box::default()),
            Some(sub) => {
                let sub_at = format!("{at}.additionalProperties");
                node.additional = Some(Box::new(Self::compile(
                    sub,
                    &sub_at,
                    correlatable,
                    uncorrelatable_at,
                    errs,
                    depth + 1,
                )));
            }
            None => {}
        }
        if let Some(items) = obj.get("items") {
            let sub_at = format!("{at}.items");
            // Only the items of `x-kubernetes-list-type: map` lists can be
            // correlated with the old object (by their keys).
            let items_correlatable = correlatable && node.list_type.as_deref() == Some("map");
            let unc = if correlatable && !items_correlatable {
                Some(sub_at.as_str())
            } else {
                uncorrelatable_at
            };
            node.items = Some(Box::new(Self::compile(
                items,
                &sub_at,
                items_correlatable,
                unc,
                errs,
                depth + 1,
            )));
        }
        for (keyword, target) in [
            ("allOf", &mut node.all_of),
            ("anyOf", &mut node.any_of),
            ("oneOf", &mut node.one_of),
        ] {
            if let Some(branches) = obj.get(keyword).and_then(Value::as_array) {
                for (i, b) in branches.iter().enumerate() {
                    let sub_at = format!("{at}.{keyword}[{i}]");
                    target.push(Self::compile(
                        b,
                        &sub_at,
                        correlatable,
                        uncorrelatable_at,
                        errs,
                        depth + 1,
                    ));
                }
            }
        }
        if let Some(not) = obj.get("not") {
            let sub_at = format!("{at}.not");
            node.not = Some(Box::new(Self::compile(
                not,
                &sub_at,
                correlatable,
                uncorrelatable_at,
                errs,
                depth + 1,
            )));
        }

        if let Some(rules) = obj.get("x-kubernetes-validations") {
            let at_rules = format!("{at}.x-kubernetes-validations");
            node.rules = cel::compile_rules(rules, &node, &at_rules, uncorrelatable_at, errs);
        }
        node.has_rules_below = !node.rules.is_empty()
            || node.all_of.iter().any(|b| !b.rules.is_empty())
            || node.properties.values().any(|p| p.has_rules_below)
            || node.additional.as_ref().is_some_and(|a| a.has_rules_below)
            || node.items.as_ref().is_some_and(|i| i.has_rules_below);
        node
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn invalid(at: &str, v: &Value, detail: &str) -> FieldError {
    FieldError {
        field: at.to_string(),
        kind: FieldErrorKind::Invalid,
        bad_value: Some(path::go_value(v)),
        detail: detail.to_string(),
    }
}
