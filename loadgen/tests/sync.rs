//! `loadgen sync` on the small preset: both processes started, the collector found ready, the
//! figures printed, and both processes gone afterwards.

use std::path::{Path, PathBuf};

mod support;
use support::loadgen;

/// The kube-gc that cargo built beside loadgen (`cargo test --workspace` builds both).
fn kube_gc() -> PathBuf {
    let loadgen = Path::new(env!("CARGO_BIN_EXE_loadgen"));
    let path = loadgen.with_file_name("kube-gc");
    assert!(
        path.is_file(),
        "{} is missing: run the workspace's tests (`cargo test --workspace`) or build kube-gc first",
        path.display()
    );
    path
}

#[test]
fn sync_should_time_the_collector_to_ready_on_the_small_preset_and_stop_both_processes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let kube_gc = kube_gc();
    let out = loadgen(&[
        "sync",
        "--preset",
        "small",
        "--runs",
        "2",
        "--timeout",
        "60s",
        "--kube-gc",
        &kube_gc.display().to_string(),
        "--dir",
        &dir.path().display().to_string(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for run in ["run 1: ", "run 2: "] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(run))
            .unwrap_or_else(|| panic!("no {run:?} in {stdout}"));
        assert!(line.contains(" 10010 objects; ready after "), "{line}");
    }
    assert!(stdout.contains("2 runs, median (range):"), "{stdout}");
    assert!(stdout.contains("kube-gc peak resident (VmHWM): "), "{stdout}");
    // Both logs of each run are there, and the collector's says it served its readiness.
    let log = std::fs::read_to_string(dir.path().join("run-0.log")).expect("the collector's log");
    assert!(log.contains("without authentication on http://127.0.0.1:"), "{log}");
    assert!(dir.path().join("sim-apiserver-1.log").is_file());
}

#[test]
fn sync_should_name_a_missing_kube_gc() {
    let out = loadgen(&["sync", "--preset", "small", "--kube-gc", "/nonexistent/kube-gc"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/kube-gc is not a file"), "{err}");
}
