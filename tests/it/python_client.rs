//! The official Kubernetes Python client (`kubernetes` from PyPI) against `kube-gc sim-apiserver`,
//! with `kube-gc run` collecting: runs the pytest suite in `tests/python`, which starts both
//! processes itself from the binary this test names in `KUBE_GC_BIN`.
//!
//! The Python is `KUBE_GC_PYTHON` when set (it must then have `kubernetes` and `pytest`), else the
//! virtualenv `.ci/run` creates at `target/python-venv`. Without one the test prints a note and
//! passes, except in CI (`CI` set), where a missing Python client is a failure, as for kubectl.

use crate::support::process::run_bounded;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long the whole suite may take; it runs in well under a minute on an idle machine.
const SUITE_TIMEOUT: Duration = Duration::from_secs(600);

/// How long the import probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether `python` (a path, or a name looked up on `PATH`) imports the client and pytest.
fn has_client(python: &Path) -> bool {
    if python.components().count() > 1 && !python.exists() {
        return false;
    }
    let mut probe = Command::new(python);
    probe.args(["-c", "import kubernetes, pytest"]);
    run_bounded(&mut probe, PROBE_TIMEOUT).status.success()
}

/// The Python to run the suite with, or `None` (after a note) when there is none outside CI.
fn python() -> Option<PathBuf> {
    if let Some(chosen) = std::env::var_os("KUBE_GC_PYTHON").filter(|v| !v.is_empty()) {
        let chosen = PathBuf::from(chosen);
        assert!(
            has_client(&chosen),
            "KUBE_GC_PYTHON={} cannot import kubernetes and pytest",
            chosen.display()
        );
        return Some(chosen);
    }
    let venv = crate::support::repository().join("target/python-venv/bin/python");
    if has_client(&venv) {
        return Some(venv);
    }
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    assert!(
        !in_ci,
        "no Python with the kubernetes client at {} and CI is set: .ci/run creates it \
         (python3 -m venv target/python-venv && target/python-venv/bin/pip install kubernetes pytest)",
        venv.display()
    );
    eprintln!(
        "note: no Python with the kubernetes client ({} or KUBE_GC_PYTHON); skipping the Python client suite",
        venv.display()
    );
    None
}

#[test]
fn python_client_suite_should_pass_against_the_simulated_api_server_and_collector() {
    let Some(python) = python() else {
        return;
    };
    let mut command = Command::new(&python);
    command
        .args(["-m", "pytest", "tests/python", "-q", "-p", "no:cacheprovider"])
        .current_dir(crate::support::repository())
        .env("KUBE_GC_BIN", env!("CARGO_BIN_EXE_kube-gc"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("KUBECONFIG");
    let run = run_bounded(&mut command, SUITE_TIMEOUT);
    assert!(
        run.status.success(),
        "{} -m pytest tests/python failed ({}):\n{}{}",
        python.display(),
        run.status,
        run.stdout,
        run.stderr
    );
    let summary = run.stdout.lines().rev().find(|l| l.contains(" passed")).unwrap_or("");
    eprintln!("python client suite: {summary}");
}
