//! The storage version migrator over the collector's graph ([`kube_gc::migrator`]), against the
//! in-memory cluster: a StorageVersionMigration rewrites every object of its resource stored
//! before it, once; an object changed, deleted or created again since is skipped and never
//! created again; a transient error leaves the migration to the next pass; a resource nobody
//! serves fails it, as upstream's migrator does; sharded collectors each rewrite their part and
//! succeed only together. Then the whole of it between processes: kubectl creates a migration on
//! `kube-gc sim-apiserver` and `kube-gc run` carries it out.

use crate::support::process::{kubectl, kubectl_available};
use crate::support::processes::{CollectorProcess, Server, PATIENCE};
use crate::support::{
    configmaps, crd_manifest, eventually, fault, http_request, meta, within_real_time, Harness, Recorder,
};
use kube_gc::api::layers::Verb;
use kube_gc::api::{ClusterApi, Gvr, ObjectMeta, PartialObjectMeta, StatusReason};
use kube_gc::controller::Config;
use kube_gc::migrator::svm::{Svm, FAILED, RUNNING, SUCCEEDED};
use kube_gc::migrator::MigratorConfig;
use kube_gc::shard::{Ranges, Shard};
use kube_gc_sim::{SimCluster, TypeDef};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Objects of the resource migrated in each test.
const OBJECTS: usize = 40;

fn svms() -> Gvr {
    Gvr::new("storagemigration.k8s.io", "v1beta1", "storageversionmigrations")
}

/// A StorageVersionMigration of `group`'s `resource`.
fn migration(name: &str, group: &str, resource: &str) -> PartialObjectMeta {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"resource": {"group": group, "resource": resource}},
    }))
    .expect("a migration")
}

/// The migration `name` as stored.
fn read(cluster: &SimCluster, name: &str) -> Svm {
    Svm::read(cluster.get_object(&svms(), "", name).expect("the migration exists"))
}

/// A collector over a cluster holding [`OBJECTS`] ConfigMaps stored at storage generation 1,
/// the resource moved to generation 2 since.
async fn stale_configmaps() -> Harness {
    let h = Harness::start().await;
    for i in 0..OBJECTS {
        h.create(&configmaps(), meta("default", &format!("cm-{i}"), vec![]));
    }
    assert_eq!(h.cluster.rotate_storage(&configmaps()), Ok(2));
    assert_eq!(h.cluster.storage_report(&configmaps()).unwrap().stale(), OBJECTS);
    h
}

/// Starts a migrator beside `h`'s collector, writing through `api` and polling every 20 ms.
fn start<A: ClusterApi>(h: &Harness, api: Arc<A>) {
    let config = MigratorConfig {
        poll: Duration::from_millis(20),
        concurrency: 4,
    };
    h.gc.start_migrator(api, config);
}

/// Creates the migration `name` of `group`'s resource served at `gvr` and, once it has its
/// checkpoint and says it waits for the collector's view, one more object of the resource: the
/// in-memory watches send no bookmarks, so the collector's view of the resource reaches the
/// checkpoint only with a later event, as on a cluster it does with the next bookmark.
async fn migrate(h: &Harness, name: &str, group: &str, gvr: &Gvr) -> PartialObjectMeta {
    h.cluster
        .create(&svms(), migration(name, group, &gvr.resource))
        .unwrap();
    eventually("the migration gets its checkpoint", || {
        !read(&h.cluster, name).status.resource_version.is_empty()
    })
    .await;
    eventually("the migration says it waits for the collector's view", || {
        let active = h.gc.migrations().active();
        active
            .iter()
            .any(|m| m.name == name && m.waiting_for.starts_with("GC cache is not up to date"))
    })
    .await;
    h.create(gvr, meta("default", "after-the-checkpoint", vec![]))
}

/// [`migrate`] of ConfigMaps.
async fn migrate_configmaps(h: &Harness, name: &str) -> PartialObjectMeta {
    migrate(h, name, "", &configmaps()).await
}

/// Waits for the migration `name` to end; returns it.
async fn ended(h: &Harness, name: &str) -> Svm {
    eventually("the migration ends", || read(&h.cluster, name).is_terminal()).await;
    read(&h.cluster, name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_should_rewrite_every_object_stored_before_it_exactly_once() {
    let h = stale_configmaps().await;
    start(&h, h.cluster.clone());
    migrate_configmaps(&h, "configmaps-1").await;
    let done = ended(&h, "configmaps-1").await;

    assert!(done.is(SUCCEEDED) && !done.is(RUNNING), "{:?}", done.status);
    let report = h.cluster.storage_report(&configmaps()).unwrap();
    assert_eq!(report.stale(), 0, "{report:?}");
    assert_eq!(report.objects.get(&2), Some(&(OBJECTS + 1)), "{report:?}");
    let totals = h.gc.migrations().totals()["configmaps"];
    assert_eq!(
        totals.migrated, OBJECTS as u64,
        "each object once, the later one not at all"
    );
    assert_eq!((totals.succeeded, totals.failed), (1, 0));
    assert!(h.gc.migrations().active().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_changed_or_gone_during_a_migration_should_be_skipped_and_never_created_again() {
    let h = stale_configmaps().await;
    let api = Arc::new(Recorder::new(h.cluster.clone()));
    // Right before the first rewrite, one object goes, one changes, one is deleted and created
    // again under its name: the graph still holds them as they were.
    api.before_next_apply(|cluster: &SimCluster| {
        let gone = |name: &str| {
            let options = kube_gc::api::DeleteOptions::default();
            cluster.delete_object(&configmaps(), "default", name, &options).unwrap();
        };
        gone("cm-0");
        let mut changed = cluster.get_object(&configmaps(), "default", "cm-1").unwrap();
        changed.metadata.labels.insert("changed".into(), "yes".into());
        cluster.update(&configmaps(), changed).unwrap();
        gone("cm-2");
        let again = PartialObjectMeta {
            metadata: ObjectMeta {
                name: "cm-2".into(),
                namespace: "default".into(),
                ..ObjectMeta::default()
            },
            ..PartialObjectMeta::default()
        };
        cluster.create(&configmaps(), again).unwrap();
    });
    start(&h, api.clone());
    migrate_configmaps(&h, "churn").await;
    let done = ended(&h, "churn").await;

    assert!(done.is(SUCCEEDED), "{:?}", done.status);
    assert!(
        h.cluster.get_object(&configmaps(), "default", "cm-0").is_err(),
        "a deleted object is never created again"
    );
    let report = h.cluster.storage_report(&configmaps()).unwrap();
    assert_eq!(report.stale(), 0, "{report:?}");
    let totals = h.gc.migrations().totals()["configmaps"];
    assert_eq!(
        totals.migrated,
        (OBJECTS - 3) as u64,
        "the three changed ones were skipped"
    );
    assert!(api.count("apply v1/configmaps default/cm-0") <= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_error_should_leave_the_migration_running_for_the_next_pass() {
    let h = stale_configmaps().await;
    let unavailable = fault(
        Verb::Patch,
        Some(("", "configmaps")),
        StatusReason::ServiceUnavailable,
        "the server is currently unable to handle the request",
    );
    h.cluster.inject_fault(kube_gc::api::layers::Fault {
        times: Some(3),
        ..unavailable
    });
    start(&h, h.cluster.clone());
    migrate_configmaps(&h, "retried").await;
    let done = ended(&h, "retried").await;

    assert!(done.is(SUCCEEDED), "{:?}", done.status);
    assert_eq!(h.cluster.storage_report(&configmaps()).unwrap().stale(), 0);
    assert_eq!(h.gc.migrations().totals()["configmaps"].migrated, OBJECTS as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_of_a_resource_nobody_serves_should_fail() {
    let h = Harness::start().await;
    start(&h, h.cluster.clone());
    h.cluster
        .create(&svms(), migration("widgets", "example.com", "widgets"))
        .unwrap();
    let done = ended(&h, "widgets").await;

    assert!(done.is(FAILED) && !done.is(RUNNING), "{:?}", done.status);
    let failed = done.status.conditions.iter().find(|c| c.kind == FAILED).unwrap();
    assert_eq!(failed.message, "resource does not exist in discovery");
    assert!(done.status.resource_version.is_empty());
}

/// The storage report of ConfigMaps from `kube-gc sim-apiserver` at `addr`, after a rotation
/// first if `rotate`.
async fn configmaps_report(addr: std::net::SocketAddr, rotate: bool) -> serde_json::Value {
    let method = if rotate { "POST" } else { "GET" };
    let (code, body) = http_request(addr, method, "/sim/storage/api/v1/configmaps").await;
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_created_with_kubectl_should_succeed_with_every_object_rewritten_once() {
    if !kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let server = Server::start(dir.path(), &["--bookmark-interval", "1s"]).await;
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = server.api("default");
    for i in 0..OBJECTS {
        let cm = serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}})).unwrap();
        cms.create(&Default::default(), &cm).await.expect("create");
    }
    let rotated = configmaps_report(server.addr, true).await;
    assert_eq!(rotated["generation"], 2, "{rotated}");
    assert_eq!(rotated["objects"]["1"], OBJECTS, "{rotated}");
    let collector = CollectorProcess::ready(&server, dir.path(), &["--migrator-qps", "0"]).await;

    let manifest = dir.path().join("migration.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: storagemigration.k8s.io/v1beta1
kind: StorageVersionMigration
metadata: {name: configmaps-rotated}
spec:
  resource: {group: '', resource: configmaps}
",
    )
    .expect("a manifest");
    let manifest = manifest.to_str().expect("a UTF-8 path");
    let applied = kubectl(&server.kubeconfig, dir.path(), &["apply", "-f", manifest]);
    assert!(applied.contains("configmaps-rotated"), "{applied}");
    let succeeded = "jsonpath={.status.conditions[?(@.type==\"Succeeded\")].status}";
    let get = ["get", "storageversionmigrations", "configmaps-rotated", "-o", succeeded];
    within_real_time("the migration succeeds", PATIENCE, async || {
        kubectl(&server.kubeconfig, dir.path(), &get) == "True"
    })
    .await;

    let report = configmaps_report(server.addr, false).await;
    assert_eq!(report["objects"], json!({"2": OBJECTS}), "{report}");
    let metrics = collector.metrics().await;
    let migrated =
        format!("storage_migrator_core_migrator_migrated_objects_total{{resource=\"configmaps\"}} {OBJECTS}\n");
    assert!(metrics.contains(&migrated), "{metrics}");
    let ended = "storage_migrator_core_migrator_migrations_total{resource=\"configmaps\",status=\"Succeeded\"} 1\n";
    assert!(metrics.contains(ended), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_collectors_should_each_rewrite_their_part_and_succeed_only_together() {
    let roles = Gvr::new("rbac.authorization.k8s.io", "v1", "clusterroles");
    let cluster = Arc::new(SimCluster::new());
    for i in 0..OBJECTS {
        crate::support::create_in(&cluster, &roles, meta("", &format!("role-{i}"), vec![]));
    }
    cluster.rotate_storage(&roles).unwrap();
    let half = |index| Config {
        shard: Arc::new(Shard::new(Ranges::slice(index, 2))),
        ..Config::default()
    };
    let a = Harness::start_over(cluster.clone(), cluster.clone(), half(0)).await;
    let b = Harness::start_over(cluster.clone(), cluster.clone(), half(1)).await;
    start(&a, cluster.clone());
    start(&b, cluster.clone());
    cluster
        .create(&svms(), migration("roles", "rbac.authorization.k8s.io", "clusterroles"))
        .unwrap();
    eventually("the migration gets its checkpoint", || {
        !read(&cluster, "roles").status.resource_version.is_empty()
    })
    .await;
    crate::support::create_in(&cluster, &roles, meta("", "after-the-checkpoint", vec![]));

    eventually("both parts rewritten", || {
        cluster.storage_report(&roles).unwrap().stale() == 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !read(&cluster, "roles").is_terminal(),
        "no replica has heard of the other's part yet"
    );
    // Each replica reads the other's report, as from its Lease.
    eventually("the migration succeeds once the parts are known", || {
        a.gc.shard().set_peers([("b".to_string(), b.gc.report())].into());
        b.gc.shard().set_peers([("a".to_string(), a.gc.report())].into());
        read(&cluster, "roles").is(SUCCEEDED)
    })
    .await;
    let migrated = |h: &Harness| {
        h.gc.migrations()
            .totals()
            .get("clusterroles.rbac.authorization.k8s.io")
            .map_or(0, |t| t.migrated)
    };
    let (by_a, by_b) = (migrated(&a), migrated(&b));
    assert_eq!(
        by_a + by_b,
        OBJECTS as u64,
        "each object once, by the replica that owns it"
    );
    assert!(by_a > 0 && by_b > 0, "both replicas did their part: {by_a} and {by_b}");
}

fn crds() -> Gvr {
    Gvr::new("apiextensions.k8s.io", "v1", "customresourcedefinitions")
}

/// Gadgets at their served version.
fn gadgets() -> Gvr {
    Gvr::new("example.com", "v2", "gadgets")
}

/// The CRD of gadgets, served at v1 and v2 and stored at `storage`.
fn gadget_crd(storage: &str) -> PartialObjectMeta {
    let mut crd = crd_manifest("gadgets", "Gadget");
    let version = |name: &str| {
        json!({"name": name, "served": true, "storage": name == storage,
               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
    };
    crd["spec"]["versions"] = json!([version("v1"), version("v2")]);
    serde_json::from_value(crd).expect("a CRD")
}

/// A collector over [`OBJECTS`] gadgets stored at v1, their CRD's storage version moved to v2
/// since: the CRD stores both.
async fn stale_gadgets() -> Harness {
    let h = Harness::start().await;
    let created = h.cluster.create(&crds(), gadget_crd("v1")).expect("the CRD");
    h.gc.sync_once().await;
    assert!(
        h.gc.wait_for_sync(Duration::from_secs(60)).await,
        "gadgets never synced"
    );
    for i in 0..OBJECTS {
        h.create(&gadgets(), meta("default", &format!("g-{i}"), vec![]));
    }
    let mut moved = gadget_crd("v2");
    moved.metadata.resource_version = created.metadata.resource_version;
    let crd = h.cluster.update(&crds(), moved).expect("the storage version moves");
    assert_eq!(crd.rest["status"]["storedVersions"], json!(["v1", "v2"]));
    assert_eq!(h.cluster.storage_report(&gadgets()).unwrap().stale(), OBJECTS);
    h
}

/// Runs the migration of gadgets to its end and until it has lost `Running`; returns it and
/// the CRD after it.
async fn migrate_gadgets(h: &Harness) -> (Svm, PartialObjectMeta) {
    migrate(h, "gadgets", "example.com", &gadgets()).await;
    eventually("the migration ends and stops running", || {
        let svm = read(&h.cluster, "gadgets");
        svm.is_terminal() && !svm.has(RUNNING)
    })
    .await;
    let crd = h.cluster.get_object(&crds(), "", "gadgets.example.com").unwrap();
    (read(&h.cluster, "gadgets"), crd)
}

/// The CRD's `StorageMigrating` condition.
fn storage_migrating(crd: &PartialObjectMeta) -> serde_json::Value {
    let conditions = crd.rest["status"]["conditions"].as_array().expect("conditions");
    let found = conditions.iter().find(|c| c["type"] == "StorageMigrating");
    found
        .cloned()
        .unwrap_or_else(|| panic!("no StorageMigrating condition: {conditions:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_migration_should_mark_its_crd_and_then_trim_its_stored_versions() {
    let h = stale_gadgets().await;
    let api = Arc::new(Recorder::new(h.cluster.clone()));
    let during = Arc::new(parking_lot::Mutex::new(None));
    let seen = during.clone();
    api.before_next_apply(move |cluster: &SimCluster| {
        let crd = cluster.get_object(&crds(), "", "gadgets.example.com").unwrap();
        *seen.lock() = Some(storage_migrating(&crd));
    });
    start(&h, api);
    let (done, crd) = migrate_gadgets(&h).await;

    let during = during.lock().clone().expect("a rewrite happened");
    assert_eq!(
        (&during["status"], &during["reason"], &during["message"]),
        (
            &json!("True"),
            &json!("MigrationRunning"),
            &json!("Migration gadgets is running")
        ),
        "{during}"
    );
    assert!(done.is(SUCCEEDED), "{:?}", done.status);
    let after = storage_migrating(&crd);
    assert_eq!(
        (&after["status"], &after["reason"]),
        (&json!("False"), &json!("MigrationSucceeded"))
    );
    assert_eq!(
        after["message"],
        "The migration has succeeded and the stored versions have been updated"
    );
    assert_eq!(crd.rest["status"]["storedVersions"], json!(["v2"]));
    assert_eq!(h.cluster.storage_report(&gadgets()).unwrap().stale(), 0);
    // v1 holds nothing any more: the CRD may now drop it.
    let mut dropped = crd.clone();
    dropped.rest["spec"]["versions"] = json!([gadget_crd("v2").rest["spec"]["versions"][1]]);
    h.cluster.update(&crds(), dropped).expect("v1 can go");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_changed_during_its_migration_should_keep_its_stored_versions() {
    let h = stale_gadgets().await;
    let api = Arc::new(Recorder::new(h.cluster.clone()));
    // Right before the first rewrite, the CRD's spec changes (a new schema for v1): its
    // generation moves past the one the migration started at.
    api.before_next_apply(|cluster: &SimCluster| {
        let mut crd = cluster.get_object(&crds(), "", "gadgets.example.com").unwrap();
        crd.rest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = json!("changed");
        let crd = cluster.update(&crds(), crd).unwrap();
        assert_eq!(crd.metadata.generation, Some(3));
    });
    start(&h, api);
    let (done, crd) = migrate_gadgets(&h).await;

    assert!(done.is(SUCCEEDED), "{:?}", done.status);
    let after = storage_migrating(&crd);
    assert_eq!(after["reason"], "MigrationSucceeded");
    assert!(
        after["message"]
            .as_str()
            .unwrap()
            .ends_with("due to a generation mismatch"),
        "{after}"
    );
    assert_eq!(crd.rest["status"]["storedVersions"], json!(["v1", "v2"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_removed_during_its_migration_should_fail_it() {
    let h = Harness::start().await;
    let widgets = h
        .serve(TypeDef::new("example.com", "v1", "Widget", "widgets", true).custom())
        .await;
    for i in 0..OBJECTS {
        h.create(&widgets, meta("default", &format!("w-{i}"), vec![]));
    }
    h.cluster.rotate_storage(&widgets).unwrap();
    let api = Arc::new(Recorder::new(h.cluster.clone()));
    // Right before the first rewrite, the type goes, as when its CRD is deleted.
    api.before_next_apply(|cluster: &SimCluster| cluster.unregister("example.com", "widgets"));
    start(&h, api);
    migrate(&h, "widgets", "example.com", &widgets).await;
    let done = ended(&h, "widgets").await;

    assert!(done.is(FAILED) && !done.is(RUNNING), "{:?}", done.status);
    let failed = done.status.conditions.iter().find(|c| c.kind == FAILED).unwrap();
    assert!(
        failed.message.starts_with("migration encountered unhandled error: "),
        "{}",
        failed.message
    );
    assert_eq!(h.gc.migrations().totals()["widgets.example.com"].failed, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_should_go_on_after_the_api_server_restarts_in_its_middle() {
    const MANY: usize = 300;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let state = dir.path().join("state.jsonl");
    let server_flags = [
        "--bookmark-interval",
        "1s",
        "--state-file",
        state.to_str().expect("UTF-8"),
    ];
    let mut server = Server::start(dir.path(), &server_flags).await;
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = server.api("default");
    for i in 0..MANY {
        let cm = serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}})).unwrap();
        cms.create(&Default::default(), &cm).await.expect("create");
    }
    configmaps_report(server.addr, true).await;
    // Slow rewrites, so that the restart falls in the middle of them.
    let flags = [
        "--migrator-qps",
        "30",
        "--migrator-burst",
        "1",
        "--migrator-concurrency",
        "1",
    ];
    let collector = CollectorProcess::ready(&server, dir.path(), &flags).await;
    let resource = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "storagemigration.k8s.io",
        "v1beta1",
        "StorageVersionMigration",
    ));
    let migrations = kube::Api::<kube::api::DynamicObject>::all_with(server.client.clone(), &resource);
    let svm = serde_json::from_value(json!({
        "apiVersion": "storagemigration.k8s.io/v1beta1",
        "kind": "StorageVersionMigration",
        "metadata": {"name": "across-a-restart"},
        "spec": {"resource": {"group": "", "resource": "configmaps"}},
    }))
    .unwrap();
    migrations
        .create(&Default::default(), &svm)
        .await
        .expect("create the migration");
    within_real_time("some objects rewritten", PATIENCE, async || {
        configmaps_report(server.addr, false).await["objects"]["2"].as_u64() >= Some(20)
    })
    .await;

    let before = configmaps_report(server.addr, false).await["objects"]["2"].as_u64();
    server.process.signal(libc::SIGTERM);
    server.process.wait(PATIENCE);
    assert!(
        before < Some(MANY as u64),
        "the restart falls in the middle: {before:?} of {MANY} rewritten"
    );
    let server = Server::start_on(&server.addr.to_string(), dir.path(), &server_flags).await;
    let migrations = kube::Api::<kube::api::DynamicObject>::all_with(server.client.clone(), &resource);
    within_real_time("the migration succeeds", PATIENCE, async || {
        let object = migrations
            .get("across-a-restart")
            .await
            .map(|o| serde_json::to_value(o).unwrap());
        object.is_ok_and(|o| Svm::read(serde_json::from_value(o).unwrap()).is(SUCCEEDED))
    })
    .await;
    let report = configmaps_report(server.addr, false).await;
    assert_eq!(report["objects"], json!({"2": MANY}), "{report}");
    let metrics = collector.metrics().await;
    let migrated = metrics
        .lines()
        .find_map(|l| l.strip_prefix("storage_migrator_core_migrator_migrated_objects_total{resource=\"configmaps\"} "))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no migrated count in {metrics}"));
    assert!(migrated <= MANY, "no object rewritten twice: {migrated}");
}
