//! Waiting for the signals that end the process gracefully.

/// Resolves on SIGINT (Ctrl-C) or SIGTERM (what Kubernetes sends a pod it stops).
pub async fn terminated() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}
