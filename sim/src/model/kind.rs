//! The served types: what a reference's apiVersion and kind resolve to, and where an object's
//! name is unique.

use kube_gc::api::{ApiResource, PropagationPolicy};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A served type, as the model needs it.
///
/// Cheap to clone: every object holds one, and a stream's custom types are learned at run time,
/// so a type is either one of the constants below or shared behind an `Arc`.
#[derive(Clone)]
pub struct Kind(Repr);

#[derive(Clone)]
enum Repr {
    Builtin(&'static KindDef),
    Learned(Arc<KindDef>),
}

/// What a [`Kind`] says about a type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KindDef {
    /// `group/version`, or `v1` for core.
    pub api_version: Cow<'static, str>,
    /// The kind, as references name it.
    pub kind: Cow<'static, str>,
    /// API group (`""` for core).
    pub group: Cow<'static, str>,
    /// Plural resource name.
    pub resource: Cow<'static, str>,
    /// Whether objects of this type live in a namespace.
    pub namespaced: bool,
    /// What a delete without a policy does when the object's finalizers do not decide.
    pub default_policy: PropagationPolicy,
}

impl Kind {
    /// The type a discovery document lists. Discovery does not say what a delete without a
    /// policy does, so its default is Background, as it is for every type but a few legacy ones.
    pub fn of(resource: &ApiResource) -> Kind {
        Kind(Repr::Learned(Arc::new(KindDef {
            api_version: resource.gvr.api_version().into(),
            kind: resource.kind.clone().into(),
            group: resource.gvr.group.clone().into(),
            resource: resource.gvr.resource.clone().into(),
            namespaced: resource.namespaced,
            default_policy: PropagationPolicy::Background,
        })))
    }
}

impl Deref for Kind {
    type Target = KindDef;

    fn deref(&self) -> &KindDef {
        match &self.0 {
            Repr::Builtin(def) => def,
            Repr::Learned(def) => def,
        }
    }
}

impl PartialEq for Kind {
    fn eq(&self, other: &Kind) -> bool {
        **self == **other
    }
}

impl Eq for Kind {}

impl std::hash::Hash for Kind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version, self.kind)
    }
}

const fn builtin(
    api_version: &'static str,
    group: &'static str,
    kind: &'static str,
    resource: &'static str,
    namespaced: bool,
    default_policy: PropagationPolicy,
) -> KindDef {
    KindDef {
        api_version: Cow::Borrowed(api_version),
        kind: Cow::Borrowed(kind),
        group: Cow::Borrowed(group),
        resource: Cow::Borrowed(resource),
        namespaced,
        default_policy,
    }
}

use PropagationPolicy::{Background, Orphan};

/// `apps/v1` Deployment.
pub const DEPLOYMENT: Kind = Kind(Repr::Builtin(&builtin(
    "apps/v1",
    "apps",
    "Deployment",
    "deployments",
    true,
    Background,
)));
/// `apps/v1` ReplicaSet.
pub const REPLICA_SET: Kind = Kind(Repr::Builtin(&builtin(
    "apps/v1",
    "apps",
    "ReplicaSet",
    "replicasets",
    true,
    Background,
)));
/// `v1` Pod.
pub const POD: Kind = Kind(Repr::Builtin(&builtin("v1", "", "Pod", "pods", true, Background)));
/// `v1` ConfigMap.
pub const CONFIG_MAP: Kind = Kind(Repr::Builtin(&builtin(
    "v1",
    "",
    "ConfigMap",
    "configmaps",
    true,
    Background,
)));
/// `v1` Secret.
pub const SECRET: Kind = Kind(Repr::Builtin(&builtin("v1", "", "Secret", "secrets", true, Background)));
/// `v1` ReplicationController: it still orphans its dependents when deleted without a policy.
pub const REPLICATION_CONTROLLER: Kind = Kind(Repr::Builtin(&builtin(
    "v1",
    "",
    "ReplicationController",
    "replicationcontrollers",
    true,
    Orphan,
)));
/// `rbac.authorization.k8s.io/v1` ClusterRole.
pub const CLUSTER_ROLE: Kind = Kind(Repr::Builtin(&builtin(
    "rbac.authorization.k8s.io/v1",
    "rbac.authorization.k8s.io",
    "ClusterRole",
    "clusterroles",
    false,
    Background,
)));
/// `rbac.authorization.k8s.io/v1` ClusterRoleBinding.
pub const CLUSTER_ROLE_BINDING: Kind = Kind(Repr::Builtin(&builtin(
    "rbac.authorization.k8s.io/v1",
    "rbac.authorization.k8s.io",
    "ClusterRoleBinding",
    "clusterrolebindings",
    false,
    Background,
)));

/// The types [`Model::new`](super::Model::new) serves; all of them are built into the simulated
/// cluster.
pub const KINDS: [Kind; 8] = [
    DEPLOYMENT,
    REPLICA_SET,
    POD,
    CONFIG_MAP,
    SECRET,
    REPLICATION_CONTROLLER,
    CLUSTER_ROLE,
    CLUSTER_ROLE_BINDING,
];

/// Where a name is unique: one per (group, resource), whatever the version.
pub(super) type TypeIndex = usize;

/// The served types, by the apiVersion and kind a reference names.
#[derive(Debug, Default)]
pub(super) struct Served {
    /// apiVersion → kind → type; two levels so a lookup borrows its `&str` keys.
    by_ref: HashMap<String, HashMap<String, (Kind, TypeIndex)>>,
    /// group → kind → the first type serving that kind in the group: where a reference at a
    /// version that is not served resolves (kubernetes#102641).
    by_group_kind: HashMap<String, HashMap<String, (Kind, TypeIndex)>>,
    /// How many distinct (group, resource) pairs there are.
    types: usize,
}

impl Served {
    /// Serves `kinds`; the first of two that share an apiVersion and kind wins, as in the REST
    /// mapper.
    pub(super) fn new(kinds: impl IntoIterator<Item = Kind>) -> Served {
        let mut index: HashMap<(String, String), TypeIndex> = HashMap::new();
        let mut by_ref: HashMap<String, HashMap<String, (Kind, TypeIndex)>> = HashMap::new();
        let mut by_group_kind: HashMap<String, HashMap<String, (Kind, TypeIndex)>> = HashMap::new();
        for kind in kinds {
            let next = index.len();
            let ty = *index
                .entry((kind.group.to_string(), kind.resource.to_string()))
                .or_insert(next);
            by_ref
                .entry(kind.api_version.to_string())
                .or_default()
                .entry(kind.kind.to_string())
                .or_insert((kind.clone(), ty));
            by_group_kind
                .entry(kind.group.to_string())
                .or_default()
                .entry(kind.kind.to_string())
                .or_insert((kind, ty));
        }
        Served {
            by_ref,
            by_group_kind,
            types: index.len(),
        }
    }

    /// How many name scopes the served types need.
    pub(super) fn types(&self) -> usize {
        self.types
    }

    /// The served type a reference's apiVersion and kind resolve to, if any: the one serving that
    /// version, else any version of the same group serving the kind (an object is the same object
    /// through every version).
    pub(super) fn resolve(&self, api_version: &str, kind: &str) -> Option<&(Kind, TypeIndex)> {
        // `/v1` names the core group's `v1`, as the REST mapper reads it.
        let api_version = api_version.strip_prefix('/').unwrap_or(api_version);
        if let Some(exact) = self.by_ref.get(api_version).and_then(|kinds| kinds.get(kind)) {
            return Some(exact);
        }
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        self.by_group_kind.get(group)?.get(kind)
    }
}
