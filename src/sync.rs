//! The one place the lock-free code takes its atomics and locks from, so that a model checker can
//! swap them (STYLE.md rule 4).
//!
//! Normally these are `std`'s atomics and a `parking_lot` mutex. In the crate's own unit tests
//! built with `RUSTFLAGS="--cfg kube_gc_loom"` they are [loom]'s, whose every operation is a point where
//! loom's scheduler may switch threads, so the `#[cfg(kube_gc_loom)]` models explore every interleaving
//! of the code that uses them. As in tokio, the switch needs both `test` and `loom`: loom is a
//! dev-dependency, and other crates that see `--cfg kube_gc_loom` must still get the real types.
//!
//! Types built from these must not be used outside `loom::model` in such a build, so unit tests
//! that use them for real are compiled only without `loom`.
//!
//! [loom]: https://docs.rs/loom

#[cfg(not(all(test, kube_gc_loom)))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

#[cfg(all(test, kube_gc_loom))]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

/// A mutex whose `lock` returns the guard directly, as `parking_lot`'s does; never held across an
/// `.await`.
pub(crate) struct Mutex<T>(
    #[cfg(not(all(test, kube_gc_loom)))] parking_lot::Mutex<T>,
    #[cfg(all(test, kube_gc_loom))] loom::sync::Mutex<T>,
);

/// The guard of a locked [`Mutex`].
#[cfg(not(all(test, kube_gc_loom)))]
pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
/// The guard of a locked [`Mutex`].
#[cfg(all(test, kube_gc_loom))]
pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    /// An unlocked mutex holding `value`.
    pub(crate) fn new(value: T) -> Self {
        #[cfg(not(all(test, kube_gc_loom)))]
        return Mutex(parking_lot::Mutex::new(value));
        #[cfg(all(test, kube_gc_loom))]
        return Mutex(loom::sync::Mutex::new(value));
    }

    /// Locks the mutex, blocking the thread until it is free.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(not(all(test, kube_gc_loom)))]
        return self.0.lock();
        // A panic while the lock was held has already failed the model; carry on with the data.
        #[cfg(all(test, kube_gc_loom))]
        return self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
