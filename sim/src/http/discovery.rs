//! Discovery documents, built from the served type definitions at each request, so a CRD appears
//! in them as soon as it is created and disappears once it is deleted.
//!
//! A group-version whose discovery is made to fail ([`SimCluster::fail_discovery`]) answers its
//! own document with 503, as an unavailable aggregated API does, and stays listed in `/apis`.
//!
//! [`SimCluster::fail_discovery`]: crate::SimCluster::fail_discovery

use super::request::HttpVerb;
use super::review;
use super::subresource;
use crate::{SimCluster, TypeDef};
use kube_gc::api::{join_api_version, ApiError, StatusReason};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The Kubernetes version the server reports.
pub(super) const KUBE_MINOR: &str = "33";

/// `/version`.
pub(super) fn version() -> Value {
    json!({
        "major": "1",
        "minor": KUBE_MINOR,
        "gitVersion": format!("v1.{KUBE_MINOR}.0-kube-gc-sim"),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
    })
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// `/api`.
pub(super) fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [],
    })
}

/// Versions of each named group, in discovery order, with the preferred one.
fn groups(defs: &[TypeDef]) -> BTreeMap<&str, (Vec<&str>, &str)> {
    let mut groups: BTreeMap<&str, (Vec<&str>, &str)> = BTreeMap::new();
    for def in defs.iter().filter(|d| !d.group.is_empty()) {
        let (versions, preferred) = groups.entry(&def.group).or_insert((Vec::new(), &def.preferred));
        for v in &def.versions {
            if !versions.contains(&v.as_str()) {
                versions.push(v);
            }
        }
        *preferred = &def.preferred;
    }
    for group in [review::AUTHENTICATION, review::AUTHORIZATION] {
        groups.insert(group, (vec![review::VERSION], review::VERSION));
    }
    groups
}

fn group_json(name: &str, versions: &[&str], preferred: &str) -> Value {
    let entry = |v: &str| json!({"groupVersion": join_api_version(name, v), "version": v});
    json!({
        "name": name,
        "versions": versions.iter().map(|v| entry(v)).collect::<Vec<_>>(),
        "preferredVersion": entry(preferred),
    })
}

/// `/apis`.
pub(super) fn group_list(cluster: &SimCluster) -> Value {
    let (defs, _) = cluster.served_types();
    let groups: Vec<Value> = groups(&defs)
        .into_iter()
        .map(|(name, (versions, preferred))| group_json(name, &versions, preferred))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`.
pub(super) fn group(cluster: &SimCluster, name: &str) -> Option<Value> {
    let (defs, _) = cluster.served_types();
    let groups = groups(&defs);
    let (versions, preferred) = groups.get(name)?;
    let mut doc = group_json(name, versions, preferred);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// `/api/v1` or `/apis/{group}/{version}`: `None` when nothing is served there.
pub(super) fn resource_list(cluster: &SimCluster, group: &str, version: &str) -> Result<Option<Value>, ApiError> {
    let (defs, failing) = cluster.served_types();
    let group_version = join_api_version(group, version);
    let mut resources: Vec<Value> = defs
        .iter()
        .filter(|d| d.group == group && d.serves(version))
        .flat_map(|d| {
            let entry = json!({
                "name": d.resource,
                "singularName": d.singular(),
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": HttpVerb::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
                "shortNames": d.short_names,
                "categories": d.categories,
            });
            std::iter::once(entry).chain(subresource::discovery_entries(d))
        })
        .collect();
    if version == review::VERSION {
        let reviews = review::REVIEWS.iter().filter(|(g, _, _)| *g == group);
        resources.extend(reviews.map(|(_, resource, kind)| {
            json!({"name": resource, "singularName": kind.to_ascii_lowercase(), "namespaced": false,
                   "kind": kind, "verbs": ["create"]})
        }));
    }
    if resources.is_empty() {
        return Ok(None);
    }
    if failing.contains(&group_version) {
        return Err(ApiError::status(
            StatusReason::ServiceUnavailable,
            format!("the server is currently unable to handle the request ({group_version})"),
        ));
    }
    Ok(Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    })))
}
