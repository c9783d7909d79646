//! `/metrics`: Prometheus text exposition (format 0.0.4) of the collector's counters under
//! upstream's names (spec §9), plus kube-gc's own gauges.
//!
//! Upstream's: `garbagecollector_controller_resources_sync_error_total` and, per queue (label
//! `name`), the client-go `workqueue_*` family. kube-gc's: `kube_gc_graph_nodes` and
//! `kube_gc_monitor_synced{resource}`. Every value comes from one snapshot per source, taken at
//! render time.

use crate::api::ClusterApi;
use crate::controller::GarbageCollector;
use crate::queue::{DurationHistogram, QueueStats, DURATION_BUCKETS};
use std::fmt::Write;

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
    queue_metrics(&mut out, &queues);
    family(
        &mut out,
        "kube_gc_graph_nodes",
        "gauge",
        "Nodes in the dependency graph, virtual ones included",
    );
    sample(&mut out, "kube_gc_graph_nodes", "", gc.graph().len() as f64);
    family(
        &mut out,
        "kube_gc_monitor_synced",
        "gauge",
        "1 when the resource's monitor has synced, else 0",
    );
    for (gvr, synced) in gc.monitor_states() {
        let labels = format!("resource=\"{gvr}\"");
        sample(&mut out, "kube_gc_monitor_synced", &labels, f64::from(u8::from(synced)));
    }
    out
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

fn queue_metrics(out: &mut String, queues: &[QueueStats]) {
    for (name, help, value) in SCALARS {
        let kind = if name.ends_with("_total") { "counter" } else { "gauge" };
        family(out, name, kind, help);
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
