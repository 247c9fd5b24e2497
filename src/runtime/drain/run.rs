//! The verbs from end to end: connect, read the servers, write each (or not, for a dry
//! run) and print what changed; for drain, the plan of each server's claim, then the
//! wait.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;

use super::args::{DrainArgs, VerbArgs};
use super::edit::{Verb, apply, edit};
use super::error::DrainError;
use super::plan::{self, Fate};
use super::read::{self, Selection};
use super::wait::{self, Watched};
use super::words;
use super::write::write;
use crate::api::Server;
use crate::binding::meta;
use crate::runtime::connect::{ConnectError, connect};

/// What the verbs send as their User-Agent, so audit logs tell their writes apart.
pub const USER_AGENT_VALUE: &str = concat!("server-binder-drain/", env!("CARGO_PKG_VERSION"));

/// What a dry run's lines end in, as kubectl's.
const DRY_RUN: &str = " (dry run)";

/// `cordon` or `uncordon`.
pub async fn simple(args: &VerbArgs, verb: Verb) -> Result<(), DrainError> {
    let (client, servers) = start(args).await?;
    let suffix = suffix(args);
    for server in servers {
        act(&client, &server, verb, args.dry_run, suffix).await?;
    }
    Ok(())
}

/// `drain`: the writes and the plan, server by server; then, with `--wait`, the wait.
pub async fn drain(args: &DrainArgs) -> Result<(), DrainError> {
    let (client, servers) = start(&args.verb).await?;
    let now = Timestamp::now();
    let verb = Verb::Drain {
        hard_deadline: args.grace.map(|grace| hard_deadline(now, grace)),
    };
    let catalog = read::classes(&client).await;
    if catalog.is_none() {
        println!(
            "(server classes cannot be listed: the deadlines count the claims' own tolerations only)"
        );
    }
    let budgets = read::budgets(&client).await;
    let suffix = suffix(&args.verb);
    let mut watched = Vec::new();
    let mut evicting_now: Vec<String> = Vec::new();
    for server in &servers {
        let server = act(&client, server, verb, args.verb.dry_run, suffix).await?;
        let Some(claim) = read::holder(&client, &server).await? else {
            println!("server/{} has no bound claim{suffix}", meta::name(&server));
            continue;
        };
        let effective = read::effective(&claim, catalog.as_ref());
        let copy = plan::stamped(&server, now);
        let planned = plan::plan(&copy, &claim, &effective);
        let hold = budgets
            .as_ref()
            .and_then(|b| plan::held(&planned, &effective, b, &evicting_now, now));
        if hold.is_none() && matches!(planned.fate, Fate::Evicted(_)) {
            evicting_now.push(planned.claim.clone());
        }
        for line in plan::lines(&planned, hold.as_ref(), now, suffix) {
            println!("{line}");
        }
        if planned.fate != Fate::AlreadyEvicted {
            watched.push(Watched {
                server: planned.server.clone(),
                namespace: meta::namespace(&claim).to_string(),
                name: meta::name(&claim).to_string(),
                uid: meta::uid(&claim).unwrap_or_default().to_string(),
                notice: planned.notice.clone(),
            });
        }
    }
    if !args.wait {
        return Ok(());
    }
    wait::wait(&client, watched, args.timeout, catalog.as_ref()).await?;
    for server in &servers {
        println!("server/{} drained", meta::name(server));
    }
    Ok(())
}

/// Connects, and reads the servers the arguments select. A selector matching none
/// says so, and there is nothing to do.
async fn start(args: &VerbArgs) -> Result<(Client, Vec<Server>), DrainError> {
    let selection = selection(args)?;
    let connected = connect(
        args.kubeconfig.as_deref(),
        args.context.as_deref(),
        USER_AGENT_VALUE,
    );
    let (client, _) = connected.await.map_err(|e| match e {
        ConnectError::Kubeconfig(m) => DrainError::Usage(m),
        ConnectError::Client(m) => DrainError::Cluster(m),
    })?;
    let servers = read::servers(&client, &selection).await?;
    if let (true, Selection::Selector(s)) = (servers.is_empty(), &selection) {
        eprintln!("No servers match the selector {s:?}.");
    }
    Ok((client, servers))
}

fn selection(args: &VerbArgs) -> Result<Selection, DrainError> {
    match (&args.selector, args.servers.is_empty()) {
        (Some(s), true) if s.trim().is_empty() => Err(DrainError::Usage(
            "an empty selector selects every server: name the servers, or give a selector \
             that says which"
                .into(),
        )),
        (Some(s), true) => Ok(Selection::Selector(s.clone())),
        (None, false) => Ok(Selection::Names(args.servers.clone())),
        _ => Err(DrainError::Usage(
            "name the servers, or select them with -l SELECTOR (not both)".into(),
        )),
    }
}

fn suffix(args: &VerbArgs) -> &'static str {
    if args.dry_run { DRY_RUN } else { "" }
}

/// Applies `verb` to `server` (or, for a dry run, computes what it would write), prints
/// what it did, and returns the server as the verb leaves it.
async fn act(
    client: &Client,
    server: &Server,
    verb: Verb,
    dry_run: bool,
    suffix: &str,
) -> Result<Server, DrainError> {
    let name = meta::name(server).to_string();
    let (after, edit) = if dry_run {
        let edit = edit(verb, &server.spec);
        let mut after = server.clone();
        after.spec = apply(&edit, &server.spec);
        (after, edit)
    } else {
        let written = write(client, &name, verb).await?;
        (written.server, written.edit)
    };
    for said in &edit.said {
        println!("{}", words::said(&name, said, suffix));
    }
    Ok(after)
}

/// `now` plus `grace`, rounded up to a whole second (a stored time has no fraction).
fn hard_deadline(now: Timestamp, grace: SignedDuration) -> Timestamp {
    let at = now.checked_add(grace).unwrap_or(Timestamp::MAX);
    let second = at.as_second();
    let up = if at.subsec_nanosecond() > 0 {
        second + 1
    } else {
        second
    };
    Timestamp::from_second(up).unwrap_or(Timestamp::MAX)
}
