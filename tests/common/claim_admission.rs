//! The model check's copy of the claim CRD's admission rules (docs/binding.md,
//! "Admission rules"), for the tenant's writes it explores. `tests/controllers/admission.rs`
//! holds this copy to the API server's verdicts on the real CEL, so it cannot drift.

use server_binder::api::{ClaimPhase, Parts, ServerClaimSpec, ServerClaimStatus};

/// A claim as stored or as the binder caches it.
pub trait Claim: Parts<Spec = ServerClaimSpec, Status = ServerClaimStatus> {}
impl<C: Parts<Spec = ServerClaimSpec, Status = ServerClaimStatus>> Claim for C {}

fn server_ref(c: &impl Claim) -> Option<&str> {
    c.spec().server_ref.as_ref().map(|r| r.name.as_str())
}

/// Whether admission lets an update of a claim from `old` to `new` through: `serverRef`
/// may be set and cleared but not switched, not removed from a stored Bound claim; a
/// selector is immutable once set; a class too, and cannot be added to a Bound claim.
pub fn admits_claim_update<C: Claim>(old: &C, new: &C) -> bool {
    let (old_spec, new_spec) = (old.spec(), new.spec());
    let switched = matches!((server_ref(old), server_ref(new)), (Some(a), Some(b)) if a != b);
    let phase = old.status().and_then(|s| s.phase);
    let removed_from_bound =
        server_ref(old).is_some() && server_ref(new).is_none() && phase == Some(ClaimPhase::Bound);
    let selector_changed =
        old_spec.server_selector.is_some() && old_spec.server_selector != new_spec.server_selector;
    let class_changed = old_spec.server_class_name.is_some()
        && old_spec.server_class_name != new_spec.server_class_name;
    let class_added_to_bound = old_spec.server_class_name.is_none()
        && new_spec.server_class_name.is_some()
        && phase == Some(ClaimPhase::Bound);
    !switched && !removed_from_bound && !selector_changed && !class_changed && !class_added_to_bound
}
