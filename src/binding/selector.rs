//! Label selector and taint/toleration matching.

use std::collections::BTreeMap;

use crate::api::{
    Labels, SelectorOperator, SelectorRequirement, ServerSelector, Taint, TaintEffect, Toleration,
    TolerationOperator,
};

/// Labels a selector can read: a cached server's, a namespace's, a class's projection.
pub trait LabelSet {
    fn label(&self, key: &str) -> Option<&str>;
}

impl LabelSet for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl LabelSet for Labels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// Whether `labels` satisfy `selector` (Kubernetes semantics: every `matchLabels` pair and
/// every expression must hold; an empty selector matches everything).
pub fn selector_matches(selector: &ServerSelector, labels: &impl LabelSet) -> bool {
    selector
        .match_labels
        .iter()
        .all(|(key, value)| labels.label(key) == Some(value.as_str()))
        && selector
            .match_expressions
            .iter()
            .all(|requirement| requirement_matches(requirement, labels))
}

/// Whether no label set satisfies `selector`: it has a requirement `In` no value (the
/// classes' [`crate::binding::state::class_labels::NO_SERVER_KEY`] requirement for a
/// claim its class or a quota shuts out is one).
pub fn matches_nothing(selector: &ServerSelector) -> bool {
    selector
        .match_expressions
        .iter()
        .any(|r| r.operator == SelectorOperator::In && r.values.is_empty())
}

pub(super) fn requirement_matches(
    requirement: &SelectorRequirement,
    labels: &impl LabelSet,
) -> bool {
    let value = labels.label(&requirement.key);
    let listed = |v: &str| requirement.values.iter().any(|x| x == v);
    match requirement.operator {
        SelectorOperator::In => value.is_some_and(listed),
        SelectorOperator::NotIn => value.is_none_or(|v| !listed(v)),
        SelectorOperator::Exists => value.is_some(),
        SelectorOperator::DoesNotExist => value.is_none(),
    }
}

/// Whether one toleration lets a claim bind a server with one taint (Kubernetes
/// semantics; an `Evict` taint only by a toleration without `tolerationSeconds`, which
/// would end the bind it made).
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    matches_taint(toleration, taint)
        && !(taint.effect == TaintEffect::Evict && toleration.toleration_seconds.is_some())
}

/// Whether `toleration` names `taint` (its effect, key and value), for however long it
/// tolerates it: an `Evict` toleration with `tolerationSeconds` matches the taint but
/// tolerates it only for a bind that stands, and only that long
/// ([`crate::binding::state::eviction`]).
pub fn matches_taint(toleration: &Toleration, taint: &Taint) -> bool {
    if toleration
        .effect
        .is_some_and(|effect| effect != taint.effect)
    {
        return false;
    }
    match toleration.operator {
        // An empty key with Exists is the wildcard toleration.
        TolerationOperator::Exists => toleration.key.is_empty() || toleration.key == taint.key,
        TolerationOperator::Equal => {
            toleration.key == taint.key
                && toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
    }
}

/// The first taint that none of `tolerations` accepts, if any. A report-only taint
/// (`None`) refuses nobody.
pub fn first_untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|taint| taint.effect != TaintEffect::None)
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requirement(operator: SelectorOperator, values: &[&str]) -> ServerSelector {
        ServerSelector {
            match_expressions: vec![SelectorRequirement {
                key: "rack".into(),
                operator,
                values: values.iter().map(|v| v.to_string()).collect(),
            }],
            ..ServerSelector::default()
        }
    }

    #[test]
    fn only_a_requirement_in_no_value_matches_nothing() {
        let none = requirement(SelectorOperator::In, &[]);
        assert!(matches_nothing(&none));
        assert!(!selector_matches(
            &none,
            &[("rack".to_string(), String::new())]
                .into_iter()
                .collect::<Labels>()
        ));
        assert!(!matches_nothing(&requirement(
            SelectorOperator::In,
            &["r1"]
        )));
        assert!(!matches_nothing(&requirement(SelectorOperator::NotIn, &[])));
        assert!(!matches_nothing(&ServerSelector::default()));
    }
}
