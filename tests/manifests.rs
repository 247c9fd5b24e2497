//! What a cluster installs, checked with the tools an operator would use: `kubectl
//! kustomize` builds `manifests/` (alone and with the monitoring component),
//! `kubernetes-validate --strict` checks the built-in kinds against the Kubernetes
//! OpenAPI schemas, `hadolint` lints the Dockerfile, and `promtool` checks and
//! unit-tests the PrometheusRule. The rest is read in Rust: the Deployment against the
//! command line and the Dockerfile, and the RBAC rules against the API calls the
//! controllers make.
//!
//! Without a tool on PATH the tests that need it say loudly that they skip; with
//! `SERVER_BINDER_REQUIRE_TOOLS=1` (set by `.ci/run`) a missing tool fails instead.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// The overlay an operator would write: `manifests/` plus the monitoring component.
const WITH_MONITORING: &str = "tests/fixtures/with-monitoring";
const NAMESPACE: &str = "server-binder-system";
/// The path the image runs (the Dockerfile's ENTRYPOINT).
const BINARY: &str = "/usr/local/bin/server-binder";
/// The Kubernetes version the built-in kinds are validated against: the kubectl the
/// suites drive is 1.32, and kubernetes-validate 1.37 ships schemas from 1.x up.
const KUBERNETES_VERSION: &str = "1.32.0";

fn path(rel: &str) -> PathBuf {
    Path::new(ROOT).join(rel)
}

use crate::common::monitoring::{self, DASHBOARD, documented_families, families_read};
use crate::common::tools;
use server_binder::binding::PendingReason;
use tools::{kubectl_present, tool_present};

fn ok(cmd: &mut Command) -> String {
    let out: Output = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// `kubectl kustomize DIR`, parsed into one JSON value per object.
fn kustomize(dir: &str) -> Vec<Value> {
    let home = tempfile::tempdir().unwrap();
    let yaml = ok(Command::new("kubectl")
        .arg("kustomize")
        .arg(path(dir))
        .env("HOME", home.path()));
    let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml)
        .unwrap_or_else(|e| panic!("kubectl kustomize {dir} printed invalid YAML: {e}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn kind_name(o: &Value) -> (String, String) {
    (
        o["kind"].as_str().unwrap_or_default().to_owned(),
        o["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| kind_name(o) == (kind.to_owned(), name.to_owned()))
        .unwrap_or_else(|| panic!("no {kind} {name} in the build"))
}

fn strs(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

const BASE_OBJECTS: [(&str, &str); 24] = [
    ("Namespace", NAMESPACE),
    ("CustomResourceDefinition", "servers.metal.binder.dev"),
    ("CustomResourceDefinition", "serverclaims.metal.binder.dev"),
    ("CustomResourceDefinition", "serverclasses.metal.binder.dev"),
    ("CustomResourceDefinition", "serverquotas.metal.binder.dev"),
    (
        "CustomResourceDefinition",
        "serverdisruptionbudgets.metal.binder.dev",
    ),
    ("ServiceAccount", "server-binder"),
    ("ClusterRole", "server-binder"),
    ("ClusterRoleBinding", "server-binder"),
    ("ClusterRole", "server-binder-claims-view"),
    ("ClusterRole", "server-binder-claims-edit"),
    ("ClusterRole", "server-binder-classes-view"),
    ("ClusterRole", "server-binder-quotas-view"),
    ("ClusterRole", "server-binder-quotas-admin"),
    ("ClusterRole", "server-binder-budgets-view"),
    ("ClusterRole", "server-binder-budgets-edit"),
    ("ClusterRole", "server-binder-servers-view"),
    ("ClusterRole", "server-binder-servers-admin"),
    ("ClusterRole", "server-binder-cleaner"),
    ("Role", "server-binder-leader-election"),
    ("RoleBinding", "server-binder-leader-election"),
    ("Deployment", "server-binder"),
    ("PodDisruptionBudget", "server-binder"),
    ("Service", "server-binder-metrics"),
];

/// ClusterRoles for people and cleaners, bound to nobody by the install.
const PEOPLE_ROLES: [&str; 10] = [
    "server-binder-claims-view",
    "server-binder-claims-edit",
    "server-binder-classes-view",
    "server-binder-quotas-view",
    "server-binder-quotas-admin",
    "server-binder-budgets-view",
    "server-binder-budgets-edit",
    "server-binder-servers-view",
    "server-binder-servers-admin",
    "server-binder-cleaner",
];

/// The aggregation labels a built role carries, and its (resources, verbs) grants.
fn aggregation(objects: &[Value], name: &str) -> (BTreeSet<String>, BTreeSet<(String, String)>) {
    let role = find(objects, "ClusterRole", name);
    let labels = role["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let to: BTreeSet<String> = labels
        .iter()
        .filter(|(_, v)| v.as_str() == Some("true"))
        .filter_map(|(k, _)| k.strip_prefix("rbac.authorization.k8s.io/aggregate-to-"))
        .map(str::to_owned)
        .collect();
    let mut grants = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        for r in rule["resources"].as_array().unwrap() {
            for v in rule["verbs"].as_array().unwrap() {
                grants.insert((
                    r.as_str().unwrap().to_owned(),
                    v.as_str().unwrap().to_owned(),
                ));
            }
        }
    }
    (to, grants)
}

/// Tenants who can `view` or `edit` a namespace can read or manage its claims, never
/// their status; servers aggregate into no user-facing role (as Nodes and PVs), and
/// their roles are bound by hand; the cleaner may only read servers and patch their
/// status.
#[test]
fn aggregated_roles_give_tenants_claims_and_nobody_servers() {
    if !kubectl_present() {
        return;
    }
    let objects = kustomize("manifests");
    let set =
        |items: &[&str]| -> BTreeSet<String> { items.iter().map(|s| s.to_string()).collect() };
    let (to, grants) = aggregation(&objects, "server-binder-claims-view");
    assert_eq!(to, set(&["view", "edit", "admin"]));
    assert!(grants.contains(&("serverclaims".into(), "list".into())));
    assert!(
        grants
            .iter()
            .all(|(_, v)| ["get", "list", "watch"].contains(&v.as_str()))
    );
    let (to, grants) = aggregation(&objects, "server-binder-claims-edit");
    assert_eq!(to, set(&["edit", "admin"]));
    assert!(grants.contains(&("serverclaims".into(), "create".into())));
    assert!(
        grants.iter().all(|(r, _)| r == "serverclaims"),
        "never the status: {grants:?}"
    );
    // Budgets are the tenant's own, as PodDisruptionBudgets: viewers read, editors write.
    let (to, grants) = aggregation(&objects, "server-binder-budgets-view");
    assert_eq!(to, set(&["view", "edit", "admin"]));
    assert!(grants.contains(&("serverdisruptionbudgets".into(), "list".into())));
    let (to, grants) = aggregation(&objects, "server-binder-budgets-edit");
    assert_eq!(to, set(&["edit", "admin"]));
    assert!(grants.contains(&("serverdisruptionbudgets".into(), "create".into())));
    assert!(grants.iter().all(|(r, _)| r == "serverdisruptionbudgets"));
    // Classes say which servers a claim may take: every tenant reads them, none writes.
    let (to, grants) = aggregation(&objects, "server-binder-classes-view");
    assert_eq!(to, set(&["view", "edit", "admin"]));
    assert!(grants.contains(&("serverclasses".into(), "list".into())));
    assert!(
        grants
            .iter()
            .all(|(_, v)| ["get", "list", "watch"].contains(&v.as_str()))
    );
    // Quotas: every tenant reads its namespace's, none writes them, not even a
    // namespace's admin (who could otherwise raise its own); cluster admins bind
    // `-quotas-admin` themselves.
    let (to, grants) = aggregation(&objects, "server-binder-quotas-view");
    assert_eq!(to, set(&["view", "edit", "admin"]));
    assert!(grants.contains(&("serverquotas".into(), "get".into())));
    assert!(
        grants
            .iter()
            .all(|(_, v)| ["get", "list", "watch"].contains(&v.as_str()))
    );
    let (to, grants) = aggregation(&objects, "server-binder-quotas-admin");
    assert!(to.is_empty(), "quotas-admin aggregates into {to:?}");
    assert!(grants.contains(&("serverquotas".into(), "update".into())));
    assert!(!grants.iter().any(|(r, _)| r == "serverquotas/status"));
    for servers in ["server-binder-servers-view", "server-binder-servers-admin"] {
        let (to, _) = aggregation(&objects, servers);
        assert!(to.is_empty(), "{servers} aggregates into {to:?}");
    }
    let (_, grants) = aggregation(&objects, "server-binder-servers-view");
    assert!(
        grants
            .iter()
            .all(|(_, v)| ["get", "list", "watch"].contains(&v.as_str()))
    );
    let (_, grants) = aggregation(&objects, "server-binder-servers-admin");
    assert!(grants.contains(&("servers".into(), "delete".into())));
    assert!(grants.contains(&("servers/status".into(), "update".into())));
    let (to, grants) = aggregation(&objects, "server-binder-cleaner");
    assert!(to.is_empty(), "bound by the user to the cleaner alone");
    let cleaner: BTreeSet<(String, String)> = [
        ("servers", "get"),
        ("servers", "list"),
        ("servers", "watch"),
        ("servers/status", "update"),
        ("servers/status", "patch"),
    ]
    .iter()
    .map(|(r, v)| (r.to_string(), v.to_string()))
    .collect();
    assert_eq!(grants, cleaner);
}

fn names(objects: &[Value]) -> BTreeSet<(String, String)> {
    objects.iter().map(kind_name).collect()
}

fn expected(extra: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    BASE_OBJECTS
        .iter()
        .chain(extra)
        .map(|(k, n)| ((*k).to_owned(), (*n).to_owned()))
        .collect()
}

#[test]
fn kustomize_builds_the_install_and_the_monitoring_component() {
    if !kubectl_present() {
        return;
    }
    let base = kustomize("manifests");
    assert_eq!(
        names(&base),
        expected(&[]),
        "manifests/ builds these objects"
    );
    // The uninstall that keeps the CRDs (docs/operations.md) deletes exactly the
    // install without them, as they are installed.
    let without_crds: Vec<Value> = base
        .iter()
        .filter(|o| o["kind"] != "CustomResourceDefinition")
        .cloned()
        .collect();
    assert_eq!(kustomize("manifests/base"), without_crds);
    for o in &base {
        // Examples (Servers, ServerClaims) are not part of the install.
        assert_ne!(o["apiVersion"], "metal.binder.dev/v1alpha1", "{o}");
        let (kind, name) = kind_name(o);
        let cluster_scoped = [
            "Namespace",
            "CustomResourceDefinition",
            "ClusterRole",
            "ClusterRoleBinding",
        ]
        .contains(&kind.as_str());
        if !cluster_scoped {
            assert_eq!(o["metadata"]["namespace"], NAMESPACE, "{kind} {name}");
        }
        assert_eq!(
            o["metadata"]["labels"]["app.kubernetes.io/name"], "server-binder",
            "{kind} {name} carries the recommended labels"
        );
    }
    let with = kustomize(WITH_MONITORING);
    assert_eq!(
        names(&with),
        expected(&[
            ("ServiceMonitor", "server-binder"),
            ("PrometheusRule", "server-binder"),
            ("ConfigMap", "server-binder-dashboard"),
            ("NetworkPolicy", "server-binder-metrics"),
        ]),
        "{WITH_MONITORING} builds these objects"
    );
    // The NetworkPolicy selects the controller's pods and opens their metrics port.
    let policy = &find(&with, "NetworkPolicy", "server-binder-metrics")["spec"];
    let deployment = find(&with, "Deployment", "server-binder");
    let pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .unwrap();
    for (k, v) in policy["podSelector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(pod_labels.get(k), Some(v), "the pods have label {k}={v}");
    }
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let ports = container["ports"].as_array().unwrap();
    assert!(
        ports
            .iter()
            .any(|p| p["name"] == policy["ingress"][0]["ports"][0]["port"])
    );
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        let o = find(&with, kind, "server-binder");
        assert_eq!(o["apiVersion"], "monitoring.coreos.com/v1");
        assert_eq!(o["metadata"]["namespace"], NAMESPACE);
    }
    // The ServiceMonitor finds the metrics Service, by its labels and its port name.
    let monitor = &find(&with, "ServiceMonitor", "server-binder")["spec"];
    let service = find(&with, "Service", "server-binder-metrics");
    let labels = service["metadata"]["labels"].as_object().unwrap();
    for (k, v) in monitor["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(labels.get(k), Some(v), "the Service has label {k}={v}");
    }
    assert_eq!(
        strs(&monitor["namespaceSelector"]["matchNames"]),
        [NAMESPACE]
    );
    assert_eq!(monitor["endpoints"][0]["port"], "metrics");
    assert_eq!(monitor["endpoints"][0]["path"], "/metrics");
}

/// docs/operations.md's section under `## {title}`, up to the next `## `.
fn operations_section(title: &str) -> String {
    let doc = std::fs::read_to_string(path("docs/operations.md")).unwrap();
    let heading = format!("## {title}");
    let mut lines = doc.lines().skip_while(|l| l.trim() != heading);
    assert!(
        lines.next().is_some(),
        "docs/operations.md has no `{heading}`"
    );
    let body: Vec<&str> = lines.take_while(|l| !l.starts_with("## ")).collect();
    body.join("\n")
}

/// The rows of the table in "What gets installed": each row's kinds (`ClusterRole +
/// ClusterRoleBinding` is two) and the names its second column writes in code marks.
fn installed_rows() -> Vec<(Vec<String>, BTreeSet<String>)> {
    let section = operations_section("What gets installed");
    let mut rows = Vec::new();
    for line in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let [kinds, names, ..] = cells[..] else {
            continue;
        };
        let kinds = kinds.split('+').map(|k| k.trim().to_owned()).collect();
        let names = names.split('`').skip(1).step_by(2).map(str::to_owned);
        rows.push((kinds, names.collect()));
    }
    rows
}

/// The CRDs the Upgrade section's `kubectl wait --for condition=Established` commands
/// wait for: those named (`crd/NAME`), and every CRD in a file given with `-f`.
fn crds_the_upgrade_waits_for() -> BTreeSet<String> {
    let section = operations_section("Upgrade").replace("--for=", "--for ");
    let mut waited = BTreeSet::new();
    let commands = section
        .lines()
        .filter(|l| l.contains("kubectl wait") && l.contains("--for condition=Established"));
    for command in commands {
        let words: Vec<String> = command
            .split_whitespace()
            .map(|w| w.replace('`', ""))
            .collect();
        for (i, word) in words.iter().enumerate() {
            let named = [
                "crd/",
                "customresourcedefinition/",
                "customresourcedefinitions/",
            ]
            .iter()
            .find_map(|kind| word.strip_prefix(kind));
            if let Some(name) = named {
                waited.insert(name.to_owned());
            }
            if ["-f", "--filename"].contains(&word.as_str()) {
                let file = &words[i + 1];
                let text = std::fs::read_to_string(path(file))
                    .unwrap_or_else(|e| panic!("the Upgrade section waits on {file}: {e}"));
                let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
                let crds = docs.iter().map(kind_name);
                let crds = crds.filter(|(kind, _)| kind == "CustomResourceDefinition");
                waited.extend(crds.map(|(_, name)| name));
            }
        }
    }
    waited
}

/// Every CustomResourceDefinition and ClusterRole the install builds is where an admin
/// looks for it in docs/operations.md: a row of its kind in "What gets installed" names
/// it, the Upgrade section's `kubectl wait --for condition=Established` covers every CRD
/// (by name, or by `-f` of a file that holds it), and "Uninstall" names every CRD (it
/// says what deleting each deletes). A kind or a role added to manifests/ fails here
/// until the guide says so.
#[test]
fn the_operations_guide_names_every_crd_and_cluster_role() {
    if !kubectl_present() {
        return;
    }
    let built: Vec<(String, String)> = kustomize("manifests")
        .iter()
        .map(kind_name)
        .filter(|(kind, _)| kind == "CustomResourceDefinition" || kind == "ClusterRole")
        .collect();
    let rows = installed_rows();
    let waited = crds_the_upgrade_waits_for();
    let uninstall = operations_section("Uninstall");
    let mut missing = Vec::new();
    for (kind, name) in &built {
        let listed = rows
            .iter()
            .any(|(kinds, names)| kinds.contains(kind) && names.contains(name));
        if !listed {
            missing.push(format!("{kind} {name}: no row of \"What gets installed\""));
        }
        if kind != "CustomResourceDefinition" {
            continue;
        }
        if !waited.contains(name) {
            missing.push(format!(
                "{name}: not waited for in \"Upgrade\" ({waited:?})"
            ));
        }
        if !uninstall.contains(&format!("`{name}`")) {
            missing.push(format!("{name}: not named in \"Uninstall\""));
        }
    }
    assert!(
        built
            .iter()
            .any(|(kind, _)| kind == "CustomResourceDefinition"),
        "the install has CRDs: {built:?}"
    );
    assert!(
        missing.is_empty(),
        "docs/operations.md leaves out what the install builds:\n{}",
        missing.join("\n")
    );
}

/// Built-in API groups, which kubernetes-validate has schemas for. Anything else
/// (monitoring.coreos.com's ServiceMonitor and PrometheusRule, and custom resources
/// such as metal.binder.dev's) is typed by a CRD the tool cannot know: for those it
/// only warns "Couldn't find schema" and passes, which would check nothing, so they
/// are left out. The CRD objects themselves are built-in (apiextensions.k8s.io) and
/// are validated.
fn is_builtin(api_version: &str) -> bool {
    match api_version.split_once('/') {
        None => true, // core: "v1"
        Some((group, _)) => !group.contains('.') || group.ends_with(".k8s.io"),
    }
}

#[test]
fn built_in_kinds_pass_kubernetes_validate_strict() {
    if !kubectl_present() || !tool_present("kubernetes-validate") {
        return;
    }
    let objects = kustomize(WITH_MONITORING);
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        let (kind, name) = kind_name(o);
        if !is_builtin(o["apiVersion"].as_str().unwrap()) {
            skipped.push(kind);
            continue;
        }
        let f = dir.path().join(format!("{i:02}-{kind}-{name}.json"));
        std::fs::write(&f, serde_json::to_string_pretty(o).unwrap()).unwrap();
        files.push(f);
    }
    assert_eq!(skipped, ["PrometheusRule", "ServiceMonitor"]);
    assert_eq!(
        files.len(),
        BASE_OBJECTS.len() + 2,
        "the install, the NetworkPolicy and the dashboard's ConfigMap"
    );
    let out = Command::new("kubernetes-validate")
        .args(["--strict", "--kubernetes-version", KUBERNETES_VERSION])
        .args(&files)
        .output()
        .expect("kubernetes-validate runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "kubernetes-validate --strict:\n{text}"
    );
    assert!(!text.contains("ERROR"), "{text}");
    assert!(!text.contains("Couldn't find schema"), "{text}");
    assert_eq!(
        text.matches(" passed for resource ").count(),
        files.len(),
        "every object passed:\n{text}"
    );
}

#[test]
fn dockerfile_passes_hadolint() {
    if !tool_present("hadolint") {
        return;
    }
    ok(Command::new("hadolint").arg(path("Dockerfile")));
}

/// The parts of the Dockerfile the Deployment depends on.
#[derive(Debug, Default)]
struct Dockerfile {
    /// `FROM` images, in order.
    from: Vec<String>,
    /// The last stage's `COPY --from=...` destinations.
    copied_to: Vec<String>,
    entrypoint: Vec<String>,
    cmd: Vec<String>,
    user: Option<String>,
    expose: Vec<u16>,
    /// Every `cargo build` a `RUN` line of any stage runs.
    cargo_builds: Vec<String>,
}

fn exec_form(rest: &str, what: &str) -> Vec<String> {
    serde_json::from_str(rest)
        .unwrap_or_else(|e| panic!("{what} must be in exec form (a JSON array): {rest}: {e}"))
}

fn read_dockerfile() -> Dockerfile {
    let text = std::fs::read_to_string(path("Dockerfile")).unwrap();
    // Join continuation lines; comments are whole lines.
    let joined = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\n", " ");
    let mut d = Dockerfile::default();
    for line in joined.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        match word.to_ascii_uppercase().as_str() {
            "FROM" => {
                d.from
                    .push(rest.split_whitespace().next().unwrap().to_owned());
                d.copied_to.clear();
                d.entrypoint.clear();
                d.cmd.clear();
                d.user = None;
                d.expose.clear();
            }
            "COPY" if rest.starts_with("--from=") => {
                d.copied_to
                    .push(rest.split_whitespace().last().unwrap().to_owned());
            }
            "ENTRYPOINT" => d.entrypoint = exec_form(rest, "ENTRYPOINT"),
            "CMD" => d.cmd = exec_form(rest, "CMD"),
            "USER" => d.user = Some(rest.to_owned()),
            "RUN" => d.cargo_builds.extend(
                rest.split("&&")
                    .map(str::trim)
                    .filter(|c| c.starts_with("cargo build"))
                    .map(str::to_owned),
            ),
            "EXPOSE" => d.expose.extend(rest.split_whitespace().map(|p| {
                p.trim_end_matches("/tcp")
                    .parse::<u16>()
                    .unwrap_or_else(|e| panic!("EXPOSE {p}: {e}"))
            })),
            _ => {}
        }
    }
    d
}

/// The Deployment's args through the crate's real command line.
fn parse_run(args: &[&str]) -> server_binder::runtime::run::RunArgs {
    use clap::Parser;
    use server_binder::runtime::cli::{Cli, Command};
    let argv: Vec<&str> = std::iter::once("server-binder")
        .chain(args.iter().copied())
        .collect();
    match Cli::try_parse_from(&argv) {
        Ok(Cli {
            command: Command::Run(run),
        }) => run,
        Ok(_) => panic!("the Deployment does not run `server-binder run`: {argv:?}"),
        Err(e) => {
            panic!("the Deployment's args do not parse with the real command line: {argv:?}\n{e}")
        }
    }
}

fn port_of(container: &Value, port: &Value) -> u64 {
    match port {
        Value::Number(n) => n.as_u64().unwrap(),
        Value::String(name) => container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name.as_str())
            .unwrap_or_else(|| panic!("no container port named {name}"))["containerPort"]
            .as_u64()
            .unwrap(),
        other => panic!("port {other}"),
    }
}

fn labels_match(selector: &Value, labels: &Value) {
    let selector = selector.as_object().expect("matchLabels");
    assert!(!selector.is_empty());
    for (k, v) in selector {
        assert_eq!(&labels[k], v, "label {k} selected");
    }
}

#[test]
fn deployment_matches_the_command_line_and_the_image() {
    if !kubectl_present() {
        return;
    }
    let objects = kustomize("manifests");
    let deployment = find(&objects, "Deployment", "server-binder");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"]["spec"];
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    labels_match(&deployment["spec"]["selector"]["matchLabels"], pod_labels);
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];

    // What runs: the image's ENTRYPOINT with the Deployment's args (which replace CMD).
    let docker = read_dockerfile();
    assert_eq!(
        docker.from.last().map(String::as_str),
        Some("gcr.io/distroless/cc-debian12:nonroot"),
        "the runtime stage"
    );
    assert!(
        docker.from[0].starts_with("rust:1") && docker.from[0].ends_with("-bookworm"),
        "the builder: {:?}",
        docker.from
    );
    assert_eq!(docker.entrypoint, [BINARY], "ENTRYPOINT");
    assert!(
        docker.copied_to.iter().any(|p| p == BINARY),
        "the runtime stage copies the binary to the ENTRYPOINT path: {:?}",
        docker.copied_to
    );
    assert_eq!(docker.cmd, ["run"], "CMD");
    // The image is the in-cluster operator: no embedded API server (Cargo.toml's
    // `embedded-apiserver` feature), so `dev`, `apiserver` and `bench` are not in it.
    assert!(
        !docker.cargo_builds.is_empty(),
        "the builder runs cargo build"
    );
    for build in &docker.cargo_builds {
        assert!(
            build.contains("--no-default-features") && build.contains("--locked"),
            "every build of the image is the operator alone, from the lock file: {build}"
        );
    }
    let user = docker.user.as_deref().expect("USER");
    assert!(
        ["nonroot", "65532", "65532:65532", "nonroot:nonroot"].contains(&user),
        "USER {user}"
    );
    let args: Vec<&str> = match c.get("command") {
        // No command: the ENTRYPOINT runs.
        None => strs(&c["args"]),
        Some(command) => {
            let command = strs(command);
            assert_eq!(command.first(), Some(&BINARY), "command");
            command[1..]
                .iter()
                .copied()
                .chain(strs(&c["args"]))
                .collect()
        }
    };
    let run = parse_run(&args);
    assert!(run.leader_elect, "two replicas need --leader-elect");
    assert_eq!(
        run.controllers.log_format,
        server_binder::runtime::logging::LogFormat::Json
    );
    assert_eq!(run.lease_namespace, NAMESPACE);
    assert_eq!(deployment["metadata"]["namespace"], NAMESPACE);

    // The leader-election Role is for that Lease, in that namespace.
    let role = find(&objects, "Role", "server-binder-leader-election");
    assert_eq!(role["metadata"]["namespace"], run.lease_namespace.as_str());
    for rule in role["rules"].as_array().unwrap() {
        if let Some(names) = rule.get("resourceNames") {
            assert_eq!(strs(names), [run.lease_name.as_str()]);
        }
    }

    // The identity comes from the downward API.
    let pod_name = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "POD_NAME")
        .expect("env POD_NAME");
    assert_eq!(
        pod_name["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );

    // One port for metrics and probes: --metrics-addr's, the container's, the
    // probes', the image's EXPOSE and the Service's target.
    let addr: SocketAddr = run.metrics_addr;
    let port = u64::from(addr.port());
    assert!(
        addr.ip().is_unspecified(),
        "listens on all interfaces: {addr}"
    );
    let metrics_port = c["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "metrics")
        .expect("a container port named metrics");
    assert_eq!(
        metrics_port["containerPort"], port,
        "the container port named metrics is --metrics-addr's"
    );
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(port_of(c, &get["port"]), port, "{probe} port");
    }
    assert_eq!(docker.expose, [port as u16], "EXPOSE");
    let service = find(&objects, "Service", "server-binder-metrics");
    let service_ports = service["spec"]["ports"].as_array().unwrap();
    assert_eq!(service_ports.len(), 1);
    assert_eq!(service_ports[0]["name"], "metrics");
    assert_eq!(port_of(c, &service_ports[0]["targetPort"]), port);
    labels_match(&service["spec"]["selector"], pod_labels);

    // The restricted Pod Security Standard, at pod and container level.
    let psc = &pod["securityContext"];
    assert_eq!(psc["runAsNonRoot"], true);
    assert_eq!(psc["seccompProfile"]["type"], "RuntimeDefault");
    // A numeric uid lets the kubelet verify runAsNonRoot against a named image user.
    assert!(psc["runAsUser"].as_u64().is_some_and(|u| u > 0), "{psc}");
    let sc = &c["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(strs(&sc["capabilities"]["drop"]), ["ALL"]);
    assert!(sc["capabilities"].get("add").is_none());
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
    assert_ne!(sc["privileged"], true);
    for key in ["hostNetwork", "hostPID", "hostIPC"] {
        assert_ne!(pod[key], true, "{key}");
    }
    for which in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(
                c["resources"][which][resource].is_string(),
                "resources.{which}.{resource}"
            );
        }
    }

    // The pods run as the ServiceAccount the bindings name.
    assert_eq!(pod["serviceAccountName"], "server-binder");
    for (kind, name) in [
        ("ClusterRoleBinding", "server-binder"),
        ("RoleBinding", "server-binder-leader-election"),
    ] {
        let b = find(&objects, kind, name);
        let subjects = b["subjects"].as_array().unwrap();
        assert_eq!(subjects.len(), 1, "{kind}");
        assert_eq!(subjects[0]["kind"], "ServiceAccount");
        assert_eq!(subjects[0]["name"], "server-binder");
        assert_eq!(subjects[0]["namespace"], NAMESPACE);
    }

    // A drain keeps one replica to hold the lease.
    let pdb = find(&objects, "PodDisruptionBudget", "server-binder");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    labels_match(&pdb["spec"]["selector"]["matchLabels"], pod_labels);
}

fn granted(objects: &[Value], kind: &str, name: &str) -> BTreeSet<(String, String, String)> {
    let role = find(objects, kind, name);
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().expect("rules") {
        assert!(
            rule.get("nonResourceURLs").is_none(),
            "{kind} {name}: no non-resource URLs: {rule}"
        );
        let groups = strs(&rule["apiGroups"]);
        let resources = strs(&rule["resources"]);
        let verbs = strs(&rule["verbs"]);
        assert!(
            !groups.is_empty() && !resources.is_empty() && !verbs.is_empty(),
            "{rule}"
        );
        for g in &groups {
            for r in &resources {
                for v in &verbs {
                    assert!(
                        ![g, r, v].contains(&&"*"),
                        "{kind} {name}: no wildcards: {rule}"
                    );
                    out.insert(((*g).to_owned(), (*r).to_owned(), (*v).to_owned()));
                }
            }
        }
    }
    out
}

/// One file of manifests/base, parsed.
fn base_file(name: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(path(&format!("manifests/base/{name}"))).unwrap();
    vec![serde_saphyr::from_str(&text).expect("YAML")]
}

/// The shape of the RBAC objects. What they grant is checked against the controllers'
/// real requests by tests/controllers/rbac.rs, which reads the files in manifests/base;
/// here the built install must grant exactly what those files say.
#[test]
fn rbac_is_one_clusterrole_and_one_lease_role_bound_to_the_service_account() {
    if !kubectl_present() {
        return;
    }
    let objects = kustomize("manifests");
    // The roles for people and cleaners (tenant-roles.yaml, cleaner-clusterrole.yaml)
    // are checked by `aggregated_roles_*`; none is bound to the operator.
    let roles: Vec<(String, String)> = objects
        .iter()
        .map(kind_name)
        .filter(|(k, _)| k == "ClusterRole" || k == "Role")
        .filter(|(_, n)| !PEOPLE_ROLES.contains(&n.as_str()))
        .collect();
    assert_eq!(
        roles,
        [
            (
                "Role".to_owned(),
                "server-binder-leader-election".to_owned()
            ),
            ("ClusterRole".to_owned(), "server-binder".to_owned()),
        ],
        "one ClusterRole and one Role, nothing else"
    );
    assert_eq!(
        granted(&objects, "ClusterRole", "server-binder"),
        granted(
            &base_file("clusterrole.yaml"),
            "ClusterRole",
            "server-binder"
        )
    );
    assert_eq!(
        granted(&objects, "Role", "server-binder-leader-election"),
        granted(
            &base_file("leader-election-role.yaml"),
            "Role",
            "server-binder-leader-election"
        )
    );
    let role = find(&objects, "Role", "server-binder-leader-election");
    assert_eq!(role["metadata"]["namespace"], NAMESPACE);
    assert_eq!(
        find(&objects, "ClusterRoleBinding", "server-binder")["roleRef"]["name"],
        "server-binder"
    );
    assert_eq!(
        find(&objects, "RoleBinding", "server-binder-leader-election")["roleRef"],
        serde_json::json!({
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "server-binder-leader-election"
        })
    );
}

/// The metrics of docs/binding.md's Metrics section (prefix `server_binder_`); a rule may
/// use a histogram's or counter's series names.
const METRICS: &[&str] = &[
    "claims",
    "claims_pending",
    "quota",
    "claims_evicted",
    "evictions_held_oldest_seconds",
    "servers",
    "bind_duration_seconds",
    "binds_total",
    "releases_total",
    "rebinds_total",
    "lost_claims_total",
    "repairs_total",
    "api_writes_total",
    "reconcile_duration_seconds",
    "reconcile_errors_total",
    "leader",
];

fn metric_names(expr: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("server_binder_") {
        let tail = &rest[i + "server_binder_".len()..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(&tail[..end]);
        rest = &tail[end..];
    }
    out
}

#[test]
fn prometheus_rules_pass_promtool() {
    if !kubectl_present() || !tool_present("promtool") {
        return;
    }
    let objects = kustomize(WITH_MONITORING);
    let rule = find(&objects, "PrometheusRule", "server-binder");
    let groups = &rule["spec"]["groups"];
    let mut alerts = Vec::new();
    for group in groups.as_array().unwrap() {
        for r in group["rules"].as_array().unwrap() {
            let expr = r["expr"].as_str().unwrap();
            for m in metric_names(expr) {
                let base = m
                    .strip_suffix("_bucket")
                    .or_else(|| m.strip_suffix("_sum"))
                    .or_else(|| m.strip_suffix("_count"))
                    .filter(|b| METRICS.contains(b))
                    .unwrap_or(m);
                assert!(
                    METRICS.contains(&base),
                    "server_binder_{m} in {expr} is not a metric of docs/binding.md"
                );
            }
            if let Some(a) = r["alert"].as_str() {
                alerts.push(a.to_owned());
                assert!(r["labels"]["severity"].is_string(), "{a} has a severity");
                assert!(r["annotations"]["summary"].is_string(), "{a} has a summary");
                // Each alert has a section in docs/operations.md.
                let docs = std::fs::read_to_string(path("docs/operations.md")).unwrap();
                assert!(
                    docs.contains(&format!("### {a}")),
                    "docs/operations.md explains {a}"
                );
            }
        }
    }
    check_pending_reasons(
        groups,
        &std::fs::read_to_string(path("docs/operations.md")).unwrap(),
    );
    for a in [
        "ServerBinderClaimsPending",
        "ServerBinderQuotaFull",
        "ServerBinderClaimsLost",
        "ServerBinderReconcileErrors",
        "ServerBinderNoLeader",
    ] {
        assert!(alerts.iter().any(|x| x == a), "alert {a} in {alerts:?}");
    }

    // promtool reads a plain rule file: the PrometheusRule's spec.groups (JSON is
    // YAML). Its unit tests sit beside it, as tests/fixtures/monitoring expects.
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.yaml");
    std::fs::write(
        &rules,
        serde_json::to_string_pretty(&serde_json::json!({ "groups": groups })).unwrap(),
    )
    .unwrap();
    let checked = ok(Command::new("promtool")
        .arg("check")
        .arg("rules")
        .arg(&rules));
    assert!(
        checked.contains(&format!("SUCCESS: {} rules found", rules_count(groups))),
        "{checked}"
    );
    let tests = dir.path().join("alerts_test.yaml");
    std::fs::copy(path("tests/fixtures/monitoring/alerts_test.yaml"), &tests).unwrap();
    ok(Command::new("promtool")
        .arg("test")
        .arg("rules")
        .arg(&tests)
        .current_dir(dir.path()));
}

/// The reasons `ServerBinderClaimsPending` leaves out are the code's policy reasons
/// ([`PendingReason::is_policy`]), `ServerBinderQuotaFull` waits on the code's
/// `QuotaExceeded`, and the alert's description and its runbook name every other reason.
fn check_pending_reasons(groups: &Value, docs: &str) {
    let rules: Vec<&Value> = groups
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .collect();
    let alert = |name: &str| -> &Value {
        rules
            .iter()
            .find(|r| r["alert"] == name)
            .unwrap_or_else(|| panic!("no alert {name}"))
    };
    let policy: BTreeSet<&str> = PendingReason::ALL
        .iter()
        .copied()
        .filter(|r| r.is_policy())
        .map(PendingReason::as_str)
        .collect();
    let pending = alert("ServerBinderClaimsPending");
    let expr = pending["expr"].as_str().unwrap();
    let excluded: BTreeSet<&str> = expr
        .split("{reason!~\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("{expr} leaves out no reason"))
        .split('|')
        .collect();
    assert_eq!(excluded, policy, "{expr} leaves out the policy reasons");
    let full = alert("ServerBinderQuotaFull")["expr"].as_str().unwrap();
    let quota_exceeded = PendingReason::QuotaExceeded.as_str();
    assert!(
        full.contains(&format!("{{reason=\"{quota_exceeded}\"}}")),
        "{full}"
    );
    let description = pending["annotations"]["description"].as_str().unwrap();
    let runbook = docs
        .split("\n### ServerBinderClaimsPending\n")
        .nth(1)
        .and_then(|rest| rest.split("\n### ").next())
        .expect("a runbook section");
    for reason in PendingReason::ALL.iter().map(|r| r.as_str()) {
        let named = |text: &str| text.contains(reason);
        assert!(
            named(runbook),
            "the runbook of ServerBinderClaimsPending names {reason}"
        );
        if !policy.contains(&reason) {
            assert!(named(description), "the alert's description names {reason}");
        }
    }
}

/// The dashboard ships as the ConfigMap the Grafana sidecar loads: label
/// `grafana_dashboard: "1"`, one JSON file, the file of the component as it is. Its
/// panels read the data source from the `datasource` variable, and only families the
/// operator exports (docs/operations.md's Metrics table, which tests/controllers/metrics.rs
/// holds to the exposition).
#[test]
fn the_dashboard_configmap_is_for_the_grafana_sidecar() {
    if !kubectl_present() {
        return;
    }
    let objects = kustomize(WITH_MONITORING);
    let cm = find(&objects, "ConfigMap", "server-binder-dashboard");
    assert_eq!(cm["metadata"]["namespace"], NAMESPACE);
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    let data = cm["data"].as_object().expect("data");
    assert_eq!(data.keys().collect::<Vec<_>>(), ["server-binder.json"]);
    let text = data["server-binder.json"].as_str().unwrap();
    assert_eq!(text, std::fs::read_to_string(path(DASHBOARD)).unwrap());
    let dashboard: Value = serde_json::from_str(text).expect("the ConfigMap holds JSON");
    assert_eq!(dashboard, monitoring::dashboard());
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    let datasource = variables.iter().find(|v| v["name"] == "datasource");
    let datasource = datasource.expect("a datasource variable");
    assert_eq!(datasource["type"], "datasource");
    assert_eq!(datasource["query"], "prometheus");
    let panels = monitoring::panels(&dashboard);
    assert!(panels.len() >= 10, "{} panels", panels.len());
    for panel in &panels {
        let title = panel["title"].as_str().unwrap();
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        let targets = panel["targets"].as_array().map_or(0, Vec::len);
        assert!(targets > 0, "panel {title:?} has queries");
    }
    let families = documented_families();
    for (title, expr) in monitoring::queries(&dashboard) {
        for family in families_read(&expr, &families) {
            assert!(
                families.contains(&family),
                "panel {title:?}: {family} is not a metric of docs/operations.md"
            );
        }
    }
}

fn rules_count(groups: &Value) -> usize {
    groups
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["rules"].as_array().unwrap().len())
        .sum()
}

/// `kubectl apply -f manifests/examples/` applies the files in name order, and must create
/// the fleet before any claim, and the server `by-ref` names last: `any-server` is ahead
/// of `by-ref` in the queue, so if it met that server alone it would take it, and `by-ref`
/// would wait for good beside a free server (about one CI run in twenty did so when the
/// claims came first).
#[test]
fn examples_create_the_fleet_first_and_the_named_server_last() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(path("manifests/examples"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let objects: Vec<Value> = files
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(file).unwrap();
            let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
            docs.into_iter().filter(|d| !d.is_null())
        })
        .collect();
    let order: Vec<(String, String)> = objects.iter().map(kind_name).collect();
    let last_server = order.iter().rposition(|(kind, _)| kind == "Server");
    let first_claim = order.iter().position(|(kind, _)| kind == "ServerClaim");
    assert!(
        matches!((last_server, first_claim), (Some(s), Some(c)) if s < c),
        "manifests/examples/ applies these in this order: {order:?}"
    );
    let by_ref = find(&objects, "ServerClaim", "by-ref");
    let named = by_ref["spec"]["serverRef"]["name"].as_str().unwrap();
    assert_eq!(
        order[last_server.unwrap()],
        ("Server".to_owned(), named.to_owned()),
        "{order:?}"
    );
}
