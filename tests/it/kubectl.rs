//! kubectl against the simulated API server: what a person types works, through the kubeconfig the
//! server writes.
//!
//! Each test serves a fresh [`SimCluster`] on a loopback port from a runtime of its own and runs
//! the `kubectl` on `PATH` against it, with the written kubeconfig passed explicitly, `KUBECONFIG`
//! removed and `HOME` in the test's temporary directory, so neither the user's clusters nor their
//! discovery cache are ever involved. Assertions read tables by column, never by whitespace, so
//! they hold for kubectl 1.20 (Debian's, in CI) as for current releases. Most tests run no garbage
//! collector: a delete leaves dependents alone, and a foreground or orphan delete leaves its object
//! marked with the finalizer and a `deletionTimestamp`. The cascade tests ([`cascade_with`]) run the
//! whole collector against the server over HTTP, as `kube-gc run` does, and check that each
//! `kubectl delete --cascade=…` ends where upstream's collector leaves a real cluster.
//!
//! Without kubectl the tests print a note and pass, except in CI (`CI` set), which installs it and
//! where a missing kubectl is a failure.

use crate::support;

use kube_gc::api::layers::Stack;
use kube_gc::api::{Gvr, KubeApi, PartialObjectMeta, FINALIZER_FOREGROUND, FINALIZER_ORPHAN};
use kube_gc::controller::GarbageCollector;
use kube_gc::graph::Uid;
use kube_gc_sim::http::ServerOptions;
use kube_gc_sim::SimCluster;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use support::process::{
    kubectl, kubectl_available, kubectl_command, kubectl_command_of, run_bounded, Run, KUBECTL_TIMEOUT,
};

fn deployments() -> Gvr {
    Gvr::new("apps", "v1", "deployments")
}
fn replica_sets() -> Gvr {
    Gvr::new("apps", "v1", "replicasets")
}
fn config_maps() -> Gvr {
    Gvr::new("", "v1", "configmaps")
}

/// A Deployment `name` (in the namespace it is applied to, `default` unless told), labelled
/// `app: {name}`.
fn deployment(name: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels: {{app: {name}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - {{name: main, image: 'nginx:1'}}
      - {{name: sidecar, image: busybox}}
"
    )
}

/// An object that owns others, as their `ownerReferences` name it.
struct Owner {
    api_version: String,
    kind: String,
    name: String,
    uid: String,
}

impl Owner {
    /// The `ownerReferences` of an object this owner's controller made, as lines of `metadata`:
    /// `controller` and `blockOwnerDeletion` set, as upstream's Deployment, ReplicaSet and Job
    /// controllers set them, and an operator's (controller-runtime's `SetControllerReference`).
    fn controls(&self) -> String {
        let Owner {
            api_version,
            kind,
            name,
            uid,
        } = self;
        format!(
            "  ownerReferences:
  - {{apiVersion: {api_version}, kind: {kind}, name: {name}, uid: {uid}, controller: true, blockOwnerDeletion: true}}
"
        )
    }

    /// The `ownerReferences` of [`Owner::controls`], as the server returns them.
    fn references(&self) -> Value {
        serde_json::json!([{
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }])
    }
}

/// A ReplicaSet `name` controlled by the Deployment `owner`, with its labels.
fn replica_set(name: &str, owner: &Owner) -> String {
    let app = &owner.name;
    format!(
        "apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: {name}
  labels: {{app: {app}}}
{}spec:
  replicas: 1
  selector: {{matchLabels: {{app: {app}}}}}
  template:
    metadata: {{labels: {{app: {app}}}}}
    spec: {{containers: [{{name: main, image: 'nginx:1'}}]}}
",
        owner.controls()
    )
}

/// A Pod `name` made by `owner`'s controller.
fn pod(name: &str, owner: &Owner) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
{}spec: {{containers: [{{name: main, image: busybox}}]}}
",
        owner.controls()
    )
}

/// A ConfigMap `name` made by `owner`'s controller.
fn config_map_of(name: &str, owner: &Owner) -> String {
    format!(
        "apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
{}data: {{a: '1'}}
",
        owner.controls()
    )
}

/// A Widget `name` of `size`.
fn widget(name: &str, size: u32) -> String {
    format!(
        "apiVersion: example.com/v1
kind: Widget
metadata: {{name: {name}}}
spec: {{size: {size}}}
"
    )
}

fn config_map(namespace: &str, name: &str) -> String {
    format!(
        "apiVersion: v1
kind: ConfigMap
metadata: {{name: {name}, namespace: {namespace}, labels: {{role: settings}}}}
data: {{a: '1'}}
"
    )
}

/// A simulated API server on a loopback port and a kubectl pointed at it.
struct Sim {
    /// The served cluster, read directly to check what kubectl did.
    cluster: Arc<SimCluster>,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    /// Where the cluster is served.
    addr: std::net::SocketAddr,
    /// The garbage collector, when [`Sim::with_collector`] started one.
    collector: Option<Arc<GarbageCollector<Stack<KubeApi>>>>,
    /// Serves the cluster and runs the collector; dropping it stops both.
    runtime: tokio::runtime::Runtime,
}

/// How long the collector may take to carry out a cascade, in real time.
const CASCADE_PATIENCE: Duration = Duration::from_secs(30);

impl Sim {
    /// Serves a fresh cluster, or `None` (after a note) when kubectl is missing outside CI.
    fn start() -> Option<Sim> {
        Sim::serve(SimCluster::new())
    }

    /// Serves a fresh cluster where, as on a real one, nothing can be created in a namespace that
    /// does not exist, and runs the whole collector against it over HTTP, as `kube-gc run` does;
    /// or `None` as [`Sim::start`].
    fn with_collector() -> Option<Sim> {
        let cluster = SimCluster::new();
        cluster.enforce_namespaces(true);
        let mut sim = Sim::serve(cluster)?;
        let addr = sim.addr;
        let collector = sim
            .runtime
            .block_on(async { support::start_collector(support::collector_client(addr).await).await });
        sim.collector = Some(collector);
        Some(sim)
    }

    /// Serves `cluster`, or `None` (after a note) when kubectl is missing outside CI.
    fn serve(cluster: SimCluster) -> Option<Sim> {
        Sim::serve_with(cluster, ServerOptions::default())
    }

    /// [`Sim::serve`] with the server's `options`.
    fn serve_with(cluster: SimCluster, options: ServerOptions) -> Option<Sim> {
        if !kubectl_available() {
            return None;
        }
        let support::OwnServer {
            runtime,
            cluster,
            addr,
            dir,
            kubeconfig,
        } = support::serve_on_own_runtime(cluster, options);
        Some(Sim {
            cluster,
            dir,
            kubeconfig,
            addr,
            collector: None,
            runtime,
        })
    }

    /// Runs kubectl with `args`, killing it after [`KUBECTL_TIMEOUT`].
    fn kubectl(&self, args: &[&str]) -> Run {
        let mut command = kubectl_command(&self.kubeconfig, self.dir.path(), args);
        run_bounded(&mut command, KUBECTL_TIMEOUT)
    }

    /// Runs kubectl, which must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        kubectl(&self.kubeconfig, self.dir.path(), args)
    }

    /// Runs kubectl, which must fail; its stderr.
    fn fails(&self, args: &[&str]) -> String {
        let run = self.kubectl(args);
        assert!(
            !run.status.success(),
            "kubectl {args:?} should have failed:\n{}",
            run.stdout
        );
        run.stderr
    }

    /// `kubectl create -f` of `yaml`, written to a file named `name`.
    fn create(&self, name: &str, yaml: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, yaml).expect("write the manifest");
        self.ok(&["create", "-f", path.to_str().expect("a UTF-8 path")])
    }

    /// Writes `yaml` to a file named `name` in the test's directory; its path.
    fn manifest(&self, name: &str, yaml: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, yaml).expect("write the manifest");
        path.to_str().expect("a UTF-8 path").to_string()
    }

    /// Runs the kubectl at `binary` (rather than the one on `PATH`) with `args`.
    fn kubectl_of(&self, binary: &Path, args: &[&str]) -> Run {
        let mut command = kubectl_command_of(binary, &self.kubeconfig, self.dir.path(), args);
        run_bounded(&mut command, KUBECTL_TIMEOUT)
    }

    /// Runs the kubectl at `binary`, which must succeed; its stdout.
    fn ok_of(&self, binary: &Path, args: &[&str]) -> String {
        let run = self.kubectl_of(binary, args);
        assert!(
            run.status.success(),
            "{} {args:?}:\n{}{}",
            binary.display(),
            run.stdout,
            run.stderr
        );
        run.stdout
    }

    /// The object `resource`/`name` in `namespace` as an owner, read with the kubectl at `binary`.
    fn owner(&self, binary: &Path, namespace: &str, resource: &str, name: &str) -> Owner {
        let jsonpath = "jsonpath={.apiVersion} {.kind} {.metadata.uid}";
        let read = self.ok_of(binary, &["get", resource, name, "-n", namespace, "-o", jsonpath]);
        let [api_version, kind, uid] = read.split_whitespace().collect::<Vec<_>>()[..] else {
            panic!("not an apiVersion, a kind and a UID: {read:?}");
        };
        Owner {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            name: name.to_string(),
            uid: uid.to_string(),
        }
    }

    /// True once the collector has observed the object `uid` itself (not only as an owner its
    /// dependents name).
    fn observed(&self, uid: &str) -> bool {
        let collector = self.collector.as_ref().expect("a collector");
        let node = collector.graph().get(&Uid::parse(uid));
        node.is_some_and(|n| !n.is_virtual())
    }

    /// Waits, in real time, until `cond` holds; fails naming `what` after [`CASCADE_PATIENCE`].
    fn eventually(&self, what: &str, cond: impl Fn() -> bool) {
        self.runtime
            .block_on(support::within_real_time(what, CASCADE_PATIENCE, async || cond()));
    }

    /// The stored object, read from the cluster itself rather than through kubectl.
    fn stored(&self, gvr: &Gvr, namespace: &str, name: &str) -> Option<PartialObjectMeta> {
        match self.cluster.get_object(gvr, namespace, name) {
            Ok(obj) => Some(obj),
            Err(e) if e.is_not_found() => None,
            Err(e) => panic!("reading {gvr} {namespace}/{name}: {e}"),
        }
    }
}

impl Drop for Sim {
    /// Stops the collector (the runtime's drop then stops the server).
    fn drop(&mut self) {
        if let Some(collector) = self.collector.take() {
            let stopped = self
                .runtime
                .block_on(async { tokio::time::timeout(CASCADE_PATIENCE, collector.shutdown()).await });
            if stopped.is_err() && !std::thread::panicking() {
                panic!("the collector did not stop within {CASCADE_PATIENCE:?}");
            }
        }
    }
}

/// The rows of a `kubectl get` table, each cut into its cells, after the header line. Cells
/// hold no spaces in these tests, so splitting on whitespace is exact whatever the alignment.
fn rows(table: &str) -> Vec<Vec<String>> {
    let mut lines = table.lines().filter(|l| !l.trim().is_empty());
    let header = lines.next().unwrap_or_default();
    assert!(
        header.split_whitespace().any(|c| c == "NAME"),
        "no NAME column in:\n{table}"
    );
    lines
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

/// The first cell of each row: the names, or the namespaces under `-A`.
fn first_column(table: &str) -> Vec<String> {
    rows(table).into_iter().map(|r| r[0].clone()).collect()
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

/// Creates the Deployment `web`, a ReplicaSet `web-1` it controls, and the ConfigMap `settings`;
/// returns the Deployment's UID.
fn create_web(sim: &Sim) -> String {
    sim.create("deployment.yaml", &deployment("web"));
    let web = sim.owner(Path::new("kubectl"), "default", "deployment", "web");
    sim.create("replicaset.yaml", &replica_set("web-1", &web));
    sim.create("configmap.yaml", &config_map("default", "settings"));
    web.uid
}

#[test]
fn create_should_store_each_object_and_keep_the_replica_sets_owner_reference() {
    let Some(sim) = Sim::start() else { return };
    let uid = create_web(&sim);

    let owner = sim.ok(&[
        "get",
        "rs",
        "web-1",
        "-o",
        "jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].uid}",
    ]);
    assert_eq!(owner.trim(), format!("Deployment/web/{uid}"));
    let stored = sim.stored(&replica_sets(), "default", "web-1").expect("the ReplicaSet");
    assert_eq!(stored.metadata.owner_references[0].uid, uid);
    assert_eq!(stored.metadata.owner_references[0].controller, Some(true));
    // Fields the server does not interpret are kept as sent.
    let deployment = sim.stored(&deployments(), "default", "web").expect("the Deployment");
    assert_eq!(
        deployment.rest["spec"]["template"]["spec"]["containers"][1]["name"],
        "sidecar"
    );
    assert!(sim.stored(&config_maps(), "default", "settings").is_some());

    let again = sim.fails(&[
        "create",
        "-f",
        sim.dir.path().join("configmap.yaml").to_str().expect("UTF-8"),
    ]);
    assert!(again.contains("AlreadyExists"), "{again}");
}

#[test]
fn get_should_print_tables_json_and_yaml_in_one_or_all_namespaces_and_by_label() {
    let Some(sim) = Sim::start() else { return };
    create_web(&sim);
    sim.create("other.yaml", &config_map("other", "elsewhere"));

    assert_eq!(first_column(&sim.ok(&["get", "deployments"])), ["web"]);
    assert_eq!(first_column(&sim.ok(&["get", "deploy"])), ["web"]);
    assert_eq!(first_column(&sim.ok(&["get", "cm"])), ["settings"]);
    assert_eq!(
        first_column(&sim.ok(&["get", "configmaps", "-n", "other"])),
        ["elsewhere"]
    );

    let all = sim.ok(&["get", "configmaps", "-A"]);
    assert!(all.lines().next().unwrap_or_default().starts_with("NAMESPACE"), "{all}");
    let mut placed: Vec<(String, String)> = rows(&all).into_iter().map(|r| (r[0].clone(), r[1].clone())).collect();
    placed.sort();
    let expected = [("default", "settings"), ("other", "elsewhere")].map(|(n, m)| (n.to_string(), m.to_string()));
    assert_eq!(placed, expected);

    let list = json(&sim.ok(&["get", "rs", "-o", "json"]));
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(list["items"][0]["kind"], "ReplicaSet");
    assert_eq!(list["items"][0]["apiVersion"], "apps/v1");
    assert_eq!(list["items"][0]["metadata"]["ownerReferences"][0]["name"], "web");
    let one = json(&sim.ok(&["get", "deployment", "web", "-o", "json"]));
    assert_eq!(
        (&one["kind"], &one["metadata"]["name"]),
        (&"Deployment".into(), &"web".into())
    );

    let yaml = sim.ok(&["get", "deployment", "web", "-o", "yaml"]);
    for line in [
        "apiVersion: apps/v1",
        "kind: Deployment",
        "name: web",
        "namespace: default",
    ] {
        assert!(yaml.lines().any(|l| l.trim() == line), "no {line:?} in:\n{yaml}");
    }

    // The Deployment and its ReplicaSet carry app=web; the ConfigMaps carry role=settings.
    assert_eq!(first_column(&sim.ok(&["get", "rs", "-l", "app=web"])), ["web-1"]);
    assert_eq!(
        first_column(&sim.ok(&["get", "cm", "-A", "-l", "role=settings"])).len(),
        2
    );
    let none = sim.kubectl(&["get", "deployments", "-l", "app=other"]);
    assert!(none.status.success(), "{}", none.stderr);
    assert!(none.stdout.trim().is_empty(), "{}", none.stdout);
    assert!(none.stderr.contains("No resources found"), "{}", none.stderr);

    let missing = sim.fails(&["get", "deployment", "nope"]);
    assert!(missing.contains("NotFound") && missing.contains("nope"), "{missing}");
}

#[test]
fn patch_should_apply_strategic_merge_and_json_patches_as_the_api_server_does() {
    let Some(sim) = Sim::start() else { return };
    let web_uid = create_web(&sim);
    let settings_uid = sim.ok(&["get", "cm", "settings", "-o", "jsonpath={.metadata.uid}"]);
    let settings_uid = settings_uid.trim();
    let owners = |sim: &Sim| {
        let out = sim.ok(&[
            "get",
            "rs",
            "web-1",
            "-o",
            "jsonpath={range .metadata.ownerReferences[*]}{.name} {end}",
        ]);
        out.split_whitespace().map(String::from).collect::<Vec<_>>()
    };

    // Strategic merge (kubectl's default): maps merge, and owner references merge by UID.
    let add_owner = format!(
        r#"{{"metadata":{{"labels":{{"tier":"front"}},"ownerReferences":[{{"apiVersion":"v1","kind":"ConfigMap","name":"settings","uid":"{settings_uid}"}}]}}}}"#
    );
    sim.ok(&["patch", "rs", "web-1", "-p", &add_owner]);
    assert_eq!(owners(&sim), ["web", "settings"]);
    let remove_owner =
        format!(r#"{{"metadata":{{"ownerReferences":[{{"$patch":"delete","uid":"{settings_uid}"}}]}}}}"#);
    sim.ok(&["patch", "rs", "web-1", "-p", &remove_owner]);
    assert_eq!(owners(&sim), ["web"]);

    // A JSON merge patch replaces the list whole.
    let only_settings = format!(
        r#"{{"metadata":{{"annotations":{{"note":"merged"}},"ownerReferences":[{{"apiVersion":"v1","kind":"ConfigMap","name":"settings","uid":"{settings_uid}"}}]}}}}"#
    );
    sim.ok(&["patch", "rs", "web-1", "--type", "merge", "-p", &only_settings]);
    assert_eq!(owners(&sim), ["settings"]);

    let json_patch = format!(
        r#"[{{"op":"replace","path":"/spec/replicas","value":5}},{{"op":"add","path":"/metadata/labels/x","value":"y"}},{{"op":"add","path":"/metadata/ownerReferences/0","value":{{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"{web_uid}","controller":true}}}}]"#
    );
    sim.ok(&["patch", "rs", "web-1", "--type", "json", "-p", &json_patch]);
    assert_eq!(owners(&sim), ["web", "settings"]);

    let stored = sim.stored(&replica_sets(), "default", "web-1").expect("the ReplicaSet");
    let labels: Vec<(&str, &str)> = stored
        .metadata
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(labels, [("app", "web"), ("tier", "front"), ("x", "y")]);
    assert_eq!(stored.metadata.annotations["note"], "merged");
    assert_eq!(stored.metadata.owner_references[0].uid, web_uid);
    assert_eq!(stored.rest["spec"]["replicas"], 5);

    // A failed JSON patch test changes nothing.
    let before = stored.metadata.resource_version;
    let test =
        r#"[{"op":"test","path":"/spec/replicas","value":99},{"op":"replace","path":"/spec/replicas","value":7}]"#;
    sim.fails(&["patch", "rs", "web-1", "--type", "json", "-p", test]);
    let after = sim.stored(&replica_sets(), "default", "web-1").expect("the ReplicaSet");
    assert_eq!(
        (after.metadata.resource_version, &after.rest["spec"]["replicas"]),
        (before, &5.into())
    );

    // A ConfigMap's data is a map: strategic merge adds a key and keeps the others.
    sim.ok(&["patch", "cm", "settings", "-p", r#"{"data":{"b":"2"}}"#]);
    let data = sim.ok(&["get", "cm", "settings", "-o", "jsonpath={.data.a},{.data.b}"]);
    assert_eq!(data.trim(), "1,2");
}

#[test]
fn delete_should_apply_each_cascade_policy_and_leave_dependents_to_the_collector() {
    let Some(sim) = Sim::start() else { return };
    create_web(&sim);
    sim.create("second.yaml", &config_map("default", "second"));

    // Foreground: the Deployment stays, marked, until a collector deletes its dependents.
    sim.ok(&["delete", "deployment", "web", "--cascade=foreground", "--wait=false"]);
    let marked = sim
        .stored(&deployments(), "default", "web")
        .expect("kept while dependents remain");
    assert_eq!(marked.metadata.finalizers, [FINALIZER_FOREGROUND]);
    assert!(marked.metadata.deletion_timestamp.is_some());
    let seen = sim.ok(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.metadata.finalizers[0]} {.metadata.deletionTimestamp}",
    ]);
    let (finalizer, timestamp) = seen.trim().split_once(' ').expect("a finalizer and a timestamp");
    assert_eq!(
        (finalizer, Some(timestamp)),
        (FINALIZER_FOREGROUND, marked.metadata.deletion_timestamp.as_deref())
    );

    // Orphan: the ReplicaSet stays with the orphan finalizer.
    sim.ok(&["delete", "rs", "web-1", "--cascade=orphan", "--wait=false"]);
    let orphaning = sim
        .stored(&replica_sets(), "default", "web-1")
        .expect("kept until orphaned");
    assert_eq!(orphaning.metadata.finalizers, [FINALIZER_ORPHAN]);
    assert!(orphaning.metadata.deletion_timestamp.is_some());
    let seen = sim.ok(&["get", "rs", "web-1", "-o", "jsonpath={.metadata.finalizers[0]}"]);
    assert_eq!(seen.trim(), FINALIZER_ORPHAN);

    // Background: gone at once.
    let said = sim.ok(&["delete", "cm", "settings", "--cascade=background", "--wait=false"]);
    assert!(said.contains("settings") && said.contains("deleted"), "{said}");
    assert!(sim.stored(&config_maps(), "default", "settings").is_none());
    // kubectl's default: background, then wait until the object is gone.
    sim.ok(&["delete", "cm", "second"]);
    assert!(sim.stored(&config_maps(), "default", "second").is_none());

    let missing = sim.fails(&["delete", "cm", "settings", "--wait=false"]);
    assert!(missing.contains("NotFound"), "{missing}");
    sim.ok(&["delete", "cm", "settings", "--ignore-not-found"]);
}

#[test]
fn api_resources_should_list_the_built_in_types_with_their_short_names() {
    let Some(sim) = Sim::start() else { return };
    let table = sim.ok(&["api-resources"]);
    let header: Vec<&str> = table.lines().next().unwrap_or_default().split_whitespace().collect();
    assert!(header.starts_with(&["NAME", "SHORTNAMES"]), "{table}");
    // NAME SHORTNAMES APIVERSION NAMESPACED KIND: five cells where there are short names.
    let row = |name: &str, api_version: &str| -> Vec<String> {
        rows(&table)
            .into_iter()
            .find(|r| r[0] == name && r.iter().any(|c| c == api_version))
            .unwrap_or_else(|| panic!("no {name} in {api_version} in:\n{table}"))
    };
    assert_eq!(
        row("deployments", "apps/v1"),
        ["deployments", "deploy", "apps/v1", "true", "Deployment"]
    );
    assert_eq!(row("configmaps", "v1"), ["configmaps", "cm", "v1", "true", "ConfigMap"]);
    assert_eq!(
        row("namespaces", "v1"),
        ["namespaces", "ns", "v1", "false", "Namespace"]
    );
    let names = sim.ok(&["api-resources", "--api-group=apps", "-o", "name"]);
    assert!(names.lines().any(|l| l.trim() == "replicasets.apps"), "{names}");
}

#[test]
fn a_crd_created_with_kubectl_should_be_listed_and_serve_its_type() {
    let Some(sim) = Sim::start() else { return };
    let crd = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";
    sim.create("crd.yaml", crd);
    assert_eq!(first_column(&sim.ok(&["get", "crd"])), ["widgets.example.com"]);
    assert_eq!(first_column(&sim.ok(&["get", "crds"])), ["widgets.example.com"]);

    sim.create("widget.yaml", &widget("w1", 3));
    assert_eq!(first_column(&sim.ok(&["get", "widgets"])), ["w1"]);
    assert_eq!(first_column(&sim.ok(&["get", "wd"])), ["w1"]);
    let size = sim.ok(&["get", "widget.example.com", "w1", "-o", "jsonpath={.spec.size}"]);
    assert_eq!(size.trim(), "3");
    // A custom resource has no strategic-merge schema; a merge patch works.
    sim.ok(&["patch", "wd", "w1", "--type", "merge", "-p", r#"{"spec":{"size":4}}"#]);
    let size = sim.ok(&["get", "wd", "w1", "-o", "jsonpath={.spec.size}"]);
    assert_eq!(size.trim(), "4");

    sim.ok(&["delete", "crd", "widgets.example.com"]);
    let gone = sim.kubectl(&["get", "widgets"]);
    assert!(!gone.status.success(), "widgets still served:\n{}", gone.stdout);
    let widgets = Gvr::new("example.com", "v1", "widgets");
    assert!(sim.cluster.type_def(&widgets).is_err(), "the type is still served");
}

#[test]
fn deleting_a_namespace_should_delete_what_is_in_it_and_nothing_else() {
    let Some(sim) = Sim::start() else { return };
    let team = "apiVersion: v1
kind: Namespace
metadata: {name: team}
";
    sim.create("namespace.yaml", team);
    sim.create("team-cm.yaml", &config_map("team", "c1"));
    sim.create("kept-cm.yaml", &config_map("default", "kept"));
    let in_team = deployment("api").replace("  name: api\n", "  name: api\n  namespace: team\n");
    sim.create("team-deployment.yaml", &in_team);
    assert_eq!(first_column(&sim.ok(&["get", "deployments", "-n", "team"])), ["api"]);

    let said = sim.ok(&["delete", "ns", "team"]);
    assert!(said.contains("team") && said.contains("deleted"), "{said}");

    assert!(sim.stored(&Gvr::new("", "v1", "namespaces"), "", "team").is_none());
    assert!(sim.stored(&config_maps(), "team", "c1").is_none());
    assert!(sim.stored(&deployments(), "team", "api").is_none());
    assert!(sim.stored(&config_maps(), "default", "kept").is_some());
    let left = sim.kubectl(&["get", "cm", "-n", "team"]);
    assert!(left.stdout.trim().is_empty(), "{}", left.stdout);
}

#[test]
fn the_deployment_manifests_should_be_accepted_as_a_cluster_would() {
    let Some(sim) = Sim::start() else { return };
    // A cluster with the Prometheus Operator serves its two kinds the base uses.
    let operator = sim.dir.path().join("prometheus-operator-crds.json");
    let crds = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        support::crd_manifest_in("monitoring.coreos.com", "servicemonitors", "ServiceMonitor"),
        support::crd_manifest_in("monitoring.coreos.com", "prometheusrules", "PrometheusRule"),
    ]});
    std::fs::write(&operator, crds.to_string()).expect("write the CRDs");
    sim.ok(&["create", "-f", operator.to_str().expect("a UTF-8 path")]);
    let base = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy");
    let said = sim.ok(&["create", "-k", base]);
    for created in [
        "namespace/kube-gc",
        "serviceaccount/kube-gc",
        "clusterrole",
        "deployment.apps/kube-gc",
        "configmap/kube-gc-grafana-dashboard",
        "servicemonitor.monitoring.coreos.com/kube-gc",
        "prometheusrule.monitoring.coreos.com/kube-gc",
    ] {
        assert!(said.contains(created), "{created} not created:\n{said}");
    }
    let deployment = sim
        .stored(&deployments(), "kube-gc", "kube-gc")
        .expect("the Deployment is stored");
    assert_eq!(deployment.rest["spec"]["replicas"], 2);
    let args = &deployment.rest["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_array().is_some_and(|a| a.iter().any(|x| x == "--leader-elect")),
        "{args}"
    );
}

#[test]
fn the_sharded_patch_should_turn_the_leader_into_three_replicas_with_shards_auto() {
    let Some(sim) = Sim::start() else { return };
    sim.ok(&[
        "create",
        "-f",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/namespace.yaml"),
    ]);
    sim.ok(&[
        "create",
        "-f",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/deployment.yaml"),
    ]);
    let patch = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/sharded-patch.yaml");
    let patch_file = format!("--patch-file={patch}");
    sim.ok(&[
        "-n",
        "kube-gc",
        "patch",
        "deployment",
        "kube-gc",
        "--type=json",
        &patch_file,
    ]);
    let deployment = sim
        .stored(&deployments(), "kube-gc", "kube-gc")
        .expect("the Deployment is stored");
    assert_eq!(deployment.rest["spec"]["replicas"], 3);
    let args = deployment.rest["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(args.iter().any(|a| a == "--shards=auto"), "{args:?}");
    assert!(!args.iter().any(|a| a == "--leader-elect"), "{args:?}");
    assert!(
        args.iter().any(|a| a == "--leader-elect-resource-namespace=kube-gc"),
        "{args:?}"
    );
    // The patch tests that it replaces the leader flag: on a sharded Deployment it is refused.
    let again = sim.kubectl(&[
        "-n",
        "kube-gc",
        "patch",
        "deployment",
        "kube-gc",
        "--type=json",
        &patch_file,
    ]);
    assert!(!again.status.success(), "a second patch is refused: {}", again.stdout);
}

/// The Job `once`.
const JOB: &str = "apiVersion: batch/v1
kind: Job
metadata: {name: once}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox}]
";

/// The ConfigMap `settings` with `data` (a YAML flow map).
fn settings(data: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings}}\ndata: {data}\n")
}

/// A Deployment `web` with `replicas`, a Job `once` and a ConfigMap `settings` holding `a: {a}`.
fn app(replicas: u32, a: &str) -> String {
    let web = deployment("web").replace("replicas: 1", &format!("replicas: {replicas}"));
    format!("{web}---\n{JOB}---\n{}", settings(&format!("{{a: '{a}'}}")))
}

fn jobs() -> Gvr {
    Gvr::new("batch", "v1", "jobs")
}

/// A CRD `widgets.example.com` whose `spec.size` is an integer, in the `all` category.
const WIDGET_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, description: How many gears the widget turns.}
";

/// The oldest kubectl the tests run, where it is installed.
pub(crate) const KUBECTL_1_27: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.27";

#[test]
fn apply_should_create_then_update_with_strict_validation() {
    let Some(sim) = Sim::start() else { return };
    let manifest = sim.manifest("app.yaml", &app(1, "1"));
    let said = sim.ok(&["apply", "-f", &manifest, "--validate=strict"]);
    for created in [
        "deployment.apps/web created",
        "job.batch/once created",
        "configmap/settings created",
    ] {
        assert!(said.contains(created), "{created:?} not in:\n{said}");
    }
    assert!(sim.stored(&jobs(), "default", "once").is_some());

    let manifest = sim.manifest("app.yaml", &app(3, "2"));
    let said = sim.ok(&["apply", "-f", &manifest, "--validate=strict"]);
    assert!(said.contains("deployment.apps/web configured"), "{said}");
    assert!(said.contains("job.batch/once unchanged"), "{said}");
    let web = sim.stored(&deployments(), "default", "web").expect("the Deployment");
    assert_eq!(web.rest["spec"]["replicas"], 3);
    let settings = sim
        .stored(&config_maps(), "default", "settings")
        .expect("the ConfigMap");
    assert_eq!(settings.rest["data"]["a"], "2");
    // Client-side apply keeps what it applied, to compute the next patch from.
    assert!(settings
        .metadata
        .annotations
        .contains_key("kubectl.kubernetes.io/last-applied-configuration"));
}

#[test]
fn apply_should_refuse_an_unknown_field_naming_it() {
    let Some(sim) = Sim::start() else { return };
    let bad = app(1, "1").replace("  replicas: 1\n", "  replicas: 1\n  bogusField: 3\n");
    let manifest = sim.manifest("bad.yaml", &bad);
    let refused = sim.fails(&["apply", "-f", &manifest, "--validate=strict"]);
    assert!(
        refused.contains("unknown field \"bogusField\"") && refused.contains("DeploymentSpec"),
        "{refused}"
    );
    assert!(sim.stored(&deployments(), "default", "web").is_none());
}

#[test]
fn explain_should_print_a_fields_description() {
    let Some(sim) = Sim::start() else { return };
    let explained = sim.ok(&["explain", "deployment.spec.replicas"]);
    assert!(
        explained.contains("replicas") && explained.contains("<integer>"),
        "{explained}"
    );
    assert!(explained.contains("Number of desired pods"), "{explained}");
}

#[test]
fn get_all_should_list_the_pods_deployments_and_jobs() {
    let Some(sim) = Sim::start() else { return };
    sim.ok(&["apply", "-f", &sim.manifest("app.yaml", &app(1, "1"))]);
    let pod = "apiVersion: v1
kind: Pod
metadata: {name: p1}
spec: {containers: [{name: main, image: busybox}]}
";
    sim.ok(&["apply", "-f", &sim.manifest("pod.yaml", pod)]);
    let names = sim.ok(&["get", "all", "-o", "name"]);
    let mut names: Vec<&str> = names.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    names.sort();
    assert_eq!(names, ["deployment.apps/web", "job.batch/once", "pod/p1"]);
}

#[test]
fn the_oldest_kubectl_should_apply_and_explain_too() {
    let Some(sim) = Sim::start() else { return };
    let binary = Path::new(KUBECTL_1_27);
    if !binary.exists() {
        eprintln!("note: {KUBECTL_1_27} is not installed; skipping");
        return;
    }
    let ok = |args: &[&str]| sim.ok_of(binary, args);
    let version = ok(&["version", "--client", "-o", "json"]);
    assert_eq!(json(&version)["clientVersion"]["minor"], "27", "{version}");
    ok(&[
        "apply",
        "-f",
        &sim.manifest("app.yaml", &app(1, "1")),
        "--validate=strict",
    ]);
    let said = ok(&[
        "apply",
        "-f",
        &sim.manifest("app.yaml", &app(2, "1")),
        "--validate=strict",
    ]);
    assert!(said.contains("deployment.apps/web configured"), "{said}");
    let web = sim.stored(&deployments(), "default", "web").expect("the Deployment");
    assert_eq!(web.rest["spec"]["replicas"], 2);
    let bad = app(1, "1").replace("  replicas: 1\n", "  replicas: 1\n  bogusField: 3\n");
    let refused = sim.kubectl_of(binary, &["apply", "-f", &sim.manifest("bad.yaml", &bad)]);
    assert!(
        !refused.status.success() && refused.stderr.contains("bogusField"),
        "{}",
        refused.stderr
    );
    let explained = ok(&["explain", "deployment.spec.replicas"]);
    assert!(explained.contains("Number of desired pods"), "{explained}");
}

#[test]
fn a_crds_schema_should_validate_and_explain_its_custom_resources() {
    let Some(sim) = Sim::start() else { return };
    let said = sim.ok(&["apply", "-f", &sim.manifest("crd.yaml", WIDGET_CRD)]);
    assert!(said.contains("widgets.example.com created"), "{said}");
    let widget = widget("w1", 3);
    sim.ok(&[
        "apply",
        "-f",
        &sim.manifest("widget.yaml", &widget),
        "--validate=strict",
    ]);
    let stored = sim.stored(&Gvr::new("example.com", "v1", "widgets"), "default", "w1");
    assert_eq!(stored.expect("the Widget").rest["spec"]["size"], 3);

    let explained = sim.ok(&["explain", "widget.spec"]);
    assert!(
        explained.contains("size") && explained.contains("How many gears the widget turns."),
        "{explained}"
    );
    let colored = widget.replace("size: 3", "size: 3, color: red");
    let refused = sim.fails(&[
        "apply",
        "-f",
        &sim.manifest("colored.yaml", &colored),
        "--validate=strict",
    ]);
    assert!(refused.contains("unknown field \"color\""), "{refused}");
    // The CRD's categories reach discovery: `all` lists the widget too.
    let all = sim.ok(&["get", "all", "-o", "name"]);
    assert!(all.lines().any(|l| l.trim() == "widget.example.com/w1"), "{all}");
}

/// Runs the imperative `kubectl create` commands (whose bodies a kubectl of 1.33 sends as
/// protobuf) through `ok`, and checks what the cluster stored of each.
fn create_imperatively(sim: &Sim, ok: impl Fn(&[&str]) -> String) {
    let said = ok(&["create", "namespace", "x"]);
    assert!(said.contains("namespace/x created"), "{said}");
    ok(&["create", "configmap", "c", "-n", "x", "--from-literal=a=b"]);
    ok(&["create", "secret", "generic", "s", "-n", "x", "--from-literal=a=b"]);
    ok(&["create", "deployment", "d", "-n", "x", "--image=nginx"]);
    ok(&["create", "job", "j", "-n", "x", "--image=busybox"]);

    let namespace = sim
        .stored(&Gvr::new("", "v1", "namespaces"), "", "x")
        .expect("the Namespace");
    assert!(!namespace.metadata.uid.is_empty());
    let cm = sim.stored(&config_maps(), "x", "c").expect("the ConfigMap");
    assert_eq!(cm.rest["data"]["a"], "b");
    let secret = sim
        .stored(&Gvr::new("", "v1", "secrets"), "x", "s")
        .expect("the Secret");
    assert_eq!(secret.rest["data"]["a"], "Yg==", "the literal, base64");
    let deployment = sim.stored(&deployments(), "x", "d").expect("the Deployment");
    let template = &deployment.rest["spec"]["template"];
    assert_eq!(template["spec"]["containers"][0]["image"], "nginx");
    assert_eq!(template["metadata"]["labels"]["app"], "d");
    assert_eq!(deployment.rest["spec"]["selector"]["matchLabels"]["app"], "d");
    let job = sim.stored(&Gvr::new("batch", "v1", "jobs"), "x", "j").expect("the Job");
    assert_eq!(
        job.rest["spec"]["template"]["spec"]["containers"][0]["image"],
        "busybox"
    );
    assert_eq!(job.rest["spec"]["template"]["spec"]["restartPolicy"], "Never");
    // What was stored reads back through kubectl as JSON.
    let data = ok(&["get", "secret", "s", "-n", "x", "-o", "jsonpath={.data.a}"]);
    assert_eq!(data.trim(), "Yg==");
}

#[test]
fn create_of_built_in_types_should_store_what_kubectl_sends_in_protobuf() {
    let Some(sim) = Sim::start() else { return };
    create_imperatively(&sim, |args| sim.ok(args));
}

#[test]
fn the_oldest_kubectl_should_create_built_in_types_imperatively_too() {
    let Some(sim) = Sim::start() else { return };
    let binary = Path::new(KUBECTL_1_27);
    if !binary.exists() {
        eprintln!("note: {KUBECTL_1_27} is not installed; skipping");
        return;
    }
    create_imperatively(&sim, |args| sim.ok_of(binary, args));
}

/// The manifest of the server-side apply tests: the Deployment `web` with `replicas` and the
/// containers `main` and, when `sidecar`, `sidecar`; the Job `once`; the ConfigMap `settings` with
/// `data` (a YAML flow map); and the Widget `w1` of `size`.
fn applied_app(replicas: u32, sidecar: bool, data: &str, size: u32) -> String {
    let mut web = deployment("web").replace("replicas: 1", &format!("replicas: {replicas}"));
    if !sidecar {
        web = web.replace("      - {name: sidecar, image: busybox}\n", "");
    }
    format!("{web}---\n{JOB}---\n{}---\n{}", settings(data), widget("w1", size))
}

/// The names of the containers of a stored Deployment.
fn container_names(deployment: &PartialObjectMeta) -> Vec<String> {
    let containers = deployment.rest["spec"]["template"]["spec"]["containers"]
        .as_array()
        .cloned();
    containers
        .unwrap_or_default()
        .iter()
        .map(|c| c["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// `kubectl apply --server-side` with the kubectl at `binary`: creates, updates, removes what the
/// manifest drops, reports a conflict with a client-side apply until forced, and shows the
/// managers with `--show-managed-fields`.
fn apply_server_side_with(sim: &Sim, binary: &Path) {
    let ok = |args: &[&str]| sim.ok_of(binary, args);
    let said = ok(&["apply", "--server-side", "-f", &sim.manifest("crd.yaml", WIDGET_CRD)]);
    assert!(said.contains("widgets.example.com serverside-applied"), "{said}");
    let app = sim.manifest("app.yaml", &applied_app(1, true, "{a: '1', b: '2'}", 3));
    let said = ok(&["apply", "--server-side", "-f", &app]);
    for applied in [
        "deployment.apps/web serverside-applied",
        "job.batch/once serverside-applied",
        "configmap/settings serverside-applied",
        "widget.example.com/w1 serverside-applied",
    ] {
        assert!(said.contains(applied), "{applied:?} not in:\n{said}");
    }
    let widgets = Gvr::new("example.com", "v1", "widgets");
    assert!(sim.stored(&jobs(), "default", "once").is_some());
    assert_eq!(
        sim.stored(&widgets, "default", "w1").expect("the Widget").rest["spec"]["size"],
        3
    );

    let dry = sim.manifest("dry.yaml", &applied_app(9, true, "{a: '1', b: '2'}", 3));
    ok(&["apply", "--server-side", "--dry-run=server", "-f", &dry]);
    let web = sim.stored(&deployments(), "default", "web").expect("the Deployment");
    assert_eq!(web.rest["spec"]["replicas"], 1, "a dry run stores nothing");

    // A change, and fields the manifest no longer sets: the sidecar and `data.b`.
    let app = sim.manifest("app.yaml", &applied_app(3, false, "{a: '2'}", 4));
    ok(&["apply", "--server-side", "-f", &app]);
    let web = sim.stored(&deployments(), "default", "web").expect("the Deployment");
    assert_eq!(web.rest["spec"]["replicas"], 3);
    assert_eq!(container_names(&web), ["main"], "the dropped container is gone");
    let settings = sim
        .stored(&config_maps(), "default", "settings")
        .expect("the ConfigMap");
    assert_eq!(
        settings.rest["data"],
        serde_json::json!({"a": "2"}),
        "the dropped key is gone"
    );
    assert_eq!(
        sim.stored(&widgets, "default", "w1").expect("the Widget").rest["spec"]["size"],
        4
    );

    // A client-side apply takes `replicas`; applying another value on the server conflicts.
    let client_side = deployment("web").replace("replicas: 1", "replicas: 5");
    ok(&["apply", "-f", &sim.manifest("client-side.yaml", &client_side)]);
    let refused = sim.kubectl_of(binary, &["apply", "--server-side", "-f", &app]);
    assert!(!refused.status.success(), "no conflict:\n{}", refused.stdout);
    let conflict =
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas";
    assert!(refused.stderr.contains(conflict), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--force-conflicts"),
        "kubectl's advice: {}",
        refused.stderr
    );
    let web = sim.stored(&deployments(), "default", "web").expect("the Deployment");
    assert_eq!(web.rest["spec"]["replicas"], 5, "nothing applied");
    ok(&["apply", "--server-side", "--force-conflicts", "-f", &app]);
    let web = sim.stored(&deployments(), "default", "web").expect("the Deployment");
    assert_eq!(web.rest["spec"]["replicas"], 3, "the forced apply wins");

    let shown = json(&ok(&[
        "get",
        "deployment",
        "web",
        "-o",
        "json",
        "--show-managed-fields",
    ]));
    let entries = shown["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let managers: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or(""),
                e["operation"].as_str().unwrap_or(""),
            )
        })
        .collect();
    // kubectl re-applies the client-side apply's annotation as `kubectl-last-applied`, once it finds one.
    assert_eq!(
        managers,
        [
            ("kubectl", "Apply"),
            ("kubectl-last-applied", "Apply"),
            ("kubectl-client-side-apply", "Update")
        ],
        "{shown}"
    );
    assert!(
        entries[0]["fieldsV1"]["f:spec"]["f:replicas"].is_object(),
        "the applier owns replicas again: {shown}"
    );
    let yaml = ok(&["get", "deployment", "web", "-o", "yaml", "--show-managed-fields"]);
    assert!(
        yaml.contains("manager: kubectl-client-side-apply") && yaml.contains("operation: Apply"),
        "{yaml}"
    );
    let hidden = json(&ok(&["get", "deployment", "web", "-o", "json"]));
    assert!(
        hidden["metadata"].get("managedFields").is_none(),
        "kubectl hides them by default"
    );
}

#[test]
fn apply_server_side_should_create_update_prune_and_report_conflicts() {
    let Some(sim) = Sim::start() else { return };
    apply_server_side_with(&sim, Path::new("kubectl"));
}

#[test]
fn the_oldest_kubectl_should_apply_server_side_too() {
    let Some(sim) = Sim::start() else { return };
    let binary = Path::new(KUBECTL_1_27);
    if !binary.exists() {
        eprintln!("note: {KUBECTL_1_27} is not installed; skipping");
        return;
    }
    apply_server_side_with(&sim, binary);
}

/// The namespace of the cascade tests.
const SHOP: &str = "shop";

/// The application of the cascade tests, applied into `shop`: the namespace itself, the CRD
/// `widgets.example.com`, the Deployments `web` and `api`, the Job `once`, the Widgets `w1` and `w2`,
/// and the ConfigMap `settings`, which nothing owns and no step may touch.
fn shop() -> String {
    [
        format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {SHOP}}}\n"),
        WIDGET_CRD.to_string(),
        deployment("web"),
        deployment("api"),
        JOB.to_string(),
        widget("w1", 1),
        widget("w2", 2),
        config_map(SHOP, "settings"),
    ]
    .join("---\n")
}

/// How the cascade tests apply their manifests.
#[derive(Clone, Copy, Debug)]
enum Apply {
    ClientSide,
    ServerSide,
}

impl Apply {
    /// The arguments of `kubectl apply` of the manifest at `path` into `shop`.
    fn args(self, path: &str) -> Vec<&str> {
        let mut args = vec!["apply", "-n", SHOP, "-f", path];
        if let Apply::ServerSide = self {
            args.insert(1, "--server-side");
        }
        args
    }

    /// What kubectl says of an object it applied for the first time.
    fn created(self) -> &'static str {
        match self {
            Apply::ClientSide => "created",
            Apply::ServerSide => "serverside-applied",
        }
    }
}

/// What is left in `shop` of the built-in types the cascade tests make, read with kubectl: each
/// object as `Kind/name`, in order, with its `ownerReferences` (null when it has none).
fn left_in_shop(ok: &dyn Fn(&[&str]) -> String) -> Vec<(String, Value)> {
    let list = json(&ok(&[
        "get",
        "deployments,replicasets,jobs,pods,configmaps",
        "-n",
        SHOP,
        "-o",
        "json",
    ]));
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let mut left: Vec<(String, Value)> = items
        .iter()
        .map(|o| {
            let named = format!(
                "{}/{}",
                o["kind"].as_str().unwrap_or("?"),
                o["metadata"]["name"].as_str().unwrap_or("?")
            );
            (named, o["metadata"]["ownerReferences"].clone())
        })
        .collect();
    left.sort_by(|a, b| a.0.cmp(&b.0));
    left
}

/// The names of [`left_in_shop`].
fn names_left_in_shop(ok: &dyn Fn(&[&str]) -> String) -> Vec<String> {
    left_in_shop(ok).into_iter().map(|(name, _)| name).collect()
}

/// One `kubectl delete` of the cascade tests, and what it takes away once the collector is done.
struct Step {
    /// The arguments after `kubectl delete`.
    delete: &'static [&'static str],
    /// The built-in objects it takes away, as `Kind/name`.
    gone: &'static [&'static str],
    /// Whether they are gone when kubectl returns: it waits until the deleted object is gone, and
    /// that object goes after them.
    gone_on_return: bool,
    /// The Widgets left afterwards, or `None` once their type is no longer served.
    widgets: Option<&'static [&'static str]>,
}

/// The cascade tests' steps, in order, each with why upstream's collector ends there.
const STEPS: [Step; 5] = [
    // The server gives `web` the `foregroundDeletion` finalizer. The collector deletes its
    // blocking dependent `web-1` in the foreground too (its owner waits for it), so `web-1`
    // waits for its blocking Pod; the collector deletes the Pod, then lets `web-1` go once it
    // has no dependents, then `web` likewise. kubectl waits for `web`, the last to go.
    Step {
        delete: &["deployment", "web", "--cascade=foreground"],
        gone: &["Deployment/web", "Pod/web-1-a", "ReplicaSet/web-1"],
        gone_on_return: true,
        widgets: Some(&["w1", "w2"]),
    },
    // The server gives `api` the `orphan` finalizer. The collector removes the reference to `api`
    // from its dependent `api-1` (left with none), then the finalizer, and `api` goes; `api-1`'s
    // own Pod keeps its reference to `api-1`, which still exists. kubectl waits for `api`, which
    // goes only after its dependents are orphaned.
    Step {
        delete: &["deployment", "api", "--cascade=orphan"],
        gone: &["Deployment/api"],
        gone_on_return: true,
        widgets: Some(&["w1", "w2"]),
    },
    // kubectl's default, spelled out: the Job goes at once (kubectl sends the policy, so batch/v1's
    // server default, orphan, does not apply). The collector sees it deleted, finds its Pod's only
    // owner absent, and deletes the Pod.
    Step {
        delete: &["job", "once", "--cascade=background"],
        gone: &["Job/once", "Pod/once-a"],
        gone_on_return: false,
        widgets: Some(&["w1", "w2"]),
    },
    // No flag: background. `w1` goes at once; the collector deletes its ConfigMap as it did the
    // Job's Pod.
    Step {
        delete: &["widget", "w1"],
        gone: &["ConfigMap/w1-config"],
        gone_on_return: false,
        widgets: Some(&["w2"]),
    },
    // The server gives the CRD the `customresourcecleanup.apiextensions.k8s.io` finalizer and
    // deletes every Widget left (`w2`, which no finalizer holds); the CRD goes once they are gone,
    // and its type with it, and kubectl waits for that. The collector saw `w2`'s deletion on its watch before the type went, and
    // deletes `w2`'s ConfigMap as it did `w1`'s.
    Step {
        delete: &["crd", "widgets.example.com"],
        gone: &["ConfigMap/w2-config"],
        gone_on_return: false,
        widgets: None,
    },
];

/// A user's session with the collector running: applies the `shop` application with the kubectl at
/// `binary` as `apply` says, then, as the controllers of a real cluster would, what they make of
/// it (ReplicaSets of the Deployments and their Pods, the Job's Pod, a ConfigMap of each Widget),
/// and deletes as [`STEPS`] say; what is left after each step, and its `ownerReferences` at the
/// end, are exactly what upstream's collector leaves.
fn cascade_with(binary: &Path, apply: Apply) {
    let Some(sim) = Sim::with_collector() else { return };
    let ok = |args: &[&str]| sim.ok_of(binary, args);

    // kubectl maps every object of a file before it applies the first, and no Widget type is
    // served yet: on any cluster the Widgets are refused and the rest applied, and once the CRD
    // is established the same command applies them too.
    let manifest = sim.manifest("shop.yaml", &shop());
    let first = sim.kubectl_of(binary, &apply.args(&manifest));
    assert!(
        !first.status.success() && first.stderr.contains("ensure CRDs are installed first"),
        "{apply:?}, the first time:\n{}{}",
        first.stdout,
        first.stderr
    );
    for applied in [
        "namespace/shop",
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com",
        "deployment.apps/web",
        "deployment.apps/api",
        "job.batch/once",
        "configmap/settings",
    ] {
        let said = format!("{applied} {}", apply.created());
        assert!(first.stdout.contains(&said), "{said:?} not in:\n{}", first.stdout);
    }
    ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
        "--timeout=30s",
    ]);
    let second = ok(&apply.args(&manifest));
    for widget in ["w1", "w2"] {
        let said = format!("widget.example.com/{widget} {}", apply.created());
        assert!(second.contains(&said), "{said:?} not in:\n{second}");
    }

    let owner = |resource: &str, name: &str| sim.owner(binary, SHOP, resource, name);
    let made = [
        replica_set("web-1", &owner("deployment", "web")),
        replica_set("api-1", &owner("deployment", "api")),
        pod("once-a", &owner("job", "once")),
        config_map_of("w1-config", &owner("widget", "w1")),
        config_map_of("w2-config", &owner("widget", "w2")),
    ];
    ok(&apply.args(&sim.manifest("made.yaml", &made.join("---\n"))));
    let api_1 = owner("replicaset", "api-1");
    let pods = [pod("web-1-a", &owner("replicaset", "web-1")), pod("api-1-a", &api_1)];
    ok(&apply.args(&sim.manifest("pods.yaml", &pods.join("---\n"))));

    let mut left = vec![
        "ConfigMap/settings",
        "ConfigMap/w1-config",
        "ConfigMap/w2-config",
        "Deployment/api",
        "Deployment/web",
        "Job/once",
        "Pod/api-1-a",
        "Pod/once-a",
        "Pod/web-1-a",
        "ReplicaSet/api-1",
        "ReplicaSet/web-1",
    ];
    assert_eq!(names_left_in_shop(&ok), left, "{apply:?}: everything applied");
    // A collector orphans only the dependents it has seen (upstream's tests wait likewise): an
    // orphan delete racing a dependent's creation would leave it a dangling reference.
    let jsonpath_in_shop = |resources: &str, path: &str| {
        let output = format!("jsonpath={path}");
        ok(&["get", resources, "-n", SHOP, "-o", &output])
    };
    let uids = jsonpath_in_shop(
        "deployments,replicasets,jobs,pods,configmaps,widgets",
        "{.items[*].metadata.uid}",
    );
    sim.eventually("the collector to observe every object", || {
        uids.split_whitespace().all(|uid| sim.observed(uid))
    });

    for step in &STEPS {
        let mut delete = vec!["delete"];
        delete.extend(step.delete);
        delete.extend(["-n", SHOP, "--timeout=30s"]);
        ok(&delete);
        left.retain(|name| !step.gone.contains(name));
        let what = format!("{apply:?}: what `kubectl {}` leaves", delete.join(" "));
        if step.gone_on_return {
            assert_eq!(names_left_in_shop(&ok), left, "{what}");
        } else {
            sim.eventually(&what, || names_left_in_shop(&ok) == left);
        }
        match step.widgets {
            Some(widgets) => {
                let named = ok(&["get", "widgets", "-n", SHOP, "-o", "name"]);
                let named: Vec<&str> = named
                    .lines()
                    .filter_map(|l| l.trim().strip_prefix("widget.example.com/"))
                    .collect();
                assert_eq!(named, widgets, "{what}");
            }
            None => {
                assert_eq!(ok(&["get", "crds", "-o", "name"]).trim(), "", "{what}");
                let served = sim.kubectl_of(binary, &["get", "widgets", "-n", SHOP]);
                assert!(
                    !served.status.success(),
                    "{what}: widgets still served:\n{}",
                    served.stdout
                );
            }
        }
    }

    // The orphaned ReplicaSet has no owner left; its Pod keeps its controller; the ConfigMap nothing
    // owned is untouched; none of them is being deleted; the namespace stays.
    let expected = vec![
        ("ConfigMap/settings".to_string(), Value::Null),
        ("Pod/api-1-a".to_string(), api_1.references()),
        ("ReplicaSet/api-1".to_string(), Value::Null),
    ];
    assert_eq!(left_in_shop(&ok), expected, "{apply:?}: the final state");
    let deleting = jsonpath_in_shop(
        "replicasets,pods,configmaps",
        "{range .items[*]}{.metadata.finalizers}{.metadata.deletionTimestamp}{end}",
    );
    assert_eq!(deleting.trim(), "", "{apply:?}: finalizers or deletionTimestamps left");
    assert_eq!(ok(&["get", "namespace", SHOP, "-o", "name"]).trim(), "namespace/shop");
}

#[test]
fn each_cascade_should_end_where_upstreams_collector_leaves_it_after_either_apply() {
    for apply in [Apply::ClientSide, Apply::ServerSide] {
        cascade_with(Path::new("kubectl"), apply);
    }
}

#[test]
fn the_oldest_kubectl_should_cascade_the_same_way() {
    let binary = Path::new(KUBECTL_1_27);
    if !binary.exists() {
        eprintln!("note: {KUBECTL_1_27} is not installed; skipping");
        return;
    }
    for apply in [Apply::ClientSide, Apply::ServerSide] {
        cascade_with(binary, apply);
    }
}

/// `kubectl auth can-i` asks the server a SelfSubjectAccessReview: everything is allowed, unless
/// the server was told to deny it (`--deny-access-review delete/secrets`).
#[test]
fn auth_can_i_should_answer_as_the_access_review_says() {
    let options = ServerOptions {
        denied: vec!["delete/secrets".parse().expect("a denial")],
        ..ServerOptions::default()
    };
    let Some(sim) = Sim::serve_with(SimCluster::new(), options) else {
        return;
    };
    assert_eq!(sim.ok(&["auth", "can-i", "delete", "pods"]).trim(), "yes");
    // kubectl says "no", with the server's reason, on stdout and exits 1.
    let denied = sim.kubectl(&["auth", "can-i", "delete", "secrets"]);
    assert!(!denied.status.success());
    assert_eq!(denied.stdout.trim(), "no - denied by the server's --deny-access-review");
}

/// What a cluster's namespaces, dry runs and finalizers look like to kubectl: a create in a
/// namespace that does not exist is refused, `--dry-run=server` answers without storing, and an
/// object a finalizer holds shows `deletionGracePeriodSeconds: 0` once deleted.
#[test]
fn creates_dry_runs_and_held_deletes_should_look_as_on_a_cluster() {
    let cluster = SimCluster::new();
    cluster.enforce_namespaces(true);
    let Some(sim) = Sim::serve(cluster) else { return };
    sim.ok(&["create", "namespace", "shop"]);
    let refused = sim.fails(&["create", "configmap", "lost", "-n", "nowhere"]);
    assert!(refused.contains("namespaces \"nowhere\" not found"), "{refused}");

    let said = sim.ok(&[
        "create",
        "configmap",
        "trial",
        "-n",
        "shop",
        "--dry-run=server",
        "-o",
        "name",
    ]);
    assert_eq!(said.trim(), "configmap/trial");
    assert!(
        sim.stored(&config_maps(), "shop", "trial").is_none(),
        "a dry run stores nothing"
    );

    let held =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, namespace: shop, finalizers: [example.com/hold]}\n";
    sim.create("held.yaml", held);
    sim.ok(&["delete", "configmap", "held", "-n", "shop", "--wait=false"]);
    let seen = sim.ok(&[
        "get",
        "configmap",
        "held",
        "-n",
        "shop",
        "-o",
        "jsonpath={.metadata.deletionGracePeriodSeconds} {.metadata.deletionTimestamp}",
    ]);
    let (grace, timestamp) = seen.trim().split_once(' ').expect("a grace period and a timestamp");
    assert_eq!(grace, "0");
    assert!(!timestamp.is_empty());
}
