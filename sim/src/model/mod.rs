//! The reference model of what the garbage collector leaves behind: given the objects of a
//! cluster and what a user does to them, the objects that exist once the collector is quiet, with
//! their ownerReferences, finalizers and deletion marks. The differential tests compare the engine
//! with it after every action, and `loadgen replay --mode full` compares the cluster with it at
//! the end of a stream.
//!
//! It is written from gc-spec §3–§6 alone and shares no code with the engine: no graph, no work
//! queues, no absentOwnerCache, no virtual nodes. It only knows the cluster, and it applies the
//! collector's decisions one at a time, reading the cluster afresh for each, until none applies.
//! It may import [`kube_gc::api`] and nothing else, so that nothing the engine decides leaks into
//! what it is checked against.
//!
//! # Rules (one step each)
//!
//! - **attempt_to_delete_item** (§4.2 rows 5–7, §4.3) for an object that is not being deleted and
//!   has owner references. Each reference is classified against the cluster: *unresolvable* when
//!   no version of its group serves its kind (a version no longer served is read through one
//!   that is, kubernetes#102641), or when the object is cluster-scoped and the owner
//!   type is namespaced (the whole classification aborts: such an object is never collected nor
//!   stripped, and the model calls it *stuck*); *dangling* unless an object of that type exists
//!   under the ref's name (in the object's namespace for a namespaced owner type, so a reference
//!   across namespaces dangles), with the ref's UID (a different UID under that name dangles);
//!   otherwise *waiting* when that owner has a deletionTimestamp and the `foregroundDeletion`
//!   finalizer, and *solid* in every other case, owners deleted in the background included.
//!   Then: a solid owner keeps the object, and its dangling and waiting references are stripped;
//!   with no solid owner, a waiting owner and at least one dependent, it is deleted in the
//!   foreground (after unblocking its references when one of its dependents is, or once was,
//!   deleting its dependents: the cycle heuristic); otherwise it is deleted with the policy its own
//!   finalizers imply (`orphan`, else `foregroundDeletion`, else Background).
//! - **orphan** (§3.6, §5): an object being deleted with the `orphan` finalizer loses, one
//!   dependent at a time, every reference other objects hold to its UID, whatever their namespace
//!   or kind claims; then the finalizer goes.
//! - **foreground** (§3.6, §4.2 row 4): an object being deleted with `foregroundDeletion` drops
//!   that finalizer once no object holds a reference to its UID with `blockOwnerDeletion: true`.
//! - The API server's rules (§6.6 and the registry): a create is refused when the UID or the name
//!   is taken or the type is not served; a delete rewrites the GC finalizers from the options (the
//!   policy; without one, the object's first GC finalizer, then its type's default), marks the
//!   object, and removes it at once when no finalizer is left; removing the last finalizer of a
//!   marked object removes it.
//!
//! Graph-level matters that leave no trace in the cluster (virtual nodes, alternate identities,
//! the absent-owner cache, events) are left out: they decide *when* the rules above apply, not
//! *which* apply.
//!
//! The served types are [`KINDS`] for [`Model::new`], or a discovery document's for
//! [`Model::serving`] (a stream's custom types included).
//!
//! # The region where the outcome does not depend on order
//!
//! The engine runs these steps concurrently and in no fixed order, so the model only makes a
//! claim where every order ends in the same place. [`Model::settle`] checks that, and reports
//! [`OutOfRegion`] instead of an outcome when a scenario leaves the region:
//!
//! - [`OutOfRegion::OrderDependent`]: the fixpoint is reached again from the same start under a
//!   canonical order, "owners first", "dependents first", for each object an order that judges it
//!   as late as possible and one that judges it as early as possible, and a few seeded random
//!   orders; if two outcomes differ, the scenario is out. This is what removes, for example, a
//!   dependent with a non-blocking ref to a foreground-deleted owner that also has dependents of
//!   its own (it is deleted in the foreground if judged while the owner waits, with its own policy
//!   if judged after the owner is gone), or a held dependent with two owners going away at once
//!   (which refs it keeps depends on which owner it sees go first).
//! - [`OutOfRegion::ForegroundOnCycle`]: a foreground deletion of an object that lies on an
//!   ownership cycle. The cycle heuristic reads other dependents' flags from the graph, which
//!   workers see stale (§12.4); the model reads the cluster, so it cannot tell which way it went.
//! - [`OutOfRegion::StuckBecameDecidable`]: a user action or the collector's start (or their
//!   cascade) makes a stuck object decidable. Upstream forgets an object with a namespaced owner of a cluster-scoped object
//!   (§4.1) and retries one with an unresolvable ref with a backoff that grows to 1000 s, so
//!   whether and when it is looked at again depends on timing, not on the cluster.
//! - [`OutOfRegion::CreatedUnderWaitingOwner`]: an object created (or patched) with a new
//!   reference to an owner that is already waiting for its dependents. Nothing queues the new
//!   dependent (§3.2 queues a new node only for suspicious references) until that owner changes
//!   again, which may be never.
//! - [`OutOfRegion::CreatedUnderOrphanedOwner`]: an object created (or patched) with a new
//!   reference to an owner the collector orphaned. Upstream judges the reference dangling and
//!   deletes the object; kube-gc deliberately never lets an orphaned owner make anything garbage
//!   (docs/design.md, "Where kube-gc knowingly differs from upstream"), so the model, written from
//!   upstream's rules, does not decide it.
//!
//! Scenarios must also start with every object already in the collector's graph before the first
//! deletion (the model has no notion of an orphan transition seen before a dependent's creation,
//! §12.9); the differential tests create the whole cluster first and let the collector settle.
//!
//! # Settling in one order
//!
//! Checking every order costs a settle per object and more, which a stream of a million objects
//! cannot afford. [`Model::settle_in_one_order`] takes the same steps in one order, visiting only
//! the objects whose owners, dependents or own state changed (the model keeps its cluster indexed
//! by name and by owner UID for that), and claims nothing about other orders: `loadgen replay`
//! checks order independence its own way, by settling once after every action and once after the
//! last, and its generator keeps its streams in the region.

mod kind;
mod outcome;
mod rules;
mod verdicts;

pub use kind::{
    Kind, KindDef, CLUSTER_ROLE, CLUSTER_ROLE_BINDING, CONFIG_MAP, DEPLOYMENT, KINDS, POD, REPLICATION_CONTROLLER,
    REPLICA_SET, SECRET,
};
pub use outcome::{differences, outcome_of, short_uid, show_refs, Outcome};
pub use verdicts::Verdicts;

use kind::{Served, TypeIndex};
use kube_gc::api::{OwnerReference, PartialObjectMeta, PropagationPolicy, FINALIZER_FOREGROUND};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

/// One object, as far as the collector's outcome goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    /// Its type.
    pub kind: Kind,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    /// Its name, unique per type and namespace.
    pub name: String,
    /// Its UID.
    pub uid: String,
    /// Its ownerReferences, in order.
    pub owner_references: Vec<OwnerReference>,
    /// Its finalizers.
    pub finalizers: Vec<String>,
    /// Whether a deletionTimestamp is set.
    pub deleting: bool,
}

impl Object {
    /// An object read from a cluster or a stream, whose type is `kind`.
    pub fn of(kind: Kind, object: &PartialObjectMeta) -> Object {
        let m = &object.metadata;
        Object {
            kind,
            namespace: m.namespace.clone(),
            name: m.name.clone(),
            uid: m.uid.clone(),
            owner_references: m.owner_references.clone(),
            finalizers: m.finalizers.clone(),
            deleting: m.deletion_timestamp.is_some(),
        }
    }

    fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }

    /// Waiting for its dependents: what makes an owner *waiting* rather than solid (§4.3 step 7).
    fn is_waiting(&self) -> bool {
        self.deleting && self.has_finalizer(FINALIZER_FOREGROUND)
    }

    /// `namespace/name` or `name`, with the kind.
    pub fn display(&self) -> String {
        if self.namespace.is_empty() {
            format!("{} {}", self.kind.kind, self.name)
        } else {
            format!("{} {}/{}", self.kind.kind, self.namespace, self.name)
        }
    }
}

/// What a user does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Creates an object with its UID.
    Create(Object),
    /// DELETE with this policy (`None`: no options at all).
    Delete {
        /// The object deleted.
        uid: String,
        /// The propagation policy, if the options name one.
        policy: Option<PropagationPolicy>,
    },
    /// Drops every reference to `owner_uid`.
    RemoveOwnerRef {
        /// The dependent.
        uid: String,
        /// The owner whose references go.
        owner_uid: String,
    },
    /// Sets `blockOwnerDeletion` on the references to `owner_uid`.
    SetBlockOwnerDeletion {
        /// The dependent.
        uid: String,
        /// The owner whose references change.
        owner_uid: String,
        /// The new value.
        block: Option<bool>,
    },
    /// Replaces the ownerReferences, as a patch of the whole list does.
    SetOwnerReferences {
        /// The dependent.
        uid: String,
        /// The new list.
        owner_references: Vec<OwnerReference>,
    },
    /// Takes a finalizer off.
    RemoveFinalizer {
        /// The object.
        uid: String,
        /// The finalizer removed.
        finalizer: String,
    },
}

impl Action {
    /// The object acted on.
    pub fn uid(&self) -> &str {
        match self {
            Action::Create(object) => &object.uid,
            Action::Delete { uid, .. }
            | Action::RemoveOwnerRef { uid, .. }
            | Action::SetBlockOwnerDeletion { uid, .. }
            | Action::SetOwnerReferences { uid, .. }
            | Action::RemoveFinalizer { uid, .. } => uid,
        }
    }
}

/// Why a scenario is outside the region where the model can predict the outcome (module docs).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OutOfRegion {
    /// Two orders of the same steps end in different clusters: `differences` lists where the
    /// `schedule` order ends up against the canonical one.
    #[error("order-dependent: the {schedule} order ends elsewhere: {}", .differences.join("; "))]
    OrderDependent {
        /// The order that ended elsewhere.
        schedule: String,
        /// Where it ended, against the canonical order.
        differences: Vec<String>,
    },
    /// A foreground deletion of an object on an ownership cycle.
    #[error("foreground deletion of {uid} on a cycle")]
    ForegroundOnCycle {
        /// The object deleted.
        uid: String,
    },
    /// An object stuck on an unresolvable reference became decidable.
    #[error("stuck object {uid} became decidable")]
    StuckBecameDecidable {
        /// The object.
        uid: String,
    },
    /// An object was created or patched with a new reference to an owner waiting for its
    /// dependents.
    #[error("{uid} was created with a ref to a waiting owner")]
    CreatedUnderWaitingOwner {
        /// The dependent.
        uid: String,
    },
    /// An object was created or patched with a new reference to an owner the collector orphaned.
    #[error("{uid} was created with a ref to an orphaned owner")]
    CreatedUnderOrphanedOwner {
        /// The dependent.
        uid: String,
    },
    /// The steps did not reach a fixpoint (a bug in the model).
    #[error("no fixpoint")]
    NoFixpoint,
}

/// The order steps are taken in while settling.
#[derive(Clone, Debug)]
enum Schedule {
    /// Always the first enabled step (steps sort by rule, then UID).
    Canonical,
    /// Orphaning and finalizer removals before any attempt_to_delete_item: owners go as early as
    /// they can.
    OwnersFirst,
    /// attempt_to_delete_item before any finalizer removal: dependents are judged while owners
    /// still wait.
    DependentsFirst,
    /// Canonical, except that this object's attempt_to_delete_item waits until nothing else is
    /// enabled.
    Defer(String),
    /// Canonical, except that this object's attempt_to_delete_item goes first whenever it is
    /// enabled.
    Prefer(String),
    /// Uniformly random among the enabled steps, from a seed.
    Random(u64),
}

/// How many random orders [`Model::settle`] tries besides the fixed ones. Over 2000 generated
/// cases, 64 random orders found no difference that the per-object early and late orders had
/// missed; a few stay as a cheap guard for shapes the generator does not make yet.
const RANDOM_SCHEDULES: u64 = 4;

/// The cluster as the model sees it.
#[derive(Clone, Debug)]
pub struct Model {
    served: Arc<Served>,
    /// Every object, by UID.
    objects: BTreeMap<String, Entry>,
    /// Per type: namespace → name → UID, to resolve references by name.
    names: Vec<HashMap<String, HashMap<String, String>>>,
    /// Owner UID → the objects holding a reference to it, whatever else the reference says: the
    /// graph links dependents to owners by UID alone.
    dependents: HashMap<String, BTreeSet<String>>,
    /// Counts user actions; with `checking_stuck`, [`Entry::stuck_before`] is valid for the last.
    actions: u64,
    /// Whether the next settle checks for objects that were stuck before the last user action.
    checking_stuck: bool,
    /// Set by a step or an action that left the region; reported by the next settle.
    left_region: Option<OutOfRegion>,
    /// Owners the collector orphaned (their `orphan` finalizer went).
    orphaned: BTreeSet<String>,
    /// Objects whose steps may have changed since they were last looked at, for
    /// [`Model::settle_in_one_order`].
    work: VecDeque<String>,
    queued: HashSet<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    object: Object,
    /// Has been seen deleting with `foregroundDeletion`: the graph's deletingDependents flag,
    /// which is never cleared (§1.2) and which the cycle heuristic reads.
    deleting_dependents: bool,
    /// Where its name is unique.
    ty: TypeIndex,
    /// Live with an unresolvable reference (module docs). It depends on the object alone, so it
    /// is recomputed only when the object changes.
    stuck: bool,
    /// `(action, stuck)`: whether it was stuck when user action number `action` came. Recorded
    /// only when `stuck` changes, so that a user action costs nothing per object.
    stuck_before: (u64, bool),
}

impl Model {
    /// A cluster serving [`KINDS`] and holding `objects`, before the collector has looked at it.
    ///
    /// # Panics
    ///
    /// When the API server would refuse one of `objects`: a UID or name taken, a type not served.
    pub fn new(objects: impl IntoIterator<Item = Object>) -> Model {
        let mut model = Model::serving(KINDS);
        for object in objects {
            let display = object.display();
            let deleting_dependents = object.is_waiting();
            assert!(model.insert(object, deleting_dependents), "cannot create {display}");
        }
        // The collector's start counts as a user action: an object stuck when it starts and freed
        // by its own cascade (an owner it orphans) is as much a matter of timing as one a user
        // action frees.
        model.actions += 1;
        model.checking_stuck = true;
        model
    }

    /// An empty cluster serving `kinds`.
    pub fn serving(kinds: impl IntoIterator<Item = Kind>) -> Model {
        Model::with_served(Arc::new(Served::new(kinds)))
    }

    /// An empty cluster serving what `other` serves.
    fn serving_as(other: &Model) -> Model {
        Model::with_served(other.served.clone())
    }

    fn with_served(served: Arc<Served>) -> Model {
        Model {
            names: vec![HashMap::new(); served.types()],
            served,
            objects: BTreeMap::new(),
            dependents: HashMap::new(),
            actions: 0,
            checking_stuck: false,
            left_region: None,
            orphaned: BTreeSet::new(),
            work: VecDeque::new(),
            queued: HashSet::new(),
        }
    }

    /// The served type an apiVersion and kind resolve to, if any.
    pub fn served(&self, api_version: &str, kind: &str) -> Option<&Kind> {
        self.served.resolve(api_version, kind).map(|(kind, _)| kind)
    }

    /// The object with `uid`, if it exists.
    pub fn get(&self, uid: &str) -> Option<&Object> {
        self.objects.get(uid).map(|e| &e.object)
    }

    /// True when the collector's graph has seen the object `uid` deleting its dependents in the
    /// foreground, now or before (its deletingDependents flag, never cleared).
    pub fn deleting_dependents(&self, uid: &str) -> bool {
        self.objects.get(uid).is_some_and(|e| e.deleting_dependents)
    }

    /// Every object, by UID order.
    pub fn objects(&self) -> impl Iterator<Item = &Object> {
        self.objects.values().map(|e| &e.object)
    }

    /// The cluster by UID, finalizers sorted (their order is the API server's business).
    pub fn outcome(&self) -> Outcome {
        outcome_of(self.objects().cloned())
    }

    /// True when the object is live and one of its references cannot be classified, so the
    /// collector never collects it nor strips it (§4.1, §4.3 steps 3–4).
    pub fn is_stuck(&self, uid: &str) -> bool {
        self.objects.get(uid).is_some_and(|e| e.stuck)
    }

    /// Applies a user action (a no-op when its object is gone), without letting the collector run.
    pub fn apply(&mut self, action: &Action) {
        self.actions += 1;
        self.checking_stuck = true;
        let uid = action.uid().to_string();
        if let Action::Create(object) = action {
            self.create(object.clone());
            return;
        }
        if !self.objects.contains_key(&uid) {
            return;
        }
        match action {
            Action::Create(_) => unreachable!("handled above"),
            Action::Delete { policy, .. } => self.delete(&uid, *policy),
            Action::RemoveOwnerRef { owner_uid, .. } => {
                let mut refs = self.objects[&uid].object.owner_references.clone();
                refs.retain(|r| r.uid != *owner_uid);
                self.set_owner_references(&uid, refs);
            }
            Action::SetBlockOwnerDeletion { owner_uid, block, .. } => {
                let mut refs = self.objects[&uid].object.owner_references.clone();
                for r in refs.iter_mut().filter(|r| r.uid == *owner_uid) {
                    r.block_owner_deletion = *block;
                }
                self.set_owner_references(&uid, refs);
            }
            Action::SetOwnerReferences { owner_references, .. } => {
                self.check_new_references(&uid, owner_references);
                self.set_owner_references(&uid, owner_references.clone());
            }
            Action::RemoveFinalizer { finalizer, .. } => self.remove_finalizer(&uid, finalizer),
        }
    }

    /// Lets the collector run to its fixpoint, or reports why the outcome depends on order.
    pub fn settle(&mut self) -> Result<(), OutOfRegion> {
        let reference = self.explore(|schedule, first, run| {
            let differences = differences(&first.outcome(), &run.outcome());
            if differences.is_empty() {
                return Ok(());
            }
            Err(OutOfRegion::OrderDependent {
                schedule: format!("{schedule:?}"),
                differences,
            })
        })?;
        *self = reference;
        self.checking_stuck = false;
        self.work.clear();
        self.queued.clear();
        Ok(())
    }

    /// Runs every explored order (module docs) from the current cluster and returns where the
    /// first one ends; `compare` sees each later order's end beside the first's, and may stop the
    /// exploration with an error.
    fn explore(
        &mut self,
        mut compare: impl FnMut(&Schedule, &Model, &Model) -> Result<(), OutOfRegion>,
    ) -> Result<Model, OutOfRegion> {
        if let Some(out) = self.left_region.take() {
            return Err(out);
        }
        let mut schedules = vec![Schedule::Canonical, Schedule::OwnersFirst, Schedule::DependentsFirst];
        for uid in self.objects.keys() {
            schedules.push(Schedule::Defer(uid.clone()));
            schedules.push(Schedule::Prefer(uid.clone()));
        }
        schedules.extend((1..=RANDOM_SCHEDULES).map(Schedule::Random));
        let mut reference: Option<Model> = None;
        for schedule in schedules {
            let mut run = self.clone();
            run.run(&schedule)?;
            match &reference {
                None => reference = Some(run),
                Some(first) => compare(&schedule, first, &run)?,
            }
        }
        Ok(reference.expect("at least one schedule"))
    }

    /// Lets the collector run to its fixpoint in one order, claiming nothing about the others
    /// (module docs, "Settling in one order"); what left the region is forgotten.
    pub fn settle_in_one_order(&mut self) {
        while let Some(uid) = self.work.pop_front() {
            self.queued.remove(&uid);
            // Every step changes its object, or a dependent that queues it again, so taking one
            // step per visit still reaches the object's fixpoint.
            if let Some(step) = self.enabled_for(&uid).into_iter().min() {
                self.take(&step);
            }
        }
        self.left_region = None;
        self.checking_stuck = false;
    }

    /// Takes steps in `schedule`'s order until none is enabled.
    fn run(&mut self, schedule: &Schedule) -> Result<(), OutOfRegion> {
        let mut rng = match schedule {
            Schedule::Random(seed) => (*seed).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
            _ => 0,
        };
        // Every step removes a reference or a finalizer, or marks or removes an object.
        let bound = 10
            + 10 * self
                .objects
                .values()
                .map(|e| 3 + e.object.owner_references.len())
                .sum::<usize>();
        for _ in 0..bound {
            let steps = self.enabled()?;
            let Some(step) = rules::pick(&steps, schedule, &mut rng) else {
                return Ok(());
            };
            self.take(&step);
            if let Some(out) = self.left_region.take() {
                return Err(out);
            }
        }
        Err(OutOfRegion::NoFixpoint)
    }
}
