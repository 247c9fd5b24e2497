//! What each verb changes in a server's spec, as a pure function of the spec read:
//! the cordon (`unclaimable`), and the drain taint added, kept, tightened or removed.
//! The taint list is changed entry by entry ([`TaintOp`]), so that the write replaces
//! the list it read with that list so changed, every other taint as it was read.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::api::names::TAINT_DRAIN;
use crate::api::{ServerSpec, Taint, TaintEffect};

/// The verb, with what it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Cordon,
    Uncordon,
    /// `--grace` given: the drain taint's hard deadline.
    Drain {
        hard_deadline: Option<Timestamp>,
    },
}

impl Verb {
    pub fn name(self) -> &'static str {
        match self {
            Self::Cordon => "cordon",
            Self::Uncordon => "uncordon",
            Self::Drain { .. } => "drain",
        }
    }
}

/// One change of the taint list, by the index of the entry read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaintOp {
    Remove(usize),
    Add(Taint),
    SetHardDeadline(usize, Timestamp),
}

/// What the verb says it did (or found done), one line each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Said {
    Cordoned,
    AlreadyCordoned,
    Uncordoned,
    AlreadyUncordoned,
    TaintAdded,
    /// The drain taint was there, added at this time (if stamped yet).
    TaintKept(Option<Timestamp>),
    TaintRemoved,
    HardDeadlineSet(Timestamp),
    /// The taint's own hard deadline is no later than `--grace`'s: kept.
    HardDeadlineKept(Timestamp),
}

/// What a verb changes in one server's spec.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Edit {
    /// The new `unclaimable`, if it changes.
    pub unclaimable: Option<bool>,
    /// The changes of the taint list (none: the list stays as it is).
    pub taints: Vec<TaintOp>,
    pub said: Vec<Said>,
}

impl Edit {
    /// Whether the edit writes anything.
    pub fn writes(&self) -> bool {
        self.unclaimable.is_some() || !self.taints.is_empty()
    }
}

/// Whether `taint` is the drain taint: its key, effect `Evict`.
pub fn is_drain_taint(taint: &Taint) -> bool {
    taint.key == TAINT_DRAIN && taint.effect == TaintEffect::Evict
}

/// The drain taint as `drain` adds it: no value, no `timeAdded` (the server controller
/// writes it, and every grace counts from it).
pub fn drain_taint(hard_deadline: Option<Timestamp>) -> Taint {
    Taint {
        key: TAINT_DRAIN.into(),
        value: None,
        effect: TaintEffect::Evict,
        time_added: None,
        hard_deadline: hard_deadline.map(Time),
    }
}

/// What `verb` changes in `spec`. Idempotent: the edit of a spec already so is empty.
pub fn edit(verb: Verb, spec: &ServerSpec) -> Edit {
    let mut edit = Edit::default();
    let cordon = verb != Verb::Uncordon;
    let (change, said) = match (cordon, spec.unclaimable) {
        (true, true) => (None, Said::AlreadyCordoned),
        (true, false) => (Some(true), Said::Cordoned),
        (false, true) => (Some(false), Said::Uncordoned),
        (false, false) => (None, Said::AlreadyUncordoned),
    };
    edit.unclaimable = change;
    edit.said.push(said);
    let drains = spec
        .taints
        .iter()
        .enumerate()
        .filter(|(_, t)| is_drain_taint(t));
    match verb {
        Verb::Cordon => {}
        Verb::Uncordon => {
            for (i, _) in drains {
                edit.taints.push(TaintOp::Remove(i));
                edit.said.push(Said::TaintRemoved);
            }
        }
        Verb::Drain { hard_deadline } => {
            let existing: Vec<(usize, &Taint)> = drains.collect();
            match existing.first() {
                None => {
                    edit.taints.push(TaintOp::Add(drain_taint(hard_deadline)));
                    edit.said.push(Said::TaintAdded);
                    edit.said.extend(hard_deadline.map(Said::HardDeadlineSet));
                }
                Some(&(i, taint)) => tighten(&mut edit, i, taint, hard_deadline),
            }
        }
    }
    edit
}

/// The drain taint is there: kept with its `timeAdded`; a `--grace` moves its hard
/// deadline only earlier.
fn tighten(edit: &mut Edit, i: usize, taint: &Taint, hard_deadline: Option<Timestamp>) {
    edit.said
        .push(Said::TaintKept(taint.time_added.as_ref().map(|t| t.0)));
    let Some(wanted) = hard_deadline else {
        return;
    };
    match taint.hard_deadline.as_ref().map(|t| t.0) {
        Some(own) if own <= wanted => edit.said.push(Said::HardDeadlineKept(own)),
        _ => {
            edit.taints.push(TaintOp::SetHardDeadline(i, wanted));
            edit.said.push(Said::HardDeadlineSet(wanted));
        }
    }
}

/// The spec as the edit leaves it (for a dry run's plan, and the in-memory copy whose
/// deadlines the plan shows).
pub fn apply(edit: &Edit, spec: &ServerSpec) -> ServerSpec {
    let mut out = spec.clone();
    if let Some(unclaimable) = edit.unclaimable {
        out.unclaimable = unclaimable;
    }
    out.taints = apply_ops(&edit.taints, &spec.taints, Taint::clone, |mut t, at| {
        t.hard_deadline = Some(Time(at));
        t
    });
    out
}

/// The taint list `read` (as typed, or as the JSON read) with `ops` applied: entries
/// removed, a hard deadline set in place, the drain taint appended.
pub fn apply_ops<T: Clone>(
    ops: &[TaintOp],
    read: &[T],
    added: impl Fn(&Taint) -> T,
    with_deadline: impl Fn(T, Timestamp) -> T,
) -> Vec<T> {
    let mut out = Vec::with_capacity(read.len() + 1);
    for (i, entry) in read.iter().enumerate() {
        if ops.contains(&TaintOp::Remove(i)) {
            continue;
        }
        let deadline = ops.iter().find_map(|op| match op {
            TaintOp::SetHardDeadline(at, when) if *at == i => Some(*when),
            _ => None,
        });
        out.push(match deadline {
            Some(when) => with_deadline(entry.clone(), when),
            None => entry.clone(),
        });
    }
    out.extend(ops.iter().filter_map(|op| match op {
        TaintOp::Add(taint) => Some(added(taint)),
        _ => None,
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn other() -> Taint {
        Taint {
            key: "example.com/gpu".into(),
            value: Some("a100".into()),
            effect: TaintEffect::NoBind,
            time_added: Some(Time(at(-50))),
            hard_deadline: None,
        }
    }

    fn spec(unclaimable: bool, taints: Vec<Taint>) -> ServerSpec {
        ServerSpec {
            unclaimable,
            taints,
            ..ServerSpec::default()
        }
    }

    #[test]
    fn cordon_and_uncordon_change_only_what_is_not_so_already() {
        let e = edit(Verb::Cordon, &spec(false, vec![other()]));
        assert_eq!((e.unclaimable, e.said), (Some(true), vec![Said::Cordoned]));
        let e = edit(Verb::Cordon, &spec(true, vec![]));
        assert!(!e.writes() && e.said == [Said::AlreadyCordoned]);
        let e = edit(Verb::Uncordon, &spec(false, vec![other()]));
        assert!(!e.writes() && e.said == [Said::AlreadyUncordoned]);
    }

    #[test]
    fn drain_adds_the_taint_once_and_keeps_the_others() {
        let read = spec(false, vec![other()]);
        let e = edit(
            Verb::Drain {
                hard_deadline: None,
            },
            &read,
        );
        assert_eq!(e.said, [Said::Cordoned, Said::TaintAdded]);
        let drained = apply(&e, &read);
        assert!(drained.unclaimable);
        assert_eq!(drained.taints, [other(), drain_taint(None)]);
        // Again, once stamped: nothing changes.
        let mut stamped = drained.clone();
        stamped.taints[1].time_added = Some(Time(at(0)));
        let again = edit(
            Verb::Drain {
                hard_deadline: None,
            },
            &stamped,
        );
        assert!(!again.writes(), "{again:?}");
        assert_eq!(
            again.said,
            [Said::AlreadyCordoned, Said::TaintKept(Some(at(0)))]
        );
        // Uncordon removes the drain taint and nothing else.
        let e = edit(Verb::Uncordon, &stamped);
        assert_eq!(e.said, [Said::Uncordoned, Said::TaintRemoved]);
        assert_eq!(apply(&e, &stamped), spec(false, vec![other()]));
    }

    #[test]
    fn a_new_grace_moves_the_hard_deadline_only_earlier() {
        let drain = |hard| Verb::Drain {
            hard_deadline: Some(hard),
        };
        let read = spec(true, vec![drain_taint(None)]);
        let e = edit(drain(at(100)), &read);
        assert_eq!(e.taints, [TaintOp::SetHardDeadline(0, at(100))]);
        let tight = apply(&e, &read);
        assert_eq!(tight.taints, [drain_taint(Some(at(100)))]);
        let later = edit(drain(at(200)), &tight);
        assert!(!later.writes());
        assert!(later.said.contains(&Said::HardDeadlineKept(at(100))));
        let earlier = edit(drain(at(50)), &tight);
        assert_eq!(earlier.taints, [TaintOp::SetHardDeadline(0, at(50))]);
    }

    #[test]
    fn a_drain_key_of_another_effect_is_not_the_drain_taint() {
        let preview = Taint {
            effect: TaintEffect::None,
            ..drain_taint(None)
        };
        let read = spec(true, vec![preview.clone()]);
        let e = edit(
            Verb::Drain {
                hard_deadline: None,
            },
            &read,
        );
        assert_eq!(
            apply(&e, &read).taints,
            [preview.clone(), drain_taint(None)]
        );
        let e = edit(Verb::Uncordon, &spec(true, vec![preview]));
        assert!(e.taints.is_empty());
    }
}
