//! Which classes of free servers each waiting shape fits: a row per shape, learnt once per
//! epoch of the free-server index and read both ways by a pick; and what a pick keeps
//! for the next (the size of its network, its max flow).

use std::collections::hash_map::Entry;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::binding::placement::index::{ClassId, FreeServerIndex};
use crate::binding::placement::pins::{ShapesByPin, pins};
use crate::binding::placement::shape::{ClaimShape, FastMap, address};

use super::kept_flow::KeptFlow;
use super::waiter::ByShape;

/// Per waiting claim shape, which slots of the free-server index it fits: a row learnt
/// once per epoch of the index, among the slots carrying a value its selector pins (by
/// an `In` or a `matchLabels`), or among every slot if it pins none; a slot added since
/// is offered only to the rows whose selector could match its labels (by the values
/// they pin, or every row whose selector pins none), so that building a pick's network
/// costs a lookup per shape it meets and an entry per fit, not a selector match per
/// (shape, class) pair, nor one per shape for each new class. The rows are also kept
/// read backwards, per slot the shapes fitting it (`cols`): a pick that meets a class
/// finds the shapes it brings in there, not through their pins (a hash of each pinned
/// value, then a look at each candidate's row, was a quarter of a pick with a few
/// hundred selectors). So every waiting shape has its row before a pick reads any:
/// learnt at the pick's start for the shapes that began waiting since the last
/// ([`FitRows::noted`]), or for all after a new epoch. Keyed by the shape's `Arc` in
/// [`WaitingClaims`] (held here, so the address names one shape while its row lives). A
/// cache like [`Contest`]: a copy of the claims starts with none.
#[derive(Debug, Default)]
pub(super) struct FitRows(pub(super) Mutex<Rows>);

#[derive(Debug, Default)]
pub(super) struct Rows {
    epoch: u64,
    /// Slots `0..tested` of that epoch are in every row.
    tested: usize,
    /// By shape address: the shape, its row, and its number (its place in `addresses`).
    pub(super) rows: FastMap<usize, (Arc<ClaimShape>, Vec<ClassId>, u32)>,
    /// The addresses of the shapes with rows, by number.
    pub(super) addresses: Vec<usize>,
    /// Per slot `0..tested`, the numbers of the shapes whose rows hold it.
    pub(super) cols: Vec<Vec<u32>>,
    /// The shapes with rows, by the (key, value) pairs their selector pins a server to.
    filed: ShapesByPin,
    /// Whether every waiting shape had its row at the last pick: then only those in
    /// `fresh` may lack one.
    whole: bool,
    /// The shapes that began waiting since the last pick.
    fresh: Vec<Arc<ClaimShape>>,
    /// How many nodes and edges the last pick's network had: the next pick's lists start
    /// that large, since growing them by doubling copied each several times (a twentieth
    /// of a pick with a few hundred selectors).
    pub(super) last_network: NetworkSize,
    /// The last pick's max flow ([`FullFlow`]), dropped with the rows and when a slot is
    /// added (which may add fits).
    pub(super) kept: Option<KeptFlow>,
}

/// A network's claim-side nodes, server-side nodes and edges.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct NetworkSize {
    pub(super) shapes: usize,
    pub(super) classes: usize,
    pub(super) edges: usize,
}

impl Clone for FitRows {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl FitRows {
    /// Calls `visit` with each shape's slots in `index` (empty slots included: the
    /// caller knows which have free members); a shape not shared from the waiting
    /// claims (`None`) is matched against every slot. Checks each row against a match
    /// of every slot.
    #[cfg(debug_assertions)]
    pub(super) fn each(
        &self,
        index: &FreeServerIndex,
        shapes: &[AskedShape<'_>],
        waiting: &ByShape,
        mut visit: impl FnMut(usize, &[ClassId]),
    ) {
        let count = index.slots().1;
        let mut rows = self.current(index, waiting);
        for (n, (shape, shared)) in shapes.iter().enumerate() {
            let Some(shared) = shared else {
                let fits: Vec<ClassId> = (0..count)
                    .filter(|&id| shape.fits(index.class_at(id)))
                    .collect();
                visit(n, &fits);
                continue;
            };
            let row = rows.row(shared, index);
            let all: Vec<ClassId> = (0..count)
                .filter(|&id| shape.fits(index.class_at(id)))
                .collect();
            assert_eq!(row, all.as_slice(), "a fit row and a match of every slot");
            visit(n, row);
        }
    }

    /// The rows, of the index's current epoch (learnt afresh after a new one, or when
    /// more than [`MAX_STALE_ROWS`] rows beyond the waiting shapes' pile up), every slot
    /// offered, and a row for each of the `waiting` shapes.
    pub(super) fn current(
        &self,
        index: &FreeServerIndex,
        waiting: &ByShape,
    ) -> MutexGuard<'_, Rows> {
        let (epoch, count) = index.slots();
        let mut rows = self.0.lock();
        if rows.epoch != epoch || rows.rows.len() > waiting.len() + MAX_STALE_ROWS {
            *rows = Rows {
                epoch,
                last_network: rows.last_network,
                ..Rows::default()
            };
        }
        rows.offer(index, count);
        let fresh = std::mem::take(&mut rows.fresh);
        if rows.whole {
            for shape in fresh.iter().filter(|s| waiting.contains_key(&address(s))) {
                rows.row(shape, index);
            }
        } else {
            for (shape, _) in waiting.values() {
                rows.row(shape, index);
            }
            rows.whole = true;
        }
        rows
    }

    /// Notes that `shape` began waiting: the next pick learns its row. Past
    /// [`MAX_STALE_ROWS`] notes without a pick, the notes are dropped and the next pick
    /// looks at every waiting shape instead (as after a new epoch).
    pub(super) fn noted(&self, shape: &Arc<ClaimShape>) {
        let mut rows = self.0.lock();
        if !rows.whole {
            return;
        }
        if rows.fresh.len() >= MAX_STALE_ROWS {
            rows.fresh = Vec::new();
            rows.whole = false;
        } else {
            rows.fresh.push(shape.clone());
        }
    }
}

impl Rows {
    /// Offers the slots added since the last look to the rows that could fit them.
    fn offer(&mut self, index: &FreeServerIndex, count: usize) {
        for id in self.tested..count {
            let class = index.class_at(id);
            let mut col = Vec::new();
            for shape in self.filed.could_fit(&class.labels) {
                if let Some((shape, fits, number)) = self.rows.get_mut(&address(shape))
                    && shape.fits(class)
                {
                    fits.push(id);
                    col.push(*number);
                }
            }
            self.cols.push(col);
        }
        if count > self.tested {
            self.kept = None;
        }
        self.tested = count;
    }

    /// The row of `shape`, learnt now if new: among the slots carrying a value its
    /// selector pins, if it pins any (O(those slots)), else among every slot.
    pub(super) fn row(&mut self, shape: &Arc<ClaimShape>, index: &FreeServerIndex) -> &[ClassId] {
        let vacant = match self.rows.entry(address(shape)) {
            Entry::Occupied(known) => return &known.into_mut().1,
            Entry::Vacant(vacant) => vacant,
        };
        let tested = self.tested;
        let fits = |id: &ClassId| *id < tested && shape.fits(index.class_at(*id));
        let row = match pins(shape) {
            Some(pins) => {
                let slots = pins.iter().flat_map(|(k, v)| index.slots_with(k, v));
                let mut row: Vec<ClassId> = slots.copied().filter(fits).collect();
                row.sort_unstable();
                row.dedup();
                row
            }
            None => (0..tested).filter(fits).collect(),
        };
        let number = u32::try_from(self.addresses.len()).expect("fewer than 2^32 shapes");
        self.addresses.push(address(shape));
        for &id in &row {
            self.cols[id].push(number);
        }
        self.filed.insert(shape);
        &vacant.insert((shape.clone(), row, number)).1
    }
}

/// Rows kept for shapes no longer waiting before the rows are dropped and learnt afresh.
pub(super) const MAX_STALE_ROWS: usize = 4096;

/// A shape whose row is asked for, and the waiting claims' shared copy of it, if any.
#[cfg(debug_assertions)]
pub(super) type AskedShape<'w> = (&'w ClaimShape, Option<&'w Arc<ClaimShape>>);
