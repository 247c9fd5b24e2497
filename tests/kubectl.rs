//! The embedded API server against a real kubectl: `server-binder apiserver` is started
//! on a free port with `--kubeconfig-out`, and kubectl commands run against it with
//! their default behaviour (default client- and server-side validation included).
//!
//! Without kubectl on PATH every test says loudly that it skips; with
//! `SERVER_BINDER_REQUIRE_TOOLS=1` a missing kubectl fails instead.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

use crate::common::tools;
use tools::kubectl_present;

use crate::common::poll;
// The name this file's tests wait with; the helper is the shared one.
use poll::eventually_blocking as wait_until;

/// A `server-binder apiserver` process and a kubectl set up for it.
struct Cluster {
    child: Child,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Cluster {
    /// The cluster of one test, with the fixture CRDs (Widget, Gadget) established, or
    /// `None` without kubectl: the test then skips, and says so.
    fn with_fixtures() -> Option<Self> {
        let c = Self::bare()?;
        c.fixtures();
        Some(c)
    }

    /// The same without the fixture CRDs.
    fn bare() -> Option<Self> {
        kubectl_present().then(Self::start)
    }

    fn start() -> Self {
        Self::spawn(&["apiserver", "--listen", "127.0.0.1:0"])
    }

    /// `server-binder dev` (the API server with the CRDs installed and both controllers
    /// running), or `None` without kubectl. Ready once kubectl lists ServerQuotas.
    fn dev() -> Option<Self> {
        let args = [
            "dev",
            "--listen",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
        ];
        let c = kubectl_present().then(|| Self::spawn(&args))?;
        wait_until("the CRDs served", Duration::from_secs(30), || {
            c.run(&["get", "serverquotas", "-A"]).status.success()
        });
        Some(c)
    }

    /// `server-binder ARGS --kubeconfig-out KUBECONFIG`, once the kubeconfig is written.
    fn spawn(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = dir.path().join("kubeconfig");
        let child = Command::new(env!("CARGO_BIN_EXE_server-binder"))
            .args(args)
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("server-binder starts");
        let mut c = Self {
            child,
            dir,
            kubeconfig,
        };
        wait_until("the kubeconfig", Duration::from_secs(20), || {
            std::fs::metadata(&c.kubeconfig)
                .ok()
                .filter(|m| m.len() > 0)
                .map(|_| ())
        });
        assert!(
            c.child.try_wait().unwrap().is_none(),
            "the server is running"
        );
        c
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args)
            .env("HOME", self.dir.path())
            .env_remove("KUBECONFIG");
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("kubectl runs")
    }

    /// Runs kubectl and returns stdout, failing the test with stderr if it fails.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl apply -f` of a file of tests/fixtures; its output.
    fn apply_fixture(&self, file: &str) -> String {
        self.ok(&["apply", "-f", &format!("{FIXTURES}/{file}")])
    }

    fn fixtures(&self) {
        self.apply_fixture("widgets.yaml");
        self.apply_fixture("gadgets.yaml");
        self.ok(&[
            "wait",
            "--for",
            "condition=Established",
            "crd/widgets.test.example.dev",
            "crd/gadgets.test.example.dev",
        ]);
    }

    async fn client(&self) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .expect("config");
        kube::Client::try_from(config).expect("client")
    }

    /// Writes `text` to the file `name` in the test's directory; its path.
    fn file(&self, name: &str, text: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }
}

/// The arguments of `kubectl patch <what…> --type <kind> -p <body>` (`what`: the
/// object, and any other flags).
fn patch<'a>(what: &[&'a str], kind: &'a str, body: &'a str) -> Vec<&'a str> {
    let mut args = vec!["patch"];
    args.extend_from_slice(what);
    args.extend(["--type", kind, "-p", body]);
    args
}

#[test]
fn apply_get_columns_yaml_and_discovery() {
    let Some(c) = Cluster::with_fixtures() else {
        return;
    };
    let crds_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/crds");
    if Path::new(crds_dir).is_dir() {
        c.ok(&["apply", "-f", crds_dir]);
        c.ok(&[
            "wait",
            "--for",
            "condition=Established",
            "crd/servers.metal.binder.dev",
            "crd/serverclaims.metal.binder.dev",
        ]);
        let f = c.file(
            "srv.yaml",
            "apiVersion: metal.binder.dev/v1alpha1\nkind: Server\nmetadata:\n  name: srv-1\nspec: {}\n",
        );
        c.ok(&["apply", "-f", &f]);
        let servers = c.ok(&["get", "srv"]);
        let header: Vec<&str> = servers.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(
            header,
            ["NAME", "STATUS", "CLAIM", "CLASS", "RECLAIM", "AGE"],
            "{servers}"
        );
        assert!(c.ok(&["get", "servers", "-o", "wide"]).contains("REASON"));
        let claims = c.run(&["get", "scl"]);
        assert!(
            claims.status.success(),
            "{}",
            String::from_utf8_lossy(&claims.stderr)
        );
    } else {
        eprintln!("note: manifests/crds/ is not there yet; only the fixture CRDs are applied");
    }
    assert!(
        c.apply_fixture("widget-w1.yaml")
            .contains("widget.test.example.dev/w1 created")
    );
    assert!(c.apply_fixture("widget-w1.yaml").contains("unchanged"));
    c.apply_fixture("gadget-g1.yaml");

    let table = c.ok(&["get", "widgets"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "COLOR", "SIZE", "PHASE", "AGE"], "{table}");
    assert!(table.lines().nth(1).unwrap().starts_with("w1 "), "{table}");
    assert!(table.contains("blue") && table.contains("small"));
    let wide = c.ok(&["get", "wg", "-o", "wide"]);
    assert!(wide.lines().next().unwrap().contains("REPLICAS"), "{wide}");
    let gadgets = c.ok(&["get", "gd"]);
    assert!(gadgets.lines().next().unwrap().contains("REF"), "{gadgets}");
    assert!(gadgets.contains("g1") && gadgets.contains("w1"));

    let yaml = c.ok(&["get", "widget", "w1", "-o", "yaml"]);
    for needle in [
        "apiVersion: test.example.dev/v1",
        "kind: Widget",
        "color: blue",
        "resourceVersion:",
        "uid:",
    ] {
        assert!(yaml.contains(needle), "{needle} in {yaml}");
    }
    let names = c.ok(&["get", "testing", "-o", "name"]);
    assert!(
        names.contains("widget.test.example.dev/w1"),
        "category: {names}"
    );
    let resources = c.ok(&["api-resources"]);
    assert!(resources.contains("widgets") && resources.contains("wg"));
    let ns = c.ok(&["get", "namespaces"]);
    assert!(ns.contains("default") && ns.contains("Active"));

    // A built-in through apply, twice (the second is a strategic merge patch).
    let f = c.file(
        "ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n  labels: {a: \"1\"}\n",
    );
    c.ok(&["apply", "-f", &f]);
    let f = c.file(
        "ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n  labels: {b: \"2\"}\n",
    );
    assert!(c.ok(&["apply", "-f", &f]).contains("configured"));
    let labels = c.ok(&["get", "ns", "team-a", "-o", "jsonpath={.metadata.labels}"]);
    assert!(
        labels.contains("\"b\":\"2\"") && !labels.contains("\"a\""),
        "{labels}"
    );
}

#[test]
fn get_watch_sees_a_change_made_meanwhile() {
    let Some(c) = Cluster::with_fixtures() else {
        return;
    };
    c.apply_fixture("widget-w1.yaml");
    let mut watch = c
        .cmd(&["get", "widgets", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let wait_line = |pred: &dyn Fn(&str) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if pred(&line) => return line,
                Ok(_) => {}
                Err(e) => panic!("kubectl get -w: no matching line ({e})"),
            }
        }
    };
    wait_line(&|l| l.starts_with("w1 ") && l.contains("blue"));
    c.ok(&patch(
        &["widget", "w1"],
        "merge",
        r#"{"spec":{"color":"green"}}"#,
    ));
    let changed = wait_line(&|l| l.starts_with("w1 ") && l.contains("green"));
    assert!(changed.contains("small"), "{changed}");
    let _ = watch.kill();
    let _ = watch.wait();
}

#[test]
fn patch_label_annotate_and_status() {
    let Some(c) = Cluster::with_fixtures() else {
        return;
    };
    c.apply_fixture("widget-w1.yaml");
    c.ok(&patch(
        &["widget", "w1"],
        "merge",
        r#"{"spec":{"color":"green"}}"#,
    ));
    c.ok(&patch(&["widget", "w1"], "json", r#"[{"op":"test","path":"/spec/color","value":"green"},{"op":"replace","path":"/spec/size","value":"large"}]"#));
    let failed = c.run(&patch(
        &["widget", "w1"],
        "json",
        r#"[{"op":"test","path":"/spec/color","value":"blue"}]"#,
    ));
    assert!(!failed.status.success(), "a failing JSON patch test fails");
    c.ok(&patch(
        &["widget", "w1", "--subresource", "status"],
        "merge",
        r#"{"status":{"phase":"Ready"}}"#,
    ));
    c.ok(&["label", "widget", "w1", "env=prod"]);
    c.ok(&["annotate", "widget", "w1", "note=hello"]);
    let got = c.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.color} {.spec.size} {.status.phase} {.metadata.labels.env} {.metadata.annotations.note} {.metadata.generation}"]);
    assert_eq!(got, "green large Ready prod hello 3");
    let table = c.ok(&["get", "wg", "-l", "env=prod"]);
    assert!(table.contains("Ready"), "{table}");
    c.ok(&["label", "widget", "w1", "env-"]);
    assert!(
        c.ok(&["get", "wg", "-l", "env=prod", "-o", "name"])
            .trim()
            .is_empty()
    );
}

#[tokio::test]
async fn describe_shows_events_from_kubes_recorder() {
    let Some(c) = Cluster::with_fixtures() else {
        return;
    };
    c.apply_fixture("gadget-g1.yaml");
    let client = c.client().await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("test.example.dev", "v1", "Gadget"),
        "gadgets",
    );
    let g = Api::<DynamicObject>::namespaced_with(client.clone(), "default", &ar)
        .get("g1")
        .await
        .unwrap();
    let reference: ObjectReference = g.object_ref(&ar);
    let recorder = Recorder::new(
        client,
        Reporter {
            controller: "gadget-controller".into(),
            instance: None,
        },
    );
    recorder
        .publish(
            &Event {
                type_: EventType::Normal,
                reason: "Calibrated".into(),
                note: Some("calibrated against w1".into()),
                action: "Calibrate".into(),
                secondary: None,
            },
            &reference,
        )
        .await
        .unwrap();
    let out = c.ok(&["describe", "gadget", "g1"]);
    let events = out
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("no Events section:\n{out}"));
    for needle in [
        "Normal",
        "Calibrated",
        "gadget-controller",
        "calibrated against w1",
    ] {
        assert!(events.contains(needle), "{needle} in {events}");
    }
    let listed = c.ok(&["get", "events"]);
    assert!(
        listed.contains("gadget/g1") && listed.contains("Calibrated"),
        "{listed}"
    );
}

#[test]
fn delete_waits_on_finalizers() {
    let Some(c) = Cluster::with_fixtures() else {
        return;
    };
    c.apply_fixture("widget-w1.yaml");
    c.ok(&patch(
        &["widget", "w1"],
        "merge",
        r#"{"metadata":{"finalizers":["test.example.dev/hold"]}}"#,
    ));
    let out = c.ok(&["delete", "widget", "w1", "--wait=false"]);
    assert!(out.contains("deleted"), "{out}");
    let ts = c.ok(&[
        "get",
        "widget",
        "w1",
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    assert!(!ts.is_empty(), "still there, being deleted");

    let mut blocking = c
        .cmd(&["delete", "widget", "w1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // kubectl gives no signal that it is waiting; check that it keeps waiting for a
    // while (an absence can only be observed over time) while the finalizer is there.
    let deadline = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < deadline {
        assert!(
            blocking.try_wait().unwrap().is_none(),
            "kubectl delete returned while a finalizer remained"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    c.ok(&patch(
        &["widget", "w1"],
        "json",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ));
    let status = wait_until("kubectl delete to return", Duration::from_secs(30), || {
        blocking.try_wait().unwrap()
    });
    assert!(status.success());
    let gone = c.run(&["get", "widget", "w1"]);
    assert!(!gone.status.success());
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("NotFound"),
        "{}",
        String::from_utf8_lossy(&gone.stderr)
    );
}

#[test]
fn a_rejected_cel_transition_shows_its_message() {
    let Some(c) = Cluster::with_fixtures() else {
        return;
    };
    c.apply_fixture("gadget-g1.yaml");
    let f = c.file(
        "g1.yaml",
        "apiVersion: test.example.dev/v1\nkind: Gadget\nmetadata:\n  name: g1\nspec:\n  ref:\n    name: w2\n",
    );
    let out = c.run(&["apply", "-f", &f]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ref may be set or cleared but not switched to another widget"),
        "{err}"
    );
    assert!(err.contains("is invalid"), "{err}");
}

/// `kubectl create namespace` sends the Namespace as protobuf (client-go's typed
/// clients do, for built-in kinds); the server decodes it, and delete works too.
#[test]
fn create_and_delete_a_namespace_with_kubectl_create() {
    let Some(c) = Cluster::bare() else {
        return;
    };
    let out = c.ok(&["create", "ns", "team-a"]);
    assert!(out.contains("namespace/team-a created"), "{out}");
    let listed = c.ok(&["get", "ns"]);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("team-a ") && l.contains("Active")),
        "{listed}"
    );
    let labels = c.ok(&["get", "ns", "team-a", "-o", "jsonpath={.metadata.labels}"]);
    assert!(labels.contains("kubernetes.io/metadata.name"), "{labels}");
    let out = c.ok(&["delete", "ns", "team-a"]);
    assert!(out.contains("namespace \"team-a\" deleted"), "{out}");
    let gone = c.run(&["get", "ns", "team-a"]);
    assert!(!gone.status.success());
}

/// What `kubectl get -o yaml` writes of several objects is a `kind: List`, and applying
/// it back is how a user restores them. kubectl checks a List against OpenAPI v2, not
/// v3: the server must serve `/openapi/v2` (as protobuf), and its items still meet the
/// server's strict field validation.
#[test]
fn a_list_written_by_get_applies_back_and_its_items_are_still_validated() {
    let Some(c) = Cluster::with_fixtures() else {
        return;
    };
    c.apply_fixture("widget-w1.yaml");
    let saved = c.ok(&["get", "widgets", "-o", "yaml"]);
    assert!(saved.contains("kind: List"), "{saved}");
    let saved = c.file("saved.yaml", &saved);
    c.ok(&["delete", "widget", "w1"]);
    let out = c.ok(&["apply", "-f", &saved]);
    assert!(out.contains("widget.test.example.dev/w1 created"), "{out}");
    let color = c.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.color}"]);
    assert_eq!(color, "blue");
    let bogus = c.file(
        "bogus.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: test.example.dev/v1\n  kind: Widget\n  metadata: {name: w2}\n  spec: {color: red, bogus: 1}\n",
    );
    let refused = c.run(&["create", "-f", &bogus]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(stderr.contains("unknown field \"spec.bogus\""), "{stderr}");
}

/// `kubectl get crd` prints each CRD's creation time (the server's default table
/// convertor sends it as an RFC 3339 string), not an age of 0s.
#[test]
fn get_crd_shows_the_creation_time() {
    let Some(c) = Cluster::with_fixtures() else {
        return;
    };
    let created = c.ok(&[
        "get",
        "crd",
        "widgets.test.example.dev",
        "-o",
        "jsonpath={.metadata.creationTimestamp}",
    ]);
    assert!(created.ends_with('Z'), "{created}");
    let table = c.ok(&["get", "crd"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "CREATED", "AT"], "{table}");
    let row = table
        .lines()
        .find(|l| l.starts_with("widgets.test.example.dev "))
        .unwrap_or_else(|| panic!("no widgets row in {table}"));
    assert!(row.trim_end().ends_with(&created), "{row} vs {created}");
}

/// A bad label is refused by the server with Kubernetes' words, and nothing is stored.
#[test]
fn a_bad_label_is_refused_with_kubernetes_words() {
    let Some(c) = Cluster::with_fixtures() else {
        return;
    };
    let f = c.file(
        "w.yaml",
        &format!(
            "apiVersion: test.example.dev/v1\nkind: Widget\nmetadata:\n  name: w9\n  labels:\n    tier: {}\nspec:\n  color: blue\n",
            "x".repeat(64)
        ),
    );
    let out = c.run(&["apply", "-f", &f]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("metadata.labels: Invalid value")
            && err.contains("must be no more than 63 characters"),
        "{err}"
    );
    assert!(!c.run(&["get", "widget", "w9"]).status.success());
}

/// The issue's scenario with real `kubectl apply --server-side`: another manager sets a
/// field the applied manifest leaves out; re-applying the manifest keeps that field,
/// and managedFields shows who owns it.
#[test]
fn server_side_reapply_leaves_another_managers_field() {
    let Some(c) = Cluster::with_fixtures() else {
        return;
    };
    let f = c.file(
        "w.yaml",
        "apiVersion: test.example.dev/v1\nkind: Widget\nmetadata:\n  name: w5\nspec:\n  color: blue\n",
    );
    c.ok(&["apply", "--server-side", "-f", &f]);
    c.ok(&patch(
        &["widget", "w5", "--field-manager", "server-binder"],
        "merge",
        r#"{"spec":{"replicas":3}}"#,
    ));
    let out = c.ok(&["apply", "--server-side", "-f", &f]);
    assert!(out.contains("serverside-applied"), "{out}");
    let replicas = c.ok(&["get", "widget", "w5", "-o", "jsonpath={.spec.replicas}"]);
    assert_eq!(replicas, "3");
    let owners = c.ok(&[
        "get",
        "widget",
        "w5",
        "--show-managed-fields",
        "-o",
        r#"jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation};{end}"#,
    ]);
    assert!(owners.contains("kubectl/Apply;"), "{owners}");
    assert!(owners.contains("server-binder/Update;"), "{owners}");
}

/// A team's GPU quota, the class and a server for it, and a claim that takes it.
const QUOTA_AT_ITS_LIMIT: &str = "\
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: metal.binder.dev/v1alpha1
kind: ServerClass
metadata: {name: gpu}
spec: {}
---
apiVersion: metal.binder.dev/v1alpha1
kind: Server
metadata: {name: gpu-1}
spec: {}
---
apiVersion: metal.binder.dev/v1alpha1
kind: ServerQuota
metadata: {name: gpu, namespace: team-a}
spec:
  hard: {gpu: 1}
---
apiVersion: metal.binder.dev/v1alpha1
kind: ServerClaim
metadata: {name: training, namespace: team-a}
spec: {serverClassName: gpu}
";

/// Against `server-binder dev`: `kubectl get serverquotas` prints what a team's claims
/// use of its quota (USED), as does the short name `squota`, and the quota is in the
/// category `metal`.
#[test]
fn get_serverquotas_shows_what_is_used() {
    let Some(c) = Cluster::dev() else {
        return;
    };
    let f = c.file("quota.yaml", QUOTA_AT_ITS_LIMIT);
    c.ok(&["apply", "-f", &f]);
    let table = wait_until(
        "team-a's quota counts its claim",
        Duration::from_secs(30),
        || {
            let table = c.ok(&["get", "serverquotas", "-n", "team-a"]);
            let counted = table
                .lines()
                .any(|l| l.starts_with("gpu ") && l.contains("gpu: 1/1"));
            if counted { Ok(table) } else { Err(table) }
        },
    );
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "USED", "AGE"], "{table}");
    let short = c.ok(&["get", "squota", "-n", "team-a"]);
    assert!(short.contains("gpu: 1/1"), "{short}");
    let all = c.ok(&["get", "squota", "-A"]);
    assert!(
        all.lines()
            .any(|l| l.starts_with("team-a ") && l.contains("gpu: 1/1")),
        "{all}"
    );
    let metal = c.ok(&["get", "metal", "-n", "team-a", "-o", "name"]);
    assert!(
        metal.contains("serverquota.metal.binder.dev/gpu"),
        "{metal}"
    );
}

/// A printer column whose JSONPath escapes a dot (an annotation's name) reads as
/// kubectl's own JSONPath reads it: `kubectl get serverclasses` prints the default
/// class's DEFAULT as `custom-columns` with the same path prints it.
#[test]
fn a_printer_column_with_an_escaped_dot_reads_as_kubectls_jsonpath() {
    let Some(c) = Cluster::bare() else {
        return;
    };
    let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/crds/");
    c.ok(&["apply", "-f", crds]);
    c.ok(&[
        "wait",
        "--for",
        "condition=Established",
        "crd/serverclasses.metal.binder.dev",
    ]);
    let class = "apiVersion: metal.binder.dev/v1alpha1
kind: ServerClass
metadata:
  name: general
  annotations: {serverclass.metal.binder.dev/is-default-class: \"true\"}
spec: {}
";
    c.ok(&["apply", "-f", &c.file("class.yaml", class)]);
    let path = r".metadata.annotations.serverclass\.metal\.binder\.dev/is-default-class";
    let custom = c.ok(&[
        "get",
        "serverclasses",
        "-o",
        &format!("custom-columns=NAME:.metadata.name,DEFAULT:{path}"),
    ]);
    let table = c.ok(&["get", "serverclasses"]);
    let default_of = |table: &str| -> Option<String> {
        let header: Vec<&str> = table.lines().next()?.split_whitespace().collect();
        let column = header.iter().position(|h| *h == "DEFAULT")?;
        let row = table.lines().find(|l| l.starts_with("general"))?;
        row.split_whitespace().nth(column).map(String::from)
    };
    assert_eq!(default_of(&custom).as_deref(), Some("true"), "{custom}");
    assert_eq!(default_of(&table), default_of(&custom), "{table}");
}
