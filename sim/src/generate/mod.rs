//! The one generator of synthetic clusters: `loadgen generate` writes what it yields as a watch
//! stream, `kube-gc simulate` and `kube-gc sim-apiserver --preset` store it in a simulated
//! cluster.
//!
//! # Invariants
//!
//! - **Deterministic.** What [`generate`] yields is a function of the [`Topology`] and the seed
//!   alone: one seeded RNG, drawn in a fixed order. Callers that add UIDs of their own or
//!   resourceVersions do so without touching that RNG.
//! - **Shapes.** One vocabulary for every caller: Deployment → ReplicaSets → Pods, Job → Pods,
//!   chains of `example.com/v1` Widgets (a custom type, so patches take the JSON-merge fallback),
//!   cluster-scoped owners (ClusterRoles owning ClusterRoleBindings, `example.com/v1` Fleets
//!   owning ConfigMaps across the namespaces), and the special cases: ConfigMaps with two
//!   Deployment owners, Pods of a ReplicaSet that never exists, ConfigMaps naming a Deployment of
//!   another namespace, and two-ConfigMap ownership cycles.
//! - **Sizes.** [`Topology::objects`] is exactly how many objects are created when every special
//!   case fits (the module's tests hold the presets to it); [`Preset`]s are about 10k, 1M and 5M
//!   objects and [`Topology::sized`] about any number.
//! - **Streamed.** Objects are handed to the caller one at a time as they are made. What is kept
//!   is one namespace's Deployments, the churned Pods and the roots to delete (a few percent of
//!   the objects), so a 5M-object cluster is never in memory here.
//!
//! # The order of the steps
//!
//! 1. [`Step::Create`] for every object, namespace by namespace (Deployment → ReplicaSets → Pods,
//!    Job → Pods, Widget chains, then the special cases), then the cluster-scoped owners and
//!    their dependents. A few Pods come before their ReplicaSet (`pods_before_owner`).
//! 2. [`Step::Listed`]: the initial listing is over.
//! 3. Churn, [`Step::Modify`] of Deployment pods: a blockOwnerDeletion flip, the Deployment added
//!    as second owner, or a move to a sibling ReplicaSet.
//! 4. [`Step::Delete`] of the roots whose fate is a deletion, each with its policy.
//!
//! # Why the outcome does not depend on timing
//!
//! Churn never makes garbage and comes before any deletion; each deletion hits a different tree.
//! The only objects with owners in two trees are the multi-owner ConfigMaps and the cycles'
//! first ConfigMaps. A cycle keeps its head alive whatever happens to its Deployment. A
//! multi-owner ConfigMap never has an Orphan deletion paired with a Background or Foreground one,
//! because then the order in which the collector sees its two owners go would decide whether it
//! survives. Dangling and cross-namespace references are garbage from the start; a full replay
//! lets the collector settle before the first later step, so they are gone before any deletion.

mod names;
mod topology;

pub use topology::{Amount, Preset, Topology};

use kube_gc::api::names::random_suffix;
use kube_gc::api::{Gvr, ObjectMeta, OwnerReference, PartialObjectMeta, PropagationPolicy};
use names::{uid, unique_child};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashSet};

/// Application names for Deployments, cycled through.
const APPS: [&str; 8] = ["web", "api", "worker", "cache", "gateway", "search", "billing", "auth"];

/// A type the generator makes objects of.
#[derive(Debug, PartialEq, Eq)]
pub struct Kind {
    /// API group; `""` for the core group.
    pub group: &'static str,
    /// Version inside the group.
    pub version: &'static str,
    /// `group/version`, as objects and references spell it.
    pub api_version: &'static str,
    /// The kind.
    pub kind: &'static str,
    /// Plural resource name.
    pub resource: &'static str,
    /// Whether objects of the type live in a namespace.
    pub namespaced: bool,
    /// A custom resource, which a cluster must be told to serve.
    pub custom: bool,
}

impl Kind {
    /// The resource that serves the type.
    pub fn gvr(&self) -> Gvr {
        Gvr::new(self.group, self.version, self.resource)
    }
}

macro_rules! kinds {
    ($($name:ident = $group:literal $version:literal $api_version:literal $kind:literal $resource:literal $namespaced:literal $custom:literal;)*) => {
        $(const $name: Kind = Kind {
            group: $group,
            version: $version,
            api_version: $api_version,
            kind: $kind,
            resource: $resource,
            namespaced: $namespaced,
            custom: $custom,
        };)*
        /// Every type the generator makes objects of.
        pub const KINDS: &[Kind] = &[$($name),*];
    };
}

kinds! {
    DEPLOYMENT = "apps" "v1" "apps/v1" "Deployment" "deployments" true false;
    REPLICA_SET = "apps" "v1" "apps/v1" "ReplicaSet" "replicasets" true false;
    POD = "" "v1" "v1" "Pod" "pods" true false;
    CONFIG_MAP = "" "v1" "v1" "ConfigMap" "configmaps" true false;
    JOB = "batch" "v1" "batch/v1" "Job" "jobs" true false;
    WIDGET = "example.com" "v1" "example.com/v1" "Widget" "widgets" true true;
    FLEET = "example.com" "v1" "example.com/v1" "Fleet" "fleets" false true;
    CLUSTER_ROLE = "rbac.authorization.k8s.io" "v1" "rbac.authorization.k8s.io/v1" "ClusterRole" "clusterroles" false false;
    CLUSTER_ROLE_BINDING = "rbac.authorization.k8s.io" "v1" "rbac.authorization.k8s.io/v1" "ClusterRoleBinding" "clusterrolebindings" false false;
}

/// One thing the generator yields, in the order the module docs give.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// An object of the initial listing, with its UID and owner references.
    Create {
        /// Its type.
        kind: &'static Kind,
        /// The object (`apiVersion`, `kind`, name, namespace, UID, owners).
        object: PartialObjectMeta,
    },
    /// The initial listing is over.
    Listed,
    /// A listed object changed (churn): the whole new object.
    Modify {
        /// Its type.
        kind: &'static Kind,
        /// The object as it now is.
        object: PartialObjectMeta,
    },
    /// A root deleted with `policy`; the cascade is left to the collector.
    Delete {
        /// Its type.
        kind: &'static Kind,
        /// How it is deleted.
        policy: PropagationPolicy,
        /// The root as it was listed.
        object: PartialObjectMeta,
    },
}

/// What a generation made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Objects created, by kind.
    pub objects_by_kind: BTreeMap<String, usize>,
    /// Deletions, by policy.
    pub deletions: BTreeMap<&'static str, usize>,
    /// Special cases made, by name; fewer than asked when a namespace could not hold one.
    pub special: BTreeMap<&'static str, usize>,
}

impl Summary {
    /// Objects created.
    pub fn objects(&self) -> usize {
        self.objects_by_kind.values().sum()
    }
}

/// Why [`generate`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError<E> {
    /// The topology cannot be generated; the message says why.
    #[error("{0}")]
    Topology(String),
    /// The caller's sink refused a step.
    #[error(transparent)]
    Sink(E),
}

/// Generates the cluster of `topology` for `seed`, handing each [`Step`] to `sink` as it is made.
pub fn generate<E>(
    topology: &Topology,
    seed: u64,
    sink: impl FnMut(Step) -> Result<(), E>,
) -> Result<Summary, GenerateError<E>> {
    topology.check().map_err(GenerateError::Topology)?;
    let mut rng = SmallRng::seed_from_u64(seed);
    // The fates and the churned pods are drawn first, so that neither depends on the trees' draws.
    let fates = plan_fates(topology, &mut rng);
    let mut churn_at = rand::seq::index::sample(&mut rng, topology.deployment_pods(), topology.churn).into_vec();
    churn_at.sort_unstable();
    let mut g = Generator {
        t: topology,
        rng,
        sink,
        fates: fates.into_iter(),
        churn_at: churn_at.into_iter().peekable(),
        pods_made: 0,
        churned: Vec::new(),
        deletions: Vec::new(),
        summary: Summary::default(),
    };
    g.run().map_err(GenerateError::Sink)?;
    Ok(g.summary)
}

/// The fate of every root, in generation order: `None` keeps it.
fn plan_fates(t: &Topology, rng: &mut SmallRng) -> Vec<Option<PropagationPolicy>> {
    let roots = t.roots();
    let mut fates = Vec::with_capacity(roots);
    for (amount, policy) in [
        (t.delete_background, PropagationPolicy::Background),
        (t.delete_foreground, PropagationPolicy::Foreground),
        (t.delete_orphan, PropagationPolicy::Orphan),
    ] {
        fates.extend(std::iter::repeat_n(Some(policy), amount.of(roots)));
    }
    fates.resize(roots, None);
    fates.shuffle(rng);
    fates
}

/// An object made, as its dependents refer to it.
#[derive(Clone)]
struct Made {
    kind: &'static Kind,
    namespace: String,
    name: String,
    uid: String,
    fate: Option<PropagationPolicy>,
}

impl Made {
    /// A reference to this object, blocking its foreground deletion as controllers write them.
    fn owner_ref(&self, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: self.kind.api_version.into(),
            kind: self.kind.kind.into(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: controller.then_some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// The object itself, with `owners`.
    fn object(&self, owners: Vec<OwnerReference>) -> PartialObjectMeta {
        PartialObjectMeta {
            api_version: self.kind.api_version.into(),
            kind: self.kind.kind.into(),
            metadata: ObjectMeta {
                name: self.name.clone(),
                namespace: self.namespace.clone(),
                uid: self.uid.clone(),
                owner_references: owners,
                ..Default::default()
            },
            ..Default::default()
        }
    }
}

/// The state of one generation run; see the module docs for the order of the steps.
struct Generator<'a, F> {
    t: &'a Topology,
    rng: SmallRng,
    sink: F,
    /// Fates of the roots not made yet, in generation order.
    fates: std::vec::IntoIter<Option<PropagationPolicy>>,
    /// Indices (among Deployment pods) of the pods to churn, ascending.
    churn_at: std::iter::Peekable<std::vec::IntoIter<usize>>,
    pods_made: usize,
    /// The changed pods of the churn, yielded after the listing.
    churned: Vec<PartialObjectMeta>,
    /// Roots to delete, yielded last.
    deletions: Vec<(&'static Kind, PropagationPolicy, PartialObjectMeta)>,
    summary: Summary,
}

impl<E, F: FnMut(Step) -> Result<(), E>> Generator<'_, F> {
    fn run(&mut self) -> Result<(), E> {
        let mut previous: Vec<Made> = Vec::new();
        for i in 0..self.t.namespaces {
            let namespace = Topology::namespace(i);
            let deployments = self.namespace(&namespace)?;
            self.specials(&namespace, i, &deployments, &previous)?;
            previous = deployments;
        }
        for c in 0..self.t.cluster_owners {
            self.cluster_owner(c)?;
        }
        (self.sink)(Step::Listed)?;
        for object in std::mem::take(&mut self.churned) {
            (self.sink)(Step::Modify { kind: &POD, object })?;
        }
        for (kind, policy, object) in std::mem::take(&mut self.deletions) {
            *self.summary.deletions.entry(policy.as_str()).or_default() += 1;
            (self.sink)(Step::Delete { kind, policy, object })?;
        }
        Ok(())
    }

    /// The trees of one namespace; returns its Deployments.
    fn namespace(&mut self, ns: &str) -> Result<Vec<Made>, E> {
        let deployments = (0..self.t.deployments)
            .map(|d| self.deployment(ns, d))
            .collect::<Result<Vec<_>, E>>()?;
        for j in 0..self.t.jobs {
            self.job(ns, j)?;
        }
        let mut heads = HashSet::new();
        for _ in 0..self.t.chains {
            self.chain(ns, &mut heads)?;
        }
        Ok(deployments)
    }

    fn deployment(&mut self, ns: &str, d: usize) -> Result<Made, E> {
        let name = format!("{}-{d:04}", APPS[d % APPS.len()]);
        let deploy = self.root(&DEPLOYMENT, ns, name)?;
        let mut taken = HashSet::new();
        let sets: Vec<Made> = (0..self.t.replicasets)
            .map(|_| {
                let name = unique_child(&mut self.rng, &deploy.name, 10, &mut taken);
                self.made(&REPLICA_SET, ns, name, None)
            })
            .collect();
        for rs in &sets {
            self.replicaset(&deploy, rs, &sets)?;
        }
        Ok(deploy)
    }

    /// A ReplicaSet and its pods, a few of them listed before it.
    fn replicaset(&mut self, deploy: &Made, rs: &Made, siblings: &[Made]) -> Result<(), E> {
        let mut taken = HashSet::new();
        let mut after = Vec::with_capacity(self.t.pods);
        for _ in 0..self.t.pods {
            let name = unique_child(&mut self.rng, &rs.name, 5, &mut taken);
            let pod = self
                .made(&POD, &rs.namespace, name, None)
                .object(vec![rs.owner_ref(true)]);
            if self.churn_at.next_if_eq(&self.pods_made).is_some() {
                let changed = self.churn(&pod, deploy, rs, siblings);
                self.churned.push(changed);
            }
            self.pods_made += 1;
            if self.rng.gen_bool(self.t.pods_before_owner) {
                self.create(&POD, pod)?;
            } else {
                after.push(pod);
            }
        }
        self.create(&REPLICA_SET, rs.object(vec![deploy.owner_ref(true)]))?;
        for pod in after {
            self.create(&POD, pod)?;
        }
        Ok(())
    }

    /// The pod after one churn change.
    fn churn(&mut self, pod: &PartialObjectMeta, deploy: &Made, rs: &Made, siblings: &[Made]) -> PartialObjectMeta {
        let mut changed = pod.clone();
        let refs = &mut changed.metadata.owner_references;
        let sibling = siblings.iter().find(|s| s.uid != rs.uid);
        match (self.rng.gen_range(0..3), sibling) {
            (1, _) => refs.push(deploy.owner_ref(false)),
            (2, Some(sibling)) => refs[0] = sibling.owner_ref(true),
            _ => refs[0].block_owner_deletion = Some(false),
        }
        changed
    }

    fn job(&mut self, ns: &str, j: usize) -> Result<(), E> {
        let job = self.root(&JOB, ns, format!("job-{j:04}"))?;
        let mut taken = HashSet::new();
        for _ in 0..self.t.job_pods {
            let name = unique_child(&mut self.rng, &job.name, 5, &mut taken);
            let pod = self.made(&POD, ns, name, None);
            self.create(&POD, pod.object(vec![job.owner_ref(true)]))?;
        }
        Ok(())
    }

    /// A chain of Widgets, each owned by the one before.
    fn chain(&mut self, ns: &str, heads: &mut HashSet<String>) -> Result<(), E> {
        let name = unique_child(&mut self.rng, "widget", 8, heads);
        let head = self.root(&WIDGET, ns, name)?;
        let mut owner = head.clone();
        for level in 1..self.t.chain_depth {
            let widget = self.made(&WIDGET, ns, format!("{}-{level}", head.name), None);
            self.create(&WIDGET, widget.object(vec![owner.owner_ref(true)]))?;
            owner = widget;
        }
        Ok(())
    }

    /// The special cases of namespace `i`: its share of each total.
    fn specials(&mut self, ns: &str, i: usize, deployments: &[Made], previous: &[Made]) -> Result<(), E> {
        let n = self.t.namespaces;
        for k in 0..share(self.t.multi_owner, n, i) {
            if let Some((a, b)) = self.compatible_pair(deployments) {
                self.config_map(
                    ns,
                    format!("shared-{k:04}"),
                    vec![a.owner_ref(false), b.owner_ref(false)],
                )?;
                self.count_special("multi_owner");
            }
        }
        for k in 0..share(self.t.dangling, n, i) {
            let name = format!("ghost-{}", random_suffix(&mut self.rng, 10));
            let ghost = self.made(&REPLICA_SET, ns, name, None);
            let pod = self.made(&POD, ns, format!("stray-{k:04}"), None);
            self.create(&POD, pod.object(vec![ghost.owner_ref(true)]))?;
            self.count_special("dangling");
        }
        // Namespace 0 has no namespace before it: the cross-namespace references are spread over
        // the others.
        let cross = if i == 0 {
            0
        } else {
            share(self.t.cross_namespace, n - 1, i - 1)
        };
        for k in 0..cross {
            if let Some(owner) = previous.choose(&mut self.rng) {
                self.config_map(ns, format!("xns-{k:04}"), vec![owner.owner_ref(false)])?;
                self.count_special("cross_namespace");
            }
        }
        for k in 0..share(self.t.cycles, n, i) {
            if let Some(owner) = deployments.choose(&mut self.rng) {
                self.cycle(ns, k, owner)?;
            }
        }
        Ok(())
    }

    /// Two different Deployments whose fates cannot race over a shared dependent (module docs).
    fn compatible_pair<'d>(&mut self, deployments: &'d [Made]) -> Option<(&'d Made, &'d Made)> {
        let races = |a: &Made, b: &Made| {
            let orphan = |m: &Made| m.fate == Some(PropagationPolicy::Orphan);
            let collect = |m: &Made| m.fate.is_some() && !orphan(m);
            (orphan(a) && collect(b)) || (collect(a) && orphan(b))
        };
        let first = deployments.choose(&mut self.rng)?;
        let partners: Vec<&Made> = deployments
            .iter()
            .filter(|d| d.uid != first.uid && !races(first, d))
            .collect();
        partners.choose(&mut self.rng).map(|second| (first, *second))
    }

    /// Two ConfigMaps owning each other; the first is also owned by `owner`.
    fn cycle(&mut self, ns: &str, k: usize, owner: &Made) -> Result<(), E> {
        let a = self.made(&CONFIG_MAP, ns, format!("cycle-{k:04}-a"), None);
        let b = self.made(&CONFIG_MAP, ns, format!("cycle-{k:04}-b"), None);
        self.create(&CONFIG_MAP, a.object(vec![owner.owner_ref(false), b.owner_ref(false)]))?;
        self.create(&CONFIG_MAP, b.object(vec![a.owner_ref(false)]))?;
        self.count_special("cycles");
        Ok(())
    }

    fn config_map(&mut self, ns: &str, name: String, owners: Vec<OwnerReference>) -> Result<(), E> {
        let cm = self.made(&CONFIG_MAP, ns, name, None);
        self.create(&CONFIG_MAP, cm.object(owners))
    }

    /// Cluster-scoped owner `c`: a ClusterRole owning ClusterRoleBindings, or a Fleet owning
    /// ConfigMaps spread over the namespaces.
    fn cluster_owner(&mut self, c: usize) -> Result<(), E> {
        let (kind, name) = if c.is_multiple_of(2) {
            (&CLUSTER_ROLE, format!("cluster-owner-{c:04}"))
        } else {
            (&FLEET, format!("fleet-{c:04}"))
        };
        let owner = self.root(kind, "", name)?;
        for j in 0..self.t.cluster_dependents {
            let dependent = if c.is_multiple_of(2) {
                self.made(&CLUSTER_ROLE_BINDING, "", format!("{}-{j}", owner.name), None)
            } else {
                let ns = Topology::namespace(j % self.t.namespaces.max(1));
                self.made(&CONFIG_MAP, &ns, format!("{}-{j}", owner.name), None)
            };
            self.create(dependent.kind, dependent.object(vec![owner.owner_ref(false)]))?;
        }
        Ok(())
    }

    /// A root: made, yielded, and kept for its deletion when its fate is one.
    fn root(&mut self, kind: &'static Kind, ns: &str, name: String) -> Result<Made, E> {
        let fate = self.fates.next().flatten();
        let root = self.made(kind, ns, name, fate);
        let object = root.object(Vec::new());
        if let Some(policy) = fate {
            self.deletions.push((kind, policy, object.clone()));
        }
        self.create(kind, object)?;
        Ok(root)
    }

    fn made(&mut self, kind: &'static Kind, ns: &str, name: String, fate: Option<PropagationPolicy>) -> Made {
        Made {
            kind,
            namespace: ns.to_string(),
            name,
            uid: uid(&mut self.rng),
            fate,
        }
    }

    fn count_special(&mut self, name: &'static str) {
        *self.summary.special.entry(name).or_default() += 1;
    }

    fn create(&mut self, kind: &'static Kind, object: PartialObjectMeta) -> Result<(), E> {
        *self.summary.objects_by_kind.entry(kind.kind.to_string()).or_default() += 1;
        (self.sink)(Step::Create { kind, object })
    }
}

/// The part of `total` that goes to part `i` of `parts`: as even as can be, the first ones one
/// larger.
fn share(total: usize, parts: usize, i: usize) -> usize {
    if parts == 0 {
        return 0;
    }
    total / parts + usize::from(i < total % parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    fn steps(topology: &Topology, seed: u64) -> (Vec<Step>, Summary) {
        let mut steps = Vec::new();
        let summary = generate(topology, seed, |s| {
            steps.push(s);
            Ok::<_, Infallible>(())
        })
        .expect("generate");
        (steps, summary)
    }

    #[test]
    fn share_should_split_a_total_evenly() {
        let parts: Vec<usize> = (0..4).map(|i| share(10, 4, i)).collect();
        assert_eq!(parts, [3, 3, 2, 2]);
        assert_eq!(share(5, 0, 0), 0);
    }

    #[test]
    fn generate_should_yield_the_same_steps_for_the_same_seed() {
        let t = Topology::sized(2000);
        assert_eq!(steps(&t, 4), steps(&t, 4));
        assert_ne!(steps(&t, 4).0, steps(&t, 5).0);
    }

    #[test]
    fn generate_should_create_exactly_the_objects_the_topology_counts() {
        for t in [
            Preset::Small.topology(),
            Preset::Small.topology().settled(),
            Topology::sized(700),
        ] {
            let (steps, summary) = steps(&t, 2);
            let created = steps.iter().filter(|s| matches!(s, Step::Create { .. })).count();
            assert_eq!((created, summary.objects()), (t.objects(), t.objects()));
        }
    }

    #[test]
    fn each_step_should_name_the_kind_of_its_object() {
        let (steps, _) = steps(&Preset::Small.topology(), 3);
        for step in &steps {
            if let Step::Create { kind, object } | Step::Modify { kind, object } | Step::Delete { kind, object, .. } =
                step
            {
                assert_eq!((kind.api_version, kind.kind), (&*object.api_version, &*object.kind));
                assert_eq!(kind.namespaced, !object.metadata.namespace.is_empty(), "{object:?}");
            }
        }
    }

    #[test]
    fn a_settled_topology_should_have_no_garbage_and_no_later_steps() {
        let (steps, _) = steps(&Preset::Small.topology().settled(), 1);
        let listed = steps.iter().position(|s| *s == Step::Listed).expect("listed");
        assert_eq!(listed, steps.len() - 1, "nothing after the listing");
        let uids: HashSet<&str> = steps[..listed]
            .iter()
            .filter_map(|s| match s {
                Step::Create { object, .. } => Some(object.metadata.uid.as_str()),
                _ => None,
            })
            .collect();
        for step in &steps[..listed] {
            let Step::Create { object, .. } = step else { continue };
            for r in &object.metadata.owner_references {
                assert!(
                    uids.contains(r.uid.as_str()),
                    "{} names a missing owner",
                    object.metadata.name
                );
            }
        }
    }
}
