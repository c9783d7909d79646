//! The replay report: one JSON document (`--report FILE.json`) and a short human summary.
//!
//! Every field is always present; the ones that do not apply to a mode are `null`, so scripts can
//! read both modes' reports the same way.

use crate::replay::replicas::ShardFigures;
use hdrhistogram::Histogram;
use kube_gc::queue::{DurationHistogram, DURATION_BUCKETS};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What a replay measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// `builder` or `full`.
    pub mode: &'static str,
    /// Full mode: the journal file the collector recorded its writes in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal: Option<String>,
    /// The stream's file.
    pub stream: String,
    /// Watch events replayed (BOOKMARKs and skipped values not included).
    pub events: u64,
    /// Malformed values skipped (`--skip-bad`).
    pub skipped_bad: u64,
    /// Objects the stream lists or creates (its ADDED events).
    pub objects: u64,
    /// Graph builder partitions.
    pub partitions: usize,
    /// Collector workers (full mode).
    pub workers: Option<usize>,
    /// Full mode: workers read every item and owner live, as upstream's do.
    pub verify_with_get: Option<bool>,
    /// Full mode: the delay added to each of the collector's API calls, in milliseconds.
    pub api_latency_ms: Option<f64>,
    /// Builder mode: wall time of the parallel apply. Full mode: time from the first later event
    /// to convergence.
    pub elapsed_s: f64,
    /// Builder mode: events applied per second of `elapsed_s`, in a run that times only its
    /// segments.
    pub events_per_sec: Option<f64>,
    /// Builder mode: the same in the run that times each event, whose latency this report gives.
    pub timed_events_per_sec: Option<f64>,
    /// Builder mode: CPU time of the builder threads per event applied; steadier than
    /// `events_per_sec` on a machine other work shares.
    pub cpu_ns_per_event: Option<f64>,
    /// Builder mode: processGraphChanges latency per event, from the run that times each.
    pub latency_ns: Option<Percentiles>,
    /// Builder mode: the same by event type.
    pub latency_by_type_ns: Option<LatencyByType>,
    /// Builder mode: nodes in the graph at the end, virtual ones included.
    pub graph_nodes: Option<u64>,
    /// Builder mode: virtual nodes among them (owners referenced but never observed).
    pub virtual_nodes: Option<u64>,
    /// Builder mode: resident bytes per graph node (see `replay::builder` for how).
    pub rss_bytes_per_object: Option<f64>,
    /// Builder mode with `--compare-partitions`: one entry per partition count, in order.
    pub scaling: Option<Vec<Scaling>>,
    /// Builder mode with `--compare-partitions`: events/s of the last entry over the first.
    pub ratio: Option<f64>,
    /// Full mode: from the collector's start to its first quiet moment, initial garbage included.
    pub initial_settle_s: Option<f64>,
    /// Full mode: objects the collector removed in that first settle (dangling owners and the like).
    pub initial_collected: Option<u64>,
    /// Full mode: user actions replayed from the stream's later events.
    pub actions: Option<u64>,
    /// Full mode: actions whose object was already gone.
    pub actions_missed: Option<u64>,
    /// Full mode: actions the cluster refused for another reason (each is printed as a warning).
    pub actions_failed: Option<u64>,
    /// Full mode: the user's deletes that removed their object at once (no finalizer held it).
    /// A delete that races the collector either removes its object (counted here) or finds it
    /// being deleted, or gone, by the collector (counted as collected), so `objects_collected +
    /// actions_removed` is the same whichever comes first.
    pub actions_removed: Option<u64>,
    /// Full mode: objects the collector removed after the first later event.
    pub objects_collected: Option<u64>,
    /// Full mode: `objects_collected / elapsed_s`.
    pub collected_per_sec: Option<f64>,
    /// Full mode: CPU seconds the whole process (collector, simulated cluster, the replay's own
    /// actions) spent from the first later event until the collector settled.
    pub converge_cpu_s: Option<f64>,
    /// Full mode: the collector's API calls after the first later event, by verb.
    pub api_calls: Option<ApiCallCounts>,
    /// Full mode: `(get + patch + delete) / objects_collected`.
    pub api_calls_per_collected_object: Option<f64>,
    /// Full mode: time items waited in attemptToDelete, as bucket upper bounds.
    pub queue_wait_ns_le: Option<BucketPercentiles>,
    /// Full mode: time from taking an attemptToDelete item to done, as bucket upper bounds.
    pub attempt_to_delete_ns_le: Option<BucketPercentiles>,
    /// Full mode: whether the cluster ends as the oracle computes from the stream.
    pub outcome_ok: Option<bool>,
    /// Full mode: the first differences (expected first) when `outcome_ok` is false.
    pub outcome_differences: Vec<String>,
    /// Full mode: whether the oracle's outcome is the same when it lets the collector finish after
    /// every action as when it replays all actions first (false: the stream's outcome depends on
    /// timing, and `outcome_ok` compares with the all-actions-first outcome).
    pub oracle_timing_independent: Option<bool>,
    /// Full mode: each collector's share of the hash space and graph (one unless `--shards N`).
    pub shards: Option<Vec<ShardFigures>>,
    /// Full mode: from the first later event until the cluster held what the oracle ends with
    /// (unlike `elapsed_s`, not late by a quiet check, and without a `--migrate` migration).
    pub cascade_s: Option<f64>,
    /// Full mode: `objects_collected / cascade_s`.
    pub cascade_collected_per_sec: Option<f64>,
    /// Full mode with `--migrate`: the storage version migration that ran beside the cascade.
    pub migration: Option<crate::replay::migration::MigrationFigures>,
}

/// What a replay went through, the same in every mode.
pub struct ReplayedStream<'a> {
    /// `builder` or `full`.
    pub mode: &'static str,
    /// The stream's file.
    pub stream: &'a std::path::Path,
    /// Watch events replayed.
    pub events: u64,
    /// Malformed values skipped.
    pub skipped_bad: usize,
    /// Objects the stream lists or creates.
    pub objects: u64,
    /// Graph builder partitions.
    pub partitions: usize,
}

impl Report {
    /// A report of what `replayed` went through, the mode's own figures still empty.
    pub fn of(replayed: ReplayedStream<'_>) -> Report {
        Report {
            mode: replayed.mode,
            stream: replayed.stream.display().to_string(),
            events: replayed.events,
            skipped_bad: replayed.skipped_bad as u64,
            objects: replayed.objects,
            partitions: replayed.partitions,
            ..Report::default()
        }
    }
}

/// Percentiles of a latency, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest value.
    pub max: u64,
}

/// Latency percentiles of each watch event type, and how many events each had.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct LatencyByType {
    /// ADDED events.
    pub added: (u64, Percentiles),
    /// MODIFIED events.
    pub modified: (u64, Percentiles),
    /// DELETED events.
    pub deleted: (u64, Percentiles),
}

impl LatencyByType {
    /// The percentiles of ADDED, MODIFIED and DELETED histograms, in that order.
    pub fn of([added, modified, deleted]: &[Histogram<u64>; 3]) -> LatencyByType {
        let of = |h: &Histogram<u64>| (h.len(), Percentiles::of(h));
        LatencyByType {
            added: of(added),
            modified: of(modified),
            deleted: of(deleted),
        }
    }
}

impl Percentiles {
    /// The percentiles of `h`.
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        Percentiles {
            p50: h.value_at_quantile(0.5),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// Percentiles read off a Prometheus-style histogram: the upper bound of the bucket each falls
/// in (the queue's buckets are a decade apart, 10 ns to 10 s), `null` above the last bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BucketPercentiles {
    /// Observations.
    pub count: u64,
    /// Bucket holding the median.
    pub p50: Option<u64>,
    /// Bucket holding the 99th percentile.
    pub p99: Option<u64>,
    /// Bucket holding the 99.9th percentile.
    pub p999: Option<u64>,
}

impl BucketPercentiles {
    /// The observations of `after` that `before` does not have, as percentiles.
    pub fn between(before: &DurationHistogram, after: &DurationHistogram) -> BucketPercentiles {
        let count = after.count.saturating_sub(before.count);
        let at = |q: f64| {
            let rank = (q * count as f64).ceil().max(1.0) as u64;
            let i =
                (0..DURATION_BUCKETS.len()).find(|&i| after.buckets[i].saturating_sub(before.buckets[i]) >= rank)?;
            Some((DURATION_BUCKETS[i] * 1e9).round() as u64)
        };
        BucketPercentiles {
            count,
            p50: at(0.5),
            p99: at(0.99),
            p999: at(0.999),
        }
    }
}

/// The collector's API calls by verb.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ApiCallCounts {
    /// GETs.
    pub get: u64,
    /// PATCHes.
    pub patch: u64,
    /// DELETEs.
    pub delete: u64,
    /// LISTs.
    pub list: u64,
    /// WATCHes.
    pub watch: u64,
}

/// One builder run of `--compare-partitions`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Scaling {
    /// Partitions (threads).
    pub partitions: usize,
    /// Events applied per second, in the run that times only its segments.
    pub events_per_sec: f64,
    /// Events applied per second in the run that times each event.
    pub timed_events_per_sec: f64,
    /// 99th percentile of processGraphChanges, in nanoseconds, from the run that times each event.
    pub p99_ns: u64,
    /// CPU time of the builder threads per event, in nanoseconds.
    pub cpu_ns_per_event: f64,
    /// Resident bytes per graph node.
    pub rss_bytes_per_object: Option<f64>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} replay of {}: {} events, {} objects, {} partitions{}",
            self.mode,
            self.stream,
            self.events,
            self.objects,
            self.partitions,
            self.workers.map(|w| format!(", {w} workers")).unwrap_or_default()
        )?;
        if let Some(verify) = self.verify_with_get {
            let latency = self.api_latency_ms.unwrap_or_default();
            writeln!(
                f,
                "collector: {}, {latency} ms per API call",
                if verify {
                    "verify with GET (upstream's calls)"
                } else {
                    "acts on the graph's observations"
                }
            )?;
        }
        if self.skipped_bad > 0 {
            writeln!(f, "skipped {} malformed values", self.skipped_bad)?;
        }
        match self.mode {
            "builder" => self.fmt_builder(f),
            _ => self.fmt_full(f),
        }
    }
}

impl Report {
    fn fmt_builder(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(scaling) = &self.scaling {
            for s in scaling {
                writeln!(
                    f,
                    "  P = {}: {:.3} M events/s, {:.0} CPU ns per event; each event timed: {:.3} M events/s, p99 {} ns",
                    s.partitions,
                    s.events_per_sec / 1e6,
                    s.cpu_ns_per_event,
                    s.timed_events_per_sec / 1e6,
                    s.p99_ns
                )?;
            }
            if let Some(ratio) = self.ratio {
                writeln!(f, "  ratio last/first: {ratio:.2}")?;
            }
        }
        writeln!(
            f,
            "applied in {:.3} s: {:.3} M events/s, {:.0} CPU ns per event",
            self.elapsed_s,
            self.events_per_sec.unwrap_or_default() / 1e6,
            self.cpu_ns_per_event.unwrap_or_default()
        )?;
        if let Some(l) = self.latency_ns {
            writeln!(
                f,
                "processGraphChanges, each event timed in a run of its own ({:.3} M events/s): p50 {} ns, p99 {} ns, p99.9 {} ns, max {} ns",
                self.timed_events_per_sec.unwrap_or_default() / 1e6,
                l.p50,
                l.p99,
                l.p999,
                l.max
            )?;
        }
        if let Some(t) = self.latency_by_type_ns {
            let types = [("ADDED", t.added), ("MODIFIED", t.modified), ("DELETED", t.deleted)];
            let each: Vec<String> = types
                .iter()
                .filter(|(_, (n, _))| *n > 0)
                .map(|(name, (n, l))| format!("{name} {n}: p50 {} ns, p99 {} ns", l.p50, l.p99))
                .collect();
            writeln!(f, "  by type: {}", each.join("; "))?;
        }
        write!(
            f,
            "graph: {} nodes ({} virtual), {}",
            self.graph_nodes.unwrap_or_default(),
            self.virtual_nodes.unwrap_or_default(),
            self.rss_bytes_per_object
                .map_or("resident memory unknown".into(), |b| format!(
                    "{b:.0} resident bytes per node"
                )),
        )
    }

    fn fmt_full(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "initial settle: {:.2} s, {} objects collected; then {} actions ({} on objects already gone)",
            self.initial_settle_s.unwrap_or_default(),
            self.initial_collected.unwrap_or_default(),
            self.actions.unwrap_or_default(),
            self.actions_missed.unwrap_or_default()
        )?;
        writeln!(
            f,
            "converged in {:.3} s: {} objects collected, {:.0} per second",
            self.elapsed_s,
            self.objects_collected.unwrap_or_default(),
            self.collected_per_sec.unwrap_or_default()
        )?;
        if let (Some(cpu), Some(collected)) = (self.converge_cpu_s, self.objects_collected.filter(|&n| n > 0)) {
            writeln!(
                f,
                "CPU over it: {cpu:.3} s, {:.1} µs per collected object, {:.2} cores busy on average",
                cpu * 1e6 / collected as f64,
                cpu / self.elapsed_s.max(f64::MIN_POSITIVE)
            )?;
        }
        if let (Some(seconds), Some(rate)) = (self.cascade_s, self.cascade_collected_per_sec) {
            writeln!(
                f,
                "cascade over in {seconds:.3} s: {rate:.0} objects collected per second"
            )?;
        }
        if let Some(m) = &self.migration {
            writeln!(
                f,
                "storage version migration of {} ({} objects) beside it: {} rewritten in {:.3} s ({:.0} per second), {} left stale",
                m.resource,
                m.objects,
                m.rewritten,
                m.seconds,
                m.rewritten as f64 / m.seconds.max(f64::MIN_POSITIVE),
                m.stale_after
            )?;
        }
        if let Some(c) = self.api_calls {
            writeln!(
                f,
                "API calls: get={} patch={} delete={} list={} watch={} ({:.3} per collected object)",
                c.get,
                c.patch,
                c.delete,
                c.list,
                c.watch,
                self.api_calls_per_collected_object.unwrap_or_default()
            )?;
        }
        for (name, p) in [
            ("attemptToDelete queue wait", self.queue_wait_ns_le),
            ("attemptToDeleteItem", self.attempt_to_delete_ns_le),
        ] {
            if let Some(p) = p {
                let show = |v: Option<u64>| v.map_or("> 10 s".into(), |ns| format!("≤ {ns} ns"));
                writeln!(
                    f,
                    "{name}: p50 {}, p99 {}, p99.9 {} ({} items)",
                    show(p.p50),
                    show(p.p99),
                    show(p.p999),
                    p.count
                )?;
            }
        }
        for (i, shard) in self.shards.iter().flatten().enumerate() {
            writeln!(
                f,
                "replica {i}: {} namespaces ({:.3}% of the hash space), {} nodes in its graph after the first settle",
                shard.namespaces,
                shard.hash_share * 100.0,
                shard.graph_nodes
            )?;
        }
        write!(
            f,
            "outcome: {}",
            if self.outcome_ok == Some(true) { "ok" } else { "DIFFERS" }
        )?;
        for d in &self.outcome_differences {
            write!(f, "\n  {d}")?;
        }
        if self.oracle_timing_independent == Some(false) {
            write!(
                f,
                "\nnote: this stream's outcome depends on timing (see oracle_timing_independent)"
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_percentiles_should_only_count_observations_made_between_the_snapshots() {
        let before = DurationHistogram {
            buckets: [0, 0, 5, 5, 5, 5, 5, 5, 5, 5],
            count: 5,
            sum_seconds: 0.0,
        };
        // Since `before`: 98 observations ≤ 10 µs, 2 ≤ 1 ms.
        let after = DurationHistogram {
            buckets: [0, 0, 5, 103, 103, 105, 105, 105, 105, 105],
            count: 105,
            sum_seconds: 0.0,
        };
        let p = BucketPercentiles::between(&before, &after);
        assert_eq!(p.count, 100);
        assert_eq!((p.p50, p.p99, p.p999), (Some(10_000), Some(1_000_000), Some(1_000_000)));
    }
}
