//! `/metrics`: Prometheus text exposition (format 0.0.4) of the collector's counters under
//! upstream's names (spec §9), plus kube-gc's own gauges.
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
//! | `kube_gc_api_requests_total{verb,code}` | counter | requests to the API server |
//! | `kube_gc_monitor_synced{resource}` | gauge | 1 once the resource's monitor has synced |
//! | `kube_gc_monitor_relisting{resource}` | gauge | 1 while the monitor relists after a 410 |
//! | `kube_gc_monitor_relists_total{resource}` | counter | lists after the first sync |
//! | `kube_gc_monitor_page_retries_total{resource}` | counter | list pages asked for again after a failure |
//! | `kube_gc_monitor_watch_resumes_total{resource}` | counter | watches reopened from the last resourceVersion after an error |
//! | `kube_gc_monitor_last_list_timestamp_seconds{resource}` | gauge | Unix time of the last complete list |
//!
//! The graph-event figures are sampled by a task of the collector whether or not anyone scrapes;
//! [`crate::builder::metrics`] says how exact they are. Every value comes from one snapshot per
//! source, taken at render time.

use crate::api::ClusterApi;
use crate::api::Gvr;
use crate::builder::GraphEventStats;
use crate::controller::GarbageCollector;
use crate::monitor::MonitorStatus;
use crate::queue::{DurationHistogram, QueueStats, DURATION_BUCKETS, GRAPH_CHANGES};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

/// The exposition text.
pub(super) fn render<C: ClusterApi>(gc: &GarbageCollector<C>) -> String {
    let mut out = String::new();
    family(
        &mut out,
        "garbagecollector_controller_resources_sync_error_total",
        "counter",
        "Number of garbage collector resources sync errors",
    );
    sample(
        &mut out,
        "garbagecollector_controller_resources_sync_error_total",
        "",
        gc.metrics().sync_errors.get() as f64,
    );
    let queues = [gc.attempt_to_delete().stats(), gc.attempt_to_orphan().stats()];
    let graph_events = gc.metrics().graph_events.stats();
    let pending = gc.graph_changes_pending();
    let graph_changes = GraphChanges {
        depth: pending,
        adds_total: graph_events.partitions.iter().map(|p| p.applied).sum::<u64>() + pending,
    };
    queue_metrics(&mut out, &queues, &graph_changes);
    family(
        &mut out,
        "kube_gc_graph_nodes",
        "gauge",
        "Nodes in the dependency graph, virtual ones included",
    );
    sample(&mut out, "kube_gc_graph_nodes", "", gc.graph().len() as f64);
    family(
        &mut out,
        "kube_gc_items_waiting_for_views",
        "gauge",
        "Work items whose decision waits for an incomplete monitor view",
    );
    sample(
        &mut out,
        "kube_gc_items_waiting_for_views",
        "",
        gc.waiting().len() as f64,
    );
    graph_event_metrics(&mut out, &graph_events);
    family(
        &mut out,
        "kube_gc_api_requests_total",
        "counter",
        "Requests to the API server, by verb and HTTP code",
    );
    for c in gc.api().call_counts() {
        let labels = format!("verb=\"{}\",code=\"{}\"", c.verb, c.code);
        sample(&mut out, "kube_gc_api_requests_total", &labels, c.count as f64);
    }
    monitor_metrics(&mut out, &gc.monitor_statuses());
    out
}

/// One family per field of a monitor's status, a sample per resource.
fn monitor_metrics(out: &mut String, statuses: &BTreeMap<Gvr, Arc<MonitorStatus>>) {
    type Field = fn(&MonitorStatus) -> f64;
    let families: [(&str, &str, &str, Field); 6] = [
        (
            "kube_gc_monitor_synced",
            "gauge",
            "1 when the resource's monitor has synced, else 0",
            |s| f64::from(u8::from(s.is_synced())),
        ),
        (
            "kube_gc_monitor_relisting",
            "gauge",
            "1 while the monitor relists after its watch history expired",
            |s| f64::from(u8::from(s.is_relisting())),
        ),
        (
            "kube_gc_monitor_relists_total",
            "counter",
            "Lists started after the first sync",
            |s| s.relists() as f64,
        ),
        (
            "kube_gc_monitor_page_retries_total",
            "counter",
            "List pages asked for again after a failure",
            |s| s.page_retries() as f64,
        ),
        (
            "kube_gc_monitor_watch_resumes_total",
            "counter",
            "Watches reopened from the last resourceVersion after an error",
            |s| s.watch_resumes() as f64,
        ),
        (
            "kube_gc_monitor_last_list_timestamp_seconds",
            "gauge",
            "Unix time of the last complete list; 0 before the first",
            |s| {
                s.last_successful_list()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0.0, |d| d.as_secs_f64())
            },
        ),
    ];
    for (name, kind, help, field) in families {
        family(out, name, kind, help);
        for (gvr, status) in statuses {
            sample(out, name, &format!("resource=\"{gvr}\""), field(status));
        }
    }
}

fn graph_event_metrics(out: &mut String, stats: &GraphEventStats) {
    family(
        out,
        "kube_gc_graph_events_total",
        "counter",
        "Graph events applied by each partition's builder",
    );
    for (p, events) in stats.partitions.iter().enumerate() {
        let labels = format!("partition=\"{p}\"");
        sample(out, "kube_gc_graph_events_total", &labels, events.applied as f64);
    }
    family(
        out,
        "kube_gc_graph_events_per_second",
        "gauge",
        "Graph events applied per second by each partition's builder, over the last 10 seconds",
    );
    for (p, events) in stats.partitions.iter().enumerate() {
        let labels = format!("partition=\"{p}\"");
        sample(out, "kube_gc_graph_events_per_second", &labels, events.per_second);
    }
    family(
        out,
        "kube_gc_seconds_since_last_graph_event",
        "gauge",
        "Seconds since a builder last applied a graph event; since the collector started, before the first",
    );
    sample(
        out,
        "kube_gc_seconds_since_last_graph_event",
        "",
        stats.seconds_since_last_event,
    );
}

/// A per-queue metric read from a [`QueueStats`]: name, help, value.
type Scalar = (&'static str, &'static str, fn(&QueueStats) -> f64);
/// A per-queue histogram read from a [`QueueStats`]: name, help, histogram.
type Histogram = (&'static str, &'static str, fn(&QueueStats) -> &DurationHistogram);

const SCALARS: [Scalar; 5] = [
    ("workqueue_depth", "Current depth of workqueue", |q| q.depth as f64),
    (
        "workqueue_adds_total",
        "Total number of adds handled by workqueue",
        |q| q.adds_total as f64,
    ),
    (
        "workqueue_retries_total",
        "Total number of retries handled by workqueue",
        |q| q.retries_total as f64,
    ),
    (
        "workqueue_unfinished_work_seconds",
        "Seconds of work in progress not yet observed by work_duration",
        |q| q.unfinished_work_seconds,
    ),
    (
        "workqueue_longest_running_processor_seconds",
        "Seconds the longest running processor has been running",
        |q| q.longest_running_processor_seconds,
    ),
];

const HISTOGRAMS: [Histogram; 2] = [
    (
        "workqueue_queue_duration_seconds",
        "How long in seconds an item stays in workqueue before being requested",
        |q| &q.queue_duration,
    ),
    (
        "workqueue_work_duration_seconds",
        "How long in seconds processing an item from workqueue takes",
        |q| &q.work_duration,
    ),
];

/// What the graph-changes queue has of a work queue's figures (see the [module docs](self)).
struct GraphChanges {
    depth: u64,
    adds_total: u64,
}

impl GraphChanges {
    /// The value of the scalar `name`, if this queue has it.
    fn scalar(&self, name: &str) -> Option<f64> {
        match name {
            "workqueue_depth" => Some(self.depth as f64),
            "workqueue_adds_total" => Some(self.adds_total as f64),
            "workqueue_retries_total" => Some(0.0),
            _ => None,
        }
    }
}

fn queue_metrics(out: &mut String, queues: &[QueueStats], graph_changes: &GraphChanges) {
    for (name, help, value) in SCALARS {
        let kind = if name.ends_with("_total") { "counter" } else { "gauge" };
        family(out, name, kind, help);
        if let Some(v) = graph_changes.scalar(name) {
            sample(out, name, &format!("name=\"{GRAPH_CHANGES}\""), v);
        }
        for q in queues {
            sample(out, name, &format!("name=\"{}\"", q.name), value(q));
        }
    }
    for (name, help, histogram) in HISTOGRAMS {
        family(out, name, "histogram", help);
        for q in queues {
            write_histogram(out, name, q.name, histogram(q));
        }
    }
}

fn write_histogram(out: &mut String, name: &str, queue: &str, h: &DurationHistogram) {
    for (le, count) in DURATION_BUCKETS.iter().zip(h.buckets) {
        sample(
            out,
            &format!("{name}_bucket"),
            &format!("name=\"{queue}\",le=\"{le:e}\""),
            count as f64,
        );
    }
    sample(
        out,
        &format!("{name}_bucket"),
        &format!("name=\"{queue}\",le=\"+Inf\""),
        h.count as f64,
    );
    sample(out, &format!("{name}_sum"), &format!("name=\"{queue}\""), h.sum_seconds);
    sample(
        out,
        &format!("{name}_count"),
        &format!("name=\"{queue}\""),
        h.count as f64,
    );
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &str, value: f64) {
    if labels.is_empty() {
        let _ = writeln!(out, "{name} {value}");
    } else {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Gvr, ObjectMeta, PartialObjectMeta};
    use crate::controller::Config;
    use crate::sim::SimCluster;
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
}
