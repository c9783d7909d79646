//! An item is queued at most once and is never handed to two consumers at once.
//!
//! The queue is client-go's `workqueue` (plain, delaying and rate-limiting layers in one type):
//!
//! - `dirty` holds every item that still has to be processed; `queue` is the part of it that no
//!   consumer holds, in arrival order; `processing` holds the items between [`WorkQueue::get`] and
//!   [`WorkQueue::done`]. An item in both `dirty` and `processing` was re-added while a consumer
//!   held it, and goes back on `queue` at `done`.
//! - All three sit under one `parking_lot` mutex that is never held across an `.await`. Consumers
//!   sleep on a [`Notify`]: each item put on `queue` wakes one of them, shutdown wakes all.
//! - Delayed adds live in `delayed` (one pending due time per item, the earliest) and in a heap
//!   owned by one delivery task per queue, spawned on the first delayed add. The task holds only a
//!   [`Weak`] reference, so it ends when the queue is shut down or dropped.

use super::rate_limiter::{RateLimiter, RateLimiterConfig};
use parking_lot::Mutex;
use std::cmp::{Ordering, Reverse};
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Upper bounds, in seconds, of the duration histograms: client-go's workqueue buckets, 10 ns to
/// 10 s, a factor of ten apart.
pub const DURATION_BUCKETS: [f64; 10] = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0];

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

/// A Prometheus-style histogram of durations over [`DURATION_BUCKETS`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DurationHistogram {
    /// Cumulative counts: `buckets[i]` observations took at most `DURATION_BUCKETS[i]` seconds.
    pub buckets: [u64; DURATION_BUCKETS.len()],
    /// Number of observations.
    pub count: u64,
    /// Sum of the observations, in seconds.
    pub sum_seconds: f64,
}

impl DurationHistogram {
    fn observe(&mut self, d: Duration) {
        let seconds = d.as_secs_f64();
        for (bucket, bound) in self.buckets.iter_mut().zip(DURATION_BUCKETS) {
            if seconds <= bound {
                *bucket += 1;
            }
        }
        self.count += 1;
        self.sum_seconds += seconds;
    }
}

/// A snapshot of a queue's counters, the source of the `workqueue_*` metrics (label `name`).
#[derive(Clone, Debug, PartialEq)]
pub struct QueueStats {
    /// The queue's name.
    pub name: &'static str,
    /// Adds that were not merged into an item already waiting (`workqueue_adds_total`).
    pub adds_total: u64,
    /// Delayed and rate-limited adds (`workqueue_retries_total`).
    pub retries_total: u64,
    /// Items waiting for a consumer (`workqueue_depth`).
    pub depth: usize,
    /// Items held by consumers.
    pub processing: usize,
    /// Items waiting for their delay.
    pub delayed: usize,
    /// Time from add to `get` (`workqueue_queue_duration_seconds`).
    pub queue_duration: DurationHistogram,
    /// Time from `get` to `done` (`workqueue_work_duration_seconds`).
    pub work_duration: DurationHistogram,
    /// Time the items now held by consumers have been held, summed
    /// (`workqueue_unfinished_work_seconds`).
    pub unfinished_work_seconds: f64,
    /// The longest time any item now held has been held
    /// (`workqueue_longest_running_processor_seconds`).
    pub longest_running_processor_seconds: f64,
}

/// A de-duplicating, rate-limited MPMC work queue; see the [module docs](super).
pub struct WorkQueue<T> {
    name: &'static str,
    state: Mutex<State<T>>,
    /// Woken once per item put on `queue`, and for every waiter at shutdown.
    ready: Notify,
    limiter: RateLimiter<T>,
}

struct State<T> {
    /// Items waiting for a consumer, oldest first. Each is also in `dirty`, never in `processing`.
    queue: VecDeque<T>,
    /// Items that must be processed (again), with the time of the add that made them so.
    dirty: HashMap<T, Instant>,
    /// Items held by consumers, with the time `get` handed them out.
    processing: HashMap<T, Instant>,
    /// Items waiting for a delayed add; only the entry with this sequence number is delivered.
    delayed: HashMap<T, Pending>,
    /// The delivery task's inbox: `None` before the first delayed add and after shutdown.
    delay_tx: Option<UnboundedSender<DelayEntry<T>>>,
    next_seq: u64,
    shutting_down: bool,
    adds_total: u64,
    retries_total: u64,
    queue_duration: DurationHistogram,
    work_duration: DurationHistogram,
}

#[derive(Clone, Copy)]
struct Pending {
    ready: Instant,
    seq: u64,
}

/// One delayed add, ordered by due time, then by order of arrival.
struct DelayEntry<T> {
    ready: Instant,
    seq: u64,
    item: T,
}

/// What a consumer finds when it looks at the queue.
enum Taken<T> {
    Item(T),
    ShutDown,
    Empty,
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<T> {
    /// An empty queue called `name` (one of the constants of [`crate::queue`]), whose
    /// rate-limited adds use `limiter`.
    #[must_use]
    pub fn new(name: &'static str, limiter: RateLimiterConfig) -> Arc<Self> {
        Arc::new(WorkQueue {
            name,
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashMap::new(),
                processing: HashMap::new(),
                delayed: HashMap::new(),
                delay_tx: None,
                next_seq: 0,
                shutting_down: false,
                adds_total: 0,
                retries_total: 0,
                queue_duration: DurationHistogram::default(),
                work_duration: DurationHistogram::default(),
            }),
            ready: Notify::new(),
            limiter: RateLimiter::new(limiter),
        })
    }

    /// The queue's name, the `name` label of its metrics.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Queues `item`. Does nothing if it is already waiting or the queue is shut down; if a
    /// consumer holds it, it is queued again when that consumer calls [`done`](Self::done).
    pub fn add(&self, item: T) {
        let queued = self.state.lock().add(item, Instant::now());
        if queued {
            self.ready.notify_one();
        }
    }

    /// Queues `item` once `delay` has passed (at once for a zero delay). While an earlier delayed
    /// add of the same item is pending, the earlier due time wins. Counts as a retry.
    ///
    /// # Panics
    ///
    /// The first delayed add spawns the queue's delivery task, so it must run inside a Tokio
    /// runtime.
    pub fn add_after(self: &Arc<Self>, item: T, delay: Duration) {
        let now = Instant::now();
        let mut state = self.state.lock();
        if state.shutting_down {
            return;
        }
        state.retries_total += 1;
        let queued = if delay.is_zero() {
            state.add(item, now)
        } else {
            self.schedule(&mut state, item, now, now + delay.min(MAX_DELAY))
        };
        drop(state);
        if queued {
            self.ready.notify_one();
        }
    }

    /// Records a delayed add in `state` and hands it to the delivery task; returns whether the
    /// item was queued at once instead.
    fn schedule(self: &Arc<Self>, state: &mut State<T>, item: T, now: Instant, ready: Instant) -> bool {
        if state.delayed.get(&item).is_some_and(|p| p.ready <= ready) {
            return false;
        }
        let seq = state.next_seq;
        state.next_seq += 1;
        state.delayed.insert(item.clone(), Pending { ready, seq });
        let sender = state
            .delay_tx
            .get_or_insert_with(|| spawn_delivery(Arc::downgrade(self)));
        let entry = DelayEntry {
            ready,
            seq,
            item: item.clone(),
        };
        if sender.send(entry).is_ok() {
            return false;
        }
        // The task died with the runtime it was spawned on. Queue the item now rather than lose
        // it, and let the next delayed add spawn a task on the current runtime.
        state.delay_tx = None;
        state.delayed.remove(&item);
        state.add(item, now)
    }

    /// Queues `item` after the rate limiter's delay for it, and counts one more failure for it.
    pub fn add_rate_limited(self: &Arc<Self>, item: T) {
        let delay = self.limiter.when(&item);
        self.add_after(item, delay);
    }

    /// Resets the backoff of `item`; call it when the item was processed successfully.
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
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
        let notified = self.ready.notified();
        tokio::pin!(notified);
        loop {
            // Registering before looking means an add or shutdown that comes after the look
            // always finds this waiter to wake.
            notified.as_mut().enable();
            let taken = self.state.lock().take(Instant::now());
            match taken {
                Taken::Item(item) => return Some(item),
                Taken::ShutDown => return None,
                Taken::Empty => {}
            }
            notified.as_mut().await;
            notified.set(self.ready.notified());
        }
    }

    /// Ends the processing of `item`, queueing it again if it was added meanwhile. Does nothing
    /// for an item no consumer holds.
    pub fn done(&self, item: &T) {
        let now = Instant::now();
        let mut state = self.state.lock();
        let Some(started) = state.processing.remove(item) else {
            return;
        };
        state.work_duration.observe(now.saturating_duration_since(started));
        let requeue = state.dirty.contains_key(item);
        if requeue {
            state.queue.push_back(item.clone());
        }
        drop(state);
        if requeue {
            self.ready.notify_one();
        }
    }

    /// Stops the queue: later adds are dropped, pending delayed adds are discarded, and every
    /// consumer waiting in [`get`](Self::get) wakes up. Items already queued are still handed out.
    pub fn shut_down(&self) {
        {
            let mut state = self.state.lock();
            state.shutting_down = true;
            // Dropping the only sender ends the delivery task.
            state.delay_tx = None;
            state.delayed.clear();
        }
        self.ready.notify_waiters();
    }

    /// Items waiting for a consumer.
    pub fn len(&self) -> usize {
        self.state.lock().queue.len()
    }

    /// True when no item waits for a consumer.
    pub fn is_empty(&self) -> bool {
        self.state.lock().queue.is_empty()
    }

    /// Items held by consumers.
    pub fn processing_len(&self) -> usize {
        self.state.lock().processing.len()
    }

    /// Items waiting for the delay of a delayed add.
    pub fn delayed_len(&self) -> usize {
        self.state.lock().delayed.len()
    }

    /// True when nothing is queued, held by a consumer or waiting for a delay.
    pub fn is_idle(&self) -> bool {
        let state = self.state.lock();
        state.queue.is_empty() && state.processing.is_empty() && state.delayed.is_empty()
    }

    /// Where `item` is. An item can be both delayed and queued or processing; the more advanced
    /// state is reported.
    pub fn contains(&self, item: &T) -> QueueState {
        let state = self.state.lock();
        let dirty = state.dirty.contains_key(item);
        match (state.processing.contains_key(item), dirty) {
            (true, true) => QueueState::ProcessingDirty,
            (true, false) => QueueState::Processing,
            (false, true) => QueueState::Queued,
            (false, false) if state.delayed.contains_key(item) => QueueState::Delayed,
            (false, false) => QueueState::Absent,
        }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> QueueStats {
        let now = Instant::now();
        let state = self.state.lock();
        let held = state
            .processing
            .values()
            .map(|started| now.saturating_duration_since(*started).as_secs_f64());
        let (unfinished, longest) = held.fold((0.0, 0.0), |(sum, max), s| (sum + s, f64::max(max, s)));
        QueueStats {
            name: self.name,
            adds_total: state.adds_total,
            retries_total: state.retries_total,
            depth: state.queue.len(),
            processing: state.processing.len(),
            delayed: state.delayed.len(),
            queue_duration: state.queue_duration.clone(),
            work_duration: state.work_duration.clone(),
            unfinished_work_seconds: unfinished,
            longest_running_processor_seconds: longest,
        }
    }

    /// Queues the due delayed adds that are still the pending one for their item.
    fn deliver(&self, due: Vec<DelayEntry<T>>) {
        let now = Instant::now();
        let mut queued = 0;
        {
            let mut state = self.state.lock();
            for entry in due {
                if state.delayed.get(&entry.item).is_some_and(|p| p.seq == entry.seq) {
                    state.delayed.remove(&entry.item);
                    queued += usize::from(state.add(entry.item, now));
                }
            }
        }
        for _ in 0..queued {
            self.ready.notify_one();
        }
    }
}

impl<T: Clone + Eq + Hash> State<T> {
    /// client-go's `Add`; returns true when the item went onto `queue`.
    fn add(&mut self, item: T, now: Instant) -> bool {
        if self.shutting_down || self.dirty.contains_key(&item) {
            return false;
        }
        self.adds_total += 1;
        let held = self.processing.contains_key(&item);
        self.dirty.insert(item.clone(), now);
        if !held {
            self.queue.push_back(item);
        }
        !held
    }

    fn take(&mut self, now: Instant) -> Taken<T> {
        let Some(item) = self.queue.pop_front() else {
            return if self.shutting_down {
                Taken::ShutDown
            } else {
                Taken::Empty
            };
        };
        if let Some(added) = self.dirty.remove(&item) {
            self.queue_duration.observe(now.saturating_duration_since(added));
        }
        self.processing.insert(item.clone(), now);
        Taken::Item(item)
    }
}

fn spawn_delivery<T>(queue: Weak<WorkQueue<T>>) -> UnboundedSender<DelayEntry<T>>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(deliver_delayed(queue, rx));
    tx
}

/// The delivery task: keeps delayed adds in a heap and queues each when it is due. Ends when the
/// queue drops its sender (shutdown or drop) or is gone.
async fn deliver_delayed<T>(queue: Weak<WorkQueue<T>>, mut inbox: UnboundedReceiver<DelayEntry<T>>)
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    let mut heap = BinaryHeap::new();
    loop {
        let next_due = heap.peek().map(|Reverse(entry): &Reverse<DelayEntry<T>>| entry.ready);
        tokio::select! {
            received = inbox.recv() => match received {
                Some(entry) => heap.push(Reverse(entry)),
                None => return,
            },
            () = sleep_until(next_due) => {
                let Some(queue) = queue.upgrade() else { return };
                queue.deliver(pop_due(&mut heap, Instant::now()));
            }
        }
    }
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

fn pop_due<T>(heap: &mut BinaryHeap<Reverse<DelayEntry<T>>>, now: Instant) -> Vec<DelayEntry<T>> {
    let mut due = Vec::new();
    while let Some(top) = heap.peek_mut() {
        if top.0.ready > now {
            break;
        }
        due.push(PeekMut::pop(top).0);
    }
    due
}

impl<T> PartialEq for DelayEntry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
    }
}

impl<T> Eq for DelayEntry<T> {}

impl<T> PartialOrd for DelayEntry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for DelayEntry<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.ready, self.seq).cmp(&(other.ready, other.seq))
    }
}

impl<T> std::fmt::Debug for WorkQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
