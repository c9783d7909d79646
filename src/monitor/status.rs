//! [`MonitorStatus`]: how complete one monitor's view of its resource is, and how it got there.
//!
//! Invariant: only the monitor's own task writes a status; the controller, the collector workers
//! and `/metrics` read it. Each field is one atomic, so a reader may see one field a moment newer
//! than another, never a torn value. `synced` never goes back to false.
//!
//! The collector workers gate decisions on [`MonitorStatus::is_complete`]: a view that is not
//! synced yet, or that is being rebuilt by a relist after its watch history expired (410), may
//! miss objects the cluster has, or hold objects it no longer has.

use crate::graph::ResourceVersion;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How a monitor reads its whole resource, at its start and after its watch history expired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// One watch with `sendInitialEvents=true` (watch-list), as kube-controller-manager's
    /// informers since 1.32.
    WatchList,
    /// A paginated LIST, then a WATCH from its version.
    List,
}

impl SyncMode {
    /// The name `/metrics` and the logs show (label `mode`).
    pub fn as_str(self) -> &'static str {
        match self {
            SyncMode::WatchList => "watch-list",
            SyncMode::List => "list",
        }
    }

    /// The mode `--feature-gates` chooses, as kube-controller-manager takes it: its
    /// `WatchListClient` gate, on by default. Any other gate, or a value that is not a boolean, is
    /// refused with the message a Kubernetes component gives.
    pub fn from_feature_gates(text: &str) -> Result<SyncMode, String> {
        let [watch_list_client] = crate::feature_gates::parse(text, [("WatchListClient", true)])?;
        Ok(if watch_list_client {
            SyncMode::WatchList
        } else {
            SyncMode::List
        })
    }
}

impl std::fmt::Display for SyncMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One monitor's view state; see the [module docs](self).
#[derive(Debug, Default)]
pub struct MonitorStatus {
    synced: AtomicBool,
    /// Set when the monitor reads its resource by paginated LIST ([`SyncMode::List`]); it never
    /// goes back, since a server that refused watch-list once is not asked again.
    listing: AtomicBool,
    relisting: AtomicBool,
    relists: AtomicU64,
    page_retries: AtomicU64,
    list_fallbacks: AtomicU64,
    watch_resumes: AtomicU64,
    /// Milliseconds since the Unix epoch of the last complete list; 0 before the first.
    last_list_ms: AtomicU64,
    /// The resourceVersion the view has reached, in [`ResourceVersion`]'s bits; 0 before the
    /// first sync.
    reached: AtomicU64,
}

impl MonitorStatus {
    /// True once a whole list has been routed (upstream's `HasSynced`).
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// True while a list after the first sync is under way: from its first request until its
    /// last page and the deletes of vanished objects are routed.
    pub fn is_relisting(&self) -> bool {
        self.relisting.load(Ordering::Acquire)
    }

    /// Synced and not relisting: the view holds every object the watch has delivered, and
    /// nothing it was told is gone.
    pub fn is_complete(&self) -> bool {
        self.is_synced() && !self.is_relisting()
    }

    /// How the monitor reads its whole resource.
    pub fn sync_mode(&self) -> SyncMode {
        if self.listing.load(Ordering::Relaxed) {
            SyncMode::List
        } else {
            SyncMode::WatchList
        }
    }

    /// Lists started after the first sync (each after a 410).
    pub fn relists(&self) -> u64 {
        self.relists.load(Ordering::Relaxed)
    }

    /// List pages, or watch-lists, asked for again after a failure.
    pub fn page_retries(&self) -> u64 {
        self.page_retries.load(Ordering::Relaxed)
    }

    /// Reads that began as a watch-list and, the stream broken before its end, went on by
    /// paginated list.
    pub fn list_fallbacks(&self) -> u64 {
        self.list_fallbacks.load(Ordering::Relaxed)
    }

    /// Watches reopened from the last resourceVersion after an error other than 410.
    pub fn watch_resumes(&self) -> u64 {
        self.watch_resumes.load(Ordering::Relaxed)
    }

    /// The resourceVersion the view has reached (client-go's `LastSyncResourceVersion`): that of
    /// the last complete read, or of the last event or bookmark its watch delivered since, once
    /// routed. Unknown before the first sync, and on a server whose versions are not numbers.
    pub fn last_sync_resource_version(&self) -> ResourceVersion {
        ResourceVersion::from_number(self.reached.load(Ordering::Acquire))
    }

    /// Monitor task only: the view has reached `resource_version`.
    pub(super) fn reached(&self, resource_version: &str) {
        let reached = ResourceVersion::parse(resource_version).number();
        self.reached.store(reached, Ordering::Release);
    }

    /// When the last complete list ended, if any did.
    pub fn last_successful_list(&self) -> Option<SystemTime> {
        match self.last_list_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(UNIX_EPOCH + Duration::from_millis(ms)),
        }
    }

    /// Monitor task only: from now on the monitor reads its resource by `mode`.
    pub(super) fn set_sync_mode(&self, mode: SyncMode) {
        self.listing.store(mode == SyncMode::List, Ordering::Relaxed);
    }

    /// Monitor task only: a list begins.
    pub(super) fn list_started(&self) {
        if self.is_synced() {
            self.relists.fetch_add(1, Ordering::Relaxed);
            self.relisting.store(true, Ordering::Release);
        }
    }

    /// Monitor task only: a list's last page and its deletes are routed.
    pub(super) fn list_completed(&self) {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        self.last_list_ms
            .store(u64::try_from(now.as_millis()).unwrap_or(u64::MAX), Ordering::Relaxed);
        self.synced.store(true, Ordering::Release);
        self.relisting.store(false, Ordering::Release);
    }

    /// Monitor task only: a page is asked for again.
    pub(super) fn page_retried(&self) {
        self.page_retries.fetch_add(1, Ordering::Relaxed);
    }

    /// Monitor task only: a broken watch-list's read goes on by list.
    pub(super) fn fell_back_to_list(&self) {
        self.list_fallbacks.fetch_add(1, Ordering::Relaxed);
    }

    /// Monitor task only: a watch is reopened after an error.
    pub(super) fn watch_resumed(&self) {
        self.watch_resumes.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_gate_should_choose_the_sync_mode() {
        assert_eq!(SyncMode::from_feature_gates(""), Ok(SyncMode::WatchList));
        assert_eq!(
            SyncMode::from_feature_gates("WatchListClient=true"),
            Ok(SyncMode::WatchList)
        );
        assert_eq!(
            SyncMode::from_feature_gates("WatchListClient=false"),
            Ok(SyncMode::List)
        );
    }

    #[test]
    fn the_servers_gate_or_a_bad_value_should_be_refused() {
        assert_eq!(
            SyncMode::from_feature_gates("WatchList=false"),
            Err("unrecognized feature gate: WatchList (known: WatchListClient)".to_string())
        );
        assert_eq!(
            SyncMode::from_feature_gates("WatchListClient=off"),
            Err("invalid value of WatchListClient: off, err: not a boolean".to_string())
        );
    }
}
