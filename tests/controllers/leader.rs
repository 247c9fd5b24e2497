//! Leader election with the real binary: `server-binder run --leader-elect` processes
//! against the embedded API server, their /metrics and /readyz over HTTP, the Lease as
//! stored. One leads; a standby takes over after a kill -9 (when the term runs out) and
//! after a SIGTERM (at once: the Lease is released); a leader that cannot renew stops
//! writing before its term ends.
//!
//! The tests here run one at a time (each starts two or three processes; the machine
//! may have two cores, and a starved process would miss its renewals).

use std::collections::BTreeSet;
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use server_binder::api::ClaimPhase;
use server_binder::apiserver::RequestMatcher;

use super::support::*;

const NS: &str = "server-binder-system";
const LEASE: &str = "server-binder";

/// The leader-election tests time lease terms to the second: each runs alone (`write`).
/// The chaos tests tolerate anything a busy machine does to a lease, and run beside
/// each other (`read`), never beside a leader test.
pub(crate) static SERIAL: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// One `server-binder run --leader-elect` process; killed when dropped, its log
/// printed if the test failed.
struct Replica {
    name: &'static str,
    child: Child,
    metrics: SocketAddr,
    log: PathBuf,
    identity: String,
    exited: Option<ExitStatus>,
}

fn hostname() -> String {
    hostname::get().unwrap().into_string().unwrap()
}

impl Replica {
    fn spawn(
        name: &'static str,
        kubeconfig: &Path,
        dir: &Path,
        lease_ns: &str,
        lease_secs: u64,
        pod_name: Option<&str>,
    ) -> Self {
        let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let log = dir.join(format!("{name}.log"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_server-binder"));
        cmd.args(["run", "--leader-elect", "--lease-namespace", lease_ns])
            .args(["--lease-name", LEASE, "--concurrency", "4"])
            .args(["--lease-duration", &lease_secs.to_string()])
            .args(["--metrics-addr", &metrics.to_string()])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
            .env_remove("POD_NAME")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap());
        if let Some(pod) = pod_name {
            cmd.env("POD_NAME", pod);
        }
        let child = cmd.spawn().expect("server-binder run starts");
        let identity = match pod_name {
            Some(pod) => pod.to_owned(),
            None => format!("{}-{}", hostname(), child.id()),
        };
        Self {
            name,
            child,
            metrics,
            log,
            identity,
            exited: None,
        }
    }

    /// `server_binder_leader` from /metrics, if the endpoint answers.
    async fn leader(&self) -> Option<i64> {
        let (_, body) = try_http_get(self.metrics, "/metrics").await?;
        body.lines()
            .find_map(|l| l.strip_prefix("server_binder_leader "))
            .and_then(|v| v.trim().parse().ok())
    }

    async fn readyz(&self) -> Option<(u16, String)> {
        try_http_get(self.metrics, "/readyz").await
    }

    fn sigterm(&self) {
        send_sigterm(&self.child);
    }

    /// kill -9: no release, no graceful anything.
    fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.exited = Some(self.child.wait().unwrap());
    }

    async fn wait_exit(&mut self) -> ExitStatus {
        let what = format!("{} to exit", self.name);
        let child = &mut self.child;
        let status = eventually(&what, DEADLINE, || {
            let exited = child.try_wait().expect("the child can be waited on");
            async move { exited }
        })
        .await;
        self.exited = Some(status);
        status
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            eprintln!(
                "----- {} ({}) log -----\n{log}----- end of {} -----",
                self.name, self.identity, self.name
            );
        }
    }
}

struct Bed {
    env: Env,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Bed {
    /// The API server with the CRDs and the controller's namespace, and a kubeconfig.
    async fn new() -> Self {
        let env = Env::new().await;
        env.create_namespace(NS).await;
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        env.apiserver.write_kubeconfig(&kubeconfig).unwrap();
        Self {
            env,
            dir,
            kubeconfig,
        }
    }

    fn spawn(&self, name: &'static str, lease_secs: u64, pod_name: Option<&str>) -> Replica {
        self.spawn_in(NS, name, lease_secs, pod_name)
    }

    fn spawn_in(
        &self,
        lease_ns: &str,
        name: &'static str,
        lease_secs: u64,
        pod_name: Option<&str>,
    ) -> Replica {
        Replica::spawn(
            name,
            &self.kubeconfig,
            self.dir.path(),
            lease_ns,
            lease_secs,
            pod_name,
        )
    }

    async fn lease(&self) -> Option<Lease> {
        Api::<Lease>::namespaced(self.env.client.clone(), NS)
            .get_opt(LEASE)
            .await
            .expect("read the Lease")
    }

    async fn holder(&self) -> Option<String> {
        self.lease()
            .await?
            .spec?
            .holder_identity
            .filter(|h| !h.is_empty())
    }

    /// The Lease's renewTime and the end of its term.
    async fn term(&self) -> (SystemTime, SystemTime) {
        let spec = self.lease().await.unwrap().spec.unwrap();
        let renewed: SystemTime = spec.renew_time.unwrap().0.into();
        let secs = spec.lease_duration_seconds.unwrap() as u64;
        (renewed, renewed + Duration::from_secs(secs))
    }

    async fn bound(&self) -> usize {
        let (_, claims) = self.env.all().await;
        claims
            .iter()
            .filter(|c| phase(c) == Some(ClaimPhase::Bound))
            .count()
    }

    /// Waits until `leader` leads (its gauge 1, the Lease names it) and every one of
    /// `standbys` is a ready standby (gauge 0, /readyz 200).
    async fn wait_leads(&self, what: &str, leader: &Replica, standbys: &[&Replica]) {
        eventually(what, DEADLINE, || async {
            if self.holder().await.as_deref() != Some(&leader.identity)
                || leader.leader().await != Some(1)
                || leader.readyz().await.map(|r| r.0) != Some(200)
            {
                return false;
            }
            for s in standbys {
                if s.leader().await != Some(0) || s.readyz().await.map(|r| r.0) != Some(200) {
                    return false;
                }
            }
            true
        })
        .await;
    }
}

/// Waits until exactly one of `replicas` leads and the others are ready standbys;
/// returns the leader's index.
async fn wait_one_leads(bed: &Bed, replicas: &[&Replica]) -> usize {
    let leader = std::cell::Cell::new(None);
    eventually(
        "exactly one replica leads, named by the Lease",
        DEADLINE,
        || async {
            let holder = bed.holder().await;
            let mut gauges = Vec::new();
            for r in replicas {
                let ready = r.readyz().await.map(|r| r.0) == Some(200);
                gauges.push(if ready { r.leader().await } else { None });
            }
            let leaders: Vec<usize> = (0..replicas.len())
                .filter(|&i| gauges[i] == Some(1))
                .collect();
            let standbys = gauges.iter().filter(|g| **g == Some(0)).count();
            match leaders[..] {
                [i] if standbys == replicas.len() - 1
                    && holder.as_deref() == Some(&replicas[i].identity) =>
                {
                    leader.set(Some(i));
                    true
                }
                _ => false,
            }
        },
    )
    .await;
    leader.get().unwrap()
}

#[tokio::test]
async fn of_two_replicas_exactly_one_leads_and_both_are_ready() {
    let _serial = SERIAL.write().await;
    let bed = Bed::new().await;
    let started = Instant::now();
    let a = bed.spawn("a", 4, None);
    let b = bed.spawn("b", 4, None);
    assert_ne!(a.identity, b.identity);
    let i = wait_one_leads(&bed, &[&a, &b]).await;
    eprintln!("elected in {:?}", started.elapsed());
    let (leader, standby) = if i == 0 { (&a, &b) } else { (&b, &a) };
    assert_eq!(leader.readyz().await.unwrap().1, "ok: leading\n");
    assert_eq!(standby.readyz().await.unwrap().1, "ok: standby\n");

    // And it stays so for three terms: the renewals land and nobody flaps.
    let (first_renewal, _) = bed.term().await;
    let until = Instant::now() + Duration::from_secs(12);
    while Instant::now() < until {
        assert_eq!(leader.leader().await, Some(1), "{} leads", leader.name);
        assert_eq!(
            standby.leader().await,
            Some(0),
            "{} stands by",
            standby.name
        );
        assert_eq!(
            bed.holder().await.as_deref(),
            Some(leader.identity.as_str())
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (last_renewal, _) = bed.term().await;
    assert!(
        last_renewal.duration_since(first_renewal).unwrap() >= Duration::from_secs(8),
        "renewed every two thirds of a term: {first_renewal:?} .. {last_renewal:?}"
    );
}

#[tokio::test]
async fn the_standby_takes_over_when_the_leader_is_killed_mid_binding() {
    let _serial = SERIAL.write().await;
    const LEASE_SECS: u64 = 4;
    let bed = Bed::new().await;
    for i in 0..50 {
        bed.env.create_server(&format!("s{i:02}"), &[]).await;
    }
    let a = bed.spawn("a", LEASE_SECS, None);
    let b = bed.spawn("b", LEASE_SECS, None);
    let mut replicas = [a, b];
    let i = wait_one_leads(&bed, &[&replicas[0], &replicas[1]]).await;

    // Slow every write a little, so that the kill lands mid-way.
    bed.env
        .apiserver
        .faults()
        .delay(Env::write_matcher(), 100_000, Duration::from_millis(20));
    for i in 0..50 {
        bed.env.create_claim(&format!("c{i:02}")).await;
    }
    eventually("some claims Bound", DEADLINE, || async {
        bed.bound().await >= 5
    })
    .await;
    let bound_at_kill = bed.bound().await;
    replicas[i].kill9();
    let killed = Instant::now();
    assert!(
        bound_at_kill < 50,
        "killed mid-binding: {bound_at_kill} Bound"
    );
    let (_, dead_term_ends) = bed.term().await;

    let (dead, standby) = (&replicas[i], &replicas[1 - i]);
    bed.wait_leads("the standby leads", standby, &[]).await;
    let takeover = killed.elapsed();
    let spec = bed.lease().await.unwrap().spec.unwrap();
    let acquired: SystemTime = spec.acquire_time.unwrap().0.into();
    assert!(
        acquired >= dead_term_ends,
        "the standby waited for the dead leader's term to end"
    );
    assert_ne!(dead.identity, standby.identity);

    eventually(
        "all 50 claims Bound, never two on one server",
        DEADLINE,
        || async {
            let (servers, claims) = bed.env.all().await;
            assert_invariants(&servers, &claims);
            claims
                .iter()
                .filter(|c| phase(c) == Some(ClaimPhase::Bound))
                .count()
                == 50
        },
    )
    .await;
    let (servers, claims) = bed.env.all().await;
    assert_invariants(&servers, &claims);
    eprintln!(
        "kill -9 with {bound_at_kill}/50 Bound; takeover after {takeover:?} (term {LEASE_SECS} s); all Bound {:?} after the kill",
        killed.elapsed()
    );
    assert!(
        takeover < Duration::from_secs(2 * LEASE_SECS),
        "took over within the term and a read: {takeover:?}"
    );
}

#[tokio::test]
async fn on_sigterm_the_leader_releases_the_lease_and_exits_0_and_the_standby_takes_over_at_once() {
    let _serial = SERIAL.write().await;
    // A term long enough that a handover well under it shows nobody waited for it.
    const LEASE_SECS: u64 = 30;
    let bed = Bed::new().await;
    bed.env.create_server("s1", &[]).await;
    bed.env.create_server("s2", &[]).await;
    let mut a = bed.spawn("a", LEASE_SECS, None);
    bed.wait_leads("a leads", &a, &[]).await;
    let b = bed.spawn("b", LEASE_SECS, None);
    bed.wait_leads("a leads, b stands by", &a, &[&b]).await;
    bed.env.create_claim("before").await;
    eventually("a binds a claim", DEADLINE, || async {
        bed.bound().await == 1
    })
    .await;

    let (_, old_term_ends) = bed.term().await;
    a.sigterm();
    let signalled = Instant::now();
    let status = a.wait_exit().await;
    let exited = signalled.elapsed();
    assert_eq!(status.code(), Some(0), "a exits 0 on SIGTERM: {status:?}");
    // Released before exiting: the Lease no longer names a.
    let holder = bed.holder().await;
    assert_ne!(
        holder.as_deref(),
        Some(a.identity.as_str()),
        "a released the Lease"
    );
    assert!(
        tokio::net::TcpStream::connect(a.metrics).await.is_err(),
        "a's HTTP endpoint stopped"
    );

    bed.wait_leads("b leads", &b, &[]).await;
    let handover = signalled.elapsed();
    assert!(
        SystemTime::now() < old_term_ends,
        "b leads before a's term would have ended"
    );
    assert!(
        handover < Duration::from_secs(LEASE_SECS / 3),
        "handover {handover:?}, well under the {LEASE_SECS} s term"
    );
    bed.env.create_claim("after").await;
    eventually("b binds a claim", DEADLINE, || async {
        bed.bound().await == 2
    })
    .await;
    let (servers, claims) = bed.env.all().await;
    assert_invariants(&servers, &claims);
    eprintln!("SIGTERM: a exited 0 after {exited:?}; b led {handover:?} after the signal");

    // Two processes on one machine: two identities, host and pid.
    let host = hostname();
    assert_eq!(a.identity, format!("{host}-{}", a.child.id()));
    assert_eq!(b.identity, format!("{host}-{}", b.child.id()));
    assert_ne!(a.identity, b.identity);
    // What the Lease requests need from RBAC: tests/controllers/rbac.rs.
}

#[tokio::test]
async fn the_identity_is_the_pod_name_when_set_else_host_and_pid() {
    let _serial = SERIAL.write().await;
    const POD: &str = "server-binder-6d5f8c9b7-x2x9q";
    let bed = Bed::new().await;
    let mut a = bed.spawn("a", 4, None);
    bed.wait_leads("a leads", &a, &[]).await;
    let b = bed.spawn("b", 4, None);
    let c = bed.spawn("c", 4, Some(POD));
    bed.wait_leads("a leads, b and c stand by", &a, &[&b, &c])
        .await;
    a.sigterm();
    assert!(a.wait_exit().await.success());
    let mut rest = [b, c];
    let i = wait_one_leads(&bed, &[&rest[0], &rest[1]]).await;
    rest[i].sigterm();
    assert!(rest[i].wait_exit().await.success());
    let last = &rest[1 - i];
    bed.wait_leads("the last one leads", last, &[]).await;

    // Each held the Lease under its own name.
    let host = hostname();
    let (b, c) = (&rest[0], &rest[1]);
    assert_eq!(a.identity, format!("{host}-{}", a.child.id()));
    assert_eq!(b.identity, format!("{host}-{}", b.child.id()));
    assert_eq!(c.identity, POD);
    let names = BTreeSet::from([&a.identity, &b.identity, &c.identity]);
    assert_eq!(names.len(), 3, "{names:?}");
}

#[tokio::test]
async fn a_leader_that_cannot_renew_stops_writing_before_its_term_ends() {
    let _serial = SERIAL.write().await;
    const LEASE_SECS: u64 = 6;
    let bed = Bed::new().await;
    bed.env.create_server("s1", &[]).await;
    let a = bed.spawn("a", LEASE_SECS, None);
    let b = bed.spawn("b", LEASE_SECS, None);
    let replicas = [a, b];
    let i = wait_one_leads(&bed, &[&replicas[0], &replicas[1]]).await;
    let (leader, standby) = (&replicas[i], &replicas[1 - i]);

    // Every Lease write fails from now on: nobody can renew or take the Lease.
    let lease_writes = RequestMatcher::any().verb("patch").resource("leases");
    bed.env
        .apiserver
        .faults()
        .fail(lease_writes, 1_000_000, 500);
    let failing = Instant::now();
    eventually("the leader stops leading", DEADLINE, || async {
        leader.leader().await == Some(0)
    })
    .await;
    let stopped = SystemTime::now();
    let (renewed, term_ends) = bed.term().await;
    assert!(
        stopped < term_ends,
        "stopped leading {:?} before the term ended ({:?} after the last renewal)",
        term_ends.duration_since(stopped).unwrap_or_default(),
        stopped.duration_since(renewed).unwrap_or_default()
    );
    eprintln!(
        "renewals failing: the leader stopped {:?} after the failures began, {:?} before its term would end",
        failing.elapsed(),
        term_ends.duration_since(stopped).unwrap()
    );
    assert_eq!(
        standby.leader().await,
        Some(0),
        "the standby cannot take it"
    );

    // No controller writes while nobody leads: a new claim stays unbound.
    let writes_before = bed.env.writes().0;
    bed.env.create_claim("c").await;
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        assert_eq!(bed.bound().await, 0);
        assert!(leader.leader().await == Some(0) && standby.leader().await == Some(0));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(bed.env.writes().0, writes_before, "no controller writes");

    // The API server recovers: someone leads again and binds the claim.
    bed.env.apiserver.faults().clear();
    wait_one_leads(&bed, &[&replicas[0], &replicas[1]]).await;
    eventually("the claim Bound", DEADLINE, || async {
        bed.bound().await == 1
    })
    .await;
}

#[tokio::test]
async fn a_replica_that_cannot_reach_its_lease_is_alive_but_not_ready() {
    let _serial = SERIAL.write().await;
    let bed = Bed::new().await;
    // The Lease's namespace does not exist: the Lease can be neither read nor created.
    const ELSEWHERE: &str = "not-there-yet";
    bed.env.create_server("s1", &[]).await;
    let a = bed.spawn_in(ELSEWHERE, "a", 4, None);
    eventually("a alive, not ready, not leading", DEADLINE, || async {
        try_http_get(a.metrics, "/healthz").await.map(|r| r.0) == Some(200)
            && a.readyz().await
                == Some((
                    503,
                    "leader election not running: cannot reach the Lease\n".into(),
                ))
            && a.leader().await == Some(0)
    })
    .await;
    // Its caches are synced meanwhile (they hold s1): the Lease keeps it unready.
    eventually("a's cache holds s1", DEADLINE, || async {
        try_http_get(a.metrics, "/metrics")
            .await
            .is_some_and(|(_, body)| body.contains("server_binder_servers{phase=\"Available\"} 1"))
    })
    .await;
    assert_eq!(a.readyz().await.unwrap().0, 503);

    bed.env.create_namespace(ELSEWHERE).await;
    eventually(
        "a creates the Lease, leads and is ready",
        DEADLINE,
        || async {
            let holder = Api::<Lease>::namespaced(bed.env.client.clone(), ELSEWHERE)
                .get_opt(LEASE)
                .await
                .unwrap()
                .and_then(|l| l.spec?.holder_identity);
            holder.as_deref() == Some(a.identity.as_str())
                && a.leader().await == Some(1)
                && a.readyz().await.map(|r| r.0) == Some(200)
        },
    )
    .await;
}

/// When nobody is left to say the process leads (its elector or holder dropped the
/// sender, its last word `true`), the controllers stop and `run` returns, rather than
/// starting and stopping them in a busy loop, forever.
#[tokio::test]
async fn the_controllers_stop_when_nobody_is_left_to_say_they_lead() {
    use crate::common::fixtures::{claim, server};
    use crate::controllers::stage::wait_bound;
    use server_binder::controllers::{self, Context, Metrics, SharedInformer};
    use tokio_util::sync::CancellationToken;

    let env = Env::new().await;
    let options = options(2);
    let (informer, writers) = SharedInformer::new(options.binder_config());
    let ctx = std::sync::Arc::new(Context::new(
        env.client.clone(),
        informer,
        Metrics::new(),
        "test".into(),
    ));
    let (holder, leading) = tokio::sync::watch::channel(true);
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(controllers::run(ctx, writers, options, leading, shutdown));
    env.put_server(server("s1")).await;
    env.put_claim(claim("c")).await;
    wait_bound(&env, "c", "s1").await;
    drop(holder);
    tokio::time::timeout(DEADLINE, run)
        .await
        .expect("the controllers stop once nobody says they lead")
        .unwrap();
}
