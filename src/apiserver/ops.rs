//! The write verbs as the real registry implements them: create, update, patch, apply,
//! delete (with finalizers and preconditions), deletecollection. Each runs entirely
//! under the store lock, so a write is atomic and nothing half-done is ever stored.

use serde_json::{Map, Value, json};

use super::builtin::{self, UNDELETABLE_NAMESPACES};
use super::crd;
use super::crd_finalizer;
use super::managed;
use super::meta::{
    finalizers_of, meta_mut, meta_str, name_of, name_suffix, namespace_of, new_uid, now_rfc3339,
};
use super::objectmeta;
use super::patch::{self, PatchType};
use super::registry::{Flavor, ResourceDef, storage_key};
use super::schema::{FieldError, FieldErrorKind};
use super::status::ApiError;
use super::store::{EventKind, State};

/// The `fieldValidation` query parameter. Without it the server warns (k8s ≥ 1.27).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum FieldValidation {
    Strict,
    #[default]
    Warn,
    Ignore,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct WriteOpts {
    pub dry_run: bool,
    pub validation: FieldValidation,
    pub field_manager: Option<String>,
    /// `force` for server-side apply.
    pub force: bool,
    /// The request's User-Agent (`None` for the server's own writes, which record no
    /// managedFields entry).
    pub user_agent: Option<String>,
    /// Set by server-side apply, which records its own managedFields entry.
    pub applying: bool,
}

impl WriteOpts {
    /// Who a non-apply write is recorded against in managedFields: `fieldManager`, or
    /// the program name of the User-Agent, as the real server does.
    fn update_manager(&self) -> Option<String> {
        match (&self.field_manager, &self.user_agent) {
            _ if self.applying => None,
            (Some(m), _) if !m.is_empty() => Some(m.clone()),
            (_, Some(ua)) => Some(managed::manager_from_user_agent(ua)),
            (m, None) => m.clone(),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOpts {
    pub dry_run: bool,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

/// The result of a write: the object as the client sees it, plus `Warning` headers.
#[derive(Debug)]
pub(crate) struct Written {
    pub object: Value,
    pub created: bool,
    pub warnings: Vec<String>,
}

/// Which part of an object a write may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Main,
    Status,
}

fn field_error(field: &str, kind: FieldErrorKind, bad: Option<String>, detail: &str) -> FieldError {
    FieldError {
        field: field.into(),
        kind,
        bad_value: bad,
        detail: detail.into(),
    }
}

fn invalid(def: &ResourceDef, name: &str, errors: Vec<FieldError>) -> ApiError {
    ApiError::invalid(&def.group, &def.kind, name, &errors)
}

/// A DNS-1123 subdomain (most names) or label (namespaces).
fn name_problem(name: &str, label: bool) -> Option<&'static str> {
    // Every dot-separated label starts and ends with a letter or digit, as the real
    // regex requires: `a-.b` and `a..b` are not subdomains.
    let label_ok = |l: &str| {
        l.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && l.starts_with(|c: char| c.is_ascii_alphanumeric())
            && l.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    let labels_ok = if label {
        label_ok(name)
    } else {
        name.split('.').all(label_ok)
    };
    let max = if label { 63 } else { 253 };
    if labels_ok && name.len() <= max {
        return None;
    }
    if labels_ok {
        return Some(if label {
            "must be no more than 63 characters"
        } else {
            "must be no more than 253 characters"
        });
    }
    Some(if label {
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    } else {
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    })
}

/// apiVersion and kind must be absent or right; they are then set.
fn check_type_meta(def: &ResourceDef, obj: &mut Value) -> Result<(), ApiError> {
    let Some(m) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    let want = def.api_version();
    match m.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {}
        Some(v) if v == want => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({want})"
            )));
        }
    }
    match m.get("kind").and_then(Value::as_str) {
        None | Some("") => {}
        Some(k) if k == def.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                def.kind
            )));
        }
    }
    m.insert("apiVersion".into(), json!(want));
    m.insert("kind".into(), json!(def.kind));
    Ok(())
}

/// The namespace in the body must agree with the URL; cluster-scoped objects have none.
fn fix_namespace(def: &ResourceDef, url_ns: Option<&str>, obj: &mut Value) -> Result<(), ApiError> {
    let body_ns = namespace_of(obj).to_owned();
    let meta = meta_mut(obj);
    if def.namespaced {
        let ns = url_ns.unwrap_or("");
        if !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        meta.insert("namespace".into(), json!(ns));
    } else {
        meta.remove("namespace");
    }
    Ok(())
}

fn ns_key() -> super::registry::StorageKey {
    storage_key("", "namespaces")
}

/// Validates and canonicalises an object in view form; returns warnings.
fn admit(
    def: &ResourceDef,
    obj: &mut Value,
    old: Option<&Value>,
    opts: &WriteOpts,
) -> Result<Vec<String>, ApiError> {
    let name = name_of(obj).to_owned();
    objectmeta::drop_empty_collections(obj);
    if matches!(def.flavor, Flavor::Namespace) {
        // The real server always labels a namespace with its own name.
        let meta = meta_mut(obj);
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        if let Some(l) = labels.as_object_mut() {
            l.insert("kubernetes.io/metadata.name".into(), json!(name));
        }
    }
    // The metadata errors come first, in one answer with the schema's, as the real
    // server's strategy collects them.
    let meta_errors = objectmeta::validate(obj);
    let unknown = match &def.flavor {
        Flavor::Custom { schema, .. } => {
            let admitted = match schema {
                Some(schema) => schema.admit(obj, old),
                None => Ok(Vec::new()),
            };
            match admitted {
                Ok(unknown) if meta_errors.is_empty() => unknown,
                Ok(_) => return Err(invalid(def, &name, meta_errors)),
                Err(errs) => return Err(invalid(def, &name, [meta_errors, errs].concat())),
            }
        }
        _ if !meta_errors.is_empty() => return Err(invalid(def, &name, meta_errors)),
        _ => {
            let (canonical, dropped) = builtin::canonicalize(def, obj)?;
            *obj = canonical;
            let errors = builtin::validate(def, obj);
            if !errors.is_empty() {
                return Err(invalid(def, &name, errors));
            }
            dropped
        }
    };
    match opts.validation {
        FieldValidation::Strict if !unknown.is_empty() => {
            let list: Vec<String> = unknown
                .iter()
                .map(|f| format!("unknown field \"{f}\""))
                .collect();
            Err(ApiError::bad_request(format!(
                "strict decoding error: {}",
                list.join(", ")
            )))
        }
        FieldValidation::Warn => Ok(unknown
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect()),
        _ => Ok(Vec::new()),
    }
}

/// Did anything but metadata (and status, when it is a subresource) change?
fn spec_changed(def: &ResourceDef, old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| -> Map<String, Value> {
        let mut m = v.as_object().cloned().unwrap_or_default();
        for k in ["metadata", "apiVersion", "kind"] {
            m.remove(k);
        }
        if def.status_subresource || !def.is_custom() {
            m.remove("status");
        }
        m
    };
    strip(old) != strip(new)
}

fn generation(obj: &Value) -> i64 {
    obj.get("metadata")
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Equal but for resourceVersion and managedFields timestamps: a no-op write.
fn same_object(a: &Value, b: &Value) -> bool {
    let norm = |v: &Value| {
        let mut v = v.clone();
        let m = meta_mut(&mut v);
        m.remove("resourceVersion");
        if let Some(Value::Array(entries)) = m.get_mut("managedFields") {
            for e in entries {
                if let Some(e) = e.as_object_mut() {
                    e.remove("time");
                }
            }
        }
        v
    };
    norm(a) == norm(b)
}

/// What a CRD write must change in the registry once committed.
fn crd_defs(def: &ResourceDef, obj: &Value) -> Result<Option<Vec<ResourceDef>>, ApiError> {
    if matches!(def.flavor, Flavor::Crd) {
        crd::resource_defs(obj).map(Some)
    } else {
        Ok(None)
    }
}

fn install(st: &mut State, crd_name: &str, defs: Option<Vec<ResourceDef>>) {
    if let Some(defs) = defs {
        st.registry.remove_crd(crd_name);
        for d in defs {
            st.registry.insert(d);
        }
    }
}

/// Records a non-apply write in managedFields against its manager (see
/// `managed::record_update`); the server's own writes record nothing.
fn record_write(
    def: &ResourceDef,
    part: Part,
    old: Option<&Value>,
    new: &mut Value,
    opts: &WriteOpts,
) {
    let Some(manager) = opts.update_manager() else {
        return;
    };
    let sub = (part == Part::Status).then_some("status");
    let status_elsewhere = part == Part::Main && def.status_subresource;
    managed::record_update(
        old,
        new,
        &manager,
        &def.api_version(),
        sub,
        status_elsewhere,
    );
}

/// The name a create stores under: `metadata.name`, or one made from `generateName`;
/// valid for the kind, and not taken.
fn new_name(st: &State, def: &ResourceDef, ns: &str, obj: &Value) -> Result<String, ApiError> {
    let mut name = name_of(obj).to_owned();
    let generate = meta_str(obj, "generateName").unwrap_or("").to_owned();
    if name.is_empty() && !generate.is_empty() {
        // Retry on the (unlikely) collision, as the real server's callers would.
        for _ in 0..8 {
            name = format!("{generate}{}", name_suffix());
            if st.get(&def.storage, ns, &name).is_none() {
                break;
            }
        }
    }
    if name.is_empty() {
        return Err(invalid(
            def,
            "",
            vec![field_error(
                "metadata.name",
                FieldErrorKind::Required,
                None,
                "name or generateName is required",
            )],
        ));
    }
    if let Some(why) = name_problem(&name, matches!(def.flavor, Flavor::Namespace)) {
        return Err(invalid(
            def,
            &name,
            vec![field_error(
                "metadata.name",
                FieldErrorKind::Invalid,
                Some(format!("{name:?}")),
                why,
            )],
        ));
    }
    if st.get(&def.storage, ns, &name).is_some() {
        return Err(ApiError::already_exists(&def.group, &def.plural, &name));
    }
    Ok(name)
}

pub(crate) fn create(
    st: &mut State,
    def: &ResourceDef,
    url_ns: Option<&str>,
    mut obj: Value,
    opts: &WriteOpts,
) -> Result<Written, ApiError> {
    check_type_meta(def, &mut obj)?;
    if let Flavor::Custom { crd, .. } = &def.flavor
        && crd_finalizer::terminating(st, crd)
    {
        return Err(crd_finalizer::create_refused(def));
    }
    fix_namespace(def, url_ns, &mut obj)?;
    let ns = namespace_of(&obj).to_owned();
    if def.namespaced && st.get(&ns_key(), "", &ns).is_none() {
        return Err(ApiError::not_found("", "namespaces", &ns));
    }
    let name = new_name(st, def, &ns, &obj)?;
    refuse_resource_version(&obj)?;
    let meta = meta_mut(&mut obj);
    meta.insert("name".into(), json!(name));
    meta.insert("uid".into(), json!(new_uid()));
    meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
    for k in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "generation",
    ] {
        meta.remove(k);
    }
    if def.has_generation() {
        meta.insert("generation".into(), json!(1));
    }
    if def.status_subresource
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
    match def.flavor {
        Flavor::Namespace => {
            if let Some(m) = obj.as_object_mut() {
                m.insert("status".into(), json!({"phase": "Active"}));
            }
        }
        Flavor::Crd => crd::set_status(&mut obj, None),
        _ => {}
    }
    let warnings = admit(def, &mut obj, None, opts)?;
    record_write(def, Part::Main, None, &mut obj, opts);
    let defs = crd_defs(def, &obj)?;
    if opts.dry_run {
        return Ok(Written {
            object: obj,
            created: true,
            warnings,
        });
    }
    let stored = st.commit(&def.storage, EventKind::Added, storable(def, obj)?);
    install(st, &name, defs);
    Ok(Written {
        object: builtin::to_view(def, &stored),
        created: true,
        warnings,
    })
}

/// kube-apiserver's storage refuses a create whose body carries a resourceVersion (an
/// object sourced from a read, most likely by mistake): 500, as its plain error maps. A
/// value that is no resourceVersion at all ("-1") it lets through, as does etcd3's check.
fn refuse_resource_version(obj: &Value) -> Result<(), ApiError> {
    let set = meta_str(obj, "resourceVersion").and_then(|rv| rv.parse::<u64>().ok());
    match set {
        Some(rv) if rv != 0 => Err(ApiError::new(
            500,
            "",
            "resourceVersion should not be set on objects to be created",
        )),
        _ => Ok(()),
    }
}

/// Builds the new object of an update from the old one and the body, keeping what the
/// client may not change through this part.
fn merge_for_update(def: &ResourceDef, old: &Value, mut body: Value, part: Part) -> Value {
    if part == Part::Status {
        let mut new = old.clone();
        if let Some(m) = new.as_object_mut() {
            match body.get("status") {
                Some(s) => m.insert("status".into(), s.clone()),
                None => m.remove("status"),
            };
        }
        return new;
    }
    let old_meta = old.get("metadata").cloned().unwrap_or(json!({}));
    let meta = meta_mut(&mut body);
    for k in [
        "uid",
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        match old_meta.get(k) {
            Some(v) => meta.insert(k.into(), v.clone()),
            None => meta.remove(k),
        };
    }
    meta.remove("selfLink");
    // No managedFields, or an empty list, keeps the old ones (only `[{}]` strips them).
    let keeps_old = meta
        .get("managedFields")
        .is_none_or(|m| m.as_array().is_some_and(Vec::is_empty));
    if keeps_old && let Some(mf) = old_meta.get("managedFields") {
        meta.insert("managedFields".into(), mf.clone());
    }
    if def.status_subresource
        && let Some(m) = body.as_object_mut()
    {
        match old.get("status") {
            Some(s) => m.insert("status".into(), s.clone()),
            None => m.remove("status"),
        };
    }
    body
}

/// An object being deleted may lose finalizers but gain none.
fn no_new_finalizers_while_deleting(
    def: &ResourceDef,
    name: &str,
    old: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    if meta_str(old, "deletionTimestamp").is_none() {
        return Ok(());
    }
    let before = finalizers_of(old);
    let added: Vec<String> = finalizers_of(new)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    if added.is_empty() {
        return Ok(());
    }
    Err(invalid(
        def,
        name,
        vec![field_error(
            "metadata.finalizers",
            FieldErrorKind::Forbidden,
            None,
            &format!(
                "no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
            ),
        )],
    ))
}

/// The shared tail of update, patch and apply on an existing object.
#[allow(clippy::too_many_arguments)]
fn write_existing(
    st: &mut State,
    def: &ResourceDef,
    url_ns: Option<&str>,
    name: &str,
    old_view: &Value,
    mut body: Value,
    part: Part,
    opts: &WriteOpts,
) -> Result<Written, ApiError> {
    check_type_meta(def, &mut body)?;
    match name_of(&body) {
        "" => {
            meta_mut(&mut body).insert("name".into(), json!(name));
        }
        n if n != name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        _ => {}
    }
    fix_namespace(def, url_ns, &mut body)?;
    if let Some(rv) = meta_str(&body, "resourceVersion")
        && !rv.is_empty()
        && Some(rv) != meta_str(old_view, "resourceVersion")
    {
        return Err(ApiError::stale(&def.group, &def.plural, name));
    }
    let mut new = merge_for_update(def, old_view, body, part);
    no_new_finalizers_while_deleting(def, name, old_view, &new)?;
    if matches!(def.flavor, Flavor::Crd) {
        crd::set_status(&mut new, Some(old_view));
    }
    if def.has_generation() && spec_changed(def, old_view, &new) {
        meta_mut(&mut new).insert("generation".into(), json!(generation(old_view) + 1));
    }
    let warnings = admit(def, &mut new, Some(old_view), opts)?;
    record_write(def, part, Some(old_view), &mut new, opts);
    let defs = crd_defs(def, &new)?;
    if same_object(&new, old_view) || opts.dry_run {
        return Ok(Written {
            object: if opts.dry_run { new } else { old_view.clone() },
            created: false,
            warnings,
        });
    }
    let finished = meta_str(&new, "deletionTimestamp").is_some() && finalizers_of(&new).is_empty();
    if finished {
        let stored = st.commit(
            &def.storage,
            EventKind::Deleted,
            builtin::from_view(def, new),
        );
        after_delete(st, def, &stored);
        return Ok(Written {
            object: builtin::to_view(def, &stored),
            created: false,
            warnings,
        });
    }
    let stored = st.commit(&def.storage, EventKind::Modified, storable(def, new)?);
    install(st, name, defs);
    Ok(Written {
        object: builtin::to_view(def, &stored),
        created: false,
        warnings,
    })
}

/// The most bytes an object may take in storage: etcd's default `--max-request-bytes`
/// (1.5 MiB), which kube-apiserver's write to etcd must fit in.
const STORAGE_LIMIT: usize = 3 * 512 * 1024;

/// The stored form of `view`, if it fits in storage. One that does not is refused as
/// kube-apiserver passes on etcd's refusal: 500, no reason, "etcdserver: request is too
/// large". Measured as JSON, which is how custom resources are stored (built-in kinds
/// are stored as protobuf, a little smaller).
fn storable(def: &ResourceDef, view: Value) -> Result<Value, ApiError> {
    let stored = builtin::from_view(def, view);
    let size = serde_json::to_vec(&stored).map_or(usize::MAX, |bytes| bytes.len());
    if size > STORAGE_LIMIT {
        return Err(ApiError::new(500, "", "etcdserver: request is too large"));
    }
    Ok(stored)
}

fn current_view(
    st: &State,
    def: &ResourceDef,
    url_ns: Option<&str>,
    name: &str,
) -> Result<Value, ApiError> {
    let ns = if def.namespaced {
        url_ns.unwrap_or("")
    } else {
        ""
    };
    st.get(&def.storage, ns, name)
        .map(|o| builtin::to_view(def, o))
        .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn update(
    st: &mut State,
    def: &ResourceDef,
    url_ns: Option<&str>,
    name: &str,
    body: Value,
    part: Part,
    opts: &WriteOpts,
) -> Result<Written, ApiError> {
    let old = current_view(st, def, url_ns, name)?;
    if def.is_custom() && meta_str(&body, "resourceVersion").unwrap_or("").is_empty() {
        return Err(invalid(
            def,
            name,
            vec![field_error(
                "metadata.resourceVersion",
                FieldErrorKind::Invalid,
                Some("0x0".into()),
                "must be specified for an update",
            )],
        ));
    }
    write_existing(st, def, url_ns, name, &old, body, part, opts)
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn patch(
    st: &mut State,
    def: &ResourceDef,
    url_ns: Option<&str>,
    name: &str,
    kind: PatchType,
    body: &[u8],
    part: Part,
    opts: &WriteOpts,
) -> Result<Written, ApiError> {
    if kind == PatchType::Strategic && def.is_custom() {
        return Err(ApiError::unsupported_patch(patch::accepted_types(false)));
    }
    if kind == PatchType::Apply {
        return apply(st, def, url_ns, name, body, part, opts);
    }
    let old = current_view(st, def, url_ns, name)?;
    let mut doc = old.clone();
    match kind {
        PatchType::Json => patch::json_patch(&mut doc, body)?,
        PatchType::Merge => patch::merge_patch(&mut doc, body)?,
        PatchType::Strategic => patch::strategic_merge(&mut doc, &patch::parse_json(body)?)?,
        PatchType::Apply => unreachable!("handled above"),
    }
    write_existing(st, def, url_ns, name, &old, doc, part, opts)
}

fn apply(
    st: &mut State,
    def: &ResourceDef,
    url_ns: Option<&str>,
    name: &str,
    body: &[u8],
    part: Part,
    opts: &WriteOpts,
) -> Result<Written, ApiError> {
    let opts = &WriteOpts {
        applying: true,
        ..opts.clone()
    };
    let manager = opts.field_manager.clone().unwrap_or_default();
    if manager.is_empty() {
        return Err(ApiError::new(
            422,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        ));
    }
    let applied = patch::parse_yaml(body)?;
    if !applied.is_object() {
        return Err(ApiError::bad_request(
            "error decoding YAML: the apply configuration must be an object",
        ));
    }
    for field in ["apiVersion", "kind"] {
        if applied
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            return Err(ApiError::bad_request(format!(
                "error decoding YAML: {field} must be set in an apply configuration"
            )));
        }
    }
    match name_of(&applied) {
        "" => {}
        n if n != name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        _ => {}
    }
    let sub = (part == Part::Status).then_some("status");
    let api_version = def.api_version();
    match current_view(st, def, url_ns, name) {
        Ok(old) => {
            if let Some(rv) = meta_str(&applied, "resourceVersion")
                && !rv.is_empty()
                && Some(rv) != meta_str(&old, "resourceVersion")
            {
                return Err(ApiError::stale(&def.group, &def.plural, name));
            }
            let merged = patch::apply(
                Some(&old),
                &applied,
                &manager,
                &api_version,
                sub,
                opts.force,
            )
            .map_err(|c| apply_conflict(def, name, &c))?;
            write_existing(st, def, url_ns, name, &old, merged, part, opts)
        }
        Err(e) if e.code == 404 && part == Part::Main => {
            let mut obj = patch::apply(None, &applied, &manager, &api_version, None, true)
                .map_err(|c| apply_conflict(def, name, &c))?;
            meta_mut(&mut obj).insert("name".into(), json!(name));
            create(st, def, url_ns, obj, opts)
        }
        Err(e) => Err(e),
    }
}

/// 409 for an apply that would take fields from other managers, worded as the real one.
fn apply_conflict(def: &ResourceDef, name: &str, conflicts: &[patch::ApplyConflict]) -> ApiError {
    let message = match conflicts {
        [(m, f)] => format!("Apply failed with 1 conflict: conflict with {m}: {f}"),
        many => {
            let list: Vec<String> = many
                .iter()
                .map(|(m, f)| format!("conflict with {m}: {f}"))
                .collect();
            format!(
                "Apply failed with {} conflicts: {}",
                many.len(),
                list.join("\n")
            )
        }
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(m, f)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {m}"), "field": f}))
        .collect();
    ApiError {
        details: Some(
            json!({"name": name, "group": def.group, "kind": def.plural, "causes": causes}),
        ),
        ..ApiError::new(409, "Conflict", message)
    }
}

/// What a delete did.
pub(crate) enum Deleted {
    /// Gone; the last state of the object.
    Gone(Value),
    /// Still there, with finalizers to run (deletionTimestamp set).
    Pending(Value),
}

/// A DELETE's preconditions: the uid and resourceVersion it names must be the object's.
fn check_preconditions(
    def: &ResourceDef,
    name: &str,
    old: &Value,
    opts: &DeleteOpts,
) -> Result<(), ApiError> {
    if let Some(uid) = &opts.uid
        && Some(uid.as_str()) != meta_str(old, "uid")
    {
        return Err(ApiError::conflict(
            &def.group,
            &def.plural,
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta_str(old, "uid").unwrap_or("")
            ),
        ));
    }
    if let Some(rv) = &opts.resource_version
        && Some(rv.as_str()) != meta_str(old, "resourceVersion")
    {
        return Err(ApiError::conflict(
            &def.group,
            &def.plural,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                meta_str(old, "resourceVersion").unwrap_or("")
            ),
        ));
    }
    Ok(())
}

pub(crate) fn delete(
    st: &mut State,
    def: &ResourceDef,
    url_ns: Option<&str>,
    name: &str,
    opts: &DeleteOpts,
) -> Result<Deleted, ApiError> {
    let old = current_view(st, def, url_ns, name)?;
    check_preconditions(def, name, &old, opts)?;
    if matches!(def.flavor, Flavor::Namespace) && UNDELETABLE_NAMESPACES.contains(&name) {
        return Err(ApiError::forbidden(
            "",
            "namespaces",
            name,
            "this namespace may not be deleted",
        ));
    }
    if matches!(def.flavor, Flavor::Crd) && meta_str(&old, "deletionTimestamp").is_none() {
        let (crd, gone) = crd_finalizer::start_deletion(st, &old, opts.dry_run);
        return Ok(if gone {
            Deleted::Gone(crd)
        } else {
            Deleted::Pending(crd)
        });
    }
    if !finalizers_of(&old).is_empty() {
        if meta_str(&old, "deletionTimestamp").is_some() || opts.dry_run {
            return Ok(Deleted::Pending(old));
        }
        let mut new = old.clone();
        let g = new
            .get("metadata")
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64);
        let meta = meta_mut(&mut new);
        meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
        meta.insert("deletionGracePeriodSeconds".into(), json!(0));
        if let Some(g) = g {
            // The real server bumps generation when it starts a graceful deletion.
            meta.insert("generation".into(), json!(g + 1));
        }
        let stored = st.commit(
            &def.storage,
            EventKind::Modified,
            builtin::from_view(def, new),
        );
        return Ok(Deleted::Pending(builtin::to_view(def, &stored)));
    }
    if opts.dry_run {
        return Ok(Deleted::Gone(old));
    }
    let stored = st.commit(
        &def.storage,
        EventKind::Deleted,
        builtin::from_view(def, old),
    );
    after_delete(st, def, &stored);
    Ok(Deleted::Gone(builtin::to_view(def, &stored)))
}

/// Cascades: a deleted CRD's resources stop being served; the last instance of a
/// terminating CRD lets it finish; a deleted namespace takes everything in it (the real
/// namespace controller does this asynchronously and waits on finalizers; here it is
/// immediate).
fn after_delete(st: &mut State, def: &ResourceDef, stored: &Value) {
    match &def.flavor {
        Flavor::Crd => crd_finalizer::stop_serving(st, stored),
        Flavor::Custom { crd, .. } => {
            crd_finalizer::finish_if_drained(st, crd);
        }
        Flavor::Namespace => {
            let ns = name_of(stored).to_owned();
            for key in st.collection_keys() {
                let doomed: Vec<Value> = st
                    .list(&key, Some(&ns), None)
                    .map(|o| (**o).clone())
                    .collect();
                for obj in doomed {
                    st.commit(&key, EventKind::Deleted, obj);
                }
            }
            crd_finalizer::finish_all_drained(st);
        }
        _ => {}
    }
}
