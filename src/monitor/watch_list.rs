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
//!
//! [`State::step`](super::state::State::step) makes these transitions; this module holds the
//! rules they apply ([`refuses_watch_list`], [`allowed`]) and the clock of the initial events
//! that the driver keeps ([`Pace`]).

use crate::api::{ApiError, StatusReason};
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

/// Why a server will not be asked for a watch-list again.
#[derive(Debug, PartialEq)]
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

/// How long a healthy watch-list may have taken to stream its first `routed` initial objects
/// (see the [module docs](self)).
pub(super) fn allowed(routed: u64) -> Duration {
    INITIAL_EVENTS_END_WAIT + Duration::from_secs_f64(routed as f64 / INITIAL_EVENTS_MIN_RATE)
}

/// The clock of a watch-list's initial events, which the driver keeps. The silence bound runs
/// from the last wait for room in the router (every [`ROOM_CHECK_EVERY`](super::ROOM_CHECK_EVERY)
/// objects, which a stream delivers back to back), so neither a bookmark without the annotation
/// nor the wait for room counts against it, and the clock is read once per check, not once per
/// object.
pub(super) struct Pace {
    started: Instant,
    /// Time spent waiting for room in the router, which is the builders', not the server's.
    waited: Duration,
    /// When the stream has been silent too long.
    pub(super) quiet_after: Instant,
}

impl Pace {
    /// The clock of initial events that start now.
    pub(super) fn start() -> Pace {
        let started = Instant::now();
        Pace {
            started,
            waited: Duration::ZERO,
            quiet_after: started + INITIAL_EVENTS_END_WAIT,
        }
    }

    /// How long the initial events took so far, less the waits for room.
    pub(super) fn took(&self) -> Duration {
        Instant::now() - self.started - self.waited
    }

    /// A wait for room that began `before` ended now.
    pub(super) fn waited_since(&mut self, before: Instant) {
        let now = Instant::now();
        self.waited += now - before;
        self.quiet_after = now + INITIAL_EVENTS_END_WAIT;
    }
}

/// True for the answers of a server that does not serve watch-lists: 422 Invalid (upstream's
/// validation with the gate off, and servers older than the feature) or 400 BadRequest, unless
/// it is about the `shardSelector`, which a list would be refused for as well.
pub(super) fn refuses_watch_list(error: &ApiError) -> bool {
    matches!(error.reason(), Some(StatusReason::Invalid | StatusReason::BadRequest))
        && !is_about_the_shard_selector(error)
}

/// True for an error that names the `shardSelector` parameter.
pub(super) fn is_about_the_shard_selector(error: &ApiError) -> bool {
    error.to_string().contains("shardSelector")
}
