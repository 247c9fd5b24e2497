//! Defaulting (apiextensions' `structuraldefaulting.Default`).
//!
//! A property's `default` is applied when the property is absent (or `null`
//! while not nullable) and its parent object exists; defaults are then
//! applied inside the defaulted value too, and in every existing array item
//! and map value. Nothing inside the root's `metadata` is defaulted.

use serde_json::Value;

use super::node::Node;

pub(crate) fn apply(v: &mut Value, node: &Node, root: bool) {
    match v {
        Value::Object(map) => {
            for (k, prop) in &node.properties {
                if root && k == "metadata" {
                    continue;
                }
                let Some(default) = &prop.default else {
                    continue;
                };
                let missing = match map.get(k) {
                    None => true,
                    Some(Value::Null) => !prop.nullable,
                    Some(_) => false,
                };
                if missing {
                    map.insert(k.clone(), default.clone());
                }
            }
            for (k, cv) in map.iter_mut() {
                if root && k == "metadata" {
                    continue;
                }
                if let Some(prop) = node.properties.get(k) {
                    apply(cv, prop, false);
                } else if let Some(add) = &node.additional {
                    apply(cv, add, false);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = &node.items {
                for item in items {
                    apply(item, item_node, false);
                }
            }
        }
        _ => {}
    }
}
