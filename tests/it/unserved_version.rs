//! Owners named at an API version that is no longer served (kubernetes#102641): a CRD serves
//! `example.com/v1` Widgets and has dropped `v1alpha1`, and dependents still name their owner
//! `example.com/v1alpha1, Kind=Widget`. The collector judges such an owner by its UID, read
//! through the served version: alive, the dependent stays and its item is forgotten (upstream
//! fails the mapping and retries forever); gone, or the name now has another UID, the dependent is
//! collected.

use crate::support::{self, configmaps, eventually, meta, policy, ref_named, Harness};
use kube_gc::api::{Gvr, PartialObjectMeta, PropagationPolicy};
use kube_gc::controller::Config;
use kube_gc_sim::SimCluster;
use serde_json::json;
use std::time::Duration;

fn crds() -> Gvr {
    Gvr::new("apiextensions.k8s.io", "v1", "customresourcedefinitions")
}

fn widgets() -> Gvr {
    Gvr::new("example.com", "v1", "widgets")
}

/// The Widget CRD, serving `v1` (stored) and, when `alpha_served`, `v1alpha1` too.
fn widget_crd(alpha_served: bool) -> PartialObjectMeta {
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    let manifest = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {"name": "v1alpha1", "served": alpha_served, "storage": false, "schema": schema},
                {"name": "v1", "served": true, "storage": true, "schema": schema},
            ],
        },
    });
    serde_json::from_value(manifest).expect("a CRD")
}

/// A reference to `widget` at the dropped version.
fn alpha_ref(widget: &PartialObjectMeta) -> kube_gc::api::OwnerReference {
    let m = &widget.metadata;
    ref_named("example.com/v1alpha1", "Widget", &m.name, &m.uid)
}

/// A cluster whose Widget CRD serves `v1` only, with the Widgets `names`.
fn cluster_with_widgets(names: &[&str]) -> (SimCluster, Vec<PartialObjectMeta>) {
    let cluster = SimCluster::new();
    cluster.create(&crds(), widget_crd(false)).expect("create the CRD");
    let made = names
        .iter()
        .map(|name| support::create_in(&cluster, &widgets(), meta("default", name, vec![])))
        .collect();
    (cluster, made)
}

#[tokio::test(start_paused = true)]
async fn a_live_owner_named_at_a_dropped_version_should_keep_its_dependent_and_let_the_item_go() {
    let (cluster, made) = cluster_with_widgets(&["w"]);
    let widget = &made[0];
    let dep = support::create_in(&cluster, &configmaps(), meta("default", "dep", vec![alpha_ref(widget)]));
    let h = Harness::start_with(cluster, Config::default()).await;
    h.wait_in_graph(&[widget, &dep]).await;
    h.settle().await;
    assert!(h.exists(&configmaps(), &dep), "the dependent of a live owner stays");
    // Upstream's restMappingError would retry the dependent forever: the queue would never be idle.
    assert!(
        h.gc.is_quiet(),
        "the item was forgotten, not retried: {} delayed",
        h.gc.attempt_to_delete().delayed_len()
    );
}

#[tokio::test(start_paused = true)]
async fn a_dependent_of_an_owner_named_at_a_dropped_version_should_be_collected_once_the_owner_goes() {
    let (cluster, made) = cluster_with_widgets(&["w", "renamed"]);
    let (widget, renamed) = (&made[0], &made[1]);
    let dep = support::create_in(&cluster, &configmaps(), meta("default", "dep", vec![alpha_ref(widget)]));
    // The name `renamed` now holds another object than the one this dependent names.
    let stale = ref_named(
        "example.com/v1alpha1",
        "Widget",
        "renamed",
        "0b0e2a4c-0000-4000-8000-00000000dead",
    );
    let impostor = support::create_in(&cluster, &configmaps(), meta("default", "impostor", vec![stale]));
    let h = Harness::start_with(cluster, Config::default()).await;
    h.wait_in_graph(&[widget, renamed, &dep]).await;
    h.eventually("the dependent of a name held by another UID collected", || {
        !h.exists(&configmaps(), &impostor)
    })
    .await;
    h.settle().await;
    assert!(h.exists(&configmaps(), &dep), "kept while its owner lives");

    h.delete(&widgets(), widget, policy(PropagationPolicy::Background));
    h.eventually("the dependent collected", || !h.exists(&configmaps(), &dep))
        .await;
    assert!(h.exists(&widgets(), renamed), "an unrelated owner stays");
}

#[tokio::test(start_paused = true)]
async fn dropping_a_version_while_running_should_never_collect_the_dependent_of_a_live_owner() {
    let cluster = SimCluster::new();
    let crd = cluster.create(&crds(), widget_crd(true)).expect("create the CRD");
    let widget = support::create_in(&cluster, &widgets(), meta("default", "w", vec![]));
    let h = Harness::start_with(cluster, Config::default()).await;
    h.wait_in_graph(&[&widget]).await;

    // The CRD stops serving v1alpha1; the monitor set stays the same (widgets at v1), so only
    // the next sync's discovery tells the collector.
    let mut dropped = h.cluster.get_object(&crds(), "", &crd.metadata.name).expect("the CRD");
    dropped.rest = widget_crd(false).rest;
    h.cluster.update(&crds(), dropped).expect("drop v1alpha1");
    h.gc.sync_once().await;
    assert!(
        h.gc.mapper()
            .load()
            .rest_mapping("example.com/v1alpha1", "Widget")
            .is_err(),
        "the mapper follows discovery although the monitor set stayed the same"
    );
    // A dependent written against the old version: read through v1alpha1, its owner would
    // answer 404 and look absent.
    let dep = h.create(&configmaps(), meta("default", "dep", vec![alpha_ref(&widget)]));
    h.eventually("the dependent judged", || {
        h.in_graph(&dep) || !h.exists(&configmaps(), &dep)
    })
    .await;
    h.settle().await;
    h.wait(Duration::from_secs(5)).await;
    assert!(h.exists(&configmaps(), &dep), "the dependent of a live owner stays");
    h.delete(&widgets(), &widget, policy(PropagationPolicy::Background));
    eventually("the dependent collected", || !h.exists(&configmaps(), &dep)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_an_owner_named_at_a_dropped_version_should_be_judged_through_the_served_one() {
    let (cluster, made) = cluster_with_widgets(&["w"]);
    let widget = &made[0];
    let dep = support::create_in(&cluster, &configmaps(), meta("default", "dep", vec![alpha_ref(widget)]));
    let cluster = std::sync::Arc::new(cluster);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let options = kube_gc_sim::http::ServerOptions::default();
    let server = tokio::spawn(kube_gc_sim::http::serve(
        listener,
        cluster.clone(),
        options,
        std::future::pending(),
    ));
    let gc = support::start_collector(support::collector_client(addr).await).await;
    let exists = |obj: &PartialObjectMeta, gvr: &Gvr| {
        cluster
            .get_object(gvr, "default", &obj.metadata.name)
            .is_ok_and(|o| o.metadata.uid == obj.metadata.uid)
    };
    let patience = Duration::from_secs(30);
    let graph = gc.graph().clone();
    let uid = kube_gc::graph::Uid::parse(&dep.metadata.uid);
    support::within_real_time("the dependent in the graph", patience, async || graph.contains(&uid)).await;
    support::within_real_time("the collector quiet", patience, async || gc.is_quiet()).await;
    assert!(exists(&dep, &configmaps()), "the dependent of a live owner stays");

    cluster
        .delete_object(&widgets(), "default", "w", &policy(PropagationPolicy::Background))
        .expect("delete the widget");
    support::within_real_time("the dependent collected", patience, async || {
        !exists(&dep, &configmaps())
    })
    .await;
    gc.shutdown().await;
    server.abort();
}

#[tokio::test(start_paused = true)]
async fn before_the_next_sync_an_owner_seen_through_the_served_version_should_be_read_through_it() {
    let cluster = SimCluster::new();
    let crd = cluster.create(&crds(), widget_crd(true)).expect("create the CRD");
    let widget = support::create_in(&cluster, &widgets(), meta("default", "w", vec![]));
    let config = Config {
        sync_period: Duration::from_secs(3600),
        ..Config::default()
    };
    let h = Harness::start_with(cluster, config).await;
    h.wait_in_graph(&[&widget]).await;
    // v1alpha1 goes, and no sync round has told the collector yet: its mapper still maps it.
    let mut dropped = h.cluster.get_object(&crds(), "", &crd.metadata.name).expect("the CRD");
    dropped.rest = widget_crd(false).rest;
    h.cluster.update(&crds(), dropped).expect("drop v1alpha1");
    assert!(h
        .gc
        .mapper()
        .load()
        .rest_mapping("example.com/v1alpha1", "Widget")
        .is_ok());
    let dep = h.create(&configmaps(), meta("default", "dep", vec![alpha_ref(&widget)]));
    h.eventually("the dependent judged", || {
        h.in_graph(&dep) || !h.exists(&configmaps(), &dep)
    })
    .await;
    h.settle().await;
    assert!(
        h.exists(&configmaps(), &dep),
        "the owner was read through the version its node was observed at, not the dropped one"
    );
}
