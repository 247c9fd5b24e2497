//! The operator under test, as a child process: this very binary's `run`, so that its
//! memory is its own and it reaches the API server over HTTP as it would in a cluster.
//! A guard kills it whatever way the bench ends, and removes the scratch directory
//! (kubeconfig and the operator's log) with it.

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::super::error::BenchError as Error;
use super::scrape::{self, WriteSample};

/// How long the operator may take to list everything and report ready: 100k servers
/// and 100k claims take a while on two cores.
const READY_TIMEOUT: Duration = Duration::from_secs(600);
/// How much of the operator's log an error shows.
const LOG_TAIL_LINES: usize = 20;
/// The operator has settled when its write counters have not moved for this long.
const SETTLED_AFTER: Duration = Duration::from_secs(1);
/// How long settling may take before the bench goes on regardless.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(300);

/// A scratch directory in the system's temp dir, removed on drop.
pub struct WorkDir(PathBuf);

impl WorkDir {
    pub fn create() -> Result<Self, Error> {
        let dir = std::env::temp_dir().join(format!("server-binder-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::Failed(format!("creating {}: {e}", dir.display())))?;
        Ok(Self(dir))
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.0.join("kubeconfig")
    }

    fn log(&self) -> PathBuf {
        self.0.join("operator.log")
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Names a command to run the operator under, split on whitespace: a profiler that
/// must start the process, e.g. `heaptrack -o /tmp/operator` (docs/performance.md,
/// "Profiling"). The CPU and RSS figures are then the wrapper's, not the operator's.
const WRAPPER_ENV: &str = "SERVER_BINDER_BENCH_OPERATOR_WRAPPER";

/// `exe`, or the `wrapper` command (as [`WRAPPER_ENV`] gives it) with `exe` after its
/// own arguments, in a process group of its own: a wrapper such as heaptrack's script
/// runs the operator as its child and does not pass a signal on, so the bench stops
/// the operator itself and then what is left of the group ([`stop_group_within`]), or
/// the operator would outlive the bench.
fn wrapped(exe: PathBuf, wrapper: &str) -> Command {
    let mut words = wrapper.split_whitespace();
    match words.next() {
        None => Command::new(exe),
        Some(program) => {
            let mut command = Command::new(program);
            command.args(words).arg(exe);
            #[cfg(unix)]
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
            command
        }
    }
}

/// The running operator; killed when dropped (stopped, under a profiler).
pub struct Operator {
    child: Child,
    /// Run under [`WRAPPER_ENV`]'s command.
    profiled: bool,
    log: PathBuf,
    pub metrics_addr: SocketAddr,
    /// When the process was started.
    pub started: Instant,
}

impl Operator {
    /// Starts `server-binder run --concurrency C` on the kubeconfig in `dir`, logging
    /// JSON lines into `dir`.
    pub fn spawn(dir: &WorkDir, concurrency: u16) -> Result<Self, Error> {
        let metrics_addr = free_port()?;
        let exe = std::env::current_exe()
            .map_err(|e| Error::Failed(format!("finding this binary: {e}")))?;
        let log = dir.log();
        let out = File::create(&log)
            .map_err(|e| Error::Failed(format!("creating {}: {e}", log.display())))?;
        let err = out
            .try_clone()
            .map_err(|e| Error::Failed(format!("opening {}: {e}", log.display())))?;
        let wrapper = std::env::var(WRAPPER_ENV).unwrap_or_default();
        let mut command = wrapped(exe, &wrapper);
        let child = command
            .args(["run", "--log-format", "json", "--concurrency"])
            .arg(concurrency.to_string())
            .arg("--metrics-addr")
            .arg(metrics_addr.to_string())
            .env("KUBECONFIG", dir.kubeconfig())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| Error::Failed(format!("starting the operator: {e}")))?;
        Ok(Self {
            child,
            profiled: !wrapper.trim().is_empty(),
            log,
            metrics_addr,
            started: Instant::now(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An error if the operator has exited, with the end of its log.
    pub fn check_alive(&mut self) -> Result<(), Error> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(self.died(&format!("exited ({status})"))),
            Err(e) => Err(self.died(&format!("cannot be waited on ({e})"))),
        }
    }

    fn died(&self, how: &str) -> Error {
        Error::Failed(format!(
            "the operator {how}; the end of its log:\n{}",
            self.log_tail()
        ))
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
    }

    /// Polls `/readyz` every 10 ms until it answers 200 (the operator's caches are
    /// synced) and returns when it first did.
    pub async fn wait_ready(&mut self) -> Result<Instant, Error> {
        while self.started.elapsed() < READY_TIMEOUT {
            self.check_alive()?;
            if let Ok((200, _)) = scrape::get(self.metrics_addr, "/readyz").await {
                return Ok(Instant::now());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Err(self.died(&format!("was not ready within {READY_TIMEOUT:?}")))
    }

    /// Waits until the operator's writes stop (it writes a first status on every fresh
    /// server after it starts) and returns its write counters then, and when they last
    /// moved, so that `--rate` claims meet an idle operator and their writes can be told
    /// from the startup's.
    pub async fn settle(&mut self) -> Result<(String, Instant), Error> {
        let start = Instant::now();
        let total = |w: &[WriteSample]| w.iter().map(|s| s.value).sum::<f64>();
        let mut text = self.metrics().await?;
        let mut last = scrape::api_writes(&text);
        let mut unchanged_since = Instant::now();
        while unchanged_since.elapsed() < SETTLED_AFTER {
            if start.elapsed() > SETTLE_TIMEOUT {
                eprintln!(
                    "bench bind: the operator still writes after {SETTLE_TIMEOUT:?}; going on"
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            text = self.metrics().await?;
            let now = scrape::api_writes(&text);
            if total(&now) != total(&last) {
                unchanged_since = Instant::now();
            }
            last = now;
        }
        eprintln!(
            "bench bind: operator settled: {} writes in {:.1}s before the first claim",
            total(&last),
            (unchanged_since - start).as_secs_f64()
        );
        Ok((text, unchanged_since))
    }

    /// The operator's `/metrics` text.
    pub async fn metrics(&mut self) -> Result<String, Error> {
        self.check_alive()?;
        match scrape::get(self.metrics_addr, "/metrics").await {
            Ok((200, body)) => Ok(body),
            Ok((code, body)) => Err(Error::Failed(format!("/metrics answered {code}: {body}"))),
            Err(e) => Err(Error::Failed(format!("scraping /metrics: {e}"))),
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        // Under a profiler, SIGTERM and a wait: callgrind, for one, writes its profile as
        // the process exits, and a killed process leaves an empty file.
        if self.profiled {
            stop_group_within(&mut self.child, PROFILER_EXIT);
        }
        // SIGKILL: the bench has what it wanted, and a clean shutdown only adds time.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long a profiled operator may take to exit and write its profile.
const PROFILER_EXIT: Duration = Duration::from_secs(120);

/// Stops a wrapped operator: SIGTERM to the operator (it stops as on a rollout), waits
/// up to `limit` for the wrapper `child` to exit, then SIGKILLs what is left of the
/// process group `child` leads. The operator is the group's process running this
/// binary (under heaptrack or `perf record`, a child of the wrapper), or else the
/// wrapper itself (valgrind runs it in its own process). Only the operator is
/// signalled: the wrapper's other processes (heaptrack's interpreter and compressor)
/// must finish writing the profile once it has exited.
fn stop_group_within(child: &mut Child, limit: Duration) {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{Pid, Signal, kill_process, kill_process_group};
        let Some(group) = i32::try_from(child.id()).ok().and_then(Pid::from_raw) else {
            return;
        };
        let exe = std::env::current_exe().ok();
        let mut operators = exe
            .map(|e| group_members_running(group, &e))
            .unwrap_or_default();
        if operators.is_empty() {
            operators.push(group);
        }
        for pid in operators {
            let _ = kill_process(pid, Signal::TERM);
        }
        let deadline = Instant::now() + limit;
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        // Whatever of the group is still there (gone already: nothing to do).
        let _ = kill_process_group(group, Signal::KILL);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (child, limit);
}

/// The processes of process group `group` whose executable is `exe` (read from /proc).
#[cfg(target_os = "linux")]
fn group_members_running(
    group: rustix::process::Pid,
    exe: &std::path::Path,
) -> Vec<rustix::process::Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let pids = entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok());
    pids.filter(|&pid| {
        let proc = PathBuf::from(format!("/proc/{pid}"));
        // State, parent, process group.
        let pgrp = stat_after_command(&proc)
            .and_then(|rest| rest.split_whitespace().nth(2)?.parse::<i32>().ok());
        pgrp == Some(group.as_raw_nonzero().get())
            && std::fs::read_link(proc.join("exe")).is_ok_and(|e| e == exe)
    })
    .filter_map(rustix::process::Pid::from_raw)
    .collect()
}

/// A process's `/proc/<pid>/stat` after the command's closing parenthesis (the command
/// may hold spaces and parentheses): its state first, then its parent and its group.
#[cfg(target_os = "linux")]
fn stat_after_command(proc: &std::path::Path) -> Option<String> {
    let stat = std::fs::read_to_string(proc.join("stat")).ok()?;
    stat.rsplit_once(')').map(|(_, rest)| rest.to_string())
}

/// A loopback port free at the moment. Another process could take it before the
/// operator binds it; the operator then exits saying so and the bench reports it.
fn free_port() -> Result<SocketAddr, Error> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| Error::Failed(format!("finding a free port: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(command: &Command) -> Vec<String> {
        let program = std::iter::once(command.get_program());
        let all = program.chain(command.get_args());
        all.map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn the_operator_runs_alone_or_after_the_wrapper_and_its_arguments() {
        let exe = PathBuf::from("/bin/server-binder");
        assert_eq!(argv(&wrapped(exe.clone(), "")), ["/bin/server-binder"]);
        assert_eq!(argv(&wrapped(exe.clone(), "  ")), ["/bin/server-binder"]);
        assert_eq!(
            argv(&wrapped(exe, "heaptrack  -o /tmp/operator")),
            ["heaptrack", "-o", "/tmp/operator", "/bin/server-binder"]
        );
    }

    /// A wrapper that runs the operator as its child and ignores SIGTERM, as a shell
    /// script may: stopping the group ends the child too.
    #[cfg(target_os = "linux")]
    #[test]
    fn stopping_a_profiled_run_ends_the_wrappers_children() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("child.pid");
        let script = format!(
            "trap '' TERM; sleep 300 & echo $! > {}; wait",
            pid_file.display()
        );
        let mut command = wrapped(PathBuf::from(script), "sh -c");
        let mut wrapper = command.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let child_pid = loop {
            let read = std::fs::read_to_string(&pid_file).unwrap_or_default();
            if let Ok(pid) = read.trim().parse::<i32>() {
                break pid;
            }
            assert!(
                Instant::now() < deadline,
                "the wrapper never started its child"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        stop_group_within(&mut wrapper, Duration::from_secs(1));
        let _ = wrapper.wait();
        let proc = PathBuf::from(format!("/proc/{child_pid}"));
        let deadline = Instant::now() + Duration::from_secs(10);
        // A killed child is reaped by init; until then it may show as a zombie.
        while proc.exists() && !is_zombie(&proc) {
            assert!(
                Instant::now() < deadline,
                "the wrapper's child outlived the bench"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[cfg(target_os = "linux")]
    fn is_zombie(proc: &std::path::Path) -> bool {
        stat_after_command(proc).is_some_and(|rest| rest.trim_start().starts_with('Z'))
    }
}
