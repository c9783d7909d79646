//! A cascade plan of 100 000 objects, as `/debug/plan` makes it on a running collector: the
//! snapshot taken from the graph (`from_graph`) and the play (`simulate`), for the Foreground and
//! Background policies. The graph holds one Deployment, 100 ReplicaSets and 1 000 Pods under each
//! (every reference blocking), beside 100 000 unrelated pods so that lookups are not made in a
//! graph that holds only the cascade. Issue target: the whole answer under a second on the 1M
//! cluster (`loadgen plan`); the play is most of it.

use criterion::{criterion_group, criterion_main, Criterion};
use kube_gc::api::{ApiResource, Gvr, ObjectMeta, OwnerReference, PropagationPolicy, RestMapper};
use kube_gc::builder::GraphBuilder;
use kube_gc::event::{EventType, GraphEvent};
use kube_gc::graph::{Graph, GraphWriter, Uid};
use kube_gc::plan;
use std::sync::Arc;

/// The binary's allocator, so the figures are the ones kube-gc would show.
#[global_allocator]
static GLOBAL: kube_gc::allocator::Allocator = kube_gc::allocator::Allocator;

const SETS: usize = 100;
const PODS_PER_SET: usize = 1000;
const UNRELATED: usize = 100_000;

/// A v4-shaped UID, its bits spread as random ones are (splitmix64 of the kind and index).
fn uid(kind: u8, i: usize) -> String {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let (a, b) = (
        mix((kind as u64) << 32 | i as u64),
        mix(!((kind as u64) << 32 | i as u64)),
    );
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        b >> 52,
        b & 0xffff_ffff_ffff
    )
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

fn meta(name: String, uid: String, owners: Vec<OwnerReference>) -> ObjectMeta {
    ObjectMeta {
        name,
        namespace: "bench".into(),
        uid,
        owner_references: owners,
        ..Default::default()
    }
}

/// The graph of the module docs, and the Deployment's UID.
fn graph() -> (Arc<Graph>, String) {
    let writer = GraphWriter::new();
    let graph = writer.graph().clone();
    let builder = GraphBuilder::detached(writer);
    let add = |meta: &ObjectMeta, api_version: &str, kind: &str| {
        let event = GraphEvent::observed(&graph, EventType::Add, meta, api_version, kind).expect("valid");
        builder.process_graph_changes(event);
    };
    let web = uid(1, 0);
    add(&meta("web".into(), web.clone(), vec![]), "apps/v1", "Deployment");
    for s in 0..SETS {
        let set = meta(
            format!("web-{s}"),
            uid(2, s),
            vec![owner("apps/v1", "Deployment", "web", &web)],
        );
        add(&set, "apps/v1", "ReplicaSet");
        for p in 0..PODS_PER_SET {
            let i = s * PODS_PER_SET + p;
            let owners = vec![owner("apps/v1", "ReplicaSet", &set.name, &set.uid)];
            add(&meta(format!("web-{s}-{p}"), uid(3, i), owners), "v1", "Pod");
        }
    }
    for i in 0..UNRELATED {
        add(&meta(format!("other-{i}"), uid(4, i), vec![]), "v1", "Pod");
    }
    (graph, web)
}

fn mapper() -> RestMapper {
    let resource = |group: &str, resource: &str, kind: &str| ApiResource {
        gvr: Gvr::new(group, "v1", resource),
        kind: kind.into(),
        namespaced: true,
        verbs: vec!["delete".into(), "list".into(), "watch".into()],
        preferred: true,
    };
    RestMapper::new(&[
        resource("", "pods", "Pod"),
        resource("apps", "replicasets", "ReplicaSet"),
        resource("apps", "deployments", "Deployment"),
    ])
}

fn bench(c: &mut Criterion) {
    let (graph, web) = graph();
    let mapper = mapper();
    let requested = [Uid::parse(&web)];
    let mut group = c.benchmark_group("plan_100k");
    group.sample_size(10);
    let snapshot = plan::from_graph(&graph, &requested);
    assert_eq!(
        snapshot.len(),
        1 + SETS + SETS * PODS_PER_SET,
        "the cascade, and nothing else"
    );
    group.bench_function("from_graph", |b| b.iter(|| plan::from_graph(&graph, &requested)));
    for policy in [PropagationPolicy::Foreground, PropagationPolicy::Background] {
        let played = plan::simulate(&snapshot, &mapper, std::slice::from_ref(&web), policy);
        assert_eq!(played.removed().count(), snapshot.len(), "{policy:?}: everything goes");
        group.bench_function(format!("simulate_{}", policy.as_str().to_lowercase()), |b| {
            b.iter(|| plan::simulate(&snapshot, &mapper, std::slice::from_ref(&web), policy))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
