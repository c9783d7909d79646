//! Storage generations: in which encoding (a storage version, or an encryption key's generation)
//! each stored object was last written, so that a test can see a storage version migration
//! rewrite every object of a resource.
//!
//! A type's objects are written at its current generation, 1 at first.
//! [`SimCluster::rotate_storage`] moves a type to the next one, as changing a CRD's storage version
//! or rotating an encryption-at-rest key does: objects stored before stay at their generation
//! until something writes them again.
//!
//! # Invariants
//!
//! - Every write takes a new resourceVersion, so an object's generation follows from its
//!   resourceVersion alone: the type keeps the resourceVersion at which each later generation
//!   began ([`TypeDef::storage_rotations`], saved with the type), and nothing per object.
//! - A write that changes nothing is stored anyway while the object is at an older generation, as
//!   the API server writes back an object whose stored form is stale (that is the write a
//!   migrator sends: an apply of nothing but the object's UID and resourceVersion); at the
//!   current generation it stays a no-op and takes no resourceVersion.

use super::types::TypeDef;
use super::SimCluster;
use kube_gc::api::{ApiError, Gvr};
use serde::Serialize;
use std::collections::BTreeMap;

impl TypeDef {
    /// The generation objects of this type are written at now.
    pub fn storage_generation(&self) -> u32 {
        1 + self.storage_rotations.len() as u32
    }

    /// The generation an object last written at `resource_version` is stored at.
    pub fn generation_of(&self, resource_version: u64) -> u32 {
        1 + self
            .storage_rotations
            .iter()
            .filter(|&&began| began < resource_version)
            .count() as u32
    }

    /// True when an object last written at `resource_version` is stored at an older generation
    /// than the current one.
    pub fn is_stale(&self, resource_version: u64) -> bool {
        self.storage_rotations
            .last()
            .is_some_and(|&began| resource_version <= began)
    }
}

/// A type's objects by the generation they are stored at, as `GET /sim/storage` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageReport {
    /// The resource, as the API server names it in messages (`pods`, `widgets.example.com`).
    pub resource: String,
    /// The generation writes are stored at now.
    pub generation: u32,
    /// How many objects are stored at each generation.
    pub objects: BTreeMap<u32, usize>,
}

impl StorageReport {
    /// How many objects are stored at an older generation than the current one.
    pub fn stale(&self) -> usize {
        self.objects
            .iter()
            .filter(|(g, _)| **g < self.generation)
            .map(|(_, n)| n)
            .sum()
    }
}

impl SimCluster {
    /// Moves `gvr`'s type to its next storage generation and returns it; see the
    /// [module docs](self). Any version of the type may be named.
    pub fn rotate_storage(&self, gvr: &Gvr) -> Result<u32, ApiError> {
        self.state.lock().rotate_storage(gvr)
    }

    /// `gvr`'s objects by the generation they are stored at.
    pub fn storage_report(&self, gvr: &Gvr) -> Result<StorageReport, ApiError> {
        let state = self.state.lock();
        let (def, versions) = state.stored_versions(gvr)?;
        let mut objects = BTreeMap::new();
        for rv in versions {
            *objects.entry(def.generation_of(rv)).or_insert(0) += 1;
        }
        Ok(StorageReport {
            resource: def.qualified_resource(),
            generation: def.storage_generation(),
            objects,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Part;
    use crate::tests::{crds, gadget_crd, gadgets, object, pods, NS};
    use kube_gc::api::{PartialObjectMeta, StatusReason};
    use serde_json::json;

    fn svms() -> Gvr {
        Gvr::new("storagemigration.k8s.io", "v1beta1", "storageversionmigrations")
    }

    #[test]
    fn an_object_should_be_at_the_generation_current_when_it_was_last_written() {
        let mut def = TypeDef::new("", "v1", "Pod", "pods", true);
        assert_eq!((def.storage_generation(), def.generation_of(7)), (1, 1));
        assert!(!def.is_stale(7));
        def.storage_rotations.push(10);
        assert_eq!(def.storage_generation(), 2);
        assert_eq!((def.generation_of(10), def.generation_of(11)), (1, 2));
        assert!(def.is_stale(10) && !def.is_stale(11));
    }

    #[test]
    fn a_write_that_changes_nothing_should_be_stored_only_while_the_object_is_stale() {
        let cluster = SimCluster::new();
        let pod = cluster.create(&pods(), object(NS, "p")).unwrap();
        assert_eq!(cluster.rotate_storage(&pods()), Ok(2));
        let rewritten = cluster.update(&pods(), pod.clone()).unwrap();
        assert_ne!(
            rewritten.metadata.resource_version, pod.metadata.resource_version,
            "stale: stored again"
        );
        let report = cluster.storage_report(&pods()).unwrap();
        assert_eq!((report.generation, report.stale()), (2, 0), "{report:?}");
        let again = cluster.update(&pods(), rewritten.clone()).unwrap();
        assert_eq!(
            again.metadata.resource_version, rewritten.metadata.resource_version,
            "current: a no-op"
        );
    }

    #[test]
    fn an_apply_naming_the_uid_of_a_missing_object_should_conflict_and_create_nothing() {
        let cluster = SimCluster::new();
        let config = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"uid": "gone", "resourceVersion": "3"}});
        let err = cluster
            .writes(false)
            .by("migrator")
            .apply(&pods(), NS, "p", &config, false)
            .unwrap_err();
        assert_eq!(err.reason(), Some(StatusReason::Conflict), "{err}");
        assert!(
            err.to_string()
                .contains("Precondition failed: UID in precondition: gone"),
            "{err}"
        );
        assert!(cluster.get_object(&pods(), NS, "p").is_err());
    }

    #[test]
    fn a_migration_should_name_its_resource_and_never_change_it() {
        let cluster = SimCluster::new();
        let without: PartialObjectMeta =
            serde_json::from_value(json!({"metadata": {"name": "m"}, "spec": {}})).unwrap();
        let err = cluster.create(&svms(), without).unwrap_err();
        assert_eq!(err.reason(), Some(StatusReason::Invalid), "{err}");
        assert!(
            err.to_string().contains("spec.resource.resource: Required value"),
            "{err}"
        );
        let named: PartialObjectMeta = serde_json::from_value(json!({
            "metadata": {"name": "m"},
            "spec": {"resource": {"group": "", "resource": "pods"}},
        }))
        .unwrap();
        let mut stored = cluster.create(&svms(), named).unwrap();
        stored
            .rest
            .insert("spec".into(), json!({"resource": {"group": "", "resource": "secrets"}}));
        let err = cluster.update(&svms(), stored).unwrap_err();
        assert!(err.to_string().contains("field is immutable"), "{err}");
    }

    /// Serves `gadgets` at v1 and v2 with `storage` the storage version.
    fn with_versions(mut crd: PartialObjectMeta, storage: &str) -> PartialObjectMeta {
        let version = |name: &str| json!({"name": name, "served": true, "storage": name == storage});
        crd.rest["spec"]["versions"] = json!([version("v1"), version("v2")]);
        crd
    }

    #[test]
    fn a_crd_storage_version_change_should_rotate_its_type_and_keep_the_old_version_stored() {
        let cluster = SimCluster::new();
        let crd = cluster.create(&crds(), gadget_crd()).unwrap();
        assert_eq!(crd.metadata.generation, Some(1));
        assert_eq!(crd.rest["status"]["storedVersions"], json!(["v1"]));
        cluster.create(&gadgets(), object(NS, "g")).unwrap();
        // v2 becomes the storage version: a new generation of the spec and of the storage.
        let crd = cluster.update(&crds(), with_versions(crd, "v2")).unwrap();
        assert_eq!(crd.metadata.generation, Some(2));
        assert_eq!(crd.rest["status"]["storedVersions"], json!(["v1", "v2"]));
        let report = cluster.storage_report(&gadgets()).unwrap();
        assert_eq!((report.generation, report.stale()), (2, 1), "{report:?}");
        // v1 may hold objects: it stays until the stored versions are trimmed.
        let mut dropped = crd.clone();
        dropped.rest["spec"]["versions"] = json!([{"name": "v2", "served": true, "storage": true}]);
        let err = cluster.update(&crds(), dropped.clone()).unwrap_err();
        assert_eq!(err.reason(), Some(StatusReason::Invalid), "{err}");
        assert!(err.to_string().contains("must appear in spec.versions"), "{err}");
        // The status subresource refuses a list without the storage version, takes one with it.
        let mut trimmed = crd.clone();
        trimmed.rest["status"]["storedVersions"] = json!(["v1"]);
        let err = cluster
            .writes(false)
            .to(Part::Status)
            .update(&crds(), trimmed.clone())
            .unwrap_err();
        assert!(err.to_string().contains("must have the storage version v2"), "{err}");
        trimmed.rest["status"]["storedVersions"] = json!(["v2"]);
        let written = cluster.writes(false).to(Part::Status).update(&crds(), trimmed).unwrap();
        assert_eq!(
            written.into_object().metadata.generation,
            Some(2),
            "a status write keeps the generation"
        );
        dropped.metadata.resource_version.clear();
        let crd = cluster.update(&crds(), dropped).unwrap();
        assert_eq!(crd.metadata.generation, Some(3));
        // A restored cluster keeps the type's storage generations.
        let mut saved = Vec::new();
        cluster.save_state(&mut saved).unwrap();
        let restored = SimCluster::load_state(saved.as_slice(), crate::DEFAULT_HISTORY).unwrap();
        let report = restored
            .storage_report(&Gvr::new("example.com", "v2", "gadgets"))
            .unwrap();
        assert_eq!((report.generation, report.stale()), (2, 1), "{report:?}");
    }
}
