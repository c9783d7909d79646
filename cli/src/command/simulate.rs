//! `kube-gc simulate`: the demo against the embedded simulated cluster.

use anyhow::Context;
use std::io::Write;
use std::time::Duration;

#[derive(clap::Args)]
pub struct SimulateArgs {
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
    #[command(flatten)]
    collector: super::CollectorArgs,
}

pub async fn run(args: SimulateArgs) -> anyhow::Result<()> {
    let options = kube_gc_sim::simulate::SimulateOptions {
        objects: usize::try_from(args.objects).context("--objects")?,
        workers: usize::try_from(args.workers).context("--workers")?,
        partitions: match args.partitions {
            Some(p) => usize::try_from(p).context("--partitions")?,
            None => kube_gc::controller::default_partitions(),
        },
        seed: args.seed,
        timeout: Duration::from_secs(args.timeout_secs),
        progress: !args.quiet,
        collector: args.collector.config(),
    };
    eprintln!(
        "kube-gc simulate: building ~{} objects, {} workers, seed {}",
        options.objects, options.workers, options.seed
    );
    let summary = kube_gc_sim::simulate::run(&options).await?;
    match writeln!(std::io::stdout().lock(), "{summary}") {
        // A reader that stopped early (`kube-gc simulate | head`) is not a failure of the run.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e).context("writing the summary"),
        _ => {}
    }
    if !summary.converged {
        anyhow::bail!("the collector did not converge within {}s", args.timeout_secs);
    }
    Ok(())
}
