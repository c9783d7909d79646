//! Where a builder replay's bytes go: the live heap by mimalloc block size, counted by a global
//! allocator that wraps kube-gc's. Built only with the `heap-profile` feature, because counting
//! costs two atomic additions on every allocation and free, which the timed figures must not pay:
//!
//! ```sh
//! cargo run --release -p loadgen --features heap-profile -- replay STREAM --mode builder --partitions 1
//! ```
//!
//! The measuring run (a process's first, see [`crate::replay::builder::Replay::run`]) then prints, after
//! its resident bytes, the blocks its graph holds: how many of each size class, and their bytes
//! per node. The resident figure less this live one is what the allocator keeps in partly used
//! pages.
//!
//! Invariant: a block is counted under the size mimalloc gave it (`mi_usable_size`), on
//! allocation and free alike, so a class's count is its live blocks whatever sizes were asked.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicI64, Ordering};

/// Block sizes are counted per 16 bytes, mimalloc's granularity for small blocks, up to this.
const SMALL: usize = 1024;

/// Blocks of each small size class, by usable size / 16.
static SMALL_BLOCKS: [AtomicI64; SMALL / 16] = [const { AtomicI64::new(0) }; SMALL / 16];

/// Bytes in blocks of [`SMALL`] bytes or more (the map's arrays, long dependents lists).
static LARGE_BYTES: AtomicI64 = AtomicI64::new(0);

/// kube-gc's allocator, counting (module docs).
pub struct Counting;

fn count(block: *mut u8, sign: i64) {
    if block.is_null() {
        return;
    }
    // SAFETY: `block` is a live block of kube-gc's allocator, which is mimalloc's.
    let usable = unsafe { libmimalloc_sys::mi_usable_size(block.cast()) };
    match SMALL_BLOCKS.get(usable / 16) {
        Some(blocks) => blocks.fetch_add(sign, Ordering::Relaxed),
        None => LARGE_BYTES.fetch_add(sign * usable as i64, Ordering::Relaxed),
    };
}

// SAFETY: every call goes to kube-gc's allocator with the caller's own arguments; counting reads
// only the usable size of a live block.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let block = unsafe { kube_gc::allocator::Allocator.alloc(layout) };
        count(block, 1);
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let block = unsafe { kube_gc::allocator::Allocator.alloc_zeroed(layout) };
        count(block, 1);
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        count(block, -1);
        // SAFETY: as in `alloc`.
        unsafe { kube_gc::allocator::Allocator.dealloc(block, layout) }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(block, -1);
        // SAFETY: as in `alloc`.
        let moved = unsafe { kube_gc::allocator::Allocator.realloc(block, layout, new_size) };
        // A failed realloc leaves the old block live.
        count(if moved.is_null() { block } else { moved }, 1);
        moved
    }
}

/// The live heap at one moment: blocks by small size class, and bytes in large blocks.
pub struct Snapshot {
    small: Vec<i64>,
    large_bytes: i64,
}

impl Snapshot {
    /// The heap now.
    pub fn now() -> Snapshot {
        Snapshot {
            small: SMALL_BLOCKS.iter().map(|b| b.load(Ordering::Relaxed)).collect(),
            large_bytes: LARGE_BYTES.load(Ordering::Relaxed),
        }
    }

    /// What the heap holds now beyond `before`, per node of a `nodes`-node graph, as lines of
    /// text: one per size class that grew by at least one block in a thousand nodes.
    pub fn growth_since(before: &Snapshot, nodes: usize) -> String {
        let now = Snapshot::now();
        let per_node = |bytes: i64| bytes as f64 / nodes.max(1) as f64;
        let mut lines = String::from("live heap by block size (heap-profile):\n");
        let mut total = 0;
        for (class, (n, b)) in now.small.iter().zip(&before.small).enumerate() {
            let (blocks, size) = (n - b, class as i64 * 16);
            total += blocks * size;
            if blocks.unsigned_abs() as usize > nodes / 1000 {
                lines += &format!(
                    "  {size:>5} B: {blocks:>10} blocks, {:>6.1} B/node\n",
                    per_node(blocks * size)
                );
            }
        }
        let large = now.large_bytes - before.large_bytes;
        lines += &format!("  ≥ {SMALL} B: {:>6.1} B/node\n", per_node(large));
        lines += &format!("  total: {:.1} B/node", per_node(total + large));
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_should_be_counted_in_their_size_class_and_shown_per_node() {
        let before = Snapshot::now();
        // SAFETY: blocks from mimalloc, counted as the allocator counts them, then freed.
        let blocks: Vec<*mut u8> = (0..4000)
            .map(|_| unsafe { libmimalloc_sys::mi_malloc(72) }.cast())
            .collect();
        blocks.iter().for_each(|&b| count(b, 1));
        // SAFETY: as above.
        let large = unsafe { libmimalloc_sys::mi_malloc(4096) }.cast::<u8>();
        count(large, 1);
        let shown = Snapshot::growth_since(&before, 1000);
        assert!(shown.contains("   80 B:       4000 blocks,  320.0 B/node"), "{shown}");
        assert!(shown.contains("≥ 1024 B:    4.1 B/node"), "{shown}");
        for b in blocks.into_iter().chain([large]) {
            count(b, -1);
            // SAFETY: each block was allocated above and is freed once.
            unsafe { libmimalloc_sys::mi_free(b.cast()) };
        }
        let after = Snapshot::growth_since(&before, 1000);
        assert!(after.ends_with("total: 0.0 B/node"), "{after}");
    }
}
