//! Whether the fair order lets a claim that names a server take it now, as a binder
//! sees the claims and its picks in flight ([`turn_on`]).

use std::cell::RefCell;
use std::collections::HashMap;

use k8s_openapi::jiff::Timestamp;

use crate::api::CachedClaim;
use crate::binding::claim_side::assumed::claim_key;
use crate::binding::meta::{ClaimKey, is_controller_chosen};
use crate::binding::placement::{PickInputs, Placement, first_named, first_unheld_pick};
use crate::binding::protocol::winner::turn_on;
use crate::binding::world::view::{ClaimView, ServerView};

use super::inputs::StepInputs;

/// Per server and pool (users' claims, or controller-chosen ones the claim side's picks
/// do not hold), the claim naming it that is first in the fair order ([`first_named`],
/// [`first_unheld_pick`]), found once per decision.
pub type FirstNamed = RefCell<HashMap<(String, bool), Option<ClaimKey>>>;

/// Whether `claim`, which names `server`, has its turn, asking only the first in the
/// fair order of the users' claims naming `server` ([`first_named`]), or of the
/// controller-chosen ones the picks do not hold ([`first_unheld_pick`]: they rank after
/// users' in the winner rule, so they are asked apart), found once per server in
/// `first`.
pub fn has_turn(
    inputs: &StepInputs<'_>,
    claim: &CachedClaim,
    server: &str,
    now: Timestamp,
    first: &FirstNamed,
) -> bool {
    let (world, claim_side) = (inputs.world, inputs.claim_side);
    let key = claim_key(claim);
    let waiting = world.claims().waiting();
    let picks = &claim_side.assumed;
    let held_back = claim_side.refused.held_back(now);
    let Some(named) = world.servers().server(server) else {
        return false;
    };
    let stray = is_controller_chosen(claim);
    let first_key = first
        .borrow_mut()
        .entry((server.to_string(), stray))
        .or_insert_with(|| {
            if stray {
                let held = |k: &ClaimKey| picks.holds(server, k);
                return first_unheld_pick(named, &held_back, waiting, &held);
            }
            let naming = world.claims().claims_naming(server);
            let keys: Vec<ClaimKey> = naming.into_iter().map(claim_key).collect();
            first_named(named, keys.iter(), &held_back, waiting)
        })
        .clone();
    if first_key.as_ref() != Some(&key) {
        return false;
    }
    let refuses = |s: &str| claim_side.refusing.contains(s, now);
    let skip = |s: &str| refuses(s) || picks.chosen_for_other(s, &key);
    let pick = PickInputs {
        skip: &skip,
        refuses: &refuses,
        waiting,
        assumed: picks,
        held_back: &held_back,
        refused: None,
        in_flight: inputs.in_flight,
    };
    matches!(
        turn_on(server, claim, world.servers(), &pick),
        Placement::Pick(_)
    )
}
