//! `kube-gc simulate`: the demo. Builds a synthetic cluster with the one generator
//! ([`crate::generate`]) in the in-memory simulated API server, starts the garbage collector
//! against it, deletes a quarter of the roots with each propagation policy, and reports what the
//! collector did.
//!
//! The shapes are the generator's ([`demo_topology`]): Deployments → ReplicaSets → Pods,
//! Jobs → Pods, chains of Widgets (served as a custom type, so patches take the JSON-merge
//! fallback), and cluster-scoped owners (ClusterRoles owning ClusterRoleBindings, Fleets owning
//! ConfigMaps across the namespaces). [`populate_cluster`] is also how `kube-gc sim-apiserver
//! --preset` fills its cluster.

use crate::generate::{generate, Amount, GenerateError, Step, Topology, KINDS};
use crate::{SimCluster, TypeDef};
use kube_gc::api::{ApiError, DeleteOptions, Gvr, ObjectMeta, PartialObjectMeta, PropagationPolicy, StatusReason};
use kube_gc::collector::CollectorConfig;
use kube_gc::controller::{Config, GarbageCollector};
use std::collections::{BTreeMap, HashMap};
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
    /// Seed of the generator (the cluster's names and UIDs, and which trees get which policy).
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
            partitions: kube_gc::controller::default_partitions(),
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

/// Why the demo, or the filling of a cluster, stopped.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// The simulated cluster refused a call.
    #[error("the simulated cluster refused a call: {0}")]
    Api(#[from] ApiError),
    /// The generator cannot make the topology asked for.
    #[error("{0}")]
    Topology(String),
    /// The collector's monitors did not sync in time.
    #[error("the monitors did not sync within {0:?}")]
    NotSynced(Duration),
    /// The collector's graph did not take in the whole cluster in time.
    #[error("the graph holds {held} of {expected} objects after {timeout:?}")]
    GraphIncomplete {
        /// Nodes in the graph at the deadline.
        held: usize,
        /// Objects the cluster holds.
        expected: usize,
        /// How long it was given.
        timeout: Duration,
    },
}

impl From<GenerateError<ApiError>> for SimulateError {
    fn from(e: GenerateError<ApiError>) -> Self {
        match e {
            GenerateError::Topology(reason) => SimulateError::Topology(reason),
            GenerateError::Sink(e) => SimulateError::Api(e),
        }
    }
}

/// One tree of the synthetic cluster: its root, every object below it, and how the demo deletes
/// the root (`None`: it stays untouched).
struct Tree {
    root: Created,
    members: Vec<Created>,
    policy: Option<PropagationPolicy>,
}

/// An object the simulation created, as a (resource, namespace, name, uid) quadruple.
#[derive(Clone)]
struct Created {
    gvr: Gvr,
    namespace: String,
    name: String,
    uid: String,
}

/// The demo's cluster: the generator's shapes at about `objects` objects, with a quarter of the
/// roots deleted with each policy and a quarter untouched.
///
/// The special cases (multi-owner ConfigMaps, cycles, dangling and cross-namespace references)
/// and the churn are left out: the table counts objects by the one tree each belongs to, and
/// those cases belong to two trees or none. There are always a ClusterRole and a Fleet, so that
/// cluster-scoped owners are in the demo at every size.
pub fn demo_topology(objects: usize) -> Topology {
    let sized = Topology::sized(objects);
    Topology {
        cluster_owners: sized.cluster_owners.max(2),
        multi_owner: 0,
        dangling: 0,
        cross_namespace: 0,
        cycles: 0,
        churn: 0,
        delete_background: Amount::Share(0.25),
        delete_foreground: Amount::Share(0.25),
        delete_orphan: Amount::Share(0.25),
        ..sized
    }
}

/// Fills `cluster` with what the generator makes of `topology` and `seed`: serves the custom
/// types, creates the namespaces, then creates each object of the initial listing (with the
/// generator's UID, which the simulated cluster keeps) as it is yielded, so that even the largest
/// preset is never held twice in memory. Churn and deletions are not applied; every step, those
/// included, is shown to `observe` once handled. Returns how many objects the listing created.
///
/// `kube-gc simulate` and `kube-gc sim-apiserver --preset` both build their clusters here.
pub fn populate_cluster(
    cluster: &SimCluster,
    topology: &Topology,
    seed: u64,
    mut observe: impl FnMut(&Step),
) -> Result<usize, SimulateError> {
    topology.check().map_err(SimulateError::Topology)?;
    for kind in KINDS.iter().filter(|k| k.custom) {
        let def = TypeDef::new(kind.group, kind.version, kind.kind, kind.resource, kind.namespaced);
        cluster.register(def.custom());
    }
    let namespaces = Gvr::new("", "v1", "namespaces");
    for i in 0..topology.namespaces {
        let meta = ObjectMeta {
            name: Topology::namespace(i),
            ..Default::default()
        };
        let namespace = PartialObjectMeta {
            metadata: meta,
            ..Default::default()
        };
        match cluster.create(&namespaces, namespace) {
            // A cluster that already has the namespace (sim-apiserver's defaults) is fine.
            Err(ApiError::Status {
                reason: StatusReason::AlreadyExists,
                ..
            }) => {}
            other => {
                other?;
            }
        }
    }
    let summary = generate(topology, seed, |step| {
        if let Step::Create { kind, object } = &step {
            cluster.create(&kind.gvr(), object.clone())?;
        }
        observe(&step);
        Ok::<(), ApiError>(())
    })?;
    Ok(summary.objects())
}

/// What the demo keeps of the generator's steps to build its [`Tree`]s after the population.
#[derive(Default)]
struct Recorder {
    /// Every object created, with the UID of its first owner.
    objects: Vec<(Created, Option<String>)>,
    /// The roots to delete, by UID.
    deletions: HashMap<String, PropagationPolicy>,
}

impl Recorder {
    fn observe(&mut self, step: &Step) {
        match step {
            Step::Create { kind, object } => {
                let m = &object.metadata;
                let created = Created {
                    gvr: kind.gvr(),
                    namespace: m.namespace.clone(),
                    name: m.name.clone(),
                    uid: m.uid.clone(),
                };
                let owner = m.owner_references.first().map(|r| r.uid.clone());
                self.objects.push((created, owner));
            }
            Step::Delete { policy, object, .. } => {
                self.deletions.insert(object.metadata.uid.clone(), *policy);
            }
            Step::Listed | Step::Modify { .. } => {}
        }
    }

    /// The trees, in the order their roots were created. Each object joins the tree its first
    /// owner chain ends in; in the demo's topology every object has at most one owner, and some
    /// Pods are listed before their ReplicaSet, hence the walk after the fact.
    fn trees(self) -> Vec<Tree> {
        let position: HashMap<&str, usize> = self
            .objects
            .iter()
            .enumerate()
            .map(|(i, (c, _))| (c.uid.as_str(), i))
            .collect();
        let root_of = |mut i: usize| {
            while let Some(owner) = self.objects[i].1.as_deref().and_then(|uid| position.get(uid)) {
                i = *owner;
            }
            i
        };
        let mut tree_of_root: HashMap<usize, usize> = HashMap::new();
        let mut trees: Vec<Tree> = Vec::new();
        for (i, (created, _)) in self.objects.iter().enumerate() {
            let root = root_of(i);
            let t = *tree_of_root.entry(root).or_insert_with(|| {
                let root = self.objects[root].0.clone();
                let policy = self.deletions.get(&root.uid).copied();
                trees.push(Tree {
                    root,
                    members: Vec::new(),
                    policy,
                });
                trees.len() - 1
            });
            if i != root {
                trees[t].members.push(created.clone());
            }
        }
        trees
    }
}

/// Runs the whole demo on the current tokio runtime.
pub async fn run(options: &SimulateOptions) -> Result<SimulateSummary, SimulateError> {
    let cluster = Arc::new(SimCluster::new());
    let mut recorder = Recorder::default();
    let topology = demo_topology(options.objects);
    populate_cluster(&cluster, &topology, options.seed, |step| recorder.observe(step))?;
    let trees = recorder.trees();
    let config = Config {
        workers: options.workers,
        partitions: options.partitions,
        collector: options.collector.clone(),
        ..Config::default()
    };
    let gc = GarbageCollector::start(cluster.clone(), config).await;
    let sync = Duration::from_secs(30);
    if !gc.wait_for_sync(sync).await {
        return Err(SimulateError::NotSynced(sync));
    }
    wait_until_graph_has(&gc, trees.iter().map(|t| t.members.len() + 1).sum(), options.timeout).await?;
    let started = Instant::now();
    for tree in &trees {
        if let Some(policy) = tree.policy {
            let options = DeleteOptions {
                propagation_policy: Some(policy),
                ..Default::default()
            };
            cluster.delete_object(&tree.root.gvr, &tree.root.namespace, &tree.root.name, &options)?;
        }
    }
    let converged = wait_until_quiet(&gc, options.timeout, options.progress, GarbageCollector::is_quiet).await;
    let converge_time = started.elapsed();
    gc.shutdown().await;
    let mut summary = tally(&cluster, &trees);
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

async fn wait_until_graph_has<C: kube_gc::api::ClusterApi>(
    gc: &GarbageCollector<C>,
    nodes: usize,
    timeout: Duration,
) -> Result<(), SimulateError> {
    let deadline = Instant::now() + timeout;
    while gc.graph().len() < nodes || !gc.is_quiet() {
        if Instant::now() > deadline {
            return Err(SimulateError::GraphIncomplete {
                held: gc.graph().len(),
                expected: nodes,
                timeout,
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// How often [`wait_until_quiet`] checks its condition.
pub const QUIET_CHECK_PERIOD: Duration = Duration::from_millis(5);

/// How long [`wait_until_quiet`]'s condition must hold, at every check, before the wait ends: a
/// watch event may be in flight at any one check, so quiet is a span, not an instant. The span is
/// what two checks 50 ms apart gave before; checking every 5 ms instead of every 50 ms lets a
/// caller time the moment quiet began to within 5 ms rather than within 100 ms (the replay's
/// convergence time, about a second, was overstated by 5–10 %).
pub const QUIET_FOR: Duration = Duration::from_millis(100);

/// How many checks pass between two updates of the progress spinner.
const CHECKS_PER_PROGRESS: u32 = 10;

/// Waits until `quiet` has held at every check for [`QUIET_FOR`], checking every
/// [`QUIET_CHECK_PERIOD`] and showing how many nodes remain; false if `timeout` passes first.
/// `quiet` is [`GarbageCollector::is_quiet`] for the demo; a caller whose cluster may keep items
/// retrying forever passes a condition built on [`GarbageCollector::is_settled`].
pub async fn wait_until_quiet<C: kube_gc::api::ClusterApi>(
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
    let mut quiet_since: Option<Instant> = None;
    for check in 0u32.. {
        let now = Instant::now();
        if now > deadline {
            bar.abandon_with_message("timed out");
            return false;
        }
        quiet_since = if quiet(gc) { quiet_since.or(Some(now)) } else { None };
        if quiet_since.is_some_and(|since| now - since >= QUIET_FOR) {
            break;
        }
        if check % CHECKS_PER_PROGRESS == 0 {
            bar.set_message(format!(
                "collecting: {} objects in the graph, {} queued for deletion",
                gc.graph().len(),
                gc.attempt_to_delete().len()
            ));
            bar.tick();
        }
        tokio::time::sleep(QUIET_CHECK_PERIOD).await;
    }
    bar.finish_and_clear();
    true
}

fn tally(cluster: &SimCluster, trees: &[Tree]) -> SimulateSummary {
    let mut summary = SimulateSummary {
        objects_created: trees.iter().map(|t| t.members.len() + 1).sum(),
        ..Default::default()
    };
    for tree in trees {
        let Some(policy) = tree.policy else {
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
