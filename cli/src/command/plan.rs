//! `kube-gc plan KIND/NAME [-n NAMESPACE] [--cascade background|foreground|orphan]`: what a
//! delete would take with it, before it is sent ([`kube_gc::plan`], [`kube_gc_cli::plan`]).
//!
//! The object is found as `kube-gc tree` finds it (same syntax, `-n`, `--kubeconfig`, and
//! `kubectl gc plan` as a plugin). Two more forms: `kube-gc plan namespace/NAME` plans the
//! namespace's deletion (the namespace controller's deletions in its order, then the
//! collector's), and `kube-gc plan KIND -l SELECTOR` plans deleting every object of KIND the
//! selector picks, as `kubectl delete KIND -l SELECTOR` does. The plan is the running
//! collector's (`/debug/plan`, played on its graph) or, with `--offline`, played here on a
//! listing of the namespace and the cluster-scoped objects, as `kube-gc tree` reads them.

use super::tree::{print, ObjectArgs};
use anyhow::Context;
use kube_gc::api::{PropagationPolicy, RestMapper};
use kube_gc::plan;
use kube_gc_cli::server::PlanAnswer;
use kube_gc_cli::tree::{fetch, Catalogue, CollectorClient, Object};

#[derive(clap::Args)]
pub struct PlanArgs {
    #[command(flatten)]
    object: ObjectArgs,
    /// Plan deleting every object of KIND this label selector picks (`app=web`, `tier in
    /// (web,api)`), as `kubectl delete KIND -l` does.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    selector: Option<String>,
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

/// The most objects one `/debug/plan` request names (its URL stays under the 64 KiB an HTTP
/// server takes).
const MAX_ASKED: usize = 1500;

/// What a plan is asked about, found in the cluster.
struct Asked {
    client: kube::Client,
    catalogue: Catalogue,
    /// Where the objects and their dependents can be: a namespace, or every namespace (empty).
    scope: String,
    /// The objects to delete; for a namespace, the namespace alone.
    targets: Vec<Object>,
    /// The targets are one namespace.
    namespace: bool,
}

pub async fn run(args: PlanArgs) -> anyhow::Result<()> {
    let policy = args.cascade.policy();
    let asked = ask(&args).await?;
    let answer = if args.offline {
        offline(&asked, policy).await?
    } else {
        collector(&args.object.collector, &asked, policy).await?
    };
    let text = match args.output {
        Output::Table => kube_gc_cli::plan::render(&answer, args.write_qps),
        Output::Json => serde_json::to_string_pretty(&answer).context("encoding the plan")? + "\n",
        Output::Yaml => serde_yaml_ng::to_string(&answer).context("encoding the plan")?,
    };
    print(&text)
}

/// Finds the objects the arguments name: one object, a namespace, or a selector's objects.
async fn ask(args: &PlanArgs) -> anyhow::Result<Asked> {
    const AGENT: &str = "kube-gc-plan";
    let Some(selector) = &args.selector else {
        let found = args.object.find(AGENT).await?;
        let namespace = found.target.kind == "Namespace" && found.target.api_version == "v1";
        return Ok(Asked {
            scope: if namespace {
                found.target.name.clone()
            } else {
                found.scope
            },
            client: found.client,
            catalogue: found.catalogue,
            targets: vec![found.target],
            namespace,
        });
    };
    let kind = args.object.kind_alone()?;
    let (client, catalogue, namespace) = args.object.connect(AGENT).await?;
    let resource = catalogue.resolve(kind)?;
    let scope = if resource.namespaced { namespace } else { String::new() };
    let targets = fetch::list_selected(&client, resource, &scope, selector).await?;
    if targets.is_empty() {
        let place = if scope.is_empty() {
            String::new()
        } else {
            format!(" in namespace {scope}")
        };
        anyhow::bail!("no {} matches -l {selector:?}{place}", resource.qualified());
    }
    Ok(Asked {
        client,
        catalogue,
        scope,
        targets,
        namespace: false,
    })
}

/// The plan played here, on a listing.
async fn offline(asked: &Asked, policy: PropagationPolicy) -> anyhow::Result<PlanAnswer> {
    let started = std::time::Instant::now();
    let fetched = fetch::fetch(&asked.client, &asked.catalogue, &asked.scope, &asked.targets).await?;
    for (resource, why) in &fetched.unlisted {
        eprintln!("note: {resource} could not be listed, so its objects are left out: {why}");
    }
    let snapshot = &*fetched.listing;
    let resources: Vec<_> = asked.catalogue.resources().iter().map(|r| r.api_resource()).collect();
    let mapper = RestMapper::new(&resources);
    let plan = if asked.namespace {
        plan::simulate_namespace(snapshot, &mapper, &asked.targets[0].uid, policy)
    } else {
        let uids: Vec<String> = asked.targets.iter().map(|t| t.uid.clone()).collect();
        plan::simulate(snapshot, &mapper, &uids, policy)
    };
    Ok(PlanAnswer {
        plan,
        snapshot_objects: snapshot.len(),
        queue_depth: 0,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The running collector's plan, or an error that says how to do without one.
async fn collector(
    collector: &CollectorClient,
    asked: &Asked,
    policy: PropagationPolicy,
) -> anyhow::Result<PlanAnswer> {
    let policy = policy.as_str().to_ascii_lowercase();
    let answer = if asked.namespace {
        collector.plan_namespace(&asked.targets[0].name, &policy).await
    } else {
        let uids: Vec<&str> = asked.targets.iter().map(|t| t.uid.as_str()).collect();
        if uids.len() > MAX_ASKED {
            anyhow::bail!(
                "the selector picks {} objects, more than the {MAX_ASKED} one request to the collector can name; \
                 narrow it, or plan with --offline",
                uids.len()
            );
        }
        collector.plan(&uids, &policy).await
    };
    answer.with_context(|| format!("asking the collector at {collector} for a plan (--offline plans without one)"))
}
