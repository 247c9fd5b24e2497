//! The well-known names of the protocol: annotations, finalizer, condition.
//! docs/binding.md explains what each one means. Each annotation and the finalizer is
//! qualified by the kinds' API group (a test below holds them to it).

/// On a claim: the claim controller chose `spec.serverRef` (tentative; it may withdraw it).
/// Absent on a claim whose `serverRef` a user wrote.
pub const ANNOTATION_PRE_BOUND: &str = "metal.binder.dev/pre-bound";
/// On a claim: both sides agreed; the claim is on the bound path from now on.
pub const ANNOTATION_BIND_COMPLETED: &str = "metal.binder.dev/bind-completed";
/// On a server: the server controller wrote `spec.serverClaimRef` (not a user).
pub const ANNOTATION_BOUND_BY_CONTROLLER: &str = "metal.binder.dev/bound-by-controller";
/// On a server: released under `Recycle` with release gates, and not yet cleaned. The
/// value is the release's `metadata.generation`: a gate's condition counts only with an
/// `observedGeneration` at least that.
pub const ANNOTATION_CLEANING: &str = "metal.binder.dev/cleaning";
/// On a server, beside `cleaning`: the release gates in force at that release,
/// comma-separated, recorded in the same write so that no later change of the
/// controller's `--release-gates` (a restart, another replica) changes what this
/// cleaning waits for.
pub const ANNOTATION_CLEANING_GATES: &str = "metal.binder.dev/cleaning-gates";
/// On a server, while a claim holds it: the class that claim bound under and the release
/// gates that class named then, as JSON (`{"class":"gpu","releaseGates":["x.io/wipe"]}`;
/// no `releaseGates`: the class named none), written by the server controller in the
/// write that binds. A release waits for those gates whatever happened to the class
/// since (docs/binding.md, "Release gates").
pub const ANNOTATION_BOUND_CLASS: &str = "metal.binder.dev/bound-class";
/// On a ServerClass: `"true"` marks the default class, which a claim without
/// `spec.serverClassName` gets (as `storageclass.kubernetes.io/is-default-class`).
pub const ANNOTATION_DEFAULT_CLASS: &str = "serverclass.metal.binder.dev/is-default-class";
/// The key of the taint `server-binder drain` adds (effect `Evict`) and `uncordon`
/// removes (docs/operations.md, "Taking a server back").
pub const TAINT_DRAIN: &str = "metal.binder.dev/drain";
/// The value every protocol annotation carries.
pub const ANNOTATION_YES: &str = "yes";

/// On a server, present while a live claim holds it, so the server cannot vanish under a tenant.
pub const FINALIZER_SERVER_PROTECTION: &str = "metal.binder.dev/server-protection";

/// The kinds' API group, which qualifies every name of the protocol.
pub const DOMAIN: &str = "metal.binder.dev";

/// Whether a name's prefix (the part before its `/`) is this project's domain or a
/// subdomain of it: the annotations the decisions read, and the condition types no
/// cleaner may use as a release gate.
pub fn in_our_domain(prefix: &str) -> bool {
    prefix == DOMAIN
        || prefix
            .strip_suffix(DOMAIN)
            .is_some_and(|sub| sub.ends_with('.'))
}

/// The condition type both kinds carry about their binding.
pub const CONDITION_BOUND: &str = "Bound";
/// The condition type a server carries while it waits for its release gates.
pub const CONDITION_CLEANING: &str = "Cleaning";
/// The condition type a bound claim carries while an `Evict` taint's deadline runs, as a
/// Pod's `DisruptionTarget`.
pub const CONDITION_DISRUPTION_TARGET: &str = "DisruptionTarget";

/// The reason of a claim's `DisruptionTarget` condition while an `Evict` taint's
/// deadline runs against its bind.
pub const REASON_EVICTION_BY_TAINT: &str = "EvictionByTaint";

/// The reason of a claim's `DisruptionTarget` condition once its eviction is due and a
/// disruption budget holds it (the message names the budget).
pub const REASON_EVICTION_HELD_BY_BUDGET: &str = "EvictionHeldByBudget";

#[cfg(test)]
mod tests {
    use kube::Resource;

    use super::*;
    use crate::api::{Server, ServerClaim};

    #[test]
    fn every_protocol_name_is_qualified_by_the_api_group() {
        let group = Server::group(&());
        assert_eq!(ServerClaim::group(&()), group);
        assert_eq!(group, DOMAIN);
        for name in [
            ANNOTATION_PRE_BOUND,
            ANNOTATION_BIND_COMPLETED,
            ANNOTATION_BOUND_BY_CONTROLLER,
            ANNOTATION_CLEANING,
            ANNOTATION_CLEANING_GATES,
            ANNOTATION_BOUND_CLASS,
            FINALIZER_SERVER_PROTECTION,
            TAINT_DRAIN,
        ] {
            assert_eq!(
                name.split_once('/').map(|(g, _)| g),
                Some(&*group),
                "{name}"
            );
        }
    }
}
