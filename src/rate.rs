//! [`TokenBucket`]: the one token bucket behind every rate in kube-gc — the client's request
//! budgets ([`crate::api::layers::Throttle`]), the work queues' retry limiter
//! ([`crate::queue::RateLimiter`]) and the simulated API server's QPS ceiling.
//!
//! It is golang.org/x/time/rate's limiter reduced to what those use: `qps` tokens a second, at
//! most `burst` saved up, starting full. [`TokenBucket::reserve`] may take a token that does not
//! exist yet and returns how long until it does (client-go's `Reserve().Delay()`, so waiters are
//! served in the order they asked and the long-run rate never exceeds `qps`);
//! [`TokenBucket::try_take`] takes one only if it is there (`Allow()`), for a server that refuses
//! rather than queues.
//!
//! Time is [`tokio::time::Instant`], so a paused test clock drives the refill. The bucket is a
//! plain value: its owner keeps it under the lock that already guards its other state.

use std::time::Duration;
use tokio::time::Instant;

/// A rate as a flag gives it: requests per second, a finite number of 0 or more (0 meaning no
/// limit where the flag says so). The one parser of every `--*-qps` flag.
pub fn parse_qps(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(qps) if qps.is_finite() && qps >= 0.0 => Ok(qps),
        _ => Err(format!(
            "{s:?} is not a rate: expected a number of requests per second, 0 or more"
        )),
    }
}

/// A token bucket; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    /// Tokens available (negative: reserved ahead) as of `last`.
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket of `burst` tokens (at least one) refilled at `qps` a second. A `qps` that is
    /// not a finite positive number means no limit: upstream reads a zero rate as "the burst, then
    /// never", and a queue or client that never goes on is worse than one without a limit.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps,
            burst,
            tokens: burst,
            last: Instant::now(),
        }
    }

    /// True when the bucket limits nothing.
    pub fn is_unlimited(&self) -> bool {
        !(self.qps.is_finite() && self.qps > 0.0)
    }

    /// Takes one token at `now`, in debt if need be, and returns how long until that token
    /// exists: zero when one was in the bucket.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        if self.is_unlimited() {
            return Duration::ZERO;
        }
        self.refill(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            return Duration::ZERO;
        }
        // The debt is finite and positive here, so the conversion only fails on overflow.
        Duration::try_from_secs_f64(-self.tokens / self.qps).unwrap_or(Duration::MAX)
    }

    /// Takes one token at `now` if one is there; never goes into debt.
    pub fn try_take(&mut self, now: Instant) -> bool {
        if self.is_unlimited() {
            return true;
        }
        self.refill(now);
        let taken = self.tokens >= 1.0;
        if taken {
            self.tokens -= 1.0;
        }
        taken
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.last = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn reserve_should_pass_the_burst_then_space_tokens_by_one_over_qps() {
        let mut bucket = TokenBucket::new(10.0, 3);
        let now = Instant::now();
        for _ in 0..3 {
            assert_eq!(bucket.reserve(now), Duration::ZERO);
        }
        assert_eq!(bucket.reserve(now), Duration::from_millis(100));
        assert_eq!(
            bucket.reserve(now),
            Duration::from_millis(200),
            "reserved ahead, in order"
        );
        let later = now + Duration::from_secs(10);
        assert_eq!(bucket.reserve(later), Duration::ZERO, "refilled, up to the burst");
    }

    #[tokio::test(start_paused = true)]
    async fn try_take_should_refuse_once_empty_without_going_into_debt() {
        let mut bucket = TokenBucket::new(2.0, 2);
        let now = Instant::now();
        assert!(bucket.try_take(now) && bucket.try_take(now));
        assert!(!bucket.try_take(now));
        assert!(!bucket.try_take(now), "a refusal takes nothing");
        assert!(bucket.try_take(now + Duration::from_millis(500)));
    }

    #[tokio::test(start_paused = true)]
    async fn an_unusable_rate_should_mean_no_limit() {
        for qps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let mut bucket = TokenBucket::new(qps, 1);
            let now = Instant::now();
            assert!(
                (0..1000).all(|_| bucket.reserve(now).is_zero() && bucket.try_take(now)),
                "{qps}"
            );
        }
    }
}
