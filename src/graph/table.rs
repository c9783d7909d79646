//! One shard of the graph's `uid → handle` map: an open-addressing table whose lookups take no
//! lock, built to hold millions of handles in little memory.
//!
//! Layout: a slot is a 32-bit hash fragment and a node pointer (12 bytes), stored in groups of
//! eight fragments then eight pointers so that a probe finds both in one or two cache lines;
//! linear probing, at most 3/4 full counting removed slots and at least 3/8 full
//! after a resize. A slot owns one strong reference to its node (`Handle::into_raw`). The fragment
//! is bits 6..38 of the UID's [`Uid::hash64`] (bits 0..6 pick the shard) and also gives the slot a
//! lookup starts from, so a resize moves entries without reading a single node.
//!
//! Concurrency. Writers (builders) hold the shard's lock; readers take no lock. Readers are
//! protected by deferred reclamation ([`super::reclaim`]): a writer that takes a node out of a
//! slot (remove, replace) or a table out of service (resize) retires it, and it is released only
//! once every reader that could have loaded it has dropped its guard. A writer fills a slot by storing the
//! fragment, then the pointer with Release; a reader loads the pointer with Acquire, then the
//! fragment. A fragment that does not belong to the pointer beside it (the slot was emptied and
//! reused meanwhile) only makes the reader skip the slot or compare UIDs, and every match is
//! confirmed on the node's own UID, so a lookup never returns another object's node.
//!
//! Linearizability: each operation is atomic on its own (a sequence of them is not). A lookup
//! returns a state the shard had at some moment during the lookup. Slot writes are single atomic
//! stores, and a resize copies the table under the lock and never writes the old table again, so a
//! reader still in the old table sees the shard as it was at the swap. The edge protocol of
//! [`super::edges`] relies on exactly this for single-key operations on one UID.
//!
//! Every atomic and the writer lock come from [`crate::sync`], so the loom models in
//! `loom_models.rs` explore this table's insert, replace, remove and resize against its readers.
//! Loom takes a new table's slots as initialised wherever it is read, so it cannot see whether a
//! resize publishes the table after its contents; Miri's race detector can, and the readers-vs-
//! churn test below fails under Miri when the table pointer is stored `Relaxed`.

use super::node::Node;
use super::reclaim::{Guard, Reclaim, Retirements};
use super::{Handle, Uid};
use crate::sync::{AtomicPtr, AtomicU32, AtomicUsize, Mutex, Ordering};
use std::ptr::NonNull;

/// Smallest table; a power of two, at least a [`GROUP`]. Loom models use the smallest, so that a
/// few inserts make the table resize.
#[cfg(not(all(test, kube_gc_loom)))]
const MIN_SLOTS: usize = 16;
#[cfg(all(test, kube_gc_loom))]
pub(super) const MIN_SLOTS: usize = GROUP;

/// Marks a slot whose entry was removed: probing continues past it, inserts may reuse it.
fn tombstone() -> *mut Node {
    NonNull::dangling().as_ptr()
}

/// A node taken out of a slot gives back the slot's strong reference.
impl Reclaim for Node {
    unsafe fn reclaim(p: *mut Node) {
        // SAFETY: slot pointers come from `Handle::into_raw`, and a retired one is reclaimed once.
        drop(unsafe { Handle::from_raw(p) });
    }
}

/// A table taken out of service frees its arrays; its node references moved to the new table.
impl Reclaim for Table {
    unsafe fn reclaim(p: *mut Table) {
        // SAFETY: tables come from `Box::into_raw`, and a retired one is reclaimed once.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// The fragment of a UID's hash that a shard keeps: the bits above those that chose the shard
/// (`SHARDS` = 64).
pub(super) fn fragment(hash: u64) -> u32 {
    (hash >> 6) as u32
}

/// Slots per group.
const GROUP: usize = 8;

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

/// Eight slots: their fragments, then their pointers.
struct Group {
    fragments: [AtomicU32; GROUP],
    nodes: [AtomicPtr<Node>; GROUP],
}

impl Default for Group {
    fn default() -> Self {
        Group {
            fragments: std::array::from_fn(|_| AtomicU32::new(0)),
            nodes: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
        }
    }
}

struct Table {
    mask: usize,
    groups: Box<[Group]>,
}

impl Table {
    fn new(slots: usize) -> Table {
        Table {
            mask: slots - 1,
            groups: (0..slots / GROUP).map(|_| Group::default()).collect(),
        }
    }

    fn node(&self, i: usize) -> &AtomicPtr<Node> {
        &self.groups[i / GROUP].nodes[i % GROUP]
    }

    fn fragment_at(&self, i: usize) -> &AtomicU32 {
        &self.groups[i / GROUP].fragments[i % GROUP]
    }

    /// Every slot's pointer, in slot order.
    fn nodes(&self) -> impl Iterator<Item = &AtomicPtr<Node>> {
        self.groups.iter().flat_map(|g| g.nodes.iter())
    }

    fn slots(&self) -> usize {
        self.mask + 1
    }

    /// The slots a lookup of `fragment` visits, in order; the table always has an empty slot, so
    /// a probe that stops at the first null ends.
    fn probe(&self, fragment: u32) -> impl Iterator<Item = usize> + '_ {
        let start = fragment as usize & self.mask;
        (0..self.slots()).map(move |i| (start + i) & self.mask)
    }
}

/// Where a writer's probe for a UID ended.
enum Slot {
    /// The slot holding the UID's node.
    Found(usize),
    /// The UID is absent; the slot an insert should fill.
    Vacant(usize),
}

/// Counts kept by writers, under the shard's lock.
#[derive(Default)]
struct Occupancy {
    /// Slots holding a node or a tombstone.
    used: usize,
}

/// One shard of the graph's map. See the module docs for the protocol.
pub(super) struct UidTable {
    table: AtomicPtr<Table>,
    writer: Mutex<Occupancy>,
    live: AtomicUsize,
    retired: Retirements,
}

impl Default for UidTable {
    fn default() -> Self {
        UidTable {
            table: AtomicPtr::new(Box::into_raw(Box::new(Table::new(MIN_SLOTS)))),
            writer: Mutex::new(Occupancy::default()),
            live: AtomicUsize::new(0),
            retired: Retirements::default(),
        }
    }
}

impl UidTable {
    /// Runs `f` on the node for `uid`, without taking a reference to it.
    pub(super) fn read<R>(&self, uid: &Uid, f: impl FnOnce(&Node) -> R) -> Option<R> {
        let guard = self.retired.enter();
        // SAFETY: see `find_raw`; the reference does not outlive `guard`.
        self.find_raw(&guard, uid).map(|p| f(unsafe { &*p }))
    }

    /// A handle on the node for `uid`.
    pub(super) fn get(&self, uid: &Uid) -> Option<Handle> {
        let guard = self.retired.enter();
        // SAFETY: see `find_raw`; the clone takes its own strong reference.
        self.find_raw(&guard, uid).map(|p| unsafe { Handle::clone_from_raw(p) })
    }

    /// Starts loading the lines a lookup of a UID hashed to `hash` probes first (its group's
    /// fragments and its slot's pointer), so that the lookup, made a few events later, finds them
    /// in cache instead of waiting on memory. Loads nothing the caller could see: a hint only.
    pub(super) fn prefetch(&self, hash: u64) {
        let guard = self.retired.enter();
        // SAFETY: as in `find_raw`.
        let table = unsafe { &*guard.protect(&self.table, Ordering::Acquire) };
        let i = fragment(hash) as usize & table.mask;
        let group = &table.groups[i / GROUP];
        prefetch_line(std::ptr::from_ref(&group.fragments[0]).cast());
        prefetch_line(std::ptr::from_ref(&group.nodes[i % GROUP]).cast());
    }

    /// Starts loading the node a lookup of a UID hashed to `hash` would find: the first node in
    /// its probe whose fragment matches, unconfirmed, since confirming would wait for the node.
    /// Best made once [`prefetch`](Self::prefetch) had time to bring in the slots. A hint only.
    pub(super) fn prefetch_node(&self, hash: u64) {
        let guard = self.retired.enter();
        // SAFETY: as in `find_raw`.
        let table = unsafe { &*guard.protect(&self.table, Ordering::Acquire) };
        let fragment = fragment(hash);
        for i in table.probe(fragment).take(GROUP) {
            // Never dereferenced: a prefetch of a node freed meanwhile reads nothing.
            let p = table.node(i).load(Ordering::Relaxed);
            if p.is_null() {
                return;
            }
            if p != tombstone() && table.fragment_at(i).load(Ordering::Relaxed) == fragment {
                let first = p.cast::<i8>().cast_const();
                prefetch_line(first);
                // A node spans two lines: its identity, then its state and edges.
                prefetch_line(first.wrapping_add(64));
                return;
            }
        }
    }

    /// The slot pointer for `uid`: it carries a strong reference that is released only after
    /// `guard` is dropped.
    fn find_raw(&self, guard: &Guard, uid: &Uid) -> Option<*mut Node> {
        let fragment = fragment(uid.hash64());
        // SAFETY: the table pointer is never null, and a table is retired through the collector
        // only after it was swapped out, so it stays allocated while `guard` is held.
        let table = unsafe { &*guard.protect(&self.table, Ordering::Acquire) };
        for i in table.probe(fragment) {
            let p = guard.protect(table.node(i), Ordering::Acquire);
            if p.is_null() {
                return None;
            }
            if p != tombstone() && table.fragment_at(i).load(Ordering::Relaxed) == fragment {
                // SAFETY: a non-null, non-tombstone slot pointer came from `Handle::into_raw`,
                // and its strong reference is released through the collector only after it left
                // the slot, so the node is alive while `guard` is held.
                if unsafe { &*p }.identity().uid == *uid {
                    return Some(p);
                }
            }
        }
        None
    }

    /// Every handle, in no order.
    pub(super) fn handles(&self) -> Vec<Handle> {
        let guard = &self.retired.enter();
        // SAFETY: as in `find`.
        let table = unsafe { &*guard.protect(&self.table, Ordering::Acquire) };
        table
            .nodes()
            .map(|slot| guard.protect(slot, Ordering::Acquire))
            .filter(|p| !p.is_null() && *p != tombstone())
            // SAFETY: as in `find`; the clone takes its own strong reference.
            .map(|p| unsafe { Handle::clone_from_raw(p) })
            .collect()
    }

    /// Runs `f` on every node, taking no reference to any; weakly consistent, as
    /// [`handles`](Self::handles).
    pub(super) fn for_each(&self, mut f: impl FnMut(&Node)) {
        let guard = &self.retired.enter();
        // SAFETY: as in `find_raw`.
        let table = unsafe { &*guard.protect(&self.table, Ordering::Acquire) };
        for slot in table.nodes() {
            let p = guard.protect(slot, Ordering::Acquire);
            if !p.is_null() && p != tombstone() {
                // SAFETY: as in `find_raw`; the reference does not outlive `guard`.
                f(unsafe { &*p });
            }
        }
    }

    /// Number of handles.
    pub(super) fn len(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Writes `handle` as the one for its UID, replacing any other.
    pub(super) fn insert(&self, handle: Handle) {
        self.write(&handle, false);
    }

    /// Writes `handle` unless there is a handle for its UID already; true if written.
    pub(super) fn try_insert(&self, handle: &Handle) -> bool {
        self.write(handle, true)
    }

    /// Writes `handle` for its UID, replacing any other; with `only_if_absent`, leaves a present
    /// UID alone instead. True when `handle` was written.
    fn write(&self, handle: &Handle, only_if_absent: bool) -> bool {
        let mut occupancy = self.writer.lock();
        let uid = &handle.identity().uid;
        let fragment = fragment(uid.hash64());
        let mut table = self.table_for_writer();
        let mut slot = Self::locate(table, uid, fragment);
        if let Slot::Vacant(i) = slot {
            let fills_empty = table.node(i).load(Ordering::Relaxed).is_null();
            if fills_empty && (occupancy.used + 1) * 4 > table.slots() * 3 {
                table = self.resize(&mut occupancy);
                slot = Self::locate(table, uid, fragment);
            }
        }
        match slot {
            Slot::Found(_) if only_if_absent => false,
            Slot::Found(i) => {
                let old = table.node(i).swap(handle.clone().into_raw(), Ordering::AcqRel);
                // SAFETY: `old` left the slot, so readers that enter from now on cannot load it.
                unsafe { self.retired.retire(old) };
                true
            }
            Slot::Vacant(i) => {
                if table.node(i).load(Ordering::Relaxed).is_null() {
                    occupancy.used += 1;
                }
                table.fragment_at(i).store(fragment, Ordering::Relaxed);
                table.node(i).store(handle.clone().into_raw(), Ordering::Release);
                self.live.fetch_add(1, Ordering::Relaxed);
                true
            }
        }
    }

    /// Removes the node for `uid` and returns its handle.
    pub(super) fn remove(&self, uid: &Uid) -> Option<Handle> {
        let _occupancy = self.writer.lock();
        let table = self.table_for_writer();
        let Slot::Found(i) = Self::locate(table, uid, fragment(uid.hash64())) else {
            return None;
        };
        let old = table.node(i).swap(tombstone(), Ordering::AcqRel);
        self.live.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: the slot's strong reference is still held until the retirement below runs.
        let handle = unsafe { Handle::clone_from_raw(old) };
        // SAFETY: `old` left the slot, so readers that enter from now on cannot load it.
        unsafe { self.retired.retire(old) };
        Some(handle)
    }

    /// The current table, for a writer holding the lock.
    fn table_for_writer(&self) -> &Table {
        // SAFETY: only writers swap and retire tables, and the caller holds the writer lock, so
        // the current table stays allocated while it does.
        unsafe { &*self.table.load(Ordering::Acquire) }
    }

    /// A writer's probe: the UID's slot, or the first reusable slot on its path.
    fn locate(table: &Table, uid: &Uid, fragment: u32) -> Slot {
        let mut reusable = None;
        for i in table.probe(fragment) {
            let p = table.node(i).load(Ordering::Relaxed);
            if p.is_null() {
                return Slot::Vacant(reusable.unwrap_or(i));
            }
            if p == tombstone() {
                reusable.get_or_insert(i);
            } else if table.fragment_at(i).load(Ordering::Relaxed) == fragment {
                // SAFETY: the writer lock keeps every node in the table referenced by its slot.
                if unsafe { &*p }.identity().uid == *uid {
                    return Slot::Found(i);
                }
            }
        }
        Slot::Vacant(reusable.expect("a table is never full"))
    }

    /// Moves every entry to a table at most half full, drops the tombstones, and retires the old
    /// table. Called by a writer holding the lock.
    fn resize(&self, occupancy: &mut Occupancy) -> &Table {
        let old = self.table.load(Ordering::Acquire);
        // SAFETY: as in `table_for_writer`.
        let old_table = unsafe { &*old };
        // Exact: only writers change it, and the caller holds the writer lock.
        let live = self.live.load(Ordering::Relaxed);
        let grown = Table::new(((live + 1) * 2).next_power_of_two().max(MIN_SLOTS));
        for i in 0..old_table.slots() {
            let p = old_table.node(i).load(Ordering::Relaxed);
            if p.is_null() || p == tombstone() {
                continue;
            }
            let fragment = old_table.fragment_at(i).load(Ordering::Relaxed);
            let j = grown
                .probe(fragment)
                .find(|&j| grown.node(j).load(Ordering::Relaxed).is_null())
                .expect("the new table has room");
            grown.fragment_at(j).store(fragment, Ordering::Relaxed);
            grown.node(j).store(p, Ordering::Relaxed);
        }
        occupancy.used = live;
        // Release publishes the new table's slots with it.
        self.table.store(Box::into_raw(Box::new(grown)), Ordering::Release);
        // SAFETY: the old table left service above; its node references moved to the new table,
        // so reclaiming it frees only its arrays.
        unsafe { self.retired.retire(old) };
        self.table_for_writer()
    }
}

impl Drop for UidTable {
    fn drop(&mut self) {
        let table = self.table.load(Ordering::Relaxed);
        // SAFETY: `&mut self` means no reader or writer is left; the table and every node
        // reference in it are owned here. Retired tables and nodes belong to `retired`.
        let table = unsafe { Box::from_raw(table) };
        for slot in table.nodes() {
            let p = slot.load(Ordering::Relaxed);
            if !p.is_null() && p != tombstone() {
                // SAFETY: the slot owned this strong reference.
                drop(unsafe { Handle::from_raw(p) });
            }
        }
    }
}

#[cfg(all(test, not(kube_gc_loom)))]
mod tests {
    use super::*;
    use crate::graph::{Identity, Name, Sym, TypeMeta};
    use std::sync::atomic::AtomicBool;

    fn handle(uid: &Uid) -> Handle {
        let identity = Identity {
            type_meta: TypeMeta::new(Sym::new("v1"), Sym::new("Pod")),
            name: Name::new(&uid.to_string()),
            uid: *uid,
            namespace: Sym::new("ns"),
        };
        Handle::new(identity, &[], false)
    }

    /// Entries per test: Miri interprets every access, so it gets fewer (still several resizes).
    const ENTRIES: u64 = if cfg!(miri) { 200 } else { 5_000 };
    /// Rounds of churn against the readers.
    const ROUNDS: u64 = if cfg!(miri) { 3 } else { 20 };

    fn uid(i: u64) -> Uid {
        Uid::new_v4(u128::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
    }

    #[test]
    fn shard_should_keep_every_entry_across_resizes_removals_and_replacements() {
        let shard = UidTable::default();
        let handles: Vec<Handle> = (0..ENTRIES).map(|i| handle(&uid(i))).collect();
        for h in &handles {
            assert!(shard.try_insert(h));
            assert!(!shard.try_insert(h), "present");
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
        shard.for_each(|node| visited.push(node.identity().uid));
        let mut expected: Vec<Uid> = shard.handles().iter().map(|h| h.identity().uid).collect();
        visited.sort();
        expected.sort();
        assert_eq!(visited, expected, "for_each visits each live node once");
        // Re-inserting removed UIDs reuses tombstones and stays findable.
        for h in handles.iter().step_by(2) {
            assert!(shard.try_insert(h));
        }
        assert!(handles
            .iter()
            .skip(2)
            .all(|h| shard.get(&h.identity().uid).as_ref() == Some(h)));
        assert_eq!(shard.len(), ENTRIES as usize);
    }

    #[test]
    fn shard_readers_should_see_stable_entries_while_a_writer_churns() {
        // One writer keeps inserting, replacing and removing churn entries (forcing resizes and
        // tombstones); readers must always find the stable entries, and any node they get back
        // must carry the UID they asked for.
        let shard = UidTable::default();
        let stable: Vec<Handle> = (0..ENTRIES / 10).map(|i| handle(&uid(i))).collect();
        for h in &stable {
            shard.insert(h.clone());
        }
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    let mut rounds = 0;
                    while !done.load(Ordering::Relaxed) || rounds == 0 {
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
                    shard.write(h, round % 2 == 0);
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
