//! Maximum flow over the matching's network (source → claim nodes → server classes →
//! sink), and what every maximum flow allows, read from one of them.
//!
//! Placement asks, per pick, not only how large a maximum matching is but which classes
//! the picker's node can take *in some maximum matching*, and which classes can give up a
//! server without shrinking the matching of the claims ahead. Answering each by one more
//! max flow per candidate class (what placement did first) cost up to a hundred max flows
//! per pick with a few hundred selectors. Flow theory answers all of them from one
//! maximum flow `F`: a flow of the same value differs from `F` by cycles of its residual
//! graph, so
//!
//! - some maximum flow sends a unit on edge `u → v` iff `F` does, or `v` reaches `u` in
//!   the residual graph (the edge closes a cycle);
//! - some maximum flow leaves a unit of capacity of `v → sink` unused iff `v` reaches the
//!   sink in the residual graph;
//! - one more unit of capacity on `source → u` raises the maximum iff `u` reaches the sink.
//!
//! Each is one breadth-first search over the residual graph, linear in its edges (Régin's
//! filtering for all-different constraints rests on the same fact). The maximum flow is
//! Dinic's algorithm on arrays: `pathfinding`'s Edmonds–Karp keeps its capacities in
//! ordered maps and exposes no residual graph, and was most of a pick's time.

use std::collections::VecDeque;

const SOURCE: usize = 0;
const SINK: usize = 1;

/// A maximum flow of one network: `demand[i]` units may leave the source to claim node
/// `i`, `supply[j]` units may reach the sink from class `j`, and an edge `(i, j)` carries
/// any amount from claim node `i` to class `j`.
pub(super) struct MaxFlow {
    claims: usize,
    /// The edges leaving node `u` are `arcs[start[u]..start[u + 1]]` (laid out by node as
    /// they are added: one allocation, and a search walks a node's edges in a row).
    start: Vec<u32>,
    arcs: Vec<Edge>,
    value: i64,
    /// A fit's capacity: more than the demand the network was built with.
    unbounded: i64,
}

impl std::fmt::Debug for MaxFlow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaxFlow")
            .field("claims", &self.claims)
            .field("classes", &self.classes())
            .field("value", &self.value)
            .finish_non_exhaustive()
    }
}

/// One edge of the residual graph, 16 bytes: a pick builds thousands, and a search reads
/// them in a row (node numbers fit in 32 bits: a network has a node per class and shape).
#[derive(Clone, Copy, Default)]
struct Edge {
    to: u32,
    /// The edge running the other way, which holds what this one carries.
    reverse: u32,
    /// Residual capacity.
    cap: i64,
}

impl MaxFlow {
    pub(super) fn new(demand: &[i64], supply: &[i64], edges: &[(usize, usize)]) -> Self {
        let claims = demand.len();
        let nodes = 2 + claims + supply.len();
        let arcs = 2 * (claims + supply.len() + edges.len());
        // Every node and edge number fits an `Edge`'s 32 bits, checked once here.
        assert!(
            u32::try_from(arcs.max(nodes)).is_ok(),
            "a network of fewer than 2^32 nodes and edges"
        );
        let mut flow = MaxFlow {
            claims,
            start: Vec::new(),
            arcs: vec![Edge::default(); arcs],
            value: 0,
            unbounded: demand.iter().sum::<i64>() + 1,
        };
        flow.place_edges(nodes, edges);
        let mut next: Vec<usize> = flow.start.iter().map(|&s| s as usize).collect();
        for (i, &d) in demand.iter().enumerate() {
            flow.edge(&mut next, SOURCE, flow.claim(i), d.max(0));
        }
        for (j, &s) in supply.iter().enumerate() {
            flow.edge(&mut next, flow.class(j), SINK, s.max(0));
        }
        // More than any flow can carry, so that residual questions about one more unit
        // are never cut short by a fit's capacity.
        for &(i, j) in edges {
            flow.edge(&mut next, flow.claim(i), flow.class(j), flow.unbounded);
        }
        flow.send_straight();
        flow.run();
        flow
    }

    /// Where each node's edges start: the source's to every claim node, every claim
    /// node's back to the source and to its fits, every class's to the sink and back to
    /// its fits, the sink's back to every class.
    fn place_edges(&mut self, nodes: usize, edges: &[(usize, usize)]) {
        let mut degree = vec![1; nodes];
        degree[SOURCE] = self.claims;
        degree[SINK] = nodes - 2 - self.claims;
        for &(i, j) in edges {
            degree[self.claim(i)] += 1;
            degree[self.class(j)] += 1;
        }
        self.start = Vec::with_capacity(nodes + 1);
        let mut at = 0;
        self.start.push(at);
        for d in degree {
            at += node_number(d);
            self.start.push(at);
        }
    }

    /// Adds the edge `from` → `to` and its reverse, each at its node's next free place
    /// (`next`).
    #[inline(always)]
    fn edge(&mut self, next: &mut [usize], from: usize, to: usize, cap: i64) {
        let (e, back) = (next[from], next[to]);
        next[from] += 1;
        next[to] += 1;
        self.arcs[e] = Edge {
            to: node_number(to),
            reverse: node_number(back),
            cap,
        };
        self.arcs[back] = Edge {
            to: node_number(from),
            reverse: node_number(e),
            cap: 0,
        };
    }

    /// Sends what each fit can carry straight through, claim node by claim node, those
    /// with the fewest fits first (they have the fewest other ways): most of a maximum
    /// flow (when servers are not scarce, often all of it) in one pass over the fits, so
    /// that Dinic's phases, each a search of the whole network, only finish it. Which
    /// maximum flow results does not matter: every answer holds for all of them.
    fn send_straight(&mut self) {
        let mut order: Vec<usize> = (0..self.claims).collect();
        order.sort_by_key(|&i| self.edges_of(self.claim(i)).len());
        for i in order {
            // The source's edges run to the claim nodes in order.
            let from_source = self.start[SOURCE] as usize + i;
            for fit in self.edges_of(self.claim(i)) {
                let class = self.arcs[fit].to as usize;
                if class == SOURCE {
                    continue;
                }
                // A class's first edge is to the sink.
                let to_sink = self.start[class] as usize;
                let amount = self.arcs[from_source].cap.min(self.arcs[to_sink].cap);
                if amount > 0 {
                    for e in [from_source, fit, to_sink] {
                        self.send(e, amount);
                    }
                    self.value += amount;
                    if self.arcs[from_source].cap == 0 {
                        break;
                    }
                }
            }
        }
    }

    fn edges_of(&self, u: usize) -> std::ops::Range<usize> {
        self.start[u] as usize..self.start[u + 1] as usize
    }

    /// Sends `amount` more along edge `e`.
    #[inline(always)]
    fn send(&mut self, e: usize, amount: i64) {
        self.arcs[e].cap -= amount;
        let back = self.arcs[e].reverse as usize;
        self.arcs[back].cap += amount;
    }

    fn nodes(&self) -> usize {
        self.start.len() - 1
    }

    fn claim(&self, i: usize) -> usize {
        2 + i
    }

    fn class(&self, j: usize) -> usize {
        2 + self.claims + j
    }

    /// The flow's value: the size of a maximum matching.
    pub(super) fn value(&self) -> i64 {
        self.value
    }

    /// This network with new demands and supplies, its flow kept where they allow and
    /// made maximum again: what a pick whose network has the nodes and fits of the last
    /// one needs, instead of a flow built afresh (usually an augmenting path or two).
    /// `None` when the new demands could fill a fit's capacity (larger in all than the
    /// network was built for): then build it afresh.
    pub(super) fn refitted(mut self, demand: &[i64], supply: &[i64]) -> Option<Self> {
        let fits_all = demand.iter().sum::<i64>() < self.unbounded;
        if !fits_all || demand.len() != self.claims || supply.len() != self.classes() {
            return None;
        }
        for (i, &d) in demand.iter().enumerate() {
            let node = self.claim(i);
            let edge = self.start[SOURCE] as usize + i;
            self.set_capacity(edge, d.max(0), |flow| flow.fit_out_of(node));
        }
        for (j, &s) in supply.iter().enumerate() {
            let class = self.class(j);
            let edge = self.start[class] as usize;
            self.set_capacity(edge, s.max(0), |flow| flow.fit_into(class));
        }
        self.run();
        Some(self)
    }

    fn classes(&self) -> usize {
        self.nodes() - 2 - self.claims
    }

    /// Sets the capacity of `edge` (from the source to a claim node, or from a class to
    /// the sink) to `cap`. Where it carries more, the excess is taken back a unit at a
    /// time along the path of a unit through it: the fit `fit_of` names, with the
    /// source's edge before it and the sink's after (the network is three edges deep).
    fn set_capacity(&mut self, edge: usize, cap: i64, fit_of: impl Fn(&Self) -> usize) {
        let carried = self.arcs[edge].reverse as usize;
        while self.arcs[carried].cap > cap {
            let fit = fit_of(self);
            let claim = self.arcs[self.arcs[fit].reverse as usize].to as usize;
            let class = self.arcs[fit].to as usize;
            // The source's edges run to the claim nodes in order; a class's first edge
            // is to the sink.
            let from_source = self.start[SOURCE] as usize + (claim - 2);
            let to_sink = self.start[class] as usize;
            for e in [from_source, fit, to_sink] {
                self.send(e, -1);
            }
            self.value -= 1;
        }
        self.arcs[edge].cap = cap - self.arcs[carried].cap;
    }

    /// A fit out of claim node `node` that carries flow (its reverse edge holds it).
    fn fit_out_of(&self, node: usize) -> usize {
        let first_class = 2 + self.claims;
        self.edges_of(node)
            .find(|&e| {
                let fit = self.arcs[e];
                fit.to as usize >= first_class && self.arcs[fit.reverse as usize].cap > 0
            })
            .expect("a claim node carrying flow has a fit carrying it")
    }

    /// A fit into `class` that carries flow (the class's edge back along it holds it).
    fn fit_into(&self, class: usize) -> usize {
        let claims = 2..2 + self.claims;
        self.edges_of(class)
            .find(|&e| claims.contains(&(self.arcs[e].to as usize)) && self.arcs[e].cap > 0)
            .map(|back| self.arcs[back].reverse as usize)
            .expect("a class carrying flow has a fit carrying it")
    }

    /// Dinic: augment along shortest paths, a blocking flow per level graph.
    fn run(&mut self) {
        let nodes = self.nodes();
        let (mut level, mut next) = (vec![usize::MAX; nodes], vec![0; nodes]);
        let mut queue = VecDeque::with_capacity(nodes);
        loop {
            self.levels(&mut level, &mut queue);
            if level[SINK] == usize::MAX {
                return;
            }
            for (n, &s) in next.iter_mut().zip(&self.start) {
                *n = s as usize;
            }
            loop {
                let pushed = self.push(SOURCE, i64::MAX, &level, &mut next);
                if pushed == 0 {
                    break;
                }
                self.value += pushed;
            }
        }
    }

    /// Each node's distance from the source in the residual graph (`usize::MAX`: not
    /// reached), into `level`; `queue` is the search's, lent so that phases share it.
    fn levels(&self, level: &mut [usize], queue: &mut VecDeque<usize>) {
        level.fill(usize::MAX);
        level[SOURCE] = 0;
        queue.clear();
        queue.push_back(SOURCE);
        while let Some(u) = queue.pop_front() {
            if level[u] >= level[SINK] {
                // The sink is reached: no node this far leads to it in the level graph.
                return;
            }
            for arc in &self.arcs[self.edges_of(u)] {
                let v = arc.to as usize;
                if arc.cap > 0 && level[v] == usize::MAX {
                    level[v] = level[u] + 1;
                    queue.push_back(v);
                }
            }
        }
    }

    /// One augmenting path of the level graph from `u`, at most `limit` units (the
    /// network is three edges deep, so the recursion is too).
    fn push(&mut self, u: usize, limit: i64, level: &[usize], next: &mut [usize]) -> i64 {
        if u == SINK {
            return limit;
        }
        let end = self.start[u + 1] as usize;
        while next[u] < end {
            let e = next[u];
            let Edge { to, cap, .. } = self.arcs[e];
            let v = to as usize;
            if cap > 0 && level[v] == level[u] + 1 {
                let pushed = self.push(v, limit.min(cap), level, next);
                if pushed > 0 {
                    self.send(e, pushed);
                    return pushed;
                }
            }
            next[u] += 1;
        }
        0
    }

    /// Which nodes reach `target` in the residual graph (by node number). With `until`
    /// not empty, the search stops once it has seen every node of `until`: the nodes it
    /// did not get to read `false`, whether they reach `target` or not.
    fn reaching(&self, target: usize, until: &[usize]) -> Vec<bool> {
        let mut seen = vec![false; self.nodes()];
        let mut wanted = vec![false; if until.is_empty() { 0 } else { self.nodes() }];
        let mut left = 0;
        for &u in until {
            left += usize::from(!std::mem::replace(&mut wanted[u], true));
        }
        seen[target] = true;
        let mut queue = VecDeque::from([target]);
        while let Some(v) = queue.pop_front() {
            for arc in &self.arcs[self.edges_of(v)] {
                // `arc` runs v → w; its reverse w → v is residual when it has capacity.
                let w = arc.to as usize;
                if self.arcs[arc.reverse as usize].cap > 0 && !seen[w] {
                    seen[w] = true;
                    if wanted.get(w).copied().unwrap_or(false) {
                        left -= 1;
                        if left == 0 {
                            return seen;
                        }
                    }
                    queue.push_back(w);
                }
            }
        }
        seen
    }

    /// Per class, whether some maximum flow sends a unit from claim node `i` to it: the
    /// classes a claim of node `i` can take while the matching stays maximum.
    pub(super) fn classes_open_to(&self, i: usize) -> Vec<bool> {
        let node = self.claim(i);
        let first_class = 2 + self.claims;
        let mut open = vec![false; self.nodes() - first_class];
        // A fit that carries flow is open (a forward edge's reverse holds what it
        // carries); one that carries none is open if its class reaches the node (the fit
        // closes a cycle), which a search answers, stopping once it has seen them all.
        let mut unsent = Vec::new();
        for arc in &self.arcs[self.edges_of(node)] {
            let w = arc.to as usize;
            if w < first_class {
                continue;
            }
            if self.arcs[arc.reverse as usize].cap > 0 {
                open[w - first_class] = true;
            } else {
                unsent.push(w);
            }
        }
        if unsent.is_empty() {
            return open;
        }
        let reaches = self.reaching(node, &unsent);
        for w in unsent {
            open[w - first_class] |= reaches[w];
        }
        open
    }

    /// Per class, whether some maximum flow leaves one of its servers unused: the classes
    /// that can give a server away without shrinking the matching.
    pub(super) fn classes_to_spare(&self) -> Vec<bool> {
        let reaches = self.reaching(SINK, &[]);
        reaches[2 + self.claims..].to_vec()
    }

    /// Whether one more claim at node `i` would make the maximum flow larger.
    pub(super) fn grows_with(&self, i: usize) -> bool {
        self.reaching(SINK, &[])[self.claim(i)]
    }
}

/// A node or edge number as an [`Edge`] holds it ([`MaxFlow::new`] checked that every
/// one fits).
#[inline(always)]
fn node_number(n: usize) -> u32 {
    n as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    use pathfinding::directed::edmonds_karp::edmonds_karp_sparse;

    /// The reference: `pathfinding`'s Edmonds–Karp on the same network.
    fn value(demand: &[i64], supply: &[i64], edges: &[(usize, usize)]) -> i64 {
        let first_class = 2 + demand.len();
        let vertices: Vec<usize> = (0..first_class + supply.len()).collect();
        let sources = (0..demand.len()).map(|i| ((SOURCE, 2 + i), demand[i]));
        let sinks = (0..supply.len()).map(|j| ((first_class + j, SINK), supply[j]));
        let fits = edges.iter().map(|&(i, j)| ((2 + i, first_class + j), 1000));
        let caps = sources.chain(sinks).filter(|(_, c)| *c > 0).chain(fits);
        edmonds_karp_sparse(&vertices, &SOURCE, &SINK, caps).1
    }

    /// A xorshift generator: `next(n)` is in `0..n`.
    fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        }
    }

    /// Random fits between `claims` claim nodes and `classes` classes, a third of the
    /// pairs.
    fn random_fits(
        next: &mut impl FnMut(u64) -> u64,
        claims: usize,
        classes: usize,
    ) -> Vec<(usize, usize)> {
        let pairs = (0..claims).flat_map(|i| (0..classes).map(move |j| (i, j)));
        pairs.filter(|_| next(3) == 0).collect()
    }

    fn changed(caps: &[i64], i: usize, delta: i64) -> Vec<i64> {
        let mut caps = caps.to_vec();
        caps[i] += delta;
        caps
    }

    /// A flow refitted to new demands and supplies answers as one built afresh for them,
    /// on small random networks: its value and every residual question.
    #[test]
    fn a_refitted_flow_answers_as_a_fresh_one() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut refitted = 0;
        for _ in 0..3000 {
            let (claims, classes) = (1 + next(5) as usize, 1 + next(5) as usize);
            let mut caps =
                |n: usize, most: u64| -> Vec<i64> { (0..n).map(|_| next(most) as i64).collect() };
            let (demand, supply) = (caps(claims, 5), caps(classes, 4));
            let (demand2, supply2) = (caps(claims, 4), caps(classes, 4));
            let edges = random_fits(&mut next, claims, classes);
            let old = MaxFlow::new(&demand, &supply, &edges);
            let Some(kept) = old.refitted(&demand2, &supply2) else {
                assert!(demand2.iter().sum::<i64>() > demand.iter().sum::<i64>());
                continue;
            };
            refitted += 1;
            let fresh = MaxFlow::new(&demand2, &supply2, &edges);
            let case = format!("{demand:?} {supply:?} → {demand2:?} {supply2:?} {edges:?}");
            assert_eq!(kept.value(), fresh.value(), "{case}");
            assert_eq!(kept.classes_to_spare(), fresh.classes_to_spare(), "{case}");
            for (i, &d) in demand2.iter().enumerate() {
                assert_eq!(kept.grows_with(i), fresh.grows_with(i), "{case}");
                if d > 0 {
                    assert_eq!(kept.classes_open_to(i), fresh.classes_open_to(i), "{case}");
                }
            }
        }
        assert!(refitted > 1000, "most networks refit: {refitted}");
    }

    /// Every answer agrees with its definition (max flows of changed networks) on small
    /// random networks.
    #[test]
    fn answers_agree_with_max_flows_of_changed_networks() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for _ in 0..2000 {
            let (claims, classes) = (1 + next(5) as usize, 1 + next(5) as usize);
            let demand: Vec<i64> = (0..claims).map(|_| next(4) as i64).collect();
            let supply: Vec<i64> = (0..classes).map(|_| 1 + next(3) as i64).collect();
            let edges = random_fits(&mut next, claims, classes);
            let flow = MaxFlow::new(&demand, &supply, &edges);
            let full = flow.value();
            assert_eq!(full, value(&demand, &supply, &edges));
            let spare = flow.classes_to_spare();
            for (j, &spares) in spare.iter().enumerate() {
                let without = value(&demand, &changed(&supply, j, -1), &edges);
                assert_eq!(spares, without == full, "{demand:?} {supply:?} {edges:?}");
            }
            for i in 0..claims {
                let grows = value(&changed(&demand, i, 1), &supply, &edges) > full;
                assert_eq!(flow.grows_with(i), grows);
                if demand[i] == 0 {
                    continue;
                }
                let open = flow.classes_open_to(i);
                for (j, &is_open) in open.iter().enumerate() {
                    let fits = edges.contains(&(i, j));
                    let after = value(&changed(&demand, i, -1), &changed(&supply, j, -1), &edges);
                    let keeps = fits && after == full - 1;
                    assert_eq!(is_open, keeps, "{demand:?} {supply:?} {edges:?} {i} {j}");
                }
            }
        }
    }
}
