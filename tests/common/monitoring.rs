//! What the monitoring tests read: the metric families docs/operations.md's "Metrics"
//! table documents, and the Grafana dashboard of manifests/components/monitoring with
//! each panel's queries, as Grafana would send them to Prometheus.

// Each suite uses part of this module.
#![allow(dead_code)]

use std::collections::BTreeSet;

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The dashboard's file, as the component ships it in its ConfigMap.
pub const DASHBOARD: &str = "manifests/components/monitoring/grafana-dashboard.json";

/// What Grafana puts for its built-in interval variables: the test Prometheus scrapes
/// every second, so a minute holds enough samples for rate().
const VARIABLES: [(&str, &str); 3] = [
    ("$__rate_interval", "1m"),
    ("$__interval", "1m"),
    ("$__range", "1h"),
];

/// The metric families docs/operations.md's "Metrics" table names: its first column's
/// code spans.
pub fn documented_families() -> BTreeSet<String> {
    let doc =
        std::fs::read_to_string(format!("{ROOT}/docs/operations.md")).expect("docs/operations.md");
    let section = doc
        .split("\n## Metrics\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("a Metrics section");
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

/// The dashboard file, parsed.
pub fn dashboard() -> Value {
    let text = std::fs::read_to_string(format!("{ROOT}/{DASHBOARD}")).expect(DASHBOARD);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{DASHBOARD} is not JSON: {e}"))
}

/// Every panel that is not a row, also those inside a collapsed row.
pub fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().expect("panels") {
        if p["type"] == "row" {
            out.extend(p["panels"].as_array().into_iter().flatten());
        } else {
            out.push(p);
        }
    }
    out
}

/// Each panel's queries as `(panel title, expr)`, with Grafana's interval variables
/// replaced; a query naming any other variable fails the test (Prometheus would not
/// know it).
pub fn queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for panel in panels(dashboard) {
        let title = panel["title"].as_str().unwrap_or_default();
        for target in panel["targets"].as_array().into_iter().flatten() {
            let mut expr = target["expr"]
                .as_str()
                .expect("a target's expr")
                .to_string();
            for (variable, value) in VARIABLES {
                expr = expr.replace(variable, value);
            }
            assert!(!expr.contains('$'), "panel {title:?}: a variable in {expr}");
            out.push((title.to_string(), expr));
        }
    }
    out
}

/// The `server_binder_*` families an expression reads: a histogram's or counter's
/// series names become their family's name where the family is `families`'.
pub fn families_read(expr: &str, families: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("server_binder_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .filter_map(|suffix| name.strip_suffix(suffix))
            .find(|base| families.contains(*base))
            .unwrap_or(name);
        out.push(family.to_string());
        rest = &tail[end..];
    }
    out
}

/// `/api/v1/query?query=EXPR`, the expression percent-encoded.
pub fn instant_query_path(expr: &str) -> String {
    let mut path = String::from("/api/v1/query?query=");
    for b in expr.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            path.push(b as char);
        } else {
            path.push_str(&format!("%{b:02X}"));
        }
    }
    path
}
