//! `kube-gc sim-apiserver`: the simulated cluster over HTTP, until interrupted.
//!
//! With `--state-file`, the cluster outlives the process: it is restored from the file at start
//! when the file exists, and saved to it once a SIGINT or SIGTERM has stopped the server, so that
//! nothing is saved that a client could still change.

use anyhow::Context;
use kube_gc::api::{Gvr, ObjectMeta, PartialObjectMeta};
use kube_gc_sim::generate::Preset;
use kube_gc_sim::{http, temporary_state_path, SimCluster, DEFAULT_NAMESPACES};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args)]
pub struct SimApiserverArgs {
    /// Address to listen on; port 0 picks a free port. Only loopback addresses unless
    /// --allow-remote.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: std::net::SocketAddr,
    /// Accept a non-loopback --listen address (the server has no authentication).
    #[arg(long)]
    allow_remote: bool,
    /// Start with the preset's cluster, made by the generator that `loadgen generate --preset`
    /// and `kube-gc simulate` use: its listed objects less the garbage-from-the-start cases.
    #[arg(long, value_enum)]
    preset: Option<Preset>,
    /// Seed of the preset's names and UIDs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write a kubeconfig pointing at the server to this path.
    #[arg(long)]
    write_kubeconfig: Option<PathBuf>,
    /// Keep the cluster in this file across restarts: restore it from the file at start when the
    /// file exists (instead of --preset and the default namespaces), and save it there on SIGINT
    /// or SIGTERM.
    #[arg(long)]
    state_file: Option<PathBuf>,
    /// Log every answered request to this file (created or emptied), one JSON line each.
    #[arg(long)]
    audit_log: Option<PathBuf>,
    /// Watch events each type keeps for resuming watches; older resourceVersions get 410 Gone.
    #[arg(long, default_value_t = kube_gc_sim::DEFAULT_HISTORY)]
    watch_history: usize,
    /// Interval of watch bookmarks, for watches that allow them.
    #[arg(long, default_value = "60s", value_parser = kube_gc::duration::parse_positive)]
    bookmark_interval: Duration,
    /// Wait before serving each request: 2ms, 1ms..5ms (uniform) or exp:2ms (exponential mean).
    #[arg(long, default_value = "0s")]
    latency: http::Latency,
    /// Serve at most this many requests per second; the rest get 429 with Retry-After.
    #[arg(long)]
    qps: Option<f64>,
    /// Fail a share of one verb's requests: VERB=RATE[:500|429|timeout], VERB a verb or *;
    /// repeatable.
    #[arg(long = "error-rate")]
    error_rates: Vec<http::ErrorRate>,
    /// How long a request drawing a timeout hangs before its 504.
    #[arg(long, default_value = "5s", value_parser = kube_gc::duration::parse)]
    fault_timeout: Duration,
    /// End every watch after this many events.
    #[arg(long)]
    drop_watch_after_events: Option<usize>,
    /// End every watch after this long.
    #[arg(long, value_parser = kube_gc::duration::parse_positive)]
    drop_watch_after: Option<Duration>,
    /// Never end a watch-list's initial events with their bookmark (k8s.io/initial-events-end),
    /// as a server that ignores sendInitialEvents would.
    #[arg(long)]
    withhold_initial_events_end: bool,
    /// Inject the faults above only into requests whose User-Agent contains this text (e.g.
    /// `kube-gc/`, the collector), so that other clients see a healthy server.
    #[arg(long)]
    fault_target: Option<String>,
    /// Make access reviews (`kubectl auth can-i`) answer "no" for VERB/RESOURCE, either part *
    /// for any; repeatable. Every request is still served.
    #[arg(long = "deny-access-review")]
    denied: Vec<http::Denial>,
    /// A bearer token the server's TokenReview authenticates, as USER=TOKEN (the user in the
    /// group system:authenticated); repeatable. For servers that delegate their authentication,
    /// as `kube-gc run`'s secure port: the simulated server itself asks no one for a token.
    #[arg(long = "token", value_name = "USER=TOKEN")]
    tokens: Vec<http::TokenUser>,
    /// A non-resource path whose `get` the server's SubjectAccessReview allows to a user or group,
    /// as SUBJECT=PATH (PATH exact, or a prefix ending in *); repeatable. Any other non-resource
    /// access is denied.
    #[arg(long = "allow", value_name = "SUBJECT=PATH")]
    grants: Vec<http::PathGrant>,
    /// Feature gates, as NAME=true|false[,…]: `WatchList=false` answers a watch's
    /// sendInitialEvents with 422, as a server with the gate off does; `ShardedListAndWatch=false`
    /// ignores `shardSelector` and echoes no `shardInfo`, as a server older than 1.36 does.
    #[arg(long = "feature-gates", value_parser = parse_feature_gates, default_value = "")]
    feature_gates: FeatureGates,
    /// Serve metadata (`PartialObjectMetadata` and its list, watches of them, and the errors of
    /// those requests) in JSON only, as a server or an aggregated API that offers no protobuf:
    /// a client that asks for protobuf first gets the JSON it names next.
    #[arg(long)]
    no_protobuf: bool,
}

/// The feature gates the simulated server knows.
#[derive(Clone, Debug)]
struct FeatureGates {
    watch_list: bool,
    sharded_list_and_watch: bool,
}

/// `NAME=BOOL[,NAME=BOOL]`; an unknown gate or a value that is not a boolean is refused.
fn parse_feature_gates(text: &str) -> Result<FeatureGates, String> {
    let [watch_list, sharded_list_and_watch] =
        kube_gc::feature_gates::parse(text, [("WatchList", true), ("ShardedListAndWatch", true)])?;
    Ok(FeatureGates {
        watch_list,
        sharded_list_and_watch,
    })
}

pub async fn run(args: SimApiserverArgs) -> anyhow::Result<()> {
    if !args.listen.ip().is_loopback() && !args.allow_remote {
        anyhow::bail!(
            "refusing to listen on {}: not a loopback address, and the server authenticates no one \
             (pass --allow-remote to serve other hosts anyway)",
            args.listen
        );
    }
    let cluster = Arc::new(start_cluster(&args)?);
    let audit = args
        .audit_log
        .as_deref()
        .map(|path| http::AuditLog::create(path).with_context(|| format!("creating the audit log {}", path.display())))
        .transpose()?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    if let Some(path) = &args.write_kubeconfig {
        std::fs::write(path, http::kubeconfig(addr))
            .with_context(|| format!("writing the kubeconfig to {}", path.display()))?;
        eprintln!("kube-gc sim-apiserver: kubeconfig written to {}", path.display());
    }
    // Before the address is announced, so that a client's first signal is handled.
    let shutdown = super::shutdown_signal();
    eprintln!(
        "kube-gc sim-apiserver: serving {} objects on http://{addr}",
        cluster.object_count()
    );
    let options = http::ServerOptions {
        faults: http::HttpFaults {
            latency: args.latency,
            qps: args.qps,
            error_rates: args.error_rates,
            timeout: args.fault_timeout,
            watch_drop_events: args.drop_watch_after_events,
            watch_drop_after: args.drop_watch_after,
            withhold_initial_events_end: args.withhold_initial_events_end,
            target: args.fault_target,
        },
        bookmark_interval: args.bookmark_interval,
        denied: args.denied,
        tokens: args.tokens,
        grants: args.grants,
        watch_list: args.feature_gates.watch_list,
        sharded_list_and_watch: args.feature_gates.sharded_list_and_watch,
        audit,
        protobuf: !args.no_protobuf,
        ..http::ServerOptions::default()
    };
    // Once it returns, the cluster is sealed: a request that outlived the drain cannot change
    // what is saved after its client was told it succeeded.
    http::serve(listener, Arc::clone(&cluster), options, shutdown).await?;
    if let Some(path) = &args.state_file {
        let saved = cluster
            .save_state_file(path)
            .with_context(|| format!("saving the cluster's state to {}", path.display()))?;
        eprintln!("kube-gc sim-apiserver: saved {saved} objects to {}", path.display());
    }
    eprintln!("kube-gc sim-apiserver: stopped");
    Ok(())
}

/// The cluster to serve: the one the state file holds, or a new one with the default namespaces
/// and the preset's objects.
/// Either way, a create in a namespace that does not exist is refused, as on a real cluster.
fn start_cluster(args: &SimApiserverArgs) -> anyhow::Result<SimCluster> {
    if let Some(path) = &args.state_file {
        if let Some(cluster) = restore(path, args)? {
            cluster.enforce_namespaces(true);
            return Ok(cluster);
        }
        check_writable(path)?;
    }
    let cluster = SimCluster::with_history(args.watch_history);
    cluster.enforce_namespaces(true);
    for namespace in DEFAULT_NAMESPACES {
        let meta = ObjectMeta {
            name: namespace.into(),
            ..Default::default()
        };
        cluster.create(
            &Gvr::new("", "v1", "namespaces"),
            PartialObjectMeta {
                metadata: meta,
                ..Default::default()
            },
        )?;
    }
    if let Some(preset) = args.preset {
        // Settled: a served cluster starts with nothing for a collector to do, so that whatever
        // a collector deletes is the consequence of what a client did.
        let topology = preset.topology().settled();
        eprintln!("kube-gc sim-apiserver: creating {} objects", topology.objects());
        kube_gc_sim::simulate::populate_cluster(&cluster, &topology, args.seed, |_| {})?;
    }
    Ok(cluster)
}

/// The cluster saved at `path`, or `None` when there is no such file.
fn restore(path: &Path, args: &SimApiserverArgs) -> anyhow::Result<Option<SimCluster>> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("opening the state file {}", path.display())),
    };
    if args.preset.is_some() {
        anyhow::bail!(
            "--preset cannot be used with the existing state file {}: the cluster is restored from it \
             (remove the file to start from the preset)",
            path.display()
        );
    }
    let cluster = SimCluster::load_state(file, args.watch_history)
        .with_context(|| format!("restoring the cluster from the state file {}", path.display()))?;
    eprintln!(
        "kube-gc sim-apiserver: restored {} objects at resourceVersion {} from {}",
        cluster.object_count(),
        cluster.resource_version(),
        path.display()
    );
    Ok(Some(cluster))
}

/// Fails now, rather than after a whole run, when the state could not be saved at `path`.
fn check_writable(path: &Path) -> anyhow::Result<()> {
    let temporary = temporary_state_path(path);
    File::create(&temporary).with_context(|| format!("the state file {} cannot be written", path.display()))?;
    std::fs::remove_file(&temporary).with_context(|| format!("removing {}", temporary.display()))
}
