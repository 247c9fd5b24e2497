//! Why explain could not explain, and the exit code that says so. A file of its own,
//! below every part of explain, so that none of them reaches back up into
//! `explain/mod.rs` for it.

/// Exit codes, as `--help` lists them.
pub const EXIT_NOT_FOUND: u8 = 1;
pub const EXIT_CLUSTER: u8 = 3;

/// Why explain could not explain.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("{0}")]
    Usage(String),
    #[error("Error from server (NotFound): {0}")]
    NotFound(String),
    #[error("{0}")]
    Cluster(String),
}

impl ExplainError {
    pub fn code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::NotFound(_) => EXIT_NOT_FOUND,
            Self::Cluster(_) => EXIT_CLUSTER,
        }
    }
}
