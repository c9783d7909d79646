//! `kube-gc run`: the garbage collector against a cluster, until SIGINT or SIGTERM.
//!
//! The cluster is the one a kubeconfig names (`--kubeconfig`, else `$KUBECONFIG` or
//! `~/.kube/config`), or the pod's own when running inside one; a simulated API server's written
//! kubeconfig works the same way. The collector reports its progress in the log every
//! `--report-every`.

use anyhow::Context;
use kube_gc::api::KubeApi;
use kube_gc::controller::{Config, GarbageCollector};
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
    /// How often to log the graph's size and the queues' lengths.
    #[arg(long, default_value = "30s", value_parser = kube_gc::api::sim::http::parse_duration)]
    report_every: Duration,
    #[command(flatten)]
    collector: super::CollectorArgs,
}

/// Builds the client a kubeconfig (or the environment) describes.
pub async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("using the kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("finding a kubeconfig or an in-cluster config")?,
    };
    kube::Client::try_from(config).context("building the API client")
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let client = client(args.kubeconfig.as_deref()).await?;
    let version = client.apiserver_version().await.context("reaching the API server")?;
    eprintln!("kube-gc run: API server {}", version.git_version);
    let config = Config {
        workers: usize::try_from(args.workers).context("--workers")?,
        partitions: match args.partitions {
            Some(p) => usize::try_from(p).context("--partitions")?,
            None => kube_gc::controller::default_partitions(),
        },
        collector: args.collector.config(),
        ..Config::default()
    };
    let gc = GarbageCollector::start(Arc::new(KubeApi::new(client)), config).await;
    let report = async {
        let mut every = tokio::time::interval(args.report_every);
        loop {
            every.tick().await;
            let monitors = gc.monitor_states();
            let synced = monitors.values().filter(|s| **s).count();
            eprintln!(
                "kube-gc run: {} objects in the graph, {synced}/{} resources synced, {} to delete, {} to orphan",
                gc.graph().len(),
                monitors.len(),
                gc.attempt_to_delete().len(),
                gc.attempt_to_orphan().len(),
            );
        }
    };
    tokio::select! {
        () = super::shutdown_signal() => {}
        () = report => {}
    }
    eprintln!("kube-gc run: shutting down");
    gc.shutdown().await;
    Ok(())
}
