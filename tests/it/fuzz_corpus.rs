//! The fuzz targets on stable, in the ordinary test command, without nightly or libFuzzer:
//!
//! - every seed and every regression input of `tests/fuzz` (docs/testing.md, "Fuzzing") goes through its
//!   target's function, so a regression is caught at once;
//! - a bounded mutation run: proptest takes a committed input of each target and edits up to
//!   eight bytes of it (set, insert, remove, or copy a run elsewhere), `FUZZ_CASES` cases per
//!   target (256 by default). Blind where libFuzzer follows coverage, but it runs wherever the
//!   tests run, and a failure shrinks to a small edit of a known input, saved under
//!   `tests/proptest-regressions/`.
//!
//! loadgen's stream reader, which the `watch_events` target also drives, replays the same inputs
//! in loadgen's own tests.

use proptest::prelude::*;
use proptest::sample::Index;
use std::path::PathBuf;

/// The committed inputs of `target`: its seeds, then its regressions.
fn inputs(target: &str) -> Vec<PathBuf> {
    let fuzz = crate::support::repository().join("tests/fuzz");
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

fn read(file: &PathBuf) -> Vec<u8> {
    std::fs::read(file).expect("a readable input")
}

fn replay(target: &str, run: fn(&[u8])) {
    for file in inputs(target) {
        let data = read(&file);
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
    replay("sim_request", kube_gc_sim::fuzzing::sim_request);
}

#[test]
fn the_sim_servers_patches_should_keep_their_invariants_on_every_committed_input() {
    replay("sim_patch", kube_gc_sim::fuzzing::sim_patch);
}

/// One edit of an input, at a place scaled to its length.
#[derive(Clone, Debug)]
enum Edit {
    Set(Index, u8),
    Insert(Index, u8),
    Remove(Index),
    /// Copies up to 16 bytes from the first place over the second.
    Copy(Index, Index, u8),
}

fn edit() -> impl Strategy<Value = Edit> {
    // Bytes a JSON or YAML reader treats apart, as often as any other byte.
    let byte = prop_oneof![any::<u8>(), proptest::sample::select(b"{}[]\":,\\/-.0 \n\t".to_vec())];
    prop_oneof![
        (any::<Index>(), byte.clone()).prop_map(|(at, b)| Edit::Set(at, b)),
        (any::<Index>(), byte).prop_map(|(at, b)| Edit::Insert(at, b)),
        any::<Index>().prop_map(Edit::Remove),
        (any::<Index>(), any::<Index>(), 1..16u8).prop_map(|(from, to, n)| Edit::Copy(from, to, n)),
    ]
}

fn apply(mut data: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let len = data.len();
        match e {
            Edit::Set(at, b) if len > 0 => data[at.index(len)] = *b,
            Edit::Insert(at, b) => data.insert(at.index(len + 1), *b),
            Edit::Remove(at) if len > 0 => {
                data.remove(at.index(len));
            }
            Edit::Copy(from, to, n) if len > 0 => {
                let from = from.index(len);
                let run = data[from..(from + usize::from(*n)).min(len)].to_vec();
                let to = to.index(len);
                let end = (to + run.len()).min(len);
                data[to..end].copy_from_slice(&run[..end - to]);
            }
            _ => {}
        }
    }
    data
}

/// A committed input of `target` with up to eight edits.
fn mutated(target: &str) -> impl Strategy<Value = Vec<u8>> {
    let inputs: Vec<Vec<u8>> = inputs(target).iter().map(read).collect();
    (
        proptest::sample::select(inputs),
        proptest::collection::vec(edit(), 0..=8),
    )
        .prop_map(|(input, edits)| apply(input, &edits))
}

fn config() -> ProptestConfig {
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_watch_decoder_should_keep_its_invariants_on_edited_inputs(data in mutated("watch_events")) {
        kube_gc::fuzzing::watch_events(&data);
    }

    #[test]
    fn graph_events_should_keep_their_invariants_on_edited_inputs(data in mutated("graph_event")) {
        kube_gc::fuzzing::graph_event(&data);
    }

    #[test]
    fn journal_lines_should_keep_their_invariants_on_edited_inputs(data in mutated("journal_lines")) {
        kube_gc::fuzzing::journal_lines(&data);
    }

    #[test]
    fn the_sim_servers_request_parsing_should_keep_its_invariants_on_edited_inputs(data in mutated("sim_request")) {
        kube_gc_sim::fuzzing::sim_request(&data);
    }

    #[test]
    fn the_sim_servers_patches_should_keep_their_invariants_on_edited_inputs(data in mutated("sim_patch")) {
        kube_gc_sim::fuzzing::sim_patch(&data);
    }
}
