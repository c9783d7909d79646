//! `replay --mode builder` on a generated stream: the graph it leaves, at one and two partitions.

use indicatif::ProgressBar;
use loadgen::generate::{generate, Preset};
use loadgen::replay::{builder, builder_mode, ReplayOptions};
use loadgen::stream::StreamWriter;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// One replay at a time in this process. A replay measures the graph's memory as the growth of
/// the process's resident set, which a replay of another test running beside it moves, up or
/// down, as it allocates and frees: run in parallel, the one-partition test once measured no
/// growth at all.
fn alone() -> MutexGuard<'static, ()> {
    static REPLAYS: Mutex<()> = Mutex::new(());
    REPLAYS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn write_small(path: &Path) -> loadgen::generate::Summary {
    let mut writer = StreamWriter::create(path).expect("create");
    let summary = generate(&Preset::Small.topology(), 5, &mut writer, &ProgressBar::hidden()).expect("generate");
    writer.finish().expect("finish");
    summary
}

fn options(partitions: &[usize]) -> ReplayOptions {
    ReplayOptions {
        partitions: partitions.to_vec(),
        segment_events: loadgen::replay::builder::SEGMENT,
        skip_bad: false,
        quiet: true,
    }
}

#[test]
fn builder_replay_with_one_partition_should_leave_live_objects_and_dangling_owners() {
    let _alone = alone();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("small.jsonl");
    let summary = write_small(&path);
    let report = builder_mode(&path, &options(&[1])).expect("replay");
    let dangling = summary.special["dangling"] as u64;
    // Background deletions remove their root's node; Foreground and Orphan ones only mark it. Each
    // dangling reference names its own never-created owner, which stays as a virtual node.
    let expected = summary.objects() as u64 - summary.deletions["Background"] as u64 + dangling;
    assert_eq!(report.graph_nodes, Some(expected));
    assert_eq!(report.virtual_nodes, Some(dangling));
    assert_eq!(report.objects, summary.objects() as u64);
    assert_eq!(
        report.events,
        summary.events_by_type.values().sum::<usize>() as u64 - 1,
        "all but the bookmark"
    );
    assert!(report.rss_bytes_per_object.is_some_and(|b| b > 0.0));
}

#[test]
fn builder_replay_comparing_partitions_should_report_each_run() {
    let _alone = alone();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("small.jsonl.zst");
    let summary = write_small(&path);
    let report = builder_mode(&path, &options(&[1, 2])).expect("replay");
    let scaling = report.scaling.as_ref().expect("one entry per partition count");
    assert_eq!(scaling.iter().map(|s| s.partitions).collect::<Vec<_>>(), [1, 2]);
    assert!(scaling.iter().all(|s| s.events_per_sec > 0.0));
    assert!(
        scaling.iter().all(|s| s.timed_events_per_sec > 0.0 && s.p99_ns > 0),
        "each count's latency comes from a run that timed each event: {scaling:?}"
    );
    assert_eq!(report.partitions, 2);
    assert!(report.ratio.is_some());
    // Two partitions may apply a root's deletion before a dependent that the stream lists
    // earlier, which then creates a virtual node for the deleted root, as a lagging watch would.
    let floor = summary.objects() as u64 - summary.deletions["Background"] as u64 + summary.special["dangling"] as u64;
    let nodes = report.graph_nodes.expect("graph size");
    assert!(
        (floor..=floor + summary.deletions["Background"] as u64).contains(&nodes),
        "{nodes} nodes, {floor} expected at least"
    );
}

#[test]
fn builder_replay_in_segments_should_leave_the_graph_one_segment_leaves() {
    let _alone = alone();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("small.jsonl.zst");
    let summary = write_small(&path);
    let whole = builder_mode(&path, &options(&[1])).expect("replay");
    // About eleven segments: owners and their dependents fall in different ones.
    let segmented = ReplayOptions {
        segment_events: 1000,
        ..options(&[1])
    };
    let report = builder_mode(&path, &segmented).expect("replay in segments");
    assert!(summary.events_by_type.values().sum::<usize>() > 10 * 1000);
    assert_eq!(report.events, whole.events);
    assert_eq!(report.objects, whole.objects);
    assert_eq!(report.graph_nodes, whole.graph_nodes);
    assert_eq!(report.virtual_nodes, whole.virtual_nodes);
    assert!(report.events_per_sec.is_some_and(|r| r > 0.0));
}

#[test]
fn a_run_should_time_each_event_only_when_asked() {
    let _alone = alone();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("small.jsonl");
    write_small(&path);
    let run = |timing| builder::Replay::of(&path, true).run(2, timing, false).expect("replay");
    let timed = run(builder::Timing::EachEvent);
    assert_eq!(timed.latency.len(), timed.events, "one latency a event");
    let by_type: u64 = timed.latency_by_type.iter().map(|h| h.len()).sum();
    assert_eq!(by_type, timed.events);
    let untimed = run(builder::Timing::Segments);
    assert_eq!(untimed.events, timed.events);
    assert_eq!(untimed.latency.len(), 0, "no clock around each event");
    assert!(untimed.elapsed > std::time::Duration::ZERO && untimed.cpu > std::time::Duration::ZERO);
}
