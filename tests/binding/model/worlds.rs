//! The worlds the model check explores.

use super::*;

/// Lowest-name-first strands a claim here: `a` takes any server and would take s1 first,
/// the only server `b` can use. A pick that keeps a maximum matching gives `a` s2. One
/// controller that neither crashes nor loses responses: the blind branch would turn the
/// picks a restart or a lost response leaves behind into another process's unseen pick,
/// and a pick that cannot see a rival's choice can strand it (known gap in
/// docs/binding.md).
pub fn stranding() -> Scenario {
    Scenario {
        name: "stranding",
        servers: vec![
            server("s1").labelled(&[("rack", "r1")]),
            server("s2").labelled(&[("rack", "r2")]),
        ],
        claims: vec![
            claim("a").created(1),
            claim("b").selects(&[("rack", "r1")]).created(2),
        ],
        user_ops: vec![],
        crashes: 0,
        faults: 0,
        resyncs: 0,
        max_lag: MAX_LAG,
        all_bind: true,
        ..Scenario::default()
    }
}

/// A user names s1 for `u` while `a`, not yet seeing `u`, may pick s1 too (both servers
/// are alike, and s1 has the lowest name): `a` must withdraw and take s2.
pub fn user_ref_race() -> Scenario {
    Scenario {
        name: "user-ref-race",
        servers: vec![server("s1"), server("s2")],
        claims: vec![claim("a").created(1), claim("u").names("s1").created(2)],
        user_ops: vec![],
        crashes: 1,
        faults: 0,
        resyncs: 0,
        max_lag: 2,
        all_bind: true,
        ..Scenario::default()
    }
}

/// One server, `aaa` waiting for it, then `bbb`, whose user names that server: a name
/// says which server, not when, so `aaa`, ahead in the fair order, binds in every
/// quiescent state and `bbb` waits its turn (docs/binding.md, "The matching").
pub fn named_server_waits_its_turn() -> Scenario {
    Scenario {
        name: "named-server-waits-its-turn",
        servers: vec![server("s1")],
        claims: vec![claim("aaa").created(1), claim("bbb").names("s1").created(2)],
        crashes: 1,
        // A lost response counts as a refused write, and a claim backing off is ahead
        // of nobody: with one, `bbb` may bind first, as it should.
        faults: 0,
        max_lag: MAX_LAG,
        must_bind: vec!["aaa"],
        ..Scenario::default()
    }
}

/// One server, `aaa` waiting for it, then a tenant's `t`, which may write `pre-bound` and
/// a `serverRef` naming s1, in either order, at any point: a `pre-bound` is a pick only
/// while this controller has it in flight (docs/binding.md, "Whose pick is it"), so
/// `aaa`, ahead in the fair order, binds in every quiescent state, crashes included.
pub fn forged_pre_bound_waits_its_turn() -> Scenario {
    Scenario {
        name: "forged-pre-bound-waits-its-turn",
        servers: vec![server("s1")],
        claims: vec![claim("aaa").created(1), claim("t").created(2)],
        // A restarted claim controller may not yet see `aaa`'s pick from before (known
        // gap 5): it may then take `t`'s up, as it would take up a pick of its own.
        crashes: 0,
        faults: 0,
        max_lag: 2,
        must_bind: vec!["aaa"],
        tenant: Some(Tenant {
            claim: "t",
            edits: vec![
                TenantEdit::Annotate(ANNOTATION_PRE_BOUND),
                TenantEdit::Point("s1"),
            ],
            budget: 2,
        }),
        ..Scenario::default()
    }
}

/// `aaa`, whose every write admission refuses, waits ahead of `bbb`, whose user names
/// s1 (rack r1), and of `ccc`, which selects rack r2 and carries a `pre-bound` ref to s2
/// this controller did not pick: while `aaa` backs off it is ahead of nobody, so both
/// get their servers, however the turns flip as its back-offs begin and end.
pub fn names_past_a_refused_claim() -> Scenario {
    Scenario {
        name: "names-past-a-refused-claim",
        servers: vec![
            server("s1").labelled(&[("rack", "r1")]),
            server("s2").labelled(&[("rack", "r2")]),
        ],
        claims: vec![
            claim("aaa").created(1),
            claim("bbb").names("s1").created(2),
            claim("ccc")
                .selects(&[("rack", "r2")])
                .chose("s2")
                .created(3),
        ],
        crashes: 0,
        faults: 0,
        max_lag: 1,
        refuses: Some(|_, new| meta::name(new) == "aaa"),
        must_bind: vec!["bbb", "ccc"],
        never_bind: vec!["aaa"],
        ..Scenario::default()
    }
}

/// Namespaces take turns (docs/binding.md, "The matching"): `a0` and `x0` of team-a hold
/// s1 and s2; `a1` and `a2` of team-a wait, then `b1` of team-b. Both holders go, in
/// either order and at any time: `a1`, first, takes one server, and `b1`, not `a2`,
/// the other, although `a2` is older: team-a was served since `b1` began waiting.
pub fn namespaces_take_turns() -> Scenario {
    let holder = |name: &str, on: &str, created: i64| {
        claim(name)
            .chose(on)
            .bind_completed()
            .phase(ClaimPhase::Bound)
            .created(created)
    };
    let mut b1 = claim("b1").created(4);
    b1.meta_mut().namespace = Some("team-b".into());
    Scenario {
        name: "namespaces-take-turns",
        servers: vec![
            server("s1")
                .claimed_for("a0", "uid-a0")
                .phase(ServerPhase::Bound),
            server("s2")
                .claimed_for("x0", "uid-x0")
                .phase(ServerPhase::Bound),
        ],
        claims: vec![
            holder("a0", "s1", 0),
            holder("x0", "s2", 0),
            claim("a1").created(2),
            claim("a2").created(3),
            b1,
        ],
        user_ops: vec![UserOp::DeleteClaim("a0"), UserOp::DeleteClaim("x0")],
        // A restarted claim controller does not see its own picks from before (known
        // gap 5), and a lost response counts as a refusal (the claim backs off): either
        // may pass a claim over, as docs/binding.md says.
        crashes: 0,
        faults: 0,
        max_lag: 2,
        must_bind: vec!["a1", "b1"],
        ..Scenario::default()
    }
}

/// Three claims compete for two servers: one takes any server, one wants rack r1 by
/// selector, and a user pre-bound one to s1 (rack r1), the server the controller would
/// pick first for either of the others.
pub fn contention() -> Scenario {
    Scenario {
        name: "contention",
        servers: vec![
            server("s1").labelled(&[("rack", "r1")]),
            server("s2").labelled(&[("rack", "r2")]),
        ],
        claims: vec![
            claim("a").created(1),
            claim("b").selects(&[("rack", "r1")]).created(2),
            claim("u").names("s1").created(3),
        ],
        user_ops: vec![],
        crashes: 1,
        faults: 0,
        resyncs: 0,
        max_lag: 2,
        all_bind: false,
        ..Scenario::default()
    }
}

/// A user reserved s1 for claim a by name; claim b is deleted and re-created under the
/// same name while the controllers run.
pub fn reservation_and_recreate() -> Scenario {
    Scenario {
        name: "reservation-and-recreate",
        servers: vec![server("s1").reserved_for("a"), server("s2")],
        claims: vec![claim("a").created(1), claim("b").created(2)],
        user_ops: vec![
            UserOp::DeleteClaim("b"),
            UserOp::CreateClaim(Box::new(claim("b").uid("uid-b-2").created(5))),
        ],
        crashes: 0,
        faults: 1,
        resyncs: 0,
        max_lag: 2,
        all_bind: false,
        ..Scenario::default()
    }
}

/// A bound server loses its ref (an admin's mistake) while a newer claim, whose name sorts
/// first, wants a server; then that claim goes away from a Retain server.
pub fn lost_ref_and_release() -> Scenario {
    Scenario {
        name: "lost-ref-and-release",
        servers: vec![
            server("s1")
                .claimed_for("b", "uid-b")
                .phase(ServerPhase::Bound),
            server("s2").retain(),
        ],
        claims: vec![
            claim("b")
                .chose("s1")
                .bind_completed()
                .phase(ClaimPhase::Bound)
                .created(1),
            claim("a").created(2),
        ],
        user_ops: vec![
            UserOp::EditServer("s1", ServerEdit::ClearRef),
            UserOp::DeleteClaim("a"),
        ],
        crashes: 1,
        faults: 0,
        resyncs: 0,
        max_lag: MAX_LAG,
        all_bind: false,
        ..Scenario::default()
    }
}

/// A claim picks the only server, which is tainted before the server side records the
/// claim; the claim withdraws, and a claim that tolerates the taint arrives. The pick's
/// assumption must end with the withdrawal, whichever of the write's event and response
/// comes first, and the newcomer must be woken to take the server.
pub fn eligibility_churn() -> Scenario {
    Scenario {
        name: "eligibility-churn",
        servers: vec![server("s1")],
        claims: vec![claim("a").created(1)],
        user_ops: vec![
            UserOp::EditServer("s1", ServerEdit::Taint("gpu")),
            UserOp::CreateClaim(Box::new(claim("b").tolerates("gpu").created(2))),
        ],
        crashes: 0,
        faults: 1,
        resyncs: 1,
        max_lag: MAX_LAG,
        all_bind: false,
        ..Scenario::default()
    }
}

/// Eligibility churn again, with a claim that already shows why it waits (a summary,
/// which the model never refreshes): when its pick's write fails, nothing but the failure
/// itself ends the assumption (no new version of the claim follows), so the binder must
/// end it there, or the newcomer waits beside a free server.
pub fn failed_pick() -> Scenario {
    Scenario {
        name: "failed-pick",
        claims: vec![showing_a_summary(claim("a").created(1))],
        ..eligibility_churn()
    }
}

/// A claim (`aaa`, the oldest) whose every write admission refuses, as a webhook of the
/// cluster's own might, and a claim (`bbb`) that fits the one server too: `aaa` backs
/// off, ahead of nobody, and `bbb` binds (docs/binding.md, "Refused writes").
pub fn refused_pick() -> Scenario {
    Scenario {
        name: "refused-pick",
        servers: vec![server("s1")],
        claims: vec![claim("aaa").created(1), claim("bbb").created(2)],
        crashes: 1,
        faults: 1,
        max_lag: 2,
        refuses: Some(|_, new| meta::name(new) == "aaa"),
        must_bind: vec!["bbb"],
        never_bind: vec!["aaa"],
        ..Scenario::default()
    }
}

/// As [`refused_pick`], but `aaa`'s pick is let in and only its completing write
/// (`bind-completed`) is refused: `aaa` gives the server back while it backs off, and
/// `bbb` binds. Without injected faults: a pick whose response is lost counts as a
/// refused pick, after which `aaa` holds the server it named until its back-off ends,
/// and the model bounds how many back-offs end.
pub fn refused_completion() -> Scenario {
    Scenario {
        name: "refused-completion",
        faults: 0,
        refuses: Some(|old, new| {
            meta::name(new) == "aaa"
                && !meta::is_bind_completed(old)
                && meta::is_bind_completed(new)
        }),
        ..refused_pick()
    }
}

/// `a` holds `s1`; `b`, `c` and `d`, alike, wait. `a` is deleted: `s1` is released and
/// wakes only the first two waiting claims in the fair order (free servers + picks in
/// flight + 1 per shape), not `d`. `b`, first, binds; a failed pick still lets `c` in.
pub fn freed_server_wakes_the_first() -> Scenario {
    let mut claims = a_bound_and_b_waiting();
    claims.push(claim("c").created(3));
    claims.push(claim("d").created(4));
    Scenario {
        name: "freed-server-wakes-the-first",
        servers: vec![a_on_s1(&[])],
        claims,
        user_ops: vec![UserOp::DeleteClaim("a")],
        crashes: 0,
        faults: 1,
        max_lag: 2,
        ..Scenario::default()
    }
}

/// A claim whose status shows it waiting, with the summary the claim controller writes.
pub(super) fn showing_a_summary(claim: CachedClaim) -> CachedClaim {
    let mut claim = claim.phase(ClaimPhase::Pending);
    let status = claim.status.get_or_insert_with(Default::default);
    status.conditions = vec![Condition {
        type_: CONDITION_BOUND.into(),
        status: "False".into(),
        reason: "NoMatchingServer".into(),
        message: "0/0 servers can serve this claim".into(),
        last_transition_time: t(0),
        observed_generation: None,
    }];
    claim
}

/// The server written first (s1 carries a's uid, a names nothing); a selector that only
/// s1 matches is added to a, s1 is cordoned, and s2 is relabelled and untainted (still
/// not matching).
/// a must end up bound to s1 (if it adopted it before the cordon), or pending with s1
/// rolled back: never an orphaned reservation.
pub fn orphan_and_cordon() -> Scenario {
    Scenario {
        name: "orphan-and-cordon",
        servers: vec![
            server("s1")
                .labelled(&[("rack", "r1")])
                .claimed_for("a", "uid-a")
                .phase(ServerPhase::Bound),
            server("s2").labelled(&[("rack", "r2")]).taint("maint"),
        ],
        claims: vec![claim("a").created(1)],
        user_ops: vec![
            UserOp::AddSelector("a", "rack", "r1"),
            UserOp::EditServer("s1", ServerEdit::Cordon),
            UserOp::EditServer("s2", ServerEdit::Label("size", "large")),
            UserOp::EditServer("s2", ServerEdit::Untaint),
        ],
        crashes: 1,
        faults: 0,
        resyncs: 0,
        max_lag: MAX_LAG,
        all_bind: false,
        ..Scenario::default()
    }
}

/// A Retain server reserved for a with `uid: ""` (a reservation by name, as Go tools
/// write it), and a claim created with a `bind-completed` annotation copied from another
/// object; a second server is cordoned, then uncordoned. Both claims must bind; s1 is
/// never Released.
pub fn empty_uid_and_copies() -> Scenario {
    Scenario {
        name: "empty-uid-and-copies",
        servers: vec![
            server("s1").retain().reserved_for("a").uid_ref(""),
            server("s2").unclaimable(),
        ],
        claims: vec![claim("a").created(1)],
        user_ops: vec![
            UserOp::CreateClaim(Box::new(claim("b").bind_completed().created(2))),
            UserOp::EditServer("s2", ServerEdit::Uncordon),
        ],
        crashes: 1,
        faults: 0,
        resyncs: 0,
        max_lag: MAX_LAG,
        all_bind: false,
        ..Scenario::default()
    }
}

/// A tenant leaves a server with a release gate while another claim waits, and cleaners
/// pass the gate: one that read the server while the tenant still held it (a stale
/// pass), and one that starts after the tenant left, passing at any point. The waiting
/// claim must never get the server before a cleaning done after the tenant left
/// (invariant 5), with a crash and a failed write anywhere.
pub fn release_gates() -> Scenario {
    Scenario {
        name: "release-gates",
        servers: vec![a_on_s1(&[WIPE])],
        claims: a_bound_and_b_waiting(),
        user_ops: vec![
            UserOp::StartCleaner("stale", "s1", WIPE),
            UserOp::FinishCleaner("stale"),
            UserOp::DeleteClaim("a"),
            UserOp::StartCleaner("cleaner", "s1", WIPE),
            UserOp::FinishCleaner("cleaner"),
        ],
        crashes: 1,
        faults: 1,
        resyncs: 0,
        max_lag: MAX_LAG,
        all_bind: false,
        ..Scenario::default()
    }
}

/// An admin takes s1 back from `a` with an `Evict` taint `a` does not tolerate, while
/// `b` waits; a cleaner wipes s1; the taint goes. Whatever the interleaving (the taint
/// may also go before the eviction, cancelling it): s1 holds one claim at a time, never
/// reaches `b` before the wipe, and `a`, once evicted, never holds it again (invariant
/// 2's phase rule at quiescence).
pub fn eviction() -> Scenario {
    Scenario {
        name: "eviction",
        servers: vec![a_on_s1(&[WIPE])],
        claims: a_bound_and_b_waiting(),
        user_ops: vec![
            UserOp::EditServer("s1", ServerEdit::Evict("maint")),
            UserOp::StartCleaner("cleaner", "s1", WIPE),
            UserOp::FinishCleaner("cleaner"),
            UserOp::EditServer("s1", ServerEdit::Untaint),
        ],
        crashes: 1,
        faults: 1,
        resyncs: 0,
        max_lag: MAX_LAG,
        all_bind: false,
        ..Scenario::default()
    }
}

/// `a` on s1 tolerates the `Evict` taint `maint` for 600 s; `b` waits. An admin taints
/// s1 (the server controller stamps it now), and later the grace runs out; a crash may
/// fall anywhere, mid-grace too. Whatever the interleaving, `a`'s bind ends only once the
/// grace ran out (invariant 9), and then it does, through the gate.
pub fn grace() -> Scenario {
    let mut claims = a_bound_and_b_waiting();
    let a = &mut claims[0];
    a.spec.tolerations.push(Toleration {
        key: "maint".into(),
        operator: TolerationOperator::Exists,
        value: None,
        effect: Some(TaintEffect::Evict),
        toleration_seconds: Some(600),
    });
    Scenario {
        name: "grace",
        servers: vec![a_on_s1(&[WIPE])],
        claims,
        user_ops: vec![
            UserOp::EditServer("s1", ServerEdit::Evict("maint")),
            UserOp::EditServer("s1", ServerEdit::GraceRunsOut),
            UserOp::StartCleaner("cleaner", "s1", WIPE),
            UserOp::FinishCleaner("cleaner"),
        ],
        crashes: 1,
        faults: 0,
        resyncs: 0,
        max_lag: 2,
        all_bind: false,
        evicted_at_rest: vec!["a"],
        ..Scenario::default()
    }
}

/// `a` on s1 and `c` on s2, both `app=web` under a budget of `maxUnavailable: 1`; an
/// admin taints both servers `Evict` (neither claim tolerates it), and a crash may fall
/// anywhere. Whatever the order, one bind ends and the budget holds the other
/// (invariant 8): the claim side's lock and its memory of evictions in flight keep two
/// decisions from both taking the budget's one disruption.
pub fn budget_of_one() -> Scenario {
    let web = |c: CachedClaim| {
        let mut c = c;
        c.labels_mut().insert("app".into(), "web".into());
        c
    };
    let bound = |name: &str, server: &str, created: i64| {
        web(claim(name)
            .chose(server)
            .bind_completed()
            .phase(ClaimPhase::Bound)
            .created(created))
    };
    let budget: ServerDisruptionBudget = serde_json::from_value(serde_json::json!({
        "apiVersion": "metal.binder.dev/v1alpha1",
        "kind": "ServerDisruptionBudget",
        "metadata": {"name": "web", "namespace": crate::common::names::NS},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1},
    }))
    .expect("a budget");
    Scenario {
        name: "budget-of-one",
        servers: vec![
            a_on_s1(&[]),
            server("s2")
                .claimed_for("c", "uid-c")
                .phase(ServerPhase::Bound),
        ],
        claims: vec![bound("a", "s1", 1), bound("c", "s2", 2)],
        user_ops: vec![
            UserOp::EditServer("s1", ServerEdit::Evict("maint")),
            UserOp::EditServer("s2", ServerEdit::Evict("maint")),
        ],
        crashes: 1,
        faults: 0,
        resyncs: 0,
        max_lag: MAX_LAG,
        all_bind: false,
        budgets: vec![budget],
        ..Scenario::default()
    }
}

/// `budget-of-one` across a leader hand-over: the claim controller's process may hand
/// over once with a plan in flight (before its first write, or between writes), and the
/// old process's writes land later, each at the version its decision read, while the
/// new one decides on a fresh list. The budget's record of each eviction, written at the
/// budget's resourceVersion before the eviction, keeps the two processes from both
/// taking the budget's one disruption (invariant 8).
pub fn budget_hand_over() -> Scenario {
    Scenario {
        name: "budget-hand-over",
        crashes: 0,
        handovers: 1,
        max_lag: 2,
        ..budget_of_one()
    }
}

/// The gate every gated world uses: a valid name (a domain prefix).
pub(super) const WIPE: &str = "x.io/wipe";

/// `s1` bound to `a`, with these release gates of its own (none: the spec names none).
pub(super) fn a_on_s1(gates: &[&str]) -> CachedServer {
    let s1 = server("s1")
        .claimed_for("a", "uid-a")
        .phase(ServerPhase::Bound);
    if gates.is_empty() {
        s1
    } else {
        s1.gates(gates)
    }
}

/// `a` bound to `s1`, and `b`, newer, waiting for a server.
pub(super) fn a_bound_and_b_waiting() -> Vec<CachedClaim> {
    vec![
        claim("a")
            .chose("s1")
            .bind_completed()
            .phase(ClaimPhase::Bound)
            .created(1),
        claim("b").created(2),
    ]
}

/// The gates' configuration changes around a release: an admin tries to name a gate
/// after the controllers' `Cleaning` condition (admission refuses it), the tenant leaves
/// s1 (whose gates are the controller's default), and the server controller restarts
/// without default gates, before or after the release. A cleaner then passes the gate.
/// Whatever the order, the waiting claim never gets s1 before a cleaning the release
/// asked for (invariant 5).
pub fn gate_config_changes() -> Scenario {
    Scenario {
        name: "gate-config-changes",
        servers: vec![a_on_s1(&[])],
        claims: a_bound_and_b_waiting(),
        user_ops: vec![
            UserOp::SetGates("s1", vec!["Cleaning"]),
            UserOp::DeleteClaim("a"),
            UserOp::RestartServerController(vec![]),
            UserOp::StartCleaner("cleaner", "s1", WIPE),
            UserOp::FinishCleaner("cleaner"),
        ],
        crashes: 0,
        faults: 1,
        resyncs: 0,
        handovers: 0,
        max_lag: MAX_LAG,
        all_bind: false,
        default_gates: vec![WIPE],
        tenant: None,
        refuses: None,
        must_bind: vec![],
        never_bind: vec![],
        classes: vec![],
        quotas: vec![],
        one_bound_of: vec![],
        evicted_at_rest: vec![],
        budgets: vec![],
    }
}

/// Two releases of one gated server, and a slow cleaner: it reads the first release, a
/// fast one passes that release, the next tenant binds and leaves, and only then the
/// slow pass lands, naming the first release. It cleans nothing of the second tenant's.
pub fn late_pass() -> Scenario {
    Scenario {
        name: "late-pass",
        servers: vec![a_on_s1(&[WIPE])],
        claims: a_bound_and_b_waiting(),
        user_ops: vec![
            UserOp::DeleteClaim("a"),
            UserOp::StartCleaner("slow", "s1", WIPE),
            UserOp::StartCleaner("fast", "s1", WIPE),
            UserOp::FinishCleaner("fast"),
            UserOp::DeleteClaim("b"),
            UserOp::CreateClaim(Box::new(claim("c").created(3))),
            UserOp::FinishCleaner("slow"),
        ],
        crashes: 0,
        faults: 0,
        resyncs: 0,
        max_lag: 2,
        all_bind: false,
        ..Scenario::default()
    }
}

/// An untrusted tenant owns `t`, which selects rack r1: no server can serve it (s1 is
/// cordoned, s2 is in rack r2). At any point it may forge `bind-completed`, point `t` at
/// either server and drop the ref again, two writes in all, each as admission allows.
/// `v` takes any server and must get s2. `t` must never get a server (invariant 6).
pub fn tenant_forgery() -> Scenario {
    Scenario {
        name: "tenant-forgery",
        servers: vec![
            server("s1").labelled(&[("rack", "r1")]).unclaimable(),
            server("s2").labelled(&[("rack", "r2")]),
        ],
        claims: vec![
            claim("t").selects(&[("rack", "r1")]).created(1),
            claim("v").created(2),
        ],
        user_ops: vec![],
        crashes: 0,
        faults: 0,
        resyncs: 0,
        handovers: 0,
        max_lag: 2,
        all_bind: false,
        default_gates: vec![],
        tenant: Some(Tenant {
            claim: "t",
            edits: vec![
                TenantEdit::Annotate(ANNOTATION_BIND_COMPLETED),
                TenantEdit::Point("s1"),
                TenantEdit::Point("s2"),
                TenantEdit::Unpoint,
            ],
            budget: 2,
        }),
        refuses: None,
        must_bind: vec![],
        never_bind: vec![],
        classes: vec![],
        quotas: vec![],
        one_bound_of: vec![],
        evicted_at_rest: vec![],
        budgets: vec![],
    }
}

/// A tenant's claim `t` was bound once and is `Lost` (its server is gone): it keeps
/// `bind-completed` and its `boundTime`. The tenant drops its ref and points it at s1
/// (cordoned) or s2 (tainted): neither may be given to it (invariant 6). A forged
/// `pre-bound`, a dropped `bind-completed` or an added selector change nothing about
/// that.
pub fn lost_and_re_pointed() -> Scenario {
    Scenario {
        name: "lost-and-re-pointed",
        servers: vec![server("s1").unclaimable(), server("s2").taint("gpu")],
        claims: vec![
            claim("t")
                .chose("gone")
                .bind_completed()
                .phase(ClaimPhase::Lost)
                .created(1),
        ],
        user_ops: vec![],
        crashes: 1,
        faults: 0,
        resyncs: 0,
        handovers: 0,
        max_lag: MAX_LAG,
        all_bind: false,
        default_gates: vec![],
        tenant: Some(Tenant {
            claim: "t",
            edits: vec![
                TenantEdit::Unpoint,
                TenantEdit::Point("s1"),
                TenantEdit::Point("s2"),
                TenantEdit::Annotate(ANNOTATION_PRE_BOUND),
                TenantEdit::Unannotate(ANNOTATION_BIND_COMPLETED),
                TenantEdit::Select("rack", "r9"),
            ],
            budget: 3,
        }),
        refuses: None,
        must_bind: vec![],
        never_bind: vec![],
        classes: vec![],
        quotas: vec![],
        one_bound_of: vec![],
        evicted_at_rest: vec![],
        budgets: vec![],
    }
}

/// The class of the quota worlds' claims: no selector, so it takes in every server.
pub(super) const GPU: &str = "gpu";

pub(super) fn gpu_class() -> ServerClass {
    ServerClass::new(GPU, ServerClassSpec::default())
}

/// A claim of class gpu.
pub(super) fn gpu(mut claim: CachedClaim) -> CachedClaim {
    claim.spec.server_class_name = Some(GPU.into());
    claim
}

/// Quota `q` of team-a: `hard` servers of class gpu, charging these claims (name, uid),
/// its status as the recount writes it.
pub(super) fn gpu_quota(hard: i64, charged: &[(&str, &str)]) -> ServerQuota {
    let spec = ServerQuotaSpec {
        hard: [(GPU.to_string(), hard)].into(),
    };
    let mut q = ServerQuota::new("q", spec);
    q.metadata.namespace = Some(NS.into());
    let holders: Vec<quota::Holder> = charged
        .iter()
        .map(|(claim, uid)| quota::Holder {
            class: GPU.into(),
            claim: claim.to_string(),
            uid: uid.to_string(),
            holds: quota::Holds::Bound,
        })
        .collect();
    let live: quota::LiveClaims = charged
        .iter()
        .map(|(claim, uid)| {
            let live = quota::LiveClaim {
                uid: uid.to_string(),
                class: Some(GPU.into()),
                bound: false,
            };
            (claim.to_string(), live)
        })
        .collect();
    q.status = quota::recount(&q, &live, &holders);
    q
}

/// A quota of one gpu server, two servers, and two claims of class gpu: `a` takes any
/// server, `b`'s user names s2 (a name is no way around a quota). Whichever is charged
/// first binds; the other waits over quota, in every interleaving (invariant 7), and
/// one of them binds in every quiescent state.
pub fn quota_holds() -> Scenario {
    Scenario {
        name: "quota-holds",
        servers: vec![server("s1"), server("s2")],
        claims: vec![
            gpu(claim("a").created(1)),
            gpu(claim("b").names("s2").created(2)),
        ],
        crashes: 1,
        faults: 0,
        max_lag: 2,
        classes: vec![gpu_class()],
        quotas: vec![gpu_quota(1, &[])],
        one_bound_of: vec!["a", "b"],
        ..Scenario::default()
    }
}

/// A quota of one gpu server charges `a`, bound to s1; `b` waits over quota, s2 free.
/// The user deletes `a` and creates `a` again (a new uid): the recount must free the old
/// charge (a read says the claim is gone) and never the new one's, so exactly one of the
/// new `a` and `b` ends bound, and never two at once (invariant 7).
pub fn quota_freed_by_delete() -> Scenario {
    Scenario {
        name: "quota-freed-by-delete",
        servers: vec![
            server("s1")
                .claimed_for("a", "uid-a")
                .phase(ServerPhase::Bound),
            server("s2"),
        ],
        claims: vec![
            gpu(claim("a")
                .chose("s1")
                .bind_completed()
                .phase(ClaimPhase::Bound)
                .created(1)),
            gpu(claim("b").created(2)),
        ],
        user_ops: vec![
            UserOp::DeleteClaim("a"),
            UserOp::CreateClaim(Box::new(gpu(claim("a").uid("uid-a-2").created(5)))),
        ],
        crashes: 0,
        faults: 0,
        max_lag: 1,
        classes: vec![gpu_class()],
        quotas: vec![gpu_quota(1, &[("a", "uid-a")])],
        one_bound_of: vec!["a", "b"],
        ..Scenario::default()
    }
}

/// A restore (or a tenant's delete and re-create) under a full quota: `a` holds s1 and
/// the quota's one gpu server; s0's ref names `x` with the uid of a gone incarnation
/// (bound under class gpu, as s0's record says), and the `x` now living (class gpu)
/// names s0 back with copied annotations. `x` never
/// binds while `a` holds the quota (invariant 7), never loses s0 (no release: s0 would
/// then be Released), and binds s0 once `a` is deleted.
pub fn restored_past_the_quota() -> Scenario {
    let (mut servers, mut claims) = a_holds_s1_b_waits();
    let mut s0 = server("s0").claimed_for("x", "uid-x-old");
    let record = gates::BoundClass {
        class: GPU.into(),
        release_gates: None,
    };
    s0.annotations_mut()
        .insert(ANNOTATION_BOUND_CLASS.into(), record.annotation());
    servers[1] = s0;
    claims[1] = gpu(claim("x")
        .chose("s0")
        .bind_completed()
        .uid("uid-x")
        .created(2));
    Scenario {
        name: "restored-past-the-quota",
        servers,
        claims,
        user_ops: vec![UserOp::DeleteClaim("a")],
        max_lag: 2,
        classes: vec![gpu_class()],
        quotas: vec![gpu_quota(1, &[("a", "uid-a")])],
        must_bind: vec!["x"],
        ..Scenario::default()
    }
}

/// A restore, and a tenant re-creating the claim under the same name in the same state
/// space: s0's ref names `x` with the uid of a gone incarnation, the `x` now living
/// names s0 back (restored, with copied annotations). The tenant deletes `x` and creates
/// it again naming nothing: that `x` never inherits s0 by its name (invariant 6), though
/// it may pick s0 once s0 is free, and it binds (s1 is free too).
pub fn restored_then_re_created() -> Scenario {
    Scenario {
        name: "restored-then-re-created",
        servers: vec![server("s0").claimed_for("x", "uid-x-old"), server("s1")],
        claims: vec![
            claim("x")
                .chose("s0")
                .bind_completed()
                .uid("uid-x")
                .created(2),
        ],
        user_ops: vec![
            UserOp::DeleteClaim("x"),
            UserOp::CreateClaim(Box::new(claim("x").uid("uid-x-2").created(5))),
        ],
        crashes: 1,
        max_lag: 2,
        must_bind: vec!["x"],
        ..Scenario::default()
    }
}

/// team-a's `a` holds s1, `b` waits beside the free s2, both of class gpu; no quota yet.
pub(super) fn a_holds_s1_b_waits() -> (Vec<CachedServer>, Vec<CachedClaim>) {
    let servers = vec![
        server("s1")
            .claimed_for("a", "uid-a")
            .phase(ServerPhase::Bound),
        server("s2"),
    ];
    let claims = vec![
        gpu(claim("a")
            .chose("s1")
            .bind_completed()
            .phase(ClaimPhase::Bound)
            .created(1)),
        gpu(claim("b").created(2)),
    ];
    (servers, claims)
}

/// An admin creates a quota of one gpu server over team-a, which holds one and has `b`
/// waiting beside a free server. Once the binder has seen the quota, `b` binds only if it
/// did before: the quota counts first, then admits (invariant 7 from its creation).
pub fn quota_created_at_the_limit() -> Scenario {
    let (servers, claims) = a_holds_s1_b_waits();
    Scenario {
        name: "quota-created-at-the-limit",
        servers,
        claims,
        user_ops: vec![UserOp::CreateQuota(Box::new(gpu_quota(1, &[])))],
        max_lag: 2,
        classes: vec![gpu_class()],
        must_bind: vec!["a"],
        ..Scenario::default()
    }
}

/// A quota of one gpu server, counted, charging `a`; `b` waits over quota. The admin
/// deletes the quota and creates it again: `b` may bind while no quota exists, never
/// against the new quota's empty status.
pub fn quota_re_created() -> Scenario {
    let (servers, claims) = a_holds_s1_b_waits();
    Scenario {
        name: "quota-re-created",
        servers,
        claims,
        user_ops: vec![
            UserOp::DeleteQuota("q"),
            UserOp::CreateQuota(Box::new(gpu_quota(1, &[]))),
        ],
        max_lag: 2,
        classes: vec![gpu_class()],
        quotas: vec![gpu_quota(1, &[("a", "uid-a")])],
        must_bind: vec!["a"],
        ..Scenario::default()
    }
}

/// A quota of one gpu server, counted, charging `a`; `b` waits over quota. Someone
/// wipes the quota's status: `b` never binds against the empty status, and a recount
/// brings the count back.
pub fn quota_status_wiped() -> Scenario {
    let (servers, claims) = a_holds_s1_b_waits();
    Scenario {
        name: "quota-status-wiped",
        servers,
        claims,
        user_ops: vec![UserOp::WipeQuotaStatus("q")],
        crashes: 1,
        max_lag: 2,
        classes: vec![gpu_class()],
        quotas: vec![gpu_quota(1, &[("a", "uid-a")])],
        must_bind: vec!["a"],
        ..Scenario::default()
    }
}

/// Class `gated`: the servers labelled `pool=gated`, released through [`WIPE`].
pub(super) fn gated_class(pool: &str) -> ServerClass {
    let spec = ServerClassSpec {
        server_selector: Some(ServerSelector {
            match_labels: [("pool".to_string(), pool.to_string())].into(),
            ..ServerSelector::default()
        }),
        release_gates: Some(vec![ReleaseGate { name: WIPE.into() }]),
        ..ServerClassSpec::default()
    };
    ServerClass::new("gated", spec)
}

/// `a`, of class `gated`, holds s1, bound in a write that recorded the class and its
/// gate; an admin `edit`s the class (narrows it off s1, or deletes it); `a` goes; `b`, of
/// no class, can take s1 once no class takes it in. The release waits for the gate the
/// class named when `a` bound, whatever the class says then (invariant 5): `b` gets s1
/// only after a cleaner that started after the release passed it.
pub(super) fn class_changed_mid_bind(name: &'static str, edit: Option<ServerClass>) -> Scenario {
    let mut a = claim("a")
        .chose("s1")
        .bind_completed()
        .phase(ClaimPhase::Bound)
        .created(1);
    a.spec.server_class_name = Some("gated".into());
    let record = gates::BoundClass {
        class: "gated".into(),
        release_gates: Some(vec![WIPE.into()]),
    };
    let mut s1 = server("s1")
        .labelled(&[("pool", "gated")])
        .claimed_for("a", "uid-a")
        .phase(ServerPhase::Bound);
    s1.annotations_mut()
        .insert(ANNOTATION_BOUND_CLASS.into(), record.annotation());
    Scenario {
        name,
        servers: vec![s1],
        claims: vec![a, claim("b").created(2)],
        user_ops: vec![
            UserOp::EditClass("gated", edit.map(Box::new)),
            UserOp::DeleteClaim("a"),
            UserOp::StartCleaner("cleaner", "s1", WIPE),
            UserOp::FinishCleaner("cleaner"),
        ],
        max_lag: 2,
        crashes: 1,
        classes: vec![gated_class("gated")],
        ..Scenario::default()
    }
}

pub fn class_narrowed_mid_bind() -> Scenario {
    class_changed_mid_bind("class-narrowed-mid-bind", Some(gated_class("elsewhere")))
}

pub fn class_deleted_mid_bind() -> Scenario {
    class_changed_mid_bind("class-deleted-mid-bind", None)
}
