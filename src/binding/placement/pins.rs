//! The values a claim shape's selector pins a server to, and shapes filed by them: the
//! shapes that could fit a class of free servers are found from the class's labels (a
//! lookup per label), not by a selector match of every shape.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::api::SelectorOperator;

use crate::binding::placement::shape::{ClaimShape, FastMap, address};

/// The (key, value) pairs one requirement of the shape's selector pins a server to (a
/// `matchLabels` entry, or an `In`'s values): a server fits only if it has one of them.
/// `None`: the selector pins nothing (no selector, or only `NotIn`, `Exists`,
/// `DoesNotExist`). The pairs are all of one key.
pub fn pins(shape: &ClaimShape) -> Option<Vec<(String, String)>> {
    let selector = shape.selector.as_ref()?;
    if let Some((k, v)) = selector.match_labels.iter().next() {
        return Some(vec![(k.clone(), v.clone())]);
    }
    let pinning = selector
        .match_expressions
        .iter()
        .filter(|r| r.operator == SelectorOperator::In);
    let fewest = pinning.min_by_key(|r| r.values.len())?;
    let pins = fewest
        .values
        .iter()
        .map(|v| (fewest.key.clone(), v.clone()));
    Some(pins.collect())
}

/// Shapes filed by the pairs their selector pins ([`pins`]), and those pinning none,
/// keyed by the address of the shared copy (held here, so the address names one shape
/// while it is filed). The pairs, which tenants choose, are hashed by SipHash; the
/// addresses, which they do not, by foldhash.
#[derive(Clone, Debug, Default)]
pub struct ShapesByPin {
    pinned: HashMap<String, HashMap<String, FastMap<usize, Arc<ClaimShape>>>>,
    unpinned: FastMap<usize, Arc<ClaimShape>>,
}

impl ShapesByPin {
    pub fn insert(&mut self, shape: &Arc<ClaimShape>) {
        let address = address(shape);
        match pins(shape) {
            Some(pins) => {
                for (k, v) in pins {
                    let filed = self.pinned.entry(k).or_default().entry(v).or_default();
                    filed.insert(address, shape.clone());
                }
            }
            None => {
                self.unpinned.insert(address, shape.clone());
            }
        }
    }

    pub fn remove(&mut self, shape: &Arc<ClaimShape>) {
        let address = address(shape);
        let Some(pins) = pins(shape) else {
            self.unpinned.remove(&address);
            return;
        };
        for (k, v) in pins {
            let Some(values) = self.pinned.get_mut(&k) else {
                continue;
            };
            if let Some(filed) = values.get_mut(&v) {
                filed.remove(&address);
                if filed.is_empty() {
                    values.remove(&v);
                }
            }
            if values.is_empty() {
                self.pinned.remove(&k);
            }
        }
    }

    /// The shapes that could fit servers with these `labels`: those pinning a pair the
    /// labels carry, then every shape pinning none. Each once: a shape's pins are all of
    /// one key, and the labels carry one value per key.
    pub fn could_fit<'a>(
        &'a self,
        labels: &'a BTreeMap<String, String>,
    ) -> impl Iterator<Item = &'a Arc<ClaimShape>> {
        self.pinning(labels).chain(self.unpinned())
    }

    /// The shapes pinning a pair the labels carry, each once.
    fn pinning<'a, 'l>(
        &'a self,
        labels: &'l BTreeMap<String, String>,
    ) -> impl Iterator<Item = &'a Arc<ClaimShape>> + use<'a, 'l> {
        let pinned = labels
            .iter()
            .filter_map(|(k, v)| self.pinned.get(k)?.get(v));
        pinned.flatten().map(|(_, shape)| shape)
    }

    /// The shapes pinning nothing.
    fn unpinned(&self) -> impl Iterator<Item = &Arc<ClaimShape>> {
        self.unpinned.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{SelectorRequirement, ServerSelector};

    fn shape(labels: &[(&str, &str)], r#in: Option<(&str, &[&str])>) -> Arc<ClaimShape> {
        let match_labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let match_expressions = r#in
            .map(|(key, values)| SelectorRequirement {
                key: key.to_string(),
                operator: SelectorOperator::In,
                values: values.iter().map(|v| v.to_string()).collect(),
            })
            .into_iter()
            .collect();
        Arc::new(ClaimShape {
            selector: Some(ServerSelector {
                match_labels,
                match_expressions,
            }),
            tolerations: Vec::new(),
        })
    }

    #[test]
    fn shapes_are_found_by_a_pinned_value_the_labels_carry_or_by_pinning_none() {
        let serial = shape(&[("serial", "s1")], None);
        let racks = shape(&[], Some(("rack", &["r1", "r2"])));
        let any = Arc::new(ClaimShape {
            selector: None,
            tolerations: Vec::new(),
        });
        let mut filed = ShapesByPin::default();
        for s in [&serial, &racks, &any] {
            filed.insert(s);
        }
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            let pairs = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string()));
            pairs.collect()
        };
        let found = |filed: &ShapesByPin, l: &BTreeMap<String, String>| -> Vec<usize> {
            let mut found: Vec<usize> = filed.could_fit(l).map(address).collect();
            found.sort();
            found
        };
        let mut expected = vec![address(&serial), address(&racks), address(&any)];
        expected.sort();
        assert_eq!(
            found(&filed, &labels(&[("serial", "s1"), ("rack", "r2")])),
            expected
        );
        assert_eq!(
            found(&filed, &labels(&[("rack", "r3")])),
            vec![address(&any)]
        );
        filed.remove(&racks);
        filed.remove(&any);
        assert_eq!(
            found(&filed, &labels(&[("serial", "s1"), ("rack", "r2")])),
            vec![address(&serial)]
        );
        filed.remove(&serial);
        assert!(filed.pinned.is_empty() && filed.unpinned.is_empty());
    }
}
