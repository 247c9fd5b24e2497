//! The process around the controllers: command line, HTTP endpoints, leader election.

pub mod cli;
