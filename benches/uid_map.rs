//! The graph's sharded `uid → handle` map against one `parking_lot::RwLock<HashMap>`, and the
//! resident memory of a large graph.
//!
//! Timed regimes: a mix of lookups, inserts of new UIDs and removes of old ones, 90/5/5 (a quiet
//! cluster: workers read, builders rarely write) and 50/25/25 (churn), with 1 and 2 threads, on
//! [`PREFILLED`] entries. Each thread works on UIDs of its own, as each builder partition does:
//! inserts take fresh UIDs (UIDs are never reused) and removes take the oldest, so the map stays
//! near its prefilled size. Operations and the handles to insert are prepared outside the timed
//! section, and removed handles are dropped after it. The time per iteration is one operation on
//! every thread; the throughput line counts all threads' operations.
//!
//! Not timed: with `KUBE_GC_BENCH_1M=1`, `memory` builds a 1M-node Deployment → ReplicaSet → Pod
//! graph through [`GraphBuilder`] and prints the resident bytes it added per node (DESIGN §5
//! target: ≤ 200). It is skipped otherwise, so smoke runs stay fast.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kube_gc::api::{ObjectMeta, OwnerReference};
use kube_gc::builder::GraphBuilder;
use kube_gc::event::{EventType, GraphEvent};
use kube_gc::graph::{Graph, GraphWriter, Handle, Identity, Name, OwnerRefs, Sym, TypeMeta, Uid};
use parking_lot::RwLock;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

/// The binary's allocator, so the figures (memory above all) are the ones kube-gc would show.
#[global_allocator]
static GLOBAL: kube_gc::allocator::Allocator = kube_gc::allocator::Allocator;

/// Entries in the map before timing starts.
const PREFILLED: u64 = 100_000;
/// Nodes in the memory report's graph.
const MEMORY_NODES: usize = 1_000_000;
/// Pods per ReplicaSet in the memory report's graph (each ReplicaSet has its own Deployment).
const PODS_PER_SET: usize = 10;

/// The operations the benches time, as both maps offer them.
trait UidMap: Sync {
    fn get(&self, uid: &Uid) -> Option<Handle>;
    fn insert(&self, handle: Handle);
    fn remove(&self, uid: &Uid) -> Option<Handle>;
}

impl UidMap for GraphWriter {
    fn get(&self, uid: &Uid) -> Option<Handle> {
        Graph::get(self, uid)
    }
    fn insert(&self, handle: Handle) {
        GraphWriter::insert(self, handle);
    }
    fn remove(&self, uid: &Uid) -> Option<Handle> {
        GraphWriter::remove(self, uid)
    }
}

/// The baseline: one map behind one reader-writer lock.
#[derive(Default)]
struct Locked(RwLock<HashMap<Uid, Handle>>);

impl UidMap for Locked {
    fn get(&self, uid: &Uid) -> Option<Handle> {
        self.0.read().get(uid).cloned()
    }
    fn insert(&self, handle: Handle) {
        let uid = handle.identity().uid.clone();
        self.0.write().insert(uid, handle);
    }
    fn remove(&self, uid: &Uid) -> Option<Handle> {
        self.0.write().remove(uid)
    }
}

/// Shares of lookups and inserts, in percent; removes take the rest.
#[derive(Clone, Copy)]
struct Mix {
    read: u32,
    insert: u32,
}

impl Mix {
    fn name(self) -> String {
        format!("mixed_{}_{}_{}", self.read, self.insert, 100 - self.read - self.insert)
    }
}

/// The live UIDs of one thread: key indices `lo..hi`.
#[derive(Clone, Copy)]
struct Window {
    lo: u64,
    hi: u64,
}

/// A bijective scramble: distinct inputs give distinct, random-looking outputs.
fn scramble(x: u128) -> u128 {
    let x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
    x ^ (x >> 64)
}

/// A random-looking UUID, distinct for every (thread, index), as v4 UIDs are.
fn key(thread: usize, index: u64) -> Uid {
    Uid::new_v4(scramble((thread as u128) << 64 | u128::from(index)))
}

/// The strings every node shares, interned once.
struct Syms {
    api_version: Sym,
    kind: Sym,
    namespace: Sym,
}

impl Syms {
    fn new(_graph: &Graph) -> Syms {
        Syms {
            api_version: Sym::new("v1"),
            kind: Sym::new("Pod"),
            namespace: Sym::new("bench"),
        }
    }

    fn handle(&self, thread: usize, index: u64) -> Handle {
        let identity = Identity::new(
            TypeMeta::new(self.api_version.clone(), self.kind.clone()),
            Name::new(&format!("pod-{thread}-{index}")),
            key(thread, index),
            self.namespace.clone(),
        );
        Handle::new(identity, OwnerRefs::NONE, false)
    }
}

enum Op {
    Get(Uid),
    Insert(Handle),
    Remove(Uid),
}

/// `n` operations of `mix` for `thread`, moving its window as they will.
fn plan(thread: usize, window: &mut Window, n: u64, mix: Mix, syms: &Syms, rng: &mut SmallRng) -> Vec<Op> {
    (0..n)
        .map(|_| {
            let roll = rng.gen_range(0..100);
            if roll < mix.read || window.lo == window.hi {
                Op::Get(key(thread, rng.gen_range(window.lo..window.hi.max(window.lo + 1))))
            } else if roll < mix.read + mix.insert {
                window.hi += 1;
                Op::Insert(syms.handle(thread, window.hi - 1))
            } else {
                window.lo += 1;
                Op::Remove(key(thread, window.lo - 1))
            }
        })
        .collect()
}

/// Runs `ops`; returns the removed handles so that they are dropped after the timed section.
fn run(map: &impl UidMap, ops: Vec<Op>) -> Vec<Handle> {
    let mut removed = Vec::new();
    for op in ops {
        match op {
            Op::Get(uid) => {
                black_box(map.get(&uid));
            }
            Op::Insert(handle) => map.insert(handle),
            Op::Remove(uid) => removed.extend(map.remove(&uid)),
        }
    }
    removed
}

/// A map holding [`PREFILLED`] entries, split evenly between `threads` windows.
fn prefilled<M: UidMap + Default>(threads: usize, syms: &Syms) -> (M, Vec<Window>) {
    let map = M::default();
    let per_thread = PREFILLED / threads as u64;
    for t in 0..threads {
        for i in 0..per_thread {
            map.insert(syms.handle(t, i));
        }
    }
    (map, vec![Window { lo: 0, hi: per_thread }; threads])
}

/// Times `iters` operations on each of `windows.len()` threads at once.
fn timed(map: &impl UidMap, windows: &mut [Window], iters: u64, mix: Mix, syms: &Syms, seed: &mut u64) -> Duration {
    let threads = windows.len();
    let start = Barrier::new(threads + 1);
    thread::scope(|s| {
        let workers: Vec<_> = windows
            .iter_mut()
            .enumerate()
            .map(|(t, window)| {
                *seed += 1;
                let mut rng = SmallRng::seed_from_u64(*seed);
                let start = &start;
                s.spawn(move || {
                    let ops = plan(t, window, iters, mix, syms, &mut rng);
                    start.wait();
                    run(map, ops)
                })
            })
            .collect();
        start.wait();
        let began = Instant::now();
        let removed: Vec<Vec<Handle>> = workers.into_iter().map(|w| w.join().expect("a worker")).collect();
        let elapsed = began.elapsed();
        drop(removed);
        elapsed
    })
}

fn bench(c: &mut Criterion) {
    for mix in [Mix { read: 90, insert: 5 }, Mix { read: 50, insert: 25 }] {
        for threads in [1, 2] {
            let regime = if threads == 1 { "1_thread" } else { "2_threads" };
            let mut group = c.benchmark_group(format!("uid_map/{}/{regime}", mix.name()));
            group.throughput(Throughput::Elements(threads as u64));
            let syms = Syms::new(&Graph::new());
            let mut seed = 0;
            let (graph, mut windows) = prefilled::<GraphWriter>(threads, &syms);
            group.bench_function(BenchmarkId::from_parameter("graph_sharded"), |b| {
                b.iter_custom(|iters| timed(&graph, &mut windows, iters, mix, &syms, &mut seed))
            });
            drop(graph);
            let (locked, mut windows) = prefilled::<Locked>(threads, &syms);
            group.bench_function(BenchmarkId::from_parameter("rwlock_hashmap"), |b| {
                b.iter_custom(|iters| timed(&locked, &mut windows, iters, mix, &syms, &mut seed))
            });
            group.finish();
        }
    }
}

/// This process's resident set, in bytes (`VmRSS`, which the kernel reports in kB whatever the
/// page size).
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("a VmRSS line");
    kb * 1024
}

fn owner(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The objects of one Deployment: the Deployment, one ReplicaSet and its pods, with names shaped
/// like the ones the controllers generate and resourceVersions of a busy etcd (ten digits).
fn deployment(s: usize) -> Vec<(ObjectMeta, &'static str, &'static str)> {
    let uid = |kind: usize, i: usize| key(kind, i as u64).to_string();
    let rv = std::cell::Cell::new(4_000_000_000 + 16 * s as u64);
    let meta = |name: String, uid: String, owners: Vec<OwnerReference>| ObjectMeta {
        name,
        namespace: format!("team-{}", s % 100),
        uid,
        resource_version: {
            rv.set(rv.get() + 1);
            rv.get().to_string()
        },
        owner_references: owners,
        ..Default::default()
    };
    let deploy = format!("web-{s:06}");
    let rs = format!("{deploy}-{:010x}", scramble(s as u128) as u64 & 0xff_ffff_ffff);
    let mut objects = vec![
        (meta(deploy.clone(), uid(1, s), Vec::new()), "apps/v1", "Deployment"),
        (
            meta(
                rs.clone(),
                uid(2, s),
                vec![owner("apps/v1", "Deployment", &deploy, &uid(1, s))],
            ),
            "apps/v1",
            "ReplicaSet",
        ),
    ];
    for p in 0..PODS_PER_SET {
        let i = s * PODS_PER_SET + p;
        let pod = format!("{rs}-{:05x}", scramble(i as u128) as u64 & 0xf_ffff);
        let owners = vec![owner("apps/v1", "ReplicaSet", &rs, &uid(2, s))];
        objects.push((meta(pod, uid(3, i), owners), "v1", "Pod"));
    }
    objects
}

/// Not timed: the resident bytes per node of a 1M-node graph built through the builder.
fn memory(_: &mut Criterion) {
    if std::env::var("KUBE_GC_BENCH_1M").as_deref() != Ok("1") {
        eprintln!("uid_map/memory: skipped; set KUBE_GC_BENCH_1M=1 to build the 1M-node graph");
        return;
    }
    let before = resident_bytes();
    let writer = GraphWriter::new();
    let graph = writer.graph().clone();
    let builder = GraphBuilder::detached(writer);
    let began = Instant::now();
    let sets = MEMORY_NODES / (PODS_PER_SET + 2);
    for s in 0..sets {
        // One Deployment's objects at a time, so that no event outlives its application.
        for (meta, api_version, kind) in deployment(s) {
            let event = GraphEvent::observed(&graph, EventType::Add, &meta, api_version, kind).expect("valid");
            builder.process_graph_changes(event);
        }
    }
    let elapsed = began.elapsed();
    let after = resident_bytes();
    let nodes = graph.len();
    assert_eq!(nodes, sets * (PODS_PER_SET + 2), "every object became a node");
    let mut virtual_nodes = 0;
    graph.for_each_node(|node| virtual_nodes += usize::from(node.is_virtual()));
    assert_eq!(virtual_nodes, 0, "owners came first: no virtual node was made");
    eprintln!(
        "uid_map/memory: {nodes} nodes (Deployment → ReplicaSet → {PODS_PER_SET} Pods), built in {:.2} s \
         (making each object's metadata and event included); resident {} → {} MiB: {} bytes/object",
        elapsed.as_secs_f64(),
        before >> 20,
        after >> 20,
        (after.saturating_sub(before)) / nodes as u64,
    );
    black_box((builder, graph));
}

criterion_group!(report, memory);
criterion_group!(benches, bench);
criterion_main!(report, benches);
