//! CustomResourceDefinitions: the set of custom types served always equals the set the stored
//! `apiextensions.k8s.io/v1` CRD objects describe.
//!
//! Creating a CRD validates it and answers it with the conditions a real server reports once the
//! names are accepted (`NamesAccepted`, `Established`), so clients that wait for them go on. After
//! every write to the CRD type, and once a restored cluster's CRDs are back, the store asks
//! [`CrdRegistry::reconcile`] what to change: a CRD whose type is not served (or served with
//! another definition) is registered, and a type whose CRD is gone is unregistered, which deletes
//! its objects with DELETED events and ends its watches. Types registered directly through
//! [`SimCluster::register`](super::SimCluster::register) are not CRD-backed and are never touched
//! here. This module only decides; the store ([`super::store`]) applies.
//!
//! A DELETE of a CRD does not come here at once: as on a real server, the CRD gets the
//! `customresourcecleanup.apiextensions.k8s.io` finalizer and its objects are deleted first
//! ([`super::lifecycle`]); the CRD goes, and its type is unregistered here, once they are gone.

use super::status::invalid;
use super::strategy::Part;
use super::types::{TypeDef, CRD_GROUP as GROUP, CRD_RESOURCE as RESOURCE};
use kube_gc::api::{ApiError, Gvr, PartialObjectMeta};
use serde::Deserialize;
use serde_json::{json, Value};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// True when `gvr` names the CRD type.
pub(super) fn is_crd_type(gvr: &Gvr) -> bool {
    gvr.group == GROUP && gvr.resource == RESOURCE
}

/// True when `def` is the CRD type.
pub(super) fn is_crd_def(def: &TypeDef) -> bool {
    def.group == GROUP && def.resource == RESOURCE
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    group: String,
    names: Names,
    scope: String,
    versions: Vec<Version>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Names {
    plural: String,
    kind: String,
    #[serde(default)]
    short_names: Vec<String>,
    #[serde(default)]
    categories: Vec<String>,
}

#[derive(Deserialize)]
struct Version {
    name: String,
    #[serde(default)]
    served: bool,
    #[serde(default)]
    storage: bool,
}

/// The type a CRD object describes, or why it describes none.
fn type_of(crd: &PartialObjectMeta) -> Result<TypeDef, String> {
    let spec = crd.rest.get("spec").cloned().unwrap_or(Value::Null);
    let spec: Spec = serde_json::from_value(spec).map_err(|e| format!("spec: Invalid value: {e}"))?;
    let expected = format!("{}.{}", spec.names.plural, spec.group);
    if crd.metadata.name != expected {
        return Err(format!(
            "metadata.name: Invalid value: {:?}: must be spec.names.plural+\".\"+spec.group",
            crd.metadata.name
        ));
    }
    let namespaced = match spec.scope.as_str() {
        "Namespaced" => true,
        "Cluster" => false,
        other => {
            return Err(format!(
                "spec.scope: Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
            ))
        }
    };
    let mut served: Vec<&str> = spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.as_str())
        .collect();
    let Some(preferred) = served.iter().copied().max_by(|a, b| version_priority(a, b)) else {
        return Err("spec.versions: Invalid value: must have at least one served version".to_string());
    };
    let preferred = preferred.to_string();
    served.sort_by(|a, b| version_priority(b, a));
    let short_names: Vec<&str> = spec.names.short_names.iter().map(String::as_str).collect();
    let categories: Vec<&str> = spec.names.categories.iter().map(String::as_str).collect();
    Ok(TypeDef::new(
        &spec.group,
        &preferred,
        &spec.names.kind,
        &spec.names.plural,
        namespaced,
    )
    .custom()
    .with_versions(&served, &preferred)
    .with_short_names(&short_names)
    .with_categories(&categories))
}

/// The `openAPIV3Schema` a CRD object gives its `version`, if any.
pub(super) fn schema<'c>(crd: &'c PartialObjectMeta, version: &str) -> Option<&'c Value> {
    let versions = crd.rest.get("spec")?.get("versions")?.as_array()?;
    let served = versions
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(version))?;
    served.get("schema")?.get("openAPIV3Schema")
}

/// Kubernetes' version priority: GA before beta before alpha, higher numbers first within each,
/// and versions that are not of the `v1beta2` form last, in reverse alphabetical order.
fn version_priority(a: &str, b: &str) -> Ordering {
    fn key(v: &str) -> Option<(u8, u64, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        let (stage, minor) = if tail.is_empty() {
            (2, 0)
        } else if let Some(n) = tail.strip_prefix("beta") {
            (1, n.parse().ok()?)
        } else {
            (0, tail.strip_prefix("alpha")?.parse().ok()?)
        };
        Some((stage, major, minor))
    }
    match (key(a), key(b)) {
        (Some(ka), Some(kb)) => ka.cmp(&kb),
        (Some(_), None) => Ordering::Greater,
        (None, Some(_)) => Ordering::Less,
        (None, None) => b.cmp(a),
    }
}

/// Create-time handling of a CRD: rejects one that describes no valid type (422) and fills in the
/// status a server reports once the CRD is established, its storage version the one stored
/// version, at generation 1.
pub(super) fn prepare_create(def: &TypeDef, crd: &mut PartialObjectMeta) -> Result<(), ApiError> {
    type_of(crd).map_err(|detail| invalid(def, &crd.metadata.name, detail))?;
    let storage = storage_version(crd).map_err(|detail| invalid(def, &crd.metadata.name, detail))?;
    let names = crd
        .rest
        .get("spec")
        .and_then(|s| s.get("names"))
        .cloned()
        .unwrap_or(Value::Null);
    let condition = |kind: &str, reason: &str| json!({"type": kind, "status": "True", "reason": reason});
    crd.rest.insert(
        "status".to_string(),
        json!({
            "acceptedNames": names,
            "conditions": [condition("NamesAccepted", "NoConflicts"), condition("Established", "InitialNamesAccepted")],
            "storedVersions": [storage],
        }),
    );
    crd.metadata.generation = Some(1);
    Ok(())
}

/// Update-time handling of a CRD written to `part` over `old` (after the strategy kept the part
/// the write may not change): a change of the spec moves the generation on, a new storage version
/// joins `status.storedVersions`, and the stored versions must still be versions of the spec and
/// include the storage version, which keeps a version objects may be stored at from being removed
/// until a migration has rewritten them and trimmed the list.
pub(super) fn prepare_update(
    def: &TypeDef,
    part: Part,
    old: &PartialObjectMeta,
    new: &mut PartialObjectMeta,
) -> Result<(), ApiError> {
    let refuse = |detail: String| invalid(def, &old.metadata.name, detail);
    let old_generation = old.metadata.generation.unwrap_or(1);
    let spec_changed = old.rest.get("spec") != new.rest.get("spec");
    new.metadata.generation = Some(old_generation + i64::from(spec_changed));
    if part == Part::Main {
        type_of(new).map_err(refuse)?;
    }
    let storage = storage_version(new).map_err(refuse)?;
    let versions: Vec<String> = spec_versions(new);
    let status = new
        .rest
        .entry("status")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| refuse("status: Invalid value: must be an object".to_string()))?;
    let mut stored: Vec<String> = status
        .get("storedVersions")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    if part == Part::Main && !stored.contains(&storage) {
        stored.push(storage.clone());
        status.insert("storedVersions".into(), json!(stored));
    }
    check_stored_versions(&stored, &versions, &storage).map_err(refuse)
}

/// The one version marked `storage: true`, or why there is not exactly one.
pub(super) fn storage_version(crd: &PartialObjectMeta) -> Result<String, String> {
    let versions = crd.rest.get("spec").and_then(|s| s.get("versions")).cloned();
    let versions: Vec<Version> = versions
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    let mut storage = versions.iter().filter(|v| v.storage);
    match (storage.next(), storage.next()) {
        (Some(one), None) => Ok(one.name.clone()),
        _ => Err("spec.versions: Invalid value: must have exactly one version marked as storage version".to_string()),
    }
}

/// The names of the spec's versions.
fn spec_versions(crd: &PartialObjectMeta) -> Vec<String> {
    let versions = crd.rest.get("spec").and_then(|s| s.get("versions")).cloned();
    let versions: Vec<Version> = versions
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    versions.into_iter().map(|v| v.name).collect()
}

/// The API server's rules for `status.storedVersions`.
fn check_stored_versions(stored: &[String], versions: &[String], storage: &str) -> Result<(), String> {
    if stored.is_empty() {
        return Err("status.storedVersions: Invalid value: must have at least one stored version".to_string());
    }
    if let Some((i, gone)) = stored.iter().enumerate().find(|(_, v)| !versions.contains(v)) {
        return Err(format!(
            "status.storedVersions[{i}]: Invalid value: {gone:?}: must appear in spec.versions"
        ));
    }
    if !stored.iter().any(|v| v == storage) {
        return Err(format!(
            "status.storedVersions: Invalid value: {stored:?}: must have the storage version {storage}"
        ));
    }
    Ok(())
}

/// The custom types served because a CRD asks for them: CRD name → what it serves.
#[derive(Debug, Default)]
pub(super) struct CrdRegistry {
    served: BTreeMap<String, Served>,
}

/// A served custom type and the version its objects are stored at.
#[derive(Debug)]
struct Served {
    group: String,
    resource: String,
    storage: String,
}

/// One change [`CrdRegistry::reconcile`] asks the store to make.
pub(super) enum CrdChange {
    /// Serve this type (again, when its definition changed).
    Register(TypeDef),
    /// Stop serving this type and drop its objects.
    Unregister { group: String, resource: String },
    /// The CRD's storage version changed: the type's objects written from now on are stored at a
    /// new generation ([`super::storage_version`]).
    RotateStorage { group: String, resource: String },
}

impl CrdRegistry {
    /// True when a CRD asks for the type `group`/`resource`.
    pub(super) fn serves(&self, group: &str, resource: &str) -> bool {
        self.served.values().any(|s| s.group == group && s.resource == resource)
    }

    /// The changes that make the served custom types match `crds`, the stored CRD objects;
    /// `served` tells how a type is served now (its definition, storage generations aside).
    /// Records the result as served.
    pub(super) fn reconcile<'a>(
        &mut self,
        crds: impl Iterator<Item = &'a PartialObjectMeta>,
        served: impl Fn(&str, &str) -> Option<TypeDef>,
    ) -> Vec<CrdChange> {
        let wanted: Vec<(String, TypeDef, String)> = crds
            .filter_map(|crd| {
                let storage = storage_version(crd).unwrap_or_default();
                Some((crd.metadata.name.clone(), type_of(crd).ok()?, storage))
            })
            .collect();
        let gone: Vec<String> = self
            .served
            .keys()
            .filter(|name| !wanted.iter().any(|(wanted, ..)| wanted == *name))
            .cloned()
            .collect();
        let mut changes: Vec<CrdChange> = gone
            .into_iter()
            .filter_map(|name| self.served.remove(&name))
            .map(|s| CrdChange::Unregister {
                group: s.group,
                resource: s.resource,
            })
            .collect();
        for (name, def, storage) in wanted {
            if served(&def.group, &def.resource).as_ref() != Some(&def) {
                changes.push(CrdChange::Register(def.clone()));
            }
            let (group, resource) = (def.group, def.resource);
            let before = self.served.insert(
                name,
                Served {
                    group: group.clone(),
                    resource: resource.clone(),
                    storage: storage.clone(),
                },
            );
            if before.is_some_and(|b| b.storage != storage && b.group == group && b.resource == resource) {
                changes.push(CrdChange::RotateStorage { group, resource });
            }
        }
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_priority_should_order_ga_then_beta_then_alpha_then_others() {
        let mut versions = vec!["v1alpha1", "foo", "v2", "v1beta2", "v1", "v1beta1", "bar", "v10alpha3"];
        versions.sort_by(|a, b| version_priority(b, a));
        assert_eq!(
            versions,
            ["v2", "v1", "v1beta2", "v1beta1", "v10alpha3", "v1alpha1", "bar", "foo"]
        );
    }

    #[test]
    fn type_of_should_reject_a_name_that_is_not_plural_dot_group() {
        let crd: PartialObjectMeta = serde_json::from_value(json!({
            "metadata": {"name": "widgets.other.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true, "storage": true}]},
        }))
        .unwrap();
        assert!(type_of(&crd).unwrap_err().contains("metadata.name"));
    }
}
