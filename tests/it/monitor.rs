//! A monitor's deletes after a whole read, against the simulated cluster and a builder the test
//! can hold back: a vanished object's delete is named from its graph node, so the read must not
//! end before the builders applied the monitor's own add of it.

use kube_gc::api::{DeleteOptions, Gvk, Gvr, ObjectMeta, PartialObjectMeta};
use kube_gc::builder::GraphBuilder;
use kube_gc::graph::{GraphWriter, Uid};
use kube_gc::monitor::{start, SyncMode};
use kube_gc::router::{PartitionReceiver, Router};
use kube_gc_sim::SimCluster;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

const NS: &str = "default";

fn pods() -> Gvr {
    Gvr::new("", "v1", "pods")
}

/// Creates a pod with no owners and returns its UID.
fn create_pod(cluster: &SimCluster, name: &str) -> Uid {
    let pod = PartialObjectMeta {
        metadata: ObjectMeta {
            name: name.into(),
            namespace: NS.into(),
            ..Default::default()
        },
        ..Default::default()
    };
    let created = cluster.create(&pods(), pod).expect("create a pod");
    Uid::parse(&created.metadata.uid)
}

/// A builder that applies each routed event only while `open` holds true, so a test can keep
/// events in flight.
fn spawn_gated_builder(
    graph: GraphWriter,
    mut events: PartitionReceiver,
    mut open: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let builder = GraphBuilder::detached(graph);
        while let Some(event) = events.recv().await {
            if open.wait_for(|open| *open).await.is_err() {
                return;
            }
            builder.process_graph_changes(event);
            events.applied(1);
        }
    })
}

/// Waits, at most 30 s of the paused clock, until `done` holds; panics naming `what` if it never
/// does.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..3000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

/// Syncs a pods monitor reading by `mode`, holds the builder back, has a pod created (its add is
/// routed and stays in flight) then deleted while the watch is dark, so that the monitor reads
/// every pod again without it; the read's delete of that pod must follow the add once the
/// builder goes on, and leave the graph without it.
async fn vanished_pod_with_its_add_in_flight_should_be_deleted(mode: SyncMode) {
    let cluster = Arc::new(SimCluster::new());
    let writer = GraphWriter::new();
    let graph = writer.graph().clone();
    let (router, mut receivers) = Router::new(1);
    let (gate, open) = watch::channel(true);
    let builder = spawn_gated_builder(writer, receivers.remove(0), open);
    let kept = create_pod(&cluster, "kept");
    let monitor = start(
        cluster.clone(),
        graph.clone(),
        router.clone(),
        (pods(), Gvk::from_api_version("v1", "Pod")),
        mode,
        None,
    );
    eventually("the first sync", || monitor.has_synced() && graph.contains(&kept)).await;

    gate.send_replace(false);
    let vanished = create_pod(&cluster, "vanished");
    eventually("the watch routed the pod's add", || router.in_flight() == 1).await;
    cluster.set_watch_blackout("", "pods", true);
    cluster
        .delete_object(&pods(), NS, "vanished", &DeleteOptions::default())
        .expect("delete the pod");
    // The stream loses the delete as it reaches it in the dark.
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.set_watch_blackout("", "pods", false);
    // Its event ends the watch with 410 (an event was lost): the monitor reads the pods again.
    let nudge = create_pod(&cluster, "nudge");
    eventually("the relist began", || monitor.status().relists() == 1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        monitor.status().is_relisting(),
        "the read does not end while the vanished pod's add is in flight"
    );
    assert!(!graph.contains(&vanished), "the builder was held back");

    gate.send_replace(true);
    eventually("the relist ended and the builder applied it", || {
        monitor.status().is_complete() && router.in_flight() == 0
    })
    .await;
    assert!(!graph.contains(&vanished), "the vanished pod's delete followed its add");
    assert!(graph.contains(&kept) && graph.contains(&nudge), "the pods listed stay");
    assert_eq!(graph.len(), 2, "one node per pod, no more");
    assert_eq!(monitor.status().relists(), 1);

    monitor.stop().await;
    drop(router);
    tokio::time::timeout(Duration::from_secs(5), builder)
        .await
        .expect("the builder ends with the routers: likely deadlocked")
        .expect("the builder task");
}

#[tokio::test(start_paused = true)]
async fn a_watch_list_relist_should_delete_a_vanished_object_whose_add_is_still_in_flight() {
    vanished_pod_with_its_add_in_flight_should_be_deleted(SyncMode::WatchList).await;
}

#[tokio::test(start_paused = true)]
async fn a_paginated_relist_should_delete_a_vanished_object_whose_add_is_still_in_flight() {
    vanished_pod_with_its_add_in_flight_should_be_deleted(SyncMode::List).await;
}
