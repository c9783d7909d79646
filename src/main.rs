//! The `kube-gc` command.

mod cli;

use anyhow::Context;
use clap::Parser;
use cli::{Cli, Command};
use mimalloc::MiMalloc;

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

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
        Command::Simulate(args) => runtime.block_on(cli::simulate::run(args)),
        Command::SimApiserver(args) => runtime.block_on(cli::sim_apiserver::run(args)),
        Command::Run(args) => runtime.block_on(cli::run::run(args)),
        Command::ShadowReport(args) => cli::shadow_report::run(args),
    }
}
