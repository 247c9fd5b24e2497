//! The fleet as the binder sees it: the catalogs of servers and claims, and the views
//! classes and quotas make of them.

pub mod budgets;
pub mod classes;
mod fleet;
pub mod quota;
pub(super) mod view;

pub(crate) use fleet::Resolved;
pub use fleet::{BeforeAfter, Change, Listing, World};
