//! Bad input at the command line gets a non-zero exit and a message that says what to
//! do, from the real binary: no CRDs in the cluster, no API server, a taken port, a
//! flag out of range.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use server_binder::apiserver::{ApiServer, Config};

use crate::controllers::support::DEADLINE;

/// Runs the binary to its end (failing the test if it runs past the deadline).
fn server_binder(args: &[&str], kubeconfig: Option<&std::path::Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_server-binder"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(path) = kubeconfig {
        cmd.env("KUBECONFIG", path);
    }
    let mut child = cmd.spawn().expect("the binary starts");
    let deadline = Instant::now() + DEADLINE;
    while child.try_wait().expect("waitable").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("server-binder {args:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("its output")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_fails_saying(out: &Output, needle: &str) {
    assert!(!out.status.success(), "expected a failure: {out:?}");
    let err = stderr(out);
    assert!(err.contains(needle), "stderr lacks {needle:?}:\n{err}");
}

// The blocking child needs the in-process API server to keep serving: worker threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_without_the_crds_exits_with_an_install_hint() {
    let apiserver = ApiServer::start(Config::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    apiserver.write_kubeconfig(&kubeconfig).unwrap();
    let out = tokio::task::spawn_blocking(move || {
        server_binder(&["run", "--metrics-addr", "127.0.0.1:0"], Some(&kubeconfig))
    })
    .await
    .unwrap();
    assert_fails_saying(&out, "kubectl apply -f manifests/crds/");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_without_an_api_server_says_it_cannot_reach_it() {
    // A kubeconfig for an API server that has stopped since.
    let apiserver = ApiServer::start(Config::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    apiserver.write_kubeconfig(&kubeconfig).unwrap();
    apiserver.shutdown().await;
    let out = tokio::task::spawn_blocking(move || {
        server_binder(&["run", "--metrics-addr", "127.0.0.1:0"], Some(&kubeconfig))
    })
    .await
    .unwrap();
    assert_fails_saying(&out, "cannot reach the API server");
}

/// A default release gate that a cleaner could not own (named after a condition the
/// controllers write, or without a domain) is refused before anything starts.
#[test]
fn run_refuses_a_release_gate_named_like_a_controller_condition() {
    for bad in ["Cleaning", "disk-wiped", "metal.binder.dev/wiped"] {
        let out = server_binder(&["run", "--release-gates", bad], None);
        assert_fails_saying(&out, &format!("release gate {bad:?}"));
        assert_fails_saying(&out, "example.com/disk-wiped");
    }
}

/// `server-binder dev` on these addresses, to its end.
fn dev(listen: &str, metrics: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let kubeconfig = kubeconfig.to_str().unwrap();
    let args = ["dev", "--listen", listen, "--metrics-addr", metrics];
    let mut argv = args.to_vec();
    argv.extend(["--kubeconfig-out", kubeconfig]);
    server_binder(&argv, None)
}

#[test]
fn dev_on_a_taken_port_says_so() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = dev(&addr, "127.0.0.1:0");
    assert_fails_saying(
        &out,
        &format!("cannot start the embedded API server on {addr}"),
    );
}

#[test]
fn dev_with_a_taken_metrics_port_says_so() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = dev("127.0.0.1:0", &addr);
    assert_fails_saying(&out, &format!("cannot serve metrics on {addr}"));
}

#[test]
fn flags_out_of_range_are_refused_before_anything_starts() {
    let out = server_binder(&["run", "--concurrency", "0"], None);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert_fails_saying(&out, "--concurrency");
    let out = server_binder(&["run", "--log-format", "yaml"], None);
    assert_eq!(out.status.code(), Some(2));
    assert_fails_saying(&out, "possible values: text, json");
    let out = server_binder(&["run", "--resync-interval", "0"], None);
    assert_eq!(out.status.code(), Some(2));
    assert_fails_saying(&out, "--resync-interval");
}

/// docs/operations.md's table of `run`'s flags names every flag `run --help` shows, and
/// no other.
#[test]
fn the_operations_guide_lists_every_flag_of_run() {
    let help = server_binder(&["run", "--help"], None);
    let help = String::from_utf8_lossy(&help.stdout);
    let shown: BTreeSet<String> = help
        .lines()
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("--")))
        .map(|w| w.trim_end_matches(',').to_string())
        .filter(|f| f != "--help")
        .collect();
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md"))
        .expect("docs/operations.md");
    let listed: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split([' ', '`']).next())
        .filter(|f| f.starts_with("--"))
        .map(str::to_string)
        .collect();
    assert_eq!(
        listed, shown,
        "docs/operations.md's flag table against `run --help`"
    );
}

/// A child process killed when the test ends, pass or fail.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(args: &[&str], kubeconfig: Option<&std::path::Path>) -> Killed {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_server-binder"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(path) = kubeconfig {
        cmd.env("KUBECONFIG", path);
    }
    Killed(cmd.spawn().expect("the binary starts"))
}

/// The binary turns transparent huge pages off for itself (src/main.rs,
/// `small_pages_only`), as Linux shows in `/proc/<pid>/status`.
fn assert_small_pages_only(process: &Killed) {
    if !cfg!(target_os = "linux") {
        return;
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", process.0.id())).unwrap();
    let Some(line) = status.lines().find(|l| l.starts_with("THP_enabled:")) else {
        eprintln!("SKIPPED: this kernel's /proc/<pid>/status has no THP_enabled line");
        return;
    };
    assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
}

/// `/readyz` reads the same from `dev` and from `run` (without leader election), and
/// both export the build and the process metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_and_run_answer_readyz_alike_and_export_build_and_process_metrics() {
    use crate::controllers::support::{eventually, free_port, try_http_get};
    let apiserver = ApiServer::start(Config::default()).await.unwrap();
    for crd in server_binder::api::crds() {
        apiserver.install_crd(&crd).await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    apiserver.write_kubeconfig(&kubeconfig).unwrap();
    let (run_metrics, dev_metrics) = (free_port(), free_port());
    let run_addr = format!("127.0.0.1:{run_metrics}");
    let run = spawn(&["run", "--metrics-addr", &run_addr], Some(&kubeconfig));
    let dev_kubeconfig = dir.path().join("dev.kubeconfig");
    let (listen, dev_addr) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{dev_metrics}"),
    );
    let dev_args = ["dev", "--listen", &listen, "--metrics-addr", &dev_addr];
    let mut argv = dev_args.to_vec();
    argv.extend(["--kubeconfig-out", dev_kubeconfig.to_str().unwrap()]);
    let dev = spawn(&argv, None);
    let mut answers = Vec::new();
    for (addr, process) in [(&run_addr, &run), (&dev_addr, &dev)] {
        let addr: std::net::SocketAddr = addr.parse().unwrap();
        eventually(&format!("{addr}/readyz answers 200"), DEADLINE, || async {
            try_http_get(addr, "/readyz")
                .await
                .is_some_and(|r| r.0 == 200)
        })
        .await;
        answers.push(try_http_get(addr, "/readyz").await.unwrap());
        assert_small_pages_only(process);
        let (_, metrics) = try_http_get(addr, "/metrics").await.unwrap();
        let version = env!("CARGO_PKG_VERSION");
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("server_binder_build_info{")
                    && l.contains(&format!("version=\"{version}\""))
                    && l.ends_with(" 1")),
            "{metrics}"
        );
        for family in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
        ] {
            assert!(
                metrics.lines().any(|l| l.starts_with(family)),
                "{family}: {metrics}"
            );
        }
    }
    assert_eq!(answers[0], answers[1], "run and dev");
    assert_eq!(answers[0], (200, "ok\n".to_string()));
}
