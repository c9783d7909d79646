//! Bad input gets a clear error, never a panic, and never a wrong deletion.
//!
//! Malformed owner references are stopped at the edges (the simulated API server answers 422
//! Invalid naming the field; [`GraphEvent::observed`] refuses them, and a monitor skips them).
//! References that are well-formed but odd (self-ownership, duplicates, cycles, unknown kinds)
//! reach the collector, which must keep what upstream keeps.

use crate::support;

use kube_gc::api::{
    ApiError, ClusterApi, ObjectMeta, OwnerReference, PartialObjectMeta, Patch, PatchType, PropagationPolicy,
    StatusReason,
};
use kube_gc::controller::{Config, GarbageCollector};
use kube_gc::event::{EventType, GraphEvent, InvalidObject};
use kube_gc::graph::{invariants, Graph, Uid};
use kube_gc::queue::QueueState;
use kube_gc_sim::simulate::{self, SimulateOptions};
use kube_gc_sim::SimCluster;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use support::*;

const NS: &str = "ns1";

/// A well-formed ref to an RC named `rc` with UID `rc-uid`.
fn good_ref() -> OwnerReference {
    ref_named("v1", "ReplicationController", "rc", "rc-uid")
}

/// Each malformed ownerReferences list, with the field path the error must name (upstream names
/// the list, never an index).
fn malformed() -> Vec<(&'static str, Vec<OwnerReference>, &'static str)> {
    let controller = OwnerReference {
        controller: Some(true),
        ..good_ref()
    };
    let second_controller = OwnerReference {
        uid: "rc2-uid".into(),
        name: "rc2".into(),
        ..controller.clone()
    };
    vec![
        (
            "empty uid",
            vec![
                good_ref(),
                OwnerReference {
                    uid: String::new(),
                    ..good_ref()
                },
            ],
            "metadata.ownerReferences.uid",
        ),
        (
            "missing kind",
            vec![OwnerReference {
                kind: String::new(),
                ..good_ref()
            }],
            "metadata.ownerReferences.kind",
        ),
        (
            "apiVersion without a version",
            vec![OwnerReference {
                api_version: "apps/".into(),
                ..good_ref()
            }],
            "metadata.ownerReferences.apiVersion",
        ),
        (
            "apiVersion that is not a group-version",
            vec![OwnerReference {
                api_version: "apps/v1/extra".into(),
                ..good_ref()
            }],
            "metadata.ownerReferences.apiVersion",
        ),
        (
            "two controllers",
            vec![controller, second_controller],
            "metadata.ownerReferences",
        ),
        (
            "a core Event as the owner",
            vec![ref_named("v1", "Event", "ev", "ev-uid")],
            "metadata.ownerReferences",
        ),
    ]
}

fn pod_with(owners: Vec<OwnerReference>) -> PartialObjectMeta {
    PartialObjectMeta {
        metadata: ObjectMeta {
            uid: "pod-uid".into(),
            ..meta(NS, "pod", owners)
        },
        ..Default::default()
    }
}

fn invalid_message<T: std::fmt::Debug>(what: &str, result: Result<T, ApiError>) -> String {
    match result {
        Err(ApiError::Status {
            reason: StatusReason::Invalid,
            message,
            ..
        }) => message,
        other => panic!("{what}: expected 422 Invalid, got {other:?}"),
    }
}

#[tokio::test]
async fn the_server_should_reject_malformed_owner_references_with_422_naming_the_field() {
    let cluster = SimCluster::new();
    let good = cluster.create(&pods(), pod_with(vec![good_ref()])).expect("a good pod");
    for (case, refs, field) in malformed() {
        let message = invalid_message(case, cluster.create(&pods(), pod_with(refs.clone())));
        assert!(message.contains(field), "{case}: {message:?} should name {field}");

        let mut update = good.clone();
        update.metadata.owner_references = refs.clone();
        let message = invalid_message(case, cluster.update(&pods(), update));
        assert!(message.contains(field), "{case} (update): {message:?}");

        // Through the GC's own face too: a patch that would write the bad list is refused.
        let body = json!({"metadata": {"ownerReferences": refs}});
        let message = invalid_message(
            case,
            cluster
                .patch(&pods(), NS, "pod", &Patch::new(PatchType::Merge, body))
                .await,
        );
        assert!(message.contains(field), "{case} (patch): {message:?}");
    }
    let stored = cluster.get_object(&pods(), NS, "pod").expect("still there");
    assert_eq!(
        stored.metadata.owner_references,
        [good_ref()],
        "no rejected write changed the pod"
    );
}

#[test]
fn graph_event_observed_should_reject_malformed_owner_references_with_invalid_object() {
    let graph = Graph::new();
    for (case, refs, field) in malformed() {
        let obj = pod_with(refs);
        let err = GraphEvent::observed(&graph, EventType::Add, &obj.metadata, "v1", "Pod").expect_err(case);
        match &err {
            InvalidObject::OwnerReference {
                namespace,
                name,
                source,
            } => {
                assert_eq!((namespace.as_str(), name.as_str()), (NS, "pod"), "{case}");
                let fields: Vec<&str> = source.errors.iter().map(|e| e.field.as_str()).collect();
                assert_eq!(fields, [field], "{case}");
            }
            other => panic!("{case}: expected an owner-reference error, got {other:?}"),
        }
        let message = err.to_string();
        assert!(
            message.contains("ns1/pod") && message.contains(field),
            "{case}: {message}"
        );
    }
    let no_uid = ObjectMeta {
        uid: String::new(),
        ..pod_with(vec![]).metadata
    };
    assert!(matches!(
        GraphEvent::observed(&graph, EventType::Update, &no_uid, "v1", "Pod"),
        Err(InvalidObject::MissingUid { .. })
    ));
    assert!(graph.is_empty(), "a rejected object never reaches the graph");
}

#[tokio::test(start_paused = true)]
async fn a_monitor_should_skip_unreadable_objects_and_keep_the_rest_flowing() {
    let inner = SimCluster::new();
    let owner = inner
        .create(
            &rcs(),
            PartialObjectMeta {
                metadata: meta(NS, "rc", vec![]),
                ..Default::default()
            },
        )
        .expect("rc");
    let child = inner
        .create(
            &pods(),
            PartialObjectMeta {
                metadata: meta(NS, "child", vec![ref_to(&owner)]),
                ..Default::default()
            },
        )
        .expect("child");
    let mut bad: Vec<PartialObjectMeta> = malformed()
        .into_iter()
        .enumerate()
        .map(|(i, (_, refs, _))| {
            let mut p = pod_with(refs);
            p.metadata.name = format!("bad-{i}");
            p.metadata.uid = format!("bad-uid-{i}");
            p
        })
        .collect();
    bad.push(PartialObjectMeta {
        metadata: ObjectMeta {
            uid: String::new(),
            ..meta(NS, "no-uid", vec![])
        },
        ..Default::default()
    });
    let bad_uids: Vec<Uid> = bad.iter().map(|p| Uid::parse(&p.metadata.uid)).collect();
    // Pod LISTs and WATCHes also return objects no API server would store, as a buggy
    // aggregated API or a corrupted cache might.
    let cluster = Arc::new(Recorder::new(Arc::new(inner)));
    cluster.inject(pods(), bad);
    let gc = GarbageCollector::start(cluster.clone(), Config::default()).await;
    assert!(
        gc.wait_for_sync(Duration::from_secs(60)).await,
        "unreadable objects must not stall the sync"
    );

    let graph = gc.graph().clone();
    let child_uid = Uid::parse(&child.metadata.uid);
    eventually("the readable child in the graph", || graph.contains(&child_uid)).await;
    assert!(
        bad_uids.iter().all(|uid| !graph.contains(uid)),
        "no unreadable object may enter the graph"
    );

    // The readable objects still get collected.
    cluster
        .inner
        .delete_object(&rcs(), NS, "rc", &policy(PropagationPolicy::Background))
        .expect("delete the rc");
    eventually("the child collected", || {
        cluster.inner.get_object(&pods(), NS, "child").is_err()
    })
    .await;
    invariants::assert_ok(&graph);
    gc.shutdown().await;
}

/// An object that lists itself as its owner is its own solid owner: the collector keeps it.
#[tokio::test(start_paused = true)]
async fn a_self_owned_object_should_be_kept_and_its_deletion_should_not_panic() {
    let cluster = SimCluster::new();
    let narcissus = OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: "narcissus".into(),
        uid: "self-uid".into(),
        block_owner_deletion: Some(true),
        ..Default::default()
    };
    let pod = cluster
        .create(&pods(), pod_named("narcissus", "self-uid", vec![narcissus]))
        .expect("a self-owned pod is valid");

    // Step by step: an attempt on it finds a solid owner and forgets it.
    let rig = Rig::new(SimCluster::new()).await;
    let same = rig.create(&pods(), pod.metadata.clone());
    rig.observe(EventType::Add, &same);
    let node = rig.graph.get(&Uid::parse("self-uid")).expect("in the graph");
    assert_eq!(node.dependents_len(), 1, "it is its own dependent");
    rig.collector.attempt_to_delete().add(node.clone());
    assert!(rig.step_delete().await);
    assert_eq!(
        rig.collector.attempt_to_delete().contains(&node),
        QueueState::Absent,
        "forgotten, not retried"
    );
    assert!(rig.cluster.get_object(&pods(), NS, "narcissus").is_ok());

    // End to end: kept for good, and a user's delete removes it cleanly from the graph.
    let h = Harness::start_with(cluster, Config::default()).await;
    h.wait_in_graph(&[&pod]).await;
    h.settle().await;
    h.wait(Duration::from_secs(600)).await;
    assert!(h.exists(&pods(), &pod), "a self-owned object must not be collected");
    assert_eq!(h.cluster.api_calls().delete, 0);
    h.delete(&pods(), &pod, policy(PropagationPolicy::Background));
    h.eventually("the node gone from the graph", || !h.in_graph(&pod)).await;
    h.settle().await;
    assert!(h.gc.graph().is_empty());
    h.gc.shutdown().await;
}

fn pod_named(name: &str, uid: &str, owners: Vec<OwnerReference>) -> PartialObjectMeta {
    PartialObjectMeta {
        metadata: ObjectMeta {
            uid: uid.into(),
            ..meta(NS, name, owners)
        },
        ..Default::default()
    }
}

/// Duplicate refs: the server drops exact copies; refs to one UID that differ elsewhere are kept,
/// and the collector treats them as one owner.
#[tokio::test(start_paused = true)]
async fn duplicate_owner_refs_should_count_as_one_owner() {
    let h = Harness::start().await;
    let rc = h.create(&rcs(), meta(NS, "rc", vec![]));
    let exact = h.create(&pods(), meta(NS, "exact", vec![ref_to(&rc), ref_to(&rc)]));
    assert_eq!(
        exact.metadata.owner_references.len(),
        1,
        "exact duplicates are dropped on create"
    );
    let as_controller = OwnerReference {
        controller: Some(true),
        block_owner_deletion: Some(true),
        ..ref_to(&rc)
    };
    let twice = h.create(&pods(), meta(NS, "twice", vec![ref_to(&rc), as_controller]));
    assert_eq!(
        twice.metadata.owner_references.len(),
        2,
        "refs that differ are both kept"
    );
    h.wait_in_graph(&[&rc, &exact, &twice]).await;
    h.settle().await;
    let rc_node = h.gc.graph().get(&Uid::parse(&rc.metadata.uid)).expect("rc node");
    assert_eq!(rc_node.dependents_len(), 2, "one dependent entry per pod");
    assert_eq!(rc_node.blocking_dependents().len(), 1, "listed once per blocking ref");

    // Dropping one of the two refs keeps the pod linked to its owner.
    let mut one_ref = h.get(&pods(), &twice).expect("twice");
    one_ref.metadata.owner_references.truncate(1);
    h.cluster.update(&pods(), one_ref).expect("update");
    h.settle().await;
    assert_eq!(rc_node.dependents_len(), 2);
    assert!(
        h.exists(&pods(), &twice) && h.exists(&pods(), &exact),
        "a live owner keeps both"
    );

    h.delete(&rcs(), &rc, policy(PropagationPolicy::Background));
    h.eventually("both pods collected", || {
        !h.exists(&pods(), &exact) && !h.exists(&pods(), &twice)
    })
    .await;
    h.settle().await;
    h.gc.shutdown().await;
}

/// Two objects that own each other and nothing else: each has a solid owner, so both stay, as
/// upstream keeps them. Deleting either one collects the other; a foreground delete through
/// blocking refs does not deadlock (the unblock patch breaks the cycle).
#[tokio::test(start_paused = true)]
async fn an_owner_cycle_should_be_kept_until_one_side_is_deleted() {
    for deletion in [PropagationPolicy::Background, PropagationPolicy::Foreground] {
        let cluster = SimCluster::new();
        let to = |name: &str, uid: &str| OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: name.into(),
            uid: uid.into(),
            block_owner_deletion: Some(true),
            ..Default::default()
        };
        let cm = |name: &str, uid: &str, owner: OwnerReference| {
            cluster
                .create(&configmaps(), pod_named(name, uid, vec![owner]))
                .unwrap_or_else(|e| panic!("create {name}: {e}"))
        };
        let a = cm("a", "a-uid", to("b", "b-uid"));
        let b = cm("b", "b-uid", to("a", "a-uid"));
        let h = Harness::start_with(cluster, Config::default()).await;
        h.wait_in_graph(&[&a, &b]).await;
        h.settle().await;
        h.wait(Duration::from_secs(600)).await;
        assert!(
            h.exists(&configmaps(), &a) && h.exists(&configmaps(), &b),
            "{deletion:?}: both kept"
        );
        assert_eq!(h.cluster.api_calls().delete, 0, "{deletion:?}");

        h.delete(&configmaps(), &a, policy(deletion));
        h.eventually("the whole cycle collected", || {
            !h.exists(&configmaps(), &a) && !h.exists(&configmaps(), &b)
        })
        .await;
        h.settle().await;
        assert!(h.gc.graph().is_empty(), "{deletion:?}");
        h.gc.shutdown().await;
    }
}

/// Refs to a kind no server serves (or to a version no longer served): the owner cannot be looked
/// up, so the dependent is kept and retried with growing backoff, never deleted (spec §12.6).
#[tokio::test(start_paused = true)]
async fn refs_to_unknown_kinds_should_be_kept_and_retried_with_backoff() {
    let gizmo = ref_named("unknown.example.com/v1", "Gizmo", "gizmo", "gizmo-uid");
    let old_deployment = ref_named("extensions/v1beta1", "Deployment", "web", "deploy-uid");

    // Step by step: every attempt fails on the mapping and is requeued with a longer delay.
    let rig = Rig::new(SimCluster::new()).await;
    let pod = rig.create(&pods(), pod_named("pod", "pod-uid", vec![gizmo.clone()]).metadata);
    rig.observe(EventType::Add, &pod);
    let owner = rig.graph.get(&Uid::parse("gizmo-uid")).expect("virtual owner");
    assert!(owner.is_virtual());
    let item = rig.graph.get(&Uid::parse("pod-uid")).expect("pod node");
    rig.collector.attempt_to_delete().add(item.clone());
    for round in 1..=5u32 {
        while rig.step_delete().await {}
        for handle in [&owner, &item] {
            assert_eq!(
                rig.collector.attempt_to_delete().num_requeues(handle),
                round,
                "{handle:?}"
            );
            assert_eq!(
                rig.collector.attempt_to_delete().contains(handle),
                QueueState::Delayed,
                "{handle:?}"
            );
        }
        // The per-item delay doubles: 5 ms, 10 ms, 20 ms, ...
        let delay = Duration::from_millis(5 << (round - 1));
        tokio::time::sleep(delay - Duration::from_millis(1)).await;
        assert_eq!(
            rig.collector.attempt_to_delete().contains(&item),
            QueueState::Delayed,
            "round {round}: too early"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert_eq!(
            rig.collector.attempt_to_delete().contains(&item),
            QueueState::Queued,
            "round {round}: due"
        );
    }
    assert!(rig.cluster.get_object(&pods(), NS, "pod").is_ok());

    // End to end, next to a pod whose owner is simply gone (which is collected).
    let h = Harness::start().await;
    let kept = h.create(&pods(), meta(NS, "kept", vec![gizmo]));
    let kept_too = h.create(&pods(), meta(NS, "kept-too", vec![old_deployment]));
    let gone = h.create(
        &pods(),
        meta(
            NS,
            "gone",
            vec![OwnerReference {
                uid: "missing-uid".into(),
                ..good_ref()
            }],
        ),
    );
    h.eventually("the pod with a missing owner collected", || !h.exists(&pods(), &gone))
        .await;
    h.wait(Duration::from_secs(600)).await;
    assert!(
        h.exists(&pods(), &kept),
        "an unknown owner kind never gets a dependent deleted"
    );
    assert!(h.exists(&pods(), &kept_too), "nor does an unserved owner version");
    assert!(h
        .gc
        .graph()
        .get(&Uid::parse("gizmo-uid"))
        .is_some_and(|n| n.is_virtual()));
    assert_eq!(
        h.cluster.api_calls().delete,
        1,
        "only the pod with a missing owner was deleted"
    );
    h.gc.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_simulation_demo_should_converge_and_keep_untouched_trees() {
    let options = SimulateOptions {
        objects: 500,
        ..Default::default()
    };
    let summary = simulate::run(&options).await.expect("the demo runs");
    assert!(summary.converged, "{summary}");
    assert!(summary.objects_created >= 500, "{summary}");
    assert!(summary.untouched_total > 0, "{summary}");
    assert_eq!(summary.untouched_present, summary.untouched_total, "{summary}");
    for policy in ["Background", "Foreground"] {
        let outcome = summary
            .by_policy
            .get(policy)
            .unwrap_or_else(|| panic!("no {policy} tree: {summary}"));
        assert!(outcome.roots > 0, "{summary}");
        assert_eq!(
            (outcome.orphaned, outcome.kept),
            (0, 0),
            "{policy} trees must be fully deleted: {summary}"
        );
    }
    let orphan = summary.by_policy.get("Orphan").expect("an Orphan tree");
    assert_eq!(
        orphan.deleted, orphan.roots,
        "orphaning deletes only the roots: {summary}"
    );
    assert!(orphan.orphaned > 0, "{summary}");
}
