//! The driver of a monitor's [`State`]: it performs each [`Action`] against the API, the router,
//! the graph and the clock, and feeds what they answer back as the next [`Input`]. It decides
//! nothing the state machine could: it keeps what the machine must not hold (the open stream,
//! the unseen objects, the backoff, the clocks) and names each routed object.
//!
//! Invariants: an open stream is dropped as soon as it ended or the machine closes it, so a
//! request never goes out while an abandoned stream is still open; the unseen set, empty outside
//! reads, holds the objects known when the read under way started (or last started over) that it
//! has not shown yet.
//!
//! # What a monitor knows
//!
//! The objects a monitor knows are the graph's observed nodes of its kind: it alone routes
//! observations of that kind, so once the builders have applied what it routed, those nodes are
//! exactly the objects it routed and has not seen deleted (less those a worker found deleted and
//! let go, which need no delete). A monitor thus keeps no set of its own between reads, where one
//! cost 17 bytes an object (17 MiB for a million pods) and a hash-set insert for every event; a
//! read that starts over takes them from the graph ([`Watcher::unsee_known`]), once the builders
//! caught up, which costs one walk of the graph a read.

use super::state::{Action, Input, State};
use super::watch_list::{Pace, Refused};
use super::{Backoff, MonitorStatus, SyncMode, UidSet, APPLIED_PATIENCE, LIST_PAGE_SIZE};
use crate::api::{ClusterApi, Gvk, Gvr, ObjectMeta, WatchStream};
use crate::event::{EventType, GraphEvent};
use crate::graph::{Graph, Sym, TypeMeta, Uid};
use crate::router::Router;
use crate::shard::Shard;
use futures::StreamExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::time::Instant;

/// What a monitor's task needs.
pub(super) struct Watcher<C> {
    api: Arc<C>,
    graph: Arc<Graph>,
    router: Router,
    gvr: Gvr,
    /// The kind and apiVersion stamped on the monitor's events, interned once.
    type_meta: TypeMeta,
    status: Arc<MonitorStatus>,
    /// The collector's shard, for a namespaced resource: its selector goes with every list and
    /// watch, and events outside it are dropped ([`crate::shard`]).
    shard: Option<Arc<Shard>>,
    backoff: Backoff,
    failures: FailureStreak,
    /// Whether the monitor has routed an object that may be a node of the graph: until then it
    /// knows nothing, and a read need not wait for the builders to find that out.
    routed: bool,
    /// The objects known before the read under way that it has not shown yet.
    unseen: UidSet,
    /// The watch-list's or the watch's stream, while it is open.
    open: Option<Open>,
    /// The clock of a watch-list's initial events, while it streams them.
    pace: Option<Pace>,
}

/// An open stream, and when its watch was asked for (or the watch-list's stream went on as one).
struct Open {
    stream: WatchStream,
    since: Instant,
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
fn log_refusal(gvr: &Gvr, why: &Refused) {
    static LOGGED: AtomicBool = AtomicBool::new(false);
    if LOGGED.swap(true, Ordering::Relaxed) {
        tracing::debug!(resource = %gvr, reason = %why, "server refused watch-list; reading this resource by paginated list");
    } else {
        tracing::warn!(resource = %gvr, reason = %why, "server refused watch-list; monitors read their resources by paginated list instead (kube_gc_monitor_sync_mode in /metrics)");
    }
}

impl<C: ClusterApi> Watcher<C> {
    /// The task of a monitor of `gvr`, whose objects are of kind `gvk`.
    pub(super) fn new(
        api: Arc<C>,
        graph: Arc<Graph>,
        router: Router,
        gvr: Gvr,
        gvk: &Gvk,
        status: Arc<MonitorStatus>,
        shard: Option<Arc<Shard>>,
    ) -> Self {
        Watcher {
            type_meta: TypeMeta::new(Sym::new(&gvk.api_version()), Sym::new(&gvk.kind)),
            api,
            graph,
            router,
            gvr,
            status,
            shard: shard.filter(|s| s.selector().is_some()),
            backoff: Backoff::default(),
            failures: FailureStreak::default(),
            routed: false,
            unseen: UidSet::default(),
            open: None,
            pace: None,
        }
    }

    /// Runs the state machine from its start by `mode`; it never ends.
    pub(super) async fn run(mut self, mode: SyncMode) {
        let (mut state, mut actions) = State::start(mode);
        loop {
            let mut answer = None;
            for action in actions {
                debug_assert!(answer.is_none(), "an action after one that asked: {action:?}");
                answer = self.perform(action).await;
            }
            // Every event the state's version speaks for is routed by now.
            if let Some(resource_version) = state.resource_version() {
                self.status.reached(resource_version);
            }
            let input = match answer {
                Some(input) => input,
                None => self.next_event().await,
            };
            (state, actions) = state.step(input);
        }
    }

    /// Performs `action`; returns its answer if it asks for one (a request, the backoff, the
    /// pace), which the state machine makes the last of its step.
    async fn perform(&mut self, action: Action) -> Option<Input> {
        match action {
            Action::OpenWatchList => return Some(self.open_watch_list().await),
            Action::ListPage { continue_token } => return Some(self.list_page(&continue_token).await),
            Action::Watch { resource_version } => return Some(self.watch(&resource_version).await),
            Action::BackOff => {
                self.backoff.wait().await;
                return Some(Input::BackoffElapsed);
            }
            Action::MeasurePace => {
                let pace = self
                    .pace
                    .as_ref()
                    .expect("a pace check while a watch-list streams its initial events");
                return Some(Input::Paced(pace.took()));
            }
            Action::ContinueAsWatch => {
                let open = self
                    .open
                    .as_mut()
                    .expect("a watch-list's stream goes on at its bookmark");
                open.since = Instant::now();
                self.pace = None;
            }
            Action::CloseStream => self.close(),
            Action::AwaitRoom => self.await_room().await,
            Action::RoutePage(items) => {
                for item in items {
                    self.route_listed(&item.metadata);
                }
            }
            Action::RouteListed(object) => self.route_listed(&object.metadata),
            Action::RouteDeleteInRead(object) => {
                self.unseen.remove(&Uid::parse(&object.metadata.uid));
                self.route(EventType::Delete, &object.metadata);
            }
            Action::Route(event_type, object) => self.route(event_type, &object.metadata),
            Action::RouteVanished => self.route_vanished().await,
            Action::ReadStarted => {
                self.status.list_started();
                self.unsee_known().await;
            }
            Action::ReadRestarted => self.unsee_known().await,
            Action::ReadCompleted => self.status.list_completed(),
            Action::Progress => {
                self.backoff.reset();
                self.failures.recovered(&self.gvr);
            }
            Action::Failed { what, error } => self.failures.failed(&self.gvr, what, &error),
            Action::PageRetried => self.status.page_retried(),
            Action::WatchResumed => self.status.watch_resumed(),
            Action::WatchListRefused(why) => {
                log_refusal(&self.gvr, &why);
                self.status.set_sync_mode(SyncMode::List);
            }
            Action::WatchListBroke(why) => {
                tracing::warn!(resource = %self.gvr, reason = %why, "watch-list broke before its initial-events-end bookmark; this read goes on by paginated list");
                self.status.fell_back_to_list();
            }
            Action::ShardSelectorRejected(error) => {
                tracing::error!(resource = %self.gvr, %error, "the API server rejected this replica's shardSelector");
            }
            Action::HistoryExpired => {
                tracing::debug!(resource = %self.gvr, "watch history expired; reading the resource again");
            }
        }
        None
    }

    async fn open_watch_list(&mut self) -> Input {
        let since = Instant::now();
        match self.api.watch_list(&self.gvr, self.selector(), "").await {
            Ok(stream) => {
                self.open = Some(Open { stream, since });
                self.pace = Some(Pace::start());
                Input::Opened
            }
            Err(error) => Input::Failed(error),
        }
    }

    async fn list_page(&mut self, continue_token: &str) -> Input {
        match self
            .api
            .list_page(&self.gvr, self.selector(), continue_token, LIST_PAGE_SIZE)
            .await
        {
            Ok(page) => Input::Page(page),
            Err(error) => Input::Failed(error),
        }
    }

    async fn watch(&mut self, resource_version: &str) -> Input {
        // A watch's time open counts from its request.
        let since = Instant::now();
        match self.api.watch(&self.gvr, self.selector(), resource_version).await {
            Ok(stream) => {
                self.open = Some(Open { stream, since });
                Input::Opened
            }
            Err(error) => Input::Failed(error),
        }
    }

    /// The open stream's next event, or how it ended; while a watch-list streams its initial
    /// events, its silence is bounded.
    async fn next_event(&mut self) -> Input {
        let open = self
            .open
            .as_mut()
            .expect("a state that reads events has an open stream");
        let next = match &self.pace {
            Some(pace) => match tokio::time::timeout_at(pace.quiet_after, open.stream.next()).await {
                Ok(next) => next,
                Err(_) => return Input::Silent,
            },
            None => open.stream.next().await,
        };
        let input = match next {
            Some(Ok(event)) => return Input::Event(event),
            Some(Err(error)) => Input::Failed(error),
            None => Input::Closed {
                open_for: open.since.elapsed(),
            },
        };
        self.close();
        input
    }

    fn close(&mut self) {
        self.open = None;
        self.pace = None;
    }

    /// Waits for room in the router; while a watch-list streams its initial events, the wait does
    /// not count against their pace.
    async fn await_room(&mut self) {
        let Some(pace) = &mut self.pace else {
            return self.router.room().await;
        };
        let before = Instant::now();
        self.router.room().await;
        pace.waited_since(before);
    }

    /// Every object known is unseen until the read shows it: the graph's observed nodes of the
    /// monitor's kind, read once the builders applied every event routed before (module docs,
    /// "What a monitor knows"). A read that starts over thus makes unseen again what it had
    /// shown too.
    async fn unsee_known(&mut self) {
        self.unseen.clear();
        if !self.routed {
            return;
        }
        wait_applied(&self.router, &self.gvr).await;
        let (type_meta, unseen) = (&self.type_meta, &mut self.unseen);
        self.graph.for_each_node(|node| {
            let identity = node.identity();
            if !node.is_virtual() && identity.type_meta() == type_meta {
                unseen.insert(identity.uid.clone());
            }
        });
    }

    /// Routes an object a whole read shows, taking it out of the unseen: an update if the
    /// monitor knew it before the read, an add if not (the builders apply both alike). The UID is
    /// the event's, so it is parsed once.
    fn route_listed(&mut self, meta: &ObjectMeta) {
        let Some(mut event) = self.observed(EventType::Add, meta) else {
            // The read showed it, unreadable as it now is: no delete is routed for it.
            self.unseen.remove(&Uid::parse(&meta.uid));
            return;
        };
        if self.unseen.remove(&event.object.uid) {
            event.event_type = EventType::Update;
        }
        self.send(event);
    }

    /// Routes a delete for every object a whole read did not show, named as its graph node is.
    ///
    /// The node is read only once the builders have applied every event routed before
    /// ([`wait_applied`]), this monitor's add of the object included, so a node is never
    /// missed for being still in flight. A UID with no node then is one the graph already let go
    /// (a worker found the object deleted and routed a virtual delete): the builder would drop a
    /// delete for it, so none is routed. A UID whose node is virtual (let go, then named again by
    /// a dependent) is deleted under the name its dependents give it: a real delete removes a
    /// virtual node whatever its name.
    async fn route_vanished(&mut self) {
        let unseen = std::mem::take(&mut self.unseen);
        if unseen.is_empty() {
            return;
        }
        // Only the router is borrowed over the wait: the open stream makes the watcher not Sync.
        wait_applied(&self.router, &self.gvr).await;
        for uid in unseen {
            let Some(node) = self.graph.get(&uid) else {
                tracing::trace!(resource = %self.gvr, %uid, "vanished object already gone from the graph");
                continue;
            };
            let identity = node.identity();
            let meta = ObjectMeta {
                name: identity.name.to_string(),
                namespace: identity.namespace().to_string(),
                uid: uid.to_string(),
                ..Default::default()
            };
            self.route(EventType::Delete, &meta);
        }
    }

    /// The `shardSelector` of the monitor's requests.
    fn selector(&self) -> Option<&crate::api::shard::ShardSelector> {
        self.shard.as_ref().and_then(|s| s.selector())
    }

    fn route(&mut self, event_type: EventType, meta: &ObjectMeta) {
        if let Some(event) = self.observed(event_type, meta) {
            self.send(event);
        }
    }

    /// The graph event of an object the watch showed; `None`, after a warning, for one that
    /// cannot be one (no UID, a malformed owner reference).
    fn observed(&self, event_type: EventType, meta: &ObjectMeta) -> Option<GraphEvent> {
        if self.shard.as_ref().is_some_and(|s| !s.keeps(&meta.namespace)) {
            return None;
        }
        match GraphEvent::observed_as(&self.graph, event_type, meta, &self.type_meta) {
            Ok(event) => Some(event),
            Err(e) => {
                tracing::warn!(resource = %self.gvr, error = %e, "dropping an unreadable object");
                None
            }
        }
    }

    /// Routes the event; an observation makes the monitor one that may know objects.
    fn send(&mut self, event: GraphEvent) {
        self.routed |= event.event_type != EventType::Delete;
        self.router.route(event);
    }
}

/// Waits until the builders have applied every event `router` routed so far. They never wait on a
/// monitor, so the wait ends; it is retried rather than given up, since no delete may be
/// skipped, and is long only when the builders are [`crate::router::MAX_IN_FLIGHT`] behind.
async fn wait_applied(router: &Router, gvr: &Gvr) {
    while !router.caught_up(APPLIED_PATIENCE).await {
        tracing::debug!(resource = %gvr, "still waiting for the builders before routing vanished objects' deletes");
    }
}
