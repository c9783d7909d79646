//! Cross-shard decisions (`kube_gc::shard`): a cluster-scoped owner whose dependents live in
//! other shards' namespaces keeps its `orphan` or `foregroundDeletion` finalizer until every
//! shard's report says its ranges hold none of them, blocking or not yet orphaned.
//!
//! Two collectors share one simulated cluster, each on one half of the hash space, as two
//! `kube-gc run --shards I/2` replicas would; the reports their Leases would carry are handed
//! over by the test. The second replica starts late, so that the first one must wait for it.

use crate::support::*;

use kube_gc::api::layers::{Layer, Layered, Request, Verb};
use kube_gc::api::{
    ApiError, Gvr, PartialObjectMeta, PropagationPolicy, StatusReason, FINALIZER_FOREGROUND, FINALIZER_ORPHAN,
};
use kube_gc::controller::{Config, GarbageCollector};
use kube_gc::event::EventType;
use kube_gc::graph::Uid;
use kube_gc::shard::{Hold, Orphaned, Ranges, Shard};
use kube_gc_sim::SimCluster;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long the owner's shard is watched waiting alone: many retries of the deferred decision.
const ALONE: Duration = Duration::from_secs(30);

/// The first namespace `ns-N` that `ranges` holds.
fn namespace_in(ranges: &Ranges) -> String {
    (0..)
        .map(|i| format!("ns-{i}"))
        .find(|n| ranges.holds_namespace(n))
        .expect("a namespace in every half")
}

/// A PersistentVolume with a ConfigMap in each half's namespace, and the two collectors: the
/// owner's shard first (started, synced), the other's ranges for later.
struct Setup {
    cluster: Arc<SimCluster>,
    owner: PartialObjectMeta,
    /// The dependent in the owner's shard, and the one in the other shard.
    dependents: [PartialObjectMeta; 2],
    owners_shard: Harness,
    other_ranges: Ranges,
}

async fn setup() -> Setup {
    let cluster = Arc::new(SimCluster::new());
    let owner = create_in(&cluster, &persistentvolumes(), meta("", "pv", vec![]));
    let halves = [Ranges::slice(0, 2), Ranges::slice(1, 2)];
    let uid = Uid::parse(&owner.metadata.uid);
    let mine = halves.iter().position(|r| r.owns("", &uid)).expect("one half owns it");
    let [ours, theirs] = [&halves[mine], &halves[1 - mine]].map(namespace_in);
    let dependents =
        [ours, theirs].map(|ns| create_in(&cluster, &configmaps(), meta(&ns, "cm", vec![blocking_ref_to(&owner)])));
    let owners_shard = start(&cluster, &halves[mine]).await;
    Setup {
        cluster,
        owner,
        dependents,
        owners_shard,
        other_ranges: halves[1 - mine].clone(),
    }
}

async fn start(cluster: &Arc<SimCluster>, ranges: &Ranges) -> Harness {
    let config = Config {
        shard: Arc::new(Shard::new(ranges.clone())),
        ..Config::default()
    };
    Harness::start_over(cluster.clone(), cluster.clone(), config).await
}

/// Hands each replica the other's report every 100 ms (virtual), as their Leases' renewals would.
fn exchange(a: Arc<GarbageCollector<SimCluster>>, b: Arc<GarbageCollector<SimCluster>>) {
    exchange_while(a, b, Arc::new(AtomicBool::new(true)));
}

/// [`exchange`] while `live` holds.
fn exchange_while(a: Arc<GarbageCollector<SimCluster>>, b: Arc<GarbageCollector<SimCluster>>, live: Arc<AtomicBool>) {
    tokio::spawn(async move {
        while live.load(Ordering::SeqCst) {
            for (me, peer, name) in [(&a, &b, "b"), (&b, &a, "a")] {
                me.shard()
                    .set_peers(BTreeMap::from([(name.to_string(), peer.report())]));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}

impl Setup {
    fn owner_finalizers(&self) -> Option<Vec<String>> {
        self.owners_shard
            .get(&persistentvolumes(), &self.owner)
            .map(|o| o.metadata.finalizers)
    }

    fn dependent(&self, i: usize) -> Option<PartialObjectMeta> {
        self.owners_shard.get(&configmaps(), &self.dependents[i])
    }

    /// Starts the other shard and lets the two exchange reports.
    async fn start_the_other_shard(&self) -> Harness {
        let other = start(&self.cluster, &self.other_ranges).await;
        exchange(self.owners_shard.gc.clone(), other.gc.clone());
        other
    }
}

#[tokio::test(start_paused = true)]
async fn an_orphaned_cluster_scoped_owner_should_wait_until_every_shard_orphaned_its_dependents() {
    let s = setup().await;
    s.owners_shard
        .delete(&persistentvolumes(), &s.owner, policy(PropagationPolicy::Orphan));
    s.owners_shard
        .eventually("the owner's shard orphaning its own dependent", || {
            s.dependent(0).is_some_and(|d| d.metadata.owner_references.is_empty())
        })
        .await;
    tokio::time::sleep(ALONE).await;
    assert_eq!(
        s.owner_finalizers(),
        Some(vec![FINALIZER_ORPHAN.to_string()]),
        "no report covers the other half: the owner must keep its orphan finalizer"
    );
    assert_eq!(s.dependent(1).expect("lives").metadata.owner_references.len(), 1);

    let _other = s.start_the_other_shard().await;
    s.owners_shard
        .eventually("the owner gone once both shards agree", || {
            s.owner_finalizers().is_none()
        })
        .await;
    for i in 0..2 {
        let dependent = s.dependent(i).expect("an orphaned dependent lives");
        assert!(dependent.metadata.owner_references.is_empty(), "{i}: {dependent:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_foreground_cluster_scoped_owner_should_outlive_its_blocking_dependents_in_every_shard() {
    let s = setup().await;
    s.owners_shard
        .delete(&persistentvolumes(), &s.owner, policy(PropagationPolicy::Foreground));
    s.owners_shard
        .eventually("the owner's shard deleting its own dependent", || {
            s.dependent(0).is_none()
        })
        .await;
    tokio::time::sleep(ALONE).await;
    assert_eq!(
        s.owner_finalizers(),
        Some(vec![FINALIZER_FOREGROUND.to_string()]),
        "no report covers the other half: the owner must wait for its blocking dependent there"
    );
    assert!(s.dependent(1).is_some());

    let _other = s.start_the_other_shard().await;
    s.owners_shard
        .eventually("the other shard's dependent deleted", || s.dependent(1).is_none())
        .await;
    s.owners_shard
        .eventually("the owner gone after it", || s.owner_finalizers().is_none())
        .await;
}

/// A finding speaks for one deletion. The owner is deleted in the Foreground way, held there by a
/// blocking dependent of its own shard; the other shard's dependent does not block, and its
/// delete fails (the API server errs), so the other shard reports "clear" for the Foreground
/// deletion while that dependent still refers to the owner. Then the owner is deleted again with
/// the Orphan policy (the API server swaps the finalizer) while the other shard's report is still
/// the one it wrote in the Foreground phase (its replica paused, its Lease still live). That
/// "clear" says nothing of orphaning: the owner must keep its `orphan` finalizer until the other
/// shard has orphaned its dependent, or that dependent is collected for a dangling owner instead
/// of being orphaned.
#[tokio::test(start_paused = true)]
async fn a_foreground_finding_should_not_release_an_owner_switched_to_orphan() {
    let cluster = Arc::new(SimCluster::new());
    let owner = create_in(&cluster, &persistentvolumes(), meta("", "pv", vec![]));
    let halves = [Ranges::slice(0, 2), Ranges::slice(1, 2)];
    let mine = halves
        .iter()
        .position(|r| r.owns("", &Uid::parse(&owner.metadata.uid)))
        .expect("one half owns it");
    let [ours, theirs] = [&halves[mine], &halves[1 - mine]].map(namespace_in);
    let held = create_in(
        &cluster,
        &configmaps(),
        meta(&ours, "held", vec![blocking_ref_to(&owner)]),
    );
    let loose = create_in(&cluster, &configmaps(), meta(&theirs, "loose", vec![ref_to(&owner)]));
    let owners_shard = start(&cluster, &halves[mine]).await;
    let other = start(&cluster, &halves[1 - mine]).await;
    let live = Arc::new(AtomicBool::new(true));
    exchange_while(owners_shard.gc.clone(), other.gc.clone(), live.clone());

    cluster.inject_fault(fault(
        Verb::Delete,
        Some(("", "configmaps")),
        StatusReason::InternalError,
        "etcd is slow",
    ));
    owners_shard.delete(&persistentvolumes(), &owner, policy(PropagationPolicy::Foreground));
    let owner_uid = Uid::parse(&owner.metadata.uid);
    owners_shard
        .eventually("the other shard clear for the Foreground deletion", || {
            other.gc.report().clears(&owner_uid, Hold::Foreground)
        })
        .await;
    assert!(owners_shard.get(&configmaps(), &loose).is_some(), "its delete failed");
    // The other replica pauses: its last report stays on its live Lease.
    live.store(false, Ordering::SeqCst);
    let stale = other.gc.report();
    other.gc.shutdown().await;
    owners_shard
        .gc
        .shard()
        .set_peers(BTreeMap::from([("b".to_string(), stale)]));

    owners_shard.delete(&persistentvolumes(), &owner, policy(PropagationPolicy::Orphan));
    owners_shard
        .eventually("the owner's shard orphaning its own dependent", || {
            owners_shard
                .get(&configmaps(), &held)
                .is_some_and(|h| h.metadata.owner_references.is_empty())
        })
        .await;
    tokio::time::sleep(ALONE).await;
    let finalizers = owners_shard
        .get(&persistentvolumes(), &owner)
        .map(|o| o.metadata.finalizers);
    assert_eq!(
        finalizers,
        Some(vec![FINALIZER_ORPHAN.to_string()]),
        "a Foreground finding must not release the Orphan deletion"
    );
    assert_eq!(
        owners_shard
            .get(&configmaps(), &loose)
            .expect("lives")
            .metadata
            .owner_references
            .len(),
        1
    );

    cluster.clear_faults();
    let again = start(&cluster, &halves[1 - mine]).await;
    exchange(owners_shard.gc.clone(), again.gc.clone());
    owners_shard
        .eventually("the owner gone once the other shard orphaned its dependent", || {
            owners_shard.get(&persistentvolumes(), &owner).is_none()
        })
        .await;
    let loose = owners_shard
        .get(&configmaps(), &loose)
        .expect("the orphaned dependent lives");
    assert!(loose.metadata.owner_references.is_empty());
}

/// A Foreground deletion turned to Orphan must still end. Each shard's dependent blocks the
/// owner, and its delete fails (the API server errs), so the owner is held in the Foreground
/// way; then it is deleted again with the Orphan policy. Each shard orphans its dependent and
/// reports "clear" for the Orphan deletion; the patch's event then brings the owner, still marked
/// as deleting dependents in the graph, back to the Foreground path, which must not record a
/// finding for the deletion that is over in place of the Orphan one: the owner's shard would
/// wait for the other shard forever.
#[tokio::test(start_paused = true)]
async fn a_foreground_deletion_switched_to_orphan_should_release_its_owner_once_every_shard_orphaned() {
    let s = setup().await;
    let other = s.start_the_other_shard().await;
    s.cluster.inject_fault(fault(
        Verb::Delete,
        Some(("", "configmaps")),
        StatusReason::InternalError,
        "etcd is slow",
    ));
    s.owners_shard
        .delete(&persistentvolumes(), &s.owner, policy(PropagationPolicy::Foreground));
    let owner_uid = Uid::parse(&s.owner.metadata.uid);
    s.owners_shard
        .eventually("the other shard holding the Foreground deletion", || {
            let report = other.gc.report();
            report.pending_owners > 0 || report.clears(&owner_uid, Hold::Foreground)
        })
        .await;
    s.owners_shard
        .delete(&persistentvolumes(), &s.owner, policy(PropagationPolicy::Orphan));
    s.cluster.clear_faults();
    s.owners_shard
        .eventually("the owner gone once both shards orphaned their dependents", || {
            s.owner_finalizers().is_none()
        })
        .await;
    for i in 0..2 {
        let dependent = s.dependent(i).expect("an orphaned dependent lives");
        assert!(dependent.metadata.owner_references.is_empty(), "{i}: {dependent:?}");
    }
    assert!(!other.gc.report().clears(&owner_uid, Hold::Foreground));
}

/// kubernetes#26120 across a handoff. A replica's collector orphans an owner while the event of a
/// dependent created just before the Orphan DELETE has not reached it; then the namespace passes
/// to a new collector (the same replica's after its ranges changed, or another replica's), which
/// is the first to see that dependent. The owner is gone, so the dependent names an absent owner:
/// it must lose the reference, as it would have on the first collector, not its life.
#[tokio::test(start_paused = true)]
async fn a_dependent_seen_after_a_handoff_should_lose_the_ref_to_an_owner_orphaned_before_it() {
    let cluster = Arc::new(SimCluster::new());
    let half = Ranges::slice(0, 2);
    let ns = namespace_in(&half);
    for same_replica in [true, false] {
        let name = |what: &str| format!("{what}-{same_replica}");
        // A replica keeps one memory of orphaned owners for all its collectors.
        let memory = Arc::new(Orphaned::default());
        let mut first = Rig::sharded(cluster.clone(), Shard::new(half.clone()).with_orphaned(memory.clone())).await;
        let owner = first.create(&rcs(), meta(&ns, &name("owner"), vec![]));
        let late = first.create(&pods(), meta(&ns, &name("late"), vec![ref_to(&owner)]));
        first.observe(EventType::Add, &owner);
        let orphan = policy(PropagationPolicy::Orphan);
        cluster
            .delete_object(&rcs(), &ns, &name("owner"), &orphan)
            .expect("delete");
        let deleting = cluster.get_object(&rcs(), &ns, &name("owner")).expect("held");
        first.observe(EventType::Update, &deleting);
        first.settle().await;
        assert!(
            cluster.get_object(&rcs(), &ns, &name("owner")).is_err(),
            "the first collector let the owner go"
        );

        let shard = if same_replica {
            Shard::new(half.clone()).with_orphaned(memory)
        } else {
            let shard = Shard::new(half.clone());
            let report = first.collector.shard().report_on(&first.graph);
            shard.set_peers(BTreeMap::from([("first".to_string(), report)]));
            shard
        };
        let mut next = Rig::sharded(cluster.clone(), shard).await;
        next.observe(EventType::Add, &late);
        next.settle().await;
        let late = cluster
            .get_object(&pods(), &ns, &name("late"))
            .expect("the late dependent lives");
        assert!(
            late.metadata.owner_references.is_empty(),
            "same replica: {same_replica}"
        );
    }
}

/// Writes of other parties that reach the server just before this replica's requests of one verb
/// and resource: before the n-th such request, the n-th write runs, and each request's answer is
/// kept. The last write stands for the replica that took this one's namespaces over while it was
/// stopped between its write fence and its socket.
#[derive(Clone)]
struct Meanwhile(Arc<Writes>);

/// A write of another party.
type Write = Box<dyn FnOnce() + Send>;

struct Writes {
    verb: Verb,
    gvr: Gvr,
    before: parking_lot::Mutex<VecDeque<Write>>,
    answers: parking_lot::Mutex<Vec<Result<(), Option<StatusReason>>>>,
}

impl Meanwhile {
    fn new(verb: Verb, gvr: Gvr, before: Vec<Write>) -> Self {
        Meanwhile(Arc::new(Writes {
            verb,
            gvr,
            before: parking_lot::Mutex::new(before.into()),
            answers: parking_lot::Mutex::new(Vec::new()),
        }))
    }

    /// The answers of the requests that had a write before them: `Ok`, or the reason they were
    /// refused for.
    fn answers(&self) -> Vec<Result<(), Option<StatusReason>>> {
        self.0.answers.lock().clone()
    }
}

impl Layer for Meanwhile {
    async fn around<T, F, Fut>(&self, request: Request<'_>, mut call: F) -> Result<T, ApiError>
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: std::future::Future<Output = Result<T, ApiError>> + Send,
    {
        let matches = request.verb == self.0.verb && request.gvr == Some(&self.0.gvr);
        let write = matches.then(|| self.0.before.lock().pop_front()).flatten();
        let Some(write) = write else {
            return call().await;
        };
        write();
        let result = call().await;
        self.0
            .answers
            .lock()
            .push(result.as_ref().map(drop).map_err(ApiError::reason));
        result
    }
}

/// A write of `dependent` by another party: `change`, applied to its current state.
fn write_of(
    cluster: &Arc<SimCluster>,
    dependent: &PartialObjectMeta,
    change: impl FnOnce(&mut PartialObjectMeta) + Send + 'static,
) -> Write {
    let (cluster, dependent) = (cluster.clone(), dependent.clone());
    Box::new(move || {
        let mut current = cluster
            .get_object(&configmaps(), &dependent.metadata.namespace, &dependent.metadata.name)
            .expect("the dependent");
        change(&mut current);
        cluster.update(&configmaps(), current).expect("another party's write");
    })
}

/// A label `key` set on an object.
fn labelled(key: &'static str, value: &'static str) -> impl FnOnce(&mut PartialObjectMeta) + Send + 'static {
    move |object| {
        object.metadata.labels.insert(key.into(), value.into());
    }
}

/// A cluster, the first half of the namespace ranges, a namespace in it, and there the ConfigMap
/// `solid`, which lives and can own the late-write tests' dependents.
fn half_with_a_live_owner() -> (Arc<SimCluster>, Ranges, String, PartialObjectMeta) {
    let cluster = Arc::new(SimCluster::new());
    let half = Ranges::slice(0, 2);
    let ns = namespace_in(&half);
    let solid = create_in(&cluster, &configmaps(), meta(&ns, "solid", vec![]));
    (cluster, half, ns, solid)
}

/// A collector of the namespaces in `ranges`, whose requests to `cluster` go through `meanwhile`.
async fn start_in(
    ranges: Ranges,
    cluster: &Arc<SimCluster>,
    meanwhile: Meanwhile,
) -> Harness<Layered<Meanwhile, Arc<SimCluster>>> {
    let config = Config {
        shard: Arc::new(Shard::new(ranges)),
        ..Config::default()
    };
    let api = Arc::new(Layered::new(meanwhile, cluster.clone()));
    Harness::start_over(cluster.clone(), api, config).await
}

#[tokio::test(start_paused = true)]
async fn a_sharded_replicas_late_owner_reference_patch_should_be_refused_once_another_replica_wrote_the_object() {
    let (cluster, half, ns, solid) = half_with_a_live_owner();
    let gone = ref_named("v1", "ConfigMap", "gone", "0000dead-0000-4000-8000-000000000001");
    let dependent = create_in(
        &cluster,
        &configmaps(),
        meta(&ns, "dependent", vec![ref_to(&solid), gone]),
    );
    let successor_writes = write_of(&cluster, &dependent, labelled("written-by", "successor"));
    let late = Meanwhile::new(Verb::Patch, configmaps(), vec![successor_writes]);
    let h = start_in(half, &cluster, late.clone()).await;
    h.eventually("the dangling reference removed", || {
        h.get(&configmaps(), &dependent)
            .is_some_and(|d| d.metadata.owner_references.len() == 1)
    })
    .await;
    assert_eq!(
        late.answers(),
        [Err(Some(StatusReason::Conflict))],
        "the patch decided before the successor's write is refused"
    );
    let now = h.get(&configmaps(), &dependent).expect("the dependent lives");
    assert_eq!(
        now.metadata.labels.get("written-by").map(String::as_str),
        Some("successor")
    );
    assert_eq!(now.metadata.owner_references, vec![ref_to(&solid)]);
}

/// Spec §4.4's retry: a DELETE refused for a change of unrelated fields is sent again once a GET
/// shows the owners unchanged. Upstream's retry carries the UID alone; a sharded replica's carries
/// the version that GET read, so that a retry held past a takeover cannot delete what the
/// successor made live meanwhile.
#[tokio::test(start_paused = true)]
async fn a_sharded_replicas_delete_retried_after_a_conflict_should_be_refused_once_another_replica_wrote_the_object() {
    let (cluster, half, ns, solid) = half_with_a_live_owner();
    let gone = ref_named("v1", "ConfigMap", "gone", "0000dead-0000-4000-8000-000000000002");
    let dependent = create_in(&cluster, &configmaps(), meta(&ns, "dependent", vec![gone]));
    let owner = ref_to(&solid);
    let writes = vec![
        // Before the DELETE at the observed version: the collector reads the object live.
        write_of(&cluster, &dependent, labelled("first", "unrelated")),
        // Before the DELETE at the live version: §4.4's GET finds the owners unchanged.
        write_of(&cluster, &dependent, labelled("second", "unrelated")),
        // Before the retry: the successor gives the dependent a live owner.
        write_of(&cluster, &dependent, move |object| {
            object.metadata.owner_references.push(owner);
        }),
    ];
    let meanwhile = Meanwhile::new(Verb::Delete, configmaps(), writes);
    let h = start_in(half, &cluster, meanwhile.clone()).await;
    h.eventually("the three DELETEs answered", || meanwhile.answers().len() == 3)
        .await;
    let conflict = Err(Some(StatusReason::Conflict));
    assert_eq!(
        meanwhile.answers(),
        [conflict, conflict, conflict],
        "the retry, decided before the successor's write, is refused"
    );
    h.eventually("the dangling reference removed", || {
        h.get(&configmaps(), &dependent)
            .is_some_and(|d| d.metadata.owner_references == [ref_to(&solid)])
    })
    .await;
}
