//! Names the pure tests (tests/binding) and the end-to-end tests (tests/controllers)
//! share, so a fixture reads the same in both.
//!
//! The builders of both speak one vocabulary, after docs/binding.md's wording:
//!
//! | builder | on | means |
//! |---|---|---|
//! | `names(server)` | claim | a user-written `serverRef` (no `pre-bound`) |
//! | `chose(server)` | claim | a controller-chosen `serverRef` (with `pre-bound`) |
//! | `selects(&[(key, value)])` | claim | `serverSelector.matchLabels` |
//! | `tolerates(key)` | claim | a toleration of a `NoBind` taint |
//! | `bind_completed()` | claim | the `bind-completed` annotation |
//! | `labels(&[(key, value)])` | server | labels |
//! | `taint(key)`, `unclaimable()`, `retain()` | server | a `NoBind` taint, the cordon, `reclaimPolicy: Retain` |
//! | `finalizer()` | server | the `server-protection` finalizer |
//! | `reserved_for(claim)` | server | a user's reservation by name (no uid) |
//! | `claimed_for(claim, uid)` | server (pure) | the ref as `ClaimForWinner` writes it: uid, `bound-by-controller`, finalizer; no status |
//! | `uid_filled_for(claim, uid)` | server (pure) | a user-made ref with the uid, as `FillUid` leaves it: uid, finalizer |
//! | `ref_with_uid(claim, uid)` | server (end to end) | a ref with a uid, nothing else |
//! | `bound_to(&claim)` | server (end to end) | bound as the server controller leaves it: `claimed_for` plus phase `Bound` |
//!
//! and the predicates on stored objects (tests/controllers/stage.rs) say the same:
//! `has_finalizer`, `has_annotation`, `server_ref`, `claim_ref`.

// Each binary uses part of this module.
#![allow(dead_code)]

/// The namespace of every claim in the fixtures: not `default`, so code that assumes
/// `default` shows up.
pub const NS: &str = "team-a";
