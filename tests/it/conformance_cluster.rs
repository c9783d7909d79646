//! Cluster-level conformance: gc-spec §10 items 1–12 and 14 (upstream's integration tests in
//! `test/integration/garbagecollector`) and 45–55 (upstream's e2e tests in
//! `test/e2e/apimachinery/garbage_collector.go`).
//!
//! Each test runs the whole controller against the simulated cluster and acts as a user would:
//! it creates and deletes objects, then checks what exists afterwards, with which ownerReferences
//! and finalizers, and what the graph still holds. Grids are smaller than upstream's, with the
//! same shape. Time is virtual (tokio's paused clock), so waits of seconds cost nothing and every
//! wait is bounded by [`support::PATIENCE`].

use crate::support;

use kube_gc::api::{DeleteOptions, Gvr, OwnerReference, PartialObjectMeta, PropagationPolicy, FINALIZER_FOREGROUND};
use kube_gc::controller::Config;
use kube_gc::graph::{Handle, Uid};
use kube_gc::sim::{SimCluster, TypeDef};
use std::time::Duration;
use support::*;

/// A finalizer no controller removes: it keeps a deleted object around, as a pod's graceful
/// termination does on a real cluster, until the test removes it.
const HOLD: &str = "x/y";

fn rc(h: &Harness, ns: &str, name: &str) -> PartialObjectMeta {
    h.create(&rcs(), meta(ns, name, vec![]))
}

fn pod(h: &Harness, ns: &str, name: &str, owners: Vec<OwnerReference>) -> PartialObjectMeta {
    h.create(&pods(), meta(ns, name, owners))
}

/// A pod that a deletion cannot remove until [`HOLD`] is taken off.
fn held_pod(h: &Harness, ns: &str, name: &str, owners: Vec<OwnerReference>) -> PartialObjectMeta {
    let mut m = meta(ns, name, owners);
    m.finalizers = vec![HOLD.into()];
    h.create(&pods(), m)
}

/// A controller ref, as workload controllers set on what they create.
fn controller_ref_to(owner: &PartialObjectMeta) -> OwnerReference {
    OwnerReference {
        controller: Some(true),
        ..blocking_ref_to(owner)
    }
}

fn non_blocking_ref_to(owner: &PartialObjectMeta) -> OwnerReference {
    OwnerReference {
        block_owner_deletion: Some(false),
        ..ref_to(owner)
    }
}

/// The graph's node for `obj`.
fn node(h: &Harness, obj: &PartialObjectMeta) -> Option<Handle> {
    h.gc.graph().get(&Uid::parse(&obj.metadata.uid))
}

fn uids(refs: &[OwnerReference]) -> Vec<&str> {
    refs.iter().map(|r| r.uid.as_str()).collect()
}

fn names_in(h: &Harness, gvr: &Gvr, ns: &str) -> Vec<String> {
    let mut names: Vec<String> = h
        .cluster
        .list_objects(gvr)
        .into_iter()
        .filter(|o| o.metadata.namespace == ns)
        .map(|o| o.metadata.name)
        .collect();
    names.sort();
    names
}

/// A custom resource type (a CRD): strategic merge patches of it are answered with 415.
fn crd(group: &str, kind: &str, plural: &str) -> TypeDef {
    TypeDef::new(group, "v1", kind, plural, true).custom()
}

/// Removes [`HOLD`] from every object given, letting their deletions finish.
fn release(h: &Harness, gvr: &Gvr, objs: &[&PartialObjectMeta]) {
    for o in objs {
        h.edit(gvr, o, |m| m.finalizers.retain(|f| f != HOLD));
    }
}

// ---------------------------------------------------------------------------------------------
// Integration tests (gc-spec §10 items 1–14)
// ---------------------------------------------------------------------------------------------

/// §10.1. Upstream runs this with and without the API server's watch cache; the simulated
/// cluster has a single mode (every watch is served from one ordered history), so one run
/// covers both.
#[tokio::test(start_paused = true)]
async fn s01_cross_namespace_references_delete_only_children_of_the_bad_owner() {
    const NS_A: &str = "namespace-a";
    const NS_B: &str = "namespace-b";
    const VALID_CHILDREN: usize = 10;
    const UNKNOWN_KINDS: usize = 5; // upstream: 25
    const BAD_CHILDREN_PER_SHAPE: usize = 3;

    // Everything exists before the controller starts, as after a controller-manager restart.
    let cluster = SimCluster::new();
    let parent = create_in(&cluster, &configmaps(), meta(NS_B, "parent", vec![]));
    let valid: Vec<PartialObjectMeta> = (0..VALID_CHILDREN)
        .map(|i| {
            let owner = OwnerReference {
                controller: Some(false),
                ..ref_to(&parent)
            };
            create_in(&cluster, &secrets(), meta(NS_B, &format!("child-{i}"), vec![owner]))
        })
        .collect();
    let mut invalid_refs: Vec<OwnerReference> = (0..UNKNOWN_KINDS)
        .map(|i| OwnerReference {
            api_version: "test/v1".into(),
            kind: format!("invalid{i}"),
            name: "invalid".into(),
            uid: format!("invalid-{i}"),
            ..Default::default()
        })
        .collect();
    // The parent's UID, but claiming to be a Pod in the child's namespace.
    let bad_ref = OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: "invalid".into(),
        uid: parent.metadata.uid.clone(),
        controller: Some(false),
        ..Default::default()
    };
    invalid_refs.push(bad_ref.clone());
    let mut many_refs = Vec::new(); // children with every invalid ref
    let mut only_bad_ref = Vec::new(); // children whose only ref is the cross-namespace one
    for i in 0..BAD_CHILDREN_PER_SHAPE {
        let cm = meta(NS_A, &format!("invalid-child-{i}"), invalid_refs.clone());
        many_refs.push((configmaps(), create_in(&cluster, &configmaps(), cm)));
        let secret = meta(NS_A, &format!("invalid-child-a-{i}"), invalid_refs.clone());
        many_refs.push((secrets(), create_in(&cluster, &secrets(), secret)));
        let single = meta(NS_A, &format!("invalid-child-b-{i}"), vec![bad_ref.clone()]);
        only_bad_ref.push(create_in(&cluster, &secrets(), single));
    }

    let h = Harness::start_with(cluster, Config::default()).await;
    h.eventually("the children with only the bad ref deleted", || {
        only_bad_ref.iter().all(|c| !h.exists(&secrets(), c))
    })
    .await;
    h.wait(Duration::from_secs(10)).await;

    for child in &valid {
        let now = h
            .get(&secrets(), child)
            .expect("a valid child in the owner's namespace survives");
        assert_eq!(uids(&now.metadata.owner_references), [parent.metadata.uid.as_str()]);
    }
    assert!(h.exists(&configmaps(), &parent));
    // Refs to kinds no one serves cannot be resolved, so these are retried forever and never
    // deleted (spec §4.1, §12.6).
    for (gvr, child) in &many_refs {
        assert!(
            h.exists(gvr, child),
            "{} was deleted despite unresolvable refs",
            child.metadata.name
        );
    }
    // Every child holding the bad ref got an OwnerRefInvalidNamespace event (spec §3.9); the valid
    // children none.
    let events = h.cluster.events();
    let message = format!(
        "ownerRef [v1/Pod, namespace: {NS_A}, name: invalid, uid: {}] does not exist in namespace \"{NS_A}\"",
        parent.metadata.uid
    );
    for child in only_bad_ref.iter().chain(many_refs.iter().map(|(_, c)| c)) {
        let event = events
            .iter()
            .find(|e| e.involved_object.uid == child.metadata.uid)
            .unwrap_or_else(|| panic!("no event for {}", child.metadata.name));
        assert_eq!(event.reason, "OwnerRefInvalidNamespace");
        assert_eq!(event.event_type, "Warning");
        assert_eq!(event.message, message);
    }
    assert!(events
        .iter()
        .all(|e| valid.iter().all(|v| v.metadata.uid != e.involved_object.uid)));

    // A bad child created while the controller runs goes too.
    let late = h.create(&secrets(), meta(NS_A, "invalid-child-c", vec![bad_ref]));
    h.eventually("the late bad child deleted", || !h.exists(&secrets(), &late))
        .await;
    assert_eq!(names_in(&h, &secrets(), NS_B).len(), VALID_CHILDREN);
}

/// §10.2.
#[tokio::test(start_paused = true)]
async fn s02_cascading_deletion_deletes_only_owned_pods() {
    const NS: &str = "gc-cascading-deletion";
    let cluster = SimCluster::new();
    let to_delete = create_in(&cluster, &rcs(), meta(NS, "test.rc.1", vec![]));
    let remaining = create_in(&cluster, &rcs(), meta(NS, "test.rc.2", vec![]));
    let collected = create_in(&cluster, &pods(), meta(NS, "test.pod.1", vec![ref_to(&to_delete)]));
    let independent = create_in(&cluster, &pods(), meta(NS, "test.pod.2", vec![]));
    let two_owners = create_in(
        &cluster,
        &pods(),
        meta(NS, "test.pod.3", vec![ref_to(&to_delete), ref_to(&remaining)]),
    );
    let h = Harness::start_with(cluster, Config::default()).await;

    h.delete(&rcs(), &to_delete, orphan_dependents(false));
    h.eventually("the deleted RC out of the graph", || !h.in_graph(&to_delete))
        .await;
    h.eventually("the RC's only-owned pod deleted", || !h.exists(&pods(), &collected))
        .await;
    h.settle().await;

    assert!(h.exists(&pods(), &independent), "a pod without owners was deleted");
    let survivor = h
        .get(&pods(), &two_owners)
        .expect("a pod with a live owner was deleted");
    // The dangling ref is stripped; the live owner's stays (spec §4.2 step 7).
    assert_eq!(
        uids(&survivor.metadata.owner_references),
        [remaining.metadata.uid.as_str()]
    );
    assert!(h.exists(&rcs(), &remaining));
}

/// §10.3.
#[tokio::test(start_paused = true)]
async fn s03_create_with_non_existent_owner_deletes_the_pod() {
    const NS: &str = "gc-non-existing-owner";
    let cluster = SimCluster::new();
    let ghost = OwnerReference {
        api_version: "v1".into(),
        kind: "ReplicationController".into(),
        name: "test.rc.1".into(),
        uid: "doesn't matter".into(),
        ..Default::default()
    };
    let orphan = create_in(&cluster, &pods(), meta(NS, "test.pod.1", vec![ghost]));
    let h = Harness::start_with(cluster, Config::default()).await;

    h.eventually("the pod with a never-existing owner deleted", || {
        !h.exists(&pods(), &orphan)
    })
    .await;
    h.settle().await;
    assert!(!h.in_graph(&orphan));
    assert!(h.gc.graph().is_empty(), "nodes left behind: {}", h.gc.graph().len());
}

/// §10.4. Five ways of deleting an RC, each on 2 RCs with 3 pods (upstream: 10 per way). Only
/// the RC created with the orphan finalizer and deleted with `orphanDependents: false` has its
/// pods deleted: every other combination orphans (the RC registry's default is Orphan).
#[tokio::test(start_paused = true)]
async fn s04_stressing_cascading_deletion_deletes_pods_of_the_non_orphaning_group_only() {
    const NS: &str = "gc-stressing-cascading-deletion";
    const RCS_PER_GROUP: usize = 2;
    const PODS_PER_RC: usize = 3;
    struct Group {
        name: &'static str,
        finalizers: &'static [&'static str],
        options: DeleteOptions,
        orphans: bool,
    }
    let groups = [
        Group {
            name: "collection1",
            finalizers: &[],
            options: DeleteOptions::default(),
            orphans: true,
        },
        Group {
            name: "collection2",
            finalizers: &["orphan"],
            options: DeleteOptions::default(),
            orphans: true,
        },
        Group {
            name: "collection3",
            finalizers: &["orphan"],
            options: orphan_dependents(false),
            orphans: false,
        },
        Group {
            name: "collection4",
            finalizers: &[],
            options: orphan_dependents(true),
            orphans: true,
        },
        Group {
            name: "collection5",
            finalizers: &[],
            options: policy(PropagationPolicy::Orphan),
            orphans: true,
        },
    ];
    let h = Harness::start().await;

    let mut created = Vec::new(); // (group, rc, pods)
    for g in &groups {
        for i in 0..RCS_PER_GROUP {
            let mut m = meta(NS, &format!("test.rc.{}-{i}", g.name), vec![]);
            m.finalizers = g.finalizers.iter().map(|f| f.to_string()).collect();
            let rc = h.create(&rcs(), m);
            let owned: Vec<PartialObjectMeta> = (0..PODS_PER_RC)
                .map(|j| pod(&h, NS, &format!("test.pod.{}-{i}-{j}", g.name), vec![ref_to(&rc)]))
                .collect();
            created.push((g, rc, owned));
        }
    }
    // Orphaning only reaches the dependents the graph knows of (spec §12.9).
    let to_orphan: Vec<&PartialObjectMeta> = created
        .iter()
        .filter(|(g, ..)| g.orphans)
        .flat_map(|(.., p)| p)
        .collect();
    h.wait_in_graph(&to_orphan).await;
    for (g, rc, _) in &created {
        h.delete(&rcs(), rc, g.options.clone());
    }

    let orphaning_groups = groups.iter().filter(|g| g.orphans).count();
    h.eventually("no RC left and only the orphaned pods", || {
        names_in(&h, &rcs(), NS).is_empty()
            && names_in(&h, &pods(), NS).len() == orphaning_groups * RCS_PER_GROUP * PODS_PER_RC
    })
    .await;
    h.settle().await;

    for (g, rc, owned) in &created {
        assert!(!h.in_graph(rc), "the graph still has {}", rc.metadata.name);
        for p in owned {
            match h.get(&pods(), p) {
                Some(left) => {
                    assert!(g.orphans, "{} survived a non-orphaning delete", p.metadata.name);
                    assert!(
                        left.metadata.owner_references.is_empty(),
                        "{} kept its ref",
                        p.metadata.name
                    );
                }
                None => assert!(!g.orphans, "{} was deleted by an orphaning delete", p.metadata.name),
            }
        }
    }
}

/// §10.5.
#[tokio::test(start_paused = true)]
async fn s05_orphaning_keeps_the_pods_and_empties_their_owner_refs() {
    const NS: &str = "gc-orphaning";
    let h = Harness::start().await;
    let owner = rc(&h, NS, "test.rc.1");
    let dependents: Vec<PartialObjectMeta> = (0..3)
        .map(|i| pod(&h, NS, &format!("test.pod.1{i}"), vec![ref_to(&owner)]))
        .collect();
    h.wait_in_graph(&dependents.iter().collect::<Vec<_>>()).await;

    h.delete(&rcs(), &owner, orphan_dependents(true));
    h.eventually("the RC out of the graph", || !h.in_graph(&owner)).await;
    h.settle().await;

    assert!(!h.exists(&rcs(), &owner));
    for p in &dependents {
        let left = h.get(&pods(), p).expect("an orphaned pod was deleted");
        assert!(
            left.metadata.owner_references.is_empty(),
            "{} kept its ref",
            p.metadata.name
        );
    }
}

/// §10.6.
#[tokio::test(start_paused = true)]
async fn s06_solid_owner_does_not_block_waiting_owner() {
    const NS: &str = "gc-foreground1";
    let h = Harness::start().await;
    let to_delete = rc(&h, NS, "test.rc.1");
    let remaining = rc(&h, NS, "test.rc.2");
    let dependent = pod(
        &h,
        NS,
        "test.pod.1",
        vec![blocking_ref_to(&to_delete), ref_to(&remaining)],
    );
    h.wait_in_graph(&[&dependent]).await;

    h.delete(&rcs(), &to_delete, policy(PropagationPolicy::Foreground));
    h.eventually("the foreground-deleted RC gone", || !h.exists(&rcs(), &to_delete))
        .await;
    h.settle().await;

    let left = h
        .get(&pods(), &dependent)
        .expect("a pod with a solid owner was deleted");
    assert_eq!(uids(&left.metadata.owner_references), [remaining.metadata.uid.as_str()]);
    assert!(left.metadata.deletion_timestamp.is_none());
}

/// §10.7.
#[tokio::test(start_paused = true)]
async fn s07_non_blocking_owner_refs_do_not_block_foreground_deletion() {
    const NS: &str = "gc-foreground2";
    let h = Harness::start().await;
    let owner = rc(&h, NS, "test.rc.1");
    let not_blocking = held_pod(&h, NS, "test.pod.1", vec![non_blocking_ref_to(&owner)]);
    let unset = held_pod(&h, NS, "test.pod.2", vec![ref_to(&owner)]);
    h.wait_in_graph(&[&not_blocking, &unset]).await;

    h.delete(&rcs(), &owner, policy(PropagationPolicy::Foreground));
    h.eventually("the RC gone", || !h.exists(&rcs(), &owner)).await;
    h.settle().await;

    // The pods are still there (their finalizer holds them), so nothing waited for them.
    for p in [&not_blocking, &unset] {
        let left = h.get(&pods(), p).expect("a held pod vanished");
        assert_eq!(left.metadata.finalizers, [HOLD]);
    }
    release(&h, &pods(), &[&not_blocking, &unset]);
    h.eventually("the released pods gone", || {
        !h.exists(&pods(), &not_blocking) && !h.exists(&pods(), &unset)
    })
    .await;
}

/// §10.8.
#[tokio::test(start_paused = true)]
async fn s08_double_deletion_with_finalizer_strips_foreground_deletion_each_time() {
    const NS: &str = "gc-foreground3";
    let h = Harness::start().await;
    let p = held_pod(&h, NS, "test.pod.1", vec![]);
    h.wait_in_graph(&[&p]).await;
    let only_hold = || h.get(&pods(), &p).is_some_and(|o| o.metadata.finalizers == [HOLD]);

    h.delete(&pods(), &p, policy(PropagationPolicy::Foreground));
    let first = h.get(&pods(), &p).expect("the pod is held");
    assert!(first.metadata.has_finalizer(FINALIZER_FOREGROUND));
    h.eventually("foregroundDeletion removed after the first delete", only_hold)
        .await;

    h.delete(&pods(), &p, policy(PropagationPolicy::Foreground));
    let second = h.get(&pods(), &p).expect("the pod is held");
    assert!(second.metadata.has_finalizer(FINALIZER_FOREGROUND));
    h.eventually("foregroundDeletion removed after the second delete", only_hold)
        .await;

    release(&h, &pods(), &[&p]);
    h.eventually("the pod gone once its finalizer is removed", || !h.exists(&pods(), &p))
        .await;
    h.settle().await;
    assert!(!h.in_graph(&p));
}

/// §10.9.
#[tokio::test(start_paused = true)]
async fn s09_blocking_owner_ref_blocks_foreground_deletion() {
    const NS: &str = "gc-foreground4";
    let h = Harness::start().await;
    let owner = rc(&h, NS, "test.rc.1");
    let blocker = held_pod(&h, NS, "test.pod.1", vec![blocking_ref_to(&owner)]);
    h.wait_in_graph(&[&owner, &blocker]).await;

    h.delete(&rcs(), &owner, policy(PropagationPolicy::Foreground));
    h.wait(Duration::from_secs(15)).await;

    let waiting = h
        .get(&rcs(), &owner)
        .expect("the RC went while a blocking dependent exists");
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert!(waiting.metadata.has_finalizer(FINALIZER_FOREGROUND));
    let held = h.get(&pods(), &blocker).expect("the held pod vanished");
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "the blocking pod was not deleted"
    );

    // Once the dependent can go, so can the owner.
    release(&h, &pods(), &[&blocker]);
    h.eventually("the RC gone after its dependent", || !h.exists(&rcs(), &owner))
        .await;
}

/// §10.10. A second dependent also has a solid owner: it is kept, and its ref to the waiting
/// owner is removed through the JSON merge fallback, since a custom resource answers a strategic
/// merge patch with 415 (spec §4.2 step 7, §6.2).
#[tokio::test(start_paused = true)]
async fn s10_custom_resource_cascading_deletion_in_foreground() {
    const NS: &str = "crd-foreground";
    let h = Harness::start().await;
    let foos = h.serve(crd("mygroup.example.com", "Foo", "foos")).await;
    let owner = h.create(&foos, meta(NS, "owner", vec![]));
    let dependent = h.create(&foos, meta(NS, "dependent", vec![blocking_ref_to(&owner)]));
    let anchor = h.create(&foos, meta(NS, "anchor", vec![]));
    let shared = h.create(
        &foos,
        meta(NS, "shared", vec![blocking_ref_to(&owner), ref_to(&anchor)]),
    );
    h.wait_in_graph(&[&owner, &dependent, &shared]).await;

    h.delete(&foos, &owner, policy(PropagationPolicy::Foreground));
    h.eventually("the custom owner and its dependent gone", || {
        !h.exists(&foos, &owner) && !h.exists(&foos, &dependent)
    })
    .await;
    h.settle().await;
    assert!(!h.in_graph(&owner) && !h.in_graph(&dependent));
    let kept = h
        .get(&foos, &shared)
        .expect("a dependent with a solid owner was deleted");
    assert_eq!(uids(&kept.metadata.owner_references), [anchor.metadata.uid.as_str()]);
    assert!(kept.metadata.deletion_timestamp.is_none());
}

/// §10.11.
#[tokio::test(start_paused = true)]
async fn s11_mixed_relationships_cascade_both_ways() {
    const NS: &str = "crd-mixed";
    let h = Harness::start().await;
    let foos = h.serve(crd("mygroup.example.com", "Foo", "foos")).await;
    let custom_owner = h.create(&foos, meta(NS, "own-instance", vec![]));
    let core_dependent = h.create(&configmaps(), meta(NS, "dep-configmap", vec![ref_to(&custom_owner)]));
    let core_owner = h.create(&configmaps(), meta(NS, "own-configmap", vec![]));
    let custom_dependent = h.create(&foos, meta(NS, "dep-instance", vec![ref_to(&core_owner)]));
    h.wait_in_graph(&[&core_dependent, &custom_dependent]).await;

    h.delete(&foos, &custom_owner, DeleteOptions::default());
    h.eventually("the configmap owned by the custom resource deleted", || {
        !h.exists(&configmaps(), &core_dependent)
    })
    .await;

    h.delete(&configmaps(), &core_owner, policy(PropagationPolicy::Foreground));
    h.eventually("the custom resource owned by the configmap deleted", || {
        !h.exists(&foos, &custom_dependent)
    })
    .await;
    h.eventually("the foreground-deleted configmap gone", || {
        !h.exists(&configmaps(), &core_owner)
    })
    .await;
    h.settle().await;
    assert!(h.gc.graph().is_empty(), "nodes left behind: {}", h.gc.graph().len());
}

/// §10.12. Deleting the CRD is `unregister`: its objects go at once, with DELETED events, and the
/// type leaves discovery. The collector is left to find out on its own: the next periodic sync
/// round drops the monitor, and serving the type again brings one back. Run twice, as upstream
/// does.
#[tokio::test(start_paused = true)]
async fn s12_crd_deletion_cascades_to_the_dependents_of_its_resources() {
    const NS: &str = "crd-deletion";
    const GROUP: &str = "crd-deletion.example.com";
    let sync_period = Config::default().sync_period;
    let h = Harness::start().await;
    for round in 0..2 {
        let foos = h.serve(crd(GROUP, "Foo", "foos")).await;
        let owner = h.create(&foos, meta(NS, &format!("owner-{round}"), vec![]));
        let dependent = h.create(
            &configmaps(),
            meta(NS, &format!("dependent-{round}"), vec![ref_to(&owner)]),
        );
        h.wait_in_graph(&[&owner, &dependent]).await;

        h.cluster.unregister(GROUP, "foos");
        h.eventually("the dependent of the custom resource deleted", || {
            !h.exists(&configmaps(), &dependent)
        })
        .await;
        assert!(
            !h.in_graph(&owner),
            "round {round}: the custom resource is still in the graph"
        );
        h.wait(sync_period + Duration::from_secs(1)).await;
        assert!(
            !h.gc.monitor_states().contains_key(&foos),
            "round {round}: a sync period passed and {foos} is still monitored"
        );
        h.settle().await;
        assert!(
            h.gc.graph().is_empty(),
            "round {round}: nodes left: {}",
            h.gc.graph().len()
        );
    }
}

/// §10.14. The PV watch lags by a minute, so the collector must judge the configmaps' PV owners
/// with live lookups before it has observed any PV.
#[tokio::test(start_paused = true)]
async fn s14_cluster_scoped_owners_are_judged_before_their_watch_catches_up() {
    const NS: &str = "cluster-scoped-owners";
    const PV_WATCH_DELAY: Duration = Duration::from_secs(60);
    let h = Harness::start().await;
    h.cluster.set_watch_delay("", "persistentvolumes", PV_WATCH_DELAY);
    let started = tokio::time::Instant::now();

    let pv = h.create(&persistentvolumes(), meta("", "pv-valid", vec![]));
    let valid = h.create(&configmaps(), meta(NS, "cm-valid", vec![ref_to(&pv)]));
    let missing_pv = OwnerReference {
        api_version: "v1".into(),
        kind: "PersistentVolume".into(),
        name: "pv-missing".into(),
        uid: "pv-missing-uid".into(),
        ..Default::default()
    };
    let missing = h.create(&configmaps(), meta(NS, "cm-missing", vec![missing_pv]));
    let unknown_type = OwnerReference {
        api_version: "unknown.group/v1".into(),
        kind: "UnknownType".into(),
        name: "unknown".into(),
        uid: "unknown-uid".into(),
        ..Default::default()
    };
    let unknown = h.create(&configmaps(), meta(NS, "cm-unknown", vec![unknown_type]));

    h.eventually("the cm with a missing PV owner deleted", || {
        !h.exists(&configmaps(), &missing)
    })
    .await;
    assert!(
        started.elapsed() < PV_WATCH_DELAY,
        "the GC waited for the PV watch ({:?})",
        started.elapsed()
    );
    assert!(
        node(&h, &pv).is_none_or(|n| n.is_virtual()),
        "the PV was observed before its watch delay"
    );

    h.eventually("the PV observed", || node(&h, &pv).is_some_and(|n| !n.is_virtual()))
        .await;
    h.wait(Duration::from_secs(30)).await;
    let kept = h
        .get(&configmaps(), &valid)
        .expect("the cm owned by an existing PV was deleted");
    assert_eq!(uids(&kept.metadata.owner_references), [pv.metadata.uid.as_str()]);
    let kept = h
        .get(&configmaps(), &unknown)
        .expect("the cm owned by an unknown type was deleted");
    assert_eq!(kept.metadata.owner_references.len(), 1);
    assert!(h.exists(&persistentvolumes(), &pv));
}

// ---------------------------------------------------------------------------------------------
// End-to-end tests (gc-spec §10 items 45–55)
// ---------------------------------------------------------------------------------------------

/// An RC and the pods its controller made (controller refs with blockOwnerDeletion).
fn rc_with_pods(h: &Harness, ns: &str, name: &str, count: usize) -> (PartialObjectMeta, Vec<PartialObjectMeta>) {
    let owner = rc(h, ns, name);
    let owned = (0..count)
        .map(|i| pod(h, ns, &format!("{name}-pod-{i}"), vec![controller_ref_to(&owner)]))
        .collect();
    (owner, owned)
}

/// Checks that `dependents` exist, outlive a 30 s wait, and carry no ref to `owner`.
async fn assert_orphaned(h: &Harness, owner: &PartialObjectMeta, dependents: &[PartialObjectMeta]) {
    h.eventually("the owner gone", || !h.exists(&rcs(), owner) && !h.in_graph(owner))
        .await;
    h.wait(Duration::from_secs(30)).await;
    for p in dependents {
        let left = h
            .get(&pods(), p)
            .unwrap_or_else(|| panic!("orphaned {} was deleted", p.metadata.name));
        assert!(
            left.metadata
                .owner_references
                .iter()
                .all(|r| r.uid != owner.metadata.uid),
            "{} still refers to its deleted owner",
            p.metadata.name
        );
    }
}

/// §10.45.
#[tokio::test(start_paused = true)]
async fn s45_deleting_rc_without_orphaning_deletes_pods() {
    const NS: &str = "gc-e2e-45";
    let h = Harness::start().await;
    let (owner, dependents) = rc_with_pods(&h, NS, "simpletest.rc", 5);
    h.wait_in_graph(&dependents.iter().collect::<Vec<_>>()).await;

    h.delete(&rcs(), &owner, policy(PropagationPolicy::Background));
    h.eventually("every pod of the RC deleted", || names_in(&h, &pods(), NS).is_empty())
        .await;
    assert!(!h.exists(&rcs(), &owner));
    h.settle().await;
    assert!(h.gc.graph().is_empty(), "nodes left behind: {}", h.gc.graph().len());
}

/// §10.46.
#[tokio::test(start_paused = true)]
async fn s46_orphan_delete_options_orphan_rc_pods() {
    const NS: &str = "gc-e2e-46";
    let h = Harness::start().await;
    for (name, options) in [
        ("by-policy", policy(PropagationPolicy::Orphan)),
        ("by-legacy-flag", orphan_dependents(true)),
    ] {
        let (owner, dependents) = rc_with_pods(&h, NS, name, 3);
        h.wait_in_graph(&dependents.iter().collect::<Vec<_>>()).await;
        h.delete(&rcs(), &owner, options);
        assert_orphaned(&h, &owner, &dependents).await;
    }
}

/// §10.47.
#[tokio::test(start_paused = true)]
async fn s47_rc_deleted_without_options_orphans_its_pods() {
    const NS: &str = "gc-e2e-47";
    let h = Harness::start().await;
    let (owner, dependents) = rc_with_pods(&h, NS, "simpletest.rc", 3);
    h.wait_in_graph(&dependents.iter().collect::<Vec<_>>()).await;

    h.delete(&rcs(), &owner, DeleteOptions::default());
    assert_orphaned(&h, &owner, &dependents).await;
}

/// A Deployment with two ReplicaSets, each with two pods, all linked by controller refs.
struct Rollout {
    deployment: PartialObjectMeta,
    replicasets: Vec<PartialObjectMeta>,
    pods: Vec<PartialObjectMeta>,
}

fn rollout(h: &Harness, ns: &str) -> Rollout {
    let deployment = h.create(&deployments(), meta(ns, "simpletest.deployment", vec![]));
    let mut sets = Vec::new();
    let mut owned_pods = Vec::new();
    for i in 0..2 {
        let rs = h.create(
            &replicasets(),
            meta(ns, &format!("simpletest.rs-{i}"), vec![controller_ref_to(&deployment)]),
        );
        for j in 0..2 {
            owned_pods.push(pod(
                h,
                ns,
                &format!("simpletest.rs-{i}-pod-{j}"),
                vec![controller_ref_to(&rs)],
            ));
        }
        sets.push(rs);
    }
    Rollout {
        deployment,
        replicasets: sets,
        pods: owned_pods,
    }
}

/// §10.48.
#[tokio::test(start_paused = true)]
async fn s48_deployment_deleted_in_background_deletes_its_replicasets() {
    const NS: &str = "gc-e2e-48";
    let h = Harness::start().await;
    let r = rollout(&h, NS);
    h.wait_in_graph(&r.replicasets.iter().chain(&r.pods).collect::<Vec<_>>())
        .await;

    h.delete(&deployments(), &r.deployment, policy(PropagationPolicy::Background));
    h.eventually("the ReplicaSets and their pods deleted", || {
        names_in(&h, &replicasets(), NS).is_empty() && names_in(&h, &pods(), NS).is_empty()
    })
    .await;
    h.settle().await;
    assert!(h.gc.graph().is_empty(), "nodes left behind: {}", h.gc.graph().len());
}

/// §10.49.
#[tokio::test(start_paused = true)]
async fn s49_deployment_deleted_with_orphan_keeps_replicasets_without_controller_ref() {
    const NS: &str = "gc-e2e-49";
    let h = Harness::start().await;
    let r = rollout(&h, NS);
    h.wait_in_graph(&r.replicasets.iter().chain(&r.pods).collect::<Vec<_>>())
        .await;

    h.delete(&deployments(), &r.deployment, policy(PropagationPolicy::Orphan));
    h.eventually("the Deployment gone", || !h.exists(&deployments(), &r.deployment))
        .await;
    h.wait(Duration::from_secs(30)).await;

    for rs in &r.replicasets {
        let left = h.get(&replicasets(), rs).expect("an orphaned ReplicaSet was deleted");
        assert!(
            left.metadata.owner_references.is_empty(),
            "{} kept its controllerRef",
            rs.metadata.name
        );
    }
    // The ReplicaSets still own their pods: orphaning goes one level only.
    for p in &r.pods {
        let left = h.get(&pods(), p).expect("a pod of an orphaned ReplicaSet was deleted");
        assert_eq!(left.metadata.owner_references.len(), 1);
    }
}

/// §10.50. The sim deletes pods at once, so each pod carries a finalizer that stands for its
/// graceful termination; the test ends it pod by pod and checks the RC waits for the last one.
#[tokio::test(start_paused = true)]
async fn s50_foreground_delete_keeps_the_rc_until_all_its_pods_are_gone() {
    const NS: &str = "gc-e2e-50";
    let h = Harness::start().await;
    let owner = rc(&h, NS, "simpletest.rc");
    let dependents: Vec<PartialObjectMeta> = (0..4)
        .map(|i| {
            held_pod(
                &h,
                NS,
                &format!("simpletest.rc-pod-{i}"),
                vec![controller_ref_to(&owner)],
            )
        })
        .collect();
    h.wait_in_graph(&dependents.iter().collect::<Vec<_>>()).await;

    h.delete(&rcs(), &owner, policy(PropagationPolicy::Foreground));
    h.eventually("every pod terminating", || {
        dependents.iter().all(|p| {
            h.get(&pods(), p)
                .is_some_and(|o| o.metadata.deletion_timestamp.is_some())
        })
    })
    .await;
    for (i, p) in dependents.iter().enumerate() {
        h.wait(Duration::from_secs(5)).await;
        let waiting = h
            .get(&rcs(), &owner)
            .unwrap_or_else(|| panic!("the RC went with {} pods left", dependents.len() - i));
        assert!(waiting.metadata.deletion_timestamp.is_some());
        assert_eq!(waiting.metadata.finalizers, [FINALIZER_FOREGROUND]);
        release(&h, &pods(), &[p]);
    }
    h.eventually("the RC gone after its last pod", || !h.exists(&rcs(), &owner))
        .await;
    h.settle().await;
    assert!(h.gc.graph().is_empty(), "nodes left behind: {}", h.gc.graph().len());
}

/// §10.51. Half the pods of the RC being deleted also belong to a second, live RC (the ref is
/// added after creation, as the e2e test patches it in).
#[tokio::test(start_paused = true)]
async fn s51_dependents_with_a_valid_owner_and_a_waiting_owner_are_not_deleted() {
    const NS: &str = "gc-e2e-51";
    let h = Harness::start().await;
    let (to_delete, dependents) = rc_with_pods(&h, NS, "simpletest-rc-to-be-deleted", 6);
    let to_stay = rc(&h, NS, "simpletest-rc-to-stay");
    let (shared, only_owned) = dependents.split_at(dependents.len() / 2);
    for p in shared {
        h.edit(&pods(), p, |m| m.owner_references.push(ref_to(&to_stay)));
    }
    h.wait_in_graph(&dependents.iter().collect::<Vec<_>>()).await;
    h.eventually("the graph sees the second owner", || {
        node(&h, &to_stay).is_some_and(|n| n.dependents_len() == shared.len())
    })
    .await;

    h.delete(&rcs(), &to_delete, policy(PropagationPolicy::Foreground));
    h.eventually("the foreground-deleted RC gone", || !h.exists(&rcs(), &to_delete))
        .await;
    h.settle().await;

    for p in only_owned {
        assert!(!h.exists(&pods(), p), "{} outlived its only owner", p.metadata.name);
    }
    for p in shared {
        let left = h
            .get(&pods(), p)
            .unwrap_or_else(|| panic!("{} had a valid owner", p.metadata.name));
        assert_eq!(uids(&left.metadata.owner_references), [to_stay.metadata.uid.as_str()]);
        assert!(left.metadata.deletion_timestamp.is_none());
    }
}

/// §10.52. A owns B, B owns C, C owns A, every ref blocking: a foreground delete of A would wait
/// forever without the unblock patch of spec §4.2 step 7.
#[tokio::test(start_paused = true)]
async fn s52_dependency_circle_does_not_block_foreground_deletion() {
    const NS: &str = "gc-e2e-52";
    let h = Harness::start().await;
    let a = pod(&h, NS, "pod1", vec![]);
    let b = pod(&h, NS, "pod2", vec![blocking_ref_to(&a)]);
    let c = pod(&h, NS, "pod3", vec![blocking_ref_to(&b)]);
    let a = h.edit(&pods(), &a, |m| m.owner_references.push(blocking_ref_to(&c)));
    h.wait_in_graph(&[&a, &b, &c]).await;
    h.eventually("the graph sees the circle", || {
        node(&h, &c).is_some_and(|n| n.dependents_len() == 1)
    })
    .await;

    let started = tokio::time::Instant::now();
    h.delete(&pods(), &a, policy(PropagationPolicy::Foreground));
    h.eventually("the whole circle deleted", || {
        [&a, &b, &c].iter().all(|p| !h.exists(&pods(), p))
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the circle took {:?}",
        started.elapsed()
    );
    h.settle().await;
    assert!(h.gc.graph().is_empty(), "nodes left behind: {}", h.gc.graph().len());
}

/// §10.53.
#[tokio::test(start_paused = true)]
async fn s53_custom_resource_cascading_deletion() {
    const NS: &str = "gc-e2e-53";
    let h = Harness::start().await;
    let owners = h.serve(crd("e2e-53.example.com", "Owner", "owners")).await;
    let dependents = h.serve(crd("e2e-53.example.com", "Dependent", "dependents")).await;
    let owner = h.create(&owners, meta(NS, "owner", vec![]));
    let dependent = h.create(&dependents, meta(NS, "dependent", vec![ref_to(&owner)]));
    h.wait_in_graph(&[&owner, &dependent]).await;

    h.delete(&owners, &owner, DeleteOptions::default());
    h.eventually("the dependent custom resource deleted", || {
        !h.exists(&dependents, &dependent)
    })
    .await;
    assert!(!h.exists(&owners, &owner));
    h.settle().await;
    assert!(h.gc.graph().is_empty(), "nodes left behind: {}", h.gc.graph().len());
}

/// §10.54. Orphaning a custom resource takes the JSON merge fallback: the strategic merge patch
/// is answered with 415 (spec §6.2).
#[tokio::test(start_paused = true)]
async fn s54_custom_resource_orphan_deletion() {
    const NS: &str = "gc-e2e-54";
    let h = Harness::start().await;
    let owners = h.serve(crd("e2e-54.example.com", "Owner", "owners")).await;
    let dependents = h.serve(crd("e2e-54.example.com", "Dependent", "dependents")).await;
    let owner = h.create(&owners, meta(NS, "owner", vec![]));
    let dependent = h.create(&dependents, meta(NS, "dependent", vec![ref_to(&owner)]));
    h.wait_in_graph(&[&owner, &dependent]).await;

    h.delete(&owners, &owner, policy(PropagationPolicy::Orphan));
    h.eventually("the orphaning owner gone", || !h.exists(&owners, &owner))
        .await;
    h.wait(Duration::from_secs(30)).await;

    let left = h
        .get(&dependents, &dependent)
        .expect("the orphaned custom resource was deleted");
    assert!(
        left.metadata.owner_references.is_empty(),
        "the orphaned custom resource kept its ref"
    );
}

/// §10.55.
#[tokio::test(start_paused = true)]
async fn s55_deleting_a_cronjob_deletes_its_jobs_and_their_pods() {
    const NS: &str = "gc-e2e-55";
    let h = Harness::start().await;
    let cronjob = h.create(&cronjobs(), meta(NS, "simple", vec![]));
    let mut created_jobs = Vec::new();
    let mut created_pods = Vec::new();
    for i in 0..2 {
        let job = h.create(
            &jobs(),
            meta(NS, &format!("simple-{i}"), vec![controller_ref_to(&cronjob)]),
        );
        for j in 0..2 {
            created_pods.push(pod(&h, NS, &format!("simple-{i}-{j}"), vec![controller_ref_to(&job)]));
        }
        created_jobs.push(job);
    }
    h.wait_in_graph(&created_jobs.iter().chain(&created_pods).collect::<Vec<_>>())
        .await;

    h.delete(&cronjobs(), &cronjob, policy(PropagationPolicy::Background));
    h.eventually("the jobs and pods deleted", || {
        names_in(&h, &jobs(), NS).is_empty() && names_in(&h, &pods(), NS).is_empty()
    })
    .await;
    h.settle().await;
    assert!(h.gc.graph().is_empty(), "nodes left behind: {}", h.gc.graph().len());
}
