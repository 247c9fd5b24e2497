//! server-binder binds `ServerClaim`s to bare-metal `Server`s the way Kubernetes binds
//! PersistentVolumeClaims to PersistentVolumes.
//!
//! The crate is layered so a reader can see the protocol apart from the plumbing:
//!
//! - [`api`]: the `metal.binder.dev/v1alpha1` types and the CRDs generated from them;
//! - [`binding`]: the binding protocol as pure decision functions (no I/O);
//! - [`runtime`]: the command line and the process around the controllers;
//! - [`apiserver`]: an embedded, in-memory Kubernetes-compatible API server for
//!   `server-binder dev` and the integration tests. It knows nothing of binding.

pub mod api;
pub mod apiserver;
pub mod binding;
pub mod runtime;
