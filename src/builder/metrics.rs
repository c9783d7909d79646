//! The builders' metrics: graph events applied per partition, and what a once-a-second sampler
//! derives from those counts (a recent rate per partition, the time since the last event).
//!
//! The counts are the router's ([`crate::router`]): each partition's receiver publishes its
//! applied count with one uncontended plain store per event, on a cache line of its own, and no
//! clock; nothing here adds to the builders' hot path.
//!
//! # Model
//!
//! - The sampler ([`GraphEventMetrics::sample`]) reads every count once per [`SAMPLE_PERIOD`] of
//!   the runtime's clock and keeps the samples of the last [`RATE_WINDOW`]. It is a task of the
//!   collector, so the rates do not depend on how often `/metrics` is scraped, and it ends with
//!   the collector.
//! - Readers take a [`GraphEventStats`]: counts as of the read, rates as of the last sample.
//!
//! # What the time since the last event means
//!
//! Zero when a count moved since the last sample; otherwise the time since the sample that first
//! showed the counts as they are, which is after the last event by less than one period. Before
//! the first event it is the time since the metrics were made, at the collector's start, so a
//! collector that never receives an event looks as stale as one whose events stopped.

use crate::router::Router;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, MissedTickBehavior};

/// How often the sampler reads the counts: the resolution of the time since the last event.
pub const SAMPLE_PERIOD: Duration = Duration::from_secs(1);

/// The span the rate is averaged over: long enough that one slow second does not make a stalled
/// builder of a busy one, short enough to show a stall within seconds.
pub const RATE_WINDOW: Duration = Duration::from_secs(10);

/// The builders' counts and the sampler's window; shared by the builders, the sampler and
/// `/metrics`. See the [module docs](self).
#[derive(Debug)]
pub struct GraphEventMetrics {
    /// Whose applied counts these are.
    router: Router,
    /// Written by the sampler only; read by [`GraphEventMetrics::stats`].
    window: Mutex<Window>,
}

/// The sampler's memory.
#[derive(Debug)]
struct Window {
    /// Oldest first; the oldest is at most [`RATE_WINDOW`] older than the newest, give or take
    /// one period. Never empty: it starts with the counts at creation, all zero.
    samples: VecDeque<Sample>,
    /// When a sample first showed the counts as they are now; creation until the first event.
    unchanged_since: Instant,
}

#[derive(Debug)]
struct Sample {
    at: Instant,
    totals: Vec<u64>,
}

/// What the builders did, as of one read.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphEventStats {
    /// Per partition, by index.
    pub partitions: Vec<PartitionEvents>,
    /// Seconds since the last event any builder applied (see the [module docs](self)).
    pub seconds_since_last_event: f64,
}

/// One partition's figures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PartitionEvents {
    /// Events its builder has applied.
    pub applied: u64,
    /// Events a second over the sampler's window, as of its last sample; 0 before the first.
    pub per_second: f64,
}

impl GraphEventMetrics {
    /// Metrics of the builders behind `router`, starting from its counts now.
    pub fn new(router: Router) -> Arc<Self> {
        let now = Instant::now();
        let totals = router.applied_totals();
        Arc::new(GraphEventMetrics {
            router,
            window: Mutex::new(Window {
                samples: VecDeque::from([Sample { at: now, totals }]),
                unchanged_since: now,
            }),
        })
    }

    /// The sampler: reads the counts every [`SAMPLE_PERIOD`], for as long as the task is polled.
    pub async fn sample(self: Arc<Self>) {
        // Not at once: a sample right after creation would make a rate of a few microseconds.
        let mut ticks = tokio::time::interval_at(Instant::now() + SAMPLE_PERIOD, SAMPLE_PERIOD);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            // The time of the reading, not the tick's schedule: a late tick must not skew a rate.
            self.record(Instant::now());
        }
    }

    /// Takes one sample at `at`.
    fn record(&self, at: Instant) {
        let totals = self.totals();
        let mut window = self.window.lock();
        if window.samples.back().is_some_and(|newest| newest.totals != totals) {
            window.unchanged_since = at;
        }
        window.samples.push_back(Sample { at, totals });
        while window.samples.len() > 2 && at.duration_since(window.samples[1].at) >= RATE_WINDOW {
            window.samples.pop_front();
        }
    }

    fn totals(&self) -> Vec<u64> {
        self.router.applied_totals()
    }

    /// The figures as of now.
    pub fn stats(&self) -> GraphEventStats {
        let totals = self.totals();
        let now = Instant::now();
        let window = self.window.lock();
        let (oldest, newest) = (&window.samples[0], &window.samples[window.samples.len() - 1]);
        let span = newest.at.duration_since(oldest.at).as_secs_f64();
        let partitions = totals
            .iter()
            .enumerate()
            .map(|(p, &applied)| PartitionEvents {
                applied,
                per_second: if span > 0.0 {
                    (newest.totals[p] - oldest.totals[p]) as f64 / span
                } else {
                    0.0
                },
            })
            .collect();
        let seconds_since_last_event = if totals == newest.totals {
            now.duration_since(window.unchanged_since).as_secs_f64()
        } else {
            0.0
        };
        GraphEventStats {
            partitions,
            seconds_since_last_event,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::PartitionReceiver;

    fn per_second(metrics: &GraphEventMetrics) -> Vec<f64> {
        metrics.stats().partitions.iter().map(|p| p.per_second).collect()
    }

    /// Metrics over `partitions` partitions, and each partition's receiver, to count with.
    fn metrics(partitions: usize) -> (Arc<GraphEventMetrics>, Vec<PartitionReceiver>) {
        let (router, receivers) = Router::new(partitions);
        (GraphEventMetrics::new(router), receivers)
    }

    fn count(receiver: &mut PartitionReceiver, events: usize) {
        receiver.applied(events as u64);
    }

    #[tokio::test(start_paused = true)]
    async fn counts_should_be_per_partition() {
        let (metrics, mut counters) = metrics(2);
        count(&mut counters[1], 3);
        let applied: Vec<u64> = metrics.stats().partitions.iter().map(|p| p.applied).collect();
        assert_eq!(applied, [0, 3]);
    }

    #[tokio::test(start_paused = true)]
    async fn rate_should_average_over_the_window_and_forget_what_is_older() {
        let (metrics, mut counters) = metrics(2);
        let start = Instant::now();
        assert_eq!(per_second(&metrics), [0.0, 0.0], "no sample yet");
        for second in 1..=10 {
            count(&mut counters[0], 100);
            metrics.record(start + Duration::from_secs(second));
        }
        assert_eq!(per_second(&metrics), [100.0, 0.0]);
        for second in 11..=15 {
            metrics.record(start + Duration::from_secs(second));
        }
        assert_eq!(per_second(&metrics), [50.0, 0.0], "five idle seconds of the last ten");
        for second in 16..=20 {
            metrics.record(start + Duration::from_secs(second));
        }
        assert_eq!(per_second(&metrics), [0.0, 0.0]);
    }

    #[tokio::test(start_paused = true)]
    async fn seconds_since_last_event_should_count_from_start_then_from_the_sample_that_saw_it() {
        let (metrics, mut counters) = metrics(1);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(
            metrics.stats().seconds_since_last_event,
            5.0,
            "since start, before any event"
        );

        count(&mut counters[0], 1);
        assert_eq!(
            metrics.stats().seconds_since_last_event,
            0.0,
            "an event since the last sample"
        );
        metrics.record(Instant::now());
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(metrics.stats().seconds_since_last_event, 3.0);
        metrics.record(Instant::now());
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(
            metrics.stats().seconds_since_last_event,
            7.0,
            "a sample with nothing new changes nothing"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn sampler_should_sample_once_a_period_by_itself() {
        let (metrics, mut counters) = metrics(1);
        let sampler = tokio::spawn(metrics.clone().sample());
        count(&mut counters[0], 20);
        tokio::time::sleep(RATE_WINDOW * 2 + SAMPLE_PERIOD / 2).await;
        assert_eq!(metrics.window.lock().samples.len(), 11, "one a second over ten seconds");
        assert_eq!(per_second(&metrics), [0.0], "the events are older than the window");
        assert!(metrics.stats().seconds_since_last_event >= 19.0);
        sampler.abort();
    }
}
