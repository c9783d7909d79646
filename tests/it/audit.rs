//! The periodic audit (`--audit-period`): drift put into the graph by hand, as a lost or
//! misapplied watch event would leave it, is found after its recheck, counted by kind, and
//! repaired with the events a relist would route; a graph that matches the cluster reports none,
//! and no repair makes the collector delete anything.

use crate::support::{blocking_ref_to, deployments, meta, pods, ref_to, replicasets, Harness};
use kube_gc::api::{ObjectMeta, PartialObjectMeta};
use kube_gc::audit::{AuditConfig, DriftKind};
use kube_gc::controller::Config;
use kube_gc::event::{EventType, GraphEvent};
use kube_gc::graph::Uid;
use kube_gc_sim::SimCluster;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::time::Duration;

/// Every node sampled in one round, and a short recheck.
fn whole_graph() -> AuditConfig {
    AuditConfig {
        period: Duration::from_secs(1),
        sample: 1000,
        recheck_after: Duration::from_secs(1),
    }
}

/// The drift counters, by kind.
fn drift(h: &Harness) -> [u64; 3] {
    DriftKind::ALL.map(|kind| h.gc.audit_metrics().drift(kind))
}

/// An observed pod event for `meta`, as the pods' monitor would route it.
fn pod_event(h: &Harness, event_type: EventType, meta: &ObjectMeta) -> GraphEvent {
    GraphEvent::observed(h.gc.graph(), event_type, meta, "v1", "Pod").expect("a readable pod")
}

/// A Deployment, its ReplicaSet and a Pod of it, all in the graph.
async fn chain(h: &Harness) -> [PartialObjectMeta; 3] {
    let d = h.create(&deployments(), meta("default", "d", vec![]));
    let rs = h.create(&replicasets(), meta("default", "rs", vec![blocking_ref_to(&d)]));
    let pod = h.create(&pods(), meta("default", "p", vec![ref_to(&rs)]));
    h.wait_in_graph(&[&d, &rs, &pod]).await;
    h.settle().await;
    [d, rs, pod]
}

#[tokio::test(start_paused = true)]
async fn a_graph_that_matches_the_cluster_should_report_no_drift() {
    let h = Harness::start().await;
    let objects = chain(&h).await;
    let auditor = h.gc.auditor(whole_graph());
    let mut rng = SmallRng::seed_from_u64(7);
    for _ in 0..30 {
        assert_eq!(auditor.round(&mut rng).await, Vec::new());
    }
    assert!(
        h.gc.audit_metrics().checked() >= 30 * 3,
        "every round compared the sampled nodes"
    );
    assert_eq!(drift(&h), [0, 0, 0]);
    for (gvr, obj) in [deployments(), replicasets(), pods()].iter().zip(&objects) {
        assert!(h.exists(gvr, obj), "nothing deleted");
    }
}

#[tokio::test(start_paused = true)]
async fn a_node_for_an_object_the_cluster_lacks_should_be_found_gone_and_removed_by_the_running_audit() {
    let config = Config {
        audit: Some(whole_graph()),
        ..Config::default()
    };
    let h = Harness::start_with(SimCluster::new(), config).await;
    let objects = chain(&h).await;
    // A delete event that never arrived: the graph holds a pod the cluster does not have.
    let ghost = ObjectMeta {
        uid: "0b0e2a4c-0000-4000-8000-0000000a0d17".into(),
        resource_version: "3".into(),
        ..meta("default", "ghost", vec![])
    };
    h.gc.router().route(pod_event(&h, EventType::Add, &ghost));
    let uid = Uid::parse(&ghost.uid);
    h.eventually("the ghost in the graph", || h.gc.graph().contains(&uid))
        .await;
    h.eventually("the ghost found gone and removed", || !h.gc.graph().contains(&uid))
        .await;
    assert_eq!(drift(&h), [0, 0, 1], "one gone, counted once");
    h.settle().await;
    for (gvr, obj) in [deployments(), replicasets(), pods()].iter().zip(&objects) {
        assert!(h.exists(gvr, obj), "nothing deleted");
    }
}

#[tokio::test(start_paused = true)]
async fn a_node_the_graph_lost_should_be_found_missing_in_a_list_page_and_added_back() {
    let h = Harness::start().await;
    let [_, rs, pod] = chain(&h).await;
    let pod_id =
        h.gc.graph()
            .get(&Uid::parse(&pod.metadata.uid))
            .expect("the pod's node");
    // The node goes as if the pod had been deleted; the pod is still there.
    h.gc.router().route(GraphEvent::virtual_delete(pod_id.identity()));
    let uid = pod_id.identity().uid.clone();
    h.eventually("the pod's node gone", || !h.gc.graph().contains(&uid))
        .await;

    let auditor = h.gc.auditor(whole_graph());
    let mut rng = SmallRng::seed_from_u64(11);
    // Each round lists one page of a random resource; the pods' page comes up in a few dozen.
    for _ in 0..200 {
        if !auditor.round(&mut rng).await.is_empty() {
            break;
        }
    }
    assert_eq!(drift(&h), [1, 0, 0], "one missing");
    h.eventually("the pod back in the graph", || h.gc.graph().contains(&uid))
        .await;
    let node = h.gc.graph().get(&uid).expect("the pod's node");
    assert_eq!(node.owners().len(), 1, "with its owner");
    assert!(
        h.gc.graph()
            .get(&Uid::parse(&rs.metadata.uid))
            .is_some_and(|rs| rs.dependents_len() == 1),
        "and under it"
    );
    h.settle().await;
    assert!(h.exists(&pods(), &pod), "nothing deleted");
}

#[tokio::test(start_paused = true)]
async fn a_node_behind_its_object_should_be_found_stale_and_brought_up_to_date() {
    let h = Harness::start().await;
    let [_, rs, pod] = chain(&h).await;
    // An older state of the pod, with no owner, applied over the current one.
    let old = ObjectMeta {
        resource_version: "1".into(),
        owner_references: Vec::new(),
        ..pod.metadata.clone()
    };
    h.gc.router().route(pod_event(&h, EventType::Update, &old));
    let uid = Uid::parse(&pod.metadata.uid);
    h.eventually("the pod's node without its owner", || {
        h.gc.graph().get(&uid).is_some_and(|n| n.owners().is_empty())
    })
    .await;

    let auditor = h.gc.auditor(whole_graph());
    let found = auditor.round(&mut SmallRng::seed_from_u64(3)).await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(drift(&h), [0, 1, 0], "one stale");
    h.eventually("the pod's node with its owner again", || {
        h.gc.graph().get(&uid).is_some_and(|n| n.owners().len() == 1)
    })
    .await;
    assert_eq!(
        h.gc.graph()
            .get(&uid)
            .expect("node")
            .observation()
            .resource_version
            .to_string(),
        h.get(&pods(), &pod).expect("the pod").metadata.resource_version,
        "at the pod's version"
    );
    assert!(h
        .gc
        .graph()
        .get(&Uid::parse(&rs.metadata.uid))
        .is_some_and(|rs| rs.dependents_len() == 1));
    h.settle().await;
    assert!(h.exists(&pods(), &pod), "nothing deleted");
}

#[tokio::test(start_paused = true)]
async fn a_suspect_the_watch_catches_up_with_should_not_count_as_drift() {
    let h = Harness::start().await;
    chain(&h).await;
    // Created while the round reads: the list page may show it before its watch event arrives,
    // and the recheck finds it in the graph.
    let auditor = h.gc.auditor(whole_graph());
    let mut rng = SmallRng::seed_from_u64(5);
    for i in 0..40 {
        h.create(&pods(), meta("default", &format!("new-{i}"), vec![]));
        assert_eq!(auditor.round(&mut rng).await, Vec::new());
    }
    assert_eq!(drift(&h), [0, 0, 0]);
}
