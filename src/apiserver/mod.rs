//! An embedded, in-memory, Kubernetes-compatible API server.
//!
//! **For development and tests only.** It speaks plain HTTP with no authentication and
//! no authorization, persists nothing, and listens on loopback unless told otherwise.
//!
//! It serves whatever CustomResourceDefinitions are installed into it (and knows nothing
//! of what they mean), plus the built-in kinds controllers and kubectl need: Namespaces,
//! Events (core/v1 and events.k8s.io/v1 over one store), Leases and the CRDs
//! themselves. It is faithful where clients can tell: resourceVersions and optimistic
//! concurrency, generation, finalizers, status subresources, the four patch types,
//! watches with bookmarks, resumption and 410 Gone, selectors, pagination, metav1
//! `Status` errors, discovery, OpenAPI v3 and `Table` output for kubectl, and the size
//! limits a write meets (a request body over 3 MiB: 413; annotations over 256 KiB and
//! an event's note over 1 KiB: 422; a stored object over etcd's 1.5 MiB: 500 "etcdserver:
//! request is too large").
//!
//! Module map:
//! - [`server`]: [`ApiServer::start`], [`ApiServerHandle`], [`Config`];
//! - `http` / `route`: the handler and path resolution; `discovery`, `openapi`, `table`;
//! - `protobuf`: the protobuf request bodies client-go's typed clients send;
//! - `ops`: the write verbs; `patch`: patch types; `managed`: managedFields;
//!   `objectmeta`: metadata validation and normalisation; `store`: objects, history,
//!   watchers; `watch`: watch streams; `selectors`: label and field selectors;
//! - `registry`, `builtin`, `crd`, `events`: what is served and how each kind behaves;
//!   `crd_finalizer`: deleting a CRD and its custom resources;
//! - [`schema`]: custom-resource admission (defaulting, pruning, validation, CEL);
//! - [`faults`]: fault injection and the request log for reliability tests.
//!
//! What runs it (`server-binder apiserver`, `dev`, the load generator of `bench`) is in
//! the runtime.

mod builtin;
mod crd;
mod crd_finalizer;
mod discovery;
mod error;
mod events;
pub mod faults;
mod http;
mod kubeconfig;
mod managed;
mod meta;
mod objectmeta;
mod openapi;
mod ops;
mod patch;
mod protobuf;
mod registry;
mod route;
pub mod schema;
mod selectors;
pub mod server;
mod status;
mod store;
mod table;
mod watch;

pub use error::Error;
pub use faults::{FaultAction, FaultInjector, RequestLog, RequestMatcher, RequestRecord};
pub use server::{ApiServer, ApiServerHandle, Config};
