//! The collectors of a full replay: one, or `--shards N` replicas that split the cluster as
//! `kube-gc run --shards auto` does.
//!
//! Invariants:
//! - every replica collects on the same in-memory cluster, with the ranges the consistent hash
//!   ring gives it among N members on the scale of the cluster's namespaces, so the ranges cover
//!   the hash space exactly once;
//! - the replicas learn each other's findings (which cluster-scoped owners their ranges still
//!   hold) only through the reports `kube-gc run` publishes on its Lease, serialized and read back
//!   as the annotation's text; here they are exchanged at every settle check instead of every
//!   Lease renewal, since membership is fixed for the whole replay;
//! - "settled" holds only when every replica is: an owner waiting for the other shards' agreement
//!   keeps the replay going.

use super::full::Api;
use kube_gc::api::shard::fnv1a64;
use kube_gc::controller::{Config, GarbageCollector};
use kube_gc::queue::DurationHistogram;
use kube_gc::shard::{ring, Report, Shard};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// One replica's part, for the report.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ShardFigures {
    /// Its share of the hash space (the ring's ranges hold about 1/N of the namespaces, whatever
    /// their share of the hashes).
    pub hash_share: f64,
    /// The stream's namespaces in its ranges.
    pub namespaces: usize,
    /// Nodes in its graph once the first settle is over.
    pub graph_nodes: u64,
}

/// The replicas of one replay.
pub struct Replicas {
    members: Vec<String>,
    /// The namespaces each one holds.
    namespaces: Vec<usize>,
    collectors: Vec<Arc<GarbageCollector<Api>>>,
}

impl Replicas {
    /// Starts `count` collectors with `config` on `api`, the ranges drawn on the scale of
    /// `namespaces`; one collector (`count` 1) collects the whole cluster, unsharded.
    pub async fn start<'a>(
        api: &Arc<Api>,
        config: &Config,
        count: usize,
        namespaces: impl IntoIterator<Item = &'a str>,
    ) -> Replicas {
        let members: Vec<String> = (0..count).map(|i| format!("replica-{i}")).collect();
        let mut hashes: Vec<u64> = namespaces.into_iter().map(|n| fnv1a64(n.as_bytes())).collect();
        hashes.sort_unstable();
        hashes.dedup();
        let scale = ring::Scale::of(&mut hashes);
        let (mut collectors, mut held) = (Vec::with_capacity(count), Vec::with_capacity(count));
        for me in &members {
            let shard = if count == 1 {
                Shard::whole()
            } else {
                Shard::new(ring::assign(&members, me, &scale))
            };
            held.push(hashes.iter().filter(|&&h| shard.ranges().contains(h)).count());
            let config = Config {
                shard: Arc::new(shard),
                ..config.clone()
            };
            collectors.push(GarbageCollector::start(api.clone(), config).await);
        }
        Replicas {
            members,
            namespaces: held,
            collectors,
        }
    }

    /// The first replica, whose progress the spinners show.
    pub fn first(&self) -> &GarbageCollector<Api> {
        &self.collectors[0]
    }

    /// Waits until every replica's monitors have synced; false after `timeout`.
    pub async fn wait_for_sync(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        for gc in &self.collectors {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if !gc.wait_for_sync(left).await {
                return false;
            }
        }
        true
    }

    /// Hands each replica the others' reports, then tells whether all are idle: no event in
    /// flight, no item queued, running or waiting.
    pub fn exchange_and_check(&self) -> bool {
        self.exchange_reports();
        self.collectors
            .iter()
            .all(|gc| gc.is_settled() && gc.waiting().is_empty())
    }

    /// Hands each replica the others' reports, as their published reports reach them.
    pub fn exchange_reports(&self) {
        if self.collectors.len() == 1 {
            return;
        }
        let published: Vec<String> = self
            .collectors
            .iter()
            .map(|gc| serde_json::to_string(&gc.report()).expect("a report serializes"))
            .collect();
        for (i, gc) in self.collectors.iter().enumerate() {
            let peers: BTreeMap<String, Report> = published
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(j, text)| {
                    let report = serde_json::from_str(text).expect("a report reads back");
                    (self.members[j].clone(), report)
                })
                .collect();
            gc.shard().set_peers(peers);
        }
    }

    /// Each replica's part, as it is now.
    pub fn figures(&self) -> Vec<ShardFigures> {
        self.collectors
            .iter()
            .zip(&self.namespaces)
            .map(|(gc, &namespaces)| ShardFigures {
                hash_share: gc.shard().ranges().share(),
                namespaces,
                graph_nodes: gc.graph().len() as u64,
            })
            .collect()
    }

    /// The attemptToDelete queue-wait and processing histograms, summed over the replicas.
    pub fn attempt_to_delete_histograms(&self) -> (DurationHistogram, DurationHistogram) {
        let (mut wait, mut work) = (DurationHistogram::default(), DurationHistogram::default());
        for gc in &self.collectors {
            let stats = gc.attempt_to_delete().stats();
            add(&mut wait, &stats.queue_duration);
            add(&mut work, &stats.work_duration);
        }
        (wait, work)
    }

    /// Starts a storage version migrator beside every replica, writing through `api`.
    pub fn start_migrators<M: kube_gc::api::ClusterApi>(
        &self,
        api: &Arc<M>,
        config: kube_gc::migrator::MigratorConfig,
    ) {
        for gc in &self.collectors {
            gc.start_migrator(api.clone(), config.clone());
        }
    }

    /// Objects the replicas' migrators rewrote, all resources together.
    pub fn migrated(&self) -> u64 {
        let totals = self
            .collectors
            .iter()
            .flat_map(|gc| gc.migrations().totals().into_values());
        totals.map(|t| t.migrated).sum()
    }

    /// Stops every replica and flushes its journal.
    pub async fn shutdown(&self) {
        for gc in &self.collectors {
            gc.shutdown().await;
            gc.journal().flush();
        }
    }
}

fn add(sum: &mut DurationHistogram, more: &DurationHistogram) {
    for (s, m) in sum.buckets.iter_mut().zip(&more.buckets) {
        *s += m;
    }
    sum.count += more.count;
    sum.sum_seconds += more.sum_seconds;
}
