//! The HTTP layer: one handler that resolves the path, records the request, applies
//! injected faults, negotiates the response format (JSON, Table, metadata-only) and
//! calls the verbs in `ops.rs` under the store lock.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http::{HeaderMap, Method};
use serde_json::{Value, json};

use super::builtin::{field_value, to_view};
use super::discovery;
use super::faults::{FaultAction, RequestRecord};
use super::meta::{meta_str, name_of, namespace_of};
use super::openapi;
use super::ops::{self, DeleteOpts, Deleted, FieldValidation, Part, WriteOpts};
use super::patch::{self, PatchType};
use super::protobuf;
use super::registry::ResourceDef;
use super::route::{self, ResourcePath, Route};
use super::selectors::{FieldSelector, LabelSelector};
use super::server::Shared;
use super::status::{self, ApiError};
use super::table::{self, IncludeObject};
use super::watch::{self, WatchParams, selected};

/// What representation the client asked for in `Accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Table(IncludeObject),
    /// `PartialObjectMetadata(List)` (kube's metadata-only API).
    Metadata,
}

struct Query(HashMap<String, String>);

impl Query {
    fn parse(q: &str) -> Self {
        Self(form_urlencoded::parse(q.as_bytes()).into_owned().collect())
    }
    fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str)
    }
    fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true" | "1"))
    }
}

fn negotiate(headers: &HeaderMap, q: &Query) -> Format {
    let accept = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    // The first media range we can serve wins, as in the real server's negotiation.
    for range in accept.split(',') {
        let params: Vec<&str> = range.split(';').map(str::trim).collect();
        let has = |p: &str| params.contains(&p);
        if has("as=Table") && has("g=meta.k8s.io") {
            return Format::Table(IncludeObject::parse(q.get("includeObject").unwrap_or("")));
        }
        if (has("as=PartialObjectMetadata") || has("as=PartialObjectMetadataList"))
            && has("g=meta.k8s.io")
        {
            return Format::Metadata;
        }
        if params.first().is_some_and(|m| {
            matches!(*m, "application/json" | "*/*" | "application/*" | "") && params.len() == 1
        }) {
            return Format::Json;
        }
    }
    Format::Json
}

fn json_response(code: u16, v: &Value, warnings: &[String]) -> Response {
    let mut b = Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .header("cache-control", "no-cache, private");
    for w in warnings {
        let text = format!("299 - {}", serde_json::to_string(w).unwrap_or_default());
        b = b.header("warning", text);
    }
    b.body(Body::from(v.to_string())).unwrap_or_default()
}

fn error_response(e: &ApiError) -> Response {
    let mut resp = json_response(e.code, &e.to_status(), &[]);
    if let Some(secs) = e.retry_after
        && let Ok(v) = http::HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(http::header::RETRY_AFTER, v);
    }
    resp
}

fn record_for(
    method: &Method,
    path: &str,
    route: &Route,
    q: &Query,
    headers: &HeaderMap,
) -> RequestRecord {
    let user_agent = headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let mut r = RequestRecord {
        verb: method.as_str().to_lowercase(),
        group: String::new(),
        version: String::new(),
        resource: String::new(),
        subresource: String::new(),
        namespace: None,
        name: None,
        path: path.to_owned(),
        user_agent,
        status: 0,
    };
    if let Route::Resource(p) = route {
        r.verb = route::verb(method, p, q.flag("watch")).to_owned();
        r.group = p.group.clone();
        r.version = p.version.clone();
        r.resource = p.plural.clone();
        r.subresource = p.subresource.clone().unwrap_or_default();
        // A namespace's own requests are in that namespace for RBAC purposes.
        r.namespace = p.namespace.clone().or_else(|| {
            (p.group.is_empty() && p.plural == "namespaces")
                .then(|| p.name.clone())
                .flatten()
        });
        r.name = p.name.clone();
    }
    r
}

/// The one handler behind every path.
pub(crate) async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let q = Query::parse(parts.uri.query().unwrap_or(""));
    let route = route::parse(&path);
    let mut record = record_for(&parts.method, &path, &route, &q, &parts.headers);
    let fault = shared.faults.take(&record);
    let resp = match fault {
        Some(FaultAction::Fail { code, retry_after }) => {
            error_response(&ApiError::injected(code, retry_after))
        }
        other => {
            if let Some(FaultAction::Delay(d)) = other {
                tokio::time::sleep(d).await;
            }
            let resp = match serve(&shared, &parts.method, &parts.headers, body, route, &q).await {
                Ok(resp) => resp,
                Err(e) => error_response(&e),
            };
            // The write is committed and its watch event sent; only the answer waits, so
            // a client can see its own write on a watch before the response to it.
            if let Some(FaultAction::DelayResponse(d)) = other {
                tokio::time::sleep(d).await;
            }
            resp
        }
    };
    record.status = resp.status().as_u16();
    tracing::debug!(verb = %record.verb, path = %record.path, status = record.status, "request");
    let mut log = shared.log.lock();
    if log.len() >= shared.config.request_log_capacity.max(1) {
        log.pop_front();
    }
    log.push_back(record);
    drop(log);
    resp
}

async fn serve(
    shared: &Arc<Shared>,
    method: &Method,
    headers: &HeaderMap,
    body: Body,
    route: Route,
    q: &Query,
) -> Result<Response, ApiError> {
    let ok = |v: Value| Ok(json_response(200, &v, &[]));
    if !matches!(route, Route::Resource(_)) && method != Method::GET {
        return Err(ApiError::method_not_allowed());
    }
    match route {
        Route::Version => ok(discovery::version()),
        Route::Health => Ok(Response::builder()
            .status(200)
            .header("content-type", "text/plain")
            .body(Body::from("ok"))
            .unwrap_or_default()),
        Route::CoreVersions => ok(discovery::core_versions(&shared.address)),
        Route::Groups => ok(discovery::groups(&shared.state.lock().registry)),
        Route::Group(g) => {
            let doc = discovery::group(&shared.state.lock().registry, &g);
            doc.map_or_else(|| Err(ApiError::no_route()), ok)
        }
        Route::ResourceList { group, version } => {
            let doc = discovery::resource_list(&shared.state.lock().registry, &group, &version);
            doc.map_or_else(|| Err(ApiError::no_route()), ok)
        }
        Route::OpenApiV3Index => ok(openapi::index(&shared.state.lock().registry)),
        Route::OpenApiV3(p) => {
            let doc = openapi::document(&shared.state.lock().registry, &p);
            doc.map_or_else(|| Err(ApiError::no_route()), ok)
        }
        Route::OpenApiV2 => Ok(Response::builder()
            .status(200)
            .header("content-type", openapi::V2_MEDIA_TYPE)
            .body(Body::from(openapi::v2_document()))
            .unwrap_or_default()),
        Route::NotFound => Err(ApiError::no_route()),
        Route::Resource(r) => resource(shared, method, headers, body, r, q).await,
    }
}

async fn read_body(shared: &Shared, headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
    let limit = shared.config.max_body_bytes;
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::too_large(limit));
    }
    axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| ApiError::too_large(limit))
}

fn content_type(headers: &HeaderMap) -> &str {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
}

/// The media type of the body, without parameters, lowercase.
fn media_type(headers: &HeaderMap) -> String {
    let ct = content_type(headers);
    ct.split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Can `def`'s objects be sent in protobuf? Built-ins can (as far as this server has
/// their messages); custom resources never, as on a real server.
fn accepts_protobuf(def: &ResourceDef) -> bool {
    !def.is_custom() && protobuf::decodes(&def.kind)
}

/// 415, worded as the real server's content negotiation words it.
fn unsupported_media_type(def: &ResourceDef) -> ApiError {
    let mut accepted = String::from("application/json, application/yaml");
    if accepts_protobuf(def) {
        accepted.push_str(", ");
        accepted.push_str(protobuf::MEDIA_TYPE);
    }
    ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: {accepted}"
        ),
    )
}

fn parse_object(def: &ResourceDef, headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    let v = match media_type(headers).as_str() {
        // No Content-Type is JSON, the first type the server accepts.
        "" | "application/json" => patch::parse_json(body)?,
        "application/yaml" => patch::parse_yaml(body)?,
        protobuf::MEDIA_TYPE if accepts_protobuf(def) => protobuf::decode(body)?,
        _ => return Err(unsupported_media_type(def)),
    };
    if v.is_object() {
        Ok(v)
    } else {
        Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ))
    }
}

fn write_opts(q: &Query, headers: &HeaderMap) -> Result<WriteOpts, ApiError> {
    let validation = match q.get("fieldValidation") {
        None | Some("") => FieldValidation::default(),
        Some("Strict") => FieldValidation::Strict,
        Some("Warn") => FieldValidation::Warn,
        Some("Ignore") => FieldValidation::Ignore,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "fieldValidation parameter {other:?} must be one of \"Ignore\", \"Warn\", \"Strict\""
            )));
        }
    };
    Ok(WriteOpts {
        dry_run: q.get("dryRun").is_some_and(|v| !v.is_empty()),
        validation,
        field_manager: q.get("fieldManager").map(str::to_owned),
        force: q.flag("force"),
        user_agent: Some(
            headers
                .get(http::header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned(),
        ),
        applying: false,
    })
}

fn render_one(def: &ResourceDef, view: &Value, format: Format) -> Value {
    match format {
        Format::Json => view.clone(),
        Format::Metadata => table::partial_metadata(view),
        Format::Table(include) => {
            let rv = meta_str(view, "resourceVersion").unwrap_or("").to_owned();
            table::table(def, [view], json!({"resourceVersion": rv}), include)
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    rv: u64,
    ns: String,
    name: String,
}

fn selectors(def: &ResourceDef, q: &Query) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(q.get("labelSelector").unwrap_or(""))?;
    let fields = FieldSelector::parse(q.get("fieldSelector").unwrap_or(""))?;
    fields.check_fields(|f| field_value(def, &json!({}), f).is_some())?;
    Ok((labels, fields))
}

fn list(
    shared: &Shared,
    def: &ResourceDef,
    ns: Option<&str>,
    q: &Query,
    format: Format,
) -> Result<Response, ApiError> {
    let (labels, fields) = selectors(def, q)?;
    let limit = q
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0);
    let token = match q.get("continue").filter(|c| !c.is_empty()) {
        Some(c) => Some(
            URL_SAFE_NO_PAD
                .decode(c)
                .ok()
                .and_then(|b| serde_json::from_slice::<ContinueToken>(&b).ok())
                .ok_or_else(|| ApiError::bad_request("invalid continue token"))?,
        ),
        None => None,
    };
    let (items, list_rv, more) = {
        let st = shared.state.lock();
        if let Some(t) = &token
            && t.rv < st.compacted()
        {
            return Err(ApiError::expired(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
            ));
        }
        let list_rv = token.as_ref().map_or(st.rv, |t| t.rv);
        let after = token.as_ref().map(|t| (t.ns.clone(), t.name.clone()));
        let mut items = Vec::new();
        let mut more = false;
        for obj in st.list(&def.storage, ns, after.as_ref()) {
            if !selected(def, ns, &labels, &fields, obj) {
                continue;
            }
            if limit.is_some_and(|l| items.len() >= l) {
                more = true;
                break;
            }
            items.push(obj.clone());
        }
        (items, list_rv, more)
    };
    let mut list_meta = json!({"resourceVersion": list_rv.to_string()});
    if more && let Some(last) = items.last() {
        let t = ContinueToken {
            rv: list_rv,
            ns: namespace_of(last).to_owned(),
            name: name_of(last).to_owned(),
        };
        list_meta["continue"] =
            json!(URL_SAFE_NO_PAD.encode(serde_json::to_vec(&t).unwrap_or_default()));
    }
    let views: Vec<Value> = items.iter().map(|o| to_view(def, o)).collect();
    let doc = match format {
        Format::Table(include) => table::table(def, &views, list_meta, include),
        Format::Metadata => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": list_meta,
            "items": views.iter().map(table::partial_metadata).collect::<Vec<_>>(),
        }),
        Format::Json => json!({
            "kind": def.list_kind,
            "apiVersion": def.api_version(),
            "metadata": list_meta,
            "items": views,
        }),
    };
    Ok(json_response(200, &doc, &[]))
}

fn start_watch(
    shared: &Arc<Shared>,
    def: Arc<ResourceDef>,
    ns: Option<&str>,
    name: Option<&str>,
    q: &Query,
    format: Format,
) -> Result<Response, ApiError> {
    let (labels, mut fields) = selectors(&def, q)?;
    if let Some(name) = name {
        fields.0.push(super::selectors::FieldReq {
            field: "metadata.name".into(),
            value: name.into(),
            negate: false,
        });
    }
    let since = match q.get("resourceVersion") {
        None | Some("") | Some("0") => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?,
        ),
    };
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|t| *t > 0)
        .map_or(Duration::from_secs(1800), Duration::from_secs);
    Ok(watch::watch(
        shared.clone(),
        def,
        WatchParams {
            since,
            timeout,
            bookmarks: q.flag("allowWatchBookmarks"),
            send_initial_events: q.flag("sendInitialEvents"),
            labels,
            fields,
            namespace: ns.map(str::to_owned),
            format,
        },
    ))
}

fn delete_opts(q: &Query, headers: &HeaderMap, body: &[u8]) -> Result<DeleteOpts, ApiError> {
    // A typed Go client sends its DeleteOptions in protobuf; anything else is read as
    // JSON, leniently (an unreadable body is no options at all).
    let v: Value = if media_type(headers) == protobuf::MEDIA_TYPE && !body.is_empty() {
        protobuf::decode(body)?
    } else {
        serde_json::from_slice(body).unwrap_or(Value::Null)
    };
    let pre = |k: &str| {
        v.get("preconditions")
            .and_then(|p| p.get(k))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let body_dry = v
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    Ok(DeleteOpts {
        dry_run: body_dry || q.get("dryRun").is_some_and(|v| !v.is_empty()),
        uid: pre("uid"),
        resource_version: pre("resourceVersion"),
    })
}

async fn resource(
    shared: &Arc<Shared>,
    method: &Method,
    headers: &HeaderMap,
    body: Body,
    r: ResourcePath,
    q: &Query,
) -> Result<Response, ApiError> {
    let def = shared
        .state
        .lock()
        .registry
        .lookup(&r.group, &r.version, &r.plural)
        .ok_or_else(ApiError::no_route)?;
    if r.namespace.is_some() && !def.namespaced {
        return Err(ApiError::no_route());
    }
    let part = match r.subresource.as_deref() {
        None => Part::Main,
        Some("status") if def.status_subresource => Part::Status,
        Some(_) => return Err(ApiError::no_route()),
    };
    let ns = r.namespace.as_deref();
    let watching = r.legacy_watch || q.flag("watch");
    let format = negotiate(headers, q);
    let name = r.name.as_deref();
    let created = |w: &ops::Written| if w.created { 201 } else { 200 };
    match (method.as_str(), name) {
        ("GET", n) if watching => start_watch(shared, def, ns, n, q, format),
        ("GET", Some(name)) => {
            let key_ns = if def.namespaced { ns.unwrap_or("") } else { "" };
            let view = shared
                .state
                .lock()
                .get(&def.storage, key_ns, name)
                .map(|o| to_view(&def, o))
                .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
            Ok(json_response(200, &render_one(&def, &view, format), &[]))
        }
        ("GET", None) => list(shared, &def, ns, q, format),
        ("POST", None) if part == Part::Main && (ns.is_some() || !def.namespaced) => {
            let opts = write_opts(q, headers)?;
            let obj = parse_object(&def, headers, &read_body(shared, headers, body).await?)?;
            let w = ops::create(&mut shared.state.lock(), &def, ns, obj, &opts)?;
            Ok(json_response(201, &w.object, &w.warnings))
        }
        ("PUT", Some(name)) => {
            let opts = write_opts(q, headers)?;
            let obj = parse_object(&def, headers, &read_body(shared, headers, body).await?)?;
            let w = ops::update(&mut shared.state.lock(), &def, ns, name, obj, part, &opts)?;
            Ok(json_response(created(&w), &w.object, &w.warnings))
        }
        ("PATCH", Some(name)) => {
            let ct = content_type(headers);
            let kind = PatchType::from_content_type(ct).ok_or_else(|| {
                ApiError::unsupported_patch(patch::accepted_types(!def.is_custom()))
            })?;
            let opts = write_opts(q, headers)?;
            let bytes = read_body(shared, headers, body).await?;
            let w = ops::patch(
                &mut shared.state.lock(),
                &def,
                ns,
                name,
                kind,
                &bytes,
                part,
                &opts,
            )?;
            Ok(json_response(created(&w), &w.object, &w.warnings))
        }
        ("DELETE", Some(name)) if part == Part::Main => {
            let bytes = read_body(shared, headers, body).await?;
            let opts = delete_opts(q, headers, &bytes)?;
            match ops::delete(&mut shared.state.lock(), &def, ns, name, &opts)? {
                Deleted::Gone(obj) => Ok(json_response(
                    200,
                    &status::success(
                        &def.group,
                        &def.plural,
                        name,
                        meta_str(&obj, "uid").unwrap_or(""),
                    ),
                    &[],
                )),
                Deleted::Pending(obj) => Ok(json_response(200, &obj, &[])),
            }
        }
        ("DELETE", None) if part == Part::Main => {
            let bytes = read_body(shared, headers, body).await?;
            let opts = delete_opts(q, headers, &bytes)?;
            let (labels, fields) = selectors(&def, q)?;
            let mut st = shared.state.lock();
            let names: Vec<(String, String)> = st
                .list(&def.storage, ns, None)
                .filter(|o| selected(&def, ns, &labels, &fields, o))
                .map(|o| (namespace_of(o).to_owned(), name_of(o).to_owned()))
                .collect();
            let mut items = Vec::new();
            for (obj_ns, obj_name) in names {
                let scope = def.namespaced.then_some(obj_ns.as_str());
                let each = DeleteOpts {
                    dry_run: opts.dry_run,
                    ..DeleteOpts::default()
                };
                match ops::delete(&mut st, &def, scope, &obj_name, &each) {
                    Ok(Deleted::Gone(o) | Deleted::Pending(o)) => items.push(o),
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            let rv = st.rv.to_string();
            drop(st);
            Ok(json_response(
                200,
                &json!({"kind": def.list_kind, "apiVersion": def.api_version(), "metadata": {"resourceVersion": rv}, "items": items}),
                &[],
            ))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}
