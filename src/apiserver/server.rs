//! Starting and stopping the server, and the handle tests and `server-binder dev` hold.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use parking_lot::Mutex;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Error;
use super::builtin::{self, INITIAL_NAMESPACES};
use super::faults::{FaultInjector, Faults, RequestLog, RequestRecord};
use super::kubeconfig;
use super::ops::{self, WriteOpts};
use super::registry::storage_key;
use super::store::State;

/// How to run the server.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen (plain HTTP). Default `127.0.0.1:0`: loopback, a free port.
    pub listen: SocketAddr,
    /// How many changes are kept for watches resuming from a resourceVersion.
    pub watch_history: usize,
    /// Largest accepted request body (the real server's limit is 3 MiB).
    pub max_body_bytes: usize,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// While events keep coming, a watch writes to its connection at most once per this
    /// long, each write carrying every event queued meanwhile; the first event after a
    /// quiet spell is written at once. Trades at most this much added latency, under
    /// load only, for far fewer writes (system calls) per event. `Duration::ZERO`:
    /// write each burst as soon as it is seen, as the real server does.
    pub watch_coalesce: Duration,
    /// How many requests the request log keeps (oldest dropped first), so a long-running
    /// dev server does not grow without bound.
    pub request_log_capacity: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            watch_history: 10_000,
            max_body_bytes: 3 * 1024 * 1024,
            bookmark_interval: Duration::from_secs(5),
            watch_coalesce: Duration::from_millis(5),
            request_log_capacity: 100_000,
        }
    }
}

impl Config {
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }
    pub fn watch_history(mut self, events: usize) -> Self {
        self.watch_history = events;
        self
    }
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }
    pub fn bookmark_interval(mut self, every: Duration) -> Self {
        self.bookmark_interval = every;
        self
    }
    pub fn watch_coalesce(mut self, window: Duration) -> Self {
        self.watch_coalesce = window;
        self
    }
    pub fn request_log_capacity(mut self, entries: usize) -> Self {
        self.request_log_capacity = entries;
        self
    }
}

/// State shared by the HTTP handlers and the handle.
pub(crate) struct Shared {
    pub state: Mutex<State>,
    pub config: Config,
    /// `host:port`, for discovery's `serverAddressByClientCIDRs`.
    pub address: String,
    pub faults: Faults,
    pub log: Mutex<std::collections::VecDeque<RequestRecord>>,
    /// Bumped to end every open watch.
    pub watch_epoch: tokio::sync::watch::Sender<u64>,
    pub shutdown: CancellationToken,
}

/// The embedded API server.
pub struct ApiServer;

impl ApiServer {
    /// Binds, seeds the built-in kinds and the initial namespaces, and serves in the
    /// background until [`ApiServerHandle::shutdown`].
    pub async fn start(config: Config) -> Result<ApiServerHandle, Error> {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| Error::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            addr: config.listen,
            source,
        })?;
        let mut state = State::new(config.watch_history);
        builtin::register(&mut state.registry);
        let ns_def = state
            .registry
            .lookup("", "v1", "namespaces")
            .ok_or_else(|| Error::Api {
                code: 500,
                message: "namespaces are not registered".into(),
            })?;
        for ns in INITIAL_NAMESPACES {
            let obj =
                json!({"metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}});
            ops::create(&mut state, &ns_def, None, obj, &WriteOpts::default()).map_err(|e| {
                Error::Api {
                    code: e.code,
                    message: e.message,
                }
            })?;
        }
        debug_assert!(
            state
                .get(&storage_key("", "namespaces"), "", "default")
                .is_some()
        );
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            config,
            address: addr.to_string(),
            faults: Faults::default(),
            log: Mutex::new(std::collections::VecDeque::new()),
            watch_epoch: tokio::sync::watch::channel(0).0,
            shutdown: CancellationToken::new(),
        });
        let app = axum::Router::new()
            .fallback(super::http::handle)
            .with_state(shared.clone());
        let token = shared.shutdown.clone();
        // As Go's net/http (and so the real API server) does: no Nagle delay, so that a
        // watch event or a response is not held back waiting for the peer's ACK.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY: {e}");
            }
        });
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(token.cancelled_owned())
                .await
        });
        tracing::info!(%addr, "embedded API server listening (development and tests only: no authentication)");
        Ok(ApiServerHandle { shared, addr, task })
    }
}

/// A running server.
pub struct ApiServerHandle {
    shared: Arc<Shared>,
    addr: SocketAddr,
    task: JoinHandle<std::io::Result<()>>,
}

impl std::fmt::Debug for ApiServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServerHandle")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ApiServerHandle {
    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kube client for this server, default namespace `default`. Must be called
    /// within a Tokio runtime.
    pub fn client(&self) -> kube::Client {
        match self.try_client() {
            Ok(c) => c,
            Err(e) => panic!("a client for {} cannot be built: {e}", self.url()),
        }
    }

    /// Like [`Self::client`], without panicking.
    pub fn try_client(&self) -> Result<kube::Client, Error> {
        Ok(kube::Client::try_from(self.client_config())?)
    }

    /// The client configuration [`Self::client`] uses, for a caller that wants to add
    /// to it (headers, timeouts) before building its own client.
    pub fn client_config(&self) -> kube::Config {
        let uri: http::Uri = self.url().parse().expect("the server's own URL parses");
        let mut config = kube::Config::new(uri);
        config.default_namespace = "default".into();
        config
    }

    /// A kubeconfig with one context for this server, namespace `default`.
    pub fn kubeconfig(&self) -> kube::config::Kubeconfig {
        kubeconfig::kubeconfig(&self.url())
    }

    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), Error> {
        let yaml = kubeconfig::to_yaml(&self.kubeconfig())?;
        std::fs::write(path, yaml).map_err(|source| Error::WriteKubeconfig {
            path: path.to_owned(),
            source,
        })
    }

    pub fn faults(&self) -> FaultInjector {
        FaultInjector {
            shared: self.shared.clone(),
        }
    }

    pub fn request_log(&self) -> RequestLog {
        RequestLog {
            shared: self.shared.clone(),
        }
    }

    /// Installs a CRD, exactly as POSTing it would.
    pub async fn install_crd(&self, crd: &CustomResourceDefinition) -> Result<(), Error> {
        let obj = serde_json::to_value(crd).map_err(|e| Error::Api {
            code: 400,
            message: e.to_string(),
        })?;
        let mut st = self.shared.state.lock();
        let def = st
            .registry
            .lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .ok_or_else(|| Error::Api {
                code: 500,
                message: "CRDs are not registered".into(),
            })?;
        ops::create(&mut st, &def, None, obj, &WriteOpts::default())
            .map(drop)
            .map_err(|e| Error::Api {
                code: e.code,
                message: e.message,
            })
    }

    /// Stops cleanly: ends every watch, stops accepting, waits (briefly) for requests in
    /// flight.
    pub async fn shutdown(self) {
        self.shared.shutdown.cancel();
        let mut task = self.task;
        if tokio::time::timeout(Duration::from_secs(5), &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
    }
}
