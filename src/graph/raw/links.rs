//! A node's owners and dependents in one word.
//!
//! Most nodes of a large graph are pods: they list an owner and have no dependent. So the word is
//! the owners list itself ([`OwnerRefs`], one pointer or null) until the node's first dependent;
//! from then on it points, tagged in its low bit, to a block that holds both the owners and the
//! [`Dependents`], and when the last dependent goes it is the owners alone again. A node thus
//! spends one word on its edges where two fields took two, which brings it to the 64-byte block
//! class; a node with dependents pays a 32-byte block (its owners and the set of
//! [`Dependents`] inline), beside the set's own vector.
//!
//! Invariants:
//! - tag 0: the word is an `OwnerRefs`, bit for bit (the type is `repr(transparent)` over a
//!   nullable pointer whose blocks are word-aligned, so its low bit is 0);
//! - tag 1: the word, untagged, is a `Box<Both>` whose dependents are not empty, except inside
//!   [`Links::with_dependents_mut`], which restores the invariant before it returns;
//! - a `Links` owns what its word points to, exactly once.
//!
//! A `Links` is reached only under its node's edges lock (see [`crate::graph::node`]), so it
//! needs no atomics: `&mut` is exclusive, and `&` readers hold the lock too.

use crate::graph::dependents::Dependents;
use crate::graph::OwnerRefs;

/// The low bit that marks a word pointing to [`Both`].
const BOTH: usize = 1;

/// The owners and dependents of a node that has dependents.
struct Both {
    owners: OwnerRefs,
    dependents: Dependents,
}

/// What a node without dependents lends as its dependents.
static NO_DEPENDENTS: Dependents = Dependents::EMPTY;

/// A node's owners and dependents (module docs).
pub(in crate::graph) struct Links(*mut u8);

const _: () = assert!(size_of::<OwnerRefs>() == size_of::<*mut u8>());
const _: () = assert!(align_of::<Both>() > BOTH);

// SAFETY: a `Links` owns an `OwnerRefs` or a `Box<Both>`, both `Send` and `Sync`, and gives access
// to them only through `&self` and `&mut self`, as a struct holding them would.
unsafe impl Send for Links {}
// SAFETY: as above.
unsafe impl Sync for Links {}

impl Links {
    /// Links holding `owners` and `dependents`.
    pub(in crate::graph) fn new(owners: OwnerRefs, dependents: Dependents) -> Links {
        if dependents.is_empty() {
            return Links::of_owners(owners);
        }
        let both = Box::into_raw(Box::new(Both { owners, dependents }));
        Links(both.map_addr(|a| a | BOTH).cast())
    }

    fn of_owners(owners: OwnerRefs) -> Links {
        // SAFETY: `OwnerRefs` is a `repr(transparent)` nullable pointer, the same size as the
        // word (checked above); the word takes over its ownership (tag 0).
        Links(unsafe { std::mem::transmute::<OwnerRefs, *mut u8>(owners) })
    }

    /// The block's pointer, when the word is tagged (tag 1): an owned `Box<Both>`'s, alive while
    /// `self` is and reached only through `self`.
    fn both_ptr(&self) -> Option<*mut Both> {
        (self.0.addr() & BOTH != 0).then(|| self.0.map_addr(|a| a & !BOTH).cast::<Both>())
    }

    fn both(&self) -> Option<&Both> {
        // SAFETY: `both_ptr` is a live `Box<Both>` owned by `self`, borrowed as `self` is.
        self.both_ptr().map(|both| unsafe { &*both })
    }

    /// The owners.
    pub(in crate::graph) fn owners(&self) -> &OwnerRefs {
        match self.both() {
            Some(both) => &both.owners,
            // SAFETY: an untagged word is an `OwnerRefs` bit for bit (tag 0), owned by `self`.
            None => unsafe { &*std::ptr::from_ref(&self.0).cast::<OwnerRefs>() },
        }
    }

    /// The dependents.
    pub(in crate::graph) fn dependents(&self) -> &Dependents {
        self.both().map_or(&NO_DEPENDENTS, |both| &both.dependents)
    }

    fn both_mut(&mut self) -> Option<&mut Both> {
        // SAFETY: as in `both`, and `&mut self` makes the access exclusive.
        self.both_ptr().map(|both| unsafe { &mut *both })
    }

    /// Replaces the owners.
    pub(in crate::graph) fn set_owners(&mut self, owners: OwnerRefs) {
        match self.both_mut() {
            Some(both) => both.owners = owners,
            None => *self = Links::of_owners(owners),
        }
    }

    /// Runs `f` on the dependents, which may add or remove any. The shared block is made when
    /// the first dependent arrives and freed when the last goes, and not otherwise.
    pub(in crate::graph) fn with_dependents_mut<R>(&mut self, f: impl FnOnce(&mut Dependents) -> R) -> R {
        if let Some(both) = self.both_mut() {
            let result = f(&mut both.dependents);
            if both.dependents.is_empty() {
                drop(self.take_dependents());
            }
            return result;
        }
        let mut dependents = Dependents::EMPTY;
        let result = f(&mut dependents);
        if !dependents.is_empty() {
            let owners = self.take_owners();
            *self = Links::new(owners, dependents);
        }
        result
    }

    /// Takes the dependents out, leaving the owners alone in the word.
    fn take_dependents(&mut self) -> Dependents {
        let Some(both) = self.both_ptr() else {
            return Dependents::EMPTY;
        };
        // SAFETY: `both_ptr` is an owned `Box<Both>`; the word takes over its owners at once, so
        // the box is freed once and its owners owned once.
        let Both { owners, dependents } = *unsafe { Box::from_raw(both) };
        self.0 = std::mem::ManuallyDrop::new(Links::of_owners(owners)).0;
        dependents
    }

    /// Takes the owners out of a word that holds them alone, leaving no owners.
    fn take_owners(&mut self) -> OwnerRefs {
        debug_assert_eq!(self.0.addr() & BOTH, 0, "the dependents were taken first");
        let word = std::mem::replace(&mut self.0, std::ptr::null_mut());
        // SAFETY: an untagged word is an `OwnerRefs` (tag 0), whose ownership moves out with it;
        // the null left behind is the empty list.
        unsafe { std::mem::transmute::<*mut u8, OwnerRefs>(word) }
    }
}

impl Drop for Links {
    fn drop(&mut self) {
        drop(self.take_dependents());
        drop(self.take_owners());
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::graph::{Handle, Identity, Name, OwnerRef, Sym, TypeMeta, Uid};

    fn handle(name: &str) -> Handle {
        let identity = Identity::new(
            TypeMeta::new(Sym::new("v1"), Sym::new("Pod")),
            Name::new(name),
            Uid::parse(name),
            Sym::new("ns"),
        );
        Handle::new(identity, OwnerRefs::NONE, false)
    }

    fn owners(name: &str) -> OwnerRefs {
        let type_meta = TypeMeta::new(Sym::new("apps/v1"), Sym::new("ReplicaSet"));
        std::iter::once(OwnerRef::new(
            type_meta,
            Name::new(name),
            Uid::parse(name),
            Some(true),
            None,
        ))
        .collect()
    }

    #[test]
    fn links_should_keep_owners_and_dependents_through_every_change_of_form() {
        assert_eq!(size_of::<Links>(), 8);
        let (a, b) = (handle("a"), handle("b"));
        let mut links = Links::new(owners("rs-1"), Dependents::EMPTY);
        assert_eq!(links.owners(), &owners("rs-1"));
        assert_eq!(links.dependents().len(), 0);
        assert!(links.with_dependents_mut(|set| set.insert(a.clone())));
        assert!(links.with_dependents_mut(|set| set.insert(b.clone())));
        assert_eq!(
            links.owners(),
            &owners("rs-1"),
            "the owners moved into the shared block"
        );
        links.set_owners(owners("rs-2"));
        assert_eq!(links.owners(), &owners("rs-2"));
        assert_eq!(links.dependents().len(), 2, "replacing the owners keeps the dependents");
        assert!(links.with_dependents_mut(|set| set.remove(&a) && set.remove(&b)));
        assert_eq!(links.0.addr() & BOTH, 0, "no dependents: the owners alone again");
        assert_eq!(links.owners(), &owners("rs-2"));
        links.set_owners(OwnerRefs::NONE);
        assert!(links.owners().is_empty());
        assert!(links.0.is_null(), "no owners and no dependents: nothing held");
    }

    #[test]
    fn dropping_links_should_release_every_reference_they_hold() {
        let (dependent, list) = (handle("d"), owners("rs"));
        let links = Links::new(list.clone(), {
            let mut set = Dependents::EMPTY;
            set.insert(dependent.clone());
            set
        });
        drop(links);
        assert_eq!(triomphe::Arc::strong_count(&dependent.0), 1);
        assert_eq!(list.strong_count(), 1);
    }
}
