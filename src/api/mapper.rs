//! The REST mapper: resolves an owner reference's `apiVersion` and `kind` to a resource and scope.
//!
//! It is built from a discovery document and replaced whole on every resync (spec §7.7 step 5), so
//! readers never see a half-updated mapping. Like upstream's deferred mapper, a kind asked for at a
//! version that is not served is a [`ApiError::NoKindMatch`] from [`RestMapper::rest_mapping`], even
//! when another version serves it.
//!
//! [`RestMapper::rest_mapping_any_version`] is the collector's lookup for owner references: an
//! object is one object whatever version it is read through, so a reference written against a
//! version the API no longer serves (a CRD that dropped `v1alpha1` but still serves `v1`) is
//! resolved through the served version the group prefers for that kind (kubernetes#102641, where
//! upstream fails the mapping on every attempt, forever). A kind served at no version at all is
//! still a [`ApiError::NoKindMatch`].

use super::{ApiError, ApiResource, Gvr, RestMapping};
use std::collections::HashMap;

/// An immutable `(apiVersion, kind) → resource` index.
#[derive(Clone, Debug, Default)]
pub struct RestMapper {
    /// apiVersion → kind → mapping; two levels so a lookup borrows its `&str` keys and allocates
    /// nothing (every collector API call maps a kind).
    by_kind: HashMap<String, HashMap<String, RestMapping>>,
    /// group → kind → the mapping of the version to read that kind through when the version asked
    /// for is not served: the group's preferred version if it serves the kind, else the first
    /// version discovery lists for it (discovery lists versions by priority).
    by_group_kind: HashMap<String, HashMap<String, RestMapping>>,
    by_resource: HashMap<Gvr, ApiResource>,
}

impl RestMapper {
    /// Indexes every served version of every resource in `resources`.
    pub fn new(resources: &[ApiResource]) -> Self {
        let mut mapper = RestMapper::default();
        for r in resources {
            let kinds = mapper.by_kind.entry(r.gvr.api_version()).or_default();
            kinds.entry(r.kind.clone()).or_insert_with(|| RestMapping {
                gvr: r.gvr.clone(),
                namespaced: r.namespaced,
            });
            let mapping = RestMapping {
                gvr: r.gvr.clone(),
                namespaced: r.namespaced,
            };
            let kinds = mapper.by_group_kind.entry(r.gvr.group.clone()).or_default();
            match kinds.get_mut(&r.kind) {
                None => drop(kinds.insert(r.kind.clone(), mapping)),
                Some(first) if r.preferred => *first = mapping,
                Some(_) => {}
            }
            mapper.by_resource.insert(r.gvr.clone(), r.clone());
        }
        mapper
    }

    /// Maps `apiVersion` + `kind` to the resource serving it.
    pub fn rest_mapping(&self, api_version: &str, kind: &str) -> Result<RestMapping, ApiError> {
        // `/v1` names the core group's `v1`, as `group/version` parsing reads it.
        let key = api_version.strip_prefix('/').unwrap_or(api_version);
        self.by_kind
            .get(key)
            .and_then(|kinds| kinds.get(kind))
            .cloned()
            .ok_or_else(|| ApiError::NoKindMatch {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
            })
    }

    /// Maps `apiVersion` + `kind` like [`rest_mapping`](Self::rest_mapping) when that version is
    /// served; otherwise to the resource of the group's preferred served version of `kind` (see
    /// the [module docs](self)). Fails only when no version of the group serves `kind`, with the
    /// error [`rest_mapping`](Self::rest_mapping) gives.
    pub fn rest_mapping_any_version(&self, api_version: &str, kind: &str) -> Result<RestMapping, ApiError> {
        self.mapping_any_version(api_version, kind)
            .cloned()
            .ok_or_else(|| ApiError::NoKindMatch {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
            })
    }

    /// [`rest_mapping_any_version`](Self::rest_mapping_any_version), borrowed: `None` when no
    /// version of the group serves `kind`. Allocates nothing (a plan reads every reference
    /// through it).
    pub fn mapping_any_version(&self, api_version: &str, kind: &str) -> Option<&RestMapping> {
        let key = api_version.strip_prefix('/').unwrap_or(api_version);
        let exact = self.by_kind.get(key).and_then(|kinds| kinds.get(kind));
        exact.or_else(|| {
            // `group/version`, or a bare `version` of the core group.
            let group = key.rsplit_once('/').map_or("", |(group, _)| group);
            self.by_group_kind.get(group).and_then(|kinds| kinds.get(kind))
        })
    }

    /// How many resources (one per served version) the mapper knows.
    pub fn len(&self) -> usize {
        self.by_resource.len()
    }

    /// True when the mapper knows no resource.
    pub fn is_empty(&self) -> bool {
        self.by_resource.is_empty()
    }

    /// The discovery entry of the version of `group`'s `resource` the group prefers, if served.
    pub fn preferred(&self, group: &str, resource: &str) -> Option<&ApiResource> {
        self.by_resource
            .values()
            .find(|r| r.preferred && r.gvr.group == group && r.gvr.resource == resource)
    }

    /// The discovery entry of a resource, if served.
    pub fn resource(&self, gvr: &Gvr) -> Option<&ApiResource> {
        self.by_resource.get(gvr)
    }
}

/// The current [`RestMapper`], swapped whole on resync; readers take a cheap snapshot.
#[derive(Debug, Default)]
pub struct SharedRestMapper {
    current: parking_lot::RwLock<std::sync::Arc<RestMapper>>,
}

impl SharedRestMapper {
    /// A cell holding `mapper`.
    pub fn new(mapper: RestMapper) -> Self {
        SharedRestMapper {
            current: parking_lot::RwLock::new(std::sync::Arc::new(mapper)),
        }
    }

    /// The mapper in force now.
    pub fn load(&self) -> std::sync::Arc<RestMapper> {
        self.current.read().clone()
    }

    /// Replaces the mapper (spec §7.7 step 5, "reset the RESTMapper").
    pub fn store(&self, mapper: RestMapper) {
        *self.current.write() = std::sync::Arc::new(mapper);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(group: &str, version: &str, kind: &str, preferred: bool) -> ApiResource {
        ApiResource {
            gvr: Gvr::new(group, version, &format!("{}s", kind.to_lowercase())),
            kind: kind.into(),
            namespaced: true,
            verbs: vec!["get".into()],
            preferred,
        }
    }

    #[test]
    fn rest_mapping_should_resolve_served_versions_only() {
        let mapper = RestMapper::new(&[
            resource("apps", "v1", "Deployment", true),
            resource("apps", "v1beta1", "Deployment", false),
            resource("", "v1", "Pod", true),
        ]);
        assert_eq!(
            mapper.rest_mapping("apps/v1beta1", "Deployment").unwrap().gvr.version,
            "v1beta1"
        );
        assert_eq!(mapper.rest_mapping("v1", "Pod").unwrap().gvr.resource, "pods");
        assert_eq!(mapper.rest_mapping("/v1", "Pod").unwrap().gvr.resource, "pods");
        assert!(matches!(
            mapper.rest_mapping("extensions/v1beta1", "Deployment"),
            Err(ApiError::NoKindMatch { .. })
        ));
        assert!(matches!(
            mapper.rest_mapping("apps/v1", "Pod"),
            Err(ApiError::NoKindMatch { .. })
        ));
    }

    #[test]
    fn rest_mapping_any_version_should_read_an_unserved_version_through_the_preferred_one() {
        let mapper = RestMapper::new(&[
            resource("example.com", "v1beta1", "Widget", false),
            resource("example.com", "v1", "Widget", true),
            resource("example.com", "v2", "Gadget", false),
            resource("", "v1", "Pod", true),
        ]);
        let widget = |v: &str| mapper.rest_mapping_any_version(v, "Widget").map(|m| m.gvr.version);
        assert_eq!(widget("example.com/v1alpha1").unwrap(), "v1", "the preferred version");
        assert_eq!(
            widget("example.com/v1beta1").unwrap(),
            "v1beta1",
            "a served version is kept"
        );
        assert_eq!(
            mapper
                .rest_mapping_any_version("example.com/v1", "Gadget")
                .unwrap()
                .gvr
                .version,
            "v2",
            "a kind the preferred version lacks is read through a version that serves it"
        );
        assert_eq!(
            mapper.rest_mapping_any_version("v2", "Pod").unwrap().gvr.resource,
            "pods"
        );
        assert!(matches!(
            mapper.rest_mapping_any_version("other.com/v1", "Widget"),
            Err(ApiError::NoKindMatch { .. })
        ));
        assert!(matches!(
            mapper.rest_mapping_any_version("example.com/v1alpha1", "Sprocket"),
            Err(ApiError::NoKindMatch { .. })
        ));
    }
}
