//! `server-binder bench`: load generators that print their figures.
//!
//! They run against the embedded API server on loopback, so they exist only with the
//! `embedded-apiserver` feature.

pub mod apiserver;

use super::cli::BenchTarget;

/// A benchmark that could not run (as opposed to one that ran and measured badly).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("benchmark: {0}")]
    Failed(String),
    #[error(transparent)]
    ApiServer(#[from] crate::apiserver::Error),
}

/// Runs the benchmark the command line chose and prints its report.
pub async fn run(target: BenchTarget) -> Result<(), String> {
    let BenchTarget::Apiserver {
        objects,
        writers,
        watchers,
        duration_secs,
    } = target;
    let config = apiserver::BenchConfig {
        objects: objects as usize,
        writers: writers as usize,
        watchers: watchers as usize,
        duration: std::time::Duration::from_secs(duration_secs),
        ..apiserver::BenchConfig::default()
    };
    let report = apiserver::run(config).await.map_err(|e| e.to_string())?;
    println!("{report}");
    if report.all_seen() {
        Ok(())
    } else {
        Err("the benchmark's watchers did not all see every write (see above)".into())
    }
}
