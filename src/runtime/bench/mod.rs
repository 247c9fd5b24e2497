//! `server-binder bench`: load generators that print their figures.
//!
//! They run against the embedded API server on loopback, so they exist only with the
//! `embedded-apiserver` feature.

pub mod apiserver;
pub mod bind;
mod error;

pub use error::BenchError;

#[derive(Debug, clap::Subcommand)]
pub enum BenchTarget {
    /// The embedded API server, in-process on loopback: concurrent creates and updates
    /// over HTTP while many watches count every event. Build with --release.
    Apiserver {
        /// Objects to create (and then update).
        #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        objects: u64,
        /// Concurrent writers.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1024))]
        writers: u64,
        /// Concurrent watches, each counting every event.
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(0..=10_000))]
        watchers: u64,
        /// How long to update the objects once they all exist.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
        duration_secs: u64,
    },
    /// The operator binding a generated fleet: the embedded API server in-process on
    /// loopback, `server-binder run` as a child process. Prints time to all Bound,
    /// binds/s, writes per bind, bind latency, the operator's peak RSS and efficiency
    /// against the API server's write ceiling. Build with --release. With
    /// SERVER_BINDER_BENCH_OPERATOR_WRAPPER set (e.g. `heaptrack -o /tmp/operator`), the
    /// operator runs under that command, for profilers that must start the process; the
    /// CPU and RSS figures are then the wrapper's.
    Bind(BindArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct BindArgs {
    /// Servers to create.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub servers: u64,
    /// Claims to create.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub claims: u64,
    /// How servers are labelled and what claims ask for.
    #[arg(long, value_enum, default_value_t = bind::fleet::Mix::Any)]
    pub mix: bind::fleet::Mix,
    /// With --mix classes-quotas, how large each quota is. `demand`: one per namespace
    /// and class, letting 4 in 5 of its claims bind. `fleet`: one per namespace over
    /// every class, letting every claim bind (with --namespaces 1, one quota charges the
    /// whole fleet).
    #[arg(long, value_enum, default_value_t = bind::fleet::QuotaScale::Demand)]
    pub quota_scale: bind::fleet::QuotaScale,
    /// The operator's --concurrency (reconciles each controller runs at once).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: u16,
    /// Create claims at this many per second once the operator is ready and idle (for
    /// latency); without it, every claim exists before the operator starts (for
    /// throughput).
    #[arg(long, value_parser = positive_rate)]
    pub rate: Option<f64>,
    /// Namespaces the claims are spread over (tenant-0, tenant-1, ...), as --tenants says.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub namespaces: u64,
    /// How claims are spread over the namespaces. `even`: round-robin. `flood`: tenant-0
    /// has 4 in 5 claims, created at once; the other namespaces (--namespaces 2 or more)
    /// share the rest round-robin, created at --rate per second in all. The report then
    /// gives each namespace's binds and waits, and Jain's fairness index while servers
    /// are scarce (use fewer servers than claims, and --hold-ms).
    #[arg(long, value_enum, default_value_t = bind::tenants::Tenants::Even)]
    pub tenants: bind::tenants::Tenants,
    /// Delete each claim this many milliseconds after it is seen Bound, as a tenant
    /// gives a server back after using it: with fewer servers than claims, servers free
    /// at a steady pace and binds go on. 0: claims are kept.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    pub hold_ms: u64,
    /// Stop when no claim was created or bound for this many seconds; claims still
    /// unbound are reported (not an error).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub stall_secs: u64,
    /// How long to measure the API server's write ceiling.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub ceiling_secs: u64,
    /// Servers the operator has never seen: its first status on each is written while
    /// it binds, and counted. Without it, a first operator registers the fleet (every
    /// server Available) and is stopped before the claims are created, as in a fleet
    /// whose servers exist before its claims.
    #[arg(long)]
    pub fresh_servers: bool,
    /// Once the bind phase is over, cordon and uncordon servers for this many seconds
    /// while the unbound claims wait, and report the claim status writes per waiting
    /// claim per minute (use more claims than servers).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub churn_secs: u64,
    /// Server changes per second during --churn-secs.
    #[arg(long, default_value_t = 20.0, value_parser = positive_rate)]
    pub churn_rate: f64,
    /// The embedded API server's watch coalescing: while events keep coming, a watch
    /// writes at most once per this many milliseconds, each write carrying what queued
    /// meanwhile (fewer system calls, up to this much latency per event delivered). 0:
    /// each event at once, as kube-apiserver does: use it with --rate to measure latency.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub watch_coalesce_ms: u64,
    /// Print the figures as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// A `--rate` or `--churn-rate` value (clap shows the message).
fn positive_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "`{s}` is not a positive number of claims per second"
        )),
    }
}

/// Runs the benchmark the command line chose and prints its report.
pub async fn run(target: BenchTarget) -> Result<(), BenchError> {
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
) -> Result<(), BenchError> {
    let config = apiserver::BenchConfig {
        objects: objects as usize,
        writers: writers as usize,
        watchers: watchers as usize,
        duration: std::time::Duration::from_secs(duration_secs),
        ..apiserver::BenchConfig::default()
    };
    let report = apiserver::run(config).await?;
    println!("{report}");
    if report.all_seen() {
        Ok(())
    } else {
        Err(BenchError::EventsMissed)
    }
}

/// Prints the report as a table, or as JSON with `--json`. Claims left unbound are a
/// figure, not a failure.
async fn run_bind(args: BindArgs) -> Result<(), BenchError> {
    let config = bind::BindConfig {
        servers: args.servers as usize,
        claims: args.claims as usize,
        mix: args.mix,
        quota_scale: args.quota_scale,
        concurrency: args.concurrency,
        rate: args.rate,
        namespaces: args.namespaces as usize,
        tenants: args.tenants,
        hold: (args.hold_ms > 0).then(|| std::time::Duration::from_millis(args.hold_ms)),
        stall: std::time::Duration::from_secs(args.stall_secs),
        ceiling: std::time::Duration::from_secs(args.ceiling_secs),
        fresh_servers: args.fresh_servers,
        watch_coalesce: std::time::Duration::from_millis(args.watch_coalesce_ms),
        churn: (args.churn_secs > 0).then(|| bind::churn::Churn {
            duration: std::time::Duration::from_secs(args.churn_secs),
            rate: args.churn_rate,
        }),
    };
    let report = bind::run(config).await?;
    if args.json {
        let json = serde_json::to_string_pretty(&report)?;
        println!("{json}");
    } else {
        println!("{report}");
    }
    Ok(())
}
