//! The fuzz targets' committed inputs, replayed on stable: every seed and every regression input
//! of `tests/fuzz` (README, "Fuzzing") goes through its target's function, so a regression is
//! caught by the ordinary test command, without nightly or libFuzzer. loadgen's stream reader,
//! which the `watch_events` target also drives, replays the same inputs in loadgen's own tests.

use std::path::{Path, PathBuf};

/// The committed inputs of `target`: its seeds, then its regressions.
fn inputs(target: &str) -> Vec<PathBuf> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz");
    let mut files: Vec<PathBuf> = ["seeds", "regressions"]
        .iter()
        .filter_map(|kind| std::fs::read_dir(fuzz.join(kind).join(target)).ok())
        .flatten()
        .map(|entry| entry.expect("a readable directory").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{target} has no seeds in {}", fuzz.display());
    files
}

fn replay(target: &str, run: fn(&[u8])) {
    for file in inputs(target) {
        let data = std::fs::read(&file).expect("a readable input");
        let outcome = std::panic::catch_unwind(|| run(&data));
        assert!(outcome.is_ok(), "{target} fails on {}", file.display());
    }
}

#[test]
fn the_watch_decoder_should_keep_its_invariants_on_every_committed_input() {
    replay("watch_events", kube_gc::fuzzing::watch_events);
}

#[test]
fn graph_events_should_keep_their_invariants_on_every_committed_input() {
    replay("graph_event", kube_gc::fuzzing::graph_event);
}

#[test]
fn journal_lines_should_keep_their_invariants_on_every_committed_input() {
    replay("journal_lines", kube_gc::fuzzing::journal_lines);
}

#[test]
fn the_sim_servers_request_parsing_should_keep_its_invariants_on_every_committed_input() {
    replay("sim_request", kube_gc::fuzzing::sim_request);
}

#[test]
fn the_sim_servers_patches_should_keep_their_invariants_on_every_committed_input() {
    replay("sim_patch", kube_gc::fuzzing::sim_patch);
}
