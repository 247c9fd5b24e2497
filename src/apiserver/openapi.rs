//! OpenAPI v3, as much as kubectl needs: an index of group-versions, and per
//! group-version documents whose operations carry `x-kubernetes-group-version-kind` and
//! the `fieldValidation` query parameter (kubectl looks for it on the PATCH operation to
//! decide that the server validates, and then leaves validation to the server), plus
//! component schemas from the CRDs' `openAPIV3Schema`.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Map, Value, json};

use super::registry::{Flavor, Registry, ResourceDef};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `io.k8s.api.core.v1.Namespace`-style names for built-ins, reversed group for CRDs
/// (`dev.example.test.v1.Widget`), as the real server names them.
fn schema_name(d: &ResourceDef) -> String {
    match d.flavor {
        Flavor::Custom { .. } => {
            let rev: Vec<&str> = d.group.split('.').rev().collect();
            format!("{}.{}.{}", rev.join("."), d.version, d.kind)
        }
        Flavor::Crd => format!(
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{}.{}",
            d.version, d.kind
        ),
        _ => {
            let g = if d.group.is_empty() {
                "core".to_owned()
            } else {
                d.group.trim_end_matches(".k8s.io").to_owned()
            };
            format!("io.k8s.api.{g}.{}.{}", d.version, d.kind)
        }
    }
}

fn param(name: &str, type_: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": type_, "uniqueItems": true}})
}

fn write_params(patch: bool) -> Vec<Value> {
    let mut p = vec![
        param(
            "dryRun",
            "string",
            "When present, indicates that modifications should not be persisted.",
        ),
        param(
            "fieldManager",
            "string",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
        ),
        param(
            "fieldValidation",
            "string",
            "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn (default), Strict.",
        ),
    ];
    if patch {
        p.push(param(
            "force",
            "boolean",
            "Force is going to \"force\" Apply requests.",
        ));
    }
    p
}

fn op(d: &ResourceDef, action: &str, id: &str, params: Vec<Value>, schema_ref: &str) -> Value {
    json!({
        "operationId": id,
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": d.group, "version": d.version, "kind": d.kind},
        "parameters": params,
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": schema_ref}}}}
        },
    })
}

fn paths_for(d: &ResourceDef, paths: &mut Map<String, Value>) {
    let base = format!("/{}", gv_path(&d.group, &d.version));
    let coll = if d.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}", d.plural)
    } else {
        format!("{base}/{}", d.plural)
    };
    let item = format!("{coll}/{{name}}");
    let r = format!("#/components/schemas/{}", schema_name(d));
    let id = |verb: &str| format!("{verb}{}{}", d.kind, d.version);
    paths.insert(
        coll.clone(),
        json!({
            "get": op(d, "list", &id("list"), vec![], &r),
            "post": op(d, "post", &id("create"), write_params(false), &r),
            "delete": op(d, "deletecollection", &id("deleteCollection"), vec![], &r),
        }),
    );
    paths.insert(
        item.clone(),
        json!({
            "get": op(d, "get", &id("read"), vec![], &r),
            "put": op(d, "put", &id("replace"), write_params(false), &r),
            "patch": op(d, "patch", &id("patch"), write_params(true), &r),
            "delete": op(d, "delete", &id("delete"), vec![], &r),
        }),
    );
    if d.status_subresource {
        paths.insert(
            format!("{item}/status"),
            json!({
                "get": op(d, "get", &id("readStatus"), vec![], &r),
                "put": op(d, "put", &id("replaceStatus"), write_params(false), &r),
                "patch": op(d, "patch", &id("patchStatus"), write_params(true), &r),
            }),
        );
    }
}

fn component(d: &ResourceDef) -> Value {
    let gvk = json!([{"group": d.group, "version": d.version, "kind": d.kind}]);
    let mut schema = match &d.flavor {
        Flavor::Custom {
            schema: Some(s), ..
        } => s.schema().clone(),
        _ => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    };
    if let Value::Object(m) = &mut schema {
        m.insert("x-kubernetes-group-version-kind".into(), gvk);
        let props = m.entry("properties").or_insert_with(|| json!({}));
        if let Value::Object(p) = props {
            p.insert("apiVersion".into(), json!({"type": "string"}));
            p.insert("kind".into(), json!({"type": "string"}));
            p.entry("metadata")
                .or_insert_with(|| json!({"type": "object"}));
        }
    }
    schema
}

/// The document for one group-version, or `None` if it is not served.
pub(crate) fn document(reg: &Registry, path: &str) -> Option<Value> {
    let (group, version) = match path.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => (String::new(), (*v).to_owned()),
        ["apis", g, v] => ((*g).to_owned(), (*v).to_owned()),
        _ => return None,
    };
    let defs = reg.resources(&group, &version)?;
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for d in &defs {
        paths_for(d, &mut paths);
        schemas.insert(schema_name(d), component(d));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// The index: every served group-version with a content hash in its URL (clients cache
/// by URL, so the hash must change when the document does).
pub(crate) fn index(reg: &Registry) -> Value {
    let mut gvs: Vec<(String, String)> = reg
        .all()
        .map(|d| (d.group.clone(), d.version.clone()))
        .collect();
    gvs.sort();
    gvs.dedup();
    let mut paths = Map::new();
    for (g, v) in gvs {
        let p = gv_path(&g, &v);
        let doc = document(reg, &p).unwrap_or(Value::Null);
        let mut h = DefaultHasher::new();
        doc.to_string().hash(&mut h);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={:016X}", h.finish())}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v2`'s media type, as kube-apiserver answers it (client-go asks for the same
/// with an `@`, which Go's media-type parser rejects in an answer, and parses nothing but
/// protobuf).
pub(crate) const V2_MEDIA_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// `/openapi/v2`: a Swagger 2.0 document that defines no kind, as protobuf (gnostic's
/// `openapi_v2.Document`: `swagger` is field 1, `info` field 2 with `title` 1 and
/// `version` 2). kubectl falls back to it for what OpenAPI v3 does not name, such as a
/// `kind: List` file (as `kubectl get -o yaml` writes one); finding no definition of a
/// kind there, it leaves the kind's checks to this server, as for a CRD without a schema.
/// The kinds' schemas are OpenAPI v3's.
pub(crate) fn v2_document() -> Vec<u8> {
    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let length = u8::try_from(bytes.len()).expect("a short field");
        assert!(length < 0x80, "one byte of length");
        [&[number << 3 | 2, length][..], bytes].concat()
    }
    let info = [field(1, b"server-binder"), field(2, b"v2")].concat();
    [field(1, b"2.0"), field(2, &info)].concat()
}
