//! `loadgen replay`: a stream applied to kube-gc, measured.
//!
//! - [`builder`]: the graph builders alone, P threads, events decoded before the clock starts;
//! - [`full`]: the whole collector against the in-memory cluster, driven by a [`script`] read from
//!   the stream, its outcome checked by kube-gc's reference model (through the [`oracle`]
//!   adapter), optionally behind a [`Latency`](kube_gc::api::layers::Latency) layer, by one
//!   collector or by the sharded [`replicas`].

pub mod builder;
pub mod full;
pub mod migration;
pub mod oracle;
pub mod replicas;
pub mod script;

use crate::report::{LatencyByType, Percentiles, ReplayedStream, Report, Scaling};
use std::path::Path;
use std::time::Duration;

/// What every replay is told.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// Graph builder partitions; more than one (builder mode only) runs the replay once per
    /// count, each on a fresh graph, and reports the scaling.
    pub partitions: Vec<usize>,
    /// Builder mode: events decoded and applied at a time ([`builder::SEGMENT`] by default).
    pub segment_events: u64,
    /// Malformed values are skipped and counted instead of ending the replay.
    pub skip_bad: bool,
    /// No progress bars.
    pub quiet: bool,
}

/// Builder mode: two runs per partition count, one timing only its segments for the throughput
/// and one timing each event for the latency ([`builder::Timing`]). The headline figures are the
/// last count's, except memory, which only the process's first run measures (the warm-up of a
/// comparison).
pub fn builder_mode(path: &Path, options: &ReplayOptions) -> anyhow::Result<Report> {
    let compared = options.partitions.len() > 1;
    let replay = builder::Replay {
        path,
        segment: options.segment_events,
        skip_bad: options.skip_bad,
        quiet: options.quiet,
    };
    let run = |partitions, timing, measure_memory| replay.run(partitions, timing, measure_memory);
    // A comparison first replays once untimed, so that every timed run starts from an allocator
    // that already holds a graph of this size ([`keep_freed_memory`]). Otherwise only the first
    // run pays the kernel's first-touch page faults, which flatters whichever partition count
    // runs later. The warm-up is also the run whose resident memory is a fresh process's.
    let warm_up = match (compared, options.partitions.first()) {
        (true, Some(&p)) => Some(run(p, builder::Timing::Segments, true)?),
        _ => None,
    };
    let mut runs = Vec::new();
    for &p in &options.partitions {
        let first = warm_up.is_none() && runs.is_empty();
        let throughput = run(p, builder::Timing::Segments, first)?;
        let latency = run(p, builder::Timing::EachEvent, false)?;
        runs.push((throughput, latency));
    }
    let Some((last, last_timed)) = runs.last() else {
        anyhow::bail!("no partition count to replay with");
    };
    let per_node = |r: &builder::BuilderRun| r.graph_bytes.map(|b| b as f64 / r.graph_nodes.max(1) as f64);
    let scaling: Vec<Scaling> = runs
        .iter()
        .map(|(r, timed)| Scaling {
            partitions: r.partitions,
            events_per_sec: events_per_sec(r),
            timed_events_per_sec: events_per_sec(timed),
            p99_ns: timed.latency.value_at_quantile(0.99),
            cpu_ns_per_event: cpu_ns_per_event(r),
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
        timed_events_per_sec: Some(events_per_sec(last_timed)),
        cpu_ns_per_event: Some(cpu_ns_per_event(last)),
        latency_ns: Some(Percentiles::of(&last_timed.latency)),
        latency_by_type_ns: Some(LatencyByType::of(&last_timed.latency_by_type)),
        graph_nodes: Some(last.graph_nodes as u64),
        virtual_nodes: Some(last.virtual_nodes as u64),
        rss_bytes_per_object: warm_up
            .iter()
            .chain(runs.iter().map(|(r, _)| r))
            .filter_map(per_node)
            .reduce(f64::max),
        ratio: compared.then(|| scaling[scaling.len() - 1].events_per_sec / scaling[0].events_per_sec),
        scaling: compared.then_some(scaling),
        ..replayed
    })
}

fn cpu_ns_per_event(run: &builder::BuilderRun) -> f64 {
    run.cpu.as_nanos() as f64 / run.events.max(1) as f64
}

fn events_per_sec(run: &builder::BuilderRun) -> f64 {
    run.events as f64 / run.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
}

/// mimalloc's `mi_option_purge_delay` (its place in `mi_option_e`, which `libmimalloc-sys` does
/// not name).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Makes the allocator keep the memory a replay frees until [`resident_bytes_in_use`] asks for it
/// back, instead of returning it to the system a few seconds later.
///
/// A builder comparison replays the stream once untimed before its timed runs, so that these
/// reuse memory the allocator already holds, as a collector that has been running does, and as
/// the Go model's passes reuse the heap of the pass before. With the allocator's default delay
/// (ten seconds for whole arenas) a timed run would sometimes find that memory returned and pay
/// the kernel's first-touch page faults again, depending on how long decoding took.
pub fn keep_freed_memory() {
    // SAFETY: sets an allocator option; any value is valid, and it only changes when freed pages
    // are returned to the system. One hour: longer than any replay.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 3_600_000) };
}

/// CPU time of `clock`: `CLOCK_THREAD_CPUTIME_ID` for the calling thread, `CLOCK_PROCESS_CPUTIME_ID`
/// for the whole process; zero where the clock cannot be read.
pub fn cpu_time(clock: libc::clockid_t) -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec to write; the clock ids passed are constants the kernel
    // knows.
    let ok = unsafe { libc::clock_gettime(clock, &mut now) } == 0;
    let secs = u64::try_from(now.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(now.tv_nsec).unwrap_or(0);
    if ok {
        Duration::new(secs, nanos)
    } else {
        Duration::ZERO
    }
}

/// This process's resident set (`VmRSS`, which the kernel reports in kB whatever the page size),
/// or `None` where `/proc` does not tell, after the allocator gave the system back the pages it
/// held free: what is in use, not what an earlier phase (decoding) left behind.
pub fn resident_bytes_in_use() -> Option<u64> {
    // SAFETY: `mi_collect` only walks and releases the allocator's own free pages; any thread
    // may call it at any time.
    unsafe { libmimalloc_sys::mi_collect(true) };
    crate::sync::status_bytes(std::process::id(), "VmRSS").ok()
}
