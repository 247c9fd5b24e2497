//! Placement: which free server a pending claim takes, and when it waits its turn.
//!
//! Lowest-name-first strands claims: a claim that takes any server may take the last one a
//! selective claim could use. So a pick keeps a *maximum matching* of the waiting claims to
//! the free servers possible: it takes a server that some maximum matching gives it, and
//! a claim no maximum matching can serve without leaving out a claim ahead of it in the
//! fair order waits (`WaitForTurn`).
//!
//! The matching is computed over classes, not objects. Claims with the same selector and
//! tolerations (a [`ClaimShape`]) are interchangeable, and so are free servers of one
//! index class (same taints, same values for every label key a selector reads; see
//! [`FreeServerIndex`]). The flow network is source → shape (capacity: its waiting
//! claims) → class (an edge where the shape fits the class) → sink (capacity: the class's
//! free servers), restricted to the connected component of the picker's shape. Its size is
//! that of the fleet's shapes, not of the fleet. A free server that users' claims name is
//! a class of its own, and those claims a node asking for it alone: a name says which
//! server, not when ([`place_named`]). See docs/binding.md, "Picking a server".
//!
//! The parts, from the bottom up: `waiter` and `waiting_claims` (the claims a pick reads,
//! kept up to date one watch event at a time, with their caches `fit_rows`, `contest` and
//! `kept_flow`); `inputs` and `outcome` (what a pick weighs and what it answers);
//! `fair_order`; `spoken_for` (picks in flight, claims backing off or adopting, servers
//! that claims name); the flow network (`nodes`, `component_search`, `network`, and
//! `whole_network`, which a debug build checks it against) over the max flow of `flow`;
//! `place` (a pick) and `whose_turn` (which claims a freed or named server asks first).
//!
//! [`FreeServerIndex`]: crate::binding::FreeServerIndex

mod component_search;
mod contest;
mod fair_order;
mod fit_rows;
mod flow;
pub(super) mod in_flight;
pub(super) mod index;
mod inputs;
mod kept_flow;
mod network;
mod nodes;
mod outcome;
pub(super) mod pins;
mod place;
pub(super) mod shape;
mod spoken_for;
mod waiter;
mod waiting_claims;
#[cfg(debug_assertions)]
mod whole_network;
mod whose_turn;

pub use inputs::PickInputs;
pub use outcome::{AHEAD_NAMED, Ahead, Placement, WAITING_FOR_TURN};
pub use place::{place, place_named};
pub use shape::ClaimShape;
pub use waiter::{Waiter, is_waiting};
pub use waiting_claims::WaitingClaims;
pub use whose_turn::{first_named, first_unheld_pick, first_waiting_for, in_fair_order};
