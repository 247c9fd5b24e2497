//! A seeded chaos test of the real processes against the embedded API server: a random
//! fleet, random churn by users and admins, faults injected by the API server (failed,
//! 409, slow and late-answered writes, dropped watches, 410 compaction) and by the test
//! (kill -9 of the operator, of the leader of two replicas), an untrusted tenant's
//! forgeries (a `bind-completed` it wrote, its claims pointed at a server none of them
//! may have, `pre-bound` stripped), and release-gate churn (servers gated and ungated,
//! replicas restarted with another `--release-gates`, a cleaner that passes gates at
//! random times), a server class (`gpu`, the servers labelled `pool=gpu`, which churn
//! relabels in and out) and a quota on it in the claims' namespace that fewer claims fit
//! in than name the class; `Evict` taints among the taints churn writes, and a
//! disruption budget over half the claims. Invariants 1, 5, 6, 7 and 8 hold throughout; once churn and
//! faults stop, invariants 1-4 of docs/binding.md must hold within a deadline, every
//! claim that a free eligible server can serve must be Bound unless its namespace holds
//! its quota's `hard` of its class, and the quota charges only live claims.
//!
//! Every run prints its seed. `CHAOS_SEED=N` replays one seed, `CHAOS_SEEDS=K` runs K
//! seeds from `CHAOS_FIRST_SEED` (default 1). The soak, in docs/operations.md:
//! `CHAOS_SEEDS=1000 cargo test --release --test suite seeded_chaos -- --nocapture`.
//!
//! Also here: the end-to-end test of issue 10's defect 3 (an assumed choice that
//! outlives a withdrawal when the claim's watch event beats the write response).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use proptest::prelude::RngExt;
use proptest::test_runner::{RngAlgorithm, TestRng};
use serde_json::json;
use server_binder::api::names::{
    ANNOTATION_BIND_COMPLETED, ANNOTATION_BOUND_BY_CONTROLLER, ANNOTATION_PRE_BOUND,
};
use server_binder::api::*;
use server_binder::binding::state::eviction::EVICTED;
use server_binder::binding::world::quota::QUOTA_EXCEEDED;
use server_binder::binding::{is_controller_chosen, ref_uid, state::gates};

use crate::common::invariants::{self, History, Stored};
use server_binder::binding::meta;

use super::stage::{ClaimExt, ServerExt, as_new, claim, server, server_phase_reason};
use super::support::*;

/// Seeds a plain `cargo test` runs: about 5.5 s a seed (4 s of churn, then
/// convergence), in [`SHARES`] tests side by side.
const DEFAULT_SEEDS: u64 = 25;
/// How long users, admins and faults churn.
const CHURN: Duration = Duration::from_secs(4);
/// From the end of faults to convergence: a takeover needs a lease term, then a relist.
const SETTLE: Duration = Duration::from_secs(30);
const LEASE_SECS: u64 = 3;
const LEASE_NS: &str = "server-binder-system";
const LEASE: &str = "server-binder";
const TAINTS: [&str; 2] = ["gpu", "maint"];
/// The release gate of gated servers, and of replicas started with `--release-gates`.
const GATE: &str = "example.com/wipe";
/// A cordoned server that no churn uncordons: no claim may ever have it, whatever its
/// tenant writes (invariant 6).
const FORBIDDEN: &str = "forbidden";
/// The server class some claims name: the servers labelled [`POOL`]`=gpu`; its claims
/// get a toleration of the taint `gpu`.
const CLASS: &str = "gpu";
const POOL: &str = "pool";
/// The ServerQuota on [`CLASS`] in the claims' namespace.
const QUOTA: &str = "gpu-quota";
/// The label of the claims the disruption budget [`BUDGET`] covers.
const TIER: (&str, &str) = ("tier", "web");
/// The ServerDisruptionBudget over the [`TIER`] claims: one at a time may be evicted.
const BUDGET: &str = "web";

fn seeds() -> Vec<u64> {
    let var = |name: &str| {
        std::env::var(name)
            .ok()
            .map(|v| v.parse::<u64>().unwrap_or_else(|_| panic!("{name}={v}")))
    };
    if let Some(seed) = var("CHAOS_SEED") {
        return vec![seed];
    }
    let first = var("CHAOS_FIRST_SEED").unwrap_or(1);
    (first..first + var("CHAOS_SEEDS").unwrap_or(DEFAULT_SEEDS)).collect()
}

/// The seeds are shared out among this many tests, which the test threads run side by
/// side: most of a seed is waiting (churn pauses, convergence polls).
const SHARES: u64 = 5;

/// Runs this share of the seeds (every seed whose index is `share` modulo [`SHARES`]).
async fn seeded_chaos_share(share: u64) {
    let _serial = super::leader::SERIAL.read().await;
    let started = Instant::now();
    let mine: Vec<u64> = seeds()
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i as u64 % SHARES == share)
        .map(|(_, seed)| seed)
        .collect();
    let mut failed = Vec::new();
    for seed in &mine {
        eprintln!("chaos seed {seed}: start");
        let t = Instant::now();
        // A task per seed, so that one seed's panic is reported and the others still run.
        match tokio::spawn(run_seed(*seed)).await {
            Ok(mode) => eprintln!("chaos seed {seed} ({mode:?}): ok in {:?}", t.elapsed()),
            Err(e) => {
                eprintln!("chaos seed {seed}: FAILED after {:?}: {e}", t.elapsed());
                failed.push(*seed);
            }
        }
    }
    eprintln!(
        "chaos share {share}: seeds {mine:?} in {:?}",
        started.elapsed()
    );
    assert!(
        failed.is_empty(),
        "chaos seeds failed: {failed:?} (replay one with CHAOS_SEED=N)"
    );
}

macro_rules! seeded_chaos_tests {
    ($($name:ident: $share:literal),*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            seeded_chaos_share($share).await;
        }
    )*};
}

seeded_chaos_tests!(
    seeded_chaos_converges_0: 0,
    seeded_chaos_converges_1: 1,
    seeded_chaos_converges_2: 2,
    seeded_chaos_converges_3: 3,
    seeded_chaos_converges_4: 4
);

/// How the operator runs for a seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// In this process (`Env::start`), killed by aborting its task.
    InProcess,
    /// One `server-binder run --leader-elect` process, killed with SIGKILL and restarted.
    Process,
    /// Two replicas with leader election; the leader is killed with SIGKILL and a new
    /// replica is started in its place.
    Replicas,
}

async fn run_seed(seed: u64) -> Mode {
    let mut w = World::new(seed).await;
    w.create_fleet().await;
    w.start_operators().await;
    w.churn().await;
    w.env.apiserver.faults().clear();
    w.note("churn and faults stop".into());
    w.settle().await;
    w.mode
}

/// One `server-binder run --leader-elect` process; killed when dropped.
struct Proc {
    child: Child,
    log: PathBuf,
    identity: String,
    alive: bool,
}

impl Proc {
    fn spawn(kubeconfig: &Path, log: PathBuf, release_gates: &[String]) -> Self {
        let metrics = format!("127.0.0.1:{}", free_port());
        let child = Command::new(env!("CARGO_BIN_EXE_server-binder"))
            .args(["run", "--leader-elect", "--lease-namespace", LEASE_NS])
            .args(["--release-gates", &release_gates.join(",")])
            .args(["--lease-name", LEASE, "--concurrency", "4"])
            .args(["--lease-duration", &LEASE_SECS.to_string()])
            .args(["--metrics-addr", &metrics])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
            .env_remove("POD_NAME")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).expect("log file"))
            .spawn()
            .expect("server-binder run starts");
        let host = hostname::get().unwrap().into_string().unwrap();
        let identity = format!("{host}-{}", child.id());
        Self {
            child,
            log,
            identity,
            alive: true,
        }
    }

    fn kill9(&mut self) {
        if self.alive {
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.alive = false;
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// One seed's world: the API server, the operator(s), the random source and what the
/// test did (to replay it by eye and to know which refs are the users').
struct World {
    seed: u64,
    mode: Mode,
    rng: TestRng,
    env: Env,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    procs: Vec<Proc>,
    started: Instant,
    actions: Vec<String>,
    /// Claim names churn draws from; a name is re-created with a new uid.
    claim_names: Vec<String>,
    server_names: Vec<String>,
    /// Invariant 4: claim uid -> the server a user wrote into its `serverRef`.
    user_claim_refs: BTreeMap<String, String>,
    /// Invariant 4: server -> the claim a user reserved it for by name (until an admin
    /// clears it or the server goes).
    user_server_refs: BTreeMap<String, String>,
    crashes: usize,
    /// Invariant 5: the (server, release) pairs the test's cleaner passed, and the
    /// release each server was last seen being cleaned after.
    passes: BTreeSet<(String, i64)>,
    cleaning_seen: BTreeMap<String, i64>,
    /// Invariant 7: the quota's `hard` for [`CLASS`] in [`NS`] (never changed).
    hard: i64,
}

impl World {
    async fn new(seed: u64) -> Self {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
        let mode = [Mode::InProcess, Mode::Process, Mode::Replicas][rng.random_range(0..3)];
        let env = Env::new().await;
        env.create_namespace(LEASE_NS).await;
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        env.apiserver.write_kubeconfig(&kubeconfig).unwrap();
        let claims = rng.random_range(4..=12);
        let servers = rng.random_range(4..=10);
        let hard = rng.random_range(1..=2);
        eprintln!(
            "chaos seed {seed}: {mode:?}, {servers} servers, {claims} claims, quota {CLASS}: {hard}"
        );
        Self {
            seed,
            mode,
            rng,
            env,
            dir,
            kubeconfig,
            procs: Vec::new(),
            started: Instant::now(),
            actions: Vec::new(),
            // A few names beyond the first fleet, for claims created during churn.
            claim_names: (0..claims + 3).map(|i| format!("c{i}")).collect(),
            server_names: (0..servers).map(|i| format!("s{i}")).collect(),
            user_claim_refs: BTreeMap::new(),
            user_server_refs: BTreeMap::new(),
            crashes: 0,
            passes: BTreeSet::new(),
            cleaning_seen: BTreeMap::new(),
            hard,
        }
    }

    fn note(&mut self, what: String) {
        self.actions.push(format!(
            "{:>6} ms {what}",
            self.started.elapsed().as_millis()
        ));
    }

    fn pick<'a>(&mut self, from: &'a [String]) -> &'a str {
        &from[self.rng.random_range(0..from.len())]
    }
}

// ---- The fleet ----

impl World {
    async fn create_fleet(&mut self) {
        self.create_class_and_quota().await;
        self.create_budget().await;
        let first_claims = self.claim_names.len() - 3;
        for name in self.server_names.clone() {
            self.create_server(&name).await;
        }
        self.note(format!(
            "create server {FORBIDDEN} unclaimable, never uncordoned"
        ));
        let forbidden = server(FORBIDDEN).labelled(&[("rack", "r1"), ("size", "small")]);
        self.env.put_server(forbidden.unclaimable()).await;
        let names = self.claim_names.clone();
        for name in &names[..first_claims] {
            self.create_claim(name).await;
        }
    }

    /// The class and its quota, before any claim: invariant 7 counts from a quota with
    /// nothing above it bound.
    async fn create_class_and_quota(&mut self) {
        Api::<ServerClass>::all(self.env.client.clone())
            .create(&PostParams::default(), &gpu_class())
            .await
            .expect("class created");
        let quota = self.quota_as_created();
        self.quotas()
            .create(&PostParams::default(), &quota)
            .await
            .expect("quota created");
        self.note(format!(
            "create class {CLASS} ({POOL}={CLASS}, tolerates gpu), quota {QUOTA} hard {CLASS}: {}",
            self.hard
        ));
    }

    /// The tenant's budget: of the claims labelled [`TIER`], one may be without a server.
    async fn create_budget(&mut self) {
        let budget: ServerDisruptionBudget = serde_json::from_value(json!({
            "apiVersion": "metal.binder.dev/v1alpha1",
            "kind": "ServerDisruptionBudget",
            "metadata": {"name": BUDGET, "namespace": NS},
            "spec": {"selector": {"matchLabels": {TIER.0: TIER.1}}, "maxUnavailable": 1},
        }))
        .expect("a budget");
        Api::<ServerDisruptionBudget>::namespaced(self.env.client.clone(), NS)
            .create(&PostParams::default(), &budget)
            .await
            .expect("budget created");
        self.note(format!(
            "create budget {BUDGET} over {}={}: maxUnavailable 1",
            TIER.0, TIER.1
        ));
    }

    /// The quota as the test creates it, before any status.
    fn quota_as_created(&self) -> ServerQuota {
        let hard = BTreeMap::from([(CLASS.to_string(), self.hard)]);
        let mut quota = ServerQuota::new(QUOTA, ServerQuotaSpec { hard });
        quota.metadata.namespace = Some(NS.into());
        quota
    }

    fn quotas(&self) -> Api<ServerQuota> {
        Api::namespaced(self.env.client.clone(), NS)
    }

    /// Whether a new or relabelled server is put in the class (`pool=gpu`).
    fn pool(&mut self) -> Option<&'static str> {
        self.rng.random_bool(0.5).then_some(CLASS)
    }

    async fn create_server(&mut self, name: &str) {
        let rack = format!("r{}", self.rng.random_range(1..=3));
        let size = ["small", "large"][self.rng.random_range(0..2)];
        let mut labels = vec![("rack", rack.as_str()), ("size", size)];
        let mut what = format!("create server {name} rack={rack} size={size}");
        if let Some(pool) = self.pool() {
            labels.push((POOL, pool));
            write!(what, " {POOL}={pool}").unwrap();
        }
        let mut draft = server(name).labelled(&labels);
        if self.rng.random_bool(0.25) {
            let key = TAINTS[self.rng.random_range(0..2)];
            draft = draft.taint(key);
            write!(what, " taint={key}").unwrap();
        }
        if self.rng.random_bool(0.15) {
            draft = draft.unclaimable();
            what.push_str(" unclaimable");
        }
        if self.rng.random_bool(0.4) {
            draft = draft.retain();
            what.push_str(" Retain");
        }
        if self.rng.random_bool(0.3) {
            draft = draft.gates(&[GATE]);
            write!(what, " releaseGates={GATE}").unwrap();
        }
        if self.rng.random_bool(0.15) {
            let names = self.claim_names.clone();
            let claim = self.pick(&names).to_owned();
            // Tools that serialise Go structs write `uid: ""`: still a reservation.
            if self.rng.random_bool(0.5) {
                draft = draft.reserved_for(&claim).uid_ref("");
                write!(what, " reserved-for={claim} uid=\"\"").unwrap();
            } else {
                draft = draft.reserved_for(&claim);
                write!(what, " reserved-for={claim}").unwrap();
            }
            self.user_server_refs.insert(name.to_owned(), claim);
        }
        self.note(what);
        self.env.put_server(draft).await;
    }

    /// Creates a random claim `name`; false if one by that name exists still.
    async fn create_claim(&mut self, name: &str) -> bool {
        let mut draft = claim(name);
        let mut what = format!("create claim {name}");
        if self.rng.random_bool(0.6) {
            draft.spec.server_class_name = Some(CLASS.into());
            write!(what, " class={CLASS}").unwrap();
        }
        if self.rng.random_bool(0.4) {
            let (key, value) = if self.rng.random_bool(0.5) {
                ("rack", format!("r{}", self.rng.random_range(1..=3)))
            } else {
                (
                    "size",
                    ["small", "large"][self.rng.random_range(0..2)].into(),
                )
            };
            draft = draft.selects(&[(key, &value)]);
            write!(what, " selects {key}={value}").unwrap();
        }
        for key in TAINTS {
            if self.rng.random_bool(0.3) {
                draft = draft.tolerates(key);
                write!(what, " tolerates={key}").unwrap();
            }
        }
        if self.rng.random_bool(0.5) {
            let labels = draft.metadata.labels.get_or_insert_with(Default::default);
            labels.insert(TIER.0.into(), TIER.1.into());
            write!(what, " {}={}", TIER.0, TIER.1).unwrap();
        }
        // A manifest copied from a bound claim carries `bind-completed`.
        if self.rng.random_bool(0.1) {
            draft = draft.bind_completed();
            what.push_str(" copied-bind-completed");
        }
        let mut user_ref = None;
        if self.rng.random_bool(0.15) {
            let names = self.server_names.clone();
            let server = self.pick(&names).to_owned();
            draft = draft.names(&server);
            write!(what, " serverRef={server}").unwrap();
            user_ref = Some(server);
        }
        let created = match self
            .env
            .claims()
            .create(&PostParams::default(), &as_new(draft))
            .await
        {
            Ok(c) => c,
            Err(kube::Error::Api(e)) if e.code == 409 => return false,
            Err(e) => panic!("chaos seed {}: create claim {name}: {e}", self.seed),
        };
        if let Some(server) = user_ref {
            self.user_claim_refs
                .insert(ResourceExt::uid(&created).unwrap(), server);
        }
        self.note(what);
        true
    }
}

// ---- The operator(s) and their crashes ----

impl World {
    /// The `--release-gates` of an operator (re)started now: the fleet default changes
    /// across restarts, which must change no cleaning in progress.
    fn release_gates(&mut self) -> Vec<String> {
        match self.rng.random_bool(0.5) {
            true => vec![GATE.to_string()],
            false => vec![],
        }
    }

    async fn start_in_process(&mut self) {
        let release_gates = self.release_gates();
        self.note(format!(
            "start in-process, --release-gates {release_gates:?}"
        ));
        let options = server_binder::controllers::Options {
            release_gates,
            ..options(4)
        };
        self.env.start_with(options).await;
    }

    async fn start_operators(&mut self) {
        match self.mode {
            Mode::InProcess => self.start_in_process().await,
            Mode::Process => self.spawn_replica(),
            Mode::Replicas => {
                self.spawn_replica();
                self.spawn_replica();
            }
        }
    }

    fn spawn_replica(&mut self) {
        let log = self
            .dir
            .path()
            .join(format!("replica-{}.log", self.procs.len()));
        let gates = self.release_gates();
        let p = Proc::spawn(&self.kubeconfig, log, &gates);
        self.note(format!(
            "start replica {} ({}), --release-gates {gates:?}",
            self.procs.len(),
            p.identity
        ));
        self.procs.push(p);
    }

    async fn lease_holder(&self) -> Option<String> {
        Api::<Lease>::namespaced(self.env.client.clone(), LEASE_NS)
            .get_opt(LEASE)
            .await
            .expect("read the Lease")?
            .spec?
            .holder_identity
    }

    /// kill -9 of the operator (of the leader, with replicas), and a new one in its place.
    async fn crash(&mut self) {
        self.crashes += 1;
        match self.mode {
            Mode::InProcess => {
                self.note("kill the in-process operator and start it again".into());
                self.env.kill().await;
                self.start_in_process().await;
            }
            Mode::Process | Mode::Replicas => {
                let holder = self.lease_holder().await;
                let alive: Vec<usize> = (0..self.procs.len())
                    .filter(|&i| self.procs[i].alive)
                    .collect();
                let victim = alive
                    .iter()
                    .copied()
                    .find(|&i| Some(&self.procs[i].identity) == holder.as_ref())
                    .unwrap_or(alive[self.rng.random_range(0..alive.len())]);
                let leads = Some(&self.procs[victim].identity) == holder.as_ref();
                self.note(format!("kill -9 replica {victim} (leader: {leads})"));
                self.procs[victim].kill9();
                self.spawn_replica();
            }
        }
    }
}

// ---- Churn ----

impl World {
    async fn churn(&mut self) {
        let until = Instant::now() + CHURN;
        let mut steps = 0;
        while Instant::now() < until {
            self.step().await;
            steps += 1;
            if steps % 5 == 0 {
                self.check_no_double_binding().await;
            }
            let pause = self.rng.random_range(10..120);
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    }

    /// One random action of a user, an admin, the API server or the machine.
    async fn step(&mut self) {
        let names = self.claim_names.clone();
        let claim = self.pick(&names).to_owned();
        let servers = self.server_names.clone();
        let server = self.pick(&servers).to_owned();
        match self.rng.random_range(0..100) {
            0..15 => {
                self.create_claim(&claim).await;
            }
            15..25 => self.delete_claim(&claim).await,
            25..35 => {
                self.delete_claim(&claim).await;
                self.create_claim(&claim).await;
            }
            35..43 => self.relabel(&server).await,
            43..51 => self.taint(&server).await,
            51..58 => self.cordon(&server).await,
            58..61 => self.delete_server(&server).await,
            61..64 => self.add_server().await,
            64..70 => self.clear_released().await,
            70..76 => self.forge(&claim).await,
            76..80 => self.gate(&server).await,
            80..86 => self.clean_one().await,
            86..96 => self.api_fault(),
            _ if self.crashes < 3 => self.crash().await,
            _ => self.api_fault(),
        }
    }

    async fn delete_claim(&mut self, name: &str) {
        match self
            .env
            .claims()
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(_) => self.note(format!("delete claim {name}")),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => panic!("chaos seed {}: delete claim {name}: {e}", self.seed),
        }
    }

    /// A merge patch to a server as a user would write it; a server that is gone is
    /// skipped.
    async fn patch_server(&mut self, name: &str, what: String, patch: serde_json::Value) {
        let pp = PatchParams::default();
        match self
            .env
            .servers()
            .patch(name, &pp, &Patch::Merge(patch))
            .await
        {
            Ok(_) => self.note(format!("{what} {name}")),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => panic!("chaos seed {}: {what} {name}: {e}", self.seed),
        }
    }

    /// New `rack` and `size` labels, and the server put in or out of the class.
    async fn relabel(&mut self, name: &str) {
        let rack = format!("r{}", self.rng.random_range(1..=3));
        let size = ["small", "large"][self.rng.random_range(0..2)];
        let pool = self.pool();
        let patch = json!({"metadata": {"labels": {"rack": rack, "size": size, POOL: pool}}});
        let what = format!("relabel rack={rack} size={size} {POOL}={pool:?}");
        self.patch_server(name, what, patch).await;
    }

    /// A `NoBind` taint, an `Evict` taint (an admin taking the server back), or none.
    async fn taint(&mut self, name: &str) {
        let effect = match self.rng.random_range(0..6) {
            0..2 => Some("NoBind"),
            2 => Some("Evict"),
            _ => None,
        };
        let (what, taints) = match effect {
            Some(effect) => {
                let key = TAINTS[self.rng.random_range(0..2)];
                (
                    format!("taint {key}:{effect}"),
                    json!([{"key": key, "effect": effect}]),
                )
            }
            None => ("untaint".to_owned(), json!([])),
        };
        self.patch_server(name, what, json!({"spec": {"taints": taints}}))
            .await;
    }

    async fn cordon(&mut self, name: &str) {
        let on = self.rng.random_bool(0.5);
        let what = if on { "cordon" } else { "uncordon" };
        self.patch_server(name, what.into(), json!({"spec": {"unclaimable": on}}))
            .await;
    }

    async fn delete_server(&mut self, name: &str) {
        match self
            .env
            .servers()
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(_) => {
                self.note(format!("delete server {name}"));
                self.user_server_refs.remove(name);
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => panic!("chaos seed {}: delete server {name}: {e}", self.seed),
        }
    }

    async fn add_server(&mut self) {
        let name = format!("s{}", self.server_names.len());
        self.server_names.push(name.clone());
        self.create_server(&name).await;
    }

    /// An admin hands a Released (Retain) server back by clearing its ref.
    async fn clear_released(&mut self) {
        let (servers, _) = self.env.all().await;
        let released: Vec<String> = servers
            .iter()
            .filter(|s| server_phase_reason(s).0 == Some(ServerPhase::Released))
            .map(|s| s.name_any())
            .collect();
        if released.is_empty() {
            return;
        }
        let name = self.pick(&released).to_owned();
        self.user_server_refs.remove(&name);
        let patch = json!({"spec": {"serverClaimRef": null}});
        self.patch_server(&name, "clear the Released ref of".into(), patch)
            .await;
    }

    /// The tenant of `name` writes what it may not be trusted with (docs/binding.md,
    /// "Trust"): points the claim at the forbidden server with a forged `bind-completed`
    /// (`pre-bound` removed in the same write, so the ref is its own), forges
    /// `bind-completed` on it whatever it names, strips `pre-bound` or `bind-completed`,
    /// or strips both from a Bound claim of the class under quota. Admission may refuse
    /// (a ref switched, or removed from a Bound claim).
    async fn forge(&mut self, name: &str) {
        let yes = "yes";
        let mut name = name.to_string();
        let (what, patch) = match self.rng.random_range(0..5) {
            // A Bound claim of the class, under its quota: its bind stands and must
            // survive the strip (docs/binding.md, the claim table's note [y]).
            4 => {
                name = self.bound_of_class().await.unwrap_or(name);
                (
                    format!("tenant strips bind-completed and pre-bound from {name}"),
                    json!({"metadata": {"annotations": {ANNOTATION_BIND_COMPLETED: null, ANNOTATION_PRE_BOUND: null}}}),
                )
            }
            0 => (
                format!("tenant points {name} at {FORBIDDEN} with a forged bind-completed"),
                json!({"metadata": {"annotations": {ANNOTATION_BIND_COMPLETED: yes, ANNOTATION_PRE_BOUND: null}},
                       "spec": {"serverRef": {"name": FORBIDDEN}}}),
            ),
            1 => (
                format!("tenant forges bind-completed on {name}"),
                json!({"metadata": {"annotations": {ANNOTATION_BIND_COMPLETED: yes}}}),
            ),
            2 => (
                format!("tenant strips pre-bound from {name}"),
                json!({"metadata": {"annotations": {ANNOTATION_PRE_BOUND: null}}}),
            ),
            _ => (
                format!("tenant strips bind-completed from {name}"),
                json!({"metadata": {"annotations": {ANNOTATION_BIND_COMPLETED: null}}}),
            ),
        };
        let pp = PatchParams::default();
        match self
            .env
            .claims()
            .patch(&name, &pp, &Patch::Merge(patch))
            .await
        {
            Ok(c) => {
                if server_ref_name(&c) == Some(FORBIDDEN)
                    && !is_controller_chosen(&c.clone().into())
                {
                    self.user_claim_refs
                        .insert(ResourceExt::uid(&c).unwrap(), FORBIDDEN.to_string());
                }
                self.note(what);
            }
            Err(kube::Error::Api(e)) if [404, 422].contains(&e.code) => {}
            Err(e) => panic!("chaos seed {}: {what}: {e}", self.seed),
        }
    }

    /// A Bound claim of the class, if any (the first by name).
    async fn bound_of_class(&self) -> Option<String> {
        let claims = self.env.claims().list(&Default::default()).await.ok()?;
        claims
            .items
            .iter()
            .filter(|c| c.spec.server_class_name.as_deref() == Some(CLASS))
            .find(|c| c.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound))
            .map(|c| c.name_any())
    }

    /// An admin gates or ungates a server (`spec.releaseGates`).
    async fn gate(&mut self, name: &str) {
        let (what, gates) = match self.rng.random_range(0..3) {
            0 => (format!("gate {GATE} on"), json!([{"name": GATE}])),
            1 => ("gate nothing on".to_string(), json!([])),
            _ => ("default gates on".to_string(), json!(null)),
        };
        self.patch_server(name, what, json!({"spec": {"releaseGates": gates}}))
            .await;
    }

    /// The test's cleaner passes the gate of one server being cleaned, as the contract
    /// in docs/operations.md says: the release read, then the pass with the
    /// resourceVersion read (a conflict skips it this time).
    async fn clean_one(&mut self) {
        let (servers, _) = self.env.all().await;
        let cleaning: Vec<Server> = servers
            .into_iter()
            .filter(|s| release_of(s).is_some())
            .collect();
        if cleaning.is_empty() {
            return;
        }
        let s = cleaning[self.rng.random_range(0..cleaning.len())].clone();
        if let Some(release) = self.pass_gates(s).await {
            self.note(format!("the cleaner passes release {release}"));
        }
    }

    /// Passes every gate the server waits for, for its current release; the release,
    /// if the write went through.
    async fn pass_gates(&mut self, mut s: Server) -> Option<i64> {
        let lean = CachedServer::from(s.clone());
        let record = gates::release_record(&lean)?;
        let release = record.release?;
        let waits: Vec<String> = gates::gates_in_force(&lean, &record)
            .into_iter()
            .map(str::to_string)
            .collect();
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        );
        let status = s.status.get_or_insert_with(Default::default);
        for gate in &waits {
            status.conditions.retain(|c| c.type_ != *gate);
            status
                .conditions
                .push(gates::pass_condition(gate, release, &now));
        }
        let name = s.name_any();
        let written = self
            .env
            .servers()
            .replace_status(&name, &PostParams::default(), &s)
            .await;
        written.ok()?;
        self.passes.insert((name, release));
        Some(release)
    }

    /// A fault of the API server, on the controllers' writes (user writes are patches,
    /// creates and deletes, which these matchers leave alone).
    fn api_fault(&mut self) {
        let faults = self.env.apiserver.faults();
        let times = self.rng.random_range(1..=4);
        // Slow and late-answered writes last longer: the races they open (an event before
        // the response, an eligibility change before the other side's write) need the
        // churn to land in them.
        let many = self.rng.random_range(5..=30);
        let resource = ["servers", "serverclaims"][self.rng.random_range(0..2)];
        let writes = Env::write_matcher().resource(resource);
        let ms = Duration::from_millis(self.rng.random_range(50..400));
        let what = match self.rng.random_range(0..6) {
            0 => {
                faults.fail(writes, times, 500);
                format!("fail the next {times} {resource} writes with 500")
            }
            1 => {
                faults.fail(writes, times, 409);
                format!("fail the next {times} {resource} writes with 409")
            }
            2 => {
                faults.delay(writes, many, ms);
                format!("delay the next {many} {resource} writes by {ms:?}")
            }
            3 => {
                faults.delay_response(writes, many, ms);
                format!("delay the responses to the next {many} {resource} writes by {ms:?}")
            }
            4 => {
                faults.close_watches();
                "close every watch".into()
            }
            _ => {
                faults.compact_history();
                "compact history (410 on resume)".into()
            }
        };
        self.note(what);
    }

    /// Invariants 1, 5, 6 and 7 during churn, from one list (a consistent snapshot):
    /// never two claims Bound to one server; a server seen being cleaned after a release
    /// is bound again only once the test's cleaner passed that release; the forbidden
    /// server never carries a claim's uid; no namespace has more claims of a class bound
    /// than its quota allows.
    async fn check_no_double_binding(&mut self) {
        let (servers, claims) = self.env.all().await;
        self.note_cleaning(&servers);
        let stored = self.stored(&servers, &claims, self.quota_as_created());
        let (snap, history) = (stored.snapshot(), self.history(&stored));
        let mut violations = invariants::quota_holds(&snap, None);
        violations.extend(invariants::one_claim_per_server(&snap));
        violations.extend(invariants::clean_before_reuse(&snap, &history.dirty));
        let unpassed: Vec<(&str, i64)> = self.unpassed().collect();
        violations.extend(invariants::stays_cleaning_until_passed(&snap, &unpassed));
        violations.extend(invariants::entitlement(&snap, &history));
        violations.extend(budget_problems(&claims));
        if let Some(msg) = violations.first() {
            panic!("{}", self.failure(msg).await);
        }
    }

    /// Notes the release each server is seen being cleaned after (invariant 5's
    /// history).
    fn note_cleaning(&mut self, servers: &[Server]) {
        for s in servers {
            if let Some(release) = release_of(s) {
                self.cleaning_seen.insert(s.name_any(), release);
            }
        }
    }

    /// The objects as the invariants read them: these lists, the class and `quota`.
    fn stored(&self, servers: &[Server], claims: &[ServerClaim], quota: ServerQuota) -> Stored {
        Stored {
            classes: vec![gpu_class()],
            quotas: vec![quota],
            ..Stored::new(servers, claims)
        }
    }

    /// Each server seen being cleaned after a release the cleaner has not passed.
    fn unpassed(&self) -> impl Iterator<Item = (&str, i64)> {
        let passed = |name: &str, release: i64| self.passes.contains(&(name.to_string(), release));
        let seen = self.cleaning_seen.iter().map(|(n, r)| (n.as_str(), *r));
        seen.filter(move |&(name, release)| !passed(name, release))
    }

    /// What the test did that the objects cannot show: the refs users wrote
    /// (invariant 4), the releases the cleaner has not passed (5), the forbidden server
    /// (6); the quota was created before any claim (7).
    fn history<'a>(&'a self, stored: &'a Stored) -> History<'a> {
        let user_claim_refs = stored.claims.iter().filter_map(|c| {
            let uid = meta::uid(c)?;
            let server = self.user_claim_refs.get(uid)?;
            Some((meta::name(c), Some(uid), server.as_str()))
        });
        History {
            user_claim_refs: user_claim_refs.collect(),
            user_server_refs: self
                .user_server_refs
                .iter()
                .map(|(s, c)| (s.as_str(), c.as_str()))
                .collect(),
            dirty: self
                .unpassed()
                .map(|(name, release)| (name, format!("of release {release}").into()))
                .collect(),
            forbidden: vec![FORBIDDEN],
            ..History::default()
        }
    }
}

/// (namespace, name, uid) of every claim some server's ref carries the uid of.
fn held_uids(servers: &[Server]) -> BTreeSet<(String, String, String)> {
    servers
        .iter()
        .filter_map(|s| s.spec.server_claim_ref.as_ref())
        .filter_map(|r| {
            let uid = ref_uid(r)?;
            Some((r.namespace.clone(), r.name.clone(), uid.to_string()))
        })
        .collect()
}

fn claim_key(c: &ServerClaim) -> (String, String, String) {
    let ns = c.namespace().unwrap_or_default();
    (ns, c.name_any(), c.uid().unwrap_or_default())
}

/// The toleration the class gives its claims.
fn gpu_toleration() -> Toleration {
    Toleration {
        key: "gpu".into(),
        operator: TolerationOperator::Exists,
        value: None,
        effect: None,
        toleration_seconds: None,
    }
}

/// The class: the servers labelled [`POOL`]`=gpu`, with the class's toleration.
fn gpu_class() -> ServerClass {
    ServerClass::new(
        CLASS,
        ServerClassSpec {
            server_selector: Some(ServerSelector {
                match_labels: BTreeMap::from([(POOL.to_string(), CLASS.to_string())]),
                ..ServerSelector::default()
            }),
            tolerations: vec![gpu_toleration()],
            ..ServerClassSpec::default()
        },
    )
}

/// The release a server is being cleaned after, as its annotation says.
fn release_of(s: &Server) -> Option<i64> {
    gates::release_record(&s.clone().into()).and_then(|r| r.release)
}

fn server_ref_name(c: &ServerClaim) -> Option<&str> {
    c.spec.server_ref.as_ref().map(|r| r.name.as_str())
}

// ---- Convergence ----

impl World {
    /// Waits until the objects satisfy every check three polls in a row (the two lists
    /// are not one snapshot), or fails with the seed, the objects and the logs.
    async fn settle(&mut self) {
        let deadline = Instant::now() + SETTLE;
        let stopped = Instant::now();
        let mut clean = 0;
        while clean < 3 {
            let (servers, claims) = self.env.all().await;
            let quota = self.quotas().get(QUOTA).await.expect("read the quota");
            self.note_cleaning(&servers);
            let stored = self.stored(&servers, &claims, quota.clone());
            let (snap, history) = (stored.snapshot(), self.history(&stored));
            let mut violated = invariants::quota_holds(&snap, None);
            violated.extend(invariants::clean_before_reuse(&snap, &history.dirty));
            violated.extend(invariants::entitlement(&snap, &history));
            violated.extend(budget_problems(&claims));
            if let Some(msg) = violated.first() {
                panic!("{}", self.failure(msg).await);
            }
            // The cleaner keeps cleaning: every server waiting for it converges.
            for s in servers.iter().filter(|s| release_of(s).is_some()) {
                self.pass_gates(s.clone()).await;
            }
            let problems = self.problems(&servers, &claims, &quota);
            clean = if problems.is_empty() { clean + 1 } else { 0 };
            if Instant::now() >= deadline {
                let msg = format!(
                    "not converged {SETTLE:?} after faults stopped:\n  {}",
                    problems.join("\n  ")
                );
                panic!("{}", self.failure(&msg).await);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let (servers, claims) = self.env.all().await;
        let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            assert_invariants(&servers, &claims)
        }));
        if let Err(e) = checked {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!(
                "{}",
                self.failure(&format!("assert_invariants: {msg}")).await
            );
        }
        let bound = claims
            .iter()
            .filter(|c| phase(c) == Some(ClaimPhase::Bound))
            .count();
        let refused = claims
            .iter()
            .filter(|c| bound_reason(c).as_deref() == Some(QUOTA_EXCEEDED))
            .count();
        let evicted = claims
            .iter()
            .filter(|c| bound_reason(c).as_deref() == Some(EVICTED))
            .count();
        eprintln!(
            "chaos seed {}: converged {:?} after faults stopped ({} actions, {} crashes; {bound}/{} claims Bound, {refused} QuotaExceeded, {evicted} Evicted, {} servers)",
            self.seed,
            stopped.elapsed(),
            self.actions.len(),
            self.crashes,
            claims.len(),
            servers.len()
        );
    }

    /// What keeps the objects from having converged: invariants 1, 2 and 4 and the
    /// quota's liveness ([`invariants`]), and what this test adds: every claim has a
    /// phase and none is Lost, every server's phase follows its ref, and the quota
    /// counts what holds a server of its class.
    fn problems(
        &self,
        servers: &[Server],
        claims: &[ServerClaim],
        quota: &ServerQuota,
    ) -> Vec<String> {
        let stored = self.stored(servers, claims, quota.clone());
        let (snap, history) = (stored.snapshot(), self.history(&stored));
        let mut p = invariants::one_claim_per_server(&snap);
        p.extend(invariants::converged(&snap, &[]));
        p.extend(invariants::user_refs_stay(&snap, &history));
        p.extend(invariants::charges_live(&snap));
        p.extend(claim_phases(claims));
        p.extend(server_phases(servers, claims));
        p.extend(quota_problems(
            quota,
            &quota_holders(quota, servers, claims),
            &bound_uids(claims),
        ));
        p
    }
}

/// Invariant 8: of the claims the budget covers ([`TIER`]), at most one is evicted.
fn budget_problems(claims: &[ServerClaim]) -> Vec<String> {
    let evicted: Vec<String> = claims
        .iter()
        .filter(|c| c.labels().get(TIER.0).map(String::as_str) == Some(TIER.1))
        .filter(|c| phase(c) == Some(ClaimPhase::Lost))
        .filter(|c| bound_reason(c).as_deref() == Some(EVICTED))
        .map(|c| c.name_any())
        .collect();
    match evicted.len() {
        0 | 1 => Vec::new(),
        _ => vec![format!(
            "invariant 8: budget {BUDGET} allows one eviction, but {evicted:?} are evicted"
        )],
    }
}

/// The live claims of [`CLASS`] in [`NS`] that hold a place in the quota: a server's
/// ref carries their uid, they hold their bind (`Bound`), or the quota charges them.
fn quota_holders(
    quota: &ServerQuota,
    servers: &[Server],
    claims: &[ServerClaim],
) -> BTreeSet<String> {
    let held = held_uids(servers);
    let charged: BTreeSet<&str> = charges(quota).iter().map(|c| c.uid.as_str()).collect();
    claims
        .iter()
        .filter(|c| c.namespace().as_deref() == Some(NS))
        .filter(|c| c.spec.server_class_name.as_deref() == Some(CLASS))
        .filter(|c| {
            let uid = c.uid().unwrap_or_default();
            held.contains(&claim_key(c)) || is_bound(c) || charged.contains(uid.as_str())
        })
        .map(|c| c.uid().unwrap_or_default())
        .collect()
}

/// The uids of the claims of [`CLASS`] in [`NS`] that hold their bind (`Bound`): the
/// quota counts them in `used` without a charge.
fn bound_uids(claims: &[ServerClaim]) -> BTreeSet<String> {
    claims
        .iter()
        .filter(|c| c.namespace().as_deref() == Some(NS))
        .filter(|c| c.spec.server_class_name.as_deref() == Some(CLASS))
        .filter(|c| is_bound(c))
        .map(|c| c.uid().unwrap_or_default())
        .collect()
}

fn is_bound(claim: &ServerClaim) -> bool {
    claim.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound)
}

fn charges(quota: &ServerQuota) -> &[QuotaCharge] {
    quota.status.as_ref().map_or(&[], |s| &s.charged)
}

/// The quota counts what it holds: every claim holding a server of its class holds its
/// bind or is charged, and `used` counts the claims holding their bind and the charges
/// (that it charges only live claims is [`invariants::charges_live`]).
fn quota_problems(
    quota: &ServerQuota,
    holding: &BTreeSet<String>,
    bound: &BTreeSet<String>,
) -> Vec<String> {
    let mut p = Vec::new();
    let charges = charges(quota);
    let charged = |uid: &String| charges.iter().any(|c| &c.uid == uid);
    for uid in holding {
        if !charged(uid) && !bound.contains(uid) {
            p.push(format!(
                "quota {QUOTA} does not count uid {uid}, which holds a server of {CLASS}"
            ));
        }
    }
    let counted = charges.len() + bound.iter().filter(|u| !charged(u)).count();
    let used = quota
        .status
        .as_ref()
        .and_then(|s| s.used.get(CLASS).copied());
    if used.unwrap_or(0) != counted as i64 {
        p.push(format!(
            "quota {QUOTA} used {used:?} for {} charges and {} claims bound",
            charges.len(),
            bound.len()
        ));
    }
    p
}

/// Every claim has a phase, and none is Lost but those an `Evict` taint evicted: no
/// other churn here makes one.
fn claim_phases(claims: &[ServerClaim]) -> Vec<String> {
    let mut p = Vec::new();
    for c in claims {
        let name = c.name_any();
        match phase(c) {
            None => p.push(format!("claim {name} has no phase")),
            Some(ClaimPhase::Lost) if bound_reason(c).as_deref() == Some(EVICTED) => {}
            Some(ClaimPhase::Lost) => {
                p.push(format!("claim {name} is Lost ({:?})", bound_reason(c)))
            }
            Some(_) => {}
        }
    }
    p
}

/// A server holding a live claim's uid that names it back is Bound; a server with no
/// ref (or a ref by name only) is Available; a deleting server is gone unless a claim
/// holds it. (Which refs a server may keep is invariant 2's.)
fn server_phases(servers: &[Server], claims: &[ServerClaim]) -> Vec<String> {
    let mut p = Vec::new();
    for s in servers {
        let name = s.name_any();
        let phase = server_phase_reason(s).0;
        let r = s.spec.server_claim_ref.as_ref();
        // `uid: ""` is a reservation by name, as the binder reads it (`ref_uid`).
        let holder = r.filter(|r| ref_uid(r).is_some()).and_then(|r| {
            claims.iter().find(|c| {
                c.namespace().as_deref() == Some(r.namespace.as_str())
                    && c.name_any() == r.name
                    && c.uid().as_deref() == ref_uid(r)
            })
        });
        let deleting = s.metadata.deletion_timestamp.is_some();
        if let Some(c) = holder {
            let names = c.spec.server_ref.as_ref().map(|r| r.name.as_str());
            // An evicted claim's server is released (kept Released under Retain).
            let evicted = bound_reason(c).as_deref() == Some(EVICTED);
            if names == Some(name.as_str()) && phase != Some(ServerPhase::Bound) && !evicted {
                p.push(format!(
                    "server {name} holds {} but is {phase:?}",
                    c.name_any()
                ));
            }
        } else if deleting {
            p.push(format!(
                "server {name} is deleting, no claim holds it, but it stays"
            ));
        } else if r.is_none_or(|r| ref_uid(r).is_none()) && phase != Some(ServerPhase::Available) {
            p.push(format!("server {name} holds no claim but is {phase:?}"));
        }
    }
    p
}

// ---- What a failure shows ----

impl World {
    /// Prints what happened (actions, final objects, operator logs) and returns the
    /// panic message, which carries the seed.
    async fn failure(&self, msg: &str) -> String {
        let (servers, claims) = self.env.all().await;
        let mut out = format!(
            "===== chaos seed {} ({:?}) FAILED: {msg}\n----- actions -----\n",
            self.seed, self.mode
        );
        for a in &self.actions {
            writeln!(out, "{a}").unwrap();
        }
        out.push_str("----- final objects -----\n");
        out.push_str(&describe_objects(&servers, &claims));
        let quota = self.quotas().get_opt(QUOTA).await.ok().flatten();
        let quota = quota.map(|q| (q.spec, q.status));
        writeln!(out, "quota {QUOTA}: {quota:?}").unwrap();
        for (i, p) in self.procs.iter().enumerate() {
            let log = std::fs::read_to_string(&p.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(120)..];
            writeln!(
                out,
                "----- replica {i} ({}, alive: {}), last {} of {} log lines -----",
                p.identity,
                p.alive,
                tail.len(),
                lines.len()
            )
            .unwrap();
            out.push_str(&tail.join("\n"));
            out.push('\n');
        }
        if self.mode == Mode::InProcess {
            out.push_str("(the operator ran in-process: no separate log)\n");
        }
        eprintln!("{out}===== end of chaos seed {} =====", self.seed);
        format!(
            "chaos seed {} ({:?}): {msg}\nreplay with CHAOS_SEED={}",
            self.seed, self.mode, self.seed
        )
    }
}

fn short(uid: Option<&str>) -> String {
    uid.map_or("-".into(), |u| u.chars().take(8).collect())
}

fn describe_objects(servers: &[Server], claims: &[ServerClaim]) -> String {
    let mut out = String::new();
    for s in servers {
        let r = s.spec.server_claim_ref.as_ref();
        let taints: Vec<&str> = s.spec.taints.iter().map(|t| t.key.as_str()).collect();
        writeln!(
            out,
            "server {} labels={:?} taints={taints:?} unclaimable={} {:?} ref={:?}/{} by-controller={} deleting={} finalizers={:?} status={:?}",
            s.name_any(),
            s.labels(),
            s.spec.unclaimable,
            s.spec.reclaim_policy,
            r.map(|r| r.name.as_str()),
            short(r.and_then(|r| r.uid.as_deref())),
            s.annotations().contains_key(ANNOTATION_BOUND_BY_CONTROLLER),
            s.metadata.deletion_timestamp.is_some(),
            s.finalizers(),
            server_phase_reason(s),
        )
        .unwrap();
    }
    for c in claims {
        let message = c
            .status
            .as_ref()
            .and_then(|st| st.conditions.first())
            .map(|c| c.message.clone());
        let annotations: BTreeSet<&String> = c.annotations().keys().collect();
        writeln!(
            out,
            "claim {} uid={} class={:?} serverRef={:?} annotations={annotations:?} selector={:?} tolerations={:?} phase={:?} reason={:?} message={message:?}",
            c.name_any(),
            short(c.uid().as_deref()),
            c.spec.server_class_name,
            c.spec.server_ref.as_ref().map(|r| r.name.as_str()),
            c.spec.server_selector.as_ref().map(|s| &s.match_labels),
            c.spec.tolerations.iter().map(|t| t.key.as_str()).collect::<Vec<_>>(),
            phase(c),
            bound_reason(c),
        )
        .unwrap();
    }
    out
}

// ---- Issue 10, defect 3, end to end ----

/// c1 picks s1, the only server; s1 is tainted before the server side records c1, so c1
/// withdraws. The claim-write responses come 300 ms late, so the claim controller sees
/// its own write on the watch before the answer to it. Then c2, which tolerates the
/// taint, must get s1: the assumed choice of s1 for c1 must have ended.
#[tokio::test]
async fn a_withdrawn_choice_frees_the_server_when_the_event_beats_the_write_response() {
    let mut env = Env::new().await;
    env.put_server(server("s1")).await;
    let faults = env.apiserver.faults();
    let claim_writes = controller_writes().resource("serverclaims");
    faults.delay_response(claim_writes, 10_000, Duration::from_millis(300));
    // The server side's first writes are held, so that the taint lands first (their
    // resourceVersion is then stale and they fail with 409).
    let server_writes = controller_writes().resource("servers");
    faults.delay(server_writes, 2, Duration::from_millis(700));
    env.start(2).await;

    env.put_claim(claim("c1")).await;
    env.wait_claim("c1", "names s1", |c| c.spec.server_ref.is_some())
        .await;
    let taint = json!({"spec": {"taints": [{"key": "gpu", "effect": "NoBind"}]}});
    let s1 = env
        .servers()
        .patch("s1", &PatchParams::default(), &Patch::Merge(taint))
        .await
        .expect("taint s1");
    assert_eq!(
        s1.spec.server_claim_ref, None,
        "precondition: the taint landed before the server side recorded c1"
    );
    env.wait_claim("c1", "withdrew from s1", |c| c.spec.server_ref.is_none())
        .await;

    env.put_claim(claim("c2").tolerates("gpu")).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let (Some(c2), Some(s1)) = (env.claim("c2").await, env.server("s1").await)
            && super::stage::bound_pair(&c2, &s1)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (servers, claims) = env.all().await;
    panic!(
        "c2 not Bound to s1 within 10 s of its creation:\n{}",
        describe_objects(&servers, &claims)
    );
}
