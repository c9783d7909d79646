//! The controller's own counters, under upstream's names (spec §9).

use std::sync::atomic::{AtomicU64, Ordering};

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
#[derive(Debug, Default)]
pub struct ControllerMetrics {
    /// `garbagecollector_controller_resources_sync_error_total`.
    pub sync_errors: Counter,
}
