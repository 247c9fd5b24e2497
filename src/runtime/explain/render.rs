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

/// The phase, the `Bound` condition's reason where it says more than the phase, and
/// its message.
fn phase_lines(out: &mut String, phase: &str, reason: &str, message: &str) {
    let _ = writeln!(out, "Phase:      {phase}");
    if !reason.is_empty() && reason != phase {
        let _ = writeln!(out, "Reason:     {reason}");
    }
    if !message.is_empty() {
        let _ = writeln!(out, "Message:    {message}");
    }
}

/// The decision's row, not repeating the message where the row says the same (the
/// condition was written by this very decision).
fn now_line(row: &str, message: &str) -> String {
    match row.strip_prefix(message) {
        Some(reference) if !message.is_empty() => format!("as the message says{reference}"),
        _ => row.to_string(),
    }
}

pub fn claim_text(e: &ClaimExplanation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ServerClaim {}/{} (uid {})",
        e.namespace, e.name, e.uid
    );
    phase_lines(&mut out, &e.phase, &e.reason, &e.message);
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
    let _ = writeln!(out, "Now:        {}", now_line(&e.row, &e.message));
    // The summary computed now, where the condition (written at most once per status
    // interval) does not already say it.
    if let Some(summary) = e.summary.as_ref().filter(|s| **s != e.message) {
        let _ = writeln!(out, "Why now:    {summary}");
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
    phase_lines(&mut out, &e.phase, &e.reason, &e.message);
    let _ = writeln!(
        out,
        "Holder:     {}",
        e.holder.as_deref().unwrap_or("(none)")
    );
    if !e.classes.is_empty() {
        let _ = writeln!(out, "Classes:    {}", e.classes.join(", "));
    }
    if let Some(class) = &e.bound_class {
        let _ = writeln!(out, "Bound under class {class}");
    }
    if let Some(t) = &e.since {
        let _ = writeln!(out, "Since:      {t}");
    }
    if let Some(t) = &e.claim_bound_time {
        let _ = writeln!(out, "Claim bound {t}");
    }
    let _ = writeln!(out, "Now:        {}", now_line(&e.row, &e.message));
    if let Some(eviction) = &e.eviction {
        let _ = writeln!(out, "Eviction:   {eviction}");
    }
    if !e.taints.is_empty() {
        let keys = e.taints.join(", ");
        let _ = writeln!(
            out,
            "Taints:     {keys} (only claims that tolerate them, or whose class does)"
        );
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
