//! One shard of the graph's `uid → handle` map: each operation is atomic (linearizable) on its own,
//! and a sequence of them is not.
//!
//! Normally a shard is a [`UidTable`](super::table::UidTable), an open-addressing table with
//! lock-free lookups. In the crate's unit tests built with `--cfg kube_gc_loom` (see [`crate::sync`]) it
//! is a mutex around a `HashMap`, which loom can see into, so that the models in `loom_models.rs`
//! explore every interleaving of the edge protocol's map operations with its node locks. Each
//! method below has both bodies side by side, and each takes the stand-in's lock once, so the
//! stand-in is exactly as atomic as the table per operation and no more.
//!
//! Why a linearizable map is the right model of the table here: the protocol of [`super::edges`]
//! races only single-key operations (lookup, insert, insert-if-absent, remove) on the same UID, and
//! needs of them only that they take effect in one order that every thread agrees on, each read
//! seeing the latest write before it. The table gives that (each write is one atomic store into
//! the key's slot under the shard's writer lock, and a lookup returns a state the shard had during
//! the lookup), and linearizability is local. The stand-in gives that and, through its one lock,
//! also orders operations on different keys of a shard; the models race on one key only, so that
//! extra ordering never hides anything. What it leaves out, the table's reclamation and resizing,
//! is invisible through these operations and has its own tests in `table.rs`. `len` and `handles`
//! are weak snapshots in the table (they may miss concurrent writes), so the models call them only
//! once writers are done.

#[cfg(not(all(test, kube_gc_loom)))]
use super::table::UidTable;
use super::{Handle, Node, Uid};
#[cfg(all(test, kube_gc_loom))]
use crate::sync::Mutex;
#[cfg(all(test, kube_gc_loom))]
use std::collections::HashMap;

/// A set of handles keyed by their node's UID.
pub(super) struct Shard(
    #[cfg(not(all(test, kube_gc_loom)))] UidTable,
    #[cfg(all(test, kube_gc_loom))] Mutex<HashMap<Uid, Handle>>,
);

impl Default for Shard {
    fn default() -> Self {
        #[cfg(not(all(test, kube_gc_loom)))]
        return Shard(UidTable::default());
        #[cfg(all(test, kube_gc_loom))]
        return Shard(Mutex::new(HashMap::new()));
    }
}

impl Shard {
    /// Runs `f` on the node for `uid`, if there is one, without taking a reference to it.
    #[inline]
    pub(super) fn read<R>(&self, uid: &Uid, f: impl FnOnce(&Node) -> R) -> Option<R> {
        #[cfg(not(all(test, kube_gc_loom)))]
        return self.0.read(uid, f);
        // `f` runs after the lock is released, as the table's readers run outside any writer's way.
        #[cfg(all(test, kube_gc_loom))]
        return self.0.lock().get(uid).cloned().map(|h| f(&h));
    }

    /// A handle on the node for `uid`.
    #[inline]
    pub(super) fn get(&self, uid: &Uid) -> Option<Handle> {
        #[cfg(not(all(test, kube_gc_loom)))]
        return self.0.get(uid);
        #[cfg(all(test, kube_gc_loom))]
        return self.0.lock().get(uid).cloned();
    }

    /// Writes `handle` as the one for its UID, replacing any other.
    #[inline]
    pub(super) fn insert(&self, handle: Handle) {
        #[cfg(not(all(test, kube_gc_loom)))]
        self.0.insert(&handle, false);
        #[cfg(all(test, kube_gc_loom))]
        self.0.lock().insert(handle.identity().uid, handle);
    }

    /// Writes `handle` unless there is a handle for its UID already; true if written.
    #[inline]
    pub(super) fn try_insert(&self, handle: &Handle) -> bool {
        #[cfg(not(all(test, kube_gc_loom)))]
        return self.0.insert(handle, true);
        #[cfg(all(test, kube_gc_loom))]
        return match self.0.lock().entry(handle.identity().uid) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(handle.clone());
                true
            }
            std::collections::hash_map::Entry::Occupied(_) => false,
        };
    }

    /// Removes and returns the handle for `uid`.
    #[inline]
    pub(super) fn remove(&self, uid: &Uid) -> Option<Handle> {
        #[cfg(not(all(test, kube_gc_loom)))]
        return self.0.remove(uid);
        #[cfg(all(test, kube_gc_loom))]
        return self.0.lock().remove(uid);
    }

    /// Number of handles.
    pub(super) fn len(&self) -> usize {
        #[cfg(not(all(test, kube_gc_loom)))]
        return self.0.len();
        #[cfg(all(test, kube_gc_loom))]
        return self.0.lock().len();
    }

    /// A snapshot of the handles, in no order.
    pub(super) fn handles(&self) -> Vec<Handle> {
        #[cfg(not(all(test, kube_gc_loom)))]
        return self.0.handles();
        #[cfg(all(test, kube_gc_loom))]
        return self.0.lock().values().cloned().collect();
    }
}
