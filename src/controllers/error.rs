//! The controllers' one error type. Each variant's [`Error::metric_label`] labels
//! `server_binder_reconcile_errors_total{error}`.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    /// A write was refused because the object changed since it was read. Not a failure:
    /// the watch brings the new version and the reconcile decides again.
    #[error("{resource} {name} changed since it was read")]
    Conflict {
        resource: &'static str,
        name: String,
    },
    /// The API server refused or failed a request.
    #[error("{verb} {resource} {name}: {source}")]
    Api {
        verb: &'static str,
        resource: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// A watch cache this controller depends on never became ready.
    #[error("the {0} cache is not ready")]
    CacheNotReady(&'static str),
}

impl Error {
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Conflict { .. } => "conflict",
            Error::Api { .. } => "api",
            Error::CacheNotReady(_) => "cache_not_ready",
        }
    }

    /// Classifies a failed write: 409 Conflict is the optimistic lock at work.
    pub(crate) fn from_write(
        verb: &'static str,
        resource: &'static str,
        name: &str,
        source: kube::Error,
    ) -> Self {
        if is_conflict(&source) {
            Error::Conflict {
                resource,
                name: name.to_string(),
            }
        } else {
            Error::Api {
                verb,
                resource,
                name: name.to_string(),
                source,
            }
        }
    }
}

pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
