//! The per-item state of a work queue: one atomic word per item, changed only by compare-and-swap
//! through one step function, so that every transition is atomic and has exactly one winner.
//!
//! The states and who may take each transition are listed in the
//! [work queue's model](super::work_queue); [`step`] is that table as code, and [`Slot::apply`]
//! is the only writer of the word.
//!
//! # Encoding
//!
//! The low [`TAG_BITS`] bits of the word are the state's tag; the remaining 61 bits are a
//! timestamp, in nanoseconds since the queue was created (enough for 73 years), that only
//! `Queued` and `ProcessingDirty` carry: the time of the add that made the item need processing,
//! from which the queue measures `workqueue_queue_duration_seconds`. Keeping it in the same word
//! as the tag means the add that wins the transition is also the one whose time is kept, with no
//! window in which the state and the time disagree.
//!
//! The time a consumer took the item lives in a second word, [`Slot::started`], written only by
//! that consumer and before the transition that publishes it (see [`Slot::take`]).

use crate::sync::{AtomicU64, Ordering};

/// Bits of the word that hold the state's tag.
const TAG_BITS: u32 = 3;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;

const IDLE: u64 = 0;
const QUEUED: u64 = 1;
const PROCESSING: u64 = 2;
const PROCESSING_DIRTY: u64 = 3;
const RETIRED: u64 = 4;

/// The largest timestamp a word can hold; later times are clamped to it.
pub(super) const MAX_STAMP: u64 = u64::MAX >> TAG_BITS;

/// Where an item is. `since` is the time of the add the item is waiting to be processed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// Known to the queue's map but needing no processing; about to be retired or revived.
    Idle,
    /// On the FIFO, exactly once, and held by no consumer.
    Queued { since: u64 },
    /// Held by one consumer, and not added since it was taken.
    Processing,
    /// Held by one consumer and added since; not on the FIFO. Goes back on it at `done`.
    ProcessingDirty { since: u64 },
    /// Final: the slot is being removed from the map, and an add must use a fresh slot.
    Retired,
}

impl State {
    fn encode(self) -> u64 {
        match self {
            State::Idle => IDLE,
            State::Queued { since } => since.min(MAX_STAMP) << TAG_BITS | QUEUED,
            State::Processing => PROCESSING,
            State::ProcessingDirty { since } => since.min(MAX_STAMP) << TAG_BITS | PROCESSING_DIRTY,
            State::Retired => RETIRED,
        }
    }

    fn decode(word: u64) -> State {
        let since = word >> TAG_BITS;
        match word & TAG_MASK {
            IDLE => State::Idle,
            QUEUED => State::Queued { since },
            PROCESSING => State::Processing,
            PROCESSING_DIRTY => State::ProcessingDirty { since },
            RETIRED => State::Retired,
            tag => panic!("slot invariant broken: unknown state tag {tag} in word {word:#x}"),
        }
    }

    /// True while a consumer holds the item.
    pub(super) fn is_held(self) -> bool {
        matches!(self, State::Processing | State::ProcessingDirty { .. })
    }
}

/// What happens to a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Event {
    /// A producer adds the item, at time `now`.
    Add { now: u64 },
    /// The consumer that popped the item off the FIFO takes it.
    Take,
    /// The consumer holding the item is done with it.
    Done,
    /// The consumer that just made the slot idle removes it from the map.
    Retire,
}

/// What the caller of [`Slot::apply`] must do after the event, beyond nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// This call made the item `Queued`: push it onto the FIFO, once.
    Push,
    /// An add while a consumer holds the item: it is queued again at that consumer's `done`.
    MarkedDirty,
    /// An add of an item that already waits to be processed: nothing to do.
    Merged,
    /// An add found a retired slot: remove it from the map and add to a fresh slot.
    FoundRetired,
    /// The item, queued since `since`, is now held by the caller.
    Taken { since: u64 },
    /// A take of an item that was not `Queued`: the FIFO and the slots disagree.
    NotQueued(State),
    /// `done` of a clean item: the slot is idle; retire it.
    Finished,
    /// `done` of an item the caller does not hold: nothing to do.
    NotHeld,
    /// `retire` of a slot an add revived after it went idle: it stays, in use.
    Revived,
    /// This call retired the slot: remove it from the map.
    Retired,
}

/// The transition table: the state after `event` in `state` (`None` when it does not change) and
/// what the caller must do. Pure, so that a compare-and-swap loop can retry it.
pub(super) fn step(state: State, event: Event) -> (Option<State>, Outcome) {
    match (state, event) {
        (State::Idle, Event::Add { now }) => (Some(State::Queued { since: now }), Outcome::Push),
        (State::Queued { .. } | State::ProcessingDirty { .. }, Event::Add { .. }) => (None, Outcome::Merged),
        (State::Processing, Event::Add { now }) => (Some(State::ProcessingDirty { since: now }), Outcome::MarkedDirty),
        (State::Retired, Event::Add { .. }) => (None, Outcome::FoundRetired),

        (State::Queued { since }, Event::Take) => (Some(State::Processing), Outcome::Taken { since }),
        (other, Event::Take) => (None, Outcome::NotQueued(other)),

        (State::Processing, Event::Done) => (Some(State::Idle), Outcome::Finished),
        (State::ProcessingDirty { since }, Event::Done) => (Some(State::Queued { since }), Outcome::Push),
        (State::Idle | State::Queued { .. } | State::Retired, Event::Done) => (None, Outcome::NotHeld),

        (State::Idle, Event::Retire) => (Some(State::Retired), Outcome::Retired),
        (_, Event::Retire) => (None, Outcome::Revived),
    }
}

/// One item's state in the queue's map. See the [module docs](self).
#[derive(Debug)]
pub(super) struct Slot {
    /// The encoded [`State`]. Written only by [`Slot::apply`].
    word: AtomicU64,
    /// When the current holder took the item, in the word's time base. Written only by
    /// [`Slot::take`], by the one consumer that popped the item, before it publishes the take.
    started: AtomicU64,
}

impl Slot {
    /// A slot in state `Idle`, about to be added to.
    pub(super) fn new() -> Self {
        Slot {
            word: AtomicU64::new(State::Idle.encode()),
            started: AtomicU64::new(0),
        }
    }

    /// The current state. Stale as soon as it is returned, unless the caller is the only one that
    /// may change it (a holder, for instance, knows it stays held).
    pub(super) fn state(&self) -> State {
        State::decode(self.word.load(Ordering::Acquire))
    }

    /// Applies `event` with a compare-and-swap loop: reads the state, computes the next one with
    /// [`step`], and retries if another thread changed the word in between. Each transition
    /// therefore happens exactly once, for exactly one caller, which alone gets its [`Outcome`].
    ///
    /// # Ordering
    ///
    /// A successful swap is `AcqRel` and every load `Acquire`: the swap that takes an item
    /// publishes [`started`](Slot::started), which `held_since` reads after an `Acquire` load of
    /// the word. Transitions of one word are totally ordered by the word's modification order
    /// whatever the ordering, so they need no `SeqCst`. A consumer that pops an item sees the
    /// `Queued` its entry stands for because the push came after that swap and the FIFO orders
    /// push before pop (release, then acquire).
    pub(super) fn apply(&self, event: Event) -> Outcome {
        let mut current = self.word.load(Ordering::Acquire);
        loop {
            let (next, outcome) = step(State::decode(current), event);
            let Some(next) = next else { return outcome };
            match self
                .word
                .compare_exchange_weak(current, next.encode(), Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return outcome,
                Err(actual) => current = actual,
            }
        }
    }

    /// Takes the item for the consumer that popped it off the FIFO at time `now`; returns the
    /// time of the add it was queued for.
    ///
    /// # Panics
    ///
    /// If the slot is not `Queued`: every FIFO entry is pushed by the one transition to `Queued`
    /// that it stands for, so anything else means that invariant is broken.
    pub(super) fn take(&self, now: u64) -> u64 {
        // Only the consumer that popped this item's one FIFO entry writes `started` now: the
        // slot is `Queued`, and no other consumer can hold it until this one is done.
        self.started.store(now, Ordering::Relaxed);
        match self.apply(Event::Take) {
            Outcome::Taken { since } => since,
            other => panic!("queue invariant broken: an item popped off the FIFO must be Queued, got {other:?}"),
        }
    }

    /// When the current holder took the item, or `None` if no consumer holds it.
    pub(super) fn held_since(&self) -> Option<u64> {
        // The `Acquire` load pairs with the `AcqRel` swap of `take`, after its store of `started`.
        self.state().is_held().then(|| self.started.load(Ordering::Relaxed))
    }

    /// The `started` time of the holder, which only the holder may ask for (before its `done`).
    pub(super) fn started(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }

    /// True once the slot is retired, so that any thread may remove it from the map.
    pub(super) fn is_retired(&self) -> bool {
        self.state() == State::Retired
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    const STATES: [State; 5] = [
        State::Idle,
        State::Queued { since: 7 },
        State::Processing,
        State::ProcessingDirty { since: 9 },
        State::Retired,
    ];

    #[test]
    fn states_should_survive_encoding_with_their_timestamps() {
        for state in STATES {
            assert_eq!(State::decode(state.encode()), state);
        }
        let late = State::Queued { since: u64::MAX };
        assert_eq!(State::decode(late.encode()), State::Queued { since: MAX_STAMP });
    }

    #[test]
    fn only_idle_and_dirty_done_should_lead_to_a_push() {
        for state in STATES {
            for event in [Event::Add { now: 1 }, Event::Take, Event::Done, Event::Retire] {
                let (next, outcome) = step(state, event);
                let pushes = outcome == Outcome::Push;
                let into_queued = matches!(next, Some(State::Queued { .. }));
                assert_eq!(pushes, into_queued, "{state:?} on {event:?}");
                assert_eq!(
                    pushes,
                    matches!(
                        (state, event),
                        (State::Idle, Event::Add { .. }) | (State::ProcessingDirty { .. }, Event::Done)
                    ),
                    "{state:?} on {event:?}"
                );
            }
        }
    }

    #[test]
    fn retired_should_be_final() {
        for event in [Event::Add { now: 1 }, Event::Take, Event::Done, Event::Retire] {
            assert_eq!(step(State::Retired, event).0, None, "{event:?}");
        }
    }

    #[test]
    fn slot_should_requeue_a_dirty_item_with_the_time_of_the_re_add() {
        let slot = Slot::new();
        assert_eq!(slot.apply(Event::Add { now: 1 }), Outcome::Push);
        assert_eq!(slot.apply(Event::Add { now: 2 }), Outcome::Merged);
        assert_eq!(slot.take(3), 1, "the first add's time is kept");
        assert_eq!(slot.held_since(), Some(3));
        assert_eq!(slot.apply(Event::Add { now: 4 }), Outcome::MarkedDirty);
        assert_eq!(slot.apply(Event::Add { now: 5 }), Outcome::Merged);
        assert_eq!(slot.apply(Event::Done), Outcome::Push);
        assert_eq!(slot.state(), State::Queued { since: 4 });
        assert_eq!(slot.held_since(), None);
        slot.take(6);
        assert_eq!(slot.apply(Event::Done), Outcome::Finished);
        assert_eq!(slot.apply(Event::Done), Outcome::NotHeld);
        assert_eq!(slot.apply(Event::Retire), Outcome::Retired);
        assert_eq!(slot.apply(Event::Add { now: 7 }), Outcome::FoundRetired);
    }
}
