//! What the server serves: one [`ResourceDef`] per group/version/resource, for the
//! built-in kinds and for every version of every installed CRD.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::schema::CompiledSchema;

/// The key of a collection in the store: `group/plural`. Several served versions (and
/// the two Event APIs) share one collection.
pub(crate) type StorageKey = Arc<str>;

pub(crate) fn storage_key(group: &str, plural: &str) -> StorageKey {
    Arc::from(format!("{group}/{plural}"))
}

/// One `additionalPrinterColumns` entry (or a built-in's column).
#[derive(Debug, Clone)]
pub(crate) struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

impl PrinterColumn {
    pub fn new(name: &str, type_: &str, json_path: &str) -> Self {
        Self {
            name: name.into(),
            type_: type_.into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            json_path: json_path.into(),
        }
    }
}

/// What kind of resource this is; decides conversion, validation and field selectors.
#[derive(Debug, Clone)]
pub(crate) enum Flavor {
    /// A custom resource of the CRD `crd` (`plural.group`).
    Custom {
        crd: String,
        schema: Option<Arc<CompiledSchema>>,
        /// `selectableFields`: field label → JSON path (`.spec.color`).
        selectable: Vec<String>,
    },
    Namespace,
    /// core/v1 Event: the stored form of every event.
    CoreEvent,
    /// events.k8s.io/v1 Event: a view of the same collection, converted on the fly.
    EventsV1,
    Lease,
    Crd,
}

#[derive(Debug, Clone)]
pub(crate) struct ResourceDef {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub list_kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status_subresource: bool,
    pub columns: Vec<PrinterColumn>,
    pub flavor: Flavor,
    pub storage: StorageKey,
}

impl ResourceDef {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Is `v` this resource's [`Self::api_version`]? (Without allocating.)
    pub fn is_api_version(&self, v: &str) -> bool {
        if self.group.is_empty() {
            v == self.version
        } else {
            v.strip_prefix(self.group.as_str())
                .and_then(|rest| rest.strip_prefix('/'))
                == Some(self.version.as_str())
        }
    }

    pub fn is_custom(&self) -> bool {
        matches!(self.flavor, Flavor::Custom { .. })
    }

    /// Custom resources and CRDs carry `metadata.generation`; the built-ins we serve do not.
    pub fn has_generation(&self) -> bool {
        matches!(self.flavor, Flavor::Custom { .. } | Flavor::Crd)
    }

    pub fn verbs(&self) -> Vec<&'static str> {
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

/// Kubernetes version ordering (`v1` > `v1beta2` > `v1beta1` > `v1alpha1` > `foo`), used
/// to pick a group's preferred version.
pub(crate) fn version_priority(v: &str) -> (u8, u64, u64) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u64>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    for (prefix, rank) in [("beta", 2u8), ("alpha", 1u8)] {
        if let Some(n) = tail.strip_prefix(prefix)
            && let Ok(minor) = n.parse::<u64>()
        {
            return (rank, major, minor);
        }
    }
    (0, 0, 0)
}

/// Every served resource, by group and version.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    by_gv: BTreeMap<(String, String), BTreeMap<String, Arc<ResourceDef>>>,
    /// Groups in discovery order: built-ins first (as registered), then custom groups.
    group_order: Vec<String>,
}

/// A group as discovery shows it.
pub(crate) struct GroupInfo {
    pub name: String,
    /// Most preferred first.
    pub versions: Vec<String>,
}

impl Registry {
    pub fn insert(&mut self, def: ResourceDef) {
        if !self.group_order.contains(&def.group) {
            self.group_order.push(def.group.clone());
        }
        self.by_gv
            .entry((def.group.clone(), def.version.clone()))
            .or_default()
            .insert(def.plural.clone(), Arc::new(def));
    }

    /// Stops serving everything the CRD `crd` served.
    pub fn remove_crd(&mut self, crd: &str) {
        for resources in self.by_gv.values_mut() {
            resources
                .retain(|_, d| !matches!(&d.flavor, Flavor::Custom { crd: c, .. } if c == crd));
        }
        self.by_gv.retain(|_, r| !r.is_empty());
        let live: Vec<String> = self.by_gv.keys().map(|(g, _)| g.clone()).collect();
        self.group_order.retain(|g| live.contains(g));
    }

    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.by_gv
            .get(&(group.to_owned(), version.to_owned()))?
            .get(plural)
            .cloned()
    }

    pub fn resources(&self, group: &str, version: &str) -> Option<Vec<Arc<ResourceDef>>> {
        self.by_gv
            .get(&(group.to_owned(), version.to_owned()))
            .map(|r| r.values().cloned().collect())
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceDef>> {
        self.by_gv.values().flat_map(|r| r.values())
    }

    pub fn groups(&self) -> Vec<GroupInfo> {
        self.group_order
            .iter()
            .map(|g| {
                let mut versions: Vec<String> = self
                    .by_gv
                    .keys()
                    .filter(|(gg, _)| gg == g)
                    .map(|(_, v)| v.clone())
                    .collect();
                versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
                GroupInfo {
                    name: g.clone(),
                    versions,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions_are_matched_without_allocating() {
        let def = |group: &str| ResourceDef {
            group: group.into(),
            version: "v1".into(),
            plural: "things".into(),
            singular: "thing".into(),
            kind: "Thing".into(),
            list_kind: "ThingList".into(),
            namespaced: false,
            short_names: Vec::new(),
            categories: Vec::new(),
            status_subresource: false,
            columns: Vec::new(),
            flavor: Flavor::Lease,
            storage: storage_key(group, "things"),
        };
        let (grouped, core) = (def("g.dev"), def(""));
        for (d, v) in [(&grouped, "g.dev/v1"), (&core, "v1")] {
            assert!(d.is_api_version(v));
            assert_eq!(d.api_version(), v);
        }
        for v in [
            "g.dev/v2",
            "g.dev",
            "g.devv1",
            "g.dev/v1/",
            "v1",
            "x/g.dev/v1",
        ] {
            assert!(!grouped.is_api_version(v), "{v}");
        }
        assert!(!core.is_api_version("g.dev/v1"));
    }

    #[test]
    fn versions_order_like_kubernetes() {
        let mut v = vec!["v1alpha1", "v2", "v1beta1", "v1", "v1beta2", "foo"];
        v.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(v, ["v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]);
    }
}
