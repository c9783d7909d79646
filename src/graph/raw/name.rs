//! Object names: one shared, immutable string per name, behind an 8-byte pointer.
//!
//! A name is stored once and shared by everything that holds it: the node, the ownerReferences of
//! its dependents that name it (see [`crate::event`]), the monitor that watches it and any queued
//! identity. Cloning is a reference-count increment; the bytes go with the last holder.
//!
//! Layout: one allocation, an 8-byte header (a 32-bit reference count and the 32-bit length) then
//! the bytes. A graph holds about one name per object; mimalloc serves small blocks in steps of
//! 16 bytes, so a 26-character pod name (34 bytes) takes a 48-byte block, and a ReplicaSet's
//! 19-character name a 32-byte one, where a header of two words took 48.
//!
//! Invariants: the bytes are written once, before the pointer is shared, and never again; the
//! count is the number of `Name`s holding the allocation, and the last one to drop frees it.

use crate::sync::process_wide::{fence, AtomicU32, Ordering};
use std::alloc::{self, Layout};
use std::hash::{Hash, Hasher};
use std::ptr::NonNull;

/// The allocation's header; the name's bytes follow it.
#[repr(C)]
struct Header {
    count: AtomicU32,
    len: u32,
}

/// Holders beyond which a clone aborts instead of risking the count's overflow, as `Arc` does.
const MAX_COUNT: u32 = u32::MAX / 2;

/// A shared object name.
pub struct Name(NonNull<u8>);

// SAFETY: the bytes are immutable once shared and the count is atomic, so a `Name` may move to and
// be shared with any thread, as `Arc<str>` may.
unsafe impl Send for Name {}
// SAFETY: as above.
unsafe impl Sync for Name {}

impl Name {
    /// A name holding a copy of `s`.
    pub fn new(s: &str) -> Name {
        let len = u32::try_from(s.len()).expect("an object name is shorter than 4 GiB");
        let layout = Self::layout(s.len());
        // SAFETY: the layout is never zero-sized (it has the header).
        let Some(p) = NonNull::new(unsafe { alloc::alloc(layout) }) else {
            alloc::handle_alloc_error(layout)
        };
        // SAFETY: the block is `layout`'s size, aligned for `Header`; the header fills its start
        // and the bytes the rest, and nothing else has the pointer yet.
        unsafe {
            p.cast::<Header>().write(Header {
                count: AtomicU32::new(1),
                len,
            });
            std::ptr::copy_nonoverlapping(s.as_ptr(), p.as_ptr().add(size_of::<Header>()), s.len());
        }
        Name(p)
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(size_of::<Header>() + len, align_of::<Header>()).expect("a name's size fits in memory")
    }

    fn header(&self) -> &Header {
        // SAFETY: the allocation lives while this `Name` holds a count, and starts with the header.
        unsafe { self.0.cast::<Header>().as_ref() }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        let len = self.header().len as usize;
        // SAFETY: `len` bytes copied from a `&str` in `Name::new` follow the header, never
        // written again, and alive while `self` is: valid UTF-8 for the borrow's life.
        unsafe {
            let bytes = std::slice::from_raw_parts(self.0.as_ptr().add(size_of::<Header>()), len);
            std::str::from_utf8_unchecked(bytes)
        }
    }

    /// True when both hold the same allocation.
    pub fn ptr_eq(a: &Name, b: &Name) -> bool {
        a.0 == b.0
    }
}

impl Clone for Name {
    fn clone(&self) -> Self {
        // Relaxed, as `Arc`: a new holder is made from an existing one, which keeps the bytes
        // alive and already sees them.
        if self.header().count.fetch_add(1, Ordering::Relaxed) > MAX_COUNT {
            std::process::abort();
        }
        Name(self.0)
    }
}

impl Drop for Name {
    fn drop(&mut self) {
        // Release, then Acquire by the last holder, as `Arc`: every holder's reads of the bytes
        // happen before they are freed.
        if self.header().count.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        let layout = Self::layout(self.header().len as usize);
        // SAFETY: this was the last holder, so nothing else can reach the block; it was allocated
        // in `Name::new` with this layout.
        unsafe { alloc::dealloc(self.0.as_ptr(), layout) };
    }
}

crate::graph::string_view!(Name);

impl PartialEq for Name {
    fn eq(&self, other: &Self) -> bool {
        Name::ptr_eq(self, other) || self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

/// By text, as equality is.
impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_should_read_back_what_it_was_made_from() {
        for s in ["", "web-7d9f8c6b5-x2x9z", "ünïcode", &"n".repeat(253)] {
            let name = Name::new(s);
            assert_eq!(name.as_str(), s);
            assert_eq!(name.clone(), name);
            assert!(Name::ptr_eq(&name.clone(), &name));
        }
        assert_eq!(std::mem::size_of::<Name>(), 8);
        assert_eq!(std::mem::size_of::<Option<Name>>(), 8);
    }

    #[test]
    fn a_26_character_name_should_take_a_block_of_34_bytes() {
        assert_eq!(Name::layout(26).size(), 34);
    }

    #[test]
    fn clones_dropped_on_other_threads_should_free_the_name_once() {
        let name = Name::new("shared-by-threads");
        std::thread::scope(|scope| {
            for _ in 0..4 {
                let held: Vec<Name> = (0..50).map(|_| name.clone()).collect();
                scope.spawn(move || {
                    assert!(held.iter().all(|n| n == "shared-by-threads"));
                    drop(held);
                });
            }
        });
        assert_eq!(name.header().count.load(Ordering::Relaxed), 1);
        assert_eq!(name, "shared-by-threads");
    }
}
