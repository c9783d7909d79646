//! The retry delay of a rate-limited re-add: `max(per-item exponential backoff, global token
//! bucket)`, client-go's `DefaultControllerRateLimiter` (spec §7.1).
//!
//! Every call to [`RateLimiter::when`] counts one more failure for its item and reserves one token
//! of the shared bucket, whether or not that token ends up deciding the delay: client-go's
//! `MaxOfRateLimiter` asks both limiters every time, and so does this one.
//!
//! Beside each item's failure count it keeps the time of its first failure since it was last
//! forgotten, read by the queue's oldest-item age: no allocation beyond the entry that the count
//! needs anyway, and the clock is read once per call, as before.

use crate::rate::TokenBucket;
use crate::sync::Mutex;
use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;
use tokio::time::Instant;

/// Settings of a [`RateLimiter`]; [`Default`] gives client-go's controller defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimiterConfig {
    /// Delay after the first failure of an item; each further failure doubles it.
    pub base_delay: Duration,
    /// Upper bound of the per-item delay.
    pub max_delay: Duration,
    /// Tokens added to the global bucket per second. A value that is not a finite positive number
    /// turns the bucket off (see [`RateLimiter::when`]).
    pub qps: f64,
    /// Capacity of the global bucket, and the number of retries that may go without delay at once.
    pub burst: u32,
}

impl Default for RateLimiterConfig {
    /// 5 ms doubling up to 1000 s, and a bucket of 100 tokens refilled at 10 per second.
    fn default() -> Self {
        RateLimiterConfig {
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(1000),
            qps: 10.0,
            burst: 100,
        }
    }
}

/// Per-item exponential backoff combined with a global token bucket.
///
/// Time comes from [`tokio::time::Instant`], so a paused test clock drives the bucket's refill.
#[derive(Debug)]
pub struct RateLimiter<T> {
    config: RateLimiterConfig,
    state: Mutex<LimiterState<T>>,
}

#[derive(Debug)]
struct LimiterState<T> {
    /// Failures per item since its last [`RateLimiter::forget`].
    failures: HashMap<T, Failures>,
    bucket: TokenBucket,
}

/// An item's failures since it was last forgotten.
#[derive(Clone, Copy, Debug)]
struct Failures {
    count: u32,
    /// When the first of them was recorded.
    since: Instant,
}

impl<T: Eq + Hash + Clone> RateLimiter<T> {
    /// A limiter with a full bucket and no failures recorded.
    pub fn new(config: RateLimiterConfig) -> Self {
        RateLimiter {
            config,
            state: Mutex::new(LimiterState {
                failures: HashMap::new(),
                bucket: TokenBucket::new(config.qps, config.burst),
            }),
        }
    }

    /// The delay before `item` may be retried: the larger of `base_delay · 2^failures` (capped at
    /// `max_delay`) and the wait for a token of the global bucket. Records one more failure for
    /// `item` and reserves the token.
    pub fn when(&self, item: &T) -> Duration {
        let now = Instant::now();
        let mut state = self.state.lock();
        let failures = state
            .failures
            .entry(item.clone())
            .or_insert(Failures { count: 0, since: now });
        let exponent = failures.count;
        failures.count = failures.count.saturating_add(1);
        let backoff = exponential_backoff(self.config.base_delay, self.config.max_delay, exponent);
        let bucket = state.bucket.reserve(now);
        backoff.max(bucket)
    }

    /// Forgets the failures of `item`, so its next delay starts again from `base_delay`. The
    /// bucket is shared and is not refunded.
    pub fn forget(&self, item: &T) {
        self.state.lock().failures.remove(item);
    }

    /// The number of failures recorded for `item` since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.state.lock().failures.get(item).map_or(0, |f| f.count)
    }

    /// Calls `f` with every item that failed since it was last forgotten, and when it first
    /// failed. Holds the limiter's lock throughout, so `f` must be quick and must not call back
    /// into the queue.
    pub fn for_each_failing(&self, mut f: impl FnMut(&T, Instant)) {
        for (item, failures) in &self.state.lock().failures {
            f(item, failures.since);
        }
    }
}

/// `base · 2^exponent`, or `max` once that exceeds it (including when it overflows).
fn exponential_backoff(base: Duration, max: Duration, exponent: u32) -> Duration {
    if base.is_zero() {
        return Duration::ZERO;
    }
    1u32.checked_shl(exponent)
        .and_then(|factor| base.checked_mul(factor))
        .map_or(max, |delay| delay.min(max))
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn per_item_delay_should_double_from_base_and_stop_at_max() {
        let limiter = RateLimiter::new(RateLimiterConfig {
            max_delay: ms(1000),
            burst: 1_000,
            ..RateLimiterConfig::default()
        });
        let delays: Vec<Duration> = (0..10).map(|_| limiter.when(&"a")).collect();
        let expected = [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000].map(ms);
        assert_eq!(delays, expected);
        assert_eq!(limiter.num_requeues(&"a"), 10);
        assert_eq!(limiter.when(&"b"), ms(5), "items back off independently");
    }

    #[tokio::test(start_paused = true)]
    async fn forget_should_reset_the_backoff_of_that_item_only() {
        let limiter = RateLimiter::new(RateLimiterConfig::default());
        for _ in 0..3 {
            limiter.when(&"a");
            limiter.when(&"b");
        }
        limiter.forget(&"a");
        assert_eq!(limiter.num_requeues(&"a"), 0);
        assert_eq!(limiter.num_requeues(&"b"), 3);
        assert_eq!(limiter.when(&"a"), ms(5));
    }

    #[tokio::test(start_paused = true)]
    async fn an_item_should_be_failing_since_its_first_failure_until_forgotten() {
        let limiter = RateLimiter::new(RateLimiterConfig::default());
        let first = Instant::now();
        limiter.when(&"a");
        tokio::time::advance(ms(40)).await;
        limiter.when(&"a");
        limiter.when(&"b");
        let mut failing = Vec::new();
        limiter.for_each_failing(|item, since| failing.push((*item, since)));
        failing.sort();
        assert_eq!(failing, [("a", first), ("b", first + ms(40))]);
        limiter.forget(&"a");
        limiter.when(&"a");
        let mut again = None;
        limiter.for_each_failing(|item, since| {
            if *item == "a" {
                again = Some(since);
            }
        });
        assert_eq!(again, Some(first + ms(40)), "forget starts the age over");
    }

    #[tokio::test(start_paused = true)]
    async fn token_bucket_should_delay_the_reservation_after_burst_by_one_over_qps() {
        let limiter = RateLimiter::new(RateLimiterConfig {
            base_delay: Duration::ZERO,
            ..RateLimiterConfig::default()
        });
        for item in 0..100 {
            assert_eq!(
                limiter.when(&item),
                Duration::ZERO,
                "reservation {item} is within the burst"
            );
        }
        assert_eq!(limiter.when(&100), ms(100));
        assert_eq!(
            limiter.when(&101),
            ms(200),
            "each reservation queues behind the previous one"
        );

        tokio::time::advance(Duration::from_secs(1)).await;
        // One second refills ten tokens, which pays the two reserved ones and leaves eight.
        for item in 200..208 {
            assert_eq!(limiter.when(&item), Duration::ZERO, "reservation {item} finds a token");
        }
        assert_eq!(limiter.when(&208), ms(100));
    }

    #[tokio::test(start_paused = true)]
    async fn delay_should_be_the_larger_of_backoff_and_bucket() {
        let limiter = RateLimiter::new(RateLimiterConfig {
            burst: 1,
            ..RateLimiterConfig::default()
        });
        assert_eq!(limiter.when(&"a"), ms(5), "backoff wins while the bucket has a token");
        assert_eq!(limiter.when(&"a"), ms(100), "the bucket wins once it is empty");
    }

    #[tokio::test(start_paused = true)]
    async fn unusable_qps_should_turn_the_bucket_off_without_panicking() {
        for qps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let limiter = RateLimiter::new(RateLimiterConfig {
                qps,
                burst: 0,
                ..RateLimiterConfig::default()
            });
            assert_eq!(limiter.when(&"a"), ms(5), "qps {qps}");
        }
    }

    #[test]
    fn backoff_should_saturate_at_max_for_huge_failure_counts() {
        assert_eq!(exponential_backoff(ms(5), ms(1000), u32::MAX), ms(1000));
        assert_eq!(exponential_backoff(Duration::MAX, Duration::MAX, 3), Duration::MAX);
        assert_eq!(exponential_backoff(Duration::ZERO, ms(1000), 40), Duration::ZERO);
    }
}
