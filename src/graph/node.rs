//! Graph nodes and the handles that queues carry (spec §1.2).
//!
//! A node's identity never changes: upstream's "clone with a new identity" becomes a new
//! [`Handle`], and the old handle may still sit in a queue. Handles compare and hash by pointer,
//! which is exactly how upstream's queues de-duplicate.
//!
//! Writers: the builder that owns the node's partition changes `owners` and the flags, and alone
//! replaces or removes the node. Any builder may add or remove an edge in `dependents`, through
//! the protocol of [`super::edges`]. Readers (collector workers, the dump, tests) run at any time
//! and without a graph-wide lock, so a reader may see `owners`, `dependents` and flags from
//! slightly different moments (spec §11); the re-queue rules, not locking, make that safe.

use super::identity::{Identity, OwnerRef};
use parking_lot::Mutex;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// Flag bits of [`Node::flags`].
mod bit {
    /// Created from someone's ownerReference and never observed. Cleared once, never set again.
    pub const VIRTUAL: u8 = 1 << 0;
    /// Observed with a deletionTimestamp. Never cleared.
    pub const BEING_DELETED: u8 = 1 << 1;
    /// Deleting in the foreground, waiting for blocking dependents. Never cleared.
    pub const DELETING_DEPENDENTS: u8 = 1 << 2;
    /// The last observed object listed the `orphan` finalizer.
    pub const ORPHAN_FINALIZER: u8 = 1 << 3;
    /// The last observed object listed the `foregroundDeletion` finalizer.
    pub const FOREGROUND_FINALIZER: u8 = 1 << 4;
}

/// The finalizers the graph remembers from the last observation of an object: the only ones
/// processTransitions reads (spec §3.6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObservedFinalizers {
    /// `orphan` was listed.
    pub orphan: bool,
    /// `foregroundDeletion` was listed.
    pub foreground: bool,
}

impl ObservedFinalizers {
    /// Reads the two finalizers out of a list.
    pub fn from_list<S: AsRef<str>>(finalizers: &[S]) -> Self {
        let has = |f: &str| finalizers.iter().any(|x| x.as_ref() == f);
        ObservedFinalizers {
            orphan: has(crate::api::FINALIZER_ORPHAN),
            foreground: has(crate::api::FINALIZER_FOREGROUND),
        }
    }
}

/// One object of the graph, observed or virtual.
pub struct Node {
    identity: Identity,
    /// Bits of [`bit`]; Relaxed suffices because no other memory is published through them:
    /// owners and dependents have their own locks.
    flags: AtomicU8,
    /// Last observed ownerReferences; empty for virtual nodes.
    owners: Mutex<Vec<OwnerRef>>,
    /// Dependents, by handle identity, and whether this handle was retired (see
    /// [`super::edges`]); both under one lock, which is what makes the edge protocol sound.
    dependents: Mutex<Dependents>,
}

/// The dependents of a node, and the retirement mark that edge writers check.
#[derive(Default)]
pub(super) struct Dependents {
    /// The dependents.
    pub(super) set: HashSet<Handle>,
    /// Set once, when the node is replaced by a clone or removed from the map; from then on no
    /// edge may be added to or removed from this handle.
    pub(super) retired: bool,
}

/// A shared pointer to a node; equality and hashing are by pointer (spec §1.2, "queue identity is
/// the handle").
#[derive(Clone)]
pub struct Handle(Arc<Node>);

impl Handle {
    /// A new observed or virtual node with no dependents.
    pub fn new(identity: Identity, owners: Vec<OwnerRef>, is_virtual: bool) -> Handle {
        let flags = if is_virtual { bit::VIRTUAL } else { 0 };
        Handle(Arc::new(Node {
            identity,
            flags: AtomicU8::new(flags),
            owners: Mutex::new(owners),
            dependents: Mutex::new(Dependents::default()),
        }))
    }

    /// A new handle with `identity` and copies of this node's flags, owners and dependents. The
    /// copy is not in the graph; builders replace a node with [`super::Graph::replace`].
    pub fn clone_with_identity(&self, identity: Identity) -> Handle {
        let set = self.dependents.lock().set.clone();
        self.clone_with(identity, set)
    }

    pub(super) fn clone_with(&self, identity: Identity, set: HashSet<Handle>) -> Handle {
        Handle(Arc::new(Node {
            identity,
            flags: AtomicU8::new(self.flags.load(Ordering::Relaxed)),
            owners: Mutex::new(self.owners()),
            dependents: Mutex::new(Dependents { set, retired: false }),
        }))
    }

    /// True when both handles point at the same node.
    pub fn ptr_eq(a: &Handle, b: &Handle) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl Deref for Handle {
    type Target = Node;
    fn deref(&self) -> &Node {
        &self.0
    }
}

impl PartialEq for Handle {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Handle {}

impl Hash for Handle {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(Arc::as_ptr(&self.0), state);
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("identity", &self.identity.to_string())
            .field("virtual", &self.is_virtual())
            .field("being_deleted", &self.is_being_deleted())
            .field("deleting_dependents", &self.is_deleting_dependents())
            .finish()
    }
}

impl Node {
    /// The node's identity.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    fn has(&self, b: u8) -> bool {
        self.flags.load(Ordering::Relaxed) & b != 0
    }

    /// Never observed through a watch.
    pub fn is_virtual(&self) -> bool {
        self.has(bit::VIRTUAL)
    }

    /// Observed with a deletionTimestamp.
    pub fn is_being_deleted(&self) -> bool {
        self.has(bit::BEING_DELETED)
    }

    /// In a foreground deletion.
    pub fn is_deleting_dependents(&self) -> bool {
        self.has(bit::DELETING_DEPENDENTS)
    }

    /// The finalizers of the last observation.
    pub fn observed_finalizers(&self) -> ObservedFinalizers {
        ObservedFinalizers {
            orphan: self.has(bit::ORPHAN_FINALIZER),
            foreground: self.has(bit::FOREGROUND_FINALIZER),
        }
    }

    /// Builder only: clears the virtual flag (spec §1.2 `markObserved`).
    pub fn mark_observed(&self) {
        self.flags.fetch_and(!bit::VIRTUAL, Ordering::Relaxed);
    }

    /// Builder only: sets beingDeleted.
    pub fn mark_being_deleted(&self) {
        self.flags.fetch_or(bit::BEING_DELETED, Ordering::Relaxed);
    }

    /// Builder only: sets deletingDependents (and beingDeleted, which it implies).
    pub fn mark_deleting_dependents(&self) {
        self.flags
            .fetch_or(bit::DELETING_DEPENDENTS | bit::BEING_DELETED, Ordering::Relaxed);
    }

    /// Builder only: remembers the finalizers of the latest observation.
    pub fn set_observed_finalizers(&self, f: ObservedFinalizers) {
        let set = (if f.orphan { bit::ORPHAN_FINALIZER } else { 0 })
            | (if f.foreground { bit::FOREGROUND_FINALIZER } else { 0 });
        let mask = bit::ORPHAN_FINALIZER | bit::FOREGROUND_FINALIZER;
        // The builder is the only writer, but readers run concurrently, so keep other bits intact.
        let _ = self
            .flags
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| Some((old & !mask) | set));
    }

    /// A copy of the owners list.
    pub fn owners(&self) -> Vec<OwnerRef> {
        self.owners.lock().clone()
    }

    /// Runs `f` over the owners without copying them.
    pub fn with_owners<R>(&self, f: impl FnOnce(&[OwnerRef]) -> R) -> R {
        f(&self.owners.lock())
    }

    /// Builder only: replaces the owners list.
    pub fn set_owners(&self, owners: Vec<OwnerRef>) {
        *self.owners.lock() = owners;
    }

    /// A snapshot of the dependents.
    pub fn dependents(&self) -> Vec<Handle> {
        self.dependents.lock().set.iter().cloned().collect()
    }

    /// Number of dependents.
    pub fn dependents_len(&self) -> usize {
        self.dependents.lock().set.len()
    }

    /// True once the node was replaced or removed from the graph.
    pub fn is_retired(&self) -> bool {
        self.dependents.lock().retired
    }

    /// Adds a dependent; false (and nothing done) if the node is retired. Builders go through
    /// [`super::Graph::link`], which retries on the live node.
    pub fn add_dependent(&self, d: Handle) -> bool {
        self.with_live_dependents(|set| set.insert(d)).is_some()
    }

    /// Removes a dependent; false (and nothing done) if the node is retired.
    pub fn remove_dependent(&self, d: &Handle) -> bool {
        self.with_live_dependents(|set| set.remove(d)).is_some()
    }

    /// Runs `f` on the dependents unless the node is retired.
    pub(super) fn with_live_dependents<R>(&self, f: impl FnOnce(&mut HashSet<Handle>) -> R) -> Option<R> {
        let mut deps = self.dependents.lock();
        (!deps.retired).then(|| f(&mut deps.set))
    }

    /// Retires the node while `f` runs under its dependents lock with a snapshot of them.
    pub(super) fn retire<R>(&self, f: impl FnOnce(&mut HashSet<Handle>) -> R) -> R {
        let mut deps = self.dependents.lock();
        debug_assert!(!deps.retired, "a node is retired once: {:?}", self.identity);
        deps.retired = true;
        f(&mut deps.set)
    }

    /// Every dependent that holds a ref to this node with `blockOwnerDeletion: true`, once per
    /// such ref (spec §1.2).
    pub fn blocking_dependents(&self) -> Vec<Handle> {
        let mut out = Vec::new();
        for d in self.dependents() {
            let n = d.with_owners(|refs| {
                refs.iter()
                    .filter(|r| r.uid == self.identity.uid && r.blocks_owner_deletion())
                    .count()
            });
            out.extend(std::iter::repeat_n(d, n));
        }
        out
    }
}
