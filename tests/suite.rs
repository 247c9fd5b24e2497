//! Every integration test of the project, in one test binary: the crate and its
//! dependencies are linked once, the generic code the tests instantiate (kube's clients,
//! tokio, serde) is compiled once, and the suites' tests share the test threads, so the
//! quick ones run beside the long ones (the chaos test, the model check) instead of
//! after them. Each suite is a module named after its folder or file; run one with a
//! filter, e.g. `cargo test --test suite controllers::` or `binding::model::`.

#[path = "apiserver/main.rs"]
mod apiserver;
#[path = "architecture.rs"]
mod architecture;
#[path = "bench_bind.rs"]
mod bench_bind;
#[path = "binding/main.rs"]
mod binding;
mod common;
#[path = "controllers/main.rs"]
mod controllers;
#[path = "crd_drift.rs"]
mod crd_drift;
#[path = "doc_citations.rs"]
mod doc_citations;
#[path = "function_length.rs"]
mod function_length;
#[path = "kubectl.rs"]
mod kubectl;
#[path = "manifests.rs"]
mod manifests;
