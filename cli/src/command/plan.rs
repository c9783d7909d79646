//! `kube-gc plan KIND/NAME [-n NAMESPACE] [--cascade background|foreground|orphan]`: what a
//! delete would take with it, before it is sent ([`kube_gc::plan`], [`kube_gc_cli::plan`]).
//!
//! The object is found as `kube-gc tree` finds it (same syntax, `-n`, `--kubeconfig`, and
//! `kubectl gc plan` as a plugin). The plan is the running collector's (`/debug/plan`, played on
//! its graph) or, with `--offline`, played here on a listing of the object's namespace and the
//! cluster-scoped objects, as `kube-gc tree` reads them.

use super::tree::{print, ObjectArgs};
use anyhow::Context;
use kube_gc::api::{PropagationPolicy, RestMapper};
use kube_gc::plan;
use kube_gc_cli::server::PlanAnswer;
use kube_gc_cli::tree::{fetch, CollectorClient};

#[derive(clap::Args)]
pub struct PlanArgs {
    #[command(flatten)]
    object: ObjectArgs,
    /// The propagation policy of the delete, as `kubectl delete --cascade` names it.
    #[arg(long, value_enum, default_value_t = Cascade::Background)]
    cascade: Cascade,
    /// Output format: a table, or the whole plan for scripts.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    output: Output,
    /// Play the delete here on a listing of the object's namespace and the cluster-scoped
    /// objects, without asking a collector.
    #[arg(long)]
    offline: bool,
    /// The collector's write rate, for the time estimate (`kube-gc run --kube-api-qps`); 0 leaves
    /// the time out.
    #[arg(long, default_value_t = kube_gc::api::layers::Budget::WORKERS.qps, value_parser = kube_gc::rate::parse_qps)]
    write_qps: f64,
}

/// `--cascade`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Cascade {
    Background,
    Foreground,
    Orphan,
}

impl Cascade {
    fn policy(self) -> PropagationPolicy {
        match self {
            Cascade::Background => PropagationPolicy::Background,
            Cascade::Foreground => PropagationPolicy::Foreground,
            Cascade::Orphan => PropagationPolicy::Orphan,
        }
    }
}

/// `-o`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Output {
    Table,
    Json,
    Yaml,
}

pub async fn run(args: PlanArgs) -> anyhow::Result<()> {
    let policy = args.cascade.policy();
    let found = args.object.find("kube-gc-plan").await?;
    let answer = if args.offline {
        let started = std::time::Instant::now();
        let fetched = fetch::fetch(&found.client, &found.catalogue, &found.scope, &found.target).await?;
        for (resource, why) in &fetched.unlisted {
            eprintln!("note: {resource} could not be listed, so its objects are left out: {why}");
        }
        let snapshot = &*fetched.listing;
        let resources: Vec<_> = found.catalogue.resources().iter().map(|r| r.api_resource()).collect();
        let mapper = RestMapper::new(&resources);
        let plan = plan::simulate(snapshot, &mapper, std::slice::from_ref(&found.target.uid), policy);
        PlanAnswer {
            plan,
            snapshot_objects: snapshot.len(),
            queue_depth: 0,
            seconds: started.elapsed().as_secs_f64(),
        }
    } else {
        collector(&args.object.collector, &found.target.uid, policy).await?
    };
    let text = match args.output {
        Output::Table => kube_gc_cli::plan::render(&answer, args.write_qps),
        Output::Json => serde_json::to_string_pretty(&answer).context("encoding the plan")? + "\n",
        Output::Yaml => serde_yaml_ng::to_string(&answer).context("encoding the plan")?,
    };
    print(&text)
}

/// The running collector's plan, or an error that says how to do without one.
async fn collector(collector: &CollectorClient, uid: &str, policy: PropagationPolicy) -> anyhow::Result<PlanAnswer> {
    let policy = policy.as_str().to_ascii_lowercase();
    collector
        .plan(&[uid], &policy)
        .await
        .with_context(|| format!("asking the collector at {collector} for a plan (--offline plans without one)"))
}
