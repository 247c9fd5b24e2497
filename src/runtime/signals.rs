//! Waiting for the signals that end the process gracefully.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// SIGINT (Ctrl-C) and SIGTERM (what Kubernetes sends a pod it stops), caught from the
/// moment this is made: one that arrives before anybody waits is kept for [`Self::recv`]
/// instead of ending the process where it stands (the default action), which could be
/// between a write and what follows it.
pub struct Termination {
    term: Signal,
    int: Signal,
}

impl Termination {
    pub fn catch() -> std::io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// Resolves on the first SIGINT or SIGTERM since [`Self::catch`].
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

/// Resolves on SIGINT or SIGTERM, caught from its first poll.
pub async fn terminated() -> std::io::Result<()> {
    Termination::catch()?.recv().await;
    Ok(())
}
