//! Deferred reclamation for the lock-free [`UidTable`](super::table::UidTable): what a writer
//! takes out of a table (a node's slot reference, an outgrown table) is freed only once no reader
//! can still hold a pointer to it.
//!
//! Normally this is a [seize] collector, one for the process, so that retirements from every
//! shard fill its batches and are freed promptly. In the crate's unit tests built with
//! the `loom` feature (see [`crate::sync`]) retirements wait instead until the table is dropped,
//! when no reader is left: loom then explores the table's own atomics, which go through
//! `crate::sync`, and Miri checks the real reclamation (`.ci/run`).
//!
//! [seize]: https://docs.rs/seize

use crate::sync::{AtomicPtr, Ordering};

/// Something a writer retires, and how it is freed.
pub(in crate::graph) trait Reclaim {
    /// Frees what `p` owns.
    ///
    /// # Safety
    /// `p` was retired once and no reader can load it any more.
    unsafe fn reclaim(p: *mut Self);
}

/// A reader's protection: pointers it loads stay valid while it lives.
pub(in crate::graph) struct Guard {
    #[cfg(not(all(test, feature = "loom")))]
    inner: seize::LocalGuard<'static>,
}

impl Guard {
    /// Loads `ptr`; what it points to stays allocated while this guard lives.
    #[inline]
    pub(in crate::graph) fn protect<T>(&self, ptr: &AtomicPtr<T>, order: Ordering) -> *mut T {
        #[cfg(not(all(test, feature = "loom")))]
        return seize::Guard::protect(&self.inner, ptr, order);
        #[cfg(all(test, feature = "loom"))]
        return ptr.load(order);
    }
}

/// Where one table retires what it takes out; see the [module docs](self).
#[derive(Default)]
pub(in crate::graph) struct Retirements {
    /// Retired pointers and their reclaimers, freed on drop.
    #[cfg(all(test, feature = "loom"))]
    deferred: std::sync::Mutex<Vec<Deferred>>,
}

/// A retired pointer and the function that frees it.
#[cfg(all(test, feature = "loom"))]
type Deferred = (*mut (), unsafe fn(*mut ()));

// SAFETY: the deferred pointers are only freed on drop, and every `Reclaim` type the table
// retires (nodes, tables) is `Send`.
#[cfg(all(test, feature = "loom"))]
unsafe impl Send for Retirements {}
// SAFETY: as above; the list is behind a mutex.
#[cfg(all(test, feature = "loom"))]
unsafe impl Sync for Retirements {}

/// Retirements a thread gathers before it hands them to the collector. Each hand-over costs a
/// process-wide barrier (a `membarrier` system call, which interrupts every core running the
/// process, and so exits to the hypervisor on a virtual machine) and a walk of the active
/// threads, while a pending retirement only holds its memory a little longer: every deleted
/// object retires its node, so seize's default of 32 made a barrier every 32 deletions.
#[cfg(not(all(test, feature = "loom")))]
const BATCH: usize = 512;

#[cfg(not(all(test, feature = "loom")))]
static COLLECTOR: std::sync::LazyLock<seize::Collector> =
    std::sync::LazyLock::new(|| seize::Collector::new().batch_size(BATCH));

/// A guard held around a sequence of lookups, so that each of them enters the collector as a
/// nested guard, which costs a counter instead of a store and a swap on a shared word.
#[inline]
pub(in crate::graph) fn pin() -> Guard {
    Guard {
        #[cfg(not(all(test, feature = "loom")))]
        inner: COLLECTOR.enter(),
    }
}

impl Retirements {
    /// A reader's guard. Inlined, as seize's own `enter` is: every lookup of the map takes one.
    #[inline]
    pub(in crate::graph) fn enter(&self) -> Guard {
        pin()
    }

    /// Frees `p` once every guard that could have loaded it is dropped.
    ///
    /// # Safety
    /// `p` left every atomic readers load from, so guards entered from now on cannot load it, and
    /// it is retired once.
    pub(in crate::graph) unsafe fn retire<T: Reclaim>(&self, p: *mut T) {
        #[cfg(not(all(test, feature = "loom")))]
        // SAFETY: per this function's contract; `reclaim_with` frees it by `T::reclaim`.
        unsafe {
            COLLECTOR.retire(p, reclaim_with::<T>)
        };
        #[cfg(all(test, feature = "loom"))]
        self.deferred
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((p.cast(), erased::<T>));
    }
}

#[cfg(not(all(test, feature = "loom")))]
unsafe fn reclaim_with<T: Reclaim>(p: *mut T, _: &seize::Collector) {
    // SAFETY: the collector calls this once, when no guard can hold `p`.
    unsafe { T::reclaim(p) }
}

#[cfg(all(test, feature = "loom"))]
unsafe fn erased<T: Reclaim>(p: *mut ()) {
    // SAFETY: `p` was a `*mut T` retired once; see `Drop`.
    unsafe { T::reclaim(p.cast()) }
}

#[cfg(all(test, feature = "loom"))]
impl Drop for Retirements {
    fn drop(&mut self) {
        let deferred = self
            .deferred
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (p, reclaim) in deferred.drain(..) {
            // SAFETY: the table is being dropped, so no reader is left.
            unsafe { reclaim(p) };
        }
    }
}
