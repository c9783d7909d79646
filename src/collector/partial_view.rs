//! No decision on a partial view (DESIGN §3b): what a worker must know of the monitors' views
//! before it lets an owner go or deletes a dependent for an absent owner.
//!
//! Invariant: a worker removes an `orphan` or `foregroundDeletion` finalizer only while every
//! monitor's view is complete (synced, and not relisting) and the builders have applied every
//! event routed before it looked; and it deletes a dependent, or strips a reference, because an
//! owner is absent only while the monitor of that owner's resource is complete. Otherwise the
//! item waits ([`WAIT`], without counting a failure) and [`Waiting`] says on what, for
//! `/explain`.
//!
//! Why each rule:
//! - *Orphan finalizer.* The orphan worker strips the owner's reference from the dependents the
//!   graph holds. A dependent the graph has not seen yet (its resource's list is still running, or
//!   relisting after 410) keeps the reference; once the owner is gone, that dependent has a
//!   dangling owner and would be collected. Any resource can hold dependents, hence every monitor.
//! - *Foreground finalizer.* An owner goes once no blocking dependent is left in the graph; a
//!   blocking dependent not seen yet would be left behind, orphaned against its owner's wish.
//! - *Policy of a waiting owner's dependent.* It is deleted in the Foreground way when it has
//!   dependents, else by its own finalizers (the Background way, mostly). With a view incomplete,
//!   no dependent in the graph proves nothing, so it is deleted in the
//!   Foreground way, which is right either way: deleted in the background, it would go ahead of
//!   its own blocking dependents. This choice does not wait, as upstream's does not, and events
//!   in flight to the builders do not change it (upstream has that window too).
//! - *Absent owner.* An owner deleted with the Orphan policy while its own monitor was blind left
//!   no trace in [`PartialView::orphaned`]; its dependents must not be judged before that monitor
//!   has caught up.
//!
//! A watch that lags (events in flight) is not incomplete: what it has not delivered yet it will
//! deliver in order. For that window, owners this collector orphaned are remembered by UID in
//! [`PartialView::orphaned`] (bounded), so a dependent that reaches the graph after its owner's
//! orphan finalizer went has that reference removed instead of being deleted; this also closes
//! upstream's orphan race (kubernetes#26120), where a dependent created just before an orphan
//! delete is collected.

use crate::api::Gvr;
use crate::graph::{Tombstones, Uid};
use std::sync::Arc;
use std::time::Duration;

/// How long an item waits for the views before it is looked at again. Short, because a view
/// becomes complete as soon as a list's last page is in; the wait costs no API call.
pub const WAIT: Duration = Duration::from_secs(1);

/// How long a worker waits for the builders to apply the events routed before its decision; they
/// apply hundreds of thousands a second, so only a stopped or overloaded builder takes this long.
pub const BARRIER_PATIENCE: Duration = Duration::from_secs(5);

/// Owners remembered as orphaned by this collector: 64 Ki UIDs, at most about 2.5 MB. Owners
/// deleted with the Orphan policy are few next to the objects, and an entry only has to outlive
/// the lag of the slowest watch.
pub const ORPHANED_CAPACITY: usize = 1 << 16;

/// What the workers know of the monitors' views.
pub trait Views: Send + Sync + 'static {
    /// The monitored resources whose view is incomplete now (not synced yet, or relisting):
    /// among `resources` when given, else among every monitored resource.
    fn incomplete(&self, resources: Option<&[Gvr]>) -> Vec<Gvr>;
}

/// Views that are always complete: for a rig that feeds the builder by hand, with no monitor.
pub struct Complete;

impl Views for Complete {
    fn incomplete(&self, _: Option<&[Gvr]>) -> Vec<Gvr> {
        Vec::new()
    }
}

/// The items that wait for a view, with what they wait for. Written by workers, read by
/// `/explain`; an entry goes when its item is next handled to another end.
#[derive(Default)]
pub struct Waiting {
    items: papaya::HashMap<Uid, Arc<[Gvr]>, foldhash::fast::RandomState>,
}

impl Waiting {
    /// `uid` waits for the views of `resources` (none: for the builders to catch up).
    pub fn wait(&self, uid: Uid, resources: &[Gvr]) {
        self.items.pin().insert(uid, resources.into());
    }

    /// `uid` no longer waits.
    pub fn done(&self, uid: &Uid) {
        if !self.items.is_empty() {
            self.items.pin().remove(uid);
        }
    }

    /// What `uid` waits for, if it waits.
    pub fn on(&self, uid: &Uid) -> Option<Arc<[Gvr]>> {
        self.items.pin().get(uid).cloned()
    }

    /// How many items wait.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when no item waits.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// The workers' share of the partial-view rules; see the [module docs](self).
pub struct PartialView {
    /// The monitors' views.
    pub views: Arc<dyn Views>,
    /// Items waiting for them.
    pub waiting: Arc<Waiting>,
    /// Owners whose `orphan` finalizer this collector removed (or is removing).
    pub orphaned: Tombstones,
}

impl PartialView {
    /// The rules over `views`.
    pub fn new(views: Arc<dyn Views>) -> Self {
        PartialView {
            views,
            waiting: Arc::default(),
            orphaned: Tombstones::new(ORPHANED_CAPACITY),
        }
    }

    /// The rules for a rig with no monitors: views are always complete.
    pub fn complete() -> Self {
        PartialView::new(Arc::new(Complete))
    }
}
