//! `replay --mode builder`: the stream applied to the graph builders alone, one thread per
//! partition, with no collector workers.
//!
//! Invariant: the events of one UID are applied by one thread, in stream order: they are split
//! with the router's own partitioning ([`partition`]). Nothing
//! orders the threads against each other, as nothing orders the monitors of different resources.
//!
//! This is loadgen's only user of the library's graph and builder APIs ([`GraphEvent::observed`],
//! [`GraphBuilder`], [`Graph`], the queues and caches a builder feeds): the rest of loadgen knows
//! streams, the simulated cluster and the controller.
//!
//! # What is measured
//!
//! - Decoding is not timed: a segment of the stream is read into [`GraphEvent`]s, pre-split per
//!   partition, before the clock starts (below, "Segments").
//! - Throughput: events applied over the wall time from the first partition thread's start to
//!   the last one's end, summed over the segments, each thread reading the clock itself. (Timing from the reading thread's
//!   release instead counted nothing at all when that thread was descheduled past the barrier
//!   and the partitions finished first, as happens on a busy machine with a small stream.)
//! - Latency, in a run of its own ([`Timing::EachEvent`]): an [`Instant`] around each
//!   `process_graph_changes`, recorded in one histogram per thread; the histograms are merged
//!   afterwards. The two clock reads and the record cost an event about 70 ns, a seventh of its
//!   cost at 1M objects, so the throughput is taken from a run that times only its segments
//!   ([`Timing::Segments`]), as the Go model takes its throughput from a pass without per-call
//!   timing and its latency from another.
//! - Memory: resident bytes (`VmRSS`) after applying, when every decoded event has been consumed
//!   and dropped, minus resident bytes before decoding, over the graph's node count. The baseline
//!   is taken before decoding, not after, because the graph keeps part of what decoding allocated
//!   (a node shares its event's name string). Each partition's thread converts its own events and
//!   keeps them in fixed-size chunks freed as they are applied, so the memory they give back is
//!   reused by the nodes that thread creates, as in a builder fed by a watch. Whatever the
//!   allocator still holds from decoding is counted, so the figure errs high; the queue items the
//!   builders enqueued (virtual owners, suspicious dependents) are counted too, as they would be
//!   in the collector. Both readings are taken after the allocator returned its free pages to the
//!   system, so they count memory in use.
//!
//! # Segments
//!
//! A stream of 50M objects decoded whole would hold about 8 GB of events beside a 10 GB graph,
//! so the stream is taken in segments of [`SEGMENT`] events: the reader decodes one while the
//! partition threads convert it, everyone meets at the start barrier, the threads apply it timed,
//! and everyone meets again before the next segment is read. Nothing is decoded while the clock
//! runs, and the graph and its queues carry over from segment to segment, as a watch's would.

use super::{cpu_time, resident_bytes_in_use};
use crate::progress;
use crate::stream::StreamReader;
use anyhow::Context;
use hdrhistogram::Histogram;
use kube_gc::api::PartialObjectMeta;
use kube_gc::builder::{GraphBuilder, Lookahead};
use kube_gc::event::{EventType, GraphEvent, SharedNames};
use kube_gc::graph::{Graph, GraphWriter, Name, Uid};
use kube_gc::router::partition;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Barrier, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// What one builder replay measured.
pub struct BuilderRun {
    /// Partitions (threads).
    pub partitions: usize,
    /// Events applied.
    pub events: u64,
    /// ADDED events among them.
    pub added: u64,
    /// Malformed values skipped while decoding.
    pub skipped_bad: usize,
    /// Wall time of the parallel apply.
    pub elapsed: Duration,
    /// CPU time the partition threads spent applying, summed: unlike the wall time, it does not
    /// count the time a busy machine's other work took the cores.
    pub cpu: Duration,
    /// Latency of each `process_graph_changes`, in nanoseconds, all threads merged.
    pub latency: Histogram<u64>,
    /// The same, by event type: ADDED, MODIFIED, DELETED.
    pub latency_by_type: [Histogram<u64>; 3],
    /// Nodes at the end, virtual ones included.
    pub graph_nodes: usize,
    /// Virtual nodes at the end.
    pub virtual_nodes: usize,
    /// Resident bytes the graph added (module docs), if measured and `/proc` tells.
    pub graph_bytes: Option<u64>,
}

/// What a run reads the clock around (module docs, "What is measured").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    /// Each event as well as each segment: the latency histograms fill, and the throughput pays
    /// for the clock.
    EachEvent,
    /// Each segment only: the throughput of the builders alone; the histograms stay empty.
    Segments,
}

/// A stream to replay into the builders, and what every run of it shares.
pub struct Replay<'a> {
    /// The stream.
    pub path: &'a Path,
    /// Events decoded and applied at a time ([`SEGMENT`] by default).
    pub segment: u64,
    /// Malformed values are skipped and counted instead of ending the replay.
    pub skip_bad: bool,
    /// No progress bars.
    pub quiet: bool,
}

impl<'a> Replay<'a> {
    /// The whole of `path`, in segments of [`SEGMENT`], failing on a malformed value.
    pub fn of(path: &'a Path, quiet: bool) -> Self {
        Replay {
            path,
            segment: SEGMENT,
            skip_bad: false,
            quiet,
        }
    }

    /// Decodes the stream and applies it with `partitions` builder threads on a fresh graph, a
    /// segment at a time (module docs), timed as `timing` says; measures the graph's resident
    /// bytes when `measure_memory` (module docs), which only a process's first run can do: the
    /// allocator gives the system back what it holds free in order to measure, so a later run
    /// would pay the first-touch page faults again.
    pub fn run(&self, partitions: usize, timing: Timing, measure_memory: bool) -> anyhow::Result<BuilderRun> {
        let Replay {
            path,
            segment,
            skip_bad,
            quiet,
        } = *self;
        anyhow::ensure!(segment > 0, "a segment must hold at least one event");
        // Only a measuring run asks the allocator for its free pages back (module docs).
        let resident = || measure_memory.then(resident_bytes_in_use).flatten();
        let before = resident();
        #[cfg(feature = "heap-profile")]
        let heap_before = crate::heap_profile::Snapshot::now();
        let writer = GraphWriter::new();
        let graph = writer.graph().clone();
        let builder = GraphBuilder::detached(writer);
        let shared = Shared {
            graph: &graph,
            builder: &builder,
            path,
            start: Barrier::new(partitions + 1),
            done: Barrier::new(partitions + 1),
            segment,
            timing,
            abort: AtomicBool::new(false),
        };
        let applied = shared.run(partitions, skip_bad, quiet)?;
        let graph_bytes = Option::zip(before, resident()).map(|(b, a)| a.saturating_sub(b));
        #[cfg(feature = "heap-profile")]
        if measure_memory {
            eprintln!(
                "{}",
                crate::heap_profile::Snapshot::growth_since(&heap_before, graph.len())
            );
        }
        Ok(BuilderRun {
            partitions,
            events: applied.events,
            added: applied.added,
            skipped_bad: applied.skipped_bad,
            elapsed: applied.elapsed,
            cpu: applied.cpu,
            latency: applied.latency,
            latency_by_type: applied.latency_by_type,
            graph_nodes: graph.len(),
            virtual_nodes: graph.handles().iter().filter(|h| h.is_virtual()).count(),
            graph_bytes,
        })
    }
}

/// Events go from the reading thread to a partition thread in batches of this many: one channel
/// operation (and at most one wake-up) per batch instead of per event.
const BATCH: usize = 256;

/// Batches in flight to one partition thread. Bounded, so the reader never runs far ahead of the
/// conversion; large enough that neither side waits on the other often.
const CHANNEL_CAPACITY: usize = 16;

/// Decoded events are kept in chunks of this many, each allocated once at full size and freed as
/// soon as it is applied. Measured on a 1M-node Deployment/ReplicaSet/Pod stream (P = 1): one
/// growing `Vec` per partition added 140 resident bytes per node (the buffers it outgrew stay with
/// the allocator); chunks of 64 to 8192 events all gave 595–609 bytes per node.
const CHUNK: usize = 8192;

/// The stream is decoded and applied in segments of this many events (module docs, "Segments"):
/// about 160 bytes a decoded event, so a segment holds about 650 MB beside the graph, whatever the
/// stream's size. The `1m` preset's stream is one segment.
pub const SEGMENT: u64 = 1 << 22;

/// One event for a partition thread: its line in the file, its type and its object.
type Raw = (usize, EventType, PartialObjectMeta);

/// What the reader sends a partition thread: a batch of its events, or `None` at the end of a
/// segment. The channel's closing ends the last segment.
type Message = Option<Vec<Raw>>;

/// What the partition threads share.
struct Shared<'a> {
    graph: &'a Graph,
    builder: &'a GraphBuilder,
    path: &'a Path,
    /// Events per segment.
    segment: u64,
    timing: Timing,
    /// Every partition thread and the reader meet here once a segment is decoded; the clock starts
    /// when they are released.
    start: Barrier,
    /// And here once the segment is applied, before the reader decodes the next one.
    done: Barrier,
    /// Set when reading or converting failed: the threads then apply nothing more, and the reader
    /// stops.
    abort: AtomicBool,
}

/// What the threads applied, merged.
struct Applied {
    events: u64,
    added: u64,
    skipped_bad: usize,
    elapsed: Duration,
    cpu: Duration,
    latency: Histogram<u64>,
    latency_by_type: [Histogram<u64>; 3],
}

/// What one partition's thread applied, and when it started and ended applying each segment.
struct PartitionRun {
    events: u64,
    cpu: Duration,
    latency_by_type: [Histogram<u64>; 3],
    spans: Vec<(Instant, Instant)>,
}

impl Shared<'_> {
    /// Starts one thread per partition, feeds them the stream a segment at a time, releases them
    /// together on each and waits for them.
    fn run(&self, partitions: usize, skip_bad: bool, quiet: bool) -> anyhow::Result<Applied> {
        let names = Names {
            graph: self.graph,
            table: Mutex::default(),
        };
        thread::scope(|s| {
            let (senders, threads): (Vec<_>, Vec<_>) = (0..partitions)
                .map(|_| {
                    let (tx, rx) = mpsc::sync_channel(CHANNEL_CAPACITY);
                    let names = &names;
                    (tx, s.spawn(move || self.partition(&rx, names)))
                })
                .unzip();
            let read = self.read_stream(skip_bad, quiet, &senders, &names);
            if read.is_err() {
                self.abort.store(true, Ordering::SeqCst);
            }
            // The last segment: whatever the reader sent since the previous one.
            drop(senders);
            self.start.wait();
            self.done.wait();
            let results: Vec<_> = threads.into_iter().map(thread::ScopedJoinHandle::join).collect();
            let (added, skipped_bad) = read?;
            let mut merged = Applied {
                events: 0,
                added,
                skipped_bad,
                elapsed: Duration::ZERO,
                cpu: Duration::ZERO,
                latency: new_histogram(),
                latency_by_type: new_histograms(),
            };
            let mut segments: Vec<(Instant, Instant)> = Vec::new();
            for result in results {
                let applied = result.map_err(|_| anyhow::anyhow!("a builder thread panicked"))??;
                for (i, &(began, ended)) in applied.spans.iter().enumerate() {
                    match segments.get_mut(i) {
                        Some((b, e)) => (*b, *e) = ((*b).min(began), (*e).max(ended)),
                        None => segments.push((began, ended)),
                    }
                }
                merged.add(applied)?;
            }
            merged.elapsed = segments.iter().map(|&(began, ended)| ended - began).sum();
            Ok(merged)
        })
    }

    /// Reads the stream and sends each event to its partition's thread, in batches, ending a
    /// segment every `self.segment` events; returns the ADDED events and the skipped values.
    fn read_stream(
        &self,
        skip_bad: bool,
        quiet: bool,
        senders: &[SyncSender<Message>],
        names: &Names,
    ) -> anyhow::Result<(u64, usize)> {
        let size = std::fs::metadata(self.path).map(|m| m.len()).unwrap_or(0);
        let bar = progress::bytes(size, quiet, "decoding");
        let reader_bar = bar.clone();
        let mut reader = StreamReader::open(self.path, skip_bad, move |f| Box::new(reader_bar.wrap_read(f)))?;
        let mut added = 0;
        let mut in_segment = 0;
        let mut batches: Vec<Vec<Raw>> = senders.iter().map(|_| Vec::with_capacity(BATCH)).collect();
        for record in reader.by_ref() {
            if self.abort.load(Ordering::SeqCst) {
                break;
            }
            let record = record?;
            let Some(event_type) = EventType::of_watch(record.event.event_type) else {
                continue;
            };
            added += u64::from(event_type == EventType::Add);
            let metadata = &record.event.object.metadata;
            let p = partition(&metadata.namespace, &Uid::parse(&metadata.uid), senders.len());
            batches[p].push((
                record.line,
                event_type,
                std::sync::Arc::unwrap_or_clone(record.event.object),
            ));
            if batches[p].len() == BATCH {
                send(&senders[p], &mut batches[p]);
            }
            in_segment += 1;
            if in_segment == self.segment {
                in_segment = 0;
                for (sender, batch) in senders.iter().zip(&mut batches) {
                    send(sender, batch);
                    // As in `send`: a stopped thread reports its own error.
                    let _ = sender.send(None);
                }
                self.start.wait();
                self.done.wait();
                names.forget_segment();
            }
        }
        for (sender, batch) in senders.iter().zip(&mut batches) {
            send(sender, batch);
        }
        bar.finish_and_clear();
        Ok((added, reader.skipped()))
    }

    /// One partition's thread, segment by segment: converts the events it is sent into
    /// [`GraphEvent`]s, waits for the release, then applies them in order, dropping each event
    /// once applied and each chunk once done (module docs, "Memory").
    fn partition(&self, events: &Receiver<Message>, names: &Names) -> anyhow::Result<PartitionRun> {
        let mut run = PartitionRun {
            events: 0,
            cpu: Duration::ZERO,
            latency_by_type: new_histograms(),
            spans: Vec::new(),
        };
        let mut failed = None;
        loop {
            let (converted, last) = self.convert_segment(events, names);
            let chunks = converted.unwrap_or_else(|e| {
                self.abort.store(true, Ordering::SeqCst);
                failed.get_or_insert(e);
                Vec::new()
            });
            self.start.wait();
            if !self.abort.load(Ordering::SeqCst) {
                self.apply(chunks, &mut run);
            }
            self.done.wait();
            if last {
                return failed.map_or(Ok(run), Err);
            }
        }
    }

    /// Applies one segment's events through a lookahead, as the collector's builders take theirs,
    /// timing the whole and, if asked, each.
    fn apply(&self, chunks: Vec<Vec<GraphEvent>>, run: &mut PartitionRun) {
        let began = Instant::now();
        let cpu_before = cpu_time(libc::CLOCK_THREAD_CPUTIME_ID);
        run.events += chunks.iter().map(Vec::len).sum::<usize>() as u64;
        let latency = &mut run.latency_by_type;
        let timed = self.timing == Timing::EachEvent;
        let mut apply = |event: GraphEvent| {
            if !timed {
                return self.builder.process_graph_changes(event);
            }
            let of_type = &mut latency[type_index(event.event_type)];
            let began = Instant::now();
            self.builder.process_graph_changes(event);
            let nanos = u64::try_from(began.elapsed().as_nanos()).unwrap_or(u64::MAX);
            of_type.saturating_record(nanos);
        };
        let mut ahead = Lookahead::default();
        let mut events = chunks.into_iter().flatten();
        while ahead.apply_run(self.graph, &mut events, &mut apply) > 0 {}
        run.cpu += cpu_time(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(cpu_before);
        run.spans.push((began, Instant::now()));
    }

    /// Converts the batches of one segment; true with them when the segment was the last. After
    /// a failure it still takes the rest of the segment's batches, so the reader never waits on a
    /// full channel.
    fn convert_segment(
        &self,
        events: &Receiver<Message>,
        names: &Names,
    ) -> (anyhow::Result<Vec<Vec<GraphEvent>>>, bool) {
        let mut chunks: Vec<Vec<GraphEvent>> = Vec::new();
        let mut failed = None;
        let last = loop {
            let batch = match events.recv() {
                Ok(Some(batch)) => batch,
                Ok(None) => break false,
                Err(_) => break true,
            };
            if failed.is_some() {
                continue;
            }
            for (line, event_type, object) in batch {
                let converted =
                    GraphEvent::observed(names, event_type, &object.metadata, &object.api_version, &object.kind)
                        .with_context(|| format!("{}:{line}", self.path.display()));
                let event = match converted {
                    Ok(event) => event,
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                };
                match chunks.last_mut() {
                    Some(last) if last.len() < CHUNK => last.push(event),
                    _ => {
                        let mut next = Vec::with_capacity(CHUNK);
                        next.push(event);
                        chunks.push(next);
                    }
                }
            }
        };
        (failed.map_or(Ok(chunks), Err), last)
    }
}

/// Sends `batch` when it holds any event, leaving it empty.
fn send(sender: &SyncSender<Message>, batch: &mut Vec<Raw>) {
    if batch.is_empty() {
        return;
    }
    let full = std::mem::replace(batch, Vec::with_capacity(BATCH));
    // A thread that stopped sending reports its own error when joined.
    let _ = sender.send(Some(full));
}

/// The names of the objects decoded in this segment, by UID, and before them the graph's, so that
/// decoded events share names as the collector's do: there a dependent's ownerReference takes the
/// name of its owner's node ([`SharedNames`]), but an owner decoded in the same segment is not in
/// the graph yet. Without the table each such dependent would keep a copy of its owner's name,
/// memory the collector does not spend.
///
/// The entries live in the map's own arrays, emptied at each segment's end and freed whole with
/// the replay. A map that boxes each entry (papaya's) left a million small blocks in the size
/// classes of the owners' names, which the graph keeps: freed, they kept about a million names'
/// pages partly used, counted as the graph's memory (see the module docs, "Memory").
struct Names<'g> {
    graph: &'g Graph,
    table: Mutex<HashMap<Uid, Name>>,
}

impl Names<'_> {
    /// Called between segments, when no thread converts: the graph now holds what the table did.
    fn forget_segment(&self) {
        self.table.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }
}

impl SharedNames for Names<'_> {
    fn shared_name(&self, uid: &Uid, name: &str) -> Name {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let held = table
            .entry(uid.clone())
            .or_insert_with(|| self.graph.shared_name(uid, name));
        if **held == *name {
            held.clone()
        } else {
            Name::new(name)
        }
    }
}

impl Applied {
    fn add(&mut self, run: PartitionRun) -> anyhow::Result<()> {
        self.events += run.events;
        self.cpu += run.cpu;
        for (merged, of_type) in self.latency_by_type.iter_mut().zip(run.latency_by_type) {
            self.latency.add(&of_type).context("merging latency histograms")?;
            merged.add(of_type).context("merging latency histograms")?;
        }
        Ok(())
    }
}

/// The place of an event type in `latency_by_type`.
fn type_index(event_type: EventType) -> usize {
    match event_type {
        EventType::Add => 0,
        EventType::Update => 1,
        // A worker's event, which no stream holds, is counted with the deletes.
        EventType::Delete | EventType::Unreferenced => 2,
    }
}

fn new_histograms() -> [Histogram<u64>; 3] {
    std::array::from_fn(|_| new_histogram())
}

/// Latencies from 1 ns to a minute, to three significant figures; longer ones count as a minute.
fn new_histogram() -> Histogram<u64> {
    // Constant, valid bounds: `saturating_record` clamps to them rather than growing the histogram.
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}
