//! `kube-gc sim-apiserver` as a process of its own, as end-to-end tests run it: stopped by SIGTERM
//! with a watch open, it exits at once and saves its cluster (`--state-file`); started again on
//! the same port it serves the same objects, goes on with higher resourceVersions and answers a
//! watch from before the restart with 410 Gone; and its audit log (`--audit-log`) holds a line for
//! every request it answered. Bad combinations of flags are refused with one clear error.
//!
//! The server binds 127.0.0.1 only. Every wait is bounded: the server's start by the line that
//! announces its address, its exit by [`PATIENCE`], and each request by the client's read timeout.
//! A server still running when a test ends, passing or failing, is killed when its [`Child`]
//! drops.

use crate::support;

use axum::http::header;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};
use support::crd_manifest;
use support::process::Child;

/// How long the server may take to answer, or exit after SIGTERM. Its stop drains for one second
/// at most; the rest is slack for a loaded machine.
const PATIENCE: Duration = Duration::from_secs(10);

/// What the client sends as its User-Agent, to be found in the audit log.
const CLIENT: &str = "sim-apiserver-restart-test/1";

/// What the server prints once it accepts connections, before the address.
const SERVING: &str = "kube-gc sim-apiserver: serving ";

/// A `kube-gc sim-apiserver` process, killed if the test ends while it runs.
struct Server {
    process: Child,
    addr: SocketAddr,
}

impl Server {
    /// Starts the server with `args` after `--listen`, logging its stderr to `log`, and waits for
    /// it to announce its address.
    fn start(listen: &str, log: PathBuf, args: &[&str]) -> Server {
        let mut process = spawn(listen, &log, args);
        let addr = Child::address_in(&process.wait_for_line(SERVING));
        Server { process, addr }
    }

    /// Sends SIGTERM and waits for the exit; returns its status and how long it took.
    fn terminate(&mut self) -> (ExitStatus, Duration) {
        let started = Instant::now();
        self.process.signal(libc::SIGTERM);
        let status = self.process.wait(PATIENCE);
        (status, started.elapsed())
    }

    fn log(&self) -> String {
        self.process.log()
    }

    async fn client(&self) -> Client {
        let mut config = support::client_config(self.addr).await;
        config.default_retry = false;
        config.read_timeout = Some(PATIENCE);
        config
            .headers
            .push((header::USER_AGENT, CLIENT.parse().expect("a header value")));
        Client::try_from(config).expect("a plain-HTTP client")
    }
}

fn spawn(listen: &str, log: &Path, args: &[&str]) -> Child {
    let mut all = vec!["sim-apiserver", "--listen", listen];
    all.extend_from_slice(args);
    Child::kube_gc(&all, log)
}

fn widgets(client: Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    Api::namespaced_with(client, "default", &ApiResource::from_gvk(&gvk))
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).expect("a ConfigMap")
}

/// The audit log's lines as (verb, code, resource, name, userAgent).
fn audit(path: &Path) -> Vec<(String, u64, String, String, String)> {
    support::audit_lines(path)
        .iter()
        .map(|l| {
            let field = |k: &str| l[k].as_str().unwrap_or_else(|| panic!("no {k} in {l}")).to_string();
            let code = l["code"].as_u64().unwrap_or_else(|| panic!("no code in {l}"));
            (
                field("verb"),
                code,
                field("resource"),
                field("name"),
                field("userAgent"),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_should_keep_its_objects_and_send_older_watches_away_with_410() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let state = dir.path().join("state.jsonl");
    let state_arg = state.to_str().expect("a UTF-8 path");
    let audit_log = dir.path().join("audit.jsonl");
    let audit_arg = audit_log.to_str().expect("a UTF-8 path");

    let mut first = Server::start(
        "127.0.0.1:0",
        dir.path().join("first.log"),
        &["--state-file", state_arg, "--audit-log", audit_arg],
    );
    let client = first.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let kept = cms.create(&PostParams::default(), &config_map("kept")).await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(crd_manifest("widgets", "Widget")).unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let widget: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                                      "metadata": {"name": "w"}, "spec": {"size": 3}}))
    .unwrap();
    let widget = widgets(client.clone())
        .create(&PostParams::default(), &widget)
        .await
        .unwrap();
    let before = support::list_version(&cms).await;
    cms.create(&PostParams::default(), &config_map("last")).await.unwrap();
    let mut watch = cms.watch(&WatchParams::default(), "0").await.unwrap().boxed();
    let opened = tokio::time::timeout(PATIENCE, watch.next()).await;
    assert!(
        matches!(opened, Ok(Some(Ok(WatchEvent::Added(_))))),
        "the watch opens with the existing objects: {opened:?}"
    );

    let (status, took) = first.terminate();
    let log = first.log();
    assert!(
        status.success(),
        "the server exits cleanly on SIGTERM ({status}):\n{log}"
    );
    assert!(took < PATIENCE, "with a watch open the server took {took:?} to stop");
    assert!(log.contains(&format!("saved 8 objects to {state_arg}")), "{log}");
    drop(watch);

    let lines = audit(&audit_log);
    let mine: Vec<(&str, u64, &str, &str)> = lines
        .iter()
        .filter(|l| l.4 == CLIENT)
        .map(|(verb, code, resource, name, _)| (verb.as_str(), *code, resource.as_str(), name.as_str()))
        .collect();
    assert_eq!(
        mine,
        [
            ("create", 201, "configmaps", ""),
            ("create", 201, "customresourcedefinitions", ""),
            ("create", 201, "widgets", ""),
            ("list", 200, "configmaps", ""),
            ("create", 201, "configmaps", ""),
            ("watch", 200, "configmaps", ""),
        ],
        "every request reached the server, in order"
    );

    let mut second = Server::start(
        &first.addr.to_string(),
        dir.path().join("second.log"),
        &["--state-file", state_arg],
    );
    assert_eq!(second.addr, first.addr);
    let log = second.log();
    assert!(log.contains("restored 8 objects at resourceVersion"), "{log}");
    let client = second.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let restored = cms.get("kept").await.unwrap();
    assert_eq!(restored.uid(), kept.uid());
    assert_eq!(restored.resource_version(), kept.resource_version());
    assert_eq!(restored.data, kept.data);
    let restored_widget = widgets(client.clone()).get("w").await.unwrap();
    assert_eq!(restored_widget.uid(), widget.uid());
    assert_eq!(restored_widget.data["spec"], json!({"size": 3}));

    let last_rv: u64 = cms
        .get("last")
        .await
        .unwrap()
        .resource_version()
        .unwrap()
        .parse()
        .unwrap();
    let new = cms.create(&PostParams::default(), &config_map("new")).await.unwrap();
    let new_rv: u64 = new.resource_version().unwrap().parse().unwrap();
    assert!(
        new_rv > last_rv,
        "a create after the restart got {new_rv}, not above {last_rv}"
    );

    let mut old = cms.watch(&WatchParams::default(), &before).await.unwrap().boxed();
    match tokio::time::timeout(PATIENCE, old.next()).await {
        Ok(Some(Ok(WatchEvent::Error(status)))) => assert_eq!(status.code, 410, "{status:?}"),
        other => panic!("a watch from before the restart should get a 410 ERROR, got {other:?}"),
    }
    let (status, _) = second.terminate();
    assert!(
        status.success(),
        "the restarted server exits cleanly ({status}):\n{}",
        second.log()
    );
    assert!(second.log().contains("saved 9 objects"), "{}", second.log());
}

/// A continue token names a snapshot the server that issued it keeps in memory; the restarted
/// server has none of them, so it answers the token as a server whose storage compacted past it
/// (410 Expired) and the client lists again. Serving the page of whatever list the new server
/// happened to number the same would end the client's list early or with another type's objects:
/// a collector reading it would take the objects of the pages it missed for deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continue_token_from_before_a_restart_should_be_expired_not_another_lists_page() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let state = dir.path().join("state.jsonl");
    let state_arg = state.to_str().expect("a UTF-8 path");
    let mut first = Server::start(
        "127.0.0.1:0",
        dir.path().join("first.log"),
        &["--state-file", state_arg],
    );
    let cms: Api<ConfigMap> = Api::namespaced(first.client().await, "default");
    for name in ["a", "b", "c"] {
        cms.create(&PostParams::default(), &config_map(name)).await.unwrap();
    }
    let page = cms.list(&ListParams::default().limit(1)).await.unwrap();
    let token = page.metadata.continue_.clone().expect("more pages follow the first");
    let (status, _) = first.terminate();
    assert!(status.success(), "{}", first.log());

    let second = Server::start(
        &first.addr.to_string(),
        dir.path().join("second.log"),
        &["--state-file", state_arg],
    );
    let client = second.client().await;
    // The restarted server's first paginated list: of namespaces, of which there are four.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let listed = namespaces.list(&ListParams::default().limit(1)).await.unwrap();
    assert!(
        listed.metadata.continue_.is_some(),
        "the namespaces take more than one page"
    );
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    match cms.list(&ListParams::default().limit(1).continue_token(&token)).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"), "{status:?}")
        }
        other => panic!("the token {token:?} of the stopped server should be expired, got {other:?}"),
    }
    let relisted = cms.list(&ListParams::default()).await.unwrap();
    let names: Vec<String> = relisted.items.iter().map(ResourceExt::name_any).collect();
    assert_eq!(names, ["a", "b", "c"], "a new list reads every ConfigMap");
}

/// Runs the server with `args` and expects it to refuse to start: its exit status and stderr.
fn refused(dir: &Path, args: &[&str]) -> String {
    let log = dir.join("refused.log");
    let mut child = spawn("127.0.0.1:0", &log, args);
    let status = child.wait(PATIENCE);
    let log = child.log();
    assert!(!status.success(), "the server started with {args:?}:\n{log}");
    assert!(!log.contains("panicked"), "a refusal is an error, not a panic:\n{log}");
    assert!(!log.contains(SERVING), "the server served with {args:?}:\n{log}");
    log
}

#[test]
fn a_state_file_in_a_missing_directory_should_be_refused_at_start() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let state = dir.path().join("missing").join("state.jsonl");
    let log = refused(dir.path(), &["--state-file", state.to_str().unwrap()]);
    assert!(
        log.contains(&format!("the state file {} cannot be written", state.display())),
        "{log}"
    );
}

#[test]
fn a_preset_with_an_existing_state_file_should_be_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let state = dir.path().join("state.jsonl");
    std::fs::write(&state, "").expect("a state file");
    let log = refused(
        dir.path(),
        &["--state-file", state.to_str().unwrap(), "--preset", "small"],
    );
    let first = log.lines().next().unwrap_or_default();
    assert!(
        first.contains("--preset cannot be used with the existing state file"),
        "{log}"
    );
    assert!(first.contains(state.to_str().unwrap()), "{log}");
}

#[test]
fn a_corrupt_state_file_should_be_refused_naming_the_file_and_the_line() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let state = dir.path().join("state.jsonl");
    std::fs::write(&state, "{\"format\":\"kube-gc-sim-state\",\"version\":1,\n").expect("a state file");
    let log = refused(dir.path(), &["--state-file", state.to_str().unwrap()]);
    assert!(log.contains(&state.display().to_string()), "{log}");
    assert!(log.contains("line 1 is malformed"), "{log}");
}
