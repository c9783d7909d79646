//! Sharded collection across replicas: each replica collects a part of the cluster, on the API
//! server's sharded list and watch (`shardSelector`, KEP-5866) and on Leases.
//!
//! # The partition
//!
//! Owner references never cross namespaces, except to cluster-scoped owners. So a replica owns
//! [`Ranges`] of a 64-bit hash and:
//!
//! - watches each namespaced resource with the `shardSelector` of its ranges over the namespace
//!   hash, and also filters every event on the client with the same hash, so that a server that
//!   ignores the selector (older than 1.36, or the gate off) costs decoding, never correctness
//!   ([`Shard::filtered`] counts what the client dropped);
//! - watches every cluster-scoped resource whole: they are few, and a namespaced object's
//!   cluster-scoped owner must be in every replica's graph;
//! - acts on a namespaced object of its namespaces, and on a cluster-scoped object whose UID
//!   hashes into its ranges ([`Shard::owns`]); every other node is in its graph only to be
//!   judged as an owner.
//!
//! # Decisions that need every shard
//!
//! A cluster-scoped owner deleted in the Foreground or Orphan way can have dependents in every
//! shard. Each replica handles the dependents in its ranges (deletes or orphans them) and records
//! a [`Finding`] for the owner's deletion (its UID and the finalizer that holds it: [`Hold`]);
//! [`membership`] publishes the findings on the replica's Lease with the ranges they speak for,
//! compactly and within a bound ([`findings`]). The owner's replica removes the finalizer only when its own ranges
//! are clear and the live replicas whose findings say "clear" cover the whole hash space
//! ([`Shard::agreed`]): a range in handoff, or held by a replica that died, has no live
//! report, so the finalizer waits for it.
//!
//! # Invariants
//!
//! - A [`Shard`] is made for one collector instance and its ranges never change; a replica whose
//!   ranges change stops that collector, and starts a new one with the new ranges
//!   ([`membership`]).
//! - A replica publishes ranges on its Lease before it acts on them, and withdraws them only
//!   after its collector has stopped; it claims ranges only when no live Lease claims any of
//!   them, and backs off when a claim raced with another.
//! - Every write a replica sends is fenced by its Lease's tenure
//!   ([`crate::api::layers::Fence`]): a replica whose renewals failed stops writing before any
//!   other can count its Lease as expired and take its ranges.

mod findings;
pub mod membership;
pub mod orphaned;
mod ranges;
pub mod ring;

pub use findings::{Finding, Findings, Hold, OwnerSet, MAX_CLEARED};
pub use orphaned::Orphaned;
pub use ranges::Ranges;

use crate::api::shard::ShardSelector;
use crate::graph::{Graph, Identity, Uid};
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// What one live replica published on its Lease.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The ranges it acts on (none while it changes hands).
    pub ranges: Ranges,
    /// Cluster-scoped owners in Foreground deletion with no blocking dependent left in those
    /// ranges.
    #[serde(default, skip_serializing_if = "OwnerSet::is_empty")]
    pub clear_foreground: OwnerSet,
    /// Cluster-scoped owners in Orphan deletion with every dependent in those ranges orphaned.
    #[serde(default, skip_serializing_if = "OwnerSet::is_empty")]
    pub clear_orphan: OwnerSet,
    /// How many owners still have dependents in those ranges (for operators, not decisions).
    #[serde(default)]
    pub pending_owners: usize,
    /// Owners the replica orphaned lately ([`orphaned`]).
    #[serde(default, skip_serializing_if = "OwnerSet::is_empty")]
    pub orphaned: OwnerSet,
    /// The ring's scale, published by the planner (the live replica of the lowest identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<ring::Scale>,
    /// StorageVersionMigrations whose objects in those ranges are all rewritten
    /// ([`crate::migrator`]).
    #[serde(default, skip_serializing_if = "OwnerSet::is_empty")]
    pub migrated: OwnerSet,
}

impl Report {
    /// True when the report says the deletion of `uid` held by `hold` is clear in its ranges.
    pub fn clears(&self, uid: &Uid, hold: Hold) -> bool {
        match hold {
            Hold::Foreground => self.clear_foreground.contains(uid),
            Hold::Orphan => self.clear_orphan.contains(uid),
        }
    }
}

/// One collector instance's part of the cluster, shared by its monitors and workers; see the
/// [module docs](self).
#[derive(Debug, Default)]
pub struct Shard {
    ranges: Ranges,
    /// The namespaced resources' `shardSelector`; none for the whole hash space.
    selector: Option<ShardSelector>,
    /// The live peers' reports, by identity, as [`membership`] last read them.
    peers: RwLock<BTreeMap<String, Report>>,
    /// This instance's findings, by deletion.
    findings: RwLock<Findings>,
    /// Owners orphaned lately, by this replica's collectors or its peers; none when alone.
    orphaned: Option<Arc<Orphaned>>,
    /// StorageVersionMigrations this instance finished its part of.
    migrated: RwLock<Vec<Uid>>,
    /// Events the monitors dropped on the client because the server sent them outside the
    /// ranges (it ignores `shardSelector`).
    filtered: AtomicU64,
    /// Whether that was logged.
    logged: AtomicBool,
}

impl Shard {
    /// The part of the cluster in `ranges`.
    pub fn new(ranges: Ranges) -> Shard {
        let selector = ranges.namespace_selector();
        Shard {
            orphaned: selector.as_ref().map(|_| Arc::default()),
            selector,
            ranges,
            ..Shard::default()
        }
    }

    /// The same part, remembering orphaned owners in `orphaned`, which the replica keeps for
    /// all its collectors ([`orphaned`]).
    pub fn with_orphaned(mut self, orphaned: Arc<Orphaned>) -> Shard {
        if self.orphaned.is_some() {
            self.orphaned = Some(orphaned);
        }
        self
    }

    /// This instance orphaned `uid`.
    pub fn orphaned(&self, uid: &Uid) {
        if let Some(orphaned) = &self.orphaned {
            orphaned.record(uid);
        }
    }

    /// True when this replica, or a peer, orphaned `uid` lately.
    pub fn was_orphaned(&self, uid: &Uid) -> bool {
        self.orphaned.as_ref().is_some_and(|o| o.contains(uid))
    }

    /// The whole cluster: an unsharded collector's part.
    pub fn whole() -> Shard {
        Shard::new(Ranges::all())
    }

    /// The `shardSelector` a monitor of a namespaced resource sends; none for the whole cluster.
    pub fn selector(&self) -> Option<&ShardSelector> {
        self.selector.as_ref()
    }

    /// The ranges.
    pub fn ranges(&self) -> &Ranges {
        &self.ranges
    }

    /// True when this instance acts on the object `identity` names.
    pub fn owns(&self, identity: &Identity) -> bool {
        self.ranges.owns_identity(identity)
    }

    /// Whether a monitor of a namespaced resource keeps an event of an object in `namespace`;
    /// counts (and once logs) one it drops, which only a server that ignores the selector sends.
    pub fn keeps(&self, namespace: &str) -> bool {
        if self.selector.is_none() || self.ranges.holds_namespace(namespace) {
            return true;
        }
        self.filtered.fetch_add(1, Ordering::Relaxed);
        if !self.logged.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "the API server sent objects outside this replica's shardSelector (it does not \
                 support sharded watches); filtering them on the client (kube_gc_shard_client_filtered_events_total)"
            );
        }
        false
    }

    /// Events dropped on the client so far.
    pub fn filtered(&self) -> u64 {
        self.filtered.load(Ordering::Relaxed)
    }

    /// Records this instance's finding for the deletion of the cluster-scoped owner `uid` held
    /// by `hold`, if `still_held` says the owner is still held that way, asked under the findings'
    /// lock. A worker that judged the owner before its deletion changed (deleted again with the
    /// other policy, the server swapping the finalizers) thus never records over the finding of a
    /// worker that judged the new deletion: either it records first and is overwritten, or the
    /// change is in the graph by then and it records nothing.
    pub fn record(&self, uid: Uid, hold: Hold, finding: Finding, still_held: impl FnOnce() -> bool) {
        if self.selector.is_none() {
            return; // alone, nobody reads them
        }
        let mut findings = self.findings.write();
        if still_held() {
            findings.record(uid, hold, finding);
        }
    }

    /// This instance rewrote every object of its part for the StorageVersionMigration `uid`.
    pub fn record_migrated(&self, uid: Uid) {
        let mut migrated = self.migrated.write();
        if !migrated.contains(&uid) {
            migrated.push(uid);
        }
    }

    /// Whether every shard has finished its part of the StorageVersionMigration `uid`: this
    /// instance's ranges and those of the live peers that report it migrated cover the hash
    /// space (this instance having finished its own part).
    pub fn migration_agreed(&self, uid: &Uid) -> bool {
        let peers = self.peers.read();
        let done = peers.values().filter(|r| r.migrated.contains(uid)).map(|r| &r.ranges);
        Ranges::union(done.chain([&self.ranges])).is_all()
    }

    /// The report to publish: the ranges and the findings that still stand on `graph`. A
    /// finding stands while its owner is in the graph and still observed with the finalizer of
    /// the deletion it speaks for; one that no longer stands is dropped ([`Findings::retain`]).
    /// Whether a "clear" still holds is the workers' to judge, not the report's: a worker records
    /// "clear" for an Orphan deletion once it has patched every dependent, before the graph has
    /// seen the patches, and a finding dropped then would never be recorded again.
    pub fn report_on(&self, graph: &Graph) -> Report {
        self.findings.write().retain(|uid, hold, _| {
            graph
                .get(uid)
                .filter(|n| !n.is_virtual())
                .is_some_and(|owner| hold.held_by(&owner.observation().finalizers))
        });
        // A migration's part stands while the migration exists.
        self.migrated.write().retain(|uid| graph.contains(uid));
        self.report()
    }

    /// The report of the findings as recorded, unchecked: see [`Shard::report_on`].
    fn report(&self) -> Report {
        let (clear_foreground, clear_orphan, pending_owners) = self.findings.read().published();
        Report {
            ranges: self.ranges.clone(),
            clear_foreground,
            clear_orphan,
            pending_owners,
            orphaned: self.orphaned.as_ref().map(|o| o.published()).unwrap_or_default(),
            scale: None,
            migrated: OwnerSet::new(self.migrated.read().iter().map(findings::key).collect()),
        }
    }

    /// Replaces the peers' reports with the ones just read from their Leases, and takes in the
    /// owners they orphaned.
    pub fn set_peers(&self, peers: BTreeMap<String, Report>) {
        if let Some(orphaned) = &self.orphaned {
            peers.values().for_each(|r| orphaned.hear(&r.orphaned));
        }
        *self.peers.write() = peers;
    }

    /// Whether every shard lets the cluster-scoped owner `uid`, held by `hold`, go, this one's
    /// ranges being clear: `Ok` when this instance's ranges and those of the live peers that
    /// report that deletion clear cover the hash space; else the peers still holding it, or `[]`
    /// for ranges no live replica reports on.
    pub fn agreed(&self, uid: &Uid, hold: Hold) -> Result<(), Vec<String>> {
        let peers = self.peers.read();
        let clear = peers.values().filter(|r| r.clears(uid, hold)).map(|r| &r.ranges);
        if Ranges::union(clear.chain([&self.ranges])).is_all() {
            return Ok(());
        }
        Err(peers
            .iter()
            .filter(|(_, r)| !r.clears(uid, hold))
            .map(|(id, _)| id.clone())
            .collect())
    }
}
