//! The process around the controllers: command line, HTTP endpoints, signals, logging
//! and, with `--leader-elect`, leader election.

pub mod cli;
pub mod client;
mod dev;
mod http;
pub mod leader;
pub mod logging;
pub mod operator;
pub mod signals;
