//! The periodic audit: now and then, a bounded sample of the graph is compared with the API
//! server, and drift that outlives the watch lag is counted, logged and repaired.
//!
//! Invariant: the audit feeds the graph only facts it read from the API server, through the
//! [`Router`], as a watch would: an update event built from an object it read, or, for an object
//! the server no longer has, the virtual delete the workers route for it. It never writes to the
//! cluster and never decides anything about garbage; the builders and workers handle what it
//! routes under their usual rules. A virtual delete makes no tombstone; like a worker's, it puts
//! the object in absentOwnerCache when dependents named it, which the audit has earned by reading
//! the object absent twice, [`AuditConfig::recheck_after`] apart, while its resource's view was
//! complete (the condition the workers ask before acting on an absent owner).
//!
//! # A round
//!
//! Every [`AuditConfig::period`]:
//!
//! 1. **Nodes.** Up to [`AuditConfig::sample`] observed nodes drawn at random from the graph are
//!    read live, one GET each (the workers' request budget). A 404, or another UID under the name,
//!    makes the node a *gone* suspect; an object whose resourceVersion is newer than the node's
//!    (or, when versions are not numbers, whose owners or deletion state differ) a *stale* one.
//! 2. **A list page.** One page of [`AuditConfig::sample`] objects of a monitored resource chosen at
//!    random (the monitors' budget), read from where that resource's previous page ended, so
//!    rounds walk each resource whole in time. An object the graph lacks is a *missing* suspect;
//!    the others are compared as in 1.
//! 3. **Recheck.** A watch lags: an object created, changed or deleted just before the reads is
//!    on its way to the graph. So each suspect is judged again [`AuditConfig::recheck_after`]
//!    later, against the graph as it is then and a second live read, and counts as drift only if
//!    the same drift is still there; a stale node must still be older than the version first read.
//!
//! Only resources whose monitor's view is complete are audited: a monitor that is listing or
//! relisting routes what it reads anyway, and its view is no evidence yet.
//!
//! Drift is counted in `kube_gc_audit_drift_total{kind}` (`missing`, `stale`, `gone`), objects
//! compared in `kube_gc_audit_objects_checked_total`, and each drift is logged with the object.

use crate::api::{ApiError, ClusterApi, Gvk, Gvr, PartialObjectMeta, SharedRestMapper};
use crate::event::{EventType, GraphEvent};
use crate::graph::{Graph, Handle, Identity, ResourceVersion, Uid};
use crate::router::Router;
use crate::shard::Shard;
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Settings of the audit (`kube-gc run --audit-period`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditConfig {
    /// Time between two rounds.
    pub period: Duration,
    /// Graph nodes read live per round, and objects per list page.
    pub sample: usize,
    /// How long a suspect is given to reach the graph by its watch before it counts as drift.
    pub recheck_after: Duration,
}

impl AuditConfig {
    /// A round every `period`, with the default sample and recheck delay.
    pub fn every(period: Duration) -> Self {
        AuditConfig {
            period,
            ..AuditConfig::default()
        }
    }
}

impl Default for AuditConfig {
    /// A round every 10 minutes of 100 GETs and a list page of 100: about 0.2 requests a second
    /// at most, next to the workers' 40 a second. The recheck waits 10 s, far beyond a healthy
    /// watch's lag (milliseconds) and short enough to repair in the same round.
    fn default() -> Self {
        AuditConfig {
            period: Duration::from_secs(600),
            sample: 100,
            recheck_after: Duration::from_secs(10),
        }
    }
}

/// How the graph differs from the cluster for one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DriftKind {
    /// The cluster has the object; the graph has no node for it.
    Missing,
    /// The graph's node is older than the object, or says other things of its owners or
    /// deletion.
    Stale,
    /// The graph has a node for an object the cluster no longer has.
    Gone,
}

impl DriftKind {
    /// Every kind, in the order metrics list them.
    pub const ALL: [DriftKind; 3] = [DriftKind::Missing, DriftKind::Stale, DriftKind::Gone];

    /// The `kind` label.
    pub fn as_str(self) -> &'static str {
        match self {
            DriftKind::Missing => "missing",
            DriftKind::Stale => "stale",
            DriftKind::Gone => "gone",
        }
    }
}

/// The audit's counters, shared with `/metrics`.
#[derive(Debug, Default)]
pub struct AuditMetrics {
    checked: AtomicU64,
    drift: [AtomicU64; 3],
}

impl AuditMetrics {
    /// Objects compared with the graph so far.
    pub fn checked(&self) -> u64 {
        self.checked.load(Ordering::Relaxed)
    }

    /// Drift of `kind` found (and repaired) so far.
    pub fn drift(&self, kind: DriftKind) -> u64 {
        self.drift[kind as usize].load(Ordering::Relaxed)
    }

    fn count_checked(&self, n: usize) {
        self.checked.fetch_add(n as u64, Ordering::Relaxed);
    }

    fn count_drift(&self, kind: DriftKind) {
        self.drift[kind as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// What the audit needs to know of the monitors.
pub trait Monitored: Send + Sync + 'static {
    /// The monitored resources whose view is complete, with the kind each one's events carry.
    fn complete(&self) -> BTreeMap<Gvr, Gvk>;
}

/// One object that looked different from the graph, to be judged again.
struct Suspect {
    kind: DriftKind,
    gvr: Gvr,
    gvk: Gvk,
    namespace: String,
    name: String,
    uid: Uid,
    /// The resourceVersion of the first live read, for a stale suspect.
    seen: ResourceVersion,
}

/// The auditor: reads, compares and routes repairs. Built by the controller.
pub struct Auditor<C> {
    /// The cluster, through the collector's request layers.
    pub api: Arc<C>,
    /// The graph it compares with.
    pub graph: Arc<Graph>,
    /// Where repairs go.
    pub router: Router,
    /// The REST mapper in force, to locate a node's object.
    pub mapper: Arc<SharedRestMapper>,
    /// The monitors' views.
    pub monitored: Arc<dyn Monitored>,
    /// The counters.
    pub metrics: Arc<AuditMetrics>,
    /// Settings.
    pub config: AuditConfig,
    /// The collector's part of the cluster: a page of a namespaced resource is read in it.
    pub shard: Arc<Shard>,
    /// Per resource, where its next list page starts. Only resources monitored at the last round
    /// keep an entry, so a removed resource leaves nothing behind.
    cursors: Mutex<BTreeMap<Gvr, String>>,
}

impl<C: ClusterApi> Auditor<C> {
    /// An auditor with no list read yet.
    #[allow(clippy::too_many_arguments, reason = "each is one of the stages it reads or feeds")]
    pub fn new(
        api: Arc<C>,
        graph: Arc<Graph>,
        router: Router,
        mapper: Arc<SharedRestMapper>,
        monitored: Arc<dyn Monitored>,
        metrics: Arc<AuditMetrics>,
        config: AuditConfig,
    ) -> Self {
        Auditor {
            api,
            graph,
            router,
            mapper,
            monitored,
            metrics,
            config,
            shard: Arc::new(Shard::whole()),
            cursors: Mutex::new(BTreeMap::new()),
        }
    }

    /// A round every period, forever.
    pub async fn run(self) {
        let mut rng = SmallRng::from_entropy();
        loop {
            tokio::time::sleep(self.config.period).await;
            self.round(&mut rng).await;
        }
    }

    /// One round (see the [module docs](self)); returns the drift found and repaired.
    pub async fn round(&self, rng: &mut SmallRng) -> Vec<(DriftKind, String)> {
        let complete = self.monitored.complete();
        self.cursors.lock().retain(|gvr, _| complete.contains_key(gvr));
        let mut suspects = self.check_nodes(&complete, rng).await;
        suspects.extend(self.check_page(&complete, rng).await);
        if suspects.is_empty() {
            return Vec::new();
        }
        tokio::time::sleep(self.config.recheck_after).await;
        let complete = self.monitored.complete();
        let mut found = Vec::new();
        for suspect in suspects {
            if !complete.contains_key(&suspect.gvr) {
                continue; // its view is being read again, which repairs whatever was wrong
            }
            if let Some(drift) = self.confirm(&suspect).await {
                found.push(drift);
            }
        }
        found
    }

    /// Step 1: sampled nodes, read live.
    async fn check_nodes(&self, complete: &BTreeMap<Gvr, Gvk>, rng: &mut SmallRng) -> Vec<Suspect> {
        let mut suspects = Vec::new();
        let mapper = self.mapper.load();
        for node in self.graph.sample(self.config.sample, rng) {
            if node.is_virtual() {
                continue; // the workers poll virtual nodes themselves
            }
            let id = node.identity();
            let Ok(mapping) = mapper.rest_mapping(id.api_version(), id.kind()) else {
                continue;
            };
            let Some(gvk) = complete.get(&mapping.gvr) else {
                continue;
            };
            self.metrics.count_checked(1);
            let live = match self.read(&mapping.gvr, id).await {
                Ok(live) => live,
                Err(e) => {
                    tracing::debug!(object = %id, error = %e, "audit: read failed; skipped");
                    continue;
                }
            };
            if let Some((kind, seen)) = judge(Some(&node), live.as_ref(), &self.graph, gvk) {
                suspects.push(Suspect {
                    kind,
                    gvr: mapping.gvr,
                    gvk: gvk.clone(),
                    namespace: id.namespace().to_string(),
                    name: id.name.to_string(),
                    uid: id.uid.clone(),
                    seen,
                });
            }
        }
        suspects
    }

    /// Step 2: one list page of a random complete resource.
    async fn check_page(&self, complete: &BTreeMap<Gvr, Gvk>, rng: &mut SmallRng) -> Vec<Suspect> {
        let resources: Vec<(&Gvr, &Gvk)> = complete.iter().collect();
        let Some(&(gvr, gvk)) = resources.choose(rng) else {
            return Vec::new();
        };
        let from = self.cursors.lock().get(gvr).cloned().unwrap_or_default();
        let namespaced = self.mapper.load().resource(gvr).is_some_and(|r| r.namespaced);
        let selector = self.shard.selector().filter(|_| namespaced);
        let page = match self.api.list_page(gvr, selector, &from, self.config.sample).await {
            Ok(page) => page,
            Err(e) => {
                if e.is_gone() {
                    self.cursors.lock().remove(gvr); // the token expired: start over next time
                }
                tracing::debug!(resource = %gvr, error = %e, "audit: list failed; skipped");
                return Vec::new();
            }
        };
        self.cursors.lock().insert(gvr.clone(), page.continue_token);
        self.metrics.count_checked(page.items.len());
        let mut suspects = Vec::new();
        for object in &page.items {
            let meta = &object.metadata;
            if namespaced && !self.shard.keeps(&meta.namespace) {
                continue;
            }
            let uid = Uid::parse(&meta.uid);
            let node = self.graph.get(&uid).filter(|n| !n.is_virtual());
            if let Some((kind, seen)) = judge(node.as_ref(), Some(object), &self.graph, gvk) {
                suspects.push(Suspect {
                    kind,
                    gvr: gvr.clone(),
                    gvk: gvk.clone(),
                    namespace: meta.namespace.clone(),
                    name: meta.name.clone(),
                    uid,
                    seen,
                });
            }
        }
        suspects
    }

    /// Step 3: judges a suspect again; counts, logs and repairs the drift if it is still there.
    async fn confirm(&self, suspect: &Suspect) -> Option<(DriftKind, String)> {
        let node = self.graph.get(&suspect.uid).filter(|n| !n.is_virtual());
        let live = match self.api.get(&suspect.gvr, &suspect.namespace, &suspect.name).await {
            Ok(o) if Uid::parse(&o.metadata.uid) == suspect.uid => Some(o),
            Ok(_) => None,
            Err(e) if e.is_not_found() => None,
            Err(e) => {
                tracing::debug!(resource = %suspect.gvr, name = %suspect.name, error = %e, "audit: recheck failed; skipped");
                return None;
            }
        };
        let (kind, _) = judge(node.as_ref(), live.as_ref(), &self.graph, &suspect.gvk)?;
        if kind != suspect.kind {
            return None; // it changed since: the next round looks again
        }
        if kind == DriftKind::Stale {
            let behind = node
                .as_ref()
                .is_some_and(|n| n.observation().resource_version.is_older_than(suspect.seen));
            let unknown = !suspect.seen.is_known();
            if !behind && !unknown {
                return None; // the watch caught up with what was first read
            }
        }
        let what = format!(
            "{} {}/{} ({})",
            suspect.gvr, suspect.namespace, suspect.name, suspect.uid
        );
        tracing::warn!(drift = kind.as_str(), object = %what, "audit: the graph differs from the cluster; repairing");
        self.metrics.count_drift(kind);
        self.repair(kind, node.as_ref(), live.as_ref(), &suspect.gvk);
        Some((kind, what))
    }

    /// Routes what a relist would route for the object: its state as read, or its deletion.
    fn repair(&self, kind: DriftKind, node: Option<&Handle>, live: Option<&PartialObjectMeta>, gvk: &Gvk) {
        match (kind, node, live) {
            (DriftKind::Gone, Some(node), _) => self.router.route(GraphEvent::virtual_delete(node.identity())),
            (DriftKind::Missing | DriftKind::Stale, _, Some(live)) => {
                let event_type = if node.is_some() {
                    EventType::Update
                } else {
                    EventType::Add
                };
                match GraphEvent::observed(&self.graph, event_type, &live.metadata, &gvk.api_version(), &gvk.kind) {
                    Ok(event) => self.router.route(event),
                    Err(e) => tracing::warn!(error = %e, "audit: an unreadable object left as it is"),
                }
            }
            _ => {}
        }
    }

    /// The object a node stands for, read live: `None` when the name is free or held by another
    /// UID.
    async fn read(&self, gvr: &Gvr, id: &Identity) -> Result<Option<PartialObjectMeta>, ApiError> {
        match self.api.get(gvr, id.namespace(), &id.name.to_string()).await {
            Ok(o) if Uid::parse(&o.metadata.uid) == id.uid => Ok(Some(o)),
            Ok(_) => Ok(None),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// How `node` (an observed node, if any) differs from `live` (the object with the node's UID, if
/// the cluster has it), with the live resourceVersion; `None` when they agree.
fn judge(
    node: Option<&Handle>,
    live: Option<&PartialObjectMeta>,
    graph: &Graph,
    gvk: &Gvk,
) -> Option<(DriftKind, ResourceVersion)> {
    match (node, live) {
        (None, None) => None,
        (None, Some(live)) => Some((
            DriftKind::Missing,
            ResourceVersion::parse(&live.metadata.resource_version),
        )),
        (Some(_), None) => Some((DriftKind::Gone, ResourceVersion::UNKNOWN)),
        (Some(node), Some(live)) => {
            let event =
                GraphEvent::observed(graph, EventType::Update, &live.metadata, &gvk.api_version(), &gvk.kind).ok()?;
            let seen = node.observation();
            let now = event.object.observation;
            let stale = if seen.resource_version.is_known() && now.resource_version.is_known() {
                seen.resource_version.is_older_than(now.resource_version)
            } else {
                seen.being_deleted != now.being_deleted
                    || seen.finalizers != now.finalizers
                    || node.with_owners(|owners| owners != event.object.owners.as_slice())
            };
            stale.then_some((DriftKind::Stale, now.resource_version))
        }
    }
}
