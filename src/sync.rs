//! The one place the lock-free code takes its atomics and locks from, so that a model checker can
//! swap them (STYLE.md rule 4).
//!
//! Normally these are `std`'s atomics, a `parking_lot` mutex and [`WordLock`], a lock kept in two
//! bits of a word whose other bits its user keeps. In the crate's own unit tests built with the
//! `loom` feature they are [loom]'s, whose every operation is a point where loom's scheduler may
//! switch threads, so the `#[cfg(feature = "loom")]` models explore every interleaving of the
//! code that uses them. As in tokio, the switch needs both `test` and `loom`: the crates that
//! depend on kube-gc get the real types whatever its features.
//!
//! Types built from these must not be used outside `loom::model` in such a build, so unit tests
//! that use them for real are compiled only without `loom`.
//!
//! [loom]: https://docs.rs/loom

#[cfg(not(all(test, feature = "loom")))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};

#[cfg(all(test, feature = "loom"))]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Atomics of values that outlive any one loom execution: the counts of names and interned
/// values, which process-wide tables hold. They are `std`'s in every build, loom's included
/// (loom's atomics live and die with one model's execution); Miri checks their protocols.
pub(crate) mod process_wide {
    pub(crate) use std::sync::atomic::{fence, AtomicU16, AtomicU32, Ordering};
}

/// A mutex whose `lock` returns the guard directly, as `parking_lot`'s does; never held across an
/// `.await`.
pub(crate) struct Mutex<T>(
    #[cfg(not(all(test, feature = "loom")))] parking_lot::Mutex<T>,
    #[cfg(all(test, feature = "loom"))] loom::sync::Mutex<T>,
);

/// The guard of a locked [`Mutex`].
#[cfg(not(all(test, feature = "loom")))]
pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
/// The guard of a locked [`Mutex`].
#[cfg(all(test, feature = "loom"))]
pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    /// An unlocked mutex holding `value`.
    pub(crate) fn new(value: T) -> Self {
        #[cfg(not(all(test, feature = "loom")))]
        return Mutex(parking_lot::Mutex::new(value));
        #[cfg(all(test, feature = "loom"))]
        return Mutex(loom::sync::Mutex::new(value));
    }

    /// Locks the mutex, blocking the thread until it is free.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(not(all(test, feature = "loom")))]
        return self.0.lock();
        // A panic while the lock was held has already failed the model; carry on with the data.
        #[cfg(all(test, feature = "loom"))]
        return self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Bits of a [`WordLock`]'s word that hold the lock: the two top ones. The other
/// [`WORD_LOCK_USER_BITS`] are the user's.
const LOCK_BITS: u64 = LOCKED | PARKED;
/// Set while the lock is held.
const LOCKED: u64 = 1 << 63;
/// Set while some thread may be parked waiting for the lock.
const PARKED: u64 = 1 << 62;

/// Number of low bits of a [`WordLock`]'s word its user keeps.
pub(crate) const WORD_LOCK_USER_BITS: u32 = 62;

/// A lock over a `T` that costs two bits of a 64-bit atomic word, whose other 62 bits its user
/// reads and writes at any time, lock held or not: a graph node keeps its flags and version there,
/// and the lock over its edges costs no byte of its own.
///
/// Invariant: the user's operations ([`load`](Self::load), [`fetch_or`](Self::fetch_or),
/// [`fetch_and`](Self::fetch_and), [`update`](Self::update)) see and change only the user's bits,
/// and every write to the word is one atomic read-modify-write, so the lock's bits and the user's
/// never overwrite each other. Locking sets [`LOCKED`] with `Acquire`, unlocking clears it with
/// `Release`; the user's relaxed read-modify-writes in between continue the release sequence, so
/// the next holder sees everything the last one wrote. A thread that finds the lock held spins a
/// little, then parks on the word's address ([`parking_lot_core`]) after setting [`PARKED`], which
/// tells the holder to wake one waiter as it unlocks; a waiter re-checks both bits under the
/// parking lot's queue lock before it sleeps, and the holder wakes under that same lock, so no
/// wake-up is lost. Under loom, a loom mutex stands in for the two bits.
pub(crate) struct WordLock<T> {
    word: AtomicU64,
    #[cfg(not(all(test, feature = "loom")))]
    data: std::cell::UnsafeCell<T>,
    #[cfg(all(test, feature = "loom"))]
    data: loom::sync::Mutex<T>,
}

// SAFETY: the lock gives one thread at a time access to the `T` (the type's invariant), so the
// lock is as shareable as a mutex over a `T` that may move between threads.
#[cfg(not(all(test, feature = "loom")))]
unsafe impl<T: Send> Sync for WordLock<T> {}

impl<T> WordLock<T> {
    /// An unlocked lock over `value`, its user's bits set to `bits`.
    pub(crate) fn new(bits: u64, value: T) -> Self {
        debug_assert_eq!(bits & LOCK_BITS, 0, "the user has {WORD_LOCK_USER_BITS} bits");
        WordLock {
            word: AtomicU64::new(bits & !LOCK_BITS),
            #[cfg(not(all(test, feature = "loom")))]
            data: std::cell::UnsafeCell::new(value),
            #[cfg(all(test, feature = "loom"))]
            data: loom::sync::Mutex::new(value),
        }
    }

    /// The user's bits.
    pub(crate) fn load(&self, order: Ordering) -> u64 {
        self.word.load(order) & !LOCK_BITS
    }

    /// Sets `bits` of the user's; returns the user's bits before.
    pub(crate) fn fetch_or(&self, bits: u64, order: Ordering) -> u64 {
        self.word.fetch_or(bits & !LOCK_BITS, order) & !LOCK_BITS
    }

    /// Keeps only `bits` of the user's; returns the user's bits before.
    pub(crate) fn fetch_and(&self, bits: u64, order: Ordering) -> u64 {
        self.word.fetch_and(bits | LOCK_BITS, order) & !LOCK_BITS
    }

    /// Replaces the user's bits with `f` of them, in one read-modify-write.
    pub(crate) fn update(&self, order: Ordering, mut f: impl FnMut(u64) -> u64) {
        let _ = self.word.fetch_update(order, Ordering::Relaxed, |word| {
            Some((word & LOCK_BITS) | (f(word & !LOCK_BITS) & !LOCK_BITS))
        });
    }

    /// Locks, blocking the thread until the lock is free.
    pub(crate) fn lock(&self) -> WordGuard<'_, T> {
        #[cfg(not(all(test, feature = "loom")))]
        {
            if self.word.fetch_or(LOCKED, Ordering::Acquire) & LOCKED != 0 {
                self.lock_contended();
            }
            WordGuard { lock: self }
        }
        // A panic while the lock was held has already failed the model; carry on with the data.
        #[cfg(all(test, feature = "loom"))]
        WordGuard(self.data.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    #[cfg(not(all(test, feature = "loom")))]
    #[cold]
    fn lock_contended(&self) {
        let mut spin = parking_lot_core::SpinWait::new();
        loop {
            let word = self.word.load(Ordering::Relaxed);
            if word & LOCKED == 0 {
                if self.word.fetch_or(LOCKED, Ordering::Acquire) & LOCKED == 0 {
                    return;
                }
                continue;
            }
            if word & PARKED == 0 {
                if spin.spin() {
                    continue;
                }
                self.word.fetch_or(PARKED, Ordering::Relaxed);
            }
            let still_held = || self.word.load(Ordering::Relaxed) & LOCK_BITS == LOCK_BITS;
            // SAFETY: the key is this lock's address, which no other parking user of this process
            // keys on while the lock lives (a parking_lot mutex keys on its own address, which
            // is a different object's); the callbacks neither panic nor park.
            unsafe {
                parking_lot_core::park(
                    self.key(),
                    still_held,
                    || {},
                    |_, _| {},
                    parking_lot_core::DEFAULT_PARK_TOKEN,
                    None,
                );
            }
            spin.reset();
        }
    }

    #[cfg(not(all(test, feature = "loom")))]
    fn unlock(&self) {
        if self.word.fetch_and(!LOCKED, Ordering::Release) & PARKED != 0 {
            self.wake_one();
        }
    }

    #[cfg(not(all(test, feature = "loom")))]
    #[cold]
    fn wake_one(&self) {
        let clear_if_last = |result: parking_lot_core::UnparkResult| {
            if !result.have_more_threads {
                self.word.fetch_and(!PARKED, Ordering::Relaxed);
            }
            parking_lot_core::DEFAULT_UNPARK_TOKEN
        };
        // SAFETY: as in `lock_contended`; the callback neither panics nor parks.
        unsafe { parking_lot_core::unpark_one(self.key(), clear_if_last) };
    }

    #[cfg(not(all(test, feature = "loom")))]
    fn key(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }
}

/// The guard of a locked [`WordLock`]; unlocks when dropped.
#[cfg(not(all(test, feature = "loom")))]
pub(crate) struct WordGuard<'a, T> {
    lock: &'a WordLock<T>,
}
/// The guard of a locked [`WordLock`]; unlocks when dropped.
#[cfg(all(test, feature = "loom"))]
pub(crate) struct WordGuard<'a, T>(loom::sync::MutexGuard<'a, T>);

impl<T> std::ops::Deref for WordGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        #[cfg(not(all(test, feature = "loom")))]
        // SAFETY: this guard holds the lock, so no other thread has access to the data.
        return unsafe { &*self.lock.data.get() };
        #[cfg(all(test, feature = "loom"))]
        return &self.0;
    }
}

impl<T> std::ops::DerefMut for WordGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        #[cfg(not(all(test, feature = "loom")))]
        // SAFETY: this guard holds the lock, and `&mut self` makes this the only access through it.
        return unsafe { &mut *self.lock.data.get() };
        #[cfg(all(test, feature = "loom"))]
        return &mut self.0;
    }
}

#[cfg(not(all(test, feature = "loom")))]
impl<T> Drop for WordGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.unlock();
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn word_lock_should_exclude_and_keep_the_users_bits_apart() {
        const THREADS: u64 = 4;
        const ROUNDS: u64 = 20_000;
        let lock = WordLock::new(0, 0u64);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let lock = &lock;
                s.spawn(move || {
                    for i in 0..ROUNDS {
                        // A non-atomic increment under the lock: a lost one means two holders.
                        let mut count = lock.lock();
                        *count += 1;
                        drop(count);
                        // The user's bits change meanwhile, lock held by others or not.
                        let bit = 1 << (t * 8 + i % 8);
                        lock.fetch_or(bit, Ordering::Relaxed);
                        lock.fetch_and(!bit, Ordering::Relaxed);
                        lock.update(Ordering::Relaxed, |w| w ^ (1 << 40));
                        lock.update(Ordering::Relaxed, |w| w ^ (1 << 40));
                    }
                });
            }
        });
        assert_eq!(*lock.lock(), THREADS * ROUNDS);
        assert_eq!(lock.load(Ordering::Relaxed), 0, "every user bit set was cleared");
        assert_eq!(lock.word.load(Ordering::Relaxed), 0, "unlocked, nobody parked");
    }

    #[test]
    fn word_lock_user_bits_should_never_reach_the_lock() {
        let lock = WordLock::new(0, ());
        assert_eq!(lock.fetch_or(u64::MAX, Ordering::Relaxed), 0);
        assert_eq!(lock.load(Ordering::Relaxed), (1 << WORD_LOCK_USER_BITS) - 1);
        let guard = lock.lock();
        lock.update(Ordering::Relaxed, |_| u64::MAX);
        lock.fetch_and(0, Ordering::Relaxed);
        assert_eq!(
            lock.word.load(Ordering::Relaxed),
            LOCKED,
            "held, and the user's bits cleared"
        );
        drop(guard);
        assert_eq!(lock.word.load(Ordering::Relaxed), 0);
    }
}
