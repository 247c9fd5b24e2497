//! Why a claim waits: every server's verdict for one claim, and the kube-scheduler style
//! summary a Pending claim's condition and event carry ("0/48 servers can serve this
//! claim: 30 are held by other claims, 9 do not match the selector (rack in (r1)), …").
//!
//! A server is counted once, by the first reason it cannot serve the claim, in the order
//! [`eligibility`] checks them, and then the pick's own reasons (another claim's pick of
//! it is in flight; the matching keeps it for claims ahead). The decision functions, the
//! `explain` command and the tests all read this one function.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::api::{CachedClaim, CachedServer, SelectorOperator, ServerSelector};

use crate::binding::bounded::{LIST_MAX, listed};
use crate::binding::meta;
use crate::binding::placement::Ahead;
use crate::binding::state::class_labels::own_part;
use crate::binding::state::eligibility::{Ineligible, eligibility};

/// Why a server cannot take a claim now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hindrance {
    /// The server cannot serve the claim ([`eligibility`]).
    Ineligible(Ineligible),
    /// It could, but a pick passes it over: another claim's pick of it is in flight, or a
    /// claim naming it would win it.
    SpokenFor,
    /// It could, but every maximum matching keeps it for claims ahead of this one in the
    /// fair order.
    KeptForOthers,
    /// It could, but the API server refused the server controller's last write of it.
    RefusesWrites,
}

impl fmt::Display for Hindrance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ineligible(why) => why.fmt(f),
            Self::SpokenFor => write!(f, "another claim is being bound to the server"),
            Self::RefusesWrites => write!(
                f,
                "the API server refuses the server controller's writes of the server"
            ),
            Self::KeptForOthers => write!(
                f,
                "the server is kept for claims ahead of this one (served oldest first, namespaces in turn)"
            ),
        }
    }
}

/// What a pick already knows besides the server and the claim.
#[derive(Clone, Copy)]
pub struct PickState<'a> {
    /// Servers the pick passes over (`pass_over`).
    pub skip: &'a dyn Fn(&str) -> bool,
    /// Servers whose last write was refused (`skip` holds them too).
    pub refuses: &'a dyn Fn(&str) -> bool,
    /// The claim waits its turn: the servers it could take are kept for claims ahead.
    pub waits_turn: bool,
}

/// Whether `server` can take `claim` now, and if not, the first reason why.
pub fn hindrance(
    server: &CachedServer,
    claim: &CachedClaim,
    pick: PickState<'_>,
) -> Option<Hindrance> {
    if let Err(why) = eligibility(server, claim) {
        return Some(Hindrance::Ineligible(why));
    }
    if (pick.refuses)(meta::name(server)) {
        return Some(Hindrance::RefusesWrites);
    }
    if (pick.skip)(meta::name(server)) {
        return Some(Hindrance::SpokenFor);
    }
    if pick.waits_turn {
        return Some(Hindrance::KeptForOthers);
    }
    None
}

/// The heading a hindrance is counted under, in the order the summary lists ties.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cause {
    Held,
    SpokenFor,
    KeptForOthers,
    RefusesWrites,
    Selector,
    OutsideClass,
    SetAside,
    Taint,
    Unclaimable,
    Released,
    Cleaning,
    Deleting,
    /// The claim itself was evicted: no server serves it again.
    Evicted,
}

impl Cause {
    pub fn of(h: &Hindrance) -> Self {
        match h {
            Hindrance::Ineligible(why) => match why {
                Ineligible::Deleting => Self::Deleting,
                Ineligible::Unclaimable => Self::Unclaimable,
                Ineligible::UntoleratedTaint { .. } => Self::Taint,
                Ineligible::SelectorMismatch => Self::Selector,
                Ineligible::OutsideClass { .. } => Self::OutsideClass,
                Ineligible::SetAside => Self::SetAside,
                Ineligible::ClaimedByOther(_) => Self::Held,
                Ineligible::Released => Self::Released,
                Ineligible::Cleaning => Self::Cleaning,
                Ineligible::Evicted => Self::Evicted,
            },
            Hindrance::SpokenFor => Self::SpokenFor,
            Hindrance::KeptForOthers => Self::KeptForOthers,
            Hindrance::RefusesWrites => Self::RefusesWrites,
        }
    }

    /// How close a server with this hindrance is to serving the claim (lower: closer),
    /// for listing the best candidates first.
    pub fn distance(self) -> u8 {
        match self {
            Self::KeptForOthers => 0,
            Self::SpokenFor => 1,
            Self::Held | Self::RefusesWrites => 2,
            Self::Cleaning => 3,
            Self::Released => 4,
            Self::Unclaimable => 5,
            Self::Taint => 6,
            Self::Selector => 7,
            Self::OutsideClass | Self::SetAside => 8,
            Self::Deleting => 9,
            Self::Evicted => 10,
        }
    }

    /// "N servers …", with the verb agreeing with `n`.
    fn phrase(self, n: usize) -> &'static str {
        let one = n == 1;
        match self {
            Self::Held if one => "is held by another claim",
            Self::Held => "are held by other claims",
            Self::SpokenFor if one => "is being bound to another claim",
            Self::SpokenFor => "are being bound to other claims",
            Self::KeptForOthers if one => "is kept for claims ahead of it",
            Self::KeptForOthers => "are kept for claims ahead of it",
            Self::RefusesWrites if one => "refuses the controller's writes (an admin must fix it)",
            Self::RefusesWrites => "refuse the controller's writes (an admin must fix them)",
            Self::Selector if one => "does not match the selector",
            Self::Selector => "do not match the selector",
            Self::OutsideClass if one => "is not of its class",
            Self::OutsideClass => "are not of its class",
            Self::SetAside if one => "is set aside for a server class (the claim names none)",
            Self::SetAside => "are set aside for server classes (the claim names none)",
            Self::Taint if one => "has a taint it does not tolerate",
            Self::Taint => "have a taint it does not tolerate",
            Self::Unclaimable if one => "is unclaimable",
            Self::Unclaimable => "are unclaimable",
            Self::Released if one => "is released and waits for an admin",
            Self::Released => "are released and wait for an admin",
            Self::Cleaning if one => "is being cleaned",
            Self::Cleaning => "are being cleaned",
            Self::Deleting if one => "is being deleted",
            Self::Deleting => "are being deleted",
            Self::Evicted if one => "does not serve it: the claim was evicted",
            Self::Evicted => "do not serve it: the claim was evicted",
        }
    }
}

/// Why no server can take a claim now: every server counted by its first hindrance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unavailability {
    /// Servers the view holds.
    pub total: usize,
    /// Servers that could take the claim (none, for a claim that waits).
    pub usable: usize,
    pub counts: BTreeMap<Cause, usize>,
    /// The keys of the taints the claim does not tolerate, as counted.
    pub taints: BTreeSet<String>,
    /// The claim's own selector, as kubectl prints one (never what its class adds).
    pub selector: Option<String>,
    /// The claim's class, if it names one.
    pub class: Option<String>,
    /// For a claim that waits its turn: the claims ahead of it that compete for the same
    /// servers, first in the fair order first.
    pub ahead: Ahead,
}

/// The taint keys the summary names before it says "…".
const TAINTS_NAMED: usize = 3;

impl Unavailability {
    /// Counts `servers` for `claim`.
    pub fn of<'s>(
        claim: &CachedClaim,
        servers: impl IntoIterator<Item = &'s CachedServer>,
        pick: PickState<'_>,
    ) -> Self {
        let mut out = Self {
            selector: claim.spec.server_selector.as_ref().map(own_selector_text),
            class: claim.spec.server_class_name.clone(),
            ..Self::default()
        };
        for server in servers {
            out.total += 1;
            match hindrance(server, claim, pick) {
                None => out.usable += 1,
                Some(h) => {
                    if let Hindrance::Ineligible(Ineligible::UntoleratedTaint { key }) = &h {
                        out.taints.insert(key.clone());
                    }
                    *out.counts.entry(Cause::of(&h)).or_default() += 1;
                }
            }
        }
        out
    }

    /// This summary, naming the claims ahead (a claim that waits its turn).
    pub fn with_ahead(self, ahead: Ahead) -> Self {
        Self { ahead, ..self }
    }

    /// The causes, most servers first (ties in [`Cause`] order).
    pub fn ranked(&self) -> Vec<(Cause, usize)> {
        let mut ranked: Vec<(Cause, usize)> = self.counts.iter().map(|(c, n)| (*c, *n)).collect();
        ranked.sort_by_key(|(c, n)| (std::cmp::Reverse(*n), *c));
        ranked
    }

    fn detail(&self, cause: Cause) -> Option<String> {
        match cause {
            Cause::Selector => self.selector.clone(),
            Cause::OutsideClass => self.class.clone(),
            Cause::Taint => {
                let mut keys: Vec<&str> = self.taints.iter().map(String::as_str).collect();
                if keys.len() > TAINTS_NAMED {
                    keys.truncate(TAINTS_NAMED);
                    keys.push("…");
                }
                Some(keys.join(", "))
            }
            _ => None,
        }
    }
}

impl fmt::Display for Unavailability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{} servers can serve this claim",
            self.usable, self.total
        )?;
        if self.total == 0 {
            return write!(f, ": no servers exist.");
        }
        let parts: Vec<String> = self
            .ranked()
            .into_iter()
            .map(|(cause, n)| match self.detail(cause) {
                Some(d) if !d.is_empty() => format!("{n} {} ({d})", cause.phrase(n)),
                _ => format!("{n} {}", cause.phrase(n)),
            })
            .collect();
        if parts.is_empty() {
            write!(f, ".")?;
        } else {
            write!(f, ": {}.", parts.join(", "))?;
        }
        write_ahead(f, &self.ahead)
    }
}

/// " Ahead of it: ns/a, ns/b, ns/c and 4 more." (nothing when none is named).
fn write_ahead(f: &mut fmt::Formatter<'_>, ahead: &Ahead) -> fmt::Result {
    match names_ahead(ahead) {
        Some(names) => write!(f, " Ahead of it: {names}."),
        None => Ok(()),
    }
}

/// "ns/a, ns/b, ns/c and 4 more": the claims ahead a message names (`None`: none).
pub fn names_ahead(ahead: &Ahead) -> Option<String> {
    if ahead.total == 0 {
        return None;
    }
    let mut names = ahead
        .first
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if let more @ 1.. = ahead.total.saturating_sub(ahead.first.len()) {
        names.push_str(&format!(" and {more} more"));
    }
    Some(names)
}

/// The tenant's part of a claim's selector as kubectl prints one: without the
/// requirements its class adds ([`own_part`]).
fn own_selector_text(selector: &ServerSelector) -> String {
    selector_text(&own_part(selector))
}

/// A selector as kubectl prints one: `rack=r1,zone in (a,b),!spare`; the requirements
/// past [`LIST_MAX`] bytes are counted, not printed ("… and 480 more requirements").
pub fn selector_text(selector: &ServerSelector) -> String {
    let labels = selector
        .match_labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"));
    let expressions = selector.match_expressions.iter().map(|r| match r.operator {
        SelectorOperator::In => format!("{} in ({})", r.key, r.values.join(",")),
        SelectorOperator::NotIn => format!("{} notin ({})", r.key, r.values.join(",")),
        SelectorOperator::Exists => r.key.clone(),
        SelectorOperator::DoesNotExist => format!("!{}", r.key),
    });
    listed(
        labels.chain(expressions),
        ",",
        LIST_MAX,
        "requirement",
        "requirements",
    )
}
