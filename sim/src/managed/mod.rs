//! `metadata.managedFields`: which field manager set which fields of an object.
//!
//! # Where they live
//!
//! [`kube_gc::api::ObjectMeta`] is what the garbage collector decodes from every event of a large
//! cluster, and it has no managed fields on purpose. The simulator keeps them beside the objects,
//! in a [`FieldsTable`] keyed by UID, and adds them to an object's JSON only when it is presented
//! over HTTP. Invariants:
//!
//! - Only the store's writer changes the table, as it changes the object, under the state lock;
//!   readers (the HTTP presentation) take the table's own read lock, never the state lock.
//! - An object has an entry only once a field manager wrote it through HTTP: the objects that
//!   tests, presets and the simulator itself write cost nothing here. An entry holds at least one
//!   manager with at least one field; a removed object's entry goes with it.
//! - Every owned path is set in the object: a write drops the paths it removed from every manager,
//!   whoever made it.
//!
//! # What a write records
//!
//! An *update* (create, update, any patch but apply) attributed to a manager takes every field it
//! added or changed from the other managers and gives it to the manager's `Update` entry (one per
//! manager and apiVersion). An *apply* ([`Managers::record_apply`]) makes the manager's `Apply`
//! entry exactly the fields of its configuration; changing a field another manager owns is a
//! conflict unless forced, and setting it to the value it has shares it. Writes no manager is named
//! for (the simulator's own, and the collector's through the in-memory face) only drop the
//! removed paths. An entry's `time` moves when its fields change.

pub(crate) mod fieldset;

use fieldset::{display_path, Comparison, FieldSet};
use kube_gc::api::time::now_rfc3339;
use kube_gc::api::{ApiError, StatusCause, StatusReason};
use parking_lot::RwLock;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// The `managedFields` list of one object, as JSON: shared by the table, the answers and saves.
pub type ManagedFieldsList = Arc<Value>;

/// Every object's managed fields, by UID; see the [module docs](self).
#[derive(Default)]
pub struct FieldsTable {
    by_uid: RwLock<HashMap<String, ManagedFieldsList>>,
}

impl FieldsTable {
    /// The managed fields of the object with `uid`, if a manager wrote it.
    pub fn get(&self, uid: &str) -> Option<ManagedFieldsList> {
        let by_uid = self.by_uid.read();
        if by_uid.is_empty() {
            return None;
        }
        by_uid.get(uid).cloned()
    }

    /// True when no object has managed fields.
    pub fn is_empty(&self) -> bool {
        self.by_uid.read().is_empty()
    }

    /// Records the managed fields of the object with `uid`; `None` forgets them.
    pub(crate) fn set(&self, uid: &str, fields: Option<ManagedFieldsList>) {
        let mut by_uid = self.by_uid.write();
        match fields {
            Some(fields) => {
                by_uid.insert(uid.to_string(), fields);
            }
            None => {
                by_uid.remove(uid);
            }
        }
    }
}

/// Who a user's write is recorded as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Author {
    /// The field manager: the request's `fieldManager`, or what its User-Agent names.
    pub(crate) manager: String,
    /// The `apiVersion` the write went through.
    pub(crate) api_version: String,
}

/// An entry's `operation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `managedFields` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    manager: String,
    operation: Operation,
    api_version: String,
    time: String,
    fields: FieldSet,
}

impl Entry {
    /// Upstream's identity of an entry: an applier has one entry whatever version it applies
    /// through, an updater one per version.
    fn is(&self, manager: &str, operation: Operation, api_version: &str) -> bool {
        self.manager == manager
            && self.operation == operation
            && (operation == Operation::Apply || self.api_version == api_version)
    }

    /// How a conflict names this entry's manager.
    fn described(&self) -> String {
        match self.operation {
            Operation::Apply => format!("{:?}", self.manager),
            Operation::Update => format!("{:?} using {}", self.manager, self.api_version),
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "manager": self.manager,
            "operation": self.operation.as_str(),
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": self.fields.to_fields_v1(),
        })
    }

    fn from_json(entry: &Value) -> Option<Entry> {
        let text = |key: &str| entry.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
        let operation = match entry.get("operation").and_then(Value::as_str)? {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return None,
        };
        Some(Entry {
            manager: text("manager"),
            operation,
            api_version: text("apiVersion"),
            time: text("time"),
            fields: FieldSet::from_fields_v1(entry.get("fieldsV1")?),
        })
    }
}

/// The managers of one object, decoded for a write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Managers(Vec<Entry>);

/// One field another manager owns that an apply would change.
struct Conflict {
    owner: String,
    path: Vec<String>,
}

impl Managers {
    /// Decodes a stored list; entries that are not of the shape this module writes are dropped.
    pub(crate) fn decode(list: Option<&Value>) -> Managers {
        let entries = list.and_then(Value::as_array).into_iter().flatten();
        Managers(entries.filter_map(Entry::from_json).collect())
    }

    /// The list to store: `None` when no manager owns anything. Sorted as upstream sorts it:
    /// appliers first, then by time, manager and apiVersion.
    pub(crate) fn encode(mut self) -> Option<ManagedFieldsList> {
        self.0.retain(|entry| !entry.fields.is_empty());
        self.0.sort_by(|a, b| {
            (a.operation, &a.time, &a.manager, &a.api_version).cmp(&(b.operation, &b.time, &b.manager, &b.api_version))
        });
        (!self.0.is_empty()).then(|| Arc::new(Value::Array(self.0.iter().map(Entry::to_json).collect())))
    }

    /// The fields `manager` applied last time; empty if it never applied.
    pub(crate) fn applied_by(&self, manager: &str) -> FieldSet {
        self.0
            .iter()
            .find(|e| e.is(manager, Operation::Apply, ""))
            .map(|e| e.fields.clone())
            .unwrap_or_default()
    }

    /// Every field some manager other than the applier `manager` owns.
    pub(crate) fn owned_by_others(&self, manager: &str) -> FieldSet {
        let mut owned = FieldSet::default();
        for entry in self.0.iter().filter(|e| !e.is(manager, Operation::Apply, "")) {
            owned.union(&entry.fields);
        }
        owned
    }

    /// Records an update by `author` (or by no one) that made the change `change`; see the
    /// [module docs](self).
    pub(crate) fn record_update(&mut self, author: Option<&Author>, change: &Comparison) {
        let Some(author) = author else {
            self.drop_removed(change);
            return;
        };
        let changed = change.changed();
        let (manager, version) = (author.manager.as_str(), author.api_version.as_str());
        for entry in self.0.iter_mut().filter(|e| !e.is(manager, Operation::Update, version)) {
            entry.fields = entry.fields.difference(&changed);
        }
        self.drop_removed(change);
        if !changed.is_empty() {
            let entry = self.entry(author, Operation::Update);
            entry.fields.union(&changed);
            entry.fields = entry.fields.difference(&change.removed);
            entry.time = now_rfc3339();
        }
    }

    /// Records an apply by `author` of a configuration setting `applied`, which made the change
    /// `change`: a 409 Conflict when the change sets a field another manager owns, unless `force`,
    /// which takes those fields from their owners.
    pub(crate) fn record_apply(
        &mut self,
        author: &Author,
        applied: FieldSet,
        change: &Comparison,
        force: bool,
    ) -> Result<(), ApiError> {
        let changed = change.changed();
        let manager = author.manager.as_str();
        let others = self.0.iter_mut().filter(|e| !e.is(manager, Operation::Apply, ""));
        let mut conflicts = Vec::new();
        for entry in others {
            let taken = entry.fields.intersection(&changed);
            conflicts.extend(taken.paths().into_iter().map(|path| Conflict {
                owner: entry.described(),
                path,
            }));
            entry.fields = entry.fields.difference(&taken);
        }
        if !force && !conflicts.is_empty() {
            return Err(conflict_error(conflicts));
        }
        let entry = self.entry(author, Operation::Apply);
        // Re-applying what changes nothing keeps the entry's time, so that it writes nothing.
        if !change.is_same() || entry.fields != applied {
            entry.time = now_rfc3339();
        }
        entry.fields = applied;
        entry.api_version.clone_from(&author.api_version);
        self.drop_removed(change);
        Ok(())
    }

    fn drop_removed(&mut self, change: &Comparison) {
        if change.removed.is_empty() {
            return;
        }
        for entry in &mut self.0 {
            entry.fields = entry.fields.difference(&change.removed);
        }
    }

    /// `author`'s entry for `operation`, added empty if it has none.
    fn entry(&mut self, author: &Author, operation: Operation) -> &mut Entry {
        let found = self
            .0
            .iter()
            .position(|e| e.is(&author.manager, operation, &author.api_version));
        let index = found.unwrap_or_else(|| {
            self.0.push(Entry {
                manager: author.manager.clone(),
                operation,
                api_version: author.api_version.clone(),
                time: String::new(),
                fields: FieldSet::default(),
            });
            self.0.len() - 1
        });
        &mut self.0[index]
    }
}

/// The 409 of an apply that would change fields other managers own, worded as upstream words it,
/// with one `FieldManagerConflict` cause per field.
fn conflict_error(mut conflicts: Vec<Conflict>) -> ApiError {
    conflicts.sort_by(|a, b| (&a.owner, &a.path).cmp(&(&b.owner, &b.path)));
    let message = match conflicts.as_slice() {
        [one] => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            one.owner,
            display_path(&one.path)
        ),
        _ => {
            let mut lines = Vec::new();
            for (i, conflict) in conflicts.iter().enumerate() {
                if i == 0 || conflicts[i - 1].owner != conflict.owner {
                    lines.push(format!("conflicts with {}:", conflict.owner));
                }
                lines.push(format!("- {}", display_path(&conflict.path)));
            }
            format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
        }
    };
    let causes = conflicts
        .iter()
        .map(|c| StatusCause {
            reason: "FieldManagerConflict".to_string(),
            message: format!("conflict with {}", c.owner),
            field: display_path(&c.path),
        })
        .collect();
    ApiError::status(StatusReason::Conflict, message).with_causes(causes)
}

#[cfg(test)]
mod tests;
