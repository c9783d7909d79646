//! The `loadgen` command: generates, records and replays watch streams for kube-gc.

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand, ValueEnum};
use kube_gc::monitor::SyncMode;
use loadgen::curve::{self, CurveOptions, Size};
use loadgen::generate::{self, Amount, Preset, Topology};
use loadgen::memory_probe;
use loadgen::perf_gate::{self, GateOptions};
use loadgen::record;
use loadgen::replay::full::FullOptions;
use loadgen::replay::migration::MigrateOptions;
use loadgen::replay::{self, ReplayOptions};
use loadgen::stream::StreamWriter;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The allocator of the `kube-gc` binary, so that speed and memory figures are the ones it shows.
#[cfg(not(feature = "heap-profile"))]
#[global_allocator]
static GLOBAL: kube_gc::allocator::Allocator = kube_gc::allocator::Allocator;

/// The same, counting its blocks by size (`loadgen::heap_profile`).
#[cfg(feature = "heap-profile")]
#[global_allocator]
static GLOBAL: loadgen::heap_profile::Counting = loadgen::heap_profile::Counting;

/// Generate Kubernetes watch streams for kube-gc.
///
/// Streams are watch events ({"type": "ADDED", "object": {...}}) one JSON value after another:
/// JSON Lines, or indented JSON as `kubectl get --watch --output-watch-events -o json` prints it;
/// a file ending in `.zst` is zstd-compressed.
#[derive(Parser)]
#[command(version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write a synthetic stream: a cluster's objects as ADDED events, then churn and deletions.
    Generate(Box<GenerateArgs>),
    /// Record a real cluster's watch events (metadata only) into a stream that `replay` reads.
    Record(RecordArgs),
    /// Replay a stream into kube-gc and report speed, memory, API calls and outcome.
    Replay(ReplayArgs),
    /// Measure the graph builders at several stream sizes: a table, a JSON report and an SVG.
    Curve(CurveArgs),
    /// Time random memory loads by working-set size: the machine's cost, beside which the curve's
    /// per-event cost at large sizes reads.
    MemoryProbe(MemoryProbeArgs),
    /// CI's performance checks: kube-gc's throughput and p99 against the Go model, and P = 2 over
    /// P = 1, as ratios.
    PerfGate(PerfGateArgs),
    /// One size of `curve`, in a process of its own; prints its rows as JSON.
    #[command(hide = true)]
    CurveSize(CurveSizeArgs),
    /// Time `kube-gc run` syncing a simulated cluster over HTTP, with its peak memory and CPU.
    Sync(SyncArgs),
    /// What each of N sharded `kube-gc run --shards auto` replicas holds, and their takeover time.
    Shards(ShardsArgs),
    /// Time a running collector's plans of a large cascade (`kube-gc plan`), and what asking for
    /// them in a loop costs its graph builders.
    Plan(PlanArgs),
    /// Whether a tenant's hostile objects (long random owner uids, unserved owner kinds, random
    /// namespaces), created and collected in cycles, leave `kube-gc run`'s memory flat.
    Hostile(HostileArgs),
}

#[derive(Args)]
struct ShardsArgs {
    /// The simulated cluster's size (`kube-gc sim-apiserver --preset`).
    #[arg(long, value_enum)]
    preset: Preset,
    /// Replica counts to measure, one run each.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4", value_parser = clap::value_parser!(u16).range(1..=16))]
    replicas: Vec<u16>,
    /// After settling, kill the first replica and time the others' takeover.
    #[arg(long)]
    kill_one: bool,
    /// The kube-gc binary [default: the one beside loadgen].
    #[arg(long)]
    kube_gc: Option<PathBuf>,
    /// Directory for the kubeconfigs and logs [default: a new one under the temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Give up when the simulator is not serving, or the replicas have not settled, after this long.
    #[arg(long, default_value = "5m", value_parser = kube_gc::duration::parse_positive)]
    timeout: Duration,
    /// More flags for `kube-gc run` (after `--`).
    #[arg(last = true)]
    run_args: Vec<String>,
}

#[derive(Args)]
struct CurveSizeArgs {
    /// The size's stream.
    stream: PathBuf,
    /// The size's label.
    #[arg(long)]
    label: String,
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u16).range(1..=256))]
    partitions: Vec<u16>,
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=100))]
    runs: u16,
    #[arg(long)]
    quiet: bool,
}

#[derive(Args)]
struct MemoryProbeArgs {
    /// Working-set sizes in MiB, each rounded down to a power of two.
    #[arg(long, value_delimiter = ',', default_value = "32,256,1024,2048,4096,8192", value_parser = clap::value_parser!(u64).range(1..=1 << 30))]
    mib: Vec<u64>,
    /// Loads timed for each figure.
    #[arg(long, default_value_t = 4_000_000, value_parser = clap::value_parser!(u64).range(1000..=1 << 32))]
    loads: u64,
    /// Write the figures as JSON to this file.
    #[arg(long)]
    report: Option<PathBuf>,
}

#[derive(Args)]
struct CurveArgs {
    /// The stream sizes, replayed smallest first.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "small,1m,5m")]
    presets: Vec<Preset>,
    /// Instead of the presets: streams of the presets' shape at about these object counts (up to
    /// 100M), e.g. 1000000,50000000 for the scale curve to 50M.
    #[arg(long, value_delimiter = ',', conflicts_with = "presets", value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    objects: Vec<u64>,
    /// Seed of every stream.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Partition counts, each replayed on a fresh graph; the ratio is the last's events/s over the
    /// first's.
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_parser = clap::value_parser!(u16).range(1..=256))]
    partitions: Vec<u16>,
    /// Timed rounds per size; above one, the table shows medians and the range of events/s.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=100))]
    runs: u16,
    /// Where streams are kept as `<preset>-seed<seed>.jsonl.zst`, generated when missing.
    #[arg(long, default_value = "target/loadgen-curve")]
    streams_dir: PathBuf,
    /// Write the curve as JSON to this file.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Plot the curve to this SVG file [default: <streams-dir>/curve.svg].
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Replay nothing: print and plot the curve a `--report` file holds.
    #[arg(long, conflicts_with = "report")]
    from_report: Option<PathBuf>,
    /// No progress bars or progress lines.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args)]
struct PerfGateArgs {
    /// Fail when the builders' events/s at P = 2 over the Go model's build events/s (median of
    /// the rounds) is below this.
    #[arg(long, default_value_t = loadgen::perf_gate::DEFAULT_MIN_VS_GO)]
    min_vs_go: f64,
    /// Fail when the Go model's build p99 over the builders' ADDED p99 at P = 1 (median of the
    /// rounds) is below this.
    #[arg(long, default_value_t = loadgen::perf_gate::DEFAULT_MIN_P99_VS_GO)]
    min_p99_vs_go: f64,
    /// Fail when the builders' events/s at P = 2 over P = 1 (median of the rounds) is below this.
    #[arg(long, default_value_t = loadgen::perf_gate::DEFAULT_MIN_SCALING)]
    min_scaling: f64,
    /// The Go model's directory (holding run-model.sh); the gate fails when it cannot run.
    #[arg(long, env = "KUBE_GC_GO_MODEL", default_value = "../shared/anchors/go-graphbuilder")]
    go_model: PathBuf,
    /// Objects in the stream; other sizes than the default are for measuring the gate itself.
    #[arg(long, default_value_t = loadgen::perf_gate::OBJECTS)]
    objects: usize,
    /// Where the stream (seed 7, plain JSON Lines) is kept, generated when missing.
    #[arg(long, default_value = "target/perf-gate")]
    streams_dir: PathBuf,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args)]
struct SyncArgs {
    /// The simulated cluster's size (`kube-gc sim-apiserver --preset`).
    #[arg(long, value_enum)]
    preset: Preset,
    /// Measurements to make, one after the other; more than one prints their median and range.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    runs: u16,
    /// The kube-gc binary [default: the one beside loadgen].
    #[arg(long)]
    kube_gc: Option<PathBuf>,
    /// Directory for each run's kubeconfig and logs [default: a new one under the temporary
    /// directory].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Give up when the simulator is not serving, or the collector not ready, after this long.
    #[arg(long, default_value = "5m", value_parser = kube_gc::duration::parse_positive)]
    timeout: Duration,
    /// More flags for `kube-gc run` (after `--`), e.g. `-- --feature-gates WatchListClient=false`.
    #[arg(last = true)]
    run_args: Vec<String>,
}

#[derive(Args)]
struct PlanArgs {
    /// The simulated cluster's size (`kube-gc sim-apiserver --preset`).
    #[arg(long, value_enum, default_value = "1m")]
    preset: Preset,
    /// Objects of the planned cascade (one Deployment, ReplicaSets of 1 000 Pods).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..))]
    cascade: u32,
    /// The preset's Deployments each of the two phases deletes.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..))]
    deletions: u32,
    /// The kube-gc binary [default: the one beside loadgen].
    #[arg(long)]
    kube_gc: Option<PathBuf>,
    /// Directory for the kubeconfig and logs [default: a new one under the temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Give up when the simulator is not serving, the collector not ready, or a phase not over,
    /// after this long.
    #[arg(long, default_value = "10m", value_parser = kube_gc::duration::parse_positive)]
    timeout: Duration,
    /// More flags for `kube-gc run` (after `--`).
    #[arg(last = true)]
    run_args: Vec<String>,
}

#[derive(Args)]
struct HostileArgs {
    /// The simulated cluster the tenant shares (`kube-gc sim-apiserver --preset`).
    #[arg(long, value_enum, default_value = "small")]
    preset: Preset,
    /// Objects the tenant creates each cycle.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(2..))]
    objects: u32,
    /// Cycles of creation and collection.
    #[arg(long, default_value_t = 11, value_parser = clap::value_parser!(u16).range(2..))]
    cycles: u16,
    /// Name one unserved owner kind in every cycle instead of a new random one per object, to
    /// tell what a new kind costs from what a new object costs.
    #[arg(long)]
    one_owner_kind: bool,
    /// Fail when the collector's resident set grew more than this from the end of the first
    /// cycle to the end of the last.
    #[arg(long, default_value_t = 5.0)]
    max_growth_mib: f64,
    /// The kube-gc binary [default: the one beside loadgen].
    #[arg(long)]
    kube_gc: Option<PathBuf>,
    /// Directory for the kubeconfig and logs [default: a new one under the temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Give up when the simulator is not serving, the collector not ready, or a cycle not done,
    /// after this long.
    #[arg(long, default_value = "10m", value_parser = kube_gc::duration::parse_positive)]
    timeout: Duration,
    /// More flags for `kube-gc run` (after `--`).
    #[arg(last = true)]
    run_args: Vec<String>,
}

/// What a replay drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// The graph builders alone: the stream is decoded first, then applied by one thread per
    /// partition; reports events/s, per-event latency and resident bytes per graph node.
    Builder,
    /// The whole collector against the in-memory simulated cluster: the stream's initial objects
    /// are loaded, its later events replayed as user actions; reports convergence time, API calls
    /// and whether the outcome matches an independent oracle.
    Full,
}

#[derive(Args)]
struct ReplayArgs {
    /// The stream (JSON Lines or kubectl's indented JSON; `.zst` for zstd).
    file: PathBuf,
    /// What to replay into.
    #[arg(long, value_enum)]
    mode: Mode,
    /// Graph builder partitions [default: the available cores].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    partitions: Option<u16>,
    /// Builder mode: replay once per partition count (e.g. 1,2), each on a fresh graph, and report
    /// events/s of each and the ratio of the last to the first.
    #[arg(long, value_delimiter = ',', conflicts_with = "partitions", value_parser = clap::value_parser!(u16).range(1..=256))]
    compare_partitions: Vec<u16>,
    /// Builder mode: decode and apply the stream in segments of this many events, so that the
    /// decoded events held at once stay bounded on a stream of any size.
    #[arg(long, default_value_t = loadgen::replay::builder::SEGMENT, value_parser = clap::value_parser!(u64).range(1..))]
    segment_events: u64,
    /// Full mode: collector workers (also `--concurrent-gc-syncs`, kube-controller-manager's name).
    #[arg(long, visible_alias = "concurrent-gc-syncs", default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..))]
    workers: u16,
    /// Write the report as JSON to this file.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Skip malformed values (counted in the report) instead of stopping at the first one.
    #[arg(long)]
    skip_bad: bool,
    /// Full mode: exit with an error when the outcome differs from the oracle's, or a migration
    /// (`--migrate`) left objects unmigrated.
    #[arg(long)]
    require_outcome_ok: bool,
    /// Full mode: the collector's workers read every item and owner live before acting, as
    /// upstream's do (about two API calls per collected object instead of one).
    #[arg(long)]
    verify_with_get: bool,
    /// Full mode: delay each of the collector's API calls by this long (2ms, 1s), as a network
    /// round trip to an API server would.
    #[arg(long, value_parser = kube_gc::duration::parse_positive)]
    api_latency: Option<Duration>,
    /// Full mode: record every write of the collector in this journal file, as `kube-gc run
    /// --journal` does, to measure what the journal costs.
    #[arg(long)]
    journal: Option<PathBuf>,
    /// Full mode: N collectors split the cluster as `kube-gc run --shards auto` replicas do (each
    /// its ranges of the namespace hash, their findings exchanged), and the outcome is checked
    /// against the same oracle as one collector's.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    shards: u16,
    /// Full mode: give up when the collector has not synced, or not settled, after this long.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
    /// Full mode: run a storage version migration of RESOURCE (or RESOURCE.GROUP) beside the
    /// cascade, as `kube-gc run`'s migrator does, and report its time and the cascade's.
    #[arg(long, value_name = "RESOURCE")]
    migrate: Option<kube_gc::api::GroupResource>,
    /// Full mode with --migrate: objects of the resource added before the collector starts.
    #[arg(long, default_value_t = 0, requires = "migrate")]
    migrate_objects: usize,
    /// Full mode with --migrate: the migrator's requests per second, as `kube-gc run
    /// --migrator-qps` sets them (0: no limit).
    #[arg(long, default_value_t = 0.0, requires = "migrate", value_parser = kube_gc::rate::parse_qps)]
    migrate_qps: f64,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args)]
struct GenerateArgs {
    /// Size to start from: small (~10k objects), 1m (~1M) or 5m (~5M); the topology flags below
    /// override its numbers.
    #[arg(long, value_enum)]
    preset: Preset,
    /// Seed of every random choice: the same seed and flags write the same stream.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// File to write (JSON Lines); a name ending in `.zst` is zstd-compressed.
    #[arg(short, long)]
    output: PathBuf,
    #[command(flatten)]
    topology: TopologyFlags,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args)]
struct RecordArgs {
    /// The cluster's kubeconfig; its current context is used. Plain `http://` servers only: this
    /// build has no TLS.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// File to write (JSON Lines); a name ending in `.zst` is zstd-compressed.
    #[arg(short, long)]
    output: PathBuf,
    /// Stop after this long (30s, 5m, 1h, 1h30m) [default: at Ctrl-C].
    #[arg(long, value_parser = kube_gc::duration::parse_positive)]
    duration: Option<Duration>,
    /// Also record Events (core and events.k8s.io), which the garbage collector ignores.
    #[arg(long)]
    include_events: bool,
    /// Feature gates, as NAME=true|false[,…]: `WatchListClient=false` (kube-controller-manager's
    /// gate) lists each resource, 500 objects a page, and watches from there, instead of
    /// watch-list.
    #[arg(long = "feature-gates", value_parser = SyncMode::from_feature_gates, default_value = "")]
    feature_gates: SyncMode,
    /// No progress spinner.
    #[arg(long)]
    quiet: bool,
}

/// Every number of a [`Topology`], each overriding the preset's when given.
#[derive(Args)]
#[command(next_help_heading = "Topology (each overrides the preset)")]
struct TopologyFlags {
    /// Namespaces.
    #[arg(long)]
    namespaces: Option<usize>,
    /// Deployments per namespace.
    #[arg(long)]
    deployments: Option<usize>,
    /// ReplicaSets per Deployment.
    #[arg(long)]
    replicasets: Option<usize>,
    /// Pods per ReplicaSet.
    #[arg(long)]
    pods: Option<usize>,
    /// Jobs per namespace.
    #[arg(long)]
    jobs: Option<usize>,
    /// Pods per Job.
    #[arg(long)]
    job_pods: Option<usize>,
    /// Custom-resource chains per namespace (example.com/v1 Widgets, each owning the next).
    #[arg(long)]
    chains: Option<usize>,
    /// Widgets per chain.
    #[arg(long)]
    chain_depth: Option<usize>,
    /// Cluster-scoped owners in all (ClusterRoles owning ClusterRoleBindings, and cluster-scoped
    /// example.com/v1 Fleets owning ConfigMaps).
    #[arg(long)]
    cluster_owners: Option<usize>,
    /// Dependents per cluster-scoped owner.
    #[arg(long)]
    cluster_dependents: Option<usize>,
    /// ConfigMaps owned by two Deployments, in all.
    #[arg(long)]
    multi_owner: Option<usize>,
    /// Pods owned by a ReplicaSet UID that never exists, in all.
    #[arg(long)]
    dangling: Option<usize>,
    /// ConfigMaps naming a Deployment of another namespace as owner, in all.
    #[arg(long)]
    cross_namespace: Option<usize>,
    /// Ownership cycles (two ConfigMaps owning each other), in all.
    #[arg(long)]
    cycles: Option<usize>,
    /// Fraction (0 to 1) of Deployment pods listed before their ReplicaSet.
    #[arg(long)]
    pods_before_owner: Option<f64>,
    /// MODIFIED events on Deployment pods: blockOwnerDeletion flips and owner changes.
    #[arg(long)]
    churn: Option<usize>,
    /// Roots deleted in the background: a count (25), a fraction (0.1) or a percentage (10%).
    #[arg(long)]
    delete_background: Option<Amount>,
    /// Roots deleted in the foreground: a count, a fraction or a percentage.
    #[arg(long)]
    delete_foreground: Option<Amount>,
    /// Roots deleted with the orphan policy: a count, a fraction or a percentage.
    #[arg(long)]
    delete_orphan: Option<Amount>,
}

/// Copies every given flag into the topology.
macro_rules! override_fields {
    ($flags:expr, $topology:expr, $($field:ident),* $(,)?) => {
        $( if let Some(value) = $flags.$field { $topology.$field = value; } )*
    };
}

impl TopologyFlags {
    fn apply(&self, mut t: Topology) -> Topology {
        override_fields!(
            self,
            t,
            namespaces,
            deployments,
            replicasets,
            pods,
            jobs,
            job_pods,
            chains,
            chain_depth,
            cluster_owners,
            cluster_dependents,
            multi_owner,
            dangling,
            cross_namespace,
            cycles,
            pods_before_owner,
            churn,
            delete_background,
            delete_foreground,
            delete_orphan,
        );
        t
    }
}

fn main() -> ExitCode {
    kube_gc::allocator::no_huge_pages();
    replay::keep_freed_memory();
    let result = match Cli::parse().command {
        Command::Generate(args) => generate(*args),
        Command::Record(args) => record(args),
        Command::Replay(args) => replay(args),
        Command::Curve(args) => curve(args),
        Command::MemoryProbe(args) => memory_probe(args),
        Command::PerfGate(args) => perf_gate(args),
        Command::CurveSize(args) => curve_size(args),
        Command::Sync(args) => sync(args),
        Command::Shards(args) => shards(args),
        Command::Hostile(args) => hostile(args),
        Command::Plan(args) => plan(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stopped early (`loadgen … | head`) is not a failure of loadgen.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // The whole chain on one line, and no backtrace: these are errors in the input or
            // the environment, not in loadgen.
            eprintln!("loadgen: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Writes `text` and a newline to stdout; unlike `println!`, a closed stdout is an error, not a
/// panic.
fn say(text: impl std::fmt::Display) -> anyhow::Result<()> {
    use std::io::Write;
    writeln!(std::io::stdout().lock(), "{text}").context("writing to stdout")
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|cause| cause.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

fn generate(args: GenerateArgs) -> anyhow::Result<()> {
    let topology = args.topology.apply(args.preset.topology());
    // Checked before the output file is created, so bad flags never truncate an existing stream.
    topology.check().map_err(anyhow::Error::msg)?;
    let started = Instant::now();
    let mut writer = StreamWriter::create(&args.output)?;
    let progress = loadgen::progress::bar(topology.objects() as u64, args.quiet, "generating");
    let summary = generate::generate(&topology, args.seed, &mut writer, &progress)?;
    progress.finish_and_clear();
    let events = writer.events();
    writer
        .finish()
        .with_context(|| format!("finishing {}", args.output.display()))?;
    say(format!(
        "wrote {events} events to {} in {:.2} s (seed {})\n{summary}",
        args.output.display(),
        started.elapsed().as_secs_f64(),
        args.seed
    ))
}

fn record(args: RecordArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(record_cluster(args))
}

async fn record_cluster(args: RecordArgs) -> anyhow::Result<()> {
    // Connected and discovered before the output file is created, so an unreachable cluster never
    // truncates an existing stream.
    let agent = format!("loadgen/{}", env!("CARGO_PKG_VERSION"));
    let client = kube_gc::api::connect(Some(&args.kubeconfig), &agent)
        .await
        .map_err(|e| record::kube_error(&e))?;
    let resources = record::discover(&client, args.include_events).await?;
    let mut writer = StreamWriter::create(&args.output)?;
    let progress = loadgen::progress::spinner(args.quiet);
    let listing = args.feature_gates;
    let summary = record::record(client, &resources, listing, &mut writer, &progress, stop(args.duration)).await?;
    progress.finish_and_clear();
    writer
        .finish()
        .with_context(|| format!("finishing {}", args.output.display()))?;
    say(format!(
        "wrote {} events to {}\n{summary}",
        summary.events(),
        args.output.display()
    ))
}

/// Completes after `duration`, or at Ctrl-C.
async fn stop(duration: Option<Duration>) {
    let ctrl_c = async {
        // Without a signal handler only `--duration` (or killing the process) ends the recording;
        // stopping at once instead would record nothing.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    match duration {
        Some(duration) => tokio::select! {
            () = tokio::time::sleep(duration) => {}
            () = ctrl_c => {}
        },
        None => ctrl_c.await,
    }
}

/// The options of a `sync` or `shards` run: the kube-gc binary (beside loadgen by default),
/// checked, and the preset's name.
fn sync_options(
    kube_gc: Option<PathBuf>,
    preset: Preset,
    run_args: Vec<String>,
    (dir, timeout): (Option<PathBuf>, Duration),
) -> anyhow::Result<loadgen::sync::SyncOptions> {
    let kube_gc = match kube_gc {
        Some(path) => path,
        None => loadgen::sync::sibling_kube_gc()
            .context("no kube-gc beside loadgen (build it with `cargo build --release`, or pass --kube-gc)")?,
    };
    loadgen::sync::check_binary(&kube_gc)?;
    let preset = preset
        .to_possible_value()
        .map(|value| value.get_name().to_owned())
        .context("naming the preset")?;
    Ok(loadgen::sync::SyncOptions {
        kube_gc,
        preset,
        run_args,
        dir: dir.unwrap_or_else(loadgen::sync::scratch_dir),
        timeout,
    })
}

fn sync(args: SyncArgs) -> anyhow::Result<()> {
    let options = sync_options(args.kube_gc, args.preset, args.run_args, (args.dir, args.timeout))?;
    say(format!(
        "kube-gc run {} against sim-apiserver --preset {}; files in {}",
        loadgen::sync::UNTHROTTLED.join(" "),
        options.preset,
        options.dir.display()
    ))?;
    let mut said = Ok(());
    let runs = loadgen::sync::measure(&options, usize::from(args.runs), |index, run| {
        if said.is_ok() {
            said = say(loadgen::sync::line(index, run));
        }
    })?;
    said?;
    say(loadgen::sync::summary(&runs))
}

fn shards(args: ShardsArgs) -> anyhow::Result<()> {
    let options = sync_options(args.kube_gc, args.preset, args.run_args, (args.dir, args.timeout))?;
    say(format!(
        "sharded kube-gc run against sim-apiserver --preset {}; files in {}",
        options.preset,
        options.dir.display()
    ))?;
    for n in args.replicas {
        let run = loadgen::shards::measure(&options, usize::from(n), args.kill_one)
            .with_context(|| format!("{n} replica(s)"))?;
        say(loadgen::shards::line(&run))?;
    }
    Ok(())
}

fn plan(args: PlanArgs) -> anyhow::Result<()> {
    let options = sync_options(args.kube_gc, args.preset, args.run_args, (args.dir, args.timeout))?;
    say(format!(
        "plans of a {}-object cascade from kube-gc run on sim-apiserver --preset {}; files in {}",
        args.cascade,
        options.preset,
        options.dir.display()
    ))?;
    let run = loadgen::plan::measure(&options, args.cascade as usize, args.deletions as usize)?;
    say(loadgen::plan::summary(&run))
}

fn hostile(args: HostileArgs) -> anyhow::Result<()> {
    let options = sync_options(args.kube_gc, args.preset, args.run_args, (args.dir, args.timeout))?;
    say(format!(
        "{} cycles of {} hostile objects against kube-gc run and sim-apiserver --preset {}; files in {}",
        args.cycles,
        args.objects,
        options.preset,
        options.dir.display()
    ))?;
    let mut said = Ok(());
    let cycles = loadgen::hostile::measure(
        &options,
        args.objects as usize,
        usize::from(args.cycles),
        !args.one_owner_kind,
        |index, cycle| {
            if said.is_ok() {
                said = say(loadgen::hostile::line(index, cycle));
            }
        },
    )?;
    said?;
    let growth = loadgen::hostile::growth(&cycles) as f64 / (1024.0 * 1024.0);
    say(format!(
        "resident set growth from the end of cycle 1 to the end of cycle {}: {growth:+.1} MiB (limit {} MiB)",
        cycles.len(),
        args.max_growth_mib
    ))?;
    if growth > args.max_growth_mib {
        bail!(
            "the collector's memory grew {growth:.1} MiB over {} cycles",
            cycles.len() - 1
        );
    }
    Ok(())
}

fn replay(args: ReplayArgs) -> anyhow::Result<()> {
    let partitions = match (&args.partitions, args.compare_partitions.as_slice()) {
        (Some(p), _) => vec![usize::from(*p)],
        (None, []) => vec![kube_gc::controller::default_partitions()],
        (None, list) => list.iter().copied().map(usize::from).collect(),
    };
    let options = ReplayOptions {
        partitions,
        segment_events: args.segment_events,
        skip_bad: args.skip_bad,
        quiet: args.quiet,
    };
    let report = match args.mode {
        Mode::Builder => {
            let full_only = [
                ("--require-outcome-ok", args.require_outcome_ok),
                ("--verify-with-get", args.verify_with_get),
                ("--api-latency", args.api_latency.is_some()),
                ("--journal", args.journal.is_some()),
                ("--shards", args.shards > 1),
            ];
            if let Some((flag, _)) = full_only.iter().find(|(_, given)| *given) {
                anyhow::bail!("{flag} applies to --mode full");
            }
            replay::builder_mode(&args.file, &options)?
        }
        Mode::Full => {
            if !args.compare_partitions.is_empty() {
                anyhow::bail!("--compare-partitions applies to --mode builder");
            }
            let full = FullOptions {
                workers: usize::from(args.workers),
                timeout: Duration::from_secs(args.timeout_secs),
                verify_with_get: args.verify_with_get,
                api_latency: args.api_latency.unwrap_or_default(),
                journal: args.journal.clone(),
                shards: usize::from(args.shards),
                migrate: args.migrate.clone().map(|resource| MigrateOptions {
                    resource,
                    objects: args.migrate_objects,
                    qps: args.migrate_qps,
                }),
            };
            let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
            runtime.block_on(replay::full::run(&args.file, &options, &full))?
        }
    };
    if let Some(path) = &args.report {
        let json = serde_json::to_string_pretty(&report).context("encoding the report")?;
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    say(&report)?;
    if args.require_outcome_ok && report.outcome_ok != Some(true) {
        anyhow::bail!("the cluster does not end as the oracle expects (--require-outcome-ok)");
    }
    if let Some(m) = report
        .migration
        .as_ref()
        .filter(|m| args.require_outcome_ok && m.stale_after > 0)
    {
        anyhow::bail!(
            "the storage version migration left {} objects at the old generation (--require-outcome-ok)",
            m.stale_after
        );
    }
    Ok(())
}

fn memory_probe(args: MemoryProbeArgs) -> anyhow::Result<()> {
    let bytes = args
        .mib
        .iter()
        .map(|&mib| usize::try_from(mib << 20))
        .collect::<Result<Vec<_>, _>>()
        .context("--mib: a size too large for this machine")?;
    let loads = usize::try_from(args.loads).context("--loads: too many for this machine")?;
    memory_probe::check(&bytes)?;
    let report = ReportFile::open(args.report.as_deref())?;
    say("random loads over a working set, 64-byte lines, the replays' page setting (4 KiB pages)")?;
    say(format_args!(
        "{:>14} {:>22} {:>22}",
        "working set", "one at a time, ns", "eight at once, ns"
    ))?;
    let probes = memory_probe::measure(&bytes, loads, |probe| {
        let mib = format!("{} MiB", probe.bytes >> 20);
        say(format_args!(
            "{mib:>14} {:>22.1} {:>22.1}",
            probe.one_at_a_time_ns, probe.eight_at_once_ns
        ))
    })?;
    report.write(&probes)
}

fn curve(args: CurveArgs) -> anyhow::Result<()> {
    let sizes: Vec<Size> = if args.objects.is_empty() {
        args.presets.iter().copied().map(Size::preset).collect()
    } else {
        args.objects
            .iter()
            .map(|&n| usize::try_from(n).map(Size::objects))
            .collect::<Result<_, _>>()
            .context("--objects: a count too large for this machine")?
    };
    let svg_path = args.svg.clone().unwrap_or_else(|| args.streams_dir.join("curve.svg"));
    std::fs::create_dir_all(&args.streams_dir)
        .with_context(|| format!("creating the streams directory {}", args.streams_dir.display()))?;
    // Both outputs are opened before the replays, so an unwritable path fails in a second, not
    // after a run of many minutes.
    let report = ReportFile::open(args.report.as_deref())?;
    let svg_file = create_output(&svg_path)?;
    let options = CurveOptions {
        sizes,
        seed: args.seed,
        partitions: args.partitions.iter().copied().map(usize::from).collect(),
        runs: usize::from(args.runs),
        streams_dir: args.streams_dir,
        quiet: args.quiet,
    };
    let measured = match &args.from_report {
        Some(path) => {
            let json = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_slice(&json).with_context(|| format!("{}: not a curve report", path.display()))?
        }
        None => curve::measure(&options, |stream, label| replay_size(stream, label, &options))?,
    };
    report.write(&measured)?;
    let mut file = svg_file;
    file.write_all(curve::plot::svg(&measured)?.as_bytes())
        .with_context(|| format!("writing {}", svg_path.display()))?;
    say(format!("{measured}\nplot: {}", svg_path.display()))
}

/// Runs `loadgen curve-size` on one size's stream, in a process of its own (see `loadgen::curve`),
/// its progress on this process's stderr.
fn replay_size(stream: &std::path::Path, label: &str, options: &CurveOptions) -> anyhow::Result<curve::Measured> {
    let partitions: Vec<String> = options.partitions.iter().map(usize::to_string).collect();
    let runs = options.runs.to_string();
    let mut command = std::process::Command::new(std::env::current_exe().context("finding the loadgen binary")?);
    command
        .arg("curve-size")
        .arg(stream)
        .args(["--label", label, "--partitions", &partitions.join(","), "--runs", &runs])
        .stderr(std::process::Stdio::inherit());
    if options.quiet {
        command.arg("--quiet");
    }
    let out = command.output().context("running loadgen curve-size")?;
    anyhow::ensure!(out.status.success(), "loadgen curve-size failed ({})", out.status);
    serde_json::from_slice(&out.stdout).context("reading loadgen curve-size's rows")
}

fn curve_size(args: CurveSizeArgs) -> anyhow::Result<()> {
    let options = CurveOptions {
        sizes: Vec::new(),
        seed: 0,
        partitions: args.partitions.iter().copied().map(usize::from).collect(),
        runs: usize::from(args.runs),
        streams_dir: PathBuf::new(),
        quiet: args.quiet,
    };
    let measured = curve::measure_size(&args.stream, &args.label, &options)?;
    say(serde_json::to_string(&measured).context("encoding the rows")?)
}

/// Creates (or truncates) an output file, naming it in the error.
fn create_output(path: &std::path::Path) -> anyhow::Result<std::fs::File> {
    std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))
}

/// A `--report` file, if asked for: opened before a long run, so that an unwritable path fails in
/// a second, and written with the run's JSON at its end.
struct ReportFile<'a>(Option<(std::fs::File, &'a std::path::Path)>);

impl<'a> ReportFile<'a> {
    fn open(path: Option<&'a std::path::Path>) -> anyhow::Result<Self> {
        let opened = path.map(|p| create_output(p).map(|file| (file, p))).transpose()?;
        Ok(ReportFile(opened))
    }

    fn write(self, value: &impl serde::Serialize) -> anyhow::Result<()> {
        let Some((mut file, path)) = self.0 else {
            return Ok(());
        };
        let json = serde_json::to_string_pretty(value).context("encoding the report")?;
        writeln!(file, "{json}").with_context(|| format!("writing {}", path.display()))
    }
}

fn perf_gate(args: PerfGateArgs) -> anyhow::Result<()> {
    let options = GateOptions {
        streams_dir: args.streams_dir,
        objects: args.objects,
        go_model: args.go_model,
        quiet: args.quiet,
    };
    let floors = perf_gate::Floors {
        vs_go: args.min_vs_go,
        p99_vs_go: args.min_p99_vs_go,
        scaling: args.min_scaling,
    };
    let measured = perf_gate::measure(&options)?;
    say(format!(
        "{} ({} events, seed {}), {} rounds in the order run:",
        measured.stream.display(),
        measured.events,
        perf_gate::SEED,
        measured.rounds.len()
    ))?;
    for (i, round) in measured.rounds.iter().enumerate() {
        let [p1, p2] = round.events_per_sec;
        let go = match &round.go_model {
            Ok(run) => format!(
                "Go model {:.3}M build events/s, p99 {}",
                run.build_events_per_sec / 1e6,
                run.p99_ns.map_or("none".into(), |p99| format!("{p99:.0} ns"))
            ),
            Err(why) => format!("Go model: {why}"),
        };
        say(format!(
            "  round {}: builder P=1 {:.3}M events/s (ADDED p99 {:.0} ns), P=2 {:.3}M; {go}",
            i + 1,
            p1 / 1e6,
            round.added_p99_ns,
            p2 / 1e6
        ))?;
    }
    let checks = perf_gate::judge(&measured, &floors);
    for check in &checks {
        say(check)?;
    }
    let failed = checks.iter().filter(|c| !c.passed()).count();
    anyhow::ensure!(failed == 0, "{failed} of {} performance checks failed", checks.len());
    Ok(())
}
