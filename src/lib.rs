//! server-binder binds `ServerClaim`s to bare-metal `Server`s the way Kubernetes binds
//! PersistentVolumeClaims to PersistentVolumes.
//!
//! The crate is layered so a reader can see the protocol apart from the plumbing:
//!
//! - [`api`]: the `metal.binder.dev/v1alpha1` types and the CRDs generated from them;
//! - [`binding`]: the binding protocol as pure decision functions (no I/O);
//! - [`controllers`]: the claim and server controllers, the I/O shell that carries out
//!   the binding core's decisions with kube-runtime;
//! - [`runtime`]: the command line and the process around the controllers (HTTP
//!   endpoints, leader election, signals);
//! - [`apiserver`]: an embedded, in-memory Kubernetes-compatible API server for
//!   `server-binder dev` and the integration tests. It knows nothing of binding. It is
//!   compiled only with the `embedded-apiserver` feature (the default); the in-cluster
//!   operator is built without it.

pub mod api;
#[cfg(feature = "embedded-apiserver")]
pub mod apiserver;
pub mod binding;
pub mod controllers;
pub mod runtime;
