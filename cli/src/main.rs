//! The `kube-gc` command, which is also the kubectl plugin `kubectl gc` when run as `kubectl-gc`
//! (a link to it of that name on `PATH`).

mod command;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches};
use command::{Cli, Command};

#[global_allocator]
static GLOBAL: kube_gc::allocator::Allocator = kube_gc::allocator::Allocator;

/// The file name kubectl runs for `kubectl gc …`: kubectl looks up `kubectl-NAME` on `PATH` and
/// passes it the arguments after NAME.
const KUBECTL_PLUGIN: &str = "kubectl-gc";

/// The command line, read as `kube-gc`'s or, when the program runs as [`KUBECTL_PLUGIN`], as
/// `kubectl gc`'s: the same subcommands, with usage and errors naming `kubectl gc`.
fn parse() -> Cli {
    let run_as = std::env::args_os().next();
    let stem = run_as.as_deref().map(std::path::Path::new).and_then(|p| p.file_stem());
    let mut command = Cli::command();
    if stem.is_some_and(|s| s == KUBECTL_PLUGIN) {
        command = command.bin_name("kubectl gc");
    }
    let matches = command.get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

fn main() -> anyhow::Result<()> {
    let cli = parse();
    // `tree` says what failed in its one error message; kube-rs's own log line of the same
    // failed request would say it twice.
    let default_filter = match cli.command {
        Command::Tree(_) | Command::Plan(_) => "warn,kube_client=off",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    match cli.command {
        Command::Simulate(args) => runtime.block_on(command::simulate::run(args)),
        Command::SimApiserver(args) => runtime.block_on(command::sim_apiserver::run(*args)),
        Command::Run(args) => {
            kube_gc::allocator::no_huge_pages();
            runtime.block_on(command::run::run(*args))
        }
        Command::ShadowReport(args) => command::shadow_report::run(args),
        Command::Tree(args) => runtime.block_on(command::tree::run(args)),
        Command::Plan(args) => runtime.block_on(command::plan::run(args)),
    }
}
