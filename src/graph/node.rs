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
//!
//! Layout: a graph holds millions of nodes, so a node is one 128-byte allocation (a test keeps it
//! so): the identity (UID, interned strings, a shared name), one flags byte, and one lock over the
//! owners (inline when there is one) and the dependents (one pointer until there are any). The
//! `retired` mark of the edge protocol is a flag bit, written and read under that lock.

use super::dependents::Dependents;
use super::identity::{Identity, OwnerRef};
use crate::sync::{AtomicU8, Mutex, Ordering};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use triomphe::Arc;

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
    /// Replaced by a clone or removed from the map (see [`super::edges`]). Written and read only
    /// under the node's edges lock; set once.
    pub const RETIRED: u8 = 1 << 5;
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
    /// owners and dependents have their lock, which also orders [`bit::RETIRED`].
    flags: AtomicU8,
    /// Owners and dependents under one lock, which is what makes the edge protocol sound.
    edges: Mutex<Edges>,
}

struct Edges {
    /// Last observed ownerReferences; empty for virtual nodes.
    owners: Owners,
    /// Dependents, by handle identity.
    dependents: Dependents,
}

/// An owners list, inline when it has one entry, as almost every object's has.
enum Owners {
    One(OwnerRef),
    Other(Box<[OwnerRef]>),
}

impl Owners {
    fn as_slice(&self) -> &[OwnerRef] {
        match self {
            Owners::One(r) => std::slice::from_ref(r),
            Owners::Other(refs) => refs,
        }
    }
}

impl From<&[OwnerRef]> for Owners {
    fn from(refs: &[OwnerRef]) -> Self {
        match refs {
            [r] => Owners::One(r.clone()),
            _ => Owners::Other(refs.into()),
        }
    }
}

/// A shared pointer to a node; equality and hashing are by pointer (spec §1.2, "queue identity is
/// the handle").
#[derive(Clone)]
pub struct Handle(Arc<Node>);

impl Handle {
    /// A new observed or virtual node with no dependents.
    pub fn new(identity: Identity, owners: &[OwnerRef], is_virtual: bool) -> Handle {
        let flags = if is_virtual { bit::VIRTUAL } else { 0 };
        Handle::assemble(identity, flags, owners.into(), Dependents::default())
    }

    fn assemble(identity: Identity, flags: u8, owners: Owners, dependents: Dependents) -> Handle {
        Handle(Arc::new(Node {
            identity,
            flags: AtomicU8::new(flags),
            edges: Mutex::new(Edges { owners, dependents }),
        }))
    }

    /// A new handle with `identity` and copies of this node's flags, owners and dependents. The
    /// copy is not in the graph; builders replace a node with [`super::Graph::replace`].
    pub fn clone_with_identity(&self, identity: Identity) -> Handle {
        let edges = self.edges.lock();
        self.clone_with(identity, &edges.dependents, edges.owners.as_slice())
    }

    /// True when both handles point at the same node.
    pub fn ptr_eq(a: &Handle, b: &Handle) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// The node pointer, carrying this handle's strong reference (for the map's slots).
    #[cfg(not(all(test, kube_gc_loom)))] // used by the map's table, which loom models replace
    pub(super) fn into_raw(self) -> *mut Node {
        Arc::into_raw(self.0).cast_mut()
    }

    /// Takes back a strong reference given out by [`Handle::into_raw`].
    ///
    /// # Safety
    /// `p` came from `into_raw` and this reference is taken back once.
    #[cfg(not(all(test, kube_gc_loom)))] // used by the map's table, which loom models replace
    pub(super) unsafe fn from_raw(p: *mut Node) -> Handle {
        // SAFETY: per the contract above.
        Handle(unsafe { Arc::from_raw(p) })
    }

    /// A new handle on the node behind `p`, leaving the reference `p` carries in place.
    ///
    /// # Safety
    /// `p` came from `into_raw` and its reference has not been taken back yet.
    #[cfg(not(all(test, kube_gc_loom)))] // used by the map's table, which loom models replace
    pub(super) unsafe fn clone_from_raw(p: *mut Node) -> Handle {
        // SAFETY: the node is alive, per the contract above.
        Handle(unsafe { triomphe::ArcBorrow::from_ptr(p) }.clone_arc())
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
        std::ptr::hash(&*self.0, state);
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
        self.with_owners(<[OwnerRef]>::to_vec)
    }

    /// Runs `f` over the owners without copying them.
    pub fn with_owners<R>(&self, f: impl FnOnce(&[OwnerRef]) -> R) -> R {
        f(self.edges.lock().owners.as_slice())
    }

    /// Builder only: replaces the owners list.
    pub fn set_owners(&self, owners: &[OwnerRef]) {
        self.edges.lock().owners = owners.into();
    }

    /// A snapshot of the dependents.
    pub fn dependents(&self) -> Vec<Handle> {
        self.edges.lock().dependents.iter().cloned().collect()
    }

    /// Number of dependents.
    pub fn dependents_len(&self) -> usize {
        self.edges.lock().dependents.len()
    }

    /// True once the node was replaced or removed from the graph.
    pub fn is_retired(&self) -> bool {
        let _edges = self.edges.lock();
        self.has(bit::RETIRED)
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
    pub(super) fn with_live_dependents<R>(&self, f: impl FnOnce(&mut Dependents) -> R) -> Option<R> {
        let mut edges = self.edges.lock();
        (!self.has(bit::RETIRED)).then(|| f(&mut edges.dependents))
    }

    /// Retires the node while `f` runs under its edges lock with its dependents.
    pub(super) fn retire<R>(&self, f: impl FnOnce(&mut Dependents) -> R) -> R {
        let mut edges = self.edges.lock();
        self.mark_retired();
        f(&mut edges.dependents)
    }

    /// Retires the node and makes its clone with `identity`, which `publish` receives while the
    /// lock is still held, so that the clone holds every edge written before the mark and edge
    /// writers that find the mark find the clone.
    pub(super) fn retire_into_clone(&self, identity: Identity, publish: impl FnOnce(&Handle)) -> Handle {
        let edges = self.edges.lock();
        self.mark_retired();
        let clone = self.clone_with(identity, &edges.dependents, edges.owners.as_slice());
        publish(&clone);
        clone
    }

    /// A handle on a copy of this node with another identity and not retired.
    fn clone_with(&self, identity: Identity, dependents: &Dependents, owners: &[OwnerRef]) -> Handle {
        let flags = self.flags.load(Ordering::Relaxed) & !bit::RETIRED;
        Handle::assemble(identity, flags, owners.into(), dependents.duplicate())
    }

    fn mark_retired(&self) {
        let before = self.flags.fetch_or(bit::RETIRED, Ordering::Relaxed);
        debug_assert!(
            before & bit::RETIRED == 0,
            "a node is retired once: {:?}",
            self.identity
        );
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

/// Without loom only: loom's lock and atomic are larger than the real ones.
#[cfg(all(test, not(kube_gc_loom)))]
mod tests {
    use super::*;

    #[test]
    fn node_should_fit_the_layout_its_memory_budget_assumes() {
        // The handle's allocation is the node plus one reference count.
        assert!(
            std::mem::size_of::<Node>() + 8 <= 128,
            "{}",
            std::mem::size_of::<Node>()
        );
        assert_eq!(
            std::mem::size_of::<Owners>(),
            std::mem::size_of::<OwnerRef>(),
            "one owner inline"
        );
        assert_eq!(std::mem::size_of::<Dependents>(), 8);
        assert_eq!(std::mem::size_of::<Handle>(), 8);
    }
}
