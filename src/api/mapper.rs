//! The REST mapper: resolves an owner reference's `apiVersion` and `kind` to a resource and scope.
//!
//! It is built from a discovery document and replaced whole on every resync (spec §7.7 step 5), so
//! readers never see a half-updated mapping. Like upstream's deferred mapper, a kind asked for at a
//! version that is not served is a [`ApiError::NoKindMatch`], even when another version serves it.

use super::{ApiError, ApiResource, Gvr, RestMapping};
use std::collections::HashMap;

/// An immutable `(apiVersion, kind) → resource` index.
#[derive(Clone, Debug, Default)]
pub struct RestMapper {
    /// apiVersion → kind → mapping; two levels so a lookup borrows its `&str` keys and allocates
    /// nothing (every collector API call maps a kind).
    by_kind: HashMap<String, HashMap<String, RestMapping>>,
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
}
