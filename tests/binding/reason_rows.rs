//! docs/operations.md's troubleshooting tables against the reasons the binder writes:
//! the first column of "Pending claims: the `Bound` condition's reason" names every
//! [`PendingReason`], of "Lost claims" every [`LostReason`], of "Claim events" every
//! [`ClaimEventReason`], and the table of "The server's side" every
//! [`ServerEventReason`], no more and no less. The plans take these enums, not strings,
//! and each enum's `ALL` lists every variant by construction, so a reason added to the
//! code fails here until the guide has its row.

use std::collections::BTreeSet;
use std::path::Path;

use server_binder::binding::{ClaimEventReason, LostReason, PendingReason, ServerEventReason};

const GUIDE: &str = "docs/operations.md";

fn guide() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(GUIDE);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Whether a table line is a header's rule (`|---|---|`).
fn is_rule(line: &str) -> bool {
    line.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
}

/// The first column of the tables under `heading` (the whole heading line), up to the
/// next heading: each row's first cell, a name in code marks. A header (the line above
/// a rule) is left out; any other first cell that is not one name fails.
fn first_column(doc: &str, heading: &str) -> BTreeSet<String> {
    let lines: Vec<&str> = doc.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim() == heading)
        .unwrap_or_else(|| panic!("{GUIDE} has no `{heading}`"));
    let section = lines[start + 1..]
        .iter()
        .take_while(|l| !l.starts_with("## ") && !l.starts_with("### "));
    let table: Vec<&str> = section.filter(|l| l.starts_with('|')).copied().collect();
    let mut names = BTreeSet::new();
    for (i, line) in table.iter().enumerate() {
        let header = table.get(i + 1).is_some_and(|next| is_rule(next));
        if is_rule(line) || header {
            continue;
        }
        let cell = line.trim_matches('|').split('|').next().unwrap().trim();
        let name = cell
            .strip_prefix('`')
            .and_then(|c| c.strip_suffix('`'))
            .filter(|c| !c.contains('`'))
            .unwrap_or_else(|| panic!("{GUIDE}, \"{heading}\": the row {line:?} names no reason"));
        names.insert(name.to_string());
    }
    assert!(!names.is_empty(), "{GUIDE}, \"{heading}\": no table rows");
    names
}

/// The difference between a table and an enum, said both ways.
fn compare(heading: &str, documented: BTreeSet<String>, reasons: &[&str]) -> Option<String> {
    let expected: BTreeSet<String> = reasons.iter().map(|r| r.to_string()).collect();
    let missing: Vec<&String> = expected.difference(&documented).collect();
    let unknown: Vec<&String> = documented.difference(&expected).collect();
    (!missing.is_empty() || !unknown.is_empty()).then(|| {
        format!("\"{heading}\": no row for {missing:?}; rows the code never writes: {unknown:?}")
    })
}

/// The text of each reason in `all`.
fn texts<R: Copy>(all: &[R], text: fn(R) -> &'static str) -> Vec<&'static str> {
    all.iter().map(|r| text(*r)).collect()
}

#[test]
fn the_troubleshooting_tables_name_every_reason_the_binder_writes() {
    let doc = guide();
    let tables = [
        (
            "### Pending claims: the `Bound` condition's reason",
            texts(PendingReason::ALL, PendingReason::as_str),
        ),
        (
            "### Lost claims",
            texts(LostReason::ALL, LostReason::as_str),
        ),
        (
            "### Claim events",
            texts(ClaimEventReason::ALL, ClaimEventReason::as_str),
        ),
        (
            "### The server's side",
            texts(ServerEventReason::ALL, ServerEventReason::as_str),
        ),
    ];
    let problems: Vec<String> = tables
        .iter()
        .filter_map(|(heading, reasons)| compare(heading, first_column(&doc, heading), reasons))
        .collect();
    assert!(
        problems.is_empty(),
        "{GUIDE}'s troubleshooting tables and the reasons of src/binding/reasons.rs differ:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_table_is_read_row_by_row_without_its_header() {
    let doc = "### Some reasons\n\ntext\n\n| reason | means |\n|---|---|\n| `A` | a |\n| `B` | b \\| c |\n\n### Next\n\n| `C` | c |\n";
    let names: Vec<String> = first_column(doc, "### Some reasons").into_iter().collect();
    assert_eq!(names, ["A", "B"]);
    assert!(compare("h", first_column(doc, "### Some reasons"), &["A", "B"]).is_none());
    let problem = compare("h", first_column(doc, "### Some reasons"), &["A", "D"]).unwrap();
    assert!(
        problem.contains("\"D\"") && problem.contains("\"B\""),
        "{problem}"
    );
}
