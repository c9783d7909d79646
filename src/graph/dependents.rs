//! The dependents of one node: a set of handles that costs one pointer when empty.
//!
//! Most objects (pods above all) have no dependents, and most owners have a handful, so the set is
//! nothing until its first dependent, a small vector searched linearly up to [`FEW`] entries, and
//! a hash set beyond, so that an owner of a hundred thousand objects still adds and removes in
//! constant time. It becomes nothing again when its last dependent goes.

use super::Handle;
use std::collections::HashSet;

/// Largest set kept as a vector; a linear scan of this many pointers beats hashing.
const FEW: usize = 16;

/// A set of handles, compared by pointer.
#[derive(Default)]
pub(super) struct Dependents(Option<Box<Set>>);

/// Boxed again when large, so that the small form's allocation is a vector's 24 bytes.
#[derive(Clone)]
#[allow(
    clippy::box_collection,
    reason = "keeps the common, small form's allocation at 24 bytes"
)]
enum Set {
    Few(Vec<Handle>),
    Many(Box<HashSet<Handle, foldhash::fast::FixedState>>),
}

impl Dependents {
    /// No dependents.
    pub(super) const EMPTY: Dependents = Dependents(None);

    /// True when there are none.
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Adds `d`; false if it was there already.
    pub(super) fn insert(&mut self, d: Handle) -> bool {
        let set = self.0.get_or_insert_with(|| Box::new(Set::Few(Vec::new())));
        match set.as_mut() {
            Set::Many(many) => many.insert(d),
            Set::Few(few) if few.contains(&d) => false,
            Set::Few(few) if few.len() < FEW => {
                // Grown one slot at a time: most owners keep a handful of dependents for life.
                few.reserve_exact(1);
                few.push(d);
                true
            }
            Set::Few(few) => {
                let mut many: Box<HashSet<_, _>> = Box::default();
                many.extend(few.drain(..));
                many.insert(d);
                **set = Set::Many(many);
                true
            }
        }
    }

    /// Removes `d`; false if it was not there.
    pub(super) fn remove(&mut self, d: &Handle) -> bool {
        let Some(set) = self.0.as_deref_mut() else {
            return false;
        };
        let (removed, now_empty) = match set {
            Set::Few(few) => match few.iter().position(|x| x == d) {
                Some(i) => {
                    few.swap_remove(i);
                    (true, few.is_empty())
                }
                None => (false, false),
            },
            Set::Many(many) => (many.remove(d), many.is_empty()),
        };
        if now_empty {
            self.0 = None;
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
        match self.0.as_deref() {
            None => 0,
            Some(Set::Few(few)) => few.len(),
            Some(Set::Many(many)) => many.len(),
        }
    }

    /// The dependents, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Handle> {
        let (few, many) = match self.0.as_deref() {
            None => (None, None),
            Some(Set::Few(few)) => (Some(few.iter()), None),
            Some(Set::Many(many)) => (None, Some(many.iter())),
        };
        few.into_iter().flatten().chain(many.into_iter().flatten())
    }

    /// A copy of the set, for a node's clone.
    pub(super) fn duplicate(&self) -> Dependents {
        Dependents(self.0.clone())
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::graph::{Identity, Name, OwnerRefs, Sym, TypeMeta, Uid};

    fn handle(i: usize) -> Handle {
        let identity = Identity {
            type_meta: TypeMeta::new(Sym::new("v1"), Sym::new("Pod")),
            name: Name::new(&format!("p{i}")),
            uid: Uid::parse(&format!("p{i}")),
            namespace: Sym::new("ns"),
        };
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
        assert!(set.0.is_none(), "an emptied set frees its storage");
    }
}
