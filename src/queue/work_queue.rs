//! An item is queued at most once and is never handed to two consumers at once.
//!
//! The semantics are client-go's `workqueue` (see the [module docs](super)); this file builds them
//! from lock-free parts, with no queue-wide lock:
//!
//! - **Slots** ([`Items`], over a papaya map): one [`Slot`](super::slot::Slot) per item that is
//!   queued or held, its state in one atomic word changed only by compare-and-swap.
//! - **FIFO** (crossbeam's `SegQueue`): the `Queued` items, each exactly once, oldest first.
//! - **Wake-ups**: consumers that find the FIFO empty park on a Tokio [`Notify`].
//! - **Delays** ([`Delays`], over crossbeam's `SkipMap`): delayed adds keyed by (due time,
//!   sequence number), and one timer task per queue that sleeps until the earliest of them.
//!
//! # The item state machine
//!
//! An item without a slot is idle. Every transition is one compare-and-swap of the slot's word
//! through [`step`](super::slot::step), so each has exactly one winner, and only the winner acts
//! on it:
//!
//! | from | event | to | who takes it | and then |
//! |---|---|---|---|---|
//! | no slot | add | `Idle` | a producer, inserting a fresh slot | the next row |
//! | `Idle` | add | `Queued` | a producer | it pushes the item onto the FIFO |
//! | `Queued` | add | `Queued` | a producer | nothing: the add is merged |
//! | `Queued` | take | `Processing` | the consumer that popped the item off the FIFO | it holds the item |
//! | `Processing` | add | `ProcessingDirty` | a producer | nothing yet |
//! | `ProcessingDirty` | add | `ProcessingDirty` | a producer | nothing: the add is merged |
//! | `Processing` | done | `Idle` | the holder | it retires the slot |
//! | `ProcessingDirty` | done | `Queued` | the holder | it pushes the item onto the FIFO |
//! | `Idle` | retire | `Retired` | the holder that made it idle, unless an add revived it first | it removes the slot |
//! | `Retired` | add | `Retired` | a producer | it removes the slot, then adds to a fresh one |
//!
//! Any other event leaves the state alone: `done` of an item the caller does not hold does
//! nothing, and a take of anything but `Queued` is a broken invariant and panics.
//!
//! **Why no item is handed to two consumers.** The item is pushed onto the FIFO only by a
//! transition into `Queued`, and by its one winner, so each `Queued` spell has exactly one FIFO
//! entry, which `SegQueue` hands to exactly one popper. That popper's take is the only way out of
//! `Queued`, so it cannot fail; and from `Processing` or `ProcessingDirty` the only way back to
//! `Queued` is the holder's `done`. Between a take and its `done` the item therefore has no FIFO
//! entry, and no other consumer can get it. A slot is removed only once `Retired`, which only an
//! idle slot can become and which is final, so a queued or held slot is never removed, the popper
//! always finds the slot its entry stands for, and an item never has two live slots.
//!
//! **Why no wake-up is lost.** Every push is followed by [`Notify::notify_one`], which wakes a
//! registered consumer or, if none is registered, leaves a permit for the next. A consumer that
//! finds the FIFO empty registers ([`Notified::enable`]) *before* it looks again, and sleeps only
//! if that second look finds nothing too: a push before the look is seen by it, a push after it
//! notifies a consumer that is already registered. A consumer woken for an item that another took
//! first just registers and looks again; one whose `get` is cancelled after being picked passes the
//! wake-up on (Tokio's `Notified` does so when dropped). Shutdown sets its flag and then calls
//! [`Notify::notify_waiters`], and a consumer registers before it reads the flag, so it either sees
//! the flag or is among the woken. The timer task follows the same pattern on its own `Notify`: it
//! registers before it reads the earliest entry, and a delayed add that becomes the earliest entry
//! wakes it after inserting.
//!
//! # The inbox
//!
//! An [`add`](WorkQueue::add) does not touch the slots: it pushes the item, with its time, onto
//! the inbox (another `SegQueue`) and wakes a consumer. Every other operation first applies the
//! waiting adds, oldest first, through the protocol above: `get` and `done`, which the consumers
//! call all the time, and the readers (`len`, `contains`, `is_idle`, `stats`,
//! `for_each_waiting`), so that what they report includes every add that returned before them.
//! The builders, whose event loop is the collector's serial part, pay for a push instead of a
//! slot lookup and insert in a map of every item in flight (measured on the 1M replay: a
//! DELETED event, which queues each dependent of the object, 1.7–2.0 µs → 1.1–1.3 µs at the
//! median); the consumers, of which there are many, pay for the rest. An add applied late is the
//! same add: it keeps the time it was made, and whichever state the item is in when it is applied
//! decides its effect, as it would have at any moment between the push and the apply. Unlike the
//! slots, the inbox keeps an item added twice twice, so once [`INBOX_LIMIT`] adds wait, the
//! adding thread applies them itself: no consumer need run for the inbox to stay bounded.
//!
//! Wake-ups keep the pattern below: an add pushes before it notifies, and a consumer registers
//! before its look, which applies the inbox first.
//!
//! # Counting, and what is exact when
//!
//! Each operation is atomic, but a sequence of them is not: `len`, `processing_len`,
//! `delayed_len` and the parts of [`stats`](WorkQueue::stats) are each read on their own, and are
//! exact only when no add, `get` or `done` runs meanwhile (as in every single-threaded test).
//! [`is_idle`](WorkQueue::is_idle) is stronger: it never says idle while an item is queued, held,
//! delayed or in the inbox, because its counters are raised before an item enters those states
//! and lowered after it leaves them (see its body for the order it reads them in).
//!
//! # Why the loom model checks `Items` and not the whole queue
//!
//! papaya, crossbeam and Tokio do not take their atomics from the [`sync`](crate::sync) shim, so
//! loom cannot explore their interleavings. The subtle part is the item protocol of the table
//! above, so [`Items`] is generic over its map and FIFO, and the models in `loom_models.rs` run
//! that very code, with [`Slot`](super::slot::Slot) on loom's atomics, over a mutex-guarded map
//! and FIFO that are atomic per operation as papaya's map and `SegQueue` are. The wake-up and
//! timer protocols are argued above and exercised by the paused-clock tests and the `#[ignore]`d
//! stress test.
//!
//! # Performance
//!
//! Against the single-mutex queue this replaced, measured with
//! `queue::stress::add_get_done_timing` (2 cores, release): contended throughput (two producer
//! threads, two consumer tasks) went from about 455 to 365 ns per item, a merged add from about
//! 85 to 65 ns and a `get` + `done` from about 260 to 180 ns; an add of a new item went from about
//! 115 to 175 ns, and a whole add/`get`/`done` round of a new item from about 180 to 250 ns, the
//! price of inserting and reclaiming a slot in the concurrent map.
//! [`PapayaSlots`](super::items::PapayaSlots) records how the map is tuned and the sharded-mutex
//! map that was tried instead.

use super::delay::{Delays, Scheduled};
use super::items::{Added, Items};
use super::metrics::{AtomicHistogram, Counter, QueueStats};
use super::rate_limiter::{RateLimiter, RateLimiterConfig};
use super::slot::{State, MAX_STAMP};
use crate::sync::{fence, AtomicBool, AtomicU8, AtomicUsize, Ordering};
use crossbeam_queue::SegQueue;
use std::hash::Hash;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Adds that may wait in the inbox before the adding thread applies them itself: bounds the
/// inbox's memory when no consumer runs (before the workers start, or in a replay of the builders
/// alone), since the inbox, unlike the slots, keeps an item added twice twice.
pub const INBOX_LIMIT: usize = 1024;

/// Delays are clamped to this so that `now + delay` cannot overflow an `Instant`; no retry
/// sensibly waits longer.
const MAX_DELAY: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// Where an item is, as [`WorkQueue::contains`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueState {
    /// Not known to the queue.
    Absent,
    /// Waiting for a consumer.
    Queued,
    /// Held by a consumer.
    Processing,
    /// Held by a consumer and added again since; it is queued again at `done`.
    ProcessingDirty,
    /// Waiting for the delay of an `add_after`, and not otherwise known to the queue.
    Delayed,
}

/// A de-duplicating, rate-limited MPMC work queue; see the [module docs](super).
pub struct WorkQueue<T> {
    name: &'static str,
    /// Time zero of the slots' timestamps, which are nanoseconds since it.
    epoch: Instant,
    /// Adds not applied to `items` yet, with their times (see "The inbox" in the module docs).
    inbox: SegQueue<(T, u64)>,
    /// Items in `inbox`: raised before a push, lowered after the popped item's add is applied.
    inbox_len: AtomicUsize,
    items: Items<T>,
    /// Woken once per push onto the FIFO, and for every waiter at shutdown.
    ready: Notify,
    delays: Delays<T>,
    timer: Arc<Timer>,
    limiter: RateLimiter<T>,
    /// Set once by [`WorkQueue::shut_down`]; `SeqCst` on both sides, as it pairs with fences.
    shutting_down: AtomicBool,
    /// Set by [`close`](WorkQueue::close): no item is handed out any more.
    closed: AtomicBool,
    adds_total: Counter,
    retries_total: Counter,
    /// Calls of [`forget`](WorkQueue::forget): items that ended their processing in success.
    forgets_total: Counter,
    queue_duration: AtomicHistogram,
    work_duration: AtomicHistogram,
}

/// What the queue and its timer task share.
struct Timer {
    /// Wakes the task: when an earlier entry is inserted, at shutdown, and when the queue drops.
    wake: Notify,
    /// [`TIMER_NONE`], [`TIMER_RUNNING`] or [`TIMER_DEAD`].
    state: AtomicU8,
}

/// No timer task yet: the next delayed add spawns one.
const TIMER_NONE: u8 = 0;
/// A task is spawned and serves every delayed add.
const TIMER_RUNNING: u8 = 1;
/// The task ended, most likely dropped with the runtime it was spawned on.
const TIMER_DEAD: u8 = 2;

/// Owned by the timer task, so that its end, even by being dropped unpolled with its runtime,
/// marks the timer dead.
struct TimerGuard(Arc<Timer>);

impl Drop for TimerGuard {
    fn drop(&mut self) {
        self.0.state.store(TIMER_DEAD, Ordering::SeqCst);
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<T> {
    /// An empty queue called `name` (one of the constants of [`crate::queue`]), whose
    /// rate-limited adds use `limiter`.
    #[must_use]
    pub fn new(name: &'static str, limiter: RateLimiterConfig) -> Arc<Self> {
        Arc::new(WorkQueue {
            name,
            epoch: Instant::now(),
            inbox: SegQueue::new(),
            inbox_len: AtomicUsize::new(0),
            items: Items::default(),
            ready: Notify::new(),
            delays: Delays::default(),
            timer: Arc::new(Timer {
                wake: Notify::new(),
                state: AtomicU8::new(TIMER_NONE),
            }),
            limiter: RateLimiter::new(limiter),
            shutting_down: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            adds_total: Counter::default(),
            retries_total: Counter::default(),
            forgets_total: Counter::default(),
            queue_duration: AtomicHistogram::default(),
            work_duration: AtomicHistogram::default(),
        })
    }

    /// The queue's name, the `name` label of its metrics.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Queues `item`. Does nothing if it is already waiting or the queue is shut down; if a
    /// consumer holds it, it is queued again when that consumer calls [`done`](Self::done).
    ///
    /// The add goes through the inbox (module docs): the caller pays for a push, and the next
    /// operation on the queue applies it, or this call once [`INBOX_LIMIT`] adds wait.
    pub fn add(&self, item: T) {
        if self.is_shut_down() {
            return;
        }
        let now = self.stamp(Instant::now());
        let waiting = self.inbox_len.fetch_add(1, Ordering::SeqCst);
        self.inbox.push((item, now));
        if waiting >= INBOX_LIMIT {
            self.drain_inbox();
        }
        self.ready.notify_one();
    }

    /// Applies the adds waiting in the inbox, oldest first: at most as many as wait when it
    /// starts, so that a producer pushing as fast as this applies cannot keep the caller here.
    /// Every add that returned before the call is among them, or being applied by another caller.
    fn drain_inbox(&self) {
        for _ in 0..self.inbox_len.load(Ordering::SeqCst) {
            let Some((item, since)) = self.inbox.pop() else { return };
            self.apply_add(item, since);
            self.inbox_len.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn apply_add(&self, item: T, now: u64) {
        match self.items.add(item, now) {
            Added::Queued => {
                self.adds_total.inc();
                self.ready.notify_one();
            }
            Added::Dirtied => self.adds_total.inc(),
            Added::Merged => {}
        }
    }

    /// Queues `item` once `delay` has passed (at once for a zero delay). While an earlier delayed
    /// add of the same item is pending, the earlier due time wins. Counts as a retry.
    ///
    /// # Panics
    ///
    /// The first delayed add spawns the queue's timer task, so it must run inside a Tokio
    /// runtime.
    pub fn add_after(self: &Arc<Self>, item: T, delay: Duration) {
        if self.is_shut_down() {
            return;
        }
        self.retries_total.inc();
        if delay.is_zero() || !self.timer_running() {
            // Without a live timer nothing would deliver the item: queue it now rather than lose
            // it. The next delayed add spawns a timer on the current runtime, which also serves
            // the adds the dead one left behind.
            self.add(item);
            return;
        }
        let now = Instant::now();
        let ready = now + delay.min(MAX_DELAY);
        let Scheduled::Pending { ticket, earliest } = self.delays.schedule(&item, ready, now) else {
            return;
        };
        if earliest {
            self.timer.wake.notify_one();
        }
        // Pairs with the fence in `shut_down`: either this add sees the flag, or the shutdown's
        // clearing sees this entry. Both sides withdraw it idempotently.
        fence(Ordering::SeqCst);
        if self.is_shut_down() {
            self.delays.cancel(&item, ticket);
        }
    }

    /// True when a timer task serves delayed adds, spawning one if there is none yet; false when
    /// the last one died, in which case the next call spawns a new one.
    fn timer_running(self: &Arc<Self>) -> bool {
        loop {
            match self.timer.state.load(Ordering::SeqCst) {
                TIMER_RUNNING => return true,
                TIMER_NONE => {
                    // Panics outside a runtime before the state changes, so a later call in a
                    // runtime still spawns the task.
                    let runtime = tokio::runtime::Handle::current();
                    let won = self.timer.state.compare_exchange(
                        TIMER_NONE,
                        TIMER_RUNNING,
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    );
                    if won.is_ok() {
                        runtime.spawn(run_timer(Arc::downgrade(self), TimerGuard(self.timer.clone())));
                        return true;
                    }
                }
                _ => {
                    let _ =
                        self.timer
                            .state
                            .compare_exchange(TIMER_DEAD, TIMER_NONE, Ordering::SeqCst, Ordering::SeqCst);
                    return false;
                }
            }
        }
    }

    /// Queues `item` at once if a delayed add of it is pending, and withdraws that add: for an
    /// item whose retry can no longer matter, so that its consumer lets it go now rather than the
    /// queue holding it until its backoff ends (upstream's limiter backs off up to 1000 s).
    pub fn expedite(&self, item: &T) {
        if self.delays.contains(item) {
            // The add first: in between, the item is in both places, never in neither, so that
            // `is_idle` cannot see the queue idle while it still has work.
            self.add(item.clone());
            self.delays.withdraw(item);
        }
    }

    /// Queues `item` after the rate limiter's delay for it, and counts one more failure for it.
    pub fn add_rate_limited(self: &Arc<Self>, item: T) {
        let delay = self.limiter.when(&item);
        self.add_after(item, delay);
    }

    /// Resets the backoff of `item`; call it when the item was processed successfully.
    pub fn forget(&self, item: &T) {
        self.forgets_total.inc();
        self.limiter.forget(item);
    }

    /// Calls of [`forget`](Self::forget) so far: items whose processing ended in success, the
    /// progress the stall detector looks for.
    pub fn forgets_total(&self) -> u64 {
        self.forgets_total.get()
    }

    /// Calls `f` with every item the queue is working on (queued, held or delayed) and when it
    /// started waiting; an item may come more than once, with different times. The time is the
    /// earliest the queue knows of: the item's first failure since it was last
    /// [forgotten](Self::forget), else the delayed add that is pending for it, else the add that
    /// queued it, else when a consumer took it. An item that waits for a monitor's view goes
    /// through a delayed add without failing, so its age restarts at each of those rounds.
    ///
    /// Walks every item, so it is for scrapes and debug pages, not for hot paths; weakly
    /// consistent, as [`stats`](Self::stats) is.
    pub fn for_each_waiting(&self, mut f: impl FnMut(&T, Instant)) {
        self.drain_inbox();
        self.items
            .for_each_waiting(|item, since| f(item, self.epoch + Duration::from_nanos(since)));
        self.delays.for_each_pending(&mut f);
        self.limiter.for_each_failing(f);
    }

    /// When the oldest item the queue is working on started waiting (see
    /// [`for_each_waiting`](Self::for_each_waiting)); `None` when there is none.
    pub fn oldest_waiting(&self) -> Option<Instant> {
        let mut oldest: Option<Instant> = None;
        self.for_each_waiting(|_, since| oldest = Some(oldest.map_or(since, |o| o.min(since))));
        oldest
    }

    /// The failures recorded for `item` since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.limiter.num_requeues(item)
    }

    /// Waits for an item and marks it as being processed; the caller must pass it to
    /// [`done`](Self::done) afterwards. After shutdown, returns the items still queued, then
    /// `None`.
    ///
    /// Cancel-safe: an item is taken only in the same step that returns it, so dropping the future
    /// (in a `select!`, say) loses nothing.
    pub async fn get(&self) -> Option<T> {
        // Fast path: an item is there, no need to register for a wake-up.
        if let Some(item) = self.take() {
            return Some(item);
        }
        let notified = self.ready.notified();
        tokio::pin!(notified);
        loop {
            // Registering before looking means a push or shutdown that comes after the look
            // always finds this waiter to wake.
            notified.as_mut().enable();
            if let Some(item) = self.take() {
                return Some(item);
            }
            if self.is_shut_down() {
                return None;
            }
            notified.as_mut().await;
            notified.set(self.ready.notified());
        }
    }

    fn take(&self) -> Option<T> {
        if self.closed.load(Ordering::SeqCst) {
            return None;
        }
        self.drain_inbox();
        let now = self.stamp(Instant::now());
        let taken = self.items.take(now)?;
        self.queue_duration.observe(elapsed(taken.since, now));
        Some(taken.item)
    }

    /// Ends the processing of `item`, queueing it again if it was added meanwhile. Does nothing
    /// for an item no consumer holds.
    pub fn done(&self, item: &T) {
        self.drain_inbox();
        let now = self.stamp(Instant::now());
        let Some(finished) = self.items.done(item) else {
            return;
        };
        self.work_duration.observe(elapsed(finished.started, now));
        if finished.requeued {
            self.ready.notify_one();
        }
    }

    /// Stops the queue: later adds are dropped, pending delayed adds are discarded, and every
    /// consumer waiting in [`get`](Self::get) wakes up. Items already queued are still handed out.
    ///
    /// An add that runs at the same time as this may still land after it, as if it had come
    /// just before; a consumer that already got `None` does not see that item.
    pub fn shut_down(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        // Pairs with the fence in `add_after`.
        fence(Ordering::SeqCst);
        self.delays.clear();
        self.timer.wake.notify_one();
        self.ready.notify_waiters();
    }

    /// Shuts the queue down and hands out nothing more, not even the items still queued: each
    /// consumer finishes the item it holds and then gets `None`. For a collector that stops
    /// acting (its ranges change hands) without abandoning a request half sent.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.shut_down();
    }

    fn is_shut_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Items waiting for a consumer.
    pub fn len(&self) -> usize {
        self.drain_inbox();
        self.items.len()
    }

    /// True when no item waits for a consumer.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Items held by consumers.
    pub fn processing_len(&self) -> usize {
        self.items.processing_len()
    }

    /// Items waiting for the delay of a delayed add.
    pub fn delayed_len(&self) -> usize {
        self.delays.len()
    }

    /// True when nothing is queued, held by a consumer or waiting for a delay.
    ///
    /// Never true while an item is in any of those states; it may stay false for a moment after
    /// the last one left them.
    pub fn is_idle(&self) -> bool {
        self.drain_inbox();
        // In the order items move, each count raised before the one it leaves is lowered: a
        // delivery adds the item (raising the inbox count) before it lowers the delayed count,
        // and the inbox's add is applied (raising the slot count) before the inbox count is
        // lowered. Read in that order, no item can move from a count not yet read to one
        // already read.
        self.delays.len() == 0 && self.inbox_len.load(Ordering::SeqCst) == 0 && self.items.is_idle()
    }

    /// Where `item` is. An item can be both delayed and queued or processing; the more advanced
    /// state is reported.
    pub fn contains(&self, item: &T) -> QueueState {
        self.drain_inbox();
        match self.items.state(item) {
            Some(State::Queued { .. }) => QueueState::Queued,
            Some(State::Processing) => QueueState::Processing,
            Some(State::ProcessingDirty { .. }) => QueueState::ProcessingDirty,
            _ if self.delays.contains(item) => QueueState::Delayed,
            _ => QueueState::Absent,
        }
    }

    /// A snapshot of the counters. Each figure is read on its own, so while the queue is busy they
    /// may not add up; they are exact when no add, `get` or `done` runs meanwhile.
    pub fn stats(&self) -> QueueStats {
        self.drain_inbox();
        let now = self.stamp(Instant::now());
        let (mut unfinished, mut longest) = (0.0, 0.0);
        self.items.for_each_held(|started| {
            let held = elapsed(started, now).as_secs_f64();
            unfinished += held;
            longest = f64::max(longest, held);
        });
        QueueStats {
            name: self.name,
            adds_total: self.adds_total.get(),
            retries_total: self.retries_total.get(),
            forgets_total: self.forgets_total.get(),
            depth: self.items.len(),
            processing: self.items.processing_len(),
            delayed: self.delays.len(),
            queue_duration: self.queue_duration.snapshot(),
            work_duration: self.work_duration.snapshot(),
            unfinished_work_seconds: unfinished,
            longest_running_processor_seconds: longest,
            oldest_waiting_seconds: self.oldest_waiting().map_or(0.0, |since| {
                Instant::now().saturating_duration_since(since).as_secs_f64()
            }),
        }
    }

    /// Timer task only: queues the due delayed adds that are still pending, and returns when the
    /// next one is due.
    fn deliver_due(&self) -> Option<Instant> {
        self.delays.deliver_due(Instant::now(), |item| self.add(item))
    }

    /// `now` in the slots' time base.
    fn stamp(&self, now: Instant) -> u64 {
        let nanos = now.saturating_duration_since(self.epoch).as_nanos();
        u64::try_from(nanos).unwrap_or(u64::MAX).min(MAX_STAMP)
    }
}

/// The time from `from` to `to`, both in the slots' time base.
fn elapsed(from: u64, to: u64) -> Duration {
    Duration::from_nanos(to.saturating_sub(from))
}

/// The timer task: delivers delayed adds as they come due, sleeping until the earliest. Holds the
/// queue only by a [`Weak`] while it sleeps, and ends when the queue is shut down or dropped.
async fn run_timer<T>(queue: Weak<WorkQueue<T>>, timer: TimerGuard)
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    loop {
        let notified = timer.0.wake.notified();
        tokio::pin!(notified);
        // Registered before reading the earliest entry, so an earlier one inserted after the read
        // wakes this sleep.
        notified.as_mut().enable();
        let next_due = {
            let Some(queue) = queue.upgrade() else { return };
            if queue.is_shut_down() {
                return;
            }
            queue.deliver_due()
        };
        sleep_until(next_due, notified).await;
    }
}

/// Sleeps until `deadline` (forever without one), or until `woken` fires.
async fn sleep_until(deadline: Option<Instant>, woken: std::pin::Pin<&mut Notified<'_>>) {
    match deadline {
        Some(deadline) => {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                () = woken => {}
            }
        }
        None => woken.await,
    }
}

impl<T> Drop for WorkQueue<T> {
    fn drop(&mut self) {
        // Lets a sleeping timer task find the queue gone and end.
        self.timer.wake.notify_one();
    }
}

impl<T> std::fmt::Debug for WorkQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use parking_lot::Mutex;
    use std::collections::HashSet;

    fn queue() -> Arc<WorkQueue<u32>> {
        WorkQueue::new("test", RateLimiterConfig::default())
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Lets spawned tasks run until they block; with a paused clock this never moves time.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[test]
    fn queue_and_its_get_future_should_be_send_and_sync() {
        fn is_send_sync<X: Send + Sync>(_: &X) {}
        fn is_send<X: Send>(_: &X) {}
        let q = queue();
        is_send_sync(&q);
        is_send(&q.get());
    }

    #[tokio::test(start_paused = true)]
    async fn queue_should_ignore_add_of_an_item_already_queued() {
        let q = queue();
        q.add(1);
        q.add(2);
        q.add(1);
        assert_eq!(q.len(), 2);
        assert_eq!(q.get().await, Some(1));
        assert_eq!(q.get().await, Some(2));
        assert!(q.is_empty());
        assert_eq!(q.stats().adds_total, 2, "a merged add is not counted");
    }

    #[tokio::test(start_paused = true)]
    async fn queue_should_requeue_an_item_added_while_processing_once_after_done() {
        let q = queue();
        q.add(1);
        let item = q.get().await;
        assert_eq!(item, Some(1));
        q.add(1);
        q.add(1);
        assert_eq!(q.len(), 0, "a held item is not handed to a second consumer");
        assert_eq!(q.contains(&1), QueueState::ProcessingDirty);

        q.done(&1);
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await, Some(1));
        q.done(&1);
        assert!(q.is_idle(), "the two re-adds led to exactly one more round");
    }

    #[tokio::test(start_paused = true)]
    async fn done_should_ignore_an_item_no_consumer_holds() {
        let q = queue();
        q.add(1);
        q.done(&1);
        assert_eq!(q.len(), 1, "done of a queued item must not queue it twice");
    }

    #[tokio::test(start_paused = true)]
    async fn add_rate_limited_should_back_off_per_item_until_forget() {
        let q = queue();
        for expected in [5, 10, 20] {
            let before = Instant::now();
            q.add_rate_limited(7);
            assert_eq!(q.get().await, Some(7));
            assert_eq!(before.elapsed(), ms(expected));
            q.done(&7);
        }
        assert_eq!(q.num_requeues(&7), 3);
        q.forget(&7);
        assert_eq!(q.num_requeues(&7), 0);
        let before = Instant::now();
        q.add_rate_limited(7);
        assert_eq!(q.get().await, Some(7));
        assert_eq!(before.elapsed(), ms(5), "forget restarts from the base delay");
        assert_eq!(q.stats().retries_total, 4);
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_should_deliver_after_the_delay_and_keep_the_earliest() {
        let q = queue();
        let start = Instant::now();
        q.add_after(1, ms(50));
        q.add_after(1, ms(20));
        q.add_after(1, ms(80));
        assert_eq!(q.delayed_len(), 1);
        assert_eq!(q.contains(&1), QueueState::Delayed);
        assert!(q.is_empty());
        assert!(!q.is_idle());

        assert_eq!(q.get().await, Some(1));
        assert_eq!(start.elapsed(), ms(20));
        q.done(&1);
        tokio::time::sleep(ms(100)).await;
        assert!(q.is_idle(), "the superseded 50 ms and 80 ms adds are not delivered");
    }

    #[tokio::test(start_paused = true)]
    async fn expedite_should_queue_a_delayed_item_at_once_and_drop_its_delay() {
        let q = queue();
        q.add_after(1, Duration::from_secs(1000));
        q.expedite(&2); // not delayed: nothing to bring forward
        let start = Instant::now();
        q.expedite(&1);
        assert_eq!(q.delayed_len(), 0, "the delayed add no longer holds the item");
        assert_eq!(q.get().await, Some(1));
        assert_eq!(start.elapsed(), Duration::ZERO);
        q.done(&1);
        assert!(q.is_idle(), "and 2 was never queued");
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_with_zero_delay_should_add_at_once() {
        let q = queue();
        q.add_after(1, Duration::ZERO);
        assert_eq!(q.len(), 1);
        assert_eq!(q.delayed_len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_should_deliver_items_in_due_order() {
        let q = queue();
        q.add_after(3, ms(30));
        q.add_after(1, ms(10));
        q.add_after(2, ms(20));
        for expected in 1..=3 {
            assert_eq!(q.get().await, Some(expected));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_should_wake_a_blocked_get_with_none_and_drop_later_adds() {
        let q = queue();
        let consumer = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        settle().await;
        assert!(!consumer.is_finished());
        q.shut_down();
        assert_eq!(consumer.await.ok(), Some(None));

        q.add(1);
        q.add_after(2, ms(10));
        assert!(q.is_idle());
        assert_eq!(q.get().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn get_should_drain_queued_items_after_shut_down_then_return_none() {
        let q = queue();
        q.add(1);
        q.add(2);
        q.shut_down();
        assert_eq!(q.get().await, Some(1));
        assert_eq!(q.get().await, Some(2));
        assert_eq!(q.get().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_should_discard_pending_delayed_adds() {
        let q = queue();
        q.add_after(1, ms(10));
        q.shut_down();
        assert_eq!(q.delayed_len(), 0);
        tokio::time::sleep(ms(20)).await;
        assert_eq!(q.get().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn is_idle_should_track_queued_processing_and_delayed_items() {
        let q = queue();
        assert!(q.is_idle());
        q.add(1);
        assert!(!q.is_idle());
        assert_eq!(q.get().await, Some(1));
        assert!(!q.is_idle(), "an item held by a consumer keeps the queue busy");
        assert_eq!(q.processing_len(), 1);
        q.done(&1);
        assert!(q.is_idle());
        q.add_after(1, ms(10));
        assert!(!q.is_idle());
    }

    #[test]
    fn an_add_should_wait_in_the_inbox_until_the_next_operation_applies_it() {
        let q = queue();
        q.add(7);
        q.add(7);
        assert_eq!((q.inbox.len(), q.items.len()), (2, 0), "the adds only pushed");
        assert_eq!(q.contains(&7), QueueState::Queued);
        assert_eq!((q.inbox.len(), q.inbox_len.load(Ordering::SeqCst)), (0, 0));
        assert_eq!(
            (q.len(), q.stats().adds_total),
            (1, 1),
            "applied as one add and one merge"
        );
    }

    #[tokio::test]
    async fn a_closed_queue_should_hand_out_nothing_more_while_its_consumer_finishes_its_item() {
        let q = queue();
        q.add(1);
        q.add(2);
        let held = q.get().await.expect("an item before the close");
        q.close();
        assert_eq!(q.get().await, None, "the item still queued is not handed out");
        q.done(&held);
        q.add(3);
        assert_eq!(q.get().await, None, "nor is a later add");
    }

    #[test]
    fn adds_beyond_the_inbox_limit_should_be_applied_by_the_adding_thread() {
        let q = queue();
        for i in 0..3 * INBOX_LIMIT {
            q.add(u32::try_from(i % 5).unwrap());
            assert!(q.inbox.len() <= INBOX_LIMIT + 1, "the inbox held {}", q.inbox.len());
        }
        assert!(q.items.len() > 0, "no consumer ran, yet the adding thread applied adds");
        assert_eq!(q.len(), 5, "every add of the five items was applied, each queued once");
    }

    #[tokio::test(start_paused = true)]
    async fn stats_should_report_depth_and_durations() {
        let q = queue();
        q.add(1);
        q.add(2);
        tokio::time::advance(ms(3)).await;
        let item = q.get().await;
        assert_eq!(item, Some(1));
        tokio::time::advance(ms(40)).await;
        q.done(&1);
        q.add_after(3, ms(10));

        let stats = q.stats();
        assert_eq!(
            (stats.name, stats.depth, stats.processing, stats.delayed),
            ("test", 1, 0, 1)
        );
        assert_eq!(stats.queue_duration.count, 1);
        assert!((stats.queue_duration.sum_seconds - 0.003).abs() < 1e-9);
        assert_eq!(stats.queue_duration.buckets[5], 0, "3 ms is above the 1 ms bucket");
        assert_eq!(stats.queue_duration.buckets[6], 1);
        assert!((stats.work_duration.sum_seconds - 0.040).abs() < 1e-9);

        let item = q.get().await;
        assert_eq!(item, Some(2));
        tokio::time::advance(ms(5)).await;
        let stats = q.stats();
        assert!((stats.longest_running_processor_seconds - 0.005).abs() < 1e-9);
        assert!((stats.unfinished_work_seconds - 0.005).abs() < 1e-9);
    }

    #[tokio::test(start_paused = true)]
    async fn oldest_waiting_should_age_an_item_from_its_first_failure_until_forget() {
        let q = queue();
        assert_eq!(q.oldest_waiting(), None);
        let start = Instant::now();
        q.add(1);
        tokio::time::advance(ms(10)).await;
        q.add(2);
        assert_eq!(q.oldest_waiting(), Some(start), "queued: from the add");

        assert_eq!(q.get().await, Some(1));
        tokio::time::advance(ms(10)).await;
        assert_eq!(q.get().await, Some(2));
        assert_eq!(
            q.oldest_waiting(),
            Some(start + ms(10)),
            "held: from the take, which was 10 ms after the add for item 1"
        );
        q.add_rate_limited(1);
        q.done(&1);
        q.forget(&2);
        q.done(&2);
        assert_eq!(
            q.oldest_waiting(),
            Some(start + ms(20)),
            "delayed: from its first failure"
        );
        for _ in 0..3 {
            assert_eq!(q.get().await, Some(1));
            q.add_rate_limited(1);
            q.done(&1);
        }
        assert_eq!(
            q.oldest_waiting(),
            Some(start + ms(20)),
            "retries do not restart the age"
        );
        assert_eq!(q.get().await, Some(1));
        q.forget(&1);
        q.done(&1);
        assert_eq!(q.oldest_waiting(), None);
        assert_eq!(q.stats().oldest_waiting_seconds, 0.0);
        assert_eq!(q.forgets_total(), 2);
    }

    #[test]
    fn add_after_should_queue_at_once_when_the_delivery_task_died_with_its_runtime() {
        let q = queue();
        let runtime = || tokio::runtime::Builder::new_current_thread().enable_time().build();
        let (Ok(first), Ok(second)) = (runtime(), runtime()) else {
            panic!("cannot build a test runtime");
        };
        first.block_on(async { q.add_after(1, ms(10)) });
        drop(first);
        second.block_on(async { q.add_after(2, ms(10)) });
        assert_eq!(q.contains(&2), QueueState::Queued);
        second.block_on(async { q.add_after(3, ms(10)) });
        assert_eq!(
            q.contains(&3),
            QueueState::Delayed,
            "a new task serves later delayed adds"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_consumers_should_never_hold_the_same_item_at_once() {
        const ITEMS: u32 = 1000;
        let q = queue();
        let held = Arc::new(Mutex::new(HashSet::new()));
        let rounds = Arc::new(Mutex::new(vec![0u32; ITEMS as usize]));
        let consumers: Vec<_> = (0..4)
            .map(|_| tokio::spawn(consume(q.clone(), held.clone(), rounds.clone())))
            .collect();
        // Trickle the items in so that consumers keep falling asleep and being woken by adds.
        for item in 0..ITEMS {
            q.add(item);
            if item % 10 == 0 {
                tokio::task::yield_now().await;
            }
        }

        let drained = tokio::time::timeout(Duration::from_secs(30), async {
            while !q.is_idle() {
                tokio::task::yield_now().await;
            }
        });
        assert!(
            drained.await.is_ok(),
            "likely deadlocked: consumers never drained the queue"
        );
        q.shut_down();
        for consumer in consumers {
            assert!(consumer.await.is_ok(), "a consumer saw an item held twice");
        }
        for (item, n) in rounds.lock().iter().enumerate() {
            let expected = if item % 3 == 0 { 2 } else { 1 };
            assert_eq!(*n, expected, "item {item} processed {n} times");
        }
    }

    /// A consumer that re-adds every third item during its first round, so that item is dirty
    /// when done and must come back exactly once.
    async fn consume(q: Arc<WorkQueue<u32>>, held: Arc<Mutex<HashSet<u32>>>, rounds: Arc<Mutex<Vec<u32>>>) {
        while let Some(item) = q.get().await {
            assert!(held.lock().insert(item), "item {item} handed out while held");
            let round = {
                let mut rounds = rounds.lock();
                rounds[item as usize] += 1;
                rounds[item as usize]
            };
            tokio::task::yield_now().await;
            if item % 3 == 0 && round == 1 {
                q.add(item);
            }
            held.lock().remove(&item);
            q.done(&item);
        }
    }
}
