//! Owners deleted while no collector ran: the next collector's first read of every resource
//! shows dependents whose owners are gone, and collects them; dependents of live owners stay.

use crate::support::{blocking_ref_to, deployments, meta, pods, policy, ref_to, replicasets, Harness};
use kube_gc::api::PropagationPolicy;
use kube_gc::controller::Config;
use kube_gc_sim::SimCluster;
use std::sync::Arc;

#[tokio::test(start_paused = true)]
async fn owners_deleted_while_the_collector_was_down_should_have_their_dependents_collected_at_start() {
    let cluster = Arc::new(SimCluster::new());
    let first = Harness::start_over(cluster.clone(), cluster.clone(), Config::default()).await;
    let gone_d = first.create(&deployments(), meta("default", "gone", vec![]));
    let gone_rs = first.create(
        &replicasets(),
        meta("default", "gone-rs", vec![blocking_ref_to(&gone_d)]),
    );
    let gone_pod = first.create(&pods(), meta("default", "gone-pod", vec![ref_to(&gone_rs)]));
    let live_d = first.create(&deployments(), meta("default", "live", vec![]));
    let live_rs = first.create(
        &replicasets(),
        meta("default", "live-rs", vec![blocking_ref_to(&live_d)]),
    );
    let live_pod = first.create(&pods(), meta("default", "live-pod", vec![ref_to(&live_rs)]));
    first
        .wait_in_graph(&[&gone_d, &gone_rs, &gone_pod, &live_d, &live_rs, &live_pod])
        .await;
    first.settle().await;
    first.gc.shutdown().await;

    // While no collector runs, the Deployment goes in the background: the API server removes it
    // at once and leaves its ReplicaSet and Pods to a collector.
    first.delete(&deployments(), &gone_d, policy(PropagationPolicy::Background));
    assert!(!first.exists(&deployments(), &gone_d));
    assert!(
        first.exists(&replicasets(), &gone_rs),
        "nothing collects while the collector is down"
    );

    let second = Harness::start_over(cluster.clone(), cluster, Config::default()).await;
    second
        .eventually("the departed owner's ReplicaSet and Pod collected", || {
            !second.exists(&replicasets(), &gone_rs) && !second.exists(&pods(), &gone_pod)
        })
        .await;
    second.settle().await;
    for (gvr, obj) in [(deployments(), &live_d), (replicasets(), &live_rs), (pods(), &live_pod)] {
        assert!(second.exists(&gvr, obj), "{} of a live owner stays", obj.metadata.name);
    }
    second.gc.shutdown().await;
}
