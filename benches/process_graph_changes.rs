//! processGraphChanges on a Deployment → ReplicaSet → Pod graph.
//!
//! Per-event latency, on graphs of 10k, 100k and 1M nodes: adding a pod under an existing
//! ReplicaSet, moving a pod to another owner (an update that changes ownerReferences), and churn
//! (one pod deleted, a new one added).
//!
//! Throughput: a 1M-object stream applied from an empty graph by P = 1 and P = 2 builder threads,
//! each applying its partition's events in order, as the router would deliver them. Events are
//! decoded and split before the clock starts; the ratio of the two is the builder scaling figure.

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use kube_gc::api::{ObjectMeta, OwnerReference};
use kube_gc::builder::GraphBuilder;
use kube_gc::event::{EventType, GraphEvent};
use kube_gc::graph::{Graph, GraphWriter};
use kube_gc::router::partition;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The binary's allocator, so the figures are the ones kube-gc would show.
#[global_allocator]
static GLOBAL: kube_gc::allocator::Allocator = kube_gc::allocator::Allocator;

const PODS_PER_SET: usize = 10;

fn uid(kind: u8, i: usize) -> String {
    format!("{kind:08x}-0000-4000-8000-{i:012x}")
}

fn pod(i: usize, set: usize) -> ObjectMeta {
    ObjectMeta {
        name: format!("pod-{i}"),
        namespace: "bench".into(),
        uid: uid(3, i),
        owner_references: vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: format!("rs-{set}"),
            uid: uid(2, set),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }],
        ..Default::default()
    }
}

/// A builder over an empty graph.
fn empty() -> (GraphBuilder, Arc<Graph>) {
    let writer = GraphWriter::new();
    let graph = writer.graph().clone();
    (GraphBuilder::detached(writer), graph)
}

/// A builder over a graph of `nodes` objects.
fn populated(nodes: usize) -> (GraphBuilder, Arc<Graph>) {
    let (builder, graph) = empty();
    for e in stream(&graph, nodes) {
        builder.process_graph_changes(e);
    }
    (builder, graph)
}

/// The Add events of `nodes` objects: one Deployment and ReplicaSet per ten pods, owners first.
fn stream(graph: &Graph, nodes: usize) -> Vec<GraphEvent> {
    let sets = nodes / (PODS_PER_SET + 2);
    let mut events = Vec::with_capacity(nodes);
    for s in 0..sets {
        let deploy = ObjectMeta {
            name: format!("d-{s}"),
            namespace: "bench".into(),
            uid: uid(1, s),
            ..Default::default()
        };
        let rs = ObjectMeta {
            name: format!("rs-{s}"),
            namespace: "bench".into(),
            uid: uid(2, s),
            owner_references: vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: format!("d-{s}"),
                uid: uid(1, s),
                ..Default::default()
            }],
            ..Default::default()
        };
        events.push(event(graph, EventType::Add, &deploy, "Deployment"));
        events.push(event(graph, EventType::Add, &rs, "ReplicaSet"));
        for p in 0..PODS_PER_SET {
            events.push(event(graph, EventType::Add, &pod(s * PODS_PER_SET + p, s), "Pod"));
        }
    }
    events
}

/// The event a monitor would route; built outside the timed section, as decoding is the
/// monitor's cost, not the builder's.
fn event(graph: &Graph, t: EventType, meta: &ObjectMeta, kind: &str) -> GraphEvent {
    let api_version = if kind == "Pod" { "v1" } else { "apps/v1" };
    GraphEvent::observed(graph, t, meta, api_version, kind).expect("valid")
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("process_graph_changes");
    for nodes in [10_000, 100_000, 1_000_000] {
        let (builder, graph) = populated(nodes);
        let sets = nodes / (PODS_PER_SET + 2);
        let mut next = nodes * 10;
        group.bench_function(BenchmarkId::new("add_pod", nodes), |b| {
            b.iter_batched(
                || {
                    next += 1;
                    event(&graph, EventType::Add, &pod(next, next % sets), "Pod")
                },
                |e| builder.process_graph_changes(e),
                BatchSize::SmallInput,
            )
        });
        let mut flip = 0;
        group.bench_function(BenchmarkId::new("update_owner", nodes), |b| {
            b.iter_batched(
                || {
                    flip += 1;
                    event(&graph, EventType::Update, &pod(0, flip % sets), "Pod")
                },
                |e| builder.process_graph_changes(e),
                BatchSize::SmallInput,
            )
        });
        // Churn as a cluster sees it: one pod goes, a new one (new UID) comes. UIDs are never
        // reused, so re-adding a deleted UID is not a case worth timing.
        group.bench_function(BenchmarkId::new("delete_pod_add_new_pod", nodes), |b| {
            b.iter_batched(
                || {
                    next += 1;
                    let add = event(&graph, EventType::Add, &pod(next, next % sets), "Pod");
                    let delete = event(&graph, EventType::Delete, &pod(next - 1, (next - 1) % sets), "Pod");
                    (add, delete)
                },
                |(add, delete)| {
                    builder.process_graph_changes(add);
                    builder.process_graph_changes(delete);
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

/// Applies a fresh 1M-object stream with `partitions` threads; returns the time from the start of
/// the first thread to the end of the last.
fn build(partitions: usize) -> Duration {
    let (builder, graph) = empty();
    let mut split: Vec<Vec<GraphEvent>> = (0..partitions).map(|_| Vec::new()).collect();
    for e in stream(&graph, BUILD_OBJECTS) {
        split[partition(e.namespace(), &e.object.uid, partitions)].push(e);
    }
    let began = Instant::now();
    std::thread::scope(|scope| {
        for events in split {
            let builder = &builder;
            scope.spawn(move || events.into_iter().for_each(|e| builder.process_graph_changes(e)));
        }
    });
    let elapsed = began.elapsed();
    assert_eq!(graph.len(), BUILD_OBJECTS / (PODS_PER_SET + 2) * (PODS_PER_SET + 2));
    elapsed
}

/// Objects in the throughput stream.
const BUILD_OBJECTS: usize = 1_000_000;

fn throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("process_graph_changes_build_1m");
    group
        .sample_size(10)
        .throughput(Throughput::Elements(BUILD_OBJECTS as u64));
    for partitions in [1, 2] {
        group.bench_function(BenchmarkId::new("partitions", partitions), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| build(partitions)).sum())
        });
    }
    group.finish();
}

criterion_group!(benches, bench, throughput);
criterion_main!(benches);
