//! The one check for a tool a test needs beyond the Rust toolchain (kubectl, promtool,
//! prometheus, kubernetes-validate, hadolint). Included by each test binary that needs it
//! (`#[path = "…/common/tools.rs"] mod tools;`).
//!
//! A missing tool fails the test under `SERVER_BINDER_REQUIRE_TOOLS=1` (`.ci/run` sets
//! it). Otherwise the test skips, and since libtest still reports it `ok`, the skip says
//! so loudly in the normal `cargo test` output, not only under `--nocapture`.

// Each binary uses part of this module.
#![allow(dead_code)]

use std::io::Write as _;
use std::process::{Command, Stdio};

/// The variable that turns a missing tool into a failure.
pub const REQUIRE_TOOLS: &str = "SERVER_BINDER_REQUIRE_TOOLS";

/// Whether `tool --version` runs and exits 0. See [`tool_answers`].
pub fn tool_present(tool: &str) -> bool {
    tool_answers(tool, &["--version"])
}

/// Whether kubectl runs (`kubectl version --client`). See [`tool_answers`].
pub fn kubectl_present() -> bool {
    tool_answers("kubectl", &["version", "--client"])
}

/// Whether `tool args…` runs and exits 0. If not: a panic under
/// `SERVER_BINDER_REQUIRE_TOOLS=1`, else a skip banner in the test output; the caller
/// returns early (skips) on `false`.
pub fn tool_answers(tool: &str, args: &[&str]) -> bool {
    let answers = Command::new(tool)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !answers {
        let what = format!("`{}` did not run (is {tool} on PATH?)", command(tool, args));
        if std::env::var(REQUIRE_TOOLS).as_deref() == Ok("1") {
            panic!("{what}, and {REQUIRE_TOOLS}=1 requires it");
        }
        announce_skip(&what);
    }
    answers
}

fn command(tool: &str, args: &[&str]) -> String {
    std::iter::once(tool)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The skip banner, naming the test (libtest names each test's thread after it).
fn announce_skip(what: &str) {
    let current = std::thread::current();
    let test = current.name().unwrap_or("a test");
    let banner = format!(
        "\n!!!!! SKIPPED {test}: {what}. It reports `ok` but checked nothing; \
         set {REQUIRE_TOOLS}=1 to make a missing tool fail. !!!!!\n\n"
    );
    // libtest captures `print!`/`eprint!` and shows them only for a failure or under
    // `--nocapture`; a write to the stderr handle itself is not captured, so the skip
    // shows in a plain `cargo test`.
    let _ = std::io::stderr().lock().write_all(banner.as_bytes());
}
