//! The StorageVersionMigration object as the migrator reads and writes it: the resource it names
//! (`spec.resource`, a group and a resource, version-free) and its status (`conditions`, and the
//! `resourceVersion` the migration is checked against).
//!
//! Only the status is ever written, whole, through the `status` subresource with the object's
//! resourceVersion as the precondition, so a migrator that read an old copy gets 409 Conflict and
//! reads again; the rest of the object travels back as it came.

use crate::api::{time::now_rfc3339, GroupResource, PartialObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The condition a migration has while it is the one migrating its resource.
pub const RUNNING: &str = "Running";
/// The condition of a migration that rewrote every object.
pub const SUCCEEDED: &str = "Succeeded";
/// The condition of a migration that stopped for good.
pub const FAILED: &str = "Failed";

/// One `metav1.Condition`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Running`, `Succeeded` or `Failed`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `True` or `False`.
    pub status: String,
    /// When `status` last changed (RFC 3339).
    #[serde(default)]
    pub last_transition_time: String,
    /// A CamelCase word for the machine.
    #[serde(default)]
    pub reason: String,
    /// A sentence for a person.
    #[serde(default)]
    pub message: String,
}

/// `status` of a StorageVersionMigration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The conditions, one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The resource's resourceVersion when the migration began: every object stored at or before
    /// it is rewritten, and the collector's view must have reached it first.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
}

/// A StorageVersionMigration, as listed.
#[derive(Clone, Debug)]
pub struct Svm {
    /// The object as read; its status is replaced by [`Svm::status`] when written back.
    pub object: PartialObjectMeta,
    /// What it migrates.
    pub resource: GroupResource,
    /// Its status, as read and as changed since.
    pub status: Status,
}

impl Svm {
    /// Reads one listed object; one without `spec.resource` names the empty resource, which is
    /// served nowhere (the API server refuses such an object, a client of another server may not).
    pub fn read(object: PartialObjectMeta) -> Svm {
        let text = |path: &str| {
            object
                .rest
                .get("spec")
                .and_then(|s| s.pointer(path))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let resource = GroupResource::new(&text("/resource/group"), &text("/resource/resource"));
        let status = object
            .rest
            .get("status")
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .unwrap_or_default();
        Svm {
            object,
            resource,
            status,
        }
    }

    /// The object with [`Svm::status`] in it, to write back.
    pub fn written(&self) -> PartialObjectMeta {
        let mut object = self.object.clone();
        let status = serde_json::to_value(&self.status).unwrap_or_default();
        object.rest.insert("status".into(), status);
        object
    }

    /// The object's name.
    pub fn name(&self) -> &str {
        &self.object.metadata.name
    }

    /// True when the condition `kind` is `True`.
    pub fn is(&self, kind: &str) -> bool {
        self.status
            .conditions
            .iter()
            .any(|c| c.kind == kind && c.status == "True")
    }

    /// True when it has the condition `kind`, whatever its status.
    pub fn has(&self, kind: &str) -> bool {
        self.status.conditions.iter().any(|c| c.kind == kind)
    }

    /// Removes the condition `kind`.
    pub fn remove(&mut self, kind: &str) {
        self.status.conditions.retain(|c| c.kind != kind);
    }

    /// Succeeded or failed: nothing more is done for it.
    pub fn is_terminal(&self) -> bool {
        self.is(SUCCEEDED) || self.is(FAILED)
    }

    /// Sets the condition `kind` to `True` with `reason` and `message`, unless it already is; a
    /// terminal condition turns `Running` to `False` in the same write (the migration runner
    /// removes it once the CRD knows, [`super::crd`]).
    pub fn set(&mut self, kind: &str, reason: &str, message: &str) {
        if self.is(kind) {
            return;
        }
        if kind == SUCCEEDED || kind == FAILED {
            if let Some(running) = self.status.conditions.iter_mut().find(|c| c.kind == RUNNING) {
                running.status = "False".into();
            }
        }
        self.remove(kind);
        self.status.conditions.push(Condition {
            kind: kind.into(),
            status: "True".into(),
            last_transition_time: now_rfc3339(),
            reason: reason.into(),
            message: message.into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svm(status: Value) -> Svm {
        let object = serde_json::from_value(json!({
            "apiVersion": "storagemigration.k8s.io/v1beta1",
            "kind": "StorageVersionMigration",
            "metadata": {"name": "m", "resourceVersion": "5"},
            "spec": {"resource": {"group": "apps", "resource": "deployments"}},
            "status": status,
        }))
        .unwrap();
        Svm::read(object)
    }

    #[test]
    fn read_should_take_the_resource_and_status_and_written_should_put_the_status_back() {
        let mut m = svm(json!({"resourceVersion": "42"}));
        assert_eq!(m.resource, GroupResource::new("apps", "deployments"));
        assert_eq!(m.status.resource_version, "42");
        m.set(RUNNING, "MigrationRunning", "The migration is running");
        let written = m.written();
        assert_eq!(written.rest["status"]["conditions"][0]["type"], "Running");
        assert_eq!(written.rest["status"]["resourceVersion"], "42");
        assert_eq!(written.metadata.resource_version, "5", "the precondition travels back");
    }

    #[test]
    fn a_terminal_condition_should_end_running_and_keep_one_condition_per_type() {
        let mut m = svm(json!({}));
        m.set(RUNNING, "MigrationRunning", "");
        assert!(m.is(RUNNING) && !m.is_terminal());
        m.set(SUCCEEDED, "StorageVersionMigrationSucceeded", "");
        assert!(m.is(SUCCEEDED) && !m.is(RUNNING) && m.has(RUNNING) && m.is_terminal());
        m.set(RUNNING, "MigrationRunning", "");
        m.set(SUCCEEDED, "Other", "");
        let running: Vec<_> = m.status.conditions.iter().filter(|c| c.kind == RUNNING).collect();
        assert_eq!(running.len(), 1, "one condition per type: {:?}", m.status.conditions);
        let succeeded = m.status.conditions.iter().find(|c| c.kind == SUCCEEDED).unwrap();
        assert_eq!(
            succeeded.reason, "StorageVersionMigrationSucceeded",
            "a true condition is left alone"
        );
        m.remove(RUNNING);
        assert!(!m.has(RUNNING) && m.is(SUCCEEDED));
    }
}
