//! The storage version migrator: when a StorageVersionMigration (`storagemigration.k8s.io`) asks
//! for it, every object of a resource is written again, so that it is stored in the resource's
//! current storage version (or under the current encryption key).
//!
//! kube-controller-manager's migrator does not list the resource it migrates: it walks its
//! garbage collector's graph builder cache, which holds every object of every resource, and
//! refuses to start without the collector. kube-gc's graph holds the same objects, each with its
//! UID and resourceVersion, so the migrator lives here, and switching off kube-controller-manager's
//! collector does not switch off migration.
//!
//! # A migration's steps, as upstream's three controllers take them
//!
//! 1. **Admission** (upstream's migration runner, [`admit`]): of the migrations of one resource,
//!    one at a time runs. Once none does, the oldest (by creation, then name) that has neither
//!    run nor ended gets the `Running` condition, after the resource's CRD, if it has one, got
//!    `StorageMigrating` ([`crd`]). A migration that has ended loses `Running` once its CRD
//!    knows how it ended (and, after a success, stores only its storage version).
//! 2. **The checkpoint** (upstream's resource-version controller): a running migration without
//!    `status.resourceVersion` gets the resource's current one, read by a LIST of one object; a
//!    resource discovery does not show fails the migration.
//! 3. **The rewrite** ([`migration`]): once the collector's view of the resource has reached the
//!    checkpoint, every object of the graph stored at or before it is applied again, unchanged;
//!    then `Succeeded`, or `Failed` on an error that is not transient, which ends `Running`.
//!
//! # Invariants
//!
//! - It runs where the collector runs, leader-elected with it, through a client of its own: its
//!   own request budget (a migration of a million objects never delays a collector request) and
//!   the collector's write fence.
//! - It writes a migration's status only through the `status` subresource, with the
//!   resourceVersion it read as the precondition: after a conflict it reads again at the next
//!   poll, never writes over a newer status.
//! - It polls the migrations (there are few, and a poll after a restart of anything finds where
//!   each one stands, with no watch to resume), and at most one pass over a migration runs at a
//!   time. Once every migration has ended it lists them again only after the collector's own
//!   monitor of StorageVersionMigrations has seen a change or a bookmark, so an idle cluster
//!   costs a LIST per bookmark, not one per poll.
//! - It never changes an object's content and never creates one ([`migration`]).
//! - Sharded replicas ([`crate::shard`]) each rewrite their own part (their namespaces, and the
//!   cluster-scoped objects whose UID hashes into their ranges) and publish the migrations whose
//!   part is done on their Lease; the replica that holds the migration itself admits it, records
//!   its checkpoint, and marks it `Succeeded` only once the parts done cover the whole hash space,
//!   as the finalizers of a cluster-scoped owner wait for every shard.

pub mod crd;
pub mod migration;
mod progress;
pub mod svm;

pub use migration::{Pass, FIELD_MANAGER};
pub use progress::{Active, Figures, Migrations, Totals};

use crate::api::{ClusterApi, GroupResource, Gvr, SharedRestMapper};
use crate::graph::{Graph, ResourceVersion, Uid};
use crate::monitor::MonitorStatus;
use crate::router::Router;
use crate::shard::Shard;
use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use svm::{Svm, FAILED, RUNNING, SUCCEEDED};

/// The group of StorageVersionMigrations.
pub const GROUP: &str = "storagemigration.k8s.io";
/// Their resource.
pub const RESOURCE: &str = "storageversionmigrations";

/// How the migrator runs.
#[derive(Clone, Debug)]
pub struct MigratorConfig {
    /// How often the migrations are read.
    pub poll: Duration,
    /// Rewrites in flight at once, per migration.
    pub concurrency: usize,
}

impl Default for MigratorConfig {
    fn default() -> Self {
        MigratorConfig {
            poll: Duration::from_secs(1),
            concurrency: 4,
        }
    }
}

/// What the migrator reads of a collector: its graph, and what says how complete the graph is.
pub struct Collected {
    /// The graph, every object of every monitored resource.
    pub graph: Arc<Graph>,
    /// The router, to wait until the builders applied what the monitors routed.
    pub router: Router,
    /// Discovery, to resolve a migration's resource.
    pub mapper: Arc<SharedRestMapper>,
    /// The monitors' views.
    pub monitors: Arc<dyn MonitorStatuses>,
    /// The part of the cluster the collector acts on.
    pub shard: Arc<Shard>,
    /// Where the figures go.
    pub migrations: Arc<Migrations>,
}

/// What the migrator needs to know of the monitors.
pub trait MonitorStatuses: Send + Sync + 'static {
    /// The view of the monitor of `gvr`, if one runs.
    fn status_of(&self, gvr: &Gvr) -> Option<Arc<MonitorStatus>>;
}

/// A migrator over a collector's graph; see the [module docs](self).
pub struct Migrator<M> {
    collected: Collected,
    api: Arc<M>,
    config: MigratorConfig,
    /// Migrations a pass is running over, by name.
    passing: Mutex<HashSet<String>>,
    /// What the last list saw: the resourceVersion the migrations' monitor had reached before
    /// it (none without a monitor), and whether any migration had yet to end (or to lose its
    /// `Running` condition).
    last_list: Mutex<Option<(Option<ResourceVersion>, bool)>>,
}

impl<M: ClusterApi> Migrator<M> {
    /// A migrator reading `collected` and writing through `api`.
    pub fn new(collected: Collected, api: Arc<M>, config: MigratorConfig) -> Arc<Self> {
        Arc::new(Migrator {
            collected,
            api,
            config,
            passing: Mutex::default(),
            last_list: Mutex::default(),
        })
    }

    /// Polls the migrations every [`MigratorConfig::poll`]; never returns.
    pub async fn run(self: Arc<Self>) {
        let mut every = tokio::time::interval(self.config.poll);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            self.poll_once().await;
        }
    }

    /// Reads every migration once and takes each as far as it can go now: admissions and
    /// checkpoints are written before this returns, passes are started on their own tasks.
    pub async fn poll_once(self: &Arc<Self>) {
        let Some(gvr) = served(&self.collected.mapper) else {
            return; // the cluster does not serve migrations (yet: discovery is read again)
        };
        // Read before the list, so that a change the list misses moves it for the next poll.
        let seen = self
            .collected
            .monitors
            .status_of(&gvr)
            .map(|s| s.last_sync_resource_version());
        if seen.is_some() && *self.last_list.lock() == Some((seen, false)) {
            return; // every migration has ended, and the monitor has seen nothing since
        }
        let svms: Vec<Svm> = match self.api.list_whole(&gvr).await {
            Ok(list) => list.items.into_iter().map(Svm::read).collect(),
            Err(error) => {
                tracing::warn!(%error, "listing StorageVersionMigrations failed; trying again at the next poll");
                return;
            }
        };
        let work_left = svms.iter().any(|s| !s.is_terminal() || s.has(RUNNING));
        *self.last_list.lock() = Some((seen, work_left));
        self.forget_gone(&svms);
        for svm in svms
            .iter()
            .filter(|s| s.is_terminal() && s.has(RUNNING) && self.owns(s))
        {
            self.end_run(&gvr, svm.clone()).await;
        }
        for svm in admit(&svms).into_iter().filter(|s| self.owns(s)) {
            self.start_run(&gvr, svm).await;
        }
        for svm in svms.into_iter().filter(|s| s.is(RUNNING) && !s.is_terminal()) {
            if svm.status.resource_version.is_empty() {
                if self.owns(&svm) {
                    self.checkpoint(&gvr, svm).await;
                }
            } else if self.passing.lock().insert(svm.name().to_string()) {
                tokio::spawn(self.clone().pass_over(gvr.clone(), svm));
            }
        }
    }

    /// Admits `svm`: its resource's CRD, if it has one, says it is migrating, then `svm` runs.
    async fn start_run(&self, gvr: &Gvr, mut svm: Svm) {
        if let Err(error) = crd::mark_migrating(&*self.api, &svm).await {
            tracing::warn!(migration = svm.name(), %error, "marking the CRD as migrating failed; trying again at the next poll");
            return;
        }
        svm.set(RUNNING, "MigrationRunning", "The migration is running");
        self.write(gvr, &svm).await;
    }

    /// Ends the run of `svm`, which has ended: its resource's CRD learns how, then `svm` loses
    /// its `Running` condition, which lets the next migration of the resource run.
    async fn end_run(&self, gvr: &Gvr, mut svm: Svm) {
        if let Err(error) = crd::finish(&*self.api, &svm, svm.is(SUCCEEDED)).await {
            tracing::warn!(migration = svm.name(), %error, "recording the end of the migration on the CRD failed; trying again at the next poll");
            return;
        }
        svm.remove(RUNNING);
        self.write(gvr, &svm).await;
    }

    /// True when this collector writes `svm`'s admission and checkpoint: the one whose part of
    /// the cluster holds it (every collector rewrites its own part of the resource).
    fn owns(&self, svm: &Svm) -> bool {
        let uid = Uid::parse(&svm.object.metadata.uid);
        self.collected.shard.ranges().owns("", &uid)
    }

    /// Drops the figures of migrations that no longer exist or have ended (another replica may
    /// have ended them).
    fn forget_gone(&self, svms: &[Svm]) {
        let names: HashSet<&str> = svms.iter().filter(|s| !s.is_terminal()).map(Svm::name).collect();
        for active in self.collected.migrations.active() {
            if !names.contains(active.name.as_str()) {
                self.collected.migrations.forget(&active.name);
            }
        }
    }

    /// Writes the resource's current resourceVersion into `svm`'s status, or fails it when
    /// discovery does not show the resource.
    async fn checkpoint(&self, gvr: &Gvr, mut svm: Svm) {
        let resource = self
            .collected
            .mapper
            .load()
            .preferred(&svm.resource.group, &svm.resource.resource)
            .cloned();
        let Some(resource) = resource else {
            let message = "resource does not exist in discovery";
            svm.set(FAILED, "StorageVersionMigrationFailed", message);
            self.write(gvr, &svm).await;
            self.collected
                .migrations
                .ended(svm.name(), &svm.resource.to_string(), false);
            return;
        };
        match self.api.list_page(&resource.gvr, None, "", 1).await {
            Ok(page) => {
                svm.status.resource_version = page.resource_version;
                self.write(gvr, &svm).await;
            }
            Err(error) => {
                tracing::warn!(migration = svm.name(), %error, "reading the resource's resourceVersion failed; trying again at the next poll")
            }
        }
    }

    /// One pass over `svm`, then the status it leads to.
    async fn pass_over(self: Arc<Self>, gvr: Gvr, mut svm: Svm) {
        let name = svm.name().to_string();
        let resource = svm.resource.to_string();
        let migrations = &self.collected.migrations;
        let progress = migrations.progress(&name, &resource);
        let pass = migration::pass(&self.collected, &*self.api, &svm, self.config.concurrency, &progress).await;
        // Every rewrite counts, those of a pass that stopped short included.
        migrations.migrated(&resource, progress.figures().rewritten);
        match pass {
            Pass::Done { rewritten } => {
                let shard = &self.collected.shard;
                let uid = Uid::parse(&svm.object.metadata.uid);
                shard.record_migrated(uid.clone());
                if !self.owns(&svm) || !shard.migration_agreed(&uid) {
                    progress.wait("the other shards' parts (this one's is done)");
                    return self.passed(&name);
                }
                svm.set(SUCCEEDED, "StorageVersionMigrationSucceeded", "");
                if self.write(&gvr, &svm).await {
                    tracing::info!(migration = %name, %resource, rewritten, "storage version migration succeeded");
                    migrations.ended(&name, &resource, true);
                }
            }
            Pass::NotYet(reason) => {
                tracing::debug!(migration = %name, %reason, "storage version migration waits");
                progress.wait(&reason);
            }
            Pass::Failed(message) => {
                svm.set(FAILED, "StorageVersionMigrationFailed", &message);
                if self.write(&gvr, &svm).await {
                    tracing::warn!(migration = %name, %resource, %message, "storage version migration failed");
                    migrations.ended(&name, &resource, false);
                }
            }
        }
        self.passed(&name);
    }

    /// The pass over the migration `name` is over.
    fn passed(&self, name: &str) {
        self.passing.lock().remove(name);
    }

    /// Writes `svm`'s status; true when it was written.
    async fn write(&self, gvr: &Gvr, svm: &Svm) -> bool {
        match self.api.replace_status(gvr, &svm.written()).await {
            Ok(_) => true,
            Err(error) if error.is_conflict() => {
                tracing::debug!(
                    migration = svm.name(),
                    "the migration changed since it was read; reading it again at the next poll"
                );
                false
            }
            Err(error) => {
                tracing::warn!(migration = svm.name(), %error, "writing a migration's status failed; trying again at the next poll");
                false
            }
        }
    }
}

/// The version of StorageVersionMigrations discovery prefers, if served.
fn served(mapper: &SharedRestMapper) -> Option<Gvr> {
    mapper.load().preferred(GROUP, RESOURCE).map(|r| r.gvr.clone())
}

/// The migrations to start: per resource with none running, the oldest that has neither run nor
/// ended (upstream's migration runner).
pub fn admit(svms: &[Svm]) -> Vec<Svm> {
    let mut resources: Vec<&GroupResource> = svms.iter().map(|s| &s.resource).collect();
    resources.sort_by(|a, b| (&a.group, &a.resource).cmp(&(&b.group, &b.resource)));
    resources.dedup();
    resources
        .into_iter()
        .filter_map(|resource| {
            let of = || svms.iter().filter(move |s| &s.resource == resource);
            if of().any(|s| s.is(RUNNING) && !s.is_terminal()) {
                return None;
            }
            of().filter(|s| !s.is(RUNNING) && !s.is_terminal())
                .min_by(|a, b| created(a).cmp(created(b)).then_with(|| a.name().cmp(b.name())))
                .cloned()
        })
        .collect()
}

/// When `svm` was created, as its timestamp sorts.
fn created(svm: &Svm) -> &str {
    svm.object.metadata.creation_timestamp.as_deref().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svm(name: &str, created: &str, resource: &str, conditions: serde_json::Value) -> Svm {
        let object = serde_json::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"resource": {"group": "", "resource": resource}},
            "status": {"conditions": conditions},
        }))
        .unwrap();
        Svm::read(object)
    }

    fn names(svms: &[Svm]) -> Vec<&str> {
        svms.iter().map(Svm::name).collect()
    }

    #[test]
    fn admit_should_start_the_oldest_waiting_migration_of_each_idle_resource() {
        let running = json!([{"type": "Running", "status": "True"}]);
        let done = json!([{"type": "Running", "status": "False"}, {"type": "Succeeded", "status": "True"}]);
        let svms = [
            svm("b", "2026-01-02T00:00:00Z", "pods", json!([])),
            svm("a", "2026-01-02T00:00:00Z", "pods", json!([])),
            svm("old", "2026-01-01T00:00:00Z", "pods", done.clone()),
            svm("busy", "2026-01-01T00:00:00Z", "secrets", running),
            svm("next", "2026-01-03T00:00:00Z", "secrets", json!([])),
            svm("solo", "2026-01-03T00:00:00Z", "configmaps", json!([])),
        ];
        assert_eq!(
            names(&admit(&svms)),
            ["solo", "a"],
            "by creation, then name; none beside a running one"
        );
    }
}
