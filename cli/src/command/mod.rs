//! The `kube-gc` command line: one module per subcommand.

pub mod plan;
pub mod run;
pub mod serving;
pub mod shadow_report;
pub mod sim_apiserver;
pub mod simulate;
pub mod tree;

use clap::{Parser, Subcommand};
use kube_gc::collector::CollectorConfig;

/// kube-gc: the Kubernetes garbage collector, for clusters with millions of objects.
#[derive(Parser)]
#[command(version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Build a synthetic cluster in the embedded simulated API server, delete parts of it with
    /// each propagation policy, and report what the garbage collector did.
    Simulate(simulate::SimulateArgs),
    /// Serve a simulated cluster over the Kubernetes HTTP API, for kubectl, kube-rs clients and
    /// `kube-gc run`; it runs until interrupted.
    SimApiserver(Box<sim_apiserver::SimApiserverArgs>),
    /// Run the garbage collector against a cluster: a kubeconfig's, the in-cluster one, or a
    /// simulated API server's.
    Run(Box<run::RunArgs>),
    /// Compare a shadow collector's decisions (`kube-gc run --dry-run --journal PATH`) with what
    /// the live collector did, as the shadow's watches saw it.
    ShadowReport(shadow_report::ShadowReportArgs),
    /// Show an object's owners above it and its dependents below it, with their deletion states
    /// and, when a collector answers, why they are not collected yet.
    Tree(tree::TreeArgs),
    /// Show what deleting an object would take with it, and in which order, before the DELETE
    /// is sent: from a running collector's graph, or with `--offline` from a listing.
    Plan(plan::PlanArgs),
}

/// Flags of the collector's workers, for the subcommands that run it.
#[derive(clap::Args)]
pub struct CollectorArgs {
    /// Read every item and owner live before acting on it, as upstream's collector does (about
    /// two API calls per collected object). By default the workers act on what the graph observed,
    /// conditioned on the observed resourceVersion, and make one.
    #[arg(long)]
    verify_with_get: bool,
}

impl CollectorArgs {
    /// The worker settings these flags ask for.
    pub fn config(&self) -> CollectorConfig {
        CollectorConfig {
            verify_with_get: self.verify_with_get,
            ..CollectorConfig::default()
        }
    }
}

/// Completes on SIGINT or SIGTERM.
///
/// The handlers are installed by this call, not when the future is first polled: a signal sent as
/// soon as a process has announced itself (a server printing its address) must reach the handler
/// rather than the default action, which would end the process without its cleanup.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let handlers = signal(SignalKind::interrupt()).and_then(|i| Ok((i, signal(SignalKind::terminate())?)));
        async move {
            match handlers {
                Ok((mut interrupt, mut terminate)) => tokio::select! {
                    _ = interrupt.recv() => {}
                    _ = terminate.recv() => {}
                },
                Err(_) => tokio::signal::ctrl_c().await.unwrap_or(()),
            }
        }
    }
    #[cfg(not(unix))]
    async {
        tokio::signal::ctrl_c().await.unwrap_or(());
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    /// The container arguments of `deploy/deployment.yaml`: the `- ` items under `args:`.
    fn deployment_args() -> Vec<String> {
        let manifest = include_str!("../../../deploy/deployment.yaml");
        let mut lines = manifest.lines().skip_while(|l| l.trim() != "args:").skip(1);
        let mut args = vec!["kube-gc".to_string()];
        args.extend(
            lines
                .by_ref()
                .map_while(|l| l.trim().strip_prefix("- ").map(str::to_string)),
        );
        args
    }

    #[test]
    fn the_deployment_manifest_should_pass_flags_kube_gc_run_accepts() {
        let args = deployment_args();
        assert!(args.len() > 2, "no args in the manifest: {args:?}");
        match Cli::try_parse_from(&args) {
            Ok(Cli {
                command: Command::Run(run),
            }) => assert!(run.leader_elect, "two replicas need --leader-elect"),
            Ok(_) => panic!("the manifest does not run `kube-gc run`: {args:?}"),
            Err(e) => panic!("the manifest's flags are refused: {e}"),
        }
    }

    #[test]
    fn a_zero_period_should_be_refused() {
        for args in [
            ["kube-gc", "run", "--report-every", "0s"],
            ["kube-gc", "sim-apiserver", "--bookmark-interval", "0ms"],
        ] {
            let refused = Cli::try_parse_from(args);
            let error = refused.err().expect("a zero period is refused").to_string();
            assert!(error.contains("must be longer than zero"), "{error}");
        }
    }

    #[test]
    fn each_budget_should_refuse_a_bad_rate_or_burst() {
        for flag in [
            "--kube-api-qps",
            "--discovery-qps",
            "--monitor-qps",
            "--leader-elect-qps",
        ] {
            for bad in ["-1", "fast", "inf", "NaN"] {
                let arg = format!("{flag}={bad}");
                let error = Cli::try_parse_from(["kube-gc", "run", &arg]).err();
                let error = error.unwrap_or_else(|| panic!("{flag} {bad} accepted")).to_string();
                assert!(error.contains("is not a rate"), "{flag} {bad}: {error}");
            }
            assert!(
                Cli::try_parse_from(["kube-gc", "run", flag, "0"]).is_ok(),
                "{flag} 0: no limit"
            );
        }
        for flag in [
            "--kube-api-burst",
            "--discovery-burst",
            "--monitor-burst",
            "--leader-elect-burst",
        ] {
            assert!(
                Cli::try_parse_from(["kube-gc", "run", flag, "0"]).is_err(),
                "{flag} 0 refused"
            );
            assert!(
                Cli::try_parse_from(["kube-gc", "run", flag, "1"]).is_ok(),
                "{flag} 1 accepted"
            );
        }
    }
}
