//! Request bodies in other formats than JSON: the Kubernetes protobuf envelope that
//! client-go's typed clients (and so `kubectl create namespace`) send for built-in
//! kinds, and 415 Unsupported Media Type for what the server cannot decode.

use serde_json::json;

use crate::apiserver::common::*;

const PROTOBUF: (&str, &str) = ("content-type", "application/vnd.kubernetes.protobuf");

/// A length-delimited protobuf field (wire type 2).
fn field(number: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![(number << 3) | 2];
    let mut len = payload.len();
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend_from_slice(payload);
    out
}

/// `k8s\0` + runtime.Unknown{typeMeta, raw}: how client-go frames a protobuf body.
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let type_meta = [field(1, api_version.as_bytes()), field(2, kind.as_bytes())].concat();
    [
        b"k8s\0".to_vec(),
        field(1, &type_meta),
        field(2, raw),
        field(3, b""),
        field(4, b""),
    ]
    .concat()
}

/// A Namespace as client-go encodes it: empty strings and an empty creationTimestamp
/// are written out, as gogo-protobuf does for non-pointer fields.
fn namespace(name: &str, label: (&str, &str)) -> Vec<u8> {
    let entry = [field(1, label.0.as_bytes()), field(2, label.1.as_bytes())].concat();
    let meta = [
        field(1, name.as_bytes()),
        field(2, b""),
        field(3, b""),
        field(8, b""),
        field(11, &entry),
        field(14, b"example.dev/keep"),
    ]
    .concat();
    let status = field(1, b"");
    let ns = [field(1, &meta), field(2, b""), field(3, &status)].concat();
    envelope("v1", "Namespace", &ns)
}

#[tokio::test]
async fn a_protobuf_namespace_is_created_like_a_json_one() {
    let (_s, c) = with_crds().await;
    let r = raw(
        &c,
        "POST",
        "/api/v1/namespaces?fieldManager=kubectl-create&fieldValidation=Strict",
        &[
            PROTOBUF,
            (
                "accept",
                "application/vnd.kubernetes.protobuf,application/json",
            ),
        ],
        namespace("team-a", ("tier", "gold")),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        r.headers["content-type"], "application/json",
        "the client accepts JSON as well"
    );
    let ns = get_json(&c, "/api/v1/namespaces/team-a").await.body;
    assert_eq!(ns["metadata"]["labels"]["tier"], "gold");
    assert_eq!(ns["metadata"]["finalizers"], json!(["example.dev/keep"]));
    assert_eq!(ns["status"]["phase"], "Active");
    assert!(ns["metadata"]["creationTimestamp"].as_str().is_some());
    assert!(ns["metadata"].get("generateName").is_none());
    let names: Vec<String> = get_json(&c, "/api/v1/namespaces").await.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.contains(&"team-a".to_owned()), "{names:?}");
}

#[tokio::test]
async fn bodies_the_server_cannot_decode_get_415_with_a_status() {
    let (_s, c) = with_crds().await;
    // Custom resources are JSON (or YAML) only, as on a real server.
    let widget = envelope("test.example.dev/v1", "Widget", &field(1, &field(1, b"w")));
    let r = raw(
        &c,
        "POST",
        "/apis/test.example.dev/v1/widgets",
        &[PROTOBUF],
        widget,
    )
    .await;
    assert_eq!(r.status, 415, "{}", r.body);
    assert_eq!(r.body["kind"], "Status");
    assert_eq!(r.body["reason"], "UnsupportedMediaType");
    assert_eq!(
        r.body["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
    );
    let r = raw(
        &c,
        "POST",
        "/api/v1/namespaces",
        &[("content-type", "text/plain")],
        b"team-b".to_vec(),
    )
    .await;
    assert_eq!(r.status, 415, "{}", r.body);
    assert_eq!(
        r.body["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    );
    // A protobuf body that is not what it claims is a 400, not a panic.
    let r = raw(
        &c,
        "POST",
        "/api/v1/namespaces",
        &[PROTOBUF],
        b"k8s\0\x0a\xff".to_vec(),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["reason"], "BadRequest");
    assert_eq!(get_json(&c, "/api/v1/namespaces/team-b").await.status, 404);
}
