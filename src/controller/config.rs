//! Configuration of the garbage collector, with upstream's defaults (spec §7.8).

use crate::collector::{CollectorConfig, DEFAULT_ABSENT_OWNER_CACHE_CAPACITY};
use crate::queue::RateLimiterConfig;
use std::time::Duration;

/// A group and resource, version-free: the unit resources are ignored by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupResource {
    /// API group (`""` for core).
    pub group: String,
    /// Plural resource name.
    pub resource: String,
}

impl GroupResource {
    /// Builds one.
    pub fn new(group: &str, resource: &str) -> Self {
        GroupResource {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

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
        }
    }
}

/// One builder partition per available core.
pub fn default_partitions() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}
