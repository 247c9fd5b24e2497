//! The binding protocol as pure decisions.
