//! Leader election over a `coordination.k8s.io/v1` Lease, the way client-go's leaderelection runs
//! it for kube-controller-manager, so that of several `kube-gc run` replicas only one collects.
//!
//! # Invariants
//!
//! - A replica holds the lease only between a successful write that names it holder and the
//!   moment its renewals have failed for `renew_deadline`; it stops collecting before
//!   `lease_duration` has passed since its last successful renewal, because
//!   `renew_deadline < lease_duration`.
//! - Another holder's lease counts as expired only when this replica has seen the same record
//!   (holder and renew time) unchanged for `lease_duration` of its *own* clock, so clock skew
//!   between replicas cannot shorten a lease.
//! - Every write is a PUT carrying the resourceVersion that was read (or a create), so of two
//!   replicas racing for an expired lease exactly one wins; the other gets 409 and stays a follower.
//! - The replica's [`Tenure`] ends `renew_deadline` after the start of its last successful
//!   acquisition or renewal, measured on the monotonic clock. A standby takes over no earlier than
//!   `lease_duration` after it first saw that renewal, which was written after its start; so the
//!   tenure ends `lease_duration - renew_deadline` before any other replica can lead, even when
//!   this process was frozen (a stopped process, a paused VM) and wakes up with work in flight.
//!   Writes check the tenure just before they are sent ([`crate::api::layers::Fence`]).
//! - The lease's requests take tokens of a budget of their own (`LeaseConfig::budget`), so a
//!   renewal never waits behind the collector's requests.
//!
//! The elector is written over a [`LeaseStore`] (three requests: get, create, replace), so the
//! API client knows nothing of leases or tenures: the client's write fence
//! ([`crate::api::layers::Fence`]) is handed `Tenure::is_current` as a closure.

mod clock;
mod store;

pub use clock::{parse_skew, WallClock};

pub use store::{KubeLeases, LeaseError, LeaseStore};

use crate::api::layers::{Budget, Throttle};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::ObjectMeta;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Where the lease lives and how it is timed (kube-controller-manager's `--leader-elect-*` flags).
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica's identity, written as `holderIdentity`.
    pub identity: String,
    /// How long a lease lasts without renewal (15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up (10 s).
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew (2 s).
    pub retry_period: Duration,
    /// The client-side rate limit of the lease's own requests.
    pub budget: Budget,
    /// The wall clock the Lease's times are written by ([`WallClock::system`] but in tests).
    pub clock: WallClock,
}

impl LeaseConfig {
    /// Checks the timing rules client-go enforces: the lease outlasts the renew deadline, which
    /// outlasts a retry. The error names the flags to fix.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.lease_duration <= self.renew_deadline {
            return Err("--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline");
        }
        if self.renew_deadline <= self.retry_period.mul_f64(1.2) {
            return Err("--leader-elect-renew-deadline must be greater than 1.2 × --leader-elect-retry-period");
        }
        if self.retry_period.is_zero() {
            return Err("--leader-elect-retry-period must be positive");
        }
        Ok(())
    }
}

/// Until when a replica may act as the leader; see the [module docs](self). Cheap to clone: the
/// clones share one deadline, which only the [`LeaderElector`] moves.
#[derive(Clone, Debug)]
pub struct Tenure {
    /// The instant deadlines are counted from.
    epoch: Instant,
    /// The end of the tenure, in nanoseconds after `epoch`; 0 while not leading.
    until: Arc<AtomicU64>,
}

impl Tenure {
    /// A tenure that has not begun.
    pub fn new() -> Self {
        Tenure {
            epoch: Instant::now(),
            until: Arc::new(AtomicU64::new(0)),
        }
    }

    /// True while this replica may still act as the leader.
    pub fn is_current(&self) -> bool {
        self.nanos(Instant::now()) < self.until.load(Ordering::Acquire)
    }

    /// Lasts until `until`.
    fn extend_to(&self, until: Instant) {
        self.until.store(self.nanos(until), Ordering::Release);
    }

    /// Ends now.
    fn end(&self) {
        self.until.store(0, Ordering::Release);
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }
}

impl Default for Tenure {
    fn default() -> Self {
        Self::new()
    }
}

/// One replica's side of the election, over the Lease in `S`.
pub struct LeaderElector<S = KubeLeases> {
    store: S,
    /// The lease requests' own budget.
    throttle: Throttle,
    config: LeaseConfig,
    /// The last lease record seen (holder, renew time) and when this replica first saw it.
    observed: Option<((String, Option<MicroTime>), Instant)>,
    tenure: Tenure,
    /// Labels and annotations every write of the lease carries.
    marks: Marks,
}

/// Labels and annotations a Lease's writes carry: a shard's group label and its report.
#[derive(Clone, Debug, Default)]
struct Marks {
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

impl Marks {
    fn apply(&self, meta: &mut ObjectMeta) {
        let extend = |to: &mut Option<BTreeMap<String, String>>, from: &BTreeMap<String, String>| {
            if !from.is_empty() {
                to.get_or_insert_with(BTreeMap::new).extend(from.clone());
            }
        };
        extend(&mut meta.labels, &self.labels);
        extend(&mut meta.annotations, &self.annotations);
    }
}

impl LeaderElector {
    /// An elector for the Lease `config` names in `client`'s cluster.
    pub fn over_kube(client: kube::Client, config: LeaseConfig) -> Self {
        let store = KubeLeases::new(client, &config.namespace, &config.name);
        LeaderElector::new(store, config)
    }
}

impl<S: LeaseStore> LeaderElector<S> {
    /// An elector for the Lease in `store`, timed and budgeted by `config`.
    pub fn new(store: S, config: LeaseConfig) -> Self {
        LeaderElector {
            store,
            throttle: Throttle::new(config.budget.qps, config.budget.burst),
            config,
            observed: None,
            tenure: Tenure::new(),
            marks: Marks::default(),
        }
    }

    /// Every write of the lease carries the label `key=value`.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.marks.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// The next writes of the lease carry the annotation `key: value`.
    pub fn annotate(&mut self, key: &str, value: String) {
        self.marks.annotations.insert(key.to_string(), value);
    }

    /// The store the lease lives in.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// One round of acquiring or renewing: true when this replica holds the lease after it, its
    /// tenure then running until `renew_deadline` after the round began.
    ///
    /// # Errors
    ///
    /// When the lease could not be read or written; the tenure is left to run out.
    pub async fn renew(&mut self) -> Result<bool, LeaseError> {
        self.try_acquire_or_renew().await
    }

    /// The tenure this elector extends at each successful renewal and ends when leadership is
    /// lost or released.
    pub fn tenure(&self) -> Tenure {
        self.tenure.clone()
    }

    /// Returns once this replica holds the lease.
    pub async fn acquire(&mut self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %crate::api::one_line(&e), "could not read or write the lease"),
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// Renews the lease every retry period; returns when a renewal has failed for the renew
    /// deadline, that is, when leadership is lost.
    pub async fn hold(&mut self) {
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let deadline = Instant::now() + self.config.renew_deadline;
            loop {
                match self.try_acquire_or_renew().await {
                    Ok(true) => break,
                    Ok(false) => return self.tenure.end(),
                    Err(e) => tracing::warn!(error = %crate::api::one_line(&e), "could not renew the lease"),
                }
                if Instant::now() + self.config.retry_period >= deadline {
                    return self.tenure.end();
                }
                tokio::time::sleep(self.config.retry_period).await;
            }
        }
    }

    /// Gives the lease up at shutdown, so a standby takes over without waiting for it to expire:
    /// the holder is cleared and the duration cut to one second, as client-go's release does.
    pub async fn release(&mut self) -> Result<(), LeaseError> {
        self.tenure.end();
        let Some(mut lease) = self.read().await? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(self.now());
        self.throttle.acquire().await;
        // A lost race means another replica already wrote over this one's record.
        self.store.replace(&lease).await.map(drop)
    }

    async fn read(&self) -> Result<Option<Lease>, LeaseError> {
        self.throttle.acquire().await;
        self.store.get().await
    }

    /// One round: true when this replica holds the lease after it, and then its tenure runs
    /// until `renew_deadline` after the round began.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaseError> {
        let began = Instant::now();
        let held = self.write_holder().await?;
        if held {
            self.tenure.extend_to(began + self.config.renew_deadline);
        }
        Ok(held)
    }

    /// Reads the lease and writes this replica as its holder if it is free, expired or already
    /// this replica's; true when the write succeeded.
    async fn write_holder(&mut self) -> Result<bool, LeaseError> {
        let Some(mut lease) = self.read().await? else {
            return self.create().await;
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let record = (holder.clone(), spec.renew_time.clone());
        let seen_at = match &self.observed {
            Some((seen, at)) if *seen == record => *at,
            _ => {
                let now = Instant::now();
                self.observed = Some((record, now));
                now
            }
        };
        let mine = holder == self.config.identity;
        let duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64);
        if !holder.is_empty() && !mine && seen_at + duration > Instant::now() {
            return Ok(false);
        }
        if !mine {
            spec.acquire_time = Some(self.now());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(self.config.identity.clone());
        spec.lease_duration_seconds = Some(self.lease_seconds());
        spec.renew_time = Some(self.now());
        self.marks.apply(&mut lease.metadata);
        self.throttle.acquire().await;
        self.store.replace(&lease).await
    }

    async fn create(&mut self) -> Result<bool, LeaseError> {
        let mut lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.config.name.clone()),
                namespace: Some(self.config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.config.identity.clone()),
                lease_duration_seconds: Some(self.lease_seconds()),
                acquire_time: Some(self.now()),
                renew_time: Some(self.now()),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        self.marks.apply(&mut lease.metadata);
        self.throttle.acquire().await;
        self.store.create(&lease).await
    }

    /// The time to write in the Lease, by its configured wall clock.
    fn now(&self) -> MicroTime {
        MicroTime(self.config.clock.now())
    }

    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }
}

/// This replica's identity: the host name and a random suffix, as client-go composes it, so two
/// replicas on one host still differ.
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "kube-gc".to_string());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    /// A Lease in memory with the API server's write rules: create fails on an existing Lease,
    /// replace on a stale resourceVersion. Each request yields first, so that two electors
    /// polled together interleave their reads and writes as two replicas would.
    #[derive(Clone, Default)]
    struct MemoryLeases(Arc<Mutex<Option<Lease>>>);

    impl MemoryLeases {
        fn holder(&self) -> Option<String> {
            self.0.lock().as_ref()?.spec.as_ref()?.holder_identity.clone()
        }

        fn store(slot: &mut Option<Lease>, lease: &Lease, version: u64) {
            let mut stored = lease.clone();
            stored.metadata.resource_version = Some(version.to_string());
            *slot = Some(stored);
        }
    }

    impl LeaseStore for MemoryLeases {
        async fn get(&self) -> Result<Option<Lease>, LeaseError> {
            tokio::task::yield_now().await;
            Ok(self.0.lock().clone())
        }

        async fn create(&self, lease: &Lease) -> Result<bool, LeaseError> {
            tokio::task::yield_now().await;
            let mut slot = self.0.lock();
            if slot.is_some() {
                return Ok(false);
            }
            MemoryLeases::store(&mut slot, lease, 1);
            Ok(true)
        }

        async fn replace(&self, lease: &Lease) -> Result<bool, LeaseError> {
            tokio::task::yield_now().await;
            let mut slot = self.0.lock();
            let current = slot.as_ref().and_then(|l| l.metadata.resource_version.clone());
            if current.is_none() || current != lease.metadata.resource_version {
                return Ok(false);
            }
            let version: u64 = current.and_then(|v| v.parse().ok()).unwrap_or(0);
            MemoryLeases::store(&mut slot, lease, version + 1);
            Ok(true)
        }
    }

    fn elector(store: &MemoryLeases, identity: &str) -> LeaderElector<MemoryLeases> {
        let config = LeaseConfig {
            namespace: "kube-system".into(),
            name: "kube-gc".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            budget: Budget::UNLIMITED,
            clock: WallClock::system(),
        };
        config.check().expect("upstream's default timing");
        LeaderElector::new(store.clone(), config)
    }

    #[tokio::test(start_paused = true)]
    async fn of_two_replicas_racing_for_a_free_lease_exactly_one_should_win() {
        let store = MemoryLeases::default();
        let (mut a, mut b) = (elector(&store, "a"), elector(&store, "b"));
        let (won_a, won_b) = tokio::join!(a.try_acquire_or_renew(), b.try_acquire_or_renew());
        let (won_a, won_b) = (won_a.expect("a's round"), won_b.expect("b's round"));
        assert!(won_a ^ won_b, "exactly one wins: a {won_a}, b {won_b}");
        let winner = if won_a { "a" } else { "b" };
        assert_eq!(store.holder().as_deref(), Some(winner));
        assert_eq!((a.tenure().is_current(), b.tenure().is_current()), (won_a, won_b));
    }

    #[tokio::test(start_paused = true)]
    async fn a_standby_should_lead_only_once_the_silent_holders_lease_has_run_out_on_its_own_clock() {
        let store = MemoryLeases::default();
        let mut first = elector(&store, "first");
        first.acquire().await;
        let first_tenure = first.tenure();
        // The holder falls silent without releasing (frozen, or cut off).
        drop(first);
        let mut second = elector(&store, "second");
        let start = Instant::now();
        second.acquire().await;
        assert!(
            start.elapsed() >= Duration::from_secs(15),
            "the standby waited out a whole lease duration after it first saw the record: {:?}",
            start.elapsed()
        );
        assert!(!first_tenure.is_current(), "the silent holder's tenure ended before");
        assert_eq!(store.holder().as_deref(), Some("second"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_holder_that_keeps_renewing_should_never_be_displaced_and_a_release_hands_over_at_once() {
        let store = MemoryLeases::default();
        let mut first = elector(&store, "first");
        first.acquire().await;
        let renewing = tokio::spawn(async move {
            tokio::select! {
                () = first.hold() => panic!("the holder lost a lease it kept renewing"),
                () = tokio::time::sleep(Duration::from_secs(60)) => first,
            }
        });
        let mut second = elector(&store, "second");
        let standby = tokio::time::timeout(Duration::from_secs(59), second.acquire()).await;
        assert!(standby.is_err(), "the standby never leads while the holder renews");
        let mut first = renewing.await.expect("the holder kept renewing");
        assert!(first.tenure().is_current());
        first.release().await.expect("release");
        assert!(!first.tenure().is_current(), "a release ends the tenure");
        let start = Instant::now();
        second.acquire().await;
        assert!(
            start.elapsed() <= Duration::from_secs(2),
            "took over within a retry period"
        );
        assert_eq!(store.holder().as_deref(), Some("second"));
    }

    #[tokio::test(start_paused = true)]
    async fn tenure_should_last_until_its_deadline_and_end_on_demand() {
        let tenure = Tenure::new();
        assert!(!tenure.is_current(), "a tenure that has not begun");
        let shared = tenure.clone();
        tenure.extend_to(Instant::now() + Duration::from_secs(10));
        assert!(shared.is_current(), "clones share the deadline");
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert!(shared.is_current());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(!shared.is_current(), "over at the deadline");
        tenure.extend_to(Instant::now() + Duration::from_secs(10));
        tenure.end();
        assert!(!shared.is_current(), "ended before the deadline");
    }
}
