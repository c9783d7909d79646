//! Monitors: one watch per deletable resource, turning watch events into [`GraphEvent`]s for
//! the router (spec §2).
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
//! before its end (`Watcher::route_vanished`); a first read, with nothing known before it,
//! never waits.
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
//!   event, or a watch that stayed open (a quiet resource's watch that the server closes on time).
//!
//! Like an informer with resync period 0, a monitor forwards every update, unfiltered (spec §12.1).

mod backoff;
mod list;
mod status;
mod watch_list;

pub use backoff::Backoff;
pub use status::{MonitorStatus, SyncMode};
pub use watch_list::{INITIAL_EVENTS_END_WAIT, INITIAL_EVENTS_MIN_RATE};

use crate::api::{ApiError, ClusterApi, Gvk, Gvr, ObjectMeta, WatchStream};
use crate::event::{EventType, GraphEvent};
use crate::graph::{Graph, Sym, Uid};
use crate::router::Router;
use crate::shard::Shard;
use futures::StreamExt;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
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
/// it is logged and started again ([`Watcher::wait_applied`]).
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

/// The UIDs of the objects a monitor knows. A UID is all it keeps of an object: the name and
/// namespace a routed delete needs are the graph node's ([`Watcher::route_vanished`]), so an
/// entry costs 16 bytes and a control byte, where one that also held the name and namespace cost
/// 32 and one, and took an atomic reference count on the name. UIDs are random, so the set hashes
/// them with foldhash's fast hasher rather than SipHash, which showed as 1–2 % of a
/// million-object sync's CPU.
type KnownSet = HashSet<Uid, foldhash::fast::RandomState>;

/// What a monitor's task needs.
struct Watcher<C> {
    api: Arc<C>,
    graph: Arc<Graph>,
    router: Router,
    gvr: Gvr,
    api_version: Sym,
    kind: Sym,
    status: Arc<MonitorStatus>,
    backoff: Backoff,
    failures: FailureStreak,
    /// Every object the monitor has routed and not yet seen deleted.
    known: KnownSet,
    /// The collector's shard, for a namespaced resource: its selector goes with every list and
    /// watch, and events outside it are dropped ([`crate::shard`]).
    shard: Option<Arc<Shard>>,
}

/// Logs a run of failures once, at its start, and its end.
#[derive(Default)]
struct FailureStreak {
    failing: bool,
}

impl FailureStreak {
    fn failed(&mut self, gvr: &Gvr, what: &str, err: &dyn std::fmt::Display) {
        if !self.failing {
            tracing::warn!(resource = %gvr, error = %err, "{what} failed; retrying with backoff");
            self.failing = true;
        } else {
            tracing::debug!(resource = %gvr, error = %err, "{what} failed again");
        }
    }

    fn recovered(&mut self, gvr: &Gvr) {
        if std::mem::take(&mut self.failing) {
            tracing::info!(resource = %gvr, "monitor recovered");
        }
    }
}

/// Logs that the server refused a watch-list of `gvr`: a warning for the first monitor of the
/// process that meets a refusal, since a server that refuses one resource's almost always
/// refuses them all, and at debug level for the others (`/metrics` shows each monitor's mode).
fn log_refusal(gvr: &Gvr, why: &watch_list::Refused) {
    static LOGGED: AtomicBool = AtomicBool::new(false);
    if LOGGED.swap(true, Ordering::Relaxed) {
        tracing::debug!(resource = %gvr, reason = %why, "server refused watch-list; reading this resource by paginated list");
    } else {
        tracing::warn!(resource = %gvr, reason = %why, "server refused watch-list; monitors read their resources by paginated list instead (kube_gc_monitor_sync_mode in /metrics)");
    }
}

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
    let watcher = Watcher {
        api_version: Sym::new(&gvk.api_version()),
        kind: Sym::new(&gvk.kind),
        api,
        graph,
        router,
        gvr,
        status: status.clone(),
        backoff: Backoff::default(),
        failures: FailureStreak::default(),
        known: KnownSet::default(),
        shard: shard.filter(|s| s.selector().is_some()),
    };
    let token = stop.clone();
    let task = tokio::spawn(async move {
        tokio::select! {
            _ = token.cancelled() => {}
            _ = watcher.run() => {}
        }
    });
    Monitor {
        gvk,
        status,
        stop,
        task: Some(task),
    }
}

impl<C: ClusterApi> Watcher<C> {
    /// Reads the whole resource, then watches from the version read; reads it again only when
    /// the watch's history has expired.
    async fn run(mut self) {
        loop {
            self.status.list_started();
            let (resource_version, stream) = self.read_whole().await;
            self.status.list_completed();
            self.watch_from(resource_version, stream).await;
            tracing::debug!(resource = %self.gvr, "watch history expired; reading the resource again");
        }
    }

    /// Reads and routes the whole resource by the monitor's [`SyncMode`], falling back to the
    /// paginated list for good when the server refuses watch-list, and for this read when the
    /// watch-list broke before its end. Returns the version of the view
    /// and, after a watch-list, its stream, which goes on as a watch from that version.
    async fn read_whole(&mut self) -> (String, Option<WatchStream>) {
        if self.status.sync_mode() == SyncMode::WatchList {
            let unseen = std::mem::take(&mut self.known);
            match self.watch_list(unseen).await {
                Ok(synced) => return (synced.resource_version, Some(synced.stream)),
                Err(watch_list::Unread::Refused(why)) => {
                    log_refusal(&self.gvr, &why);
                    self.status.set_sync_mode(SyncMode::List);
                }
                Err(watch_list::Unread::Broke(why)) => {
                    tracing::warn!(resource = %self.gvr, reason = %why, "watch-list broke before its initial-events-end bookmark; this read goes on by paginated list");
                    self.status.fell_back_to_list();
                }
            }
        }
        let unseen = std::mem::take(&mut self.known);
        (self.list(unseen).await, None)
    }

    /// Routes an object a whole read shows, taking it out of `unseen`: an update if the monitor
    /// knew it before the read or from earlier in it, an add if not. The UID is the event's, so
    /// it is parsed once.
    fn route_listed(&mut self, meta: ObjectMeta, unseen: &mut KnownSet) {
        let Some(mut event) = self.observed(EventType::Add, &meta) else {
            // The read showed it, unreadable as it now is: no delete is routed for it.
            unseen.remove(&Uid::parse(&meta.uid));
            return;
        };
        let known_before = unseen.remove(&event.object.uid);
        // One lookup in the known set both answers and remembers, as `send` would.
        let known_in_read = !self.known.insert(event.object.uid.clone());
        if known_before || known_in_read {
            event.event_type = EventType::Update;
        }
        self.router.route(event);
    }

    /// Routes a delete for every object a whole read did not show, named as its graph node is.
    ///
    /// The node is read only once the builders have applied every event routed before
    /// ([`Watcher::wait_applied`]), this monitor's add of the object included, so a node is never
    /// missed for being still in flight. A UID with no node then is one the graph already let go
    /// (a worker found the object deleted and routed a virtual delete): the builder would drop a
    /// delete for it, so none is routed. A UID whose node is virtual (let go, then named again by
    /// a dependent) is deleted under the name its dependents give it: a real delete removes a
    /// virtual node whatever its name.
    async fn route_vanished(&mut self, unseen: KnownSet) {
        if unseen.is_empty() {
            return;
        }
        self.wait_applied().await;
        for uid in unseen {
            let Some(node) = self.graph.get(&uid) else {
                tracing::trace!(resource = %self.gvr, %uid, "vanished object already gone from the graph");
                continue;
            };
            let identity = node.identity();
            let meta = ObjectMeta {
                name: identity.name.to_string(),
                namespace: identity.namespace.to_string(),
                uid: uid.to_string(),
                ..Default::default()
            };
            self.route(EventType::Delete, meta);
        }
    }

    /// Waits until the builders have applied every event routed so far. They never wait on a
    /// monitor, so the wait ends; it is retried rather than given up, since no delete may be
    /// skipped, and is long only when the builders are [`crate::router::MAX_IN_FLIGHT`] behind.
    async fn wait_applied(&self) {
        while !self.router.caught_up(APPLIED_PATIENCE).await {
            tracing::debug!(resource = %self.gvr, "still waiting for the builders before routing vanished objects' deletes");
        }
    }

    /// Watches from `rv`, first on `open` if a watch-list left its stream open, reopening the
    /// watch from the last version seen whenever it ends, after
    /// a backoff when it ended with an error or delivered nothing; returns once the server says
    /// the version is too old (410).
    async fn watch_from(&mut self, mut rv: String, mut open: Option<WatchStream>) {
        loop {
            let opened = tokio::time::Instant::now();
            let stream = match open.take() {
                Some(stream) => Ok(stream),
                None => self.api.watch(&self.gvr, self.selector(), &rv).await,
            };
            let (delivered, ended) = match stream {
                Ok(stream) => self.follow(stream, &mut rv).await,
                Err(e) => (false, Some(e)),
            };
            // A watch of a quiet resource delivers nothing and still made progress if it stayed
            // open: only one that failed, or closed at once with nothing, counts against the
            // backoff. (Counting every quiet watch let a resource that never changes climb to
            // the 30 s step, which its next failed list then waited out.)
            let healthy = ended.is_none() && (delivered || opened.elapsed() >= SHORT_WATCH);
            if delivered || healthy {
                self.backoff.reset();
                self.failures.recovered(&self.gvr);
            }
            match ended {
                Some(e) if e.is_gone() => return,
                Some(e) => {
                    self.failures.failed(&self.gvr, "watch", &e);
                    self.status.watch_resumed();
                    self.backoff.wait().await;
                }
                // A server that keeps closing watches at once is not spun on.
                None if !healthy => self.backoff.wait().await,
                None => {}
            }
        }
    }

    /// Routes a watch's events until it ends; returns whether it delivered any, and its error.
    async fn follow(&mut self, mut stream: crate::api::WatchStream, rv: &mut String) -> (bool, Option<ApiError>) {
        let mut delivered = false;
        let mut delivered_count: u64 = 0;
        while let Some(event) = stream.next().await {
            let event = match event {
                Ok(event) => event,
                Err(e) => return (delivered, Some(e)),
            };
            // The room check sums every partition's counts, so it is made once per 64 events,
            // which lets each monitor run at most that far past the bound.
            if delivered_count.is_multiple_of(ROOM_CHECK_EVERY) {
                self.router.room().await;
            }
            delivered_count += 1;
            delivered = true;
            let meta = event.object.metadata;
            if !meta.resource_version.is_empty() {
                rv.clone_from(&meta.resource_version);
            }
            if let Some(event_type) = EventType::of_watch(event.event_type) {
                self.route(event_type, meta);
            }
        }
        (delivered, None)
    }

    /// The `shardSelector` of the monitor's requests.
    fn selector(&self) -> Option<&crate::api::shard::ShardSelector> {
        self.shard.as_ref().and_then(|s| s.selector())
    }

    fn route(&mut self, event_type: EventType, meta: ObjectMeta) {
        if let Some(event) = self.observed(event_type, &meta) {
            self.send(event);
        }
    }

    /// The graph event of an object the watch showed; `None`, after a warning, for one that
    /// cannot be one (no UID, a malformed owner reference).
    fn observed(&self, event_type: EventType, meta: &ObjectMeta) -> Option<GraphEvent> {
        if self.shard.as_ref().is_some_and(|s| !s.keeps(&meta.namespace)) {
            return None;
        }
        match GraphEvent::observed(&self.graph, event_type, meta, &self.api_version, &self.kind) {
            Ok(event) => Some(event),
            Err(e) => {
                tracing::warn!(resource = %self.gvr, error = %e, "dropping an unreadable object");
                None
            }
        }
    }

    /// Remembers or forgets the event's object, and routes the event.
    fn send(&mut self, event: GraphEvent) {
        if event.event_type == EventType::Delete {
            self.known.remove(&event.object.uid);
        } else {
            self.known.insert(event.object.uid.clone());
        }
        self.router.route(event);
    }
}
