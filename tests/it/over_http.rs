//! The whole collector through kube-rs ([`KubeApi`]) against the simulated API server over HTTP on
//! 127.0.0.1: discovery, metadata lists and watches, GETs, patches and deletes all travel as real
//! requests, and the decisions must be the ones the in-memory tests check.
//!
//! Time is real here (sockets do not follow tokio's paused clock): every wait polls with a bound
//! and names what it waited for.

use crate::support;

use kube_gc::api::layers::{Fence, Stack};
use kube_gc::api::{Gvr, KubeApi, ObjectMeta, OwnerReference, PartialObjectMeta, PropagationPolicy};
use kube_gc::controller::{Config, GarbageCollector};
use kube_gc::graph::Uid;
use kube_gc::journal::{FileConfig, Journal, JournalConfig};
use kube_gc_sim::http::{self, ServerOptions};
use kube_gc_sim::SimCluster;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use support::{
    blocking_ref_to, client_of, collector_client, create_in, deployments, http_get, layered, meta, pods, policy,
    ref_named, replicasets, start_collector, within_real_time,
};

/// How long a condition may take to come true over HTTP.
const PATIENCE: Duration = Duration::from_secs(30);

struct Served {
    cluster: Arc<SimCluster>,
    gc: Arc<GarbageCollector<Stack<KubeApi>>>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Serves `cluster` on a loopback port; a kube-rs client of it, and the server's task.
async fn serve(cluster: &Arc<SimCluster>) -> (kube::Client, tokio::task::JoinHandle<std::io::Result<()>>) {
    serve_with(cluster, ServerOptions::default()).await
}

/// [`serve`] with `options`. The client leaves retries to the collector's layers, as
/// `kube-gc run` builds it.
async fn serve_with(
    cluster: &Arc<SimCluster>,
    options: ServerOptions,
) -> (kube::Client, tokio::task::JoinHandle<std::io::Result<()>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = tokio::spawn(http::serve(listener, cluster.clone(), options, std::future::pending()));
    (collector_client(addr).await, server)
}

impl Served {
    /// A server with `cluster`, and the collector against it, synced.
    async fn start(cluster: SimCluster) -> Served {
        let cluster = Arc::new(cluster);
        let (client, server) = serve(&cluster).await;
        let gc = start_collector(client).await;
        Served { cluster, gc, server }
    }

    fn create(&self, gvr: &Gvr, meta: ObjectMeta) -> PartialObjectMeta {
        create_in(&self.cluster, gvr, meta)
    }

    fn exists(&self, gvr: &Gvr, obj: &PartialObjectMeta) -> bool {
        self.cluster
            .get_object(gvr, &obj.metadata.namespace, &obj.metadata.name)
            .is_ok_and(|o| o.metadata.uid == obj.metadata.uid)
    }

    fn owners(&self, gvr: &Gvr, obj: &PartialObjectMeta) -> Vec<OwnerReference> {
        let current = self
            .cluster
            .get_object(gvr, &obj.metadata.namespace, &obj.metadata.name);
        current.expect("object").metadata.owner_references
    }

    async fn wait_in_graph(&self, objs: &[&PartialObjectMeta]) {
        let graph = self.gc.graph().clone();
        let uids: Vec<Uid> = objs.iter().map(|o| Uid::parse(&o.metadata.uid)).collect();
        eventually("objects in the graph", || uids.iter().all(|u| graph.contains(u))).await;
    }

    async fn stop(self) {
        self.gc.shutdown().await;
        self.server.abort();
    }
}

async fn eventually(what: &str, cond: impl Fn() -> bool) {
    within_real_time(what, PATIENCE, async || cond()).await;
}

/// A Deployment → ReplicaSet → two Pods tree in `ns`.
fn tree(s: &Served, ns: &str) -> [PartialObjectMeta; 4] {
    let d = s.create(&deployments(), meta(ns, "d", vec![]));
    let rs = s.create(&replicasets(), meta(ns, "rs", vec![blocking_ref_to(&d)]));
    let p0 = s.create(&pods(), meta(ns, "p0", vec![blocking_ref_to(&rs)]));
    let p1 = s.create(&pods(), meta(ns, "p1", vec![blocking_ref_to(&rs)]));
    [d, rs, p0, p1]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_policy_should_be_carried_out_over_http() {
    let s = Served::start(SimCluster::new()).await;
    let [bd, brs, bp0, bp1] = tree(&s, "background");
    let [fd, frs, fp0, fp1] = tree(&s, "foreground");
    let [od, ors, op0, op1] = tree(&s, "orphan");
    s.wait_in_graph(&[&bp0, &bp1, &fp0, &fp1, &op0, &op1]).await;

    for (root, p) in [
        (&bd, PropagationPolicy::Background),
        (&fd, PropagationPolicy::Foreground),
        (&od, PropagationPolicy::Orphan),
    ] {
        s.cluster
            .delete_object(&deployments(), &root.metadata.namespace, "d", &policy(p))
            .expect("delete");
    }

    let gone = |gvr: Gvr, o: &PartialObjectMeta| !s.exists(&gvr, o);
    eventually("the background tree gone", || {
        gone(deployments(), &bd) && gone(replicasets(), &brs) && gone(pods(), &bp0) && gone(pods(), &bp1)
    })
    .await;
    eventually("the foreground tree gone", || {
        gone(deployments(), &fd) && gone(replicasets(), &frs) && gone(pods(), &fp0) && gone(pods(), &fp1)
    })
    .await;
    eventually("the orphaned Deployment gone", || gone(deployments(), &od)).await;
    assert!(s.owners(&replicasets(), &ors).is_empty(), "the ReplicaSet keeps no ref");
    for pod in [&op0, &op1] {
        let owners = s.owners(&pods(), pod);
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].uid, ors.metadata.uid, "the Pods stay owned by the ReplicaSet");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_of_an_owner_that_never_existed_should_be_collected() {
    let s = Served::start(SimCluster::new()).await;
    let ghost = ref_named("apps/v1", "ReplicaSet", "ghost", "6f1a4a3e-0000-4000-8000-000000000001");
    let live = s.create(&replicasets(), meta("default", "live", vec![]));
    let orphan = s.create(&pods(), meta("default", "stray", vec![ghost]));
    let kept = s.create(&pods(), meta("default", "kept", vec![blocking_ref_to(&live)]));
    eventually("the stray Pod collected", || !s.exists(&pods(), &orphan)).await;
    s.wait_in_graph(&[&kept]).await;
    assert!(s.exists(&pods(), &kept), "a Pod with a live owner stays");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_defined_after_the_start_should_be_monitored_and_collected() {
    let s = Served::start(SimCluster::new()).await;
    let crds = Gvr::new("apiextensions.k8s.io", "v1", "customresourcedefinitions");
    let crd: PartialObjectMeta = serde_json::from_value(support::crd_manifest("widgets", "Widget")).expect("crd");
    s.cluster.create(&crds, crd).expect("create the CRD");
    let widgets = Gvr::new("example.com", "v1", "widgets");
    eventually("a monitor of widgets", || {
        s.gc.monitor_states().get(&widgets) == Some(&true)
    })
    .await;

    let widget = s.create(&widgets, meta("default", "w", vec![]));
    let pod = s.create(&pods(), meta("default", "p", vec![blocking_ref_to(&widget)]));
    s.wait_in_graph(&[&widget, &pod]).await;
    s.cluster
        .delete_object(&widgets, "default", "w", &policy(PropagationPolicy::Foreground))
        .expect("delete the widget");
    eventually("the widget and its Pod gone", || {
        !s.exists(&widgets, &widget) && !s.exists(&pods(), &pod)
    })
    .await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_should_serve_the_graph_explanations_metrics_and_readiness() {
    let s = Served::start(SimCluster::new()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let slot = kube_gc_cli::server::Slot::with(s.gc.clone());
    tokio::spawn(kube_gc_cli::server::serve(listener, slot, std::future::pending()));

    let d = s.create(&deployments(), meta("default", "d", vec![]));
    let mut held = meta("default", "rs", vec![blocking_ref_to(&d)]);
    held.finalizers = vec!["example.com/hold".into()];
    let rs = s.create(&replicasets(), held);
    s.wait_in_graph(&[&d, &rs]).await;
    s.cluster
        .delete_object(&deployments(), "default", "d", &policy(PropagationPolicy::Foreground))
        .expect("delete");
    let graph = s.gc.graph().clone();
    let d_uid = Uid::parse(&d.metadata.uid);
    eventually("the Deployment waiting for its dependents", || {
        graph.get(&d_uid).is_some_and(|n| n.is_deleting_dependents())
    })
    .await;
    eventually("the ReplicaSet being deleted", || {
        s.cluster
            .get_object(&replicasets(), "default", "rs")
            .is_ok_and(|o| o.metadata.deletion_timestamp.is_some())
    })
    .await;

    let (code, explained) = http_get(addr, &format!("/explain?uid={}", d.metadata.uid)).await;
    assert_eq!(code, 200);
    let explained: serde_json::Value = serde_json::from_str(&explained).expect("JSON");
    assert_eq!(explained["deletingDependents"], true);
    assert_eq!(explained["blockingDependents"][0]["uid"], rs.metadata.uid.as_str());
    assert!(
        explained["reasons"][0]
            .as_str()
            .unwrap_or("")
            .contains("1 blocking dependent"),
        "{explained}"
    );
    let (_, explained) = http_get(addr, &format!("/explain?uid={}", rs.metadata.uid)).await;
    let explained: serde_json::Value = serde_json::from_str(&explained).expect("JSON");
    assert_eq!(explained["owners"][0]["state"], "deletingDependents", "{explained}");
    assert_eq!(http_get(addr, "/explain").await.0, 400);

    let (code, dot) = http_get(
        addr,
        &format!("{}?uid={}", kube_gc_cli::server::GRAPH_PATH, d.metadata.uid),
    )
    .await;
    assert_eq!(code, 200);
    assert!(dot.starts_with("strict digraph full {"), "{dot}");
    assert!(
        dot.contains(&format!("\"{}\" -> \"{}\"", rs.metadata.uid, d.metadata.uid)),
        "{dot}"
    );

    let (code, metrics) = http_get(addr, "/metrics").await;
    assert_eq!(code, 200);
    for needle in [
        "garbagecollector_controller_resources_sync_error_total 0",
        "workqueue_adds_total{name=\"garbage_collector_attempt_to_delete\"}",
        // prometheus-client writes `le` before the family's own labels.
        "workqueue_queue_duration_seconds_bucket{le=\"+Inf\",name=\"garbage_collector_attempt_to_orphan\"}",
        "kube_gc_monitor_synced{resource=\"apps/v1/deployments\"} 1",
        "kube_gc_api_requests_total{verb=\"watch\",code=\"200\"}",
        "kube_gc_monitor_sync_mode{resource=\"apps/v1/deployments\",mode=\"watch-list\"} 1",
        "kube_gc_api_requests_total{verb=\"discovery\",code=\"200\"}",
    ] {
        assert!(metrics.contains(needle), "no {needle} in\n{metrics}");
    }
    assert!(metrics.contains("kube_gc_graph_nodes 2"), "{metrics}");
    assert_eq!(http_get(addr, "/readyz").await, (200, "ok".to_string()));
    assert_eq!(http_get(addr, "/healthz").await, (200, "ok".to_string()));

    s.cluster
        .patch_object(
            &replicasets(),
            "default",
            "rs",
            kube_gc::api::PatchType::Merge,
            &json!({"metadata": {"finalizers": null}}),
        )
        .expect("release the ReplicaSet");
    eventually("the Deployment gone", || !s.exists(&deployments(), &d)).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_at_a_time_should_hold_the_leader_lease() {
    use kube_gc::leader::{LeaderElector, LeaseConfig};
    let cluster = Arc::new(SimCluster::new());
    let (client, server) = serve(&cluster).await;
    let elector = |identity: &str| {
        let lease = LeaseConfig {
            namespace: "kube-system".into(),
            name: "kube-gc".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1200),
            retry_period: Duration::from_millis(200),
            budget: kube_gc::api::layers::Budget::CONTROLLER_MANAGER,
            clock: kube_gc::leader::WallClock::system(),
        };
        lease.check().expect("valid timing");
        LeaderElector::over_kube(client.clone(), lease)
    };
    let holder = || {
        let leases = Gvr::new("coordination.k8s.io", "v1", "leases");
        let lease = cluster
            .get_object(&leases, "kube-system", "kube-gc")
            .expect("the lease");
        lease.rest["spec"]["holderIdentity"].as_str().unwrap_or("").to_string()
    };

    let mut first = elector("first");
    let first_tenure = first.tenure();
    assert!(!first_tenure.is_current(), "no tenure before the lease");
    tokio::time::timeout(PATIENCE, first.acquire())
        .await
        .expect("the first replica leads");
    assert_eq!(holder(), "first");
    assert!(first_tenure.is_current(), "a tenure with the lease");
    let renewing = tokio::spawn(async move { first.hold().await });

    let mut second = elector("second");
    let waited = tokio::time::timeout(Duration::from_secs(4), second.acquire()).await;
    assert!(
        waited.is_err(),
        "the second replica must not lead while the first renews"
    );
    assert_eq!(holder(), "first");

    // The first replica freezes without releasing: its tenure ends before the second leads,
    // which waits out the lease.
    renewing.abort();
    let started = std::time::Instant::now();
    tokio::time::timeout(PATIENCE, second.acquire())
        .await
        .expect("the second replica leads");
    assert!(!first_tenure.is_current(), "the frozen leader's tenure is over");
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "it waited out the lease"
    );
    assert_eq!(holder(), "second");

    // A graceful stop releases the lease: a third replica leads without waiting.
    second.release().await.expect("release");
    let mut third = elector("third");
    tokio::time::timeout(Duration::from_secs(1), third.acquire())
        .await
        .expect("the third replica leads at once");
    assert_eq!(holder(), "third");
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_client_should_send_no_writes_once_its_tenure_has_ended() {
    use kube_gc::api::ClusterApi;
    use kube_gc::leader::Tenure;
    let cluster = Arc::new(SimCluster::new());
    let (client, server) = serve(&cluster).await;
    let tenure = Tenure::new();
    let api = layered(client, Fence::new(move || tenure.is_current()));
    let pod = create_in(&cluster, &pods(), meta("default", "p", vec![]));

    let read = api.get(&pods(), "default", "p").await.expect("reads pass the fence");
    assert_eq!(read.metadata.uid, pod.metadata.uid);
    let refused = api
        .delete(&pods(), "default", "p", &policy(PropagationPolicy::Background))
        .await
        .expect_err("a write without a tenure");
    assert_eq!(refused.reason(), Some(kube_gc::api::StatusReason::ServiceUnavailable));
    let refused = api
        .patch(
            &pods(),
            "default",
            "p",
            &kube_gc::api::Patch::new(
                kube_gc::api::PatchType::Merge,
                json!({"metadata": {"labels": {"a": "b"}}}),
            ),
        )
        .await
        .expect_err("a write without a tenure");
    assert_eq!(refused.reason(), Some(kube_gc::api::StatusReason::ServiceUnavailable));
    let kept = cluster.get_object(&pods(), "default", "p").expect("the Pod stays");
    assert!(kept.metadata.labels.is_empty(), "no patch reached the server");
    assert!(
        api.call_counts()
            .iter()
            .all(|c| c.verb != "delete" && c.verb != "patch"),
        "no write was sent"
    );
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_to_an_unreachable_server_should_wait_instead_of_spinning() {
    use kube_gc::api::ClusterApi;
    const CALLERS: usize = 20;
    // A loopback port nobody listens on: every connection is refused at once.
    let addr = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        listener.local_addr().expect("address")
    };
    let api = Arc::new(layered(client_of(addr).await, Fence::open()));
    let until = std::time::Instant::now() + Duration::from_secs(1);
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let api = api.clone();
            tokio::spawn(async move {
                while std::time::Instant::now() < until {
                    let failed = get_pod(&*api).await.expect_err("no server");
                    assert_eq!(failed.reason(), Some(kube_gc::api::StatusReason::ServiceUnavailable));
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.expect("a caller");
    }
    let attempts: u64 = api.call_counts().iter().map(|c| c.count).sum();
    // Backoffs of 100, 200 and 400 ms leave room for five rounds in a second at most; without
    // them each caller fails thousands of times.
    assert!(
        attempts >= CALLERS as u64 && attempts <= 5 * CALLERS as u64,
        "{attempts} attempts by {CALLERS} callers in one second"
    );
}

/// Reads the Pod `default/p` through the trait, as the collector's tasks do: the trait declares
/// its futures `Send`, which the compiler cannot prove of the concrete stack's own futures inside
/// `tokio::spawn` (a limit of its higher-ranked lifetime checks, not of the stack).
fn get_pod<C: kube_gc::api::ClusterApi>(
    api: &C,
) -> impl std::future::Future<Output = Result<PartialObjectMeta, kube_gc::api::ApiError>> + Send + '_ {
    api.get(&PODS, "default", "p")
}

static PODS: std::sync::LazyLock<Gvr> = std::sync::LazyLock::new(pods);

/// A 429 storm with Retry-After: every request of the collector's stack is retried inside the
/// request until the server lets it through, so the caller never sees the throttling; the server
/// answered 429s meanwhile, and the counts show each try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_requests_should_be_retried_inside_the_request() {
    use kube_gc::api::ClusterApi;
    const READS: u64 = 60;
    use kube_gc_sim::http::{ErrorRate, HttpFaults, InjectedError};
    let cluster = Arc::new(SimCluster::new());
    let faults = HttpFaults {
        error_rates: vec![ErrorRate {
            verb: None,
            rate: 0.3,
            error: InjectedError::Throttled,
        }],
        ..HttpFaults::default()
    };
    let options = ServerOptions {
        faults,
        ..ServerOptions::default()
    };
    let (client, server) = serve_with(&cluster, options).await;
    let api = layered(client, Fence::open());
    let pod = create_in(&cluster, &pods(), meta("default", "p", vec![]));
    // At a rate of 0.3, that none of 60 reads draws a 429 has odds of one in two billion, and that
    // one of them draws ten in a row, the retry layer's limit, about one in three thousand.
    for _ in 0..READS {
        let read = api.get(&pods(), "default", "p").await.expect("the 429s are absorbed");
        assert_eq!(read.metadata.uid, pod.metadata.uid);
    }
    let counts = api.call_counts();
    let count = |code| {
        counts
            .iter()
            .filter(|c| c.verb == "get" && c.code == code)
            .map(|c| c.count)
            .sum::<u64>()
    };
    assert_eq!(count(200), READS);
    assert!(count(429) > 0, "the server throttled some tries: {counts:?}");
    server.abort();
}

/// A watch-list whose connection drops before its initial-events-end bookmark is not opened
/// again: that read goes on by paginated list (the monitor stays in watch-list mode for the next
/// one), and the view it builds holds every object, with nothing deleted on the way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_list_cut_before_its_bookmark_should_go_on_by_list() {
    use kube_gc::monitor::SyncMode;
    let cluster = Arc::new(SimCluster::new());
    let owner = create_in(&cluster, &replicasets(), meta("default", "rs", vec![]));
    let pods_made: Vec<PartialObjectMeta> = (0..50)
        .map(|i| {
            create_in(
                &cluster,
                &pods(),
                meta("default", &format!("p{i}"), vec![blocking_ref_to(&owner)]),
            )
        })
        .collect();
    let (client, server) = serve(&cluster).await;
    let api = Arc::new(support::Recorder::new(Arc::new(layered(client, Fence::open()))));
    api.trouble_next_watch_list(pods(), support::WatchListTrouble::CutAfter(20));
    let gc = GarbageCollector::start(api.clone(), Config::default()).await;
    assert!(gc.wait_for_sync(PATIENCE).await, "monitors never synced");

    assert_eq!(
        api.count("watch-list v1/pods /"),
        1,
        "the cut watch-list is not opened again"
    );
    assert!(api.count("list v1/pods /") >= 1, "the read goes on by list");
    let statuses = gc.monitor_statuses();
    let pod_status = &statuses[&pods()];
    assert_eq!(
        pod_status.sync_mode(),
        SyncMode::WatchList,
        "a cut stream is no refusal"
    );
    assert_eq!(pod_status.list_fallbacks(), 1, "the fallback is counted");
    let graph = gc.graph().clone();
    let uids: Vec<Uid> = pods_made.iter().map(|p| Uid::parse(&p.metadata.uid)).collect();
    eventually("every pod in the graph", || uids.iter().all(|u| graph.contains(u))).await;
    assert!(
        pods_made
            .iter()
            .all(|p| cluster.get_object(&pods(), "default", &p.metadata.name).is_ok()),
        "no pod of a live owner is deleted"
    );
    gc.shutdown().await;
    server.abort();
}

/// The journal line of `action` on the object with `uid`, from `/debug/journal`'s lines.
fn journal_line<'a>(lines: &'a [serde_json::Value], action: &str, uid: &str) -> &'a serde_json::Value {
    lines
        .iter()
        .find(|l| l["action"] == action && l["object"]["uid"] == uid)
        .unwrap_or_else(|| panic!("no {action} of {uid} in {lines:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_should_explain_every_write_and_tell_the_owners() {
    let cluster = Arc::new(SimCluster::new());
    let (client, server) = serve(&cluster).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("journal.jsonl");
    let journal = Journal::open(JournalConfig {
        file: Some(FileConfig {
            path: path.clone(),
            max_bytes: 1 << 20,
            max_files: 1,
        }),
        dry_run: false,
        owner_events: true,
    })
    .expect("a journal");
    let config = Config {
        journal,
        ..Config::default()
    };
    let gc = support::start_collector_with(client.clone(), config).await;
    let s = Served { cluster, gc, server };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(kube_gc_cli::server::serve(
        listener,
        kube_gc_cli::server::Slot::with(s.gc.clone()),
        std::future::pending(),
    ));

    let owned = |ns: &str| {
        let rs = s.create(&replicasets(), meta(ns, "rs", vec![]));
        let pod = s.create(&pods(), meta(ns, "p", vec![blocking_ref_to(&rs)]));
        (rs, pod)
    };
    let (brs, bpod) = owned("background");
    let (frs, fpod) = owned("foreground");
    let (ors, opod) = owned("orphan");
    s.wait_in_graph(&[&brs, &bpod, &frs, &fpod, &ors, &opod]).await;
    for (rs, p) in [
        (&brs, PropagationPolicy::Background),
        (&frs, PropagationPolicy::Foreground),
        (&ors, PropagationPolicy::Orphan),
    ] {
        s.cluster
            .delete_object(&replicasets(), &rs.metadata.namespace, "rs", &policy(p))
            .expect("delete");
    }
    eventually("the Pods collected and orphaned", || {
        !s.exists(&pods(), &bpod)
            && !s.exists(&pods(), &fpod)
            && !s.exists(&replicasets(), &frs)
            && !s.exists(&replicasets(), &ors)
    })
    .await;

    // Lines are written out by the journal's thread: wait for it, as `kube-gc run` does at exit.
    s.gc.journal().flush();
    let (code, body) = http_get(addr, "/debug/journal").await;
    assert_eq!(code, 200);
    let lines: Vec<serde_json::Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let deleted = journal_line(&lines, "delete", &bpod.metadata.uid);
    assert_eq!(deleted["source"], "sent");
    assert_eq!(deleted["policy"], "Background");
    assert_eq!(deleted["object"]["resource"], "pods");
    assert_eq!(deleted["object"]["namespace"], "background");
    assert_eq!(deleted["evidence"], "graph", "decided from the graph's observation");
    assert_eq!(deleted["owners"][0]["uid"], brs.metadata.uid.as_str());
    assert_eq!(deleted["owners"][0]["state"], "dangling");
    // The builder notes an owner that goes with dependents left in absentOwnerCache, which is
    // looked up first.
    assert_eq!(deleted["owners"][0]["seen"], "absent-owner-cache");
    assert_eq!(deleted["preconditions"]["uid"], bpod.metadata.uid.as_str());
    assert_eq!(
        deleted["preconditions"]["resourceVersion"],
        bpod.metadata.resource_version.as_str()
    );
    assert_eq!(deleted["answer"]["code"], 200);

    let waited = journal_line(&lines, "delete", &fpod.metadata.uid);
    assert_eq!(waited["owners"][0]["state"], "waiting");
    let finalizer = journal_line(&lines, "remove-finalizer", &frs.metadata.uid);
    assert_eq!(finalizer["finalizer"], "foregroundDeletion");
    assert_eq!(finalizer["answer"]["code"], 200);
    let orphaned = journal_line(&lines, "orphan", &opod.metadata.uid);
    assert_eq!(orphaned["refs"], json!([ors.metadata.uid]));
    assert_eq!(orphaned["owners"][0]["state"], "orphaning");
    assert_eq!(
        orphaned["patch"]["metadata"]["ownerReferences"][0]["$patch"], "delete",
        "the body sent is kept"
    );
    assert_eq!(
        journal_line(&lines, "remove-finalizer", &ors.metadata.uid)["finalizer"],
        "orphan"
    );
    assert!(s.exists(&pods(), &opod), "the orphaned Pod stays");

    let in_file = kube_gc::journal::read(&path).expect("the journal file");
    let from_file: Vec<serde_json::Value> = in_file.iter().map(|e| serde_json::to_value(e).expect("JSON")).collect();
    assert_eq!(from_file, lines, "the file holds what /debug/journal shows");

    let events: kube::Api<k8s_openapi::api::core::v1::Event> = kube::Api::namespaced(client, "background");
    let told = events.list(&Default::default()).await.expect("list events").items;
    let told: Vec<_> = told
        .iter()
        .filter(|e| e.reason.as_deref() == Some("DependentDeleted"))
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].involved_object.uid.as_deref(), Some(brs.metadata.uid.as_str()));
    assert!(
        told[0].message.as_deref().unwrap_or("").contains("background/p"),
        "{:?}",
        told[0].message
    );
    s.stop().await;
}
