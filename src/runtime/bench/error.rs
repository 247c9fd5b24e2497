//! How a benchmark fails. A file of its own, below the benchmarks, so that they do not
//! reach back up into `bench/mod.rs` for it.

/// A benchmark that could not run (as opposed to one that ran and measured badly).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("benchmark: {0}")]
    Failed(String),
    #[error(transparent)]
    ApiServer(#[from] crate::apiserver::Error),
}
