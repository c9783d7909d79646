//! Metadata in protobuf over HTTP: kube-gc's client ([`KubeApi`]) against the simulated API server,
//! which answers `PartialObjectMetadata` in protobuf to a client that asks for it first, as
//! kube-apiserver does, for built-in types and custom resources alike.
//!
//! The reference is the JSON path: every read in protobuf must give the objects a read in JSON
//! gives, and a server that offers no protobuf must still serve a client that asks for it.

use crate::sim_apiserver::TestServer;
use crate::support::{blocking_ref_to, configmaps, crd_manifest, create_in, meta, policy, ref_to};
use futures::StreamExt;
use http::{header, Request};
use kube_gc::api::{
    ClusterApi, DeleteOptions, Gvr, KubeApi, ObjectMeta, PartialObjectMeta, Patch, PatchType, PropagationPolicy,
    WatchEventType, Wire,
};
use kube_gc_sim::http::ServerOptions;
use kube_gc_sim::SimCluster;
use std::sync::Arc;
use std::time::Duration;

fn widgets() -> Gvr {
    Gvr::new("example.com", "v1", "widgets")
}

/// Owners, dependents, labels, annotations, finalizers, one object being deleted, and a custom
/// resource owned by a ConfigMap.
fn cluster() -> SimCluster {
    let cluster = SimCluster::new();
    let owner = create_in(&cluster, &configmaps(), meta("a", "owner", vec![]));
    let mut child = meta("a", "child", vec![blocking_ref_to(&owner)]);
    child.labels.insert("app".into(), "web".into());
    child.annotations.insert("note".into(), "kept".into());
    child.finalizers.push("example.com/hold".into());
    create_in(&cluster, &configmaps(), child);
    let crds = Gvr::new("apiextensions.k8s.io", "v1", "customresourcedefinitions");
    let crd = serde_json::from_value(crd_manifest("widgets", "Widget")).expect("a CRD");
    cluster.create(&crds, crd).expect("the CRD is created");
    let widget = PartialObjectMeta {
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        metadata: meta("b", "w", vec![ref_to(&owner)]),
        ..PartialObjectMeta::default()
    };
    cluster
        .create(&widgets(), widget.clone())
        .expect("the widget is created");
    let mut second = widget;
    second.metadata.name = "w2".into();
    cluster
        .create(&widgets(), second)
        .expect("the second widget is created");
    cluster
        .delete_object(&configmaps(), "a", "child", &policy(PropagationPolicy::Background))
        .expect("the child is deleted, and held by its finalizer");
    cluster
}

async fn api(server: &TestServer, wire: Wire) -> KubeApi {
    let api = KubeApi::with_wire(server.client.clone(), wire);
    api.discover().await.expect("discovery");
    api
}

fn metadata(objects: &[PartialObjectMeta]) -> Vec<(String, String, ObjectMeta)> {
    objects
        .iter()
        .map(|o| (o.api_version.clone(), o.kind.clone(), o.metadata.clone()))
        .collect()
}

/// The `Content-Type` a metadata GET of `path` is answered with, asked for protobuf first.
async fn content_type(server: &TestServer, path: &str) -> String {
    let accept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    let request = Request::get(path)
        .header(header::ACCEPT, accept)
        .body(kube::client::Body::empty())
        .unwrap();
    let response = server.client.send(request).await.expect("an answer");
    let value = response.headers().get(header::CONTENT_TYPE).expect("a Content-Type");
    value.to_str().unwrap().to_string()
}

/// The events of a watch-list of `gvr` up to the bookmark that ends its initial events.
async fn initial_events(api: &KubeApi, gvr: &Gvr) -> Vec<(WatchEventType, ObjectMeta)> {
    let mut stream = api.watch_list(gvr, None, "").await.expect("a watch-list");
    let mut events = Vec::new();
    loop {
        let next = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
        let event = next
            .expect("the initial events end in time")
            .expect("the watch is open")
            .unwrap();
        if event.is_initial_events_end() {
            return events;
        }
        events.push((event.event_type, Arc::unwrap_or_clone(event.object).metadata));
    }
}

#[tokio::test]
async fn a_read_in_protobuf_should_give_the_objects_a_read_in_json_gives() {
    let server = TestServer::start_with(cluster(), ServerOptions::default()).await;
    assert_eq!(
        content_type(&server, "/apis/example.com/v1/widgets").await,
        "application/vnd.kubernetes.protobuf",
        "custom resources' metadata is served in protobuf too"
    );
    let (json, protobuf) = (api(&server, Wire::Json).await, api(&server, Wire::Protobuf).await);
    for gvr in [configmaps(), widgets()] {
        let in_json = json.list_page(&gvr, None, "", 1).await.unwrap();
        let in_protobuf = protobuf.list_page(&gvr, None, "", 1).await.unwrap();
        assert!(
            !in_protobuf.continue_token.is_empty(),
            "{gvr}: a page of one has a next page"
        );
        assert_eq!(metadata(&in_protobuf.items), metadata(&in_json.items), "{gvr}");
        assert_eq!(in_protobuf.resource_version, in_json.resource_version);
        let rest = protobuf
            .list_page(&gvr, None, &in_protobuf.continue_token, 0)
            .await
            .unwrap();
        let rest_in_json = json.list_page(&gvr, None, &in_json.continue_token, 0).await.unwrap();
        assert_eq!(metadata(&rest.items), metadata(&rest_in_json.items), "{gvr}");
        assert_eq!(initial_events(&protobuf, &gvr).await, initial_events(&json, &gvr).await);
    }
    let (in_json, in_protobuf) = (
        json.get(&configmaps(), "a", "child").await.unwrap(),
        protobuf.get(&configmaps(), "a", "child").await.unwrap(),
    );
    assert_eq!(metadata(std::slice::from_ref(&in_protobuf)), metadata(&[in_json]));
    let child = &in_protobuf.metadata;
    assert!(
        child.deletion_timestamp.is_some() && child.labels.contains_key("app"),
        "{child:?}"
    );
    assert_eq!(child.owner_references[0].block_owner_deletion, Some(true));
}

#[tokio::test]
async fn changes_should_be_watched_in_protobuf_as_in_json() {
    let server = TestServer::start_with(cluster(), ServerOptions::default()).await;
    let (json, protobuf) = (api(&server, Wire::Json).await, api(&server, Wire::Protobuf).await);
    let rv = protobuf
        .list_page(&configmaps(), None, "", 0)
        .await
        .unwrap()
        .resource_version;
    let mut streams = [
        json.watch(&configmaps(), None, &rv).await.unwrap(),
        protobuf.watch(&configmaps(), None, &rv).await.unwrap(),
    ];
    let label = Patch::new(
        PatchType::Merge,
        serde_json::json!({"metadata": {"labels": {"l": "v"}}}),
    );
    let patched = protobuf.patch(&configmaps(), "a", "owner", &label).await.unwrap();
    assert_eq!(patched.metadata.labels["l"], "v", "a PATCH is answered in protobuf too");
    let release = Patch::new(PatchType::Merge, serde_json::json!({"metadata": {"finalizers": null}}));
    protobuf.patch(&configmaps(), "a", "child", &release).await.unwrap();
    protobuf
        .delete(&configmaps(), "a", "owner", &DeleteOptions::default())
        .await
        .unwrap();
    let mut seen = Vec::new();
    for stream in &mut streams {
        let mut events = Vec::new();
        while events.len() < 3 {
            let next = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
            let event = next.expect("an event in time").expect("the watch is open").unwrap();
            if event.event_type != WatchEventType::Bookmark {
                let meta = Arc::unwrap_or_clone(event.object).metadata;
                events.push((event.event_type, meta.name, meta.uid));
            }
        }
        seen.push(events);
    }
    assert_eq!(seen[1], seen[0]);
    let types: Vec<_> = seen[1].iter().map(|e| e.0).collect();
    assert_eq!(
        types,
        [
            WatchEventType::Modified,
            WatchEventType::Deleted,
            WatchEventType::Deleted
        ]
    );
    let names: Vec<_> = seen[1].iter().map(|e| e.1.as_str()).collect();
    assert_eq!(names, ["owner", "child", "owner"]);
}

#[tokio::test]
async fn a_failure_in_protobuf_should_keep_its_reason() {
    let server = TestServer::start_with(SimCluster::with_history(2), ServerOptions::default()).await;
    let protobuf = api(&server, Wire::Protobuf).await;
    let missing = protobuf.get(&configmaps(), "a", "nothing").await.unwrap_err();
    assert!(missing.is_not_found(), "{missing:?}");
    for i in 0..5 {
        let name = format!("c{i}");
        let obj = PartialObjectMeta {
            metadata: meta("a", &name, vec![]),
            ..PartialObjectMeta::default()
        };
        server.cluster.create(&configmaps(), obj).unwrap();
    }
    let mut stream = protobuf.watch(&configmaps(), None, "1").await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
    let gone = next.expect("an answer in time").expect("one event").unwrap_err();
    assert!(gone.is_gone(), "a watch from a compacted version is 410 Gone: {gone:?}");
}

#[tokio::test]
async fn a_server_that_offers_no_protobuf_should_still_serve_a_client_that_asks_for_it() {
    let options = ServerOptions {
        protobuf: false,
        ..ServerOptions::default()
    };
    let server = TestServer::start_with(cluster(), options).await;
    assert_eq!(content_type(&server, "/api/v1/configmaps").await, "application/json");
    let (json, protobuf) = (api(&server, Wire::Json).await, api(&server, Wire::Protobuf).await);
    for gvr in [configmaps(), widgets()] {
        let in_json = json.list_page(&gvr, None, "", 0).await.unwrap();
        let asked_protobuf = protobuf.list_page(&gvr, None, "", 0).await.unwrap();
        assert_eq!(metadata(&asked_protobuf.items), metadata(&in_json.items));
        assert_eq!(initial_events(&protobuf, &gvr).await, initial_events(&json, &gvr).await);
    }
}
