//! Wire types: the metadata-only view of Kubernetes objects that every [`ClusterApi`] speaks.
//!
//! These mirror `meta/v1` (`ObjectMeta`, `OwnerReference`, `PartialObjectMetadata`,
//! `DeleteOptions`, `Status`) in their JSON shape, so that the simulated cluster, a real API
//! server and recorded watch streams all decode into the same values. Only the fields the garbage
//! collector reads or writes are typed; everything else an object carries travels in
//! [`PartialObjectMeta::rest`] untouched.
//!
//! [`ClusterApi`]: super::ClusterApi

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A group, version and kind, as the REST mapper resolves it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Gvk {
    /// API group; `""` for the core group.
    pub group: String,
    /// Version inside the group, for example `v1`.
    pub version: String,
    /// The kind, for example `ReplicaSet`.
    pub kind: String,
}

impl Gvk {
    /// Splits an `apiVersion` (`apps/v1` or `v1`) and pairs it with `kind`.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        let (group, version) = split_api_version(api_version);
        Gvk {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
        }
    }

    /// The `apiVersion` string: `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        join_api_version(&self.group, &self.version)
    }
}

/// A group, version and resource: the unit a monitor watches.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Gvr {
    /// API group; `""` for the core group.
    pub group: String,
    /// Version inside the group.
    pub version: String,
    /// Plural resource name, for example `replicasets`.
    pub resource: String,
}

impl Gvr {
    /// Builds a GVR from its three parts.
    pub fn new(group: &str, version: &str, resource: &str) -> Self {
        Gvr {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }

    /// The `apiVersion` string of this GVR's group and version.
    pub fn api_version(&self) -> String {
        join_api_version(&self.group, &self.version)
    }
}

impl fmt::Display for Gvr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.resource)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.resource)
        }
    }
}

/// Splits `apps/v1` into (`apps`, `v1`) and `v1` into (`""`, `v1`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}

/// The inverse of [`split_api_version`].
pub fn join_api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// `metadata.ownerReferences[*]` as it travels on the wire.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    /// The owner's `apiVersion`.
    #[serde(default)]
    pub api_version: String,
    /// The owner's kind.
    #[serde(default)]
    pub kind: String,
    /// The owner's name.
    #[serde(default)]
    pub name: String,
    /// The owner's UID.
    #[serde(default)]
    pub uid: String,
    /// Whether the owner is the managing controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
    /// Whether a foreground deletion of the owner waits for this dependent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_owner_deletion: Option<bool>,
}

/// The subset of `meta/v1.ObjectMeta` the garbage collector and the simulated cluster use.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Object name.
    #[serde(default)]
    pub name: String,
    /// Prefix for a server-generated name, used when `name` is empty on create.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub generate_name: String,
    /// Namespace; empty for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Server-assigned unique id. UIDs are never reused.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Opaque version for optimistic concurrency.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// The generation of the desired state, which the server moves on when the spec changes (only
    /// some types keep one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Creation time, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// Set once deletion has started; never cleared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
    /// Seconds the object was given to go, set with `deletion_timestamp` (0 for an object held by
    /// finalizers alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<i64>,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Owners of this object.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_as_default")]
    pub owner_references: Vec<OwnerReference>,
    /// Finalizers that must be removed before the object goes away.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_as_default")]
    pub finalizers: Vec<String>,
}

impl ObjectMeta {
    /// True when `finalizer` is listed.
    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }
}

pub(super) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// An object as the metadata client sees it (`PartialObjectMetadata`), plus any other fields.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartialObjectMeta {
    /// `apiVersion` of the object.
    #[serde(default)]
    pub api_version: String,
    /// Kind of the object.
    #[serde(default)]
    pub kind: String,
    /// Metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Every other top-level field (`spec`, `data`, …), kept verbatim.
    #[serde(flatten)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

/// The finalizer the API server adds for `propagationPolicy=Orphan`.
pub const FINALIZER_ORPHAN: &str = "orphan";
/// The finalizer the API server adds for `propagationPolicy=Foreground`.
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

/// `DeleteOptions.propagationPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PropagationPolicy {
    /// Delete the object, then let the GC delete dependents.
    Background,
    /// Keep the object (with `foregroundDeletion`) until blocking dependents are gone.
    Foreground,
    /// Keep the object (with `orphan`) until dependents have their ref removed.
    Orphan,
}

impl PropagationPolicy {
    /// The policy's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            PropagationPolicy::Background => "Background",
            PropagationPolicy::Foreground => "Foreground",
            PropagationPolicy::Orphan => "Orphan",
        }
    }
}

/// `DeleteOptions.preconditions`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preconditions {
    /// The object must still have this UID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The object must still be at this resourceVersion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

/// `meta/v1.DeleteOptions`, limited to what deletion semantics need.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOptions {
    /// Preconditions checked atomically with the delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preconditions: Option<Preconditions>,
    /// How dependents are handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagation_policy: Option<PropagationPolicy>,
    /// Legacy flag: `true` means Orphan, `false` means Background.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orphan_dependents: Option<bool>,
    /// `["All"]`: validate and answer without deleting.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dry_run: Vec<String>,
}

/// The content type of a PATCH.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PatchType {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
}

impl PatchType {
    /// The HTTP content type.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Merge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Json => "application/json-patch+json",
        }
    }
}

/// A PATCH: its content type and its body.
#[derive(Clone, Debug, PartialEq)]
pub struct Patch {
    /// How the server reads `body`.
    pub patch_type: PatchType,
    /// The patch itself.
    pub body: serde_json::Value,
}

impl Patch {
    /// A patch of `patch_type` with `body`.
    pub fn new(patch_type: PatchType, body: serde_json::Value) -> Patch {
        Patch { patch_type, body }
    }
}

/// The kind of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum WatchEventType {
    /// Object created (or listed).
    Added,
    /// Object changed.
    Modified,
    /// Object gone.
    Deleted,
    /// Progress marker: only `metadata.resourceVersion` is meaningful, and the
    /// [`INITIAL_EVENTS_END`] annotation on the bookmark that ends a watch-list's initial events.
    Bookmark,
}

/// The annotation, `"true"` on a BOOKMARK, that ends a watch-list's initial events: every object
/// that existed at the bookmark's resourceVersion has been sent.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// One watch event, `{"type": …, "object": …}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WatchEvent {
    /// What happened.
    #[serde(rename = "type")]
    pub event_type: WatchEventType,
    /// The object after the change (before it, for `DELETED`). Behind a pointer: the event passes
    /// by value through the stream's layers and the monitor's state machine, and the object is
    /// the bulk of it (368 bytes), so each of those moves copies a pointer instead. Shared, so a
    /// server that keeps its objects behind an `Arc` (the simulated one) sends a watch its stored
    /// object rather than a deep copy of it.
    pub object: Arc<PartialObjectMeta>,
}

impl WatchEvent {
    /// The bookmark that ends a watch-list's initial events, which show the objects as they were
    /// at `resource_version`.
    pub fn initial_events_end(resource_version: String) -> WatchEvent {
        let mut object = PartialObjectMeta::default();
        object.metadata.resource_version = resource_version;
        object
            .metadata
            .annotations
            .insert(INITIAL_EVENTS_END.to_string(), "true".to_string());
        WatchEvent {
            event_type: WatchEventType::Bookmark,
            object: Arc::new(object),
        }
    }

    /// True for the bookmark that ends a watch-list's initial events.
    pub fn is_initial_events_end(&self) -> bool {
        self.event_type == WatchEventType::Bookmark
            && self
                .object
                .metadata
                .annotations
                .get(INITIAL_EVENTS_END)
                .map(String::as_str)
                == Some("true")
    }
}

/// One page of a list: its items, the resourceVersion to watch from, and where the next page
/// starts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObjectList {
    /// The objects.
    pub items: Vec<PartialObjectMeta>,
    /// The collection's resourceVersion at the time of the list (of its first page).
    pub resource_version: String,
    /// The `continue` token that asks for the next page; empty on the last.
    pub continue_token: String,
    /// The shard selector the server applied (`metadata.shardInfo.selector`); `None` when the
    /// request had none or the server ignored it.
    pub shard_selector: Option<String>,
}

/// How the REST mapper resolves a kind: its resource and scope.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RestMapping {
    /// The resource serving this kind at this version.
    pub gvr: Gvr,
    /// Whether objects of this kind live in a namespace.
    pub namespaced: bool,
}

/// One resource of the discovery document.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ApiResource {
    /// Group, version and plural name.
    pub gvr: Gvr,
    /// Kind served by the resource.
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Verbs the resource supports (`get`, `list`, `watch`, `delete`, …).
    pub verbs: Vec<String>,
    /// Whether `gvr.version` is the group's preferred version.
    pub preferred: bool,
}

impl ApiResource {
    /// True when the resource supports every verb the GC needs (`delete`, `list`, `watch`).
    pub fn is_deletable(&self) -> bool {
        ["delete", "list", "watch"]
            .iter()
            .all(|v| self.verbs.iter().any(|have| have == v))
    }
}

/// A core/v1 Event, as the GC records it (spec §3.9).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRecord {
    /// The object the event is about.
    pub involved_object: InvolvedObject,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Machine-readable reason, for example `OwnerRefInvalidNamespace`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// The component that reports it (`garbage-collector-controller`).
    pub source_component: String,
}

/// `involvedObject` of an event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvolvedObject {
    /// The object's `apiVersion`.
    pub api_version: String,
    /// The object's kind.
    pub kind: String,
    /// The object's namespace (`""` when cluster-scoped).
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The object's UID.
    pub uid: String,
}

impl EventRecord {
    /// The namespace the event is filed in: the object's, or `default` for a cluster-scoped one,
    /// as client-go's recorder does.
    pub fn namespace(&self) -> &str {
        if self.involved_object.namespace.is_empty() {
            "default"
        } else {
            &self.involved_object.namespace
        }
    }
}

/// A group and resource, version-free: the unit resources are ignored by, and migrated by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupResource {
    /// API group (`""` for core).
    pub group: String,
    /// Plural resource name.
    pub resource: String,
}

impl GroupResource {
    /// Builds one.
    pub fn new(group: &str, resource: &str) -> Self {
        GroupResource {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

impl std::str::FromStr for GroupResource {
    type Err = String;

    /// `resource` for the core group or `resource.group`, as kubectl names them (`events`,
    /// `events.events.k8s.io`, `widgets.example.com`).
    fn from_str(s: &str) -> Result<Self, String> {
        let (resource, group) = s.split_once('.').unwrap_or((s, ""));
        let valid = |part: &str| {
            part.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.".contains(c))
        };
        if resource.is_empty() || !valid(resource) || !valid(group) {
            return Err(format!(
                "{s:?}: expected RESOURCE or RESOURCE.GROUP, e.g. events.events.k8s.io"
            ));
        }
        Ok(GroupResource::new(group, resource))
    }
}

impl std::fmt::Display for GroupResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}
