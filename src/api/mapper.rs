//! The REST mapper: resolves an owner reference's `apiVersion` and `kind` to a resource and scope.
//!
//! It is built from a discovery document and replaced whole on every resync (spec §7.7 step 5), so
//! readers never see a half-updated mapping. Like upstream's deferred mapper, a kind asked for at a
//! version that is not served is a [`ApiError::NoKindMatch`], even when another version serves it.

use super::{ApiError, ApiResource, Gvr, RestMapping};
use std::collections::HashMap;

/// An immutable `(group, version, kind) → resource` index.
#[derive(Clone, Debug, Default)]
pub struct RestMapper {
    by_kind: HashMap<(String, String, String), RestMapping>,
    by_resource: HashMap<Gvr, ApiResource>,
}

impl RestMapper {
    /// Indexes every served version of every resource in `resources`.
    pub fn new(resources: &[ApiResource]) -> Self {
        let mut mapper = RestMapper::default();
        for r in resources {
            let key = (r.gvr.group.clone(), r.gvr.version.clone(), r.kind.clone());
            mapper.by_kind.entry(key).or_insert_with(|| RestMapping {
                gvr: r.gvr.clone(),
                namespaced: r.namespaced,
            });
            mapper.by_resource.insert(r.gvr.clone(), r.clone());
        }
        mapper
    }

    /// Maps `apiVersion` + `kind` to the resource serving it.
    pub fn rest_mapping(&self, api_version: &str, kind: &str) -> Result<RestMapping, ApiError> {
        let (group, version) = super::split_api_version(api_version);
        self.by_kind
            .get(&(group.to_string(), version.to_string(), kind.to_string()))
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
