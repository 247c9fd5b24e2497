//! The test bed: the embedded API server over real HTTP, the real operator (both
//! controllers) started and killed in-process, and the protocol's invariants.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use server_binder::api::{ClaimPhase, Server, ServerClaim};
use server_binder::apiserver::{ApiServer, ApiServerHandle, Config, RequestMatcher, RequestRecord};
use server_binder::controllers::Options;
use server_binder::runtime::client::USER_AGENT_VALUE;
use server_binder::runtime::leader::LeaderElection;
use server_binder::runtime::operator::{self, OperatorConfig, OperatorHandle};

use crate::common::invariants::{self, Stored};
pub use crate::controllers::names::NS;
pub use crate::controllers::poll::{eventually, wait_for};
use crate::controllers::stage::{ServerExt, as_new, claim, server};
pub use crate::controllers::tools::{kubectl_present, tool_present};

/// How long a test waits for the controllers to do something.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub struct Env {
    pub apiserver: ApiServerHandle,
    pub client: Client,
    pub operator: Option<OperatorHandle>,
}

/// With `RUST_LOG` set (e.g. `RUST_LOG=server_binder=debug`), the controllers' and the API
/// server's logs go to the test's captured output, printed when it fails.
fn log_if_asked() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

impl Env {
    pub async fn new() -> Self {
        log_if_asked();
        let apiserver = ApiServer::start(Config::default())
            .await
            .expect("API server starts");
        for crd in server_binder::api::crds() {
            apiserver.install_crd(&crd).await.expect("CRD installs");
        }
        let client = apiserver.client();
        let env = Self {
            apiserver,
            client,
            operator: None,
        };
        // The fixtures' claims live in NS, which a cluster must have, as any namespace.
        env.create_namespace(NS).await;
        env
    }

    pub async fn start(&mut self, concurrency: u16) {
        self.start_operator(options(concurrency), None, None).await;
    }

    /// Starts the operator with these options.
    pub async fn start_with(&mut self, options: Options) {
        self.start_operator(options, None, None).await;
    }

    /// Starts the operator with leader election on the Lease `namespace/name` (creating
    /// the namespace), and waits until it leads.
    pub async fn start_leading(&mut self, concurrency: u16, namespace: &str, name: &str) {
        self.create_namespace(namespace).await;
        let election = LeaderElection {
            namespace: namespace.into(),
            name: name.into(),
            lease_duration_secs: 2,
        };
        self.start_operator(options(concurrency), None, Some(election))
            .await;
        let metrics = self.operator.as_ref().unwrap().metrics.clone();
        eventually("the operator leads", DEADLINE, || {
            let leads = metrics.encode().contains("server_binder_leader 1");
            async move { leads }
        })
        .await;
    }

    pub async fn create_namespace(&self, name: &str) {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("namespace {name} created: {e}"));
    }

    /// Stops the operator gracefully, as on SIGTERM (the Lease, if any, is released).
    pub async fn stop(&mut self) {
        if let Some(op) = self.operator.take() {
            op.shutdown().await;
        }
    }

    /// Starts the operator with its metrics endpoint on a free loopback port, and
    /// returns that address.
    pub async fn start_with_endpoint(&mut self, concurrency: u16) -> SocketAddr {
        let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        self.start_operator(options(concurrency), Some(any_port), None)
            .await;
        self.operator
            .as_ref()
            .and_then(|op| op.metrics_addr)
            .expect("the endpoint listens")
    }

    async fn start_operator(
        &mut self,
        options: Options,
        metrics_addr: Option<SocketAddr>,
        leader_election: Option<LeaderElection>,
    ) {
        let config = OperatorConfig {
            options,
            metrics_addr,
            identity: "test".into(),
            leader_election,
        };
        // The operator's own client, with its User-Agent, as `run` and `dev` build it.
        let client =
            server_binder::runtime::client::operator_client(self.apiserver.client_config())
                .expect("the operator's client");
        let op = operator::start(client, config)
            .await
            .expect("operator starts");
        self.operator = Some(op);
    }

    /// Stops the controllers at once, as a crash would.
    pub async fn kill(&mut self) {
        if let Some(op) = self.operator.take() {
            op.kill().await;
        }
    }

    pub fn servers(&self) -> Api<Server> {
        Api::all(self.client.clone())
    }

    pub fn claims(&self) -> Api<ServerClaim> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub async fn create_server(&self, name: &str, labels: &[(&str, &str)]) -> Server {
        self.servers()
            .create(
                &PostParams::default(),
                &as_new(server(name).labelled(labels)),
            )
            .await
            .expect("server created")
    }

    pub async fn create_claim(&self, name: &str) -> ServerClaim {
        self.claims()
            .create(&PostParams::default(), &as_new(claim(name)))
            .await
            .expect("claim created")
    }

    pub async fn delete_claim(&self, name: &str) {
        self.claims()
            .delete(name, &DeleteParams::default())
            .await
            .expect("claim deleted");
    }

    /// Every server and claim, as of one moment: the two lists are two requests, so a
    /// write between them would show a claim Bound to a server not yet holding it (or
    /// the reverse). They are taken again until both carry the same resourceVersion
    /// (the embedded API server's is one counter for all kinds): nothing was written
    /// in between.
    pub async fn all(&self) -> (Vec<Server>, Vec<ServerClaim>) {
        let lp = ListParams::default();
        let claims_api = Api::<ServerClaim>::all(self.client.clone());
        let mut last = None;
        for _ in 0..200 {
            let servers = self.servers().list(&lp).await.expect("list servers");
            let claims = claims_api.list(&lp).await.expect("list claims");
            let consistent = servers.metadata.resource_version == claims.metadata.resource_version;
            last = Some((servers.items, claims.items));
            if consistent {
                break;
            }
        }
        last.expect("listed at least once")
    }

    /// Writes the controllers issued to servers and claims (and their status) so far,
    /// and how many of them the API server failed.
    pub fn writes(&self) -> (usize, usize) {
        let writes: Vec<_> = self
            .apiserver
            .request_log()
            .entries()
            .into_iter()
            .filter(|r| is_controller_write(r) && r.group == "metal.binder.dev")
            .collect();
        let failed = writes.iter().filter(|r| r.status >= 500).count();
        (writes.len(), failed)
    }

    pub fn write_matcher() -> RequestMatcher {
        controller_writes().group("metal.binder.dev")
    }
}

/// The operator's writes: merge patches from its client. A test's own patches, sent with
/// another User-Agent, are not among them.
pub fn controller_writes() -> RequestMatcher {
    RequestMatcher::any()
        .verb("patch")
        .user_agent(USER_AGENT_VALUE)
}

/// Whether the request log's `r` is one of the operator's writes ([`controller_writes`]).
pub fn is_controller_write(r: &RequestRecord) -> bool {
    r.verb == "patch" && r.user_agent == USER_AGENT_VALUE
}

/// The crash after every write of a scenario, one write point at a time: for k = 0, 1,
/// … (fewer than `most`), a fresh [`Env`] is `arrange`d, the API server fails every
/// write of the controllers from the k-th on, and `act` sets off the writes. Once a
/// write failed, the operator is killed (the crash) and restarted with `concurrency`
/// reconciles and no faults, and `converges(env, k)` waits for the recovery. The loop
/// ends at the first k the scenario reaches `done` (`done_what` names it) before any
/// write failed: there is no k-th write, every write point was covered. Returns how
/// many were.
pub async fn crash_after_each_write(
    most: usize,
    concurrency: u16,
    done_what: &str,
    arrange: impl AsyncFn(&mut Env),
    act: impl AsyncFn(&mut Env),
    done: impl AsyncFn(&Env) -> bool,
    converges: impl AsyncFn(&Env, usize),
) -> usize {
    let mut covered = 0;
    for k in 0..most {
        let mut env = Env::new().await;
        arrange(&mut env).await;
        let (before, _) = env.writes();
        env.apiserver
            .faults()
            .fail_after(Env::write_matcher(), k, 100_000, 500);
        act(&mut env).await;
        let what = format!("a failed write or {done_what}");
        eventually(&what, DEADLINE, || async {
            env.writes().1 > 0 || done(&env).await
        })
        .await;
        if env.writes().1 == 0 {
            break;
        }
        assert!(
            env.writes().0 > before,
            "the failed write is the controllers'"
        );
        covered += 1;
        env.kill().await;
        env.apiserver.faults().clear();
        env.start(concurrency).await;
        converges(&env, k).await;
    }
    covered
}

/// The default options with this many reconciles at once.
/// SIGTERM to a child process: the graceful stop Kubernetes asks of a pod.
pub fn send_sigterm(child: &std::process::Child) {
    let pid = child.id().to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status();
    assert!(sent.expect("kill runs").success(), "kill -TERM {pid}");
}

pub fn options(concurrency: u16) -> Options {
    Options {
        concurrency,
        ..Options::default()
    }
}

pub fn phase(c: &ServerClaim) -> Option<ClaimPhase> {
    c.status.as_ref().and_then(|s| s.phase)
}

pub fn bound_reason(c: &ServerClaim) -> Option<String> {
    c.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Bound")
        .map(|c| c.reason.clone())
}

/// The message of the claim's `Bound` condition ("" without one).
pub fn bound_message(c: &ServerClaim) -> String {
    let status = c.status.as_ref();
    let bound = status.and_then(|s| s.conditions.iter().find(|c| c.type_ == "Bound"));
    bound.map(|c| c.message.clone()).unwrap_or_default()
}

/// Invariants 1 and 2 of docs/binding.md on the objects as stored, as far as they hold
/// between a test's steps too: no two claims Bound to one server, each Bound claim's
/// server holds its uid, no orphaned reservation ([`invariants`]).
pub fn assert_invariants(servers: &[Server], claims: &[ServerClaim]) {
    let stored = Stored::new(servers, claims);
    let snap = stored.snapshot();
    let mut violations = invariants::one_claim_per_server(&snap);
    violations.extend(invariants::bound_claims_hold(&snap));
    violations.extend(invariants::no_orphaned_reservation(&snap));
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

/// The repository's example servers and claims, for `kubectl apply -f`.
pub const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/examples/");

/// Runs kubectl against `kubeconfig` and returns its standard output; fails the test if
/// kubectl fails.
pub fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// GET `http://addr{path}`: the status code and the body, or `None` if nothing
/// answers within 2 s.
pub async fn try_http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::client::legacy::Client as HttpClient;
    use hyper_util::rt::TokioExecutor;

    let client = HttpClient::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
    let uri: http::Uri = format!("http://{addr}{path}").parse().expect("a URI");
    let exchange = async {
        let response = client.get(uri).await.ok()?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.ok()?.to_bytes();
        Some((status, String::from_utf8_lossy(&body).into_owned()))
    };
    tokio::time::timeout(Duration::from_secs(2), exchange)
        .await
        .ok()
        .flatten()
}

/// Like [`try_http_get`], for an endpoint that must answer.
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    try_http_get(addr, path)
        .await
        .unwrap_or_else(|| panic!("nothing answers at http://{addr}{path}"))
}

/// A loopback port free a moment ago, for a child process that cannot report the port
/// it bound.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The poll helper every wait here goes through returns the value that satisfied the
/// check, not a later read.
#[tokio::test]
async fn wait_for_returns_the_value_that_satisfied_the_check() {
    let reads = std::sync::atomic::AtomicU32::new(0);
    let read = || async { reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst) };
    let seen = wait_for("the third read", DEADLINE, read, |n| *n == 2).await;
    assert_eq!(seen, 2);
}

/// A wait that times out says what it waited for and the last value it saw.
#[tokio::test]
#[should_panic(expected = "timed out after 50ms waiting for the answer; last seen: 41")]
async fn a_timed_out_wait_names_what_it_waited_for_and_the_last_value() {
    let timeout = Duration::from_millis(50);
    wait_for("the answer", timeout, || async { 41 }, |n| *n == 42).await;
}

/// `server-binder explain serverclaim NAME -o json`, the binary against this API server.
pub async fn explain_json(env: &Env, name: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = dir.path().join("kubeconfig");
    env.apiserver
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig written");
    let args = ["explain", "serverclaim", name, "-n", NS, "-o", "json"].map(String::from);
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_server-binder"))
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .expect("explain runs")
    })
    .await
    .expect("joined");
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// Creates `claim` in `namespace` (as a new object: what the API server assigns left
/// out); returns that namespace's claims.
pub async fn create_claim_in(
    env: &Env,
    namespace: &str,
    claim: ServerClaim,
) -> kube::Api<ServerClaim> {
    let api: kube::Api<ServerClaim> = kube::Api::namespaced(env.client.clone(), namespace);
    let mut claim = super::stage::as_new(claim);
    claim.metadata.namespace = Some(namespace.into());
    api.create(&kube::api::PostParams::default(), &claim)
        .await
        .unwrap_or_else(|e| panic!("claim created in {namespace}: {e}"));
    api
}
