//! The wall clock a replica writes Lease times by (`acquireTime`, `renewTime`) and reads its
//! peers' by.
//!
//! Invariant: no decision to take a leadership or a range rests on the wall clock. Those run on
//! this process's monotonic clock, from when a Lease record was first seen to change, as
//! client-go's elector judges a leader; replicas' wall clocks may disagree by any amount. The
//! wall clock only refuses trust to a Lease that had stopped renewing before this replica first
//! looked, and, with the monotonic clock agreeing, lets a Lease dead for long be deleted
//! (`crate::shard::membership`).
//!
//! A [`WallClock`] can be set off by a fixed amount, and made to follow tokio's clock, so that a
//! test can run replicas whose clocks disagree, in real or in virtual time.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use std::time::Duration;
use tokio::time::Instant;

/// A wall clock: the system's, or one that follows tokio's clock from a start; either set off by
/// a fixed skew.
#[derive(Clone, Copy, Debug, Default)]
pub struct WallClock {
    skew: SignedDuration,
    /// The system's time when tokio's clock read the instant, for a clock that follows tokio's.
    origin: Option<(Timestamp, Instant)>,
}

impl WallClock {
    /// The system's clock, as every replica outside a test reads it.
    pub fn system() -> Self {
        Self::default()
    }

    /// A clock that reads the system's time now and from then on advances with tokio's clock, so
    /// that in a simulation with tokio's clock paused, Leases age in virtual time.
    pub fn following_tokio() -> Self {
        WallClock {
            skew: SignedDuration::ZERO,
            origin: Some((Timestamp::now(), Instant::now())),
        }
    }

    /// This clock, `by` ahead of the true time (behind if negative).
    pub fn skewed(self, by: SignedDuration) -> Self {
        WallClock { skew: by, ..self }
    }

    /// The time by this clock.
    pub fn now(&self) -> Timestamp {
        let base = match self.origin {
            Some((wall, at)) => {
                let elapsed = Instant::now().saturating_duration_since(at);
                plus(wall, SignedDuration::try_from(elapsed).unwrap_or(SignedDuration::MAX))
            }
            None => Timestamp::now(),
        };
        plus(base, self.skew)
    }

    /// How long ago `then` was by this clock; zero for a time in its future.
    pub fn since(&self, then: Timestamp) -> Duration {
        Duration::try_from(self.now().duration_since(then)).unwrap_or(Duration::ZERO)
    }
}

/// `t + d`, saturating at the ends of time (jiff refuses only calendar units, which a
/// `SignedDuration` has none of).
fn plus(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.saturating_add(d).unwrap_or(t)
}

/// Parses a skew for `--clock-skew`: a duration (`250ms`, `30s`, `1m`), behind the true time with
/// a leading `-`.
pub fn parse_skew(text: &str) -> Result<SignedDuration, String> {
    let (sign, magnitude) = match text.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, text.strip_prefix('+').unwrap_or(text)),
    };
    let magnitude = crate::duration::parse(magnitude)?;
    SignedDuration::try_from(magnitude)
        .map(|d| d * sign)
        .map_err(|_| format!("`{text}` is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skewed_clock_should_read_the_system_time_off_by_its_skew() {
        let ahead = WallClock::system().skewed(SignedDuration::from_secs(30));
        let gap = ahead.now().duration_since(Timestamp::now());
        assert!(
            gap > SignedDuration::from_secs(29) && gap <= SignedDuration::from_secs(30),
            "{gap:?}"
        );
        // Read after the time it measures from: a hair over the skew.
        let ago = ahead.since(Timestamp::now());
        assert!(
            ago >= Duration::from_secs(30) && ago < Duration::from_secs(31),
            "{ago:?}"
        );
        let behind = WallClock::system().skewed(SignedDuration::from_secs(-30));
        assert_eq!(behind.since(Timestamp::now()), Duration::ZERO, "a time in its future");
    }

    #[tokio::test(start_paused = true)]
    async fn a_clock_following_tokio_should_advance_in_virtual_time() {
        let clock = WallClock::following_tokio();
        let start = clock.now();
        tokio::time::advance(Duration::from_secs(90)).await;
        assert_eq!(clock.since(start), Duration::from_secs(90));
    }

    #[test]
    fn a_skew_should_parse_with_either_sign_and_refuse_what_is_no_duration() {
        assert_eq!(parse_skew("-20s"), Ok(SignedDuration::from_secs(-20)));
        assert_eq!(parse_skew("+1m"), Ok(SignedDuration::from_secs(60)));
        assert_eq!(parse_skew("0"), Ok(SignedDuration::ZERO));
        assert!(parse_skew("-20").unwrap_err().contains("no unit"));
    }
}
