//! Programs run as separate processes: `kube-gc sim-apiserver`, `kube-gc run` and kubectl, each
//! bounded in time and killed when its guard drops, so a failing test leaves nothing running.
//!
//! A child's stderr goes to a file, so that a test can wait for a line (the address a server
//! bound, a replica's identity) without a pipe that could fill up and stall the child.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long one kubectl call may take before it is killed and the test fails. Every call answers
/// in well under a second; the margin is for a loaded CI machine.
pub const KUBECTL_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a started program may take to print what a test waits for.
pub const STARTUP: Duration = Duration::from_secs(60);

/// A running program, killed on drop.
pub struct Child {
    child: std::process::Child,
    /// Where its stderr goes.
    log: PathBuf,
    what: String,
}

impl Child {
    /// Starts `kube-gc` with `args`, its stderr written to `log`.
    pub fn kube_gc(args: &[&str], log: &Path) -> Child {
        Child::spawn(Command::new(env!("CARGO_BIN_EXE_kube-gc")).args(args), log)
    }

    /// Starts `command`, its stderr written to `log`, logging warnings and errors, or what
    /// `KUBE_GC_TEST_LOG` asks for (a `RUST_LOG` filter, such as `warn,kube_gc::monitor=debug`).
    pub fn spawn(command: &mut Command, log: &Path) -> Child {
        let file = std::fs::File::create(log).expect("create the log file");
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .env(
                "RUST_LOG",
                std::env::var("KUBE_GC_TEST_LOG").as_deref().unwrap_or("warn"),
            )
            .spawn()
            .expect("start the program");
        Child {
            child,
            log: log.to_path_buf(),
            what: format!("{command:?}"),
        }
    }

    /// Its stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until its stderr has a whole line containing `needle`, and returns that line. A
    /// line still being written is not read: stderr is unbuffered, so a program's line may reach
    /// the file in several writes.
    pub fn wait_for_line(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + STARTUP;
        loop {
            let log = self.log();
            let whole = log.rsplit_once('\n').map_or("", |(whole, _)| whole);
            if let Some(line) = whole.lines().find(|l| l.contains(needle)) {
                return line.to_string();
            }
            if let Some(status) = self.child.try_wait().expect("poll the program") {
                panic!(
                    "{} ended ({status}) before printing {needle:?}:\n{}",
                    self.what,
                    self.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{} never printed {needle:?}:\n{}",
                self.what,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The `http://ADDRESS` or `https://ADDRESS` a line ending in one names.
    pub fn address_in(line: &str) -> std::net::SocketAddr {
        let url = line.rsplit("://").next().expect("an http:// or https:// address");
        url.trim()
            .parse()
            .unwrap_or_else(|e| panic!("no address in {line:?}: {e}"))
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (a `libc::SIG*`).
    pub fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid");
        // SAFETY: kill(2) only sends a signal; the pid is our own child's, which has not been
        // reaped while `self.child` is alive, so it cannot name another process.
        let sent = unsafe { libc::kill(pid, signal) };
        assert_eq!(sent, 0, "signal {signal} to {}", self.what);
    }

    /// Waits for the program to end, at most `within`.
    pub fn wait(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("poll the program") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{} still running after {within:?}:\n{}",
                self.what,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then waits for a clean exit.
    pub fn stop(&mut self) {
        self.signal(libc::SIGTERM);
        let status = self.wait(Duration::from_secs(20));
        assert!(status.success(), "{} stopped with {status}:\n{}", self.what, self.log());
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What a bounded run printed.
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `command` to its end, killing it after `timeout`.
pub fn run_bounded(command: &mut Command, timeout: Duration) -> Run {
    let what = format!("{command:?}");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {what}: {e}"));
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the program") {
            break status;
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still running after {timeout:?}: likely a request the server never answered");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Run {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

/// Reads `pipe` to its end on a thread of its own, so that a full pipe never stalls the program.
fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            // Output that is not UTF-8 reads as empty, and the assertion on it says so.
            let _ = pipe.read_to_string(&mut text);
        }
        text
    })
}

/// Whether `kubectl` runs; a missing one fails the test in CI and skips it elsewhere.
pub fn kubectl_available() -> bool {
    let probe = Command::new("kubectl")
        .args(["version", "--client"])
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match probe {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
            assert!(
                !in_ci,
                "kubectl is not on PATH, and CI is set: .ci/run installs it (apt-get install -y kubernetes-client)"
            );
            eprintln!("note: kubectl is not on PATH; skipping the kubectl steps");
            false
        }
        Err(e) => panic!("kubectl could not be run: {e}"),
    }
}

/// A kubectl command against `kubeconfig` only: `KUBECONFIG` removed, and `HOME` and the discovery
/// cache under `dir`, so neither the user's clusters nor their cache are ever involved.
pub fn kubectl_command(kubeconfig: &Path, dir: &Path, args: &[&str]) -> Command {
    kubectl_command_of(Path::new("kubectl"), kubeconfig, dir, args)
}

/// As [`kubectl_command`], running the kubectl at `binary` (a path, or a name looked up on `PATH`).
pub fn kubectl_command_of(binary: &Path, kubeconfig: &Path, dir: &Path, args: &[&str]) -> Command {
    let home = dir.join("home");
    let mut command = Command::new(binary);
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(home.join("cache"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", &home);
    command
}

/// Runs kubectl against `kubeconfig` (see [`kubectl_command`]), which must succeed; its stdout.
pub fn kubectl(kubeconfig: &Path, dir: &Path, args: &[&str]) -> String {
    let run = run_bounded(&mut kubectl_command(kubeconfig, dir, args), KUBECTL_TIMEOUT);
    assert!(
        run.status.success(),
        "kubectl {args:?} failed ({}):\n{}{}",
        run.status,
        run.stdout,
        run.stderr
    );
    run.stdout
}

/// The flags of a `kube-gc run` replica that takes part in leader election, retrying every
/// `retry_period`. The lease is short so that a standby takes over within seconds of the
/// leader's loss, and a test waiting for the handover stays well inside its bounds.
pub fn leader_elect_flags(retry_period: &'static str) -> [&'static str; 7] {
    [
        "--leader-elect",
        "--leader-elect-lease-duration",
        "4s",
        "--leader-elect-renew-deadline",
        "3s",
        "--leader-elect-retry-period",
        retry_period,
    ]
}
