//! Ruby's kubeclient (Debian's `ruby-kubeclient`) against `kube-gc sim-apiserver`: runs every
//! `tests/ruby/*_test.rb` with minitest, in one Ruby process, against one server this test starts
//! on a loopback port and stops at the end.
//!
//! A test file finds the server in two variables: `KUBE_GC_API`, its base URL (plain HTTP, no
//! credentials; `Kubeclient::Client.new("#{ENV['KUBE_GC_API']}/api", 'v1')`), and
//! `KUBE_GC_KUBECONFIG`, the kubeconfig it wrote. The server is shared, so each test works in a
//! namespace or under names of its own.
//!
//! Without `ruby` or kubeclient the test prints a note and passes, except in CI (`CI` set), which
//! installs them and where their absence is a failure, as for kubectl.

use crate::support::process::{run_bounded, Child};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long the whole suite may take; each file runs in a few seconds on an idle machine.
const SUITE_TIMEOUT: Duration = Duration::from_secs(600);

/// What loads the test files given as arguments; minitest runs them when Ruby exits, and would
/// read the file names as its own options if they stayed in `ARGV`.
const LOADER: &str = "files = ARGV.dup; ARGV.clear; files.each { |f| require File.expand_path(f) }";

fn suite_dir() -> PathBuf {
    crate::support::repository().join("tests/ruby")
}

/// Whether `ruby` runs and loads kubeclient and minitest; a missing one fails in CI and skips
/// elsewhere.
fn ruby_available() -> bool {
    let probe = Command::new("ruby")
        .args(["-e", "require 'kubeclient'; require 'minitest'"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let found = match probe {
        Ok(status) => status.success(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => panic!("ruby could not be run: {e}"),
    };
    if !found {
        let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
        assert!(
            !in_ci,
            "ruby with kubeclient is missing, and CI is set: .ci/run installs it (apt-get install -y ruby-kubeclient)"
        );
        eprintln!("note: no ruby with kubeclient (apt-get install ruby-kubeclient); skipping the Ruby client suite");
    }
    found
}

/// Every `*_test.rb` of the suite, in name order.
fn test_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(suite_dir())
        .expect("tests/ruby")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.to_str().is_some_and(|p| p.ends_with("_test.rb")))
        .collect();
    files.sort();
    files
}

#[test]
fn ruby_client_suite_should_pass_against_the_simulated_api_server() {
    let files = test_files();
    assert!(!files.is_empty(), "no *_test.rb in {}", suite_dir().display());
    if !ruby_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = dir.path().join("kubeconfig");
    let kubeconfig_arg = kubeconfig.to_str().expect("a UTF-8 path");
    let args = [
        "sim-apiserver",
        "--listen",
        "127.0.0.1:0",
        "--write-kubeconfig",
        kubeconfig_arg,
    ];
    let mut server = Child::kube_gc(&args, &dir.path().join("sim-apiserver.log"));
    let addr = Child::address_in(&server.wait_for_line("serving"));

    let mut command = Command::new("ruby");
    command
        .arg("-I")
        .arg(suite_dir())
        .args(["-e", LOADER])
        .args(&files)
        .env("KUBE_GC_API", format!("http://{addr}"))
        .env("KUBE_GC_KUBECONFIG", &kubeconfig)
        .env_remove("KUBECONFIG")
        .env("HOME", dir.path());
    let run = run_bounded(&mut command, SUITE_TIMEOUT);
    assert!(
        run.status.success(),
        "ruby tests/ruby/*_test.rb failed ({}):\n{}{}\nserver log:\n{}",
        run.status,
        run.stdout,
        run.stderr,
        server.log()
    );
    assert!(
        run.stdout.contains(" 0 failures, 0 errors"),
        "minitest reported no clean run:\n{}",
        run.stdout
    );
    server.stop();
}
