//! What a pick reads of the max flow of its network, and a pick's max flow kept for the
//! next pick over the same nodes (refitted to its demands and supplies, not built afresh).

use crate::binding::placement::index::ClassId;
use crate::binding::placement::shape::FastMap;

use super::flow::MaxFlow;

/// What a pick reads of the maximum flow of its network: its value, and per class of
/// the network whether some maximum flow sends a unit of the picker's node there.
pub(super) struct FullFlow {
    pub(super) value: i64,
    pub(super) open_to_mine: Vec<bool>,
}

impl FullFlow {
    /// The answers of a max flow built afresh for a network's `edges` (numbered as it is:
    /// the picker's node first).
    pub(super) fn new(edges: &[(usize, usize)], demand: &[i64], supply: &[i64]) -> Self {
        let flow = MaxFlow::new(demand, supply, edges);
        FullFlow {
            value: flow.value(),
            open_to_mine: flow.classes_open_to(0),
        }
    }
}

/// A pick's max flow, kept for the next pick whose network has the same nodes: the same
/// waiting shapes (by row number) and classes (by slot), so the same fits (a shape's
/// fits are the slots of its row among the classes in). Its node numbers by row number
/// and by slot.
#[derive(Debug)]
pub(super) struct KeptFlow {
    flow: MaxFlow,
    shape_node: FastMap<u32, usize>,
    class_node: FastMap<ClassId, usize>,
}

/// A network's nodes by what names them from pick to pick ([`Network::keys`]).
pub(super) type NodeKeys = (Vec<u32>, Vec<ClassId>);

impl KeptFlow {
    /// A flow built for the network whose nodes `keys` names, in its order.
    pub(super) fn numbered(flow: MaxFlow, (shapes, classes): &NodeKeys) -> Self {
        KeptFlow {
            flow,
            shape_node: shapes.iter().enumerate().map(|(i, &n)| (n, i)).collect(),
            class_node: classes.iter().enumerate().map(|(j, &id)| (id, j)).collect(),
        }
    }

    /// Whether this flow's network has the nodes `keys` names (each once, so the same
    /// count and each of them is enough).
    pub(super) fn has_nodes(&self, (shapes, classes): &NodeKeys) -> bool {
        shapes.len() == self.shape_node.len()
            && classes.len() == self.class_node.len()
            && shapes.iter().all(|n| self.shape_node.contains_key(n))
            && classes.iter().all(|id| self.class_node.contains_key(id))
    }

    /// This flow refitted to the demands and supplies of a network with its nodes,
    /// numbered by `keys`.
    pub(super) fn refitted(
        self,
        (shapes, classes): &NodeKeys,
        demand: &[i64],
        supply: &[i64],
    ) -> Option<Self> {
        let mut kept_demand = vec![0; shapes.len()];
        for (i, n) in shapes.iter().enumerate() {
            kept_demand[self.shape_node[n]] = demand[i];
        }
        let mut kept_supply = vec![0; classes.len()];
        for (j, id) in classes.iter().enumerate() {
            kept_supply[self.class_node[id]] = supply[j];
        }
        let flow = self.flow.refitted(&kept_demand, &kept_supply)?;
        Some(KeptFlow { flow, ..self })
    }

    /// The answers for the network numbered by `keys`, whose picker's node comes first.
    pub(super) fn answers(&self, (shapes, classes): &NodeKeys) -> FullFlow {
        let open = self.flow.classes_open_to(self.shape_node[&shapes[0]]);
        let open_to_mine = classes.iter().map(|id| open[self.class_node[id]]).collect();
        FullFlow {
            value: self.flow.value(),
            open_to_mine,
        }
    }
}
