//! Discovery and the monitor set (spec §7.2, §7.5, §7.7): which resources are watched, kept in
//! step with the cluster every sync period.
//!
//! Invariant: the monitor set only changes through [`Monitors::resync`], and a group-version whose
//! discovery failed keeps its monitors that had synced, so a flaky aggregated API never drops a
//! working monitor (and never makes the graph forget its objects).

use super::config::GroupResource;
use crate::api::{ApiError, ApiResource, ClusterApi, Discovery, Gvk, Gvr, RestMapper};
use crate::collector::Views;
use crate::graph::Graph;
use crate::monitor::{self, Monitor, MonitorStatus, SyncMode};
use crate::router::Router;
use crate::shard::Shard;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Resources to monitor: the preferred version of each resource that supports delete, list and
/// watch, minus the ignored ones (upstream's `GetDeletableResources` plus the ignore filter).
/// A resource under an invalid group-version is skipped (spec §7.7 step 1).
pub fn deletable_resources(discovery: &Discovery, ignored: &[GroupResource]) -> BTreeMap<Gvr, Gvk> {
    discovery
        .resources
        .iter()
        .filter(|r| r.preferred && r.is_deletable() && is_valid_group_version(&r.gvr))
        .filter(|r| {
            !ignored
                .iter()
                .any(|i| i.group == r.gvr.group && i.resource == r.gvr.resource)
        })
        .map(|r: &ApiResource| {
            let gvk = Gvk {
                group: r.gvr.group.clone(),
                version: r.gvr.version.clone(),
                kind: r.kind.clone(),
            };
            (r.gvr.clone(), gvk)
        })
        .collect()
}

/// True when the GVR's group-version would parse as one: at most one `/`, as upstream's
/// `schema.ParseGroupVersion` requires (`foo//whatever` does not). Spec §7.7 step 1 skips the
/// others instead of monitoring a resource nobody can list.
fn is_valid_group_version(gvr: &Gvr) -> bool {
    gvr.api_version().matches('/').count() <= 1
}

/// The running monitors, by resource.
pub struct Monitors {
    running: BTreeMap<Gvr, Monitor>,
    /// How new monitors read their whole resource.
    mode: SyncMode,
}

impl Monitors {
    /// No monitor yet; those started will read their resource by `mode`.
    pub fn new(mode: SyncMode) -> Self {
        Monitors {
            running: BTreeMap::new(),
            mode,
        }
    }

    /// Upstream's `IsSynced`: at least one monitor, and every one has synced.
    pub fn is_synced(&self) -> bool {
        !self.running.is_empty() && self.running.values().all(Monitor::has_synced)
    }

    /// Upstream's `IsResourceSynced`.
    pub fn is_resource_synced(&self, gvr: &Gvr) -> bool {
        self.running.get(gvr).is_some_and(Monitor::has_synced)
    }

    /// Takes every monitor out of the set; the future stops them and waits for their tasks to
    /// end (the set's lock need not be held across it).
    pub fn stop_all(&mut self) -> impl std::future::Future<Output = ()> {
        let running = std::mem::take(&mut self.running);
        async move {
            for (_, monitor) in running {
                monitor.stop().await;
            }
        }
    }

    /// The monitored resources whose view is incomplete, among `of` (every one for `None`):
    /// what the collector's [`Views`] asks.
    pub fn incomplete(&self, of: Option<&[Gvr]>) -> Vec<Gvr> {
        let complete = |m: &Monitor| m.status().is_complete();
        match of {
            None => self
                .running
                .iter()
                .filter(|(_, m)| !complete(m))
                .map(|(gvr, _)| gvr.clone())
                .collect(),
            Some(of) => of
                .iter()
                .filter(|gvr| self.running.get(*gvr).is_some_and(|m| !complete(m)))
                .cloned()
                .collect(),
        }
    }

    /// Each monitored resource with the state of its view.
    pub fn statuses(&self) -> BTreeMap<Gvr, Arc<MonitorStatus>> {
        self.running
            .iter()
            .map(|(gvr, m)| (gvr.clone(), m.status().clone()))
            .collect()
    }

    /// How many monitors run.
    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// True when no monitor runs.
    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// The monitored resources.
    pub fn resources(&self) -> BTreeSet<Gvr> {
        self.running.keys().cloned().collect()
    }

    /// The resources among `resources` whose group-version failed discovery and whose monitor has
    /// synced: they are carried over into the next set (spec §7.7 step 3).
    pub fn synced_in_failed_groups(&self, failed: &BTreeMap<String, String>) -> BTreeMap<Gvr, Gvk> {
        self.running
            .iter()
            .filter(|(gvr, m)| failed.contains_key(&gvr.api_version()) && m.has_synced())
            .map(|(gvr, m)| (gvr.clone(), m.gvk.clone()))
            .collect()
    }

    /// Upstream's `resyncMonitors`: keeps monitors still wanted, starts new ones, stops the rest.
    pub fn resync<C: ClusterApi>(
        &mut self,
        wanted: &BTreeMap<Gvr, Gvk>,
        api: &Arc<C>,
        (graph, router): (&Arc<Graph>, &Router),
        (mapper, shard): (&RestMapper, &Arc<Shard>),
    ) {
        self.running.retain(|gvr, _| wanted.contains_key(gvr));
        for (gvr, gvk) in wanted {
            if !self.running.contains_key(gvr) {
                let resource = (gvr.clone(), gvk.clone());
                // Only a namespaced resource is sharded: every replica sees all cluster-scoped objects.
                let namespaced = mapper.resource(gvr).is_some_and(|r| r.namespaced);
                let shard = namespaced.then(|| shard.clone());
                let m = monitor::start(api.clone(), graph.clone(), router.clone(), resource, self.mode, shard);
                self.running.insert(gvr.clone(), m);
            }
        }
    }
}

/// The monitor set as the collector workers see it (the lock is held for a map walk, never across
/// an await).
impl Views for parking_lot::Mutex<Monitors> {
    fn incomplete(&self, of: Option<&[Gvr]>) -> Vec<Gvr> {
        self.lock().incomplete(of)
    }
}

/// The monitor set as the storage version migrator sees it.
impl crate::migrator::MonitorStatuses for parking_lot::Mutex<Monitors> {
    fn status_of(&self, gvr: &Gvr) -> Option<Arc<MonitorStatus>> {
        self.lock().running.get(gvr).map(|m| m.status().clone())
    }
}

/// The monitor set as the audit sees it (the lock is held for a map walk, never across an await).
impl crate::audit::Monitored for parking_lot::Mutex<Monitors> {
    fn complete(&self) -> BTreeMap<Gvr, Gvk> {
        let monitors = self.lock();
        monitors
            .running
            .iter()
            .filter(|(_, m)| m.status().is_complete())
            .map(|(gvr, m)| (gvr.clone(), m.gvk.clone()))
            .collect()
    }
}

/// The outcome of reading discovery for a sync round.
pub struct SyncPlan {
    /// The resources to monitor.
    pub wanted: BTreeMap<Gvr, Gvk>,
    /// The mapper built from the same discovery.
    pub mapper: RestMapper,
}

/// Decides the next monitor set from a discovery answer, or fails when this round must change
/// nothing (an error or zero resources, spec §7.7 step 2).
pub fn plan(
    discovery: Result<Discovery, ApiError>,
    ignored: &[GroupResource],
    monitors: &Monitors,
) -> Result<SyncPlan, SyncError> {
    let discovery = discovery.map_err(SyncError::Discovery)?;
    let mut wanted = deletable_resources(&discovery, ignored);
    if wanted.is_empty() {
        return Err(SyncError::NoResources);
    }
    if !discovery.failed.is_empty() {
        tracing::warn!(failed = ?discovery.failed, "partial discovery failure; keeping the synced monitors of failed groups");
        wanted.extend(monitors.synced_in_failed_groups(&discovery.failed));
    }
    Ok(SyncPlan {
        wanted,
        mapper: RestMapper::new(&discovery.resources),
    })
}

/// Why a sync round changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// Discovery failed as a whole.
    #[error("failed to discover resources: {0}")]
    Discovery(#[source] ApiError),
    /// Discovery answered, but with no deletable resource.
    #[error("discovery returned no deletable resources")]
    NoResources,
}
