//! Turning a request path into what it addresses, the way the real server's request
//! info resolver does (`/api/v1/namespaces/ns/events/x`, `/apis/g/v/things/x/status`,
//! the legacy `/watch/` prefix, discovery and OpenAPI paths).

use http::Method;
use percent_encoding::percent_decode_str;

/// A request on an API resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourcePath {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// `/apis/g/v/watch/...`: a watch whatever the query says.
    pub legacy_watch: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    Version,
    Health,
    CoreVersions,
    Groups,
    Group(String),
    ResourceList {
        group: String,
        version: String,
    },
    OpenApiV2,
    OpenApiV3Index,
    /// `api/v1` or `apis/group/version`.
    OpenApiV3(String),
    Resource(ResourcePath),
    NotFound,
}

pub(crate) fn parse(path: &str) -> Route {
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    match s.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["api"] => Route::CoreVersions,
        ["apis"] => Route::Groups,
        ["apis", g] => Route::Group((*g).to_owned()),
        ["api", v] => Route::ResourceList {
            group: String::new(),
            version: (*v).to_owned(),
        },
        ["apis", g, v] => Route::ResourceList {
            group: (*g).to_owned(),
            version: (*v).to_owned(),
        },
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiV3Index,
        ["openapi", "v3", rest @ ..] => Route::OpenApiV3(rest.join("/")),
        ["api", v, rest @ ..] => resource("", v, rest),
        ["apis", g, v, rest @ ..] => resource(g, v, rest),
        _ => Route::NotFound,
    }
}

fn resource(group: &str, version: &str, rest: &[&str]) -> Route {
    let (legacy_watch, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let core_namespace_sub = group.is_empty()
        && rest.len() == 3
        && rest[0] == "namespaces"
        && (rest[2] == "status" || rest[2] == "finalize");
    let (namespace, tail) = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() && !core_namespace_sub => {
            (Some((*ns).to_owned()), tail)
        }
        _ => (None, rest),
    };
    let (plural, name, subresource) = match tail {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(*n), None),
        [p, n, sub] => (*p, Some(*n), Some(*sub)),
        _ => return Route::NotFound,
    };
    Route::Resource(ResourcePath {
        group: group.to_owned(),
        version: version.to_owned(),
        plural: plural.to_owned(),
        namespace,
        name: name.map(str::to_owned),
        subresource: subresource.map(str::to_owned),
        legacy_watch,
    })
}

/// The RBAC verb of a resource request.
pub(crate) fn verb(method: &Method, r: &ResourcePath, watch_param: bool) -> &'static str {
    match (method.as_str(), r.name.is_some()) {
        ("GET" | "HEAD", true) if r.legacy_watch || watch_param => "watch",
        ("GET" | "HEAD", true) => "get",
        ("GET" | "HEAD", false) if r.legacy_watch || watch_param => "watch",
        ("GET" | "HEAD", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match parse(path) {
            Route::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn paths_resolve_like_the_real_server() {
        let r = res("/api/v1/namespaces/default/events/e1");
        assert_eq!(
            (r.plural.as_str(), r.namespace.as_deref(), r.name.as_deref()),
            ("events", Some("default"), Some("e1"))
        );
        let r = res("/api/v1/namespaces/default");
        assert_eq!(
            (r.plural.as_str(), r.namespace, r.name.as_deref()),
            ("namespaces", None, Some("default"))
        );
        let r = res("/api/v1/namespaces/default/status");
        assert_eq!(
            (r.plural.as_str(), r.subresource.as_deref()),
            ("namespaces", Some("status"))
        );
        let r = res("/apis/test.example.dev/v1/widgets/w1/status");
        assert_eq!(
            (
                r.group.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            ("test.example.dev", Some("w1"), Some("status"))
        );
        let r = res("/apis/test.example.dev/v1/watch/namespaces/ns/gadgets");
        assert!(r.legacy_watch);
        assert_eq!(r.namespace.as_deref(), Some("ns"));
        assert_eq!(parse("/apis/g/v/a/b/c/d"), Route::NotFound);
        assert_eq!(
            parse("/openapi/v3/apis/g/v"),
            Route::OpenApiV3("apis/g/v".into())
        );
    }
}
