//! The rule of a free server (`not_free`), which the free-server index, eligibility and
//! `explain server` share.

use server_binder::api::*;
use server_binder::binding::*;

use crate::binding::support::*;

#[test]
fn a_free_server_has_no_reason_and_a_held_one_every_reason_in_eligibility_s_order() {
    let tainted = server("s1").taint("gpu");
    assert!(
        is_free(&tainted),
        "a taint narrows the claims, it frees none"
    );
    assert_eq!(not_free(&tainted).count(), 0);

    let everything = server("s1")
        .deleting()
        .unclaimable()
        .phase(ServerPhase::Released)
        .reserved_for("c");
    let reasons: Vec<String> = not_free(&everything).map(|r| r.to_string()).collect();
    let ineligible = [
        Ineligible::Deleting,
        Ineligible::Unclaimable,
        Ineligible::Released,
    ];
    let mut expected: Vec<String> = ineligible.iter().map(ToString::to_string).collect();
    expected.push(format!("the server is reserved by name for {NS}/c"));
    assert_eq!(reasons, expected);
    assert_eq!(server_is_claimable(&everything), Err(Ineligible::Deleting));
    assert!(!is_free(&everything));

    let cleaning = server("s1").gates(&["x.io/wipe"]).cleaning(3);
    let reasons: Vec<NotFree> = not_free(&cleaning).collect();
    assert_eq!(reasons, [NotFree::Ineligible(Ineligible::Cleaning)]);
    assert_eq!(server_is_claimable(&cleaning), Err(Ineligible::Cleaning));

    let bound = server("s1").claimed_for("c", "uid-c");
    let reasons: Vec<String> = not_free(&bound).map(|r| r.to_string()).collect();
    assert_eq!(
        reasons,
        [format!("the server is bound to {NS}/c (uid uid-c)")]
    );
    assert_eq!(
        server_is_claimable(&bound),
        Ok(()),
        "a ref is the claim's business"
    );
    assert!(!is_free(&bound));
}
