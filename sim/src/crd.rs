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
use super::types::{TypeDef, CRD_GROUP as GROUP, CRD_RESOURCE as RESOURCE};
use kube_gc::api::{Gvr, PartialObjectMeta};
use serde::Deserialize;
use serde_json::{json, Value};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// True when `gvr` names the CRD type.
pub(super) fn is_crd_type(gvr: &Gvr) -> bool {
    gvr.group == GROUP && gvr.resource == RESOURCE
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
/// status a server reports once the CRD is established.
pub(super) fn prepare_create(def: &TypeDef, crd: &mut PartialObjectMeta) -> Result<(), kube_gc::api::ApiError> {
    type_of(crd).map_err(|detail| invalid(def, &crd.metadata.name, detail))?;
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
        }),
    );
    Ok(())
}

/// The custom types served because a CRD asks for them: CRD name → (group, resource).
#[derive(Debug, Default)]
pub(super) struct CrdRegistry {
    served: BTreeMap<String, (String, String)>,
}

/// One change [`CrdRegistry::reconcile`] asks the store to make.
pub(super) enum CrdChange {
    /// Serve this type (again, when its definition changed).
    Register(TypeDef),
    /// Stop serving this type and drop its objects.
    Unregister { group: String, resource: String },
}

impl CrdRegistry {
    /// True when a CRD asks for the type `group`/`resource`.
    pub(super) fn serves(&self, group: &str, resource: &str) -> bool {
        self.served.values().any(|(g, r)| g == group && r == resource)
    }

    /// The changes that make the served custom types match `crds`, the stored CRD objects;
    /// `served` tells how a type is served now. Records the result as served.
    pub(super) fn reconcile<'a>(
        &mut self,
        crds: impl Iterator<Item = &'a PartialObjectMeta>,
        served: impl Fn(&str, &str) -> Option<TypeDef>,
    ) -> Vec<CrdChange> {
        let wanted: Vec<(String, TypeDef)> = crds
            .filter_map(|crd| Some((crd.metadata.name.clone(), type_of(crd).ok()?)))
            .collect();
        let gone: Vec<String> = self
            .served
            .keys()
            .filter(|name| !wanted.iter().any(|(wanted, _)| wanted == *name))
            .cloned()
            .collect();
        let mut changes: Vec<CrdChange> = gone
            .into_iter()
            .filter_map(|name| self.served.remove(&name))
            .map(|(group, resource)| CrdChange::Unregister { group, resource })
            .collect();
        for (name, def) in wanted {
            if served(&def.group, &def.resource).as_ref() != Some(&def) {
                self.served.insert(name, (def.group.clone(), def.resource.clone()));
                changes.push(CrdChange::Register(def));
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
