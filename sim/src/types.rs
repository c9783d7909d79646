//! The type catalogue: each served type is described once, by one [`TypeDef`], and every version it
//! serves reads and writes the same stored objects.

use kube_gc::api::{ApiResource, Gvr, PropagationPolicy};
use serde::{Deserialize, Serialize};

/// The group of CustomResourceDefinitions, a built-in type whose objects define custom types
/// ([`super::crd`]).
pub(super) const CRD_GROUP: &str = "apiextensions.k8s.io";
/// The resource of CustomResourceDefinitions.
pub(super) const CRD_RESOURCE: &str = "customresourcedefinitions";

/// The group of StorageVersionMigrations, which ask a migrator to rewrite every object of a
/// resource in its current storage version ([`super::storage_version`]).
pub(super) const SVM_GROUP: &str = "storagemigration.k8s.io";
/// The resource of StorageVersionMigrations.
pub(super) const SVM_RESOURCE: &str = "storageversionmigrations";

/// The verbs every simulated type supports, as discovery lists them.
const VERBS: [&str; 8] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// A resource type the simulated cluster serves: a built-in kind or a CRD.
///
/// It serialises with camelCase field names, as a saved cluster state lists its types.
///
/// ```
/// use kube_gc_sim::TypeDef;
///
/// let widgets = TypeDef::new("example.com", "v1", "Widget", "widgets", true)
///     .custom()
///     .with_versions(&["v1beta1", "v1"], "v1");
/// assert_eq!(widgets.versions, ["v1beta1", "v1"]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeDef {
    /// API group; `""` for the core group.
    pub group: String,
    /// The kind, for example `ReplicaSet`.
    pub kind: String,
    /// Plural resource name, for example `replicasets`.
    pub resource: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Served versions, in discovery order.
    pub versions: Vec<String>,
    /// The preferred version; always one of `versions`.
    pub preferred: String,
    /// CRD-like: strategic-merge patches are answered with 415 UnsupportedMediaType.
    pub custom: bool,
    /// The propagation policy used when a DELETE's options name none (and the object's finalizers
    /// do not decide it either).
    pub default_policy: PropagationPolicy,
    /// Abbreviations discovery advertises (`po`, `deploy`), which kubectl accepts for the resource.
    pub short_names: Vec<String>,
    /// The categories discovery advertises (`all`), which kubectl expands to their resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// The resourceVersions at which each storage generation after the first began
    /// ([`super::storage_version`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage_rotations: Vec<u64>,
}

impl TypeDef {
    /// A built-in-like type serving one version, deleted in the background by default.
    pub fn new(group: &str, version: &str, kind: &str, resource: &str, namespaced: bool) -> Self {
        TypeDef {
            group: group.to_string(),
            kind: kind.to_string(),
            resource: resource.to_string(),
            namespaced,
            versions: vec![version.to_string()],
            preferred: version.to_string(),
            custom: false,
            default_policy: PropagationPolicy::Background,
            short_names: Vec::new(),
            categories: Vec::new(),
            storage_rotations: Vec::new(),
        }
    }

    /// Advertises `short_names` in discovery.
    #[must_use]
    pub fn with_short_names(mut self, short_names: &[&str]) -> Self {
        self.short_names = short_names.iter().map(|s| s.to_string()).collect();
        self
    }

    /// True when a DELETE that removes an object answers with the object rather than a Status,
    /// as the registries of pods, services, service accounts and every custom resource do.
    pub fn returns_deleted_object(&self) -> bool {
        self.custom
            || (self.group.is_empty() && matches!(self.resource.as_str(), "pods" | "services" | "serviceaccounts"))
    }

    /// Puts the type in `categories` in discovery.
    #[must_use]
    pub fn with_categories(mut self, categories: &[&str]) -> Self {
        self.categories = categories.iter().map(|s| s.to_string()).collect();
        self
    }

    /// The singular resource name discovery advertises: the kind in lower case.
    pub fn singular(&self) -> String {
        self.kind.to_ascii_lowercase()
    }

    /// Marks the type as a custom resource, which has no strategic-merge schema.
    #[must_use]
    pub fn custom(mut self) -> Self {
        self.custom = true;
        self
    }

    /// Makes a DELETE without a policy orphan dependents, as ReplicationControllers still do (and
    /// the `extensions/v1beta1` workloads once did).
    #[must_use]
    pub fn orphan_by_default(mut self) -> Self {
        self.default_policy = PropagationPolicy::Orphan;
        self
    }

    /// Serves `served` (in that order) with `preferred` as the preferred version. A preferred
    /// version missing from `served` is added to it, so the type always serves what it prefers.
    #[must_use]
    pub fn with_versions(mut self, served: &[&str], preferred: &str) -> Self {
        self.versions = served.iter().map(|v| v.to_string()).collect();
        if !self.serves(preferred) {
            self.versions.push(preferred.to_string());
        }
        self.preferred = preferred.to_string();
        self
    }

    /// True when `version` is served.
    pub fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }

    /// The resource as the API server names it in messages: `pods`, `replicasets.apps`.
    pub fn qualified_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// One discovery entry per served version.
    pub(super) fn api_resources(&self) -> impl Iterator<Item = ApiResource> + '_ {
        self.versions.iter().map(move |version| ApiResource {
            gvr: Gvr::new(&self.group, version, &self.resource),
            kind: self.kind.clone(),
            namespaced: self.namespaced,
            verbs: VERBS.iter().map(|v| v.to_string()).collect(),
            preferred: *version == self.preferred,
        })
    }
}

/// The category of the types `kubectl get all` lists, as upstream puts them in it.
const ALL: &[&str] = &["all"];

/// The types [`super::SimCluster::new`] serves: the built-ins the GC meets most often.
pub(super) fn builtin_catalogue() -> Vec<TypeDef> {
    let core = |kind: &str, resource: &str, namespaced: bool| TypeDef::new("", "v1", kind, resource, namespaced);
    let apps = |kind: &str, resource: &str| TypeDef::new("apps", "v1", kind, resource, true);
    let rbac = |kind: &str, resource: &str, namespaced: bool| {
        TypeDef::new("rbac.authorization.k8s.io", "v1", kind, resource, namespaced)
    };
    vec![
        core("Pod", "pods", true).with_short_names(&["po"]).with_categories(ALL),
        core("ConfigMap", "configmaps", true).with_short_names(&["cm"]),
        core("Secret", "secrets", true),
        core("ServiceAccount", "serviceaccounts", true).with_short_names(&["sa"]),
        core("Service", "services", true)
            .with_short_names(&["svc"])
            .with_categories(ALL),
        core("Namespace", "namespaces", false).with_short_names(&["ns"]),
        core("Node", "nodes", false).with_short_names(&["no"]),
        core("PersistentVolume", "persistentvolumes", false).with_short_names(&["pv"]),
        // The RC registry keeps the pre-GC default: dependents are orphaned unless told otherwise.
        core("ReplicationController", "replicationcontrollers", true)
            .orphan_by_default()
            .with_short_names(&["rc"])
            .with_categories(ALL),
        core("Event", "events", true).with_short_names(&["ev"]),
        apps("Deployment", "deployments")
            .with_short_names(&["deploy"])
            .with_categories(ALL),
        apps("ReplicaSet", "replicasets")
            .with_short_names(&["rs"])
            .with_categories(ALL),
        apps("StatefulSet", "statefulsets")
            .with_short_names(&["sts"])
            .with_categories(ALL),
        apps("DaemonSet", "daemonsets")
            .with_short_names(&["ds"])
            .with_categories(ALL),
        apps("ControllerRevision", "controllerrevisions"),
        TypeDef::new("batch", "v1", "Job", "jobs", true).with_categories(ALL),
        TypeDef::new("batch", "v1", "CronJob", "cronjobs", true)
            .with_short_names(&["cj"])
            .with_categories(ALL),
        rbac("Role", "roles", true),
        rbac("RoleBinding", "rolebindings", true),
        rbac("ClusterRole", "clusterroles", false),
        rbac("ClusterRoleBinding", "clusterrolebindings", false),
        TypeDef::new("coordination.k8s.io", "v1", "Lease", "leases", true),
        TypeDef::new("events.k8s.io", "v1", "Event", "events", true).with_short_names(&["ev"]),
        TypeDef::new(CRD_GROUP, "v1", "CustomResourceDefinition", CRD_RESOURCE, false)
            .with_short_names(&["crd", "crds"]),
        TypeDef::new(SVM_GROUP, "v1beta1", "StorageVersionMigration", SVM_RESOURCE, false),
    ]
}
