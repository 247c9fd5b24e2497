//! The thin binary: everything lives in the library. Only the binary carries the git
//! revision (`SERVER_BINDER_REVISION` when it is built: the Dockerfile's `REVISION`), so
//! a commit invalidates no library and no test build.

/// mimalloc, not glibc's malloc: a fifth less operator CPU per bind, for a little more
/// memory (docs/performance.md, "The allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    small_pages_only();
    let revision = option_env!("SERVER_BINDER_REVISION").unwrap_or("unknown");
    server_binder::controllers::metrics::set_revision(revision);
    server_binder::runtime::cli::main().await
}

/// Turns transparent huge pages off for this process. mimalloc advises huge pages for its
/// arenas, and the kernel then backs each first touch with 2 MiB zeroed at once and
/// splits them as mimalloc returns memory: the operator's peak RSS was 20-50% higher in
/// the bench's runs, and the zeroing 13.6% of its samples in a profile
/// (docs/performance.md, "Huge pages"). The flag is checked at each page fault, so what
/// the runtime allocated before this call is the only memory it leaves alone. Where the
/// kernel refuses (not Linux, an old kernel, a sandbox), pages stay as the system sets
/// them: a cost in memory, not a fault.
fn small_pages_only() {
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}
