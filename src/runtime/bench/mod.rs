//! `server-binder bench`: load generators that print their figures.
//!
//! They run against the embedded API server on loopback, so they exist only with the
//! `embedded-apiserver` feature.

pub mod apiserver;
pub mod bind;
mod error;

use super::cli::{BenchTarget, BindArgs};

pub use error::BenchError;

/// Runs the benchmark the command line chose and prints its report.
pub async fn run(target: BenchTarget) -> Result<(), String> {
    match target {
        BenchTarget::Apiserver {
            objects,
            writers,
            watchers,
            duration_secs,
        } => run_apiserver(objects, writers, watchers, duration_secs).await,
        BenchTarget::Bind(args) => run_bind(args).await,
    }
}

async fn run_apiserver(
    objects: u64,
    writers: u64,
    watchers: u64,
    duration_secs: u64,
) -> Result<(), String> {
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

/// Prints the report as a table, or as JSON with `--json`. Claims left unbound are a
/// figure, not a failure.
async fn run_bind(args: BindArgs) -> Result<(), String> {
    let config = bind::BindConfig {
        servers: args.servers as usize,
        claims: args.claims as usize,
        mix: args.mix,
        concurrency: args.concurrency,
        rate: args.rate,
        namespaces: args.namespaces as usize,
        stall: std::time::Duration::from_secs(args.stall_secs),
        ceiling: std::time::Duration::from_secs(args.ceiling_secs),
        fresh_servers: args.fresh_servers,
        churn: (args.churn_secs > 0).then(|| bind::churn::Churn {
            duration: std::time::Duration::from_secs(args.churn_secs),
            rate: args.churn_rate,
        }),
    };
    let report = bind::run(config).await.map_err(|e| e.to_string())?;
    if args.json {
        let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        println!("{json}");
    } else {
        println!("{report}");
    }
    Ok(())
}
