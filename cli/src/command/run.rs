//! `kube-gc run`: the garbage collector against a cluster, until SIGINT or SIGTERM.
//!
//! The cluster is the one a kubeconfig names (`--kubeconfig`, else `$KUBECONFIG` or
//! `~/.kube/config`), or the pod's own when running inside one; a simulated API server's written
//! kubeconfig works the same way. The collector reports its progress in the log every
//! `--report-every`, and serves its [endpoints](kube_gc_cli::server) as [`super::serving`] says: HTTPS
//! with delegated authentication and authorization on `--secure-port`, plain HTTP on a loopback
//! `--insecure-bind-address` if asked.
//!
//! With `--leader-elect` the replica first stands by until it holds the Lease
//! ([`LeaderElector`]), collects while it keeps it, and exits with an error if it loses it, as
//! kube-controller-manager does; a graceful stop releases the lease for the next replica.

use anyhow::Context;
use kube_gc::api::layers::{self, Budget, Budgets, Fence};
use kube_gc::api::{KubeApi, Wire};
use kube_gc::audit::AuditConfig;
use kube_gc::controller::{Config, GarbageCollector, GroupResource};
use kube_gc::journal::{FileConfig, Journal, JournalConfig};
use kube_gc::leader::{LeaderElector, LeaseConfig, Tenure, WallClock};
use kube_gc::migrator::MigratorConfig;
use kube_gc::monitor::SyncMode;
use kube_gc::queue::RateLimiterConfig;
use kube_gc::shard::membership::{lease_name, Assignment, Collecting, Membership};
use kube_gc::shard::Shard;
use kube_gc_cli::server::Slot;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args)]
pub struct RunArgs {
    /// Kubeconfig of the cluster; default: `$KUBECONFIG`, `~/.kube/config`, then in-cluster.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Collector workers (also `--concurrent-gc-syncs`, kube-controller-manager's name).
    #[arg(long, visible_alias = "concurrent-gc-syncs", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    workers: u64,
    /// Graph builder partitions; default: the available cores.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    partitions: Option<u64>,
    /// A resource never monitored nor collected, as RESOURCE or RESOURCE.GROUP; repeatable.
    /// Default: events and events.events.k8s.io, as kube-controller-manager ignores them.
    #[arg(long = "ignored-resource")]
    ignored_resources: Vec<GroupResource>,
    /// Requests per second of the collector workers (GET, PATCH, DELETE, Events), as
    /// kube-controller-manager's collector client: its --kube-api-qps of 20, doubled.
    #[arg(long, default_value_t = Budget::WORKERS.qps, value_parser = kube_gc::rate::parse_qps)]
    kube_api_qps: f64,
    /// Worker requests let through at once after a quiet spell.
    #[arg(long, default_value_t = Budget::WORKERS.burst, value_parser = clap::value_parser!(u32).range(1..))]
    kube_api_burst: u32,
    /// Requests per second of discovery, which notices new resources (CRDs) every
    /// --resource-sync-period; a budget of its own, so a worker backlog never delays it.
    #[arg(long, default_value_t = Budget::CONTROLLER_MANAGER.qps, value_parser = kube_gc::rate::parse_qps)]
    discovery_qps: f64,
    /// Discovery requests let through at once.
    #[arg(long, default_value_t = Budget::CONTROLLER_MANAGER.burst, value_parser = clap::value_parser!(u32).range(1..))]
    discovery_burst: u32,
    /// Requests per second of the monitors' lists and watches, a budget of their own.
    #[arg(long, default_value_t = Budget::CONTROLLER_MANAGER.qps, value_parser = kube_gc::rate::parse_qps)]
    monitor_qps: f64,
    /// Monitor requests let through at once.
    #[arg(long, default_value_t = Budget::CONTROLLER_MANAGER.burst, value_parser = clap::value_parser!(u32).range(1..))]
    monitor_burst: u32,
    /// Requests per second of leader election, a budget of its own, so a renewal never waits
    /// behind the collector's requests.
    #[arg(long, default_value_t = Budget::CONTROLLER_MANAGER.qps, value_parser = kube_gc::rate::parse_qps)]
    leader_elect_qps: f64,
    /// Leader election requests let through at once.
    #[arg(long, default_value_t = Budget::CONTROLLER_MANAGER.burst, value_parser = clap::value_parser!(u32).range(1..))]
    leader_elect_burst: u32,
    /// Retries the work queues let through per second, shared by all items (the global bucket of
    /// the client-go controller rate limiter, 10). After an API server outage every item that
    /// failed waits its turn here, so a large cluster recovers faster with a higher value; the
    /// load on the server stays bounded by --kube-api-qps. 0 leaves only the per-item backoff.
    #[arg(long, default_value_t = RateLimiterConfig::default().qps)]
    retry_qps: f64,
    /// Retries let through at once after a quiet spell (the same bucket's size, 100).
    #[arg(long, default_value_t = RateLimiterConfig::default().burst)]
    retry_burst: u32,
    /// How often discovery is read again, to monitor new resources (CRDs) and stop monitoring
    /// removed ones; kube-controller-manager's is a fixed 30 s.
    #[arg(long, default_value = "30s", value_parser = kube_gc::duration::parse_positive)]
    resource_sync_period: Duration,
    /// Where the endpoints are served: the graph dump, /explain, /metrics, /healthz, /readyz.
    #[command(flatten)]
    pub(super) serving: super::serving::ServingArgs,
    /// Collect only while holding a coordination.k8s.io Lease, so that one of several replicas
    /// collects at a time.
    #[arg(long)]
    pub(super) leader_elect: bool,
    /// How long a lease lasts without renewal.
    #[arg(long, default_value = "15s", value_parser = kube_gc::duration::parse_positive)]
    leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops collecting.
    #[arg(long, default_value = "10s", value_parser = kube_gc::duration::parse_positive)]
    leader_elect_renew_deadline: Duration,
    /// How often to try to acquire or renew the lease.
    #[arg(long, default_value = "2s", value_parser = kube_gc::duration::parse_positive)]
    leader_elect_retry_period: Duration,
    /// Name of the Lease.
    #[arg(long, default_value = "kube-gc")]
    leader_elect_resource_name: String,
    /// Writes and reads Lease times by a wall clock this far ahead of the system's (behind with
    /// a leading `-`): for testing that no decision rests on replicas' clocks agreeing.
    #[arg(long, hide = true, default_value = "0", allow_hyphen_values = true, value_parser = kube_gc::leader::parse_skew)]
    clock_skew: k8s_openapi::jiff::SignedDuration,
    /// Namespace of the Lease.
    #[arg(long, default_value = "kube-system")]
    leader_elect_resource_namespace: String,
    /// Collect a shard of the cluster beside other replicas: `auto` takes ranges of the namespace
    /// hash by a consistent hash ring over the replicas' Leases; INDEX/COUNT takes a fixed slice.
    /// Each replica holds a Lease of its own in --leader-elect-resource-namespace, timed by the
    /// --leader-elect-* flags (see docs/sharding.md).
    #[arg(long, value_name = "auto|INDEX/COUNT", conflicts_with_all = ["leader_elect", "dry_run"])]
    shards: Option<Assignment>,
    /// The group of replicas that share the cluster: their Leases carry this label value.
    #[arg(long, default_value = "kube-gc")]
    shard_group: String,
    /// Feature gates, as NAME=true|false[,…], as kube-controller-manager takes them:
    /// `WatchListClient=false` makes the monitors read their resources by paginated LIST instead
    /// of a streaming watch-list.
    #[arg(long = "feature-gates", value_name = "FEATURE_GATES", value_parser = SyncMode::from_feature_gates, default_value = "")]
    sync_mode: SyncMode,
    /// What the collector asks the API server for, as kube-controller-manager's flag names it:
    /// `application/vnd.kubernetes.protobuf` (metadata in protobuf, JSON from a server that
    /// offers none) or `application/json`.
    #[arg(long, value_name = "CONTENT_TYPE", default_value = "application/vnd.kubernetes.protobuf", value_parser = wire_of)]
    kube_api_content_type: Wire,
    /// Shadow mode: read the cluster, build the graph and run the workers, but send no write;
    /// each write the collector would make goes to the journal instead, with the writes other
    /// collectors are seen making, for `kube-gc shadow-report`.
    #[arg(long, conflicts_with = "leader_elect")]
    dry_run: bool,
    /// Append every write (DELETE, orphaning patch, ref removal, unblocking, finalizer removal)
    /// to this file as a JSON line, with its reasons; the latest lines are also at
    /// /debug/journal.
    #[arg(long, value_name = "PATH")]
    journal: Option<PathBuf>,
    /// Size in MiB after which the journal file is rotated to PATH.1, PATH.2, ….
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    journal_max_size_mb: u64,
    /// Rotated journal files kept besides the current one.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=1000))]
    journal_max_files: u64,
    /// Also post a Kubernetes Event (reason DependentDeleted) on the owners of every object
    /// the collector deletes.
    #[arg(long)]
    journal_owner_events: bool,
    /// How long work may wait on the collector with nothing completed, while the API server
    /// answers, before it reports a stall: kube_gc_stalled 1, a warning in the log, and the
    /// default threshold of /debug/stuck.
    #[arg(long, default_value = "10m", value_parser = kube_gc::duration::parse_positive)]
    stall_after: Duration,
    /// How often to audit the graph against the API server: each round reads a sample of graph
    /// nodes (100 GETs) and one list page (100 objects), and repairs drift that outlives the
    /// watch lag (see docs/operating.md, "Churn, downtime and audit"). 0 (the default) turns the audit off.
    #[arg(long, default_value = "0", value_parser = kube_gc::duration::parse)]
    audit_period: Duration,
    /// Run the storage version migrator (storagemigration.k8s.io) beside the collector, as
    /// kube-controller-manager runs it on its collector's graph; it idles while the API server
    /// does not serve StorageVersionMigrations. `--storage-version-migrator=false` turns it off.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    storage_version_migrator: bool,
    /// Requests per second of the storage version migrator's rewrites and status writes, a budget
    /// of its own, so a migration never delays the collector (kube-controller-manager's client: 20).
    #[arg(long, default_value_t = Budget::CONTROLLER_MANAGER.qps, value_parser = kube_gc::rate::parse_qps)]
    migrator_qps: f64,
    /// Migrator requests let through at once.
    #[arg(long, default_value_t = Budget::CONTROLLER_MANAGER.burst, value_parser = clap::value_parser!(u32).range(1..))]
    migrator_burst: u32,
    /// Rewrites one migration keeps in flight at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=256))]
    migrator_concurrency: u64,
    /// How often to log the graph's size and the queues' lengths.
    #[arg(long, default_value = "30s", value_parser = kube_gc::duration::parse_positive)]
    report_every: Duration,
    #[command(flatten)]
    collector: super::CollectorArgs,
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let identity = kube_gc::leader::default_identity();
    let lease = args.lease(&identity)?;
    let cert = args.serving.certificate()?;
    // A journal that cannot be written fails the start before the cluster is reached.
    let journal = args.journal()?;
    // The identity in the User-Agent tells replicas apart in the API server's audit log.
    let agent = format!("kube-gc/{} ({identity})", env!("CARGO_PKG_VERSION"));
    let client = kube_gc::api::connect(args.kubeconfig.as_deref(), &agent).await?;
    // The migrator's requests carry a User-Agent of their own, as each of kube-controller-manager's
    // controllers' do, so that an audit log tells them from the collector's.
    let migrator_agent = format!("{agent}/{}", kube_gc::migrator::FIELD_MANAGER);
    let migrator_client = kube_gc::api::connect(args.kubeconfig.as_deref(), &migrator_agent).await?;
    let version = client.apiserver_version().await.context("reaching the API server")?;
    eprintln!("kube-gc run: API server {}", version.git_version);
    let mut config = Config {
        workers: usize::try_from(args.workers).context("--workers")?,
        partitions: match args.partitions {
            Some(p) => usize::try_from(p).context("--partitions")?,
            None => kube_gc::controller::default_partitions(),
        },
        collector: args.collector.config(),
        sync_period: args.resource_sync_period,
        rate_limiter: RateLimiterConfig {
            qps: args.retry_qps,
            burst: args.retry_burst,
            ..RateLimiterConfig::default()
        },
        sync_mode: args.sync_mode,
        stall_after: args.stall_after,
        audit: (!args.audit_period.is_zero()).then(|| AuditConfig::every(args.audit_period)),
        ..Config::default()
    };
    if !args.ignored_resources.is_empty() {
        config.ignored_resources = args.ignored_resources.clone();
    }
    config.journal = journal;
    if args.dry_run {
        eprintln!("kube-gc run: {identity} in shadow mode: no write will be sent; decisions go to the journal");
    }
    if let Some(assignment) = args.shards.clone() {
        let lease = args.shard_lease(&identity)?;
        // Ready only while collecting its ranges on synced monitors, not while they change hands.
        let slot = Slot::starting();
        args.serving.start(cert, slot.clone(), &client, &agent).await?;
        return run_sharded(&args, (client, migrator_client, slot), config, (lease, assignment)).await;
    }
    let slot = if lease.is_some() {
        Slot::standing_by()
    } else {
        Slot::starting()
    };
    args.serving.start(cert, slot.clone(), &client, &agent).await?;
    let shutdown = super::shutdown_signal();
    tokio::pin!(shutdown);
    let mut elector = lease.map(|lease| LeaderElector::over_kube(client.clone(), lease));
    if let Some(elector) = &mut elector {
        eprintln!("kube-gc run: {identity} standing by for the leader lease");
        tokio::select! {
            () = elector.acquire() => eprintln!("kube-gc run: leading"),
            () = &mut shutdown => return Ok(()),
        }
    }
    let fence = match &elector {
        Some(elector) => tenure_fence(elector.tenure()),
        None if args.dry_run => Fence::closed(),
        None => Fence::open(),
    };
    let api = layers::stack(
        KubeApi::with_wire(client, args.kube_api_content_type),
        args.budgets(),
        fence.clone(),
    );
    let gc = GarbageCollector::start(Arc::new(api), config).await;
    slot.fill(gc.clone());
    args.start_migrator(&gc, migrator_client, fence);
    let lost = async {
        match &mut elector {
            Some(elector) => elector.hold().await,
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        () = &mut shutdown => Ok(()),
        () = report(&gc, args.report_every) => Ok(()),
        () = lost => Err(anyhow::anyhow!("lost the leader lease; stopping so that only the new leader collects")),
    };
    eprintln!("kube-gc run: shutting down");
    gc.shutdown().await;
    gc.journal().flush();
    if let (Ok(()), Some(elector)) = (&outcome, &mut elector) {
        elector.release().await?;
    }
    outcome
}

/// A collector on one shard's ranges, as [`Membership`] drives it.
struct Running {
    gc: Arc<GarbageCollector<layers::Stack<KubeApi>>>,
    slot: Arc<Slot<layers::Stack<KubeApi>>>,
    reporter: tokio::task::JoinHandle<()>,
}

impl Collecting for Running {
    async fn stop(&self) {
        self.reporter.abort();
        self.slot.clear();
        self.gc.shutdown().await;
        self.gc.journal().flush();
    }

    fn report(&self) -> kube_gc::shard::Report {
        self.gc.report()
    }
}

/// `kube-gc run --shards`: collects the ranges [`Membership`] assigns this replica until a
/// signal, then leaves the group so that the peers take them over at once.
async fn run_sharded(
    args: &RunArgs,
    (client, migrator_client, slot): (kube::Client, kube::Client, Arc<Slot<layers::Stack<KubeApi>>>),
    config: Config,
    (lease, assignment): (LeaseConfig, Assignment),
) -> anyhow::Result<()> {
    eprintln!(
        "kube-gc run: {} joins the shard group {:?} (Lease {}/{})",
        lease.identity, args.shard_group, lease.namespace, lease.name
    );
    let mut membership = Membership::new(client.clone(), lease, &args.shard_group, assignment);
    let fence = tenure_fence(membership.elector().tenure());
    let api = Arc::new(layers::stack(
        KubeApi::with_wire(client.clone(), args.kube_api_content_type),
        args.budgets(),
        fence.clone(),
    ));
    let every = args.report_every;
    let start = |shard: Arc<Shard>| {
        let (api, slot, client, fence) = (api.clone(), slot.clone(), migrator_client.clone(), fence.clone());
        let config = Config {
            shard,
            ..config.clone()
        };
        async move {
            eprintln!("kube-gc run: collecting {} of the hash space", config.shard.ranges());
            let gc = GarbageCollector::start(api, config).await;
            slot.fill(gc.clone());
            let reporter = tokio::spawn({
                let gc = gc.clone();
                async move { report(&gc, every).await }
            });
            args.start_migrator(&gc, client, fence);
            Arc::new(Running { gc, slot, reporter })
        }
    };
    let shutdown = super::shutdown_signal();
    tokio::select! {
        () = membership.run(start) => {}
        () = shutdown => {}
    }
    eprintln!("kube-gc run: shutting down; leaving the shard group");
    membership.leave().await;
    Ok(())
}

/// A fence open while `tenure` lasts: the writes of a replica that may have lost its Lease stop
/// before another replica can act on what it held.
/// `--kube-api-content-type`: a media type, as kube-controller-manager's flag takes it.
fn wire_of(content_type: &str) -> Result<Wire, String> {
    match content_type {
        "application/vnd.kubernetes.protobuf" => Ok(Wire::Protobuf),
        "application/json" => Ok(Wire::Json),
        other => Err(format!(
            "{other:?} is neither application/vnd.kubernetes.protobuf nor application/json"
        )),
    }
}

fn tenure_fence(tenure: Tenure) -> Fence {
    Fence::new(move || tenure.is_current())
}

/// Logs the collector's progress every `every`; never returns.
async fn report(gc: &GarbageCollector<layers::Stack<KubeApi>>, every: Duration) {
    let mut every = tokio::time::interval(every);
    loop {
        every.tick().await;
        let monitors = gc.monitor_statuses();
        let synced = monitors.values().filter(|s| s.is_synced()).count();
        let blind: Vec<String> = monitors
            .iter()
            .filter(|(_, s)| !s.is_complete())
            .map(|(gvr, s)| format!("{gvr} ({})", if s.is_synced() { "relisting" } else { "not synced" }))
            .collect();
        let blind = if blind.is_empty() {
            String::new()
        } else {
            format!("; incomplete views: {}", blind.join(", "))
        };
        let migrating: String = gc
            .migrations()
            .active()
            .iter()
            .map(|m| {
                let f = m.figures;
                match m.waiting_for.as_str() {
                    "" => format!(
                        "; migrating {} ({}): {}/{}",
                        m.resource,
                        m.name,
                        f.rewritten + f.skipped,
                        f.total
                    ),
                    why => format!("; migration {} ({}) waits: {why}", m.name, m.resource),
                }
            })
            .collect();
        eprintln!(
            "kube-gc run: {} objects in the graph, {synced}/{} resources synced, {} to delete, {} to orphan, {} waiting for views{blind}{migrating}{}",
            gc.graph().len(),
            monitors.len(),
            gc.attempt_to_delete().len(),
            gc.attempt_to_orphan().len(),
            gc.waiting().len(),
            gc.stall_status(),
        );
    }
}

impl RunArgs {
    /// Starts the storage version migrator beside `gc`, unless turned off, with a client of its
    /// own over `client`: its own budget, behind the collector's `fence`. It stops with `gc`.
    fn start_migrator(&self, gc: &GarbageCollector<layers::Stack<KubeApi>>, client: kube::Client, fence: Fence) {
        // Shadow mode writes nothing, and a migration is nothing but writes.
        if !self.storage_version_migrator || self.dry_run {
            return;
        }
        let budget = Budget {
            qps: self.migrator_qps,
            burst: self.migrator_burst,
        };
        let api = layers::stack(
            KubeApi::with_wire(client, self.kube_api_content_type),
            Budgets::new(budget, budget, budget),
            fence,
        );
        let config = MigratorConfig {
            concurrency: self.migrator_concurrency as usize,
            ..MigratorConfig::default()
        };
        gc.start_migrator(Arc::new(api), config);
    }

    /// The client-side rate limits of discovery, the monitors and the workers.
    fn budgets(&self) -> Budgets {
        Budgets::new(
            Budget {
                qps: self.discovery_qps,
                burst: self.discovery_burst,
            },
            Budget {
                qps: self.monitor_qps,
                burst: self.monitor_burst,
            },
            Budget {
                qps: self.kube_api_qps,
                burst: self.kube_api_burst,
            },
        )
    }

    /// The journal the flags ask for.
    fn journal(&self) -> anyhow::Result<Journal> {
        let file = self.journal.as_ref().map(|path| FileConfig {
            path: path.clone(),
            max_bytes: self.journal_max_size_mb << 20,
            max_files: self.journal_max_files as usize,
        });
        let config = JournalConfig {
            file,
            dry_run: self.dry_run,
            owner_events: self.journal_owner_events,
        };
        let path = self.journal.clone().unwrap_or_default();
        Journal::open(config).with_context(|| format!("opening --journal {}", path.display()))
    }

    /// This replica's own Lease in the shard group.
    fn shard_lease(&self, identity: &str) -> anyhow::Result<LeaseConfig> {
        self.lease_config(lease_name(&self.shard_group, identity), identity)
    }

    /// The lease to elect a leader with, when `--leader-elect`.
    fn lease(&self, identity: &str) -> anyhow::Result<Option<LeaseConfig>> {
        if !self.leader_elect {
            return Ok(None);
        }
        self.lease_config(self.leader_elect_resource_name.clone(), identity)
            .map(Some)
    }

    /// The Lease `name` held as `identity`, timed and rate-limited by the `--leader-elect-*` flags.
    fn lease_config(&self, name: String, identity: &str) -> anyhow::Result<LeaseConfig> {
        let lease = LeaseConfig {
            namespace: self.leader_elect_resource_namespace.clone(),
            name,
            identity: identity.to_string(),
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
            budget: Budget {
                qps: self.leader_elect_qps,
                burst: self.leader_elect_burst,
            },
            clock: WallClock::system().skewed(self.clock_skew),
        };
        lease.check().map_err(anyhow::Error::msg)?;
        Ok(lease)
    }
}
