//! The `loadgen` command as scripts use it: exit codes, error messages and the JSON report.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn loadgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .output()
        .expect("run loadgen")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
        .display()
        .to_string()
}

fn report(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("a report")).expect("JSON")
}

const POD: &str = r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"n","uid":"0b8f3d6e-2f4a-4c1e-9a7b-1c2d3e4f5a6b"}}}"#;

fn stream_with_a_truncated_second_line(dir: &Path) -> PathBuf {
    let path = dir.join("bad.jsonl");
    let second = POD.replace("0b8f3d6e", "1b8f3d6e");
    std::fs::write(
        &path,
        format!("{POD}\n{}\n{}\n", &POD[..40], second.replace("\"p\"", "\"q\"")),
    )
    .expect("write");
    path
}

#[test]
fn a_malformed_value_should_stop_the_replay_with_its_file_line_and_reason() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = stream_with_a_truncated_second_line(dir.path());
    let out = loadgen(&["replay", &path.display().to_string(), "--mode", "builder", "--quiet"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{}:2: EOF while parsing", path.display())),
        "{err}"
    );
}

#[test]
fn skip_bad_should_skip_a_malformed_value_and_count_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = stream_with_a_truncated_second_line(dir.path());
    let json = dir.path().join("report.json");
    let out = loadgen(&[
        "replay",
        &path.display().to_string(),
        "--mode",
        "builder",
        "--partitions",
        "1",
        "--skip-bad",
        "--quiet",
        "--report",
        &json.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r = report(&json);
    assert_eq!((r["skipped_bad"].as_u64(), r["events"].as_u64()), (Some(1), Some(2)));
    assert_eq!(r["graph_nodes"].as_u64(), Some(2));
}

#[test]
fn bad_flags_and_missing_files_should_fail_with_a_message() {
    let out = loadgen(&["generate", "--preset", "huge", "-o", "/dev/null"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("invalid value 'huge' for '--preset <PRESET>'"));
    let out = loadgen(&["replay", "no/such/stream.jsonl", "--mode", "full", "--quiet"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("loadgen: error: no/such/stream.jsonl: No such file or directory"));
    let out = loadgen(&[
        "replay",
        &data("independent-small.jsonl"),
        "--mode",
        "builder",
        "--require-outcome-ok",
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--require-outcome-ok applies to --mode full"));
}

#[test]
fn generate_should_write_the_same_bytes_for_the_same_seed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let files: Vec<PathBuf> = ["a.jsonl", "b.jsonl"].iter().map(|n| dir.path().join(n)).collect();
    for f in &files {
        let out = loadgen(&[
            "generate",
            "--preset",
            "small",
            "--seed",
            "3",
            "--quiet",
            "-o",
            &f.display().to_string(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let bytes: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).expect("read")).collect();
    assert!(bytes[0].len() > 1_000_000);
    assert_eq!(bytes[0], bytes[1]);
}

#[test]
fn the_full_report_should_have_every_field_and_null_where_a_mode_does_not_apply() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("full.json");
    let out = loadgen(&[
        "replay",
        &data("independent-small.kubectl.json"),
        "--mode",
        "full",
        "--require-outcome-ok",
        "--quiet",
        "--report",
        &json.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r = report(&json);
    assert_eq!(r["mode"], "full");
    assert_eq!(r["outcome_ok"], true);
    for key in [
        "events_per_sec",
        "latency_ns",
        "rss_bytes_per_object",
        "scaling",
        "ratio",
    ] {
        assert!(r[key].is_null(), "{key} is for builder mode");
    }
    for key in [
        "events",
        "objects",
        "elapsed_s",
        "objects_collected",
        "collected_per_sec",
    ] {
        assert!(r[key].is_number(), "{key}");
    }
    for verb in ["get", "patch", "delete", "list", "watch"] {
        assert!(r["api_calls"][verb].is_u64(), "api_calls.{verb}");
    }
    assert!(r
        .as_object()
        .expect("an object")
        .contains_key("api_calls_per_collected_object"));
}
