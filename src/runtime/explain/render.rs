//! How an explanation is printed: text for people, JSON or YAML for scripts.

use std::fmt::Write;

use serde::Serialize;

use super::claim::ClaimExplanation;
use super::error::ExplainError;
use super::server::ServerExplanation;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Text,
    Json,
    Yaml,
}

pub fn output<E: Serialize>(
    e: &E,
    format: Output,
    text: fn(&E) -> String,
) -> Result<String, ExplainError> {
    let failed = |e: String| ExplainError::Cluster(format!("cannot print the explanation: {e}"));
    match format {
        Output::Text => Ok(text(e)),
        Output::Json => serde_json::to_string_pretty(e)
            .map(|s| s + "\n")
            .map_err(|e| failed(e.to_string())),
        Output::Yaml => serde_saphyr::to_string(e).map_err(|e| failed(e.to_string())),
    }
}

pub fn claim_text(e: &ClaimExplanation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ServerClaim {}/{} (uid {})",
        e.namespace, e.name, e.uid
    );
    let _ = writeln!(out, "Phase:      {} / {}", e.phase, e.reason);
    if !e.message.is_empty() {
        let _ = writeln!(out, "Message:    {}", e.message);
    }
    let server = e.server_ref.as_deref().unwrap_or("(none)");
    let _ = writeln!(out, "ServerRef:  {server}, chosen by {}", e.chosen_by);
    if let Some(class) = &e.class {
        let _ = writeln!(out, "Class:      {class}");
    }
    for quota in &e.quotas {
        let _ = writeln!(out, "Quota:      {quota}");
    }
    if let Some(t) = &e.bound_time {
        let _ = writeln!(out, "Bound since {t}");
    }
    let _ = writeln!(out, "Now:        {}", e.row);
    if let Some(summary) = &e.summary {
        let _ = writeln!(out, "Why:        {summary}");
    }
    if e.partial {
        let _ = writeln!(
            out,
            "(claims of other namespaces could not be listed: the fair order is judged from this namespace)"
        );
    }
    if !e.servers.is_empty() {
        let _ = writeln!(out, "\nServers, best candidates first:");
        let width = e
            .servers
            .iter()
            .map(|v| v.name.len())
            .max()
            .unwrap_or(4)
            .max(6);
        let _ = writeln!(out, "  {:width$}  VERDICT", "SERVER");
        for v in &e.servers {
            let verdict = match (&v.reason, v.picked) {
                (_, true) => "can serve it: a pick takes it now".to_string(),
                (None, false) => "can serve it".to_string(),
                (Some(r), _) => r.clone(),
            };
            let _ = writeln!(out, "  {:width$}  {verdict}", v.name);
        }
    }
    out
}

pub fn server_text(e: &ServerExplanation) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Server {}", e.name);
    let _ = writeln!(out, "Phase:      {} / {}", e.phase, e.reason);
    if !e.message.is_empty() {
        let _ = writeln!(out, "Message:    {}", e.message);
    }
    let _ = writeln!(
        out,
        "Holder:     {}",
        e.holder.as_deref().unwrap_or("(none)")
    );
    if let Some(t) = &e.since {
        let _ = writeln!(out, "Since:      {t}");
    }
    if let Some(t) = &e.claim_bound_time {
        let _ = writeln!(out, "Claim bound {t}");
    }
    let _ = writeln!(out, "Now:        {}", e.row);
    if let Some(eviction) = &e.eviction {
        let _ = writeln!(out, "Eviction:   {eviction}");
    }
    if e.not_available.is_empty() {
        let _ = writeln!(out, "Available:  yes, to any claim that can use it");
    } else {
        let _ = writeln!(out, "Not available to a new claim:");
        for why in &e.not_available {
            let _ = writeln!(out, "  - {why}");
        }
    }
    if !e.named_by.is_empty() {
        let _ = writeln!(out, "Claims naming it:");
        for n in &e.named_by {
            let wins = if n.wins { " (wins it)" } else { "" };
            let _ = writeln!(out, "  - {} (chosen by {}){wins}", n.claim, n.chosen_by);
        }
    }
    out
}
