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
//! a [`Finding`] for the owner; [`membership`] publishes the findings on the replica's Lease with
//! the ranges they speak for. The owner's replica removes the finalizer only when its own ranges
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

pub mod membership;
mod ranges;
pub mod ring;

pub use ranges::Ranges;

use crate::api::shard::ShardSelector;
use crate::graph::{Identity, Uid};
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What this replica found for a cluster-scoped owner being deleted with a finalizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finding {
    /// Dependents in this replica's ranges still hold the owner (block it, or still refer to it).
    Pending,
    /// No dependent in this replica's ranges holds the owner any more.
    Clear,
}

/// What one live replica published on its Lease.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// The ranges it acts on (none while it changes hands).
    pub ranges: Ranges,
    /// Cluster-scoped owners with no dependent left in those ranges.
    #[serde(default)]
    pub clear: Vec<String>,
    /// Cluster-scoped owners that still have dependents in those ranges.
    #[serde(default)]
    pub pending: Vec<String>,
    /// The ring's scale, published by the planner (the live replica of the lowest identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<ring::Scale>,
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
    /// This instance's findings, by owner.
    findings: RwLock<BTreeMap<Uid, Finding>>,
    /// Events the monitors dropped on the client because the server sent them outside the
    /// ranges (it ignores `shardSelector`).
    filtered: AtomicU64,
    /// Whether that was logged.
    logged: AtomicBool,
}

impl Shard {
    /// The part of the cluster in `ranges`.
    pub fn new(ranges: Ranges) -> Shard {
        Shard {
            selector: ranges.namespace_selector(),
            ranges,
            ..Shard::default()
        }
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

    /// Records this instance's finding for the cluster-scoped owner `uid`.
    pub fn record(&self, uid: Uid, finding: Finding) {
        if self.selector.is_none() {
            return; // alone, nobody reads them
        }
        let mut findings = self.findings.write();
        if findings.get(&uid) != Some(&finding) {
            findings.insert(uid, finding);
        }
    }

    /// Forgets the findings for owners `keep` says are gone.
    pub fn retain_findings(&self, keep: impl Fn(&Uid) -> bool) {
        self.findings.write().retain(|uid, _| keep(uid));
    }

    /// The report to publish: the ranges and the findings.
    pub fn report(&self) -> Report {
        let findings = self.findings.read();
        let of = |wanted: Finding| {
            findings
                .iter()
                .filter(|(_, f)| **f == wanted)
                .map(|(uid, _)| uid.to_string())
                .collect()
        };
        Report {
            ranges: self.ranges.clone(),
            clear: of(Finding::Clear),
            pending: of(Finding::Pending),
            scale: None,
        }
    }

    /// Replaces the peers' reports with the ones just read from their Leases.
    pub fn set_peers(&self, peers: BTreeMap<String, Report>) {
        *self.peers.write() = peers;
    }

    /// Whether every shard lets the cluster-scoped owner `uid` go, this one's ranges being
    /// clear: `Ok` when this instance's ranges and those of the live peers that report `uid`
    /// clear cover the hash space; else the peers still holding it, or `[]` for ranges no live
    /// replica reports on.
    pub fn agreed(&self, uid: &Uid) -> Result<(), Vec<String>> {
        let uid = uid.to_string();
        let peers = self.peers.read();
        let clear = peers.values().filter(|r| r.clear.contains(&uid)).map(|r| &r.ranges);
        if Ranges::union(clear.chain([&self.ranges])).is_all() {
            return Ok(());
        }
        Err(peers
            .iter()
            .filter(|(_, r)| !r.clear.contains(&uid))
            .map(|(id, _)| id.clone())
            .collect())
    }
}
