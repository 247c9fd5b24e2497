//! The controllers' one error type. [`Error::metric_label`] labels
//! `server_binder_reconcile_errors_total{error}`; [`requeue_after`] is both controllers'
//! error policy.

use kube::runtime::controller::Action;
use thiserror::Error;

use super::metrics::{ControllerKind, Metrics};
use super::options::{CONFLICT_RETRY, ERROR_RETRY};

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
}

impl Error {
    /// The `error` label of `reconcile_errors_total`, or `None` for a conflict: the
    /// optimistic lock at work, not a failure (`api_writes_total{result="conflict"}`
    /// counts it, and no alert should fire on it).
    pub fn metric_label(&self) -> Option<&'static str> {
        match self {
            Error::Conflict { .. } => None,
            Error::Api { .. } => Some("api"),
        }
    }

    /// What the API server said when it refused a write for what the object is, not for
    /// how busy it is or what it knows of the writer: 400, 403, 413 or 422 (a size limit,
    /// validation, an admission webhook). Retrying the same write cannot succeed until
    /// the object changes. `None` for a conflict, a throttle, a server error or a lost
    /// answer.
    pub fn refusal(&self) -> Option<String> {
        let Error::Api { source, .. } = self else {
            return None;
        };
        let kube::Error::Api(status) = source else {
            return None;
        };
        matches!(status.code, 400 | 403 | 413 | 422).then(|| api_message(source))
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

/// Both controllers' error policy: after a conflict, decide again soon (the watch is
/// bringing the newer version, and its event usually re-triggers the object anyway);
/// after any other failure, count it and retry later. Runs in the reconcile's span.
pub(crate) fn requeue_after(kind: ControllerKind, error: &Error, metrics: &Metrics) -> Action {
    match error.metric_label() {
        None => {
            tracing::debug!(%error, "conflict; deciding again");
            Action::requeue(CONFLICT_RETRY)
        }
        Some(label) => {
            metrics.reconcile_error(kind, label);
            tracing::warn!(%error, "reconcile failed; retrying");
            Action::requeue(ERROR_RETRY)
        }
    }
}

pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the API server said (its Status message), or what failed on the way.
pub(crate) fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => {
            format!("{} ({})", status.message, status.code)
        }
        other => other.to_string(),
    }
}
