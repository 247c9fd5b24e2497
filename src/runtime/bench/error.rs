//! How a benchmark fails. A file of its own, below the benchmarks, so that they do not
//! reach back up into `bench/mod.rs` for it.

use crate::runtime::crds::InstallCrdError;

/// Why a benchmark failed: it could not run, or what it measured shows the component
/// broken (watches that missed events). Figures that are merely bad are no error.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("benchmark: {0}")]
    Failed(String),
    #[error(transparent)]
    ApiServer(#[from] crate::apiserver::Error),
    #[error("benchmark: {0}")]
    InstallCrd(#[from] InstallCrdError),
    /// `bench apiserver`: a watch missed events (the report above says which).
    #[error("the benchmark's watchers did not all see every write (see above)")]
    EventsMissed,
    /// `--json`: the report did not serialize.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}
