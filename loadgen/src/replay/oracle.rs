//! The oracle: what the collector must leave of a cluster, computed from the objects and the user
//! actions alone.
//!
//! Invariant: it shares no code with the collector (no graph, queues, virtual nodes or caches).
//! It applies the collector's decisions to the objects themselves, one at a time and each against
//! the objects as they are then, until none applies.
//!
//! # Rules
//!
//! They are the rules of the reference model of the core's differential tests
//! (`tests/it/support/model.rs`, written from gc-spec §3–§6), whose docs explain their reading of the
//! spec:
//!
//! - **Decide**, for a live object with owner references: each reference is *unresolvable* (its
//!   kind is not served, or a cluster-scoped object names a namespaced owner kind: the object is
//!   then never touched), *dangling* (no object of that kind under that name, in the object's
//!   namespace for a namespaced kind, with that UID), *waiting* (the owner is being deleted with
//!   `foregroundDeletion`) or *solid*. A solid owner keeps the object and its dangling and waiting
//!   references are removed; otherwise a waiting owner and dependents of its own make it deleted
//!   in the foreground (its blocking references unblocked first when a dependent is, or was,
//!   deleting its dependents); otherwise it is deleted with the policy its own finalizers name.
//! - **Orphan**: an object being deleted with `orphan` loses every reference to it, then the
//!   finalizer.
//! - **Foreground**: an object being deleted with `foregroundDeletion` drops it once no object
//!   holds a blocking reference to it.
//! - **The API server**: a delete rewrites the GC finalizers from its policy and marks the object,
//!   or removes it when no finalizer is left; removing the last finalizer of a marked object
//!   removes it. A create is refused when the UID or the name is taken or the kind is not served.
//!
//! # Why not the model itself
//!
//! The model recomputes every enabled step over the whole cluster after each step and settles
//! each scenario under dozens of orders to prove it order-independent, which is quadratic and
//! worse in the number of objects (a 10k-object stream is out of its reach); and it serves a fixed
//! list of kinds. This oracle keeps indexes (by name, by owner UID) and a worklist of the objects
//! whose situation changed, follows one order, and learns the served kinds from the cluster's
//! discovery document. A test checks that the two agree on the independently written sample
//! stream. One order is enough only where the outcome does not depend on order;
//! `loadgen generate` keeps its streams there (see its module docs).

use super::script::Action;
use kube_gc::api::{
    OwnerReference, PartialObjectMeta, PropagationPolicy, RestMapper, FINALIZER_FOREGROUND, FINALIZER_ORPHAN,
};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

/// An object as the comparison sees it once the collector is quiet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectState {
    /// `Kind namespace/name`, for messages.
    pub display: String,
    /// Whether a deletionTimestamp is set.
    pub deleting: bool,
    /// Finalizers, sorted (their order is the API server's business).
    pub finalizers: Vec<String>,
    /// ownerReferences, in order.
    pub owners: Vec<OwnerReference>,
}

impl ObjectState {
    /// The state of an object read from the cluster, with its UID.
    pub fn of(object: &PartialObjectMeta) -> (String, ObjectState) {
        let m = &object.metadata;
        let state = ObjectState::new(
            &object.kind,
            &m.namespace,
            &m.name,
            m.deletion_timestamp.is_some(),
            &m.finalizers,
            &m.owner_references,
        );
        (m.uid.clone(), state)
    }

    fn new(
        kind: &str,
        namespace: &str,
        name: &str,
        deleting: bool,
        finalizers: &[String],
        owners: &[OwnerReference],
    ) -> Self {
        let mut finalizers = finalizers.to_vec();
        finalizers.sort();
        let display = if namespace.is_empty() {
            format!("{kind} {name}")
        } else {
            format!("{kind} {namespace}/{name}")
        };
        ObjectState {
            display,
            deleting,
            finalizers,
            owners: owners.to_vec(),
        }
    }
}

/// Every object by UID.
pub type Outcome = BTreeMap<String, ObjectState>;

/// Where `actual` differs from `expected`, one line each, expected first.
pub fn differences(expected: &Outcome, actual: &Outcome) -> Vec<String> {
    let mut out = Vec::new();
    for (uid, e) in expected {
        let Some(a) = actual.get(uid) else {
            out.push(format!("{} ({uid}) should exist but is gone", e.display));
            continue;
        };
        if a.deleting != e.deleting {
            let should = if e.deleting { "set" } else { "unset" };
            out.push(format!("{}: deletionTimestamp should be {should}", e.display));
        }
        if a.finalizers != e.finalizers {
            out.push(format!(
                "{}: finalizers should be {:?}, are {:?}",
                e.display, e.finalizers, a.finalizers
            ));
        }
        if a.owners != e.owners {
            out.push(format!(
                "{}: ownerReferences should be {}, are {}",
                e.display,
                show(&e.owners),
                show(&a.owners)
            ));
        }
    }
    for (uid, a) in actual {
        if !expected.contains_key(uid) {
            out.push(format!("{} ({uid}) should be gone but exists", a.display));
        }
    }
    out
}

/// References in short form: `Kind/name@uid`, `+b` / `-b` for blockOwnerDeletion true / false.
fn show(refs: &[OwnerReference]) -> String {
    let shown: Vec<String> = refs
        .iter()
        .map(|r| {
            let block = match r.block_owner_deletion {
                Some(true) => "+b",
                Some(false) => "-b",
                None => "",
            };
            format!("{}/{}@{}{block}", r.kind, r.name, r.uid)
        })
        .collect();
    format!("[{}]", shown.join(", "))
}

/// A served type: its index among the types that have objects' names, and its scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Type {
    index: usize,
    namespaced: bool,
}

#[derive(Clone, Debug)]
struct Entry {
    kind: String,
    ty: Type,
    namespace: String,
    name: String,
    owners: Vec<OwnerReference>,
    finalizers: Vec<String>,
    deleting: bool,
    /// Seen deleting with `foregroundDeletion`; never cleared (the cycle rule reads it).
    deleting_dependents: bool,
}

impl Entry {
    fn has(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }

    fn is_waiting(&self) -> bool {
        self.deleting && self.has(FINALIZER_FOREGROUND)
    }
}

/// How one reference classifies.
enum Class {
    Solid,
    Waiting,
    Dangling,
    Unresolvable,
}

/// What Decide does to an object.
enum Decision {
    /// Remove the references to these owner UIDs.
    Strip(HashSet<String>),
    /// Delete with `policy`, after unblocking the object's references if `unblock`.
    Delete { policy: PropagationPolicy, unblock: bool },
}

/// The cluster as the oracle sees it (module docs).
#[derive(Clone)]
pub struct Oracle {
    mapper: RestMapper,
    /// apiVersion → kind → served type, learned as objects and references name them.
    types: HashMap<String, HashMap<String, Option<Type>>>,
    /// (group, resource) → index into `names`.
    type_index: HashMap<(String, String), usize>,
    /// Per type: namespace → name → UID.
    names: Vec<HashMap<String, HashMap<String, String>>>,
    objects: HashMap<String, Entry>,
    /// Owner UID → UIDs of the objects that reference it, whatever else the reference says.
    dependents: HashMap<String, Vec<String>>,
    work: VecDeque<String>,
    queued: HashSet<String>,
}

impl Oracle {
    /// An empty cluster serving what `mapper` maps.
    pub fn new(mapper: RestMapper) -> Oracle {
        Oracle {
            mapper,
            types: HashMap::new(),
            type_index: HashMap::new(),
            names: Vec::new(),
            objects: HashMap::new(),
            dependents: HashMap::new(),
            work: VecDeque::new(),
            queued: HashSet::new(),
        }
    }

    /// Applies a user action, without letting the collector run. Actions on an object that is
    /// gone do nothing.
    pub fn apply(&mut self, action: &Action) {
        match action {
            Action::Create(object) => self.create(object),
            Action::Delete { target, policy } => self.delete(&target.uid, *policy),
            Action::SetOwners { target, owners } => self.set_owners(&target.uid, owners.clone()),
        }
    }

    /// Lets the collector run until no rule applies.
    pub fn settle(&mut self) {
        while let Some(uid) = self.work.pop_front() {
            self.queued.remove(&uid);
            self.step(&uid);
        }
    }

    /// Every object, by UID.
    pub fn outcome(&self) -> Outcome {
        self.objects
            .iter()
            .map(|(uid, e)| {
                let state = ObjectState::new(&e.kind, &e.namespace, &e.name, e.deleting, &e.finalizers, &e.owners);
                (uid.clone(), state)
            })
            .collect()
    }

    /// A create, as the API server carries it out.
    pub fn create(&mut self, object: &PartialObjectMeta) {
        let m = &object.metadata;
        let Some(ty) = self.learn(&object.api_version, &object.kind) else {
            return;
        };
        if self.objects.contains_key(&m.uid) || self.lookup(ty, &m.namespace, &m.name).is_some() {
            return;
        }
        for r in &m.owner_references {
            self.learn(&r.api_version, &r.kind);
            self.link(&r.uid, &m.uid);
        }
        self.names[ty.index]
            .entry(m.namespace.clone())
            .or_default()
            .insert(m.name.clone(), m.uid.clone());
        let deleting = m.deletion_timestamp.is_some();
        let entry = Entry {
            kind: object.kind.clone(),
            ty,
            namespace: m.namespace.clone(),
            name: m.name.clone(),
            owners: m.owner_references.clone(),
            finalizers: m.finalizers.clone(),
            deleting,
            deleting_dependents: deleting && m.has_finalizer(FINALIZER_FOREGROUND),
        };
        self.objects.insert(m.uid.clone(), entry);
        self.touch(&m.uid);
    }

    /// A delete with `policy`, as the API server carries it out.
    fn delete(&mut self, uid: &str, policy: PropagationPolicy) {
        let Some(e) = self.objects.get_mut(uid) else {
            return;
        };
        e.finalizers
            .retain(|f| f != FINALIZER_ORPHAN && f != FINALIZER_FOREGROUND);
        match policy {
            PropagationPolicy::Orphan => e.finalizers.push(FINALIZER_ORPHAN.into()),
            PropagationPolicy::Foreground => {
                e.finalizers.push(FINALIZER_FOREGROUND.into());
                e.deleting_dependents = true;
            }
            PropagationPolicy::Background => {}
        }
        if e.finalizers.is_empty() {
            self.remove(uid);
        } else {
            e.deleting = true;
            self.touch(uid);
        }
    }

    fn set_owners(&mut self, uid: &str, owners: Vec<OwnerReference>) {
        let Some(e) = self.objects.get_mut(uid) else {
            return;
        };
        let old = std::mem::replace(&mut e.owners, owners.clone());
        for r in &old {
            self.unlink(&r.uid, uid);
            self.enqueue(&r.uid);
        }
        for r in &owners {
            self.learn(&r.api_version, &r.kind);
            self.link(&r.uid, uid);
        }
        self.touch(uid);
    }

    fn remove_finalizer(&mut self, uid: &str, finalizer: &str) {
        let Some(e) = self.objects.get_mut(uid) else {
            return;
        };
        e.finalizers.retain(|f| f != finalizer);
        if e.deleting && e.finalizers.is_empty() {
            self.remove(uid);
        } else {
            self.touch(uid);
        }
    }

    fn remove(&mut self, uid: &str) {
        let Some(e) = self.objects.remove(uid) else {
            return;
        };
        if let Some(names) = self.names[e.ty.index].get_mut(&e.namespace) {
            names.remove(&e.name);
        }
        for r in &e.owners {
            self.unlink(&r.uid, uid);
            self.enqueue(&r.uid);
        }
        for d in self.dependents_of(uid).to_vec() {
            self.enqueue(&d);
        }
    }

    /// Queues the object and every object whose situation its change may alter: its owners and
    /// its dependents.
    fn touch(&mut self, uid: &str) {
        let Some(e) = self.objects.get(uid) else {
            return;
        };
        let related: Vec<String> = e
            .owners
            .iter()
            .map(|r| r.uid.clone())
            .chain(self.dependents_of(uid).iter().cloned())
            .collect();
        self.enqueue(uid);
        for other in related {
            self.enqueue(&other);
        }
    }

    fn enqueue(&mut self, uid: &str) {
        if self.objects.contains_key(uid) && self.queued.insert(uid.to_string()) {
            self.work.push_back(uid.to_string());
        }
    }

    /// The rule that applies to `uid` now, if any.
    fn step(&mut self, uid: &str) {
        let Some(e) = self.objects.get(uid) else {
            return;
        };
        if e.deleting {
            if e.has(FINALIZER_ORPHAN) {
                self.orphan(uid);
            } else if e.has(FINALIZER_FOREGROUND) && e.deleting_dependents && !self.has_blocking_dependents(uid) {
                self.remove_finalizer(uid, FINALIZER_FOREGROUND);
            }
            return;
        }
        match self.decide(uid, e) {
            Some(Decision::Strip(strip)) => {
                let kept = e.owners.iter().filter(|r| !strip.contains(&r.uid)).cloned().collect();
                self.set_owners(uid, kept);
            }
            Some(Decision::Delete { policy, unblock }) => {
                if unblock {
                    let unblocked = e.owners.iter().cloned().map(unblock_ref).collect();
                    self.set_owners(uid, unblocked);
                }
                self.delete(uid, policy);
            }
            None => {}
        }
    }

    /// Every dependent loses its references to `uid`; then the `orphan` finalizer goes.
    fn orphan(&mut self, uid: &str) {
        for d in self.dependents_of(uid).to_vec() {
            let kept = self.objects[&d]
                .owners
                .iter()
                .filter(|r| r.uid != uid)
                .cloned()
                .collect();
            self.set_owners(&d, kept);
        }
        self.remove_finalizer(uid, FINALIZER_ORPHAN);
    }

    /// Decide for a live object (module docs); `None` when nothing is to be done.
    fn decide(&self, uid: &str, e: &Entry) -> Option<Decision> {
        if e.owners.is_empty() {
            return None;
        }
        let (mut solid, mut waiting) = (false, false);
        let mut strip = HashSet::new();
        for r in &e.owners {
            match self.classify(e, r) {
                Class::Unresolvable => return None,
                Class::Solid => solid = true,
                Class::Waiting => {
                    waiting = true;
                    strip.insert(r.uid.clone());
                }
                Class::Dangling => {
                    strip.insert(r.uid.clone());
                }
            }
        }
        if solid {
            return (!strip.is_empty()).then_some(Decision::Strip(strip));
        }
        let dependents = self.dependents_of(uid);
        if waiting && !dependents.is_empty() {
            let unblock = dependents.iter().any(|d| self.objects[d].deleting_dependents);
            return Some(Decision::Delete {
                policy: PropagationPolicy::Foreground,
                unblock,
            });
        }
        let policy = if e.has(FINALIZER_ORPHAN) {
            PropagationPolicy::Orphan
        } else if e.has(FINALIZER_FOREGROUND) {
            PropagationPolicy::Foreground
        } else {
            PropagationPolicy::Background
        };
        Some(Decision::Delete { policy, unblock: false })
    }

    fn classify(&self, item: &Entry, r: &OwnerReference) -> Class {
        let Some(ty) = self.resolve(&r.api_version, &r.kind) else {
            return Class::Unresolvable;
        };
        if !item.ty.namespaced && ty.namespaced {
            return Class::Unresolvable;
        }
        let namespace = if ty.namespaced { item.namespace.as_str() } else { "" };
        let found = self.lookup(ty, namespace, &r.name).filter(|uid| **uid == r.uid);
        match found.and_then(|uid| self.objects.get(uid)) {
            Some(owner) if owner.is_waiting() => Class::Waiting,
            Some(_) => Class::Solid,
            None => Class::Dangling,
        }
    }

    fn has_blocking_dependents(&self, uid: &str) -> bool {
        self.dependents_of(uid).iter().any(|d| {
            self.objects[d]
                .owners
                .iter()
                .any(|r| r.uid == uid && r.block_owner_deletion == Some(true))
        })
    }

    fn dependents_of(&self, uid: &str) -> &[String] {
        self.dependents.get(uid).map_or(&[], Vec::as_slice)
    }

    fn link(&mut self, owner: &str, dependent: &str) {
        let list = self.dependents.entry(owner.to_string()).or_default();
        if !list.iter().any(|d| d == dependent) {
            list.push(dependent.to_string());
        }
    }

    fn unlink(&mut self, owner: &str, dependent: &str) {
        if let Some(list) = self.dependents.get_mut(owner) {
            list.retain(|d| d != dependent);
            if list.is_empty() {
                self.dependents.remove(owner);
            }
        }
    }

    fn lookup(&self, ty: Type, namespace: &str, name: &str) -> Option<&String> {
        self.names[ty.index].get(namespace)?.get(name)
    }

    fn resolve(&self, api_version: &str, kind: &str) -> Option<Type> {
        *self.types.get(api_version)?.get(kind)?
    }

    /// Resolves and remembers a type.
    fn learn(&mut self, api_version: &str, kind: &str) -> Option<Type> {
        if let Some(known) = self.types.get(api_version).and_then(|kinds| kinds.get(kind)) {
            return *known;
        }
        let ty = self.mapper.rest_mapping(api_version, kind).ok().map(|m| {
            let key = (m.gvr.group, m.gvr.resource);
            let next = self.type_index.len();
            let index = *self.type_index.entry(key).or_insert(next);
            if index == self.names.len() {
                self.names.push(HashMap::new());
            }
            Type {
                index,
                namespaced: m.namespaced,
            }
        });
        self.types
            .entry(api_version.to_string())
            .or_default()
            .insert(kind.to_string(), ty);
        ty
    }
}

/// The unblock patch on one reference: a blocking reference stops blocking.
fn unblock_ref(mut r: OwnerReference) -> OwnerReference {
    if r.block_owner_deletion == Some(true) {
        r.block_owner_deletion = Some(false);
    }
    r
}
