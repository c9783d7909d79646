//! Names a tenant writes into its objects' owner references, sent to the simulated API server over
//! HTTP: each request reaches exactly the object named or gets a clean 404 (without a request when
//! no object can have the name), never another path, and never a retry loop. And owners a tenant
//! names and lets go of in turn leave nothing in the graph.

use crate::support::{
    collector_client, create_in, meta, pods, policy, ref_named, start_collector, within_real_time, Harness,
};
use kube_gc::api::{ClusterApi, KubeApi, OwnerReference, PartialObjectMeta, PropagationPolicy};
use kube_gc::graph::Uid;
use kube_gc_sim::http::{self, AuditLog, ServerOptions};
use kube_gc_sim::SimCluster;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How long the collector may take to collect the dependent.
const PATIENCE: Duration = Duration::from_secs(30);

/// The names tried, and whether the server can hold an object of each (the others are refused on
/// create by a real server, so a request for one gets 404 or is not sent).
fn hostile_names() -> Vec<(String, bool)> {
    let mut names: Vec<(String, bool)> = [
        "a b",
        "x?watch=true",
        "x#frag",
        "ünïcödé",
        "a+b=c;d",
        "...",
        "a/b",
        ".",
        "..",
        "../../namespaces/other/pods/victim",
        "50%",
        "%2e%2e",
    ]
    .into_iter()
    .map(|n| (n.to_string(), false))
    .collect();
    names.push(("a.b".into(), true));
    names.push(("a".repeat(253), true));
    names
}

/// Whether the client refuses `name` before sending: it holds `/` or `%`, or is `.` or `..`.
fn refused_unsent(name: &str) -> bool {
    matches!(name, "." | "..") || name.contains(['/', '%'])
}

/// A cluster holding the objects the hostile names may reach: the valid ones in `default`, and a
/// `victim` Pod in another namespace that no request may touch.
fn cluster() -> Arc<SimCluster> {
    let cluster = SimCluster::new();
    for (name, valid) in hostile_names() {
        if valid {
            create_in(&cluster, &pods(), meta("default", &name, vec![]));
        }
    }
    create_in(&cluster, &pods(), meta("other", "victim", vec![]));
    Arc::new(cluster)
}

/// Serves `cluster` on a loopback port with an audit log at `audit`.
async fn serve(
    cluster: &Arc<SimCluster>,
    audit: &Path,
) -> (kube::Client, tokio::task::JoinHandle<std::io::Result<()>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let options = ServerOptions {
        audit: Some(AuditLog::create(audit).expect("audit log")),
        ..ServerOptions::default()
    };
    let server = tokio::spawn(http::serve(listener, cluster.clone(), options, std::future::pending()));
    (collector_client(addr).await, server)
}

/// The (verb, namespace, name) of every request the audit log holds for Pods.
fn pod_requests(audit: &Path) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(audit).expect("audit log");
    text.lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("an audit line is JSON"))
        .filter(|line| line["resource"] == "pods")
        .map(|line| {
            let field = |k: &str| line[k].as_str().unwrap_or_default().to_string();
            (field("verb"), field("namespace"), field("name"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_hostile_name_should_reach_the_object_named_or_a_clean_404() {
    let dir = tempfile::tempdir().expect("temp dir");
    let audit = dir.path().join("audit.jsonl");
    let cluster = cluster();
    let (client, server) = serve(&cluster, &audit).await;
    let api = KubeApi::new(client);

    for (name, valid) in hostile_names() {
        match api.get(&pods(), "default", &name).await {
            Ok(found) => {
                assert!(valid, "{name:?} reached an object");
                assert_eq!(
                    (found.metadata.namespace.as_str(), found.metadata.name.as_str()),
                    ("default", name.as_str())
                );
            }
            Err(e) => {
                assert!(!valid, "{name:?} should have reached its object: {e}");
                assert!(e.is_not_found(), "{name:?} should be a clean 404: {e}");
            }
        }
    }

    let requests = pod_requests(&audit);
    for (name, _) in hostile_names() {
        let sent = requests.iter().filter(|r| r.2 == name).count();
        let expected = usize::from(!refused_unsent(&name));
        assert_eq!(sent, expected, "GETs of {name:?} the server saw: {requests:?}");
    }
    let sent: usize = hostile_names().iter().filter(|(n, _)| !refused_unsent(n)).count();
    assert_eq!(requests.len(), sent, "no request went anywhere else: {requests:?}");
    assert!(
        requests.iter().all(|(verb, ns, _)| verb == "get" && ns == "default"),
        "{requests:?}"
    );
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_of_owners_with_hostile_names_should_be_collected_after_a_404_each() {
    let dir = tempfile::tempdir().expect("temp dir");
    let audit = dir.path().join("audit.jsonl");
    let cluster = cluster();
    let owners = hostile_names()
        .into_iter()
        .enumerate()
        .map(|(i, (name, _))| ref_named("v1", "Pod", &name, &format!("6f1a4a3e-0000-4000-8000-{i:012}")))
        .collect();
    let stray: PartialObjectMeta = create_in(&cluster, &pods(), meta("default", "stray", owners));
    let (client, server) = serve(&cluster, &audit).await;
    let gc = start_collector(client).await;

    let gone = || cluster.get_object(&pods(), "default", "stray").is_err();
    within_real_time("the stray Pod collected", PATIENCE, async || gone()).await;
    gc.shutdown().await;
    server.abort();

    let requests = pod_requests(&audit);
    for (name, _) in hostile_names() {
        let gets = requests.iter().filter(|r| r.0 == "get" && r.2 == name).count();
        // At most one GET by the dependent's check of its owners and one by the virtual owner's own
        // check, when a worker takes it before the first 404 is cached.
        assert!(gets <= 2, "{name:?} was asked for {gets} times: {requests:?}");
    }
    assert!(
        requests.iter().all(|(_, ns, name)| ns != "other" && name != "victim"),
        "a request reached another namespace: {requests:?}"
    );
    assert!(
        cluster.get_object(&pods(), "other", "victim").is_ok(),
        "the victim lives"
    );
    assert!(requests.iter().any(|r| r.0 == "delete" && r.2 == stray.metadata.name));
}

/// The graph node of the owner `r` names, if any.
fn owner_node(h: &Harness, r: &OwnerReference) -> Option<kube_gc::graph::Handle> {
    h.gc.graph().get(&Uid::parse(&r.uid))
}

#[tokio::test(start_paused = true)]
async fn a_virtual_owner_of_a_kind_no_server_serves_should_leave_the_graph_with_its_last_dependent() {
    let h = Harness::start().await;
    let unserved = ref_named("x7q.example.com/v1", "Kx7q", "o", &"u".repeat(200));
    let first = h.create(&pods(), meta("default", "first", vec![unserved.clone()]));
    let second = h.create(&pods(), meta("default", "second", vec![unserved.clone()]));
    h.wait_in_graph(&[&first, &second]).await;
    h.settle().await;
    let owner = owner_node(&h, &unserved).expect("a virtual node for the owner");
    assert!(owner.is_virtual());
    assert!(
        h.exists(&pods(), &first) && h.exists(&pods(), &second),
        "an owner no one can read is never absent"
    );

    h.delete(&pods(), &first, policy(PropagationPolicy::Background));
    h.eventually("the first pod out of the graph", || !h.in_graph(&first))
        .await;
    h.settle().await;
    assert!(owner_node(&h, &unserved).is_some(), "kept while a dependent names it");

    h.edit(&pods(), &second, |m| m.owner_references.clear());
    h.eventually("the virtual owner dropped", || owner_node(&h, &unserved).is_none())
        .await;
    assert!(h.exists(&pods(), &second), "the pod that let go of it lives");

    // A new dependent makes a new placeholder, and is judged as before: never collected.
    let third = h.create(&pods(), meta("default", "third", vec![unserved.clone()]));
    h.wait_in_graph(&[&third]).await;
    h.settle().await;
    assert!(owner_node(&h, &unserved).is_some_and(|o| o.is_virtual()));
    assert!(h.exists(&pods(), &third));
}

#[tokio::test(start_paused = true)]
async fn a_deleted_dependent_of_an_owner_no_one_can_judge_should_leave_the_work_queue() {
    let h = Harness::start().await;
    let unserved = ref_named("x8q.example.com/v1", "Kx8q", "o", "owner-uid-8");
    let pod = h.create(&pods(), meta("default", "p", vec![unserved]));
    h.wait_in_graph(&[&pod]).await;
    // Its owner's kind cannot be mapped: the pod is retried, with a growing backoff (minutes
    // by now).
    h.wait(Duration::from_secs(600)).await;
    assert!(h.exists(&pods(), &pod));
    let queue = h.gc.attempt_to_delete();
    assert_eq!(queue.delayed_len(), 1, "the pod waits out its backoff");
    h.delete(&pods(), &pod, policy(PropagationPolicy::Background));
    h.eventually("the pod out of the graph", || !h.in_graph(&pod)).await;
    // Its retry is let go at once, not when its backoff ends: a tenant deleting such objects in
    // turn would otherwise grow the queue, and the memory the items hold, for as long.
    h.wait(Duration::from_secs(1)).await;
    assert_eq!(queue.len() + queue.delayed_len() + queue.processing_len(), 0);
}
