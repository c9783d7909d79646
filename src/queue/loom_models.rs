//! Loom models of the item protocol: the real [`Items`] and [`Slot`] code, on loom's atomics, over
//! a map and a FIFO that are each atomic per operation as papaya's map and crossbeam's `SegQueue`
//! are (see the [work queue's model](super::work_queue) for why these and not the whole queue).
//! Each model has two or three threads and is named after the scenario it checks.
//!
//! Run them with
//!
//! ```text
//! cargo test --release -p kube-gc --lib --features loom -- queue::
//! ```
//!
//! Every model ends with [`assert_quiescent`]: once no consumer holds anything, each slot left is
//! `Queued`, its item is on the FIFO exactly once, nothing else is, and the slot count is exact.

use super::items::{Added, Fifo, Finished, Items, SlotMap};
use super::slot::{Slot, State};
use crate::sync::{AtomicBool, Mutex, Ordering};
use loom::sync::Arc;
use loom::thread;
use std::collections::{HashMap, VecDeque};

/// A stand-in for papaya: each operation takes the lock once. A slot is shared through an `Arc`, so
/// a closure can use it after the lock is released, as papaya's guards allow; its transitions run
/// outside the lock, as they do over papaya.
struct ModelSlots {
    map: Mutex<HashMap<u8, Arc<Slot>>>,
}

impl Default for ModelSlots {
    fn default() -> Self {
        ModelSlots {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl SlotMap<u8> for ModelSlots {
    fn with_slot<R>(&self, item: &u8, f: impl FnOnce(&Slot) -> R) -> Option<R> {
        let slot = self.map.lock().get(item).cloned();
        slot.map(|slot| f(&slot))
    }

    fn with_new_slot<R>(&self, item: &u8, f: impl FnOnce(&Slot) -> R) -> (R, bool) {
        let (slot, inserted) = {
            let mut map = self.map.lock();
            match map.get(item) {
                Some(slot) => (slot.clone(), false),
                None => {
                    let slot = Arc::new(Slot::new());
                    map.insert(*item, slot.clone());
                    (slot, true)
                }
            }
        };
        (f(&slot), inserted)
    }

    fn remove_retired(&self, item: &u8) -> bool {
        let mut map = self.map.lock();
        let retired = map.get(item).is_some_and(|slot| slot.is_retired());
        if retired {
            map.remove(item);
        }
        retired
    }

    fn for_each_slot(&self, mut f: impl FnMut(&u8, &Slot)) {
        let slots: Vec<(u8, Arc<Slot>)> = self.map.lock().iter().map(|(k, v)| (*k, v.clone())).collect();
        slots.iter().for_each(|(item, slot)| f(item, slot));
    }
}

/// A stand-in for `SegQueue`: each operation takes the lock once.
struct ModelFifo {
    items: Mutex<VecDeque<u8>>,
}

impl Default for ModelFifo {
    fn default() -> Self {
        ModelFifo {
            items: Mutex::new(VecDeque::new()),
        }
    }
}

impl Fifo<u8> for ModelFifo {
    fn push(&self, item: u8) {
        self.items.lock().push_back(item);
    }

    fn pop(&self) -> Option<u8> {
        self.items.lock().pop_front()
    }

    fn len(&self) -> usize {
        self.items.lock().len()
    }
}

type Model = Items<u8, ModelSlots, ModelFifo>;

/// Checks the invariants that must hold once every thread has finished and no item is held, and
/// returns the FIFO's contents.
fn assert_quiescent(items: &Model) -> Vec<u8> {
    let fifo: Vec<u8> = items.fifo().items.lock().iter().copied().collect();
    let map = items.slots().map.lock();
    assert_eq!(items.processing_len(), 0, "no item is held");
    assert_eq!(items.active(), map.len(), "the slot count is exact at rest");
    for (item, slot) in map.iter() {
        assert!(
            matches!(slot.state(), State::Queued { .. }),
            "item {item}: a slot left at rest must be queued, found {:?}",
            slot.state()
        );
        let entries = fifo.iter().filter(|queued| *queued == item).count();
        assert_eq!(entries, 1, "item {item}: a queued item is on the FIFO exactly once");
    }
    assert_eq!(fifo.len(), map.len(), "every FIFO entry has a queued slot");
    fifo
}

/// A model for three threads, with a bound on preemptions unless `LOOM_MAX_PREEMPTIONS` sets one.
/// Unbounded, the three-thread models had not finished after 13 minutes; with 3 preemptions
/// they take about 2 s in release mode, with 4 about 20 s.
fn three_threads() -> loom::model::Builder {
    let mut model = loom::model::Builder::new();
    model.preemption_bound.get_or_insert(3);
    model
}

/// Adds that were not merged: each one owes exactly one processing round.
fn counted(added: Added) -> usize {
    usize::from(added != Added::Merged)
}

#[test]
fn two_producers_queue_a_new_item_once() {
    loom::model(|| {
        let items = Arc::new(Model::default());
        let other = thread::spawn({
            let items = items.clone();
            move || items.add(1, 1)
        });
        let mine = items.add(1, 2);
        let theirs = other.join().expect("producer");
        assert_eq!(counted(mine) + counted(theirs), 1, "one add queues, the other merges");
        assert_eq!(assert_quiescent(&items), [1]);
    });
}

#[test]
fn add_while_processing_requeues_once() {
    loom::model(|| {
        let items = Arc::new(Model::default());
        assert_eq!(items.add(1, 1), Added::Queued);
        assert_eq!(items.take(2).map(|t| (t.item, t.since)), Some((1, 1)));

        let consumer = thread::spawn({
            let items = items.clone();
            move || items.done(&1)
        });
        let added = items.add(1, 3);
        let finished = consumer.join().expect("consumer");

        // Either the add came first and `done` requeued the item, or `done` came first and the
        // add queued it, on the old slot or a fresh one. Never both, never neither.
        let requeued = matches!(finished, Some(Finished { requeued: true, .. }));
        match added {
            Added::Dirtied => assert!(requeued, "a dirty item must be requeued at done"),
            Added::Queued => assert!(!requeued, "done of a clean item must not requeue it"),
            Added::Merged => panic!("an add while processing is never merged"),
        }
        assert_eq!(finished.map(|f| f.started), Some(2));
        assert_eq!(assert_quiescent(&items), [1]);
        assert_eq!(
            items.state(&1),
            Some(State::Queued { since: 3 }),
            "the re-add's time is kept"
        );
    });
}

#[test]
fn two_adds_while_processing_requeue_once() {
    three_threads().check(|| {
        let items = Arc::new(Model::default());
        items.add(1, 1);
        items.take(2);

        let producers: Vec<_> = [3, 4]
            .map(|now| {
                let items = items.clone();
                thread::spawn(move || items.add(1, now))
            })
            .into_iter()
            .collect();
        let finished = items.done(&1);
        let adds: usize = producers
            .into_iter()
            .map(|p| counted(p.join().expect("producer")))
            .sum();

        assert!(finished.is_some(), "the holder's done is never ignored");
        assert_eq!(adds, 1, "of two adds racing one done, exactly one owes a round");
        assert_eq!(assert_quiescent(&items), [1]);
    });
}

#[test]
fn two_consumers_never_share_an_item() {
    three_threads().check(|| {
        let items = Arc::new(Model::default());
        let held = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(crate::sync::AtomicUsize::new(0));
        let first = items.add(1, 1);

        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let (items, held, rounds) = (items.clone(), held.clone(), rounds.clone());
                thread::spawn(move || {
                    let Some(taken) = items.take(2) else { return };
                    assert!(
                        !held.swap(true, Ordering::SeqCst),
                        "item {} handed to two consumers",
                        taken.item
                    );
                    rounds.fetch_add(1, Ordering::SeqCst);
                    held.store(false, Ordering::SeqCst);
                    items.done(&taken.item).expect("the taker holds the item");
                })
            })
            .collect();
        let second = items.add(1, 3);
        for consumer in consumers {
            consumer.join().expect("consumer");
        }

        // Conservation: every add that was not merged is one round, done or still queued.
        let queued = assert_quiescent(&items).len();
        let done = rounds.load(Ordering::SeqCst);
        assert_eq!(done + queued, counted(first) + counted(second));
    });
}
