//! The CRD side of a migration (upstream's migration runner): while a migration of a custom
//! resource runs, its CustomResourceDefinition says so with the `StorageMigrating` condition;
//! once the migration has ended the condition says how, and after a success the CRD's
//! `status.storedVersions` is trimmed to its storage version, so that the versions migrated off
//! can be removed from the CRD.
//!
//! # Invariants
//!
//! - A resource without a CRD (a built-in one, or a CRD deleted since) is left alone: its
//!   migration goes on without these steps.
//! - `storedVersions` is trimmed only when the condition written at admission still names the
//!   CRD's generation: a CRD whose spec changed while its objects were rewritten (a new storage
//!   version, say) may have objects the migration did not rewrite in the new version, and keeps
//!   its list.
//! - It is trimmed only after a success. Upstream trims after a failure too; kube-gc does not,
//!   because a failed migration leaves objects stored at the old versions, and a version removed
//!   from the CRD on the strength of the trimmed list would leave them unreadable.
//! - Writes go through the `status` subresource with the resourceVersion read as the
//!   precondition; a conflict reads the CRD again, up to [`ATTEMPTS`] times in all, as
//!   client-go's `RetryOnConflict` does with its default steps.

use super::svm::Svm;
use crate::api::{time::now_rfc3339, ApiError, ClusterApi, GroupResource, Gvr, PartialObjectMeta};
use serde_json::{json, Map, Value};

/// The condition a CRD has while its resource is migrated, and keeps after.
pub const STORAGE_MIGRATING: &str = "StorageMigrating";

/// Reads and writes of a CRD's status before a conflict is given up on.
const ATTEMPTS: usize = 5;

/// The CRD type.
fn crds() -> Gvr {
    Gvr::new("apiextensions.k8s.io", "v1", "customresourcedefinitions")
}

/// Marks the CRD of `svm`'s resource as being migrated by `svm`, before `svm` runs.
pub async fn mark_migrating<M: ClusterApi>(api: &M, svm: &Svm) -> Result<(), ApiError> {
    let message = format!("Migration {} is running", svm.name());
    edit_status(api, &svm.resource, |crd, _| {
        set_condition(crd, "True", "MigrationRunning", &message);
    })
    .await
}

/// Records on the CRD of `svm`'s resource how `svm`, which has ended, ended; after a success
/// that nothing changed the CRD's spec during, trims its stored versions to the storage version.
pub async fn finish<M: ClusterApi>(api: &M, svm: &Svm, succeeded: bool) -> Result<(), ApiError> {
    edit_status(api, &svm.resource, |crd, generation| {
        let unchanged = condition(crd).and_then(|c| c.get("observedGeneration")?.as_i64()) == Some(generation);
        let (reason, message) = match (succeeded, unchanged) {
            (true, true) => ("MigrationSucceeded", "The migration has succeeded and the stored versions have been updated"),
            (true, false) => (
                "MigrationSucceeded",
                "The migration has succeeded but the stored versions have not been updated due to a generation mismatch",
            ),
            (false, _) => ("MigrationFailed", "The migration has failed"),
        };
        set_condition(crd, "False", reason, message);
        if let (true, true, Some(storage)) = (succeeded, unchanged, storage_version(crd)) {
            status_mut(crd).insert("storedVersions".into(), json!([storage]));
        }
    })
    .await
}

/// Reads the CRD of `resource`, if there is one, changes its status by `edit` (given the CRD's
/// generation), and writes it back, reading again after a conflict.
async fn edit_status<M: ClusterApi>(
    api: &M,
    resource: &GroupResource,
    edit: impl Fn(&mut PartialObjectMeta, i64),
) -> Result<(), ApiError> {
    let name = format!("{}.{}", resource.resource, resource.group);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut crd = match api.get_whole(&crds(), &name).await {
            Ok(crd) => crd,
            Err(error) if error.is_not_found() => return Ok(()),
            Err(error) => return Err(error),
        };
        let generation = crd.metadata.generation.unwrap_or(0);
        edit(&mut crd, generation);
        match api.replace_status(&crds(), &crd).await {
            Err(error) if error.is_conflict() && attempt < ATTEMPTS => continue,
            other => return other.map(drop),
        }
    }
}

/// `status`, made an object if it was not one.
fn status_mut(crd: &mut PartialObjectMeta) -> &mut Map<String, Value> {
    let status = crd.rest.entry("status").or_insert_with(|| json!({}));
    if !status.is_object() {
        *status = json!({});
    }
    status.as_object_mut().expect("made an object")
}

/// The CRD's `StorageMigrating` condition, if it has one.
fn condition(crd: &PartialObjectMeta) -> Option<&Value> {
    crd.rest
        .get("status")?
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(STORAGE_MIGRATING))
}

/// Sets the `StorageMigrating` condition at the CRD's generation; its transition time moves only
/// when its status changes.
fn set_condition(crd: &mut PartialObjectMeta, status: &str, reason: &str, message: &str) {
    let generation = crd.metadata.generation.unwrap_or(0);
    let conditions = status_mut(crd).entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let conditions = conditions.as_array_mut().expect("made an array");
    let old = conditions
        .iter()
        .position(|c| c.get("type").and_then(Value::as_str) == Some(STORAGE_MIGRATING))
        .map(|i| conditions.remove(i));
    let since = match &old {
        Some(old) if old.get("status").and_then(Value::as_str) == Some(status) => old["lastTransitionTime"].clone(),
        _ => json!(now_rfc3339()),
    };
    conditions.push(json!({
        "type": STORAGE_MIGRATING,
        "status": status,
        "lastTransitionTime": since,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
    }));
}

/// The version the CRD's spec stores objects at.
fn storage_version(crd: &PartialObjectMeta) -> Option<String> {
    let versions = crd.rest.get("spec")?.get("versions")?.as_array()?;
    let storage = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))?;
    Some(storage.get("name")?.as_str()?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(generation: i64, condition_generation: Option<i64>) -> PartialObjectMeta {
        let conditions: Vec<Value> = condition_generation
            .map(|g| {
                json!({"type": STORAGE_MIGRATING, "status": "True", "reason": "MigrationRunning",
                       "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": g})
            })
            .into_iter()
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "widgets.example.com", "generation": generation},
            "spec": {"versions": [{"name": "v1", "storage": false}, {"name": "v2", "storage": true}]},
            "status": {"storedVersions": ["v1", "v2"], "conditions": conditions},
        }))
        .unwrap()
    }

    #[test]
    fn set_condition_should_replace_the_one_condition_and_keep_its_time_while_its_status_holds() {
        let mut c = crd(3, Some(2));
        set_condition(&mut c, "True", "MigrationRunning", "Migration m is running");
        let found = condition(&c).unwrap();
        assert_eq!(found["observedGeneration"], 3);
        assert_eq!(found["lastTransitionTime"], "2026-01-01T00:00:00Z");
        set_condition(&mut c, "False", "MigrationSucceeded", "done");
        assert_eq!(c.rest["status"]["conditions"].as_array().unwrap().len(), 1);
        assert_ne!(condition(&c).unwrap()["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(storage_version(&c).as_deref(), Some("v2"));
    }
}
