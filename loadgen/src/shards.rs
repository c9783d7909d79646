//! `loadgen shards`: what each of N sharded `kube-gc run --shards auto` replicas costs on a
//! simulated cluster, and how long the others take to cover the cluster again when one dies.
//!
//! A run starts `kube-gc sim-apiserver --preset P`, then N replicas at once (the default lease
//! timings: 15 s lease, 10 s renew deadline, 2 s retry; shorter ones lose renewals on a loaded
//! 2-core machine while the replicas sync), and polls each replica's `/metrics` until
//! the replicas have *settled*: every one answers with all its monitors synced, their
//! `kube_gc_shard_hash_share` sum to the whole hash space, and nothing changed over three polls.
//! Then it reads, per replica, the graph's nodes, the events its builders applied (what its
//! watches delivered and it decoded), and its resident set (`VmRSS`). With `--kill-one`, the
//! first replica is then killed (SIGKILL) and the time until the others have settled again is
//! the takeover time. Every wait is bounded by `--timeout`, and every process is killed when
//! the run ends.

use crate::sync::{address_in, start_simulator, status_bytes, Process, SyncOptions, POLL_EVERY, UNTHROTTLED};
use anyhow::{bail, Context};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

/// The sharding flags of the measured replicas.
const SHARD_FLAGS: [&str; 2] = ["--shards", "auto"];

/// Polls in a row that must agree before the replicas count as settled.
const STEADY_POLLS: usize = 3;

/// What one replica holds once settled.
#[derive(Clone, Debug, PartialEq)]
pub struct Replica {
    /// Its share of the hash space.
    pub share: f64,
    /// Nodes in its graph.
    pub nodes: u64,
    /// Graph events its builders applied since its collector (re)started.
    pub events: u64,
    /// Its resident bytes.
    pub resident: u64,
}

/// What one run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardRun {
    /// Objects the simulator served.
    pub objects: u64,
    /// From the replicas' spawn until they settled.
    pub settled_after: Duration,
    /// Each replica, settled.
    pub replicas: Vec<Replica>,
    /// With `--kill-one`: from the kill until the others settled again, and their figures then.
    pub takeover: Option<(Duration, Vec<Replica>)>,
}

/// Runs N replicas on the simulator and measures them; see the [module docs](self).
pub fn measure(options: &SyncOptions, replicas: usize, kill_one: bool) -> anyhow::Result<ShardRun> {
    std::fs::create_dir_all(&options.dir).with_context(|| format!("creating {}", options.dir.display()))?;
    let (mut simulator, kubeconfig, objects) = start_simulator(options, &format!("shards-{replicas}"))?;
    let started = Instant::now();
    let mut running: Vec<(Process, SocketAddr)> = Vec::new();
    for i in 0..replicas {
        let mut process = Process::spawn(
            "kube-gc run --shards auto",
            Command::new(&options.kube_gc)
                .arg("run")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["--insecure-bind-address", "127.0.0.1:0", "--secure-port", "0"])
                .args(["--leader-elect-resource-namespace", "default"])
                .args(SHARD_FLAGS)
                .args(UNTHROTTLED)
                .args(&options.run_args),
            options.dir.join(format!("run-shard-{replicas}-{i}.log")),
        )?;
        let line = process.wait_for_line("without authentication on http://", started + options.timeout)?;
        let addr = address_in(&line).with_context(|| format!("reading the address in {line:?}"))?;
        running.push((process, addr));
    }
    let settled = settle(&mut running, &mut simulator, started + options.timeout)?;
    let settled_after = started.elapsed();
    let takeover = if kill_one && replicas > 1 {
        let (mut killed, _) = running.remove(0);
        let killed_at = Instant::now();
        killed.kill();
        let again = settle(&mut running, &mut simulator, killed_at + options.timeout)?;
        Some((killed_at.elapsed(), again))
    } else {
        None
    };
    Ok(ShardRun {
        objects,
        settled_after,
        replicas: settled,
        takeover,
    })
}

/// Polls the replicas until they have settled; their figures then.
fn settle(
    running: &mut [(Process, SocketAddr)],
    simulator: &mut Process,
    deadline: Instant,
) -> anyhow::Result<Vec<Replica>> {
    let mut steady = 0;
    let mut last: Option<Vec<(u64, f64)>> = None;
    loop {
        simulator.check_alive()?;
        let mut now = Vec::with_capacity(running.len());
        for (process, addr) in running.iter_mut() {
            process.check_alive()?;
            now.push(read(process.pid(), *addr));
        }
        let complete: Option<Vec<Replica>> = now.into_iter().collect();
        if let Some(replicas) = complete {
            let whole = (replicas.iter().map(|r| r.share).sum::<f64>() - 1.0).abs() < 1e-6;
            let shape: Vec<(u64, f64)> = replicas.iter().map(|r| (r.nodes, r.share)).collect();
            steady = if whole && last.as_ref() == Some(&shape) {
                steady + 1
            } else {
                0
            };
            last = Some(shape);
            if steady + 1 >= STEADY_POLLS {
                return Ok(replicas);
            }
        }
        if Instant::now() >= deadline {
            bail!("the replicas did not settle in time");
        }
        std::thread::sleep(POLL_EVERY * 10);
    }
}

/// One replica's figures, when it collects with every monitor synced.
fn read(pid: u32, addr: SocketAddr) -> Option<Replica> {
    let text = get(addr, "/metrics")?;
    let mut replica = Replica {
        share: f64::NAN,
        nodes: 0,
        events: 0,
        resident: status_bytes(pid, "VmRSS").ok()?,
    };
    let mut monitors = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let metric = name.split('{').next().unwrap_or(name);
        let value: f64 = value.trim().parse().ok()?;
        match metric {
            "kube_gc_shard_hash_share" => replica.share = value,
            "kube_gc_graph_nodes" => replica.nodes = value as u64,
            "kube_gc_graph_events_total" => replica.events += value as u64,
            "kube_gc_monitor_synced" if value != 1.0 => return None,
            "kube_gc_monitor_synced" => monitors += 1,
            _ => {}
        }
    }
    (monitors > 0 && replica.share.is_finite()).then_some(replica)
}

/// The body of a 200 answer to `GET path` at `addr`.
pub(crate) fn get(addr: SocketAddr, path: &str) -> Option<String> {
    get_within(addr, path, Duration::from_secs(5))
}

/// [`get`], waiting up to `patience` for each read of the answer.
pub(crate) fn get_within(addr: SocketAddr, path: &str, patience: Duration) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(patience)).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// The run as the table rows of docs/sharding.md: one per replica count.
pub fn line(run: &ShardRun) -> String {
    let n = run.replicas.len();
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let each: Vec<String> = run
        .replicas
        .iter()
        .map(|r| {
            format!(
                "{:.0}% of the space, {} nodes, {} events, {:.0} MiB",
                r.share * 100.0,
                r.nodes,
                r.events,
                mib(r.resident)
            )
        })
        .collect();
    let mut out = format!(
        "{n} replica(s) on {} objects: settled in {:.1} s\n  {}",
        run.objects,
        run.settled_after.as_secs_f64(),
        each.join("\n  ")
    );
    if let Some((after, survivors)) = &run.takeover {
        let nodes: Vec<String> = survivors.iter().map(|r| format!("{} nodes", r.nodes)).collect();
        out.push_str(&format!(
            "\n  one killed: the others cover the cluster again after {:.1} s ({})",
            after.as_secs_f64(),
            nodes.join(", ")
        ));
    }
    out
}
