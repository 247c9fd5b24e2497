//! The model check's tests: each world in every interleaving.

use super::*;

#[test]
fn a_class_narrowed_mid_bind_holds_in_every_interleaving() {
    assert_holds(class_narrowed_mid_bind());
}

#[test]
fn a_class_deleted_mid_bind_holds_in_every_interleaving() {
    assert_holds(class_deleted_mid_bind());
}

#[test]
fn a_pair_restored_past_the_quota_holds_in_every_interleaving() {
    assert_holds(restored_past_the_quota());
}

#[test]
fn a_restored_name_re_created_holds_in_every_interleaving() {
    assert_holds(restored_then_re_created());
}

#[test]
fn a_quota_created_at_the_limit_holds_in_every_interleaving() {
    assert_holds(quota_created_at_the_limit());
}

#[test]
fn a_quota_re_created_holds_in_every_interleaving() {
    assert_holds(quota_re_created());
}

#[test]
fn a_quota_whose_status_is_wiped_holds_in_every_interleaving() {
    assert_holds(quota_status_wiped());
}

#[test]
fn a_quota_holds_in_every_interleaving() {
    assert_holds(quota_holds());
}

#[test]
fn a_quota_freed_by_a_delete_holds_in_every_interleaving() {
    assert_holds(quota_freed_by_delete());
}

#[test]
fn gate_config_changes_hold_in_every_interleaving() {
    assert_holds(gate_config_changes());
}

#[test]
fn a_late_pass_holds_in_every_interleaving() {
    assert_holds(late_pass());
}

#[test]
fn tenant_forgery_holds_in_every_interleaving() {
    assert_holds(tenant_forgery());
}

#[test]
fn a_lost_claim_re_pointed_holds_in_every_interleaving() {
    assert_holds(lost_and_re_pointed());
}

#[test]
fn contention_holds_in_every_interleaving() {
    assert_holds(contention());
}

#[test]
fn reservation_and_recreate_holds_in_every_interleaving() {
    assert_holds(reservation_and_recreate());
}

#[test]
fn lost_ref_and_release_holds_in_every_interleaving() {
    assert_holds(lost_ref_and_release());
}

#[test]
fn eligibility_churn_holds_in_every_interleaving() {
    assert_holds(eligibility_churn());
}

#[test]
fn a_failed_pick_holds_in_every_interleaving() {
    assert_holds(failed_pick());
}

#[test]
fn a_claim_whose_writes_are_refused_holds_nobody_back() {
    assert_holds(refused_pick());
}

#[test]
fn a_claim_whose_completing_write_is_refused_gives_its_server_back() {
    assert_holds(refused_completion());
}

#[test]
fn a_freed_server_that_wakes_the_first_claims_holds_in_every_interleaving() {
    assert_holds(freed_server_wakes_the_first());
}

#[test]
fn orphan_and_cordon_holds_in_every_interleaving() {
    assert_holds(orphan_and_cordon());
}

#[test]
fn empty_uid_and_copies_hold_in_every_interleaving() {
    assert_holds(empty_uid_and_copies());
}

/// Explores every interleaving of `scenario` with the real protocol, and fails on the
/// first violation (its trace in the message) or if no run converges.
fn assert_holds(scenario: Scenario) {
    let started = std::time::Instant::now();
    let report = explore(&scenario, Protocol::real());
    println!(
        "model check {}: {} states explored ({} quiescent, max depth {}) in {:.1?}",
        scenario.name,
        report.states,
        report.quiescent,
        report.max_depth,
        started.elapsed()
    );
    if let Some(v) = &report.violation {
        panic!("{}: {v}", scenario.name);
    }
    assert!(
        report.quiescent > 0,
        "{}: some run converges",
        scenario.name
    );
}

#[test]
fn stranding_binds_every_claim_in_every_interleaving() {
    assert_holds(stranding());
}

#[test]
fn namespaces_take_turns_in_every_interleaving() {
    assert_holds(namespaces_take_turns());
}

#[test]
fn a_named_server_waits_its_turn_in_every_interleaving() {
    assert_holds(named_server_waits_its_turn());
}

#[test]
fn a_forged_pre_bound_waits_its_turn_in_every_interleaving() {
    assert_holds(forged_pre_bound_waits_its_turn());
}

#[test]
fn names_pass_a_refused_claim_in_every_interleaving() {
    assert_holds(names_past_a_refused_claim());
}

#[test]
fn user_ref_race_binds_every_claim_in_every_interleaving() {
    assert_holds(user_ref_race());
}

#[test]
fn release_gates_hold_in_every_interleaving() {
    assert_holds(release_gates());
}

#[test]
fn an_eviction_holds_in_every_interleaving() {
    assert_holds(eviction());
}

#[test]
fn a_budget_of_one_holds_in_every_interleaving() {
    assert_holds(budget_of_one());
}

#[test]
fn a_grace_that_runs_out_holds_in_every_interleaving() {
    assert_holds(grace());
}

#[test]
fn a_budget_across_a_leader_hand_over_holds_in_every_interleaving() {
    assert_holds(budget_hand_over());
}

#[test]
fn user_annotations_are_the_protocol_names() {
    // Guards the model's notion of "user-chosen" against a rename.
    assert!(is_controller_chosen(&claim("c").chose("s")));
    assert!(!is_controller_chosen(&claim("c").names("s")));
    assert_eq!(ANNOTATION_PRE_BOUND, "metal.binder.dev/pre-bound");
}

/// For exploring budgets by hand: MODEL_EXPERIMENT=contention:CRASHES:FAULTS:LAG.
#[test]
#[ignore = "a tool for sizing the model check by hand"]
fn experiment() {
    let spec = std::env::var("MODEL_EXPERIMENT").unwrap_or_default();
    let parts: Vec<&str> = spec.split(':').collect();
    let mut scenario = match parts[0] {
        "recreate" => reservation_and_recreate(),
        "lost" => lost_ref_and_release(),
        "churn" => eligibility_churn(),
        "orphan" => orphan_and_cordon(),
        "uid" => empty_uid_and_copies(),
        "gates" => release_gates(),
        "eviction" => eviction(),
        "budget-of-one" => budget_of_one(),
        "budget-hand-over" => budget_hand_over(),
        "grace" => grace(),
        "config" => gate_config_changes(),
        "late" => late_pass(),
        "forgery" => tenant_forgery(),
        "forged-pre-bound" => forged_pre_bound_waits_its_turn(),
        "repointed" => lost_and_re_pointed(),
        "quota-holds" => quota_holds(),
        "quota-freed" => quota_freed_by_delete(),
        _ => contention(),
    };
    scenario.crashes = parts.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    scenario.faults = parts.get(2).and_then(|p| p.parse().ok()).unwrap_or(0);
    scenario.max_lag = parts.get(3).and_then(|p| p.parse().ok()).unwrap_or(MAX_LAG);
    assert_holds(scenario);
}
