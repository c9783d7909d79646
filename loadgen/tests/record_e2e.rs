//! `loadgen record` end to end: the built binary records the simulated API server over HTTP, in a
//! process of its own, while the test changes the cluster, and `loadgen replay` reads what it
//! wrote.
//!
//! The server runs in-process, so the test both changes the cluster directly and sees every
//! request the recorders make: a change is made only once each recorder has opened its watches,
//! which is what makes the expected ADDED, MODIFIED and DELETED events certain rather than timed.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use kube_gc::api::{
    DeleteOptions, Gvr, ObjectMeta, OwnerReference, PartialObjectMeta, PatchType, WatchEvent, WatchEventType,
};
use kube_gc::sim::http::{self, ServerOptions};
use kube_gc::sim::SimCluster;
use loadgen::stream::StreamReader;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a recording runs. Its clock starts after discovery, so it covers the lists, the
/// watches opening, the test's changes (made at once after that) and their events arriving,
/// with seconds to spare on a loaded machine.
const RECORDING: &str = "5s";

/// How long the test waits for a recorder to open its watches, or to exit, before it fails.
const PATIENCE: Duration = Duration::from_secs(60);

fn deployments() -> Gvr {
    Gvr::new("apps", "v1", "deployments")
}
fn replica_sets() -> Gvr {
    Gvr::new("apps", "v1", "replicasets")
}
fn pods() -> Gvr {
    Gvr::new("", "v1", "pods")
}
fn config_maps() -> Gvr {
    Gvr::new("", "v1", "configmaps")
}

/// The resources whose watches must be open before the test changes anything.
const CHANGED: [&str; 2] = ["/api/v1/configmaps", "/api/v1/pods"];

/// The paths of the watch requests the server has received, in order.
#[derive(Default)]
struct Watches(Mutex<Vec<String>>);

impl Watches {
    fn opened(&self, path: &str) -> usize {
        self.0
            .lock()
            .expect("not poisoned")
            .iter()
            .filter(|p| *p == path)
            .count()
    }
}

async fn note_watches(State(watches): State<Arc<Watches>>, request: Request, next: Next) -> Response {
    let query = request.uri().query().unwrap_or_default();
    if query.split('&').any(|p| p == "watch=true" || p == "watch=1") {
        let path = request.uri().path().to_string();
        watches.0.lock().expect("not poisoned").push(path);
    }
    next.run(request).await
}

/// The simulated API server on a loopback port, with a kubeconfig for it.
struct Server {
    cluster: Arc<SimCluster>,
    watches: Arc<Watches>,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    /// Serves the cluster; dropping it stops the server.
    _runtime: tokio::runtime::Runtime,
}

impl Server {
    fn start(cluster: SimCluster) -> Server {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let cluster = Arc::new(cluster);
        let watches = Arc::new(Watches::default());
        let app = http::router(Arc::clone(&cluster), ServerOptions::default())
            .layer(axum::middleware::from_fn_with_state(Arc::clone(&watches), note_watches));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("a loopback port");
        let addr = listener.local_addr().expect("the bound address");
        runtime.spawn(async move { axum::serve(listener, app).await });
        let dir = tempfile::tempdir().expect("a temporary directory");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, http::kubeconfig(addr)).expect("write the kubeconfig");
        Server {
            cluster,
            watches,
            dir,
            kubeconfig,
            _runtime: runtime,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// A `loadgen record` process, killed if the test ends before it does.
struct Recorder {
    child: Option<Child>,
    output: PathBuf,
    log: PathBuf,
}

impl Recorder {
    fn start(server: &Server, output: &str) -> Recorder {
        let output = server.path(output);
        let log = output.with_extension("log");
        let child = Command::new(env!("CARGO_BIN_EXE_loadgen"))
            .arg("record")
            .arg("--kubeconfig")
            .arg(&server.kubeconfig)
            .arg("-o")
            .arg(&output)
            .args(["--duration", RECORDING, "--quiet"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("the recorder's log"))
            .spawn()
            .expect("run loadgen record");
        Recorder {
            child: Some(child),
            output,
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Fails the test if the recorder has already exited: it can no longer open its watches.
    fn check_running(&mut self) {
        let child = self.child.as_mut().expect("running");
        if let Some(status) = child.try_wait().expect("poll loadgen record") {
            panic!(
                "loadgen record exited ({status}) before watching everything the test changes:\n{}",
                self.log()
            );
        }
    }

    /// Waits for the recorder to finish, which must succeed.
    fn finish(&mut self) {
        let mut child = self.child.take().expect("running");
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for loadgen record") {
                break status;
            }
            if started.elapsed() > PATIENCE {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "loadgen record --duration {RECORDING} still running after {PATIENCE:?}: likely stuck ending \
                     its watches\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let log = self.log();
        assert!(status.success(), "loadgen record failed ({status}):\n{log}");
        // The server answered every list and watch: no resource ever failed and backed off.
        assert!(!log.contains("retrying"), "loadgen record met errors:\n{log}");
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn object(namespace: &str, name: &str, owner: Option<&PartialObjectMeta>) -> PartialObjectMeta {
    PartialObjectMeta {
        metadata: ObjectMeta {
            name: name.into(),
            namespace: namespace.into(),
            owner_references: owner.map(owned_by).into_iter().collect(),
            ..ObjectMeta::default()
        },
        ..PartialObjectMeta::default()
    }
}

fn owned_by(owner: &PartialObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: owner.api_version.clone(),
        kind: owner.kind.clone(),
        name: owner.metadata.name.clone(),
        uid: owner.metadata.uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// What the cluster holds before the recorders start.
struct Initial {
    deployment: PartialObjectMeta,
    replica_set: PartialObjectMeta,
    pods: Vec<PartialObjectMeta>,
    config_map: PartialObjectMeta,
}

/// A Deployment → ReplicaSet → two Pods tree, a ConfigMap, and an Event of each Event API.
fn populate(cluster: &SimCluster) -> Initial {
    let create = |gvr: &Gvr, obj: PartialObjectMeta| cluster.create(gvr, obj).expect("create");
    let deployment = create(&deployments(), object("shop", "web", None));
    let replica_set = create(&replica_sets(), object("shop", "web-7d9f", Some(&deployment)));
    let pods = ["web-7d9f-a", "web-7d9f-b"].map(|name| create(&pods(), object("shop", name, Some(&replica_set))));
    let config_map = create(&config_maps(), object("shop", "settings", None));
    for group in ["", "events.k8s.io"] {
        let mut event = object("shop", "web.17f3", None);
        event.rest.insert("reason".into(), json!("ScalingReplicaSet"));
        create(&Gvr::new(group, "v1", "events"), event);
    }
    Initial {
        deployment,
        replica_set,
        pods: pods.to_vec(),
        config_map,
    }
}

/// Waits until `recorders` have each opened a watch on every resource in [`CHANGED`].
fn wait_for_watches(server: &Server, recorders: &mut [&mut Recorder]) {
    let started = Instant::now();
    while CHANGED.iter().any(|path| server.watches.opened(path) < recorders.len()) {
        for recorder in recorders.iter_mut() {
            recorder.check_running();
        }
        assert!(
            started.elapsed() < PATIENCE,
            "not every recorder opened a watch on each of {CHANGED:?} within {PATIENCE:?}; watches so far: {:?}",
            server.watches.0.lock().expect("not poisoned")
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The test's changes: a ConfigMap created, adopted by the Deployment, then deleted; a Pod deleted.
/// Returns the new ConfigMap's UID.
fn change(cluster: &SimCluster, initial: &Initial) -> String {
    let late = cluster
        .create(&config_maps(), object("shop", "late", None))
        .expect("create");
    let adopt = json!({"metadata": {"ownerReferences": [owned_by(&initial.deployment)]}});
    cluster
        .patch_object(&config_maps(), "shop", "late", PatchType::Merge, &adopt)
        .expect("patch");
    let delete = |gvr: &Gvr, name: &str| {
        let gone = cluster
            .delete_object(gvr, "shop", name, &DeleteOptions::default())
            .expect("delete");
        assert!(gone.is_removed(), "{name} has no finalizers and goes at once");
    };
    delete(&config_maps(), "late");
    delete(&pods(), "web-7d9f-b");
    late.metadata.uid
}

fn read(path: &Path) -> Vec<WatchEvent> {
    StreamReader::open(path, false, |f| Box::new(f))
        .expect("open the recording")
        .map(|r| r.expect("a valid event").event)
        .collect()
}

/// The events of each UID, in order.
fn by_uid(events: &[WatchEvent]) -> BTreeMap<String, Vec<&WatchEvent>> {
    let mut by_uid: BTreeMap<String, Vec<&WatchEvent>> = BTreeMap::new();
    for e in events {
        by_uid.entry(e.object.metadata.uid.clone()).or_default().push(e);
    }
    by_uid
}

fn types(events: &[&WatchEvent]) -> Vec<WatchEventType> {
    events.iter().map(|e| e.event_type).collect()
}

/// `loadgen replay --mode builder` of `stream`, which must succeed; its JSON report.
fn replay(stream: &Path, report: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .arg("replay")
        .arg(stream)
        .args(["--mode", "builder", "--quiet", "--report"])
        .arg(report)
        .output()
        .expect("run loadgen replay");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "loadgen replay failed ({}):\n{stderr}",
        out.status
    );
    serde_json::from_slice(&std::fs::read(report).expect("a report")).expect("JSON")
}

#[test]
fn a_recording_should_hold_the_initial_objects_and_later_changes_in_order_and_replay() {
    let server = Server::start(SimCluster::new());
    let initial = populate(&server.cluster);
    let mut plain = Recorder::start(&server, "recording.jsonl");
    let mut zstd = Recorder::start(&server, "recording.jsonl.zst");
    wait_for_watches(&server, &mut [&mut plain, &mut zstd]);
    let late = change(&server.cluster, &initial);
    plain.finish();
    zstd.finish();

    let events = read(&plain.output);
    let of = by_uid(&events);

    // Every initial object, listed as ADDED with its own type and owners.
    let tree = [
        &initial.deployment,
        &initial.replica_set,
        &initial.pods[0],
        &initial.pods[1],
    ];
    for expected in tree.into_iter().chain([&initial.config_map]) {
        let meta = &expected.metadata;
        let seen = of
            .get(&meta.uid)
            .unwrap_or_else(|| panic!("{} not recorded", meta.name));
        let added = seen[0];
        assert_eq!(added.event_type, WatchEventType::Added, "{}", meta.name);
        assert_eq!(
            (added.object.api_version.as_str(), added.object.kind.as_str()),
            (expected.api_version.as_str(), expected.kind.as_str()),
            "{}",
            meta.name
        );
        assert_eq!(
            (
                added.object.metadata.name.as_str(),
                added.object.metadata.namespace.as_str()
            ),
            (meta.name.as_str(), "shop")
        );
        assert_eq!(
            added.object.metadata.owner_references, meta.owner_references,
            "{}",
            meta.name
        );
    }
    assert_eq!(
        initial.pods[0].metadata.owner_references[0].uid,
        initial.replica_set.metadata.uid
    );
    assert!(
        events
            .iter()
            .all(|e| e.object.kind != "PartialObjectMetadata" && e.object.api_version != "meta.k8s.io/v1"),
        "a metadata envelope's type was recorded as the object's"
    );
    assert!(
        events.iter().all(|e| e.object.kind != "Event"),
        "Events are recorded only with --include-events"
    );

    // The later changes, as the watches saw them.
    use WatchEventType::{Added, Deleted, Modified};
    let late_events = &of[&late];
    assert_eq!(types(late_events), [Added, Modified, Deleted]);
    assert!(late_events[0].object.metadata.owner_references.is_empty());
    assert_eq!(
        late_events[1].object.metadata.owner_references,
        [owned_by(&initial.deployment)]
    );
    assert_eq!(types(&of[&initial.pods[1].metadata.uid]), [Added, Deleted]);
    assert_eq!(types(&of[&initial.pods[0].metadata.uid]), [Added]);
    for (uid, seen) in &of {
        let versions: Vec<u64> = seen
            .iter()
            .map(|e| e.object.metadata.resource_version.parse().expect("a number"))
            .collect();
        assert!(
            versions.is_sorted(),
            "{uid}: resourceVersions out of order: {versions:?}"
        );
    }

    // The zstd recording saw the same history.
    let compressed = std::fs::read(&zstd.output).expect("the zstd recording");
    assert_eq!(compressed[..4], [0x28, 0xb5, 0x2f, 0xfd], "a zstd frame");
    let unpacked = read(&zstd.output);
    assert_eq!(by_uid(&unpacked), of, "the two recordings differ");

    // Both replay into the graph builders, every owner found among the recorded objects.
    for recording in [&plain.output, &zstd.output] {
        let report = replay(recording, &server.path("report.json"));
        assert_eq!(report["events"].as_u64(), Some(events.len() as u64), "{report}");
        assert_eq!(report["virtual_nodes"].as_u64(), Some(0), "{report}");
    }
}
