//! The watch-list: how a monitor reads its whole resource by default
//! ([`SyncMode::WatchList`](super::SyncMode::WatchList)), as kube-controller-manager's informers
//! do since 1.32 (KEP-3157). One WATCH with `sendInitialEvents=true` streams every object as
//! ADDED, then a bookmark annotated `k8s.io/initial-events-end` carrying the resourceVersion of
//! that view, then goes on as a normal watch; the server never builds a LIST response.
//!
//! Invariants, the same as the paginated list's ([`super::list`]):
//!
//! - Nothing is removed from the graph before the whole view is read: objects are routed as adds
//!   or updates as they arrive, and the deletes of the objects the view does not show wait for
//!   the bookmark. The monitor keeps no object cache, so the stream needs no temporary store:
//!   what an informer would stage there is already in `unseen`, one entry per known object.
//! - The view counts as synced (or relisted) only at the bookmark, so no decision rests on it
//!   before then ([`MonitorStatus::is_complete`](super::MonitorStatus::is_complete)).
//! - A stream that fails or ends before its bookmark is not opened again: this read goes on by
//!   paginated LIST, with every object it had routed unseen again, as client-go's reflector falls
//!   back ("making progress is better than deadlocking"): a server that ends every watch after
//!   some events or seconds (its own limits, a load balancer's, a slow-consumer cut) would
//!   otherwise never let a large resource sync. The next read tries watch-list again.
//! - A server that refuses watch-list (422 Invalid or 400 BadRequest: a server with the
//!   `WatchList` gate off, or one too old for it), or whose stream does not reach the bookmark
//!   in time, is read by paginated LIST from then on: [`Refused`] says why, and the monitor logs
//!   it once. In time means no silence of [`INITIAL_EVENTS_END_WAIT`] before the bookmark, and
//!   the whole initial stream within that wait plus [`INITIAL_EVENTS_MIN_RATE`] for each object:
//!   a server that ignores `sendInitialEvents` on a busy resource is never silent, and would
//!   otherwise be waited on forever. A 400 about the `shardSelector` is no refusal of
//!   watch-list: it is retried, and logged as what it is.

use super::{KnownSet, Watcher, ROOM_CHECK_EVERY};
use crate::api::{ApiError, ClusterApi, StatusReason, WatchStream};
use crate::event::EventType;
use crate::graph::Uid;
use futures::StreamExt;
use std::time::Duration;
use tokio::time::Instant;

/// How long a watch-list may go without an object before its initial-events-end bookmark, after
/// which its server is taken not to serve watch-lists.
///
/// A server that implements watch-list streams the objects back to back and sends the bookmark
/// right after the last one (kube-apiserver may first wait up to 3 s for its watch cache to reach
/// the version asked for), so however many objects there are, a healthy stream is never silent
/// for long before the bookmark: the bound is on silence, not on the whole read, which for a
/// million objects takes a while. A server that takes the watch without implementing watch-list
/// (an aggregated API server on an old library, a proxy that drops the parameters) answers it as
/// a plain watch from "now": the objects, no such bookmark, then only changes, so its stream goes
/// quiet. 30 s is many times the gap between two events of one stream on a loaded server, and well
/// within the 290 s after which the server ends a watch. Bookmarks without the annotation are not
/// progress and do not count. `loadgen record` uses the same bound.
pub const INITIAL_EVENTS_END_WAIT: Duration = Duration::from_secs(30);

/// The slowest a healthy watch-list delivers its initial objects, beyond
/// [`INITIAL_EVENTS_END_WAIT`]: kube-apiserver streams them from its watch cache at hundreds of
/// thousands a second, so a stream far slower than this, without its bookmark, is a server that
/// answered a plain watch.
pub const INITIAL_EVENTS_MIN_RATE: f64 = 10_000.0;

/// Why a watch-list did not read the whole resource.
#[derive(Debug)]
pub(super) enum Unread {
    /// The server does not serve watch-lists; it will not be asked again.
    Refused(Refused),
    /// The stream broke before its bookmark: this read goes on by list.
    Broke(String),
}

/// Why a server will not be asked for a watch-list again.
#[derive(Debug)]
pub(super) enum Refused {
    /// It answered the request with this error.
    Answered(ApiError),
    /// Its stream went quiet before the bookmark.
    NoBookmark,
    /// Its stream went on without the bookmark for this long, with this many objects.
    TooSlow(Duration, u64),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Answered(e) => write!(f, "{e}"),
            Refused::NoBookmark => write!(
                f,
                "no initial-events-end bookmark within {}s of the last event",
                INITIAL_EVENTS_END_WAIT.as_secs()
            ),
            Refused::TooSlow(took, objects) => write!(
                f,
                "no initial-events-end bookmark after {objects} events in {}s",
                took.as_secs()
            ),
        }
    }
}

/// How a watch-list's initial events ended.
enum Initial {
    /// With the bookmark, at this resourceVersion.
    Ended(String),
    /// Before the bookmark: the stream failed (with the error) or closed (without).
    Broke(Option<ApiError>),
    /// Not at the bookmark in time (see the [module docs](self)).
    Late(Refused),
}

/// A whole view read by watch-list: its resourceVersion, and the stream, which goes on as a
/// watch from it.
pub(super) struct Synced {
    pub(super) resource_version: String,
    pub(super) stream: WatchStream,
}

impl<C: ClusterApi> Watcher<C> {
    /// Reads the whole resource by watch-list, routing as [`Watcher::list`] does; see the
    /// [module docs](self). When it did not read the whole resource, every object stays known,
    /// for the list that follows.
    pub(super) async fn watch_list(&mut self, mut unseen: KnownSet) -> Result<Synced, Unread> {
        loop {
            let mut stream = match self.api.watch_list(&self.gvr, self.selector(), "").await {
                Ok(stream) => stream,
                Err(e) if refuses_watch_list(&e) => {
                    return Err(self.unread(Unread::Refused(Refused::Answered(e)), unseen));
                }
                Err(e) => {
                    if is_about_the_shard_selector(&e) {
                        tracing::error!(resource = %self.gvr, error = %e, "the API server rejected this replica's shardSelector");
                    }
                    self.failures.failed(&self.gvr, "watch-list", &e);
                    self.status.page_retried();
                    self.backoff.wait().await;
                    continue;
                }
            };
            let unread = match self.initial_events(&mut stream, &mut unseen).await {
                Initial::Ended(resource_version) => {
                    self.route_vanished(unseen).await;
                    return Ok(Synced {
                        resource_version,
                        stream,
                    });
                }
                Initial::Late(why) => Unread::Refused(why),
                Initial::Broke(Some(e)) => Unread::Broke(e.to_string()),
                Initial::Broke(None) => {
                    Unread::Broke("the stream closed before its initial-events-end bookmark".into())
                }
            };
            return Err(self.unread(unread, unseen));
        }
    }

    /// Gives every object of `unseen`, and every one routed since, back to the monitor's known
    /// set and returns `why`.
    fn unread(&mut self, why: Unread, unseen: KnownSet) -> Unread {
        self.known.extend(unseen);
        why
    }

    /// Routes a watch-list's events up to its bookmark, taking each object shown out of `unseen`.
    /// The silence bound runs from the last room check (every [`ROOM_CHECK_EVERY`] objects, which
    /// a stream delivers back to back), so neither a bookmark without the annotation nor the wait
    /// for room in the router counts against it, and the clock is read once per check, not once
    /// per object.
    async fn initial_events(&mut self, stream: &mut WatchStream, unseen: &mut KnownSet) -> Initial {
        let mut routed: u64 = 0;
        let started = Instant::now();
        // Time spent waiting for room in the router is the builders', not the server's.
        let mut waited = Duration::ZERO;
        let mut quiet_after = started + INITIAL_EVENTS_END_WAIT;
        loop {
            let event = match tokio::time::timeout_at(quiet_after, stream.next()).await {
                Err(_) => return Initial::Late(Refused::NoBookmark),
                Ok(None) => return Initial::Broke(None),
                Ok(Some(Err(e))) => return Initial::Broke(Some(e)),
                Ok(Some(Ok(event))) => event,
            };
            if event.is_initial_events_end() {
                return Initial::Ended(event.object.metadata.resource_version);
            }
            let Some(event_type) = EventType::of_watch(event.event_type) else {
                continue;
            };
            if routed == 0 {
                self.backoff.reset();
                self.failures.recovered(&self.gvr);
            }
            if routed.is_multiple_of(ROOM_CHECK_EVERY) {
                let before = Instant::now();
                let took = before - started - waited;
                let allowed =
                    INITIAL_EVENTS_END_WAIT + Duration::from_secs_f64(routed as f64 / INITIAL_EVENTS_MIN_RATE);
                if took > allowed {
                    return Initial::Late(Refused::TooSlow(took, routed));
                }
                self.router.room().await;
                let now = Instant::now();
                waited += now - before;
                quiet_after = now + INITIAL_EVENTS_END_WAIT;
            }
            routed += 1;
            if event_type == EventType::Delete {
                unseen.remove(&Uid::parse(&event.object.metadata.uid));
                self.route(event_type, event.object.metadata);
            } else {
                self.route_listed(event.object.metadata, unseen);
            }
        }
    }
}

/// True for the answers of a server that does not serve watch-lists: 422 Invalid (upstream's
/// validation with the gate off, and servers older than the feature) or 400 BadRequest, unless
/// it is about the `shardSelector`, which a list would be refused for as well.
fn refuses_watch_list(error: &ApiError) -> bool {
    matches!(error.reason(), Some(StatusReason::Invalid | StatusReason::BadRequest))
        && !is_about_the_shard_selector(error)
}

/// True for an error that names the `shardSelector` parameter.
fn is_about_the_shard_selector(error: &ApiError) -> bool {
    error.to_string().contains("shardSelector")
}
