//! Which served resource a KIND argument names, as kubectl resolves it: a plural (`deployments`),
//! a singular (`deployment`), a kind in any case (`Deployment`), a short name (`deploy`, `rc`), each
//! optionally qualified by its group (`deployments.apps`) or its version and group
//! (`deployments.v1.apps`).
//!
//! The [`Catalogue`] is built from the discovery documents, with the short and singular names that
//! the collector's own [`Discovery`](kube_gc::api::Discovery) has no use for and drops. Without a
//! version, a name resolves at its group's preferred version only; names matched exactly (plural,
//! singular, kind) win over short names, and among equal matches the core group wins, then the
//! first group discovery lists: `events` is core `events`, not `events.events.k8s.io`.

use kube_gc::api::{ApiResource, Gvr};

/// One served resource at one version, with every name it answers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resource {
    /// Group, version and plural name.
    pub gvr: Gvr,
    /// The kind its objects have.
    pub kind: String,
    /// The singular name (`deployment`); may be empty, then the lowercase kind stands in.
    pub singular: String,
    /// Short names (`deploy`).
    pub short_names: Vec<String>,
    /// Whether its objects live in a namespace.
    pub namespaced: bool,
    /// The verbs it answers.
    pub verbs: Vec<String>,
    /// Whether its version is the group's preferred one.
    pub preferred: bool,
}

impl Resource {
    /// Whether the resource can be listed.
    pub fn is_listable(&self) -> bool {
        self.verbs.iter().any(|v| v == "list")
    }

    /// The name the API server uses for it in messages: `pods`, `deployments.apps`.
    pub fn qualified(&self) -> String {
        if self.gvr.group.is_empty() {
            self.gvr.resource.clone()
        } else {
            format!("{}.{}", self.gvr.resource, self.gvr.group)
        }
    }

    /// How well `name` (lowercase) names this resource.
    fn matches(&self, name: &str) -> Option<Match> {
        let exact = self.gvr.resource == name || self.singular == name || self.kind.eq_ignore_ascii_case(name);
        if exact {
            Some(Match::Exact)
        } else if self.short_names.iter().any(|s| s == name) {
            Some(Match::Short)
        } else {
            None
        }
    }

    /// The collector's view of the same resource, for the [`RestMapper`](kube_gc::api::RestMapper).
    pub fn api_resource(&self) -> ApiResource {
        ApiResource {
            gvr: self.gvr.clone(),
            kind: self.kind.clone(),
            namespaced: self.namespaced,
            verbs: self.verbs.clone(),
            preferred: self.preferred,
        }
    }
}

/// How a name matched; the better match comes first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Match {
    Exact,
    Short,
}

/// A KIND argument that names no served resource.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("no resource type {kind:?} is served by the cluster (`kubectl api-resources` lists them)")]
pub struct UnknownKind {
    /// The argument, as given.
    pub kind: String,
}

/// Every served resource, in discovery order.
#[derive(Clone, Debug, Default)]
pub struct Catalogue {
    resources: Vec<Resource>,
}

impl Catalogue {
    /// A catalogue of `resources`, in the order discovery listed them.
    pub fn new(resources: Vec<Resource>) -> Self {
        Catalogue { resources }
    }

    /// Every resource, every version.
    pub fn resources(&self) -> &[Resource] {
        &self.resources
    }

    /// The resource `kind` names; see the [module docs](self).
    pub fn resolve(&self, kind: &str) -> Result<&Resource, UnknownKind> {
        let text = kind.to_ascii_lowercase();
        let mut best: Option<(Match, bool, &Resource)> = None;
        for (name, version, group) in readings(&text) {
            for r in &self.resources {
                let version_fits = match version {
                    Some(v) => r.gvr.version == v,
                    None => r.preferred,
                };
                if !version_fits || group.is_some_and(|g| r.gvr.group != g) {
                    continue;
                }
                let Some(quality) = r.matches(name) else { continue };
                // Lower is better: the match, then the core group before the others.
                let key = (quality, !r.gvr.group.is_empty());
                if best.is_none_or(|(q, g, _)| key < (q, g)) {
                    best = Some((quality, key.1, r));
                }
            }
            if best.is_some() {
                break;
            }
        }
        best.map(|(_, _, r)| r)
            .ok_or_else(|| UnknownKind { kind: kind.to_string() })
    }
}

/// The ways to read a KIND argument, most literal first: the whole of it as a name, then
/// `name.group`, then `name.version.group`.
fn readings(text: &str) -> Vec<(&str, Option<&str>, Option<&str>)> {
    let mut readings = vec![(text, None, None)];
    if let Some((name, rest)) = text.split_once('.') {
        readings.push((name, None, Some(rest)));
        if let Some((version, group)) = rest.split_once('.') {
            readings.push((name, Some(version), Some(group)));
        }
    }
    readings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(group: &str, version: &str, kind: &str, plural: &str, short: &[&str]) -> Resource {
        Resource {
            gvr: Gvr::new(group, version, plural),
            kind: kind.into(),
            singular: kind.to_ascii_lowercase(),
            short_names: short.iter().map(|s| s.to_string()).collect(),
            namespaced: true,
            verbs: vec!["get".into(), "list".into()],
            preferred: true,
        }
    }

    fn catalogue() -> Catalogue {
        let mut old = resource("apps", "v1beta1", "Deployment", "deployments", &["deploy"]);
        old.preferred = false;
        Catalogue::new(vec![
            resource("", "v1", "Pod", "pods", &["po"]),
            resource("", "v1", "ReplicationController", "replicationcontrollers", &["rc"]),
            resource("", "v1", "Event", "events", &["ev"]),
            resource("apps", "v1", "Deployment", "deployments", &["deploy"]),
            old,
            resource("apps", "v1", "ReplicaSet", "replicasets", &["rs"]),
            resource("events.k8s.io", "v1", "Event", "events", &["ev"]),
            resource("example.com", "v1", "Widget", "widgets", &[]),
            // A short name that is another resource's singular: the exact match must win.
            resource("example.com", "v1", "PodSet", "podsets", &["pod"]),
        ])
    }

    fn resolved(kind: &str) -> String {
        let catalogue = catalogue();
        let r = catalogue.resolve(kind).unwrap_or_else(|e| panic!("{kind}: {e}"));
        r.gvr.to_string()
    }

    #[test]
    fn resolve_should_accept_every_name_kubectl_accepts() {
        for kind in [
            "deployment",
            "deployments",
            "deploy",
            "Deployment",
            "DEPLOYMENTS",
            "deployments.apps",
            "deploy.apps",
            "deployments.v1.apps",
        ] {
            assert_eq!(resolved(kind), "apps/v1/deployments", "{kind}");
        }
        assert_eq!(resolved("rc"), "v1/replicationcontrollers");
        assert_eq!(resolved("po"), "v1/pods");
        assert_eq!(resolved("widgets.example.com"), "example.com/v1/widgets");
        assert_eq!(resolved("deployments.v1beta1.apps"), "apps/v1beta1/deployments");
    }

    #[test]
    fn resolve_should_prefer_exact_names_then_the_core_group() {
        assert_eq!(resolved("pod"), "v1/pods");
        assert_eq!(resolved("events"), "v1/events");
        assert_eq!(resolved("ev"), "v1/events");
        assert_eq!(resolved("events.events.k8s.io"), "events.k8s.io/v1/events");
    }

    #[test]
    fn resolve_should_refuse_what_no_resource_answers_to() {
        let catalogue = catalogue();
        for kind in [
            "deploymnet",
            "deployments.batch",
            "deployments.v2.apps",
            "",
            "widgets.example",
        ] {
            assert_eq!(
                catalogue.resolve(kind),
                Err(UnknownKind { kind: kind.to_string() }),
                "{kind}"
            );
        }
        let message = catalogue.resolve("Gadget").unwrap_err().to_string();
        assert!(message.contains("\"Gadget\""), "{message}");
    }
}
