//! [`Budgets`]: client-side rate limits, one per kind of caller.
//!
//! Invariant: a request takes one token of its caller's budget before it is sent (each retry
//! again), and budgets never lend to one another. Discovery, the monitors' lists and watches and
//! the workers' reads and writes each have a bucket, as kube-controller-manager gives its
//! collector separate clients: a backlog of worker requests waiting for tokens never delays the
//! discovery that notices a new CRD, nor the list that builds its monitor. (Leader election has a
//! bucket of its own in [`crate::leader`].)
//!
//! A [`Throttle`] is client-go's token bucket ([`crate::rate::TokenBucket`]) with a wait: a token
//! is reserved before the wait, so callers are served in the order they asked and the long-run
//! rate never exceeds `qps`, however many callers wait at once.

use super::{Layer, Request, Verb};
use crate::api::ApiError;
use crate::rate::TokenBucket;
use std::future::Future;

/// A token bucket that callers wait on: `qps` tokens a second, at most `burst` saved up.
pub struct Throttle(parking_lot::Mutex<TokenBucket>);

impl Throttle {
    /// A bucket that starts full. A `qps` of 0 or less means no limit.
    pub fn new(qps: f64, burst: u32) -> Self {
        Throttle(parking_lot::Mutex::new(TokenBucket::new(qps, burst)))
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        let wait = self.0.lock().reserve(tokio::time::Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// One budget's rate: `qps` requests a second with bursts of `burst` (a `qps` of 0: no limit).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    /// Steady requests per second.
    pub qps: f64,
    /// Requests let through at once after a quiet spell.
    pub burst: u32,
}

impl Budget {
    /// kube-controller-manager's client defaults: `--kube-api-qps 20`, `--kube-api-burst 30`.
    pub const CONTROLLER_MANAGER: Budget = Budget { qps: 20.0, burst: 30 };
    /// The collector's workers: its metadata client runs at twice the controller QPS, because
    /// upstream spends two calls per deleted object; the burst is not doubled.
    pub const WORKERS: Budget = Budget { qps: 40.0, burst: 30 };
    /// No limit.
    pub const UNLIMITED: Budget = Budget { qps: 0.0, burst: 1 };
}

/// The budgets layer; see the [module docs](self).
pub struct Budgets {
    discovery: Throttle,
    monitors: Throttle,
    workers: Throttle,
}

impl Budgets {
    /// A bucket for discovery, one for the monitors' lists and watches, one for the workers.
    pub fn new(discovery: Budget, monitors: Budget, workers: Budget) -> Self {
        let throttle = |b: Budget| Throttle::new(b.qps, b.burst);
        Budgets {
            discovery: throttle(discovery),
            monitors: throttle(monitors),
            workers: throttle(workers),
        }
    }

    fn of(&self, verb: Verb) -> &Throttle {
        match verb {
            Verb::Discovery => &self.discovery,
            Verb::List | Verb::Watch => &self.monitors,
            Verb::Get | Verb::Patch | Verb::Delete | Verb::Create | Verb::Update => &self.workers,
        }
    }
}

impl Default for Budgets {
    /// kube-controller-manager's defaults for each.
    fn default() -> Self {
        let cm = Budget::CONTROLLER_MANAGER;
        Budgets::new(cm, cm, Budget::WORKERS)
    }
}

impl Layer for Budgets {
    async fn around<T, F, Fut>(&self, request: Request<'_>, mut call: F) -> Result<T, ApiError>
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, ApiError>> + Send,
    {
        self.of(request.verb).acquire().await;
        call().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn throttle_should_pass_a_burst_then_hold_the_rate() {
        let throttle = Throttle::new(10.0, 5);
        let start = tokio::time::Instant::now();
        for _ in 0..5 {
            throttle.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "the burst passes at once");
        for _ in 0..10 {
            throttle.acquire().await;
        }
        let elapsed = start.elapsed().as_secs_f64();
        assert!(
            (0.99..1.01).contains(&elapsed),
            "10 more at 10/s take a second, took {elapsed}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_worker_backlog_should_never_delay_discovery_or_a_monitor() {
        let budgets = std::sync::Arc::new(Budgets::new(
            Budget { qps: 1.0, burst: 1 },
            Budget { qps: 1.0, burst: 1 },
            Budget { qps: 1.0, burst: 1 },
        ));
        // A minute of worker requests, reserved ahead.
        for _ in 0..60 {
            let budgets = budgets.clone();
            tokio::spawn(async move { budgets.around(Verb::Delete.into(), || async { Ok(()) }).await });
        }
        tokio::task::yield_now().await;
        let start = tokio::time::Instant::now();
        budgets
            .around(Verb::Discovery.into(), || async { Ok(()) })
            .await
            .expect("discovery");
        budgets
            .around(Verb::List.into(), || async { Ok(()) })
            .await
            .expect("list");
        budgets
            .around(Verb::Watch.into(), || async { Ok(()) })
            .await
            .expect("watch");
        assert!(
            start.elapsed() <= Duration::from_secs(1),
            "discovery and the monitors waited behind the workers: {:?}",
            start.elapsed()
        );
        let start = tokio::time::Instant::now();
        budgets
            .around(Verb::Get.into(), || async { Ok(()) })
            .await
            .expect("get");
        assert!(
            start.elapsed() >= Duration::from_secs(50),
            "a worker request waits its turn"
        );
    }
}
