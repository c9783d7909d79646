//! Cascade plans: what deleting some objects with a propagation policy would do, worked out from a
//! snapshot of the cluster before the DELETE is sent (`kube-gc plan`, `/debug/plan`).
//!
//! A plan plays the collector's decisions forward on a [`Snapshot`] ([`simulate`]): the API
//! server's handling of the DELETE (the policy becomes the `orphan` or `foregroundDeletion`
//! finalizer), then, until nothing changes, `attempt_to_delete_item` on every dependent of an
//! object that went or waits for its dependents (gc-spec §4.2, §4.3) and `process_transitions` on
//! every owner being deleted (§3.6): orphaning, and letting a foreground owner go once no
//! dependent blocks it. It tells, for every object the delete reaches, its [`Fate`]: removed (in
//! which wave, with which policy, by whom), orphaned (which references it loses), kept by another
//! owner, held (by a finalizer that is not the collector's, or by a dependent that is), or never
//! judged (an owner reference nothing serves).
//!
//! A namespace's deletion ([`simulate_namespace`]) adds the namespace controller to the play, in
//! its order (Kubernetes 1.33 on): the namespace's pods are deleted first, everything else in it
//! once no pod is left, all with the Background policy, and the namespace goes once it is empty
//! and no finalizer of its own holds it; a pod held by a finalizer holds the rest.
//!
//! # Invariants
//!
//! - A plan reads its snapshot and nothing else, and changes nothing: the snapshot is the graph's
//!   (`from_graph`), a listing's (`kube-gc plan --offline`), or a test's.
//! - Decisions are the collector's rules, evaluated against the simulated cluster as it is after
//!   each round, in the order the rules allow; where upstream's outcome depends on the order
//!   workers run in (the reference model's "out of region" cases: foreground deletion on an
//!   ownership cycle, a dependent judged while its owner still waits), the plan shows one order's
//!   outcome.
//! - Waves are rounds of that play: everything removed in one round is one wave. An object is
//!   always removed in a later wave than the owners it needed gone (Background) and than the
//!   blocking dependents it waited for (Foreground).
//! - The snapshot is assumed quiet: the collector has already acted on everything before the
//!   DELETE (no dependent still holds a dangling reference next to a live owner).

mod graph;
mod index;
mod simulate;

pub use graph::{from_graph, namespace_roots};
pub use simulate::{simulate, simulate_namespace};

use crate::api::{OwnerReference, PropagationPolicy, RestMapper};
use foldhash::HashMap;
use serde::{Deserialize, Serialize};
use std::collections::hash_map::Entry;
use std::sync::OnceLock;

/// One object, as much of it as a plan reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Object {
    /// Its UID.
    pub uid: String,
    /// Its apiVersion.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its namespace; empty when cluster-scoped.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// `metadata.creationTimestamp`, RFC 3339 (`kube-gc tree` shows it; a plan does not read it).
    pub created: Option<String>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// The collector's graph has seen it deleting its dependents in the foreground, now or
    /// before (its deletingDependents flag, which is never cleared and which the cycle heuristic
    /// reads). A listing cannot tell: it is then read from `deleting` and the finalizers alone.
    pub waited: bool,
    /// `metadata.finalizers`; a finalizer known only as "not the collector's" is
    /// [`OTHER_FINALIZER`].
    pub finalizers: Vec<String>,
    /// `metadata.ownerReferences`.
    pub owners: Vec<OwnerReference>,
}

/// The name a plan gives a finalizer it knows only as not being one of the collector's (the graph
/// keeps no more of it).
pub const OTHER_FINALIZER: &str = "(a finalizer not the collector's)";

/// Whether objects of a type are namespaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Namespaced.
    Namespaced,
    /// Cluster-scoped.
    Cluster,
}

/// The types the cluster serves, as discovery tells them.
pub trait Served {
    /// The scope of `kind` in `api_version`'s group (any served version of the group counts, as
    /// the collector reads a reference through a version that is served), or `None` when nothing
    /// serves it.
    fn scope(&self, api_version: &str, kind: &str) -> Option<Scope>;
}

/// Discovery's types, read as the collector reads an owner reference: through any served version
/// of its group.
impl Served for RestMapper {
    fn scope(&self, api_version: &str, kind: &str) -> Option<Scope> {
        let mapping = self.mapping_any_version(api_version, kind)?;
        Some(if mapping.namespaced {
            Scope::Namespaced
        } else {
            Scope::Cluster
        })
    }
}

/// An object with a UID and owner references, as a [`Snapshot`] indexes it.
pub trait Owned {
    /// Its UID.
    fn uid(&self) -> &str;
    /// Its `metadata.ownerReferences`.
    fn owners(&self) -> &[OwnerReference];
}

impl Owned for Object {
    fn uid(&self) -> &str {
        &self.uid
    }

    fn owners(&self) -> &[OwnerReference] {
        &self.owners
    }
}

/// Objects indexed by UID, and their dependents: what a plan reads, and what `kube-gc tree` draws
/// from. Objects keep their order of insertion, and a plan's play names them by their position in
/// it.
#[derive(Clone, Debug)]
pub struct Snapshot<O = Object> {
    objects: Vec<O>,
    /// UID → position in `objects`.
    positions: HashMap<String, u32>,
    /// Derived from the objects on first use, and again after an insert.
    dependents: OnceLock<Dependents>,
}

/// Each held object's dependents, by position: those of object `i` are
/// `of[start[i]..start[i + 1]]`, each once, in the snapshot's order.
#[derive(Clone, Debug)]
struct Dependents {
    start: Vec<u32>,
    of: Vec<u32>,
}

impl<O> Default for Snapshot<O> {
    fn default() -> Self {
        Snapshot {
            objects: Vec::new(),
            positions: HashMap::default(),
            dependents: OnceLock::new(),
        }
    }
}

impl<O: Owned> Snapshot<O> {
    /// Indexes `objects`; an object given twice is kept as first given.
    pub fn new(objects: impl IntoIterator<Item = O>) -> Self {
        let mut snapshot = Snapshot::default();
        for object in objects {
            snapshot.insert(object);
        }
        snapshot
    }

    /// Adds `object` unless its UID is held already.
    pub fn insert(&mut self, object: O) {
        let position = self.objects.len() as u32;
        if let Entry::Vacant(entry) = self.positions.entry(object.uid().to_string()) {
            entry.insert(position);
            self.objects.push(object);
            self.dependents.take();
        }
    }

    /// The object `uid`.
    pub fn get(&self, uid: &str) -> Option<&O> {
        self.position(uid).map(|at| &self.objects[at as usize])
    }

    /// The position of the object `uid`.
    fn position(&self, uid: &str) -> Option<u32> {
        self.positions.get(uid).copied()
    }

    /// Every object, in order of insertion.
    pub fn objects(&self) -> impl Iterator<Item = &O> {
        self.objects.iter()
    }

    /// How many objects it holds.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The objects whose references name `uid` (an object held), in order of insertion.
    pub fn dependents_of(&self, uid: &str) -> impl Iterator<Item = &O> {
        let positions = self.position(uid).map_or(&[][..], |at| self.dependents_at(at));
        positions.iter().map(|d| &self.objects[*d as usize])
    }

    /// The positions of the objects whose references name the object at `at`.
    fn dependents_at(&self, at: u32) -> &[u32] {
        let dependents = self.dependents.get_or_init(|| self.index_dependents());
        let at = at as usize;
        &dependents.of[dependents.start[at] as usize..dependents.start[at + 1] as usize]
    }

    /// Counts, then places, each object's position under each distinct held owner it names.
    fn index_dependents(&self) -> Dependents {
        let len = self.objects.len();
        let owners_of = |object: &O| {
            let mut owners: Vec<u32> = object.owners().iter().filter_map(|r| self.position(&r.uid)).collect();
            owners.sort_unstable();
            owners.dedup();
            owners
        };
        let owners: Vec<Vec<u32>> = self.objects.iter().map(owners_of).collect();
        let mut start = vec![0u32; len + 1];
        for owner in owners.iter().flatten() {
            start[*owner as usize + 1] += 1;
        }
        for i in 0..len {
            start[i + 1] += start[i];
        }
        let mut of = vec![0u32; start[len] as usize];
        let mut next = start.clone();
        for (i, owners) in owners.iter().enumerate() {
            for owner in owners {
                of[next[*owner as usize] as usize] = i as u32;
                next[*owner as usize] += 1;
            }
        }
        Dependents { start, of }
    }
}

/// An object as a plan names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// Its kind.
    pub kind: String,
    /// Its namespace; empty when cluster-scoped.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
}

impl ObjectRef {
    fn of(object: &Object) -> ObjectRef {
        ObjectRef {
            kind: object.kind.clone(),
            namespace: object.namespace.clone(),
            name: object.name.clone(),
            uid: object.uid.clone(),
        }
    }

    fn of_ref(r: &OwnerReference, namespace: &str) -> ObjectRef {
        ObjectRef {
            kind: r.kind.clone(),
            namespace: namespace.to_string(),
            name: r.name.clone(),
            uid: r.uid.clone(),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{} -n {}", self.kind, self.name, self.namespace)
        }
    }
}

/// What the delete does to one object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "fate")]
pub enum Fate {
    /// It goes, in `wave` (1 first).
    Removed {
        /// The round of the play it goes in, renumbered from 1.
        wave: u32,
        /// The policy it is deleted with.
        policy: PropagationPolicy,
        /// Who deletes it.
        by: Remover,
    },
    /// It stays, without its references to the owners that orphan it.
    Orphaned {
        /// The references it loses.
        loses: Vec<ObjectRef>,
    },
    /// It stays, kept by another owner, without its references to owners that went or wait.
    Kept {
        /// The live owners that keep it.
        by: Vec<ObjectRef>,
        /// The references it loses.
        loses: Vec<ObjectRef>,
    },
    /// It is being deleted (by this delete, or since before it) and cannot go.
    Held {
        /// Why.
        why: Hold,
    },
    /// In a namespace being deleted, it is never deleted: the namespace controller deletes what
    /// is not a pod only once every pod is gone, and these pods stay.
    WaitsForPods {
        /// The pods that stay.
        pods: Vec<ObjectRef>,
    },
    /// The collector never judges it: one of its owner references cannot be resolved.
    Stuck {
        /// The reference.
        owner: ObjectRef,
        /// Why it cannot be resolved.
        why: String,
    },
}

/// Who deletes an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Remover {
    /// The request itself (`kubectl delete`).
    Request,
    /// The namespace controller, emptying a namespace being deleted.
    NamespaceController,
    /// The collector.
    Collector,
}

/// Why a deletion cannot end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "by")]
pub enum Hold {
    /// Finalizers that are not the collector's.
    Finalizers {
        /// Their names.
        finalizers: Vec<String>,
    },
    /// Deleted in the foreground, it waits for dependents that block it and do not go.
    BlockingDependents {
        /// Those dependents.
        dependents: Vec<ObjectRef>,
    },
    /// A namespace, it waits for its objects to go (its `kubernetes` finalizer), and some stay.
    Contents {
        /// How many of its objects stay.
        left: usize,
        /// Those of them held by finalizers (the others wait for these pods, or for nothing the
        /// plan can see).
        held: Vec<ObjectRef>,
    },
}

/// One object the delete reaches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// The object.
    pub object: ObjectRef,
    /// The owner through which the delete first reached it; none for a requested object.
    pub via: Option<String>,
    /// What happens to it.
    #[serde(flatten)]
    pub fate: Fate,
}

/// What a delete would do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The policy of the request.
    pub policy: PropagationPolicy,
    /// The objects the request deletes (a namespace, for a namespace's plan).
    pub requested: Vec<ObjectRef>,
    /// Every object the delete reaches, removed ones by wave, then the rest.
    pub steps: Vec<Step>,
    /// The writes the collector would send: DELETEs, and PATCHes of references and finalizers.
    pub calls: Calls,
}

/// The writes a plan costs the collector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Calls {
    /// DELETEs of dependents.
    pub deletes: u64,
    /// PATCHes: references removed (orphaned, or kept by another owner) and finalizers removed.
    pub patches: u64,
}

impl Calls {
    /// Every write.
    pub fn total(&self) -> u64 {
        self.deletes + self.patches
    }
}

impl Plan {
    /// The steps of removed objects.
    pub fn removed(&self) -> impl Iterator<Item = &Step> {
        self.steps.iter().filter(|s| matches!(s.fate, Fate::Removed { .. }))
    }

    /// The number of waves.
    pub fn waves(&self) -> u32 {
        self.steps
            .iter()
            .filter_map(|s| match s.fate {
                Fate::Removed { wave, .. } => Some(wave),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }
}
