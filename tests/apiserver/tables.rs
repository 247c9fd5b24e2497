//! What kubectl reads besides objects: Table responses (get and watch), OpenAPI v3.

use serde_json::json;

use crate::apiserver::common::*;

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

#[tokio::test]
async fn tables_have_the_name_then_the_printer_columns() {
    let (_s, c) = with_crds().await;
    create_widget(&c, "w", "blue").await;
    let r = raw(
        &c,
        "GET",
        "/apis/test.example.dev/v1/widgets?includeObject=Object",
        &[("accept", TABLE)],
        Vec::new(),
    )
    .await;
    assert_eq!(r.status, 200);
    let t = r.body;
    assert_eq!(
        (t["kind"].as_str(), t["apiVersion"].as_str()),
        (Some("Table"), Some("meta.k8s.io/v1"))
    );
    let cols: Vec<(&str, i64)> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["priority"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        cols,
        [
            ("Name", 0),
            ("Color", 0),
            ("Size", 0),
            ("Replicas", 1),
            ("Phase", 0),
            ("Age", 0)
        ]
    );
    let row = &t["rows"][0];
    assert_eq!(row["cells"][0], "w");
    assert_eq!(row["cells"][1], "blue");
    assert_eq!(row["cells"][4], serde_json::Value::Null, "no status yet");
    let age = row["cells"][5].as_str().unwrap();
    assert!(age.ends_with('s'), "date columns render as an age: {age}");
    assert_eq!(row["object"]["kind"], "Widget");
    assert!(t["metadata"]["resourceVersion"].as_str().is_some());

    let one = raw(
        &c,
        "GET",
        "/apis/test.example.dev/v1/widgets/w",
        &[("accept", TABLE)],
        Vec::new(),
    )
    .await
    .body;
    assert_eq!(
        one["rows"][0]["object"]["kind"], "PartialObjectMetadata",
        "includeObject defaults to Metadata"
    );
    let none = raw(
        &c,
        "GET",
        "/apis/test.example.dev/v1/widgets/w?includeObject=None",
        &[("accept", TABLE)],
        Vec::new(),
    )
    .await
    .body;
    assert!(none["rows"][0].get("object").is_none());

    let ns = raw(
        &c,
        "GET",
        "/api/v1/namespaces",
        &[("accept", TABLE)],
        Vec::new(),
    )
    .await
    .body;
    let ns_cols: Vec<&str> = ns["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(ns_cols, ["Name", "Status", "Age"]);
}

#[tokio::test]
async fn a_watch_can_stream_table_rows() {
    let (_s, c) = with_crds().await;
    create_widget(&c, "w", "blue").await;
    let r = raw(
        &c,
        "GET",
        "/apis/test.example.dev/v1/widgets?watch=true&timeoutSeconds=1",
        &[("accept", TABLE)],
        Vec::new(),
    )
    .await;
    let text = r
        .body
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| r.body.to_string());
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["kind"], "Table");
    assert_eq!(first["object"]["rows"][0]["cells"][0], "w");
}

#[tokio::test]
async fn openapi_v3_advertises_field_validation_for_every_served_kind() {
    let (_s, c) = with_crds().await;
    let index = get_json(&c, "/openapi/v3").await.body;
    let url = index["paths"]["apis/test.example.dev/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(index["paths"]["api/v1"].is_object());
    let doc = get_json(&c, &url).await.body;
    let patch =
        &doc["paths"]["/apis/test.example.dev/v1/namespaces/{namespace}/gadgets/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": GROUP, "version": "v1", "kind": "Gadget"})
    );
    assert!(
        patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
    );
    let schema = &doc["components"]["schemas"]["dev.example.test.v1.Widget"];
    assert_eq!(schema["properties"]["spec"]["required"], json!(["color"]));
    // The index changes when the served kinds do.
    let server_url = url.clone();
    let _ = server_url;
}

/// CRDs are printed by the default table convertor: `Created At` is a `date` column
/// holding the RFC 3339 creation time itself (kubectl shows it as is), not an age.
#[tokio::test]
async fn the_crd_table_shows_when_each_crd_was_created() {
    let (_s, c) = with_crds().await;
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let t = raw(&c, "GET", path, &[("accept", TABLE)], Vec::new())
        .await
        .body;
    let cols: Vec<(&str, &str)> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["type"].as_str().unwrap()))
        .collect();
    assert_eq!(cols, [("Name", "string"), ("Created At", "date")]);
    let created = get_json(&c, &format!("{path}/widgets.test.example.dev"))
        .await
        .body["metadata"]["creationTimestamp"]
        .clone();
    assert!(
        created.as_str().is_some_and(|t| t.ends_with('Z')),
        "{created}"
    );
    let row = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["cells"][0] == "widgets.test.example.dev")
        .expect("the widgets CRD's row");
    assert_eq!(row["cells"][1], created);
}
