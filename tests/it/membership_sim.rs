//! The shard Lease protocol (`kube_gc::shard::membership`) as a deterministic simulation.
//!
//! Several replicas run [`Membership`] rounds against one simulated API server, in process and on
//! tokio's paused clock, each through a [`Link`] of its own: a seeded latency on every request,
//! and switches that freeze the replica (as SIGSTOP does: nothing it has not sent yet leaves it
//! until it thaws) or cut it off from the server (its requests fail). A seed draws the schedule of
//! faults: freezes past the Lease duration, partitions, kills, and restarts under a new identity;
//! and each replica's wall clock, which follows tokio's and is set off by up to
//! [`MAX_CLOCK_SKEW`] either way, so that Leases age in virtual time and no two replicas agree on
//! the time.
//! Each replica's collector is a [`Writer`]: while its ranges are its own and its tenure is
//! current (the fence), it writes to every namespace of its ranges every [`WRITE_EVERY`], and each
//! write reaches the server after the link's latency, however the replica fares meanwhile.
//!
//! Invariants, checked at every write as it reaches the server and at the end:
//! - **one writer a namespace**: once a collector instance has written to a namespace, no
//!   instance started before it writes there again;
//! - **a stable membership covers the cluster once**: when the faults are over and a few Lease
//!   durations have passed, the running collectors' ranges are disjoint, cover the whole hash
//!   space, and every one of them writes.
//!
//! `MEMBERSHIP_SEEDS=N` runs N seeds (default: a few, for CI); `MEMBERSHIP_SEED=S` replays one.

use k8s_openapi::jiff::SignedDuration;
use kube_gc::api::layers::Budget;
use kube_gc::leader::{LeaseConfig, WallClock};
use kube_gc::shard::membership::{lease_name, Assignment, Collecting, Membership};
use kube_gc::shard::{Hold, Ranges, Report, Shard};
use kube_gc_sim::SimCluster;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The group's namespaces: what the replicas split, and what their writers write to.
const NAMESPACES: usize = 48;
/// How often a collector writes to each of its namespaces.
const WRITE_EVERY: Duration = Duration::from_millis(250);
/// The longest a request takes on a link; well under the protocol's handoff margin.
const MAX_LATENCY_MS: u64 = 400;
/// How long the faults go on, and how long the membership is then given to settle.
const FAULTS_FOR: Duration = Duration::from_secs(150);
const SETTLE_FOR: Duration = Duration::from_secs(90);

fn namespaces_gvr() -> kube_gc::api::Gvr {
    kube_gc::api::Gvr::new("", "v1", "namespaces")
}

/// The furthest a replica's wall clock is off, either way: twice the Lease duration and the
/// handoff margin.
const MAX_CLOCK_SKEW: Duration = Duration::from_secs(40);

/// A replica's Lease, written and judged by `clock`.
fn lease_config(identity: &str, clock: WallClock) -> LeaseConfig {
    LeaseConfig {
        namespace: "kube-system".into(),
        name: lease_name("sim", identity),
        identity: identity.into(),
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
        budget: Budget { qps: 50.0, burst: 100 },
        clock,
    }
}

/// The wall clock of the replica whose link's seed is `seed`: tokio's, off by a seeded skew.
fn skewed_clock(seed: u64) -> WallClock {
    let bound = MAX_CLOCK_SKEW.as_millis() as i64;
    let skew = StdRng::seed_from_u64(seed ^ 0x5eed_c10c).gen_range(-bound..=bound);
    WallClock::following_tokio().skewed(SignedDuration::from_millis(skew))
}

/// One replica's way to the server; see the [module docs](self).
struct Link {
    rng: Mutex<StdRng>,
    frozen: tokio::sync::watch::Sender<bool>,
    cut: AtomicBool,
}

impl Link {
    fn new(seed: u64) -> Arc<Link> {
        Arc::new(Link {
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            frozen: tokio::sync::watch::channel(false).0,
            cut: AtomicBool::new(false),
        })
    }

    fn latency(&self) -> Duration {
        Duration::from_millis(self.rng.lock().gen_range(0..=MAX_LATENCY_MS))
    }

    /// Returns once the replica is not frozen.
    async fn thawed(&self) {
        let mut frozen = self.frozen.subscribe();
        let _ = frozen.wait_for(|f| !*f).await;
    }

    fn freeze(&self, frozen: bool) {
        self.frozen.send_replace(frozen);
    }
}

/// `future`, run only while `link` is not frozen: a frozen replica's tasks are not polled, so,
/// as under SIGSTOP, the replica does nothing at all, and on thawing finds every timer it was
/// waiting on expired, racing whatever else became ready.
fn freezable<F>(future: F, link: Arc<Link>) -> impl Future<Output = F::Output> + Send
where
    F: Future + Send + 'static,
{
    let mut future = Box::pin(future);
    let mut thawing: Option<Pin<Box<dyn Future<Output = ()> + Send>>> = None;
    std::future::poll_fn(move |cx| loop {
        if let Some(thaw) = thawing.as_mut() {
            match thaw.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) => thawing = None,
            }
        }
        if *link.frozen.borrow() {
            let link = link.clone();
            thawing = Some(Box::pin(async move { link.thawed().await }));
            continue;
        }
        return future.as_mut().poll(cx);
    })
}

/// A kube client whose requests go through `link` to the server's router, without a socket.
fn client_over(router: axum::Router, link: Arc<Link>) -> kube::Client {
    use tower::ServiceExt;
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let (router, link) = (router.clone(), link.clone());
        async move {
            tokio::time::sleep(link.latency()).await;
            if link.cut.load(Ordering::SeqCst) {
                return Err::<http::Response<axum::body::Body>, std::io::Error>(std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    "partitioned from the API server",
                ));
            }
            let response = router.oneshot(request.map(axum::body::Body::new)).await;
            Ok(response.unwrap_or_else(|never| match never {}))
        }
    });
    kube::Client::new(service, "default")
}

/// Every write that reached the server, judged as it arrives.
#[derive(Default)]
struct Ledger {
    /// By namespace: the collector instance that wrote last.
    last: BTreeMap<String, u64>,
    /// By instance: the last time it wrote.
    wrote_at: BTreeMap<u64, Instant>,
    violations: Vec<String>,
    writes: u64,
}

impl Ledger {
    fn arrive(&mut self, namespace: &str, instance: u64) {
        self.writes += 1;
        self.wrote_at.insert(instance, Instant::now());
        let last = self.last.entry(namespace.to_string()).or_insert(instance);
        if instance < *last {
            self.violations.push(format!(
                "{namespace}: collector {instance} wrote after collector {last}, which started later, had written there"
            ));
        }
        *last = (*last).max(instance);
    }
}

/// A replica's collector in the simulation; see the [module docs](self).
struct Writer {
    shard: Arc<Shard>,
    instance: u64,
    stopping: AtomicBool,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Collecting for Writer {
    async fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        let task = self.task.lock().take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    fn report(&self) -> Report {
        self.shard.report_on(&kube_gc::graph::Graph::new())
    }
}

struct World {
    cluster: Arc<SimCluster>,
    router: axum::Router,
    ledger: Arc<Mutex<Ledger>>,
    instances: AtomicU64,
    namespaces: Vec<String>,
}

/// One replica: its link, its membership task, its running collectors.
struct Replica {
    link: Arc<Link>,
    task: JoinHandle<()>,
    running: Arc<Mutex<Vec<Arc<Writer>>>>,
}

impl World {
    fn new() -> Arc<World> {
        let cluster = Arc::new(SimCluster::new());
        let namespaces: Vec<String> = (0..NAMESPACES).map(|i| format!("tenant-{i}")).collect();
        crate::support::create_in(
            &cluster,
            &namespaces_gvr(),
            crate::support::meta("", "kube-system", vec![]),
        );
        for namespace in &namespaces {
            crate::support::create_in(&cluster, &namespaces_gvr(), crate::support::meta("", namespace, vec![]));
        }
        let router = kube_gc_sim::http::router(cluster.clone(), Default::default());
        Arc::new(World {
            cluster,
            router,
            ledger: Arc::default(),
            instances: AtomicU64::new(0),
            namespaces,
        })
    }

    fn start_replica(self: &Arc<Self>, identity: &str, seed: u64) -> Replica {
        let link = Link::new(seed);
        let client = client_over(self.router.clone(), link.clone());
        let mut membership = Membership::<Writer>::new(
            client,
            lease_config(identity, skewed_clock(seed)),
            "sim",
            Assignment::Auto,
        );
        let tenure = membership.elector().tenure();
        let running: Arc<Mutex<Vec<Arc<Writer>>>> = Arc::default();
        let (world, writers, writer_link) = (self.clone(), running.clone(), link.clone());
        let task = tokio::spawn(freezable(
            async move {
                membership
                    .run(move |shard: Arc<Shard>| {
                        let instance = world.instances.fetch_add(1, Ordering::SeqCst) + 1;
                        let writer = Arc::new(Writer {
                            shard: shard.clone(),
                            instance,
                            stopping: AtomicBool::new(false),
                            task: Mutex::new(None),
                        });
                        let namespaces: Vec<String> = world
                            .namespaces
                            .iter()
                            .filter(|n| shard.ranges().holds_namespace(n))
                            .cloned()
                            .collect();
                        let (w, ledger, link, tenure) = (
                            writer.clone(),
                            world.ledger.clone(),
                            writer_link.clone(),
                            tenure.clone(),
                        );
                        let frozen_with = link.clone();
                        *writer.task.lock() = Some(tokio::spawn(freezable(
                            async move {
                                while !w.stopping.load(Ordering::SeqCst) {
                                    if tenure.is_current() {
                                        for namespace in &namespaces {
                                            send_write(&link, &ledger, namespace.clone(), instance);
                                        }
                                    }
                                    tokio::time::sleep(WRITE_EVERY).await;
                                }
                            },
                            frozen_with,
                        )));
                        writers.lock().push(writer.clone());
                        async move { writer }
                    })
                    .await
            },
            link.clone(),
        ));
        Replica { link, task, running }
    }
}

/// Sends one write: once sent it reaches the server after the link's latency, whatever happens
/// to the replica meanwhile (a killed process's requests are already on the wire).
fn send_write(link: &Arc<Link>, ledger: &Arc<Mutex<Ledger>>, namespace: String, instance: u64) {
    let latency = link.latency();
    let (ledger, cut) = (ledger.clone(), link.cut.load(Ordering::SeqCst));
    tokio::spawn(async move {
        tokio::time::sleep(latency).await;
        if !cut {
            ledger.lock().arrive(&namespace, instance);
        }
    });
}

impl Replica {
    /// The collectors still running: not asked to stop.
    fn live_writers(&self) -> Vec<Arc<Writer>> {
        self.running
            .lock()
            .iter()
            .filter(|w| !w.stopping.load(Ordering::SeqCst))
            .cloned()
            .collect()
    }

    fn kill(&self) {
        self.task.abort();
        for writer in self.running.lock().iter() {
            writer.stopping.store(true, Ordering::SeqCst);
            if let Some(task) = writer.task.lock().take() {
                task.abort();
            }
        }
    }
}

/// One seed's run: three replicas (a fourth joins), the seed's faults for [`FAULTS_FOR`], then
/// [`SETTLE_FOR`] of calm; returns the violations, with the schedule that led to them.
async fn run_seed(seed: u64) -> Result<u64, String> {
    let world = World::new();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut names = (0..).map(|i| format!("replica-{seed}-{i}"));
    let mut replicas: Vec<Replica> = (0..3)
        .map(|i| world.start_replica(&names.next().expect("names"), seed * 100 + i))
        .collect();
    let mut schedule = Vec::new();
    let started = Instant::now();
    while started.elapsed() < FAULTS_FOR {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(1_000..8_000))).await;
        let at = started.elapsed().as_secs();
        let victim = rng.gen_range(0..replicas.len());
        match rng.gen_range(0..10) {
            0..=3 => {
                let pause = Duration::from_millis(rng.gen_range(5_000..40_000));
                schedule.push(format!("{at}s: freeze {victim} for {pause:?}"));
                let link = replicas[victim].link.clone();
                link.freeze(true);
                tokio::spawn(async move {
                    tokio::time::sleep(pause).await;
                    link.freeze(false);
                });
            }
            4..=6 => {
                let cut = Duration::from_millis(rng.gen_range(5_000..40_000));
                schedule.push(format!("{at}s: cut {victim} off for {cut:?}"));
                let link = replicas[victim].link.clone();
                link.cut.store(true, Ordering::SeqCst);
                tokio::spawn(async move {
                    tokio::time::sleep(cut).await;
                    link.cut.store(false, Ordering::SeqCst);
                });
            }
            7 | 8 if replicas.len() > 1 => {
                schedule.push(format!("{at}s: kill {victim}, restart it as a new identity"));
                replicas.remove(victim).kill();
                let name = names.next().expect("names");
                replicas.push(world.start_replica(&name, rng.gen()));
            }
            _ if replicas.len() < 6 => {
                schedule.push(format!("{at}s: a replica joins"));
                let name = names.next().expect("names");
                replicas.push(world.start_replica(&name, rng.gen()));
            }
            _ => {}
        }
    }
    for replica in &replicas {
        replica.link.freeze(false);
        replica.link.cut.store(false, Ordering::SeqCst);
    }
    tokio::time::sleep(SETTLE_FOR).await;

    let mut problems = world.ledger.lock().violations.clone();
    let writers: Vec<Arc<Writer>> = replicas.iter().flat_map(Replica::live_writers).collect();
    let ranges: Vec<&Ranges> = writers.iter().map(|w| w.shard.ranges()).collect();
    for (i, a) in ranges.iter().enumerate() {
        for b in &ranges[i + 1..] {
            if a.intersects(b) {
                problems.push(format!("settled collectors overlap: {a} and {b}"));
            }
        }
    }
    if !Ranges::union(ranges.iter().copied()).is_all() {
        problems.push(format!("settled collectors do not cover the hash space: {ranges:?}"));
    }
    let ledger = world.ledger.lock();
    let recent = Instant::now() - Duration::from_secs(5);
    for w in &writers {
        if !w.shard.ranges().is_empty() && ledger.wrote_at.get(&w.instance).is_none_or(|t| *t < recent) {
            problems.push(format!(
                "settled collector {} ({}) does not write",
                w.instance,
                w.shard.ranges()
            ));
        }
    }
    let writes = ledger.writes;
    drop(ledger);
    println!(
        "seed {seed}: {writes} writes by {} collectors, {} faults",
        world.instances.load(Ordering::SeqCst),
        schedule.len()
    );
    for replica in &replicas {
        replica.kill();
    }
    if problems.is_empty() {
        Ok(writes)
    } else {
        Err(format!(
            "seed {seed}: {}\nschedule:\n  {}",
            problems.join("\n"),
            schedule.join("\n  ")
        ))
    }
}

fn seeds() -> Vec<u64> {
    if let Some(seed) = std::env::var("MEMBERSHIP_SEED").ok().and_then(|s| s.parse().ok()) {
        return vec![seed];
    }
    let count = std::env::var("MEMBERSHIP_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    (1..=count).collect()
}

#[test]
fn the_lease_protocol_should_keep_one_writer_a_namespace_under_every_seed() {
    let mut failures = Vec::new();
    for seed in seeds() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime");
        match runtime.block_on(run_seed(seed)) {
            Ok(writes) => assert!(writes > 0, "seed {seed}: no write reached the server"),
            Err(failure) => failures.push(failure),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A collector whose report is fixed: thousands of owners in deletion.
struct Loaded(Report);

impl Collecting for Loaded {
    async fn stop(&self) {}

    fn report(&self) -> Report {
        self.0.clone()
    }
}

/// The report of a replica with `clear` owners in deletion clear in its ranges and `orphaned`
/// owners orphaned lately.
fn loaded_report(clear: u128, orphaned: u128) -> Report {
    let uid = |i: u128| kube_gc::graph::Uid::new_v4(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c834));
    let mut findings = kube_gc::shard::Findings::default();
    for i in 0..clear {
        let hold = if i % 2 == 0 { Hold::Foreground } else { Hold::Orphan };
        findings.record(uid(i), hold, kube_gc::shard::Finding::Clear);
    }
    let memory = kube_gc::shard::Orphaned::default();
    for i in 0..orphaned {
        memory.record(&uid(clear + i));
    }
    let (clear_foreground, clear_orphan, pending_owners) = findings.published();
    Report {
        clear_foreground,
        clear_orphan,
        pending_owners,
        orphaned: memory.published(),
        ..Report::default()
    }
}

/// The API server refuses an object whose annotations pass 256 KiB, and a replica whose Lease it
/// refuses cannot renew: its report must stay within that bound however many owners are being
/// deleted. With 10 000 the Lease carries every one; with 40 000, the bounded share.
#[tokio::test(start_paused = true)]
async fn a_replica_lease_should_stay_within_the_servers_limits_with_thousands_of_owners_in_deletion() {
    use kube_gc::shard::membership::REPORT_ANNOTATION;
    for (clear, orphaned) in [(10_000u128, 2_000u128), (40_000, 10_000)] {
        let world = World::new();
        let client = client_over(world.router.clone(), Link::new(1));
        let identity = format!("loaded-{clear}");
        let mut membership = Membership::<Loaded>::new(
            client,
            lease_config(&identity, WallClock::following_tokio()),
            "sim",
            Assignment::Fixed(Ranges::slice(0, 2)),
        );
        let report = loaded_report(clear, orphaned);
        let task = tokio::spawn(async move {
            membership
                .run(move |_| {
                    let report = report.clone();
                    async move { Arc::new(Loaded(report)) }
                })
                .await
        });
        tokio::time::sleep(Duration::from_secs(10)).await;
        task.abort();
        let lease = world
            .cluster
            .get_object(
                &kube_gc::api::Gvr::new("coordination.k8s.io", "v1", "leases"),
                "kube-system",
                &lease_name("sim", &identity),
            )
            .expect("the Lease was written");
        let annotations: usize = lease.metadata.annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
        assert!(
            annotations <= kube_gc_sim::limits::TOTAL_ANNOTATION_SIZE,
            "{annotations} bytes"
        );
        let published: Report = serde_json::from_str(&lease.metadata.annotations[REPORT_ANNOTATION]).expect("a report");
        let named = published.clear_foreground.len() + published.clear_orphan.len();
        assert_eq!(named as u128, clear.min(kube_gc::shard::MAX_CLEARED as u128));
        assert_eq!(
            published.orphaned.len() as u128,
            orphaned.min(kube_gc::shard::orphaned::MAX_PUBLISHED as u128)
        );
        println!("{clear} owners in deletion, {orphaned} orphaned: {annotations} bytes of annotations");
    }
}
