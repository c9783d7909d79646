//! [`to_stream_object`]: kube-rs's metadata-only object as the stream's [`PartialObjectMeta`].
//!
//! Invariant: a converted object carries the apiVersion and kind of the resource it was listed or
//! watched from, and of its metadata only what the garbage collector reads (name, namespace, UID,
//! resourceVersion, owner references, finalizers, creation and deletion timestamps).

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use kube::api::DynamicObject;
use kube::core::PartialObjectMeta as KubePartialObjectMeta;
use kube::discovery::ApiResource;
use kube_gc::api::{ObjectMeta, OwnerReference, PartialObjectMeta};

/// How the API server writes a `meta/v1.Time`: RFC 3339 in whole seconds, UTC.
const TIME_FORMAT: &str = "%Y-%m-%dT%H:%M:%SZ";

/// Converts `object`, listed or watched from `resource`.
///
/// The apiVersion and kind always come from `resource`: the server serves every object of a
/// list or watch at the version asked for, and a metadata response names its own envelope
/// (`meta.k8s.io/v1` `PartialObjectMetadata`) or nothing at all, never the object's type. Labels,
/// annotations and the rest are dropped, which keeps recordings lean.
pub fn to_stream_object(object: KubePartialObjectMeta<DynamicObject>, resource: &ApiResource) -> PartialObjectMeta {
    let m = object.metadata;
    PartialObjectMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
        metadata: ObjectMeta {
            name: m.name.unwrap_or_default(),
            namespace: m.namespace.unwrap_or_default(),
            uid: m.uid.unwrap_or_default(),
            resource_version: m.resource_version.unwrap_or_default(),
            creation_timestamp: m.creation_timestamp.map(|t| format_time(&t)),
            deletion_timestamp: m.deletion_timestamp.map(|t| format_time(&t)),
            owner_references: m.owner_references.into_iter().flatten().map(owner_reference).collect(),
            finalizers: m.finalizers.unwrap_or_default(),
            ..ObjectMeta::default()
        },
        ..PartialObjectMeta::default()
    }
}

fn owner_reference(r: meta::OwnerReference) -> OwnerReference {
    OwnerReference {
        api_version: r.api_version,
        kind: r.kind,
        name: r.name,
        uid: r.uid,
        controller: r.controller,
        block_owner_deletion: r.block_owner_deletion,
    }
}

fn format_time(time: &meta::Time) -> String {
    // Every field of the format exists in any timestamp, so formatting cannot fail.
    time.0.strftime(TIME_FORMAT).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::{GroupVersionKind, TypeMeta};
    use std::collections::BTreeMap;

    fn replica_sets() -> ApiResource {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apps", "v1", "ReplicaSet"), "replicasets")
    }

    /// The served ReplicaSet's owner, with every field set, in either crate's type: both read the
    /// same wire form, so the conversion is checked against the reference the server sent.
    fn owner<R: serde::de::DeserializeOwned>() -> R {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "web",
            "uid": "u-0",
            "controller": true,
            "blockOwnerDeletion": true,
        }))
        .expect("an owner reference")
    }

    /// A ReplicaSet as the metadata endpoint returns it, with every field the recorder keeps or
    /// drops set.
    fn served(types: Option<TypeMeta>) -> KubePartialObjectMeta<DynamicObject> {
        let time = |s: &str| meta::Time(s.parse().expect("a timestamp"));
        KubePartialObjectMeta {
            types,
            metadata: meta::ObjectMeta {
                name: Some("web-1".into()),
                generate_name: Some("web-".into()),
                namespace: Some("shop".into()),
                uid: Some("u-1".into()),
                resource_version: Some("42".into()),
                creation_timestamp: Some(time("2025-03-01T10:00:00.5Z")),
                deletion_timestamp: Some(time("2025-03-02T11:30:00Z")),
                labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                annotations: Some(BTreeMap::from([("note".into(), "x".repeat(1000))])),
                finalizers: Some(vec!["foregroundDeletion".into()]),
                owner_references: Some(vec![owner()]),
                ..meta::ObjectMeta::default()
            },
            _phantom: std::marker::PhantomData,
        }
    }

    #[test]
    fn the_metadata_envelope_type_should_be_replaced_by_the_resource_type() {
        let envelope = TypeMeta {
            api_version: "meta.k8s.io/v1".into(),
            kind: "PartialObjectMetadata".into(),
        };
        for types in [Some(envelope), None] {
            let object = to_stream_object(served(types), &replica_sets());
            assert_eq!(
                (object.api_version.as_str(), object.kind.as_str()),
                ("apps/v1", "ReplicaSet")
            );
        }
    }

    #[test]
    fn conversion_should_keep_what_the_collector_reads_and_drop_the_rest() {
        let object = to_stream_object(served(None), &replica_sets());
        let expected = ObjectMeta {
            name: "web-1".into(),
            namespace: "shop".into(),
            uid: "u-1".into(),
            resource_version: "42".into(),
            creation_timestamp: Some("2025-03-01T10:00:00Z".into()),
            deletion_timestamp: Some("2025-03-02T11:30:00Z".into()),
            finalizers: vec!["foregroundDeletion".into()],
            owner_references: vec![owner()],
            ..ObjectMeta::default()
        };
        assert_eq!(object.metadata, expected);
        assert!(object.rest.is_empty());
    }

    #[test]
    fn a_cluster_scoped_object_without_owners_should_have_empty_namespace_and_references() {
        let mut served = served(None);
        served.metadata.namespace = None;
        served.metadata.owner_references = None;
        served.metadata.finalizers = None;
        served.metadata.deletion_timestamp = None;
        let object = to_stream_object(served, &replica_sets());
        let json = serde_json::to_value(&object).expect("serializable");
        let mut keys: Vec<&str> = json["metadata"]
            .as_object()
            .expect("metadata")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, ["creationTimestamp", "name", "resourceVersion", "uid"]);
    }
}
