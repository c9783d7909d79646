//! The `kube-gc` command.

use anyhow::Context;
use clap::{Parser, Subcommand};
use mimalloc::MiMalloc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

/// kube-gc: the Kubernetes garbage collector, for clusters with millions of objects.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build a synthetic cluster in the embedded simulated API server, delete parts of it with
    /// each propagation policy, and report what the garbage collector did.
    Simulate(SimulateArgs),
}

#[derive(clap::Args)]
struct SimulateArgs {
    /// Roughly how many objects to create.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=5_000_000))]
    objects: u64,
    /// Collector workers (also `--concurrent-gc-syncs`, kube-controller-manager's name).
    #[arg(long, visible_alias = "concurrent-gc-syncs", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    workers: u64,
    /// Graph builder partitions (events of one UID always go to the same one); default: the
    /// available cores.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    partitions: Option<u64>,
    /// Seed of the random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Give up waiting for convergence after this many seconds.
    #[arg(long, default_value_t = 300)]
    timeout_secs: u64,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    match cli.command {
        Command::Simulate(args) => runtime.block_on(simulate(args)),
    }
}

async fn simulate(args: SimulateArgs) -> anyhow::Result<()> {
    let options = kube_gc::simulate::SimulateOptions {
        objects: usize::try_from(args.objects).context("--objects")?,
        workers: usize::try_from(args.workers).context("--workers")?,
        partitions: match args.partitions {
            Some(p) => usize::try_from(p).context("--partitions")?,
            None => kube_gc::controller::default_partitions(),
        },
        seed: args.seed,
        timeout: Duration::from_secs(args.timeout_secs),
        progress: !args.quiet,
    };
    eprintln!(
        "kube-gc simulate: building ~{} objects, {} workers, seed {}",
        options.objects, options.workers, options.seed
    );
    let summary = kube_gc::simulate::run(&options).await?;
    println!("{summary}");
    if !summary.converged {
        anyhow::bail!("the collector did not converge within {}s", args.timeout_secs);
    }
    Ok(())
}
