//! Deferred reclamation for the lock-free [`UidTable`](super::table::UidTable): what a writer
//! takes out of a table (a node's slot reference, an outgrown table) is freed only once no reader
//! can still hold a pointer to it.
//!
//! Normally this is a [seize] collector, one for the process, so that retirements from every
//! shard fill its batches and are freed promptly. In the crate's unit tests built with
//! `--cfg kube_gc_loom` (see [`crate::sync`]) retirements wait instead until the table is dropped,
//! when no reader is left: loom then explores the table's own atomics, which go through
//! `crate::sync`, and Miri checks the real reclamation (`.ci/run`).
//!
//! [seize]: https://docs.rs/seize

use crate::sync::{AtomicPtr, Ordering};

/// Something a writer retires, and how it is freed.
pub(super) trait Reclaim {
    /// Frees what `p` owns.
    ///
    /// # Safety
    /// `p` was retired once and no reader can load it any more.
    unsafe fn reclaim(p: *mut Self);
}

/// A reader's protection: pointers it loads stay valid while it lives.
pub(super) struct Guard {
    #[cfg(not(all(test, kube_gc_loom)))]
    inner: seize::LocalGuard<'static>,
}

impl Guard {
    /// Loads `ptr`; what it points to stays allocated while this guard lives.
    #[inline]
    pub(super) fn protect<T>(&self, ptr: &AtomicPtr<T>, order: Ordering) -> *mut T {
        #[cfg(not(all(test, kube_gc_loom)))]
        return seize::Guard::protect(&self.inner, ptr, order);
        #[cfg(all(test, kube_gc_loom))]
        return ptr.load(order);
    }
}

/// Where one table retires what it takes out; see the [module docs](self).
#[derive(Default)]
pub(super) struct Retirements {
    /// Retired pointers and their reclaimers, freed on drop.
    #[cfg(all(test, kube_gc_loom))]
    deferred: std::sync::Mutex<Vec<(*mut (), unsafe fn(*mut ()))>>,
}

// SAFETY: the deferred pointers are only freed on drop, and every `Reclaim` type the table
// retires (nodes, tables) is `Send`.
#[cfg(all(test, kube_gc_loom))]
unsafe impl Send for Retirements {}
// SAFETY: as above; the list is behind a mutex.
#[cfg(all(test, kube_gc_loom))]
unsafe impl Sync for Retirements {}

#[cfg(not(all(test, kube_gc_loom)))]
static COLLECTOR: std::sync::LazyLock<seize::Collector> = std::sync::LazyLock::new(seize::Collector::new);

impl Retirements {
    /// A reader's guard. Inlined, as seize's own `enter` is: every lookup of the map takes one.
    #[inline]
    pub(super) fn enter(&self) -> Guard {
        Guard {
            #[cfg(not(all(test, kube_gc_loom)))]
            inner: COLLECTOR.enter(),
        }
    }

    /// Frees `p` once every guard that could have loaded it is dropped.
    ///
    /// # Safety
    /// `p` left every atomic readers load from, so guards entered from now on cannot load it, and
    /// it is retired once.
    pub(super) unsafe fn retire<T: Reclaim>(&self, p: *mut T) {
        #[cfg(not(all(test, kube_gc_loom)))]
        // SAFETY: per this function's contract; `reclaim_with` frees it by `T::reclaim`.
        unsafe {
            COLLECTOR.retire(p, reclaim_with::<T>)
        };
        #[cfg(all(test, kube_gc_loom))]
        self.deferred
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((p.cast(), erased::<T>));
    }
}

#[cfg(not(all(test, kube_gc_loom)))]
unsafe fn reclaim_with<T: Reclaim>(p: *mut T, _: &seize::Collector) {
    // SAFETY: the collector calls this once, when no guard can hold `p`.
    unsafe { T::reclaim(p) }
}

#[cfg(all(test, kube_gc_loom))]
unsafe fn erased<T: Reclaim>(p: *mut ()) {
    // SAFETY: `p` was a `*mut T` retired once; see `Drop`.
    unsafe { T::reclaim(p.cast()) }
}

#[cfg(all(test, kube_gc_loom))]
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
