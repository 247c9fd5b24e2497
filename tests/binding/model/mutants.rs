//! The mutants the model check must catch: each one a rule changed the way a real
//! defect would change it, the worlds it is run in, and what its violation must say.

use super::*;

/// The server side that releases a gated server straight to Available, as before
/// release gates.
pub(super) fn skips_release_gates(
    server: &CachedServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    match decide_server(server, claims, liveness, gates, turn, admit) {
        ServerDecision::ReleaseToCleaning { .. } => ServerDecision::Release {
            policy: ReclaimPolicy::Recycle,
        },
        other => other,
    }
}

/// The server side's winner rule before issue 20: any `bind-completed` claim naming a
/// free server takes it back, eligible or not (`can_take_back` trusted the annotation).
pub(super) fn trusts_bind_completed(
    server: &CachedServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    let decision = decide_server(server, claims, liveness, gates, turn, admit);
    let free = server.spec.server_claim_ref.is_none()
        && !gates::is_cleaning(server)
        && matches!(
            server_is_claimable(server),
            Ok(()) | Err(Ineligible::Unclaimable)
        );
    let forged = claims
        .claims_naming(meta::name(server))
        .into_iter()
        .filter(|c| meta::is_bind_completed(*c))
        .min_by_key(|c| meta::name(*c).to_string());
    match (&decision, forged) {
        (ServerDecision::Available | ServerDecision::ClaimForWinner { .. }, Some(c)) if free => {
            ServerDecision::ClaimForWinner {
                winner: claim_ref_of(c),
                restoring: true,
            }
        }
        _ => decision,
    }
}

/// Release gates before issue 20: any gate name is admitted, and a condition of the
/// gate's name passes it even when the controllers write that condition themselves (a
/// gate named `Cleaning` passes itself). The server is seen with such a gate renamed,
/// and the controllers' condition copied under the new name.
pub(super) fn gate_passes_itself(
    server: &CachedServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    let mut seen = server.clone();
    let alias = |g: &str| format!("x.io/{g}-alias");
    for gate in seen.spec.release_gates.iter_mut().flatten() {
        if OWN_CONDITIONS.contains(&gate.name.as_str()) {
            gate.name = alias(&gate.name);
        }
    }
    if let Some(recorded) = seen.annotations_mut().get_mut(ANNOTATION_CLEANING_GATES) {
        *recorded = recorded
            .split(',')
            .map(|g| match OWN_CONDITIONS.contains(&g) {
                true => alias(g),
                false => g.to_string(),
            })
            .collect::<Vec<_>>()
            .join(",");
    }
    if let Some(status) = seen.status.as_mut() {
        let copies: Vec<Condition> = status
            .conditions
            .iter()
            .filter(|c| OWN_CONDITIONS.contains(&c.type_.as_str()))
            .map(|c| Condition {
                type_: alias(&c.type_),
                ..c.clone()
            })
            .collect();
        status.conditions.extend(copies);
    }
    decide_server(&seen, claims, liveness, gates, turn, admit)
}

/// Release gates before issue 20: every reconcile of a cleaning server reads the gates
/// from the spec or the controller's flag now, not from what the release recorded.
pub(super) fn gates_from_the_flag(
    server: &CachedServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    let mut seen = server.clone();
    let flag: Vec<String> = gates.to_vec();
    if let Some(recorded) = seen.annotations_mut().get_mut(ANNOTATION_CLEANING_GATES) {
        *recorded = flag.join(",");
    }
    decide_server(&seen, claims, liveness, gates, turn, admit)
}

/// A server controller without the winner rule's priorities: it hands a server to the
/// alphabetically first claim naming it, bound or not.
pub(super) fn without_winner_priority(
    server: &CachedServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    match decide_server(server, claims, liveness, gates, turn, admit) {
        ServerDecision::ClaimForWinner { .. } => {
            let mut contenders = claims.claims_naming(meta::name(server));
            contenders.retain(|c| eligibility(server, c).is_ok());
            contenders.sort_by_key(|c| meta::name(*c).to_string());
            let first = contenders[0];
            ServerDecision::ClaimForWinner {
                winner: claim_ref_of(first),
                restoring: meta::is_bind_completed(first),
            }
        }
        other => other,
    }
}

/// A claim controller that never withdraws a server it chose when another claim took it.
pub(super) fn without_withdraw(
    claim: &CachedClaim,
    servers: &dyn ServerView,
    inputs: &ClaimInputs<'_>,
    liveness: Liveness,
) -> ClaimDecision {
    match decide_claim(claim, servers, inputs, liveness) {
        ClaimDecision::WithdrawTakenServer { server, .. } => {
            ClaimDecision::WaitForServer { server }
        }
        other => other,
    }
}

/// Runs `scenario` under `mutant` and returns the violation it must produce.
pub(super) fn caught(what: &str, scenario: Scenario, mutant: Protocol) -> String {
    let started = std::time::Instant::now();
    let report = explore(&scenario, mutant);
    let violation = report
        .violation
        .unwrap_or_else(|| panic!("the {what} mutant breaks no invariant"));
    println!(
        "{what} mutant, caught in {} after {} states ({:.1?}): {violation}",
        scenario.name,
        report.states,
        started.elapsed()
    );
    violation
}

/// The wake-up rules without "an assumed choice that ends wakes the waiting claims".
pub(super) fn without_assumption_end_wakeup(_: &str, _: &ServerCatalog, _: &ClaimCatalog) -> Wake {
    Wake::default()
}

/// The wake-up rules without "a claim that starts backing off wakes the waiting claims"
/// (it stops being ahead of them). With [`decides_with_no_one_held_back`], a refused
/// claim keeps its place.
pub(super) fn refusal_wakes_nobody(
    old: Option<&CachedClaim>,
    new: Option<&CachedClaim>,
    servers: &ServerCatalog,
    claims: &ClaimCatalog,
) -> Wake {
    let mut wake = wakeups::on_claim_change(old, new, servers, claims);
    if new.is_some_and(backoff::backs_off) && !old.is_some_and(backoff::backs_off) {
        let key = new.map(claim_key).expect("a claim");
        wake.claims = [key].into_iter().collect();
    }
    wake
}

/// The server side without eviction: a server whose claim an `Evict` taint evicted stays
/// bound to it.
pub(super) fn keeps_an_evicted_claim(
    server: &CachedServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    match decide_server(server, claims, liveness, gates, turn, admit) {
        ServerDecision::Evict { .. } => ServerDecision::BoundConfirmed,
        other => other,
    }
}

/// The claim side that ends a bind as soon as an eviction runs against it, its grace
/// not run out yet.
pub(super) fn evicts_at_notice(
    claim: &CachedClaim,
    servers: &dyn ServerView,
    inputs: &ClaimInputs<'_>,
    liveness: Liveness,
) -> ClaimDecision {
    match decide_claim(claim, servers, inputs, liveness) {
        ClaimDecision::BoundConfirmed {
            server,
            eviction: Some(eviction),
            ..
        } => ClaimDecision::Evicted {
            server,
            eviction: Some(eviction),
        },
        other => other,
    }
}

/// The claim side that never ends a bind by eviction: a due eviction leaves it bound,
/// its notice standing.
pub(super) fn never_evicts(
    claim: &CachedClaim,
    servers: &dyn ServerView,
    inputs: &ClaimInputs<'_>,
    liveness: Liveness,
) -> ClaimDecision {
    match decide_claim(claim, servers, inputs, liveness) {
        ClaimDecision::Evicted {
            server,
            eviction: Some(eviction),
        } => ClaimDecision::BoundConfirmed {
            server_uid: servers
                .server(&server)
                .and_then(|s| meta::uid(s))
                .unwrap_or_default()
                .to_string(),
            server,
            selector_mismatch: false,
            server_deleting: false,
            eviction: Some(eviction),
            held: None,
        },
        other => other,
    }
}

/// The claim side without disruption budgets: every due eviction goes ahead.
pub(super) fn ignores_budgets(
    claim: &CachedClaim,
    servers: &dyn ServerView,
    inputs: &ClaimInputs<'_>,
    liveness: Liveness,
) -> ClaimDecision {
    let inputs = ClaimInputs {
        budget_hold: &|_| None,
        ..*inputs
    };
    decide_claim(claim, servers, &inputs, liveness)
}

/// The server side without "a server its claim gave back is rolled back": it waits for
/// the claim to adopt it, which the claim never does.
pub(super) fn keeps_a_given_back_server(
    server: &CachedServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    waits_instead_of_rolling_back(server, claims, liveness, gates, (turn, admit), |cause| {
        *cause == RollBackCause::GivenBack
    })
}

/// The fair order without namespaces' service: each namespace's queue alone, so the
/// oldest claim goes first however often its namespace was just served.
pub(super) fn ignores_namespace_turns(
    claim: &CachedClaim,
    servers: &dyn ServerView,
    inputs: &ClaimInputs<'_>,
    liveness: Liveness,
) -> ClaimDecision {
    let blind = inputs.pick.waiting.without_service();
    let pick = PickInputs {
        waiting: &blind,
        ..inputs.pick
    };
    decide_claim(claim, servers, &ClaimInputs { pick, ..*inputs }, liveness)
}

/// The server side before turns: a user's claim naming a free server wins it whatever
/// the claims ahead of it need.
pub(super) fn name_jumps_the_queue(
    server: &CachedServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    _turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    decide_server(server, claims, liveness, gates, &|_| true, admit)
}

/// The server decision before "Whose pick is it": any `pre-bound` ref is taken as a pick
/// made in its turn, whoever wrote it.
pub(super) fn trusts_pre_bound(
    server: &CachedServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    let trusting = |c: &CachedClaim| is_controller_chosen(c) || turn(c);
    decide_server(server, claims, liveness, gates, &trusting, admit)
}

/// The server decision, but waiting for an adoption where it would roll back for a
/// `cause` that `which` picks (the mutants of the rollback rows).
pub(super) fn waits_instead_of_rolling_back(
    server: &CachedServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    (turn, admit): (Turn<'_>, Admit<'_>),
    which: fn(&RollBackCause) -> bool,
) -> ServerDecision {
    match decide_server(server, claims, liveness, gates, turn, admit) {
        ServerDecision::RollBack { cause } if which(&cause) => {
            ServerDecision::BoundAwaitingAdoption
        }
        decision => decision,
    }
}

/// The wake-up rules without "a server that becomes free wakes the first waiting claims".
/// The claim wake-up rule without its last part for names: a claim that stops waiting
/// without a server (a back-off begins, it is deleted) wakes no free server a user's
/// claim names, only the servers the claim itself names or that name it.
pub(super) fn leaving_claim_wakes_no_named_server(
    old: Option<&CachedClaim>,
    new: Option<&CachedClaim>,
    servers: &ServerCatalog,
    claims: &ClaimCatalog,
) -> Wake {
    let mut wake = wakeups::on_claim_change(old, new, servers, claims);
    let Some(key) = new.or(old).map(claim_key) else {
        return wake;
    };
    let own: BTreeSet<String> = [old, new]
        .into_iter()
        .flatten()
        .filter_map(|c| c.spec.server_ref.as_ref().map(|r| r.name.clone()))
        .chain(
            servers
                .reserved_for(&key.namespace, &key.name)
                .into_iter()
                .map(|s| meta::name(s).to_string()),
        )
        .collect();
    wake.servers.retain(|s| own.contains(s));
    wake
}

pub(super) fn freed_server_wakes_nobody(
    old: Option<&CachedServer>,
    new: Option<&CachedServer>,
    servers: &ServerCatalog,
    claims: &ClaimCatalog,
    _: usize,
) -> Wake {
    let mut wake = wakeups::on_server_change(old, new, servers, claims, 0);
    let waiting = |k: &ClaimKey| claims.waiting().shape_of(k).is_some();
    let named: BTreeSet<ClaimKey> = [old, new]
        .into_iter()
        .flatten()
        .flat_map(|s| s.spec.server_claim_ref.iter())
        .map(|r| ClaimKey::of(&r.namespace, &r.name))
        .collect();
    wake.claims.retain(|k| !waiting(k) || named.contains(k));
    wake
}

/// The claim decision without the binder's memory of the claims backing off: until the
/// refused claim's status says so, it is still ahead of the others.
pub(super) fn decides_with_no_one_held_back(
    claim: &CachedClaim,
    servers: &dyn ServerView,
    inputs: &ClaimInputs<'_>,
    liveness: Liveness,
) -> ClaimDecision {
    let pick = PickInputs {
        held_back: &[],
        ..inputs.pick
    };
    decide_claim(claim, servers, &ClaimInputs { pick, ..*inputs }, liveness)
}

/// The assumed-choice rule before issue 10: an assumption is "seen" only by the one event
/// whose resourceVersion equals the write response's, and ends only once seen. If the
/// event comes before the response, it never ends.
pub(super) fn old_assumption_rule(a: &mut Assumption, server: &str, claim: &CachedClaim) -> bool {
    if a.written.is_some() && a.written == claim.meta().resource_version {
        a.seen = true;
    }
    let names = claim
        .spec
        .server_ref
        .as_ref()
        .is_some_and(|r| r.name == server);
    a.seen && !names
}

/// A server controller that takes `uid: ""` for a uid (of a claim that is gone).
pub(super) fn empty_uid_is_a_uid(
    server: &CachedServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    let mut seen_as = server.clone();
    if let Some(r) = seen_as.spec.server_claim_ref.as_mut()
        && r.uid.as_deref() == Some("")
    {
        r.uid = Some("an empty uid".into());
    }
    decide_server(&seen_as, claims, liveness, gates, turn, admit)
}

/// The server side before issue 10: it waits for a claim that names nothing to adopt the
/// server, even when the claim cannot (the server was cordoned, tainted or relabelled).
pub(super) fn waits_for_any_adoption(
    server: &CachedServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    waits_instead_of_rolling_back(server, claims, liveness, gates, (turn, admit), |cause| {
        matches!(cause, RollBackCause::CannotAdopt(_))
    })
}

/// The server side before quotas: it binds a claim whether or not a quota charges it.
pub(super) fn ignores_the_charge(
    server: &CachedServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    _admit: Admit<'_>,
) -> ServerDecision {
    decide_server(server, claims, liveness, gates, turn, &|_| true)
}

/// A restore without the pair: the claim now living under the name a server's ref
/// names inherits the server whether or not it names it back.
pub(super) fn inherits_by_name(
    server: &CachedServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    let r = server.spec.server_claim_ref.as_ref();
    let heir = r.and_then(|r| claims.claim(&r.namespace, &r.name).map(|c| (r, c)));
    match heir {
        Some((r, c)) if ref_uid(r).is_some() && meta::uid(c) != ref_uid(r) => {
            ServerDecision::FillUid {
                claim: meta::claim_ref_of(c),
            }
        }
        _ => decide_server(server, claims, liveness, gates, turn, admit),
    }
}

/// A mutant the model check must catch: the rules it changes, the worlds it is run in,
/// and what its violation must say (any of these).
pub(super) struct Mutant {
    name: &'static str,
    mutate: fn(&mut Protocol),
    worlds: &'static [fn() -> Scenario],
    says: &'static [&'static str],
}

pub(super) const LIVENESS: &[&str] = &["invariant 2", "liveness"];

pub(super) const MUTANTS: &[Mutant] = &[
    Mutant {
        name: "skips-gates",
        mutate: |p| p.rules.server = skips_release_gates,
        worlds: &[release_gates],
        says: &["invariant 5"],
    },
    Mutant {
        name: "trusts-bind-completed",
        mutate: |p| p.rules.server = trusts_bind_completed,
        worlds: &[tenant_forgery, lost_and_re_pointed],
        says: &["invariant 6"],
    },
    Mutant {
        name: "gate-passes-itself",
        mutate: |p| {
            p.rules.server = gate_passes_itself;
            p.gate_admitted = |_| true;
        },
        worlds: &[gate_config_changes],
        says: &["invariant 5"],
    },
    Mutant {
        name: "gates-from-the-flag",
        mutate: |p| p.rules.server = gates_from_the_flag,
        worlds: &[gate_config_changes],
        says: &["invariant 5"],
    },
    Mutant {
        name: "winner-rule",
        mutate: |p| p.rules.server = without_winner_priority,
        worlds: &[lost_ref_and_release],
        says: &["invariant 1"],
    },
    Mutant {
        name: "withdraw",
        mutate: |p| p.rules.claim = without_withdraw,
        worlds: &[user_ref_race],
        says: &["invariant 2"],
    },
    Mutant {
        name: "lowest-name-first",
        mutate: |p| p.rules.claim = lowest_name_first,
        worlds: &[stranding],
        says: &["placement: claim b is stranded"],
    },
    Mutant {
        name: "dropped-trigger",
        mutate: |p| p.rules.triggers.assumption_ended = without_assumption_end_wakeup,
        worlds: &[eligibility_churn],
        says: LIVENESS,
    },
    Mutant {
        name: "refusal-keeps-its-place",
        mutate: |p| {
            p.rules.claim = decides_with_no_one_held_back;
            p.rules.triggers.claim_changed = refusal_wakes_nobody;
        },
        worlds: &[refused_pick],
        says: LIVENESS,
    },
    Mutant {
        name: "keeps-an-evicted-claim",
        mutate: |p| p.rules.server = keeps_an_evicted_claim,
        worlds: &[eviction],
        says: &["invariant 2"],
    },
    Mutant {
        name: "ignores-budgets",
        mutate: |p| p.rules.claim = ignores_budgets,
        worlds: &[budget_of_one],
        says: &["invariant 8"],
    },
    Mutant {
        name: "keeps-given-back-server",
        mutate: |p| p.rules.server = keeps_a_given_back_server,
        worlds: &[refused_completion],
        says: &["liveness: claim bbb", "invariant 2"],
    },
    Mutant {
        name: "freed-server-wakes-nobody",
        mutate: |p| p.rules.triggers.server_changed = freed_server_wakes_nobody,
        worlds: &[freed_server_wakes_the_first],
        says: LIVENESS,
    },
    Mutant {
        name: "leaving-claim-wakes-no-name",
        mutate: |p| p.rules.triggers.claim_changed = leaving_claim_wakes_no_named_server,
        worlds: &[names_past_a_refused_claim],
        says: &["claim bbb"],
    },
    Mutant {
        name: "oldest-first",
        mutate: |p| p.rules.claim = ignores_namespace_turns,
        worlds: &[namespaces_take_turns],
        says: LIVENESS,
    },
    Mutant {
        name: "name-jumps-the-queue",
        mutate: |p| p.rules.server = name_jumps_the_queue,
        worlds: &[named_server_waits_its_turn],
        says: &["liveness: claim aaa"],
    },
    Mutant {
        name: "trusts-pre-bound",
        mutate: |p| p.rules.server = trusts_pre_bound,
        worlds: &[forged_pre_bound_waits_its_turn],
        says: &["liveness: claim aaa"],
    },
    Mutant {
        name: "old-assumption-rule",
        mutate: |p| p.rules.assumption_ends = old_assumption_rule,
        worlds: &[eligibility_churn],
        says: LIVENESS,
    },
    Mutant {
        name: "empty-uid",
        mutate: |p| p.rules.server = empty_uid_is_a_uid,
        worlds: &[empty_uid_and_copies],
        says: &["Released"],
    },
    Mutant {
        name: "orphan",
        mutate: |p| p.rules.server = waits_for_any_adoption,
        worlds: &[orphan_and_cordon],
        says: &["orphaned reservation"],
    },
    Mutant {
        name: "ignores-the-charge",
        mutate: |p| p.rules.server = ignores_the_charge,
        worlds: &[quota_holds],
        says: &["invariant 7"],
    },
    Mutant {
        name: "charge-without-precondition",
        mutate: |p| p.charge_precondition = false,
        worlds: &[quota_holds],
        says: &["invariant 7"],
    },
    Mutant {
        name: "gates-of-the-moment",
        mutate: |p| p.rules.class_gates = |_, now| now,
        worlds: &[class_narrowed_mid_bind, class_deleted_mid_bind],
        says: &["invariant 5"],
    },
    Mutant {
        name: "admits-before-counting",
        mutate: |p| p.rules.quota_counted = |_| true,
        worlds: &[
            quota_created_at_the_limit,
            quota_re_created,
            quota_status_wiped,
        ],
        says: &["invariant 7"],
    },
    Mutant {
        name: "restored-above-hard",
        mutate: |p| p.restored_within_hard = false,
        worlds: &[restored_past_the_quota],
        says: &["invariant 7"],
    },
    Mutant {
        name: "inherits-by-name",
        mutate: |p| p.rules.server = inherits_by_name,
        worlds: &[restored_then_re_created],
        says: &["invariant 6"],
    },
    Mutant {
        name: "evicts-at-notice",
        mutate: |p| p.rules.claim = evicts_at_notice,
        worlds: &[grace],
        says: &["invariant 9"],
    },
    Mutant {
        name: "never-evicts",
        mutate: |p| p.rules.claim = never_evicts,
        worlds: &[grace],
        says: &["liveness"],
    },
    Mutant {
        name: "evicts-without-a-record",
        mutate: |p| p.record_evictions = false,
        worlds: &[budget_hand_over],
        says: &["invariant 8"],
    },
    Mutant {
        name: "record-without-precondition",
        mutate: |p| p.record_precondition = false,
        worlds: &[budget_hand_over],
        says: &["invariant 8"],
    },
    Mutant {
        name: "recount-trusts-the-cache",
        mutate: |p| p.recount_reads_live = false,
        worlds: &[quota_freed_by_delete],
        says: &["invariant 7"],
    },
];

/// Runs the mutant of this name in each of its worlds: each must break an invariant, as
/// its entry says.
pub(super) fn catches(name: &str) {
    let mutant = MUTANTS
        .iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("no mutant {name}"));
    let mut protocol = Protocol::real();
    (mutant.mutate)(&mut protocol);
    for world in mutant.worlds {
        let violation = caught(mutant.name, world(), protocol);
        assert!(
            mutant.says.iter().any(|s| violation.contains(s)),
            "{name}: {violation}"
        );
    }
}

macro_rules! mutant_tests {
    ($($test:ident: $name:literal;)*) => {
        $(
            #[test]
            fn $test() {
                catches($name);
            }
        )*

        /// Every mutant of the table has its test.
        #[test]
        fn every_mutant_is_tested() {
            let tested = [$($name),*];
            for m in MUTANTS {
                assert!(tested.contains(&m.name), "mutant {} has no test", m.name);
            }
        }
    };
}

mutant_tests! {
    the_model_check_catches_a_release_that_skips_the_gates: "skips-gates";
    the_model_check_catches_a_server_side_that_trusts_bind_completed: "trusts-bind-completed";
    the_model_check_catches_a_gate_named_after_a_controller_condition: "gate-passes-itself";
    the_model_check_catches_gates_read_from_the_flag_at_every_reconcile: "gates-from-the-flag";
    the_model_check_catches_a_winner_rule_without_priorities: "winner-rule";
    the_model_check_catches_a_claim_that_never_withdraws: "withdraw";
    the_model_check_catches_lowest_name_first: "lowest-name-first";
    the_model_check_catches_a_dropped_wake_up_rule: "dropped-trigger";
    the_model_check_catches_the_old_assumed_choice_rule: "old-assumption-rule";
    the_model_check_catches_a_refused_claim_that_keeps_its_place: "refusal-keeps-its-place";
    the_model_check_catches_a_given_back_server_kept: "keeps-given-back-server";
    the_model_check_catches_a_server_that_keeps_an_evicted_claim: "keeps-an-evicted-claim";
    the_model_check_catches_a_claim_side_that_ignores_budgets: "ignores-budgets";
    the_model_check_catches_an_eviction_without_a_budget_record: "evicts-without-a-record";
    the_model_check_catches_an_eviction_before_its_deadline: "evicts-at-notice";
    the_model_check_catches_a_claim_side_that_never_evicts: "never-evicts";
    the_model_check_catches_a_budget_record_without_its_precondition: "record-without-precondition";
    the_model_check_catches_a_freed_server_that_wakes_nobody: "freed-server-wakes-nobody";
    the_model_check_catches_a_name_that_jumps_the_queue: "name-jumps-the-queue";
    the_model_check_catches_a_back_off_that_wakes_no_name: "leaving-claim-wakes-no-name";
    the_model_check_catches_a_forged_pre_bound_taken_as_a_pick: "trusts-pre-bound";
    the_model_check_catches_a_fair_order_without_turns: "oldest-first";
    the_model_check_catches_an_empty_uid_taken_for_a_uid: "empty-uid";
    the_model_check_catches_the_old_orphan_behaviour: "orphan";
    the_model_check_catches_a_server_side_that_ignores_the_charge: "ignores-the-charge";
    the_model_check_catches_a_charge_without_its_precondition: "charge-without-precondition";
    the_model_check_catches_a_quota_that_admits_before_it_counts: "admits-before-counting";
    the_model_check_catches_release_gates_read_from_the_class_now: "gates-of-the-moment";
    the_model_check_catches_a_recount_that_trusts_the_cache: "recount-trusts-the-cache";
    the_model_check_catches_a_restored_pair_charged_above_hard: "restored-above-hard";
    the_model_check_catches_a_name_that_inherits_without_the_pair: "inherits-by-name";
}
