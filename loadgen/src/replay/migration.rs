//! `replay --mode full --migrate RESOURCE`: a storage version migration runs beside the collector
//! while the replay's actions cascade, as on a cluster where kube-gc also carries out
//! StorageVersionMigrations ([`kube_gc::migrator`]).
//!
//! Before the collector starts, `--migrate-objects N` objects of the resource are added (a name
//! each, spread over the stream's namespaces), beside the stream's own. Once the collector has
//! settled, the resource moves to its next storage generation, every replica starts its migrator
//! (writing through the collector's API, latency included, under `--migrate-qps`), and a StorageVersionMigration is
//! created just before the first action. The report gives the migration's time and rewrites, and
//! the cascade's own time: until the cluster holds what the reference model says it ends with
//! (the collector's settle waits for the migration too, so its time is not the cascade's). A run
//! without `--migrate` reports the cascade's time the same way, for the comparison.

use super::full::Api;
use super::replicas::Replicas;
use anyhow::Context;
use kube_gc::api::layers::{Budget, Budgets, Layered};
use kube_gc::api::{GroupResource, Gvr, ObjectMeta, PartialObjectMeta, RestMapper};
use kube_gc::migrator::svm::{Svm, SUCCEEDED};
use kube_gc::migrator::MigratorConfig;
use kube_gc_sim::SimCluster;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the end of the migration and of the cascade are looked for.
const CHECK_EVERY: Duration = Duration::from_millis(5);

/// The migration `--migrate` asks for.
#[derive(Clone, Debug)]
pub struct MigrateOptions {
    /// The resource to migrate.
    pub resource: GroupResource,
    /// Objects of it added before the collector starts.
    pub objects: usize,
    /// The migrator's budget, in requests per second (0: none), as `kube-gc run
    /// --migrator-qps` sets it.
    pub qps: f64,
}

/// What the migration came to.
#[derive(Clone, Debug, Serialize)]
pub struct MigrationFigures {
    /// The resource, as `resource.group`.
    pub resource: String,
    /// Its objects when the migration began.
    pub objects: usize,
    /// Objects rewritten.
    pub rewritten: u64,
    /// From the migration's creation to `Succeeded`.
    pub seconds: f64,
    /// Objects still at the old storage generation afterwards (0 when it worked).
    pub stale_after: usize,
}

/// The resource `options` names, as discovery on `cluster` serves it.
pub fn served(resources: &[kube_gc::api::ApiResource], options: &MigrateOptions) -> anyhow::Result<Gvr> {
    let mapper = RestMapper::new(resources);
    let resource = &options.resource;
    mapper
        .preferred(&resource.group, &resource.resource)
        .map(|r| r.gvr.clone())
        .with_context(|| format!("--migrate {resource}: the cluster does not serve it"))
}

/// Adds `objects` objects of `gvr` to `cluster`, spread over `namespaces` (all in `""` when the
/// resource is cluster-scoped or there is none); returns their UIDs, which the outcome's
/// comparison with the model leaves out.
pub fn populate(
    cluster: &SimCluster,
    gvr: &Gvr,
    namespaced: bool,
    namespaces: &[String],
    objects: usize,
) -> anyhow::Result<Vec<String>> {
    let none = [String::new()];
    let namespaces = if namespaced && !namespaces.is_empty() {
        namespaces
    } else {
        &none[..]
    };
    let mut uids = Vec::with_capacity(objects);
    for i in 0..objects {
        let object = PartialObjectMeta {
            metadata: ObjectMeta {
                name: format!("migrated-{i}"),
                namespace: namespaces[i % namespaces.len()].clone(),
                ..ObjectMeta::default()
            },
            ..PartialObjectMeta::default()
        };
        let created = cluster
            .create(gvr, object)
            .with_context(|| format!("adding the objects to migrate to {gvr}"))?;
        uids.push(created.metadata.uid);
    }
    Ok(uids)
}

/// A migration under way.
pub struct Started {
    gvr: Gvr,
    objects: usize,
    began: Instant,
}

/// Moves `gvr` to its next storage generation, starts every replica's migrator through `api`,
/// and creates the migration.
pub fn begin(
    cluster: &SimCluster,
    api: &Arc<Api>,
    replicas: &Replicas,
    gvr: &Gvr,
    options: &MigrateOptions,
) -> anyhow::Result<Started> {
    cluster.rotate_storage(gvr)?;
    let objects = cluster.storage_report(gvr)?.stale();
    let config = MigratorConfig {
        poll: Duration::from_millis(50),
        concurrency: 16,
    };
    let budget = Budget {
        qps: options.qps,
        burst: 100,
    };
    let budgeted = Arc::new(Layered::new(Budgets::new(budget, budget, budget), api.clone()));
    replicas.start_migrators(&budgeted, config);
    let resource = &options.resource;
    let migration: PartialObjectMeta = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "loadgen"},
        "spec": {"resource": {"group": resource.group, "resource": resource.resource}},
    }))?;
    let began = Instant::now();
    cluster
        .create(&svms(), migration)
        .context("creating the StorageVersionMigration")?;
    Ok(Started {
        gvr: gvr.clone(),
        objects,
        began,
    })
}

fn svms() -> Gvr {
    Gvr::new(kube_gc::migrator::GROUP, "v1beta1", kube_gc::migrator::RESOURCE)
}

/// Waits, up to `timeout`, for the migration to succeed.
pub async fn finish(
    cluster: &SimCluster,
    replicas: &Replicas,
    started: Started,
    timeout: Duration,
) -> anyhow::Result<MigrationFigures> {
    let deadline = started.began + timeout;
    loop {
        // The in-memory cluster's watches have no bookmark timer: ask for progress, as a real
        // API server's watch cache does, so the view of a quiet resource reaches the checkpoint.
        cluster.request_watch_progress(&started.gvr)?;
        let svm = Svm::read(cluster.get_object(&svms(), "", "loadgen")?);
        if svm.is(SUCCEEDED) {
            break;
        }
        anyhow::ensure!(!svm.is_terminal(), "the migration failed: {:?}", svm.status.conditions);
        anyhow::ensure!(
            Instant::now() < deadline,
            "the migration did not succeed within {timeout:?}"
        );
        tokio::time::sleep(CHECK_EVERY).await;
    }
    let seconds = started.began.elapsed().as_secs_f64();
    let report = cluster.storage_report(&started.gvr)?;
    Ok(MigrationFigures {
        resource: report.resource.clone(),
        objects: started.objects,
        rewritten: replicas.migrated(),
        seconds,
        stale_after: report.stale(),
    })
}

/// Waits until `cluster` holds `objects` objects, checking every few milliseconds and calling
/// `each_check` at each check; the time since `began`, or none if it does not within `timeout`
/// (the outcome then differs from the model's, which the report says).
pub async fn cascade_ends(
    cluster: &SimCluster,
    objects: usize,
    (began, timeout): (Instant, Duration),
    mut each_check: impl FnMut(),
) -> Option<Duration> {
    while began.elapsed() < timeout {
        if cluster.object_count() == objects {
            return Some(began.elapsed());
        }
        each_check();
        tokio::time::sleep(CHECK_EVERY).await;
    }
    None
}

/// The watches of the migration under way get their progress notifications, so that it
/// rewrites during the cascade.
pub fn notify_progress(cluster: &SimCluster, started: &Started) {
    let _ = cluster.request_watch_progress(&started.gvr);
}
