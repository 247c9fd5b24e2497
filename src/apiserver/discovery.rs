//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/{group}` and the per
//! group-version resource lists kubectl and kube's `Discovery` read. (Aggregated
//! discovery is not served: clients asking for it get these plain documents and fall
//! back to per-group requests, as they do with older servers.)

use serde_json::{Value, json};

use super::registry::{Registry, ResourceDef};

pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0+server-binder",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub(crate) fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({"groupVersion": format!("{name}/{v}"), "version": v});
    json!({
        "name": name,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": versions.first().map(gv).unwrap_or(Value::Null),
    })
}

pub(crate) fn groups(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .into_iter()
        .filter(|g| !g.name.is_empty())
        .map(|g| group_doc(&g.name, &g.versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(crate) fn group(reg: &Registry, name: &str) -> Option<Value> {
    let g = reg
        .groups()
        .into_iter()
        .find(|g| g.name == name && !name.is_empty())?;
    let mut doc = group_doc(&g.name, &g.versions);
    if let Value::Object(m) = &mut doc {
        m.insert("kind".into(), json!("APIGroup"));
        m.insert("apiVersion".into(), json!("v1"));
    }
    Some(doc)
}

fn resource_entry(d: &ResourceDef) -> Value {
    let mut r = json!({
        "name": d.plural,
        "singularName": d.singular,
        "namespaced": d.namespaced,
        "kind": d.kind,
        "verbs": d.verbs(),
    });
    if let Value::Object(m) = &mut r {
        if !d.short_names.is_empty() {
            m.insert("shortNames".into(), json!(d.short_names));
        }
        if !d.categories.is_empty() {
            m.insert("categories".into(), json!(d.categories));
        }
    }
    r
}

pub(crate) fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = reg.resources(group, version)?;
    let mut resources = Vec::new();
    for d in &defs {
        resources.push(resource_entry(d));
        if d.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }))
}
