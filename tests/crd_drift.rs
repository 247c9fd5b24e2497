//! manifests/crds/ must be exactly what the Rust types generate.

use std::path::Path;
use std::process::Command;

const CRD_FILE: &str = "manifests/crds/metal.binder.dev.yaml";
const REGENERATE: &str = "cargo run -- crd > manifests/crds/metal.binder.dev.yaml";

fn committed() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(CRD_FILE);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[test]
fn manifests_match_the_rust_types() {
    let generated = server_binder::api::crd_yaml().expect("CRDs serialize");
    assert!(
        generated == committed(),
        "{CRD_FILE} drifted from the Rust types; regenerate it with `{REGENERATE}`"
    );
}

#[test]
fn crd_subcommand_prints_the_manifests() {
    let out = Command::new(env!("CARGO_BIN_EXE_server-binder"))
        .arg("crd")
        .output()
        .expect("run server-binder crd");
    assert!(out.status.success(), "server-binder crd failed: {out:?}");
    assert_eq!(String::from_utf8(out.stdout).expect("utf-8"), committed());
}

#[test]
fn crds_carry_the_protocol_names() {
    let crds = server_binder::api::crds();
    let server = &crds[0].spec;
    assert_eq!(server.group, "metal.binder.dev");
    assert_eq!(server.scope, "Cluster");
    assert_eq!(
        server.names.short_names.as_deref(),
        Some(&["srv".to_string()][..])
    );
    let claim = &crds[1].spec;
    assert_eq!(claim.scope, "Namespaced");
    assert_eq!(
        claim.names.short_names.as_deref(),
        Some(&["scl".to_string()][..])
    );
    let class = &crds[2].spec;
    assert_eq!(class.scope, "Cluster");
    assert_eq!(
        class.names.short_names.as_deref(),
        Some(&["scls".to_string()][..])
    );
    // A budget has no status: the claims it covers say where each eviction stands.
    for crd in crds
        .iter()
        .filter(|c| c.spec.names.kind != "ServerDisruptionBudget")
    {
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        let subresources = version.subresources.as_ref().expect("subresources");
        assert!(
            subresources.status.is_some(),
            "{} has a status subresource",
            crd.spec.names.kind
        );
    }
    for crd in &crds[..2] {
        let kind = &crd.spec.names.kind;
        let columns: Vec<(String, String, bool)> = crd.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| {
                (
                    c.name.clone(),
                    c.json_path.clone(),
                    c.priority.unwrap_or(0) > 0,
                )
            })
            .collect();
        assert_eq!(
            columns,
            documented_columns(kind),
            "{kind}'s printer columns"
        );
    }
    let yaml = committed();
    assert!(yaml.contains(
        "!has(oldSelf.serverRef) || !has(self.serverRef) || self.serverRef.name == oldSelf.serverRef.name"
    ));
    assert!(yaml.contains("serverSelector is immutable once set"));
    assert!(yaml.contains("spec.serverRef cannot be removed from a Bound claim"));
}

/// docs/binding.md, "Printer columns": each row of `kind` as (column, JSONPath, shown
/// only with `-o wide`). The JSONPath is the first code span of the row's last cell.
fn documented_columns(kind: &str) -> Vec<(String, String, bool)> {
    let doc = include_str!("../docs/binding.md");
    let section = doc
        .split("### Printer columns")
        .nth(1)
        .expect("the section");
    let prefix = format!("| `{kind}` | ");
    section
        .lines()
        .take_while(|l| !l.starts_with('#'))
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|row| {
            let (column, path) = row.split_once(" | ").expect("three cells");
            let wide = column.ends_with(" (only with `-o wide`)");
            let name = column.trim_end_matches(" (only with `-o wide`)");
            let path = path.split('`').nth(1).expect("a JSONPath in backticks");
            (name.to_string(), path.to_string(), wide)
        })
        .collect()
}
