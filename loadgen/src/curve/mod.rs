//! `loadgen curve`: the graph builders' speed, latency and memory against the cluster's size, one
//! builder replay per size and partition count.
//!
//! Invariant: one replay at a time, each a [`builder::Replay::run`] on a fresh graph that decodes its
//! stream a segment at a time and drops it before it returns, so a curve up to 50M objects needs
//! the memory of one 50M graph and one segment, not of the whole curve or of a decoded stream.
//!
//! Each size is replayed by [`measure_size`] in a process of its own (`loadgen curve` runs
//! itself once per size), so that its resident memory is counted from a fresh process's: in one
//! process, a size would reuse what the allocator kept from the size before, and its bytes per
//! node would read low (measured: the 1M runs after a 1M warm-up in the same process added 0).
//!
//! # What is measured
//!
//! For each size, smallest first, its stream is generated once into the streams directory (a
//! file already there is reused: the same topology and seed write the same stream). Then:
//!
//! 1. one untimed warm-up replay at the first partition count, as `replay --compare-partitions`
//!    does, so that whichever count runs first does not alone pay the kernel's first-touch page
//!    faults;
//! 2. `runs` rounds, each replaying once at every partition count in order, so the counts are
//!    interleaved and a slow minute on a shared machine hits all of them. Each replay times each
//!    event ([`builder::Timing::EachEvent`]): the curve's events/s pay for the clock at every
//!    size alike, and a 50M replay is not run twice.
//!
//! A row (one size, one partition count) reports the median of its rounds (the mean of the two
//! middle ones for an even count) and, for events/s, the range. Resident bytes per node are a
//! size's, not a row's: the warm-up's, the one replay of a fresh process and the only one that
//! measures memory (see [`builder::Replay::run`]).
//!
//! The per-event cost of a size is one second over the median events/s of a partition count: at
//! the first (1 by default) one thread's cost, with no contention in it, and at the last (2) the
//! wall time the partitions take together. DESIGN §5 asks the per-event cost and the bytes per
//! object to stay flat within [`FLAT_WITHIN_PCT`] from 1M objects up; the curve compares its
//! smallest size of at least a million objects with its largest (or, below a million, its two
//! largest), judges the last partition count's cost and the bytes, and flags a change beyond
//! that. Each size also reports its process's peak resident memory (`VmHWM`): the whole replay,
//! decoding included.

pub mod plot;

use crate::generate::{self, Preset, Topology};
use crate::progress;
use crate::replay::builder::{self, BuilderRun};
use crate::report::Percentiles;
use crate::stream::StreamWriter;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

/// How far the per-event cost and the bytes per object may move between the two largest sizes
/// (DESIGN §5: flat within 15 % from 1M to 5M objects).
pub const FLAT_WITHIN_PCT: f64 = 15.0;

/// One point of the curve: a stream size, named.
#[derive(Clone, Debug)]
pub struct Size {
    /// The preset's name (`small`, `1m`, `5m`) or, for [`Size::objects`], `<N>-objects`.
    pub label: String,
    /// What its stream is generated from.
    pub topology: Topology,
}

impl Size {
    /// The preset's size.
    pub fn preset(preset: Preset) -> Size {
        let label = match preset {
            Preset::Small => "small",
            Preset::OneMillion => "1m",
            Preset::FiveMillion => "5m",
        };
        Size {
            label: label.into(),
            topology: preset.topology(),
        }
    }

    /// The presets' shape at about `objects` objects ([`Topology::sized`]).
    pub fn objects(objects: usize) -> Size {
        Size {
            label: format!("{objects}-objects"),
            topology: Topology::sized(objects),
        }
    }

    /// The file its stream is kept in, under `dir`, with `extension` (`jsonl` or `jsonl.zst`).
    pub fn stream_path(&self, dir: &Path, seed: u64, extension: &str) -> PathBuf {
        dir.join(format!("{}-seed{seed}.{extension}", self.label))
    }
}

/// What a curve is told.
#[derive(Clone, Debug)]
pub struct CurveOptions {
    /// The sizes, in any order; they are measured smallest first.
    pub sizes: Vec<Size>,
    /// Seed of every stream.
    pub seed: u64,
    /// Partition counts, each replayed on a fresh graph; the first is the baseline of the ratio
    /// and of the per-event cost.
    pub partitions: Vec<usize>,
    /// Timed rounds per size (at least one).
    pub runs: usize,
    /// Where streams are kept, and generated when missing.
    pub streams_dir: PathBuf,
    /// No progress bars and no progress lines.
    pub quiet: bool,
}

/// One size at one partition count: medians over the rounds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    /// The size's label.
    pub size: String,
    /// Objects the stream lists or creates (its ADDED events).
    pub objects: u64,
    /// Watch events replayed.
    pub events: u64,
    /// Partitions (threads).
    pub partitions: usize,
    /// Events applied per second, median of the rounds.
    pub events_per_sec: f64,
    /// The slowest and fastest round's events per second.
    pub events_per_sec_range: [f64; 2],
    /// processGraphChanges latency, each percentile the median of the rounds.
    pub latency_ns: Percentiles,
}

/// One size, all partition counts together.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SizeSummary {
    /// The size's label.
    pub size: String,
    /// Objects the stream lists or creates.
    pub objects: u64,
    /// Median events/s of the last partition count over the first's (P = 2 / P = 1 by default).
    pub ratio: Option<f64>,
    /// Nanoseconds per event at the first partition count (module docs).
    pub ns_per_event: f64,
    /// Wall nanoseconds per event at the last partition count (module docs).
    #[serde(default)]
    pub ns_per_event_last: f64,
    /// Resident bytes per graph node, measured by the size's warm-up, a fresh process's first run.
    pub rss_bytes_per_object: Option<f64>,
    /// The peak resident bytes (`VmHWM`) of the size's process, over all its replays, when `/proc`
    /// tells.
    #[serde(default)]
    pub peak_resident_bytes: Option<u64>,
}

/// How the per-event cost and the memory moved from one size to the next larger one.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Change {
    /// The smaller size's label.
    pub from: String,
    /// The larger size's label.
    pub to: String,
    /// Change of [`SizeSummary::ns_per_event`], in percent of the smaller size's.
    pub ns_per_event_pct: f64,
    /// Change of [`SizeSummary::ns_per_event_last`], in percent; with the bytes, what is judged.
    #[serde(default)]
    pub ns_per_event_last_pct: f64,
    /// Change of [`SizeSummary::rss_bytes_per_object`], in percent, when both are known.
    pub bytes_per_object_pct: Option<f64>,
    /// The bound both changes are held to ([`FLAT_WITHIN_PCT`]).
    pub flat_within_pct: f64,
    /// Whether the last partition count's cost and the bytes are within it.
    pub flat: bool,
}

impl Change {
    /// The change from `from` to `to`.
    pub fn between(from: &SizeSummary, to: &SizeSummary) -> Change {
        let pct = |a: f64, b: f64| (b - a) / a * 100.0;
        let ns_per_event_last_pct = pct(from.ns_per_event_last, to.ns_per_event_last);
        let bytes_per_object_pct =
            Option::zip(from.rss_bytes_per_object, to.rss_bytes_per_object).map(|(a, b)| pct(a, b));
        let within = |p: f64| p.abs() <= FLAT_WITHIN_PCT;
        Change {
            from: from.size.clone(),
            to: to.size.clone(),
            ns_per_event_pct: pct(from.ns_per_event, to.ns_per_event),
            ns_per_event_last_pct,
            bytes_per_object_pct,
            flat_within_pct: FLAT_WITHIN_PCT,
            flat: within(ns_per_event_last_pct) && bytes_per_object_pct.is_none_or(within),
        }
    }

    /// The change a curve judges among `sizes`, smallest first (module docs), when there are two.
    pub fn judged(sizes: &[SizeSummary]) -> Option<Change> {
        let [.., second_largest, largest] = sizes else {
            return None;
        };
        let from = sizes[..sizes.len() - 1]
            .iter()
            .find(|s| s.objects >= 1_000_000)
            .unwrap_or(second_largest);
        Some(Change::between(from, largest))
    }
}

/// The whole curve: the JSON document of `--report`, and the printed table.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Curve {
    /// Seed of every stream.
    pub seed: u64,
    /// Timed rounds per size.
    pub runs: usize,
    /// Partition counts, in the order replayed.
    pub partitions: Vec<usize>,
    /// One row per size and partition count, sizes smallest first.
    pub rows: Vec<Row>,
    /// One entry per size, smallest first.
    pub sizes: Vec<SizeSummary>,
    /// From the smallest size of a million objects or more to the largest ([`Change::judged`]).
    pub change: Option<Change>,
}

/// A size's rows, one per partition count, and its summary.
pub type Measured = (Vec<Row>, SizeSummary);

/// Measures the curve: for each size, its stream (generated when missing), then its replays, run
/// by `replay_size` (the stream's path and the size's label in, what [`measure_size`] returns
/// out), which `loadgen curve` runs in a process of its own (module docs).
pub fn measure(
    options: &CurveOptions,
    mut replay_size: impl FnMut(&Path, &str) -> anyhow::Result<Measured>,
) -> anyhow::Result<Curve> {
    anyhow::ensure!(!options.sizes.is_empty(), "no size to measure");
    anyhow::ensure!(!options.partitions.is_empty(), "no partition count to replay with");
    anyhow::ensure!(
        options.partitions.iter().all(|&p| p > 0),
        "a partition count must be at least 1"
    );
    anyhow::ensure!(options.runs > 0, "--runs must be at least 1");
    let mut sizes = options.sizes.clone();
    sizes.sort_by_key(|s| s.topology.objects());
    sizes.dedup_by(|a, b| a.label == b.label);
    let mut rows = Vec::new();
    let mut summaries = Vec::new();
    for size in &sizes {
        let path = ensure_stream(size, &options.streams_dir, options.seed, "jsonl.zst", options.quiet)?;
        let (size_rows, summary) = replay_size(&path, &size.label)
            .with_context(|| format!("measuring the {} stream {}", size.label, path.display()))?;
        rows.extend(size_rows);
        summaries.push(summary);
    }
    let change = Change::judged(&summaries);
    Ok(Curve {
        seed: options.seed,
        runs: options.runs,
        partitions: options.partitions.clone(),
        rows,
        sizes: summaries,
        change,
    })
}

/// The stream of `size` and `seed` under `dir`, generated first when it is not there. A stream is
/// written under a temporary name and renamed once finished, so an interrupted generation is
/// never taken for a stream.
pub fn ensure_stream(size: &Size, dir: &Path, seed: u64, extension: &str, quiet: bool) -> anyhow::Result<PathBuf> {
    let path = size.stream_path(dir, seed, extension);
    if path.is_file() {
        return Ok(path);
    }
    size.topology.check().map_err(anyhow::Error::msg)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let partial = dir.join(format!("{}-seed{seed}.partial.{extension}", size.label));
    let mut writer = StreamWriter::create(&partial)?;
    let bar = progress::bar(size.topology.objects() as u64, quiet, "generating");
    generate::generate(&size.topology, seed, &mut writer, &bar)?;
    bar.finish_and_clear();
    writer
        .finish()
        .with_context(|| format!("finishing {}", partial.display()))?;
    std::fs::rename(&partial, &path)
        .with_context(|| format!("renaming {} to {}", partial.display(), path.display()))?;
    Ok(path)
}

/// The warm-up and the rounds of one size's stream at `path` (module docs), for the size named
/// `label`, with `options`' partition counts and rounds (its sizes are not read).
pub fn measure_size(path: &Path, label: &str, options: &CurveOptions) -> anyhow::Result<Measured> {
    anyhow::ensure!(!options.partitions.is_empty(), "no partition count to replay with");
    anyhow::ensure!(options.runs > 0, "--runs must be at least 1");
    let first = options.partitions[0];
    note(options.quiet, format_args!("{label}: warm-up replay at P = {first}"));
    let replay = builder::Replay::of(path, options.quiet);
    let warm_up = replay.run(first, builder::Timing::Segments, true)?;
    let per_node = per_node(&warm_up);
    // runs[i][r]: partition count i, round r.
    let mut runs: Vec<Vec<BuilderRun>> = options.partitions.iter().map(|_| Vec::new()).collect();
    for round in 0..options.runs {
        for (i, &p) in options.partitions.iter().enumerate() {
            note(
                options.quiet,
                format_args!("{label}: round {}/{} at P = {p}", round + 1, options.runs),
            );
            runs[i].push(replay.run(p, builder::Timing::EachEvent, false)?);
        }
    }
    let rows: Vec<Row> = runs.iter().map(|r| row(label, r)).collect();
    let ratio = match rows.as_slice() {
        [first, .., last] => Some(last.events_per_sec / first.events_per_sec),
        _ => None,
    };
    let ns_per_event = |row: &Row| 1e9 / row.events_per_sec.max(f64::MIN_POSITIVE);
    let summary = SizeSummary {
        size: label.into(),
        objects: warm_up.added,
        ratio,
        ns_per_event: ns_per_event(&rows[0]),
        ns_per_event_last: ns_per_event(&rows[rows.len() - 1]),
        rss_bytes_per_object: per_node,
        peak_resident_bytes: crate::sync::status_bytes(std::process::id(), "VmHWM").ok(),
    };
    Ok((rows, summary))
}

/// The row of one partition count's rounds (at least one).
fn row(label: &str, rounds: &[BuilderRun]) -> Row {
    let rates: Vec<f64> = rounds.iter().map(events_per_sec).collect();
    let percentiles: Vec<Percentiles> = rounds.iter().map(|r| Percentiles::of(&r.latency)).collect();
    let latency = |f: fn(&Percentiles) -> u64| median_u64(percentiles.iter().map(f).collect());
    Row {
        size: label.into(),
        objects: rounds[0].added,
        events: rounds[0].events,
        partitions: rounds[0].partitions,
        events_per_sec: median(rates.clone()),
        events_per_sec_range: [
            rates.iter().copied().fold(f64::INFINITY, f64::min),
            rates.iter().copied().fold(0.0, f64::max),
        ],
        latency_ns: Percentiles {
            p50: latency(|p| p.p50),
            p99: latency(|p| p.p99),
            p999: latency(|p| p.p999),
            max: latency(|p| p.max),
        },
    }
}

fn events_per_sec(run: &BuilderRun) -> f64 {
    run.events as f64 / run.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
}

fn per_node(run: &BuilderRun) -> Option<f64> {
    run.graph_bytes.map(|b| b as f64 / run.graph_nodes.max(1) as f64)
}

/// The median of `values` (the mean of the two middle ones for an even count); 0 for none.
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn median_u64(values: Vec<u64>) -> u64 {
    median(values.into_iter().map(|v| v as f64).collect()).round() as u64
}

/// A progress line on stderr, unless quiet. A closed stderr only loses the line.
fn note(quiet: bool, line: fmt::Arguments<'_>) {
    if !quiet {
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }
}

impl fmt::Display for Curve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let last = self.partitions.last().copied().unwrap_or(1);
        let first = self.partitions.first().copied().unwrap_or(1);
        writeln!(
            f,
            "builder replays, seed {}, {} round{} per size (median{}), each on a fresh graph",
            self.seed,
            self.runs,
            if self.runs == 1 { "" } else { "s" },
            if self.runs > 1 { " and range of events/s" } else { "" },
        )?;
        writeln!(
            f,
            "{:>14} {:>10} {:>10} {:>3} {:>24} {:>8} {:>8} {:>8} {:>9} {:>6}",
            "size",
            "objects",
            "events",
            "P",
            "events/s",
            "p50 ns",
            "p99 ns",
            "p99.9 ns",
            "B/node",
            if self.partitions.len() > 1 {
                format!("P{last}/P{first}")
            } else {
                String::new()
            },
        )?;
        for row in &self.rows {
            let rate = if self.runs > 1 {
                format!(
                    "{:.3}M ({:.3}–{:.3})",
                    row.events_per_sec / 1e6,
                    row.events_per_sec_range[0] / 1e6,
                    row.events_per_sec_range[1] / 1e6
                )
            } else {
                format!("{:.3}M", row.events_per_sec / 1e6)
            };
            let size = self.sizes.iter().find(|s| s.size == row.size);
            let ratio = size
                .filter(|_| row.partitions == last && self.partitions.len() > 1)
                .and_then(|s| s.ratio)
                .map_or(String::new(), |r| format!("{r:.2}"));
            let bytes = size.and_then(|s| s.rss_bytes_per_object);
            writeln!(
                f,
                "{:>14} {:>10} {:>10} {:>3} {:>24} {:>8} {:>8} {:>8} {:>9} {:>6}",
                row.size,
                row.objects,
                row.events,
                row.partitions,
                rate,
                row.latency_ns.p50,
                row.latency_ns.p99,
                row.latency_ns.p999,
                bytes.map_or("?".into(), |b| format!("{b:.0}")),
                ratio,
            )?;
        }
        for s in &self.sizes {
            let cost = if self.partitions.len() > 1 {
                format!(
                    "{:.0} ns/event at P = {first}, {:.0} at P = {last}",
                    s.ns_per_event, s.ns_per_event_last
                )
            } else {
                format!("{:.0} ns/event at P = {first}", s.ns_per_event)
            };
            writeln!(
                f,
                "{}: {cost}, {} resident bytes per node (its warm-up, in a fresh process), peak resident {}",
                s.size,
                s.rss_bytes_per_object.map_or("unknown".into(), |b| format!("{b:.0}")),
                s.peak_resident_bytes.map_or("unknown".into(), |b| format!(
                    "{:.2} GiB",
                    b as f64 / f64::from(1 << 30)
                )),
            )?;
        }
        match &self.change {
            Some(c) => write!(f, "{c}"),
            None => write!(f, "one size only: no change to compare"),
        }
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flag = |pct: f64| {
            if pct.abs() > self.flat_within_pct {
                format!("{pct:+.1} %  BEYOND ±{:.0} %", self.flat_within_pct)
            } else {
                format!("{pct:+.1} %")
            }
        };
        // With one partition count, the first is the last: one figure.
        let first = if self.ns_per_event_pct == self.ns_per_event_last_pct {
            String::new()
        } else {
            format!(" ({} at the first)", flag(self.ns_per_event_pct))
        };
        write!(
            f,
            "{} → {}: ns/event {} at the last partition count{first}, bytes per object {}; {}",
            self.from,
            self.to,
            flag(self.ns_per_event_last_pct),
            self.bytes_per_object_pct.map_or("unknown".into(), flag),
            self.verdict()
        )
    }
}

impl Change {
    /// Whether the curve is flat, and if not, which of its two figures is not: the per-event cost
    /// at the last partition count, the bytes per object, or both.
    fn verdict(&self) -> String {
        if self.flat {
            return "flat, as DESIGN §5 asks".into();
        }
        let beyond = |pct: f64| pct.abs() > self.flat_within_pct;
        let figures: Vec<&str> = [
            (beyond(self.ns_per_event_last_pct), "the per-event cost"),
            (self.bytes_per_object_pct.is_some_and(beyond), "the bytes per object"),
        ]
        .into_iter()
        .filter_map(|(out, figure)| out.then_some(figure))
        .collect();
        format!(
            "not flat: {} beyond the ±{:.0} % DESIGN §5 allows",
            figures.join(" and "),
            self.flat_within_pct
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(size: &str, ns_per_event: f64, bytes: f64) -> SizeSummary {
        SizeSummary {
            size: size.into(),
            objects: 0,
            ratio: None,
            ns_per_event: ns_per_event / 2.0,
            ns_per_event_last: ns_per_event,
            rss_bytes_per_object: Some(bytes),
            peak_resident_bytes: None,
        }
    }

    fn sized(size: &str, objects: u64) -> SizeSummary {
        SizeSummary {
            objects,
            ..summary(size, 500.0, 200.0)
        }
    }

    #[test]
    fn the_change_judged_should_run_from_the_first_million_to_the_largest() {
        let sizes = [
            sized("small", 10_000),
            sized("1m", 1_000_000),
            sized("5m", 5_000_000),
            sized("50m", 50_000_000),
        ];
        let change = Change::judged(&sizes).expect("two sizes");
        assert_eq!((change.from.as_str(), change.to.as_str()), ("1m", "50m"));
        let below = Change::judged(&sizes[..1]);
        assert!(below.is_none());
        let small = [sized("a", 10), sized("b", 20), sized("c", 30)];
        let change = Change::judged(&small).expect("two sizes");
        assert_eq!((change.from.as_str(), change.to.as_str()), ("b", "c"));
    }

    #[test]
    fn median_should_take_the_middle_value_or_the_mean_of_the_two_middle_ones() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(vec![7.0]), 7.0);
    }

    #[test]
    fn a_change_within_fifteen_percent_should_be_flat_and_one_beyond_should_not() {
        let flat = Change::between(&summary("1m", 600.0, 350.0), &summary("5m", 680.0, 330.0));
        assert!((flat.ns_per_event_pct - 13.333).abs() < 0.01, "{flat:?}");
        assert!(flat.flat, "{flat}");
        let slower = Change::between(&summary("1m", 600.0, 350.0), &summary("5m", 700.0, 350.0));
        assert!(!slower.flat);
        assert!(slower.to_string().contains("BEYOND"), "{slower}");
        assert!(
            slower
                .to_string()
                .ends_with("; not flat: the per-event cost beyond the ±15 % DESIGN §5 allows"),
            "only the cost is named: {slower}"
        );
        let bigger = Change::between(&summary("1m", 600.0, 350.0), &summary("5m", 600.0, 410.0));
        assert!(!bigger.flat, "{bigger}");
        assert!(
            bigger
                .to_string()
                .ends_with("not flat: the bytes per object beyond the ±15 % DESIGN §5 allows"),
            "{bigger}"
        );
        let both = Change::between(&summary("1m", 600.0, 350.0), &summary("5m", 700.0, 410.0));
        assert!(
            both.to_string()
                .contains("the per-event cost and the bytes per object beyond"),
            "{both}"
        );
        assert!(flat.to_string().ends_with("; flat, as DESIGN §5 asks"), "{flat}");
    }

    #[test]
    fn a_curve_of_one_partition_count_should_give_each_cost_once() {
        let one = |size: &str, ns: f64| SizeSummary {
            ns_per_event: ns,
            ..summary(size, ns, 120.0)
        };
        let change = Change::between(&one("1m", 400.0), &one("50m", 600.0));
        let text = change.to_string();
        assert!(
            text.contains("ns/event +50.0 %  BEYOND ±15 % at the last partition count, bytes"),
            "{text}"
        );
        assert!(!text.contains("at the first"), "{text}");
        let two = Change::between(&one("1m", 400.0), &summary("50m", 600.0, 120.0));
        assert!(two.to_string().contains("at the first"), "{two}");
    }
}
