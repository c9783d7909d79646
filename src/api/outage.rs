//! Pacing requests while the API server cannot be reached at all.
//!
//! Without it, every worker fails its item at once when the server is down (a refused connection
//! answers in microseconds), takes the next, and fails that too: a short outage runs through the
//! whole attemptToDelete queue, and each failure takes a token of the queue's shared retry bucket
//! (10 a second by default), so a restart of a few seconds leaves thousands of items waiting
//! minutes for their turn. With it, requests wait out a backoff after a failure to connect, so
//! each worker keeps its item until the server is back, and an outage costs a few failures per
//! worker instead of one per queued item.
//!
//! # Invariants
//!
//! - Only failures to reach the server count; any answer from it, an error status included,
//!   ends the outage at once.
//! - A round of requests released together at the end of a backoff doubles the backoff once, not
//!   once per request: a failure while a backoff is still running does not extend it.
//! - The backoff starts at [`FIRST_BACKOFF`] and never exceeds [`MAX_BACKOFF`], so a server that
//!   comes back is used again within that long.

use parking_lot::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// The wait after the first failure to connect.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between rounds of attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Whether the server is being waited for; see the [module docs](self).
#[derive(Debug, Default)]
pub struct Outage {
    /// Until when requests wait, and the backoff that set it; `None` while the server answers.
    backoff: Mutex<Option<(Instant, Duration)>>,
}

impl Outage {
    /// Waits until a request may be sent.
    pub async fn wait(&self) {
        let until = self.backoff.lock().map(|(until, _)| until);
        if let Some(until) = until {
            tokio::time::sleep_until(until).await;
        }
    }

    /// A request could not reach the server.
    pub fn unreachable(&self) {
        let now = Instant::now();
        let mut backoff = self.backoff.lock();
        let next = match *backoff {
            Some((until, _)) if until > now => return,
            Some((_, last)) => (last * 2).min(MAX_BACKOFF),
            None => FIRST_BACKOFF,
        };
        *backoff = Some((now + next, next));
    }

    /// The server answered.
    pub fn answered(&self) {
        *self.backoff.lock() = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How long `outage.wait()` takes.
    async fn waited(outage: &Outage) -> Duration {
        let started = Instant::now();
        outage.wait().await;
        started.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn requests_should_wait_a_doubling_backoff_until_the_server_answers() {
        let outage = Outage::default();
        assert_eq!(
            waited(&outage).await,
            Duration::ZERO,
            "no wait while the server answers"
        );

        outage.unreachable();
        outage.unreachable();
        assert_eq!(waited(&outage).await, FIRST_BACKOFF, "one round counts once");
        outage.unreachable();
        assert_eq!(waited(&outage).await, FIRST_BACKOFF * 2);
        for _ in 0..10 {
            outage.unreachable();
            outage.wait().await;
        }
        outage.unreachable();
        assert_eq!(waited(&outage).await, MAX_BACKOFF, "capped");

        outage.unreachable();
        outage.answered();
        assert_eq!(waited(&outage).await, Duration::ZERO, "an answer ends the outage");
    }
}
