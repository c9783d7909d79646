//! The simulated cluster's own conformance: each test pins one API-server behaviour the GC relies on.

use super::{SimCluster, TypeDef};
use futures::StreamExt;
use kube_gc::api::layers::Fault;
use kube_gc::api::layers::Verb;
use kube_gc::api::{
    ApiError, ClusterApi, DeleteOptions, EventRecord, Gvr, InvolvedObject, ObjectMeta, OwnerReference,
    PartialObjectMeta, Patch, PatchType, Preconditions, PropagationPolicy, StatusReason, WatchEvent, WatchEventType,
    FINALIZER_FOREGROUND, FINALIZER_ORPHAN,
};
use serde_json::json;
use std::time::Duration;

pub(super) const NS: &str = "default";

pub(super) fn pods() -> Gvr {
    Gvr::new("", "v1", "pods")
}

fn rcs() -> Gvr {
    Gvr::new("", "v1", "replicationcontrollers")
}

pub(super) fn crds() -> Gvr {
    Gvr::new(super::types::CRD_GROUP, "v1", super::types::CRD_RESOURCE)
}

pub(super) fn gadgets() -> Gvr {
    Gvr::new("example.com", "v1", "gadgets")
}

/// The CRD of `gadgets.example.com`, served at v1.
pub(super) fn gadget_crd() -> PartialObjectMeta {
    serde_json::from_value(json!({
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": true, "storage": true}]},
    }))
    .expect("a CRD")
}

fn widgets() -> Gvr {
    Gvr::new("example.com", "v1", "widgets")
}

/// An object with only a namespace and a name, as a create takes it.
pub(super) fn object(namespace: &str, name: &str) -> PartialObjectMeta {
    PartialObjectMeta {
        metadata: ObjectMeta {
            name: name.into(),
            namespace: namespace.into(),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn with_finalizers(mut obj: PartialObjectMeta, finalizers: &[&str]) -> PartialObjectMeta {
    obj.metadata.finalizers = finalizers.iter().map(|f| f.to_string()).collect();
    obj
}

fn owner(uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ReplicationController".into(),
        name: format!("rc-{uid}"),
        uid: uid.into(),
        ..Default::default()
    }
}

fn reason<T: std::fmt::Debug>(result: Result<T, ApiError>) -> StatusReason {
    match result {
        Err(e) => e.reason().expect("a status error"),
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}

fn policy(p: PropagationPolicy) -> DeleteOptions {
    DeleteOptions {
        propagation_policy: Some(p),
        ..Default::default()
    }
}

/// A user change in an unrelated field, which moves the pod's resourceVersion on.
fn touch(cluster: &SimCluster, name: &str) {
    let label = json!({"metadata": {"labels": {"l": "1"}}});
    cluster
        .patch_object(&pods(), NS, name, PatchType::Merge, &label)
        .expect("patch");
}

fn create_pod(cluster: &SimCluster, name: &str, finalizers: &[&str]) -> PartialObjectMeta {
    cluster
        .create(&pods(), with_finalizers(object(NS, name), finalizers))
        .expect("create")
}

fn get_pod(cluster: &SimCluster, name: &str) -> PartialObjectMeta {
    cluster.get_object(&pods(), NS, name).expect("pod exists")
}

fn cluster_with_widgets() -> SimCluster {
    let cluster = SimCluster::new();
    cluster.register(TypeDef::new("example.com", "v1", "Widget", "widgets", true).custom());
    cluster
}

async fn next_event(stream: &mut kube_gc::api::WatchStream) -> WatchEvent {
    tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("watch event within 5s; the watch stream is likely stuck")
        .expect("stream still open")
        .expect("no watch error")
}

#[test]
fn create_should_assign_uid_timestamp_and_monotonic_resource_versions() {
    let cluster = SimCluster::new();
    let a = create_pod(&cluster, "a", &[]);
    let b = create_pod(&cluster, "b", &[]);
    assert_eq!(a.api_version, "v1");
    assert_eq!(a.kind, "Pod");
    assert_eq!(a.metadata.uid.len(), 36);
    assert_ne!(a.metadata.uid, b.metadata.uid);
    let ts = a.metadata.creation_timestamp.as_deref().expect("creationTimestamp");
    assert!(ts.len() == 20 && ts.ends_with('Z'), "{ts}");
    let rv = |o: &PartialObjectMeta| o.metadata.resource_version.parse::<u64>().expect("decimal rv");
    assert!(rv(&b) > rv(&a));
    let updated = cluster
        .patch_object(
            &pods(),
            NS,
            "a",
            PatchType::Merge,
            &json!({"metadata": {"labels": {"x": "y"}}}),
        )
        .expect("patch");
    assert!(rv(&updated) > rv(&b));
}

#[test]
fn create_should_keep_a_provided_uid_and_generate_names() {
    let cluster = SimCluster::new();
    let mut obj = object(NS, "");
    obj.metadata.generate_name = "web-".into();
    obj.metadata.uid = "recorded-uid".into();
    let created = cluster.create(&pods(), obj).expect("create");
    assert_eq!(created.metadata.uid, "recorded-uid");
    assert!(created.metadata.name.starts_with("web-") && created.metadata.name.len() == 9);
}

#[test]
fn create_should_reject_a_taken_name_with_already_exists() {
    let cluster = SimCluster::new();
    create_pod(&cluster, "a", &[]);
    assert_eq!(
        reason(cluster.create(&pods(), object(NS, "a"))),
        StatusReason::AlreadyExists
    );
    // The same name in another namespace is another object.
    assert!(cluster.create(&pods(), object("other", "a")).is_ok());
}

#[test]
fn create_should_reject_invalid_objects() {
    let cluster = SimCluster::new();
    let nodes = Gvr::new("", "v1", "nodes");
    let mut bad_ref = object(NS, "r");
    bad_ref.metadata.owner_references = vec![owner("")];
    let mut deleting = object(NS, "d");
    deleting.metadata.deletion_timestamp = Some("2024-01-01T00:00:00Z".into());
    let cases = [
        (pods(), object(NS, "")),
        (pods(), object("", "no-namespace")),
        (nodes, object(NS, "namespaced-node")),
        (pods(), bad_ref),
        (pods(), deleting),
        (
            pods(),
            with_finalizers(object(NS, "both"), &[FINALIZER_ORPHAN, FINALIZER_FOREGROUND]),
        ),
    ];
    for (gvr, obj) in cases {
        let name = obj.metadata.name.clone();
        assert_eq!(reason(cluster.create(&gvr, obj)), StatusReason::Invalid, "{name}");
    }
    assert_eq!(cluster.object_count(), 0);
}

#[test]
fn get_should_answer_not_found_for_a_missing_object_or_an_unserved_resource() {
    let cluster = SimCluster::new();
    assert_eq!(reason(cluster.get_object(&pods(), NS, "nope")), StatusReason::NotFound);
    let err = cluster
        .get_object(&Gvr::new("", "v2", "pods"), NS, "nope")
        .expect_err("v2 is not served");
    assert!(err.is_not_found());
    assert!(err.to_string().contains("pods"), "{err}");
}

#[test]
fn reads_through_any_served_version_should_carry_that_api_version() {
    let cluster = SimCluster::new();
    cluster.register(
        TypeDef::new("rbac.authorization.k8s.io", "v1", "Role", "roles", true).with_versions(&["v1", "v1beta1"], "v1"),
    );
    let v1 = Gvr::new("rbac.authorization.k8s.io", "v1", "roles");
    let beta = Gvr::new("rbac.authorization.k8s.io", "v1beta1", "roles");
    cluster.create(&v1, object(NS, "r")).expect("create");
    let read = cluster.get_object(&beta, NS, "r").expect("same object through v1beta1");
    assert_eq!(read.api_version, "rbac.authorization.k8s.io/v1beta1");
    assert_eq!(read.kind, "Role");
}

#[test]
fn background_delete_without_finalizers_should_remove_the_object() {
    let cluster = SimCluster::new();
    create_pod(&cluster, "a", &[]);
    cluster
        .delete_object(&pods(), NS, "a", &policy(PropagationPolicy::Background))
        .expect("delete");
    assert_eq!(reason(cluster.get_object(&pods(), NS, "a")), StatusReason::NotFound);
    assert_eq!(
        reason(cluster.delete_object(&pods(), NS, "a", &DeleteOptions::default())),
        StatusReason::NotFound
    );
}

#[test]
fn a_sealed_cluster_should_refuse_every_write_and_still_serve_reads_and_watches() {
    let cluster = SimCluster::new();
    create_pod(&cluster, "a", &[FINALIZER_ORPHAN]);
    let before = get_pod(&cluster, "a");
    cluster.seal();
    let unavailable = StatusReason::ServiceUnavailable;
    assert_eq!(reason(cluster.create(&pods(), object(NS, "b"))), unavailable);
    assert_eq!(
        reason(cluster.delete_object(&pods(), NS, "a", &DeleteOptions::default())),
        unavailable
    );
    let unfinalize = json!({"metadata": {"finalizers": null}});
    assert_eq!(
        reason(cluster.patch_object(&pods(), NS, "a", PatchType::Merge, &unfinalize)),
        unavailable
    );
    assert_eq!(
        get_pod(&cluster, "a"),
        before,
        "nothing a refused write asked for was made"
    );
    assert_eq!(reason(cluster.get_object(&pods(), NS, "b")), StatusReason::NotFound);
    cluster
        .watch_objects(&pods(), &before.metadata.resource_version)
        .expect("a watch still opens");
}

#[test]
fn foreground_delete_should_add_foreground_deletion_and_a_deletion_timestamp() {
    let cluster = SimCluster::new();
    create_pod(&cluster, "a", &["x/y"]);
    cluster
        .delete_object(&pods(), NS, "a", &policy(PropagationPolicy::Foreground))
        .expect("delete");
    let pod = get_pod(&cluster, "a");
    assert_eq!(pod.metadata.finalizers, ["x/y", FINALIZER_FOREGROUND]);
    assert!(pod.metadata.deletion_timestamp.is_some());
}

#[test]
fn orphan_delete_should_add_the_orphan_finalizer() {
    let cluster = SimCluster::new();
    create_pod(&cluster, "a", &[]);
    cluster
        .delete_object(&pods(), NS, "a", &policy(PropagationPolicy::Orphan))
        .expect("delete");
    assert_eq!(get_pod(&cluster, "a").metadata.finalizers, [FINALIZER_ORPHAN]);
}

#[test]
fn replication_controller_delete_without_options_should_orphan_by_default() {
    let cluster = SimCluster::new();
    cluster.create(&rcs(), object(NS, "rc")).expect("create");
    cluster
        .delete_object(&rcs(), NS, "rc", &DeleteOptions::default())
        .expect("delete");
    let rc = cluster.get_object(&rcs(), NS, "rc").expect("kept for orphaning");
    assert_eq!(rc.metadata.finalizers, [FINALIZER_ORPHAN]);
    assert!(rc.metadata.deletion_timestamp.is_some());
}

#[test]
fn legacy_orphan_dependents_flag_should_override_the_default_and_the_finalizers() {
    let cluster = SimCluster::new();
    let rc = with_finalizers(object(NS, "rc"), &[FINALIZER_ORPHAN]);
    cluster.create(&rcs(), rc).expect("create");
    let cascade = DeleteOptions {
        orphan_dependents: Some(false),
        ..Default::default()
    };
    cluster.delete_object(&rcs(), NS, "rc", &cascade).expect("delete");
    assert_eq!(reason(cluster.get_object(&rcs(), NS, "rc")), StatusReason::NotFound);

    create_pod(&cluster, "p", &[]);
    let orphan = DeleteOptions {
        orphan_dependents: Some(true),
        ..Default::default()
    };
    cluster.delete_object(&pods(), NS, "p", &orphan).expect("delete");
    assert_eq!(get_pod(&cluster, "p").metadata.finalizers, [FINALIZER_ORPHAN]);

    let both = DeleteOptions {
        orphan_dependents: Some(true),
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..Default::default()
    };
    assert_eq!(
        reason(cluster.delete_object(&pods(), NS, "p", &both)),
        StatusReason::Invalid
    );
}

#[test]
fn an_objects_own_gc_finalizer_should_decide_when_the_options_do_not() {
    let cluster = SimCluster::new();
    // The RC default is orphan, but the object's foregroundDeletion finalizer wins.
    let rc = with_finalizers(object(NS, "rc"), &[FINALIZER_FOREGROUND]);
    cluster.create(&rcs(), rc).expect("create");
    cluster
        .delete_object(&rcs(), NS, "rc", &DeleteOptions::default())
        .expect("delete");
    let rc = cluster.get_object(&rcs(), NS, "rc").expect("kept");
    assert_eq!(rc.metadata.finalizers, [FINALIZER_FOREGROUND]);

    // A pod (default Background) carrying orphan is orphaned.
    create_pod(&cluster, "p", &[FINALIZER_ORPHAN]);
    cluster
        .delete_object(&pods(), NS, "p", &DeleteOptions::default())
        .expect("delete");
    assert_eq!(get_pod(&cluster, "p").metadata.finalizers, [FINALIZER_ORPHAN]);
}

#[test]
fn second_foreground_delete_should_re_add_foreground_deletion_after_it_was_removed() {
    let cluster = SimCluster::new();
    create_pod(&cluster, "a", &["x/y"]);
    let fg = policy(PropagationPolicy::Foreground);
    cluster.delete_object(&pods(), NS, "a", &fg).expect("first delete");
    let first = get_pod(&cluster, "a");
    // The GC strips foregroundDeletion once the dependents are gone.
    let stripped = json!({"metadata": {"resourceVersion": first.metadata.resource_version, "finalizers": ["x/y"]}});
    cluster
        .patch_object(&pods(), NS, "a", PatchType::Merge, &stripped)
        .expect("strip");
    cluster.delete_object(&pods(), NS, "a", &fg).expect("second delete");
    let second = get_pod(&cluster, "a");
    assert_eq!(second.metadata.finalizers, ["x/y", FINALIZER_FOREGROUND]);
    assert_eq!(second.metadata.deletion_timestamp, first.metadata.deletion_timestamp);
}

#[test]
fn removing_the_last_finalizer_of_a_deleting_object_should_delete_it() {
    let cluster = SimCluster::new();
    create_pod(&cluster, "a", &["x/y"]);
    cluster
        .delete_object(&pods(), NS, "a", &DeleteOptions::default())
        .expect("delete");
    let mut pod = get_pod(&cluster, "a");
    assert!(pod.metadata.deletion_timestamp.is_some());
    pod.metadata.finalizers.clear();
    cluster.update(&pods(), pod).expect("update");
    assert_eq!(reason(cluster.get_object(&pods(), NS, "a")), StatusReason::NotFound);
}

#[test]
fn a_delete_with_a_stale_uid_precondition_should_conflict() {
    let cluster = SimCluster::new();
    create_pod(&cluster, "a", &[]);
    let opts = DeleteOptions {
        preconditions: Some(Preconditions {
            uid: Some("old-uid".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let err = cluster
        .delete_object(&pods(), NS, "a", &opts)
        .expect_err("uid mismatch");
    assert!(err.is_conflict());
    assert!(
        err.to_string()
            .contains("Precondition failed: UID in precondition: old-uid"),
        "{err}"
    );
    assert!(cluster.get_object(&pods(), NS, "a").is_ok());
}

#[test]
fn a_delete_with_a_stale_resource_version_precondition_should_conflict() {
    let cluster = SimCluster::new();
    let pod = create_pod(&cluster, "a", &[]);
    touch(&cluster, "a");
    let opts = DeleteOptions {
        preconditions: Some(Preconditions {
            uid: Some(pod.metadata.uid.clone()),
            resource_version: Some(pod.metadata.resource_version.clone()),
        }),
        ..Default::default()
    };
    assert_eq!(
        reason(cluster.delete_object(&pods(), NS, "a", &opts)),
        StatusReason::Conflict
    );
    let fresh = get_pod(&cluster, "a");
    let opts = DeleteOptions {
        preconditions: Some(Preconditions {
            uid: Some(fresh.metadata.uid),
            resource_version: Some(fresh.metadata.resource_version),
        }),
        ..Default::default()
    };
    cluster
        .delete_object(&pods(), NS, "a", &opts)
        .expect("fresh preconditions");
}

#[test]
fn delete_owner_refs_smp_should_remove_only_that_ref() {
    let cluster = SimCluster::new();
    let mut pod = object(NS, "a");
    pod.metadata.owner_references = vec![owner("a"), owner("b")];
    let pod = cluster.create(&pods(), pod).expect("create");
    let body = json!({"metadata": {"uid": pod.metadata.uid, "ownerReferences": [{"$patch": "delete", "uid": "a"}]}});
    let out = cluster
        .patch_object(&pods(), NS, "a", PatchType::StrategicMerge, &body)
        .expect("patch");
    assert_eq!(out.metadata.owner_references, [owner("b")]);
    // Deleting a ref that is no longer there is not an error, and writes nothing.
    let again = cluster
        .patch_object(&pods(), NS, "a", PatchType::StrategicMerge, &body)
        .expect("idempotent");
    assert_eq!(again.metadata.resource_version, out.metadata.resource_version);
}

#[test]
fn an_smp_with_another_objects_uid_should_be_invalid() {
    let cluster = SimCluster::new();
    let mut pod = object(NS, "a");
    pod.metadata.owner_references = vec![owner("a")];
    cluster.create(&pods(), pod).expect("create");
    let body = json!({"metadata": {"uid": "recreated", "ownerReferences": [{"$patch": "delete", "uid": "a"}]}});
    let result = cluster.patch_object(&pods(), NS, "a", PatchType::StrategicMerge, &body);
    assert_eq!(reason(result), StatusReason::Invalid);
    assert_eq!(get_pod(&cluster, "a").metadata.owner_references, [owner("a")]);
}

#[test]
fn an_smp_of_a_custom_type_should_be_unsupported_media_type() {
    let cluster = cluster_with_widgets();
    cluster.create(&widgets(), object(NS, "w")).expect("create");
    let body = json!({"metadata": {"labels": {"a": "b"}}});
    let err = cluster
        .patch_object(&widgets(), NS, "w", PatchType::StrategicMerge, &body)
        .expect_err("415");
    assert!(err.is_unsupported_media_type());
    assert_eq!(err.reason().map(StatusReason::code), Some(415));
    assert!(cluster
        .patch_object(&widgets(), NS, "w", PatchType::Merge, &body)
        .is_ok());
}

#[test]
fn a_merge_patch_with_a_stale_resource_version_should_conflict() {
    let cluster = SimCluster::new();
    let pod = create_pod(&cluster, "a", &["x/y"]);
    touch(&cluster, "a");
    let stale = json!({"metadata": {"resourceVersion": pod.metadata.resource_version, "finalizers": null}});
    let result = cluster.patch_object(&pods(), NS, "a", PatchType::Merge, &stale);
    assert_eq!(reason(result), StatusReason::Conflict);
    assert_eq!(get_pod(&cluster, "a").metadata.finalizers, ["x/y"]);
}

#[test]
fn a_merge_patch_clearing_the_finalizers_of_a_deleting_object_should_delete_it() {
    let cluster = SimCluster::new();
    create_pod(&cluster, "a", &[]);
    cluster
        .delete_object(&pods(), NS, "a", &policy(PropagationPolicy::Orphan))
        .expect("delete");
    let pod = get_pod(&cluster, "a");
    let body = json!({"metadata": {"resourceVersion": pod.metadata.resource_version, "finalizers": null}});
    let last = cluster
        .patch_object(&pods(), NS, "a", PatchType::Merge, &body)
        .expect("patch");
    assert!(last.metadata.finalizers.is_empty());
    assert_eq!(reason(cluster.get_object(&pods(), NS, "a")), StatusReason::NotFound);
    assert_eq!(cluster.object_count(), 0);
}

#[test]
fn no_finalizer_may_be_added_while_an_object_is_being_deleted() {
    let cluster = SimCluster::new();
    create_pod(&cluster, "a", &["x/y"]);
    cluster
        .delete_object(&pods(), NS, "a", &DeleteOptions::default())
        .expect("delete");
    let body = json!({"metadata": {"finalizers": ["x/y", "new/one"]}});
    let err = cluster
        .patch_object(&pods(), NS, "a", PatchType::Merge, &body)
        .expect_err("forbidden");
    assert_eq!(err.reason(), Some(StatusReason::Invalid));
    assert!(err.to_string().contains("no new finalizers can be added"), "{err}");
}

#[test]
fn an_update_should_guard_resource_version_and_uid_and_keep_system_fields() {
    let cluster = SimCluster::new();
    let pod = create_pod(&cluster, "a", &[]);
    let mut stale = pod.clone();
    stale.metadata.labels.insert("a".into(), "1".into());
    cluster.update(&pods(), stale.clone()).expect("first update");
    assert_eq!(reason(cluster.update(&pods(), stale)), StatusReason::Conflict);

    let mut other_uid = get_pod(&cluster, "a");
    other_uid.metadata.uid = "someone-else".into();
    assert_eq!(reason(cluster.update(&pods(), other_uid)), StatusReason::Conflict);

    let mut unconditional = object(NS, "a");
    unconditional.metadata.creation_timestamp = Some("1999-01-01T00:00:00Z".into());
    let out = cluster.update(&pods(), unconditional).expect("unconditional");
    assert_eq!(out.metadata.uid, pod.metadata.uid);
    assert_eq!(out.metadata.creation_timestamp, pod.metadata.creation_timestamp);
    assert!(out.metadata.labels.is_empty());
}

#[test]
fn malformed_patches_should_be_bad_requests_and_never_panic() {
    let cluster = cluster_with_widgets();
    create_pod(&cluster, "a", &[]);
    let cases = [
        (PatchType::Merge, json!("not an object")),
        (PatchType::Merge, json!([1, 2])),
        (
            PatchType::StrategicMerge,
            json!({"metadata": {"ownerReferences": [{"$patch": "delete"}]}}),
        ),
        (PatchType::StrategicMerge, json!(42)),
        (PatchType::Json, json!({"op": "add"})),
        (PatchType::Json, json!(["not an operation"])),
    ];
    for (patch_type, body) in cases {
        let result = cluster.patch_object(&pods(), NS, "a", patch_type, &body);
        assert_eq!(reason(result), StatusReason::BadRequest, "{patch_type:?} {body}");
    }
    // A well-formed patch that produces an unreadable object is 422, not a crash either.
    let result = cluster.patch_object(
        &pods(),
        NS,
        "a",
        PatchType::Merge,
        &json!({"metadata": {"finalizers": 5}}),
    );
    assert_eq!(reason(result), StatusReason::Invalid);
    let result = cluster.patch_object(&pods(), NS, "a", PatchType::Merge, &json!({"metadata": {"name": "b"}}));
    assert_eq!(reason(result), StatusReason::BadRequest);
    let missing = cluster.patch_object(&pods(), NS, "zz", PatchType::Merge, &json!({}));
    assert_eq!(reason(missing), StatusReason::NotFound);
}

#[test]
fn a_json_patch_should_apply_through_the_same_write_path() {
    let cluster = SimCluster::new();
    create_pod(&cluster, "a", &["x/y", "z/w"]);
    let body = json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": "x/y"},
        {"op": "remove", "path": "/metadata/finalizers/0"},
    ]);
    let out = cluster
        .patch_object(&pods(), NS, "a", PatchType::Json, &body)
        .expect("patch");
    assert_eq!(out.metadata.finalizers, ["z/w"]);
    let failing = json!([{"op": "test", "path": "/metadata/name", "value": "b"}]);
    let result = cluster.patch_object(&pods(), NS, "a", PatchType::Json, &failing);
    assert_eq!(reason(result), StatusReason::Invalid);
}

#[tokio::test]
async fn watch_should_deliver_added_modified_and_deleted_in_order() {
    let cluster = SimCluster::new();
    let mut stream = cluster.watch(&pods(), None, "").await.expect("watch");
    create_pod(&cluster, "a", &[]);
    cluster
        .delete_object(&pods(), NS, "a", &policy(PropagationPolicy::Orphan))
        .expect("delete");
    cluster.create(&rcs(), object(NS, "unrelated")).expect("other type");
    cluster
        .patch_object(
            &pods(),
            NS,
            "a",
            PatchType::Merge,
            &json!({"metadata": {"finalizers": null}}),
        )
        .expect("finalize");
    let events = [
        next_event(&mut stream).await,
        next_event(&mut stream).await,
        next_event(&mut stream).await,
    ];
    let types: Vec<WatchEventType> = events.iter().map(|e| e.event_type).collect();
    assert_eq!(
        types,
        [WatchEventType::Added, WatchEventType::Modified, WatchEventType::Deleted]
    );
    let rvs: Vec<u64> = events
        .iter()
        .map(|e| e.object.metadata.resource_version.parse().expect("decimal"))
        .collect();
    assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{rvs:?}");
    assert!(events
        .iter()
        .all(|e| e.object.kind == "Pod" && e.object.api_version == "v1"));
    // DELETED carries the last stored state, finalizer included.
    assert_eq!(events[2].object.metadata.finalizers, [FINALIZER_ORPHAN]);
}

#[tokio::test]
async fn watch_should_replay_from_a_retained_resource_version() {
    let cluster = SimCluster::new();
    let a = create_pod(&cluster, "a", &[]);
    create_pod(&cluster, "b", &[]);
    let mut stream = cluster
        .watch(&pods(), None, &a.metadata.resource_version)
        .await
        .expect("watch");
    let replayed = next_event(&mut stream).await;
    assert_eq!(replayed.object.metadata.name, "b");
    create_pod(&cluster, "c", &[]);
    assert_eq!(next_event(&mut stream).await.object.metadata.name, "c");
}

#[tokio::test]
async fn watch_from_a_resource_version_older_than_the_history_should_be_gone() {
    let cluster = SimCluster::with_history(2);
    let first = create_pod(&cluster, "a", &[]);
    for name in ["b", "c", "d"] {
        create_pod(&cluster, name, &[]);
    }
    let err = cluster
        .watch(&pods(), None, &first.metadata.resource_version)
        .await
        .err()
        .expect("too old");
    assert_eq!(err.reason(), Some(StatusReason::Gone));
    let c = get_pod(&cluster, "c");
    let mut stream = cluster
        .watch(&pods(), None, &c.metadata.resource_version)
        .await
        .expect("retained");
    assert_eq!(next_event(&mut stream).await.object.metadata.name, "d");
}

#[tokio::test]
async fn unregister_should_delete_every_object_and_end_the_watch() {
    let cluster = cluster_with_widgets();
    cluster.create(&widgets(), object(NS, "w1")).expect("create");
    cluster.create(&widgets(), object("other", "w2")).expect("create");
    create_pod(&cluster, "p", &[]);
    let list = cluster.list_page(&widgets(), None, "", 0).await.expect("list");
    let mut stream = cluster
        .watch(&widgets(), None, &list.resource_version)
        .await
        .expect("watch");
    cluster.unregister("example.com", "widgets");
    assert_eq!(next_event(&mut stream).await.event_type, WatchEventType::Deleted);
    assert_eq!(next_event(&mut stream).await.event_type, WatchEventType::Deleted);
    let end = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
    assert!(matches!(end, Ok(None)), "the stream should end after the type goes");
    assert_eq!(cluster.object_count(), 1);
    assert!(cluster
        .list_page(&widgets(), None, "", 0)
        .await
        .expect_err("gone")
        .is_not_found());
}

fn names(page: &kube_gc::api::ObjectList) -> Vec<&str> {
    page.items.iter().map(|o| o.metadata.name.as_str()).collect()
}

#[tokio::test]
async fn list_pages_should_show_the_collection_at_the_first_pages_version() {
    let cluster = SimCluster::new();
    for name in ["a", "b", "c"] {
        create_pod(&cluster, name, &[]);
    }
    let first = cluster.list_page(&pods(), None, "", 2).await.expect("first page");
    assert_eq!(names(&first), ["a", "b"]);
    assert!(!first.continue_token.is_empty(), "a page follows");
    create_pod(&cluster, "d", &[]);
    cluster
        .delete_object(&pods(), NS, "c", &DeleteOptions::default())
        .expect("delete");

    let last = cluster
        .list_page(&pods(), None, &first.continue_token, 2)
        .await
        .expect("second page");
    assert_eq!(names(&last), ["c"], "the snapshot's, not the present's");
    assert_eq!(last.resource_version, first.resource_version);
    assert!(last.continue_token.is_empty(), "the last page has no continue token");
    assert_eq!(cluster.api_calls().list, 2, "one call per page");
    let whole = cluster.list_page(&pods(), None, "", 0).await.expect("unlimited");
    assert_eq!(names(&whole), ["a", "b", "d"]);
    assert!(whole.continue_token.is_empty());
}

#[tokio::test]
async fn a_finished_list_should_let_its_snapshot_go() {
    let cluster = SimCluster::new();
    for name in ["a", "b"] {
        create_pod(&cluster, name, &[]);
    }
    let first = cluster.list_page(&pods(), None, "", 1).await.expect("first page");
    let token = first.continue_token;
    cluster.list_page(&pods(), None, &token, 1).await.expect("last page");
    assert_eq!(
        reason(cluster.list_page(&pods(), None, &token, 1).await),
        StatusReason::Expired,
        "the list must start again"
    );
    assert_eq!(
        reason(cluster.list_page(&pods(), None, "not-a-token", 1).await),
        StatusReason::BadRequest
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_delay_should_hold_back_each_event() {
    let cluster = SimCluster::new();
    cluster.set_watch_delay("", "pods", Duration::from_secs(2));
    let mut stream = cluster.watch(&pods(), None, "0").await.expect("watch");
    create_pod(&cluster, "a", &[]);
    let started = tokio::time::Instant::now();
    assert_eq!(next_event(&mut stream).await.object.metadata.name, "a");
    assert!(started.elapsed() >= Duration::from_secs(2));
}

#[tokio::test]
async fn a_watch_blackout_should_lose_events_then_end_the_stream_with_410() {
    let cluster = SimCluster::new();
    let mut stream = cluster.watch(&pods(), None, "0").await.expect("watch");
    create_pod(&cluster, "before", &[]);
    assert_eq!(next_event(&mut stream).await.object.metadata.name, "before");
    cluster.set_watch_blackout("", "pods", true);
    create_pod(&cluster, "lost", &[]);
    let lost = tokio::time::timeout(Duration::from_millis(200), stream.next()).await;
    assert!(lost.is_err(), "nothing is delivered in the dark");
    cluster.set_watch_blackout("", "pods", false);
    create_pod(&cluster, "after", &[]);
    let end = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("in time");
    let err = end.expect("an item").expect_err("the lost event breaks the stream");
    assert_eq!(err.reason(), Some(StatusReason::Gone));
    let end = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
    assert!(matches!(end, Ok(None)), "the stream ends after its 410");
}

#[tokio::test]
async fn discovery_should_list_each_served_version_and_report_failing_groups() {
    let cluster = SimCluster::empty();
    cluster.register(TypeDef::new("apps", "v1", "Deployment", "deployments", true));
    cluster.register(
        TypeDef::new("example.com", "v1", "Widget", "widgets", false)
            .custom()
            .with_versions(&["v1beta1", "v1"], "v1"),
    );
    let discovery = cluster.discover().await.expect("discover");
    let served: Vec<(String, bool)> = discovery
        .resources
        .iter()
        .map(|r| (r.gvr.to_string(), r.preferred))
        .collect();
    assert_eq!(
        served,
        [
            ("apps/v1/deployments".to_string(), true),
            ("example.com/v1beta1/widgets".to_string(), false),
            ("example.com/v1/widgets".to_string(), true),
        ]
    );
    assert!(discovery.resources.iter().all(|r| r.is_deletable()));
    assert!(discovery.failed.is_empty());

    cluster.fail_discovery("apps/v1", true);
    let discovery = cluster.discover().await.expect("discover");
    assert_eq!(discovery.resources.len(), 2);
    assert!(discovery.failed.contains_key("apps/v1"));
}

#[tokio::test]
async fn api_calls_should_count_only_calls_through_the_trait() {
    let cluster = SimCluster::new();
    create_pod(&cluster, "a", &[]);
    get_pod(&cluster, "a");
    assert_eq!(cluster.api_calls().total(), 0);

    let pod = cluster.get(&pods(), NS, "a").await.expect("get");
    cluster.list_page(&pods(), None, "", 0).await.expect("list");
    let _stream = cluster.watch(&pods(), None, "").await.expect("watch");
    let body = json!({"metadata": {"labels": {"a": "b"}}});
    cluster
        .patch(&pods(), NS, "a", &Patch::new(PatchType::StrategicMerge, body))
        .await
        .expect("patch");
    cluster.discover().await.expect("discover");
    let event = EventRecord {
        involved_object: InvolvedObject {
            api_version: pod.api_version.clone(),
            kind: pod.kind.clone(),
            namespace: NS.into(),
            name: "a".into(),
            uid: pod.metadata.uid.clone(),
        },
        event_type: "Warning".into(),
        reason: "OwnerRefInvalidNamespace".into(),
        message: "m".into(),
        source_component: "garbage-collector-controller".into(),
    };
    cluster.create_event(&event).await.expect("event");
    cluster
        .delete(&pods(), NS, "a", &DeleteOptions::default())
        .await
        .expect("delete");
    assert!(cluster.get(&pods(), NS, "a").await.is_err());

    let calls = cluster.api_calls();
    assert_eq!(
        (
            calls.get,
            calls.list,
            calls.watch,
            calls.patch,
            calls.delete,
            calls.create_event,
            calls.discover
        ),
        (2, 1, 1, 1, 1, 1, 1)
    );
    assert_eq!(calls.total(), 8);
    assert_eq!(cluster.events(), [event]);
}

fn fault(verb: Verb, resource: Option<(&str, &str)>, error: ApiError, times: Option<usize>) -> Fault {
    Fault {
        verb,
        resource: resource.map(|(g, r)| (g.to_string(), r.to_string())),
        error,
        times,
    }
}

fn event_about(pod: &PartialObjectMeta) -> EventRecord {
    EventRecord {
        involved_object: InvolvedObject {
            api_version: pod.api_version.clone(),
            kind: pod.kind.clone(),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
        },
        event_type: "Warning".into(),
        reason: "OwnerRefInvalidNamespace".into(),
        message: "m".into(),
        source_component: "garbage-collector-controller".into(),
    }
}

#[tokio::test]
async fn a_fault_should_fail_matching_trait_calls_until_cleared_and_still_count_them() {
    let cluster = cluster_with_widgets();
    let broken = ApiError::status(StatusReason::InternalError, "conversion webhook unavailable");
    cluster.inject_fault(fault(
        Verb::List,
        Some(("example.com", "widgets")),
        broken.clone(),
        None,
    ));
    for _ in 0..3 {
        assert_eq!(
            cluster.list_page(&widgets(), None, "", 0).await.map(|_| ()),
            Err(broken.clone())
        );
    }
    // Other resources and other verbs of the same resource are untouched.
    cluster.list_page(&pods(), None, "", 0).await.expect("pods still list");
    let _watch = cluster.watch(&widgets(), None, "").await.expect("widgets still watch");
    assert_eq!(cluster.api_calls().list, 4, "a failed call still reached the server");

    cluster.clear_faults();
    cluster
        .list_page(&widgets(), None, "", 0)
        .await
        .expect("widgets list once cleared");
}

#[tokio::test]
async fn a_fault_with_times_should_answer_that_many_calls_then_disarm_itself() {
    let cluster = SimCluster::new();
    create_pod(&cluster, "a", &[]);
    let conflict = ApiError::status(StatusReason::Conflict, "the server reported a conflict");
    cluster.inject_fault(fault(Verb::Get, None, conflict.clone(), Some(2)));
    cluster.inject_fault(fault(Verb::Get, None, conflict.clone(), Some(0)));
    assert_eq!(reason(cluster.get(&pods(), NS, "a").await), StatusReason::Conflict);
    assert_eq!(reason(cluster.get(&rcs(), NS, "x").await), StatusReason::Conflict);
    // Exhausted: the real answers come back, and a zero-times fault never answered anything.
    cluster
        .get(&pods(), NS, "a")
        .await
        .expect("get after the fault is used up");
    assert_eq!(reason(cluster.get(&rcs(), NS, "x").await), StatusReason::NotFound);
}

#[tokio::test]
async fn the_first_matching_fault_should_answer_and_match_any_version_of_its_resource() {
    let cluster = SimCluster::new();
    cluster.register(
        TypeDef::new("example.com", "v1", "Widget", "widgets", true)
            .custom()
            .with_versions(&["v1beta1", "v1"], "v1"),
    );
    cluster.create(&widgets(), object(NS, "w")).expect("create widget");
    let gone = ApiError::status(StatusReason::Gone, "too old");
    let throttled = ApiError::status(StatusReason::TooManyRequests, "slow down");
    cluster.inject_fault(fault(
        Verb::Delete,
        Some(("example.com", "widgets")),
        gone.clone(),
        None,
    ));
    cluster.inject_fault(fault(Verb::Delete, None, throttled.clone(), None));
    let opts = DeleteOptions::default();
    let old_version = Gvr::new("example.com", "v1beta1", "widgets");
    assert_eq!(cluster.delete(&old_version, NS, "w", &opts).await, Err(gone.clone()));
    assert_eq!(cluster.delete(&widgets(), NS, "w", &opts).await, Err(gone));
    assert_eq!(cluster.delete(&pods(), NS, "w", &opts).await, Err(throttled));
    assert!(
        cluster.get_object(&widgets(), NS, "w").is_ok(),
        "a failed delete deletes nothing"
    );
}

#[tokio::test]
async fn discovery_and_events_should_match_only_faults_without_a_resource() {
    let cluster = SimCluster::new();
    let pod = create_pod(&cluster, "a", &[]);
    let down = ApiError::status(StatusReason::InternalError, "etcd unavailable");
    cluster.inject_fault(fault(Verb::Discovery, Some(("", "pods")), down.clone(), None));
    cluster.inject_fault(fault(Verb::Create, Some(("", "pods")), down.clone(), None));
    cluster
        .discover()
        .await
        .expect("a resource-bound fault never matches discovery");
    cluster.create_event(&event_about(&pod)).await.expect("nor an event");

    cluster.inject_fault(fault(Verb::Discovery, None, down.clone(), Some(1)));
    cluster.inject_fault(fault(Verb::Create, None, down.clone(), Some(1)));
    assert_eq!(cluster.discover().await.map(|_| ()), Err(down.clone()));
    assert_eq!(cluster.create_event(&event_about(&pod)).await, Err(down));
    assert_eq!(cluster.events().len(), 1, "the failed event was not recorded");
}

#[tokio::test]
async fn faults_should_never_touch_the_user_methods() {
    let cluster = SimCluster::new();
    let broken = ApiError::status(StatusReason::InternalError, "broken");
    for verb in [Verb::Get, Verb::List, Verb::Watch, Verb::Patch, Verb::Delete] {
        cluster.inject_fault(fault(verb, None, broken.clone(), None));
    }
    create_pod(&cluster, "a", &[]);
    get_pod(&cluster, "a");
    assert_eq!(cluster.list_objects(&pods()).len(), 1);
    let body = json!({"metadata": {"labels": {"a": "b"}}});
    cluster
        .patch_object(&pods(), NS, "a", PatchType::StrategicMerge, &body)
        .expect("user patch");
    cluster
        .delete_object(&pods(), NS, "a", &DeleteOptions::default())
        .expect("user delete");
    assert_eq!(cluster.api_calls().total(), 0);

    // The same calls through the trait all fail, and a failed patch writes nothing.
    create_pod(&cluster, "b", &[]);
    assert!(cluster
        .patch(&pods(), NS, "b", &Patch::new(PatchType::StrategicMerge, body))
        .await
        .is_err());
    assert!(get_pod(&cluster, "b").metadata.labels.is_empty());
    assert!(cluster.watch(&pods(), None, "").await.is_err());
}

#[tokio::test]
async fn a_stored_watch_should_share_each_stored_object_and_copy_only_a_deleted_one() {
    let cluster = SimCluster::new();
    create_pod(&cluster, "a", &[]);
    let stored = |cluster: &SimCluster| cluster.watch_stored(&pods(), "").expect("watch").stream;
    let (mut one, mut two) = (stored(&cluster), stored(&cluster));
    let (a1, a2) = (next_event(&mut one).await, next_event(&mut two).await);
    assert!(
        std::sync::Arc::ptr_eq(&a1.object, &a2.object),
        "two watch-lists share the stored object"
    );
    assert_eq!((a1.object.kind.as_str(), a1.object.api_version.as_str()), ("", ""));
    let mut stamped = cluster.watch_objects(&pods(), "").expect("watch").stream;
    let a3 = next_event(&mut stamped).await;
    assert_eq!((a3.object.kind.as_str(), a3.object.api_version.as_str()), ("Pod", "v1"));
    assert_eq!(a3.object.metadata, a1.object.metadata);
    cluster
        .delete_object(&pods(), NS, "a", &DeleteOptions::default())
        .expect("delete");
    let deleted = next_event(&mut one).await;
    assert_eq!(deleted.event_type, WatchEventType::Deleted);
    let at: u64 = deleted.object.metadata.resource_version.parse().expect("a number");
    assert_eq!(at, cluster.resource_version(), "the delete's own version, on a copy");
    assert_ne!(
        a1.object.metadata.resource_version,
        deleted.object.metadata.resource_version
    );
}
