//! The simulated API server as a real client library sees it: kube-rs drives it over HTTP on
//! 127.0.0.1 through every verb, metadata-only reads, paginated lists, watches, discovery, CRDs and
//! namespace deletion, and reads back the codes, reasons and headers of its failures, injected or
//! provoked by bad requests that must not take it down.
//!
//! Each test starts its own server in-process on an ephemeral port ([`TestServer`]), so tests share
//! nothing and run in parallel. They run on real time, not tokio's paused clock: a paused runtime
//! that waits on a socket jumps its clock forward and would fire every timeout at once. So every wait
//! is bounded in real time instead: each request by the client's read timeout, and each stream read,
//! hand-written exchange and condition by [`within`], which names what it waited for.

use crate::support;
use crate::support::list_version;

use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PersistentVolume};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroup, OwnerReference};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, Patch, PatchParams,
    PostParams, Preconditions, WatchEvent, WatchParams,
};
use kube::config::Config;
use kube::core::Status;
use kube::discovery::{verbs, Discovery};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use kube_gc_sim::http::{self, HttpFaults, Latency, ServerOptions};
use kube_gc_sim::SimCluster;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// How long any one wait may take before the test fails. Every exchange here is local and small;
/// the slowest deliberate wait (an injected latency, a throttled retry) is about a second.
const PATIENCE: Duration = Duration::from_secs(5);

/// The namespace the kubeconfig's context names, so `Api::default_namespaced` lands here.
const NS: &str = "default";

// ---------------------------------------------------------------------------------------------
// Setup

/// One server, in-process on `127.0.0.1:0`, and a kube-rs client that reaches it through the
/// kubeconfig the server writes. Dropping it stops the server: the serving task is aborted, open
/// watches with it.
pub(crate) struct TestServer {
    addr: SocketAddr,
    pub(crate) client: Client,
    pub(crate) cluster: Arc<SimCluster>,
    task: JoinHandle<std::io::Result<()>>,
}

impl TestServer {
    pub(crate) async fn start() -> Self {
        Self::start_with(SimCluster::new(), ServerOptions::default()).await
    }

    pub(crate) async fn start_with(cluster: SimCluster, options: ServerOptions) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("the listener has an address");
        let cluster = Arc::new(cluster);
        let task = tokio::spawn(http::serve(
            listener,
            Arc::clone(&cluster),
            options,
            std::future::pending(),
        ));
        let client = client_for(addr, false).await;
        TestServer {
            addr,
            client,
            cluster,
            task,
        }
    }

    /// A server with a fresh cluster whose answers meet `faults`.
    async fn with_faults(faults: HttpFaults) -> Self {
        let options = ServerOptions {
            faults,
            ..ServerOptions::default()
        };
        Self::start_with(SimCluster::new(), options).await
    }

    /// A typed API in the context's namespace.
    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::default_namespaced(self.client.clone())
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A client built as a user builds one: from the kubeconfig text the server hands out.
///
/// `retry` keeps kube-rs's default retry of 429/503/504; the tests that read those answers turn it
/// off, so that the answer under test reaches them instead of being retried away.
async fn client_for(addr: SocketAddr, retry: bool) -> Client {
    Client::try_from(config_for(addr, retry).await).expect("a plain-HTTP client builds")
}

/// The client configuration of [`client_for`].
async fn config_for(addr: SocketAddr, retry: bool) -> Config {
    let mut config = support::client_config(addr).await;
    assert_eq!(config.default_namespace, NS);
    config.default_retry = retry;
    // Bounds every response the client waits for, watches included (their bookmarks and events
    // come well within it).
    config.read_timeout = Some(2 * PATIENCE);
    config
}

/// `fut`, or a panic naming `what` once [`PATIENCE`] has passed.
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, fut)
        .await
        .unwrap_or_else(|_| panic!("no answer within {PATIENCE:?} while waiting for {what}; the server likely hung"))
}

/// The next item of a watch stream, within [`PATIENCE`].
async fn next<S, T, E>(stream: &mut S, what: &str) -> T
where
    S: Stream<Item = Result<T, E>> + Unpin,
    E: std::fmt::Display,
{
    within(what, stream.next())
        .await
        .unwrap_or_else(|| panic!("the stream ended while waiting for {what}"))
        .unwrap_or_else(|e| panic!("the stream failed while waiting for {what}: {e}"))
}

/// A watch event of a ConfigMap as (type, name); `None` for a bookmark. An ERROR fails the test.
fn change_of(event: WatchEvent<ConfigMap>) -> Option<(&'static str, String)> {
    match event {
        WatchEvent::Added(cm) => Some(("ADDED", cm.name_any())),
        WatchEvent::Modified(cm) => Some(("MODIFIED", cm.name_any())),
        WatchEvent::Deleted(cm) => Some(("DELETED", cm.name_any())),
        WatchEvent::Bookmark(_) => None,
        WatchEvent::Error(e) => panic!("watch error: {e:?}"),
    }
}

/// The changes of a ConfigMap watch, bookmarks skipped, from the first until `done` holds of
/// those seen; each event must come within [`PATIENCE`], so the wait is bounded by how many
/// events `done` needs.
async fn changes_until<S>(
    events: &mut S,
    what: &str,
    done: impl Fn(&[(&'static str, String)]) -> bool,
) -> Vec<(&'static str, String)>
where
    S: Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    let mut seen = Vec::new();
    while !done(&seen) {
        if let Some(change) = change_of(next(events, what).await) {
            seen.push(change);
        }
    }
    seen
}

/// Expected watch changes as [`change_of`] names them.
fn changes(expected: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    expected.iter().map(|&(kind, name)| (kind, name.to_string())).collect()
}

/// The `Status` of a failed call, checked against the expected code and reason.
#[track_caller]
fn status_of<T: Debug>(result: Result<T, kube::Error>, code: u16, reason: &str) -> Status {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(
                (status.code, status.reason.as_str()),
                (code, reason),
                "unexpected status {status:?}"
            );
            assert!(status.is_failure(), "a {code} is a Failure status: {status:?}");
            *status
        }
        other => panic!("expected a {code} {reason} Status, got {other:?}"),
    }
}

fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        data: Some(map(data)),
        ..ConfigMap::default()
    }
}

fn labelled(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut cm = config_map(name, &[]);
    cm.metadata.labels = Some(map(labels));
    cm
}

/// An owner reference to a ConfigMap that need not exist (no GC runs here).
fn owner_ref(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: name.into(),
        uid: uid.into(),
        ..OwnerReference::default()
    }
}

async fn create_all(api: &Api<ConfigMap>, names: impl IntoIterator<Item = String>) {
    for name in names {
        api.create(&PostParams::default(), &config_map(&name, &[]))
            .await
            .unwrap_or_else(|e| panic!("create {name}: {e}"));
    }
}

fn names<K: ResourceExt>(items: &[K]) -> Vec<String> {
    items.iter().map(ResourceExt::name_any).collect()
}

fn rv_number(obj: &impl ResourceExt) -> u64 {
    obj.resource_version()
        .expect("a stored object has a resourceVersion")
        .parse()
        .expect("the simulated server's resourceVersions are numbers")
}

fn data(cm: &ConfigMap) -> BTreeMap<String, String> {
    cm.data.clone().unwrap_or_default()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A JSON patch (RFC 6902) for kube-rs's `Patch::Json`, built from its JSON form.
fn json_patch(ops: Value) -> Patch<()> {
    Patch::Json(serde_json::from_value(ops).expect("a valid JSON patch"))
}

/// A response read without kube-rs's error handling, so its headers stay readable.
pub(crate) struct RawResponse {
    pub(crate) status: StatusCode,
    headers: HeaderMap,
    pub(crate) body: Value,
}

/// Sends a hand-built request through the client (base URL only; no retries, no error mapping).
pub(crate) async fn raw(client: &Client, method: Method, uri: &str, content_type: &str, body: Vec<u8>) -> RawResponse {
    let what = format!("{method} {uri}");
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, content_type)
        .body(kube::client::Body::from(body))
        .expect("a valid request");
    let response = within(&what, client.send(request))
        .await
        .unwrap_or_else(|e| panic!("{what}: no response: {e}"));
    let (parts, body) = response.into_parts();
    let bytes = within(&what, body.collect_bytes())
        .await
        .unwrap_or_else(|e| panic!("{what}: the body could not be read: {e}"));
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "{what}: the body is not JSON ({e}): {}",
            String::from_utf8_lossy(&bytes)
        )
    });
    RawResponse {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

/// Checks a raw response is a `metav1.Status` failure with this code and reason.
#[track_caller]
fn assert_status_body(response: &RawResponse, code: u16, reason: &str) {
    assert_eq!(response.status.as_u16(), code, "{}", response.body);
    assert_eq!(
        response.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()),
        Some("application/json")
    );
    let status: Status = serde_json::from_value(response.body.clone()).expect("the body decodes as a Status");
    assert_eq!(response.body["kind"], "Status");
    assert_eq!(
        (status.code, status.reason.as_str()),
        (code, reason),
        "{}",
        response.body
    );
    assert!(!status.message.is_empty(), "a failure says why: {}", response.body);
}

// ---------------------------------------------------------------------------------------------
// Verbs

#[tokio::test]
async fn config_maps_should_answer_every_verb_in_a_namespace() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = server.api();
    let pp = PostParams::default();

    let created = cms.create(&pp, &config_map("a", &[("k", "v1")])).await.unwrap();
    assert_eq!(created.metadata.namespace.as_deref(), Some(NS));
    assert!(created.uid().is_some_and(|u| !u.is_empty()));
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(data(&created), map(&[("k", "v1")]));

    let got = cms.get("a").await.unwrap();
    assert_eq!(
        (got.uid(), got.resource_version()),
        (created.uid(), created.resource_version())
    );

    let list = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(names(&list.items), ["a"]);
    assert_eq!(list.types.kind, "ConfigMapList");
    assert!(rv_number(&list.items[0]) <= list.metadata.resource_version.unwrap().parse().unwrap());

    // PUT with the current resourceVersion.
    let mut next = got.clone();
    next.data = Some(map(&[("k", "v2")]));
    let replaced = cms.replace("a", &pp, &next).await.unwrap();
    assert_eq!(data(&replaced), map(&[("k", "v2")]));
    assert!(rv_number(&replaced) > rv_number(&got));
    assert_eq!(replaced.uid(), created.uid());

    // PUT with a stale resourceVersion: 409, and nothing written.
    let mut stale = got.clone();
    stale.data = Some(map(&[("k", "lost")]));
    status_of(cms.replace("a", &pp, &stale).await, 409, "Conflict");
    assert_eq!(data(&cms.get("a").await.unwrap()), map(&[("k", "v2")]));

    // PUT without a resourceVersion: an unconditional update.
    let mut blind = replaced.clone();
    blind.metadata.resource_version = None;
    blind.data = Some(map(&[("k", "v3")]));
    let blind = cms.replace("a", &pp, &blind).await.unwrap();
    assert_eq!(data(&blind), map(&[("k", "v3")]));
    assert!(rv_number(&blind) > rv_number(&replaced));

    // JSON merge patch: maps merge, null deletes.
    let patch = json!({"metadata": {"labels": {"tier": "web"}}, "data": {"extra": "1"}});
    let merged = cms
        .patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(data(&merged), map(&[("k", "v3"), ("extra", "1")]));
    assert_eq!(merged.labels(), &map(&[("tier", "web")]));

    // JSON patch: operations in order.
    let ops = json!([
        {"op": "test", "path": "/data/k", "value": "v3"},
        {"op": "replace", "path": "/data/k", "value": "v4"},
        {"op": "remove", "path": "/data/extra"},
    ]);
    let patched = cms.patch("a", &PatchParams::default(), &json_patch(ops)).await.unwrap();
    assert_eq!(data(&patched), map(&[("k", "v4")]));

    // Strategic merge patch on a built-in: finalizers merge as a set, where a merge patch would
    // have replaced the list.
    let set = json!({"metadata": {"finalizers": ["example.com/a"]}});
    cms.patch("a", &PatchParams::default(), &Patch::Merge(&set))
        .await
        .unwrap();
    let add = json!({"metadata": {"finalizers": ["example.com/b"]}});
    let strategic = cms
        .patch("a", &PatchParams::default(), &Patch::Strategic(&add))
        .await
        .unwrap();
    assert_eq!(strategic.finalizers(), ["example.com/a", "example.com/b"]);

    // DELETE with finalizers left: the object stays, marked as deleting, and is returned.
    let left = cms.delete("a", &DeleteParams::default()).await.unwrap();
    let marked = left
        .left()
        .expect("an object with finalizers is returned, not a Status");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(marked.finalizers(), ["example.com/a", "example.com/b"]);
    // Removing the last finalizer completes the deletion.
    let clear = json!({"metadata": {"finalizers": null}});
    cms.patch("a", &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .unwrap();
    status_of(cms.get("a").await, 404, "NotFound");

    // DELETE of an object without finalizers: gone, answered with a Success Status.
    cms.create(&pp, &config_map("b", &[])).await.unwrap();
    let gone = cms.delete("b", &DeleteParams::default()).await.unwrap();
    let status = gone.right().expect("a deleted object is answered with a Status");
    assert!(status.is_success(), "{status:?}");
    assert_eq!(status.details.map(|d| d.name), Some("b".to_string()));
    status_of(cms.get("b").await, 404, "NotFound");
}

#[tokio::test]
async fn persistent_volumes_should_answer_every_verb_cluster_wide() {
    let server = TestServer::start().await;
    let pvs: Api<PersistentVolume> = Api::all(server.client.clone());
    let pp = PostParams::default();
    let pv = |name: &str| PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        ..PersistentVolume::default()
    };

    let created = pvs.create(&pp, &pv("vol")).await.unwrap();
    assert_eq!(created.metadata.namespace, None);
    assert_eq!(pvs.get("vol").await.unwrap().uid(), created.uid());
    assert_eq!(names(&pvs.list(&ListParams::default()).await.unwrap().items), ["vol"]);

    let mut next = created.clone();
    next.metadata.labels = Some(map(&[("disk", "ssd")]));
    let replaced = pvs.replace("vol", &pp, &next).await.unwrap();
    assert_eq!(replaced.labels(), &map(&[("disk", "ssd")]));
    status_of(pvs.replace("vol", &pp, &next).await, 409, "Conflict");

    let merge = json!({"metadata": {"annotations": {"note": "x"}}});
    let merged = pvs
        .patch("vol", &PatchParams::default(), &Patch::Merge(&merge))
        .await
        .unwrap();
    assert_eq!(merged.annotations(), &map(&[("note", "x")]));
    let ops = json!([{"op": "add", "path": "/metadata/labels/zone", "value": "a"}]);
    let patched = pvs
        .patch("vol", &PatchParams::default(), &json_patch(ops))
        .await
        .unwrap();
    assert_eq!(patched.labels(), &map(&[("disk", "ssd"), ("zone", "a")]));
    let strategic = json!({"metadata": {"labels": {"disk": null}}});
    let patched = pvs
        .patch("vol", &PatchParams::default(), &Patch::Strategic(&strategic))
        .await
        .unwrap();
    assert_eq!(patched.labels(), &map(&[("zone", "a")]));

    let gone = pvs.delete("vol", &DeleteParams::default()).await.unwrap();
    assert!(gone.right().is_some_and(|s| s.is_success()));
    status_of(pvs.get("vol").await, 404, "NotFound");
    // A cluster-scoped type has no namespaced path.
    let in_namespace: Api<DynamicObject> =
        Api::namespaced_with(server.client.clone(), NS, &ApiResource::erase::<PersistentVolume>(&()));
    status_of(in_namespace.list(&ListParams::default()).await, 404, "NotFound");
}

#[tokio::test]
async fn delete_with_a_propagation_policy_should_leave_its_gc_finalizer_since_no_gc_runs() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = server.api();
    create_all(&cms, ["fg", "orphan", "bg"].map(String::from)).await;

    let fg = cms.delete("fg", &DeleteParams::foreground()).await.unwrap();
    let fg = fg.left().expect("foreground deletion keeps the object");
    assert_eq!(fg.finalizers(), ["foregroundDeletion"]);
    assert!(fg.metadata.deletion_timestamp.is_some());

    let orphan = cms.delete("orphan", &DeleteParams::orphan()).await.unwrap();
    let orphan = orphan.left().expect("orphan deletion keeps the object");
    assert_eq!(orphan.finalizers(), ["orphan"]);
    assert!(orphan.metadata.deletion_timestamp.is_some());

    let bg = cms.delete("bg", &DeleteParams::background()).await.unwrap();
    assert!(bg.right().is_some_and(|s| s.is_success()));

    // What a GET sees afterwards is what the DELETE answered.
    assert_eq!(cms.get("fg").await.unwrap().finalizers(), ["foregroundDeletion"]);
    assert_eq!(cms.get("orphan").await.unwrap().finalizers(), ["orphan"]);
    status_of(cms.get("bg").await, 404, "NotFound");
}

#[tokio::test]
async fn delete_preconditions_should_conflict_on_a_mismatch_and_delete_on_a_match() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = server.api();
    let cm = cms.create(&PostParams::default(), &config_map("p", &[])).await.unwrap();
    let precondition = |uid: Option<String>, rv: Option<String>| {
        DeleteParams::default().preconditions(Preconditions {
            uid,
            resource_version: rv,
        })
    };

    let wrong_uid = precondition(Some("not-the-uid".into()), None);
    let status = status_of(cms.delete("p", &wrong_uid).await, 409, "Conflict");
    assert!(status.message.contains("Precondition failed"), "{status:?}");
    let wrong_rv = precondition(None, Some("1".into()));
    status_of(cms.delete("p", &wrong_rv).await, 409, "Conflict");
    assert_eq!(
        cms.get("p").await.unwrap().uid(),
        cm.uid(),
        "a failed precondition deletes nothing"
    );

    let right = precondition(cm.uid(), cm.resource_version());
    assert!(cms.delete("p", &right).await.unwrap().is_right());
    status_of(cms.get("p").await, 404, "NotFound");
}

#[tokio::test]
async fn delete_collection_should_delete_only_what_the_label_selector_matches() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = server.api();
    for (name, app) in [("web-1", "web"), ("web-2", "web"), ("db-1", "db")] {
        cms.create(&PostParams::default(), &labelled(name, &[("app", app)]))
            .await
            .unwrap();
    }
    let lp = ListParams::default().labels("app=web");
    let answer = cms.delete_collection(&DeleteParams::default(), &lp).await.unwrap();
    let deleted = answer
        .left()
        .expect("a collection delete answers with the deleted objects");
    assert_eq!(names(&deleted.items), ["web-1", "web-2"]);
    assert_eq!(names(&cms.list(&ListParams::default()).await.unwrap().items), ["db-1"]);
}

#[tokio::test]
async fn a_sharded_list_should_keep_the_namespaces_in_its_range_and_echo_its_selector() {
    use kube_gc::api::shard::{fnv1a64, ShardSelector};
    let server = TestServer::start().await;
    let client = &server.client;
    // Four on each side of 2^63 by FNV-1a.
    let namespaces: Vec<String> = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "kube-public",
        "default",
        "prod",
        "staging",
    ]
    .map(String::from)
    .to_vec();
    for ns in &namespaces {
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        cms.create(&PostParams::default(), &config_map("cm", &[]))
            .await
            .unwrap();
    }
    let selector = "shardRange(object.metadata.namespace, '0x0', '0x8000000000000000')";
    let path = format!(
        "/api/v1/configmaps?shardSelector={}",
        form_urlencoded::byte_serialize(selector.as_bytes()).collect::<String>()
    );
    let answer = raw(client, Method::GET, &path, "application/json", Vec::new()).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["metadata"]["shardInfo"]["selector"], json!(selector));
    let listed: BTreeSet<String> = answer.body["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| o["metadata"]["namespace"].as_str().expect("a namespace").to_string())
        .collect();
    let expected: BTreeSet<String> = namespaces
        .iter()
        .filter(|ns| fnv1a64(ns.as_bytes()) < 1 << 63)
        .cloned()
        .collect();
    assert!(
        !expected.is_empty() && expected.len() < namespaces.len(),
        "{expected:?}"
    );
    assert_eq!(listed, expected);
    assert!(ShardSelector::parse(selector).unwrap().matches("team-x", "") == (fnv1a64(b"team-x") < 1 << 63));

    let malformed = format!(
        "/api/v1/configmaps?shardSelector={}",
        form_urlencoded::byte_serialize(b"shardRange(object.metadata.name, '0x0', '0x1')").collect::<String>()
    );
    let refused = raw(client, Method::GET, &malformed, "application/json", Vec::new()).await;
    assert_status_body(&refused, 400, "BadRequest");
}

/// The namespaces of the sharded tests: four on each side of 2^63 by FNV-1a.
const SHARDED_NAMESPACES: [&str; 8] = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "kube-public",
    "default",
    "prod",
    "staging",
];

/// The lower half of the namespace hash space.
fn lower_half() -> kube_gc::api::shard::ShardSelector {
    kube_gc::api::shard::ShardSelector::parse("shardRange(object.metadata.namespace, '0x0', '0x8000000000000000')")
        .expect("a valid selector")
}

#[tokio::test]
async fn a_sharded_watch_should_deliver_only_the_namespaces_in_its_range() {
    use kube_gc::api::{ClusterApi, Gvr, KubeApi};
    let server = TestServer::start().await;
    let api = KubeApi::new(server.client.clone());
    let gvr = Gvr::new("", "v1", "configmaps");
    let selector = lower_half();
    let mut stream = api.watch(&gvr, Some(&selector), "0").await.expect("a sharded watch");
    for ns in SHARDED_NAMESPACES {
        let cms: Api<ConfigMap> = Api::namespaced(server.client.clone(), ns);
        cms.create(&PostParams::default(), &config_map("cm", &[]))
            .await
            .unwrap();
    }
    let expected: BTreeSet<&str> = SHARDED_NAMESPACES
        .into_iter()
        .filter(|ns| selector.matches(ns, ""))
        .collect();
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.len() < expected.len() && Instant::now() < deadline {
        let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(5), stream.next()).await else {
            break;
        };
        let event = event.expect("a watch event");
        seen.insert(event.object.metadata.namespace.clone());
    }
    let seen: BTreeSet<&str> = seen.iter().map(String::as_str).collect();
    assert_eq!(seen, expected, "only the lower half's namespaces are delivered");
    // A list through the same client sees the echo: the server applied the selector.
    let page = api
        .list_page(&gvr, Some(&selector), "", 0)
        .await
        .expect("a sharded list");
    assert_eq!(page.shard_selector, Some(selector.to_string()));
    assert_eq!(page.items.len(), expected.len());
}

#[tokio::test]
async fn with_the_gate_off_a_sharded_list_should_list_everything_and_echo_nothing() {
    use kube_gc::api::{ClusterApi, Gvr, KubeApi};
    let options = ServerOptions {
        sharded_list_and_watch: false,
        ..ServerOptions::default()
    };
    let server = TestServer::start_with(SimCluster::new(), options).await;
    for ns in SHARDED_NAMESPACES {
        let cms: Api<ConfigMap> = Api::namespaced(server.client.clone(), ns);
        cms.create(&PostParams::default(), &config_map("cm", &[]))
            .await
            .unwrap();
    }
    let api = KubeApi::new(server.client.clone());
    let page = api
        .list_page(&Gvr::new("", "v1", "configmaps"), Some(&lower_half()), "", 0)
        .await
        .expect("the list is served");
    assert_eq!(page.shard_selector, None, "an older server echoes nothing");
    assert_eq!(page.items.len(), SHARDED_NAMESPACES.len(), "and lists every namespace");
    // Even a malformed selector is ignored, as by a server that does not know the parameter.
    let path = "/api/v1/configmaps?shardSelector=nonsense";
    let answer = raw(&server.client, Method::GET, path, "application/json", Vec::new()).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
}

// ---------------------------------------------------------------------------------------------
// Metadata-only reads

#[tokio::test]
async fn metadata_lists_should_be_partial_object_metadata_in_all_namespaces_and_in_one() {
    let server = TestServer::start().await;
    let pp = PostParams::default();
    let in_a: Api<ConfigMap> = Api::namespaced(server.client.clone(), "a");
    let in_b: Api<ConfigMap> = Api::namespaced(server.client.clone(), "b");
    let owner = in_a
        .create(&pp, &config_map("owner", &[("big", "data")]))
        .await
        .unwrap();
    let mut child = config_map("child", &[("big", "data")]);
    child.metadata.owner_references = Some(vec![owner_ref("owner", &owner.uid().unwrap())]);
    let child = in_b.create(&pp, &child).await.unwrap();

    let all: Api<ConfigMap> = Api::all(server.client.clone());
    let list = all.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.types.kind, "PartialObjectMetadataList");
    assert_eq!(list.types.api_version, "meta.k8s.io/v1");
    let found: BTreeMap<(String, String), _> = list
        .items
        .iter()
        .map(|m| ((m.namespace().unwrap(), m.name_any()), m))
        .collect();
    assert_eq!(
        found.keys().cloned().collect::<Vec<_>>(),
        [
            ("a".to_string(), "owner".to_string()),
            ("b".to_string(), "child".to_string())
        ]
    );
    for item in &list.items {
        let types = item.types.as_ref().expect("each item carries its type");
        assert_eq!(
            (types.api_version.as_str(), types.kind.as_str()),
            ("meta.k8s.io/v1", "PartialObjectMetadata")
        );
    }
    let listed_child = found[&("b".to_string(), "child".to_string())];
    assert_eq!(listed_child.uid(), child.uid());
    assert_eq!(listed_child.owner_references(), child.owner_references());

    let only_b = in_b.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(names(&only_b.items), ["child"]);

    let got = in_b.get_metadata("child").await.unwrap();
    assert_eq!(got.types.as_ref().unwrap().kind, "PartialObjectMetadata");
    assert_eq!(
        (got.uid(), got.owner_references()),
        (child.uid(), child.owner_references())
    );

    // The representation itself leaves the data out, not just kube-rs's decoding of it.
    let request = Request::get("/api/v1/namespaces/b/configmaps/child")
        .header(
            header::ACCEPT,
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .body(Vec::new())
        .unwrap();
    let body: Value = server.client.request(request).await.unwrap();
    assert_eq!(body["kind"], "PartialObjectMetadata");
    assert_eq!(body["metadata"]["name"], "child");
    assert!(body.get("data").is_none(), "metadata only: {body}");
}

#[tokio::test]
async fn metadata_watch_should_stream_partial_object_metadata() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = server.api();
    let rv = cms
        .list_metadata(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut events = cms.watch_metadata(&WatchParams::default(), &rv).await.unwrap().boxed();

    let owner = cms
        .create(&PostParams::default(), &config_map("owner", &[]))
        .await
        .unwrap();
    let mut child = config_map("child", &[("k", "v")]);
    child.metadata.owner_references = Some(vec![owner_ref("owner", &owner.uid().unwrap())]);
    let child = cms.create(&PostParams::default(), &child).await.unwrap();

    for expected in [&owner, &child] {
        match next(&mut events, "an ADDED metadata event").await {
            WatchEvent::Added(meta) => {
                let types = meta.types.as_ref().expect("the event's object carries its type");
                assert_eq!(types.kind, "PartialObjectMetadata");
                assert_eq!(
                    (meta.name_any(), meta.namespace(), meta.uid()),
                    (expected.name_any(), Some(NS.to_string()), expected.uid())
                );
                assert_eq!(meta.owner_references(), expected.owner_references());
            }
            other => panic!("expected ADDED, got {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Pagination

#[tokio::test]
async fn paginated_list_should_serve_one_consistent_snapshot_whatever_is_written_between_pages() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = server.api();
    let first_25: BTreeSet<String> = (0..25).map(|i| format!("cm-{i:02}")).collect();
    create_all(&cms, first_25.iter().cloned()).await;
    let page = |token: Option<&str>| {
        let lp = ListParams::default().limit(10);
        match token {
            Some(token) => lp.continue_token(token),
            None => lp,
        }
    };

    let first = cms.list(&page(None)).await.unwrap();
    assert_eq!(first.items.len(), 10);
    assert_eq!(first.metadata.remaining_item_count, Some(15));
    let snapshot_rv = first.metadata.resource_version.clone().unwrap();
    // Between pages, a new object that sorts into the next page and the deletion of one the last
    // page holds: neither shows in this list.
    create_all(&cms, ["cm-15x".to_string()]).await;
    cms.delete("cm-24", &DeleteParams::default()).await.unwrap();

    let second = cms.list(&page(first.metadata.continue_.as_deref())).await.unwrap();
    assert_eq!(second.items.len(), 10);
    assert_eq!(second.metadata.remaining_item_count, Some(5));
    create_all(&cms, ["late".to_string()]).await;

    let third = cms.list(&page(second.metadata.continue_.as_deref())).await.unwrap();
    assert_eq!(third.items.len(), 5);
    assert!(
        third.metadata.continue_.as_deref().is_none_or(str::is_empty),
        "the last page has no continue token"
    );

    let pages = [&first, &second, &third];
    for p in pages {
        assert_eq!(p.metadata.resource_version.as_deref(), Some(snapshot_rv.as_str()));
    }
    let seen: Vec<String> = pages.iter().flat_map(|p| names(&p.items)).collect();
    assert_eq!(seen.len(), 25, "each object once: {seen:?}");
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), first_25);

    // A new list is a new snapshot.
    let fresh = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(fresh.items.len(), 25 + 2 - 1);
    assert_ne!(fresh.metadata.resource_version, Some(snapshot_rv));
}

#[tokio::test]
async fn continue_tokens_should_be_410_once_expired_and_400_when_malformed() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = server.api();
    create_all(&cms, (0..3).map(|i| format!("cm-{i}"))).await;
    let page = |token: &str| ListParams::default().limit(1).continue_token(token);

    // Well formed (epoch, snapshot id, offset), naming a snapshot this server never took.
    let status = status_of(cms.list(&page("00000000-999999-1")).await, 410, "Expired");
    assert!(status.message.contains("continue"), "{status:?}");
    status_of(cms.list(&page("not-a-token")).await, 400, "BadRequest");

    // A real token expires once enough newer paginated lists have pushed its snapshot out.
    let first = cms.list(&ListParams::default().limit(1)).await.unwrap();
    let token = first.metadata.continue_.expect("three objects in pages of one");
    assert_eq!(names(&cms.list(&page(&token)).await.unwrap().items), ["cm-1"]);
    for _ in 0..100 {
        cms.list(&ListParams::default().limit(1)).await.unwrap();
    }
    status_of(cms.list(&page(&token)).await, 410, "Expired");
}

// ---------------------------------------------------------------------------------------------
// Watches

#[tokio::test]
async fn watch_should_report_added_modified_deleted_in_order_from_a_lists_version() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = server.api();
    create_all(&cms, ["before".to_string()]).await;
    let rv = list_version(&cms).await;
    let mut events = cms.watch(&WatchParams::default(), &rv).await.unwrap().boxed();

    let created = cms.create(&PostParams::default(), &config_map("w", &[])).await.unwrap();
    let patch = json!({"data": {"k": "v"}});
    let modified = cms
        .patch("w", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    cms.delete("w", &DeleteParams::default()).await.unwrap();

    let WatchEvent::Added(added) = next(&mut events, "ADDED w").await else {
        panic!("the first event is the create")
    };
    assert_eq!(
        (added.name_any(), added.resource_version()),
        ("w".into(), created.resource_version())
    );
    let WatchEvent::Modified(changed) = next(&mut events, "MODIFIED w").await else {
        panic!("the second event is the patch")
    };
    assert_eq!(changed.resource_version(), modified.resource_version());
    assert_eq!(data(&changed), map(&[("k", "v")]));
    let WatchEvent::Deleted(deleted) = next(&mut events, "DELETED w").await else {
        panic!("the third event is the delete")
    };
    assert_eq!(deleted.name_any(), "w");
    assert!(rv_number(&deleted) > rv_number(&changed));

    // From "0", a watch first reports what exists, as ADDED.
    let mut from_zero = cms.watch(&WatchParams::default(), "0").await.unwrap().boxed();
    match next(&mut from_zero, "ADDED for the existing object").await {
        WatchEvent::Added(cm) => assert_eq!(cm.name_any(), "before"),
        other => panic!("expected ADDED before, got {other:?}"),
    }
}

#[tokio::test]
async fn watch_from_a_middle_version_should_replay_exactly_the_later_events() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = server.api();
    cms.create(&PostParams::default(), &config_map("a", &[])).await.unwrap();
    let patch = json!({"data": {"k": "v"}});
    let middle = cms
        .patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &config_map("b", &[])).await.unwrap();
    cms.delete("a", &DeleteParams::default()).await.unwrap();

    let from = middle.resource_version().unwrap();
    let mut events = cms.watch(&WatchParams::default(), &from).await.unwrap().boxed();
    // A write after the watch opened marks the end of the replay: if anything else were replayed,
    // it would come before this.
    cms.create(&PostParams::default(), &config_map("sentinel", &[]))
        .await
        .unwrap();
    let seen = changes_until(&mut events, "the replay and the sentinel", |seen| {
        seen.last().is_some_and(|(_, name)| name == "sentinel")
    })
    .await;
    assert_eq!(
        seen,
        changes(&[("ADDED", "b"), ("DELETED", "a"), ("ADDED", "sentinel")])
    );
}

#[tokio::test]
async fn watch_from_before_the_kept_history_should_get_a_410_error_event() {
    let server = TestServer::start_with(SimCluster::with_history(3), ServerOptions::default()).await;
    let cms: Api<ConfigMap> = server.api();
    let first = cms.create(&PostParams::default(), &config_map("c", &[])).await.unwrap();
    for i in 0..10 {
        let patch = json!({"data": {"i": i.to_string()}});
        cms.patch("c", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    let mut events = cms
        .watch(&WatchParams::default(), &first.resource_version().unwrap())
        .await
        .expect("a too-old watch still opens: its answer is an event")
        .boxed();
    match next(&mut events, "the ERROR event").await {
        // kube-rs's watcher keys on the code to relist; real servers say Expired, this one Gone.
        WatchEvent::Error(status) => {
            assert_eq!(status.code, 410, "{status:?}");
            assert_eq!(status.reason, "Gone", "{status:?}");
            assert!(status.message.contains("too old resource version"), "{status:?}");
        }
        other => panic!("expected an ERROR event, got {other:?}"),
    }
    assert!(
        within("the end of the watch", events.next()).await.is_none(),
        "the ERROR is the watch's only event"
    );
}

#[tokio::test]
async fn watch_allowing_bookmarks_should_get_one_at_the_newest_version() {
    let options = ServerOptions {
        bookmark_interval: Duration::from_millis(100),
        ..ServerOptions::default()
    };
    let server = TestServer::start_with(SimCluster::new(), options).await;
    let cms: Api<ConfigMap> = server.api();
    let rv = list_version(&cms).await;
    let wp = WatchParams::default();
    assert!(wp.bookmarks, "kube-rs asks for bookmarks by default");
    let mut events = cms.watch(&wp, &rv).await.unwrap().boxed();

    let created = cms.create(&PostParams::default(), &config_map("b", &[])).await.unwrap();
    let mut added = false;
    loop {
        match next(&mut events, "ADDED b, then a BOOKMARK").await {
            WatchEvent::Added(cm) => {
                assert_eq!(cm.name_any(), "b");
                added = true;
            }
            // A bookmark never runs ahead of the events sent: before the ADDED it is the list's
            // version, after it the create's.
            WatchEvent::Bookmark(bookmark) if !added => assert_eq!(bookmark.metadata.resource_version, rv),
            WatchEvent::Bookmark(bookmark) => {
                assert_eq!(bookmark.types.kind, "ConfigMap");
                assert_eq!(Some(bookmark.metadata.resource_version), created.resource_version());
                break;
            }
            other => panic!("expected ADDED or BOOKMARK, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn runtime_watcher_should_see_an_object_created_after_it_started() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = server.api();
    create_all(&cms, ["early".to_string()]).await;
    let mut events = watcher(cms.clone(), watcher::Config::default()).boxed();
    assert_eq!(initial_names(&mut events).await, ["early"]);
    expect_apply_of_late(&cms, &mut events).await;
}

/// The names a watcher's initial list reports, sorted, once it says it is done.
async fn initial_names<S>(events: &mut S) -> Vec<String>
where
    S: Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>> + Unpin,
{
    let mut initial = Vec::new();
    loop {
        match next(events, "the watcher's initial list").await {
            watcher::Event::Init => {}
            watcher::Event::InitApply(cm) => initial.push(cm.name_any()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected event before InitDone: {other:?}"),
        }
    }
    initial.sort();
    initial
}

/// Creates the ConfigMap `late` and expects the watcher to apply it next.
async fn expect_apply_of_late<S>(cms: &Api<ConfigMap>, events: &mut S)
where
    S: Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>> + Unpin,
{
    cms.create(&PostParams::default(), &config_map("late", &[]))
        .await
        .unwrap();
    match next(events, "the watcher's Apply of late").await {
        watcher::Event::Apply(cm) => assert_eq!(cm.name_any(), "late"),
        other => panic!("expected Apply(late), got {other:?}"),
    }
}

#[tokio::test]
async fn watch_field_selector_should_report_only_the_named_object() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = server.api();
    let rv = list_version(&cms).await;
    let wp = WatchParams::default().fields("metadata.name=b");
    let mut events = cms.watch(&wp, &rv).await.unwrap().boxed();

    create_all(&cms, ["a", "b", "c"].map(String::from)).await;
    let patch = json!({"data": {"k": "v"}});
    for name in ["a", "b", "c"] {
        cms.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    cms.delete("b", &DeleteParams::default()).await.unwrap();

    let seen = changes_until(&mut events, "the events of b", |seen| seen.len() == 3).await;
    assert_eq!(seen, changes(&[("ADDED", "b"), ("MODIFIED", "b"), ("DELETED", "b")]));
}

// ---------------------------------------------------------------------------------------------
// Discovery

#[tokio::test]
async fn discovery_should_describe_the_version_core_pods_and_apps_deployments() {
    let server = TestServer::start().await;
    let client = &server.client;

    let version = client.apiserver_version().await.unwrap();
    assert_eq!((version.major.as_str(), version.minor.as_str()), ("1", "33"));
    assert!(version.git_version.starts_with("v1.33."), "{version:?}");

    let discovery = within("discovery", Discovery::new(client.clone()).run()).await.unwrap();
    let core = discovery.get("").expect("the core group is discovered");
    let (pods, caps) = core
        .recommended_resources()
        .into_iter()
        .find(|(r, _)| r.plural == "pods")
        .expect("pods are discovered");
    assert_eq!((pods.api_version.as_str(), pods.kind.as_str()), ("v1", "Pod"));
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    for verb in [
        verbs::GET,
        verbs::LIST,
        verbs::WATCH,
        verbs::CREATE,
        verbs::UPDATE,
        verbs::PATCH,
        verbs::DELETE,
        verbs::DELETE_COLLECTION,
    ] {
        assert!(caps.supports_operation(verb), "pods support {verb}: {caps:?}");
    }
    let gvk = GroupVersionKind::gvk("apps", "v1", "Deployment");
    let (deployments, caps) = discovery.resolve_gvk(&gvk).expect("apps/v1 Deployment is discovered");
    assert_eq!(deployments.plural, "deployments");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);

    let apps_v1 = client.list_api_group_resources("apps/v1").await.unwrap();
    let deployments = apps_v1
        .resources
        .iter()
        .find(|r| r.name == "deployments")
        .expect("deployments are in apps/v1");
    assert_eq!(deployments.short_names.as_deref(), Some(&["deploy".to_string()][..]));

    let request = Request::get("/apis/apps").body(Vec::new()).unwrap();
    let apps: APIGroup = client.request(request).await.unwrap();
    assert_eq!(apps.name, "apps");
    assert_eq!(
        apps.preferred_version.map(|v| v.group_version),
        Some("apps/v1".to_string())
    );
    let groups = client.list_api_groups().await.unwrap();
    assert!(groups.groups.iter().any(|g| g.name == "apps"));
}

// ---------------------------------------------------------------------------------------------
// CustomResourceDefinitions

/// The widgets CRD, with the short name `wd`.
fn widget_crd() -> CustomResourceDefinition {
    let mut manifest = support::crd_manifest("widgets", "Widget");
    manifest["spec"]["names"]["shortNames"] = json!(["wd"]);
    serde_json::from_value(manifest).expect("a valid CRD")
}

#[tokio::test]
async fn crd_should_serve_its_type_in_discovery_until_deleted_and_take_its_objects_along() {
    let server = TestServer::start().await;
    let client = &server.client;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd()).await.unwrap();
    let established = await_condition(crds.clone(), "widgets.example.com", conditions::is_crd_established());
    within("the CRD's Established condition", established).await.unwrap();

    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let (widgets, caps) = discovery.resolve_gvk(&gvk).expect("the new type is discovered");
    assert_eq!(widgets.plural, "widgets");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);

    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &widgets);
    let widget = DynamicObject::new("w1", &widgets).data(json!({"spec": {"size": 3}}));
    let created = api.create(&PostParams::default(), &widget).await.unwrap();
    assert_eq!(created.types.as_ref().unwrap().kind, "Widget");
    assert_eq!(names(&api.list(&ListParams::default()).await.unwrap().items), ["w1"]);
    let got = api.get("w1").await.unwrap();
    assert_eq!(got.data["spec"]["size"], 3);

    let patch = json!({"spec": {"size": 4}});
    let status = status_of(
        api.patch("w1", &PatchParams::default(), &Patch::Strategic(&patch))
            .await,
        415,
        "UnsupportedMediaType",
    );
    assert!(status.message.contains("merge-patch"), "{status:?}");
    let merged = api
        .patch("w1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(merged.data["spec"]["size"], 4);

    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    assert!(discovery.resolve_gvk(&gvk).is_none(), "the type is gone from discovery");
    assert!(!discovery.has_group("example.com"));
    status_of(api.get("w1").await, 404, "NotFound");
    status_of(api.list(&ListParams::default()).await, 404, "NotFound");

    // Served again, the type starts empty: its objects went with the CRD.
    crds.create(&PostParams::default(), &widget_crd()).await.unwrap();
    assert!(api.list(&ListParams::default()).await.unwrap().items.is_empty());
    status_of(api.get("w1").await, 404, "NotFound");
}

// ---------------------------------------------------------------------------------------------
// Namespaces

#[tokio::test]
async fn deleting_a_namespace_should_delete_its_objects_and_no_others() {
    let server = TestServer::start().await;
    let namespaces: Api<Namespace> = Api::all(server.client.clone());
    let doomed_ns = Namespace {
        metadata: ObjectMeta {
            name: Some("doomed".into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces.create(&PostParams::default(), &doomed_ns).await.unwrap();
    let doomed: Api<ConfigMap> = Api::namespaced(server.client.clone(), "doomed");
    let kept: Api<ConfigMap> = Api::namespaced(server.client.clone(), "kept");
    create_all(&doomed, ["a", "b"].map(String::from)).await;
    create_all(&kept, ["a".to_string()]).await;

    namespaces.delete("doomed", &DeleteParams::default()).await.unwrap();
    status_of(namespaces.get("doomed").await, 404, "NotFound");
    assert!(doomed.list(&ListParams::default()).await.unwrap().items.is_empty());
    status_of(doomed.get("a").await, 404, "NotFound");
    assert_eq!(names(&kept.list(&ListParams::default()).await.unwrap().items), ["a"]);
}

// ---------------------------------------------------------------------------------------------
// Errors and injected faults

#[tokio::test]
async fn errors_should_carry_the_api_servers_code_and_reason() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = server.api();
    let pp = PostParams::default();

    let status = status_of(cms.get("missing").await, 404, "NotFound");
    assert!(status.message.contains("missing"), "{status:?}");

    cms.create(&pp, &config_map("taken", &[])).await.unwrap();
    status_of(cms.create(&pp, &config_map("taken", &[])).await, 409, "AlreadyExists");

    let old = cms.get("taken").await.unwrap();
    let mut changed = old.clone();
    changed.data = Some(map(&[("k", "v")]));
    cms.replace("taken", &pp, &changed).await.unwrap();
    changed.data = Some(map(&[("k", "lost")]));
    let status = status_of(cms.replace("taken", &pp, &changed).await, 409, "Conflict");
    assert!(status.message.contains("has been modified"), "{status:?}");

    let mut orphan = config_map("bad-owner", &[]);
    orphan.metadata.owner_references = Some(vec![owner_ref("owner", "")]);
    let status = status_of(cms.create(&pp, &orphan).await, 422, "Invalid");
    assert!(status.message.contains("uid"), "{status:?}");

    // A CRD whose name is not plural.group describes no type.
    let mut misnamed = widget_crd();
    misnamed.metadata.name = Some("gadgets.example.com".into());
    let crds: Api<CustomResourceDefinition> = Api::all(server.client.clone());
    status_of(crds.create(&pp, &misnamed).await, 422, "Invalid");

    // A namespaced object posted to the all-namespaces path: that path only lists and watches.
    let everywhere: Api<ConfigMap> = Api::all(server.client.clone());
    status_of(
        everywhere.create(&pp, &config_map("nowhere", &[])).await,
        405,
        "MethodNotAllowed",
    );

    // A resource the server does not serve.
    let widgets = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    let api: Api<DynamicObject> = Api::namespaced_with(server.client.clone(), NS, &widgets);
    status_of(api.list(&ListParams::default()).await, 404, "NotFound");

    assert_eq!(names(&cms.list(&ListParams::default()).await.unwrap().items), ["taken"]);
}

#[tokio::test]
async fn qps_ceiling_should_answer_429_with_retry_after() {
    let server = TestServer::with_faults(HttpFaults {
        qps: Some(1.0),
        ..HttpFaults::default()
    })
    .await;
    let uri = "/api/v1/namespaces/default/configmaps";
    let first = raw(&server.client, Method::GET, uri, "application/json", Vec::new()).await;
    assert_eq!(
        first.status,
        StatusCode::OK,
        "the burst admits one request: {}",
        first.body
    );
    let second = raw(&server.client, Method::GET, uri, "application/json", Vec::new()).await;
    assert_status_body(&second, 429, "TooManyRequests");
    assert_eq!(
        second.headers.get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()),
        Some("1")
    );
    assert_eq!(second.body["details"]["retryAfterSeconds"], 1);

    // kube-rs surfaces it as an Api error when not retrying.
    let cms: Api<ConfigMap> = server.api();
    status_of(cms.list(&ListParams::default()).await, 429, "TooManyRequests");
}

#[tokio::test]
async fn kube_client_should_get_through_a_throttled_server_by_waiting_its_retry_after() {
    let server = TestServer::with_faults(HttpFaults {
        qps: Some(1.0),
        ..HttpFaults::default()
    })
    .await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client_for(server.addr, true).await);
    cms.list(&ListParams::default()).await.unwrap();
    let start = Instant::now();
    let list = within("a retried list", cms.list(&ListParams::default())).await;
    assert!(list.is_ok(), "the retry after Retry-After succeeds: {list:?}");
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "the client waited the Retry-After second: {:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn error_rate_should_fail_its_verb_only_with_the_chosen_error() {
    let server = TestServer::with_faults(HttpFaults {
        error_rates: vec!["get=1:429".parse().unwrap(), "create=1:500".parse().unwrap()],
        ..HttpFaults::default()
    })
    .await;
    server
        .cluster
        .create(
            &kube_gc::api::Gvr::new("", "v1", "configmaps"),
            serde_json::from_value(json!({"metadata": {"name": "seeded", "namespace": NS}})).unwrap(),
        )
        .unwrap();

    let got = raw(
        &server.client,
        Method::GET,
        "/api/v1/namespaces/default/configmaps/seeded",
        "application/json",
        Vec::new(),
    )
    .await;
    assert_status_body(&got, 429, "TooManyRequests");
    assert_eq!(
        got.headers.get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()),
        Some("1")
    );

    let cms: Api<ConfigMap> = server.api();
    let status = status_of(
        cms.create(&PostParams::default(), &config_map("new", &[])).await,
        500,
        "InternalError",
    );
    assert!(status.message.contains("injected"), "{status:?}");
    // Faults strike before the store: the failed create wrote nothing, and lists still work.
    assert_eq!(
        names(&cms.list(&ListParams::default()).await.unwrap().items),
        ["seeded"]
    );
}

#[tokio::test]
async fn injected_latency_should_delay_each_request_by_at_least_its_amount() {
    let latency = Duration::from_millis(300);
    let server = TestServer::with_faults(HttpFaults {
        latency: Latency::Fixed(latency),
        ..HttpFaults::default()
    })
    .await;
    let cms: Api<ConfigMap> = server.api();
    for _ in 0..2 {
        let start = Instant::now();
        cms.list(&ListParams::default()).await.unwrap();
        assert!(start.elapsed() >= latency, "took only {:?}", start.elapsed());
    }
    let start = Instant::now();
    server.client.apiserver_version().await.unwrap();
    assert!(start.elapsed() >= latency, "discovery waits too: {:?}", start.elapsed());
}

// ---------------------------------------------------------------------------------------------
// Bad requests

#[tokio::test]
async fn bad_requests_should_get_a_status_and_leave_the_server_serving() {
    let options = ServerOptions {
        max_body_bytes: 1024,
        ..ServerOptions::default()
    };
    let server = TestServer::start_with(SimCluster::new(), options).await;
    let client = &server.client;
    let cms = "/api/v1/namespaces/default/configmaps";
    let json = "application/json";
    let cm = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}).to_string();

    let unknown = raw(
        client,
        Method::GET,
        "/api/v1/namespaces/default/widgets",
        json,
        Vec::new(),
    )
    .await;
    assert_status_body(&unknown, 404, "NotFound");
    let unknown_group = raw(client, Method::GET, "/apis/example.com/v1/widgets", json, Vec::new()).await;
    assert_status_body(&unknown_group, 404, "NotFound");
    let malformed = raw(client, Method::POST, cms, json, b"{\"metadata\": {".to_vec()).await;
    assert_status_body(&malformed, 400, "BadRequest");
    let not_an_object = raw(client, Method::POST, cms, json, b"[1, 2]".to_vec()).await;
    assert_status_body(&not_an_object, 400, "BadRequest");
    let plain = raw(client, Method::POST, cms, "text/plain", cm("plain").into_bytes()).await;
    assert_status_body(&plain, 415, "UnsupportedMediaType");
    let bad_patch = raw(client, Method::PATCH, &format!("{cms}/x"), json, b"{}".to_vec()).await;
    assert_status_body(&bad_patch, 415, "UnsupportedMediaType");
    let mut big = json!({"metadata": {"name": "big"}, "data": {"k": "x".repeat(4096)}}).to_string();
    let oversized = raw(client, Method::POST, cms, json, std::mem::take(&mut big).into_bytes()).await;
    assert_status_body(&oversized, 413, "RequestEntityTooLarge");
    let nowhere = raw(client, Method::GET, "/no/such/path", json, Vec::new()).await;
    assert_status_body(&nowhere, 404, "NotFound");
    let put_collection = raw(client, Method::PUT, cms, json, cm("x").into_bytes()).await;
    assert_status_body(&put_collection, 405, "MethodNotAllowed");
    let post_version = raw(client, Method::POST, "/version", json, Vec::new()).await;
    assert_status_body(&post_version, 405, "MethodNotAllowed");
    let bad_limit = raw(client, Method::GET, &format!("{cms}?limit=ten"), json, Vec::new()).await;
    assert_status_body(&bad_limit, 400, "BadRequest");
    let bad_selector = raw(
        client,
        Method::GET,
        &format!("{cms}?fieldSelector=spec.x%3Dy"),
        json,
        Vec::new(),
    )
    .await;
    assert_status_body(&bad_selector, 400, "BadRequest");
    let apply_yaml = "application/apply-patch+yaml";
    let applied_cm = cm("applied");
    // Bad applies: (query, content type, body, code, reason).
    let bad_applies: [(&str, &str, &[u8], u16, &str); 4] = [
        ("fieldManager=m", apply_yaml, b"data: [", 400, "BadRequest"),
        ("", apply_yaml, applied_cm.as_bytes(), 422, "Invalid"),
        ("force=true", "application/merge-patch+json", b"{}", 422, "Invalid"),
        (
            "fieldManager=m&force=maybe",
            apply_yaml,
            applied_cm.as_bytes(),
            400,
            "BadRequest",
        ),
    ];
    for (query, content_type, body, code, reason) in bad_applies {
        let path = format!("{cms}/applied?{query}");
        let answer = raw(client, Method::PATCH, &path, content_type, body.to_vec()).await;
        assert_status_body(&answer, code, reason);
    }

    // None of it was written, and the server still serves.
    let api: Api<ConfigMap> = server.api();
    assert!(api.list(&ListParams::default()).await.unwrap().items.is_empty());
    let created = raw(client, Method::POST, cms, json, cm("fine").into_bytes()).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(api.get("fine").await.unwrap().name_any(), "fine");
}

#[tokio::test]
async fn server_side_apply_should_record_managers_that_gets_lists_and_watches_show() {
    let server = TestServer::start().await;
    let api: Api<ConfigMap> = server.api();
    let mut events = api.watch(&WatchParams::default(), "0").await.unwrap().boxed();
    let config = ConfigMap {
        metadata: ObjectMeta {
            name: Some("applied".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("a".to_string(), "1".to_string())])),
        ..ConfigMap::default()
    };
    let applied = api
        .patch("applied", &PatchParams::apply("applier"), &Patch::Apply(&config))
        .await
        .unwrap();
    let managers = |meta: &ObjectMeta| -> Vec<(String, String)> {
        let entries = meta.managed_fields.iter().flatten();
        entries
            .map(|e| {
                (
                    e.manager.clone().unwrap_or_default(),
                    e.operation.clone().unwrap_or_default(),
                )
            })
            .collect()
    };
    let applier = [("applier".to_string(), "Apply".to_string())];
    assert_eq!(managers(&applied.metadata), applier);
    assert_eq!(
        applied.metadata.managed_fields.as_ref().unwrap()[0]
            .fields_v1
            .as_ref()
            .unwrap()
            .0,
        json!({"f:data": {"f:a": {}}})
    );
    assert_eq!(managers(&api.get("applied").await.unwrap().metadata), applier);
    let listed = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(managers(&listed.items[0].metadata), applier);
    let metadata = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(managers(&metadata.items[0].metadata), applier);
    match within("the ADDED event", events.next()).await {
        Some(Ok(WatchEvent::Added(added))) => assert_eq!(managers(&added.metadata), applier),
        other => panic!("expected ADDED, got {other:?}"),
    }

    let editor = PatchParams {
        field_manager: Some("editor".into()),
        ..PatchParams::default()
    };
    let edited = api
        .patch("applied", &editor, &Patch::Merge(json!({"data": {"b": "2"}})))
        .await
        .unwrap();
    assert_eq!(
        managers(&edited.metadata),
        [applier[0].clone(), ("editor".to_string(), "Update".to_string())]
    );
    let mut changed = config.clone();
    changed.data = Some(BTreeMap::from([("b".to_string(), "3".to_string())]));
    let conflict = api
        .patch("applied", &PatchParams::apply("applier"), &Patch::Apply(&changed))
        .await;
    let kube::Error::Api(status) = conflict.expect_err("b is the editor's") else {
        panic!("not a Status")
    };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        status.message,
        "Apply failed with 1 conflict: conflict with \"editor\" using v1: .data.b"
    );
}

/// Writes `request` on a fresh connection and reads until the server closes it: after its answer to
/// a request saying `Connection: close`, or at once when `half_close` ends the request early.
///
/// Plain blocking sockets on a blocking thread, with socket timeouts, so what goes on the wire is
/// exactly what is written here. A half-closed connection may go unanswered: hyper does not
/// support HTTP/1 half-closure by default and drops a connection whose read side ended.
async fn exchange(addr: SocketAddr, request: &[u8], half_close: bool) -> String {
    use std::io::{Read, Write};
    let request = request.to_vec();
    let io = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(PATIENCE)).expect("a read timeout");
        stream.set_write_timeout(Some(PATIENCE)).expect("a write timeout");
        stream.write_all(&request).expect("write the request");
        if half_close {
            stream.shutdown(std::net::Shutdown::Write).expect("half-close");
        }
        let mut response = Vec::new();
        // A reset after the response (the server closing on a bad request) still leaves what was
        // read so far; a timeout leaves it too, and the caller's assertions say what was missing.
        let _ = stream.read_to_end(&mut response);
        String::from_utf8_lossy(&response).into_owned()
    });
    within("a hand-written HTTP exchange", io)
        .await
        .expect("the exchange thread")
}

#[tokio::test]
async fn hand_written_http_should_be_answered_without_taking_the_server_down() {
    let server = TestServer::start().await;

    let garbage = exchange(server.addr, b"THIS IS NOT HTTP\r\n\r\n", false).await;
    assert!(
        garbage.is_empty() || garbage.starts_with("HTTP/1.1 400"),
        "garbage is refused: {garbage:?}"
    );

    let body = "{\"metadata\": ";
    let malformed = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = exchange(server.addr, malformed.as_bytes(), false).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.contains("\"kind\":\"Status\"") && answer.contains("\"reason\":\"BadRequest\""),
        "{answer}"
    );

    // A body cut short by the client is its failure, not a size: 400 if answered at all, and the
    // server stays.
    let truncated = "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: test\r\n\
                     Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"meta";
    let answer = exchange(server.addr, truncated.as_bytes(), true).await;
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 400") && answer.contains("\"reason\":\"BadRequest\""),
        "{answer}"
    );

    let get = "GET /version HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
    let answer = exchange(server.addr, get.as_bytes(), false).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"gitVersion\""), "{answer}");
    let cms: Api<ConfigMap> = server.api();
    assert!(cms.list(&ListParams::default()).await.unwrap().items.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Faults on watches

#[tokio::test]
async fn watch_drop_events_should_end_a_watch_after_that_many_events() {
    let server = TestServer::with_faults(HttpFaults {
        watch_drop_events: Some(2),
        ..HttpFaults::default()
    })
    .await;
    let cms: Api<ConfigMap> = server.api();
    let rv = list_version(&cms).await;
    let mut events = cms.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    create_all(&cms, ["a", "b", "c"].map(String::from)).await;

    let mut seen = Vec::new();
    for _ in 0..2 {
        match next(&mut events, "one of two events").await {
            WatchEvent::Added(cm) => seen.push(cm),
            other => panic!("expected ADDED, got {other:?}"),
        }
    }
    assert_eq!(names(&seen), ["a", "b"]);
    assert!(
        within("the dropped watch to end", events.next()).await.is_none(),
        "the watch ends after two events"
    );
    // A new watch from the last version seen picks up the rest, as a client resumes.
    let last = seen[1].resource_version().unwrap();
    let mut resumed = cms.watch(&WatchParams::default(), &last).await.unwrap().boxed();
    match next(&mut resumed, "the resumed watch's event").await {
        WatchEvent::Added(cm) => assert_eq!(cm.name_any(), "c"),
        other => panic!("expected ADDED c, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Stopping and the audit log

#[tokio::test]
async fn serve_should_end_open_watches_and_return_once_shut_down() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("the listener has an address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopped.await;
    };
    let task = tokio::spawn(http::serve(
        listener,
        Arc::new(SimCluster::new()),
        ServerOptions::default(),
        shutdown,
    ));
    let cms: Api<ConfigMap> = Api::default_namespaced(client_for(addr, false).await);
    let mut events = cms.watch(&WatchParams::default(), "0").await.unwrap().boxed();
    cms.create(&PostParams::default(), &config_map("a", &[])).await.unwrap();
    next(&mut events, "the watch's first event, which shows it is open").await;

    stop.send(()).expect("the server is still waiting for its shutdown");
    within("serve to return with a watch open", task)
        .await
        .expect("the serving task ran to its end")
        .expect("serve stopped without an error");
    // The stream ends rather than waiting for events; without the server's help it would hang
    // until the client's read timeout, past `within`'s patience.
    if let Some(Ok(event)) = within("the open watch to end", events.next()).await {
        panic!("the watch went on after the server stopped: {event:?}");
    }
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the stopped server still accepts connections"
    );
}

/// A stopping server gives the requests in flight a drain, then saves its state; a request that
/// outlived the drain goes on, and its write must not land after the state is taken and still be
/// answered as done, or a restart from that state would bring back what the client was told is
/// gone. Served with 2 s of latency before each request, a DELETE sent just before the stop
/// outlives the 1 s drain: it must be refused, the object kept in the state saved after `serve`.
#[tokio::test]
async fn a_write_still_in_flight_when_serve_returns_should_be_refused_not_lost() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("the listener has an address");
    let cluster = Arc::new(SimCluster::new());
    let gvr = kube_gc::api::Gvr::new("", "v1", "configmaps");
    let meta = kube_gc::api::ObjectMeta {
        name: "a".into(),
        namespace: "default".into(),
        ..Default::default()
    };
    cluster
        .create(
            &gvr,
            kube_gc::api::PartialObjectMeta {
                metadata: meta,
                ..Default::default()
            },
        )
        .expect("the ConfigMap");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let options = ServerOptions {
        faults: HttpFaults {
            latency: Latency::Fixed(Duration::from_secs(2)),
            ..HttpFaults::default()
        },
        ..ServerOptions::default()
    };
    let serving = tokio::spawn(http::serve(listener, Arc::clone(&cluster), options, async {
        let _ = stopped.await;
    }));
    let cms: Api<ConfigMap> = Api::default_namespaced(client_for(addr, false).await);
    let delete = tokio::spawn(async move { cms.delete("a", &DeleteParams::default()).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.send(()).expect("the server is still waiting for its shutdown");
    within("serve to return", serving)
        .await
        .expect("the serving task ran to its end")
        .expect("serve stopped without an error");
    let mut saved = Vec::new();
    cluster.save_state(&mut saved).expect("the state is saved");
    let answer = within("the DELETE's answer", delete).await.expect("the request task");
    status_of(answer, 503, "ServiceUnavailable");
    let saved = String::from_utf8(saved).expect("UTF-8");
    assert!(saved.contains(r#""name":"a""#), "the ConfigMap is in the saved state");
    assert!(
        cluster.get_object(&gvr, "default", "a").is_ok(),
        "and in the cluster: nothing was deleted"
    );
}

/// A server with `faults` that writes its audit log to the returned path, in the returned
/// directory (removed when it drops).
async fn audited_server(faults: HttpFaults) -> (TestServer, tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("audit.jsonl");
    let options = ServerOptions {
        audit: Some(http::AuditLog::create(&path).expect("the audit log is created")),
        faults,
        ..ServerOptions::default()
    };
    (TestServer::start_with(SimCluster::new(), options).await, dir, path)
}

#[tokio::test]
async fn the_audit_log_should_mark_the_requests_an_injected_fault_failed_and_no_others() {
    let faults = HttpFaults {
        error_rates: vec![
            "list=1".parse().expect("an error rate"),
            "delete=1:429".parse().unwrap(),
        ],
        ..HttpFaults::default()
    };
    let (server, _dir, path) = audited_server(faults).await;
    let config = config_for(server.addr, false).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(Client::try_from(config).unwrap());
    status_of(cms.list(&ListParams::default()).await, 500, "InternalError");
    status_of(cms.get("missing").await, 404, "NotFound");
    status_of(
        cms.delete("missing", &DeleteParams::default()).await,
        429,
        "TooManyRequests",
    );
    cms.create(&PostParams::default(), &config_map("a", &[])).await.unwrap();

    let marked: Vec<(String, u64, bool)> = support::audit_lines(&path)
        .iter()
        .map(|l| {
            let injected = l.get("injected").map(|v| v.as_bool().expect("a boolean"));
            assert_ne!(injected, Some(false), "only a marked line has the field: {l}");
            (
                l["verb"].as_str().expect("a verb").to_string(),
                l["code"].as_u64().expect("a code"),
                injected.is_some(),
            )
        })
        .collect();
    let line = |verb: &str, code, injected| (verb.to_string(), code, injected);
    assert_eq!(
        marked,
        [
            line("list", 500, true),
            line("get", 404, false),
            line("delete", 429, true),
            line("create", 201, false)
        ]
    );
}

#[tokio::test]
async fn the_audit_log_should_record_each_answered_request_with_its_verb_code_and_user_agent() {
    let (server, _dir, path) = audited_server(HttpFaults::default()).await;
    let mut config = config_for(server.addr, false).await;
    config
        .headers
        .push((header::USER_AGENT, "audit-test/1.0 (linux)".parse().unwrap()));
    let cms: Api<ConfigMap> = Api::default_namespaced(Client::try_from(config).unwrap());
    let created = cms.create(&PostParams::default(), &config_map("a", &[])).await.unwrap();
    cms.get("a").await.unwrap();
    status_of(cms.get("missing").await, 404, "NotFound");
    cms.list(&ListParams::default()).await.unwrap();
    let _events = cms.watch(&WatchParams::default(), "0").await.unwrap().boxed();
    let patched = cms
        .patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"k": "v"}})))
        .await
        .unwrap();
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    let after_delete = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version;
    raw(&server.client, Method::GET, "/version", "application/json", Vec::new()).await;

    let lines = support::audit_lines(&path);
    let seen: Vec<(&str, u64, &str, &str)> = lines
        .iter()
        .map(|l| {
            let field = |k: &str| l[k].as_str().unwrap_or_else(|| panic!("{k} is a string in {l}"));
            (
                field("verb"),
                l["code"].as_u64().expect("a code"),
                field("name"),
                field("userAgent"),
            )
        })
        .collect();
    let ua = "audit-test/1.0 (linux)";
    assert_eq!(
        seen,
        [
            ("create", 201, "", ua),
            ("get", 200, "a", ua),
            ("get", 404, "missing", ua),
            ("list", 200, "", ua),
            ("watch", 200, "", ua),
            ("patch", 200, "a", ua),
            ("delete", 200, "a", ua),
            ("list", 200, "", ua),
            ("discovery", 200, "", ""),
        ]
    );
    let seqs: Vec<u64> = lines.iter().map(|l| l["seq"].as_u64().expect("a seq")).collect();
    assert_eq!(seqs, (1..=9).collect::<Vec<u64>>());
    // Writes carry the resourceVersion they committed at, which orders them as the server
    // applied them; reads and failures carry none.
    let committed: Vec<Option<String>> = lines
        .iter()
        .map(|l| {
            l.get("committedResourceVersion")
                .map(|v| v.as_u64().expect("a number").to_string())
        })
        .collect();
    let rv = |meta: &ObjectMeta| meta.resource_version.clone();
    assert_eq!(
        committed,
        [
            rv(&created.metadata),
            None,
            None,
            None,
            None,
            rv(&patched.metadata),
            after_delete,
            None,
            None
        ]
    );
    let create = &lines[0];
    assert_eq!(
        (&create["group"], &create["resource"], &create["namespace"]),
        (&json!(""), &json!("configmaps"), &json!(NS))
    );
    let time = create["time"].as_str().expect("a time");
    assert!(
        time.len() == "2025-01-02T03:04:05.678901Z".len() && time.ends_with('Z'),
        "{time} is RFC 3339 with microseconds"
    );
}

// ---------------------------------------------------------------------------------------------
// What a real server answers besides the object store: lifecycles, DELETE bodies, dry runs and
// access reviews

/// A ConfigMap held by a finalizer nothing removes but the test.
fn held_config_map(name: &str) -> ConfigMap {
    let mut cm = config_map(name, &[]);
    cm.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cm
}

/// Takes every finalizer off a ConfigMap.
async fn release(api: &Api<ConfigMap>, name: &str) {
    let patch = json!({"metadata": {"finalizers": null}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_deleted_namespace_should_terminate_until_its_last_object_is_released() {
    let server = TestServer::start().await;
    let namespaces: Api<Namespace> = Api::all(server.client.clone());
    let team = Namespace {
        metadata: ObjectMeta {
            name: Some("team".into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    let created = namespaces.create(&PostParams::default(), &team).await.unwrap();
    let spec = created.spec.clone().unwrap_or_default();
    assert_eq!(spec.finalizers, Some(vec!["kubernetes".to_string()]));
    let cms: Api<ConfigMap> = Api::namespaced(server.client.clone(), "team");
    cms.create(&PostParams::default(), &held_config_map("held"))
        .await
        .unwrap();

    namespaces.delete("team", &DeleteParams::default()).await.unwrap();
    let terminating = namespaces.get("team").await.unwrap();
    assert_eq!(terminating.status.and_then(|s| s.phase).as_deref(), Some("Terminating"));
    assert!(terminating.metadata.deletion_timestamp.is_some());
    let held = cms.get("held").await.unwrap();
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "its content is being deleted"
    );
    assert_eq!(held.metadata.deletion_grace_period_seconds, Some(0));
    let refused = cms.create(&PostParams::default(), &config_map("late", &[])).await;
    let status = status_of(refused, 403, "Forbidden");
    assert!(status.message.contains("being terminated"), "{status:?}");

    release(&cms, "held").await;
    status_of(namespaces.get("team").await, 404, "NotFound");
}

#[tokio::test]
async fn a_create_in_a_namespace_that_does_not_exist_should_be_404_when_enforced() {
    let cluster = SimCluster::new();
    cluster.enforce_namespaces(true);
    let server = TestServer::start_with(cluster, ServerOptions::default()).await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client.clone(), "nowhere");
    let status = status_of(
        cms.create(&PostParams::default(), &config_map("a", &[])).await,
        404,
        "NotFound",
    );
    assert!(
        status.message.contains("namespaces \"nowhere\" not found"),
        "{status:?}"
    );
}

#[tokio::test]
async fn a_delete_should_answer_the_pod_or_a_status_naming_the_uid() {
    let server = TestServer::start().await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = server.api();
    let pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": []}})).unwrap();
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    let answer = raw(
        &server.client,
        Method::DELETE,
        "/api/v1/namespaces/default/pods/p",
        "application/json",
        vec![],
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        answer.body["kind"], "Pod",
        "a pod's DELETE answers the pod: {}",
        answer.body
    );
    assert_eq!(answer.body["metadata"]["uid"], json!(created.metadata.uid));

    let cms: Api<ConfigMap> = server.api();
    let cm = cms.create(&PostParams::default(), &config_map("c", &[])).await.unwrap();
    let uri = "/api/v1/namespaces/default/configmaps/c";
    let answer = raw(&server.client, Method::DELETE, uri, "application/json", vec![]).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body["kind"], "Status", "{}", answer.body);
    assert_eq!(answer.body["details"]["uid"], json!(cm.metadata.uid));
}

#[tokio::test]
async fn dry_run_all_should_answer_without_writing_and_refuse_other_values() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = server.api();
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answered = cms.create(&dry, &config_map("dry", &[("a", "b")])).await.unwrap();
    assert_eq!(data(&answered), map(&[("a", "b")]));
    status_of(cms.get("dry").await, 404, "NotFound");

    cms.create(&PostParams::default(), &config_map("kept", &[]))
        .await
        .unwrap();
    cms.delete("kept", &DeleteParams::default().dry_run()).await.unwrap();
    cms.get("kept").await.expect("a dry delete deletes nothing");

    let uri = "/api/v1/namespaces/default/configmaps?dryRun=Some";
    let body = serde_json::to_vec(&config_map("odd", &[])).unwrap();
    let answer = raw(&server.client, Method::POST, uri, "application/json", body).await;
    assert_status_body(&answer, 400, "BadRequest");
}

#[tokio::test]
async fn a_create_without_a_content_type_should_be_read_as_json() {
    let server = TestServer::start().await;
    let request = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/namespaces/default/configmaps")
        .body(kube::client::Body::from(
            serde_json::to_vec(&config_map("bare", &[])).unwrap(),
        ))
        .expect("a valid request");
    let response = within("a POST without Content-Type", server.client.send(request))
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::CREATED);
    let cms: Api<ConfigMap> = server.api();
    cms.get("bare").await.expect("created");
}

#[tokio::test]
async fn access_reviews_should_be_allowed_unless_the_server_denies_them() {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let options = ServerOptions {
        denied: vec!["delete/secrets".parse().unwrap()],
        ..ServerOptions::default()
    };
    let server = TestServer::start_with(SimCluster::new(), options).await;
    let reviews: Api<SelfSubjectAccessReview> = Api::all(server.client.clone());
    let ask = |verb: &str, resource: &str| SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                resource: Some(resource.into()),
                namespace: Some(NS.into()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let allowed = reviews
        .create(&PostParams::default(), &ask("delete", "pods"))
        .await
        .unwrap();
    assert!(allowed.status.expect("a status").allowed);
    let denied = reviews
        .create(&PostParams::default(), &ask("delete", "secrets"))
        .await
        .unwrap();
    assert!(!denied.status.expect("a status").allowed);
    let discovery = Discovery::new(server.client.clone()).run().await.unwrap();
    assert!(discovery.has_group("authorization.k8s.io"), "listed in discovery");
}

#[tokio::test]
async fn token_and_subject_access_reviews_should_answer_from_the_tokens_and_grants() {
    use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
    use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
    let options = ServerOptions {
        tokens: vec!["system:serviceaccount:monitoring:prometheus=scrape".parse().unwrap()],
        grants: vec!["system:serviceaccount:monitoring:prometheus=/metrics".parse().unwrap()],
        ..ServerOptions::default()
    };
    let server = TestServer::start_with(SimCluster::new(), options).await;
    let tokens: Api<TokenReview> = Api::all(server.client.clone());
    let review = |token: &str| TokenReview {
        spec: TokenReviewSpec {
            token: token.into(),
            audiences: None,
        },
        ..TokenReview::default()
    };
    let known = tokens.create(&PostParams::default(), &review("scrape")).await.unwrap();
    let status = known.status.expect("a status");
    assert_eq!(status.authenticated, Some(true));
    let user = status.user.expect("a user");
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:monitoring:prometheus")
    );
    let unknown = tokens.create(&PostParams::default(), &review("guess")).await.unwrap();
    assert_eq!(unknown.status.expect("a status").authenticated, Some(false));

    let accesses: Api<SubjectAccessReview> = Api::all(server.client.clone());
    let ask = |path: &str| SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            groups: user.groups.clone(),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.into()),
                verb: Some("get".into()),
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let metrics = accesses.create(&PostParams::default(), &ask("/metrics")).await.unwrap();
    assert!(metrics.status.expect("a status").allowed);
    let explain = accesses.create(&PostParams::default(), &ask("/explain")).await.unwrap();
    assert!(!explain.status.expect("a status").allowed);

    let discovery = Discovery::new(server.client.clone()).run().await.unwrap();
    for (group, resource) in [
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
    ] {
        let group = discovery.get(group).unwrap_or_else(|| panic!("{group} in discovery"));
        let listed = group
            .recommended_resources()
            .into_iter()
            .any(|(r, _)| r.plural == resource);
        assert!(listed, "{resource} in discovery");
    }
}

#[tokio::test]
async fn a_deleted_crd_should_serve_its_type_until_its_held_resources_are_released() {
    let server = TestServer::start().await;
    let client = &server.client;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd()).await.unwrap();
    let widgets = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1", "Widget"), "widgets");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &widgets);
    let mut held = DynamicObject::new("held", &widgets).data(json!({"spec": {}}));
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    let mut events = api.watch(&WatchParams::default(), "0").await.unwrap().boxed();

    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let crd = crds.get("widgets.example.com").await.unwrap();
    assert_eq!(
        crd.metadata.finalizers,
        Some(vec!["customresourcecleanup.apiextensions.k8s.io".to_string()])
    );
    let late = DynamicObject::new("late", &widgets).data(json!({"spec": {}}));
    status_of(api.create(&PostParams::default(), &late).await, 405, "MethodNotAllowed");
    let marked = api.get("held").await.unwrap();
    assert!(
        marked.metadata.deletion_timestamp.is_some(),
        "its resources are being deleted"
    );

    let patch = json!({"metadata": {"finalizers": null}});
    api.patch("held", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    status_of(crds.get("widgets.example.com").await, 404, "NotFound");
    let mut seen = Vec::new();
    while let Ok(Some(Ok(event))) = tokio::time::timeout(Duration::from_millis(500), events.next()).await {
        seen.push(match event {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Bookmark(_) | WatchEvent::Error(_) => "OTHER",
        });
    }
    assert_eq!(
        seen.last(),
        Some(&"DELETED"),
        "a monitor sees the resource go: {seen:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Watch-list (KEP-3157)

#[tokio::test]
async fn a_streaming_list_watcher_should_sync_then_see_later_changes() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = server.api();
    create_all(&cms, ["a".to_string(), "b".to_string()]).await;
    let config = watcher::Config::default().streaming_lists();
    let mut events = watcher(cms.clone(), config).boxed();
    assert_eq!(initial_names(&mut events).await, ["a", "b"]);
    expect_apply_of_late(&cms, &mut events).await;
}

#[tokio::test]
async fn a_watch_list_should_end_its_initial_events_with_the_annotated_bookmark() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = server.api();
    create_all(&cms, ["a".to_string()]).await;
    let version = list_version(&cms).await;
    let uri = "/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true\
               &resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1";
    let request = Request::builder().uri(uri).body(kube::client::Body::empty()).unwrap();
    let response = within("a watch-list", server.client.send(request)).await.unwrap();
    let bytes = within("its events", response.into_body().collect_bytes())
        .await
        .unwrap();
    let events: Vec<Value> = String::from_utf8_lossy(&bytes)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON event"))
        .collect();
    assert_eq!(events[0]["type"], "ADDED", "{events:?}");
    assert_eq!(events[0]["object"]["metadata"]["name"], "a");
    let end = &events[1];
    assert_eq!(end["type"], "BOOKMARK", "{events:?}");
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(end["object"]["metadata"]["resourceVersion"], json!(version));
}

#[tokio::test]
async fn send_initial_events_should_be_refused_on_a_list_and_on_a_watch_when_the_gate_is_off() {
    let server = TestServer::start().await;
    let list = "/api/v1/namespaces/default/configmaps?sendInitialEvents=true";
    let answer = raw(&server.client, Method::GET, list, "application/json", vec![]).await;
    assert_status_body(&answer, 422, "Invalid");
    assert!(answer.body["message"]
        .as_str()
        .unwrap()
        .contains("sendInitialEvents is forbidden for list"));

    let options = ServerOptions {
        watch_list: false,
        ..ServerOptions::default()
    };
    let gated = TestServer::start_with(SimCluster::new(), options).await;
    let watch = "/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true\
                 &resourceVersionMatch=NotOlderThan";
    let answer = raw(&gated.client, Method::GET, watch, "application/json", vec![]).await;
    assert_status_body(&answer, 422, "Invalid");
    assert!(answer.body["message"]
        .as_str()
        .unwrap()
        .contains("WatchList feature gate"));
}
