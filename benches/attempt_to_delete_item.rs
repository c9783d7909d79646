//! Latency of one `attempt_to_delete_item` call against the in-memory cluster, one case per
//! branch of spec §4.2 (DESIGN §5 target: median ≤ 5 µs), in both collector modes: `fast_path`
//! (the default: the workers act on what the graph observed) and `upstream` (`verify_with_get`:
//! every item and owner read live).
//!
//! Regimes, by what the item's owner references turn out to name:
//!
//! - `solid_owner`: the owner exists; the item stays (upstream: two GETs; fast path: none, the
//!   graph observed both).
//! - `dangling_owner_cache_hit` / `dangling_owner_cache_miss`: the owner is gone. A hit finds it in
//!   absentOwnerCache; a miss spends a GET that answers 404 (the owner was never observed, so the
//!   fast path verifies it too). Either way the item is deleted (Background).
//! - `owner_waiting_for_dependents`: the owner is in a foreground deletion and the item has a
//!   dependent of its own, so the item is deleted Foreground.
//! - `own_finalizer_orphan` / `own_finalizer_foreground`: no solid owner, and the item's own
//!   finalizer picks the propagation policy of its delete.
//! - `virtual_node_not_found`: a virtual node whose GET answers 404; a virtual delete event is
//!   routed.
//!
//! Each case is checked once before it is timed: its result and the API calls it made must be
//! those of the branch it names. Deleted items are put back under the same UID in the untimed
//! setup, and their new version observed, so every timed call deletes a live object the graph
//! knows as it is. The cluster also holds [`BACKGROUND_PODS`] unrelated pods, so lookups are not
//! made in a near-empty store.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use kube_gc::api::{
    ClusterApi, DeleteOptions, Gvr, ObjectMeta, OwnerReference, PartialObjectMeta, PropagationPolicy, RestMapper,
    SharedRestMapper, FINALIZER_FOREGROUND, FINALIZER_ORPHAN,
};
use kube_gc::builder::GraphBuilder;
use kube_gc::collector::{CollectError, Collector, CollectorConfig};
use kube_gc::controller::Pipeline;
use kube_gc::event::{EventType, GraphEvent};
use kube_gc::graph::{Graph, Handle, Uid};
use kube_gc::recorder::EventSink;
use kube_gc::router::PartitionReceiver;
use kube_gc_sim::{ApiCalls, SimCluster};
use std::sync::Arc;
use tokio::runtime::Runtime;

/// The binary's allocator, so the figures are the ones kube-gc would show.
#[global_allocator]
static GLOBAL: kube_gc::allocator::Allocator = kube_gc::allocator::Allocator;

const NAMESPACE: &str = "bench";
/// Unrelated pods in the cluster's store.
const BACKGROUND_PODS: usize = 10_000;
/// Watch events each type keeps; nothing watches, so a small history keeps memory flat.
const HISTORY: usize = 1024;

fn pods() -> Gvr {
    Gvr::new("", "v1", "pods")
}

fn replicasets() -> Gvr {
    Gvr::new("apps", "v1", "replicasets")
}

fn uid(kind: u8, i: usize) -> String {
    format!("{kind:08x}-0000-4000-8000-{i:012x}")
}

fn rs_ref(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn meta(name: &str, uid: String, owners: Vec<OwnerReference>, finalizers: &[&str]) -> ObjectMeta {
    ObjectMeta {
        name: name.into(),
        namespace: NAMESPACE.into(),
        uid,
        owner_references: owners,
        finalizers: finalizers.iter().map(|f| f.to_string()).collect(),
        ..Default::default()
    }
}

/// The pipeline over a simulated cluster, as the controller assembles it, with one router
/// partition whose receiver the bench drains itself.
struct Rig {
    rt: Runtime,
    cluster: Arc<SimCluster>,
    graph: Arc<Graph>,
    builder: GraphBuilder,
    collector: Arc<Collector<SimCluster>>,
    _events: EventSink,
}

impl Rig {
    /// A rig whose workers verify with GETs or not, and the receiver of its one router partition.
    fn new(verify_with_get: bool) -> (Rig, PartitionReceiver) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let cluster = Arc::new(SimCluster::with_history(HISTORY));
        let discovery = rt.block_on(cluster.discover()).expect("discovery");
        let mut pipeline = Pipeline::builder(cluster.clone())
            .mapper(Arc::new(SharedRestMapper::new(RestMapper::new(&discovery.resources))))
            .collector(CollectorConfig {
                verify_with_get,
                ..CollectorConfig::default()
            })
            .build();
        let routed = pipeline.partitions.remove(0);
        let rig = Rig {
            rt,
            cluster,
            graph: pipeline.graph,
            builder: pipeline.builder,
            collector: pipeline.collector,
            _events: pipeline.events,
        };
        for i in 0..BACKGROUND_PODS {
            rig.create(&pods(), meta(&format!("background-{i}"), uid(9, i), Vec::new(), &[]));
        }
        (rig, routed)
    }

    fn create(&self, gvr: &Gvr, metadata: ObjectMeta) -> PartialObjectMeta {
        let name = metadata.name.clone();
        self.cluster
            .create(
                gvr,
                PartialObjectMeta {
                    metadata,
                    ..Default::default()
                },
            )
            .unwrap_or_else(|e| panic!("create {gvr} {name}: {e}"))
    }

    /// Creates an object and applies its ADDED event, as its monitor would; returns its node.
    fn create_observed(&self, gvr: &Gvr, metadata: ObjectMeta) -> Handle {
        let obj = self.create(gvr, metadata);
        self.observe(&obj);
        self.node(&obj.metadata.uid)
    }

    /// Applies an event for `obj` as it now is, as its monitor would.
    fn observe(&self, obj: &PartialObjectMeta) {
        let event = GraphEvent::observed(&self.graph, EventType::Add, &obj.metadata, &obj.api_version, &obj.kind)
            .expect("a readable object");
        self.builder.process_graph_changes(event);
    }

    fn node(&self, uid: &str) -> Handle {
        self.graph.get(&Uid::parse(uid)).expect("a node in the graph")
    }

    /// Puts `template` back as a live object under its UID, whatever the last call did to it
    /// (deleted at once, or left marked for deletion with a GC finalizer), and lets the graph
    /// observe it.
    fn restore(&self, gvr: &Gvr, template: &ObjectMeta) {
        match self.cluster.get_object(gvr, &template.namespace, &template.name) {
            Ok(current) if current.metadata.deletion_timestamp.is_none() => return,
            Ok(mut current) => {
                // Removing the last finalizer of an object being deleted removes the object.
                current.metadata.finalizers.clear();
                self.cluster.update(gvr, current).expect("clear the finalizers");
            }
            Err(_) => {}
        }
        let restored = self.create(gvr, template.clone());
        self.observe(&restored);
    }

    /// Drops the virtual delete events workers routed (no builder applies them here).
    fn drain(&self, routed: &mut PartitionReceiver) {
        while routed.try_recv().is_some() {
            routed.applied(1);
        }
    }
}

/// What a case must leave behind, checked once before it is timed.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    /// The item is still live.
    Kept,
    /// The item was deleted and is gone.
    Gone,
    /// The item was deleted and is held by this GC finalizer.
    Marked(&'static str),
    /// A virtual delete event was routed.
    VirtualDelete,
}

/// One branch of spec §4.2: its item, the object to restore before each call (for the cases that
/// delete it), and what one call must do.
struct Case {
    name: &'static str,
    item: Handle,
    template: Option<Box<dyn FnMut() -> ObjectMeta>>,
    gets: Gets,
    deletes: u64,
    outcome: Outcome,
}

/// The GETs one call makes in each mode.
#[derive(Clone, Copy, Debug)]
struct Gets {
    upstream: u64,
    fast_path: u64,
}

const fn gets(upstream: u64, fast_path: u64) -> Gets {
    Gets { upstream, fast_path }
}

/// Counts of the calls one `attempt_to_delete_item` made, by verb.
#[derive(Debug, PartialEq)]
struct Calls {
    get: u64,
    patch: u64,
    delete: u64,
}

fn calls_since(before: &ApiCalls, after: &ApiCalls) -> Calls {
    Calls {
        get: after.get - before.get,
        patch: after.patch - before.patch,
        delete: after.delete - before.delete,
    }
}

impl Case {
    fn restore(&mut self, rig: &Rig) {
        if let Some(template) = &mut self.template {
            rig.restore(&pods(), &template());
        }
    }

    /// Runs one call outside the timed section and checks that it took the branch it names.
    fn check(&mut self, rig: &Rig, collector: &Collector<SimCluster>, routed: &mut PartitionReceiver) {
        self.restore(rig);
        let before = rig.cluster.api_calls();
        let result = rig.rt.block_on(collector.attempt_to_delete_item(&self.item));
        let calls = calls_since(&before, &rig.cluster.api_calls());
        let expected = Calls {
            get: if collector.config().verify_with_get {
                self.gets.upstream
            } else {
                self.gets.fast_path
            },
            patch: 0,
            delete: self.deletes,
        };
        assert_eq!(calls, expected, "{}: API calls", self.name);
        let id = self.item.identity();
        let live = rig
            .cluster
            .get_object(&pods(), id.namespace(), &id.name.to_string())
            .ok();
        let marked_with = |f| {
            live.as_ref()
                .is_some_and(|o| o.metadata.deletion_timestamp.is_some() && o.metadata.has_finalizer(f))
        };
        let ok = match self.outcome {
            Outcome::Kept => result.is_ok() && live.is_some_and(|o| o.metadata.deletion_timestamp.is_none()),
            Outcome::Gone => result.is_ok() && live.is_none(),
            Outcome::Marked(f) => result.is_ok() && marked_with(f),
            Outcome::VirtualDelete => {
                matches!(result, Err(CollectError::EnqueuedVirtualDeleteEvent(_)))
                    && routed.try_recv().is_some_and(|e| e.is_virtual)
            }
        };
        assert!(ok, "{}: expected {:?}, got {result:?}", self.name, self.outcome);
        rig.drain(routed);
    }
}

/// The cases, with their objects created and observed into the graph.
fn cases(rig: &Rig) -> Vec<Case> {
    let gone_rs = || rs_ref("rs-gone", &uid(2, 2));
    let mut cases = Vec::new();

    rig.create_observed(&replicasets(), meta("rs-live", uid(2, 1), Vec::new(), &[]));
    let solid = meta("solid", uid(3, 1), vec![rs_ref("rs-live", &uid(2, 1))], &[]);
    cases.push(Case {
        name: "solid_owner",
        item: rig.create_observed(&pods(), solid),
        template: None,
        gets: gets(2, 0),
        deletes: 0,
        outcome: Outcome::Kept,
    });

    let hit = meta("dangling-hit", uid(3, 2), vec![gone_rs()], &[]);
    cases.push(Case {
        name: "dangling_owner_cache_hit",
        item: rig.create_observed(&pods(), hit.clone()),
        template: Some(Box::new(move || hit.clone())),
        gets: gets(1, 0),
        deletes: 1,
        outcome: Outcome::Gone,
    });

    // A new owner UID for every call, so absentOwnerCache never knows it.
    let mut owner = 0;
    let mut miss = move || {
        owner += 1;
        meta("dangling-miss", uid(3, 3), vec![rs_ref("rs-gone", &uid(4, owner))], &[])
    };
    cases.push(Case {
        name: "dangling_owner_cache_miss",
        item: rig.create_observed(&pods(), miss()),
        template: Some(Box::new(miss)),
        gets: gets(2, 1),
        deletes: 1,
        outcome: Outcome::Gone,
    });

    // The owner is in a foreground deletion (a user deleted it with propagationPolicy=Foreground)
    // and the item has a dependent, so the item must be deleted Foreground too.
    rig.create_observed(&replicasets(), meta("rs-foreground", uid(2, 3), Vec::new(), &[]));
    let waiting = meta("waiting", uid(3, 4), vec![rs_ref("rs-foreground", &uid(2, 3))], &[]);
    let item = rig.create_observed(&pods(), waiting.clone());
    let pod_ref = OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: "waiting".into(),
        uid: uid(3, 4),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    rig.create_observed(&pods(), meta("waiting-child", uid(3, 5), vec![pod_ref], &[]));
    let foreground = DeleteOptions {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..Default::default()
    };
    let deleting = rig
        .cluster
        .delete_object(&replicasets(), NAMESPACE, "rs-foreground", &foreground)
        .expect("a foreground delete of the owner");
    assert!(!deleting.is_removed(), "the owner waits for its dependents");
    rig.observe(deleting.object());
    assert_eq!(item.dependents_len(), 1, "the waiting item has a dependent");
    cases.push(Case {
        name: "owner_waiting_for_dependents",
        item,
        template: Some(Box::new(move || waiting.clone())),
        gets: gets(2, 0),
        deletes: 1,
        outcome: Outcome::Marked(FINALIZER_FOREGROUND),
    });

    for (name, pod, finalizer) in [
        ("own_finalizer_orphan", "own-orphan", FINALIZER_ORPHAN),
        ("own_finalizer_foreground", "own-foreground", FINALIZER_FOREGROUND),
    ] {
        let i = cases.len() + 10;
        let own = meta(pod, uid(3, i), vec![gone_rs()], &[finalizer]);
        cases.push(Case {
            name,
            item: rig.create_observed(&pods(), own.clone()),
            template: Some(Box::new(move || own.clone())),
            gets: gets(1, 0),
            deletes: 1,
            outcome: Outcome::Marked(finalizer),
        });
    }

    // The builder makes a virtual node for an owner it has not observed.
    let ghost_owner = rs_ref("rs-ghost", &uid(2, 4));
    rig.create_observed(&pods(), meta("ghost-child", uid(3, 20), vec![ghost_owner], &[]));
    let ghost = rig.node(&uid(2, 4));
    assert!(ghost.is_virtual(), "the unobserved owner is a virtual node");
    cases.push(Case {
        name: "virtual_node_not_found",
        item: ghost,
        template: None,
        gets: gets(1, 1),
        deletes: 0,
        outcome: Outcome::VirtualDelete,
    });
    cases
}

fn bench(c: &mut Criterion) {
    for (mode, verify_with_get) in [("fast_path", false), ("upstream", true)] {
        bench_mode(c, mode, verify_with_get);
    }
}

fn bench_mode(c: &mut Criterion, mode: &str, verify_with_get: bool) {
    let (rig, mut routed) = Rig::new(verify_with_get);
    let mut group = c.benchmark_group(format!("attempt_to_delete_item/{mode}"));
    for mut case in cases(&rig) {
        // An empty absentOwnerCache per case, so no case evicts another's entries. The first
        // call warms that cache, as a worker's first visit to an absent owner does.
        let collector = &rig.collector;
        collector.absent_owner_cache().clear();
        case.restore(&rig);
        let _ = rig.rt.block_on(collector.attempt_to_delete_item(&case.item));
        rig.drain(&mut routed);
        case.check(&rig, collector, &mut routed);
        let item = &case.item.clone();
        // One call per batch: each call must find the object its setup restored. The timer pair
        // around each call costs a few tens of nanoseconds, the same in every case.
        group.bench_function(case.name, |b| {
            b.to_async(&rig.rt).iter_batched(
                || {
                    case.restore(&rig);
                    rig.drain(&mut routed);
                },
                |()| collector.attempt_to_delete_item(item),
                BatchSize::PerIteration,
            )
        });
        rig.drain(&mut routed);
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
