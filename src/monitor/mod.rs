//! Monitors: one watch per deletable resource, turning watch events into
//! [`GraphEvent`](crate::event::GraphEvent)s for the router (spec §2).
//!
//! Invariant: a monitor routes the events of its resource in the order the server sent them, and
//! after reading the whole resource again it routes a delete for every object that vanished while
//! it was not watching, so the graph never keeps a node for an object its monitor no longer sees.
//! It keeps only each object's UID for that purpose (kube-gc has no informer object cache): a
//! vanished object's delete is named from its graph node, read once the builders have applied
//! every event routed before the read's end, so a node whose add is still on its way to a builder
//! is never missed.
//!
//! # Reading the whole resource
//!
//! At its start, and again when its watch history has expired (410), a monitor reads its whole
//! resource one of two ways ([`SyncMode`]):
//!
//! - by watch-list ([`watch_list`], the default): one WATCH streams every object, then a bookmark
//!   that ends them, and goes on as the watch; the server builds no LIST response;
//! - by paginated LIST then WATCH ([`list`]), when `--feature-gates WatchListClient=false` says so
//!   or the server refused a watch-list, which it is then never asked for again.
//!
//! Either way, objects are routed as they arrive, the deletes for objects the read did not show
//! wait for its end, as an informer's replace does, and the monitor reports synced only then. A
//! read that found objects vanished ends only once the builders caught up with what was routed
//! before its end (`Watcher::route_vanished`). The objects a monitor knows are the graph's
//! observed nodes of its kind, taken when a read starts, once the builders caught up with what it
//! routed (`Watcher::unsee_known`); a first read, with nothing known before it, never waits.
//!
//! # Keeping the view under faults
//!
//! A monitor never gives up, and never throws away more than a fault forces it to:
//!
//! - A list is read in pages, each routed as it arrives, so a monitor holds one page at a time,
//!   not the whole resource. A page that fails is asked for again from its own continue token;
//!   only a 410 (the token expired) starts the list again from its first page. A watch-list that
//!   breaks before its bookmark is opened again.
//! - A watch that ends with any error other than 410 is reopened from the last resourceVersion
//!   seen (bookmarks included), so nothing is read again; only a 410 (history expired) leads
//!   to a new read, during which the view counts as incomplete ([`MonitorStatus::is_relisting`]).
//! - Failures wait out a jittered, doubling [`Backoff`] that any progress resets: a page, an
//!   event, a watch that stayed open (a quiet resource's watch that the server closes on time),
//!   or a watch that ended with 410: that is the server's answer, and the new read starts from
//!   the first step.
//!
//! Like an informer with resync period 0, a monitor forwards every update, unfiltered (spec §12.1).
//!
//! # The state machine and its driver
//!
//! All of the above is decided in one place, as kube-runtime's `watcher` decides it: the enum
//! [`state::State`] says where a monitor is (asking for a watch-list, a page or a watch, backing
//! off before asking again, streaming a watch-list's initial events, following a watch), and the
//! pure, synchronous [`State::step`](state::State::step) takes what was observed
//! ([`state::Input`]: an answer, an event, a stream's end, a timer) to the next state and what to
//! do ([`state::Action`]: a request, a route, a status update, a backoff, a log line). The
//! [`driver`] performs the actions against the API, the router, the graph and the clock, and
//! feeds their answers back; it keeps the open stream, the UIDs a read has not shown yet, the backoff and
//! the clocks, and decides nothing about what to ask for next, or when.

mod backoff;
mod driver;
mod list;
mod state;
mod status;
mod watch_list;

pub use backoff::Backoff;
pub use status::{MonitorStatus, SyncMode};
pub use watch_list::{INITIAL_EVENTS_END_WAIT, INITIAL_EVENTS_MIN_RATE};

use crate::api::{ClusterApi, Gvk, Gvr};
use crate::graph::{Graph, Uid};
use crate::router::Router;
use crate::shard::Shard;
use driver::Watcher;
use std::collections::HashSet;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Watch events a monitor routes between two checks for room in the router ([`Router::room`]).
const ROOM_CHECK_EVERY: u64 = 64;

/// Objects per list page, as client-go's pager asks for by default. Each page is routed before
/// the next is asked for, so a monitor holds one page at a time, whatever the size of the
/// resource.
const LIST_PAGE_SIZE: usize = 500;

/// A watch that ends, without an error or an event, sooner than this after it opened is treated
/// as a failure (client-go's reflector calls it a very short watch); one that stayed open longer
/// made progress, even on a resource where nothing happened.
const SHORT_WATCH: std::time::Duration = std::time::Duration::from_secs(1);

/// How long one wait for the builders to apply the events routed before a read's end lasts before
/// it is logged and started again ([`Watcher::route_vanished`]).
const APPLIED_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// A running monitor of one resource.
pub struct Monitor {
    /// The kind the resource maps to (the one stamped on its events).
    pub gvk: Gvk,
    status: Arc<MonitorStatus>,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Monitor {
    /// True once the first list has been routed (upstream's `HasSynced`).
    pub fn has_synced(&self) -> bool {
        self.status.is_synced()
    }

    /// The state of the monitor's view.
    pub fn status(&self) -> &Arc<MonitorStatus> {
        &self.status
    }

    /// Stops the monitor's task and waits for it to end.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            // The task only ends by cancellation; a panic in it was already reported.
            let _ = task.await;
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The UIDs of the objects a read has not shown yet. A UID is all it keeps of an object: the name
/// and namespace a routed delete needs are the graph node's ([`Watcher::route_vanished`]). UIDs
/// are random, so the set hashes them with foldhash's fast hasher rather than SipHash.
type UidSet = HashSet<Uid, foldhash::fast::RandomState>;

/// Starts a monitor of `gvr`, whose objects are of kind `gvk`, on the current runtime; it reads
/// its whole resource by `mode` until the server refuses a watch-list. A namespaced resource's
/// monitor sees only the objects of `shard`'s namespaces; a cluster-scoped one's, all.
pub fn start<C: ClusterApi>(
    api: Arc<C>,
    graph: Arc<Graph>,
    router: Router,
    (gvr, gvk): (Gvr, Gvk),
    mode: SyncMode,
    shard: Option<Arc<Shard>>,
) -> Monitor {
    let status = Arc::new(MonitorStatus::default());
    status.set_sync_mode(mode);
    let stop = CancellationToken::new();
    let watcher = Watcher::new(api, graph, router, gvr, &gvk, status.clone(), shard);
    let token = stop.clone();
    let task = tokio::spawn(async move {
        tokio::select! {
            _ = token.cancelled() => {}
            _ = watcher.run(mode) => {}
        }
    });
    Monitor {
        gvk,
        status,
        stop,
        task: Some(task),
    }
}
