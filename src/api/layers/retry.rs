//! [`Retry`]: throttling and overload answers are retried inside the request.
//!
//! Invariant: a request is tried at most [`MAX_TRIES`] times, and only again after an answer that
//! asked for it: 429 Too Many Requests, or 500, 503 or 504 carrying a Retry-After hint. Each wait
//! is the server's hint, capped at [`MAX_RETRY_WAIT`]. Any other failure, and the last attempt's
//! answer, go to the caller unchanged; a server that cannot be reached at all is the transport's
//! to pace, not this layer's.
//!
//! This is client-go's rule for every request. Without it each 429 failed the collector's work
//! item, which then took a token of the work queues' shared retry bucket (10 a second): a
//! throttling storm built minutes of retry debt, where the server had asked for a second.

use super::{Layer, Request};
use crate::api::{ApiError, StatusReason};
use std::future::Future;
use std::time::Duration;

/// Tries of one request, the first included (client-go's `maxRetries` of 10).
pub const MAX_TRIES: u32 = 10;

/// The longest wait between tries. A server that asks for longer is better served by the work
/// queue's backoff than by a worker held on one item that long.
pub const MAX_RETRY_WAIT: Duration = Duration::from_secs(10);

/// The retry layer; see the [module docs](self).
#[derive(Clone, Copy, Debug)]
pub struct Retry {
    /// Tries of one request, the first included.
    pub max_tries: u32,
    /// The longest wait between tries.
    pub max_wait: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            max_tries: MAX_TRIES,
            max_wait: MAX_RETRY_WAIT,
        }
    }
}

/// How long `err` asks the client to wait before it tries again; `None` when it must not.
fn asked_wait(err: &ApiError) -> Option<Duration> {
    let retryable = match err.reason()? {
        StatusReason::TooManyRequests => true,
        r => matches!(r.code(), 500 | 503 | 504),
    };
    if retryable {
        err.retry_after()
    } else {
        None
    }
}

impl Layer for Retry {
    async fn around<T, F, Fut>(&self, _: Request<'_>, mut call: F) -> Result<T, ApiError>
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, ApiError>> + Send,
    {
        let mut tries = 1;
        loop {
            match call().await {
                Err(err) if tries < self.max_tries => match asked_wait(&err) {
                    Some(wait) => {
                        tracing::debug!(error = %err, ?wait, tries, "retrying as the server asked");
                        tokio::time::sleep(wait.min(self.max_wait)).await;
                        tries += 1;
                    }
                    None => return Err(err),
                },
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::layers::Verb;
    use parking_lot::Mutex;

    /// Answers a call with the next of `answers`, then with success.
    async fn run(retry: Retry, answers: Vec<ApiError>) -> (Result<(), ApiError>, usize, Duration) {
        let answers = Mutex::new(answers.into_iter());
        let calls = Mutex::new(0);
        let started = tokio::time::Instant::now();
        let result = retry
            .around(Verb::Get.into(), || {
                *calls.lock() += 1;
                let next = answers.lock().next();
                async move { next.map_or(Ok(()), Err) }
            })
            .await;
        let n = *calls.lock();
        (result, n, started.elapsed())
    }

    fn throttled(secs: u64) -> ApiError {
        ApiError::status(StatusReason::TooManyRequests, "slow down").with_retry_after(Duration::from_secs(secs))
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_should_be_retried_after_the_wait_the_server_asked_for() {
        let (result, calls, waited) = run(Retry::default(), vec![throttled(1), throttled(2)]).await;
        assert_eq!(result, Ok(()));
        assert_eq!(calls, 3);
        assert_eq!(waited, Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_500_should_be_retried_only_when_it_carries_a_retry_after_hint() {
        let bare = ApiError::status(StatusReason::InternalError, "oops");
        let (result, calls, _) = run(Retry::default(), vec![bare.clone()]).await;
        assert_eq!((result, calls), (Err(bare), 1));
        let hinted =
            ApiError::status(StatusReason::ServiceUnavailable, "busy").with_retry_after(Duration::from_secs(1));
        let (result, calls, _) = run(Retry::default(), vec![hinted]).await;
        assert_eq!((result, calls), (Ok(()), 2));
    }

    #[tokio::test(start_paused = true)]
    async fn other_errors_should_never_be_retried() {
        let conflict = ApiError::status(StatusReason::Conflict, "stale").with_retry_after(Duration::from_secs(1));
        let (result, calls, _) = run(Retry::default(), vec![conflict.clone()]).await;
        assert_eq!((result, calls), (Err(conflict), 1));
    }

    #[tokio::test(start_paused = true)]
    async fn the_tenth_failure_should_reach_the_caller_and_each_wait_be_capped() {
        let answers = (0..20).map(|_| throttled(60)).collect();
        let (result, calls, waited) = run(Retry::default(), answers).await;
        assert_eq!(result, Err(throttled(60)));
        assert_eq!(calls, MAX_TRIES as usize);
        assert_eq!(waited, MAX_RETRY_WAIT * (MAX_TRIES - 1), "every wait capped");
    }
}
