//! The thin binary: everything lives in the library. Only the binary carries the git
//! revision (`SERVER_BINDER_REVISION` when it is built: the Dockerfile's `REVISION`), so
//! a commit invalidates no library and no test build.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let revision = option_env!("SERVER_BINDER_REVISION").unwrap_or("unknown");
    server_binder::controllers::metrics::set_revision(revision);
    server_binder::runtime::cli::main().await
}
