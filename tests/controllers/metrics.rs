//! The metrics endpoint as Prometheus sees it: after a real scenario the exposition
//! passes `promtool check metrics` and its figures match the objects; and a real
//! Prometheus server scrapes `server-binder dev` and answers a query for binds and every
//! query of the Grafana dashboard.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use server_binder::api::{
    ClaimPhase, ServerClass, ServerClassSpec, ServerPhase, ServerQuota, ServerQuotaSpec,
};
use server_binder::binding::PendingReason;

use crate::common::monitoring::{dashboard, documented_families, instant_query_path, queries};
use crate::controllers::stage::*;
use crate::controllers::support::*;

/// The families an exposition declares (`# TYPE name kind`).
fn exported_families(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// The `class_claims` series of an exposition, as `(class, phase, value)`.
fn class_claims_series(text: &str) -> Vec<(String, String, String)> {
    let label = |labels: &str, key: &str| -> String {
        let start = format!("{key}=\"");
        let at = labels.find(&start).map(|i| i + start.len()).unwrap_or(0);
        labels[at..]
            .split('"')
            .next()
            .unwrap_or_default()
            .to_string()
    };
    text.lines()
        .filter_map(|l| l.strip_prefix("server_binder_class_claims{"))
        .filter_map(|l| l.split_once("} "))
        .map(|(labels, value)| (label(labels, "class"), label(labels, "phase"), value.into()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// A tenant's class names are not label values: 120 claims naming 120 classes that do
/// not exist are one series (`class=""`), beside the one of the class that exists.
#[tokio::test]
async fn claims_naming_missing_classes_add_no_series_per_name() {
    const MISSING: usize = 120;
    let mut env = Env::new().await;
    kube::Api::<ServerClass>::all(env.client.clone())
        .create(
            &kube::api::PostParams::default(),
            &ServerClass::new("real", ServerClassSpec::default()),
        )
        .await
        .expect("class created");
    let addr = env.start_with_endpoint(2).await;
    let mut real = claim("real-0");
    real.spec.server_class_name = Some("real".into());
    env.put_claim(real).await;
    for i in 0..MISSING {
        let mut c = claim(&format!("c{i:03}"));
        c.spec.server_class_name = Some(format!("tenant-chosen-{i:03}"));
        env.put_claim(c).await;
    }
    let want = vec![
        (String::new(), "Pending".to_string(), MISSING.to_string()),
        ("real".to_string(), "Pending".to_string(), "1".to_string()),
    ];
    wait_for(
        "one class_claims series for the missing classes and one for the real one",
        DEADLINE,
        || async { class_claims_series(&http_get(addr, "/metrics").await.1) },
        |series| *series == want,
    )
    .await;
    let (_, text) = http_get(addr, "/metrics").await;
    assert!(
        !text.contains("tenant-chosen-"),
        "a tenant's class name is a label value"
    );
}

/// docs/operations.md's metrics table names every family the operator exports, and no
/// other.
#[tokio::test]
async fn the_metrics_table_names_every_family_exported() {
    let mut env = Env::new().await;
    env.put_server(server("s1")).await;
    // A class and a claim of it: the per-class families have series only then.
    kube::Api::<ServerClass>::all(env.client.clone())
        .create(
            &kube::api::PostParams::default(),
            &ServerClass::new("any", ServerClassSpec::default()),
        )
        .await
        .expect("class created");
    // A quota of one server of it, and a second claim it turns away: the quota families
    // have series only then.
    let spec = ServerQuotaSpec {
        hard: [("any".to_string(), 1)].into(),
    };
    kube::Api::<ServerQuota>::namespaced(env.client.clone(), NS)
        .create(&Default::default(), &ServerQuota::new("q", spec))
        .await
        .expect("quota created");
    let mut c1 = claim("c1");
    c1.spec.server_class_name = Some("any".into());
    env.put_claim(c1).await;
    let addr = env.start_with_endpoint(2).await;
    env.wait_claim_phase("c1", ClaimPhase::Bound, "Bound").await;
    let mut c2 = claim("c2");
    c2.spec.server_class_name = Some("any".into());
    env.put_claim(c2).await;
    env.wait_claim_phase("c2", ClaimPhase::Pending, "QuotaExceeded")
        .await;
    let (_, text) = http_get(addr, "/metrics").await;
    assert_eq!(exported_families(&text), documented_families(), "{text}");
}

/// 8 claims for 6 servers (one `Retain`); then the claims on the Retain server and on
/// one Recycle server are deleted, and a waiting claim takes the recycled one.
#[tokio::test]
async fn the_exposition_passes_promtool_and_matches_the_objects() {
    let mut env = Env::new().await;
    for i in 0..5 {
        env.put_server(server(&format!("s{i}"))).await;
    }
    env.put_server(server("s5").retain()).await;
    for i in 0..8 {
        env.create_claim(&format!("c{i}")).await;
    }
    let addr = env.start_with_endpoint(2).await;

    let claim_bound_to = |claims: &[server_binder::api::ServerClaim], server: &str| {
        claims
            .iter()
            .find(|c| phase(c) == Some(ClaimPhase::Bound) && server_ref(c) == Some(server))
            .map(|c| c.name_any())
    };
    eventually("6 Bound and 2 Pending", DEADLINE, || async {
        let (_, claims) = env.all().await;
        let bound = claims
            .iter()
            .filter(|c| phase(c) == Some(ClaimPhase::Bound));
        let pending = claims
            .iter()
            .filter(|c| phase(c) == Some(ClaimPhase::Pending));
        bound.count() == 6 && pending.count() == 2
    })
    .await;
    let (_, claims) = env.all().await;
    let on_retain = claim_bound_to(&claims, "s5").expect("a claim on s5");
    let on_recycle = claim_bound_to(&claims, "s0").expect("a claim on s0");
    env.delete_claim(&on_retain).await;
    env.delete_claim(&on_recycle).await;
    eventually(
        "s5 Released, s0 re-bound, 5 Bound and 1 Pending",
        DEADLINE,
        || async {
            let (servers, claims) = env.all().await;
            let s5 = servers.iter().find(|s| s.name_any() == "s5");
            let released = s5.is_some_and(|s| server_is(s, ServerPhase::Released, "Released"));
            let bound = claims
                .iter()
                .filter(|c| phase(c) == Some(ClaimPhase::Bound));
            released
                && claim_bound_to(&claims, "s0").is_some()
                && bound.count() == 5
                && claims.len() == 6
        },
    )
    .await;
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);

    // The gauges are computed from the caches at scrape time; the caches may trail the
    // objects just read by a watch event or two.
    let gauges_match = |text: &str| {
        let sample = |name: &str, labels: &[(&str, &str)]| sample(text, name, labels);
        sample(
            "server_binder_claims",
            &[("namespace", NS), ("phase", "Bound")],
        ) == 5.0
            && sample(
                "server_binder_claims",
                &[("namespace", NS), ("phase", "Pending")],
            ) == 1.0
            && sample("server_binder_servers", &[("phase", "Bound")]) == 5.0
            && sample("server_binder_servers", &[("phase", "Released")]) == 1.0
            && sample("server_binder_servers", &[("phase", "Available")]) == 0.0
            && pending_by_reason(text, NS)
                == [(PendingReason::NoMatchingServer.as_str().into(), 1.0)]
    };
    eventually(
        "the claims and servers gauges match the objects",
        DEADLINE,
        || async { gauges_match(&http_get(addr, "/metrics").await.1) },
    )
    .await;
    let (status, text) = http_get(addr, "/metrics").await;
    assert_eq!(status, 200);
    // The per-class and per-quota families have series only while a class or a quota
    // exists (none here; the table test above has them).
    let per_class =
        |f: &str| f.starts_with("server_binder_class_") || f.starts_with("server_binder_quota");
    for family in documented_families().into_iter().filter(|f| !per_class(f)) {
        assert!(
            text.contains(&format!("# HELP {family} ")),
            "{family} missing from:\n{text}"
        );
    }
    assert!(gauges_match(&text), "{text}");
    let sample = |name: &str, labels: &[(&str, &str)]| sample(&text, name, labels);
    // 6 binds, then one more on the recycled server; one release per deleted bound claim.
    assert_eq!(sample("server_binder_binds_total", &[]), 7.0);
    assert_eq!(
        sample("server_binder_bind_duration_seconds_count", &[]),
        7.0
    );
    assert_eq!(
        sample("server_binder_releases_total", &[("policy", "Recycle")]),
        1.0
    );
    assert_eq!(
        sample("server_binder_releases_total", &[("policy", "Retain")]),
        1.0
    );
    assert_eq!(sample("server_binder_leader", &[]), 1.0);
    let ok_writes = sample(
        "server_binder_api_writes_total",
        &[
            ("controller", "claim"),
            ("resource", "serverclaims"),
            ("result", "ok"),
        ],
    );
    assert!(
        ok_writes >= 14.0,
        "at least two claim writes per bind: {ok_writes}"
    );
    let (_, errors) = env.writes();
    assert_eq!(errors, 0);

    assert_eq!(http_get(addr, "/healthz").await.0, 200);
    assert_eq!(http_get(addr, "/readyz").await.0, 200);

    if tool_present("promtool") {
        let mut check = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("promtool starts");
        use std::io::Write;
        check
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = check.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool check metrics failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The `claims_pending` series of namespace `ns` (claims without a class), as
/// `(reason, value)`.
fn pending_by_reason(text: &str, ns: &str) -> Vec<(String, f64)> {
    let prefix = format!("server_binder_claims_pending{{class=\"\",namespace=\"{ns}\",reason=\"");
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|l| l.split_once("\"} "))
        .map(|(reason, value)| (reason.to_string(), value.parse().expect("a number")))
        .collect()
}

/// Kills the child when the test ends, however it ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `server-binder dev` on free ports: the process, its kubeconfig and its metrics address
/// (read from the line it prints).
fn start_dev(dir: &std::path::Path) -> (Reaped, std::path::PathBuf, SocketAddr) {
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_server-binder"))
        .args([
            "dev",
            "--listen",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("server-binder dev starts");
    // Keep reading its output to the end: a closed pipe would fail its next print.
    let (first_line, first) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        if let Some(Ok(line)) = lines.next() {
            let _ = first_line.send(line);
        }
        lines.for_each(drop);
    });
    let first = first
        .recv_timeout(DEADLINE)
        .expect("dev prints where it listens");
    let metrics = first
        .split("metrics at http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no metrics address in {first:?}"));
    (Reaped(child), kubeconfig, metrics)
}

/// A real Prometheus scrapes `server-binder dev` after the examples bind, and its query
/// API returns `server_binder_binds_total`, then a series for each of the dashboard's
/// queries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_dev_and_answers_for_binds() {
    if !kubectl_present() || !tool_present("prometheus") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_dev, kubeconfig, metrics) = start_dev(dir.path());

    kubectl(&kubeconfig, &["apply", "-f", EXAMPLES]);
    eventually("the 4 examples bound (per /metrics)", DEADLINE, || async {
        http_get(metrics, "/metrics")
            .await
            .1
            .contains("server_binder_binds_total 4")
    })
    .await;

    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: server-binder\n    static_configs:\n      - targets: ['{metrics}']\n"
        ),
    )
    .unwrap();
    let web = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let log_path = dir.path().join("prometheus.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let _prometheus = Reaped(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={web}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus starts"),
    );

    // Prometheus takes a few seconds to start and scrape; wait on the answer itself.
    let deadline = Instant::now() + Duration::from_secs(90);
    let answer = loop {
        let query = "/api/v1/query?query=server_binder_binds_total";
        if let Some(value) = prometheus_value(web, query).await {
            break value;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never returned server_binder_binds_total; its log:\n{}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(answer, "4", "Prometheus saw the four binds");
    let up = prometheus_value(web, "/api/v1/query?query=up%7Bjob%3D%22server-binder%22%7D").await;
    assert_eq!(up.as_deref(), Some("1"), "the target is up");
    every_panel_answers(web, &kubeconfig).await;
}

/// Every query of the Grafana dashboard (docs/operations.md, "Dashboard") returns a
/// series from the Prometheus scraping `dev`, once the class and quota example is
/// applied too (the class and quota panels have none without a class and a quota).
async fn every_panel_answers(web: SocketAddr, kubeconfig: &std::path::Path) {
    kubectl(kubeconfig, &["apply", "-f", &format!("{EXAMPLES}classes/")]);
    for (title, expr) in queries(&dashboard()) {
        let path = instant_query_path(&expr);
        eventually(
            &format!("a series for the panel {title:?}: {expr}"),
            DEADLINE,
            || async { prometheus_series(web, &path).await },
        )
        .await;
    }
}

/// How many series an instant query returns, if at least one; else what Prometheus
/// answered.
async fn prometheus_series(web: SocketAddr, query: &str) -> Result<usize, String> {
    let (status, body) = try_http_get(web, query)
        .await
        .ok_or("no answer from Prometheus")?;
    let json: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    let series = json["data"]["result"].as_array().map_or(0, Vec::len);
    match (status, &json["data"]["resultType"]) {
        (200, t) if t == "vector" && series > 0 => Ok(series),
        _ => Err(format!("{status} {body}")),
    }
}

/// The value of the first sample of an instant query, if Prometheus answers with one.
async fn prometheus_value(web: SocketAddr, query: &str) -> Option<String> {
    let (status, body) = try_http_get(web, query).await?;
    if status != 200 {
        return None;
    }
    let json: serde_json::Value = serde_json::from_str(&body).ok()?;
    json["data"]["result"][0]["value"][1]
        .as_str()
        .map(str::to_string)
}
