//! Object names: one shared, immutable string per name, behind an 8-byte pointer.
//!
//! A name is stored once and shared by everything that holds it: the node, the ownerReferences of
//! its dependents that name it (see [`crate::event`]), the monitor that watches it and any queued
//! identity. Cloning is a reference-count increment; the bytes go with the last holder.
//!
//! Layout: one allocation, a 3-byte header (a 16-bit reference count and the length in one byte)
//! then the bytes. A graph holds about one name per object, and mimalloc serves small blocks in
//! steps of 16 bytes, so every byte of header decides which names fit a block: a pod's name of 25
//! to 29 characters takes a 32-byte block behind this header, where an 8-byte one put the longer
//! half of them in 48-byte blocks. A name of [`LONG`] bytes or more writes its length in 4 more
//! bytes after the header's length byte.
//!
//! A 16-bit count could overflow where a 32-bit one would not; a clone that finds [`MAX_SHARED`]
//! holders makes a copy of the name instead. Names compare and hash by text, so a copy is the same
//! name: sharing saves memory and is never part of the meaning.
//!
//! Invariants: the bytes are written once, before the pointer is shared, and never again; the
//! count is the number of `Name`s holding the allocation, never above `MAX_SHARED` plus the number
//! of clones under way, and the last holder to drop frees it.

use crate::sync::process_wide::{fence, AtomicU16, Ordering};
use std::alloc::{self, Layout};
use std::hash::{Hash, Hasher};
use std::ptr::NonNull;

/// Offset of the length byte, after the 16-bit count.
const LEN_AT: usize = 2;
/// Offset of a short name's bytes.
const SHORT_TEXT_AT: usize = 3;
/// Length byte of a long name, whose length follows as 4 bytes, little-endian.
const LONG: u8 = u8::MAX;
/// Offset of a long name's bytes.
const LONG_TEXT_AT: usize = SHORT_TEXT_AT + 4;

/// Holders beyond which a clone makes a copy (module docs). Half the count's range: the clones
/// between their increment and their check are a few per thread, far fewer than the other half.
const MAX_SHARED: u16 = u16::MAX / 2;

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
        let text_at = Self::text_at(s.len());
        // SAFETY: the block is `layout`'s size, aligned for the count; the header fills its start
        // and the bytes the rest, and nothing else has the pointer yet.
        unsafe {
            p.cast::<AtomicU16>().write(AtomicU16::new(1));
            match u8::try_from(len) {
                Ok(short) if short < LONG => p.add(LEN_AT).write(short),
                _ => {
                    p.add(LEN_AT).write(LONG);
                    std::ptr::copy_nonoverlapping(len.to_le_bytes().as_ptr(), p.as_ptr().add(SHORT_TEXT_AT), 4);
                }
            }
            std::ptr::copy_nonoverlapping(s.as_ptr(), p.as_ptr().add(text_at), s.len());
        }
        Name(p)
    }

    fn text_at(len: usize) -> usize {
        if len < usize::from(LONG) {
            SHORT_TEXT_AT
        } else {
            LONG_TEXT_AT
        }
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(Self::text_at(len) + len, align_of::<AtomicU16>())
            .expect("a name's size fits in memory")
    }

    fn count(&self) -> &AtomicU16 {
        // SAFETY: the allocation lives while this `Name` holds a count, and starts with it.
        unsafe { self.0.cast::<AtomicU16>().as_ref() }
    }

    fn len(&self) -> usize {
        // SAFETY: the header, written before the pointer was shared and never again, is alive
        // while `self` is; a long name's 4 length bytes follow its length byte.
        unsafe {
            match self.0.add(LEN_AT).read() {
                LONG => {
                    let mut bytes = [0; 4];
                    std::ptr::copy_nonoverlapping(self.0.as_ptr().add(SHORT_TEXT_AT), bytes.as_mut_ptr(), 4);
                    u32::from_le_bytes(bytes) as usize
                }
                short => usize::from(short),
            }
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        let len = self.len();
        // SAFETY: `len` bytes copied from a `&str` in `Name::new` follow the header, never
        // written again, and alive while `self` is: valid UTF-8 for the borrow's life.
        unsafe {
            let bytes = std::slice::from_raw_parts(self.0.as_ptr().add(Self::text_at(len)), len);
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
        if self.count().fetch_add(1, Ordering::Relaxed) < MAX_SHARED {
            return Name(self.0);
        }
        // Taking back the increment cannot free the block: `self` still holds it.
        self.count().fetch_sub(1, Ordering::Relaxed);
        Name::new(self.as_str())
    }
}

impl Drop for Name {
    fn drop(&mut self) {
        // Release, then Acquire by the last holder, as `Arc`: every holder's reads of the bytes
        // happen before they are freed.
        if self.count().fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        let layout = Self::layout(self.len());
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
    fn a_pod_name_of_29_characters_should_fit_a_32_byte_block() {
        assert_eq!(Name::layout(29).size(), 32);
        assert_eq!(Name::layout(254).size(), 257, "the longest short name");
        assert_eq!(Name::layout(255).size(), 262, "the shortest long one");
    }

    #[test]
    fn long_names_should_read_back_whole() {
        for len in [254, 255, 256, 70_000] {
            let s = "x".repeat(len);
            assert_eq!(Name::new(&s).as_str(), s);
        }
    }

    #[test]
    fn a_name_held_more_often_than_its_count_allows_should_be_copied_and_still_equal() {
        let name = Name::new("popular");
        let held: Vec<Name> = (0..usize::from(MAX_SHARED) + 10).map(|_| name.clone()).collect();
        assert!(held[..usize::from(MAX_SHARED) - 1]
            .iter()
            .all(|n| Name::ptr_eq(n, &name)));
        let copy = held.last().unwrap();
        assert!(!Name::ptr_eq(copy, &name), "past the limit, a clone is a copy");
        assert_eq!(*copy, name);
        assert_eq!(name.count().load(Ordering::Relaxed), MAX_SHARED);
        drop(held);
        assert_eq!(name.count().load(Ordering::Relaxed), 1);
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
        assert_eq!(name.count().load(Ordering::Relaxed), 1);
        assert_eq!(name, "shared-by-threads");
    }
}
