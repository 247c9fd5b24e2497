//! The metrics address: `/metrics` (Prometheus text format), `/healthz` (the process is
//! alive) and `/readyz` (the caches are synced and, with leader election, this process
//! leads or is a healthy standby: its lease manager runs and reads the Lease; so a
//! rolling update never waits on the lease).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::leader::ElectionStatus;
use crate::controllers::{Metrics, SharedInformer};

#[derive(Clone)]
struct Endpoints {
    metrics: Metrics,
    informer: Arc<SharedInformer>,
    election: Option<ElectionStatus>,
}

/// Binds `addr` (so a taken port fails at startup, not later) and returns the bound
/// address and the server future, which ends once `shutdown` is cancelled.
pub async fn bind(
    addr: SocketAddr,
    metrics: Metrics,
    informer: Arc<SharedInformer>,
    election: Option<ElectionStatus>,
    shutdown: CancellationToken,
) -> std::io::Result<(SocketAddr, impl Future<Output = std::io::Result<()>>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(Endpoints {
            metrics,
            informer,
            election,
        });
    let serve = async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
    };
    Ok((bound, serve))
}

async fn metrics_text(State(e): State<Endpoints>) -> impl IntoResponse {
    let binder = e.informer.read();
    e.metrics
        .refresh_inventory(binder.world().claims(), binder.world().servers());
    e.metrics.refresh_classes(
        binder.world().classes(),
        binder.world().claims(),
        binder.world().servers(),
    );
    e.metrics.refresh_quotas(binder.world().quotas());
    e.metrics
        .refresh_pending(binder.world().classes(), binder.world().claims());
    drop(binder);
    e.metrics.refresh_watch_events(&e.informer.received());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        e.metrics.encode(),
    )
}

async fn readyz(State(e): State<Endpoints>) -> impl IntoResponse {
    if !e.informer.has_synced() {
        return (StatusCode::SERVICE_UNAVAILABLE, "informer not synced\n");
    }
    match &e.election {
        None => (StatusCode::OK, "ok\n"),
        Some(election) if election.is_leading() => (StatusCode::OK, "ok: leading\n"),
        Some(election) if election.is_healthy() => (StatusCode::OK, "ok: standby\n"),
        Some(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "leader election not running: cannot reach the Lease\n",
        ),
    }
}
