//! `/metrics`: OpenMetrics 1.0.0 text, written by the `prometheus-client` crate, of the
//! collector's counters under upstream's names (spec §9), plus kube-gc's own gauges.
//!
//! Upstream's: `garbagecollector_controller_resources_sync_error_total` and, per queue (label
//! `name`), the client-go `workqueue_*` family. `garbage_collector_graph_changes` is the builders'
//! partitioned FIFOs in kube-gc: it has `workqueue_depth` (events routed and not applied yet),
//! `workqueue_adds_total` (events routed) and `workqueue_retries_total` (always 0: a graph event is
//! never retried), but no per-item durations, which would cost two clock reads per event on the
//! builders' hot path. kube-gc's:
//!
//! | family | type | value |
//! |---|---|---|
//! | `kube_gc_graph_nodes` | gauge | nodes in the graph, virtual ones included |
//! | `kube_gc_graph_events_total{partition}` | counter | graph events partition `i`'s builder applied |
//! | `kube_gc_graph_events_per_second{partition}` | gauge | their rate over the last 10 s, sampled once a second |
//! | `kube_gc_seconds_since_last_graph_event` | gauge | seconds since any builder applied an event; since the collector started before the first |
//! | `kube_gc_items_waiting_for_views` | gauge | work items whose decision waits for an incomplete monitor view |
//! | `kube_gc_shard_hash_share` | gauge | the share of the namespace hash space this replica collects ([`kube_gc::shard`]); 1 when not sharded |
//! | `kube_gc_shard_client_filtered_events_total` | counter | events the monitors dropped on the client because the API server ignored the `shardSelector` |
//! | `kube_gc_stalled` | gauge | 1 while the collector is stalled ([`kube_gc::controller::stall`]), else 0 |
//! | `kube_gc_queue_oldest_item_age_seconds{queue}` | gauge | how long the oldest item of work queue `queue` has waited ([`kube_gc::queue::WorkQueue::for_each_waiting`]); 0 when it has none |
//! | `kube_gc_api_requests_total{verb,code}` | counter | requests to the API server |
//! | `kube_gc_monitor_synced{resource}` | gauge | 1 once the resource's monitor has synced |
//! | `kube_gc_monitor_relisting{resource}` | gauge | 1 while the monitor relists after a 410 |
//! | `kube_gc_monitor_relists_total{resource}` | counter | lists (or watch-lists) after the first sync |
//! | `kube_gc_monitor_page_retries_total{resource}` | counter | list pages, or watch-lists, asked for again after a failure |
//! | `kube_gc_monitor_watch_resumes_total{resource}` | counter | watches reopened from the last resourceVersion after an error |
//! | `kube_gc_monitor_watch_list_fallbacks_total{resource}` | counter | reads begun as a watch-list that went on by paginated list, the stream broken before its end |
//! | `kube_gc_monitor_last_list_timestamp_seconds{resource}` | gauge | Unix time of the last complete list (or watch-list) |
//! | `kube_gc_monitor_sync_mode{resource,mode}` | gauge | 1, `mode` being how the monitor reads its whole resource: `watch-list` or `list` |
//! | `kube_gc_monitors` | gauge | monitors running, one per monitored resource |
//! | `kube_gc_tasks` | gauge | tasks alive on the process's tokio runtime (the collector's, the HTTP server's, any other) |
//! | `kube_gc_audit_objects_checked_total` | counter | objects the periodic audit compared with the graph |
//! | `kube_gc_audit_drift_total{kind}` | counter | drift the audit found and repaired, `kind` being `missing`, `stale` or `gone` |
//!
//! The storage version migrator's ([`kube_gc::migrator`]), under the names of upstream's migrator,
//! by `resource` (`deployments.apps`):
//!
//! | family | type | value |
//! |---|---|---|
//! | `storage_migrator_core_migrator_migrated_objects_total{resource}` | counter | objects rewritten |
//! | `storage_migrator_core_migrator_remaining_objects_total{resource}` | gauge | objects the migration in progress has still to rewrite |
//! | `storage_migrator_core_migrator_migrations_total{resource,status}` | counter | migrations ended, `status` being `Succeeded` or `Failed` |
//!
//! The names above are the samples' names. As OpenMetrics has it, a counter's `# TYPE` line names
//! its family without `_total` (the crate appends it to each sample), and a family whose name ends
//! in `_seconds` is declared with the unit `seconds` (a `# UNIT` line). The histograms' bucket
//! samples carry `le` before `name`, the crate's label order, and their `le` bounds are written as
//! the crate formats floats (`0.1`, `1.0`), the bounds being [`DURATION_BUCKETS`] still. Counts,
//! flags and depths are integer gauges, so they print as `2`, not `2.0`.
//!
//! The graph-event figures are sampled by a task of the collector whether or not anyone scrapes;
//! [`kube_gc::builder::metrics`] says how exact they are. Every value comes from one snapshot per
//! source, taken at render time: a [`Snapshot`] is the registry's only collector, and nothing here
//! keeps a copy of a counter between scrapes.

use kube_gc::api::{CallCount, ClusterApi};
use kube_gc::audit::DriftKind;
use kube_gc::builder::GraphEventStats;
use kube_gc::controller::GarbageCollector;
use kube_gc::migrator::Totals;
use kube_gc::monitor::{MonitorStatus, SyncMode};
use kube_gc::queue::{DurationHistogram, QueueStats, DURATION_BUCKETS, GRAPH_CHANGES};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{text, DescriptorEncoder, EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Registry, Unit};
use std::collections::BTreeMap;
use std::fmt;

/// The `Content-Type` of [`render`]'s text.
pub(super) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The unit of every family whose name ends in `_seconds`: the encoder appends `_seconds` to the
/// name it is given and writes a `# UNIT` line. A static, so that every family can borrow it.
static SECONDS: Unit = Unit::Seconds;

/// The exposition text, ending in `# EOF`.
pub(super) fn render<C: ClusterApi>(gc: &GarbageCollector<C>) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Snapshot::of(gc)));
    let mut out = String::new();
    // Writing to a `String` never fails, and the snapshot's encoding fails only when its writer
    // does, so an error here is a bug in this module.
    text::encode(&mut out, &registry).expect("encoding the metrics into a String");
    out
}

/// Every figure `/metrics` exposes, read once when the scrape starts.
#[derive(Debug)]
struct Snapshot {
    sync_errors: u64,
    queues: [QueueStats; 2],
    graph_changes: GraphChanges,
    graph_nodes: u64,
    waiting_for_views: u64,
    /// The share of the hash space the collector's shard holds (1 unsharded), and the events its
    /// monitors dropped on the client.
    shard: (f64, u64),
    stalled: bool,
    graph_events: GraphEventStats,
    api_calls: Vec<CallCount>,
    /// Per monitored resource, by its `group/version/resource` name.
    monitors: Vec<(String, MonitorFigures)>,
    /// Tasks alive on the runtime that renders the scrape.
    tasks: u64,
    audit_checked: u64,
    /// Per [`DriftKind::ALL`].
    audit_drift: [u64; 3],
    /// What every migration came to, by resource.
    migrations: BTreeMap<String, Totals>,
    /// Objects still to rewrite, by resource of a migration in progress.
    remaining: BTreeMap<String, u64>,
}

/// What the graph-changes queue has of a work queue's figures (see the [module docs](self)).
#[derive(Debug)]
struct GraphChanges {
    depth: u64,
    adds_total: u64,
}

/// One monitor's figures, read from its [`MonitorStatus`].
#[derive(Debug)]
struct MonitorFigures {
    synced: bool,
    relisting: bool,
    relists: u64,
    page_retries: u64,
    watch_resumes: u64,
    list_fallbacks: u64,
    /// Unix time of the last complete list, in seconds; 0 before the first.
    last_list_timestamp: f64,
    mode: SyncMode,
}

impl MonitorFigures {
    fn of(status: &MonitorStatus) -> Self {
        MonitorFigures {
            synced: status.is_synced(),
            relisting: status.is_relisting(),
            relists: status.relists(),
            page_retries: status.page_retries(),
            watch_resumes: status.watch_resumes(),
            list_fallbacks: status.list_fallbacks(),
            last_list_timestamp: status
                .last_successful_list()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0.0, |d| d.as_secs_f64()),
            mode: status.sync_mode(),
        }
    }
}

impl Snapshot {
    fn of<C: ClusterApi>(gc: &GarbageCollector<C>) -> Self {
        let graph_events = gc.metrics().graph_events.stats();
        let pending = gc.graph_changes_pending();
        let graph_changes = GraphChanges {
            depth: pending,
            adds_total: graph_events.partitions.iter().map(|p| p.applied).sum::<u64>() + pending,
        };
        Snapshot {
            sync_errors: gc.metrics().sync_errors.get(),
            queues: [gc.attempt_to_delete().stats(), gc.attempt_to_orphan().stats()],
            graph_changes,
            graph_nodes: gc.graph().len() as u64,
            waiting_for_views: gc.waiting().len() as u64,
            shard: (gc.shard().ranges().share(), gc.shard().filtered()),
            stalled: gc.stall_status().stalled,
            graph_events,
            api_calls: gc.api().call_counts(),
            monitors: gc
                .monitor_statuses()
                .iter()
                .map(|(gvr, status)| (gvr.to_string(), MonitorFigures::of(status)))
                .collect(),
            tasks: tokio::runtime::Handle::try_current().map_or(0, |h| h.metrics().num_alive_tasks() as u64),
            audit_checked: gc.audit_metrics().checked(),
            audit_drift: DriftKind::ALL.map(|kind| gc.audit_metrics().drift(kind)),
            migrations: gc.migrations().totals(),
            remaining: gc.migrations().active().into_iter().fold(BTreeMap::new(), |mut by, m| {
                *by.entry(m.resource).or_default() += m.figures.remaining;
                by
            }),
        }
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let encoder = &mut encoder;
        single(
            encoder,
            "garbagecollector_controller_resources_sync_error",
            "Number of garbage collector resources sync errors",
            None,
            ConstCounter::new(self.sync_errors),
        )?;
        self.queue_metrics(encoder)?;
        single(
            encoder,
            "kube_gc_graph_nodes",
            "Nodes in the dependency graph, virtual ones included",
            None,
            ConstGauge::new(self.graph_nodes),
        )?;
        single(
            encoder,
            "kube_gc_items_waiting_for_views",
            "Work items whose decision waits for an incomplete monitor view",
            None,
            ConstGauge::new(self.waiting_for_views),
        )?;
        single(
            encoder,
            "kube_gc_shard_hash_share",
            "The share of the namespace hash space this replica collects (1 when not sharded)",
            None,
            ConstGauge::new(self.shard.0),
        )?;
        single(
            encoder,
            "kube_gc_shard_client_filtered_events",
            "Events the monitors dropped on the client: the API server ignored the shardSelector",
            None,
            ConstCounter::new(self.shard.1),
        )?;
        single(
            encoder,
            "kube_gc_stalled",
            "1 while work waits on the collector, nothing completed for --stall-after and the API server answers",
            None,
            ConstGauge::new(u64::from(self.stalled)),
        )?;
        family(
            encoder,
            "kube_gc_queue_oldest_item_age",
            "Seconds the oldest item of each work queue has waited, from its first failure since it last succeeded, else its add; 0 when the queue has none",
            Some(&SECONDS),
            MetricType::Gauge,
            self.queues
                .iter()
                .map(|q| ([("queue", q.name)], ConstGauge::new(q.oldest_waiting_seconds))),
        )?;
        self.graph_event_metrics(encoder)?;
        single(
            encoder,
            "kube_gc_monitors",
            "Monitors running, one per monitored resource",
            None,
            ConstGauge::new(self.monitors.len() as u64),
        )?;
        single(
            encoder,
            "kube_gc_tasks",
            "Tasks alive on the process's tokio runtime",
            None,
            ConstGauge::new(self.tasks),
        )?;
        single(
            encoder,
            "kube_gc_audit_objects_checked",
            "Objects the periodic audit compared with the graph",
            None,
            ConstCounter::new(self.audit_checked),
        )?;
        family(
            encoder,
            "kube_gc_audit_drift",
            "Drift between the graph and the cluster the audit found and repaired, by kind",
            None,
            MetricType::Counter,
            DriftKind::ALL
                .iter()
                .zip(self.audit_drift)
                .map(|(kind, n)| ([("kind", kind.as_str())], ConstCounter::new(n))),
        )?;
        family(
            encoder,
            "kube_gc_api_requests",
            "Requests to the API server, by verb and HTTP code",
            None,
            MetricType::Counter,
            self.api_calls.iter().map(|c| {
                (
                    [("verb", c.verb.to_string()), ("code", c.code.to_string())],
                    ConstCounter::new(c.count),
                )
            }),
        )?;
        self.migration_metrics(encoder)?;
        self.monitor_metrics(encoder)
    }
}

impl Snapshot {
    /// The storage version migrator's families (see the [module docs](self)).
    fn migration_metrics(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        family(
            encoder,
            "storage_migrator_core_migrator_migrated_objects",
            "Objects the storage version migrator rewrote, by resource",
            None,
            MetricType::Counter,
            self.migrations
                .iter()
                .map(|(resource, t)| ([("resource", resource.as_str())], ConstCounter::new(t.migrated))),
        )?;
        family(
            encoder,
            "storage_migrator_core_migrator_remaining_objects_total",
            "Objects the migration in progress has still to rewrite, by resource",
            None,
            MetricType::Gauge,
            self.remaining
                .iter()
                .map(|(resource, n)| ([("resource", resource.as_str())], ConstGauge::new(*n))),
        )?;
        family(
            encoder,
            "storage_migrator_core_migrator_migrations",
            "Storage version migrations ended, by resource and status",
            None,
            MetricType::Counter,
            self.migrations.iter().flat_map(|(resource, t)| {
                [("Succeeded", t.succeeded), ("Failed", t.failed)].map(|(status, n)| {
                    (
                        [("resource", resource.as_str()), ("status", status)],
                        ConstCounter::new(n),
                    )
                })
            }),
        )
    }
}

impl Snapshot {
    /// The `workqueue_*` families: the graph-changes queue's sample first where it has one, then
    /// the work queues' in order.
    fn queue_metrics(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        let graph_changes = self.graph_changes.depth;
        self.per_queue(
            encoder,
            ("workqueue_depth", "Current depth of workqueue", None),
            Some(ConstGauge::new(graph_changes)),
            |q| ConstGauge::new(q.depth as u64),
        )?;
        self.per_queue(
            encoder,
            ("workqueue_adds", "Total number of adds handled by workqueue", None),
            Some(ConstCounter::new(self.graph_changes.adds_total)),
            |q| ConstCounter::new(q.adds_total),
        )?;
        self.per_queue(
            encoder,
            (
                "workqueue_retries",
                "Total number of retries handled by workqueue",
                None,
            ),
            // A graph event is never retried.
            Some(ConstCounter::new(0u64)),
            |q| ConstCounter::new(q.retries_total),
        )?;
        self.per_queue(
            encoder,
            (
                "workqueue_unfinished_work",
                "Seconds of work in progress not yet observed by work_duration",
                Some(&SECONDS),
            ),
            None,
            |q| ConstGauge::new(q.unfinished_work_seconds),
        )?;
        self.per_queue(
            encoder,
            (
                "workqueue_longest_running_processor",
                "Seconds the longest running processor has been running",
                Some(&SECONDS),
            ),
            None,
            |q| ConstGauge::new(q.longest_running_processor_seconds),
        )?;
        self.per_queue(
            encoder,
            (
                "workqueue_queue_duration",
                "How long in seconds an item stays in workqueue before being requested",
                Some(&SECONDS),
            ),
            None,
            |q| Durations(&q.queue_duration),
        )?;
        self.per_queue(
            encoder,
            (
                "workqueue_work_duration",
                "How long in seconds processing an item from workqueue takes",
                Some(&SECONDS),
            ),
            None,
            |q| Durations(&q.work_duration),
        )
    }

    /// One family, a sample per queue (label `name`), led by the graph-changes queue's if it has
    /// one.
    fn per_queue<'a, M: EncodeMetric + TypedMetric>(
        &'a self,
        encoder: &mut DescriptorEncoder,
        (name, help, unit): (&str, &str, Option<&Unit>),
        graph_changes: Option<M>,
        value: impl Fn(&'a QueueStats) -> M,
    ) -> fmt::Result {
        let graph_changes = graph_changes.map(|m| ([("name", GRAPH_CHANGES)], m));
        let queues = self.queues.iter().map(|q| ([("name", q.name)], value(q)));
        family(
            encoder,
            name,
            help,
            unit,
            M::TYPE,
            graph_changes.into_iter().chain(queues),
        )
    }

    fn graph_event_metrics(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        let partitions = || self.graph_events.partitions.iter().enumerate();
        family(
            encoder,
            "kube_gc_graph_events",
            "Graph events applied by each partition's builder",
            None,
            MetricType::Counter,
            partitions().map(|(p, events)| ([("partition", p)], ConstCounter::new(events.applied))),
        )?;
        family(
            encoder,
            "kube_gc_graph_events_per_second",
            "Graph events applied per second by each partition's builder, over the last 10 seconds",
            None,
            MetricType::Gauge,
            partitions().map(|(p, events)| ([("partition", p)], ConstGauge::new(events.per_second))),
        )?;
        single(
            encoder,
            "kube_gc_seconds_since_last_graph_event",
            "Seconds since a builder last applied a graph event; since the collector started, before the first",
            None,
            ConstGauge::new(self.graph_events.seconds_since_last_event),
        )
    }

    /// One family per field of a monitor's status, a sample per resource.
    fn monitor_metrics(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        self.per_resource(
            encoder,
            (
                "kube_gc_monitor_synced",
                "1 when the resource's monitor has synced, else 0",
                None,
            ),
            |m| ConstGauge::new(u64::from(m.synced)),
        )?;
        self.per_resource(
            encoder,
            (
                "kube_gc_monitor_relisting",
                "1 while the monitor relists after its watch history expired",
                None,
            ),
            |m| ConstGauge::new(u64::from(m.relisting)),
        )?;
        self.per_resource(
            encoder,
            ("kube_gc_monitor_relists", "Lists started after the first sync", None),
            |m| ConstCounter::new(m.relists),
        )?;
        self.per_resource(
            encoder,
            (
                "kube_gc_monitor_page_retries",
                "List pages asked for again after a failure",
                None,
            ),
            |m| ConstCounter::new(m.page_retries),
        )?;
        self.per_resource(
            encoder,
            (
                "kube_gc_monitor_watch_resumes",
                "Watches reopened from the last resourceVersion after an error",
                None,
            ),
            |m| ConstCounter::new(m.watch_resumes),
        )?;
        self.per_resource(
            encoder,
            (
                "kube_gc_monitor_watch_list_fallbacks",
                "Reads begun as a watch-list that went on by paginated list, the stream broken before its end",
                None,
            ),
            |m| ConstCounter::new(m.list_fallbacks),
        )?;
        self.per_resource(
            encoder,
            (
                "kube_gc_monitor_last_list_timestamp",
                "Unix time of the last complete list; 0 before the first",
                Some(&SECONDS),
            ),
            |m| ConstGauge::new(m.last_list_timestamp),
        )?;
        family(
            encoder,
            "kube_gc_monitor_sync_mode",
            "1 for how the resource's monitor reads its whole resource: watch-list or list",
            None,
            MetricType::Gauge,
            self.monitors.iter().map(|(resource, m)| {
                (
                    [("resource", resource.clone()), ("mode", m.mode.as_str().to_string())],
                    ConstGauge::new(1),
                )
            }),
        )
    }

    /// One family, a sample per monitored resource (label `resource`).
    fn per_resource<M: EncodeMetric + TypedMetric>(
        &self,
        encoder: &mut DescriptorEncoder,
        (name, help, unit): (&str, &str, Option<&Unit>),
        value: impl Fn(&MonitorFigures) -> M,
    ) -> fmt::Result {
        let samples = self
            .monitors
            .iter()
            .map(|(resource, m)| ([("resource", resource.as_str())], value(m)));
        family(encoder, name, help, unit, M::TYPE, samples)
    }
}

/// A family with one unlabelled sample.
fn single(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    metric: impl EncodeMetric,
) -> fmt::Result {
    metric.encode(encoder.encode_descriptor(name, help, unit, metric.metric_type())?)
}

/// A family of `metric_type` with a sample per label set. The type is given rather than read from
/// the first sample, so that a family without samples (no monitor yet, no request yet) is still
/// declared, as before.
fn family<L: EncodeLabelSet, M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    metric_type: MetricType,
    samples: impl IntoIterator<Item = (L, M)>,
) -> fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, unit, metric_type)?;
    for (labels, metric) in samples {
        metric.encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A queue's [`DurationHistogram`] snapshot in the crate's histogram encoding, over
/// [`DURATION_BUCKETS`] and `+Inf`.
struct Durations<'a>(&'a DurationHistogram);

impl EncodeMetric for Durations<'_> {
    fn encode(&self, mut encoder: MetricEncoder) -> fmt::Result {
        let h = self.0;
        // The encoder takes each bucket's own count and sums them up as it writes; the snapshot's
        // are cumulative already, so hand it the differences.
        let mut below = 0;
        let mut buckets = Vec::with_capacity(DURATION_BUCKETS.len() + 1);
        for (&le, &cumulative) in DURATION_BUCKETS.iter().zip(&h.buckets) {
            buckets.push((le, cumulative.saturating_sub(below)));
            below = below.max(cumulative);
        }
        buckets.push((f64::INFINITY, h.count.saturating_sub(below)));
        encoder.encode_histogram::<NoLabelSet>(h.sum_seconds, h.count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

impl TypedMetric for Durations<'_> {
    const TYPE: MetricType = MetricType::Histogram;
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_gc::api::{Gvr, ObjectMeta, OwnerReference, PartialObjectMeta};
    use kube_gc::controller::Config;
    use kube_gc_sim::SimCluster;
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;
    use std::time::Duration;

    /// The value of the unlabelled sample `name`.
    fn value(text: &str, name: &str) -> f64 {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no sample {name} in:\n{text}"))
    }

    /// The values of the labelled samples of `name`, in order.
    fn labelled(text: &str, name: &str) -> Vec<f64> {
        text.lines()
            .filter(|line| line.starts_with(&format!("{name}{{")))
            .filter_map(|line| line.rsplit_once(' ')?.1.parse().ok())
            .collect()
    }

    fn pod(i: usize) -> PartialObjectMeta {
        PartialObjectMeta {
            metadata: ObjectMeta {
                name: format!("pod-{i}"),
                namespace: "default".into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn graph_event_metrics_should_count_every_object_and_age_while_idle() {
        const OBJECTS: usize = 50;
        let cluster = Arc::new(SimCluster::new());
        let config = Config {
            partitions: 2,
            ..Config::default()
        };
        let gc = GarbageCollector::start(cluster.clone(), config).await;
        assert!(gc.wait_for_sync(Duration::from_secs(60)).await, "monitors never synced");
        let pods = Gvr::new("", "v1", "pods");
        for i in 0..OBJECTS {
            cluster.create(&pods, pod(i)).expect("create a pod");
        }
        for _ in 0..600 {
            if gc.graph().len() >= OBJECTS {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            gc.graph().len() >= OBJECTS,
            "likely stuck: the pods never reached the graph"
        );

        let text = render(&gc);
        let applied = labelled(&text, "kube_gc_graph_events_total");
        assert_eq!(applied.len(), 2, "one counter per partition:\n{text}");
        assert!(applied.iter().sum::<f64>() >= OBJECTS as f64, "{applied:?}");
        assert!(value(&text, "kube_gc_seconds_since_last_graph_event") < 1.0);

        tokio::time::sleep(Duration::from_secs(2)).await;
        let text = render(&gc);
        let rates = labelled(&text, "kube_gc_graph_events_per_second");
        assert_eq!(rates.len(), 2, "one rate per partition:\n{text}");
        assert!(
            rates.iter().sum::<f64>() > 0.0,
            "the pods are within the window: {rates:?}"
        );
        let since = value(&text, "kube_gc_seconds_since_last_graph_event");
        assert!((1.0..3.0).contains(&since), "idle for two seconds: {since}");
        let graph_changes = |name: &str| {
            let sample = format!("{name}{{name=\"garbage_collector_graph_changes\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&sample)?.parse::<f64>().ok())
                .unwrap_or_else(|| panic!("no {sample} in:\n{text}"))
        };
        assert_eq!(graph_changes("workqueue_depth"), 0.0, "every event applied");
        let applied: f64 = labelled(&text, "kube_gc_graph_events_total").iter().sum();
        assert_eq!(graph_changes("workqueue_adds_total"), applied);
        assert!(applied >= OBJECTS as f64);
        assert_eq!(graph_changes("workqueue_retries_total"), 0.0);

        tokio::time::sleep(Duration::from_secs(30)).await;
        let text = render(&gc);
        assert!(value(&text, "kube_gc_seconds_since_last_graph_event") >= 31.0);
        assert_eq!(labelled(&text, "kube_gc_graph_events_per_second"), [0.0, 0.0]);
        gc.shutdown().await;
    }

    /// One sample line: its name, its labels in order and its value as written.
    #[derive(Debug)]
    struct Sample {
        name: String,
        labels: Vec<(String, String)>,
        value: String,
    }

    /// Parses `name{k="v",…} value`, or `name value`; label values may hold `\\`, `\"` and `\n`.
    fn parse_sample(line: &str) -> Sample {
        let name_end = line.find(['{', ' ']).unwrap_or_else(|| panic!("no value: {line:?}"));
        let name = line[..name_end].to_string();
        let mut labels = Vec::new();
        let mut rest = &line[name_end..];
        if let Some(inner) = rest.strip_prefix('{') {
            rest = inner;
            loop {
                let (key, after) = rest
                    .split_once("=\"")
                    .unwrap_or_else(|| panic!("bad label in {line:?}"));
                let mut value = String::new();
                let mut chars = after.char_indices();
                let end = loop {
                    match chars.next() {
                        Some((i, '"')) => break i,
                        Some((_, '\\')) => match chars.next() {
                            Some((_, 'n')) => value.push('\n'),
                            Some((_, c @ ('\\' | '"'))) => value.push(c),
                            other => panic!("bad escape {other:?} in {line:?}"),
                        },
                        Some((_, c)) => value.push(c),
                        None => panic!("unterminated label value in {line:?}"),
                    }
                };
                labels.push((key.to_string(), value));
                rest = &after[end + 1..];
                if let Some(more) = rest.strip_prefix(',') {
                    rest = more;
                } else {
                    rest = rest
                        .strip_prefix('}')
                        .unwrap_or_else(|| panic!("unclosed labels in {line:?}"));
                    break;
                }
            }
        }
        let value = rest.strip_prefix(' ').unwrap_or_else(|| panic!("no value in {line:?}"));
        assert!(
            !value.contains(' '),
            "a timestamp or exemplar, which kube-gc never writes: {line:?}"
        );
        value
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("not a number in {line:?}"));
        Sample {
            name,
            labels,
            value: value.to_string(),
        }
    }

    /// Reads `text` as strict OpenMetrics: it ends with `# EOF`; each family has `# HELP` then
    /// `# TYPE` (then `# UNIT`, which its name must end with) once; every sample follows its own
    /// family's declaration under a name that type allows; counters and histogram counts are
    /// integers; each histogram series' buckets rise in `le`, are cumulative, and end with `+Inf`
    /// equal to its `_count`. Returns each family's type and samples, by family name.
    fn read_strictly(text: &str) -> BTreeMap<String, (String, Vec<Sample>)> {
        let body = text
            .strip_suffix("# EOF\n")
            .unwrap_or_else(|| panic!("no final # EOF:\n{text}"));
        let mut families: BTreeMap<String, (String, Vec<Sample>)> = BTreeMap::new();
        let mut current: Option<String> = None;
        let mut help: Option<String> = None;
        for line in body.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, _) = rest.split_once(' ').unwrap_or((rest, ""));
                help = Some(name.to_string());
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap_or_else(|| panic!("bad {line:?}"));
                assert_eq!(help.take().as_deref(), Some(name), "# HELP before {line:?}");
                assert!(["counter", "gauge", "histogram"].contains(&kind), "{line:?}");
                let fresh = families.insert(name.to_string(), (kind.to_string(), Vec::new()));
                assert!(fresh.is_none(), "{name} declared twice");
                current = Some(name.to_string());
            } else if let Some(rest) = line.strip_prefix("# UNIT ") {
                let (name, unit) = rest.split_once(' ').unwrap_or_else(|| panic!("bad {line:?}"));
                assert_eq!(
                    current.as_deref(),
                    Some(name),
                    "# UNIT right after its # TYPE: {line:?}"
                );
                assert!(name.ends_with(&format!("_{unit}")), "{line:?}");
            } else {
                assert!(!line.starts_with('#'), "unexpected comment {line:?}");
                let sample = parse_sample(line);
                let family = current
                    .as_deref()
                    .unwrap_or_else(|| panic!("{line:?} before any # TYPE"));
                let (kind, samples) = families.get_mut(family).expect("declared");
                let suffixes: &[&str] = match kind.as_str() {
                    "counter" => &["_total"],
                    "gauge" => &[""],
                    _ => &["_bucket", "_sum", "_count"],
                };
                let suffix = sample.name.strip_prefix(family).unwrap_or("?");
                assert!(
                    suffixes.contains(&suffix),
                    "{line:?} is not a sample of {kind} {family}"
                );
                if matches!(suffix, "_total" | "_bucket" | "_count") {
                    sample
                        .value
                        .parse::<u64>()
                        .unwrap_or_else(|_| panic!("not an integer: {line:?}"));
                }
                samples.push(sample);
            }
        }
        assert!(help.is_none(), "a # HELP without its # TYPE");
        for (family, (kind, samples)) in &families {
            if kind == "histogram" {
                check_histogram(family, samples);
            }
        }
        families
    }

    /// One histogram series as read: its buckets (`le`, value) in order, its `_count`, whether it
    /// has a `_sum`.
    #[derive(Default)]
    struct Series {
        buckets: Vec<(f64, u64)>,
        count: Option<u64>,
        sum: bool,
    }

    /// The histogram checks of [`read_strictly`], per series (labels but `le`).
    fn check_histogram(family: &str, samples: &[Sample]) {
        let mut series: BTreeMap<Vec<(String, String)>, Series> = BTreeMap::new();
        for s in samples {
            let key: Vec<_> = s.labels.iter().filter(|(k, _)| k != "le").cloned().collect();
            let Series { buckets, count, sum } = series.entry(key).or_default();
            match &s.name[family.len()..] {
                "_bucket" => {
                    let (_, le) = s.labels.iter().find(|(k, _)| k == "le").expect("a bucket has le");
                    let le = if le == "+Inf" {
                        f64::INFINITY
                    } else {
                        le.parse().expect("le is a number")
                    };
                    buckets.push((le, s.value.parse().expect("integer")));
                }
                "_count" => *count = Some(s.value.parse().expect("integer")),
                _ => *sum = true,
            }
        }
        assert!(!series.is_empty(), "{family} has no series");
        let mut bounds = DURATION_BUCKETS.to_vec();
        bounds.push(f64::INFINITY);
        for (labels, Series { buckets, count, sum }) in series {
            let les: Vec<f64> = buckets.iter().map(|&(le, _)| le).collect();
            assert_eq!(
                les, bounds,
                "{family}{labels:?}: the bounds are DURATION_BUCKETS and +Inf"
            );
            assert!(
                buckets.windows(2).all(|w| w[0].1 <= w[1].1),
                "{family}{labels:?}: buckets are cumulative: {buckets:?}"
            );
            assert_eq!(
                buckets.last().map(|&(_, n)| n),
                count,
                "{family}{labels:?}: +Inf is _count"
            );
            assert!(sum, "{family}{labels:?} has no _sum");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_exposition_should_read_as_strict_openmetrics_under_the_documented_names() {
        let cluster = Arc::new(SimCluster::new());
        let gc = GarbageCollector::start(cluster.clone(), Config::default()).await;
        assert!(gc.wait_for_sync(Duration::from_secs(60)).await, "monitors never synced");
        // A pod whose owner never existed: the collector deletes it, so a work queue times items.
        let pods = Gvr::new("", "v1", "pods");
        let mut orphan = pod(0);
        orphan.metadata.owner_references.push(OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "gone".into(),
            uid: "6f1a4a3e-0000-4000-8000-00000000dead".into(),
            ..Default::default()
        });
        cluster.create(&pods, orphan).expect("create a pod");
        for _ in 0..600 {
            if cluster.get_object(&pods, "default", "pod-0").is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            cluster.get_object(&pods, "default", "pod-0").is_err(),
            "likely stuck: the pod was never collected"
        );

        let text = render(&gc);
        println!("{}", text.lines().take(30).collect::<Vec<_>>().join("\n"));
        let families = read_strictly(&text);
        let names: BTreeSet<&str> = families
            .values()
            .flat_map(|(_, s)| s.iter().map(|s| s.name.as_str()))
            .collect();
        for name in [
            "garbagecollector_controller_resources_sync_error_total",
            "workqueue_depth",
            "workqueue_adds_total",
            "workqueue_retries_total",
            "workqueue_unfinished_work_seconds",
            "workqueue_longest_running_processor_seconds",
            "workqueue_queue_duration_seconds_bucket",
            "workqueue_queue_duration_seconds_sum",
            "workqueue_queue_duration_seconds_count",
            "workqueue_work_duration_seconds_bucket",
            "workqueue_work_duration_seconds_sum",
            "workqueue_work_duration_seconds_count",
            "kube_gc_graph_nodes",
            "kube_gc_graph_events_total",
            "kube_gc_graph_events_per_second",
            "kube_gc_seconds_since_last_graph_event",
            "kube_gc_items_waiting_for_views",
            "kube_gc_shard_hash_share",
            "kube_gc_shard_client_filtered_events_total",
            "kube_gc_stalled",
            "kube_gc_queue_oldest_item_age_seconds",
            "kube_gc_api_requests_total",
            "kube_gc_monitor_synced",
            "kube_gc_monitor_relisting",
            "kube_gc_monitor_relists_total",
            "kube_gc_monitor_page_retries_total",
            "kube_gc_monitor_watch_resumes_total",
            "kube_gc_monitor_last_list_timestamp_seconds",
            "kube_gc_monitors",
            "kube_gc_tasks",
            "kube_gc_audit_objects_checked_total",
            "kube_gc_audit_drift_total",
        ] {
            assert!(names.contains(name), "no sample {name} in:\n{text}");
        }
        let deleted = &families["workqueue_work_duration_seconds"].1;
        let timed = deleted.iter().any(|s| {
            s.name.ends_with("_count")
                && s.labels == [("name".to_string(), "garbage_collector_attempt_to_delete".to_string())]
                && s.value != "0"
        });
        assert!(timed, "the pod's deletion was timed:\n{text}");
        // Counts and flags are integer gauges: users grep for `… 1`.
        assert!(
            text.contains("kube_gc_monitor_synced{resource=\"v1/pods\"} 1\n"),
            "{text}"
        );
        let nodes = &families["kube_gc_graph_nodes"].1[0].value;
        assert!(nodes.parse::<u64>().is_ok(), "kube_gc_graph_nodes {nodes}");
        assert_eq!(
            families["workqueue_depth"].1.len(),
            3,
            "graph changes and the two work queues"
        );
        gc.shutdown().await;
    }

    /// The metric names `text` mentions: every word that starts like one of kube-gc's families.
    fn metric_names(text: &str) -> BTreeSet<&str> {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .filter(|word| {
                ["kube_gc_", "workqueue_", "garbagecollector_"]
                    .iter()
                    .any(|p| word.starts_with(p))
            })
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn every_metric_the_dashboard_and_the_alerts_use_should_be_rendered() {
        let cluster = Arc::new(SimCluster::new());
        let gc = GarbageCollector::start(cluster, Config::default()).await;
        assert!(gc.wait_for_sync(Duration::from_secs(60)).await, "monitors never synced");
        let text = render(&gc);
        // Sample names, and what each declared family's samples are called even while it has
        // none (no request counted yet, say).
        let mut rendered: BTreeSet<String> = read_strictly(&text)
            .values()
            .flat_map(|(_, samples)| samples.iter().map(|s| s.name.clone()))
            .collect();
        for line in text.lines() {
            let Some((family, kind)) = line.strip_prefix("# TYPE ").and_then(|l| l.split_once(' ')) else {
                continue;
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            rendered.extend(suffixes.iter().map(|suffix| format!("{family}{suffix}")));
        }
        for (file, used) in [
            (
                "deploy/grafana-dashboard.json",
                include_str!("../../../deploy/grafana-dashboard.json"),
            ),
            (
                "deploy/prometheus-rule.yaml",
                include_str!("../../../deploy/prometheus-rule.yaml"),
            ),
        ] {
            let names = metric_names(used);
            assert!(names.len() >= 5, "{file} names too few metrics: {names:?}");
            let missing: Vec<&str> = names.into_iter().filter(|n| !rendered.contains(*n)).collect();
            assert!(
                missing.is_empty(),
                "{file} uses metrics /metrics does not have: {missing:?}"
            );
        }
        gc.shutdown().await;
    }
}
