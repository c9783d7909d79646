//! kube-gc as a drop-in collector: `kube-gc sim-apiserver` and `kube-gc run` run as separate
//! processes on loopback, and the test acts as a user would, through kube-rs (and kubectl where it
//! is installed), then reads the collector's endpoints as an operator would.
//!
//! Nothing here reaches into either process: objects are created, deleted and read over HTTP, and
//! the collector is known only by its effects, its log and its endpoints. Time is real, so every
//! wait polls with a bound and names what it waited for.

use crate::support;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
use support::process::{kubectl, kubectl_available, leader_elect_flags};
use support::processes::{CollectorProcess, Server, PATIENCE};
use support::{crd_manifest, http_get, within_real_time};

/// Waits until `cond` holds; fails naming `what` after [`PATIENCE`].
async fn eventually(what: &str, cond: impl AsyncFn() -> bool) {
    within_real_time(what, PATIENCE, cond).await;
}

/// Creates the object `manifest` describes.
async fn create<K>(api: &Api<K>, manifest: Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(manifest).expect("a valid manifest");
    api.create(&PostParams::default(), &obj).await.expect("create")
}

fn uid<K: kube::Resource>(obj: &K) -> String {
    obj.meta().uid.clone().expect("a UID")
}

/// An owner reference to `owner`, blocking its foreground deletion.
fn owned_by<K: kube::Resource<DynamicType = ()>>(owner: &K) -> Value {
    json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "name": owner.meta().name,
        "uid": uid(owner),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// Whether `name` is gone, or was replaced by an object with another UID.
async fn gone<K>(api: &Api<K>, name: &str, uid_was: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get_opt(name).await.expect("get") {
        Some(obj) => obj.meta().uid.as_deref() != Some(uid_was),
        None => true,
    }
}

/// A Deployment `d` → ReplicaSet `rs` → Pods `p0`, `p1` tree in `ns`.
struct Tree {
    deployment: Deployment,
    replica_set: ReplicaSet,
    pods: Vec<Pod>,
}

impl Tree {
    /// Creates the tree in a namespace of its own, which it creates first, as a cluster requires.
    async fn create(server: &Server, ns: &str) -> Tree {
        let namespaces: Api<Namespace> = Api::all(server.client.clone());
        create(&namespaces, json!({"metadata": {"name": ns}})).await;
        let deployment = create(&server.api::<Deployment>(ns), json!({"metadata": {"name": "d"}})).await;
        let rs_manifest = json!({"metadata": {"name": "rs", "ownerReferences": [owned_by(&deployment)]}});
        let replica_set = create(&server.api::<ReplicaSet>(ns), rs_manifest).await;
        let mut pods = Vec::new();
        for name in ["p0", "p1"] {
            let manifest = json!({"metadata": {"name": name, "ownerReferences": [owned_by(&replica_set)]}});
            pods.push(create(&server.api::<Pod>(ns), manifest).await);
        }
        Tree {
            deployment,
            replica_set,
            pods,
        }
    }

    fn uids(&self) -> Vec<String> {
        let mut uids = vec![uid(&self.deployment), uid(&self.replica_set)];
        uids.extend(self.pods.iter().map(uid));
        uids
    }

    fn namespace(&self) -> String {
        self.deployment.metadata.namespace.clone().expect("a namespace")
    }

    /// Whether the whole tree is gone.
    async fn gone(&self, server: &Server) -> bool {
        let ns = self.namespace();
        if !gone(&server.api::<Deployment>(&ns), "d", &uid(&self.deployment)).await
            || !gone(&server.api::<ReplicaSet>(&ns), "rs", &uid(&self.replica_set)).await
        {
            return false;
        }
        for pod in &self.pods {
            let name = pod.metadata.name.as_deref().expect("a name");
            if !gone(&server.api::<Pod>(&ns), name, &uid(pod)).await {
                return false;
            }
        }
        true
    }
}

async fn observe_trees(collector: &CollectorProcess, trees: &[&Tree]) {
    let uids: Vec<String> = trees.iter().flat_map(|t| t.uids()).collect();
    collector
        .observe(&uids.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
}

fn delete_with(policy: PropagationPolicy) -> DeleteParams {
    DeleteParams {
        propagation_policy: Some(policy),
        ..DeleteParams::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_policy_should_be_carried_out_between_processes() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let server = Server::start(dir.path(), &[]).await;
    let collector = CollectorProcess::ready(&server, dir.path(), &[]).await;
    let background = Tree::create(&server, "background").await;
    let foreground = Tree::create(&server, "foreground").await;
    let orphan = Tree::create(&server, "orphan").await;
    let with_kubectl = kubectl_available();
    let by_kubectl = if with_kubectl {
        Some(Tree::create(&server, "kubectl").await)
    } else {
        None
    };
    let mut trees = vec![&background, &foreground, &orphan];
    trees.extend(by_kubectl.as_ref());
    observe_trees(&collector, &trees).await;

    for (tree, policy) in [
        (&background, PropagationPolicy::Background),
        (&foreground, PropagationPolicy::Foreground),
        (&orphan, PropagationPolicy::Orphan),
    ] {
        let deployments = server.api::<Deployment>(&tree.namespace());
        deployments.delete("d", &delete_with(policy)).await.expect("delete");
    }
    if let Some(tree) = &by_kubectl {
        let ns = tree.namespace();
        let args = [
            "delete",
            "deployment",
            "d",
            "-n",
            &ns,
            "--cascade=foreground",
            "--wait=false",
        ];
        kubectl(&server.kubeconfig, dir.path(), &args);
    }

    eventually("the background tree gone", async || background.gone(&server).await).await;
    eventually("the foreground tree gone", async || foreground.gone(&server).await).await;
    if let Some(tree) = &by_kubectl {
        eventually("the tree kubectl deleted gone", async || tree.gone(&server).await).await;
    }
    let orphan_d = uid(&orphan.deployment);
    eventually("the orphaned Deployment gone", async || {
        gone(&server.api::<Deployment>("orphan"), "d", &orphan_d).await
    })
    .await;
    let rs = server
        .api::<ReplicaSet>("orphan")
        .get("rs")
        .await
        .expect("the ReplicaSet stays");
    assert_eq!(
        rs.metadata.owner_references.unwrap_or_default(),
        vec![],
        "the ReplicaSet was orphaned"
    );
    for pod in &orphan.pods {
        let name = pod.metadata.name.as_deref().expect("a name");
        let pod = server.api::<Pod>("orphan").get(name).await.expect("the Pod stays");
        let owners = pod.metadata.owner_references.unwrap_or_default();
        assert_eq!(owners.len(), 1, "{owners:?}");
        assert_eq!(
            owners[0].uid,
            uid(&orphan.replica_set),
            "the Pod stays owned by the ReplicaSet"
        );
    }
    stop_both(collector, server);
}

/// SIGTERM to the collector, then to the server: each stops at once with status 0.
fn stop_both(mut collector: CollectorProcess, mut server: Server) {
    collector.process.stop();
    assert!(collector.process.log().contains("kube-gc run: shutting down"));
    server.process.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_whose_owner_never_existed_should_be_collected() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let server = Server::start(dir.path(), &[]).await;
    let collector = CollectorProcess::ready(&server, dir.path(), &[]).await;
    let pods = server.api::<Pod>("default");
    let live = create(
        &server.api::<ReplicaSet>("default"),
        json!({"metadata": {"name": "live"}}),
    )
    .await;
    let ghost = json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "ghost",
        "uid": "6f1a4a3e-0000-4000-8000-000000000001",
    });
    let stray = create(
        &pods,
        json!({"metadata": {"name": "stray", "ownerReferences": [ghost]}}),
    )
    .await;
    let kept = create(
        &pods,
        json!({"metadata": {"name": "kept", "ownerReferences": [owned_by(&live)]}}),
    )
    .await;
    eventually("the stray Pod collected", async || {
        gone(&pods, "stray", &uid(&stray)).await
    })
    .await;
    collector.observe(&[&uid(&kept)]).await;
    assert!(!gone(&pods, "kept", &uid(&kept)).await, "a Pod with a live owner stays");
    stop_both(collector, server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_chain_defined_after_the_start_should_be_collected() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let server = Server::start(dir.path(), &[]).await;
    let collector = CollectorProcess::ready(&server, dir.path(), &[]).await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client.clone());
    create(&crds, crd_manifest("widgets", "Widget")).await;
    create(&crds, crd_manifest("gadgets", "Gadget")).await;
    for resource in ["widgets", "gadgets"] {
        let synced = format!("kube_gc_monitor_synced{{resource=\"example.com/v1/{resource}\"}} 1");
        eventually(&format!("a synced monitor of {resource}"), async || {
            collector.metrics().await.contains(&synced)
        })
        .await;
    }

    let custom = |kind: &str, plural: &str| {
        let resource = ApiResource {
            group: "example.com".into(),
            version: "v1".into(),
            api_version: "example.com/v1".into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        Api::<DynamicObject>::namespaced_with(server.client.clone(), "default", &resource)
    };
    let widgets = custom("Widget", "widgets");
    let gadgets = custom("Gadget", "gadgets");
    let widget = create(
        &widgets,
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
    )
    .await;
    let widget_ref = json!({"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "uid": uid(&widget)});
    let gadget = create(
        &gadgets,
        json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g", "ownerReferences": [widget_ref]}}),
    )
    .await;
    let gadget_ref = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "name": "g", "uid": uid(&gadget)});
    let pods = server.api::<Pod>("default");
    let pod = create(
        &pods,
        json!({"metadata": {"name": "p", "ownerReferences": [gadget_ref]}}),
    )
    .await;
    collector.observe(&[&uid(&widget), &uid(&gadget), &uid(&pod)]).await;

    widgets
        .delete("w", &delete_with(PropagationPolicy::Background))
        .await
        .expect("delete the widget");
    eventually("the gadget and its Pod gone", async || {
        gone(&gadgets, "g", &uid(&gadget)).await && gone(&pods, "p", &uid(&pod)).await
    })
    .await;
    stop_both(collector, server);
}

/// The upstream case of a short-lived owner type: a CRD is created, given an owner instance and a
/// dependent, and deleted again while the workers are saturated at their QPS. Discovery and the
/// monitors have budgets of their own, so the new type is monitored within the window, its
/// instance's deletion is seen, and the dependent is collected once the workers reach it; with one
/// shared budget, discovery waited behind the worker backlog, the type was never monitored, and
/// the dependent stayed forever (its owner's kind no longer maps to any resource).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_of_a_short_lived_crd_should_be_collected_while_the_workers_are_saturated() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let server = Server::start(dir.path(), &[]).await;
    let collector =
        CollectorProcess::ready(&server, dir.path(), &["--kube-api-qps", "4", "--kube-api-burst", "1"]).await;
    // A backlog of garbage: each Pod costs the workers a GET of its owner and a DELETE.
    let pods = server.api::<Pod>("default");
    for i in 0..30 {
        let ghost = json!({"apiVersion": "v1", "kind": "ReplicationController", "name": format!("ghost-{i}"),
                           "uid": format!("00000000-0000-4000-8000-{i:012}")});
        create(
            &pods,
            json!({"metadata": {"name": format!("garbage-{i}"), "ownerReferences": [ghost]}}),
        )
        .await;
    }
    let crds: Api<CustomResourceDefinition> = Api::all(server.client.clone());
    create(&crds, crd_manifest("widgets", "Widget")).await;
    let resource = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets = Api::<DynamicObject>::namespaced_with(server.client.clone(), "default", &resource);
    let widget = create(
        &widgets,
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
    )
    .await;
    let widget_ref = json!({"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "uid": uid(&widget)});
    let pod = create(
        &pods,
        json!({"metadata": {"name": "p", "ownerReferences": [widget_ref]}}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await; // five resync periods
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .expect("delete the CRD");
    within_real_time(
        "the short-lived CRD's dependent collected",
        Duration::from_secs(120),
        async || gone(&pods, "p", &uid(&pod)).await,
    )
    .await;
    stop_both(collector, server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_deletion_should_wait_for_a_blocking_dependent_until_its_finalizer_goes() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let server = Server::start(dir.path(), &[]).await;
    let collector = CollectorProcess::ready(&server, dir.path(), &[]).await;
    let deployments = server.api::<Deployment>("default");
    let replica_sets = server.api::<ReplicaSet>("default");
    let pods = server.api::<Pod>("default");
    let d = create(&deployments, json!({"metadata": {"name": "d"}})).await;
    let rs_manifest = json!({"metadata": {
        "name": "rs",
        "ownerReferences": [owned_by(&d)],
        "finalizers": ["example.com/hold"],
    }});
    let rs = create(&replica_sets, rs_manifest).await;
    let pod = create(
        &pods,
        json!({"metadata": {"name": "p", "ownerReferences": [owned_by(&rs)]}}),
    )
    .await;
    collector.observe(&[&uid(&d), &uid(&rs), &uid(&pod)]).await;

    deployments
        .delete("d", &delete_with(PropagationPolicy::Foreground))
        .await
        .expect("delete the Deployment");
    eventually("the Pod gone and the ReplicaSet held by its finalizer", async || {
        let held = replica_sets.get("rs").await.expect("the ReplicaSet");
        let finalizers = held.metadata.finalizers.unwrap_or_default();
        gone(&pods, "p", &uid(&pod)).await && finalizers == ["example.com/hold"]
    })
    .await;
    // The collector has nothing left to do but wait: the Deployment stays while the ReplicaSet does.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let waiting = deployments.get("d").await.expect("the Deployment waits");
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert_eq!(waiting.metadata.finalizers.unwrap_or_default(), ["foregroundDeletion"]);

    let explained = collector.explain(&uid(&d)).await;
    assert_eq!(explained["deletingDependents"], true, "{explained}");
    assert_eq!(explained["blockingDependents"][0]["uid"], uid(&rs), "{explained}");
    let explained = collector.explain(&uid(&rs)).await;
    assert_eq!(explained["beingDeleted"], true, "{explained}");
    assert_eq!(explained["owners"][0]["state"], "deletingDependents", "{explained}");

    let (code, dot) = http_get(
        collector.addr,
        &format!("/debug/controllers/garbagecollector/graph?uid={}", uid(&d)),
    )
    .await;
    assert_eq!(code, 200);
    assert!(dot.starts_with("strict digraph full {"), "{dot}");
    assert!(dot.contains(&format!("\"{}\" -> \"{}\"", uid(&rs), uid(&d))), "{dot}");

    let metrics = collector.metrics().await;
    for needle in [
        "garbagecollector_controller_resources_sync_error_total 0",
        "workqueue_adds_total{name=\"garbage_collector_attempt_to_delete\"}",
        "kube_gc_monitor_synced{resource=\"apps/v1/replicasets\"} 1",
        "kube_gc_api_requests_total{verb=\"delete\",code=\"200\"}",
        "kube_gc_api_requests_total{verb=\"watch\",code=\"200\"}",
        "kube_gc_monitor_sync_mode{resource=\"apps/v1/replicasets\",mode=\"watch-list\"} 1",
        "workqueue_depth{name=\"garbage_collector_graph_changes\"} 0",
        "kube_gc_graph_events_total{partition=\"0\"}",
        "kube_gc_graph_events_per_second{partition=\"0\"}",
    ] {
        assert!(metrics.contains(needle), "no {needle} in\n{metrics}");
    }
    let nodes = sample(&metrics, "kube_gc_graph_nodes");
    assert!(nodes >= 2.0, "the Deployment and the ReplicaSet at least: {nodes}");
    let idle = sample(&metrics, "kube_gc_seconds_since_last_graph_event");
    assert!(idle < 30.0, "the last graph event was moments ago: {idle}");

    let release = json!({"metadata": {"finalizers": null}});
    replica_sets
        .patch("rs", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .expect("remove the finalizer");
    eventually("the Deployment gone", async || gone(&deployments, "d", &uid(&d)).await).await;
    assert!(gone(&replica_sets, "rs", &uid(&rs)).await);
    stop_both(collector, server);
}

/// The value of the unlabelled sample `name` in an exposition.
fn sample(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{metrics}"))
}

/// Pods `r{round}-0` … `r{round}-{n-1}` in `default`, owned by a ReplicaSet that never existed:
/// garbage for whoever collects.
async fn garbage(server: &Server, round: usize, n: usize) -> Vec<Pod> {
    let pods = server.api::<Pod>("default");
    let mut created = Vec::new();
    for i in 0..n {
        let ghost = json!({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": format!("ghost-{round}"),
            "uid": format!("6f1a4a3e-0000-4000-8000-{round:012}"),
        });
        let manifest = json!({"metadata": {"name": format!("r{round}-{i}"), "ownerReferences": [ghost]}});
        created.push(create(&pods, manifest).await);
    }
    created
}

/// How many of `pods` are still there, by one list.
async fn remaining(server: &Server, pods: &[Pod]) -> usize {
    let listed = server
        .api::<Pod>("default")
        .list(&Default::default())
        .await
        .expect("list");
    let uids: std::collections::HashSet<String> = listed.items.iter().map(uid).collect();
    pods.iter().filter(|p| uids.contains(&uid(*p))).count()
}

async fn all_gone(server: &Server, pods: &[Pod]) -> bool {
    remaining(server, pods).await == 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cascade_should_finish_across_an_api_server_restart() {
    const PODS: usize = 150;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let state = dir.path().join("state.json");
    let state_flags = ["--state-file", state.to_str().expect("a UTF-8 path")];
    let mut server = Server::start(dir.path(), &state_flags).await;
    // A slow client, so the cascade is still running when the server stops.
    let slow = ["--kube-api-qps", "20", "--kube-api-burst", "1"];
    let collector = CollectorProcess::ready(&server, dir.path(), &slow).await;
    let deployments = server.api::<Deployment>("default");
    let d = create(&deployments, json!({"metadata": {"name": "d"}})).await;
    let rs_manifest = json!({"metadata": {"name": "rs", "ownerReferences": [owned_by(&d)]}});
    let rs = create(&server.api::<ReplicaSet>("default"), rs_manifest).await;
    let pods = server.api::<Pod>("default");
    let mut last = None;
    for i in 0..PODS {
        let manifest = json!({"metadata": {"name": format!("p{i}"), "ownerReferences": [owned_by(&rs)]}});
        last = Some(create(&pods, manifest).await);
    }
    let last = last.expect("a Pod");
    collector.observe(&[&uid(&d), &uid(&rs), &uid(&last)]).await;

    deployments
        .delete("d", &delete_with(PropagationPolicy::Foreground))
        .await
        .expect("delete the Deployment");
    let remaining = async || pods.list(&Default::default()).await.expect("list").items.len();
    eventually("the cascade under way", async || remaining().await < PODS - 20).await;
    assert!(
        remaining().await > 0,
        "the cascade is still under way when the server stops"
    );

    server.process.stop();
    assert!(server.process.log().contains("saved"), "{}", server.process.log());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let listen = server.addr.to_string();
    let server = Server::start_on(&listen, dir.path(), &state_flags).await;
    let restored = server
        .api::<Deployment>("default")
        .get("d")
        .await
        .expect("the Deployment is back");
    assert_eq!(uid(&restored), uid(&d), "with its UID");
    assert!(restored.metadata.deletion_timestamp.is_some(), "still being deleted");

    eventually("the Deployment, the ReplicaSet and every Pod gone", async || {
        let pods_left = server
            .api::<Pod>("default")
            .list(&Default::default())
            .await
            .expect("list")
            .items;
        pods_left.is_empty()
            && gone(&server.api::<ReplicaSet>("default"), "rs", &uid(&rs)).await
            && gone(&server.api::<Deployment>("default"), "d", &uid(&d)).await
    })
    .await;
    stop_both(collector, server);
}

/// One request the server's audit log recorded.
#[derive(serde::Deserialize)]
struct Audited {
    seq: u64,
    verb: String,
    #[serde(rename = "userAgent")]
    user_agent: String,
}

fn audited(path: &Path) -> Vec<Audited> {
    let text = std::fs::read_to_string(path).expect("the audit log");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("an audit line ({e}): {l}")))
        .collect()
}

/// The identity a replica printed while standing by.
fn identity(replica: &mut CollectorProcess) -> String {
    let line = replica.process.wait_for_line("standing by for the leader lease");
    let words: Vec<&str> = line.split_whitespace().collect();
    words[words.iter().position(|w| *w == "standing").expect("standing") - 1].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_leader_elected_replicas_should_never_both_delete() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let audit = dir.path().join("audit.jsonl");
    let server = Server::start(dir.path(), &["--audit-log", audit.to_str().expect("a UTF-8 path")]).await;
    // A slow client, so the leader still has deletions waiting for the rate limiter when it
    // freezes.
    let elect = [
        &leader_elect_flags("500ms")[..],
        &["--kube-api-qps", "10", "--kube-api-burst", "1"],
    ]
    .concat();
    let mut first = CollectorProcess::start(&server, dir.path(), "first", &elect);
    let first_id = identity(&mut first);
    first.process.wait_for_line("leading");
    let mut second = CollectorProcess::start(&server, dir.path(), "second", &elect);
    let second_id = identity(&mut second);
    assert_ne!(first_id, second_id);

    let round = garbage(&server, 1, 5).await;
    eventually("round one collected", async || all_gone(&server, &round).await).await;
    assert!(
        !second.process.log().contains("leading"),
        "the second replica stands by"
    );

    // The leader freezes in the middle of a round; the second replica takes over once the lease
    // has expired, and finishes the round.
    let round = garbage(&server, 2, 30).await;
    eventually("round two under way", async || {
        remaining(&server, &round).await <= round.len() - 3
    })
    .await;
    first.process.signal(libc::SIGSTOP);
    second.process.wait_for_line("leading");
    eventually("round two collected", async || all_gone(&server, &round).await).await;

    // The old leader wakes with deletions that were waiting for the rate limiter, and must
    // neither send them nor stay.
    first.process.signal(libc::SIGCONT);
    let status = first.process.wait(PATIENCE);
    assert!(!status.success(), "the old leader stops with an error");
    assert!(
        first.process.log().contains("lost the leader lease"),
        "{}",
        first.process.log()
    );
    let round = garbage(&server, 3, 5).await;
    eventually("round three collected", async || all_gone(&server, &round).await).await;

    let deletes: Vec<(u64, bool)> = audited(&audit)
        .into_iter()
        .filter(|a| a.verb == "delete" && a.user_agent.contains("kube-gc/"))
        .map(|a| (a.seq, a.user_agent.contains(&first_id)))
        .collect();
    let last_first = deletes
        .iter()
        .filter(|d| d.1)
        .map(|d| d.0)
        .max()
        .expect("the first leader deleted");
    let first_second = deletes
        .iter()
        .filter(|d| !d.1)
        .map(|d| d.0)
        .min()
        .expect("the second leader deleted");
    assert!(
        last_first < first_second,
        "the first replica deleted (request {last_first}) after the second began (request {first_second})"
    );
    stop_both(second, server);
}

// Watch-list: how the monitors read their resources, whatever the server offers

/// The `kube_gc_monitor_sync_mode` samples of an exposition, as (resource, mode).
fn sync_modes(metrics: &str) -> Vec<(String, String)> {
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix("kube_gc_monitor_sync_mode{resource=\""))
        .filter_map(|l| {
            let (resource, rest) = l.split_once("\",mode=\"")?;
            let (mode, _) = rest.split_once('"')?;
            Some((resource.to_string(), mode.to_string()))
        })
        .collect()
}

/// What a collector's sync is tried against, and what it must show.
struct SyncCase {
    server_flags: &'static [&'static str],
    collector_flags: &'static [&'static str],
    /// How every monitor must read its resource.
    mode: &'static str,
    /// How many times the collector's log must say that the server refused watch-list.
    refusals_logged: usize,
}

/// Starts a server with the case's flags and three pods of a ReplicaSet that never existed, then
/// the collector; checks that it syncs within [`PATIENCE`], collects the pods, reads every
/// resource the way the case says (in `/metrics` and in the server's audit log: a LIST from the
/// collector only when listing), and logs a refusal as often as the case says.
async fn sync_and_collect(case: SyncCase) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let audit = dir.path().join("audit.jsonl");
    let mut flags = vec!["--audit-log", audit.to_str().expect("a UTF-8 path")];
    flags.extend_from_slice(case.server_flags);
    let server = Server::start(dir.path(), &flags).await;
    let pods = garbage(&server, 0, 3).await;
    let collector = CollectorProcess::ready(&server, dir.path(), case.collector_flags).await;
    eventually("the garbage collected", async || all_gone(&server, &pods).await).await;

    let modes = sync_modes(&collector.metrics().await);
    assert!(modes.iter().any(|(r, _)| r == "v1/pods"), "{modes:?}");
    assert!(modes.iter().all(|(_, m)| m == case.mode), "{modes:?}");
    let collector_reads = |verb: &str| {
        audited(&audit)
            .iter()
            // The storage version migrator's requests carry their own agent; it is not a monitor.
            .filter(|a| {
                a.user_agent.starts_with("kube-gc/") && !a.user_agent.ends_with("/storage-version-migrator-controller")
            })
            .filter(|a| a.verb == verb)
            .count()
    };
    assert!(collector_reads("watch") > 0, "the collector watches");
    let lists = collector_reads("list");
    if case.mode == "watch-list" {
        assert_eq!(lists, 0, "no LIST from a collector that reads by watch-list");
    } else {
        assert!(lists > 0, "a collector that reads by list sends LISTs");
    }
    let log = collector.process.log();
    assert_eq!(
        log.matches("server refused watch-list").count(),
        case.refusals_logged,
        "{log}"
    );
    stop_both(collector, server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitors_should_sync_by_watch_list_without_a_list_request() {
    sync_and_collect(SyncCase {
        server_flags: &[],
        collector_flags: &[],
        mode: "watch-list",
        refusals_logged: 0,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_the_watch_list_gate_off_should_be_read_by_list_and_said_once() {
    sync_and_collect(SyncCase {
        server_flags: &["--feature-gates", "WatchList=false"],
        collector_flags: &[],
        mode: "list",
        refusals_logged: 1,
    })
    .await;
}

/// The bookmark never comes: each monitor waits out the 30 s bound on its stream's silence, then
/// lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_ends_the_initial_events_should_be_read_by_list() {
    sync_and_collect(SyncCase {
        server_flags: &["--withhold-initial-events-end"],
        collector_flags: &[],
        mode: "list",
        refusals_logged: 1,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_list_client_gate_off_should_make_the_monitors_list() {
    sync_and_collect(SyncCase {
        server_flags: &[],
        collector_flags: &["--feature-gates", "WatchListClient=false"],
        mode: "list",
        refusals_logged: 0,
    })
    .await;
}

/// One watch request in five fails: every monitor still syncs by watch-list within the patience
/// of [`CollectorProcess::ready`] (60 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_monitor_should_sync_by_watch_list_under_twenty_percent_watch_errors() {
    sync_and_collect(SyncCase {
        server_flags: &["--error-rate", "watch=0.2", "--fault-target", "kube-gc/"],
        collector_flags: &[],
        mode: "watch-list",
        refusals_logged: 0,
    })
    .await;
}

// Shadow mode: a second collector that decides without writing, next to the live one

/// A ReplicaSet `rs` owning Pods `p0`, `p1` (and a ConfigMap `cm` when `with_config_map`) in a
/// namespace `ns` of its own, which it creates first; returns the owner and the UIDs, owner first
/// and ConfigMap last.
async fn owned_set(server: &Server, ns: &str, with_config_map: bool) -> (ReplicaSet, Vec<String>) {
    let namespaces: Api<Namespace> = Api::all(server.client.clone());
    create(&namespaces, json!({"metadata": {"name": ns}})).await;
    let rs = create(&server.api::<ReplicaSet>(ns), json!({"metadata": {"name": "rs"}})).await;
    let mut uids = vec![uid(&rs)];
    for name in ["p0", "p1"] {
        let manifest = json!({"metadata": {"name": name, "ownerReferences": [owned_by(&rs)]}});
        uids.push(uid(&create(&server.api::<Pod>(ns), manifest).await));
    }
    if with_config_map {
        let manifest = json!({"metadata": {"name": "cm", "ownerReferences": [owned_by(&rs)]}});
        let config_maps = server.api::<k8s_openapi::api::core::v1::ConfigMap>(ns);
        uids.push(uid(&create(&config_maps, manifest).await));
    }
    (rs, uids)
}

/// Runs a live collector (with `live_flags`) and a shadow (`--dry-run --journal`) against one
/// server; deletes one owned set with each policy (with a ConfigMap dependent in the Background
/// one when `with_config_map`), waits for the live collector to finish and for the shadow to have
/// seen it, then returns the shadow's `shadow-report` as JSON, after checking on the audit log
/// that the shadow sent no write.
async fn shadow_next_to_live(live_flags: &[&str], with_config_map: bool) -> Value {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let audit = dir.path().join("audit.jsonl");
    let journal = dir.path().join("shadow.jsonl");
    // Every request waits 100 ms before the server serves it, so each of the live collector's
    // writes lands 100 ms after the live collector decided it, while the shadow, deciding from
    // the same watch events without a request, gets that much of a head start: on a loaded
    // machine, without it, the shadow could see a write before deciding it.
    let server_flags = [
        "--audit-log",
        audit.to_str().expect("a UTF-8 path"),
        "--latency",
        "100ms",
    ];
    let server = Server::start(dir.path(), &server_flags).await;
    // The live collector writes at most 20 times a second, as a stock collector's client does:
    // the shadow must have decided each write before the live collector made it, or it finds
    // the work done (see `kube_gc::journal::report`).
    let live_flags = [&["--kube-api-qps", "20", "--kube-api-burst", "1"], live_flags].concat();
    let live = CollectorProcess::ready(&server, dir.path(), &live_flags).await;
    let journal_arg = journal.to_str().expect("a UTF-8 path");
    // One builder partition, so that an owner's deletion, which reaches the shadow before its
    // dependents' (the live collector acts on it first), is applied first too: a dependent's
    // deletion applied before its owner's is not counted (see `kube_gc::journal::witness`).
    let shadow_flags = ["--dry-run", "--journal", journal_arg, "--partitions", "1"];
    let mut shadow = CollectorProcess::start(&server, dir.path(), "shadow", &shadow_flags);
    let line = shadow.process.wait_for_line("in shadow mode");
    let shadow_id = line.split_whitespace().nth(2).expect("an identity").to_string();
    eventually("the shadow ready", async || {
        http_get(shadow.addr, "/readyz").await.0 == 200
    })
    .await;

    let sets = [
        ("background", PropagationPolicy::Background),
        ("foreground", PropagationPolicy::Foreground),
        ("orphan", PropagationPolicy::Orphan),
    ];
    let mut owners = Vec::new();
    for (ns, _) in &sets {
        let (rs, uids) = owned_set(&server, ns, with_config_map && *ns == "background").await;
        let refs: Vec<&str> = uids.iter().map(String::as_str).collect();
        live.observe(&refs[..3]).await; // the ConfigMap may be ignored
        shadow.observe(&refs).await;
        owners.push(rs);
    }
    for (ns, policy) in &sets {
        let replica_sets = server.api::<ReplicaSet>(ns);
        replica_sets
            .delete("rs", &delete_with(policy.clone()))
            .await
            .expect("delete");
    }
    for ((ns, _), rs) in sets.iter().zip(&owners) {
        let rs_uid = uid(rs);
        eventually(&format!("{ns}/rs gone"), async || {
            gone(&server.api::<ReplicaSet>(ns), "rs", &rs_uid).await
        })
        .await;
        eventually(&format!("the shadow saw {ns}/rs go"), async || {
            shadow.explain(&rs_uid).await["inGraph"] == false
        })
        .await;
    }
    eventually("the background and foreground Pods gone", async || {
        let mut left = 0;
        for ns in ["background", "foreground"] {
            left += server
                .api::<Pod>(ns)
                .list(&Default::default())
                .await
                .expect("list")
                .items
                .len();
        }
        left == 0
    })
    .await;
    // The shadow's last decisions follow the events it has just applied.
    tokio::time::sleep(Duration::from_secs(2)).await;

    shadow.process.stop();
    let writes: Vec<String> = audited(&audit)
        .into_iter()
        .filter(|a| {
            a.user_agent.contains(&shadow_id) && !["get", "list", "watch", "discovery"].contains(&a.verb.as_str())
        })
        .map(|a| a.verb)
        .collect();
    assert!(writes.is_empty(), "the shadow sent writes: {writes:?}");
    assert!(
        audited(&audit).iter().any(|a| a.user_agent.contains(&shadow_id)),
        "the shadow's reads are in the audit log"
    );
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_kube-gc"));
    command.args(["shadow-report", journal_arg, "--output", "json"]);
    let report = support::process::run_bounded(&mut command, PATIENCE);
    assert!(report.status.success(), "shadow-report failed: {}", report.stderr);
    stop_both(live, server);
    serde_json::from_str(&report.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", report.stdout))
}

/// `(action, policy or finalizer, kind, namespace)` of the lines of a report's list, each once;
/// an orphaning patch counts as the ref removal it is on the wire (see [`every_policy_writes`]).
fn writes_in(report: &Value, list: &str) -> Vec<(String, String, String, String)> {
    let mut writes: Vec<_> = report[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {report}"))
        .iter()
        .map(|e| {
            let detail = e["policy"].as_str().or(e["finalizer"].as_str()).unwrap_or("");
            let text = |v: &Value| v.as_str().unwrap_or("").to_string();
            let action = text(&e["action"]);
            (
                if action == "orphan" {
                    "remove-owner-refs".into()
                } else {
                    action
                },
                detail.to_string(),
                text(&e["object"]["kind"]),
                text(&e["object"]["namespace"]),
            )
        })
        .collect();
    writes.sort();
    writes.dedup();
    writes
}

fn write(action: &str, detail: &str, kind: &str, ns: &str) -> (String, String, String, String) {
    (action.into(), detail.into(), kind.into(), ns.into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_should_agree_with_the_live_collector_on_every_policy_and_send_nothing() {
    let report = shadow_next_to_live(&[], false).await;
    assert_eq!(writes_in(&report, "missedByShadow"), vec![], "{report:#}");
    assert_eq!(writes_in(&report, "doneOnlyByShadow"), vec![], "{report:#}");
    assert_eq!(writes_in(&report, "agreed"), every_policy_writes(), "{report:#}");
}

/// The kinds of write the three deletions of [`shadow_next_to_live`] lead to. A Pod's ref to its
/// orphaning owner may be removed by the orphaning patch, or, when the Pod is judged again once
/// its owner is orphaned, by a ref removal: one write on the wire, either kind in a report.
fn every_policy_writes() -> Vec<(String, String, String, String)> {
    let mut writes = vec![
        write("delete", "Background", "Pod", "background"),
        write("delete", "Background", "Pod", "foreground"),
        write("remove-owner-refs", "", "Pod", "orphan"),
        write("remove-finalizer", "foregroundDeletion", "ReplicaSet", "foreground"),
        write("remove-finalizer", "orphan", "ReplicaSet", "orphan"),
    ];
    writes.sort();
    writes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_that_collects_a_resource_the_live_collector_ignores_should_report_just_that() {
    let report = shadow_next_to_live(&["--ignored-resource", "configmaps"], true).await;
    assert_eq!(
        writes_in(&report, "doneOnlyByShadow"),
        vec![write("delete", "Background", "ConfigMap", "background")],
        "{report:#}"
    );
    assert_eq!(writes_in(&report, "missedByShadow"), vec![], "{report:#}");
    assert_eq!(writes_in(&report, "agreed"), every_policy_writes(), "{report:#}");
}

#[test]
fn a_journal_that_cannot_be_written_should_stop_the_start_with_its_path() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let journal = dir.path().join("missing-dir").join("journal.jsonl");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_kube-gc"));
    // The kubeconfig is never read: the journal is opened before the cluster is reached.
    command
        .args(["run", "--secure-port", "0", "--kubeconfig"])
        .arg(dir.path().join("no-kubeconfig"))
        .arg("--journal")
        .arg(&journal);
    let run = support::process::run_bounded(&mut command, PATIENCE);
    assert!(!run.status.success());
    assert!(
        run.stderr.contains(&format!("opening --journal {}", journal.display())),
        "{}",
        run.stderr
    );
}
