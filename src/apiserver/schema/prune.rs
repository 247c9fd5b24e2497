//! Pruning of unknown fields (apiextensions' `structuralpruning`), and the
//! removal of `null`s the schema does not allow (`PruneNonNullableNullsWithoutDefaults`).
//!
//! Unknown-field paths are reported the way `UnknownFieldPathOptions` builds
//! them: property and map keys joined with `.`, indices as `[i]`
//! (`spec.items[0].foo`, `spec.labels.a.foo`).

use serde_json::{Map, Value};

use super::node::Node;
use super::path;

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Prunes the whole object in place and returns the (sorted) paths of what was removed.
/// The root is an embedded resource: `apiVersion`, `kind` and `metadata` are
/// always kept, and nothing inside `metadata` is touched (the server owns it).
pub(crate) fn prune_root(obj: &mut Value, root: &Node) -> Vec<String> {
    let mut pruned = Vec::new();
    if let Value::Object(map) = obj {
        if root.preserve_unknown {
            skip_prune_map(map, root, true, "", &mut pruned);
        } else {
            prune_map(map, Some(root), true, "", &mut pruned);
        }
    }
    // Go reports them in map iteration order; sorted is as good and stable.
    pruned.sort();
    pruned
}

fn prune(v: &mut Value, node: Option<&Node>, at: &str, pruned: &mut Vec<String>) {
    if let Some(n) = node
        && n.preserve_unknown
    {
        skip_prune(v, n, at, pruned);
        return;
    }
    match v {
        Value::Object(map) => prune_map(map, node, node.is_some_and(|n| n.embedded), at, pruned),
        Value::Array(items) => {
            let item_node = node.and_then(|n| n.items.as_deref());
            for (i, item) in items.iter_mut().enumerate() {
                prune(item, item_node, &path::index(at, i), pruned);
            }
        }
        _ => {}
    }
}

fn prune_map(
    map: &mut Map<String, Value>,
    node: Option<&Node>,
    embedded: bool,
    at: &str,
    pruned: &mut Vec<String>,
) {
    let Some(n) = node else {
        for k in map.keys() {
            pruned.push(path::child(at, k));
        }
        map.clear();
        return;
    };
    let mut unknown = Vec::new();
    for (k, v) in map.iter_mut() {
        if embedded
            && META_FIELDS.contains(&k.as_str())
            && (!n.properties.contains_key(k) || k == "metadata")
        {
            // apiVersion/kind/metadata of an embedded resource (and of the
            // root) are not pruned; ObjectMeta is the server's business.
            continue;
        }
        if let Some(prop) = n.properties.get(k) {
            prune(v, Some(prop), &path::child(at, k), pruned);
        } else if let Some(add) = &n.additional {
            prune(v, Some(add), &path::child(at, k), pruned);
        } else if n.additional_false {
            // `additionalProperties: false` rejects rather than prunes.
        } else {
            unknown.push(k.clone());
        }
    }
    for k in unknown {
        pruned.push(path::child(at, &k));
        map.remove(&k);
    }
}

/// Under `x-kubernetes-preserve-unknown-fields`, unknown fields stay but
/// declared properties (and map values, list items) are still pruned inside.
fn skip_prune(v: &mut Value, n: &Node, at: &str, pruned: &mut Vec<String>) {
    match v {
        Value::Object(map) => skip_prune_map(map, n, n.embedded, at, pruned),
        Value::Array(items) => {
            if let Some(item_node) = n.items.as_deref() {
                for (i, item) in items.iter_mut().enumerate() {
                    skip_prune(item, item_node, &path::index(at, i), pruned);
                }
            }
        }
        _ => {}
    }
}

fn skip_prune_map(
    map: &mut Map<String, Value>,
    n: &Node,
    embedded: bool,
    at: &str,
    pruned: &mut Vec<String>,
) {
    for (k, v) in map.iter_mut() {
        if embedded && META_FIELDS.contains(&k.as_str()) {
            continue;
        }
        if let Some(prop) = n.properties.get(k) {
            prune(v, Some(prop), &path::child(at, k), pruned);
        } else if let Some(add) = &n.additional {
            prune(v, Some(add), &path::child(at, k), pruned);
        }
    }
}

/// Drops `"field": null` where the property is neither nullable nor defaulted
/// (a defaulted one gets its default instead). Not reported as unknown.
pub(crate) fn prune_non_nullable_nulls(v: &mut Value, node: &Node, root: bool) {
    match v {
        Value::Object(map) => {
            map.retain(|k, cv| {
                if root && k == "metadata" {
                    return true;
                }
                match node.properties.get(k) {
                    Some(p) => !(cv.is_null() && !p.nullable && p.default.is_none()),
                    None => true,
                }
            });
            for (k, cv) in map.iter_mut() {
                if root && k == "metadata" {
                    continue;
                }
                if let Some(p) = node.properties.get(k) {
                    prune_non_nullable_nulls(cv, p, false);
                } else if let Some(add) = &node.additional {
                    prune_non_nullable_nulls(cv, add, false);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = &node.items {
                for item in items {
                    prune_non_nullable_nulls(item, item_node, false);
                }
            }
        }
        _ => {}
    }
}
