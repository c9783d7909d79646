//! The API layers that only shape requests (latency, injected faults), around the simulated
//! cluster: what passes them reaches the cluster, and only that.

use kube_gc::api::layers::{Fault, Faults, Latency, Layered, Verb};
use kube_gc::api::{ApiError, ClusterApi, Gvr, StatusReason};
use kube_gc_sim::SimCluster;
use std::time::Duration;

#[tokio::test(start_paused = true)]
async fn each_call_should_reach_the_cluster_after_the_delay() {
    let api = Layered::new(Latency(Duration::from_millis(2)), SimCluster::new());
    let began = tokio::time::Instant::now();
    api.discover().await.expect("discovery");
    let err = api.get(&Gvr::new("", "v1", "pods"), "ns", "absent").await;
    assert!(err.is_err_and(|e| e.is_not_found()));
    assert_eq!(began.elapsed(), Duration::from_millis(4));
    assert_eq!(api.inner().api_calls().get, 1, "the call reached the cluster");
}

#[tokio::test]
async fn a_fault_should_answer_the_requests_it_matches_then_disarm() {
    let faults = Faults::default();
    let api = Layered::new(faults.clone(), SimCluster::new());
    let pods = Gvr::new("", "v1", "pods");
    let deployments = Gvr::new("apps", "v1", "deployments");
    faults.inject(Fault {
        verb: Verb::List,
        resource: Some((String::new(), "pods".into())),
        error: ApiError::status(StatusReason::InternalError, "conversion webhook unavailable"),
        times: Some(2),
    });
    for _ in 0..2 {
        let err = api.list_page(&pods, None, "", 0).await.expect_err("the fault answers");
        assert_eq!(err.reason(), Some(StatusReason::InternalError));
    }
    api.list_page(&deployments, None, "", 0)
        .await
        .expect("another resource passes");
    api.list_page(&pods, None, "", 0)
        .await
        .expect("disarmed after two answers");
    assert_eq!(api.inner().api_calls().list, 2, "only what passed reached the cluster");
}
