//! `loadgen replay`: a stream applied to kube-gc, measured.
//!
//! - [`builder`]: the graph builders alone, P threads, events decoded before the clock starts;
//! - [`full`]: the whole collector against the in-memory cluster, driven by a [`script`] read from
//!   the stream, its outcome checked by kube-gc's reference model (through the [`oracle`]
//!   adapter), optionally behind a [`Latency`](kube_gc::api::layers::Latency) layer.

pub mod builder;
pub mod full;
pub mod oracle;
pub mod script;

use crate::report::{Percentiles, ReplayedStream, Report, Scaling};
use std::path::Path;

/// What every replay is told.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// Graph builder partitions; more than one (builder mode only) runs the replay once per
    /// count, each on a fresh graph, and reports the scaling.
    pub partitions: Vec<usize>,
    /// Malformed values are skipped and counted instead of ending the replay.
    pub skip_bad: bool,
    /// No progress bars.
    pub quiet: bool,
}

/// Builder mode: one run per partition count. The headline figures are the last run's, except
/// memory, which is the largest of all runs (each run measures from its own baseline, and a later
/// run may reuse memory an earlier one freed).
pub fn builder_mode(path: &Path, options: &ReplayOptions) -> anyhow::Result<Report> {
    let compared = options.partitions.len() > 1;
    // A comparison first replays once untimed, so that every timed run starts from an allocator
    // that already held a graph of this size. Otherwise only the first run pays the kernel's
    // first-touch page faults, which flatters whichever partition count runs later. The warm-up
    // is also the run whose resident memory is a fresh process's.
    let warm_up = match (compared, options.partitions.first()) {
        (true, Some(&p)) => Some(builder::run(path, p, options.skip_bad, options.quiet)?),
        _ => None,
    };
    let mut runs = Vec::new();
    for &p in &options.partitions {
        runs.push(builder::run(path, p, options.skip_bad, options.quiet)?);
    }
    let Some(last) = runs.last() else {
        anyhow::bail!("no partition count to replay with");
    };
    let per_node = |r: &builder::BuilderRun| r.graph_bytes.map(|b| b as f64 / r.graph_nodes.max(1) as f64);
    let scaling: Vec<Scaling> = runs
        .iter()
        .map(|r| Scaling {
            partitions: r.partitions,
            events_per_sec: events_per_sec(r),
            p99_ns: r.latency.value_at_quantile(0.99),
            rss_bytes_per_object: per_node(r),
        })
        .collect();
    let replayed = Report::of(ReplayedStream {
        mode: "builder",
        stream: path,
        events: last.events,
        skipped_bad: last.skipped_bad,
        objects: last.added,
        partitions: last.partitions,
    });
    Ok(Report {
        elapsed_s: last.elapsed.as_secs_f64(),
        events_per_sec: Some(events_per_sec(last)),
        latency_ns: Some(Percentiles::of(&last.latency)),
        graph_nodes: Some(last.graph_nodes as u64),
        virtual_nodes: Some(last.virtual_nodes as u64),
        rss_bytes_per_object: warm_up.iter().chain(&runs).filter_map(per_node).reduce(f64::max),
        ratio: compared.then(|| scaling[scaling.len() - 1].events_per_sec / scaling[0].events_per_sec),
        scaling: compared.then_some(scaling),
        ..replayed
    })
}

fn events_per_sec(run: &builder::BuilderRun) -> f64 {
    run.events as f64 / run.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
}

/// This process's resident set (`VmRSS`, which the kernel reports in kB whatever the page size),
/// or `None` where `/proc` does not tell.
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kb * 1024)
}
