//! No decision on a partial view (DESIGN §3b, `kube_gc::collector::partial_view`): while a
//! monitor's view is incomplete the workers neither let an owner go nor delete a dependent for an
//! absent owner, and an owner this collector orphaned is remembered, so a dependent seen after it
//! went loses the reference instead of its life (kubernetes#26120).
//!
//! The builder and workers are driven by hand on the paused clock; which views are incomplete is
//! set by each test through [`Blind`].

use crate::support;

use kube_gc::api::{Gvr, PartialObjectMeta, PropagationPolicy, FINALIZER_FOREGROUND, FINALIZER_ORPHAN};
use kube_gc::collector::partial_view::WAIT;
use kube_gc::collector::{CollectorConfig, PartialView, Views};
use kube_gc::event::EventType;
use kube_gc::graph::Uid;
use kube_gc::queue::QueueState;
use kube_gc_sim::SimCluster;
use parking_lot::Mutex;
use std::sync::Arc;
use support::*;

const NS: &str = "ns1";

/// Views whose incomplete resources a test sets.
#[derive(Default)]
struct Blind(Mutex<Vec<Gvr>>);

impl Blind {
    fn set(&self, resources: &[Gvr]) {
        *self.0.lock() = resources.to_vec();
    }
}

impl Views for Blind {
    fn incomplete(&self, of: Option<&[Gvr]>) -> Vec<Gvr> {
        let blind = self.0.lock();
        blind
            .iter()
            .filter(|gvr| of.is_none_or(|of| of.contains(gvr)))
            .cloned()
            .collect()
    }
}

async fn rig_with(blind: &Arc<Blind>) -> Rig {
    let partial_view = PartialView::new(blind.clone());
    Rig::with_views(SimCluster::new(), 500, CollectorConfig::default(), partial_view).await
}

fn refs_of(rig: &Rig, obj: &PartialObjectMeta) -> usize {
    rig.cluster
        .get_object(&pods(), NS, &obj.metadata.name)
        .expect("the pod lives")
        .metadata
        .owner_references
        .len()
}

/// Deletes the RC `name` with `p` and routes the update a watch would deliver.
fn delete_observed(rig: &Rig, name: &str, p: PropagationPolicy) -> PartialObjectMeta {
    rig.cluster.delete_object(&rcs(), NS, name, &policy(p)).expect("delete");
    let deleting = rig.cluster.get_object(&rcs(), NS, name).expect("held by a finalizer");
    rig.observe(EventType::Update, &deleting);
    deleting
}

#[tokio::test(start_paused = true)]
async fn orphaning_should_wait_while_a_view_is_incomplete_without_counting_a_failure() {
    let blind = Arc::new(Blind::default());
    let mut rig = rig_with(&blind).await;
    let rc = rig.create(&rcs(), meta(NS, "owner", vec![]));
    let pod = rig.create(&pods(), meta(NS, "pod", vec![ref_to(&rc)]));
    rig.observe(EventType::Add, &rc);
    rig.observe(EventType::Add, &pod);
    blind.set(&[pods()]);
    delete_observed(&rig, "owner", PropagationPolicy::Orphan);
    let owner = rig
        .graph
        .get(&Uid::parse(&rc.metadata.uid))
        .expect("owner in the graph");

    assert!(rig.step_orphan().await);
    let held = rig.cluster.get_object(&rcs(), NS, "owner").expect("the owner waits");
    assert!(held.metadata.has_finalizer(FINALIZER_ORPHAN));
    assert_eq!(refs_of(&rig, &pod), 1, "nothing is orphaned on a partial view");
    assert_eq!(rig.collector.attempt_to_orphan().contains(&owner), QueueState::Delayed);
    assert_eq!(
        rig.collector.attempt_to_orphan().num_requeues(&owner),
        0,
        "a wait is not a failure"
    );
    let waiting = rig.collector.partial_view().waiting.on(&owner.identity().uid);
    assert_eq!(
        waiting.as_deref(),
        Some(&[pods()][..]),
        "/explain can say on what it waits"
    );

    blind.set(&[]);
    tokio::time::sleep(WAIT * 2).await;
    rig.settle().await;
    assert_eq!(refs_of(&rig, &pod), 0, "orphaned once the view is complete");
    assert!(rig.cluster.get_object(&rcs(), NS, "owner").is_err(), "the owner went");
    assert!(rig.collector.partial_view().waiting.on(&owner.identity().uid).is_none());
}

/// kubernetes#26120: a dependent whose event reaches the graph only after its owner's orphan
/// finalizer went (created just before the orphan delete, or its watch lagging) must be orphaned,
/// not collected as the dependent of an absent owner.
#[tokio::test(start_paused = true)]
async fn a_dependent_seen_after_its_owner_was_orphaned_should_lose_the_ref_not_its_life() {
    let blind = Arc::new(Blind::default());
    let mut rig = rig_with(&blind).await;
    let rc = rig.create(&rcs(), meta(NS, "owner", vec![]));
    let late = rig.create(&pods(), meta(NS, "late", vec![ref_to(&rc)]));
    rig.observe(EventType::Add, &rc);
    let deleting = delete_observed(&rig, "owner", PropagationPolicy::Orphan);
    rig.settle().await;
    assert!(rig.cluster.get_object(&rcs(), NS, "owner").is_err(), "the owner went");
    rig.observe(EventType::Delete, &deleting);

    rig.observe(EventType::Add, &late);
    rig.settle().await;
    assert_eq!(refs_of(&rig, &late), 0, "the late dependent lives, orphaned");
}

#[tokio::test(start_paused = true)]
async fn a_foreground_owner_should_keep_its_finalizer_while_a_view_is_incomplete() {
    let blind = Arc::new(Blind::default());
    let mut rig = rig_with(&blind).await;
    let rc = rig.create(&rcs(), meta(NS, "owner", vec![]));
    let pod = rig.create(&pods(), meta(NS, "pod", vec![blocking_ref_to(&rc)]));
    rig.observe(EventType::Add, &rc);
    blind.set(&[pods()]); // the pod's list has not reached it yet
    delete_observed(&rig, "owner", PropagationPolicy::Foreground);
    rig.settle().await;
    let held = rig.cluster.get_object(&rcs(), NS, "owner").expect("the owner waits");
    assert!(held.metadata.has_finalizer(FINALIZER_FOREGROUND));

    rig.observe(EventType::Add, &pod);
    blind.set(&[]);
    for _ in 0..10 {
        tokio::time::sleep(WAIT * 2).await;
        rig.settle().await;
        let pod_lives = rig.cluster.get_object(&pods(), NS, "pod").is_ok();
        let owner_lives = rig.cluster.get_object(&rcs(), NS, "owner").is_ok();
        assert!(
            owner_lives || !pod_lives,
            "the owner went before its blocking dependent"
        );
        if !pod_lives {
            // The pod's delete event lets the owner go.
            rig.observe(EventType::Delete, &pod);
        }
        if !owner_lives {
            return;
        }
    }
    panic!("likely stuck: the foreground deletion never finished");
}

#[tokio::test(start_paused = true)]
async fn a_dependent_should_not_be_deleted_for_an_absent_owner_while_that_owner_view_is_incomplete() {
    let blind = Arc::new(Blind::default());
    let mut rig = rig_with(&blind).await;
    let ghost = PartialObjectMeta {
        api_version: "v1".into(),
        kind: "ReplicationController".into(),
        metadata: kube_gc::api::ObjectMeta {
            name: "ghost".into(),
            namespace: NS.into(),
            uid: "00000000-0000-4000-8000-00000000dead".into(),
            ..Default::default()
        },
        ..Default::default()
    };
    let pod = rig.create(&pods(), meta(NS, "pod", vec![ref_to(&ghost)]));
    blind.set(&[rcs()]);
    rig.observe(EventType::Add, &pod);
    rig.settle().await;
    assert_eq!(refs_of(&rig, &pod), 1, "kept while the owners' view is partial");
    let uid = Uid::parse(&pod.metadata.uid);
    assert_eq!(
        rig.collector.partial_view().waiting.on(&uid).as_deref(),
        Some(&[rcs()][..])
    );

    blind.set(&[]);
    for _ in 0..5 {
        tokio::time::sleep(WAIT * 2).await;
        rig.settle().await;
    }
    assert!(
        rig.cluster.get_object(&pods(), NS, "pod").is_err(),
        "collected once the view is complete"
    );
}

/// The whole controller, with the Pod monitor unable to list: an Orphan delete waits for it, and
/// `/explain` names it; once Pods can be listed the owner is orphaned and goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_should_name_the_view_an_orphan_deletion_waits_for() {
    use kube_gc::api::layers::Verb;
    use kube_gc::api::StatusReason;
    let cluster = SimCluster::new();
    // Pods cannot be read, by list or by watch-list.
    for verb in [Verb::List, Verb::Watch] {
        cluster.inject_fault(fault(
            verb,
            Some(("", "pods")),
            StatusReason::InternalError,
            "etcd is slow",
        ));
    }
    let config = kube_gc::controller::Config {
        initial_sync_timeout: std::time::Duration::from_millis(500),
        ..Default::default()
    };
    let h = Harness::start_unsynced(cluster, config).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(kube_gc_cli::server::serve(
        listener,
        kube_gc_cli::server::Slot::with(h.gc.clone()),
        std::future::pending(),
    ));
    let rc = h.create(&rcs(), meta(NS, "owner", vec![]));
    let cm = h.create(&configmaps(), meta(NS, "cm", vec![ref_to(&rc)]));
    h.wait_in_graph(&[&rc, &cm]).await;
    h.delete(&rcs(), &rc, policy(PropagationPolicy::Orphan));

    let path = format!("/explain?uid={}", rc.metadata.uid);
    let explain = async || -> serde_json::Value { serde_json::from_str(&http_get(addr, &path).await.1).expect("JSON") };
    within_real_time("the owner waiting for the Pod view", PATIENCE, async || {
        explain().await["waitingOnViews"] == serde_json::json!(["v1/pods"])
    })
    .await;
    let explained = explain().await;
    let reason = explained["reasons"][0].as_str().unwrap_or_default();
    assert!(reason.contains("view of v1/pods is complete"), "{explained}");
    assert!(h.exists(&rcs(), &rc), "the owner waits");
    assert_eq!(
        h.get(&configmaps(), &cm).expect("cm").metadata.owner_references.len(),
        1,
        "nothing orphaned yet"
    );

    h.cluster.clear_faults();
    h.eventually("the owner orphaned and gone", || !h.exists(&rcs(), &rc))
        .await;
    let cm = h.get(&configmaps(), &cm).expect("the dependent lives");
    assert!(cm.metadata.owner_references.is_empty());
    h.gc.shutdown().await;
}

/// A pods watch-list whose initial-events-end bookmark never comes: the pods view stays unsynced
/// for the 30 s the monitor waits on the silent stream, and nothing is decided on it meanwhile;
/// the monitor then reads pods by list, and only then is the pod of an owner that never existed
/// collected. Every pod of the live owner stays, and a pod deleted during the wait leaves the graph.
#[tokio::test(start_paused = true)]
async fn a_watch_list_without_its_bookmark_should_be_read_by_list_before_any_decision() {
    use kube_gc::monitor::{SyncMode, INITIAL_EVENTS_END_WAIT};
    let cluster = Arc::new(SimCluster::new());
    let owner = create_in(&cluster, &rcs(), meta(NS, "owner", vec![]));
    let kept: Vec<PartialObjectMeta> = (0..10)
        .map(|i| create_in(&cluster, &pods(), meta(NS, &format!("p{i}"), vec![ref_to(&owner)])))
        .collect();
    let never_existed = ref_named(
        "v1",
        "ReplicationController",
        "ghost",
        "6f1a4a3e-0000-4000-8000-000000000001",
    );
    let garbage = create_in(&cluster, &pods(), meta(NS, "garbage", vec![never_existed]));
    let api = Arc::new(Recorder::new(cluster.clone()));
    api.trouble_next_watch_list(pods(), WatchListTrouble::NoBookmark);
    let started = tokio::time::Instant::now();
    let gc = kube_gc::controller::GarbageCollector::start(api.clone(), kube_gc::controller::Config::default()).await;

    // While the stream is silent, a pod goes; the garbage waits for the pods view.
    tokio::time::sleep(INITIAL_EVENTS_END_WAIT / 2).await;
    let status = gc.monitor_statuses()[&pods()].clone();
    assert!(!status.is_synced(), "no bookmark, no sync");
    cluster
        .delete_object(&pods(), NS, "p9", &policy(PropagationPolicy::Background))
        .expect("delete p9");
    assert!(
        cluster.get_object(&pods(), NS, "garbage").is_ok(),
        "no decision on an unsynced view"
    );

    assert!(
        gc.wait_for_sync(INITIAL_EVENTS_END_WAIT * 2).await,
        "the list syncs the pods view"
    );
    assert!(
        started.elapsed() >= INITIAL_EVENTS_END_WAIT,
        "the monitor waited out the silence"
    );
    assert_eq!(status.sync_mode(), SyncMode::List);
    assert_eq!(
        api.count("watch-list v1/pods /"),
        1,
        "a refused watch-list is not asked again"
    );
    assert!(api.count("list v1/pods /") >= 1);
    let graph = gc.graph().clone();
    eventually("the garbage collected", || {
        cluster.get_object(&pods(), NS, "garbage").is_err()
    })
    .await;
    for pod in &kept[..9] {
        assert!(
            cluster.get_object(&pods(), NS, &pod.metadata.name).is_ok(),
            "{} lives",
            pod.metadata.name
        );
        assert!(graph.contains(&Uid::parse(&pod.metadata.uid)));
    }
    assert!(
        !graph.contains(&Uid::parse(&kept[9].metadata.uid)),
        "the deleted pod left the graph"
    );
    assert!(!graph.contains(&Uid::parse(&garbage.metadata.uid)));
    kube_gc::graph::invariants::assert_ok(&graph);
    gc.shutdown().await;
}

/// A dependent of an owner deleted in the Foreground way is itself deleted in the Foreground way
/// when it has dependents; on a partial view the graph may hold none of them yet, and a
/// Background delete would let it go before its own blocking dependents, which then block an
/// owner that no longer exists. Until the view is complete it is deleted in the Foreground way,
/// the choice that is right whether it has dependents or not.
#[tokio::test(start_paused = true)]
async fn a_foreground_owner_dependent_should_not_be_deleted_in_the_background_on_a_partial_view() {
    let blind = Arc::new(Blind::default());
    let mut rig = rig_with(&blind).await;
    let rc = rig.create(&rcs(), meta(NS, "owner", vec![]));
    let mid = rig.create(&rcs(), meta(NS, "mid", vec![blocking_ref_to(&rc)]));
    rig.create(&pods(), meta(NS, "pod", vec![blocking_ref_to(&mid)]));
    rig.observe(EventType::Add, &rc);
    rig.observe(EventType::Add, &mid);
    blind.set(&[pods()]); // the pod's list has not reached it yet
    delete_observed(&rig, "owner", PropagationPolicy::Foreground);
    rig.settle().await;

    let mid = rig
        .cluster
        .get_object(&rcs(), NS, "mid")
        .expect("the middle owner must outlive its unseen blocking dependent");
    assert!(
        mid.metadata.has_finalizer(FINALIZER_FOREGROUND),
        "deleted in the Foreground way: {:?}",
        mid.metadata
    );
    let owner = rig.cluster.get_object(&rcs(), NS, "owner").expect("the owner waits");
    assert!(owner.metadata.has_finalizer(FINALIZER_FOREGROUND));
}

/// A server that ends every watch after 50 events (its own limits, a load balancer's, a
/// slow-consumer cut) never lets a watch-list of a larger resource reach its bookmark: each read
/// of that resource goes on by paginated list once its watch-list broke, as client-go's does, so
/// the view syncs and the garbage is collected; the next read tries watch-list again.
#[tokio::test(start_paused = true)]
async fn a_watch_list_broken_before_its_bookmark_should_go_on_by_list() {
    use kube_gc::monitor::SyncMode;
    let cluster = Arc::new(SimCluster::new());
    let owner = create_in(&cluster, &rcs(), meta(NS, "owner", vec![]));
    let kept: Vec<PartialObjectMeta> = (0..120)
        .map(|i| create_in(&cluster, &pods(), meta(NS, &format!("p{i}"), vec![ref_to(&owner)])))
        .collect();
    let ghost = ref_named(
        "v1",
        "ReplicationController",
        "ghost",
        "6f1a4a3e-0000-4000-8000-000000000002",
    );
    create_in(&cluster, &pods(), meta(NS, "garbage", vec![ghost]));
    let api = Arc::new(Recorder::new(cluster.clone()));
    api.trouble_next_watch_list(pods(), WatchListTrouble::CutEachAfter(50));
    let gc = kube_gc::controller::GarbageCollector::start(api.clone(), kube_gc::controller::Config::default()).await;

    assert!(
        gc.wait_for_sync(std::time::Duration::from_secs(60)).await,
        "the pods view syncs although no watch-list of it ends"
    );
    let status = gc.monitor_statuses()[&pods()].clone();
    assert!(status.list_fallbacks() >= 1);
    assert_eq!(status.sync_mode(), SyncMode::WatchList, "a broken stream is no refusal");
    assert!(api.count("list v1/pods /") >= 1);
    eventually("the garbage collected", || {
        cluster.get_object(&pods(), NS, "garbage").is_err()
    })
    .await;
    for pod in &kept {
        assert!(
            cluster.get_object(&pods(), NS, &pod.metadata.name).is_ok(),
            "{} lives",
            pod.metadata.name
        );
    }
    gc.shutdown().await;
}

/// A server that ignores `sendInitialEvents` answers a plain watch: the objects, no bookmark,
/// then the changes. On a busy resource the stream is never silent for long, so the silence bound
/// alone would wait forever; the whole initial stream is bounded too, and the monitor reads the
/// resource by list from then on.
#[tokio::test(start_paused = true)]
async fn a_busy_watch_list_without_its_bookmark_should_be_read_by_list() {
    use kube_gc::monitor::{SyncMode, INITIAL_EVENTS_END_WAIT};
    let cluster = Arc::new(SimCluster::new());
    let owner = create_in(&cluster, &rcs(), meta(NS, "owner", vec![]));
    let api = Arc::new(Recorder::new(cluster.clone()));
    api.trouble_next_watch_list(pods(), WatchListTrouble::NoBookmark);
    let churn = {
        let (cluster, owner) = (cluster.clone(), owner.clone());
        tokio::spawn(async move {
            for i in 0..2_000 {
                create_in(&cluster, &pods(), meta(NS, &format!("busy-{i}"), vec![ref_to(&owner)]));
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        })
    };
    let gc = kube_gc::controller::GarbageCollector::start(api.clone(), kube_gc::controller::Config::default()).await;
    assert!(
        gc.wait_for_sync(INITIAL_EVENTS_END_WAIT * 4).await,
        "the pods view syncs although the stream never goes quiet"
    );
    assert_eq!(gc.monitor_statuses()[&pods()].sync_mode(), SyncMode::List);
    churn.abort();
    gc.shutdown().await;
}
