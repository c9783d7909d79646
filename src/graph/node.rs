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
//! Layout: a graph holds millions of nodes, so a node is one 64-byte allocation (a test keeps it
//! so): the identity (UID, one interned scope, a name that is shared or an owner's with an inline
//! suffix), one state word, and one word for the owners and dependents ([`Links`]: the owners
//! list, which siblings share, until the node has dependents, then a pointer to both). The state
//! word holds the flags in its low byte, above them the resourceVersion the object was last
//! observed at, and in its two top bits the lock over the owners and dependents ([`WordLock`]):
//! neither the version nor the lock costs a byte of its own. The `retired` mark of
//! the edge protocol is a flag bit, written and read under that lock.
//!
//! What the builder last observed of an object (its owners, resourceVersion, GC-relevant
//! finalizers and deletion mark) is written by [`Node::observe`] in one critical section of the
//! edges lock, and [`Node::observed`] reads it back in one: a reader never pairs owners with the
//! resourceVersion of another observation. That pairing is what lets the collector send a DELETE
//! or a patch conditioned on the version its decision was made from.

use super::dependents::Dependents;
use super::identity::{Identity, OwnerRef, OwnerRefs};
use super::raw::links::Links;
use super::resource_version::ResourceVersion;
use crate::sync::{Ordering, WordLock};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use triomphe::Arc;

/// Flag bits of [`Node::state`]; the bits above [`bit::FLAGS`] hold the observed resourceVersion.
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
    /// Replaced by a clone or removed from the map (see [`crate::graph::edges`]). Written and read only
    /// under the node's edges lock; set once.
    pub const RETIRED: u8 = 1 << 5;
    /// The last observed object listed a finalizer other than the two of the GC.
    pub const OTHER_FINALIZER: u8 = 1 << 6;
    /// The finalizer bits, which each observation rewrites.
    pub const FINALIZERS: u8 = ORPHAN_FINALIZER | FOREGROUND_FINALIZER | OTHER_FINALIZER;
    /// Number of low bits of the state word that hold flags.
    pub const FLAGS: u32 = 8;
}

/// The finalizers the graph remembers from the last observation of an object: the two that
/// processTransitions and the deletion policy read (spec §3.6, §4.2), and whether there was any
/// other, which is all a finalizer-removing patch needs to know (spec §5 removeFinalizer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObservedFinalizers {
    /// `orphan` was listed.
    pub orphan: bool,
    /// `foregroundDeletion` was listed.
    pub foreground: bool,
    /// Some other finalizer was listed.
    pub other: bool,
}

impl ObservedFinalizers {
    /// Reads the finalizers out of a list.
    pub fn from_list<S: AsRef<str>>(finalizers: &[S]) -> Self {
        let (orphan, foreground) = (crate::api::FINALIZER_ORPHAN, crate::api::FINALIZER_FOREGROUND);
        let has = |f: &str| finalizers.iter().any(|x| x.as_ref() == f);
        ObservedFinalizers {
            orphan: has(orphan),
            foreground: has(foreground),
            other: finalizers
                .iter()
                .any(|x| x.as_ref() != orphan && x.as_ref() != foreground),
        }
    }

    fn bits(self) -> u8 {
        let bit_if = |set: bool, b: u8| if set { b } else { 0 };
        bit_if(self.orphan, bit::ORPHAN_FINALIZER)
            | bit_if(self.foreground, bit::FOREGROUND_FINALIZER)
            | bit_if(self.other, bit::OTHER_FINALIZER)
    }

    fn from_bits(flags: u8) -> Self {
        ObservedFinalizers {
            orphan: flags & bit::ORPHAN_FINALIZER != 0,
            foreground: flags & bit::FOREGROUND_FINALIZER != 0,
            other: flags & bit::OTHER_FINALIZER != 0,
        }
    }
}

/// What one watch event showed of an object besides its identity and owners.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observation {
    /// `metadata.resourceVersion`, when it is a number.
    pub resource_version: ResourceVersion,
    /// `deletionTimestamp` is set.
    pub being_deleted: bool,
    /// The finalizers, as far as the GC tells them apart.
    pub finalizers: ObservedFinalizers,
}

/// An observed node's last observation together with the owners it listed, read in one critical
/// section (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// The observation.
    pub observation: Observation,
    /// `metadata.ownerReferences` at that observation.
    pub owners: Vec<OwnerRef>,
}

/// One object of the graph, observed or virtual.
pub struct Node {
    identity: Identity,
    /// Bits of [`bit`] in the low byte, the observed [`ResourceVersion`] above, and the lock
    /// over the owners and dependents in the word's two top bits: one lock over both is what makes
    /// the edge protocol sound. The flags are read and written with Relaxed because no other
    /// memory is published through them: owners and dependents have the lock, which also orders
    /// [`bit::RETIRED`] and the observation that [`Node::observe`] writes.
    /// Under the lock: the last observed ownerReferences (empty for virtual nodes) and the
    /// dependents, by handle identity, in one word ([`Links`]).
    state: WordLock<Links>,
}

/// A shared pointer to a node; equality and hashing are by pointer (spec §1.2, "queue identity is
/// the handle").
#[derive(Clone)]
pub struct Handle(pub(in crate::graph) Arc<Node>);

impl Handle {
    /// A new observed or virtual node with no dependents.
    pub fn new(identity: Identity, owners: impl Into<OwnerRefs>, is_virtual: bool) -> Handle {
        let flags = if is_virtual { bit::VIRTUAL } else { 0 };
        Handle::assemble(identity, u64::from(flags), owners.into(), Dependents::EMPTY)
    }

    fn assemble(identity: Identity, state: u64, owners: OwnerRefs, dependents: Dependents) -> Handle {
        Handle(Arc::new(Node {
            identity,
            state: WordLock::new(state, Links::new(owners, dependents)),
        }))
    }

    /// A new handle with `identity` and copies of this node's flags, owners and dependents. The
    /// copy is not in the graph; builders replace a node with [`super::GraphWriter::replace`].
    pub fn clone_with_identity(&self, identity: Identity) -> Handle {
        let edges = self.state.lock();
        self.clone_with(identity, edges.dependents(), edges.owners())
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
        self.state.load(Ordering::Relaxed) & u64::from(b) != 0
    }

    fn set(&self, b: u8) -> u8 {
        self.state.fetch_or(u64::from(b), Ordering::Relaxed) as u8
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

    /// The latest observation (beingDeleted as the flag has it). For a node never observed, the
    /// default: no version, no finalizer.
    pub fn observation(&self) -> Observation {
        let state = self.state.load(Ordering::Relaxed);
        let flags = state as u8; // the low byte
        Observation {
            resource_version: ResourceVersion::from_bits(state >> bit::FLAGS),
            being_deleted: flags & bit::BEING_DELETED != 0,
            finalizers: ObservedFinalizers::from_bits(flags),
        }
    }

    /// The latest observation and the owners it listed, as one consistent snapshot; `None` for a
    /// virtual node, or when the observed resourceVersion is unknown.
    pub fn observed(&self) -> Option<Observed> {
        let edges = self.state.lock();
        let observation = self.observation();
        (!self.is_virtual() && observation.resource_version.is_known()).then(|| Observed {
            observation,
            owners: edges.owners().to_vec(),
        })
    }

    /// Clears the virtual flag (spec §1.2 `markObserved`).
    pub(super) fn mark_observed(&self) {
        self.state.fetch_and(!u64::from(bit::VIRTUAL), Ordering::Relaxed);
    }

    /// Sets deletingDependents (and beingDeleted, which it implies).
    pub(super) fn mark_deleting_dependents(&self) {
        self.set(bit::DELETING_DEPENDENTS | bit::BEING_DELETED);
    }

    /// Records an observation, and the owners it listed when they changed, in one
    /// critical section of the edges lock (module docs). beingDeleted is never cleared.
    pub(super) fn observe(&self, owners: Option<&OwnerRefs>, seen: Observation) {
        let mut edges = self.state.lock();
        if let Some(owners) = owners {
            edges.set_owners(owners.clone());
        }
        let deleted = if seen.being_deleted { bit::BEING_DELETED } else { 0 };
        let new = (seen.resource_version.bits() << bit::FLAGS) | u64::from(seen.finalizers.bits() | deleted);
        // The version and the finalizers are replaced; the other flags (virtual,
        // deletingDependents) change outside the lock and are kept, beingDeleted included.
        let kept = u64::from(!bit::FINALIZERS);
        self.state.update(Ordering::Relaxed, |old| (old & kept) | new);
    }

    /// A copy of the owners list.
    pub fn owners(&self) -> Vec<OwnerRef> {
        self.with_owners(<[OwnerRef]>::to_vec)
    }

    /// Runs `f` over the owners without copying them.
    pub fn with_owners<R>(&self, f: impl FnOnce(&[OwnerRef]) -> R) -> R {
        f(self.state.lock().owners())
    }

    /// A snapshot of the dependents.
    pub fn dependents(&self) -> Vec<Handle> {
        self.state.lock().dependents().iter().cloned().collect()
    }

    /// Number of dependents.
    pub fn dependents_len(&self) -> usize {
        self.state.lock().dependents().len()
    }

    /// True for a virtual node that no dependent names any more: a placeholder for nothing, which
    /// the builder drops (`EventType::Unreferenced`).
    pub fn is_unreferenced(&self) -> bool {
        self.is_virtual() && self.dependents_len() == 0
    }

    /// True once the node was replaced or removed from the graph.
    pub fn is_retired(&self) -> bool {
        let _edges = self.state.lock();
        self.has(bit::RETIRED)
    }

    /// Adds a dependent; false (and nothing done) if the node is retired. Builders go through
    /// [`super::GraphWriter::link`], which retries on the live node.
    pub(super) fn add_dependent(&self, d: Handle) -> bool {
        self.with_live_dependents(|set| set.insert(d)).is_some()
    }

    /// Removes a dependent; false (and nothing done) if the node is retired.
    pub(super) fn remove_dependent(&self, d: &Handle) -> bool {
        self.with_live_dependents(|set| set.remove(d)).is_some()
    }

    /// Runs `f` on the dependents unless the node is retired.
    pub(super) fn with_live_dependents<R>(&self, f: impl FnOnce(&mut Dependents) -> R) -> Option<R> {
        let mut edges = self.state.lock();
        (!self.has(bit::RETIRED)).then(|| edges.with_dependents_mut(f))
    }

    /// Retires the node while `f` runs under its edges lock with its dependents.
    pub(super) fn retire<R>(&self, f: impl FnOnce(&mut Dependents) -> R) -> R {
        let mut edges = self.state.lock();
        self.mark_retired();
        edges.with_dependents_mut(f)
    }

    /// Retires the node and makes its clone with `identity`, which `publish` receives while the
    /// lock is still held, so that the clone holds every edge written before the mark and edge
    /// writers that find the mark find the clone.
    pub(super) fn retire_into_clone(&self, identity: Identity, publish: impl FnOnce(&Handle)) -> Handle {
        let edges = self.state.lock();
        self.mark_retired();
        let clone = self.clone_with(identity, edges.dependents(), edges.owners());
        publish(&clone);
        clone
    }

    /// A handle on a copy of this node with another identity and not retired.
    fn clone_with(&self, identity: Identity, dependents: &Dependents, owners: &OwnerRefs) -> Handle {
        let state = self.state.load(Ordering::Relaxed) & !u64::from(bit::RETIRED);
        Handle::assemble(identity, state, owners.clone(), dependents.clone())
    }

    fn mark_retired(&self) {
        let before = self.set(bit::RETIRED);
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
#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn node_should_fit_the_layout_its_memory_budget_assumes() {
        // The handle's allocation is the node plus one reference count: 64 bytes, the
        // allocator's 64-byte class.
        assert!(std::mem::size_of::<Node>() + 8 <= 64, "{}", std::mem::size_of::<Node>());
        assert_eq!(std::mem::size_of::<OwnerRefs>(), 8, "a pointer to a shared list");
        assert_eq!(std::mem::size_of::<OwnerRef>(), 32);
        assert_eq!(std::mem::size_of::<Links>(), 8, "owners and dependents in one word");
        assert_eq!(std::mem::size_of::<Handle>(), 8);
    }

    fn identity(uid: &str) -> Identity {
        use crate::graph::{Name, Sym, TypeMeta, Uid};
        Identity::new(
            TypeMeta::new(Sym::new("v1"), Sym::new("Pod")),
            Name::new("p"),
            Uid::parse(uid),
            Sym::new("ns"),
        )
    }

    fn seen(rv: &str, being_deleted: bool, finalizers: &[&str]) -> Observation {
        Observation {
            resource_version: ResourceVersion::parse(rv),
            being_deleted,
            finalizers: ObservedFinalizers::from_list(finalizers),
        }
    }

    #[test]
    fn observe_should_replace_version_and_finalizers_and_keep_the_other_flags() {
        let node = Handle::new(identity("u"), OwnerRefs::NONE, true);
        node.mark_deleting_dependents();
        node.observe(None, seen("7", true, &["orphan", "example.com/hold"]));
        node.observe(None, seen("9", false, &[]));
        assert!(node.is_virtual(), "observing is not markObserved");
        assert!(node.is_deleting_dependents());
        assert!(node.is_being_deleted(), "beingDeleted is never cleared");
        assert_eq!(node.observation(), seen("9", true, &[]));
    }

    #[test]
    fn observed_should_pair_owners_with_their_version_and_know_nothing_of_virtual_nodes() {
        let node = Handle::new(identity("u"), OwnerRefs::NONE, true);
        node.observe(None, seen("3", false, &[]));
        assert_eq!(node.observed(), None, "a virtual node was never observed");
        node.mark_observed();
        let owner = OwnerRef::new(
            crate::graph::TypeMeta::new(crate::graph::Sym::new("v1"), crate::graph::Sym::new("Pod")),
            crate::graph::Name::new("o"),
            crate::graph::Uid::parse("o"),
            None,
            None,
        );
        node.observe(
            Some(&std::slice::from_ref(&owner).into()),
            seen("4", false, &["foregroundDeletion"]),
        );
        let observed = node.observed().expect("observed at a known version");
        assert_eq!(observed.owners, [owner]);
        assert_eq!(observed.observation, seen("4", false, &["foregroundDeletion"]));
        node.observe(None, seen("not-a-number", false, &[]));
        assert_eq!(node.observed(), None, "an unknown version gives no snapshot");
    }
}
