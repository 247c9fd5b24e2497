//! The thin binary: everything lives in the library.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    server_binder::runtime::cli::main().await
}
