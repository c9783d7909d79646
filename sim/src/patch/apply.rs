//! Server-side apply: a field manager's configuration is merged into the live object, the fields
//! it applied before and applies no more are removed unless another manager owns them, and the
//! manager's `Apply` entry becomes exactly the fields of the configuration ([`crate::managed`]).
//!
//! Merge rules (structured-merge-diff's, for the shapes [`super::lists`] knows): maps merge key by
//! key, so labels, annotations and `data` are granular; keyed lists merge item by item, a live item
//! the configuration does not name staying where it is and a new item going last; sets take the
//! configuration's new items last; every other list, and every scalar, is the configuration's. A
//! `null` in the configuration removes the field.
//!
//! An apply to an object that does not exist creates it through the store's create, with all its
//! checks, unless the configuration names a UID (409 Conflict, the storage's UID precondition); the configuration's name must be the URL's (400 otherwise, as for any patch), so
//! `generateName` never names an applied object. The configuration must be an object of the URL's
//! `apiVersion` and of the type's `kind`, without `metadata.managedFields` (400); a keyed list item
//! without its keys, or two items with the same keys, is 422.

use super::super::managed::fieldset::{item_steps, key_step, remove_paths, FieldSet};
use super::super::managed::Managers;
use super::super::status::{bad_request, conflict, invalid};
use super::super::store::{present, Recording, State};
use super::super::types::TypeDef;
use super::decode_patched;
use super::lists::{ListKind, Shape};
use kube_gc::api::{ApiError, Gvr, PartialObjectMeta};
use serde_json::{Map, Value};

impl State {
    /// Applies `config` for the operation's author; see
    /// [`Writes::apply`](crate::Writes::apply). Answers with the object and whether the
    /// apply created it.
    pub(crate) fn apply(
        &mut self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        config: &Value,
        force: bool,
    ) -> Result<(PartialObjectMeta, bool), ApiError> {
        let manager = self.author.as_ref().map(|a| a.manager.clone()).unwrap_or_default();
        let mut w = self.writer(gvr)?;
        let def = w.ty.def.clone();
        check_config(&def, gvr, config)?;
        let applied = FieldSet::of_object(config, w.shape());
        let Ok(old) = w.existing(namespace, name) else {
            // A configuration that names a UID speaks of one object only: the storage's UID
            // precondition fails against the missing object, as it does for a deleted one.
            let uid = config
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !uid.is_empty() {
                let detail = format!("Precondition failed: UID in precondition: {uid}, UID in object meta: ");
                return Err(conflict(&def, name, &detail));
            }
            let mut blank = PartialObjectMeta::default();
            blank.metadata.name = name.to_string();
            blank.metadata.namespace = namespace.to_string();
            let mut created = Value::Object(Map::new());
            merge(&mut created, config, w.shape()).map_err(|e| invalid(&def, name, e))?;
            let obj = decode_patched(&def, &blank, created)?;
            let created = self.create_recorded(gvr, obj, &Recording::Apply { applied, force })?;
            return Ok((created, true));
        };
        let current = present(&old, gvr, &def);
        let mut merged = serde_json::to_value(&current).unwrap_or_default();
        merge(&mut merged, config, w.shape()).map_err(|e| invalid(&def, name, e))?;
        prune(&mut merged, &w.managers(&old.metadata.uid), &manager, &applied);
        let new = decode_patched(&def, &current, merged)?;
        let out = w.replace_recorded(&old, new, &Recording::Apply { applied, force })?;
        let out = present(&out, gvr, &def);
        self.after_write(gvr);
        Ok((out, false))
    }
}

/// The checks of a configuration before anything is merged: an object of the URL's version and
/// the type's kind, without managed fields.
fn check_config(def: &TypeDef, gvr: &Gvr, config: &Value) -> Result<(), ApiError> {
    let Value::Object(fields) = config else {
        return Err(bad_request(
            "error decoding YAML: an apply configuration must be an object",
        ));
    };
    let text = |key: &str| fields.get(key).and_then(Value::as_str).unwrap_or_default();
    let expected = gvr.api_version();
    if text("apiVersion") != expected {
        return Err(bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {}, expected: {expected}",
            text("apiVersion")
        )));
    }
    if text("kind") != def.kind {
        return Err(bad_request(format!(
            "Incorrect kind specified in apply patch. Specified patch kind: {:?}, expected: {:?}",
            text("kind"),
            def.kind
        )));
    }
    let managed = config.get("metadata").and_then(|m| m.get("managedFields"));
    if managed.is_some_and(|m| !m.is_null()) {
        return Err(bad_request("metadata.managedFields must be nil"));
    }
    Ok(())
}

/// Merges the configuration `config` into `live`, both of the shape `shape`; see the
/// [module docs](self). Fails on a keyed list the configuration's items cannot be keyed in.
fn merge(live: &mut Value, config: &Value, shape: Shape<'_>) -> Result<(), String> {
    let Value::Object(config) = config else {
        *live = config.clone();
        return Ok(());
    };
    if !live.is_object() {
        *live = Value::Object(Map::new());
    }
    let Value::Object(live) = live else {
        return Ok(());
    };
    for (key, value) in config {
        match value {
            Value::Null => {
                live.remove(key);
            }
            Value::Array(items) => {
                let merged = merge_list(live.get(key), items, shape, key).map_err(|e| format!(".{key}{e}"))?;
                live.insert(key.clone(), Value::Array(merged));
            }
            Value::Object(_) => {
                let slot = live.entry(key.clone()).or_insert(Value::Null);
                merge(slot, value, shape.field(key)).map_err(|e| format!(".{key}{e}"))?;
            }
            scalar => {
                live.insert(key.clone(), scalar.clone());
            }
        }
    }
    Ok(())
}

/// The list `key` of a map at `shape` once the configuration's `items` are merged into the live
/// list `live`.
fn merge_list(live: Option<&Value>, items: &[Value], shape: Shape<'_>, key: &str) -> Result<Vec<Value>, String> {
    let kind = shape.list(key);
    let mut merged = match (&kind, live) {
        (ListKind::Atomic, _) => return Ok(items.to_vec()),
        (_, Some(Value::Array(live))) => live.clone(),
        _ => Vec::new(),
    };
    match kind {
        ListKind::Map(keys) => {
            let steps = item_steps(items, &keys).map_err(|e| format!(": {e}"))?;
            for (step, item) in steps.iter().zip(items) {
                match merged.iter().position(|m| key_step(m, &keys).as_ref() == Ok(step)) {
                    Some(at) => merge(&mut merged[at], item, shape.item(key))?,
                    None => merged.push(item.clone()),
                }
            }
        }
        ListKind::Set | ListKind::Atomic => {
            for item in items {
                if !merged.contains(item) {
                    merged.push(item.clone());
                }
            }
        }
    }
    Ok(merged)
}

/// Removes from `merged` what `manager` applied last time and applies no more (`applied` being
/// what it applies now), unless another manager owns that field or something below it.
fn prune(merged: &mut Value, managers: &Managers, manager: &str, applied: &FieldSet) {
    let dropped = managers.applied_by(manager).difference(applied);
    if dropped.is_empty() {
        return;
    }
    let mut kept = managers.owned_by_others(manager);
    kept.union(applied);
    let mut doomed = FieldSet::default();
    for path in dropped.paths() {
        if kept.at(&path).is_none() {
            doomed.insert(&path);
        }
    }
    remove_paths(merged, &doomed);
}

#[cfg(test)]
mod tests;
