//! Names the pure tests (tests/binding) and the end-to-end tests (tests/controllers)
//! share, so a fixture reads the same in both. The builders' vocabulary is in
//! tests/common/fixtures.rs, the one builder both use.

// Each binary uses part of this module.
#![allow(dead_code)]

/// The namespace of every claim in the fixtures: not `default`, so code that assumes
/// `default` shows up.
pub const NS: &str = "team-a";
