//! The controller's own counters, under upstream's names (spec §9), beside the builders' event
//! counts.

use crate::builder::GraphEventMetrics;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A monotonically increasing counter.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Counters the controller keeps.
#[derive(Debug)]
pub struct ControllerMetrics {
    /// `garbagecollector_controller_resources_sync_error_total`.
    pub sync_errors: Counter,
    /// Events applied by each partition's builder, their recent rate and the time since the last
    /// one; sampled by a task of the collector.
    pub graph_events: Arc<GraphEventMetrics>,
}
