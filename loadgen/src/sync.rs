//! `loadgen sync`: how long `kube-gc run` takes to sync a simulated cluster over HTTP, and what it
//! costs in memory and CPU.
//!
//! Each run starts `kube-gc sim-apiserver --preset P` on a loopback port, waits for its "serving"
//! line, then starts `kube-gc run` against it with the serving flags that give it a plain-HTTP
//! `/readyz` on another loopback port, and polls that every [`POLL_EVERY`] until it answers 200.
//! The time to ready runs from the collector's spawn to that answer. Then both processes' counters
//! are read from `/proc` (the collector's peak resident set, `VmHWM`, and CPU seconds since its
//! start; the bytes that crossed the loopback interface meanwhile, from `/proc/net/dev`, which are
//! the simulator's answers and the collector's requests, plus whatever else the machine sent
//! over loopback then; the simulator's peak and resident sets and its CPU seconds during the sync) and both are
//! killed. Every wait is bounded, and both processes are killed whatever happens, so a run never
//! outlives the command.
//!
//! The figures are the ones docs/operating.md's "`kube-gc run`" section reports; they are noisy on a shared
//! machine, hence `--runs N` and the median.

use anyhow::{bail, Context};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How often `/readyz` is asked, and logs are read for the line awaited.
pub const POLL_EVERY: Duration = Duration::from_millis(50);

/// The flags the sync figures of docs/operating.md use: the collector's budgets lifted, so that the measure is of
/// the collector and not of its client-side rate limits (the monitors' default is
/// kube-controller-manager's 20/s).
pub const UNTHROTTLED: [&str; 8] = [
    "--kube-api-qps",
    "100000",
    "--kube-api-burst",
    "1000",
    "--monitor-qps",
    "100000",
    "--monitor-burst",
    "1000",
];

/// The clock ticks per second of `/proc/PID/stat`'s CPU times: Linux's `USER_HZ`, which the kernel
/// exports as 100 whatever its own tick rate.
const USER_HZ: f64 = 100.0;

/// How `loadgen sync` runs.
#[derive(Clone, Debug)]
pub struct SyncOptions {
    /// The `kube-gc` binary.
    pub kube_gc: PathBuf,
    /// The simulator's `--preset` (`small`, `1m`, `5m`).
    pub preset: String,
    /// More flags for `kube-gc run`, after [`UNTHROTTLED`].
    pub run_args: Vec<String>,
    /// Directory for the kubeconfig and the two logs of each run.
    pub dir: PathBuf,
    /// The most the simulator may take to serve, and the collector to be ready.
    pub timeout: Duration,
}

/// What one run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct SyncRun {
    /// Objects the simulator served (its "serving" line).
    pub objects: u64,
    /// From the collector's spawn to its first `/readyz` 200.
    pub ready_after: Duration,
    /// The collector's peak resident bytes (`VmHWM`) when it was ready.
    pub collector_peak: u64,
    /// The collector's CPU seconds, user and system, from its start to ready.
    pub collector_cpu: f64,
    /// Bytes received on the loopback interface from the collector's spawn to ready: the API
    /// server's answers and the collector's requests.
    pub loopback_bytes: u64,
    /// The simulator's CPU seconds from the collector's spawn to ready.
    pub simulator_cpu: f64,
    /// The simulator's resident bytes when the collector was ready.
    pub simulator_resident: u64,
}

/// A child process killed when dropped, whose stderr goes to a file.
pub(crate) struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Process {
    pub(crate) fn spawn(name: &'static str, command: &mut Command, log: PathBuf) -> anyhow::Result<Process> {
        let file = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .with_context(|| format!("starting {name} ({})", command.get_program().to_string_lossy()))?;
        Ok(Process { name, child, log })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Fails, with the log's end, if the process has exited.
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait().context("waiting for a child")? {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(10).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!("{} exited ({status}); its log ends:\n{}", self.name, tail.join("\n"));
        }
        Ok(())
    }

    /// The first whole log line containing `needle`, waiting for it until `deadline`.
    pub(crate) fn wait_for_line(&mut self, needle: &str, deadline: Instant) -> anyhow::Result<String> {
        loop {
            let log = self.log();
            // Only whole lines: a line may reach the file in several writes.
            let whole = &log[..log.rfind('\n').map_or(0, |end| end + 1)];
            if let Some(line) = whole.lines().find(|line| line.contains(needle)) {
                return Ok(line.to_owned());
            }
            self.check_alive()?;
            if Instant::now() >= deadline {
                bail!("{} logged no line with {needle:?} in time", self.name);
            }
            std::thread::sleep(POLL_EVERY);
        }
    }
}

impl Process {
    /// Kills the process (SIGKILL) and reaps it.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // Already exited is fine; the wait reaps it either way.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `runs` measurements one after the other, calling `each` after each.
pub fn measure(
    options: &SyncOptions,
    runs: usize,
    mut each: impl FnMut(usize, &SyncRun),
) -> anyhow::Result<Vec<SyncRun>> {
    std::fs::create_dir_all(&options.dir).with_context(|| format!("creating {}", options.dir.display()))?;
    let mut done = Vec::with_capacity(runs);
    for index in 0..runs {
        let run = measure_once(options, index).with_context(|| format!("run {} of {runs}", index + 1))?;
        each(index, &run);
        done.push(run);
    }
    Ok(done)
}

/// A simulator serving `options.preset`, its kubeconfig and the objects it serves; `tag` names
/// its files in `options.dir`.
pub(crate) fn start_simulator(options: &SyncOptions, tag: &str) -> anyhow::Result<(Process, PathBuf, u64)> {
    let kubeconfig = options.dir.join(format!("kubeconfig-{tag}"));
    // A kubeconfig of an earlier run would name a dead server.
    let _ = std::fs::remove_file(&kubeconfig);
    let mut simulator = Process::spawn(
        "kube-gc sim-apiserver",
        Command::new(&options.kube_gc)
            .args(["sim-apiserver", "--preset", &options.preset, "--listen", "127.0.0.1:0"])
            .arg("--write-kubeconfig")
            .arg(&kubeconfig),
        options.dir.join(format!("sim-apiserver-{tag}.log")),
    )?;
    let serving = simulator.wait_for_line("objects on http://", Instant::now() + options.timeout)?;
    let objects = objects_served(&serving).with_context(|| format!("reading {serving:?}"))?;
    Ok((simulator, kubeconfig, objects))
}

fn measure_once(options: &SyncOptions, index: usize) -> anyhow::Result<SyncRun> {
    let (mut simulator, kubeconfig, objects) = start_simulator(options, &index.to_string())?;
    let simulator_cpu_before = cpu_seconds(simulator.pid())?;
    let loopback_before = loopback_bytes()?;
    let started = Instant::now();
    let (collector, _) = start_collector(options, &kubeconfig, &mut simulator, &index.to_string())?;
    let ready_after = started.elapsed();
    Ok(SyncRun {
        objects,
        ready_after,
        collector_peak: status_bytes(collector.pid(), "VmHWM")?,
        collector_cpu: cpu_seconds(collector.pid())?,
        loopback_bytes: loopback_bytes()? - loopback_before,
        simulator_cpu: cpu_seconds(simulator.pid())? - simulator_cpu_before,
        simulator_resident: status_bytes(simulator.pid(), "VmRSS")?,
    })
}

/// Starts `kube-gc run` against the simulator of `kubeconfig`, unthrottled, with a plain-HTTP
/// `/readyz` and `/metrics` on a loopback port, and waits until it is ready; the process and that
/// port's address. `tag` names its log in `options.dir`.
pub(crate) fn start_collector(
    options: &SyncOptions,
    kubeconfig: &Path,
    simulator: &mut Process,
    tag: &str,
) -> anyhow::Result<(Process, SocketAddr)> {
    let started = Instant::now();
    let mut collector = Process::spawn(
        "kube-gc run",
        Command::new(&options.kube_gc)
            .arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--insecure-bind-address", "127.0.0.1:0", "--secure-port", "0"])
            .args(UNTHROTTLED)
            .args(&options.run_args),
        options.dir.join(format!("run-{tag}.log")),
    )?;
    let deadline = started + options.timeout;
    let line = collector.wait_for_line("without authentication on http://", deadline)?;
    let readyz = address_in(&line).with_context(|| format!("reading the address in {line:?}"))?;
    loop {
        if is_ready(readyz) {
            return Ok((collector, readyz));
        }
        collector.check_alive()?;
        simulator.check_alive()?;
        if Instant::now() >= deadline {
            bail!(
                "kube-gc run was not ready {} s after its start",
                options.timeout.as_secs()
            );
        }
        std::thread::sleep(POLL_EVERY);
    }
}

/// The object count of the simulator's "serving N objects on http://ADDR" line.
/// A simulator and a collector against it, started as [`measure`] starts them, with a client of
/// the simulator and a runtime to drive it: what `loadgen hostile` and `loadgen plan` work on.
pub(crate) struct Pair {
    pub(crate) simulator: Process,
    pub(crate) collector: Process,
    /// The collector's plain-HTTP endpoints (`/metrics`, `/debug/plan`).
    pub(crate) endpoints: SocketAddr,
    /// Objects the simulator served at its start.
    pub(crate) objects: u64,
    pub(crate) runtime: tokio::runtime::Runtime,
    pub(crate) client: kube::Client,
}

impl Pair {
    pub(crate) fn start(options: &SyncOptions, tag: &str) -> anyhow::Result<Pair> {
        std::fs::create_dir_all(&options.dir).with_context(|| format!("creating {}", options.dir.display()))?;
        let (mut simulator, kubeconfig, objects) = start_simulator(options, tag)?;
        let (collector, endpoints) = start_collector(options, &kubeconfig, &mut simulator, tag)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .context("starting a runtime")?;
        let client = runtime.block_on(client_of(&kubeconfig))?;
        Ok(Pair {
            simulator,
            collector,
            endpoints,
            objects,
            runtime,
            client,
        })
    }
}

/// Writes in flight at once when a bench fills the simulator over HTTP.
pub(crate) const CONCURRENCY: usize = 32;

/// Creates each of `objects` through `api`, [`CONCURRENCY`] at a time: the created objects, in no
/// order.
pub(crate) async fn create_all<K>(api: &kube::Api<K>, objects: impl IntoIterator<Item = K>) -> kube::Result<Vec<K>>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    use futures::StreamExt;
    let params = kube::api::PostParams::default();
    futures::stream::iter(objects)
        .map(|object| {
            let (api, params) = (api.clone(), &params);
            async move { api.create(params, &object).await }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

/// A client of the simulator, from its kubeconfig.
async fn client_of(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let file = kube::config::Kubeconfig::read_from(kubeconfig).context("reading the simulator's kubeconfig")?;
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

fn objects_served(line: &str) -> Option<u64> {
    let after = line.split("serving ").nth(1)?;
    after.split(' ').next()?.parse().ok()
}

/// The `http://ADDR` address at the end of a log line.
pub(crate) fn address_in(line: &str) -> Option<SocketAddr> {
    let after = line.rsplit("http://").next()?;
    after.trim().trim_end_matches('/').parse().ok()
}

/// Whether `GET /readyz` at `addr` answers 200; any failure to answer counts as not ready.
fn is_ready(addr: SocketAddr) -> bool {
    let ask = || -> std::io::Result<bool> {
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
        stream.set_read_timeout(Some(Duration::from_secs(1)))?;
        stream.write_all(format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head)?;
        Ok(head.starts_with(b"HTTP/1.1 200"))
    };
    ask().unwrap_or(false)
}

/// A `/proc/PID/status` field given in kB, in bytes.
pub(crate) fn status_bytes(pid: u32, field: &str) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let kb = status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .with_context(|| format!("no {field} in {path}"))?;
    Ok(kb * 1024)
}

/// User and system CPU seconds of a process (`/proc/PID/stat`'s `utime` and `stime`).
fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    // The command name, in parentheses, may hold spaces: the fields are counted after it, from
    // `state` (field 3), so `utime` and `stime` (fields 14 and 15) are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(user), Some(system)) => Ok((user + system) as f64 / USER_HZ),
        _ => bail!("no CPU times in {path}"),
    }
}

/// The bytes the loopback interface has received (`/proc/net/dev`): a process's own byte
/// counters (`rchar` of `/proc/PID/io`) miss a socket read with `recv`, which is how Rust reads
/// a socket.
fn loopback_bytes() -> anyhow::Result<u64> {
    let dev = std::fs::read_to_string("/proc/net/dev").context("reading /proc/net/dev")?;
    dev.lines()
        .find_map(|line| line.trim_start().strip_prefix("lo:"))
        .and_then(|counters| counters.split_whitespace().next()?.parse().ok())
        .context("no lo: line in /proc/net/dev")
}

/// One figure of a run, in the unit its summary row gives.
type Figure = fn(&SyncRun) -> f64;

/// The median and range of runs: the lines `loadgen sync` prints after them.
pub fn summary(runs: &[SyncRun]) -> String {
    const MB: f64 = 1e6;
    let rows: [(&str, Figure, &str); 6] = [
        ("ready after start", |r| r.ready_after.as_secs_f64(), "s"),
        ("kube-gc peak resident (VmHWM)", |r| r.collector_peak as f64 / MB, "MB"),
        ("kube-gc CPU seconds", |r| r.collector_cpu, "s"),
        ("bytes over loopback", |r| r.loopback_bytes as f64 / MB, "MB"),
        ("simulator CPU seconds during the sync", |r| r.simulator_cpu, "s"),
        (
            "simulator resident at ready",
            |r| r.simulator_resident as f64 / MB,
            "MB",
        ),
    ];
    let mut out = format!("{} runs, median (range):", runs.len());
    for (name, value, unit) in rows {
        let mut values: Vec<f64> = runs.iter().map(value).collect();
        values.sort_by(f64::total_cmp);
        let (Some(low), Some(high)) = (values.first(), values.last()) else {
            continue;
        };
        let median = values[values.len() / 2];
        let digits = if unit == "MB" { 0 } else { 2 };
        out.push_str(&format!(
            "\n  {name}: {median:.digits$} {unit} ({low:.digits$}–{high:.digits$})"
        ));
    }
    out
}

/// One run's line.
pub fn line(index: usize, run: &SyncRun) -> String {
    format!(
        "run {}: {} objects; ready after {:.2} s; kube-gc peak resident {:.0} MB, CPU {:.2} s, \
         {:.0} MB over loopback; simulator CPU {:.2} s during the sync, resident {:.0} MB",
        index + 1,
        run.objects,
        run.ready_after.as_secs_f64(),
        run.collector_peak as f64 / 1e6,
        run.collector_cpu,
        run.loopback_bytes as f64 / 1e6,
        run.simulator_cpu,
        run.simulator_resident as f64 / 1e6,
    )
}

/// The `kube-gc` beside the running executable, as cargo builds both into one directory.
pub fn sibling_kube_gc() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let path = exe.parent()?.join("kube-gc");
    path.is_file().then_some(path)
}

/// A fresh directory for a measurement's files under the system's temporary directory.
pub fn scratch_dir() -> PathBuf {
    std::env::temp_dir().join(format!("loadgen-sync-{}", std::process::id()))
}

/// Whether `path` looks like a runnable file; checked before the first run so that a wrong
/// `--kube-gc` fails with its name, not with a spawn error.
pub fn check_binary(path: &Path) -> anyhow::Result<()> {
    if !path.is_file() {
        bail!(
            "{} is not a file (build it with `cargo build --release`, or pass --kube-gc)",
            path.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_serving_line_should_give_its_object_count() {
        let line = "kube-gc sim-apiserver: serving 995104 objects on http://127.0.0.1:40123";
        assert_eq!(objects_served(line), Some(995_104));
        assert_eq!(address_in(line), Some("127.0.0.1:40123".parse().unwrap()));
    }

    #[test]
    fn the_summary_should_give_the_median_and_range_of_each_figure() {
        let run = |secs: u64, peak: u64| SyncRun {
            objects: 10,
            ready_after: Duration::from_secs(secs),
            collector_peak: peak * 1_000_000,
            collector_cpu: 1.0,
            loopback_bytes: 40_000_000,
            simulator_cpu: 2.0,
            simulator_resident: 3_000_000,
        };
        let text = summary(&[run(5, 300), run(3, 200), run(4, 250)]);
        assert!(text.contains("ready after start: 4.00 s (3.00–5.00)"), "{text}");
        assert!(
            text.contains("kube-gc peak resident (VmHWM): 250 MB (200–300)"),
            "{text}"
        );
        assert!(text.contains("bytes over loopback: 40 MB (40–40)"), "{text}");
    }

    #[test]
    fn this_process_should_have_cpu_times_and_a_peak() {
        let pid = std::process::id();
        assert!(cpu_seconds(pid).unwrap() >= 0.0);
        assert!(status_bytes(pid, "VmHWM").unwrap() > 0);
        assert!(loopback_bytes().is_ok(), "every Linux machine has a loopback interface");
    }
}
