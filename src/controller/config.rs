//! Configuration of the garbage collector, with upstream's defaults (spec §7.8).

pub use crate::api::GroupResource;
use crate::collector::CollectorConfig;
use crate::graph::DEFAULT_ABSENT_OWNER_CACHE_CAPACITY;
use crate::journal::Journal;
use crate::monitor::SyncMode;
use crate::queue::RateLimiterConfig;
use crate::shard::Shard;
use std::sync::Arc;
use std::time::Duration;

/// Everything the controller can be told.
#[derive(Clone, Debug)]
pub struct Config {
    /// attemptToDelete workers, and as many attemptToOrphan workers (`--concurrent-gc-syncs`).
    pub workers: usize,
    /// Graph builder partitions (`--partitions`); each is a task of the runtime, so a
    /// multi-threaded runtime runs them in parallel. Default: the available cores.
    pub partitions: usize,
    /// Capacity of absentOwnerCache.
    pub absent_owner_cache_capacity: usize,
    /// Rate limiter of the work queues.
    pub rate_limiter: RateLimiterConfig,
    /// Worker settings.
    pub collector: CollectorConfig,
    /// Resources never monitored (`GCIgnoredResources`).
    pub ignored_resources: Vec<GroupResource>,
    /// How often discovery is re-read (hard-coded 30 s upstream).
    pub sync_period: Duration,
    /// How long workers wait for the monitors' first sync before starting anyway.
    pub initial_sync_timeout: Duration,
    /// How monitors read their whole resource: by watch-list unless
    /// `--feature-gates WatchListClient=false`; a server that refuses it is read by list anyway.
    pub sync_mode: SyncMode,
    /// The deletion journal, and whether the collector runs in shadow mode (`--dry-run`).
    pub journal: Journal,
    /// How long work may wait on the collector with nothing completed, while the API server
    /// answers, before the collector reports a stall (`--stall-after`; see
    /// [`stall`](super::stall)).
    pub stall_after: Duration,
    /// The periodic audit of the graph against the API server (`--audit-period`); off by default.
    pub audit: Option<crate::audit::AuditConfig>,
    /// The part of the cluster this collector collects ([`crate::shard`]): the whole of it by
    /// default. A sharded collector's workers start only once its monitors have synced.
    pub shard: Arc<Shard>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            workers: 20,
            partitions: default_partitions(),
            absent_owner_cache_capacity: DEFAULT_ABSENT_OWNER_CACHE_CAPACITY,
            rate_limiter: RateLimiterConfig::default(),
            collector: CollectorConfig::default(),
            ignored_resources: vec![
                GroupResource::new("", "events"),
                GroupResource::new("events.k8s.io", "events"),
            ],
            sync_period: Duration::from_secs(30),
            initial_sync_timeout: Duration::from_secs(30),
            sync_mode: SyncMode::WatchList,
            journal: Journal::disabled(),
            stall_after: Duration::from_secs(600),
            audit: None,
            shard: Arc::new(Shard::whole()),
        }
    }
}

/// One builder partition per available core.
pub fn default_partitions() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_resource_should_parse_as_kubectl_names_it_and_print_back() {
        for text in ["events", "events.events.k8s.io", "widgets.example.com"] {
            let parsed: GroupResource = text.parse().unwrap();
            assert_eq!(parsed.to_string(), text);
        }
        assert_eq!(
            "events.events.k8s.io".parse(),
            Ok(GroupResource::new("events.k8s.io", "events"))
        );
        for bad in ["", "Pods", ".apps", "pods/status"] {
            assert!(bad.parse::<GroupResource>().is_err(), "{bad:?} should be refused");
        }
    }
}
