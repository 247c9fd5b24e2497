//! `server-binder bench bind` from the real binary, at small sizes: it runs, every claim
//! binds, and its figures add up. Never a speed: the figures' values depend on the
//! machine; only their relations are checked.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A bound on the whole run, so that a hung bench fails the test instead of the suite
/// (the bench itself stops after its stall timeout).
const HANG_GUARD: Duration = Duration::from_secs(600);

/// Runs `server-binder bench bind <args> --json` to its end and returns its report.
fn bench_bind(args: &[&str]) -> Value {
    let mut child = Command::new(env!("CARGO_BIN_EXE_server-binder"))
        .args(["bench", "bind", "--json", "--ceiling-secs", "1"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let start = Instant::now();
    while child.try_wait().expect("waitable").is_none() {
        if start.elapsed() > HANG_GUARD {
            let _ = child.kill();
            panic!("bench bind {args:?} did not finish");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out: Output = child.wait_with_output().expect("its output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench bind {args:?} failed:\n{stderr}"
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}):\n{}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn num(report: &Value, key: &str) -> f64 {
    report[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {report:#}"))
}

/// What holds of every complete run: every claim Bound, or refused by a quota
/// (`--mix classes-quotas`).
fn assert_adds_up(report: &Value, servers: u64, claims: u64) {
    assert_eq!(report["servers"], servers, "{report:#}");
    assert_eq!(report["claims"], claims, "{report:#}");
    let bound = report["bound"].as_u64().expect("bound");
    let refused = report["refused_by_quota"].as_u64().expect("refused");
    assert_eq!(bound + refused, claims, "{report:#}");
    assert_eq!(report["unbound"], 0, "{report:#}");
    let settled = num(report, "time_to_all_settled_secs");
    assert!(settled > 0.0, "{report:#}");

    // Writes per bind: at least the protocol's 5, and the per-resource figures sum to it.
    let per_bind = num(report, "writes_per_bind");
    assert!(per_bind >= 5.0, "{report:#}");
    let by_resource = report["writes_per_bind_by_resource"]
        .as_object()
        .expect("writes by resource");
    let (mut ok_and_conflict, mut conflicts) = (0.0, 0.0);
    for (resource, results) in by_resource {
        for (result, figure) in results.as_object().expect("by result") {
            let figure = figure.as_f64().expect("a number");
            let count = report["writes"][resource][result]
                .as_f64()
                .expect("a count");
            assert!(
                (figure - count / bound as f64).abs() < 1e-9,
                "{resource} {result}"
            );
            match result.as_str() {
                "ok" => ok_and_conflict += figure,
                "conflict" => {
                    ok_and_conflict += figure;
                    conflicts += figure;
                }
                _ => {}
            }
        }
    }
    assert!((ok_and_conflict - per_bind).abs() < 1e-9, "{report:#}");
    assert!((conflicts - num(report, "conflicts_per_bind")).abs() < 1e-9);

    let latency = &report["latency_ms"];
    let (p50, p90, p99) = (
        num(latency, "p50"),
        num(latency, "p90"),
        num(latency, "p99"),
    );
    assert!(0.0 <= p50 && p50 <= p90 && p90 <= p99 && p99 <= num(latency, "max"));

    let rss = num(report, "operator_peak_rss_mib");
    assert!(rss > 0.0, "{report:#}");
    let per_object = num(report, "rss_per_object_kib");
    let expected = rss * 1024.0 / (servers + claims) as f64;
    assert!((per_object - expected).abs() < 1e-6, "{report:#}");
    // The anonymous part: the heap the fleet fills, under the whole resident set.
    let anon = num(report, "operator_peak_anon_mib");
    assert!(0.0 < anon && anon <= rss, "{report:#}");
    let anon_per_object = num(report, "anon_per_object_kib");
    let expected = anon * 1024.0 / (servers + claims) as f64;
    assert!((anon_per_object - expected).abs() < 1e-6, "{report:#}");

    // Both processes did work, and the per-bind figures are the totals spread over the
    // binds.
    let bound = num(report, "bound");
    for who in ["operator", "apiserver"] {
        let total = num(report, &format!("{who}_cpu_secs"));
        let per_bind = num(report, &format!("{who}_cpu_ms_per_bind"));
        assert!(total > 0.0, "{who}: {report:#}");
        assert!(
            (per_bind - total * 1000.0 / bound).abs() < 1e-6,
            "{report:#}"
        );
    }

    let binds_per_sec = num(report, "binds_per_sec");
    assert!(binds_per_sec > 0.0 && num(report, "time_to_all_bound_secs") > 0.0);
    let ceiling = num(report, "write_ceiling_per_sec");
    let efficiency = num(report, "efficiency");
    assert!(ceiling > 0.0 && efficiency.is_finite() && efficiency > 0.0);
    assert!((efficiency - binds_per_sec / (ceiling / 5.0)).abs() < 1e-9);
}

#[test]
fn batch_over_three_namespaces_with_unique_labels_adds_up() {
    let report = bench_bind(&[
        "--servers",
        "60",
        "--claims",
        "50",
        "--mix",
        "unique-labels",
        "--namespaces",
        "3",
    ]);
    assert_adds_up(&report, 60, 50);
    assert_eq!(report["refused_by_quota"], 0);
    assert_eq!(report["mix"], "unique-labels");
    assert_eq!(report["namespaces"], 3);
    assert!(report["rate"].is_null());
    assert!(report["operator_settle_secs"].is_null());
    assert_eq!(report["writes_before_claims"], 0);
}

/// Three classes, a quota per namespace and class letting 4 in 5 of its claims bind:
/// the run ends once every claim is Bound or refused by its quota, which the report
/// counts apart; the writes per bind include the quotas' charges.
#[test]
fn classes_and_quotas_bind_what_the_quotas_allow_and_count_the_refused() {
    let report = bench_bind(&[
        "--servers",
        "80",
        "--claims",
        "60",
        "--mix",
        "classes-quotas",
        "--namespaces",
        "3",
    ]);
    assert_adds_up(&report, 80, 60);
    assert_eq!(report["mix"], "classes-quotas");
    let refused = num(&report, "refused_by_quota");
    assert!((6.0..=18.0).contains(&refused), "{report:#}");
    assert!(
        report["writes"]["serverquotas/status"]["ok"].as_u64() >= report["bound"].as_u64(),
        "a charge per bind: {report:#}"
    );
}

/// Fewer claims than untainted servers: every claim binds whichever servers the
/// operator prefers for claims that tolerate the taint (with as many claims as servers,
/// preferring untainted ones for them, as the operator does, strands some others).
#[test]
fn paced_claims_on_a_tainted_fleet_add_up() {
    let report = bench_bind(&[
        "--servers",
        "60",
        "--claims",
        "40",
        "--rate",
        "50",
        "--mix",
        "tainted",
        "--watch-coalesce-ms",
        "0",
    ]);
    assert_adds_up(&report, 60, 40);
    assert_eq!(report["mix"], "tainted");
    assert_eq!(report["rate"], 50.0);
    assert_eq!(
        report["watch_coalesce_ms"], 0,
        "events sent at once, for latency"
    );
    // Claims came once the operator had settled; its startup writes are apart.
    assert!(num(&report, "operator_settle_secs") >= 0.0);
    assert!(report["writes_before_claims"].is_u64());
}

/// More claims than servers, then servers cordoned and uncordoned while ten claims
/// wait: each waiting claim's summary is rewritten at most once per status interval
/// (10 s by default), whatever the churn.
#[test]
fn churn_while_claims_wait_costs_at_most_one_status_write_per_interval() {
    let report = bench_bind(&[
        "--servers",
        "20",
        "--claims",
        "30",
        "--stall-secs",
        "2",
        "--churn-secs",
        "12",
        "--churn-rate",
        "20",
    ]);
    assert_eq!(report["bound"], 20, "{report:#}");
    let churn = &report["churn"];
    assert_eq!(churn["pending_at_start"], 10, "{report:#}");
    assert_eq!(churn["pending_at_end"], 10, "{report:#}");
    assert!(num(churn, "server_changes") >= 20.0, "{report:#}");
    let (secs, writes) = (num(churn, "secs"), num(churn, "claim_status_writes"));
    let most_per_claim = (secs / 10.0).ceil() + 1.0;
    assert!(
        writes <= 10.0 * most_per_claim,
        "{writes} writes for 10 claims in {secs:.1} s: {report:#}"
    );
    let per_minute = num(churn, "status_writes_per_pending_claim_per_min");
    assert!((per_minute - writes / 10.0 / (secs / 60.0)).abs() < 1e-9);
}

/// A flood and four small tenants on six servers, each claim deleted 300 ms after it
/// binds: every claim binds in the end (deleting claims frees their servers), and the
/// report has a line per namespace and a fairness index in [0, 1]. How fair is the
/// figure's business, not this test's.
#[test]
fn a_flood_and_small_tenants_on_scarce_servers_report_each_namespace_and_a_fairness() {
    let report = bench_bind(&[
        "--servers",
        "6",
        "--claims",
        "40",
        "--namespaces",
        "5",
        "--tenants",
        "flood",
        "--rate",
        "10",
        "--hold-ms",
        "300",
        "--stall-secs",
        "10",
    ]);
    assert_eq!(report["bound"], 40, "{report:#}");
    assert_eq!(report["tenants"], "flood");
    assert_eq!(report["hold_ms"], 300);
    let tenants = &report["by_tenant"];
    let namespaces = tenants["namespaces"].as_array().expect("per namespace");
    let created: Vec<u64> = namespaces
        .iter()
        .map(|n| n["created"].as_u64().expect("a count"))
        .collect();
    // Four in five claims are the flood's; the other eight go round-robin.
    assert_eq!(created, [32, 2, 2, 2, 2], "{report:#}");
    assert_eq!(namespaces[0]["flood"], true);
    for n in namespaces {
        assert_eq!(n["bound"], n["created"], "{report:#}");
        let (p50, p99) = (num(n, "wait_p50_ms"), num(n, "wait_p99_ms"));
        assert!(0.0 <= p50 && p50 <= p99, "{report:#}");
        assert!(
            num(n, "scarce_binds") <= num(n, "scarce_demand"),
            "{report:#}"
        );
    }
    let jain = num(tenants, "jain_index");
    assert!((0.0..=1.0 + 1e-9).contains(&jain), "{report:#}");
    assert!(num(tenants, "small_wait_p99_ms") >= num(tenants, "small_wait_p50_ms"));
    assert!(num(tenants, "scarce_phase_secs") > 0.0, "{report:#}");
}
