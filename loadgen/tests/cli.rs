//! The `loadgen` command as scripts use it: exit codes, error messages and the JSON report.

use std::path::{Path, PathBuf};

mod support;
use support::{loadgen, stderr};

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

/// Runs loadgen with `args` and a `--report` file, which must succeed; its stdout and report.
fn run_reported(args: &[&str]) -> (String, serde_json::Value) {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("report.json");
    let json_arg = json.display().to_string();
    let out = loadgen(&[args, &["--report", &json_arg]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    (String::from_utf8_lossy(&out.stdout).into_owned(), report(&json))
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
    let (_, r) = run_reported(&[
        "replay",
        &path.display().to_string(),
        "--mode",
        "builder",
        "--partitions",
        "1",
        "--skip-bad",
        "--quiet",
    ]);
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
    for flags in [&["--verify-with-get"][..], &["--api-latency", "2ms"]] {
        let stream = data("independent-small.jsonl");
        let args: Vec<&str> = ["replay", &stream, "--mode", "builder"]
            .into_iter()
            .chain(flags.iter().copied())
            .collect();
        let out = loadgen(&args);
        assert!(!out.status.success());
        assert!(stderr(&out).contains(&format!("{} applies to --mode full", flags[0])));
    }
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
    let (_, r) = run_reported(&[
        "replay",
        &data("independent-small.kubectl.json"),
        "--mode",
        "full",
        "--require-outcome-ok",
        "--quiet",
    ]);
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

#[test]
fn record_should_fail_in_one_line_when_the_kubeconfig_is_missing_or_bad() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = dir.path().join("recorded.jsonl");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "clusters: [unclosed\n").expect("write");
    let cases = [
        ("no/such/kubeconfig".to_string(), "No such file or directory"),
        (bad.display().to_string(), "failed to parse kubeconfig YAML"),
    ];
    for (kubeconfig, reason) in cases {
        let out = loadgen(&[
            "record",
            "--kubeconfig",
            &kubeconfig,
            "-o",
            &output.display().to_string(),
        ]);
        assert!(!out.status.success());
        let err = stderr(&out);
        let expected = format!("loadgen: error: reading the kubeconfig {kubeconfig}: ");
        assert!(err.starts_with(&expected) && err.contains(reason), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert!(!output.exists(), "no stream is created before the cluster answers");
}

#[test]
fn record_should_fail_in_one_line_when_the_server_is_unreachable() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A port that was free a moment ago: nothing answers there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_for(&format!("http://127.0.0.1:{port}"))).expect("write");
    let output = dir.path().join("recorded.jsonl.zst");
    let out = loadgen(&[
        "record",
        "--kubeconfig",
        &kubeconfig.display().to_string(),
        "-o",
        &output.display().to_string(),
        "--duration",
        "5s",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.starts_with("loadgen: error: discovering the cluster's resources: "),
        "{err}"
    );
    assert!(err.contains("Connection refused"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!output.exists());
}

#[test]
fn record_should_reject_a_duration_without_unit_and_an_unreachable_https_server() {
    let out = loadgen(&["record", "--kubeconfig", "k", "-o", "o.jsonl", "--duration", "30"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("invalid value '30' for '--duration <DURATION>': `30` has no unit"));

    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_for("https://127.0.0.1:6443")).expect("write");
    let out = loadgen(&[
        "record",
        "--kubeconfig",
        &kubeconfig.display().to_string(),
        "-o",
        "o.jsonl",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("discovering the cluster's resources"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn record_should_refuse_an_unknown_feature_gate_or_a_bad_value_before_doing_anything() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = dir.path().join("recorded.jsonl");
    let cases = [
        (
            "WatchList=false",
            "unrecognized feature gate: WatchList (known: WatchListClient)",
        ),
        (
            "WatchListClient=no",
            "invalid value of WatchListClient: no, err: not a boolean",
        ),
        ("WatchListClient", "missing bool value for WatchListClient"),
    ];
    for (gates, reason) in cases {
        let out = loadgen(&[
            "record",
            "--kubeconfig",
            "no/such/kubeconfig",
            "-o",
            &output.display().to_string(),
            "--feature-gates",
            gates,
        ]);
        assert_eq!(out.status.code(), Some(2), "a usage error");
        let err = stderr(&out);
        let expected = format!("invalid value '{gates}' for '--feature-gates <FEATURE_GATES>': {reason}");
        assert!(err.contains(&expected), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(!output.exists());
}

/// A kubeconfig whose current context points at `server`, without credentials.
fn kubeconfig_for(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters: [{{name: c, cluster: {{server: \"{server}\"}}}}]\n\
         contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n\
         users: [{{name: u, user: {{}}}}]\n"
    )
}

#[test]
fn memory_probe_should_print_and_report_a_row_a_size_and_refuse_a_size_beyond_memory() {
    let (stdout, probes) = run_reported(&["memory-probe", "--mib", "1,3", "--loads", "20000"]);
    assert!(stdout.contains("1 MiB") && stdout.contains("2 MiB"), "{stdout}");
    let bytes: Vec<u64> = probes
        .as_array()
        .expect("a list")
        .iter()
        .map(|p| p["bytes"].as_u64().expect("bytes"))
        .collect();
    assert_eq!(bytes, [1 << 20, 2 << 20]);

    let out = loadgen(&["memory-probe", "--mib", "1000000000"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("of memory available"), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "refused before any row");
}
