//! The controller: wires monitors → router → builders → queues → workers → API (the stages after
//! the monitors assembled once, by [`Pipeline`]), and owns the lifecycle (spec §7.4, §7.6, §7.7).
//!
//! Invariant: workers start once, after the monitors' first sync or after
//! `initial_sync_timeout`, whichever comes first (a shard's only after the sync), and are never
//! paused by a resync (there is no
//! worker lock). Shutdown stops every task but the workers, closes the queues and the monitors,
//! lets each worker finish the item it holds (up to [`DRAIN`]), then waits for every task.

mod config;
mod metrics;
mod pipeline;
mod resync;
pub mod stall;

pub use config::{default_partitions, Config, GroupResource};
pub use metrics::ControllerMetrics;
pub use pipeline::{Pipeline, PipelineBuilder};
pub use resync::{deletable_resources, SyncError};
pub use stall::{Stall, StallStatus};

use crate::api::{ClusterApi, SharedRestMapper};
use crate::audit::{AuditConfig, AuditMetrics, Auditor};
use crate::builder::GraphEventMetrics;
use crate::collector::{Collector, PartialView, Waiting};
use crate::graph::{Graph, Handle};
use crate::migrator::{Collected, Migrations, Migrator, MigratorConfig};
use crate::queue::WorkQueue;
use crate::recorder::EventSink;
use crate::router::Router;
use parking_lot::Mutex;
use resync::Monitors;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How long a stopping collector waits for its workers to finish the items they hold (a worker
/// whose requests keep failing is abandoned after it).
pub const DRAIN: Duration = Duration::from_secs(10);

/// A running garbage collector.
pub struct GarbageCollector<C> {
    api: Arc<C>,
    config: Config,
    graph: Arc<Graph>,
    router: Router,
    mapper: Arc<SharedRestMapper>,
    attempt_to_delete: Arc<WorkQueue<Handle>>,
    attempt_to_orphan: Arc<WorkQueue<Handle>>,
    /// Shared with the workers, which read the monitors' views through it.
    monitors: Arc<Mutex<Monitors>>,
    /// Items whose decision waits for a monitor's view.
    waiting: Arc<Waiting>,
    metrics: ControllerMetrics,
    /// The stall detector, fed by its task ([`GarbageCollector::watch_for_stalls`]).
    stall: Stall,
    stop: CancellationToken,
    tasks: Mutex<JoinSet<()>>,
    /// The workers, apart: a stop lets each finish the item it holds ([`DRAIN`]).
    workers: Mutex<JoinSet<()>>,
    /// Set once the workers run: after the first sync, or after the initial wait without one.
    workers_started: AtomicBool,
    /// The periodic audit's counters (all 0 while it is off).
    audit: Arc<AuditMetrics>,
    /// The storage version migrator's figures (none while no migrator runs).
    migrations: Arc<Migrations>,
}

impl<C: ClusterApi> GarbageCollector<C> {
    /// Starts every stage against `api` on the current tokio runtime and returns at once; the
    /// workers start after the first sync (bounded by `config.initial_sync_timeout`).
    pub async fn start(api: Arc<C>, config: Config) -> Arc<Self> {
        let monitors = Arc::new(Mutex::new(Monitors::new(config.sync_mode)));
        let partial_view = PartialView::new(monitors.clone());
        let waiting = partial_view.waiting.clone();
        let Pipeline {
            graph,
            router,
            partitions,
            builder,
            collector,
            events,
        } = Pipeline::builder(api.clone())
            .partitions(config.partitions)
            .rate_limiter(config.rate_limiter)
            .absent_owner_cache_capacity(config.absent_owner_cache_capacity)
            .collector(config.collector.clone())
            .journal(config.journal.clone())
            .shard(config.shard.clone())
            .partial_view(partial_view)
            .build();
        let gc = Arc::new(GarbageCollector {
            api,
            graph,
            router: router.clone(),
            mapper: collector.mapper().clone(),
            attempt_to_delete: collector.attempt_to_delete().clone(),
            attempt_to_orphan: collector.attempt_to_orphan().clone(),
            monitors,
            waiting,
            metrics: ControllerMetrics {
                sync_errors: metrics::Counter::default(),
                graph_events: GraphEventMetrics::new(router),
            },
            stall: Stall::new(config.stall_after),
            stop: CancellationToken::new(),
            tasks: Mutex::new(JoinSet::new()),
            workers: Mutex::new(JoinSet::new()),
            workers_started: AtomicBool::new(false),
            audit: Arc::new(AuditMetrics::default()),
            migrations: Arc::default(),
            config,
        });
        for events in partitions {
            gc.spawn(builder.clone().run(events));
        }
        gc.spawn(gc.metrics.graph_events.clone().sample());
        gc.spawn(gc.clone().watch_for_stalls());
        if !gc.config.journal.is_dry_run() {
            // In shadow mode events are not sent either: their queue fills and drops them.
            gc.spawn(run_event_sink(gc.api.clone(), events));
        }
        gc.spawn(gc.clone().run(collector));
        if let Some(audit) = gc.config.audit.clone() {
            gc.spawn(gc.auditor(audit).run());
        }
        gc
    }

    /// An auditor of this collector's graph with `config` (see [`crate::audit`]); the controller
    /// runs one when [`Config::audit`] says so, and tests drive rounds by hand.
    pub fn auditor(&self, config: AuditConfig) -> Auditor<C> {
        let mut auditor = Auditor::new(
            self.api.clone(),
            self.graph.clone(),
            self.router.clone(),
            self.mapper.clone(),
            self.monitors.clone(),
            self.audit.clone(),
            config,
        );
        auditor.shard = self.config.shard.clone();
        auditor
    }

    /// A storage version migrator over this collector's graph, writing through `api` (see
    /// [`crate::migrator`]); [`GarbageCollector::start_migrator`] runs one, tests drive polls by
    /// hand.
    pub fn migrator<M: ClusterApi>(&self, api: Arc<M>, config: MigratorConfig) -> Arc<Migrator<M>> {
        let collected = Collected {
            graph: self.graph.clone(),
            router: self.router.clone(),
            mapper: self.mapper.clone(),
            monitors: self.monitors.clone(),
            shard: self.config.shard.clone(),
            migrations: self.migrations.clone(),
        };
        Migrator::new(collected, api, config)
    }

    /// Runs a storage version migrator beside the collector until it stops.
    pub fn start_migrator<M: ClusterApi>(&self, api: Arc<M>, config: MigratorConfig) {
        self.spawn(self.migrator(api, config).run());
    }

    /// The periodic audit's counters.
    pub fn audit_metrics(&self) -> &Arc<AuditMetrics> {
        &self.audit
    }

    /// The storage version migrator's figures ([`crate::migrator`]).
    pub fn migrations(&self) -> &Arc<Migrations> {
        &self.migrations
    }

    /// The router, through which every graph event goes: for tests that feed the graph by hand.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// How many monitors run.
    pub fn monitor_count(&self) -> usize {
        self.monitors.lock().len()
    }

    /// The REST mapper in force.
    pub fn mapper(&self) -> &Arc<SharedRestMapper> {
        &self.mapper
    }

    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let stop = self.stop.clone();
        self.tasks.lock().spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = task => {}
            }
        });
    }

    /// Upstream's `GC.Run` and `GC.Sync` in one task: first sync, bounded wait, workers, then a
    /// resync every period.
    async fn run(self: Arc<Self>, collector: Arc<Collector<C>>) {
        self.sync_once().await;
        // A shard's ranges may just have changed hands: it acts only on a synced view of them.
        let sharded = self.config.shard.selector().is_some();
        while !self.wait_for_sync(self.config.initial_sync_timeout).await {
            if !sharded {
                tracing::warn!(timeout = ?self.config.initial_sync_timeout, "monitors not synced; starting workers anyway");
                break;
            }
            tracing::warn!("monitors not synced; a shard's workers wait for them");
            self.sync_once().await;
        }
        {
            let mut workers = self.workers.lock();
            for _ in 0..self.config.workers.max(1) {
                workers.spawn(collector.clone().run_attempt_to_delete_worker());
                workers.spawn(collector.clone().run_attempt_to_orphan_worker());
            }
        }
        self.workers_started.store(true, Ordering::Release);
        loop {
            tokio::time::sleep(self.config.sync_period).await;
            if self.sync_once().await && !self.wait_for_sync(self.config.sync_period).await {
                self.metrics.sync_errors.inc();
                tracing::warn!("timed out waiting for the monitors to sync");
            }
        }
    }

    /// The stall detector's task: a reading every [`stall::tick`], and a `warn` line when a stall
    /// starts or ends (see [`stall`]).
    async fn watch_for_stalls(self: Arc<Self>) {
        let mut ticks = tokio::time::interval(stall::tick(self.stall.stall_after()));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let (reading, waiting) = self.stall_reading();
            match self.stall.record(tokio::time::Instant::now(), reading, &waiting) {
                Some(stall::Change::Started { quiet }) => tracing::warn!(
                    quiet_for = ?quiet,
                    items = reading.items,
                    objects = reading.objects,
                    "collection stalled: work waits on the collector, nothing completed and the API server answers; see /debug/stuck"
                ),
                Some(stall::Change::Ended(calm)) => tracing::warn!(why = %calm, "collection stall ended"),
                None => {}
            }
        }
    }

    /// What the stall detector reads: the work queues' items, the objects waiting on the
    /// collector (their UIDs too), completions and the API's answers.
    fn stall_reading(&self) -> (stall::Reading, Vec<crate::graph::Uid>) {
        let mut waiting = Vec::new();
        self.graph.for_each_node(|node| {
            if stall::waits_on_collector(node) {
                waiting.push(node.identity().uid.clone());
            }
        });
        let queues = [&self.attempt_to_delete, &self.attempt_to_orphan];
        let reading = stall::Reading {
            items: queues
                .iter()
                .map(|q| q.len() + q.processing_len() + q.delayed_len())
                .sum(),
            objects: waiting.len(),
            ..stall::Reading::default()
        };
        let forgotten = queues.iter().map(|q| q.forgets_total()).sum();
        (reading.with_calls(forgotten, &self.api.call_counts()), waiting)
    }

    /// One sync round (spec §7.7); true when the monitor set changed.
    pub async fn sync_once(&self) -> bool {
        let discovery = self.api.discover().await;
        let mut monitors = self.monitors.lock();
        let plan = match resync::plan(discovery, &self.config.ignored_resources, &monitors) {
            Ok(plan) => plan,
            Err(e) => {
                self.metrics.sync_errors.inc();
                tracing::warn!(error = %e, "resource sync skipped");
                return false;
            }
        };
        // The mapper follows discovery every round, not only when the monitor set changes: a CRD
        // that stops serving an old version keeps its monitor (on the preferred version), and a
        // stale mapping would send owner GETs to the dropped version, whose 404 reads as the owner
        // being absent.
        let unchanged = monitors.resources() == plan.wanted.keys().cloned().collect();
        if !unchanged {
            let stages = (&self.graph, &self.router);
            monitors.resync(&plan.wanted, &self.api, stages, (&plan.mapper, &self.config.shard));
        }
        self.mapper.store(plan.mapper);
        if unchanged {
            return false;
        }
        tracing::info!(resources = plan.wanted.len(), "monitor set updated");
        true
    }

    /// Waits up to `timeout` for every monitor to sync; true if they did.
    pub async fn wait_for_sync(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if self.is_synced() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.is_synced()
    }

    /// True once the workers run: the monitors have synced, or the initial wait for them is over.
    /// This is what `/readyz` reports.
    pub fn is_ready(&self) -> bool {
        self.workers_started.load(Ordering::Acquire)
    }

    /// True when at least one monitor exists and all have synced.
    pub fn is_synced(&self) -> bool {
        self.monitors.lock().is_synced()
    }

    /// The API the collector talks through.
    pub fn api(&self) -> &Arc<C> {
        &self.api
    }

    /// The part of the cluster this collector collects.
    pub fn shard(&self) -> &Arc<crate::shard::Shard> {
        &self.config.shard
    }

    /// What this collector's shard reports to the others ([`crate::shard::Shard::report_on`]).
    pub fn report(&self) -> crate::shard::Report {
        self.config.shard.report_on(&self.graph)
    }

    /// The graph, for inspection.
    pub fn graph(&self) -> &Arc<Graph> {
        &self.graph
    }

    /// The deletion journal.
    pub fn journal(&self) -> &crate::journal::Journal {
        &self.config.journal
    }

    /// The attemptToDelete queue, for inspection.
    pub fn attempt_to_delete(&self) -> &Arc<WorkQueue<Handle>> {
        &self.attempt_to_delete
    }

    /// The attemptToOrphan queue, for inspection.
    pub fn attempt_to_orphan(&self) -> &Arc<WorkQueue<Handle>> {
        &self.attempt_to_orphan
    }

    /// Graph events routed to the builders and not applied yet: the depth of upstream's
    /// `graphChanges` queue, which kube-gc's partitions replace.
    pub fn graph_changes_pending(&self) -> u64 {
        self.router.in_flight()
    }

    /// Items whose decision waits for a monitor's view, and on what.
    pub fn waiting(&self) -> &Arc<Waiting> {
        &self.waiting
    }

    /// Whether the collector is stalled, as of the stall detector's last reading.
    pub fn stall_status(&self) -> StallStatus {
        self.stall.status()
    }

    /// The stall detector, for the objects it saw waiting and its threshold.
    pub fn stall(&self) -> &Stall {
        &self.stall
    }

    /// The controller's own counters.
    pub fn metrics(&self) -> &ControllerMetrics {
        &self.metrics
    }

    /// The monitored resources and whether each has synced.
    pub fn monitor_states(&self) -> BTreeMap<crate::api::Gvr, bool> {
        let monitors = self.monitors.lock();
        monitors
            .resources()
            .into_iter()
            .map(|gvr| (gvr.clone(), monitors.is_resource_synced(&gvr)))
            .collect()
    }

    /// Each monitored resource with the state of its view: synced, relisting, and its counters.
    pub fn monitor_statuses(&self) -> BTreeMap<crate::api::Gvr, Arc<crate::monitor::MonitorStatus>> {
        self.monitors.lock().statuses()
    }

    /// True when no event waits for a builder and no item is queued, in process or delayed.
    pub fn is_quiet(&self) -> bool {
        self.router.in_flight() == 0 && self.attempt_to_delete.is_idle() && self.attempt_to_orphan.is_idle()
    }

    /// True when no event waits for a builder and no item is queued or in process. Unlike
    /// [`is_quiet`](Self::is_quiet), items waiting out a retry backoff may remain: an item whose
    /// owner's kind no resource serves fails with a restMappingError and is retried forever
    /// (spec §4.1), so a cluster that references such a kind is never quiet, yet settles.
    pub fn is_settled(&self) -> bool {
        self.router.in_flight() == 0
            && [&self.attempt_to_delete, &self.attempt_to_orphan]
                .iter()
                .all(|q| q.is_empty() && q.processing_len() == 0)
    }

    /// Stops everything and waits for every task to end.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        // Each worker finishes the item it holds, its request and journal line included, and
        // takes no other: a write is never left half sent, nor unexplained.
        self.attempt_to_delete.close();
        self.attempt_to_orphan.close();
        let stopping = self.monitors.lock().stop_all();
        stopping.await;
        let mut workers = std::mem::take(&mut *self.workers.lock());
        let drained = tokio::time::timeout(DRAIN, async { while workers.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(after = ?DRAIN, "workers still busy at shutdown; abandoning their items");
        }
        drop(workers);
        let mut tasks = std::mem::take(&mut *self.tasks.lock());
        while tasks.join_next().await.is_some() {}
    }
}

/// Writes recorded events through the API; a failure is logged, never retried (events are
/// best-effort, as client-go's broadcaster treats them).
async fn run_event_sink<C: ClusterApi>(api: Arc<C>, mut sink: EventSink) {
    while let Some(event) = sink.recv().await {
        if let Err(e) = api.create_event(&event).await {
            tracing::warn!(error = %e, reason = %event.reason, "could not record event");
        }
    }
}
