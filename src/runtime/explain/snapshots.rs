//! explain's text, held to snapshots: one world read off `server-binder dev` after the
//! README's demo, the classes example and the docs' claims (tests/fixtures/explain/
//! world.yaml), and one snapshot per row kind of each table
//! (tests/fixtures/explain/*.txt). `UPDATE_SNAPSHOTS=1` rewrites them; a reviewer
//! reads the diff.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde_json::Value;

use super::render::{claim_text, server_text};
use super::world::World;
use super::{claim, server};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/explain");

/// The objects of world.yaml (a `kubectl get -o yaml` List per kind), by kind.
fn world() -> World {
    let text = std::fs::read_to_string(format!("{DIR}/world.yaml")).expect("world.yaml");
    let lists: Vec<Value> = serde_saphyr::from_multiple(&text).expect("world.yaml parses");
    let items = lists
        .iter()
        .flat_map(|l| l["items"].as_array().cloned().unwrap_or_default());
    let mut world = World {
        servers: Vec::new(),
        claims: Vec::new(),
        partial: false,
        release_gates: Vec::new(),
        classes: Vec::new(),
        namespaces: HashMap::new(),
        quotas: Vec::new(),
        budgets: Vec::new(),
    };
    for item in items {
        let kind = item["kind"].as_str().unwrap_or_default().to_string();
        match kind.as_str() {
            "Server" => world.servers.push(parse(item)),
            "ServerClaim" => world.claims.push(parse(item)),
            "ServerClass" => world.classes.push(parse(item)),
            "ServerQuota" => world.quotas.push(parse(item)),
            "Namespace" => {
                let name = item["metadata"]["name"].as_str().unwrap_or_default();
                let labels: BTreeMap<String, String> =
                    serde_json::from_value(item["metadata"]["labels"].clone()).unwrap_or_default();
                world.namespaces.insert(name.to_string(), labels);
            }
            other => panic!("world.yaml holds a {other}"),
        }
    }
    world
}

fn parse<T: serde::de::DeserializeOwned>(item: Value) -> T {
    let what = format!("{} {}", item["kind"], item["metadata"]["name"]);
    serde_json::from_value(item).unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// `text` against the snapshot `name`.txt, or rewrites it under `UPDATE_SNAPSHOTS=1`.
fn matches_snapshot(name: &str, text: &str) -> Result<(), String> {
    let path = PathBuf::from(format!("{DIR}/{name}.txt"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, text).expect("snapshot written");
        return Ok(());
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    match want == text {
        true => Ok(()),
        false => Err(format!(
            "{name}.txt:\n--- snapshot\n{want}--- now\n{text}(UPDATE_SNAPSHOTS=1 rewrites it)"
        )),
    }
}

/// What every explanation holds to, whatever its row: no Rust path, no line twice, no
/// line repeating the message.
fn reads_cleanly(name: &str, text: &str) -> Result<(), String> {
    if text.contains("::") {
        return Err(format!("{name}: a Rust path in\n{text}"));
    }
    let message = text.lines().find_map(|l| l.strip_prefix("Message:    "));
    let repeats = |l: &&str| message.is_some_and(|m| !l.starts_with("Message:") && l.contains(m));
    if let Some(line) = text.lines().find(repeats) {
        return Err(format!("{name}: {line:?} repeats the message in\n{text}"));
    }
    let mut seen = std::collections::HashSet::new();
    match text
        .lines()
        .find(|l| !l.trim().is_empty() && !seen.insert(*l))
    {
        Some(twice) => Err(format!("{name}: {twice:?} twice in\n{text}")),
        None => Ok(()),
    }
}

/// The claims of world.yaml, one per row kind of the claim table.
const CLAIMS: [(&str, &str, &str); 7] = [
    ("claim-bound", "default", "any-server"),
    ("claim-no-matching-server", "default", "gpu-too"),
    ("claim-quota-exceeded", "team-b", "training-2"),
    ("claim-class-not-allowed", "default", "training"),
    ("claim-class-not-found", "default", "fpga"),
    ("claim-bound-server-deleting", "default", "by-ref"),
    ("claim-of-a-class", "team-a", "training"),
];

/// The servers of world.yaml, one per row kind of the server table.
const SERVERS: [(&str, &str); 6] = [
    ("server-available", "rack3-gpu-03"),
    ("server-cordoned", "spare-01"),
    ("server-bound-in-a-class", "rack3-gpu-01"),
    ("server-released-retain", "rack2-large-01"),
    ("server-cleaning", "wipe-01"),
    ("server-deletion-blocked", "rack1-small-01"),
];

#[test]
fn explain_reads_as_its_snapshots() {
    let world = world();
    let mut failures = Vec::new();
    for (snapshot, ns, name) in CLAIMS {
        let text = claim_text(&claim::explain(&world, ns, name).expect(name));
        failures.extend(reads_cleanly(snapshot, &text).err());
        failures.extend(matches_snapshot(snapshot, &text).err());
    }
    for (snapshot, name) in SERVERS {
        let text = server_text(&server::explain(&world, name).expect(name));
        failures.extend(reads_cleanly(snapshot, &text).err());
        failures.extend(matches_snapshot(snapshot, &text).err());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
