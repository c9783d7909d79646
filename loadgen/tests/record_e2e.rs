//! `loadgen record` end to end: the built binary records the simulated API server over HTTP, in a
//! process of its own, while the test changes the cluster, and `loadgen replay` reads what it
//! wrote. It records by watch-list, falls back to lists when the server's `WatchList` gate is off,
//! and lists when its own `WatchListClient` gate is; each way records the same history.
//!
//! The server runs in-process, so the test both changes the cluster directly and sees every
//! request the recorders make, in its audit log and, with their queries, in a middleware: a change
//! is made only once the audit log shows each recorder's watches answered, which is after the
//! server has taken the state a watch-list streams, and what makes the expected ADDED, MODIFIED
//! and DELETED events certain rather than timed.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use kube_gc::api::{
    DeleteOptions, Gvr, ObjectMeta, OwnerReference, PartialObjectMeta, PatchType, WatchEvent, WatchEventType,
};
use kube_gc_sim::http::{self, ServerOptions};
use kube_gc_sim::SimCluster;
use loadgen::stream::StreamReader;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
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
const CHANGED: [&str; 2] = ["configmaps", "pods"];

/// The queries of the watch requests the server has received, in order.
#[derive(Default)]
struct Watches(Mutex<Vec<String>>);

impl Watches {
    fn queries(&self) -> Vec<String> {
        self.0.lock().expect("not poisoned").clone()
    }
}

async fn note_watches(State(watches): State<Arc<Watches>>, request: Request, next: Next) -> Response {
    let query = request.uri().query().unwrap_or_default();
    if query.split('&').any(|p| p == "watch=true" || p == "watch=1") {
        watches.0.lock().expect("not poisoned").push(query.to_string());
    }
    next.run(request).await
}

/// One line of the server's audit log.
struct Audited {
    verb: String,
    group: String,
    resource: String,
    code: u64,
}

/// The simulated API server on a loopback port, with a kubeconfig for it and an audit log.
struct Server {
    cluster: Arc<SimCluster>,
    watches: Arc<Watches>,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    audit_log: PathBuf,
    /// Serves the cluster; dropping it stops the server.
    _runtime: tokio::runtime::Runtime,
}

impl Server {
    /// A server with the `WatchList` gate as `watch_list` says, as `sim-apiserver
    /// --feature-gates WatchList=…` sets it.
    fn start(cluster: SimCluster, watch_list: bool) -> Server {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let audit_log = dir.path().join("audit.jsonl");
        let options = ServerOptions {
            watch_list,
            audit: Some(http::AuditLog::create(&audit_log).expect("the audit log")),
            ..ServerOptions::default()
        };
        let cluster = Arc::new(cluster);
        let watches = Arc::new(Watches::default());
        let app = http::router(Arc::clone(&cluster), options)
            .layer(axum::middleware::from_fn_with_state(Arc::clone(&watches), note_watches));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("a loopback port");
        let addr = listener.local_addr().expect("the bound address");
        runtime.spawn(async move { axum::serve(listener, app).await });
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, http::kubeconfig(addr)).expect("write the kubeconfig");
        Server {
            cluster,
            watches,
            dir,
            kubeconfig,
            audit_log,
            _runtime: runtime,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The requests on resources answered so far; a line still being written is left out.
    fn audited(&self) -> Vec<Audited> {
        let text = std::fs::read_to_string(&self.audit_log).expect("the audit log");
        let lines = text.split_inclusive('\n').filter(|line| line.ends_with('\n'));
        let values = lines.map(|line| serde_json::from_str::<serde_json::Value>(line).expect("a JSON line"));
        let field = |v: &serde_json::Value, k: &str| v[k].as_str().expect("a string field").to_string();
        values
            .filter(|v| !v["resource"].as_str().unwrap_or_default().is_empty())
            .map(|v| Audited {
                verb: field(&v, "verb"),
                group: field(&v, "group"),
                resource: field(&v, "resource"),
                code: v["code"].as_u64().expect("a code"),
            })
            .collect()
    }

    /// How many watches of the core `resource` the server has answered with 200.
    fn watches_answered(&self, resource: &str) -> usize {
        let audited = self.audited();
        let answered = audited.iter().filter(|a| a.verb == "watch" && a.code == 200);
        answered
            .filter(|a| a.group.is_empty() && a.resource == resource)
            .count()
    }
}

/// A `loadgen record` process, killed if the test ends before it does.
struct Recorder {
    child: Option<Child>,
    output: PathBuf,
    log: PathBuf,
    summary: PathBuf,
}

impl Recorder {
    /// Records `server` into the file `output`, with `flags` added to the command line.
    fn start(server: &Server, output: &str, flags: &[&str]) -> Recorder {
        let output = server.path(output);
        let log = output.with_extension("log");
        let summary = output.with_extension("summary");
        let child = Command::new(env!("CARGO_BIN_EXE_loadgen"))
            .arg("record")
            .arg("--kubeconfig")
            .arg(&server.kubeconfig)
            .arg("-o")
            .arg(&output)
            .args(["--duration", RECORDING, "--quiet"])
            .args(flags)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&summary).expect("the recorder's summary"))
            .stderr(std::fs::File::create(&log).expect("the recorder's log"))
            .spawn()
            .expect("run loadgen record");
        Recorder {
            child: Some(child),
            output,
            log,
            summary,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// What the recorder printed when it finished: the file written and the summary.
    fn summary(&self) -> String {
        std::fs::read_to_string(&self.summary).expect("the recorder's summary")
    }

    /// The resources of the summary's per-resource counts, as `group/version/resource`.
    fn resources(&self) -> BTreeSet<String> {
        let summary = self.summary();
        let counts = summary.lines().filter_map(|line| line.strip_prefix("  "));
        counts
            .map(|line| line.split_once(": ").expect("`resource: count`").0.to_string())
            .collect()
    }

    /// The log's lines that say a resource fell back to lists.
    fn fallbacks(&self) -> Vec<String> {
        let log = self.log();
        let lines = log.lines().filter(|line| line.contains(": no watch-list ("));
        lines.map(str::to_string).collect()
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

/// Waits until the server has answered a watch of every resource in [`CHANGED`] for each of
/// `recorders`.
fn wait_for_watches(server: &Server, recorders: &mut [Recorder]) {
    let started = Instant::now();
    while CHANGED.iter().any(|r| server.watches_answered(r) < recorders.len()) {
        for recorder in recorders.iter_mut() {
            recorder.check_running();
        }
        assert!(
            started.elapsed() < PATIENCE,
            "not every recorder had a watch on each of {CHANGED:?} answered within {PATIENCE:?}; watches so far: {:?}",
            server.watches.queries()
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

/// A run: the cluster populated, the recorders started, the changes made once they watch, and
/// every recorder finished.
struct Run {
    server: Server,
    initial: Initial,
    /// The UID of the ConfigMap the changes created and deleted.
    late: String,
    recorders: Vec<Recorder>,
}

/// A run against a server whose `WatchList` gate is `watch_list`, with one recorder per
/// (output file, flags).
fn run(watch_list: bool, recorders: &[(&str, &[&str])]) -> Run {
    let server = Server::start(SimCluster::new(), watch_list);
    let initial = populate(&server.cluster);
    let mut recorders: Vec<Recorder> = recorders
        .iter()
        .map(|(output, flags)| Recorder::start(&server, output, flags))
        .collect();
    wait_for_watches(&server, &mut recorders);
    let late = change(&server.cluster, &initial);
    for recorder in &mut recorders {
        recorder.finish();
    }
    Run {
        server,
        initial,
        late,
        recorders,
    }
}

/// Checks that `events` are the run's history, exactly: the initial objects listed as ADDED with
/// their own types and owners, then the changes as the watches saw them, and nothing else.
fn check_history(events: &[WatchEvent], run: &Run) {
    let initial = &run.initial;
    let of = by_uid(events);

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

    // The later changes, as the watches saw them, and nothing more: every recorded object with
    // its events' types.
    use WatchEventType::{Added, Deleted, Modified};
    let late_events = &of[&run.late];
    assert!(late_events[0].object.metadata.owner_references.is_empty());
    assert_eq!(
        late_events[1].object.metadata.owner_references,
        [owned_by(&initial.deployment)]
    );
    let uid = |object: &PartialObjectMeta| object.metadata.uid.clone();
    let expected = BTreeMap::from([
        (uid(&initial.deployment), vec![Added]),
        (uid(&initial.replica_set), vec![Added]),
        (uid(&initial.pods[0]), vec![Added]),
        (uid(&initial.pods[1]), vec![Added, Deleted]),
        (uid(&initial.config_map), vec![Added]),
        (run.late.clone(), vec![Added, Modified, Deleted]),
    ]);
    let recorded: BTreeMap<String, Vec<WatchEventType>> =
        of.iter().map(|(uid, seen)| (uid.clone(), types(seen))).collect();
    assert_eq!(recorded, expected);
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
}

/// Checks the recorder's summary: its resources, all recorded by `listing` (`watch-list` or
/// `list`).
fn check_recorded_by(recorder: &Recorder, listing: &str) {
    let summary = recorder.summary();
    let resources = recorder.resources().len();
    assert!(resources >= 10, "the simulator's types are recorded:\n{summary}");
    let counts = match listing {
        "watch-list" => format!("resources: {resources}, by watch-list: {resources}, by list: 0"),
        _ => format!("resources: {resources}, by watch-list: 0, by list: {resources}"),
    };
    assert!(summary.contains(&counts), "expected `{counts}` in:\n{summary}");
}

/// The audited requests of one verb: how many for each `group/resource`.
fn audited_by_resource(server: &Server, verb: &str, code: u64) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for audited in server.audited() {
        if audited.verb == verb && audited.code == code {
            *counts
                .entry(format!("{}/{}", audited.group, audited.resource))
                .or_default() += 1;
        }
    }
    counts
}

#[test]
fn a_watch_list_recording_should_hold_the_initial_objects_and_later_changes_in_order_and_replay() {
    let run = run(true, &[("recording.jsonl", &[]), ("recording.jsonl.zst", &[])]);
    let [plain, zstd] = &run.recorders[..] else {
        unreachable!("two recorders")
    };
    let events = read(&plain.output);
    check_history(&events, &run);

    // The zstd recording saw the same history.
    let compressed = std::fs::read(&zstd.output).expect("the zstd recording");
    assert_eq!(compressed[..4], [0x28, 0xb5, 0x2f, 0xfd], "a zstd frame");
    let unpacked = read(&zstd.output);
    assert_eq!(by_uid(&unpacked), by_uid(&events), "the two recordings differ");

    // By watch-list alone: no LIST, and every watch asked for the initial events.
    assert_eq!(audited_by_resource(&run.server, "list", 200), BTreeMap::new());
    let queries = run.server.watches.queries();
    let resources = plain.resources().len();
    assert!(
        queries.len() >= 2 * resources,
        "a watch per resource and recorder: {queries:?}"
    );
    for query in &queries {
        for param in [
            "sendInitialEvents=true",
            "resourceVersionMatch=NotOlderThan",
            "allowWatchBookmarks=true",
        ] {
            assert!(
                query.split('&').any(|p| p == param),
                "{param} missing from the watch {query}"
            );
        }
    }
    for recorder in [plain, zstd] {
        assert_eq!(recorder.fallbacks(), Vec::<String>::new());
        check_recorded_by(recorder, "watch-list");
    }

    // Both replay into the graph builders, every owner found among the recorded objects.
    for recording in [&plain.output, &zstd.output] {
        let report = replay(recording, &run.server.path("report.json"));
        assert_eq!(report["events"].as_u64(), Some(events.len() as u64), "{report}");
        assert_eq!(report["virtual_nodes"].as_u64(), Some(0), "{report}");
    }
}

#[test]
fn with_the_servers_watch_list_gate_off_each_resource_should_fall_back_to_lists_once_and_record_the_same() {
    let run = run(false, &[("fallback.jsonl", &[])]);
    let recorder = &run.recorders[0];
    check_history(&read(&recorder.output), &run);
    check_recorded_by(recorder, "list");

    // One line per resource, naming it and the server's reason.
    let fallbacks = recorder.fallbacks();
    let mut named: Vec<String> = fallbacks
        .iter()
        .map(|line| {
            let gvr = line
                .strip_prefix("loadgen: ")
                .and_then(|l| l.split_once(": no watch-list ("));
            gvr.unwrap_or_else(|| panic!("a fallback names its resource first: {line}"))
                .0
                .to_string()
        })
        .collect();
    named.sort();
    assert_eq!(
        named,
        recorder.resources().into_iter().collect::<Vec<_>>(),
        "{fallbacks:#?}"
    );
    let reason = "the server answered 422 Invalid: ";
    let gate = "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled";
    for line in &fallbacks {
        assert!(line.contains(reason) && line.contains(gate), "{line}");
    }

    // One refused watch-list per resource, never tried again, and lists instead.
    let refused = audited_by_resource(&run.server, "watch", 422);
    assert_eq!(refused.len(), named.len(), "{refused:?}");
    assert!(refused.values().all(|n| *n == 1), "{refused:?}");
    let lists = audited_by_resource(&run.server, "list", 200);
    assert_eq!(lists.keys().collect::<Vec<_>>(), refused.keys().collect::<Vec<_>>());
}

#[test]
fn with_the_clients_watch_list_gate_off_it_should_list_and_record_the_same() {
    let run = run(true, &[("listed.jsonl", &["--feature-gates", "WatchListClient=false"])]);
    let recorder = &run.recorders[0];
    check_history(&read(&recorder.output), &run);
    check_recorded_by(recorder, "list");
    assert_eq!(recorder.fallbacks(), Vec::<String>::new());

    let lists = audited_by_resource(&run.server, "list", 200);
    assert_eq!(
        lists.len(),
        recorder.resources().len(),
        "a list per resource: {lists:?}"
    );
    let queries = run.server.watches.queries();
    assert!(
        queries.iter().all(|q| !q.contains("sendInitialEvents")),
        "no watch-list: {queries:?}"
    );
}
