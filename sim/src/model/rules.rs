//! The collector's steps and the API server's rules, applied to the model's cluster.

use super::{Entry, Model, Object, OutOfRegion, Schedule};
use kube_gc::api::{OwnerReference, PropagationPolicy, FINALIZER_FOREGROUND, FINALIZER_ORPHAN};
use std::collections::{BTreeSet, HashSet};

/// One decision of the collector, applied atomically against the current cluster.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Step {
    /// attempt_to_delete_item on a live object with owners (§4.2 rows 5–7).
    AttemptToDeleteItem(String),
    /// attempt_to_orphan: strip `owner`'s references from one dependent (§5 step 2).
    OrphanDependent { owner: String, dependent: String },
    /// attempt_to_orphan: no dependent left, the `orphan` finalizer goes (§5 step 3).
    RemoveOrphanFinalizer(String),
    /// process_deleting_dependents_item with no blocking dependent left (§4.2 row 4).
    RemoveForegroundFinalizer(String),
}

impl Step {
    fn is_attempt_to_delete(&self) -> bool {
        matches!(self, Step::AttemptToDeleteItem(_))
    }
}

/// What attempt_to_delete_item does to one object.
enum Decision {
    /// Remove the references to these owner UIDs (dangling and waiting, with a solid owner left).
    Strip(BTreeSet<String>),
    /// Delete with `policy`, after unblocking the object's references if `unblock`.
    Delete { policy: PropagationPolicy, unblock: bool },
}

/// How one reference classifies (§4.3).
enum Class {
    Solid,
    Waiting,
    Dangling,
    Unresolvable,
}

impl Model {
    /// Every step that would change the cluster now, sorted.
    pub(super) fn enabled(&self) -> Result<Vec<Step>, OutOfRegion> {
        let mut steps = Vec::new();
        for uid in self.objects.keys() {
            let mine = self.enabled_for(uid);
            if mine.iter().any(Step::is_attempt_to_delete) && self.was_stuck(uid) {
                return Err(OutOfRegion::StuckBecameDecidable { uid: uid.clone() });
            }
            steps.extend(mine);
        }
        steps.sort();
        Ok(steps)
    }

    /// The steps enabled on `uid`'s object: its attempt_to_delete_item, or the finalizer work of
    /// its deletion.
    pub(super) fn enabled_for(&self, uid: &str) -> Vec<Step> {
        let Some(entry) = self.objects.get(uid) else {
            return Vec::new();
        };
        let o = &entry.object;
        let mut steps = Vec::new();
        if o.deleting {
            if o.has_finalizer(FINALIZER_ORPHAN) {
                let dependents = self.dependents(uid);
                if dependents.is_empty() {
                    steps.push(Step::RemoveOrphanFinalizer(uid.to_string()));
                }
                steps.extend(dependents.iter().map(|d| Step::OrphanDependent {
                    owner: uid.to_string(),
                    dependent: d.clone(),
                }));
            } else if o.has_finalizer(FINALIZER_FOREGROUND)
                && entry.deleting_dependents
                && !self.has_blocking_dependents(uid)
            {
                steps.push(Step::RemoveForegroundFinalizer(uid.to_string()));
            }
        } else if self.decide(o).is_some() {
            steps.push(Step::AttemptToDeleteItem(uid.to_string()));
        }
        steps
    }

    /// Applies one step.
    pub(super) fn take(&mut self, step: &Step) {
        match step {
            Step::AttemptToDeleteItem(uid) => {
                let object = self.get(uid).expect("decided object exists");
                match self.decide(object) {
                    Some(Decision::Strip(owners)) => {
                        let mut refs = object.owner_references.clone();
                        refs.retain(|r| !owners.contains(&r.uid));
                        self.set_owner_references(uid, refs);
                    }
                    Some(Decision::Delete { policy, unblock }) => {
                        if unblock {
                            // The unblock patch (§6.3): every blocking ref becomes non-blocking.
                            let mut refs = object.owner_references.clone();
                            for r in refs.iter_mut().filter(|r| r.block_owner_deletion == Some(true)) {
                                r.block_owner_deletion = Some(false);
                            }
                            self.set_owner_references(uid, refs);
                        }
                        self.delete(uid, Some(policy));
                    }
                    None => unreachable!("only enabled steps are taken"),
                }
            }
            Step::OrphanDependent { owner, dependent } => {
                let mut refs = self.objects[dependent].object.owner_references.clone();
                refs.retain(|r| r.uid != *owner);
                self.set_owner_references(dependent, refs);
            }
            Step::RemoveOrphanFinalizer(uid) => {
                self.orphaned.insert(uid.clone());
                self.remove_finalizer(uid, FINALIZER_ORPHAN)
            }
            Step::RemoveForegroundFinalizer(uid) => self.remove_finalizer(uid, FINALIZER_FOREGROUND),
        }
    }

    /// attempt_to_delete_item's choice for a live object (§4.2 rows 5–7); `None` when it does
    /// nothing.
    fn decide(&self, object: &Object) -> Option<Decision> {
        if object.owner_references.is_empty() {
            return None;
        }
        let mut solid = false;
        let mut waiting = false;
        let mut strip = BTreeSet::new();
        for r in &object.owner_references {
            match self.classify(object, r) {
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
        let dependents = self.dependents(&object.uid);
        if waiting && !dependents.is_empty() {
            let unblock = dependents.iter().any(|d| self.objects[d].deleting_dependents);
            return Some(Decision::Delete {
                policy: PropagationPolicy::Foreground,
                unblock,
            });
        }
        let policy = if object.has_finalizer(FINALIZER_ORPHAN) {
            PropagationPolicy::Orphan
        } else if object.has_finalizer(FINALIZER_FOREGROUND) {
            PropagationPolicy::Foreground
        } else {
            PropagationPolicy::Background
        };
        Some(Decision::Delete { policy, unblock: false })
    }

    /// §4.3 for one reference of `item`.
    fn classify(&self, item: &Object, r: &OwnerReference) -> Class {
        let Some((kind, ty)) = self.served.resolve(&r.api_version, &r.kind) else {
            return Class::Unresolvable;
        };
        if !item.kind.namespaced && kind.namespaced {
            return Class::Unresolvable;
        }
        let namespace = if kind.namespaced { item.namespace.as_str() } else { "" };
        let found = self.names[*ty]
            .get(namespace)
            .and_then(|names| names.get(&r.name))
            .and_then(|uid| self.get(uid));
        match found {
            Some(owner) if owner.uid == r.uid && owner.is_waiting() => Class::Waiting,
            Some(owner) if owner.uid == r.uid => Class::Solid,
            _ => Class::Dangling,
        }
    }

    /// Whether a reference of `object` is unresolvable, whatever the rest of the cluster holds.
    fn has_unresolvable_reference(&self, object: &Object) -> bool {
        object.owner_references.iter().any(|r| {
            self.served
                .resolve(&r.api_version, &r.kind)
                .is_none_or(|(kind, _)| !object.kind.namespaced && kind.namespaced)
        })
    }

    /// Whether `uid` was stuck when the last user action came, if the next settle checks that.
    fn was_stuck(&self, uid: &str) -> bool {
        let Some(entry) = self.objects.get(uid) else {
            return false;
        };
        match entry.stuck_before {
            _ if !self.checking_stuck => false,
            (action, stuck) if action == self.actions => stuck,
            _ => entry.stuck,
        }
    }

    /// A create, as the API server carries it out (refused when the UID or name is taken or the
    /// type is not served).
    pub(super) fn create(&mut self, object: Object) {
        self.check_new_references(&object.uid, &object.owner_references);
        self.insert(object, false);
    }

    /// References that `uid` gains leave the region when their owner already waits, since nothing
    /// queues the dependent until that owner changes again (§3.2 queues a dependent only for
    /// suspicious references), or when the collector orphaned their owner.
    pub(super) fn check_new_references(&mut self, uid: &str, refs: &[OwnerReference]) {
        let held: HashSet<&str> = self
            .get(uid)
            .map(|o| o.owner_references.iter().map(|r| r.uid.as_str()).collect())
            .unwrap_or_default();
        let gained = || refs.iter().filter(|r| !held.contains(r.uid.as_str()));
        let under_waiting = gained().any(|r| self.get(&r.uid).is_some_and(Object::is_waiting));
        let under_orphaned = gained().any(|r| self.orphaned.contains(&r.uid));
        if under_waiting {
            self.left_region
                .get_or_insert(OutOfRegion::CreatedUnderWaitingOwner { uid: uid.to_string() });
        }
        if under_orphaned {
            self.left_region
                .get_or_insert(OutOfRegion::CreatedUnderOrphanedOwner { uid: uid.to_string() });
        }
    }

    /// A DELETE with `policy`, as the API server carries it out.
    pub(super) fn delete(&mut self, uid: &str, policy: Option<PropagationPolicy>) {
        let object = &self.objects[uid].object;
        let first_gc_finalizer = object
            .finalizers
            .iter()
            .find(|f| *f == FINALIZER_ORPHAN || *f == FINALIZER_FOREGROUND);
        let orphan = match policy {
            Some(p) => p == PropagationPolicy::Orphan,
            None => match first_gc_finalizer.map(String::as_str) {
                Some(FINALIZER_ORPHAN) => true,
                Some(_) => false,
                None => object.kind.default_policy == PropagationPolicy::Orphan,
            },
        };
        let foreground = match policy {
            Some(p) => p == PropagationPolicy::Foreground,
            None => object.has_finalizer(FINALIZER_FOREGROUND),
        };
        if foreground && self.on_cycle(uid) {
            self.left_region
                .get_or_insert(OutOfRegion::ForegroundOnCycle { uid: uid.to_string() });
        }
        let entry = self.objects.get_mut(uid).expect("deleted object exists");
        let object = &mut entry.object;
        object
            .finalizers
            .retain(|f| f != FINALIZER_ORPHAN && f != FINALIZER_FOREGROUND);
        if orphan {
            object.finalizers.push(FINALIZER_ORPHAN.to_string());
        }
        if foreground {
            object.finalizers.push(FINALIZER_FOREGROUND.to_string());
            entry.deleting_dependents = true;
        }
        if object.finalizers.is_empty() {
            self.remove(uid);
        } else {
            object.deleting = true;
            self.touch(uid);
        }
    }

    /// Takes a finalizer off; a marked object with none left goes.
    pub(super) fn remove_finalizer(&mut self, uid: &str, finalizer: &str) {
        let object = &mut self.objects.get_mut(uid).expect("object exists").object;
        object.finalizers.retain(|f| f != finalizer);
        if object.deleting && object.finalizers.is_empty() {
            self.remove(uid);
        } else {
            self.touch(uid);
        }
    }

    /// Adds an object unless the API server would refuse it; whether it did.
    pub(super) fn insert(&mut self, object: Object, deleting_dependents: bool) -> bool {
        let Some(&(_, ty)) = self.served.resolve(&object.kind.api_version, &object.kind.kind) else {
            return false;
        };
        let names = self.names[ty].entry(object.namespace.clone()).or_default();
        if self.objects.contains_key(&object.uid) || names.contains_key(&object.name) {
            return false;
        }
        names.insert(object.name.clone(), object.uid.clone());
        let uid = object.uid.clone();
        for r in &object.owner_references {
            self.dependents.entry(r.uid.clone()).or_default().insert(uid.clone());
        }
        let entry = Entry {
            object,
            deleting_dependents,
            ty,
            stuck: false,
            stuck_before: (self.actions, false),
        };
        self.objects.insert(uid.clone(), entry);
        self.touch(&uid);
        true
    }

    /// Replaces an object's references, keeping the dependents index in step.
    pub(super) fn set_owner_references(&mut self, uid: &str, refs: Vec<OwnerReference>) {
        let object = &mut self.objects.get_mut(uid).expect("object exists").object;
        let old = std::mem::replace(&mut object.owner_references, refs);
        for r in &old {
            self.unlink(&r.uid, uid);
        }
        let new: Vec<String> = self.objects[uid]
            .object
            .owner_references
            .iter()
            .map(|r| r.uid.clone())
            .collect();
        for owner in new {
            self.dependents.entry(owner).or_default().insert(uid.to_string());
        }
        // A former owner may have lost its last (blocking) dependent.
        for r in &old {
            self.enqueue(&r.uid);
        }
        self.touch(uid);
    }

    /// Removes an object, as the API server does once no finalizer is left.
    fn remove(&mut self, uid: &str) {
        let Some(entry) = self.objects.remove(uid) else {
            return;
        };
        let object = entry.object;
        if let Some(names) = self.names[entry.ty].get_mut(&object.namespace) {
            names.remove(&object.name);
        }
        for r in &object.owner_references {
            self.unlink(&r.uid, uid);
            self.enqueue(&r.uid);
        }
        for d in self.dependents(uid).clone() {
            self.enqueue(&d);
        }
    }

    fn unlink(&mut self, owner: &str, dependent: &str) {
        if let Some(set) = self.dependents.get_mut(owner) {
            set.remove(dependent);
            if set.is_empty() {
                self.dependents.remove(owner);
            }
        }
    }

    /// After `uid`'s object changed: its stuck mark is brought up to date, and it, its owners and
    /// its dependents are looked at again, since each one's steps read it.
    fn touch(&mut self, uid: &str) {
        let Some(entry) = self.objects.get(uid) else {
            return;
        };
        let stuck = !entry.object.deleting && self.has_unresolvable_reference(&entry.object);
        let owners: Vec<String> = entry.object.owner_references.iter().map(|r| r.uid.clone()).collect();
        let actions = self.actions;
        let entry = self.objects.get_mut(uid).expect("object exists");
        if entry.stuck != stuck {
            if entry.stuck_before.0 != actions {
                entry.stuck_before = (actions, entry.stuck);
            }
            entry.stuck = stuck;
        }
        self.enqueue(uid);
        for owner in owners {
            self.enqueue(&owner);
        }
        for d in self.dependents(uid).clone() {
            self.enqueue(&d);
        }
    }

    fn enqueue(&mut self, uid: &str) {
        if self.objects.contains_key(uid) && !self.queued.contains(uid) {
            self.queued.insert(uid.to_string());
            self.work.push_back(uid.to_string());
        }
    }

    /// The UIDs of every object holding a reference to `uid`, in UID order.
    fn dependents(&self, uid: &str) -> &BTreeSet<String> {
        static NONE: BTreeSet<String> = BTreeSet::new();
        self.dependents.get(uid).unwrap_or(&NONE)
    }

    fn has_blocking_dependents(&self, uid: &str) -> bool {
        self.dependents(uid).iter().any(|d| {
            self.objects[d]
                .object
                .owner_references
                .iter()
                .any(|r| r.uid == uid && r.block_owner_deletion == Some(true))
        })
    }

    /// True when following references by UID from `uid` leads back to it.
    fn on_cycle(&self, uid: &str) -> bool {
        let mut seen = BTreeSet::new();
        let mut stack = vec![uid];
        while let Some(next) = stack.pop() {
            let Some(object) = self.get(next) else { continue };
            for r in &object.owner_references {
                if r.uid == uid {
                    return true;
                }
                if seen.insert(r.uid.as_str()) {
                    stack.push(&r.uid);
                }
            }
        }
        false
    }
}

/// The step `schedule` takes next, if any.
pub(super) fn pick(steps: &[Step], schedule: &Schedule, rng: &mut u64) -> Option<Step> {
    let attempts = |s: &Step, uid: &str| matches!(s, Step::AttemptToDeleteItem(d) if d == uid);
    let chosen = match schedule {
        Schedule::Defer(uid) => steps.iter().find(|s| !attempts(s, uid)).or(steps.first()),
        Schedule::Prefer(uid) => steps.iter().find(|s| attempts(s, uid)).or(steps.first()),
        Schedule::Canonical => steps.first(),
        Schedule::OwnersFirst => steps.iter().find(|s| !s.is_attempt_to_delete()).or(steps.first()),
        Schedule::DependentsFirst => steps.iter().find(|s| s.is_attempt_to_delete()).or(steps.first()),
        Schedule::Random(_) => {
            if steps.is_empty() {
                None
            } else {
                // xorshift64
                *rng ^= *rng << 13;
                *rng ^= *rng >> 7;
                *rng ^= *rng << 17;
                steps.get((*rng % steps.len() as u64) as usize)
            }
        }
    };
    chosen.cloned()
}
