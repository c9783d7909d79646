//! The de-duplicating FIFO of a work queue: a slot per item in a concurrent map, and a FIFO that
//! holds each `Queued` item exactly once.
//!
//! This is the item protocol of the [work queue's model](super::work_queue) without clock,
//! metrics, wake-ups or delays. It is generic over the map ([`SlotMap`]) and the FIFO ([`Fifo`])
//! only so that the loom models can run this very code over stand-ins that loom can see into:
//! papaya's map and crossbeam's `SegQueue` are not built on the [`sync`](crate::sync) shim.
//! Production uses [`PapayaSlots`] and [`SegQueue`], the defaults.

use super::slot::{Event, Outcome, Slot, State};
use crate::sync::{AtomicUsize, Ordering};
use crossbeam_queue::SegQueue;
use std::hash::Hash;

/// A concurrent map from item to its [`Slot`] whose operations are each atomic (linearizable per
/// key), as papaya's are. A slot stays at one address while it is in the map, and a slot a
/// closure is given stays valid for the whole closure even if it is removed meanwhile.
pub(super) trait SlotMap<T> {
    /// Runs `f` on the slot of `item`, if it has one.
    fn with_slot<R>(&self, item: &T, f: impl FnOnce(&Slot) -> R) -> Option<R>;

    /// Inserts an idle slot for `item` unless it has one, then runs `f` on the slot that is there;
    /// the flag says whether this call inserted it.
    fn with_new_slot<R>(&self, item: &T, f: impl FnOnce(&Slot) -> R) -> (R, bool);

    /// Removes the slot of `item` if it is retired; true when this call removed it.
    fn remove_retired(&self, item: &T) -> bool;

    /// Runs `f` on every item and its slot. Weakly consistent: slots inserted or removed
    /// meanwhile may or may not be seen.
    fn for_each_slot(&self, f: impl FnMut(&T, &Slot));
}

/// A multi-producer, multi-consumer FIFO whose push and pop are each atomic.
pub(super) trait Fifo<T> {
    /// Appends `item`.
    fn push(&self, item: T);
    /// Takes the oldest item, if any.
    fn pop(&self) -> Option<T>;
    /// The number of items; exact only when no push or pop runs meanwhile.
    fn len(&self) -> usize;
}

impl<T> Fifo<T> for SegQueue<T> {
    fn push(&self, item: T) {
        SegQueue::push(self, item);
    }

    fn pop(&self) -> Option<T> {
        SegQueue::pop(self)
    }

    fn len(&self) -> usize {
        SegQueue::len(self)
    }
}

/// The production [`SlotMap`]: a papaya map. papaya keeps each entry at one address until it is
/// removed and reclaims it only after every guard that could see it is gone, so the `&Slot`
/// handed to a closure stays valid while the closure's guard lives.
///
/// # Tuning
///
/// A queue inserts a slot per item it queues and removes it at the item's last `done`, so its map
/// churns far more than it grows. Measured with `queue::stress::add_get_done_timing` (2 cores,
/// release, glibc malloc): with papaya's defaults a contended add/get/done cost about 780 ns per
/// item, most of it in seize's reclamation, whose every batch of retired entries costs a
/// process-wide `membarrier`; batches of 1024 instead of 32 bring it to about 360 ns (256: 450 ns;
/// 4096: no better than 1024). Blocking resizes beat incremental ones under churn (360 against
/// 420 ns), because papaya never reuses a tombstone, so inserts of new keys keep triggering
/// same-size copies that incremental mode makes every writer help with. foldhash instead of
/// SipHash took about 15 % off every map operation.
///
/// Rejected: 64 shards of `parking_lot::Mutex<HashMap<T, Slot>>` behind the same trait. A full
/// add/get/done of a new item was faster (about 175 ns against 245 ns, no reclamation), contended
/// throughput the same, but a merged add (about 130 ns against 65 ns) and get + `done` (about
/// 245 ns against 180 ns) slower, and every operation takes a lock. Merged adds are the builder's
/// common case, and the lock-free map keeps a preempted thread from stalling others.
pub(super) struct PapayaSlots<T> {
    map: papaya::HashMap<T, Slot, foldhash::fast::RandomState>,
}

impl<T> Default for PapayaSlots<T> {
    fn default() -> Self {
        PapayaSlots {
            map: papaya::HashMap::builder()
                .hasher(foldhash::fast::RandomState::default())
                .resize_mode(papaya::ResizeMode::Blocking)
                .collector(seize::Collector::new().batch_size(1024))
                .build(),
        }
    }
}

impl<T: Clone + Eq + Hash> SlotMap<T> for PapayaSlots<T> {
    fn with_slot<R>(&self, item: &T, f: impl FnOnce(&Slot) -> R) -> Option<R> {
        let guard = self.map.guard();
        self.map.get(item, &guard).map(f)
    }

    fn with_new_slot<R>(&self, item: &T, f: impl FnOnce(&Slot) -> R) -> (R, bool) {
        let guard = self.map.guard();
        match self.map.try_insert(item.clone(), Slot::new(), &guard) {
            Ok(inserted) => (f(inserted), true),
            Err(occupied) => (f(occupied.current), false),
        }
    }

    fn remove_retired(&self, item: &T) -> bool {
        let guard = self.map.guard();
        matches!(
            self.map.remove_if(item, |_, slot| slot.is_retired(), &guard),
            Ok(Some(_))
        )
    }

    fn for_each_slot(&self, mut f: impl FnMut(&T, &Slot)) {
        let guard = self.map.guard();
        for (item, slot) in self.map.iter(&guard) {
            f(item, slot);
        }
    }
}

/// What an add did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Added {
    /// The item was idle and is now on the FIFO: wake a consumer.
    Queued,
    /// A consumer holds the item; it goes back on the FIFO at that consumer's `done`.
    Dirtied,
    /// The item was already waiting to be processed.
    Merged,
}

/// An item a consumer took, and when it was added (in the caller's time base).
#[derive(Debug)]
pub(super) struct Taken<T> {
    pub(super) item: T,
    pub(super) since: u64,
}

/// The end of one processing round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Finished {
    /// When the holder took the item.
    pub(super) started: u64,
    /// True when the item had been added again meanwhile and is back on the FIFO.
    pub(super) requeued: bool,
}

/// Slots plus FIFO, and the counters that must move with them.
pub(super) struct Items<T, M = PapayaSlots<T>, F = SegQueue<T>> {
    slots: M,
    fifo: F,
    /// Slots in the map. Raised before a slot is inserted and lowered after it is removed, so it
    /// is never below the number of items queued or held: a reader that sees zero may trust it.
    active: AtomicUsize,
    /// Items held by consumers: raised after a take, lowered after a `done`.
    processing: AtomicUsize,
    _item: std::marker::PhantomData<fn(T) -> T>,
}

impl<T, M: Default, F: Default> Default for Items<T, M, F> {
    fn default() -> Self {
        Items {
            slots: M::default(),
            fifo: F::default(),
            active: AtomicUsize::new(0),
            processing: AtomicUsize::new(0),
            _item: std::marker::PhantomData,
        }
    }
}

// The counters are `SeqCst` so that `is_idle` can read them in an order that rules out a false
// "idle" (see `WorkQueue::is_idle`); on x86 and ARMv8 their RMWs cost the same under any ordering.
impl<T: Clone, M: SlotMap<T>, F: Fifo<T>> Items<T, M, F> {
    /// Adds `item` at time `now`: queues it if it was idle, marks it dirty if a consumer holds it,
    /// and otherwise does nothing.
    pub(super) fn add(&self, item: T, now: u64) -> Added {
        loop {
            let outcome = match self.slots.with_slot(&item, |slot| slot.apply(Event::Add { now })) {
                Some(outcome) => outcome,
                None => self.add_to_new_slot(&item, now),
            };
            match outcome {
                Outcome::Push => {
                    self.fifo.push(item);
                    return Added::Queued;
                }
                Outcome::MarkedDirty => return Added::Dirtied,
                Outcome::Merged => return Added::Merged,
                // The slot went idle and was retired under us: clear it away, then start over
                // with a fresh one.
                Outcome::FoundRetired => self.remove_retired(&item),
                other => unreachable!("an add cannot end in {other:?}"),
            }
        }
    }

    fn add_to_new_slot(&self, item: &T, now: u64) -> Outcome {
        self.active.fetch_add(1, Ordering::SeqCst);
        let (outcome, inserted) = self.slots.with_new_slot(item, |slot| slot.apply(Event::Add { now }));
        if !inserted {
            self.active.fetch_sub(1, Ordering::SeqCst);
        }
        outcome
    }

    fn remove_retired(&self, item: &T) {
        if self.slots.remove_retired(item) {
            self.active.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Pops the oldest queued item and hands it to the caller, who must pass it to
    /// [`done`](Self::done) later; `now` is when it was taken.
    ///
    /// # Panics
    ///
    /// If the popped item has no `Queued` slot, which would mean the FIFO and the slots disagree.
    pub(super) fn take(&self, now: u64) -> Option<Taken<T>> {
        let item = self.fifo.pop()?;
        let since = self
            .slots
            .with_slot(&item, |slot| slot.take(now))
            .unwrap_or_else(|| panic!("queue invariant broken: an item popped off the FIFO has no slot"));
        self.processing.fetch_add(1, Ordering::SeqCst);
        Some(Taken { item, since })
    }

    /// Ends the caller's processing of `item`: queues it again if it was added meanwhile, and
    /// otherwise retires its slot. `None` when no consumer holds the item.
    pub(super) fn done(&self, item: &T) -> Option<Finished> {
        let (started, outcome) = self.slots.with_slot(item, |slot| {
            // Read before the transition: once the slot is idle, another consumer may take the
            // item again and overwrite it.
            let started = slot.started();
            let outcome = match slot.apply(Event::Done) {
                Outcome::Finished => slot.apply(Event::Retire),
                other => other,
            };
            (started, outcome)
        })?;
        let requeued = match outcome {
            Outcome::NotHeld => return None,
            Outcome::Push => {
                self.fifo.push(item.clone());
                true
            }
            Outcome::Retired => {
                self.remove_retired(item);
                false
            }
            // An add revived the idle slot before it could be retired; the slot stays, queued.
            Outcome::Revived => false,
            other => unreachable!("a done cannot end in {other:?}"),
        };
        self.processing.fetch_sub(1, Ordering::SeqCst);
        Some(Finished { started, requeued })
    }

    /// The state of `item`'s slot, `None` if it has none.
    pub(super) fn state(&self, item: &T) -> Option<State> {
        self.slots.with_slot(item, Slot::state)
    }

    /// Items on the FIFO.
    pub(super) fn len(&self) -> usize {
        self.fifo.len()
    }

    /// Items held by consumers.
    pub(super) fn processing_len(&self) -> usize {
        self.processing.load(Ordering::SeqCst)
    }

    /// True when no item is queued or held (and no slot is left to remove).
    pub(super) fn is_idle(&self) -> bool {
        self.active.load(Ordering::SeqCst) == 0
    }

    /// Calls `f` with the `started` time of every item a consumer holds.
    pub(super) fn for_each_held(&self, mut f: impl FnMut(u64)) {
        self.slots.for_each_slot(|_, slot| {
            if let Some(started) = slot.held_since() {
                f(started);
            }
        });
    }

    /// Calls `f` with every item queued or held, and when its wait began: the add that queued it,
    /// or, for an item a consumer holds, when the consumer took it (the word of a held item keeps
    /// no add time; a dirty one's is later than the take).
    pub(super) fn for_each_waiting(&self, mut f: impl FnMut(&T, u64)) {
        self.slots.for_each_slot(|item, slot| match slot.state() {
            State::Queued { since } => f(item, since),
            State::Processing | State::ProcessingDirty { .. } => {
                if let Some(started) = slot.held_since() {
                    f(item, started);
                }
            }
            State::Idle | State::Retired => {}
        });
    }

    /// The map, for the loom models' checks.
    #[cfg(all(test, feature = "loom"))]
    pub(super) fn slots(&self) -> &M {
        &self.slots
    }

    /// The FIFO, for the loom models' checks.
    #[cfg(all(test, feature = "loom"))]
    pub(super) fn fifo(&self) -> &F {
        &self.fifo
    }

    /// The slot count, for the loom models' checks.
    #[cfg(all(test, feature = "loom"))]
    pub(super) fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }
}
