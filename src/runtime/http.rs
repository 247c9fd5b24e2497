//! The metrics address: `/metrics` (Prometheus text format), `/healthz` (the process is
//! alive) and `/readyz` (the caches are synced; with leader election a synced standby is
//! ready too, so a rolling update never waits on the lease).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::controllers::{Caches, Metrics};

#[derive(Clone)]
struct Endpoints {
    metrics: Metrics,
    caches: Arc<Caches>,
}

/// Binds `addr` (so a taken port fails at startup, not later) and returns the bound
/// address and the server future, which ends once `shutdown` is cancelled.
pub async fn bind(
    addr: SocketAddr,
    metrics: Metrics,
    caches: Arc<Caches>,
    shutdown: CancellationToken,
) -> std::io::Result<(SocketAddr, impl Future<Output = std::io::Result<()>>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(Endpoints { metrics, caches });
    let serve = async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
    };
    Ok((bound, serve))
}

async fn metrics_text(State(e): State<Endpoints>) -> impl IntoResponse {
    e.metrics
        .refresh_inventory(&e.caches.claims.read(), &e.caches.servers.read());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        e.metrics.encode(),
    )
}

async fn readyz(State(e): State<Endpoints>) -> impl IntoResponse {
    if e.caches.has_synced() {
        (StatusCode::OK, "ok\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced\n")
    }
}
