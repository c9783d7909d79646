//! One shard of the graph's `uid → handle` map: each operation is atomic (linearizable) on its own,
//! and a sequence of them is not.
//!
//! Normally a shard is a papaya map. In the crate's unit tests built with `--cfg loom` (see
//! [`crate::sync`]) it is a mutex around a `HashMap`, which loom can see into, so that the models
//! in `loom_models.rs` explore every interleaving of the edge protocol's map operations with its
//! node locks. Each method below has both bodies side by side, and each takes the stand-in's lock
//! once, so the stand-in is exactly as atomic as papaya per operation and no more. The hot
//! methods are `#[inline]`: the graph's lookups, inserts and removes then compile to the same code
//! as when they called papaya directly.
//!
//! Why a linearizable map is the right model of papaya here: the protocol of [`super::edges`]
//! races only single-key operations (lookup, insert, insert-if-absent, remove) on the same UID, and
//! needs of them only that they take effect in one order that every thread agrees on, each read
//! seeing the latest write before it. papaya gives that per key (a read reflects, and
//! synchronizes with, the most recent write to its key; `try_insert` and `remove` are each one
//! compare-and-swap on the key's entry), and linearizability is local: a map whose every key is
//! linearizable is linearizable for single-key operations. The stand-in gives that and, through
//! its one lock, also orders operations on different keys of a shard; the models race on one key
//! only, so that extra ordering never hides anything. What it leaves out, papaya's reclamation and
//! resizing, is invisible through these operations. `len` and `handles` are weak snapshots in
//! papaya (they may miss concurrent writes), so the models call them only once writers are done.
//!
//! One property is papaya's implementation rather than its documentation: [`Shard::insert`] over
//! an existing UID must replace the handle, key included, because the handle *is* papaya's key
//! here. papaya 0.2's `insert` swaps in a new entry holding both, although its docs say, as std's
//! do, that the key is not updated. A unit test below pins it, since [`super::Graph::replace`]
//! and every edge writer's retry depend on it.

use super::{Handle, Uid};
#[cfg(all(test, loom))]
use crate::sync::Mutex;
#[cfg(all(test, loom))]
use std::collections::HashMap;

/// A set of handles keyed by their node's UID.
pub(super) struct Shard(
    /// Each entry is one pointer: the map's per-entry allocation is 8 bytes instead of 24 with the
    /// UID beside it.
    #[cfg(not(all(test, loom)))]
    papaya::HashMap<Entry, (), foldhash::fast::RandomState>,
    #[cfg(all(test, loom))] Mutex<HashMap<Uid, Handle>>,
);

impl Default for Shard {
    fn default() -> Self {
        #[cfg(not(all(test, loom)))]
        return Shard(
            papaya::HashMap::builder()
                .hasher(foldhash::fast::RandomState::default())
                .resize_mode(papaya::ResizeMode::Blocking)
                .build(),
        );
        #[cfg(all(test, loom))]
        return Shard(Mutex::new(HashMap::new()));
    }
}

impl Shard {
    /// Runs `f` on the handle for `uid`, if there is one.
    #[inline]
    pub(super) fn read<R>(&self, uid: &Uid, f: impl FnOnce(&Handle) -> R) -> Option<R> {
        #[cfg(not(all(test, loom)))]
        return self.0.pin().get_key_value(uid).map(|(e, _)| f(&e.0));
        // `f` runs after the lock is released, as papaya's readers run outside any writer's way.
        #[cfg(all(test, loom))]
        return self.0.lock().get(uid).cloned().map(|h| f(&h));
    }

    /// Writes `handle` as the one for its UID, replacing any other.
    #[inline]
    pub(super) fn insert(&self, handle: Handle) {
        #[cfg(not(all(test, loom)))]
        self.0.pin().insert(Entry(handle), ());
        #[cfg(all(test, loom))]
        self.0.lock().insert(handle.identity().uid, handle);
    }

    /// Writes `handle` unless there is a handle for its UID already; true if written.
    #[inline]
    pub(super) fn try_insert(&self, handle: &Handle) -> bool {
        #[cfg(not(all(test, loom)))]
        return self.0.pin().try_insert(Entry(handle.clone()), ()).is_ok();
        #[cfg(all(test, loom))]
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
        #[cfg(not(all(test, loom)))]
        return self.0.pin().remove_entry(uid).map(|(e, _)| e.0.clone());
        #[cfg(all(test, loom))]
        return self.0.lock().remove(uid);
    }

    /// Number of handles.
    pub(super) fn len(&self) -> usize {
        #[cfg(not(all(test, loom)))]
        return self.0.len();
        #[cfg(all(test, loom))]
        return self.0.lock().len();
    }

    /// A snapshot of the handles, in no order.
    pub(super) fn handles(&self) -> Vec<Handle> {
        #[cfg(not(all(test, loom)))]
        return self.0.pin().keys().map(|e| e.0.clone()).collect();
        #[cfg(all(test, loom))]
        return self.0.lock().values().cloned().collect();
    }
}

/// A handle as a map key: hashed and compared by its node's UID, which never changes.
#[cfg(not(all(test, loom)))]
struct Entry(Handle);

#[cfg(not(all(test, loom)))]
impl std::hash::Hash for Entry {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.identity().uid.hash(state);
    }
}

#[cfg(not(all(test, loom)))]
impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.0.identity().uid == other.0.identity().uid
    }
}

#[cfg(not(all(test, loom)))]
impl Eq for Entry {}

/// Lookups by UID; consistent with the `Hash` and `Eq` above, as `Borrow` requires.
#[cfg(not(all(test, loom)))]
impl std::borrow::Borrow<Uid> for Entry {
    fn borrow(&self) -> &Uid {
        &self.0.identity().uid
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::graph::{Identity, Name, Sym};

    fn node() -> Handle {
        let identity = Identity {
            api_version: Sym::new("v1"),
            kind: Sym::new("ConfigMap"),
            name: Name::new("o"),
            uid: Uid::parse("o"),
            namespace: Sym::new("ns"),
        };
        Handle::new(identity, Vec::new(), false)
    }

    #[test]
    fn insert_should_replace_the_handle_itself_not_only_the_value() {
        let (shard, old, new) = (Shard::default(), node(), node());
        shard.insert(old.clone());
        shard.insert(new.clone());
        assert_eq!(
            shard.read(&Uid::parse("o"), Handle::clone),
            Some(new),
            "the old handle is still the key"
        );
        assert_eq!(shard.len(), 1);
        assert!(!shard.try_insert(&old), "a handle for the UID is there");
    }
}
