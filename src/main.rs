//! The thin binary: everything lives in the library. Only the binary carries the git
//! revision (`SERVER_BINDER_REVISION` when it is built: the Dockerfile's `REVISION`), so
//! a commit invalidates no library and no test build.

/// mimalloc, not glibc's malloc: a fifth less operator CPU per bind, for a little more
/// memory (docs/performance.md, "The allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let revision = option_env!("SERVER_BINDER_REVISION").unwrap_or("unknown");
    server_binder::controllers::metrics::set_revision(revision);
    server_binder::runtime::cli::main().await
}
