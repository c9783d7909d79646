//! Monitors read their lists page by page: each page reaches the graph before the next is asked
//! for, and a list that fails on a later page starts over from the first and still leaves the
//! graph the cluster has, with a delete for every object that vanished meanwhile.
//!
//! The collector reaches the simulated cluster through [`Paging`], which watches and interferes
//! with the LIST pages of pods only.

mod support;

use kube_gc::api::sim::SimCluster;
use kube_gc::api::{
    ApiError, ClusterApi, DeleteOptions, Discovery, EventRecord, Gvr, ObjectList, PartialObjectMeta, PatchType,
    StatusReason, WatchStream,
};
use kube_gc::controller::{Config, GarbageCollector};
use kube_gc::graph::{invariants, Graph, Uid};
use parking_lot::Mutex;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use support::*;

const NS: &str = "ns1";

/// Pods for three pages: the monitor asks for 500 objects at a time.
const PODS: usize = 1200;

/// How long (virtual time) a later page waits for the earlier ones to reach the graph.
const PAGE_PATIENCE: Duration = Duration::from_secs(60);

/// The simulated cluster, with a hand in the LIST pages of pods.
struct Paging {
    cluster: Arc<SimCluster>,
    /// The collector's graph, once it exists.
    graph: OnceLock<Arc<Graph>>,
    /// The pods of the pages served so far in the current list.
    served: Mutex<Vec<Uid>>,
    /// For each page of pods after a first: whether the graph held every pod of the pages before
    /// it when it was asked for.
    earlier_pages_in_graph: Mutex<Vec<bool>>,
    /// What the next page of pods after a first fails with, once.
    fail_next_page: Mutex<Option<ApiError>>,
}

impl Paging {
    fn new(cluster: Arc<SimCluster>) -> Self {
        Paging {
            cluster,
            graph: OnceLock::new(),
            served: Mutex::new(Vec::new()),
            earlier_pages_in_graph: Mutex::new(Vec::new()),
            fail_next_page: Mutex::new(None),
        }
    }

    /// Waits, at most [`PAGE_PATIENCE`], until the graph holds every pod served so far; false if
    /// it never does.
    async fn served_pods_in_graph(&self) -> bool {
        let deadline = tokio::time::Instant::now() + PAGE_PATIENCE;
        loop {
            let in_graph = self
                .graph
                .get()
                .is_some_and(|graph| self.served.lock().iter().all(|uid| graph.contains(uid)));
            if in_graph {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl ClusterApi for Paging {
    async fn discover(&self) -> Result<Discovery, ApiError> {
        self.cluster.discover().await
    }

    async fn get(&self, gvr: &Gvr, namespace: &str, name: &str) -> Result<PartialObjectMeta, ApiError> {
        self.cluster.get(gvr, namespace, name).await
    }

    async fn patch(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        body: &serde_json::Value,
    ) -> Result<PartialObjectMeta, ApiError> {
        self.cluster.patch(gvr, namespace, name, patch_type, body).await
    }

    async fn delete(&self, gvr: &Gvr, namespace: &str, name: &str, options: &DeleteOptions) -> Result<(), ApiError> {
        self.cluster.delete(gvr, namespace, name, options).await
    }

    async fn list_page(&self, gvr: &Gvr, continue_token: &str, limit: usize) -> Result<ObjectList, ApiError> {
        if *gvr != pods() {
            return self.cluster.list_page(gvr, continue_token, limit).await;
        }
        if continue_token.is_empty() {
            self.served.lock().clear();
        } else {
            let in_graph = self.served_pods_in_graph().await;
            self.earlier_pages_in_graph.lock().push(in_graph);
            if let Some(error) = self.fail_next_page.lock().take() {
                return Err(error);
            }
        }
        let page = self.cluster.list_page(gvr, continue_token, limit).await?;
        let uids = page.items.iter().map(|o| Uid::parse(&o.metadata.uid));
        self.served.lock().extend(uids);
        Ok(page)
    }

    async fn watch(&self, gvr: &Gvr, resource_version: &str) -> Result<WatchStream, ApiError> {
        self.cluster.watch(gvr, resource_version).await
    }

    async fn create_event(&self, event: &EventRecord) -> Result<(), ApiError> {
        self.cluster.create_event(event).await
    }
}

/// `PODS` pods with no owners, named in list order.
fn create_pods(cluster: &SimCluster) -> Vec<PartialObjectMeta> {
    (0..PODS)
        .map(|i| create_in(cluster, &pods(), meta(NS, &format!("pod-{i:04}"), vec![])))
        .collect()
}

/// The collector over `cluster` through a [`Paging`], synced.
async fn start(cluster: Arc<SimCluster>) -> (Harness<Paging>, Arc<Paging>) {
    let api = Arc::new(Paging::new(cluster.clone()));
    let gc = GarbageCollector::start(api.clone(), Config::default()).await;
    // Before the monitors' first page: `start` only spawns them.
    let _ = api.graph.set(gc.graph().clone());
    assert!(gc.wait_for_sync(PATIENCE).await, "monitors never synced");
    (Harness { cluster, gc }, api)
}

#[tokio::test(start_paused = true)]
async fn each_page_of_a_list_should_reach_the_graph_before_the_next_is_asked_for() {
    let cluster = Arc::new(SimCluster::new());
    let created = create_pods(&cluster);
    let (h, api) = start(cluster).await;

    assert_eq!(
        *api.earlier_pages_in_graph.lock(),
        [true, true],
        "pages two and three each waited for the pods before them to be in the graph"
    );
    assert!(created.iter().all(|pod| h.in_graph(pod)));
    h.gc.shutdown().await;
}

/// Lists pods, loses their watch while a tenth of them are deleted and a few created, and has the
/// relist that follows fail on its second page with `error`.
async fn relist_failing_on_its_second_page(error: ApiError) {
    let cluster = Arc::new(SimCluster::new());
    let created = create_pods(&cluster);
    let (h, api) = start(cluster.clone()).await;
    h.wait_in_graph(&created.iter().collect::<Vec<_>>()).await;

    cluster.set_watch_blackout("", "pods", true);
    // Spread over every page, so that most lie beyond the page that fails.
    let (gone, kept): (Vec<_>, Vec<_>) = created.iter().enumerate().partition(|(i, _)| i % 10 == 3);
    for (_, pod) in &gone {
        h.delete(&pods(), pod, DeleteOptions::default());
    }
    let late: Vec<_> = (0..5)
        .map(|i| h.create(&pods(), meta(NS, &format!("pod-late-{i}"), vec![])))
        .collect();
    // The watch meets the changes, and loses them, while the blackout lasts.
    h.wait(Duration::from_secs(1)).await;
    assert!(gone.iter().all(|(_, pod)| h.in_graph(pod)), "the deletions were lost");
    *api.fail_next_page.lock() = Some(error);
    cluster.set_watch_blackout("", "pods", false);
    // The first event after the blackout ends the watch with 410 Gone: the monitor relists.
    let nudge = h.create(&pods(), meta(NS, "pod-nudge", vec![]));

    h.eventually("the graph of the relisted pods", || {
        api.fail_next_page.lock().is_none()
            && gone.iter().all(|(_, pod)| !h.in_graph(pod))
            && late.iter().chain([&nudge]).all(|pod| h.in_graph(pod))
    })
    .await;
    h.settle().await;
    assert!(kept.iter().all(|(_, pod)| h.in_graph(pod)));
    assert_eq!(
        h.gc.graph().len(),
        cluster.object_count(),
        "one node per object, no more"
    );
    invariants::assert_ok(h.gc.graph());
    h.gc.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_relist_whose_continue_token_expires_should_start_over_and_delete_what_vanished() {
    relist_failing_on_its_second_page(ApiError::status(
        StatusReason::Expired,
        "The provided continue parameter is too old to display a consistent list result.",
    ))
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_relist_failing_midway_should_start_over_and_delete_what_vanished() {
    relist_failing_on_its_second_page(ApiError::status(StatusReason::InternalError, "etcd timeout")).await;
}
