//! Records the git revision the binary is built from, for `server_binder_build_info`:
//! `SERVER_BINDER_REVISION` if set (the Dockerfile's `REVISION` build argument, where
//! there is no .git), else `git rev-parse --short=12 HEAD`, else "unknown".

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SERVER_BINDER_REVISION");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    let revision = std::env::var("SERVER_BINDER_REVISION")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(git_revision)
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SERVER_BINDER_REVISION={revision}");
}

fn git_revision() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()?;
    let revision = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !revision.is_empty()).then_some(revision)
}
