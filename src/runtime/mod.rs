//! The process around the controllers: command line, HTTP endpoints, signals, logging
//! and, with `--leader-elect`, leader election. With the `embedded-apiserver` feature
//! (the default) also what runs the embedded API server: `dev`, `apiserver` and `bench`.

#[cfg(feature = "embedded-apiserver")]
pub mod bench;
pub mod cli;
pub mod client;
mod connect;
pub mod controller_args;
#[cfg(feature = "embedded-apiserver")]
mod crds;
#[cfg(feature = "embedded-apiserver")]
mod dev;
pub mod drain;
pub mod error;
pub mod explain;
mod http;
pub mod identity;
pub mod leader;
pub mod logging;
pub mod operator;
pub mod run;
pub mod signals;
#[cfg(feature = "embedded-apiserver")]
mod standalone;
