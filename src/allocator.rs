//! The heap of kube-gc's binaries, and the memory settings of the `kube-gc run` process, made
//! once at its start, and of the loadgen replays that measure it, so that their figures are the
//! ones it shows.
//!
//! # Asking mimalloc by size
//!
//! [`Allocator`] is mimalloc asked for a block by size alone whenever the alignment Rust asks for
//! is one every mimalloc block has anyway (8 bytes), and by size and alignment only beyond. The
//! `mimalloc` crate's allocator asks by size and alignment always, and mimalloc's aligned entry
//! point serves a request from the fast path only when the page's free list already holds a block;
//! otherwise, as on every fresh page while a graph grows, it over-allocates by the alignment and
//! the block lands in the next size class. Measured on the 1M-object stream (P = 1, a counting
//! allocator in loadgen): every 112-byte node took a 128-byte block, and the live heap was
//! 226 bytes per node against 205 asked by size; resident bytes per node fell from 259 to 240.
//!
//! The collector's heap is mimalloc's, which asks the kernel for transparent huge pages on its
//! arenas. A huge page is resident whole from its first touch, so while the graph grows, each
//! arena's partly used 2 MiB regions count in full. Measured with `loadgen sync --preset 1m`
//! (docs/operating.md, "`kube-gc run`"), turning them off lowered the collector's peak resident set from
//! 334–340 MB to 304–310 MB at the same CPU time (4.6–4.9 s); mimalloc's purge delay (1 s by
//! default, tried at 0) made no difference to the peak, so it is left alone. The simulated API
//! server keeps them.

/// Every mimalloc block is aligned to at least this, whatever its size: blocks are multiples of
/// a word in size and pages start on a word.
const BLOCK_ALIGN: usize = std::mem::size_of::<usize>();

/// The global allocator of kube-gc's binaries and benches (module docs).
pub struct Allocator;

// SAFETY: each method hands the request to mimalloc, which returns blocks of at least the size
// asked for, aligned to `BLOCK_ALIGN` by `mi_malloc`/`mi_zalloc`/`mi_realloc` and to the layout's
// alignment by `MiMalloc`, whose methods serve exactly the layouts that need more; `mi_free` and
// `mi_realloc` take any block from either, as mimalloc has one heap behind all its entry points.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= BLOCK_ALIGN {
            // SAFETY: mi_malloc accepts any size.
            unsafe { ffi::mi_malloc(layout.size()) }.cast()
        } else {
            // SAFETY: the caller's contract is the one MiMalloc's requires.
            unsafe { MiMalloc.alloc(layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= BLOCK_ALIGN {
            // SAFETY: mi_zalloc accepts any size.
            unsafe { ffi::mi_zalloc(layout.size()) }.cast()
        } else {
            // SAFETY: as in `alloc`.
            unsafe { MiMalloc.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc.
        unsafe { ffi::mi_free(ptr.cast()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= BLOCK_ALIGN {
            // SAFETY: `ptr` came from this allocator, so from mimalloc, and the new block keeps
            // the word alignment the layout needs.
            unsafe { ffi::mi_realloc(ptr.cast(), new_size) }.cast()
        } else {
            // SAFETY: as in `alloc`.
            unsafe { MiMalloc.realloc(ptr, layout, new_size) }
        }
    }
}

/// Turns transparent huge pages off for this process (Linux), pages already mapped included from
/// their next fault. A kernel that refuses is not an error: the process only keeps more resident.
pub fn no_huge_pages() {
    if let Err(e) = raw::disable_thp() {
        tracing::debug!(error = %e, "transparent huge pages stay on");
    }
}

use libmimalloc_sys as ffi;
use mimalloc::MiMalloc;
use std::alloc::{GlobalAlloc, Layout};

mod raw {
    /// `prctl(PR_SET_THP_DISABLE, 1)`.
    #[cfg(target_os = "linux")]
    pub(super) fn disable_thp() -> std::io::Result<()> {
        // SAFETY: PR_SET_THP_DISABLE takes plain integers and no pointer; it only sets a flag of
        // this process's memory map.
        let done = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if done == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn disable_thp() -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    /// Allocates `count` blocks of `layout` through [`Allocator`] on a fresh thread (a fresh
    /// heap, so fresh pages, where the aligned entry point over-allocates) and returns the
    /// address and usable size of each, after checking its alignment.
    fn blocks(layout: Layout, count: usize) -> Vec<(usize, usize)> {
        std::thread::spawn(move || {
            let blocks: Vec<*mut u8> = (0..count)
                // SAFETY: the layout's size is not zero.
                .map(|_| unsafe { Allocator.alloc(layout) })
                .collect();
            let sizes = blocks
                .iter()
                .map(|&p| {
                    assert!(!p.is_null());
                    assert_eq!(p as usize % layout.align(), 0, "aligned as asked");
                    // SAFETY: `p` is a live mimalloc block.
                    (p as usize, unsafe { ffi::mi_usable_size(p.cast()) })
                })
                .collect();
            for p in blocks {
                // SAFETY: allocated above with `layout`, freed once.
                unsafe { Allocator.dealloc(p, layout) };
            }
            sizes
        })
        .join()
        .expect("the allocating thread ends")
    }

    fn usable_sizes(layout: Layout, count: usize) -> Vec<usize> {
        blocks(layout, count).into_iter().map(|(_, size)| size).collect()
    }

    #[test]
    fn a_block_should_take_its_own_size_class_not_the_next() {
        let layout = Layout::from_size_align(112, 8).expect("a valid layout");
        let sizes = usable_sizes(layout, 10_000);
        assert!(sizes.iter().all(|&s| s == 112), "{:?}", &sizes[..8]);
    }

    #[test]
    fn a_node_should_sit_on_one_cache_line() {
        // A handle's block: the node and its reference count. The map's prefetch of a node
        // loads one line (`graph::raw::table`), so each block must lie within one.
        let size = std::mem::size_of::<crate::graph::Node>() + std::mem::size_of::<usize>();
        let node = Layout::from_size_align(size, 8).expect("a valid layout");
        for (address, usable) in blocks(node, 10_000) {
            assert_eq!(usable, 64, "the 64-byte class");
            assert_eq!(address % 64, 0, "a block at {address:#x} straddles two lines");
        }
    }

    #[test]
    fn over_aligned_requests_should_still_be_aligned() {
        for align in [16, 64, 4096] {
            let layout = Layout::from_size_align(48, align).expect("a valid layout");
            assert!(usable_sizes(layout, 1000).iter().all(|&s| s >= 48));
        }
    }

    #[test]
    fn realloc_should_keep_the_contents() {
        for align in [8, 64] {
            let layout = Layout::from_size_align(24, align).expect("a valid layout");
            // SAFETY: the layout's size is not zero; each block is used within its size and
            // freed once with the layout it has at that point.
            unsafe {
                let p = Allocator.alloc(layout);
                p.copy_from_nonoverlapping(b"twenty-four bytes, kept!".as_ptr(), 24);
                let q = Allocator.realloc(p, layout, 4000);
                assert_eq!(q as usize % align, 0);
                assert_eq!(std::slice::from_raw_parts(q, 24), b"twenty-four bytes, kept!");
                Allocator.dealloc(q, Layout::from_size_align(4000, align).expect("valid"));
            }
        }
    }
}
