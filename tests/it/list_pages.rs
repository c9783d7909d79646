//! Monitors read their lists page by page and keep their view under faults: each page reaches the
//! graph before the next is asked for; a failed page is asked for again from its own continue
//! token, and only an expired token (410) starts the list over; a watch that fails is reopened
//! from its last resourceVersion without a list; a relist leaves the graph the cluster has, with a
//! delete for every object that vanished meanwhile, routed only after its last page.
//!
//! The collector reaches the simulated cluster through [`Paging`], which watches and interferes
//! with the LIST pages and WATCH streams of pods only, and refuses their watch-list, so that the
//! pods monitor reads them by list.

use crate::support;

use futures::StreamExt;
use kube_gc::api::shard::ShardSelector;
use kube_gc::api::{
    ApiError, ClusterApi, DeleteOptions, Discovery, EventRecord, Gvr, ObjectList, PartialObjectMeta, Patch,
    PropagationPolicy, StatusReason, WatchStream,
};
use kube_gc::controller::{Config, GarbageCollector};
use kube_gc::graph::{invariants, Graph, Uid};
use kube_gc::monitor::MonitorStatus;
use kube_gc_sim::SimCluster;
use parking_lot::Mutex;
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
    /// What the next page of pods after a first is answered with in place of the cluster's, once.
    next_page_answer: Mutex<Option<Result<ObjectList, ApiError>>>,
    /// First pages of pods asked for: one per list started.
    first_pages: AtomicUsize,
    /// Every continue token asked for, in order.
    tokens: Mutex<Vec<String>>,
    /// The resourceVersion of every pods watch opened, in order.
    watches: Mutex<Vec<String>>,
    /// Ends the open pods watch with a 500 in place of its next event, once.
    break_watch: Arc<AtomicBool>,
    /// Closes every pods watch after this long, as a server does at its timeout.
    watch_lifetime: Mutex<Option<Duration>>,
    /// Fails this share of pods pages and watches (a 500), drawn from a seeded generator.
    failure_rate: Mutex<Option<(SmallRng, f64)>>,
    /// The pods monitor's status, once a test has set it.
    status: OnceLock<Arc<MonitorStatus>>,
    /// For each page of pods after a first: whether the monitor reported relisting.
    relisting_on_pages: Mutex<Vec<bool>>,
    /// Pods that must stay in the graph until a list's last page: checked on every later page.
    vanished: Mutex<Vec<Uid>>,
    /// For each page of pods after a first: whether every pod of `vanished` was still in the graph.
    vanished_in_graph_on_pages: Mutex<Vec<bool>>,
}

impl Paging {
    fn new(cluster: Arc<SimCluster>) -> Self {
        Paging {
            cluster,
            graph: OnceLock::new(),
            served: Mutex::new(Vec::new()),
            earlier_pages_in_graph: Mutex::new(Vec::new()),
            next_page_answer: Mutex::new(None),
            first_pages: AtomicUsize::new(0),
            tokens: Mutex::new(Vec::new()),
            watches: Mutex::new(Vec::new()),
            break_watch: Arc::new(AtomicBool::new(false)),
            watch_lifetime: Mutex::new(None),
            failure_rate: Mutex::new(None),
            status: OnceLock::new(),
            relisting_on_pages: Mutex::new(Vec::new()),
            vanished: Mutex::new(Vec::new()),
            vanished_in_graph_on_pages: Mutex::new(Vec::new()),
        }
    }

    /// True when the seeded generator draws a failure.
    fn draw_failure(&self) -> bool {
        self.failure_rate
            .lock()
            .as_mut()
            .is_some_and(|(rng, rate)| rng.gen::<f64>() < *rate)
    }

    /// Writes down what a later page of a list sees of the graph and of the monitor.
    fn record_later_page(&self) {
        if let Some(status) = self.status.get() {
            self.relisting_on_pages.lock().push(status.is_relisting());
        }
        let vanished = self.vanished.lock();
        if !vanished.is_empty() {
            let graph = self.graph.get().expect("the graph");
            let in_graph = vanished.iter().all(|uid| graph.contains(uid));
            self.vanished_in_graph_on_pages.lock().push(in_graph);
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

    async fn patch(&self, gvr: &Gvr, namespace: &str, name: &str, edit: &Patch) -> Result<PartialObjectMeta, ApiError> {
        self.cluster.patch(gvr, namespace, name, edit).await
    }

    async fn delete(&self, gvr: &Gvr, namespace: &str, name: &str, options: &DeleteOptions) -> Result<(), ApiError> {
        self.cluster.delete(gvr, namespace, name, options).await
    }

    async fn list_page(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        continue_token: &str,
        limit: usize,
    ) -> Result<ObjectList, ApiError> {
        if *gvr != pods() {
            return self.cluster.list_page(gvr, shard, continue_token, limit).await;
        }
        if self.draw_failure() {
            return Err(ApiError::status(StatusReason::InternalError, "injected: etcd is slow"));
        }
        if continue_token.is_empty() {
            self.first_pages.fetch_add(1, Ordering::Relaxed);
            self.served.lock().clear();
        } else {
            self.tokens.lock().push(continue_token.to_string());
            self.record_later_page();
            let in_graph = self.served_pods_in_graph().await;
            self.earlier_pages_in_graph.lock().push(in_graph);
            if let Some(answer) = self.next_page_answer.lock().take() {
                return answer;
            }
        }
        let page = self.cluster.list_page(gvr, shard, continue_token, limit).await?;
        let uids = page.items.iter().map(|o| Uid::parse(&o.metadata.uid));
        self.served.lock().extend(uids);
        Ok(page)
    }

    async fn watch(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        resource_version: &str,
    ) -> Result<WatchStream, ApiError> {
        if *gvr != pods() {
            return self.cluster.watch(gvr, shard, resource_version).await;
        }
        self.watches.lock().push(resource_version.to_string());
        if self.draw_failure() {
            return Err(ApiError::status(StatusReason::InternalError, "injected: watch refused"));
        }
        let stream = self.cluster.watch(gvr, shard, resource_version).await?;
        let broken = self.break_watch.clone();
        let stream = stream.map(move |event| {
            if event.is_ok() && broken.swap(false, Ordering::AcqRel) {
                Err(ApiError::status(StatusReason::InternalError, "injected: watch broke"))
            } else {
                event
            }
        });
        // The monitor stops reading at the first error, as it would at the end of a stream.
        match *self.watch_lifetime.lock() {
            Some(lifetime) => Ok(stream.take_until(tokio::time::sleep(lifetime)).boxed()),
            None => Ok(stream.boxed()),
        }
    }

    /// Pods are served no watch-list, as by a server with the `WatchList` gate off, so their
    /// monitor reads them by list.
    async fn watch_list(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        resource_version: &str,
    ) -> Result<WatchStream, ApiError> {
        if *gvr == pods() {
            return Err(ApiError::status(StatusReason::Invalid, "sendInitialEvents: Forbidden"));
        }
        self.cluster.watch_list(gvr, shard, resource_version).await
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
    start_with(cluster, |_| {}).await
}

/// [`start`], with the [`Paging`] set up by `prepare` before the monitors' first request.
async fn start_with(cluster: Arc<SimCluster>, prepare: impl FnOnce(&Paging)) -> (Harness<Paging>, Arc<Paging>) {
    let api = Arc::new(Paging::new(cluster.clone()));
    prepare(&api);
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

/// The pods monitor's status.
fn pods_status<C: ClusterApi>(h: &Harness<C>) -> Arc<MonitorStatus> {
    h.gc.monitor_statuses().remove(&pods()).expect("a pods monitor")
}

/// Lists pods, loses their watch while a tenth of them are deleted and a few created, and has the
/// relist that follows answered on its second page with `answer`. Returns how many lists of pods
/// were started in all (first pages asked for).
async fn relist_failing_on_its_second_page(answer: Result<ObjectList, ApiError>) -> (usize, Arc<Paging>) {
    let cluster = Arc::new(SimCluster::new());
    let created = create_pods(&cluster);
    let (h, api) = start(cluster.clone()).await;
    h.wait_in_graph(&created.iter().collect::<Vec<_>>()).await;
    let status = pods_status(&h);
    let _ = api.status.set(status.clone());

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
    *api.vanished.lock() = gone.iter().map(|(_, pod)| Uid::parse(&pod.metadata.uid)).collect();
    *api.next_page_answer.lock() = Some(answer);
    cluster.set_watch_blackout("", "pods", false);
    // The first event after the blackout ends the watch with 410 Gone: the monitor relists.
    let nudge = h.create(&pods(), meta(NS, "pod-nudge", vec![]));

    h.eventually("the graph of the relisted pods", || {
        api.next_page_answer.lock().is_none()
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
    let relisting = api.relisting_on_pages.lock().clone();
    assert!(
        !relisting.is_empty() && relisting.iter().all(|r| *r),
        "incomplete during the relist: {relisting:?}"
    );
    assert!(status.is_complete(), "complete after it");
    assert_eq!(status.relists(), 1);
    let kept_until_last_page = api.vanished_in_graph_on_pages.lock().clone();
    assert!(
        kept_until_last_page.iter().all(|k| *k),
        "vanished pods are deleted only after the relist's last page: {kept_until_last_page:?}"
    );
    let lists = api.first_pages.load(Ordering::Relaxed);
    h.gc.shutdown().await;
    (lists, api)
}

#[tokio::test(start_paused = true)]
async fn a_relist_whose_continue_token_expires_should_start_over_and_delete_what_vanished() {
    let (lists, _) = relist_failing_on_its_second_page(Err(ApiError::status(
        StatusReason::Expired,
        "The provided continue parameter is too old to display a consistent list result.",
    )))
    .await;
    assert_eq!(
        lists, 3,
        "the first list, the relist, and the relist started over after 410"
    );
}

/// A server restarted mid-list may answer a continue token with a page of another snapshot: the
/// last page of an unrelated list, at its own resourceVersion. Taken as the list's end, it would
/// have every pod of the pages never read deleted from the graph, and their owners released.
#[tokio::test(start_paused = true)]
async fn a_page_of_another_snapshot_should_start_the_list_over_not_end_it() {
    let (lists, _) = relist_failing_on_its_second_page(Ok(foreign_last_page())).await;
    assert_eq!(
        lists, 3,
        "the first list, the relist, and the relist started over once its page came from another snapshot"
    );
}

/// The last page of an unrelated list, empty, at a resourceVersion of its own: what a restarted
/// server answered to a continue token of its predecessor whose id it had given to a list of its
/// own.
fn foreign_last_page() -> ObjectList {
    ObjectList {
        items: Vec::new(),
        resource_version: "1".into(),
        continue_token: String::new(),
        shard_selector: None,
    }
}

/// After an API server restart, a Foreground owner was released while its blocking dependents
/// lived: the relist of those dependents ended short on a page of another snapshot, and the graph
/// took the objects of the pages it never read for deleted. Here a ReplicaSet's pods, held in
/// deletion by a finalizer of their own, all lie past the relist's first page.
#[tokio::test(start_paused = true)]
async fn a_foreground_owner_should_keep_its_finalizer_when_a_relist_ends_on_another_snapshot() {
    let cluster = Arc::new(SimCluster::new());
    // First in name order: a page of them comes before any pod of the ReplicaSet.
    for i in 0..600 {
        create_in(&cluster, &pods(), meta(NS, &format!("a-{i:04}"), vec![]));
    }
    let rs = create_in(&cluster, &replicasets(), meta(NS, "rs", vec![]));
    let held: Vec<_> = (0..10)
        .map(|i| {
            let mut pod = meta(NS, &format!("z-{i}"), vec![blocking_ref_to(&rs)]);
            pod.finalizers = vec!["example.com/hold".into()];
            create_in(&cluster, &pods(), pod)
        })
        .collect();
    let (h, api) = start(cluster.clone()).await;
    h.delete(&replicasets(), &rs, policy(PropagationPolicy::Foreground));
    h.eventually("every pod of the ReplicaSet deleted, and held by its finalizer", || {
        held.iter().all(|pod| {
            h.get(&pods(), pod)
                .is_some_and(|p| p.metadata.deletion_timestamp.is_some())
        })
    })
    .await;

    cluster.set_watch_blackout("", "pods", true);
    h.create(&pods(), meta(NS, "b-lost", vec![]));
    h.wait(Duration::from_secs(1)).await;
    *api.next_page_answer.lock() = Some(Ok(foreign_last_page()));
    cluster.set_watch_blackout("", "pods", false);
    // The first event after the blackout ends the watch with 410 Gone: the monitor relists.
    let nudge = h.create(&pods(), meta(NS, "b-nudge", vec![]));
    h.eventually("the relist's second page", || api.next_page_answer.lock().is_none())
        .await;
    h.settle().await;

    assert!(
        h.exists(&replicasets(), &rs),
        "the ReplicaSet was released while its blocking pods lived"
    );
    assert!(held.iter().all(|pod| h.in_graph(pod)), "the graph lost the held pods");
    h.eventually("the relist, started over, reading every page", || h.in_graph(&nudge))
        .await;
    h.settle().await;
    assert!(h.exists(&replicasets(), &rs), "the ReplicaSet waits for its pods");
    assert_eq!(h.gc.graph().len(), cluster.object_count(), "one node per object");
    h.gc.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_relist_failing_midway_should_retry_its_page_and_delete_what_vanished() {
    let (lists, api) =
        relist_failing_on_its_second_page(Err(ApiError::status(StatusReason::InternalError, "etcd timeout"))).await;
    assert_eq!(lists, 2, "the failed page was retried, the list not started over");
    let tokens = api.tokens.lock().clone();
    let repeated = tokens.windows(2).filter(|w| w[0] == w[1]).count();
    assert_eq!(
        repeated, 1,
        "the failed page was asked for again with its own token: {tokens:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_page_of_the_first_list_should_be_asked_for_again_from_its_token() {
    let cluster = Arc::new(SimCluster::new());
    create_pods(&cluster);
    let (h, api) = start_with(cluster, |api| {
        *api.next_page_answer.lock() = Some(Err(ApiError::status(StatusReason::InternalError, "etcd timeout")));
    })
    .await;
    assert_eq!(api.first_pages.load(Ordering::Relaxed), 1, "never started over");
    let tokens = api.tokens.lock().clone();
    assert_eq!(tokens.len(), 3, "pages two (twice) and three: {tokens:?}");
    assert_eq!(tokens[0], tokens[1]);
    let status = pods_status(&h);
    assert_eq!(status.page_retries(), 1);
    assert!(status.is_complete() && status.last_successful_list().is_some());
    h.gc.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_watch_failing_with_500_should_resume_from_its_last_version_without_a_list() {
    let cluster = Arc::new(SimCluster::new());
    let created = create_pods(&cluster);
    let (h, api) = start(cluster.clone()).await;
    h.wait_in_graph(&created.iter().collect::<Vec<_>>()).await;
    let before = h.create(&pods(), meta(NS, "pod-before", vec![]));
    h.wait_in_graph(&[&before]).await;
    let watches_before = api.watches.lock().len();

    api.break_watch.store(true, Ordering::Release);
    // Its event is the one the broken stream swallows: the resumed watch must deliver it again.
    let during = h.create(&pods(), meta(NS, "pod-during", vec![]));
    h.wait_in_graph(&[&during]).await;

    assert_eq!(
        api.first_pages.load(Ordering::Relaxed),
        1,
        "no list after a watch error"
    );
    let watches = api.watches.lock().clone();
    assert_eq!(watches.len(), watches_before + 1, "one watch reopened: {watches:?}");
    assert_eq!(
        watches.last(),
        Some(&before.metadata.resource_version),
        "reopened from the last version seen"
    );
    let status = pods_status(&h);
    assert_eq!((status.watch_resumes(), status.relists()), (1, 0));
    assert!(status.is_complete());
    h.gc.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_twelve_page_list_should_sync_while_a_fifth_of_its_pages_and_watches_fail() {
    let cluster = Arc::new(SimCluster::new());
    for i in 0..6000 {
        create_in(&cluster, &pods(), meta(NS, &format!("pod-{i:05}"), vec![]));
    }
    let api = Arc::new(Paging::new(cluster.clone()));
    *api.failure_rate.lock() = Some((SmallRng::seed_from_u64(14), 0.2));
    let gc = GarbageCollector::start(api.clone(), Config::default()).await;
    let _ = api.graph.set(gc.graph().clone());
    assert!(
        gc.wait_for_sync(Duration::from_secs(120)).await,
        "the pods monitor never synced under a 20 % failure rate"
    );
    let h = Harness {
        cluster: cluster.clone(),
        gc,
    };
    let status = pods_status(&h);
    assert!(status.page_retries() > 0, "some pages failed and were retried");
    assert_eq!(
        api.first_pages.load(Ordering::Relaxed),
        1,
        "no failure started the list over"
    );
    assert_eq!(h.gc.graph().len(), cluster.object_count());
    h.gc.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_quiet_watch_that_stays_open_should_be_reopened_at_once() {
    let cluster = Arc::new(SimCluster::new());
    create_pods(&cluster);
    let (h, api) = start_with(cluster, |api| *api.watch_lifetime.lock() = Some(Duration::from_secs(2))).await;
    let before = api.watches.lock().len();
    h.wait(Duration::from_secs(60)).await;
    let reopened = api.watches.lock().len() - before;
    // Every 2 s when each quiet watch counts as progress; six or seven in a minute if the
    // backoff grew with each (0.8 s doubling).
    assert!(reopened >= 25, "{reopened} watches in a minute of 2 s watches");
    let status = pods_status(&h);
    assert_eq!((status.relists(), status.watch_resumes()), (0, 0));
    h.gc.shutdown().await;
}
