//! `kube-gc tree` against the simulated API server over HTTP: the program is run as a process,
//! as a person runs it, with the kubeconfig the server writes, and its output is read column by
//! column (ages change with the clock, so only names and states are compared exactly).
//!
//! Each test serves a fresh [`SimCluster`] on a loopback port from a runtime of its own; objects
//! are made directly in the cluster, so most tests need neither kubectl nor a collector. The WHY
//! column's test runs the whole collector over HTTP and serves its endpoints, as `kube-gc run`
//! does; the plugin's test runs `kubectl gc tree` through a link named `kubectl-gc` on `PATH`,
//! and is skipped (with a note) where kubectl is missing, except in CI.

use crate::support::process::{kubectl_available, run_bounded, Run, KUBECTL_TIMEOUT};
use crate::support::{self, blocking_ref_to, create_in, meta, policy, ref_named, ref_to};
use kube_gc::api::{Gvr, OwnerReference, PartialObjectMeta, PropagationPolicy};
use kube_gc_sim::http;
use kube_gc_sim::SimCluster;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// The namespace the trees are drawn in.
const NS: &str = "shop";

/// A collector address where nothing listens: port 1 of loopback refuses at once.
const NO_COLLECTOR: &str = "http://127.0.0.1:1";

/// A simulated API server on a loopback port, with a kubeconfig for it.
struct Served {
    cluster: Arc<SimCluster>,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    addr: std::net::SocketAddr,
    /// Serves the cluster (and the collector, when one runs); dropping it stops them.
    runtime: tokio::runtime::Runtime,
}

impl Served {
    fn start() -> Served {
        let support::OwnServer {
            runtime,
            cluster,
            addr,
            dir,
            kubeconfig,
        } = support::serve_on_own_runtime(SimCluster::new(), http::ServerOptions::default());
        Served {
            cluster,
            dir,
            kubeconfig,
            addr,
            runtime,
        }
    }

    fn create(&self, gvr: &Gvr, name: &str, owners: Vec<OwnerReference>) -> PartialObjectMeta {
        create_in(&self.cluster, gvr, meta(NS, name, owners))
    }

    /// `kube-gc tree ARGS --kubeconfig … --collector COLLECTOR`, run to its end.
    fn tree_with(&self, collector: &str, args: &[&str]) -> Run {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kube-gc"));
        command
            .arg("tree")
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--collector", collector])
            .env_remove("KUBECONFIG")
            .env("RUST_LOG", "off")
            .env("RUST_BACKTRACE", "0");
        run_bounded(&mut command, KUBECTL_TIMEOUT)
    }

    /// The tree of `args` with no collector, which must be drawn; its rows.
    fn tree(&self, args: &[&str]) -> Vec<Vec<String>> {
        let run = self.tree_with(NO_COLLECTOR, args);
        assert!(run.status.success(), "tree {args:?} failed:\n{}", run.stderr);
        assert!(
            run.stderr.contains("no collector at http://127.0.0.1:1"),
            "one note says the WHY column is left out:\n{}",
            run.stderr
        );
        rows(&run.stdout)
    }

    /// The tree of `args`, which must fail; its stderr.
    fn fails(&self, args: &[&str]) -> String {
        let run = self.tree_with(NO_COLLECTOR, args);
        assert!(
            !run.status.success(),
            "tree {args:?} should have failed:\n{}",
            run.stdout
        );
        run.stderr
    }
}

/// The cells of each line of a tree, header included: columns are two or more spaces apart, and
/// no cell holds two spaces in a row.
fn rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|line| {
            line.split("  ")
                .map(str::trim)
                .filter(|cell| !cell.is_empty())
                .map(str::to_string)
                .collect()
        })
        .collect()
}

/// NAME and STATE of each row after the header.
fn names_and_states(rows: &[Vec<String>]) -> Vec<(&str, &str)> {
    rows.iter()
        .skip(1)
        .map(|r| (r[0].as_str(), r.get(1).map_or("", String::as_str)))
        .collect()
}

fn deployments() -> Gvr {
    support::deployments()
}
fn replica_sets() -> Gvr {
    support::replicasets()
}
fn pods() -> Gvr {
    support::pods()
}
fn config_maps() -> Gvr {
    support::configmaps()
}

/// Deployment `web` → ReplicaSet `web-1` → Pods `web-1-a` (also owned by ConfigMap `settings`)
/// and `web-1-b` (also naming a ReplicaSet `gone` that does not exist); and Deployment `old` →
/// ReplicaSet `old-1`, deleted in the foreground with no collector to carry it out.
fn shop(served: &Served) {
    let web = served.create(&deployments(), "web", vec![]);
    let rs = served.create(&replica_sets(), "web-1", vec![blocking_ref_to(&web)]);
    let settings = served.create(&config_maps(), "settings", vec![]);
    served.create(&pods(), "web-1-a", vec![blocking_ref_to(&rs), ref_to(&settings)]);
    let gone = ref_named("apps/v1", "ReplicaSet", "gone", "0a0a0a0a-0000-4000-8000-000000000000");
    served.create(&pods(), "web-1-b", vec![blocking_ref_to(&rs), gone]);
    let old = served.create(&deployments(), "old", vec![]);
    served.create(&replica_sets(), "old-1", vec![blocking_ref_to(&old)]);
    served
        .cluster
        .delete_object(&deployments(), NS, "old", &policy(PropagationPolicy::Foreground))
        .expect("delete old in the foreground");
}

#[test]
fn tree_should_draw_a_deployments_replica_set_and_pods_below_it() {
    let served = Served::start();
    shop(&served);
    let rows = served.tree(&["deploy/web", "-n", NS]);
    assert_eq!(rows[0], ["NAME", "STATE", "AGE"], "no WHY column without a collector");
    assert_eq!(
        names_and_states(&rows),
        [
            ("Deployment/web", "present"),
            ("└─ReplicaSet/web-1", "present"),
            ("├─Pod/web-1-a", "present"),
            ("└─Pod/web-1-b", "present"),
        ]
    );
    // KIND NAME as two arguments, and kind.group, give the same tree.
    let again = served.tree(&["deployments.apps", "web", "-n", NS]);
    assert_eq!(names_and_states(&again), names_and_states(&rows));
}

#[test]
fn tree_should_draw_two_owners_an_absent_one_and_a_foreground_deletion() {
    let served = Served::start();
    shop(&served);
    let two_owners = served.tree(&["pod/web-1-a", "-n", NS]);
    assert_eq!(
        names_and_states(&two_owners),
        [
            ("┌─ConfigMap/settings", "present"),
            ("│ ┌─Deployment/web", "present"),
            ("├─ReplicaSet/web-1", "present"),
            ("Pod/web-1-a", "present"),
        ]
    );
    let absent_owner = served.tree(&["po/web-1-b", "-n", NS]);
    assert_eq!(
        names_and_states(&absent_owner),
        [
            ("┌─ReplicaSet/gone", "absent"),
            ("│ ┌─Deployment/web", "present"),
            ("├─ReplicaSet/web-1", "present"),
            ("Pod/web-1-b", "present"),
        ]
    );
    assert_eq!(absent_owner[1][2], "-", "an absent owner has no age");
    let foreground = served.tree(&["Deployment/old", "-n", NS]);
    assert_eq!(
        names_and_states(&foreground),
        [
            ("Deployment/old", "waiting on 1 dependent (foreground)"),
            ("└─ReplicaSet/old-1", "present"),
        ]
    );
}

#[test]
fn tree_should_refuse_a_bad_kind_a_missing_object_and_an_unreachable_server() {
    let served = Served::start();
    shop(&served);
    let bad_kind = served.fails(&["gadget/web", "-n", NS]);
    assert!(
        bad_kind.contains("no resource type \"gadget\" is served by the cluster"),
        "{bad_kind}"
    );
    let missing = served.fails(&["rs/web-2", "-n", NS]);
    assert!(
        missing.contains("replicasets.apps \"web-2\" not found in namespace \"shop\""),
        "{missing}"
    );
    let no_name = served.fails(&["deploy", "-n", NS]);
    assert!(no_name.contains("expected KIND/NAME"), "{no_name}");
    // A kubeconfig whose server is gone: its port, once free, refuses connections.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let closed_addr = closed.local_addr().expect("the bound address");
    drop(closed);
    let dead = served.dir.path().join("dead-kubeconfig");
    std::fs::write(&dead, http::kubeconfig(closed_addr)).expect("write the kubeconfig");
    let mut command = Command::new(env!("CARGO_BIN_EXE_kube-gc"));
    command
        .args(["tree", "deploy/web", "--kubeconfig"])
        .arg(&dead)
        .env_remove("RUST_LOG");
    let unreachable = run_bounded(&mut command, KUBECTL_TIMEOUT);
    assert!(!unreachable.status.success());
    assert!(
        unreachable.stderr.contains("cannot reach the API server"),
        "{}",
        unreachable.stderr
    );
    assert!(
        !unreachable.stderr.contains("kube_client"),
        "one message, not kube-rs's log of the same failure too:\n{}",
        unreachable.stderr
    );
}

#[test]
fn kubectl_gc_tree_should_run_the_plugin_through_a_link_on_path() {
    let served = Served::start();
    shop(&served);
    let bin = served.dir.path().join("bin");
    std::fs::create_dir(&bin).expect("a bin directory");
    let link = bin.join("kubectl-gc");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kube-gc"), &link).expect("link kubectl-gc");
    // Run under the plugin's name, the program is `kubectl gc`, with kubectl or without.
    let direct = run_bounded(Command::new(&link).arg("--help"), KUBECTL_TIMEOUT);
    assert!(direct.stdout.contains("Usage: kubectl gc"), "{}", direct.stdout);
    if !kubectl_available() {
        return;
    }
    let path = std::env::join_paths(
        std::iter::once(bin.clone()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .expect("a PATH");
    let kubectl = |args: &[&str]| {
        let mut command = Command::new("kubectl");
        // kubectl hands plugins its environment, not its --kubeconfig flag.
        command
            .args(args)
            .env("PATH", &path)
            .env("KUBECONFIG", &served.kubeconfig)
            .env("HOME", served.dir.path().join("home"))
            .env("RUST_LOG", "off");
        run_bounded(&mut command, KUBECTL_TIMEOUT)
    };
    let run = kubectl(&["gc", "tree", "deploy/web", "-n", NS, "--collector", NO_COLLECTOR]);
    assert!(
        run.status.success(),
        "kubectl gc tree failed:\n{}{}",
        run.stdout,
        run.stderr
    );
    let rows = rows(&run.stdout);
    let names: Vec<&str> = rows.iter().skip(1).map(|r| r[0].as_str()).collect();
    assert_eq!(
        names,
        ["Deployment/web", "└─ReplicaSet/web-1", "├─Pod/web-1-a", "└─Pod/web-1-b"]
    );
    let help = kubectl(&["gc", "--help"]);
    assert!(help.stdout.contains("Usage: kubectl gc"), "{}", help.stdout);
}

/// How long the collector may take to reach the state the WHY test reads, in real time.
const COLLECTOR_PATIENCE: Duration = Duration::from_secs(30);

impl Served {
    /// The rows of the tree of `args` drawn with the collector at `collector`, once `settled`
    /// holds for them; fails naming `what` after [`COLLECTOR_PATIENCE`].
    fn tree_once(
        &self,
        collector: &str,
        args: &[&str],
        what: &str,
        settled: impl Fn(&[Vec<String>]) -> bool,
    ) -> Vec<Vec<String>> {
        let deadline = std::time::Instant::now() + COLLECTOR_PATIENCE;
        loop {
            let run = self.tree_with(collector, args);
            assert!(run.status.success(), "tree {args:?} failed:\n{}", run.stderr);
            assert!(
                run.stderr.is_empty(),
                "no note when the collector answers:\n{}",
                run.stderr
            );
            let rows = rows(&run.stdout);
            if settled(&rows) {
                return rows;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "never saw {what}:\n{}",
                run.stdout
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The cell of the row named `name` in `column`, if any.
fn cell<'a>(rows: &'a [Vec<String>], name: &str, column: usize) -> Option<&'a str> {
    let row = rows.iter().find(|r| r[0] == name)?;
    row.get(column).map(String::as_str)
}

#[test]
fn tree_should_show_why_from_a_running_collector() {
    let served = Served::start();
    // Objects that hold a finalizer nobody removes stay being deleted for as long as the test
    // reads: `old-1`, which the collector deletes for its owner's foreground deletion (the owner
    // then waits on it), and `stray`, whose only owner does not exist.
    let hold = |name: &str, owners: Vec<OwnerReference>| {
        let mut held = meta(NS, name, owners);
        held.finalizers = vec!["example.com/hold".to_string()];
        held
    };
    let old = served.create(&deployments(), "old", vec![]);
    create_in(
        &served.cluster,
        &replica_sets(),
        hold("old-1", vec![blocking_ref_to(&old)]),
    );
    let gone = ref_named("apps/v1", "ReplicaSet", "gone", "0a0a0a0a-0000-4000-8000-000000000000");
    create_in(&served.cluster, &pods(), hold("stray", vec![gone]));
    let endpoints = support::collector_endpoints(&served.runtime, served.addr);
    served
        .cluster
        .delete_object(&deployments(), NS, "old", &policy(PropagationPolicy::Foreground))
        .expect("delete old in the foreground");
    let collector = format!("http://{endpoints}");

    let waiting = served.tree_once(&collector, &["deploy/old", "-n", NS], "old waiting on old-1", |rows| {
        cell(rows, "└─ReplicaSet/old-1", 1).is_some_and(|s| s.starts_with("being deleted"))
            && cell(rows, "Deployment/old", 3).is_some_and(|why| why.contains("blocking dependent"))
    });
    assert_eq!(waiting[0], ["NAME", "STATE", "AGE", "WHY"]);
    assert_eq!(
        waiting[1][..2],
        ["Deployment/old", "waiting on 1 dependent (foreground)"]
    );
    let why = &waiting[1][3];
    assert!(
        why.contains("being deleted in the foreground: waits for 1 blocking dependent(s) to go"),
        "{why}"
    );

    let stray = served.tree_once(&collector, &["pod/stray", "-n", NS], "stray deleted", |rows| {
        cell(rows, "Pod/stray", 1).is_some_and(|s| s.starts_with("being deleted"))
    });
    assert_eq!(
        names_and_states(&stray),
        [("┌─ReplicaSet/gone", "absent"), ("Pod/stray", "being deleted")]
    );
    let why = cell(&stray, "Pod/stray", 3).expect("the collector's reasons for stray");
    assert!(why.contains("no live owner"), "{why}");
}
