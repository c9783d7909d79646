//! One scenario of the fault suite, end to end: `kube-gc sim-apiserver` with the scenario's faults
//! aimed at the collector (`--fault-target kube-gc/`), one or two `kube-gc run` processes, the
//! workload, a disruption, convergence against the oracle, and the checks. Everything is real
//! time and every wait is bounded.

use super::audit;
use super::hostile;
use super::oracle::{Expected, Key, Obj, Resource, Universe};
use super::support::partition::Partition;
use super::support::process::{leader_elect_flags, Child};
use super::support::{crd_manifest, http_get};
use super::workload::{self, Layout};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::discovery::{verbs, Discovery, Scope};
use kube::Client;
use kube_gc::api::PropagationPolicy;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The bound on convergence after the workload's end (DESIGN §5).
pub const CONVERGENCE: Duration = Duration::from_secs(120);
/// The bound on the collector's monitors syncing.
const SYNC_PATIENCE: Duration = Duration::from_secs(90);

/// What happens to the processes while the cascade runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Disruption {
    None,
    /// The collector is stopped (SIGSTOP) through the deletions and this long after, then resumed.
    Freeze(Duration),
    /// The collector is killed (SIGKILL) mid-cascade and started again.
    KillCollector,
    /// The API server is stopped (SIGTERM, saving its state) mid-cascade and restarted on its port.
    RestartServer,
    /// The leader of two replicas is killed (SIGKILL) mid-cascade.
    KillLeader,
    /// One of three sharded replicas (`--shards auto`) is killed (SIGKILL) mid-cascade.
    KillShard,
    /// A third sharded replica joins two mid-cascade.
    AddShard,
    /// One of three sharded replicas is stopped (SIGSTOP) mid-cascade, past its Lease's
    /// duration, then resumed this long after.
    FreezeShard(Duration),
    /// One of three sharded replicas is cut off from the API server mid-cascade (its
    /// connections dropped, new ones never answered: [`Partition`]), this long, then healed.
    CutOffShard(Duration),
}

impl Disruption {
    fn sharded(self) -> bool {
        matches!(
            self,
            Disruption::KillShard | Disruption::AddShard | Disruption::FreezeShard(_) | Disruption::CutOffShard(_)
        )
    }
}

/// What the workload creates and deletes ([`workload`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Workload {
    /// Owner trees of every kind, three quarters of the roots deleted with a seeded policy each.
    Trees,
    /// The trees, and owners with dependents in every shard whose Foreground deletion turns to
    /// Orphan mid-cascade; three sharded replicas.
    OrphanSwitch,
    /// This many cluster-scoped owners with a blocking dependent each, deleted in the Foreground
    /// way at once; three sharded replicas.
    ClusterOwners(usize),
    /// The trees, and beside them a tenant churning objects built to hurt the collector
    /// ([`hostile`]).
    HostileTenant,
}

/// A named scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: &'static str,
    /// Fault flags of `kube-gc sim-apiserver`.
    pub faults: &'static [&'static str],
    pub disruption: Disruption,
    pub workload: Workload,
    /// `--clock-skew` of the replicas started first, in order: their wall clocks disagree.
    pub clock_skews: &'static [&'static str],
    /// Flags every replica runs with.
    pub collector_flags: &'static [&'static str],
}

impl Scenario {
    fn sharded(&self) -> bool {
        self.disruption.sharded() || matches!(self.workload, Workload::OrphanSwitch | Workload::ClusterOwners(_))
    }
}

/// One row of the report.
#[derive(Clone, Debug)]
pub struct Row {
    pub scenario: String,
    pub faults: String,
    pub seed: u64,
    /// Seconds from the workload's end until the cluster matched the oracle.
    pub converged_in: Option<f64>,
    pub wrongful: usize,
    /// The collector's deletions, and how many of them no journal line explains.
    pub explained: (usize, usize),
    /// Requests the collector sent (audit lines).
    pub requests: usize,
    /// Seconds until the slowest monitor synced, and which.
    pub slowest_sync: (f64, String),
    /// Every broken rule, in words.
    pub failures: Vec<String>,
}

/// A running simulated API server.
struct Server {
    process: Child,
    dir: PathBuf,
    port: u16,
    seed: u64,
    faults: Vec<String>,
    incarnation: usize,
}

impl Server {
    fn start(dir: &Path, faults: &[&str], seed: u64) -> Server {
        let faults: Vec<String> = faults.iter().map(|f| f.to_string()).collect();
        let (process, port) = spawn_server(dir, &faults, seed, 0, 0);
        Server {
            process,
            dir: dir.to_path_buf(),
            port,
            seed,
            faults,
            incarnation: 0,
        }
    }

    /// Stops the server (it saves its state), waits, and starts it again on the same port.
    fn restart(&mut self) {
        self.process.stop();
        std::thread::sleep(Duration::from_secs(2));
        self.incarnation += 1;
        let (process, _) = spawn_server(&self.dir, &self.faults, self.seed, self.port, self.incarnation);
        self.process = process;
    }

    fn audit_logs(&self) -> Vec<PathBuf> {
        (0..=self.incarnation)
            .map(|i| self.dir.join(format!("audit-{i}.jsonl")))
            .collect()
    }

    async fn client(&self) -> Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(self.dir.join("kubeconfig")).expect("the kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("a client config");
        Client::try_from(config).expect("a client")
    }
}

/// Starts incarnation `incarnation` of the server on `port` (0: any), the first from the
/// `small` preset, later ones from the state file; returns it with the port it bound.
fn spawn_server(dir: &Path, faults: &[String], seed: u64, port: u16, incarnation: usize) -> (Child, u16) {
    let path = |name: String| dir.join(name).to_str().expect("a UTF-8 path").to_string();
    let mut args: Vec<String> = vec![
        "sim-apiserver".into(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--write-kubeconfig".into(),
        path("kubeconfig".into()),
        "--audit-log".into(),
        path(format!("audit-{incarnation}.jsonl")),
        "--state-file".into(),
        path("state.jsonl".into()),
        "--fault-target".into(),
        "kube-gc/".into(),
    ];
    if incarnation == 0 {
        args.extend(["--preset".into(), "small".into(), "--seed".into(), seed.to_string()]);
    }
    args.extend(faults.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut process = Child::kube_gc(&args, &dir.join(format!("sim-apiserver-{incarnation}.log")));
    let port = Child::address_in(&process.wait_for_line("serving")).port();
    (process, port)
}

/// A running `kube-gc run`.
struct CollectorProcess {
    process: Child,
    addr: SocketAddr,
    name: String,
    killed: bool,
}

impl CollectorProcess {
    /// Starts a replica; `FAULT_COLLECTOR_BIN` and `FAULT_COLLECTOR_FLAGS` (space-separated) run
    /// another build or add flags, for comparisons.
    fn start(dir: &Path, name: &str, role: &[&str]) -> CollectorProcess {
        CollectorProcess::start_through(dir, name, role, &dir.join("kubeconfig"))
    }

    /// Starts a replica that reaches the server as `kubeconfig` says.
    fn start_through(dir: &Path, name: &str, role: &[&str], kubeconfig: &Path) -> CollectorProcess {
        let bin = std::env::var("FAULT_COLLECTOR_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_kube-gc").to_string());
        let mut command = std::process::Command::new(bin);
        command.args(["run", "--kubeconfig"]).arg(kubeconfig);
        command.args([
            "--secure-port",
            "0",
            "--insecure-bind-address",
            "127.0.0.1:0",
            "--resource-sync-period",
            "2s",
            "--report-every",
            "5s",
        ]);
        command
            .arg("--journal")
            .arg(dir.join(format!("{name}{JOURNAL_SUFFIX}")));
        command.args(role);
        if let Ok(flags) = std::env::var("FAULT_COLLECTOR_FLAGS") {
            command.args(flags.split_whitespace());
        }
        let mut process = Child::spawn(&mut command, &dir.join(format!("{name}.log")));
        let addr = Child::address_in(&process.wait_for_line("serving /healthz"));
        CollectorProcess {
            process,
            addr,
            name: name.to_string(),
            killed: false,
        }
    }

    fn leads(&self) -> bool {
        let log = self.process.log();
        log.contains("kube-gc run: leading") || log.contains("kube-gc run: collecting")
    }

    fn kill(&mut self) {
        self.process.signal(libc::SIGKILL);
        self.process.wait(Duration::from_secs(10));
        self.killed = true;
    }
}

/// Seconds until each monitor of the collector on `addr` reported synced, read from `/metrics`.
async fn monitor_sync_times(addr: SocketAddr) -> Result<BTreeMap<String, f64>, String> {
    let started = Instant::now();
    let mut synced: BTreeMap<String, f64> = BTreeMap::new();
    while started.elapsed() < SYNC_PATIENCE {
        let (code, metrics) = http_get(addr, "/metrics").await;
        let monitors: Vec<(String, bool)> = metrics
            .lines()
            .filter_map(|l| l.strip_prefix("kube_gc_monitor_synced{resource=\""))
            .filter_map(|l| l.split_once("\"} "))
            .map(|(resource, value)| (resource.to_string(), value.trim() == "1"))
            .collect();
        for (resource, done) in &monitors {
            if *done {
                synced
                    .entry(resource.clone())
                    .or_insert(started.elapsed().as_secs_f64());
            }
        }
        let ready = http_get(addr, "/readyz").await.0 == 200;
        if code == 200 && ready && !monitors.is_empty() && monitors.iter().all(|(_, done)| *done) {
            return Ok(synced);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!(
        "monitors not synced after {SYNC_PATIENCE:?}: synced {synced:?}"
    ))
}

/// Every listable resource of the cluster, by (group, plural).
async fn listable(client: &Client) -> BTreeMap<(String, String), Resource> {
    let discovery = Discovery::new(client.clone()).run().await.expect("discovery");
    let mut out = BTreeMap::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if caps.supports_operation(verbs::LIST) && ar.plural != "events" {
                let namespaced = caps.scope == Scope::Namespaced;
                out.insert((ar.group.clone(), ar.plural.clone()), Resource::new(ar, namespaced));
            }
        }
    }
    out
}

/// Every object of `resources`; `None` when the server could not answer (it may be restarting).
async fn list_all(client: &Client, resources: &BTreeMap<(String, String), Resource>) -> Option<Vec<Obj>> {
    let mut out = Vec::new();
    for resource in resources.values() {
        let api = Api::<DynamicObject>::all_with(client.clone(), &resource.ar);
        let list = match api.list(&ListParams::default()).await {
            Ok(list) => list,
            Err(kube::Error::Api(e)) if e.code == 404 => continue, // a CRD's type that went away
            Err(_) => return None,
        };
        out.extend(list.items.iter().map(|o| Obj::of(resource, o)));
    }
    Some(out)
}

/// How the cluster differs from the oracle: what is still to happen, and what can never be
/// undone (an object that must live is gone, or lost a reference to a living owner).
#[derive(Default)]
struct Diff {
    pending: Vec<String>,
    broken: Vec<String>,
}

fn compare(universe: &Universe, expected: &Expected, current: &[Obj]) -> Diff {
    let now: HashMap<&str, BTreeSet<&str>> = current.iter().map(|o| (o.uid(), o.owners().collect())).collect();
    let mut diff = Diff::default();
    for (uid, obj) in &universe.objects {
        let key = &obj.key;
        match (expected.live.get(uid), now.get(uid.as_str())) {
            (Some(_), None) => diff.broken.push(format!("{key} must live but is gone")),
            (Some(owners), Some(refs)) => {
                let want: BTreeSet<&str> = owners.iter().map(String::as_str).collect();
                if !want.is_subset(refs) {
                    diff.broken.push(format!(
                        "{key} lost a reference to a living owner: has {refs:?}, must keep {want:?}"
                    ));
                } else if want != *refs {
                    diff.pending.push(format!("{key} still names gone owners: {refs:?}"));
                }
            }
            (None, Some(_)) if expected.gone.contains(uid) => diff.pending.push(format!("{key} must go")),
            (None, Some(_)) => {} // its end depends on timing
            (None, None) => {}
        }
    }
    diff
}

/// Runs `scenario` with `seed` at `scale` (trees per kind, in units of 2–4).
pub async fn run(scenario: &Scenario, seed: u64, scale: usize) -> Row {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("fault-suite")
        .join(format!("{}-{seed}", scenario.name));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the scenario's directory");
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut failures = Vec::new();

    let mut server = Server::start(&dir, scenario.faults, seed);
    let client = server.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = serde_json::from_value(crd_manifest("widgets", "Widget")).expect("a CRD");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("the widgets CRD");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let resources = listable(&client).await;
    let mut universe = Universe::serving(resources.values());
    for obj in list_all(&client, &resources).await.expect("the first snapshot") {
        universe.add(obj);
    }

    let sharded = scenario.sharded();
    let elect = leader_elect_flags("1s");
    let flags = scenario.collector_flags;
    let shard: Vec<&str> = elect[1..]
        .iter()
        .chain(&["--shards", "auto"])
        .chain(flags)
        .copied()
        .collect();
    let elect: Vec<&str> = elect.iter().chain(flags).copied().collect();
    // The first replica reaches the server through a partition it can be cut off by.
    let partition = match scenario.disruption {
        Disruption::CutOffShard(_) => Some(Partition::start(([127, 0, 0, 1], server.port).into()).await),
        _ => None,
    };
    let start_shard = |i: usize| {
        let mut role = shard.clone();
        if let Some(skew) = scenario.clock_skews.get(i) {
            role.extend(["--clock-skew", skew]);
        }
        let name = format!("kube-gc-shard-{i}");
        match (&partition, i) {
            (Some(p), 0) => {
                CollectorProcess::start_through(&dir, &name, &role, &kubeconfig_through(&dir, server.port, p))
            }
            _ => CollectorProcess::start(&dir, &name, &role),
        }
    };
    let mut collectors: Vec<CollectorProcess> = match scenario.disruption {
        Disruption::KillLeader => (0..2)
            .map(|i| CollectorProcess::start(&dir, &format!("kube-gc-run-{i}"), &elect))
            .collect(),
        Disruption::AddShard => (0..2).map(start_shard).collect(),
        _ if sharded => (0..3).map(start_shard).collect(),
        _ => vec![CollectorProcess::start(&dir, "kube-gc-run-0", flags)],
    };
    let leader = if sharded {
        wait_for_shards(&collectors).await
    } else {
        wait_for_leader(&collectors).await
    };
    let slowest_sync = match monitor_sync_times(collectors[leader].addr).await {
        Ok(times) => {
            let line: Vec<String> = times.iter().map(|(r, t)| format!("{r}={t:.1}s")).collect();
            std::fs::write(dir.join("monitor-sync.txt"), line.join("\n")).expect("write");
            times
                .into_iter()
                .map(|(r, t)| (t, r))
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .unwrap_or((0.0, String::new()))
        }
        Err(e) => {
            failures.push(e);
            (f64::NAN, String::new())
        }
    };

    let layout = if sharded { Layout::Spread } else { Layout::One };
    let (roots, replica_sets) = match scenario.workload {
        Workload::ClusterOwners(_) => Default::default(),
        Workload::Trees | Workload::OrphanSwitch | Workload::HostileTenant => {
            workload::create_trees(&client, &mut universe, scale, layout).await
        }
    };
    // The tenant's churn runs beside the rest of the workload and the victim's convergence.
    let tenant = (scenario.workload == Workload::HostileTenant).then(|| {
        tokio::spawn(hostile::churn(
            client.clone(),
            collectors[leader].process.pid(),
            hostile::OBJECTS_PER_SCALE * scale,
            roots.owner_refs(),
            seed,
        ))
    });
    let switched = match scenario.workload {
        Workload::OrphanSwitch => workload::create_switched_owners(&client, &mut universe, scale).await,
        _ => Vec::new(),
    };
    let many = match scenario.workload {
        Workload::ClusterOwners(count) => workload::create_cluster_owners(&client, &mut universe, count).await,
        _ => Vec::new(),
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    workload::create_late_dependents(&client, &mut universe, &replica_sets, &mut rng).await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    if let Disruption::Freeze(_) = scenario.disruption {
        collectors[leader].process.signal(libc::SIGSTOP);
        // Past the server's watch drops, so the frozen collector's watches have ended and it
        // must reopen them, after the workload, from versions the history no longer holds.
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let frozen_at = Instant::now();
    // The other disruptions strike halfway through the deletions, with the cascade under way.
    workload::delete_roots(&client, &mut universe, &roots, &mut rng, || match scenario.disruption {
        Disruption::KillCollector => {
            collectors[leader].kill();
            collectors.push(CollectorProcess::start(&dir, "kube-gc-run-restarted", flags));
        }
        Disruption::RestartServer => server.restart(),
        Disruption::KillLeader | Disruption::KillShard => collectors[leader].kill(),
        Disruption::AddShard => collectors.push(CollectorProcess::start(&dir, "kube-gc-shard-added", &shard)),
        Disruption::FreezeShard(_) => collectors[leader].process.signal(libc::SIGSTOP),
        Disruption::CutOffShard(_) => partition.as_ref().expect("the partition").cut(),
        Disruption::None | Disruption::Freeze(_) => {}
    })
    .await;
    workload::switch_to_orphan(&client, &mut universe, &switched).await;
    workload::delete_all_foreground(&client, &mut universe, &many).await;
    let workload_end = Instant::now();
    match scenario.disruption {
        Disruption::Freeze(frozen) => {
            workload::churn(&client, 120).await;
            tokio::time::sleep(frozen.saturating_sub(frozen_at.elapsed())).await;
            collectors[leader].process.signal(libc::SIGCONT);
        }
        Disruption::FreezeShard(frozen) => {
            tokio::time::sleep(frozen.saturating_sub(workload_end.elapsed())).await;
            collectors[leader].process.signal(libc::SIGCONT);
        }
        Disruption::CutOffShard(cut) => {
            tokio::time::sleep(cut.saturating_sub(workload_end.elapsed())).await;
            partition.as_ref().expect("the partition").heal();
        }
        _ => {}
    }

    let expected = universe.expected();
    let undecided: Vec<String> = expected
        .undecided
        .iter()
        .map(|(uid, why)| format!("{}: {why}", universe.objects[uid].key))
        .collect();
    let verdicts = format!(
        "gone {}, live {}, undecided {}\n{}\n",
        expected.gone.len(),
        expected.live.len(),
        undecided.len(),
        undecided.join("\n")
    );
    std::fs::write(dir.join("oracle.txt"), verdicts).expect("write");
    let client = server.client().await;
    let (converged_in, last) = converge(&client, &resources, &universe, &expected, workload_end).await;
    match (&converged_in, last) {
        (Some(_), _) => {}
        (None, diff) => {
            failures.extend(diff.broken.iter().take(20).cloned());
            let pending: Vec<&String> = diff.pending.iter().take(10).collect();
            failures.push(format!(
                "not converged within {CONVERGENCE:?} of the workload's end; {} differences, e.g. {pending:?}",
                diff.pending.len()
            ));
        }
    }

    if let Some(tenant) = tenant {
        match tenant.await.expect("the tenant's task") {
            Ok(cycles) => {
                let (broken, figures) = hostile::check(&cycles, converged_in);
                eprintln!("{} (seed {seed}), the tenant's cycles:\n{figures}", scenario.name);
                std::fs::write(dir.join("hostile.txt"), figures).expect("write");
                failures.extend(broken);
            }
            Err(e) => failures.push(e),
        }
    }

    for collector in collectors.iter_mut().filter(|c| !c.killed) {
        collector.process.signal(libc::SIGTERM);
        let status = collector.process.wait(Duration::from_secs(30));
        if !status.success() {
            failures.push(format!("{} exited with {status} on SIGTERM", collector.name));
        }
    }
    server.process.stop();
    for log in std::fs::read_dir(&dir).expect("the directory").flatten() {
        let text = std::fs::read_to_string(log.path()).unwrap_or_default();
        if text.contains("panicked") {
            failures.push(format!("a panic in {}", log.path().display()));
        }
    }

    let lines = audit::read(&server.audit_logs());
    let mut wrongful = wrongful_deletions(&universe, &expected, &lines);
    wrongful.extend(hostile::wrongful_deletions(&lines));
    failures.extend(wrongful.iter().cloned());
    failures.extend(foreground_order(&universe, &expected, &lines));
    failures.extend(orphan_switch(&universe, &lines));
    if sharded {
        for collector in &collectors {
            if collector.process.log().contains("Too long") {
                failures.push(format!(
                    "{}: the API server refused a write as too long (its Lease?)",
                    collector.name
                ));
            }
        }
        // Against a server that ignores shardSelector the replicas filter on the client, and say
        // so; against one that applies it, nothing is left to filter.
        let ignoring = scenario.faults.contains(&"ShardedListAndWatch=false");
        for collector in &collectors {
            let filtered = collector.process.log().contains("filtering them on the client");
            if filtered != ignoring {
                failures.push(format!(
                    "{}: client-side filtering {filtered}, expected {ignoring}",
                    collector.name
                ));
            }
        }
    }
    let interleaved = if sharded {
        audit::interleaved_writes_per_object(&lines)
    } else {
        audit::interleaved_writes(&lines)
    };
    if let Some(interleaved) = interleaved {
        failures.push(interleaved);
    }
    let killed = collectors.iter().filter(|c| c.killed).count();
    let explained = unexplained_deletions(&dir, &lines, killed, &mut failures);
    if !failures.is_empty() {
        keep_failed_run(&dir, &mut failures);
    }
    Row {
        scenario: scenario.name.to_string(),
        faults: faults_text(scenario),
        seed,
        converged_in,
        wrongful: wrongful.len(),
        explained,
        requests: audit::collector_requests(&lines),
        slowest_sync,
        failures,
    }
}

/// Moves a failed run's logs, audit logs and journals to `<dir>-failed`, where the next run of the
/// same scenario and seed does not clear them (a failure may take many runs to come back), and
/// says where they are.
fn keep_failed_run(dir: &Path, failures: &mut Vec<String>) {
    let mut kept = dir.as_os_str().to_owned();
    kept.push("-failed");
    let kept = PathBuf::from(kept);
    let _ = std::fs::remove_dir_all(&kept);
    match std::fs::rename(dir, &kept) {
        Ok(()) => failures.push(format!("the run's logs are kept in {}", kept.display())),
        Err(e) => failures.push(format!("the run's logs could not be kept ({e}): {}", dir.display())),
    }
}

fn faults_text(s: &Scenario) -> String {
    let mut parts: Vec<String> = s.faults.iter().map(|f| f.to_string()).collect();
    match s.disruption {
        Disruption::None => {}
        Disruption::Freeze(d) => parts.push(format!("collector frozen {}s", d.as_secs())),
        Disruption::KillCollector => parts.push("kill -9 collector".into()),
        Disruption::RestartServer => parts.push("API server restart".into()),
        Disruption::KillLeader => parts.push("kill -9 leader of 2".into()),
        Disruption::KillShard => parts.push("kill -9 one of 3 shards".into()),
        Disruption::AddShard => parts.push("third shard joins 2".into()),
        Disruption::FreezeShard(d) => parts.push(format!("one of 3 shards frozen {}s", d.as_secs())),
        Disruption::CutOffShard(d) => parts.push(format!("one of 3 shards cut off {}s", d.as_secs())),
    }
    match s.workload {
        Workload::Trees => {}
        Workload::OrphanSwitch => parts.push("Foreground switched to Orphan".into()),
        Workload::ClusterOwners(n) => parts.push(format!("{n} cluster-scoped owners deleted Foreground")),
        Workload::HostileTenant => parts.push("a hostile tenant's churn beside".into()),
    }
    if !s.clock_skews.is_empty() {
        parts.push(format!("clocks off by {}", s.clock_skews.join(", ")));
    }
    if !s.collector_flags.is_empty() {
        parts.push(format!("collector {}", s.collector_flags.join(" ")));
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(" ")
    }
}

/// A kubeconfig beside the scenario's, for a replica that reaches the server on `port` through
/// `partition`.
fn kubeconfig_through(dir: &Path, port: u16, partition: &Partition) -> PathBuf {
    let direct = std::fs::read_to_string(dir.join("kubeconfig")).expect("the kubeconfig");
    let through = direct.replace(&format!("127.0.0.1:{port}"), &partition.addr().to_string());
    assert_ne!(through, direct, "the kubeconfig names the server as 127.0.0.1:{port}");
    let path = dir.join("kubeconfig-partitioned");
    std::fs::write(&path, through).expect("write the kubeconfig");
    path
}

/// The index of the replica that leads (the only one, without leader election).
async fn wait_for_leader(collectors: &[CollectorProcess]) -> usize {
    if collectors.len() == 1 {
        return 0;
    }
    let started = Instant::now();
    while started.elapsed() < SYNC_PATIENCE {
        if let Some(i) = collectors.iter().position(CollectorProcess::leads) {
            return i;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no replica took the lease within {SYNC_PATIENCE:?}");
}

/// Waits until every sharded replica collects its ranges; the first one's index.
async fn wait_for_shards(collectors: &[CollectorProcess]) -> usize {
    let started = Instant::now();
    while started.elapsed() < SYNC_PATIENCE {
        if collectors.iter().all(CollectorProcess::leads) {
            return 0;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("not every shard collected within {SYNC_PATIENCE:?}");
}

/// Polls until the cluster matches the oracle; the seconds it took from `since`, or the last
/// difference once [`CONVERGENCE`] has passed or something broke that cannot be undone.
async fn converge(
    client: &Client,
    resources: &BTreeMap<(String, String), Resource>,
    universe: &Universe,
    expected: &Expected,
    since: Instant,
) -> (Option<f64>, Diff) {
    let mut last = Diff::default();
    while since.elapsed() < CONVERGENCE {
        if let Some(current) = list_all(client, resources).await {
            last = compare(universe, expected, &current);
            if last.pending.is_empty() && last.broken.is_empty() {
                return (Some(since.elapsed().as_secs_f64()), last);
            }
            if !last.broken.is_empty() {
                return (None, last);
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    (None, last)
}

/// Objects the oracle says must live that the collector deleted, each with its request.
fn wrongful_deletions(universe: &Universe, expected: &Expected, lines: &[audit::Line]) -> Vec<String> {
    audit::collector_deletes(lines)
        .filter_map(|l| {
            let uid = universe.uid_of(&l.key())?;
            expected.live.contains_key(uid).then(|| {
                format!(
                    "WRONGFUL DELETION of {} by {} (request {:?})",
                    l.key(),
                    l.user_agent,
                    l.when()
                )
            })
        })
        .collect()
}

/// What each replica's `--journal` is named after its log.
const JOURNAL_SUFFIX: &str = ".journal.jsonl";

/// The collector's deletions, and those that no journal line of any replica explains (a `delete`
/// line sent for the same resource, namespace and name, with its owners and reason). A replica
/// killed with `kill -9` may have had one DELETE per worker in flight, answered by the server but
/// never by the replica, so that many may go unexplained per killed replica.
fn unexplained_deletions(
    dir: &Path,
    lines: &[audit::Line],
    killed: usize,
    failures: &mut Vec<String>,
) -> (usize, usize) {
    let mut journaled = std::collections::HashSet::new();
    for file in std::fs::read_dir(dir).expect("the directory").flatten() {
        if !file.file_name().to_string_lossy().ends_with(JOURNAL_SUFFIX) {
            continue;
        }
        let entries = kube_gc::journal::read(&file.path()).unwrap_or_else(|e| panic!("{e}"));
        for entry in entries {
            if entry.action == kube_gc::journal::Action::Delete && !entry.reason.is_empty() && !entry.owners.is_empty()
            {
                let object = entry.object;
                journaled.insert((object.resource, object.namespace, object.name));
            }
        }
    }
    let deletes: Vec<&audit::Line> = audit::collector_deletes(lines).collect();
    let unexplained: Vec<String> = deletes
        .iter()
        .filter(|l| !journaled.contains(&(l.resource.clone(), l.namespace.clone(), l.name.clone())))
        .map(|l| l.key().to_string())
        .collect();
    if unexplained.len() > killed * IN_FLIGHT_PER_REPLICA {
        failures.push(format!(
            "{} deletions no journal line explains, e.g. {:?}",
            unexplained.len(),
            &unexplained[..unexplained.len().min(5)]
        ));
    }
    (deletes.len(), unexplained.len())
}

/// Requests a killed replica may have had in flight: its workers (`--concurrent-gc-syncs`).
const IN_FLIGHT_PER_REPLICA: usize = 20;

/// Dependents of owners switched to Orphan that the collector deleted after it released their
/// owner (a dependent left referencing it, then collected as dangling, instead of orphaned);
/// and a failure if every cascade ended before its switch, which would have tested nothing.
fn orphan_switch(universe: &Universe, lines: &[audit::Line]) -> Vec<String> {
    if universe.switched.is_empty() {
        return Vec::new();
    }
    let removed = audit::removals(lines);
    let deleted: HashMap<Key, (usize, u64)> = audit::collector_deletes(lines)
        .filter_map(|l| Some((l.key(), (l.incarnation, l.committed_resource_version?))))
        .collect();
    let mut out = Vec::new();
    let mut orphaned = 0;
    for owner in &universe.switched {
        let owner_key = &universe.objects[owner].key;
        let released = removed.get(owner_key);
        for dependent in universe.dependents_of(owner) {
            match (deleted.get(&dependent.key), released) {
                (None, _) => orphaned += 1,
                (Some(at), Some(released)) if at > released => out.push(format!(
                    "{} deleted at {at:?}, after its owner {owner_key}, switched to Orphan, was released at {released:?}",
                    dependent.key
                )),
                (Some(_), _) => {}
            }
        }
    }
    if orphaned == 0 {
        out.push("every switched owner's cascade ended before its switch: nothing was orphaned".into());
    }
    out
}

/// Foreground owners removed while a blocking dependent the oracle collects, which has no other
/// owner, was still there.
fn foreground_order(universe: &Universe, expected: &Expected, lines: &[audit::Line]) -> Vec<String> {
    let removed = audit::removals(lines);
    let mut out = Vec::new();
    for (uid, policy) in &universe.deleted {
        if *policy != PropagationPolicy::Foreground {
            continue;
        }
        let owner = &universe.objects[uid];
        let Some(owner_removed) = removed.get(&owner.key) else {
            continue;
        };
        for dep in universe.objects.values() {
            // A dependent with another owner may rightly lose its ref instead (a solid owner does
            // not let a waiting one block, spec §4.2 step 7), so only sole owners are judged.
            let blocks = matches!(dep.object.owner_references.as_slice(),
                                  [r] if r.uid == *uid && r.block_owner_deletion == Some(true));
            if !blocks || !expected.gone.contains(dep.uid()) {
                continue;
            }
            match removed.get(&dep.key) {
                Some(dep_removed) if dep_removed < owner_removed => {}
                other => out.push(format!(
                    "foreground order broken: {} removed at (incarnation, resourceVersion) {owner_removed:?} before its blocking dependent {} ({other:?})",
                    owner.key, dep.key
                )),
            }
        }
    }
    out
}
