//! `kube-gc simulate`: the demo. Builds a synthetic cluster in the in-memory simulated API
//! server, starts the garbage collector against it, deletes parts of the cluster with each
//! propagation policy, and reports what the collector did.
//!
//! The shapes are the ones the collector meets most: Deployments → ReplicaSets → Pods,
//! Jobs → Pods, a custom-resource chain (Widget → Gadget → ConfigMap, served as custom types so
//! patches take the JSON-merge fallback), and a cluster-scoped owner (a ClusterRole owning
//! ConfigMaps in every namespace).

use crate::api::{DeleteOptions, Gvr, ObjectMeta, OwnerReference, PartialObjectMeta, PropagationPolicy};
use crate::collector::CollectorConfig;
use crate::controller::{Config, GarbageCollector};
use crate::sim::{SimCluster, TypeDef};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to simulate.
#[derive(Clone, Debug)]
pub struct SimulateOptions {
    /// Roughly how many objects to create.
    pub objects: usize,
    /// Collector workers.
    pub workers: usize,
    /// Graph builder partitions.
    pub partitions: usize,
    /// Seed of the random choices (which trees get which policy).
    pub seed: u64,
    /// Give up waiting for convergence after this long.
    pub timeout: Duration,
    /// Show a progress bar.
    pub progress: bool,
    /// Worker settings.
    pub collector: CollectorConfig,
}

impl Default for SimulateOptions {
    fn default() -> Self {
        SimulateOptions {
            objects: 20_000,
            workers: 20,
            partitions: crate::controller::default_partitions(),
            seed: 1,
            timeout: Duration::from_secs(120),
            progress: false,
            collector: CollectorConfig::default(),
        }
    }
}

/// The fate of the dependents of the roots deleted with one policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyOutcome {
    /// Roots deleted with this policy.
    pub roots: usize,
    /// Objects (roots and dependents) that are gone.
    pub deleted: usize,
    /// Dependents still present with no owner left.
    pub orphaned: usize,
    /// Dependents still present and still owned.
    pub kept: usize,
}

/// What a simulation did.
#[derive(Clone, Debug, Default)]
pub struct SimulateSummary {
    /// Objects created.
    pub objects_created: usize,
    /// Outcome per policy of the deleted roots.
    pub by_policy: BTreeMap<&'static str, PolicyOutcome>,
    /// Objects of untouched trees that are still present (nothing may be lost there).
    pub untouched_present: usize,
    /// Objects of untouched trees.
    pub untouched_total: usize,
    /// Wall time from the deletions to convergence.
    pub converge_time: Duration,
    /// Whether the run converged before the timeout.
    pub converged: bool,
    /// API calls the collector made, by verb.
    pub api_calls: BTreeMap<&'static str, u64>,
}

/// One tree of the synthetic cluster: its root and every object below it.
struct Tree {
    root: Created,
    members: Vec<Created>,
}

/// An object the simulation created, as a (resource, namespace, name, uid) quadruple.
#[derive(Clone)]
struct Created {
    gvr: Gvr,
    namespace: String,
    name: String,
    uid: String,
}

/// The custom types of the demo.
fn custom_types() -> [TypeDef; 2] {
    [
        TypeDef::new("demo.kube-gc.io", "v1", "Widget", "widgets", true).custom(),
        TypeDef::new("demo.kube-gc.io", "v1", "Gadget", "gadgets", true).custom(),
    ]
}

/// Fills `cluster` with the demo's trees, about `objects` objects in all, and serves its custom
/// types; this is what `kube-gc sim-apiserver --preset` starts from. Returns how many objects were
/// created.
pub fn populate_cluster(cluster: &SimCluster, objects: usize, seed: u64) -> anyhow::Result<usize> {
    for ns in 0..NAMESPACES {
        create(cluster, &gvr("", "v1", "namespaces"), "", &namespace(ns), Vec::new())?;
    }
    let trees = prepare(cluster, objects, &mut SmallRng::seed_from_u64(seed))?;
    Ok(trees.iter().map(|t| t.members.len() + 1).sum())
}

/// How many namespaces the trees are spread over.
const NAMESPACES: usize = 10;

fn namespace(i: usize) -> String {
    format!("ns-{i}")
}

/// Serves the custom types, then creates the trees.
fn prepare(cluster: &SimCluster, objects: usize, rng: &mut SmallRng) -> anyhow::Result<Vec<Tree>> {
    for t in custom_types() {
        cluster.register(t);
    }
    populate(cluster, objects, rng)
}

/// Runs the whole demo on the current tokio runtime.
pub async fn run(options: &SimulateOptions) -> anyhow::Result<SimulateSummary> {
    let cluster = Arc::new(SimCluster::new());
    let mut rng = SmallRng::seed_from_u64(options.seed);
    let trees = prepare(&cluster, options.objects, &mut rng)?;
    let config = Config {
        workers: options.workers,
        partitions: options.partitions,
        collector: options.collector.clone(),
        ..Config::default()
    };
    let gc = GarbageCollector::start(cluster.clone(), config).await;
    if !gc.wait_for_sync(Duration::from_secs(30)).await {
        anyhow::bail!("the monitors did not sync within 30s");
    }
    wait_until_graph_has(&gc, trees.iter().map(|t| t.members.len() + 1).sum(), options.timeout).await?;
    let plan = choose_policies(&trees, &mut rng);
    let started = Instant::now();
    for (tree, policy) in trees.iter().zip(&plan) {
        if let Some(policy) = policy {
            let options = DeleteOptions {
                propagation_policy: Some(*policy),
                ..Default::default()
            };
            cluster.delete_object(&tree.root.gvr, &tree.root.namespace, &tree.root.name, &options)?;
        }
    }
    let converged = wait_until_quiet(&gc, options.timeout, options.progress, GarbageCollector::is_quiet).await;
    let converge_time = started.elapsed();
    gc.shutdown().await;
    let mut summary = tally(&cluster, &trees, &plan);
    summary.converged = converged;
    summary.converge_time = converge_time;
    let calls = cluster.api_calls();
    summary.api_calls = BTreeMap::from([
        ("get", calls.get),
        ("list", calls.list),
        ("watch", calls.watch),
        ("patch", calls.patch),
        ("delete", calls.delete),
    ]);
    Ok(summary)
}

/// Creates the trees: about `objects` objects in all.
fn populate(cluster: &SimCluster, objects: usize, rng: &mut SmallRng) -> anyhow::Result<Vec<Tree>> {
    let mut trees = Vec::new();
    let mut made = 0;
    let mut i = 0;
    let role = create(
        cluster,
        &gvr("rbac.authorization.k8s.io", "v1", "clusterroles"),
        "",
        "demo-owner",
        Vec::new(),
    )?;
    let mut role_tree = Tree {
        root: role.clone(),
        members: Vec::new(),
    };
    while made < objects {
        let ns = namespace(i % NAMESPACES);
        let tree = match i % 4 {
            0 | 1 => deployment_tree(cluster, &ns, i, rng.gen_range(1..=2), rng.gen_range(2..=6))?,
            2 => job_tree(cluster, &ns, i, rng.gen_range(1..=4))?,
            _ => custom_chain(cluster, &ns, i)?,
        };
        let cm = create(
            cluster,
            &gvr("", "v1", "configmaps"),
            &ns,
            &format!("role-cm-{i}"),
            vec![owner_ref(&role, "ClusterRole", "rbac.authorization.k8s.io/v1")],
        )?;
        role_tree.members.push(cm);
        made += tree.members.len() + 2;
        trees.push(tree);
        i += 1;
    }
    trees.push(role_tree);
    Ok(trees)
}

fn deployment_tree(cluster: &SimCluster, ns: &str, i: usize, sets: usize, pods: usize) -> anyhow::Result<Tree> {
    let root = create(
        cluster,
        &gvr("apps", "v1", "deployments"),
        ns,
        &format!("deploy-{i}"),
        Vec::new(),
    )?;
    let mut members = Vec::new();
    for s in 0..sets {
        let rs = create(
            cluster,
            &gvr("apps", "v1", "replicasets"),
            ns,
            &format!("deploy-{i}-rs{s}"),
            vec![controller_ref(&root, "Deployment", "apps/v1")],
        )?;
        for p in 0..pods {
            let pod = create(
                cluster,
                &gvr("", "v1", "pods"),
                ns,
                &format!("deploy-{i}-rs{s}-pod{p}"),
                vec![controller_ref(&rs, "ReplicaSet", "apps/v1")],
            )?;
            members.push(pod);
        }
        members.push(rs);
    }
    Ok(Tree { root, members })
}

fn job_tree(cluster: &SimCluster, ns: &str, i: usize, pods: usize) -> anyhow::Result<Tree> {
    let root = create(
        cluster,
        &gvr("batch", "v1", "jobs"),
        ns,
        &format!("job-{i}"),
        Vec::new(),
    )?;
    let members = (0..pods)
        .map(|p| {
            create(
                cluster,
                &gvr("", "v1", "pods"),
                ns,
                &format!("job-{i}-pod{p}"),
                vec![controller_ref(&root, "Job", "batch/v1")],
            )
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(Tree { root, members })
}

fn custom_chain(cluster: &SimCluster, ns: &str, i: usize) -> anyhow::Result<Tree> {
    let root = create(
        cluster,
        &gvr("demo.kube-gc.io", "v1", "widgets"),
        ns,
        &format!("widget-{i}"),
        Vec::new(),
    )?;
    let gadget = create(
        cluster,
        &gvr("demo.kube-gc.io", "v1", "gadgets"),
        ns,
        &format!("gadget-{i}"),
        vec![controller_ref(&root, "Widget", "demo.kube-gc.io/v1")],
    )?;
    let cm = create(
        cluster,
        &gvr("", "v1", "configmaps"),
        ns,
        &format!("gadget-{i}-cm"),
        vec![controller_ref(&gadget, "Gadget", "demo.kube-gc.io/v1")],
    )?;
    Ok(Tree {
        root,
        members: vec![gadget, cm],
    })
}

fn gvr(group: &str, version: &str, resource: &str) -> Gvr {
    Gvr::new(group, version, resource)
}

fn owner_ref(owner: &Created, kind: &str, api_version: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: owner.name.clone(),
        uid: owner.uid.clone(),
        ..Default::default()
    }
}

/// A controller ref that blocks its owner's foreground deletion, as controllers write them.
fn controller_ref(owner: &Created, kind: &str, api_version: &str) -> OwnerReference {
    OwnerReference {
        controller: Some(true),
        block_owner_deletion: Some(true),
        ..owner_ref(owner, kind, api_version)
    }
}

fn create(
    cluster: &SimCluster,
    gvr: &Gvr,
    ns: &str,
    name: &str,
    owners: Vec<OwnerReference>,
) -> anyhow::Result<Created> {
    let meta = ObjectMeta {
        name: name.into(),
        namespace: ns.into(),
        owner_references: owners,
        ..Default::default()
    };
    let obj = cluster.create(
        gvr,
        PartialObjectMeta {
            metadata: meta,
            ..Default::default()
        },
    )?;
    Ok(Created {
        gvr: gvr.clone(),
        namespace: ns.into(),
        name: name.into(),
        uid: obj.metadata.uid,
    })
}

/// Each tree gets one of: untouched, Background, Foreground, Orphan (a quarter each, at random);
/// the cluster-scoped owner's tree, which comes last, is always deleted in the background.
fn choose_policies(trees: &[Tree], rng: &mut SmallRng) -> Vec<Option<PropagationPolicy>> {
    let last = trees.len().saturating_sub(1);
    trees
        .iter()
        .enumerate()
        .map(|(i, _)| match rng.gen_range(0..4) {
            _ if i == last => Some(PropagationPolicy::Background),
            0 => None,
            1 => Some(PropagationPolicy::Background),
            2 => Some(PropagationPolicy::Foreground),
            _ => Some(PropagationPolicy::Orphan),
        })
        .collect()
}

async fn wait_until_graph_has<C: crate::api::ClusterApi>(
    gc: &GarbageCollector<C>,
    nodes: usize,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while gc.graph().len() < nodes || !gc.is_quiet() {
        if Instant::now() > deadline {
            anyhow::bail!(
                "the graph holds {} of {nodes} objects after {timeout:?}",
                gc.graph().len()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Waits until `quiet` holds at two checks in a row, 50 ms apart, showing how many nodes remain;
/// false if `timeout` passes first. `quiet` is [`GarbageCollector::is_quiet`] for the demo; a
/// caller whose cluster may keep items retrying forever passes a condition built on
/// [`GarbageCollector::is_settled`].
pub async fn wait_until_quiet<C: crate::api::ClusterApi>(
    gc: &GarbageCollector<C>,
    timeout: Duration,
    progress: bool,
    mut quiet: impl FnMut(&GarbageCollector<C>) -> bool,
) -> bool {
    let bar = if progress {
        indicatif::ProgressBar::new_spinner()
    } else {
        indicatif::ProgressBar::hidden()
    };
    let deadline = Instant::now() + timeout;
    // Quiet must hold twice in a row: a watch event may be in flight between two checks.
    let mut quiet_checks = 0;
    while quiet_checks < 2 {
        if Instant::now() > deadline {
            bar.abandon_with_message("timed out");
            return false;
        }
        quiet_checks = if quiet(gc) { quiet_checks + 1 } else { 0 };
        bar.set_message(format!(
            "collecting: {} objects in the graph, {} queued for deletion",
            gc.graph().len(),
            gc.attempt_to_delete().len()
        ));
        bar.tick();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bar.finish_and_clear();
    true
}

fn tally(cluster: &SimCluster, trees: &[Tree], plan: &[Option<PropagationPolicy>]) -> SimulateSummary {
    let mut summary = SimulateSummary {
        objects_created: trees.iter().map(|t| t.members.len() + 1).sum(),
        ..Default::default()
    };
    for (tree, policy) in trees.iter().zip(plan) {
        let Some(policy) = policy else {
            summary.untouched_total += tree.members.len() + 1;
            summary.untouched_present += std::iter::once(&tree.root)
                .chain(&tree.members)
                .filter(|c| fetch(cluster, c).is_some())
                .count();
            continue;
        };
        let outcome = summary.by_policy.entry(policy.as_str()).or_default();
        outcome.roots += 1;
        outcome.deleted += usize::from(fetch(cluster, &tree.root).is_none());
        for member in &tree.members {
            match fetch(cluster, member) {
                None => outcome.deleted += 1,
                Some(obj) if obj.metadata.owner_references.is_empty() => outcome.orphaned += 1,
                Some(_) => outcome.kept += 1,
            }
        }
    }
    summary
}

/// The object if it still exists under the same UID.
fn fetch(cluster: &SimCluster, c: &Created) -> Option<PartialObjectMeta> {
    cluster
        .get_object(&c.gvr, &c.namespace, &c.name)
        .ok()
        .filter(|o| o.metadata.uid == c.uid)
}

impl std::fmt::Display for SimulateSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "objects created: {}", self.objects_created)?;
        writeln!(
            f,
            "{:<12} {:>6} {:>9} {:>9} {:>6}",
            "policy", "roots", "deleted", "orphaned", "kept"
        )?;
        for (policy, o) in &self.by_policy {
            writeln!(
                f,
                "{policy:<12} {:>6} {:>9} {:>9} {:>6}",
                o.roots, o.deleted, o.orphaned, o.kept
            )?;
        }
        writeln!(
            f,
            "untouched trees: {} of {} objects still present",
            self.untouched_present, self.untouched_total
        )?;
        let status = if self.converged {
            "converged"
        } else {
            "did NOT converge"
        };
        writeln!(f, "{status} in {:.2?}", self.converge_time)?;
        let calls: Vec<String> = self.api_calls.iter().map(|(verb, n)| format!("{verb}={n}")).collect();
        write!(f, "API calls by the collector: {}", calls.join(" "))
    }
}
