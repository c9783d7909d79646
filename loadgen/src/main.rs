//! The `loadgen` command: generates watch streams for kube-gc.

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use loadgen::generate::{self, Amount, Preset, Topology};
use loadgen::stream::StreamWriter;
use mimalloc::MiMalloc;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// The allocator of the `kube-gc` binary, so that speed and memory figures are the ones it shows.
#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

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
    Generate(GenerateArgs),
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
    let result = match Cli::parse().command {
        Command::Generate(args) => generate(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The whole chain on one line, and no backtrace: these are errors in the input or
            // the environment, not in loadgen.
            eprintln!("loadgen: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn generate(args: GenerateArgs) -> anyhow::Result<()> {
    let topology = args.topology.apply(args.preset.topology());
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
    println!(
        "wrote {events} events to {} in {:.2} s (seed {})\n{summary}",
        args.output.display(),
        started.elapsed().as_secs_f64(),
        args.seed
    );
    Ok(())
}
