//! Which resources a recording watches: the ones the garbage collector would monitor.
//!
//! Invariant: the choice is the collector's own rule, [`deletable_resources`] (the preferred
//! version of each resource that supports list, watch and delete, minus the ignored ones), applied
//! to kube-rs's discovery; the only knob is whether Events, which the collector ignores, are kept.

use anyhow::Context;
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Discovery as KubeDiscovery, Scope};
use kube::Client;
use kube_gc::api::{self, Discovery, Gvr};
use kube_gc::controller::{self, deletable_resources};

/// Discovers the cluster's resources and returns the ones to record; an error when discovery
/// fails or leaves nothing to record.
pub async fn discover(client: &Client, include_events: bool) -> anyhow::Result<Vec<ApiResource>> {
    let discovery = KubeDiscovery::new(client.clone())
        .run()
        .await
        .map_err(|e| super::kube_error(&e))
        .context("discovering the cluster's resources")?;
    let resources = recordable(&describe(&discovery), include_events);
    if resources.is_empty() {
        anyhow::bail!("the cluster serves no resource that can be listed, watched and deleted");
    }
    Ok(resources)
}

/// The resources to record, in GVR order. Events (core and `events.k8s.io`) are left out, as the
/// collector leaves them out, unless `include_events`.
pub fn recordable(discovery: &Discovery, include_events: bool) -> Vec<ApiResource> {
    let ignored = if include_events {
        Vec::new()
    } else {
        controller::Config::default().ignored_resources
    };
    deletable_resources(discovery, &ignored)
        .into_iter()
        .map(|(gvr, gvk)| {
            let gvk = GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind);
            ApiResource::from_gvk_with_plural(&gvk, &gvr.resource)
        })
        .collect()
}

/// kube-rs's discovery as the collector's [`Discovery`]: every version of every resource, the
/// group's preferred one marked.
fn describe(discovery: &KubeDiscovery) -> Discovery {
    let mut resources = Vec::new();
    for group in discovery.groups() {
        let preferred = group.preferred_version_or_latest();
        for version in group.versions() {
            for (resource, capabilities) in group.versioned_resources(version) {
                resources.push(api::ApiResource {
                    gvr: Gvr::new(&resource.group, &resource.version, &resource.plural),
                    kind: resource.kind,
                    namespaced: capabilities.scope == Scope::Namespaced,
                    verbs: capabilities.operations,
                    preferred: version == preferred,
                });
            }
        }
    }
    Discovery {
        resources,
        ..Discovery::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_VERBS: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];

    fn served(
        group: &str,
        version: &str,
        resource: &str,
        kind: &str,
        verbs: &[&str],
        preferred: bool,
    ) -> api::ApiResource {
        api::ApiResource {
            gvr: Gvr::new(group, version, resource),
            kind: kind.into(),
            namespaced: true,
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            preferred,
        }
    }

    fn discovery(resources: Vec<api::ApiResource>) -> Discovery {
        Discovery {
            resources,
            ..Discovery::default()
        }
    }

    fn names(resources: &[ApiResource]) -> Vec<String> {
        resources
            .iter()
            .map(|r| format!("{} {}", r.api_version, r.plural))
            .collect()
    }

    #[test]
    fn only_resources_that_can_be_listed_watched_and_deleted_should_be_recorded() {
        let d = discovery(vec![
            served("", "v1", "pods", "Pod", ALL_VERBS, true),
            served("", "v1", "bindings", "Binding", &["create"], true),
            served("", "v1", "componentstatuses", "ComponentStatus", &["get", "list"], true),
            served(
                "authorization.k8s.io",
                "v1",
                "subjectaccessreviews",
                "SubjectAccessReview",
                &["create"],
                true,
            ),
            served(
                "apps",
                "v1",
                "replicasets",
                "ReplicaSet",
                &["delete", "list", "watch"],
                true,
            ),
            served(
                "example.com",
                "v1",
                "nodeletes",
                "NoDelete",
                &["get", "list", "watch"],
                true,
            ),
        ]);
        assert_eq!(names(&recordable(&d, false)), ["v1 pods", "apps/v1 replicasets"]);
    }

    #[test]
    fn events_should_be_left_out_unless_asked_for() {
        let d = discovery(vec![
            served("", "v1", "configmaps", "ConfigMap", ALL_VERBS, true),
            served("", "v1", "events", "Event", ALL_VERBS, true),
            served("events.k8s.io", "v1", "events", "Event", ALL_VERBS, true),
        ]);
        assert_eq!(names(&recordable(&d, false)), ["v1 configmaps"]);
        assert_eq!(
            names(&recordable(&d, true)),
            ["v1 configmaps", "v1 events", "events.k8s.io/v1 events"]
        );
    }

    #[test]
    fn only_the_preferred_version_of_a_resource_should_be_recorded() {
        let d = discovery(vec![
            served(
                "autoscaling",
                "v1",
                "horizontalpodautoscalers",
                "HorizontalPodAutoscaler",
                ALL_VERBS,
                false,
            ),
            served(
                "autoscaling",
                "v2",
                "horizontalpodautoscalers",
                "HorizontalPodAutoscaler",
                ALL_VERBS,
                true,
            ),
        ]);
        let recorded = recordable(&d, false);
        assert_eq!(names(&recorded), ["autoscaling/v2 horizontalpodautoscalers"]);
        assert_eq!(
            (
                recorded[0].group.as_str(),
                recorded[0].version.as_str(),
                recorded[0].kind.as_str()
            ),
            ("autoscaling", "v2", "HorizontalPodAutoscaler")
        );
    }
}
