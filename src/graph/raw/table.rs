//! One shard of the graph's `uid → handle` map: an open-addressing table whose lookups take no
//! lock, built to hold millions of handles in little memory.
//!
//! Layout: a slot is one word, the node's pointer with 19 bits of the UID's hash in the bits an
//! address leaves unused: the 3 low bits that the node's alignment keeps zero and the 16 high bits
//! above a user-space address (below 2^48 on x86-64 and AArch64 Linux, checked when a slot is
//! written). Eight slots fill a cache line; linear probing, at most 3/4 full counting removed
//! slots and at least 3/8 full after a resize. A slot owns one strong reference to its node
//! (`Handle::into_raw`). The fragment is bits 6..25 of the UID's [`Uid::hash64`] (bits 0..6 pick
//! the shard), and a lookup starts at the slot those same bits give, so a resize moves the entries
//! of a table of up to 2^19 slots (about 25 million objects over the 64 shards) without reading a
//! single node; beyond, it reads each node's UID for the bits its slot lacks.
//!
//! Concurrency. Writers (builders) hold the shard's lock; readers take no lock. Readers are
//! protected by deferred reclamation ([`super::reclaim`]): a writer that takes a node out of a
//! slot (remove, replace) or a table out of service (resize) retires it, and it is released only
//! once every reader that could have loaded it has dropped its guard. A writer fills a slot with
//! one Release store of the tagged pointer, a reader loads it with Acquire: the fragment a reader
//! compares always belongs to the pointer beside it, and every match is confirmed on the node's own
//! UID, so a lookup never returns another object's node.
//!
//! Linearizability: each operation is atomic on its own (a sequence of them is not). A lookup
//! returns a state the shard had at some moment during the lookup. Slot writes are single atomic
//! stores, and a resize copies the table under the lock and never writes the old table again, so a
//! reader still in the old table sees the shard as it was at the swap. The edge protocol of
//! [`crate::graph::edges`] relies on exactly this for single-key operations on one UID.
//!
//! Every atomic and the writer lock come from [`crate::sync`], so the loom models in
//! `loom_models.rs` explore this table's insert, replace, remove and resize against its readers.
//! Loom takes a new table's slots as initialised wherever it is read, so it cannot see whether a
//! resize publishes the table after its contents; Miri's race detector can, and the readers-vs-
//! churn test below fails under Miri when the table pointer is stored `Relaxed`. The tags keep the
//! pointer's provenance (`map_addr`), so Miri checks every access through a tagged slot too.

use super::reclaim::{Guard, Reclaim, Retirements};
use crate::graph::Node;
use crate::graph::{Handle, Uid};
use crate::sync::{AtomicPtr, AtomicUsize, Mutex, MutexGuard, Ordering};
use crossbeam_utils::CachePadded;
use std::ptr::NonNull;

/// Smallest table; a power of two, at least a cache line of slots. Loom models use the smallest,
/// so that a few inserts make the table resize.
#[cfg(not(all(test, feature = "loom")))]
const MIN_SLOTS: usize = 16;
#[cfg(all(test, feature = "loom"))]
pub(in crate::graph) const MIN_SLOTS: usize = 8;

/// Marks a slot whose entry was removed: probing continues past it, inserts may reuse it. Never a
/// tagged pointer: those keep a real node's address, which is never the dangling one.
fn tombstone() -> *mut Node {
    NonNull::dangling().as_ptr()
}

/// A node taken out of a slot gives back the slot's strong reference.
impl Reclaim for Node {
    unsafe fn reclaim(p: *mut Node) {
        // SAFETY: retired pointers are untagged slot pointers, which come from
        // `Handle::into_raw`, and a retired one is reclaimed once.
        drop(unsafe { Handle::from_raw(p) });
    }
}

/// A table taken out of service frees its slots; its node references moved to the new table.
impl Reclaim for Table {
    unsafe fn reclaim(p: *mut Table) {
        // SAFETY: tables come from `Box::into_raw`, and a retired one is reclaimed once.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// Hash bits a slot keeps beside its pointer.
const FRAGMENT_BITS: u32 = 19;
/// Low address bits that a node's alignment keeps zero.
const LOW_BITS: u32 = 3;
/// Bits of a user-space address; the ones above hold the rest of the fragment.
const ADDRESS_BITS: u32 = 48;
/// The bits of a tagged slot that are the node's address.
const ADDRESS_MASK: usize = ((1 << ADDRESS_BITS) - 1) & !((1 << LOW_BITS) - 1);
const _: () = assert!(usize::BITS == 64, "a slot packs its fragment into a 64-bit pointer");
const _: () = assert!(std::mem::align_of::<Node>() >= 1 << LOW_BITS);
const _: () = assert!(FRAGMENT_BITS == LOW_BITS + (usize::BITS - ADDRESS_BITS));

/// The fragment of a UID's hash that a shard keeps: the bits above those that chose the shard
/// (`SHARDS` = 64).
pub(in crate::graph) fn fragment(hash: u64) -> u32 {
    ((hash >> 6) & ((1 << FRAGMENT_BITS) - 1)) as u32
}

/// The slot a lookup of a UID hashed to `hash` starts from in a table of `mask + 1` slots: the
/// fragment's low bits, and the hash's next bits in a table too large for the fragment.
fn home(hash: u64, mask: usize) -> usize {
    (hash >> 6) as usize & mask
}

/// `node` with `fragment` in its unused bits.
fn tag(node: *mut Node, fragment: u32) -> *mut Node {
    assert_eq!(
        node.addr() & !ADDRESS_MASK,
        0,
        "the graph needs nodes at user-space addresses below 2^{ADDRESS_BITS}, aligned to {} bytes",
        1 << LOW_BITS
    );
    let fragment = fragment as usize;
    let low = fragment & ((1 << LOW_BITS) - 1);
    let high = (fragment >> LOW_BITS) << ADDRESS_BITS;
    node.map_addr(|a| a | low | high)
}

/// The node of a tagged slot pointer.
fn untag(slot: *mut Node) -> *mut Node {
    slot.map_addr(|a| a & ADDRESS_MASK)
}

/// The fragment of a tagged slot pointer.
fn fragment_of(slot: *mut Node) -> u32 {
    let a = slot.addr();
    ((a & ((1 << LOW_BITS) - 1)) | ((a >> ADDRESS_BITS) << LOW_BITS)) as u32
}

/// True when `slot` holds a node (it is neither empty nor a tombstone) whose fragment is
/// `fragment`.
fn holds(slot: *mut Node, fragment: u32) -> bool {
    !slot.is_null() && slot != tombstone() && fragment_of(slot) == fragment
}

/// Asks the processor to bring the cache line of `p` into its nearest cache; never faults, whatever
/// `p` is.
#[inline]
fn prefetch_line(p: *const i8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads no memory the program can observe and does not fault
    // on any address, and SSE, which it needs, is part of every x86-64 processor.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Slots in the smallest page the kernel maps (4 KiB).
const SLOTS_PER_PAGE: usize = 4096 / std::mem::size_of::<usize>();

/// The slots of one table: each null (empty), a tombstone, or a tagged node pointer.
struct Table {
    mask: usize,
    slots: Box<[AtomicPtr<Node>]>,
}

impl Table {
    fn new(slots: usize) -> Table {
        let slots: Box<[AtomicPtr<Node>]> = (0..slots).map(|_| AtomicPtr::new(std::ptr::null_mut())).collect();
        // A large table comes zeroed from the kernel, its pages not yet mapped. A lookup or a
        // prefetch that reads one first maps the shared zero page there, and the first insert
        // into it then faults to swap in a page of its own, which takes a TLB shootdown: an
        // interrupt to every other core running the process, builders and workers alike (a
        // tenth of the cost the second builder added to a million-object replay). A write to
        // each page now, by the writer that builds the table, maps them all at once. Every page
        // holds a slot at a multiple of `SLOTS_PER_PAGE`; an atomic store is never folded into
        // the zeroed allocation, as a plain one may be.
        for slot in slots.iter().step_by(SLOTS_PER_PAGE) {
            slot.store(std::ptr::null_mut(), Ordering::Relaxed);
        }
        Table {
            mask: slots.len() - 1,
            slots,
        }
    }

    fn len(&self) -> usize {
        self.mask + 1
    }

    /// The slots a lookup of a UID hashed to `hash` visits, in order; the table always has an
    /// empty slot, so a probe that stops at the first null ends.
    fn probe(&self, hash: u64) -> impl Iterator<Item = &AtomicPtr<Node>> + '_ {
        self.probe_from(home(hash, self.mask))
    }

    fn probe_from(&self, start: usize) -> impl Iterator<Item = &AtomicPtr<Node>> + '_ {
        (0..self.len()).map(move |i| &self.slots[(start + i) & self.mask])
    }

    /// Where a lookup of the node in tagged slot `slot` starts in this table; reads the node only
    /// when the table is too large for the fragment alone.
    ///
    /// # Safety
    /// `slot` is a tagged pointer to a node that stays alive during the call.
    unsafe fn home_of(&self, slot: *mut Node) -> usize {
        if self.mask >> FRAGMENT_BITS == 0 {
            fragment_of(slot) as usize & self.mask
        } else {
            // SAFETY: the caller keeps the node alive.
            home(unsafe { &*untag(slot) }.identity().uid.hash64(), self.mask)
        }
    }
}

/// Where a writer's probe for a UID ended.
enum Slot<'t> {
    /// The slot holding the UID's node.
    Found(&'t AtomicPtr<Node>),
    /// The UID is absent; the slot an insert should fill.
    Vacant(&'t AtomicPtr<Node>),
}

/// What a shard's writers keep under its lock.
#[derive(Default)]
struct Writers<A> {
    /// Slots holding a node or a tombstone.
    used: usize,
    /// The user's data (see [`UidTable`]).
    beside: A,
}

/// One shard of the graph's map. See the module docs for the protocol.
///
/// `A` is data its user keeps per shard under the shard's writer lock (the graph's adrift
/// edges): a [`ShardWriter`] edits it and the table in one critical section, so an insert that
/// reads it takes one lock, and whether a UID has a node never changes while its holder looks.
#[repr(C)]
pub(in crate::graph) struct UidTable<A = ()> {
    /// Read by every lookup and written only by a resize, so it has cache lines of its own: next to
    /// the writer lock and the count, which inserts write, a builder's every lookup in this shard
    /// would miss each time another core's builder had inserted into it.
    table: CachePadded<AtomicPtr<Table>>,
    writer: Mutex<Writers<A>>,
    live: AtomicUsize,
    retired: Retirements,
}

impl<A: Default> Default for UidTable<A> {
    fn default() -> Self {
        UidTable {
            table: CachePadded::new(AtomicPtr::new(Box::into_raw(Box::new(Table::new(MIN_SLOTS))))),
            writer: Mutex::new(Writers::default()),
            live: AtomicUsize::new(0),
            retired: Retirements::default(),
        }
    }
}

impl<A> UidTable<A> {
    /// Takes the shard's writer lock, for writes and the user's data (see the type's docs).
    pub(in crate::graph) fn lock(&self) -> ShardWriter<'_, A> {
        ShardWriter {
            shard: self,
            writers: self.writer.lock(),
        }
    }

    /// Runs `f` on the node for `uid`, without taking a reference to it.
    pub(in crate::graph) fn read<R>(&self, uid: &Uid, f: impl FnOnce(&Node) -> R) -> Option<R> {
        let guard = self.retired.enter();
        // SAFETY: see `find_raw`; the reference does not outlive `guard`.
        self.find_raw(&guard, uid).map(|p| f(unsafe { &*p }))
    }

    /// A handle on the node for `uid`.
    pub(in crate::graph) fn get(&self, uid: &Uid) -> Option<Handle> {
        let guard = self.retired.enter();
        // SAFETY: see `find_raw`; the clone takes its own strong reference.
        self.find_raw(&guard, uid).map(|p| unsafe { Handle::clone_from_raw(p) })
    }

    /// Starts loading the line of the slot a lookup of a UID hashed to `hash` probes first, so
    /// that the lookup, made a few events later, finds it in cache instead of waiting on memory.
    /// Loads nothing the caller could see: a hint only.
    pub(in crate::graph) fn prefetch(&self, hash: u64) {
        let guard = self.retired.enter();
        // SAFETY: as in `find_raw`.
        let table = unsafe { &*guard.protect(&self.table, Ordering::Acquire) };
        prefetch_line(std::ptr::from_ref(&table.slots[home(hash, table.mask)]).cast());
    }

    /// Starts loading the node a lookup of a UID hashed to `hash` would find: the first node in
    /// its probe whose fragment matches, unconfirmed, since confirming would wait for the node.
    /// Best made once [`prefetch`](Self::prefetch) had time to bring in the slots. A hint only.
    pub(in crate::graph) fn prefetch_node(&self, hash: u64) {
        let guard = self.retired.enter();
        // SAFETY: as in `find_raw`.
        let table = unsafe { &*guard.protect(&self.table, Ordering::Acquire) };
        let fragment = fragment(hash);
        for slot in table.probe(hash).take(8) {
            // Never dereferenced: a prefetch of a node freed meanwhile reads nothing.
            let p = slot.load(Ordering::Relaxed);
            if p.is_null() {
                return;
            }
            if holds(p, fragment) {
                // One line: a node's block is 64 bytes, which mimalloc aligns to 64 (a test in
                // `crate::allocator` keeps it so).
                prefetch_line(untag(p).cast::<i8>().cast_const());
                return;
            }
        }
    }

    /// The (untagged) slot pointer for `uid`: it carries a strong reference that is released only
    /// after `guard` is dropped.
    fn find_raw(&self, guard: &Guard, uid: &Uid) -> Option<*mut Node> {
        let hash = uid.hash64();
        let fragment = fragment(hash);
        // SAFETY: the table pointer is never null, and a table is retired through the collector
        // only after it was swapped out, so it stays allocated while `guard` is held.
        let table = unsafe { &*guard.protect(&self.table, Ordering::Acquire) };
        for slot in table.probe(hash) {
            let p = guard.protect(slot, Ordering::Acquire);
            if p.is_null() {
                return None;
            }
            if holds(p, fragment) {
                let node = untag(p);
                // SAFETY: a tagged slot pointer came from `Handle::into_raw`, and its strong
                // reference is released through the collector only after it left the slot, so
                // the node is alive while `guard` is held.
                if unsafe { &*node }.identity().uid == *uid {
                    return Some(node);
                }
            }
        }
        None
    }

    /// Every handle, in no order; weakly consistent, as [`for_each`](Self::for_each).
    pub(in crate::graph) fn handles(&self) -> Vec<Handle> {
        let mut handles = Vec::new();
        // SAFETY: as in `find_raw`; the clone takes its own strong reference.
        self.for_each_raw(|p| handles.push(unsafe { Handle::clone_from_raw(p) }));
        handles
    }

    /// Runs `f` on every node, taking no reference to any: weakly consistent, a node inserted or
    /// removed meanwhile may or may not be visited.
    pub(in crate::graph) fn for_each(&self, mut f: impl FnMut(&Node)) {
        // SAFETY: as in `find_raw`; the reference does not outlive the walk's guard.
        self.for_each_raw(|p| f(unsafe { &*p }));
    }

    /// Runs `f` on the (untagged) pointer of every node, each alive while `f` runs.
    fn for_each_raw(&self, mut f: impl FnMut(*mut Node)) {
        let guard = &self.retired.enter();
        // SAFETY: as in `find_raw`.
        let table = unsafe { &*guard.protect(&self.table, Ordering::Acquire) };
        for slot in table.slots.iter() {
            let p = guard.protect(slot, Ordering::Acquire);
            if !p.is_null() && p != tombstone() {
                f(untag(p));
            }
        }
    }

    /// Number of handles.
    pub(in crate::graph) fn len(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Writes `handle` as the one for its UID, replacing any other.
    pub(in crate::graph) fn insert(&self, handle: Handle) {
        self.lock().insert(handle);
    }

    /// Removes the node for `uid` and returns its handle.
    pub(in crate::graph) fn remove(&self, uid: &Uid) -> Option<Handle> {
        self.lock().remove(uid)
    }

    /// The current table, for a writer holding the lock.
    fn table_for_writer(&self) -> &Table {
        // SAFETY: only writers swap and retire tables, and the caller holds the writer lock, so
        // the current table stays allocated while it does.
        unsafe { &*self.table.load(Ordering::Acquire) }
    }

    /// A writer's probe: the UID's slot, or the first reusable slot on its path.
    fn locate<'t>(table: &'t Table, uid: &Uid, hash: u64) -> Slot<'t> {
        let fragment = fragment(hash);
        let mut reusable = None;
        for slot in table.probe(hash) {
            let p = slot.load(Ordering::Relaxed);
            if p.is_null() {
                return Slot::Vacant(reusable.unwrap_or(slot));
            }
            if p == tombstone() {
                reusable.get_or_insert(slot);
            } else if holds(p, fragment) {
                // SAFETY: the writer lock keeps every node in the table referenced by its slot.
                if unsafe { &*untag(p) }.identity().uid == *uid {
                    return Slot::Found(slot);
                }
            }
        }
        Slot::Vacant(reusable.expect("a table is never full"))
    }

    /// Moves every entry to a table at most half full, drops the tombstones, and retires the old
    /// table. Called by a writer holding the lock.
    fn resize(&self, used: &mut usize) -> &Table {
        let old = self.table.load(Ordering::Acquire);
        // SAFETY: as in `table_for_writer`.
        let old_table = unsafe { &*old };
        // Exact: only writers change it, and the caller holds the writer lock.
        let live = self.live.load(Ordering::Relaxed);
        let grown = Table::new(((live + 1) * 2).next_power_of_two().max(MIN_SLOTS));
        for slot in old_table.slots.iter() {
            let p = slot.load(Ordering::Relaxed);
            if p.is_null() || p == tombstone() {
                continue;
            }
            // SAFETY: `p` came from a slot, and the writer lock keeps its node referenced.
            let home = unsafe { grown.home_of(p) };
            grown
                .probe_from(home)
                .find(|free| free.load(Ordering::Relaxed).is_null())
                .expect("the new table has room")
                .store(p, Ordering::Relaxed);
        }
        *used = live;
        // Release publishes the new table's slots with it.
        self.table.store(Box::into_raw(Box::new(grown)), Ordering::Release);
        // SAFETY: the old table left service above; its node references moved to the new table,
        // so reclaiming it frees only its slots.
        unsafe { self.retired.retire(old) };
        self.table_for_writer()
    }
}

/// A writer's hold on a shard: its lock, taken by [`UidTable::lock`], with the table's writes and
/// the user's data under it.
pub(in crate::graph) struct ShardWriter<'s, A> {
    shard: &'s UidTable<A>,
    writers: MutexGuard<'s, Writers<A>>,
}

impl<A> ShardWriter<'_, A> {
    /// The user's data.
    pub(in crate::graph) fn beside(&mut self) -> &mut A {
        &mut self.writers.beside
    }

    /// True when the shard has a node for `uid`; no other writer can change that while the lock
    /// is held.
    pub(in crate::graph) fn contains(&self, uid: &Uid) -> bool {
        let table = self.shard.table_for_writer();
        matches!(UidTable::<A>::locate(table, uid, uid.hash64()), Slot::Found(_))
    }

    /// Writes `handle` as the one for its UID, replacing any other.
    pub(in crate::graph) fn insert(&mut self, handle: Handle) {
        self.write(&handle, false, |_| ());
    }

    /// Writes `handle` unless there is a handle for its UID already, running `arriving` on the
    /// user's data just before; true if written.
    pub(in crate::graph) fn try_insert(&mut self, handle: &Handle, arriving: impl FnOnce(&mut A)) -> bool {
        self.write(handle, true, arriving)
    }

    /// Writes `handle` for its UID, replacing any other; with `only_if_absent`, leaves a present
    /// UID alone instead. `arriving` runs when the UID was absent, before the slot is written.
    /// True when `handle` was written.
    fn write(&mut self, handle: &Handle, only_if_absent: bool, arriving: impl FnOnce(&mut A)) -> bool {
        let shard = self.shard;
        let uid = &handle.identity().uid;
        let hash = uid.hash64();
        let mut table = shard.table_for_writer();
        let mut slot = UidTable::<A>::locate(table, uid, hash);
        if let Slot::Vacant(vacant) = slot {
            let fills_empty = vacant.load(Ordering::Relaxed).is_null();
            if fills_empty && (self.writers.used + 1) * 4 > table.len() * 3 {
                table = shard.resize(&mut self.writers.used);
                slot = UidTable::<A>::locate(table, uid, hash);
            }
        }
        let tagged = || tag(handle.clone().into_raw(), fragment(hash));
        match slot {
            Slot::Found(_) if only_if_absent => false,
            Slot::Found(found) => {
                let old = untag(found.swap(tagged(), Ordering::AcqRel));
                // SAFETY: `old` left the slot, so readers that enter from now on cannot load it.
                unsafe { shard.retired.retire(old) };
                true
            }
            Slot::Vacant(vacant) => {
                arriving(&mut self.writers.beside);
                if vacant.load(Ordering::Relaxed).is_null() {
                    self.writers.used += 1;
                }
                vacant.store(tagged(), Ordering::Release);
                shard.live.fetch_add(1, Ordering::Relaxed);
                true
            }
        }
    }

    /// Removes the node for `uid` and returns its handle.
    pub(in crate::graph) fn remove(&mut self, uid: &Uid) -> Option<Handle> {
        let shard = self.shard;
        let table = shard.table_for_writer();
        let Slot::Found(found) = UidTable::<A>::locate(table, uid, uid.hash64()) else {
            return None;
        };
        let old = untag(found.swap(tombstone(), Ordering::AcqRel));
        shard.live.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: the slot's strong reference is still held until the retirement below runs.
        let handle = unsafe { Handle::clone_from_raw(old) };
        // SAFETY: `old` left the slot, so readers that enter from now on cannot load it.
        unsafe { shard.retired.retire(old) };
        Some(handle)
    }
}

impl<A> Drop for UidTable<A> {
    fn drop(&mut self) {
        let table = self.table.load(Ordering::Relaxed);
        // SAFETY: `&mut self` means no reader or writer is left; the table and every node
        // reference in it are owned here. Retired tables and nodes belong to `retired`.
        let table = unsafe { Box::from_raw(table) };
        for slot in table.slots.iter() {
            let p = slot.load(Ordering::Relaxed);
            if !p.is_null() && p != tombstone() {
                // SAFETY: the slot owned this strong reference.
                drop(unsafe { Handle::from_raw(untag(p)) });
            }
        }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::graph::{Identity, Name, OwnerRefs, Sym, TypeMeta};
    use std::sync::atomic::AtomicBool;

    fn handle(uid: &Uid) -> Handle {
        let identity = Identity::new(
            TypeMeta::new(Sym::new("v1"), Sym::new("Pod")),
            Name::new(&uid.to_string()),
            uid.clone(),
            Sym::new("ns"),
        );
        Handle::new(identity, OwnerRefs::NONE, false)
    }

    /// Entries per test: Miri interprets every access, so it gets fewer (still several resizes).
    const ENTRIES: u64 = if cfg!(miri) { 60 } else { 5_000 };
    /// Rounds of churn against the readers.
    const ROUNDS: u64 = if cfg!(miri) { 2 } else { 20 };
    /// Rounds of reads at most per reader: under Miri, readers that read until the writer is done
    /// take most of the interpreter's time (minutes) for no more interleavings.
    const READER_ROUNDS: usize = if cfg!(miri) { 16 } else { usize::MAX };

    fn uid(i: u64) -> Uid {
        Uid::new_v4(u128::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
    }

    #[test]
    fn shard_should_keep_every_entry_across_resizes_removals_and_replacements() {
        let shard = UidTable::<()>::default();
        let handles: Vec<Handle> = (0..ENTRIES).map(|i| handle(&uid(i))).collect();
        for h in &handles {
            assert!(shard.lock().try_insert(h, |_| ()));
            assert!(!shard.lock().try_insert(h, |_| ()), "present");
        }
        for h in handles.iter().step_by(2) {
            let removed = shard.remove(&h.identity().uid);
            assert_eq!(removed.as_ref(), Some(h));
        }
        let replacement = handle(&uid(1));
        shard.insert(replacement.clone());
        for (i, h) in handles.iter().enumerate() {
            let found = shard.get(&h.identity().uid);
            match i {
                1 => assert_eq!(found, Some(replacement.clone())),
                _ if i % 2 == 0 => assert_eq!(found, None),
                _ => assert_eq!(found.as_ref(), Some(h)),
            }
        }
        let half = ENTRIES as usize / 2;
        assert_eq!(shard.len(), half);
        assert_eq!(shard.handles().len(), half);
        let mut visited = Vec::new();
        shard.for_each(|node| visited.push(node.identity().uid.clone()));
        let mut expected: Vec<Uid> = shard.handles().iter().map(|h| h.identity().uid.clone()).collect();
        visited.sort();
        expected.sort();
        assert_eq!(visited, expected, "for_each visits each live node once");
        // Re-inserting removed UIDs reuses tombstones and stays findable.
        for h in handles.iter().step_by(2) {
            assert!(shard.lock().try_insert(h, |_| ()));
        }
        assert!(handles
            .iter()
            .skip(2)
            .all(|h| shard.get(&h.identity().uid).as_ref() == Some(h)));
        assert_eq!(shard.len(), ENTRIES as usize);
    }

    #[test]
    fn a_tagged_slot_should_give_back_its_node_and_its_fragment() {
        let h = handle(&uid(1));
        let node = h.clone().into_raw();
        for fragment in [0, 1, 0b111, 0b1000, (1 << FRAGMENT_BITS) - 1, fragment(uid(2).hash64())] {
            let tagged = tag(node, fragment);
            assert_eq!(untag(tagged), node);
            assert_eq!(fragment_of(tagged), fragment);
            assert!(holds(tagged, fragment));
            assert!(!holds(tagged, fragment ^ 1));
        }
        assert!(!holds(tombstone(), fragment_of(tombstone())));
        assert!(!holds(std::ptr::null_mut(), 0));
        // SAFETY: the reference taken by `into_raw` above, given back once.
        drop(unsafe { Handle::from_raw(node) });
    }

    #[test]
    #[cfg_attr(miri, ignore = "hundreds of thousands of entries")]
    fn a_table_too_large_for_the_fragment_should_resize_by_the_nodes_hashes() {
        // One more entry than a table of 2^19 slots holds makes the shard grow to 2^20 slots,
        // whose lookups start from hash bits that no slot keeps: the resize reads them from the
        // nodes, and every entry must still be found where lookups start.
        let entries = (1u64 << FRAGMENT_BITS) * 3 / 4 + 1;
        let shard = UidTable::<()>::default();
        for i in 0..entries {
            assert!(shard.lock().try_insert(&handle(&uid(i)), |_| ()));
        }
        assert_eq!(shard.table_for_writer().len(), 1 << (FRAGMENT_BITS + 1));
        for i in (0..entries).step_by(97) {
            let found = shard.get(&uid(i)).expect("present after the resize");
            assert_eq!(found.identity().uid, uid(i));
        }
        assert!(shard.remove(&uid(entries - 1)).is_some());
        assert_eq!(shard.get(&uid(entries - 1)), None);
        assert_eq!(shard.len(), entries as usize - 1);
    }

    #[test]
    fn shard_readers_should_see_stable_entries_while_a_writer_churns() {
        // One writer keeps inserting, replacing and removing churn entries (forcing resizes and
        // tombstones); readers must always find the stable entries, and any node they get back
        // must carry the UID they asked for.
        let shard = UidTable::<()>::default();
        let stable: Vec<Handle> = (0..ENTRIES / 10).map(|i| handle(&uid(i))).collect();
        for h in &stable {
            shard.insert(h.clone());
        }
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    let mut rounds = 0;
                    while (!done.load(Ordering::Relaxed) || rounds == 0) && rounds < READER_ROUNDS {
                        for (i, h) in stable.iter().enumerate() {
                            let found = shard.get(&h.identity().uid);
                            assert_eq!(found.as_ref(), Some(h), "stable entry {i} missing");
                            let churn = uid(1_000_000 + i as u64);
                            if let Some(c) = shard.get(&churn) {
                                assert_eq!(c.identity().uid, churn);
                            }
                        }
                        rounds += 1;
                    }
                });
            }
            for round in 0..ROUNDS {
                let churn: Vec<Handle> = (0..ENTRIES / 2).map(|i| handle(&uid(1_000_000 + i))).collect();
                for h in &churn {
                    shard.lock().write(h, round % 2 == 0, |_| ());
                }
                for h in churn.iter().step_by(3) {
                    shard.remove(&h.identity().uid);
                }
            }
            done.store(true, Ordering::Relaxed);
        });
        assert!(stable.iter().all(|h| shard.get(&h.identity().uid).as_ref() == Some(h)));
    }
}
