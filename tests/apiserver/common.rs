//! Shared helpers: servers with the test CRDs installed, typed handles on them, raw
//! requests, and waiting on a condition with a deadline.

use http::{Request, StatusCode};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};
use server_binder::apiserver::{ApiServer, ApiServerHandle, Config};

pub const GROUP: &str = "test.example.dev";

pub fn crd(yaml: &str) -> CustomResourceDefinition {
    serde_saphyr::from_str(yaml).expect("fixture CRD parses")
}

pub fn widget_crd() -> CustomResourceDefinition {
    crd(include_str!("../fixtures/widgets.yaml"))
}

pub fn gadget_crd() -> CustomResourceDefinition {
    crd(include_str!("../fixtures/gadgets.yaml"))
}

pub async fn start() -> ApiServerHandle {
    start_with(Config::default()).await
}

pub async fn start_with(config: Config) -> ApiServerHandle {
    ApiServer::start(config).await.expect("server starts")
}

/// A server with the Widget and Gadget CRDs installed, and a client for it.
pub async fn with_crds() -> (ApiServerHandle, Client) {
    with_crds_config(Config::default()).await
}

pub async fn with_crds_config(config: Config) -> (ApiServerHandle, Client) {
    let server = start_with(config).await;
    server
        .install_crd(&widget_crd())
        .await
        .expect("widgets install");
    server
        .install_crd(&gadget_crd())
        .await
        .expect("gadgets install");
    let client = server.client();
    (server, client)
}

/// A client that does not retry 429/503/504 by itself (kube's default client does), to
/// see injected faults as they are.
pub fn no_retry_client(server: &ApiServerHandle) -> Client {
    let mut config = kube::Config::new(server.url().parse().expect("url"));
    config.default_retry = false;
    Client::try_from(config).expect("client")
}

pub fn widget_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "Widget"), "widgets")
}

pub fn gadget_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "Gadget"), "gadgets")
}

pub fn widgets(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &widget_resource())
}

pub fn gadgets(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &gadget_resource())
}

pub fn obj(v: Value) -> DynamicObject {
    serde_json::from_value(v).expect("a valid object")
}

pub fn widget(name: &str, color: &str) -> DynamicObject {
    obj(json!({
        "apiVersion": "test.example.dev/v1", "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"color": color},
    }))
}

pub fn gadget(name: &str, reference: Option<&str>) -> DynamicObject {
    let mut spec = json!({});
    if let Some(r) = reference {
        spec["ref"] = json!({"name": r});
    }
    obj(json!({
        "apiVersion": "test.example.dev/v1", "kind": "Gadget",
        "metadata": {"name": name},
        "spec": spec,
    }))
}

pub async fn create_widget(client: &Client, name: &str, color: &str) -> DynamicObject {
    widgets(client)
        .create(&PostParams::default(), &widget(name, color))
        .await
        .expect("widget created")
}

/// The Status of a failed call.
pub fn api_error<T: std::fmt::Debug>(r: kube::Result<T>) -> Box<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

pub fn rv(o: &DynamicObject) -> u64 {
    o.metadata
        .resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .expect("numeric resourceVersion")
}

/// The shared poll helpers (tests/common/poll.rs): `eventually(what, timeout, check)`
/// returns what `check` found (`Some(v)` gives `v`); `poll::wait_for` returns the value
/// that satisfied a predicate.
pub use crate::common::poll;
pub use poll::eventually;

/// A raw response: status, headers, body (JSON if it parses, else a string).
pub struct Raw {
    pub status: StatusCode,
    pub headers: http::HeaderMap,
    pub body: Value,
}

pub async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Raw {
    let mut b = Request::builder().method(method).uri(path);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let req = b.body(kube::client::Body::from(body)).expect("request");
    let resp = client.send(req).await.expect("response");
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect_bytes().await.expect("body");
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Raw {
        status,
        headers,
        body,
    }
}

pub async fn get_json(client: &Client, path: &str) -> Raw {
    raw(client, "GET", path, &[], Vec::new()).await
}

/// The project's own CRDs, as installed in a cluster (manifests/crds/, kept equal to the
/// types by tests/crd_drift.rs), installed into `server`.
pub async fn install_real_crds(server: &ApiServerHandle) -> Vec<CustomResourceDefinition> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/manifests/crds/metal.binder.dev.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let crds: Vec<CustomResourceDefinition> =
        serde_saphyr::from_multiple(&text).expect("CRDs parse");
    for crd in &crds {
        server.install_crd(crd).await.expect("installs");
    }
    crds
}
