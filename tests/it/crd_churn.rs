//! CRD churn leaves nothing behind (upstream leaks informer handlers, kubernetes#142039): after
//! CRDs are created and deleted in cycles, the monitors, the runtime's tasks, the graph and the
//! per-resource state all come back to where they started.

use crate::support::{configmaps, crd_manifest, meta, ref_to, Harness};
use kube_gc::api::{DeleteOptions, Gvr, PartialObjectMeta};
use kube_gc::graph::Uid;
use std::time::Duration;

const CYCLES: usize = 3;
const CRDS: usize = 20;

fn crds() -> Gvr {
    Gvr::new("apiextensions.k8s.io", "v1", "customresourcedefinitions")
}

/// Tasks alive on the test's runtime.
fn tasks() -> usize {
    tokio::runtime::Handle::current().metrics().num_alive_tasks()
}

/// What must come back after each cycle.
#[derive(Debug, PartialEq, Eq)]
struct Footprint {
    monitors: usize,
    monitor_statuses: usize,
    mapped_resources: usize,
    graph_nodes: usize,
    waiting: usize,
}

fn footprint(h: &Harness) -> Footprint {
    Footprint {
        monitors: h.gc.monitor_count(),
        monitor_statuses: h.gc.monitor_statuses().len(),
        mapped_resources: h.gc.mapper().load().len(),
        graph_nodes: h.gc.graph().len(),
        waiting: h.gc.waiting().len(),
    }
}

#[tokio::test(start_paused = true)]
async fn creating_and_deleting_crds_in_cycles_should_leave_no_monitor_task_or_state_behind() {
    let h = Harness::start().await;
    h.settle().await;
    let baseline = footprint(&h);
    let baseline_tasks = tasks();
    for cycle in 0..CYCLES {
        let mut made: Vec<(Gvr, PartialObjectMeta, PartialObjectMeta)> = Vec::new();
        for i in 0..CRDS {
            let plural = format!("churns{i}");
            let crd = serde_json::from_value(crd_manifest(&plural, &format!("Churn{i}"))).expect("a CRD");
            h.cluster.create(&crds(), crd).expect("create a CRD");
            made.push((
                Gvr::new("example.com", "v1", &plural),
                Default::default(),
                Default::default(),
            ));
        }
        h.gc.sync_once().await;
        assert!(
            h.gc.wait_for_sync(Duration::from_secs(60)).await,
            "the new monitors synced"
        );
        assert_eq!(
            h.gc.monitor_count(),
            baseline.monitors + CRDS,
            "cycle {cycle}: a monitor per CRD"
        );
        assert!(tasks() >= baseline_tasks + CRDS, "cycle {cycle}: a task per monitor");
        for (i, (gvr, owner, dependent)) in made.iter_mut().enumerate() {
            *owner = h.create(gvr, meta("default", &format!("o{i}"), vec![]));
            *dependent = h.create(
                &configmaps(),
                meta("default", &format!("d{cycle}-{i}"), vec![ref_to(owner)]),
            );
        }
        let all: Vec<&PartialObjectMeta> = made.iter().flat_map(|(_, o, d)| [o, d]).collect();
        h.wait_in_graph(&all).await;

        for i in 0..CRDS {
            let name = format!("churns{i}.example.com");
            h.cluster
                .delete_object(&crds(), "", &name, &DeleteOptions::default())
                .expect("delete a CRD");
        }
        // The CRDs' objects go first; their dependents are collected; then the types go.
        h.eventually("every custom object and its dependent gone from the graph", || {
            all.iter().all(|o| !h.gc.graph().contains(&Uid::parse(&o.metadata.uid)))
        })
        .await;
        for (_, _, dependent) in &made {
            assert!(
                !h.exists(&configmaps(), dependent),
                "the dependent of a deleted custom object is collected"
            );
        }
        h.gc.sync_once().await;
        h.settle().await;
        assert_eq!(footprint(&h), baseline, "cycle {cycle}: back to the baseline");
        h.eventually("the stopped monitors' tasks ended", || tasks() == baseline_tasks)
            .await;
    }
}
