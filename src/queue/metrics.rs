//! The `workqueue_*` metrics of a queue: counters and duration histograms, and the snapshot
//! [`QueueStats`] they are read through.
//!
//! Every figure is updated with its own atomic operation, outside any lock, so a snapshot taken
//! while the queue is busy may mix slightly different instants (a histogram's `sum_seconds` may
//! lag its `count` by an observation, say). Nothing is decided from them.

use crate::sync::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds, in seconds, of the duration histograms: client-go's workqueue buckets, 10 ns to
/// 10 s, a factor of ten apart.
pub const DURATION_BUCKETS: [f64; 10] = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0];

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

/// A snapshot of a queue's counters, the source of the `workqueue_*` metrics (label `name`).
#[derive(Clone, Debug, PartialEq)]
pub struct QueueStats {
    /// The queue's name.
    pub name: &'static str,
    /// Adds that were not merged into an item already waiting (`workqueue_adds_total`).
    pub adds_total: u64,
    /// Delayed and rate-limited adds (`workqueue_retries_total`).
    pub retries_total: u64,
    /// Items whose processing ended in success ([`WorkQueue::forget`](super::WorkQueue::forget)).
    pub forgets_total: u64,
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
    /// The summed time the items now held have been held (`workqueue_unfinished_work_seconds`).
    pub unfinished_work_seconds: f64,
    /// The longest time any item now held has been held
    /// (`workqueue_longest_running_processor_seconds`).
    pub longest_running_processor_seconds: f64,
    /// How long the oldest item the queue works on has waited, 0 when there is none
    /// (`kube_gc_queue_oldest_item_age_seconds`; see
    /// [`WorkQueue::for_each_waiting`](super::WorkQueue::for_each_waiting)).
    pub oldest_waiting_seconds: f64,
}

/// A counter that only statistics read.
#[derive(Debug, Default)]
pub(super) struct Counter(AtomicU64);

impl Counter {
    pub(super) fn inc(&self) {
        // Relaxed: a statistic, ordered with nothing else.
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A [`DurationHistogram`] that many threads observe into at once.
#[derive(Debug, Default)]
pub(super) struct AtomicHistogram {
    /// Observations per bucket, not cumulative; the last one counts those above every bound.
    counts: [AtomicU64; DURATION_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl AtomicHistogram {
    pub(super) fn observe(&self, d: Duration) {
        let seconds = d.as_secs_f64();
        let bucket = DURATION_BUCKETS
            .iter()
            .position(|&bound| seconds <= bound)
            .unwrap_or(DURATION_BUCKETS.len());
        // Relaxed: statistics (see the module docs).
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> DurationHistogram {
        let mut snapshot = DurationHistogram::default();
        let mut below = 0;
        for (i, count) in self.counts.iter().enumerate() {
            below += count.load(Ordering::Relaxed);
            if let Some(bucket) = snapshot.buckets.get_mut(i) {
                *bucket = below;
            }
        }
        snapshot.count = below;
        snapshot.sum_seconds = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        snapshot
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn histogram_should_count_cumulatively_and_sum_in_seconds() {
        let h = AtomicHistogram::default();
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_nanos(10));
        h.observe(Duration::from_secs(11));
        let s = h.snapshot();
        assert_eq!(s.buckets, [1, 1, 1, 1, 1, 1, 2, 2, 2, 2]);
        assert_eq!(s.count, 3);
        assert!((s.sum_seconds - 11.003_000_01).abs() < 1e-9);
    }
}
