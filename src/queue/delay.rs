//! Delayed adds: at most one pending delay per item, the earliest, delivered in due order.
//!
//! Two lock-free structures:
//!
//! - `entries`, a crossbeam [`SkipMap`] keyed by (due time, sequence number), so the earliest
//!   entry is at the front and entries due at the same instant keep their order of arrival;
//! - `pending`, a papaya map from item to the one entry that may still be delivered for it.
//!
//! An entry is delivered only if it is still its item's pending one (same sequence number); an
//! add that supersedes an entry removes it from `entries`, and one that loses to an earlier
//! pending entry inserts nothing. The two steps of a [`schedule`](Delays::schedule) are not one
//! atomic step, so a superseded entry can still land in `entries` after the add that superseded
//! it tried to remove it; it is then dropped when it comes due, because its sequence number no
//! longer matches.
//!
//! Only the queue's timer task calls [`deliver_due`](Delays::deliver_due), so entries leave the
//! front of `entries` one consumer at a time.

use crate::sync::{AtomicU64, AtomicUsize, Ordering};
use crossbeam_skiplist::SkipMap;
use papaya::{Compute, Operation};
use std::hash::Hash;
use tokio::time::Instant;

/// The one delayed add of an item that may still be delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ticket {
    ready: Instant,
    seq: u64,
    /// When the item's earliest delayed add still pending was made: a superseding add keeps it,
    /// so the queue's oldest-item age does not restart when a retry is brought forward.
    added: Instant,
}

impl Ticket {
    fn key(self) -> (Instant, u64) {
        (self.ready, self.seq)
    }
}

/// What [`Delays::schedule`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Scheduled {
    /// The item is now pending with `ticket`; `earliest` says whether it went to the front, in
    /// which case the timer must be woken to sleep less.
    Pending { ticket: Ticket, earliest: bool },
    /// An earlier or equal delay of the item is already pending; it wins.
    Superseded,
}

/// The delayed adds of one queue.
pub(super) struct Delays<T> {
    entries: SkipMap<(Instant, u64), T>,
    pending: papaya::HashMap<T, Ticket>,
    /// Items in `pending`: raised before an item's entry is inserted, lowered after it is removed,
    /// so that a reader never sees fewer than there are.
    count: AtomicUsize,
    next_seq: AtomicU64,
}

impl<T> Default for Delays<T> {
    fn default() -> Self {
        Delays {
            entries: SkipMap::new(),
            pending: papaya::HashMap::new(),
            count: AtomicUsize::new(0),
            next_seq: AtomicU64::new(0),
        }
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> Delays<T> {
    /// Records a delayed add of `item`, made at `now` and due at `ready`, unless one due no later
    /// is pending.
    pub(super) fn schedule(&self, item: &T, ready: Instant, now: Instant) -> Scheduled {
        // The sequence number only has to be unique and to grow with arrival.
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::SeqCst);
        let guard = self.pending.guard();
        let computed = self.pending.compute(
            item.clone(),
            |current| match current {
                Some((_, pending)) if pending.ready <= ready => Operation::Abort(()),
                Some((_, pending)) => Operation::Insert(Ticket {
                    ready,
                    seq,
                    added: pending.added.min(now),
                }),
                None => Operation::Insert(Ticket { ready, seq, added: now }),
            },
            &guard,
        );
        let ticket = match computed {
            Compute::Inserted(_, ticket) => *ticket,
            Compute::Updated {
                old: (_, old),
                new: (_, ticket),
            } => {
                self.count.fetch_sub(1, Ordering::SeqCst);
                self.entries.remove(&old.key());
                *ticket
            }
            Compute::Aborted(()) => {
                self.count.fetch_sub(1, Ordering::SeqCst);
                return Scheduled::Superseded;
            }
            Compute::Removed(..) => unreachable!("scheduling never removes"),
        };
        self.entries.insert(ticket.key(), item.clone());
        let earliest = self.entries.front().is_some_and(|front| *front.key() == ticket.key());
        Scheduled::Pending { ticket, earliest }
    }

    /// Withdraws `ticket` for `item` if it is still pending (a delayed add that raced shutdown).
    pub(super) fn cancel(&self, item: &T, ticket: Ticket) {
        self.entries.remove(&ticket.key());
        self.unpend(item, ticket);
    }

    /// Withdraws the delayed add pending for `item`, if any.
    pub(super) fn withdraw(&self, item: &T) {
        let pending = self.pending.pin().get(item).copied();
        if let Some(ticket) = pending {
            self.cancel(item, ticket);
        }
    }

    /// Removes `item` from `pending` if the entry `key` is its pending one; true when this call
    /// did. The caller lowers `count` once it has dealt with the item.
    fn take_pending(&self, item: &T, key: (Instant, u64)) -> bool {
        let guard = self.pending.guard();
        let computed = self.pending.compute(
            item.clone(),
            |current| match current {
                Some((_, pending)) if pending.key() == key => Operation::Remove,
                _ => Operation::Abort(()),
            },
            &guard,
        );
        matches!(computed, Compute::Removed(..))
    }

    fn unpend(&self, item: &T, ticket: Ticket) {
        if self.take_pending(item, ticket.key()) {
            self.count.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Timer task only: hands every entry due by `now` that is still pending to `deliver`, in due
    /// order, and returns the due time of the next entry, if any.
    pub(super) fn deliver_due(&self, now: Instant, mut deliver: impl FnMut(T)) -> Option<Instant> {
        while let Some(front) = self.entries.front() {
            let (ready, seq) = *front.key();
            if ready > now {
                return Some(ready);
            }
            // Only a superseding add can have removed it meanwhile; then it is not pending.
            if !front.remove() {
                continue;
            }
            let item = front.value().clone();
            if self.take_pending(&item, (ready, seq)) {
                // `count` drops only after the add, so `is_idle` cannot see the item in neither
                // place.
                deliver(item);
                self.count.fetch_sub(1, Ordering::SeqCst);
            }
        }
        None
    }

    /// Discards every pending delayed add.
    pub(super) fn clear(&self) {
        let guard = self.pending.guard();
        for (item, ticket) in self.pending.iter(&guard) {
            self.cancel(item, *ticket);
        }
        // Entries whose item was no longer pending (superseded ones, say).
        self.entries.clear();
    }

    /// True when a delayed add of `item` is pending.
    pub(super) fn contains(&self, item: &T) -> bool {
        self.pending.pin().contains_key(item)
    }

    /// Calls `f` with every item that has a pending delayed add, and when the earliest of its
    /// pending adds was made. Weakly consistent, as the map's iteration is.
    pub(super) fn for_each_pending(&self, mut f: impl FnMut(&T, Instant)) {
        let guard = self.pending.guard();
        for (item, ticket) in self.pending.iter(&guard) {
            f(item, ticket.added);
        }
    }

    /// Items with a pending delayed add; never less than the true number, more only while an
    /// add or delivery is under way.
    pub(super) fn len(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use std::time::Duration;

    fn due(delays: &Delays<u32>, at: Instant) -> Vec<u32> {
        let mut out = Vec::new();
        delays.deliver_due(at, |item| out.push(item));
        out
    }

    #[test]
    fn schedule_should_keep_the_earliest_delay_of_an_item() {
        let delays = Delays::default();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        assert!(matches!(
            delays.schedule(&1, at(50), t0),
            Scheduled::Pending { earliest: true, .. }
        ));
        assert!(matches!(
            delays.schedule(&1, at(20), t0),
            Scheduled::Pending { earliest: true, .. }
        ));
        assert_eq!(delays.schedule(&1, at(80), t0), Scheduled::Superseded);
        assert_eq!(
            delays.schedule(&1, at(20), t0),
            Scheduled::Superseded,
            "a tie keeps the first"
        );
        assert!(matches!(
            delays.schedule(&2, at(30), t0),
            Scheduled::Pending { earliest: false, .. }
        ));
        assert_eq!(delays.len(), 2);
        assert_eq!(delays.entries.len(), 2, "the superseded 50 ms entry is gone");

        assert_eq!(due(&delays, at(19)), Vec::<u32>::new());
        assert_eq!(delays.deliver_due(at(19), |_| {}), Some(at(20)));
        assert_eq!(due(&delays, at(100)), vec![1, 2]);
        assert_eq!(delays.len(), 0);
        assert!(!delays.contains(&1));
    }

    #[test]
    fn a_superseding_add_should_keep_the_time_of_the_first() {
        let delays = Delays::default();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        delays.schedule(&1, at(50), t0);
        delays.schedule(&1, at(30), at(10));
        delays.schedule(&2, at(40), at(20));
        let mut pending = Vec::new();
        delays.for_each_pending(|item, added| pending.push((*item, added)));
        pending.sort();
        assert_eq!(pending, [(1, t0), (2, at(20))]);
    }

    #[test]
    fn clear_should_drop_every_pending_add() {
        let delays = Delays::default();
        let t0 = Instant::now();
        delays.schedule(&1, t0 + Duration::from_millis(5), t0);
        delays.schedule(&2, t0 + Duration::from_millis(6), t0);
        delays.clear();
        assert_eq!((delays.len(), delays.entries.len()), (0, 0));
        assert_eq!(due(&delays, t0 + Duration::from_secs(1)), Vec::<u32>::new());
    }
}
