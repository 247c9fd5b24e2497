//! Why cordon, uncordon or drain did not finish, and the exit code that says so: those
//! of `explain`, and one more for a wait that ran out of time. A file of its own, below
//! every part of the verbs, so that none of them reaches back up into `drain/mod.rs`.

use crate::runtime::explain::{EXIT_CLUSTER, EXIT_NOT_FOUND};

/// Bad usage, as clap exits on its own errors.
pub const EXIT_USAGE: u8 = 2;
/// `--wait` ran past `--timeout` with claims still bound.
pub const EXIT_TIMED_OUT: u8 = 4;

/// What `--help` says of the exit codes.
pub const EXIT_CODES_HELP: &str = "Exit codes: 0 done (a selector matching no server \
included); 1 a named server does not exist (nothing is written); 2 bad usage; 3 the \
cluster cannot be reached, the CRDs are not installed, or the request is forbidden; \
4 --wait timed out with claims still bound (each is named, with why).";

#[derive(Debug, thiserror::Error)]
pub enum DrainError {
    #[error("{0}")]
    Usage(String),
    #[error("Error from server (NotFound): {0}")]
    NotFound(String),
    #[error("{0}")]
    Cluster(String),
    #[error("{0}")]
    TimedOut(String),
}

impl DrainError {
    pub fn code(&self) -> u8 {
        match self {
            Self::Usage(_) => EXIT_USAGE,
            Self::NotFound(_) => EXIT_NOT_FOUND,
            Self::Cluster(_) => EXIT_CLUSTER,
            Self::TimedOut(_) => EXIT_TIMED_OUT,
        }
    }

    /// The error an API request of `what` ended in, in words: a missing CRD and a
    /// forbidden request say what to do.
    pub fn from_api(what: &str, e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) if s.code == 404 => Self::Cluster(format!(
                "cannot {what}: the servers.metal.binder.dev CRD is not installed in this \
                 cluster: install the CRDs with `kubectl apply -f manifests/crds/`"
            )),
            kube::Error::Api(s) if s.code == 403 => Self::Cluster(format!(
                "cannot {what}: forbidden ({}); the verbs need get, list and patch on \
                 servers, get on serverclaims, list on serverclasses and namespaces",
                bounded(&s.message)
            )),
            kube::Error::Api(s) if s.code == 400 => {
                Self::Usage(format!("cannot {what}: {}", bounded(&s.message)))
            }
            kube::Error::Api(s) => Self::Cluster(format!(
                "cannot {what}: the API server answered {} ({})",
                s.code,
                bounded(&s.message)
            )),
            other => Self::Cluster(format!(
                "cannot reach the API server to {what}: {}",
                bounded(&other.to_string())
            )),
        }
    }
}

/// At most 300 characters of `text`: a message read from the cluster (a condition, an
/// API error) printed as it is would be as long as whoever wrote it chose.
pub fn bounded(text: &str) -> String {
    const MOST: usize = 300;
    match text.char_indices().nth(MOST) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_message_is_cut_on_a_character_boundary() {
        assert_eq!(bounded("short"), "short");
        let long = "é".repeat(400);
        let cut = bounded(&long);
        assert_eq!(cut.chars().count(), 301);
        assert!(cut.ends_with('…'));
    }
}
