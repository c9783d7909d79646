//! The dependents of one node: a set of handles that allocates nothing while empty.
//!
//! Most objects (pods above all) have no dependents, and most owners have a handful, so the set is
//! an empty vector until its first dependent, a vector searched linearly up to [`FEW`] entries, and
//! a hash set beyond, so that an owner of a hundred thousand objects still adds and removes in
//! constant time. It is an unallocated vector again when its last dependent goes.
//!
//! The set is held inline, 24 bytes, in the block a node with dependents keeps beside its owners
//! ([`super::raw::links`]): no block of its own between the node and its dependents' pointers.

use super::Handle;
use std::collections::HashSet;

/// Largest set kept as a vector; a linear scan of this many pointers beats hashing.
const FEW: usize = 16;

/// A set of handles, compared by pointer. A clone (for a node's clone) copies the set.
#[derive(Clone)]
#[allow(
    clippy::box_collection,
    reason = "a hash set inline would make every owner's set 40 bytes, not a vector's 24"
)]
pub(super) enum Dependents {
    /// Up to [`FEW`] handles; empty and unallocated for no dependents.
    Few(Vec<Handle>),
    /// More than [`FEW`] handles. Boxed, so that the set stays a vector's 24 bytes.
    Many(Box<HashSet<Handle, foldhash::fast::FixedState>>),
}

const _: () = assert!(size_of::<Dependents>() == 24);

impl Default for Dependents {
    fn default() -> Self {
        Dependents::EMPTY
    }
}

impl Dependents {
    /// No dependents.
    pub(super) const EMPTY: Dependents = Dependents::Few(Vec::new());

    /// True when there are none.
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `d`; false if it was there already.
    pub(super) fn insert(&mut self, d: Handle) -> bool {
        match self {
            Dependents::Many(many) => many.insert(d),
            Dependents::Few(few) if few.contains(&d) => false,
            Dependents::Few(few) if few.len() < FEW => {
                // Grown one slot at a time: most owners keep a handful of dependents for life.
                few.reserve_exact(1);
                few.push(d);
                true
            }
            Dependents::Few(few) => {
                let mut many: Box<HashSet<_, _>> = Box::default();
                many.extend(few.drain(..));
                many.insert(d);
                *self = Dependents::Many(many);
                true
            }
        }
    }

    /// Removes `d`; false if it was not there.
    pub(super) fn remove(&mut self, d: &Handle) -> bool {
        let removed = match self {
            Dependents::Few(few) => few.iter().position(|x| x == d).map(|i| few.swap_remove(i)).is_some(),
            Dependents::Many(many) => many.remove(d),
        };
        if removed && self.is_empty() {
            *self = Dependents::EMPTY;
        }
        removed
    }

    /// Replaces the first member matching `old` with `new`; false if none matched.
    pub(super) fn replace(&mut self, old: impl Fn(&Handle) -> bool, new: Handle) -> bool {
        let Some(found) = self.iter().find(|h| old(h)).cloned() else {
            return false;
        };
        self.remove(&found);
        self.insert(new);
        true
    }

    /// Number of dependents.
    pub(super) fn len(&self) -> usize {
        match self {
            Dependents::Few(few) => few.len(),
            Dependents::Many(many) => many.len(),
        }
    }

    /// The dependents, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Handle> {
        let (few, many) = match self {
            Dependents::Few(few) => (Some(few.iter()), None),
            Dependents::Many(many) => (None, Some(many.iter())),
        };
        few.into_iter().flatten().chain(many.into_iter().flatten())
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::graph::{Identity, Name, OwnerRefs, Sym, TypeMeta, Uid};

    fn handle(i: usize) -> Handle {
        let identity = Identity::new(
            TypeMeta::new(Sym::new("v1"), Sym::new("Pod")),
            Name::new(&format!("p{i}")),
            Uid::parse(&format!("p{i}")),
            Sym::new("ns"),
        );
        Handle::new(identity, OwnerRefs::NONE, false)
    }

    #[test]
    fn dependents_should_behave_as_a_set_across_the_small_and_large_forms() {
        let handles: Vec<Handle> = (0..3 * FEW).map(handle).collect();
        let mut set = Dependents::default();
        for (n, h) in handles.iter().enumerate() {
            assert!(set.insert(h.clone()));
            assert!(!set.insert(h.clone()), "no duplicate");
            assert_eq!(set.len(), n + 1);
        }
        assert!(set.replace(|h| *h == handles[0], handle(999)));
        assert!(!set.replace(|h| *h == handles[0], handle(1000)), "replaced once");
        for h in &handles[1..] {
            assert!(set.remove(h));
            assert!(!set.remove(h));
        }
        assert_eq!(set.len(), 1);
        assert_eq!(
            set.iter().next().map(|h| h.identity().name.to_string()).as_deref(),
            Some("p999")
        );
        let last = set.iter().next().cloned().expect("one left");
        assert!(set.remove(&last));
        assert!(
            matches!(&set, Dependents::Few(few) if few.capacity() == 0),
            "an emptied set frees its storage"
        );
    }
}
