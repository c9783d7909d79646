//! The rules of the types whose spec the simulated cluster checks: a StorageVersionMigration
//! names the resource it migrates, never changes it, and keeps the resourceVersion its migrator
//! recorded.

use crate::types::{TypeDef, SVM_GROUP, SVM_RESOURCE};
use kube_gc::api::{FieldError, PartialObjectMeta};
use serde_json::Value;

/// Every failure of `new`, the new state of `old` (none on a create), of type `def`.
pub(super) fn failures(def: &TypeDef, old: Option<&PartialObjectMeta>, new: &PartialObjectMeta) -> Vec<FieldError> {
    if def.custom || def.group != SVM_GROUP || def.resource != SVM_RESOURCE {
        return Vec::new();
    }
    let mut errors = Vec::new();
    let resource = at(new, &["spec", "resource", "resource"]);
    if resource.and_then(Value::as_str).unwrap_or_default().is_empty() {
        errors.push(FieldError::required("spec.resource.resource", ""));
    }
    let Some(old) = old else {
        return errors;
    };
    if at(old, &["spec"]) != at(new, &["spec"]) {
        let shown = at(new, &["spec"]).map(Value::to_string).unwrap_or_default();
        errors.push(FieldError::invalid_shown("spec", shown, "field is immutable"));
    }
    let recorded = |o: &PartialObjectMeta| {
        at(o, &["status", "resourceVersion"])
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (was, is) = (recorded(old), recorded(new));
    if !was.is_empty() && was != is {
        errors.push(FieldError::invalid("status.resourceVersion", &is, "field is immutable"));
    }
    errors
}

/// The value at `path` in the object's top-level fields.
fn at<'a>(obj: &'a PartialObjectMeta, path: &[&str]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    rest.iter().try_fold(obj.rest.get(*first)?, |v, key| v.get(key))
}
