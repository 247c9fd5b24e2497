//! Conformance tests for the embedded API server, through `kube::Client` (one binary,
//! one module per area). Each test starts its own server on a free port.

mod common;

mod bench;
mod builtins;
mod content_types;
mod crd;
mod errors;
mod faults;
mod limits;
mod managed_fields;
mod metadata;
mod objects;
mod patches;
mod perf;
mod runtime;
mod schema;
mod status;
mod tables;
mod watch;
