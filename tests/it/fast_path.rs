//! The collector's fast path (one API call per collected object): the calls it makes, and that it
//! deletes nothing upstream would keep when the graph is behind the cluster.
//!
//! Call patterns are checked step by step on a [`Rig`], where the graph sees only the events a
//! test applies, so it lags the cluster exactly as far as the test wants. Outcomes are checked on
//! the whole controller ([`Harness`]) while a watch lags (the simulated cluster delays one
//! type's events) or loses events and relists, and users write concurrently: an ownerReference
//! added back, a finalizer added, an object recreated under the same name, an owner just created.
//! Each such scenario runs with the fast path and with `verify_with_get`, and both must end the
//! same way.

use crate::support;

use kube_gc::api::{ClusterApi, DeleteOptions, Gvr, PartialObjectMeta, PropagationPolicy, FINALIZER_ORPHAN};
use kube_gc::collector::CollectorConfig;
use kube_gc::controller::Config;
use kube_gc::event::EventType;
use kube_gc::graph::{invariants, Uid};
use kube_gc_sim::SimCluster;
use std::sync::Arc;
use std::time::Duration;
use support::*;

const NS: &str = "ns1";

/// A finalizer no controller removes.
const HOLD: &str = "example.com/hold";

/// Longer than any test waits before it checks: a lagging watch delivers nothing before then.
const LAG: Duration = Duration::from_secs(30);

fn config(verify_with_get: bool) -> Config {
    Config {
        collector: CollectorConfig {
            verify_with_get,
            ..CollectorConfig::default()
        },
        ..Config::default()
    }
}

fn uids(obj: &PartialObjectMeta) -> Vec<&str> {
    obj.metadata.owner_references.iter().map(|r| r.uid.as_str()).collect()
}

fn background() -> DeleteOptions {
    policy(PropagationPolicy::Background)
}

// ---------------------------------------------------------------------------------------------
// Call patterns, on the rig
// ---------------------------------------------------------------------------------------------

/// An RC and a pod it owns, both observed by the rig's graph at their current versions; then the
/// RC is deleted and its deletion observed, which queues the pod.
async fn pod_of_deleted_rc(rig: &Rig) -> PartialObjectMeta {
    let rc = rig.create(&rcs(), meta(NS, "rc", vec![]));
    let pod = rig.create(&pods(), meta(NS, "pod", vec![ref_to(&rc)]));
    queue_after_owner_deleted(rig, &rcs(), &rc, &pod).await;
    pod
}

/// Observes `owner` and `dependent`, deletes `owner` in the background and observes that, then
/// leaves `dependent` alone queued for attemptToDelete: the state a worker meets when the graph
/// is current with the cluster.
async fn queue_after_owner_deleted(
    rig: &Rig,
    owner_gvr: &Gvr,
    owner: &PartialObjectMeta,
    dependent: &PartialObjectMeta,
) {
    rig.observe(EventType::Add, owner);
    rig.observe(EventType::Add, dependent);
    let m = &owner.metadata;
    rig.cluster
        .delete_object(owner_gvr, NS, &m.name, &background())
        .unwrap_or_else(|e| panic!("delete {owner_gvr} {}: {e}", m.name));
    rig.observe(EventType::Delete, owner);
    rig.drain_delete_queue().await;
    let item = rig
        .graph
        .get(&Uid::parse(&dependent.metadata.uid))
        .expect("the dependent's node");
    rig.collector.attempt_to_delete().add(item);
}

/// Runs one attemptToDelete worker step through a recording collector, which must find an item
/// queued; the recorder holds the calls the step made.
async fn record_delete_step(rig: &Rig) -> Arc<Recorder<SimCluster>> {
    let (collector, recorder) = rig.recording_collector().await;
    assert!(collector.process_attempt_to_delete_worker().await);
    recorder
}

/// The pod named `pod`, which the step under test must have kept.
fn kept_pod(rig: &Rig) -> PartialObjectMeta {
    rig.cluster.get_object(&pods(), NS, "pod").expect("the pod is kept")
}

#[tokio::test(start_paused = true)]
async fn an_observed_dependent_of_a_deleted_owner_is_collected_with_one_delete_at_its_observed_version() {
    let rig = Rig::new(SimCluster::new()).await;
    let pod = pod_of_deleted_rc(&rig).await;

    let recorder = record_delete_step(&rig).await;

    assert_eq!(recorder.calls(), ["delete v1/pods ns1/pod"]);
    let preconditions = recorder.deletes()[0].preconditions.clone().expect("preconditions");
    assert_eq!(preconditions.uid.as_deref(), Some(pod.metadata.uid.as_str()));
    assert_eq!(
        preconditions.resource_version.as_deref(),
        Some(pod.metadata.resource_version.as_str()),
        "the version the graph observed"
    );
    assert!(rig.cluster.get_object(&pods(), NS, "pod").is_err());
}

#[tokio::test(start_paused = true)]
async fn a_dependent_changed_since_observed_is_read_live_and_judged_again() {
    let rig = Rig::new(SimCluster::new()).await;
    let pod = pod_of_deleted_rc(&rig).await;
    // A label the graph has not seen: unrelated to the decision, but a new version.
    let mut labelled = rig.cluster.get_object(&pods(), NS, "pod").expect("pod");
    labelled.metadata.labels.insert("touched".into(), "yes".into());
    let labelled = rig.cluster.update(&pods(), labelled).expect("label");

    let recorder = record_delete_step(&rig).await;

    assert_eq!(
        recorder.calls(),
        [
            "delete v1/pods ns1/pod",
            "get v1/pods ns1/pod",
            "delete v1/pods ns1/pod"
        ],
        "the stale DELETE conflicts; upstream's path reads the pod (the RC is a tombstone) and \
         deletes it at the version it read"
    );
    let versions: Vec<Option<String>> = recorder
        .deletes()
        .iter()
        .map(|d| d.preconditions.clone().and_then(|p| p.resource_version))
        .collect();
    assert_eq!(
        versions,
        [
            Some(pod.metadata.resource_version.clone()),
            Some(labelled.metadata.resource_version.clone())
        ]
    );
    assert!(rig.cluster.get_object(&pods(), NS, "pod").is_err());
}

#[tokio::test(start_paused = true)]
async fn a_dependent_given_another_owner_since_observed_is_kept() {
    let rig = Rig::new(SimCluster::new()).await;
    let keeper = rig.create(&configmaps(), meta(NS, "keeper", vec![]));
    rig.observe(EventType::Add, &keeper);
    pod_of_deleted_rc(&rig).await;
    let mut adopted = rig.cluster.get_object(&pods(), NS, "pod").expect("pod");
    adopted.metadata.owner_references.push(ref_to(&keeper));
    rig.cluster.update(&pods(), adopted).expect("add an owner");

    let recorder = record_delete_step(&rig).await;

    assert_eq!(
        recorder.calls(),
        ["delete v1/pods ns1/pod", "get v1/pods ns1/pod", "patch v1/pods ns1/pod"],
        "the observed keeper is solid without a GET; only the dangling ref goes"
    );
    assert_eq!(uids(&kept_pod(&rig)), [keeper.metadata.uid.as_str()]);
}

#[tokio::test(start_paused = true)]
async fn an_owner_the_graph_never_observed_is_verified_with_a_get() {
    let rig = Rig::new(SimCluster::new()).await;
    let gone = rig.create(&configmaps(), meta(NS, "gone", vec![]));
    // Created, but its watch event has not arrived: the graph knows it only as a virtual owner.
    let fresh = rig.create(&rcs(), meta(NS, "fresh", vec![]));
    let pod = rig.create(&pods(), meta(NS, "pod", vec![ref_to(&gone), ref_to(&fresh)]));
    queue_after_owner_deleted(&rig, &configmaps(), &gone, &pod).await;

    let recorder = record_delete_step(&rig).await;

    assert_eq!(
        recorder.calls(),
        ["get v1/replicationcontrollers ns1/fresh", "patch v1/pods ns1/pod"],
        "the virtual owner is read live and found solid; the tombstoned one is dangling"
    );
    assert_eq!(uids(&kept_pod(&rig)), [fresh.metadata.uid.as_str()]);
}

#[tokio::test(start_paused = true)]
async fn verify_with_get_reads_the_item_and_its_owners_as_upstream_does() {
    let config = CollectorConfig {
        verify_with_get: true,
        ..CollectorConfig::default()
    };
    let rig = Rig::with_config(SimCluster::new(), 500, config).await;
    pod_of_deleted_rc(&rig).await;

    let recorder = record_delete_step(&rig).await;

    assert_eq!(
        recorder.calls(),
        ["get v1/pods ns1/pod", "delete v1/pods ns1/pod"],
        "the pod is read live; its RC is in absentOwnerCache, where the builder put it"
    );
    assert!(
        rig.graph.tombstones().is_empty(),
        "a graph read live keeps no tombstones"
    );
}

#[tokio::test(start_paused = true)]
async fn only_a_watched_deletion_leaves_a_tombstone() {
    let mut rig = Rig::new(SimCluster::new()).await;
    let rc = rig.create(&rcs(), meta(NS, "rc", vec![]));
    let pod = rig.create(&pods(), meta(NS, "pod", vec![ref_to(&rc)]));
    // The pod names an RC the graph never observes; the worker finds it gone and says so with a
    // virtual delete, which removes the virtual node without a tombstone.
    rig.observe(EventType::Add, &pod);
    rig.cluster
        .delete_object(&rcs(), NS, "rc", &background())
        .expect("delete rc");
    assert!(rig.step_delete().await, "the virtual RC is queued");
    assert_eq!(rig.apply_routed(), 1, "one virtual delete");
    let rc_uid = Uid::parse(&rc.metadata.uid);
    assert!(!rig.graph.contains(&rc_uid));
    assert!(!rig.graph.tombstones().contains(&rc_uid));

    // A watched deletion of an owner with dependents does leave one.
    let owner = rig.create(&configmaps(), meta(NS, "owner", vec![]));
    let child = rig.create(&configmaps(), meta(NS, "child", vec![ref_to(&owner)]));
    rig.observe(EventType::Add, &owner);
    rig.observe(EventType::Add, &child);
    rig.observe(EventType::Delete, &owner);
    assert!(rig.graph.tombstones().contains(&Uid::parse(&owner.metadata.uid)));
}

#[tokio::test(start_paused = true)]
async fn an_orphaned_owner_loses_its_finalizer_at_its_observed_version_or_else_after_a_get() {
    for changed_since_observed in [false, true] {
        let rig = Rig::new(SimCluster::new()).await;
        let rc = rig.create(&rcs(), meta(NS, "rc", vec![]));
        let pod = rig.create(&pods(), meta(NS, "pod", vec![ref_to(&rc)]));
        rig.observe(EventType::Add, &rc);
        rig.observe(EventType::Add, &pod);
        rig.cluster
            .delete_object(&rcs(), NS, "rc", &policy(PropagationPolicy::Orphan))
            .expect("orphan delete");
        let deleting = rig.cluster.get_object(&rcs(), NS, "rc").expect("rc waits");
        assert_eq!(deleting.metadata.finalizers, [FINALIZER_ORPHAN]);
        rig.observe(EventType::Update, &deleting);
        if changed_since_observed {
            let mut labelled = deleting.clone();
            labelled.metadata.labels.insert("touched".into(), "yes".into());
            rig.cluster.update(&rcs(), labelled).expect("label");
        }
        let (collector, recorder) = rig.recording_collector().await;

        assert!(collector.process_attempt_to_orphan_worker().await);

        let expected: &[&str] = if changed_since_observed {
            &[
                "patch v1/pods ns1/pod",
                "patch v1/replicationcontrollers ns1/rc",
                "get v1/replicationcontrollers ns1/rc",
                "patch v1/replicationcontrollers ns1/rc",
            ]
        } else {
            &["patch v1/pods ns1/pod", "patch v1/replicationcontrollers ns1/rc"]
        };
        assert_eq!(
            recorder.calls(),
            expected,
            "changed since observed: {changed_since_observed}"
        );
        assert!(rig.cluster.get_object(&rcs(), NS, "rc").is_err(), "the owner is gone");
        let left = rig.cluster.get_object(&pods(), NS, "pod").expect("orphaned pod");
        assert!(left.metadata.owner_references.is_empty());
    }
}

// ---------------------------------------------------------------------------------------------
// Outcomes, on the whole controller, with lagging watches and concurrent users
// ---------------------------------------------------------------------------------------------

/// Runs `scenario` on a fresh controller with the fast path, then on one with `verify_with_get`,
/// shutting each down once its run has passed.
async fn in_both_modes(scenario: impl AsyncFn(&Harness, bool)) {
    for verify_with_get in [false, true] {
        let h = Harness::start_with(SimCluster::new(), config(verify_with_get)).await;
        scenario(&h, verify_with_get).await;
        h.gc.shutdown().await;
    }
}

/// An RC and a config map `keeper`, neither owned: the owner to delete and the one to keep.
fn rc_and_keeper<C: ClusterApi>(h: &Harness<C>) -> (PartialObjectMeta, PartialObjectMeta) {
    let rc = h.create(&rcs(), meta(NS, "rc", vec![]));
    let keeper = h.create(&configmaps(), meta(NS, "keeper", vec![]));
    (rc, keeper)
}

/// Adds `finalizer` to `pod` while the pods' watch lags, so the graph still sees the pod without
/// it when its owner `rc` is deleted in the background; returns once the lag has ended and the
/// graph has caught up.
async fn finalize_while_pods_lag<C: ClusterApi>(
    h: &Harness<C>,
    rc: &PartialObjectMeta,
    pod: &PartialObjectMeta,
    finalizer: &str,
) {
    h.cluster.set_watch_delay("", "pods", LAG);
    h.edit(&pods(), pod, |m| m.finalizers.push(finalizer.into()));
    h.delete(&rcs(), rc, background());
    h.wait(LAG * 2).await;
    catch_up(h, "pods").await;
}

/// Ends the lag of `resource`'s watch, lets the event in flight arrive and the collector settle,
/// then checks that the graph holds every pod the cluster does.
async fn catch_up<C: ClusterApi>(h: &Harness<C>, resource: &str) {
    h.cluster.set_watch_delay("", resource, Duration::ZERO);
    h.wait(LAG).await;
    settle_and_mirror(h).await;
}

/// Lets the collector settle, then checks that the graph holds every pod the cluster does.
async fn settle_and_mirror<C: ClusterApi>(h: &Harness<C>) {
    h.settle().await;
    invariants::assert_ok(h.gc.graph());
    for pod in h.cluster.list_objects(&pods()) {
        assert!(h.in_graph(&pod), "pod {} missing from the graph", pod.metadata.name);
    }
}

#[tokio::test(start_paused = true)]
async fn a_dependent_given_an_owner_back_while_its_watch_lags_is_kept() {
    in_both_modes(async |h: &Harness, verify: bool| {
        let (rc, keeper) = rc_and_keeper(h);
        let pod = h.create(&pods(), meta(NS, "pod", vec![ref_to(&rc)]));
        h.wait_in_graph(&[&rc, &keeper, &pod]).await;

        h.cluster.set_watch_delay("", "pods", LAG);
        h.edit(&pods(), &pod, |m| m.owner_references.push(ref_to(&keeper)));
        h.delete(&rcs(), &rc, background());
        h.wait(LAG / 2).await;
        let kept = h.get(&pods(), &pod).expect("the pod has a live owner");
        assert_eq!(uids(&kept), [keeper.metadata.uid.as_str()], "verify={verify}");
        // The fast path tried a DELETE at the version the graph saw, and the server refused it.
        assert_eq!(h.cluster.api_calls().delete, u64::from(!verify));

        catch_up(h, "pods").await;
        assert!(h.exists(&pods(), &pod));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn an_orphan_finalizer_added_while_the_watch_lags_decides_the_policy() {
    in_both_modes(async |h: &Harness, verify: bool| {
        let rc = h.create(&rcs(), meta(NS, "rc", vec![]));
        let pod = h.create(&pods(), meta(NS, "pod", vec![ref_to(&rc)]));
        let config_map = h.create(&configmaps(), meta(NS, "cm", vec![ref_to(&pod)]));
        h.wait_in_graph(&[&rc, &pod, &config_map]).await;

        // The graph last saw the pod without finalizers; deleted at that version it would go in
        // the background, and take the config map with it.
        finalize_while_pods_lag(h, &rc, &pod, FINALIZER_ORPHAN).await;

        assert!(!h.exists(&pods(), &pod), "verify={verify}: the pod is collected");
        let left = h
            .get(&configmaps(), &config_map)
            .expect("its own orphan finalizer orphans the config map");
        assert!(left.metadata.owner_references.is_empty());
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_hold_finalizer_added_while_the_watch_lags_keeps_the_collected_object() {
    in_both_modes(async |h: &Harness, verify: bool| {
        let rc = h.create(&rcs(), meta(NS, "rc", vec![]));
        let pod = h.create(&pods(), meta(NS, "pod", vec![ref_to(&rc)]));
        h.wait_in_graph(&[&rc, &pod]).await;

        finalize_while_pods_lag(h, &rc, &pod, HOLD).await;

        let held = h.get(&pods(), &pod).expect("held by its finalizer");
        assert!(held.metadata.deletion_timestamp.is_some(), "verify={verify}: deleted");
        assert_eq!(held.metadata.finalizers, [HOLD]);
        h.edit(&pods(), &pod, |m| m.finalizers.clear());
        h.eventually("the released pod gone", || !h.exists(&pods(), &pod)).await;
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn an_object_recreated_under_the_same_name_while_the_watch_lags_is_kept() {
    in_both_modes(async |h: &Harness, verify: bool| {
        let (rc, keeper) = rc_and_keeper(h);
        let pod = h.create(&pods(), meta(NS, "pod", vec![ref_to(&rc)]));
        h.wait_in_graph(&[&rc, &keeper, &pod]).await;

        h.cluster.set_watch_delay("", "pods", LAG);
        h.delete(&pods(), &pod, DeleteOptions::default());
        let again = h.create(&pods(), meta(NS, "pod", vec![ref_to(&rc), ref_to(&keeper)]));
        let orphan = h.create(&pods(), meta(NS, "unowned", vec![]));
        h.delete(&rcs(), &rc, background());
        h.wait(LAG * 4).await;
        // The fast path's DELETE named the old pod's UID, and the server refused it.
        assert_eq!(h.cluster.api_calls().delete, u64::from(!verify));
        catch_up(h, "pods").await;

        let left = h.get(&pods(), &again).expect("the new pod under the old name is kept");
        assert_eq!(uids(&left), [keeper.metadata.uid.as_str()], "verify={verify}");
        assert!(h.exists(&pods(), &orphan));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_dependent_of_an_owner_whose_watch_lags_its_creation_is_kept() {
    in_both_modes(async |h: &Harness, verify: bool| {
        let gone = h.create(&configmaps(), meta(NS, "gone", vec![]));
        h.wait_in_graph(&[&gone]).await;

        h.cluster.set_watch_delay("", "replicationcontrollers", LAG);
        let fresh = h.create(&rcs(), meta(NS, "fresh", vec![]));
        let pod = h.create(&pods(), meta(NS, "pod", vec![ref_to(&gone), ref_to(&fresh)]));
        h.wait_in_graph(&[&pod]).await;
        h.delete(&configmaps(), &gone, background());
        h.wait(LAG / 2).await;
        let kept = h.get(&pods(), &pod).expect("the new owner is live");
        assert_eq!(uids(&kept), [fresh.metadata.uid.as_str()], "verify={verify}");

        catch_up(h, "replicationcontrollers").await;
        assert!(h.exists(&pods(), &pod));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_deletion_the_owner_watch_has_not_delivered_only_defers_the_dependent() {
    in_both_modes(async |h: &Harness, verify: bool| {
        let rc = h.create(&rcs(), meta(NS, "rc", vec![]));
        let cm = h.create(&configmaps(), meta(NS, "cm", vec![]));
        let pod = h.create(&pods(), meta(NS, "pod", vec![ref_to(&rc), ref_to(&cm)]));
        h.wait_in_graph(&[&rc, &cm, &pod]).await;

        // Both owners go; the RC's deletion reaches the graph long after the config map's.
        h.cluster.set_watch_delay("", "replicationcontrollers", LAG);
        h.delete(&rcs(), &rc, background());
        h.delete(&configmaps(), &cm, background());
        h.wait(LAG / 2).await;
        // Upstream reads the RC live and collects the pod at once; the fast path trusts the
        // graph's "solid" and waits for the RC's delete event, which re-queues the pod.
        assert_eq!(h.exists(&pods(), &pod), !verify, "verify={verify}");

        catch_up(h, "replicationcontrollers").await;
        assert!(
            !h.exists(&pods(), &pod),
            "verify={verify}: collected once both are known gone"
        );
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn pod_events_lost_and_relisted_leave_no_wrongful_deletion_and_a_converged_graph() {
    in_both_modes(async |h: &Harness, verify: bool| {
        let (rc, keeper) = rc_and_keeper(h);
        let adopted = h.create(&pods(), meta(NS, "adopted", vec![ref_to(&rc)]));
        let replaced = h.create(&pods(), meta(NS, "replaced", vec![ref_to(&rc)]));
        let doomed = h.create(&pods(), meta(NS, "doomed", vec![ref_to(&rc)]));
        h.wait_in_graph(&[&rc, &keeper, &adopted, &replaced, &doomed]).await;

        h.cluster.set_watch_blackout("", "pods", true);
        h.edit(&pods(), &adopted, |m| m.owner_references.push(ref_to(&keeper)));
        h.delete(&pods(), &replaced, DeleteOptions::default());
        let again = h.create(&pods(), meta(NS, "replaced", vec![ref_to(&rc), ref_to(&keeper)]));
        h.delete(&rcs(), &rc, background());
        h.wait(LAG).await;
        assert!(h.exists(&pods(), &adopted), "verify={verify}");
        assert!(h.exists(&pods(), &again), "verify={verify}");

        // The next pod event ends the blackout's watch; the monitor relists.
        h.cluster.set_watch_blackout("", "pods", false);
        h.create(&pods(), meta(NS, "nudge", vec![]));
        h.wait(LAG).await;
        settle_and_mirror(h).await;
        for kept in [&adopted, &again] {
            let left = h.get(&pods(), kept).expect("kept");
            assert_eq!(uids(&left), [keeper.metadata.uid.as_str()], "verify={verify}");
        }
        assert!(
            !h.exists(&pods(), &doomed),
            "verify={verify}: the dependent with no other owner goes"
        );
        assert!(!h.in_graph(&replaced), "the replaced pod's node is gone");
        assert!(
            !h.in_graph(&doomed),
            "the relist removed the node of the pod it missed deleted"
        );
    })
    .await;
}
