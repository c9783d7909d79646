//! The wait between a monitor's failed requests, in the shape of client-go's reflector and
//! kube-runtime's watcher: about 0.8 s, doubling up to 30 s, with jitter, and back to the start
//! once a request made progress.
//!
//! Invariant: a wait is never shorter than the current step nor longer than twice [`MAX`]; the
//! step only grows through failures and only shrinks through [`Backoff::reset`]. Progress, not
//! time, resets it: a page that arrived, a watch that delivered an event or stayed open
//! (`SHORT_WATCH` in the monitor), or one the server ended with 410, whose new read must not
//! inherit the step the watch reached through an outage. Were the step reset only by a complete
//! list, a 12-page list under a 20 % error rate would creep to 30 s between pages and almost never
//! complete.
//!
//! The jitter adds up to one step again (a wait of `step × [1, 2)`), so that the monitors of a
//! cluster that failed together (an API server restart) do not come back in one wave.

use std::time::Duration;

/// The first step.
pub const FIRST: Duration = Duration::from_millis(800);
/// The largest step.
pub const MAX: Duration = Duration::from_secs(30);

/// A doubling, jittered backoff; see the [module docs](self).
#[derive(Debug)]
pub struct Backoff {
    step: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { step: FIRST }
    }
}

impl Backoff {
    /// The next wait: the current step with jitter; the step then doubles, up to [`MAX`].
    pub fn next_wait(&mut self) -> Duration {
        let wait = self.step.mul_f64(1.0 + rand::random::<f64>());
        self.step = (self.step * 2).min(MAX);
        wait
    }

    /// Waits [`next_wait`](Self::next_wait).
    pub async fn wait(&mut self) {
        tokio::time::sleep(self.next_wait()).await;
    }

    /// A request made progress: the next failure waits the first step again.
    pub fn reset(&mut self) {
        self.step = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_should_double_with_jitter_up_to_its_cap_and_reset_on_progress() {
        let mut backoff = Backoff::default();
        let mut step = FIRST;
        for _ in 0..10 {
            let wait = backoff.next_wait();
            assert!(wait >= step && wait < step * 2, "{wait:?} for step {step:?}");
            step = (step * 2).min(MAX);
        }
        assert_eq!(step, MAX, "the step reached the cap");
        let wait = backoff.next_wait();
        assert!(wait >= MAX && wait < MAX * 2, "capped: {wait:?}");
        backoff.reset();
        let wait = backoff.next_wait();
        assert!(wait >= FIRST && wait < FIRST * 2, "back to the first step: {wait:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn wait_should_sleep_the_jittered_step() {
        let mut backoff = Backoff::default();
        let started = tokio::time::Instant::now();
        backoff.wait().await;
        let waited = started.elapsed();
        // The timer rounds a sleep up to its millisecond: a wait just under two steps is two.
        assert!(waited >= FIRST && waited <= FIRST * 2, "{waited:?}");
    }
}
