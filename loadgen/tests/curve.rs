//! `loadgen curve` and `loadgen perf-gate` as a user runs them: the curve's JSON report and SVG on
//! two tiny sizes, streams reused, and clear errors for bad flags.

use std::path::Path;
use std::process::Output;

mod support;
use support::{loadgen, stderr};

/// Objects the curve's stream of about `size` objects creates (seed 7, the default).
fn objects_of(size: usize) -> u64 {
    let topology = loadgen::generate::Topology::sized(size);
    let mut events = Vec::new();
    let summary =
        loadgen::generate::generate(&topology, 7, &mut events, &indicatif::ProgressBar::hidden()).expect("generate");
    summary.objects() as u64
}

fn curve_of_two_tiny_sizes(dir: &Path, runs: &str) -> Output {
    let (streams, report, svg) = (dir.join("streams"), dir.join("curve.json"), dir.join("curve.svg"));
    loadgen(&[
        "curve",
        "--objects",
        "3000,1500",
        "--runs",
        runs,
        "--streams-dir",
        &streams.display().to_string(),
        "--report",
        &report.display().to_string(),
        "--svg",
        &svg.display().to_string(),
        "--quiet",
    ])
}

#[test]
fn curve_should_report_one_row_per_size_and_partition_count_smallest_first() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = curve_of_two_tiny_sizes(dir.path(), "3");
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("curve.json")).expect("a report")).expect("JSON");
    let rows = report["rows"].as_array().expect("rows");
    let keys: Vec<(&str, u64)> = rows
        .iter()
        .map(|r| (r["size"].as_str().expect("size"), r["partitions"].as_u64().expect("P")))
        .collect();
    assert_eq!(
        keys,
        [
            ("1500-objects", 1),
            ("1500-objects", 2),
            ("3000-objects", 1),
            ("3000-objects", 2)
        ]
    );
    for (row, size) in rows.iter().zip([1500, 1500, 3000, 3000]) {
        let objects = objects_of(size);
        assert_eq!(row["objects"].as_u64(), Some(objects), "{row}");
        assert!(
            row["events"].as_u64().expect("events") > objects,
            "churn and deletions follow: {row}"
        );
        let rate = row["events_per_sec"].as_f64().expect("events/s");
        let range = &row["events_per_sec_range"];
        let (low, high) = (range[0].as_f64().expect("low"), range[1].as_f64().expect("high"));
        assert!(low > 0.0 && low <= rate && rate <= high, "{row}");
        let l = &row["latency_ns"];
        assert!(
            l["p50"].as_u64() <= l["p99"].as_u64() && l["p99"].as_u64() <= l["p999"].as_u64(),
            "{row}"
        );
    }
    let sizes = report["sizes"].as_array().expect("sizes");
    assert_eq!(sizes.len(), 2);
    assert!(
        sizes.iter().all(|s| s["ratio"].as_f64().is_some_and(|r| r > 0.0)),
        "{sizes:?}"
    );
    let change = &report["change"];
    assert_eq!(
        (change["from"].as_str(), change["to"].as_str()),
        (Some("1500-objects"), Some("3000-objects"))
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("1500-objects → 3000-objects: ns/event"), "{stdout}");
}

#[test]
fn curve_should_plot_three_panels_with_a_line_per_partition_count() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = curve_of_two_tiny_sizes(dir.path(), "1");
    assert!(out.status.success(), "{}", stderr(&out));
    let svg = std::fs::read_to_string(dir.path().join("curve.svg")).expect("an SVG");
    let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    for expected in [
        "events/s (millions)",
        "processGraphChanges latency (µs)",
        "resident bytes per object",
        "P = 1",
        "P = 2",
        "p99, P = 2",
        "p99.9, P = 1",
    ] {
        assert!(texts.contains(&expected), "{expected:?} missing from {texts:?}");
    }
    // Each series is one polyline through its two sizes: two per partition count in the
    // latency panel, one per count in the events/s panel, one for memory.
    let lines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .filter(|n| n.attribute("points").is_some_and(|p| p.split_whitespace().count() == 2))
        .count();
    assert!(lines >= 7, "{lines} two-point series");
}

#[test]
fn curve_should_reuse_a_stream_it_already_generated() {
    let dir = tempfile::tempdir().expect("temp dir");
    assert!(curve_of_two_tiny_sizes(dir.path(), "1").status.success());
    let stream = dir.path().join("streams/1500-objects-seed7.jsonl.zst");
    let written = std::fs::metadata(&stream)
        .expect("the stream")
        .modified()
        .expect("mtime");
    // The second curve finds the stream and reads it as it is: not written again.
    assert!(curve_of_two_tiny_sizes(dir.path(), "1").status.success());
    assert_eq!(
        std::fs::metadata(&stream)
            .expect("the stream")
            .modified()
            .expect("mtime"),
        written
    );
}

#[test]
fn curve_help_should_show_the_object_counts_flag_that_the_scale_curve_to_50m_uses() {
    let out = loadgen(&["curve", "--help"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--objects <OBJECTS>"));
}

#[test]
fn curve_should_refuse_bad_flags_with_a_message_and_no_panic() {
    let dir = tempfile::tempdir().expect("temp dir");
    let streams = dir.path().display().to_string();
    let cases: [(&[&str], &str); 6] = [
        (&["--presets", "huge"], "invalid value 'huge' for '--presets"),
        (&["--objects", "0"], "invalid value '0' for '--objects"),
        (
            &["--objects", "1000", "--presets", "small"],
            "'--objects <OBJECTS>' cannot be used with '--presets <PRESETS>'",
        ),
        (&["--partitions", "0"], "invalid value '0' for '--partitions"),
        (&["--runs", "0"], "invalid value '0' for '--runs"),
        (
            &["--objects", "1000", "--report", "/nonexistent-dir/curve.json"],
            "cannot write /nonexistent-dir/curve.json",
        ),
    ];
    for (flags, message) in cases {
        let mut args = vec!["curve", "--quiet", "--streams-dir", &streams];
        args.extend_from_slice(flags);
        let out = loadgen(&args);
        let err = stderr(&out);
        assert_eq!(
            out.status.code(),
            Some(if flags.contains(&"--report") { 1 } else { 2 }),
            "{flags:?}: {err}"
        );
        assert!(err.contains(message), "{flags:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
