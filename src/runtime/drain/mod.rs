//! `server-binder cordon`, `uncordon` and `drain`: kubectl's verbs for nodes, for
//! servers. Cordon sets `spec.unclaimable`; uncordon clears it and removes the drain
//! taint; drain cordons, adds the drain taint (effect `Evict`, a hard deadline with
//! `--grace`), shows whom it evicts and when by the controllers' own rule, and with
//! `--wait` waits until they are off. Also kubectl plugin verbs: installed as
//! `kubectl-server_binder`, they run as `kubectl server-binder drain …`
//! (docs/operations.md, "Taking a server back").

mod args;
mod duration;
mod edit;
mod error;
mod plan;
mod read;
mod run;
mod wait;
mod words;
mod write;

use std::process::ExitCode;

pub use args::{DrainArgs, VerbArgs};
pub use edit::Verb;
pub use error::{DrainError, EXIT_CODES_HELP, EXIT_TIMED_OUT, EXIT_USAGE};
pub use run::USER_AGENT_VALUE;
pub use write::FIELD_MANAGER;

/// `cordon`: the exit code says how it went.
pub async fn cordon(args: VerbArgs) -> ExitCode {
    finish(Verb::Cordon, run::simple(&args, Verb::Cordon).await)
}

/// `uncordon`: the exit code says how it went.
pub async fn uncordon(args: VerbArgs) -> ExitCode {
    finish(Verb::Uncordon, run::simple(&args, Verb::Uncordon).await)
}

/// `drain`: the exit code says how it went.
pub async fn drain(args: DrainArgs) -> ExitCode {
    let verb = Verb::Drain {
        hard_deadline: None,
    };
    finish(verb, run::drain(&args).await)
}

fn finish(verb: Verb, result: Result<(), DrainError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("server-binder {}: {e}", verb.name());
            ExitCode::from(e.code())
        }
    }
}
