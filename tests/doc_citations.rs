//! The code and the tests cite the docs by section (`docs/binding.md, "Wake-up rules"`):
//! each citation must name a section that exists, as a heading or as the bold lead of a
//! paragraph (`**Memory, measured.**`), or a reader follows it to nothing. A renamed
//! heading fails here, with the files that still cite the old name.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use regex::Regex;

use crate::common::sources::rust_files;

/// The text of `source` with its comment markers and line breaks taken out, so that a
/// citation broken across comment lines reads as one.
fn joined(source: &str) -> String {
    let markers = Regex::new(r"\n\s*(//[/!]?)?\s*").unwrap();
    markers.replace_all(source, " ").into_owned()
}

/// A citation: `docs/X.md, "Section"` (or `, item N of "Section"`); the doc and the
/// section are its captures 1 and 2.
fn citation() -> Regex {
    Regex::new(r#"docs/([a-z-]+\.md),?\s+(?:item \d+ of\s+)?"([^"]+)""#).unwrap()
}

/// Every `(doc, section)` the sources under `roots` cite, with the files citing it.
fn citations(roots: &[&str]) -> Vec<(String, String, PathBuf)> {
    let cite = citation();
    let root_dir = |root: &&str| Path::new(env!("CARGO_MANIFEST_DIR")).join(root);
    let files = roots.iter().map(root_dir);
    let files = files.flat_map(|dir| rust_files(&dir, &|_| false));
    let mut found = Vec::new();
    for file in files {
        let text = joined(&fs::read_to_string(&file).unwrap());
        for c in cite.captures_iter(&text) {
            found.push((c[1].to_string(), c[2].to_string(), file.clone()));
        }
    }
    found
}

/// The sections of a doc: its headings' text and its paragraphs' bold leads, without
/// code marks (a comment cites "**Stale `pre-bound`.**" as "Stale pre-bound").
fn sections(doc: &str) -> Vec<String> {
    let bold = Regex::new(r"\*\*([^*]+)\*\*").unwrap();
    let mut out = Vec::new();
    for line in doc.lines() {
        if let Some(heading) = line.strip_prefix('#') {
            out.push(heading.trim_start_matches('#').trim().to_string());
        }
        out.extend(bold.captures_iter(line).map(|c| c[1].to_string()));
    }
    out.into_iter().map(|s| s.replace('`', "")).collect()
}

/// Whether `section` names one of `sections`: the whole text, or its start (a heading
/// "Placement at a flat cost (issue 25)" is cited as "Placement at a flat cost"; a lead
/// "Memory, measured." as "Memory, measured").
fn names(sections: &[String], section: &str) -> bool {
    sections.iter().any(|s| s.starts_with(section))
}

#[test]
fn every_section_the_code_cites_exists() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let mut missing = BTreeSet::new();
    let all = citations(&["src", "tests"]);
    assert!(
        all.len() > 50,
        "the scan finds the citations: {}",
        all.len()
    );
    for (doc, section, file) in all {
        let text = fs::read_to_string(docs.join(&doc))
            .unwrap_or_else(|e| panic!("{} cites docs/{doc}: {e}", file.display()));
        if !names(&sections(&text), &section) {
            missing.insert(format!("docs/{doc}, \"{section}\" ({})", file.display()));
        }
    }
    assert!(
        missing.is_empty(),
        "cited sections that do not exist:\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn a_citation_broken_across_comment_lines_is_read_whole() {
    let source = "/// the rule (docs/performance.md,\n    /// \"Memory,\n/// measured\").\n";
    let text = joined(source);
    let c = citation().captures(&text).expect("one citation");
    assert_eq!((&c[1], &c[2]), ("performance.md", "Memory, measured"));
    let doc = "## Figures\n\n**Memory, measured.** heaptrack follows...\n";
    assert!(names(&sections(doc), &c[2]));
    assert!(!names(&sections(doc), "Profiling"));
}
