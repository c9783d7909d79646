//! Membership and handoff over Leases: which replica collects which ranges, and when a range
//! may change hands. Its Lease and Namespace requests go through a kube client of its own, not
//! the collector's layered client: one of the exceptions the [`crate::api`] docs list.
//!
//! Each replica holds a Lease of its own ([`lease_name`]), labelled with its group
//! ([`GROUP_LABEL`]), and renews it every retry period through the leader elector, whose tenure
//! fences every write the replica sends. Each renewal carries the replica's [`Report`]
//! ([`REPORT_ANNOTATION`]): the ranges it claims and its findings on cluster-scoped owners.
//! A round, every retry period:
//!
//! 1. renew the Lease with the current report; a replica whose tenure ran out, at any moment
//!    since the last round, stops its collector and gives up its ranges before it renews, then
//!    claims them again through step 5 like a new replica: a renewal never gives a collector
//!    back the writes of ranges a peer may have taken meanwhile;
//! 2. list the group's Leases; a peer is live while its record (holder, renew time) changed
//!    within its lease duration on *this* replica's clock, as the elector judges a leader; a
//!    Lease first seen with a renew time older than its duration (plus [`HANDOFF_MARGIN`]) on
//!    this replica's wall clock is not live, and one [`DEAD_LEASE_DURATIONS`] old is deleted;
//! 3. compute the target ranges: fixed by flag, or [`ring::assign`] over the live identities on
//!    the planner's [`Scale`]. The planner is the live replica of the lowest identity: it lists
//!    the namespaces every [`PLAN_EVERY`] rounds and publishes a new scale when the members
//!    changed or the namespaces' split under the published one is off by more than
//!    [`REPLAN_SKEW`]; a replica that sees no scale from the planner changes nothing that round;
//! 4. if the running collector's ranges are not the target, stop it (its tasks and requests
//!    end), then withdraw the claim in a write of its own;
//! 5. with nothing running, claim the target only when no peer claims any of it, a peer's claim
//!    being honoured until [`HANDOFF_MARGIN`] after its Lease expired; write the
//!    claim, read the peers again, and back off if another claim raced with it (the later of two
//!    writers always sees the earlier, so at most one proceeds); then start a collector on the
//!    target, whose workers act only once its monitors have synced.
//!
//! A peer that died keeps its claim until [`HANDOFF_MARGIN`] after its Lease expires on every
//! other replica's clock, and its tenure ended before that ([`crate::leader`]): its ranges are
//! idle for about a lease duration, never collected twice. Every read of a round is bounded
//! (half the renew deadline), so a slow API server makes a round fail, not last.

use super::ring::{self, Scale};
use super::{Orphaned, Ranges, Report, Shard};
use crate::api::shard::fnv1a64;
use crate::leader::{KubeLeases, LeaderElector, LeaseConfig, WallClock};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The label that puts a Lease in a group of shards; its value is the group's name.
pub const GROUP_LABEL: &str = "kube-gc.io/shard-group";

/// The annotation that carries a replica's [`Report`], as JSON.
pub const REPORT_ANNOTATION: &str = "kube-gc.io/shard-report";

/// Rounds between two looks of the planner at the namespaces.
pub const PLAN_EVERY: u64 = 5;

/// How far the largest member's share of namespaces may exceed an equal share before the
/// planner publishes a new scale (each new scale moves ranges, so it is not redrawn for less).
pub const REPLAN_SKEW: f64 = 1.25;

/// How long after a peer's Lease expired (on this replica's clock) its claim is still honoured: a
/// bound on the drift between two replicas' clocks and on how long a write the peer checked
/// against its tenure may still be on its way. Only then are its ranges taken over.
pub const HANDOFF_MARGIN: Duration = Duration::from_secs(5);

/// A Lease unchanged for this many lease durations, on this replica's clock and by its renew time
/// on this replica's wall clock alike, belongs to a replica gone for good, and is deleted.
pub const DEAD_LEASE_DURATIONS: u32 = 5;

/// How a replica's ranges are chosen (`--shards`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assignment {
    /// By the consistent hash ring over the live replicas (`--shards auto`).
    Auto,
    /// Fixed ranges (`--shards INDEX/COUNT`).
    Fixed(Ranges),
}

impl std::str::FromStr for Assignment {
    type Err = String;

    /// `auto`, or `INDEX/COUNT` with INDEX < COUNT ≤ 1024.
    fn from_str(text: &str) -> Result<Assignment, String> {
        if text == "auto" {
            return Ok(Assignment::Auto);
        }
        let fail = || format!("{text:?} is neither auto nor INDEX/COUNT (e.g. 0/3)");
        let (index, count) = text.split_once('/').ok_or_else(fail)?;
        let (index, count): (u64, u64) = (index.parse().map_err(|_| fail())?, count.parse().map_err(|_| fail())?);
        if count == 0 || count > 1024 || index >= count {
            return Err(format!(
                "{text:?}: INDEX must be below COUNT, and COUNT between 1 and 1024"
            ));
        }
        Ok(Assignment::Fixed(Ranges::slice(index, count)))
    }
}

/// The name of the Lease of the replica `identity` in `group`: a DNS label whatever the identity.
pub fn lease_name(group: &str, identity: &str) -> String {
    format!("{group}-shard-{:016x}", fnv1a64(identity.as_bytes()))
}

/// A collector running on a replica's ranges, as membership drives it.
pub trait Collecting: Send + Sync + 'static {
    /// Stops it; returns once none of its tasks or requests is left.
    fn stop(&self) -> impl Future<Output = ()> + Send;

    /// Its report: its ranges and the findings that still stand on its graph
    /// ([`Shard::report_on`]).
    fn report(&self) -> Report;
}

/// What this replica last saw of a peer's Lease: its record, when it changed on this replica's
/// clock, and whether, when first seen, its renew time was already older than its duration (plus
/// [`HANDOFF_MARGIN`]) on this replica's wall clock.
struct Seen {
    record: (String, Option<MicroTime>),
    at: Instant,
    stale: bool,
}

/// The peers as one reading of the Leases found them.
#[derive(Default)]
struct Peers {
    /// The live peers' reports, by identity: the members, and the findings that count.
    live: BTreeMap<String, Report>,
    /// The ranges claimed by live peers and by peers expired less than [`HANDOFF_MARGIN`] ago.
    claims: Vec<Ranges>,
}

/// What one peer's Lease says of it.
enum Judged {
    /// Live: a member, whose report counts.
    Live(String, Report),
    /// Expired, but not long enough ago for its claim on these ranges to be let go.
    Claiming(Ranges),
    /// Expired: its claim is void.
    Expired,
    /// Gone for good ([`DEAD_LEASE_DURATIONS`]): its Lease is deleted.
    Gone,
}

impl Peers {
    /// True when a peer's claim overlaps `ranges`.
    fn claim(&self, ranges: &Ranges) -> bool {
        self.claims.iter().any(|c| c.intersects(ranges))
    }
}

/// One replica's membership; see the [module docs](self).
pub struct Membership<G> {
    elector: LeaderElector<KubeLeases>,
    lease: LeaseConfig,
    group: String,
    assignment: Assignment,
    /// The ranges this replica's Lease claims.
    claimed: Ranges,
    /// Owners orphaned lately, by this replica's collectors or any replica of the group.
    orphaned: Arc<Orphaned>,
    running: Option<(Arc<Shard>, Arc<G>)>,
    seen: BTreeMap<String, Seen>,
    client: kube::Client,
    /// As planner: the scale published, and the members it was drawn for.
    plan: Option<(Scale, Vec<String>)>,
    rounds: u64,
}

impl<G: Collecting> Membership<G> {
    /// The membership of the replica `lease.identity` in `group`, whose Lease is `lease`
    /// (named by [`lease_name`]).
    pub fn new(client: kube::Client, lease: LeaseConfig, group: &str, assignment: Assignment) -> Self {
        let elector = LeaderElector::over_kube(client.clone(), lease.clone()).label(GROUP_LABEL, group);
        Membership {
            elector,
            lease,
            group: group.to_string(),
            assignment,
            claimed: Ranges::default(),
            orphaned: Arc::default(),
            running: None,
            seen: BTreeMap::new(),
            client,
            plan: None,
            rounds: 0,
        }
    }

    /// The elector, whose tenure fences the replica's writes.
    pub fn elector(&self) -> &LeaderElector<KubeLeases> {
        &self.elector
    }

    /// The ranges claimed now.
    pub fn claimed(&self) -> &Ranges {
        &self.claimed
    }

    /// Runs rounds forever, starting a collector with `start` whenever this replica takes ranges.
    pub async fn run<F, Fut>(&mut self, mut start: F)
    where
        F: FnMut(Arc<Shard>) -> Fut,
        Fut: Future<Output = Arc<G>>,
    {
        loop {
            self.round(&mut start).await;
            tokio::time::sleep(self.lease.retry_period).await;
        }
    }

    /// Stops the collector and gives the Lease up, so that the peers take the ranges at once.
    pub async fn leave(&mut self) {
        self.stop_collector().await;
        self.claimed = Ranges::default();
        self.publish().await;
        if let Err(e) = self.elector.release().await {
            tracing::warn!(error = %crate::api::one_line(&e), "could not release the shard lease");
        }
    }

    async fn round<F, Fut>(&mut self, start: &mut F)
    where
        F: FnMut(Arc<Shard>) -> Fut,
        Fut: Future<Output = Arc<G>>,
    {
        if self.running.is_some() && !self.elector.tenure().is_current() {
            // The tenure lapsed since the last round (a pause, a slow round, failed renewals): a
            // peer may have taken the ranges meanwhile. A renewal must not give the collector
            // back its writes: the ranges are given up, and claimed again as a new replica would.
            tracing::warn!("shard lease lapsed; stopping the collector and claiming its ranges again");
            self.stop_collector().await;
            self.claimed = Ranges::default();
        }
        if !self.publish().await {
            // Fenced: the replica's writes are refused already; it stops acting altogether.
            if self.running.is_some() {
                tracing::warn!("shard lease not renewed in time; stopping the collector");
            }
            self.stop_collector().await;
            self.claimed = Ranges::default();
            return;
        }
        let Some(peers) = self.read_peers().await else { return };
        let Some(target) = self.target(&peers.live).await else {
            return; // no scale from the planner yet
        };
        if let Some((shard, _)) = &self.running {
            if *shard.ranges() == target {
                shard.set_peers(peers.live);
                return;
            }
            tracing::info!(from = %shard.ranges(), to = %target, "shard ranges change hands; stopping the collector first");
            self.stop_collector().await;
            self.claimed = Ranges::default();
            self.publish().await;
            return;
        }
        if target.is_empty() {
            return;
        }
        if peers.claim(&target) {
            tracing::debug!("waiting for a peer to let go of ranges this replica is to take");
            return;
        }
        self.claimed = target.clone();
        if !self.publish().await {
            self.claimed = Ranges::default();
            return;
        }
        let Some(peers) = self.read_peers().await else {
            self.claimed = Ranges::default();
            self.publish().await;
            return;
        };
        if peers.claim(&target) {
            tracing::info!("a peer claimed some of the same ranges at the same time; backing off");
            self.claimed = Ranges::default();
            self.publish().await;
            tokio::time::sleep(self.lease.retry_period.mul_f64(rand::random::<f64>())).await;
            return;
        }
        tracing::info!(ranges = %target, peers = peers.live.len(), "collecting a shard");
        let shard = Arc::new(Shard::new(target).with_orphaned(self.orphaned.clone()));
        shard.set_peers(peers.live);
        let collector = start(shard.clone()).await;
        self.running = Some((shard, collector));
    }

    /// The ranges this replica should hold, with `live` peers; `None` while the planner has
    /// published no scale.
    async fn target(&mut self, live: &BTreeMap<String, Report>) -> Option<Ranges> {
        if let Assignment::Fixed(ranges) = &self.assignment {
            return Some(ranges.clone());
        }
        let me = self.lease.identity.clone();
        let mut members: Vec<String> = live.keys().cloned().collect();
        members.push(me.clone());
        members.sort_unstable();
        members.dedup();
        let scale = if members[0] == me {
            self.plan(&members).await
        } else {
            self.plan = None;
            live.get(&members[0]).and_then(|r| r.scale.clone())?
        };
        Some(ring::assign(&members, &me, &scale))
    }

    /// As planner: the scale in force for `members`, drawn again from the namespaces when the
    /// members changed or, every [`PLAN_EVERY`] rounds, when the split has drifted.
    async fn plan(&mut self, members: &[String]) -> Scale {
        self.rounds += 1;
        let stale = self.plan.as_ref().is_none_or(|(_, drawn_for)| drawn_for != members);
        if stale || self.rounds.is_multiple_of(PLAN_EVERY) {
            match self.namespace_hashes().await {
                Some(mut hashes) => {
                    let skewed = self
                        .plan
                        .as_ref()
                        .is_some_and(|(scale, _)| skew(scale, members, &hashes) > REPLAN_SKEW);
                    if stale || skewed {
                        let scale = Scale::of(&mut hashes);
                        tracing::info!(
                            members = members.len(),
                            namespaces = hashes.len(),
                            "drew the shards' scale"
                        );
                        self.plan = Some((scale, members.to_vec()));
                    }
                }
                None if stale => self.plan = Some((Scale::default(), members.to_vec())),
                None => {}
            }
        }
        self.plan.as_ref().map(|(scale, _)| scale.clone()).unwrap_or_default()
    }

    /// The hashes of every namespace's name; `None` when they could not be listed.
    async fn namespace_hashes(&self) -> Option<Vec<u64>> {
        let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(self.client.clone());
        let listed = tokio::time::timeout(
            self.call_timeout(),
            api.list_metadata(&kube::api::ListParams::default()),
        )
        .await;
        match listed.unwrap_or_else(|_| Err(timed_out("listing the namespaces"))) {
            Ok(list) => Some(
                list.items
                    .iter()
                    .filter_map(|n| n.metadata.name.as_deref())
                    .map(|n| fnv1a64(n.as_bytes()))
                    .collect(),
            ),
            Err(e) => {
                tracing::warn!(error = %crate::api::one_line(&e), "could not list the namespaces to plan the shards");
                None
            }
        }
    }

    /// Writes the Lease with the current report; true when this replica still holds it.
    async fn publish(&mut self) -> bool {
        // A running collector's shard remembers orphaned owners in `self.orphaned` already.
        let mut report = match &self.running {
            Some((_, collector)) => collector.report(),
            None => Report {
                orphaned: self.orphaned.published(),
                ..Report::default()
            },
        };
        report.ranges = self.claimed.clone();
        report.scale = self.plan.as_ref().map(|(scale, _)| scale.clone());
        let json = serde_json::to_string(&report).unwrap_or_default();
        self.elector.annotate(REPORT_ANNOTATION, json);
        let renewed = tokio::time::timeout(self.lease.renew_deadline, self.elector.renew()).await;
        match renewed.unwrap_or_else(|_| Ok(false)) {
            Ok(held) => held && self.elector.tenure().is_current(),
            Err(e) => {
                tracing::warn!(error = %crate::api::one_line(&e), "could not renew the shard lease");
                self.elector.tenure().is_current()
            }
        }
    }

    /// How long one read of a round may take: half the renew deadline, so that a round with a
    /// slow read still renews in time.
    fn call_timeout(&self) -> Duration {
        self.lease.renew_deadline / 2
    }

    /// The peers as their Leases show them now; `None` when the Leases could not be listed.
    /// Leases of replicas gone for good ([`DEAD_LEASE_DURATIONS`]) are deleted on the way.
    async fn read_peers(&mut self) -> Option<Peers> {
        let listed = tokio::time::timeout(
            self.call_timeout(),
            self.elector.store().list_labelled(GROUP_LABEL, &self.group),
        )
        .await;
        let leases = match listed {
            Ok(Ok(leases)) => leases,
            Ok(Err(e)) => {
                tracing::warn!(error = %crate::api::one_line(&e), "could not list the shard leases");
                return None;
            }
            Err(_) => {
                tracing::warn!("listing the shard leases timed out");
                return None;
            }
        };
        let now = Instant::now();
        let mut peers = Peers::default();
        let mut names = Vec::new();
        for lease in leases {
            let name = lease.metadata.name.clone().unwrap_or_default();
            if name == self.lease.name {
                continue;
            }
            names.push(name.clone());
            // The owners any replica orphaned, live or not: its dependents may be this one's now.
            let report = report_of(&lease);
            self.orphaned.hear(&report.orphaned);
            let Some(judged) = self.judge(&name, &lease, report, now) else {
                continue;
            };
            match judged {
                Judged::Live(identity, report) => {
                    peers.claims.push(report.ranges.clone());
                    peers.live.insert(identity, report);
                }
                Judged::Claiming(ranges) => peers.claims.push(ranges),
                Judged::Expired => {}
                Judged::Gone => self.delete_dead(&lease).await,
            }
        }
        self.seen.retain(|name, _| names.contains(name));
        Some(peers)
    }

    /// Deletes the Lease of a replica gone for good, unless it was renewed since it was read.
    async fn delete_dead(&self, lease: &Lease) {
        let name = lease.metadata.name.as_deref().unwrap_or_default();
        match tokio::time::timeout(self.call_timeout(), self.elector.store().delete_unchanged(lease)).await {
            Ok(Ok(())) => tracing::info!(lease = name, "deleted the Lease of a shard replica gone for good"),
            Ok(Err(e)) => {
                tracing::debug!(lease = name, error = %crate::api::one_line(&e), "could not delete a dead shard lease")
            }
            Err(_) => tracing::debug!(lease = name, "deleting a dead shard lease timed out"),
        }
    }

    /// What a peer's Lease, whose report is `report`, says of it; see [`Judged`]. Every clock here is this replica's own:
    /// the record's last change as this replica observed it (as the elector judges a leader), and
    /// its wall clock only to refuse trust to a Lease that had stopped renewing before this
    /// replica looked, never to take ranges sooner.
    fn judge(&mut self, name: &str, lease: &Lease, report: Report, now: Instant) -> Option<Judged> {
        let spec = lease.spec.as_ref()?;
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
        let record = (holder.clone(), spec.renew_time.clone());
        let duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64);
        let renewed_ago = renewed_ago(lease, &self.lease.clock);
        let seen = self.seen.entry(name.to_string()).or_insert_with(|| Seen {
            record: record.clone(),
            at: now,
            stale: renewed_ago > duration + HANDOFF_MARGIN,
        });
        if seen.record != record {
            *seen = Seen {
                record,
                at: now,
                stale: false,
            };
        }
        let unchanged = now.saturating_duration_since(seen.at);
        Some(if unchanged < duration && !seen.stale {
            Judged::Live(holder, report)
        } else if unchanged < duration + HANDOFF_MARGIN {
            Judged::Claiming(report.ranges)
        } else if unchanged.min(renewed_ago) > duration * DEAD_LEASE_DURATIONS {
            Judged::Gone
        } else {
            Judged::Expired
        })
    }

    async fn stop_collector(&mut self) {
        if let Some((_, collector)) = self.running.take() {
            collector.stop().await;
        }
    }
}

/// How long ago `lease` was last renewed by its renew time, on this replica's wall `clock`; zero
/// for a renew time in the future, and "long ago" for a Lease with none.
fn renewed_ago(lease: &Lease, clock: &WallClock) -> Duration {
    let renewed = lease.spec.as_ref().and_then(|s| s.renew_time.as_ref());
    let Some(MicroTime(renewed)) = renewed else {
        return Duration::MAX;
    };
    clock.since(*renewed)
}

/// The error of a request that did not answer within its round's bound.
fn timed_out(what: &str) -> kube::Error {
    kube::Error::Service(format!("{what} timed out").into())
}

/// The largest member's share of the namespaces of `hashes` under `scale`, over an equal share.
fn skew(scale: &Scale, members: &[String], hashes: &[u64]) -> f64 {
    let largest = members
        .iter()
        .map(|m| {
            let mine = ring::assign(members, m, scale);
            hashes.iter().filter(|h| mine.contains(**h)).count()
        })
        .max()
        .unwrap_or(0);
    largest as f64 * members.len() as f64 / hashes.len().max(1) as f64
}

/// The report a Lease carries. One that cannot be read (a replica of another version) is taken
/// to claim everything and clear nothing, so that no replica claims its ranges or lets an owner
/// go on its word.
fn report_of(lease: &Lease) -> Report {
    let text = lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REPORT_ANNOTATION));
    match text.map(|t| serde_json::from_str::<Report>(t)) {
        Some(Ok(report)) => report,
        None => Report::default(),
        Some(Err(e)) => {
            tracing::warn!(error = %e, "unreadable shard report; treating its ranges as taken");
            Report {
                ranges: Ranges::all(),
                ..Report::default()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_should_parse_auto_and_slices_and_refuse_the_rest() {
        assert_eq!("auto".parse::<Assignment>(), Ok(Assignment::Auto));
        assert_eq!("1/2".parse::<Assignment>(), Ok(Assignment::Fixed(Ranges::slice(1, 2))));
        for bad in ["", "3/3", "1/0", "x/2", "1", "auto2"] {
            assert!(bad.parse::<Assignment>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_lease_name_should_be_a_dns_label_for_any_identity() {
        let name = lease_name("kube-gc", "host_2f1c9a4e-uuid");
        assert!(
            name.len() <= 63
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
        assert_ne!(name, lease_name("kube-gc", "other"));
    }

    /// A membership whose client is never called: `judge` reads only the Leases it is given.
    fn membership() -> Membership<NoCollector> {
        let service = tower::service_fn(|_: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::ErrorKind::NotConnected.into())
        });
        let lease = LeaseConfig {
            namespace: "kube-gc".into(),
            name: lease_name("kube-gc", "me"),
            identity: "me".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            budget: crate::api::layers::Budget { qps: 5.0, burst: 10 },
            clock: WallClock::system(),
        };
        Membership::new(
            kube::Client::new(service, "kube-gc"),
            lease,
            "kube-gc",
            Assignment::Auto,
        )
    }

    struct NoCollector;

    impl Collecting for NoCollector {
        async fn stop(&self) {}

        fn report(&self) -> Report {
            Report::default()
        }
    }

    /// A peer's Lease, last renewed `ago` on this machine's wall clock, claiming every range.
    fn lease_renewed(ago: Duration) -> Lease {
        let mut lease = Lease::default();
        let renewed = k8s_openapi::jiff::Timestamp::now() - ago;
        lease.spec = Some(k8s_openapi::api::coordination::v1::LeaseSpec {
            holder_identity: Some("peer".into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(renewed)),
            ..Default::default()
        });
        let report = serde_json::to_string(&Report {
            ranges: Ranges::all(),
            ..Report::default()
        });
        lease.metadata.annotations = Some([(REPORT_ANNOTATION.to_string(), report.expect("JSON"))].into());
        lease
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_stale_when_first_seen_should_count_for_nothing_but_keep_its_claim_a_while() {
        let mut m = membership();
        let stale = lease_renewed(Duration::from_secs(600));
        let judged = |m: &mut Membership<NoCollector>, lease: &Lease| match m.judge(
            "peer-lease",
            lease,
            report_of(lease),
            Instant::now(),
        ) {
            Some(Judged::Live(..)) => "live",
            Some(Judged::Claiming(_)) => "claiming",
            Some(Judged::Expired) => "expired",
            Some(Judged::Gone) => "gone",
            None => "none",
        };
        assert_eq!(
            judged(&mut m, &stale),
            "claiming",
            "not live, but its claim is honoured on this clock"
        );
        tokio::time::advance(Duration::from_secs(15) + HANDOFF_MARGIN).await;
        assert_eq!(judged(&mut m, &stale), "expired");
        tokio::time::advance(Duration::from_secs(15) * DEAD_LEASE_DURATIONS).await;
        assert_eq!(
            judged(&mut m, &stale),
            "gone",
            "unchanged for 5 durations on both clocks"
        );

        let mut m = membership();
        let fresh = lease_renewed(Duration::ZERO);
        assert_eq!(judged(&mut m, &fresh), "live");
        tokio::time::advance(Duration::from_secs(15) * (DEAD_LEASE_DURATIONS + 1)).await;
        assert_eq!(
            judged(&mut m, &fresh),
            "expired",
            "its renew time is recent on the wall clock"
        );
    }

    #[test]
    fn an_unreadable_report_should_claim_everything_and_clear_nothing() {
        let mut lease = Lease::default();
        assert_eq!(report_of(&lease), Report::default());
        lease.metadata.annotations = Some([(REPORT_ANNOTATION.to_string(), "{not json".to_string())].into());
        let report = report_of(&lease);
        assert!(report.ranges.is_all() && report.clear_foreground.is_empty() && report.clear_orphan.is_empty());
    }
}
