//! `loadgen generate`: a synthetic watch stream from a [`Topology`] and a seed.
//!
//! Invariant: the stream is a function of the topology and the seed alone (one seeded RNG, drawn
//! in a fixed order), and what the collector leaves of it does not depend on timing, so that the
//! full replay can compare the cluster with an oracle.
//!
//! # The stream
//!
//! 1. ADDED events for every object, namespace by namespace (Deployment → ReplicaSets → Pods,
//!    Job → Pods, Widget chains, then the special cases), then the cluster-scoped owners and their
//!    dependents. A few Pods come before their ReplicaSet (`pods_before_owner`).
//! 2. A BOOKMARK annotated `k8s.io/initial-events-end: "true"`, as a watch-list stream ends its
//!    initial listing.
//! 3. Churn: MODIFIED events on Deployment pods (a blockOwnerDeletion flip, the Deployment added
//!    as second owner, or a move to a sibling ReplicaSet).
//! 4. Deletions of roots, as a watch shows them: Background as the root's DELETED event,
//!    Foreground and Orphan as the MODIFIED event that sets `deletionTimestamp` and adds the
//!    `foregroundDeletion` or `orphan` finalizer. The cascade itself is left to the collector.
//!
//! # Why timing does not matter
//!
//! Churn never makes garbage and comes before any deletion; each deletion hits a different tree.
//! The only objects with owners in two trees are the multi-owner ConfigMaps and the cycles'
//! first ConfigMaps. A cycle keeps its head alive whatever happens to its Deployment. A
//! multi-owner ConfigMap never has an Orphan deletion paired with a Background or Foreground one,
//! because then the order in which the collector sees its two owners go would decide whether it
//! survives. Dangling and cross-namespace references are garbage from the start; the full replay
//! lets the collector settle before the first later event, so they are gone before any deletion.

mod names;
mod topology;

pub use topology::{Amount, Preset, Topology};

use crate::stream::{StreamError, StreamWriter};
use indicatif::ProgressBar;
use kube_gc::api::{
    ObjectMeta, OwnerReference, PartialObjectMeta, PropagationPolicy, WatchEvent, WatchEventType, FINALIZER_FOREGROUND,
    FINALIZER_ORPHAN,
};
use names::{suffix, uid, unique_child};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashSet};
use std::fmt;

/// The annotation that marks the end of a watch-list stream's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// The deletionTimestamp of generated deletions: fixed, so streams are reproducible.
const DELETION_TIMESTAMP: &str = "2025-01-01T00:00:00Z";

/// Application names for Deployments, cycled through.
const APPS: [&str; 8] = ["web", "api", "worker", "cache", "gateway", "search", "billing", "auth"];

/// Where generated events go.
pub trait Emit {
    /// Takes one event.
    fn emit(&mut self, event: &WatchEvent) -> Result<(), StreamError>;
}

impl Emit for StreamWriter {
    fn emit(&mut self, event: &WatchEvent) -> Result<(), StreamError> {
        self.write(event)
    }
}

impl Emit for Vec<WatchEvent> {
    fn emit(&mut self, event: &WatchEvent) -> Result<(), StreamError> {
        self.push(event.clone());
        Ok(())
    }
}

/// What a generated stream holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Objects created, by kind.
    pub objects_by_kind: BTreeMap<String, usize>,
    /// Events written, by type.
    pub events_by_type: BTreeMap<&'static str, usize>,
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

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |m: Vec<(&str, usize)>| m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
        let kinds = self.objects_by_kind.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        writeln!(f, "objects: {} ({})", self.objects(), list(kinds))?;
        writeln!(
            f,
            "events: {}",
            list(self.events_by_type.iter().map(|(k, v)| (*k, *v)).collect())
        )?;
        writeln!(
            f,
            "deletions: {}",
            list(self.deletions.iter().map(|(k, v)| (*k, *v)).collect())
        )?;
        write!(
            f,
            "special cases: {}",
            list(self.special.iter().map(|(k, v)| (*k, *v)).collect())
        )
    }
}

/// Writes the stream of `topology` for `seed` to `out`, ticking `progress` once per event.
pub fn generate(
    topology: &Topology,
    seed: u64,
    out: &mut impl Emit,
    progress: &ProgressBar,
) -> anyhow::Result<Summary> {
    topology.check().map_err(anyhow::Error::msg)?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let fates = plan_fates(topology, &mut rng);
    let mut churn_at = rand::seq::index::sample(&mut rng, topology.deployment_pods(), topology.churn).into_vec();
    churn_at.sort_unstable();
    let mut g = Generator {
        t: topology,
        rng,
        out,
        progress,
        resource_version: 1000,
        fates: fates.into_iter(),
        churn_at: churn_at.into_iter().peekable(),
        pods_made: 0,
        churned: Vec::new(),
        deletions: Vec::new(),
        summary: Summary::default(),
    };
    g.run()?;
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

/// An object's type as references name it.
#[derive(Clone, Copy)]
struct Kind {
    api_version: &'static str,
    kind: &'static str,
}

const fn kind(api_version: &'static str, kind: &'static str) -> Kind {
    Kind { api_version, kind }
}

const DEPLOYMENT: Kind = kind("apps/v1", "Deployment");
const REPLICA_SET: Kind = kind("apps/v1", "ReplicaSet");
const POD: Kind = kind("v1", "Pod");
const CONFIG_MAP: Kind = kind("v1", "ConfigMap");
const JOB: Kind = kind("batch/v1", "Job");
const WIDGET: Kind = kind("example.com/v1", "Widget");
const FLEET: Kind = kind("example.com/v1", "Fleet");
const CLUSTER_ROLE: Kind = kind("rbac.authorization.k8s.io/v1", "ClusterRole");
const CLUSTER_ROLE_BINDING: Kind = kind("rbac.authorization.k8s.io/v1", "ClusterRoleBinding");

/// An object made, as its dependents refer to it.
#[derive(Clone)]
struct Made {
    kind: Kind,
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

/// The state of one generation run; see the module docs for the order of the stream.
struct Generator<'a, E> {
    t: &'a Topology,
    rng: SmallRng,
    out: &'a mut E,
    progress: &'a ProgressBar,
    resource_version: u64,
    /// Fates of the roots not made yet, in generation order.
    fates: std::vec::IntoIter<Option<PropagationPolicy>>,
    /// Indices (among Deployment pods) of the pods to churn, ascending.
    churn_at: std::iter::Peekable<std::vec::IntoIter<usize>>,
    pods_made: usize,
    /// The MODIFIED objects of the churn, written after the initial events.
    churned: Vec<PartialObjectMeta>,
    /// Roots to delete, written last.
    deletions: Vec<(PropagationPolicy, PartialObjectMeta)>,
    summary: Summary,
}

impl<E: Emit> Generator<'_, E> {
    fn run(&mut self) -> anyhow::Result<()> {
        let mut previous: Vec<Made> = Vec::new();
        for i in 0..self.t.namespaces {
            let namespace = format!("team-{i:04}");
            let deployments = self.namespace(&namespace)?;
            self.specials(&namespace, i, &deployments, &previous)?;
            previous = deployments;
        }
        for c in 0..self.t.cluster_owners {
            self.cluster_owner(c)?;
        }
        self.bookmark()?;
        for object in std::mem::take(&mut self.churned) {
            self.emit(WatchEventType::Modified, object)?;
        }
        for (policy, object) in std::mem::take(&mut self.deletions) {
            self.delete(policy, object)?;
        }
        Ok(())
    }

    /// The trees of one namespace; returns its Deployments.
    fn namespace(&mut self, ns: &str) -> anyhow::Result<Vec<Made>> {
        let deployments = (0..self.t.deployments)
            .map(|d| self.deployment(ns, d))
            .collect::<anyhow::Result<Vec<_>>>()?;
        for j in 0..self.t.jobs {
            self.job(ns, j)?;
        }
        let mut heads = HashSet::new();
        for _ in 0..self.t.chains {
            self.chain(ns, &mut heads)?;
        }
        Ok(deployments)
    }

    fn deployment(&mut self, ns: &str, d: usize) -> anyhow::Result<Made> {
        let name = format!("{}-{d:04}", APPS[d % APPS.len()]);
        let deploy = self.root(DEPLOYMENT, ns, name)?;
        let mut taken = HashSet::new();
        let sets: Vec<Made> = (0..self.t.replicasets)
            .map(|_| {
                let name = unique_child(&mut self.rng, &deploy.name, 10, &mut taken);
                self.made(REPLICA_SET, ns, name, None)
            })
            .collect();
        for rs in &sets {
            self.replicaset(&deploy, rs, &sets)?;
        }
        Ok(deploy)
    }

    /// A ReplicaSet and its pods, a few of them listed before it.
    fn replicaset(&mut self, deploy: &Made, rs: &Made, siblings: &[Made]) -> anyhow::Result<()> {
        let mut taken = HashSet::new();
        let mut after = Vec::with_capacity(self.t.pods);
        for _ in 0..self.t.pods {
            let name = unique_child(&mut self.rng, &rs.name, 5, &mut taken);
            let pod = self
                .made(POD, &rs.namespace, name, None)
                .object(vec![rs.owner_ref(true)]);
            if self.churn_at.next_if_eq(&self.pods_made).is_some() {
                let changed = self.churn(&pod, deploy, rs, siblings);
                self.churned.push(changed);
            }
            self.pods_made += 1;
            if self.rng.gen_bool(self.t.pods_before_owner) {
                self.emit(WatchEventType::Added, pod)?;
            } else {
                after.push(pod);
            }
        }
        self.emit(WatchEventType::Added, rs.object(vec![deploy.owner_ref(true)]))?;
        for pod in after {
            self.emit(WatchEventType::Added, pod)?;
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

    fn job(&mut self, ns: &str, j: usize) -> anyhow::Result<()> {
        let job = self.root(JOB, ns, format!("job-{j:04}"))?;
        let mut taken = HashSet::new();
        for _ in 0..self.t.job_pods {
            let name = unique_child(&mut self.rng, &job.name, 5, &mut taken);
            let pod = self.made(POD, ns, name, None);
            self.emit(WatchEventType::Added, pod.object(vec![job.owner_ref(true)]))?;
        }
        Ok(())
    }

    /// A chain of Widgets, each owned by the one before.
    fn chain(&mut self, ns: &str, heads: &mut HashSet<String>) -> anyhow::Result<()> {
        let name = unique_child(&mut self.rng, "widget", 8, heads);
        let head = self.root(WIDGET, ns, name)?;
        let mut owner = head.clone();
        for level in 1..self.t.chain_depth {
            let widget = self.made(WIDGET, ns, format!("{}-{level}", head.name), None);
            self.emit(WatchEventType::Added, widget.object(vec![owner.owner_ref(true)]))?;
            owner = widget;
        }
        Ok(())
    }

    /// The special cases of namespace `i`: its share of each total.
    fn specials(&mut self, ns: &str, i: usize, deployments: &[Made], previous: &[Made]) -> anyhow::Result<()> {
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
            let name = format!("ghost-{}", suffix(&mut self.rng, 10));
            let ghost = self.made(REPLICA_SET, ns, name, None);
            let pod = self.made(POD, ns, format!("stray-{k:04}"), None);
            self.emit(WatchEventType::Added, pod.object(vec![ghost.owner_ref(true)]))?;
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
    fn cycle(&mut self, ns: &str, k: usize, owner: &Made) -> anyhow::Result<()> {
        let a = self.made(CONFIG_MAP, ns, format!("cycle-{k:04}-a"), None);
        let b = self.made(CONFIG_MAP, ns, format!("cycle-{k:04}-b"), None);
        self.emit(
            WatchEventType::Added,
            a.object(vec![owner.owner_ref(false), b.owner_ref(false)]),
        )?;
        self.emit(WatchEventType::Added, b.object(vec![a.owner_ref(false)]))?;
        self.count_special("cycles");
        Ok(())
    }

    fn config_map(&mut self, ns: &str, name: String, owners: Vec<OwnerReference>) -> anyhow::Result<()> {
        let cm = self.made(CONFIG_MAP, ns, name, None);
        self.emit(WatchEventType::Added, cm.object(owners))
    }

    /// Cluster-scoped owner `c`: a ClusterRole owning ClusterRoleBindings, or a Fleet owning
    /// ConfigMaps spread over the namespaces.
    fn cluster_owner(&mut self, c: usize) -> anyhow::Result<()> {
        let (kind, name) = if c.is_multiple_of(2) {
            (CLUSTER_ROLE, format!("cluster-owner-{c:04}"))
        } else {
            (FLEET, format!("fleet-{c:04}"))
        };
        let owner = self.root(kind, "", name)?;
        for j in 0..self.t.cluster_dependents {
            let dependent = if c.is_multiple_of(2) {
                self.made(CLUSTER_ROLE_BINDING, "", format!("{}-{j}", owner.name), None)
            } else {
                let ns = format!("team-{:04}", j % self.t.namespaces.max(1));
                self.made(CONFIG_MAP, &ns, format!("{}-{j}", owner.name), None)
            };
            self.emit(WatchEventType::Added, dependent.object(vec![owner.owner_ref(false)]))?;
        }
        Ok(())
    }

    /// A root: made, written, and kept for its deletion when its fate is one.
    fn root(&mut self, kind: Kind, ns: &str, name: String) -> anyhow::Result<Made> {
        let fate = self.fates.next().flatten();
        let root = self.made(kind, ns, name, fate);
        let object = root.object(Vec::new());
        if let Some(policy) = fate {
            self.deletions.push((policy, object.clone()));
        }
        self.emit(WatchEventType::Added, object)?;
        Ok(root)
    }

    fn made(&mut self, kind: Kind, ns: &str, name: String, fate: Option<PropagationPolicy>) -> Made {
        Made {
            kind,
            namespace: ns.to_string(),
            name,
            uid: uid(&mut self.rng),
            fate,
        }
    }

    fn bookmark(&mut self) -> anyhow::Result<()> {
        let object = PartialObjectMeta {
            api_version: "meta.k8s.io/v1".into(),
            kind: "PartialObjectMetadata".into(),
            metadata: ObjectMeta {
                annotations: BTreeMap::from([(INITIAL_EVENTS_END.to_string(), "true".to_string())]),
                ..Default::default()
            },
            ..Default::default()
        };
        self.emit(WatchEventType::Bookmark, object)
    }

    /// A root's deletion as a watch shows it (module docs).
    fn delete(&mut self, policy: PropagationPolicy, mut object: PartialObjectMeta) -> anyhow::Result<()> {
        *self.summary.deletions.entry(policy.as_str()).or_default() += 1;
        let finalizer = match policy {
            PropagationPolicy::Background => return self.emit(WatchEventType::Deleted, object),
            PropagationPolicy::Foreground => FINALIZER_FOREGROUND,
            PropagationPolicy::Orphan => FINALIZER_ORPHAN,
        };
        object.metadata.deletion_timestamp = Some(DELETION_TIMESTAMP.into());
        object.metadata.finalizers = vec![finalizer.into()];
        self.emit(WatchEventType::Modified, object)
    }

    fn count_special(&mut self, name: &'static str) {
        *self.summary.special.entry(name).or_default() += 1;
    }

    /// Writes one event with the next resourceVersion.
    fn emit(&mut self, event_type: WatchEventType, mut object: PartialObjectMeta) -> anyhow::Result<()> {
        self.resource_version += 1;
        object.metadata.resource_version = self.resource_version.to_string();
        let summary = &mut self.summary;
        *summary.events_by_type.entry(type_name(event_type)).or_default() += 1;
        if event_type == WatchEventType::Added {
            *summary.objects_by_kind.entry(object.kind.clone()).or_default() += 1;
        }
        self.out.emit(&WatchEvent { event_type, object })?;
        self.progress.inc(1);
        Ok(())
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

/// A watch event type's name on the wire.
pub(crate) fn type_name(t: WatchEventType) -> &'static str {
    match t {
        WatchEventType::Added => "ADDED",
        WatchEventType::Modified => "MODIFIED",
        WatchEventType::Deleted => "DELETED",
        WatchEventType::Bookmark => "BOOKMARK",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_should_split_a_total_evenly() {
        let parts: Vec<usize> = (0..4).map(|i| share(10, 4, i)).collect();
        assert_eq!(parts, [3, 3, 2, 2]);
        assert_eq!(share(5, 0, 0), 0);
    }
}
