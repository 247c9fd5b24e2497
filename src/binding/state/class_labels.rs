//! The labels and requirements the classes add to the binder's view of servers and
//! claims (docs/binding.md, "Server classes"): never written to an object, never the
//! tenant's. Below every rule that reads a selector, so eligibility and the summary of
//! why a claim waits can tell the classes' part of a selector from the tenant's.

use crate::api::ServerSelector;

/// The label the binder's view of a server carries while some class takes the server
/// in (never written to the server): a claim without a class requires its absence, so
/// servers a class sets aside go to that class's claims only.
pub const CLASSED_KEY: &str = "serverclass.metal.binder.dev/classed";

/// The key of the requirement that a claim whose class is missing, or does not let its
/// namespace in, gets: `In` no value, which no server satisfies.
pub const NO_SERVER_KEY: &str = "serverclass.metal.binder.dev/no-server";

/// The prefix of the label the binder's view of a server carries for each class that
/// takes it in (never written to the server): a claim of class `gpu` requires
/// `member.serverclass.metal.binder.dev/gpu`, so the decisions, the matching and the
/// summary of why a claim waits see class membership apart from the tenant's selector.
pub const MEMBER_PREFIX: &str = "member.serverclass.metal.binder.dev/";

/// The view-only label of membership in `class`.
pub fn member_key(class: &str) -> String {
    format!("{MEMBER_PREFIX}{class}")
}

/// Whether a selector requirement on `key` is one the classes add to a claim (never the
/// tenant's own): the summary of why a claim waits leaves it out of the selector it
/// quotes.
pub fn is_view_only(key: &str) -> bool {
    key == CLASSED_KEY || key == NO_SERVER_KEY || key.starts_with(MEMBER_PREFIX)
}

/// The tenant's own part of a claim's selector as the binder views it: without the
/// requirements its class adds ([`is_view_only`]). What a tenant is told of its selector
/// (the summary, a bound claim's mismatch) reads this part alone.
pub fn own_part(selector: &ServerSelector) -> ServerSelector {
    let mut own = selector.clone();
    own.match_expressions.retain(|r| !is_view_only(&r.key));
    own
}
