//! The one check for a tool a test needs beyond the Rust toolchain (kubectl, promtool,
//! prometheus, kubernetes-validate, hadolint, jq).
//!
//! A missing tool fails the test under `SERVER_BINDER_REQUIRE_TOOLS=1` (`.ci/run` sets
//! it). Otherwise the test skips, and since libtest still reports it `ok`, the skip says
//! so loudly in the normal `cargo test` output, not only under `--nocapture`.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::{Mutex, Once};

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
        announce_skip(tool, &what);
    }
    answers
}

fn command(tool: &str, args: &[&str]) -> String {
    std::iter::once(tool)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The skip banner, naming the test (libtest names each test's thread after it), and
/// the skip remembered for the summary at the end of the run.
fn announce_skip(tool: &str, what: &str) {
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
    remember_skip(tool, test);
}

/// Every skip of this test process, by tool.
static SKIPS: Mutex<BTreeMap<String, Vec<String>>> = Mutex::new(BTreeMap::new());

fn remember_skip(tool: &str, test: &str) {
    static AT_EXIT: Once = Once::new();
    let mut skips = SKIPS.lock().unwrap_or_else(|e| e.into_inner());
    skips.entry(tool.into()).or_default().push(test.into());
    // libtest prints its result and returns (or exits): a handler the C library runs at
    // exit prints the summary after that, at the end of `cargo test`'s output (the suite
    // is the last test binary it runs).
    AT_EXIT.call_once(|| {
        unsafe extern "C" {
            fn atexit(handler: extern "C" fn()) -> std::ffi::c_int;
        }
        // SAFETY: registers a plain function with the C library, once.
        unsafe { atexit(print_skip_summary) };
    });
}

/// The summary of the skips, at exit: which tools were missing, and for which tests.
extern "C" fn print_skip_summary() {
    let skips = SKIPS.lock().unwrap_or_else(|e| e.into_inner());
    let tests: usize = skips.values().map(Vec::len).sum();
    let mut out = format!(
        "\n!!!!! {tests} test(s) checked nothing: a tool they need is missing. Install it \
         as .ci/run does (README, \"The tools the tests use\"), or set {REQUIRE_TOOLS}=1 to \
         make this a failure:\n"
    );
    for (tool, tests) in skips.iter() {
        out.push_str(&format!("  {tool}: {}\n", tests.join(", ")));
    }
    let _ = std::io::stderr().lock().write_all(out.as_bytes());
}
