//! Watch fan-out: every watcher of a type sees each of that type's changes after its starting
//! resourceVersion exactly once, in resourceVersion order, whether replayed or live.
//!
//! The store publishes each change while it holds the state lock: the change is appended to the
//! type's bounded history and pushed into every subscriber's channel. A channel holds as many
//! changes as the history; a subscriber that falls further behind is closed, its stream ending
//! without a gap once drained (see [`WatchHub::publish`]), so memory stays bounded by the
//! watchers times the history. Subscribing happens under the same lock, cutting the replay from
//! the history and registering the channel in one step, so the seam between replay and live
//! delivery can neither drop nor repeat a change.
//! Streams never take the lock; they drain their channel and obey the type's [`StreamControls`]:
//! a delay before each event, and a blackout that loses events and then ends the stream with
//! 410 Gone. Dropping the hub (the type was unregistered) drops every sender, which ends
//! the streams once they have drained what was already sent.

use super::status::bad_request;
use futures::stream::{self, StreamExt};
use kube_gc::api::{ApiError, PartialObjectMeta, StatusReason, WatchEvent, WatchEventType, WatchStream};
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// One stored change of one type.
#[derive(Clone, Debug)]
pub(super) struct Change {
    /// The resourceVersion the change was written at.
    pub(super) rv: u64,
    /// ADDED, MODIFIED or DELETED.
    pub(super) event_type: WatchEventType,
    /// The object after the change (its last state for DELETED), in stored form: `apiVersion` and
    /// `kind` are filled in per watcher, since each watches through its own version. A DELETED
    /// change keeps the object exactly as it was stored, so that removing it copies nothing; its
    /// delivery replaces the resourceVersion with `rv`, as etcd reports a delete.
    pub(super) object: Arc<PartialObjectMeta>,
}

impl Change {
    /// A progress notification at `rv`: every change of the type up to `rv` was sent before it
    /// (etcd's progress notify, which the API server's watch cache turns into bookmarks).
    fn progress(rv: u64) -> Self {
        Change {
            rv,
            event_type: WatchEventType::Bookmark,
            object: Arc::default(),
        }
    }

    /// An ADDED event for an object that already exists, as a watch from "now" reports it first.
    pub(super) fn added(object: Arc<PartialObjectMeta>) -> Self {
        let rv = object.metadata.resource_version.parse().unwrap_or(0);
        Change {
            rv,
            event_type: WatchEventType::Added,
            object,
        }
    }

    /// The event of this change, its object stamped with `stamp`'s apiVersion and kind if
    /// given. Unstamped, an added or modified object is the stored one itself, shared: a
    /// watch-list over HTTP then copies none of its million objects (a deep copy of each was a
    /// sixth of the server's CPU in one).
    fn into_event(self, stamp: Option<&Stamp>) -> WatchEvent {
        let at_its_version = matches!(self.event_type, WatchEventType::Added | WatchEventType::Modified);
        if at_its_version && stamp.is_none() {
            return WatchEvent {
                event_type: self.event_type,
                object: self.object,
            };
        }
        let mut object = Arc::unwrap_or_clone(self.object);
        if !at_its_version {
            // Written into the copy's own string, which has room for it: no allocation.
            let rv = &mut object.metadata.resource_version;
            rv.clear();
            // Writing to a `String` cannot fail.
            let _ = write!(rv, "{}", self.rv);
        }
        if let Some(stamp) = stamp {
            stamp.on(&mut object);
        }
        WatchEvent {
            event_type: self.event_type,
            object: Arc::new(object),
        }
    }
}

/// The history and subscribers of one type.
pub(super) struct WatchHub {
    /// The newest changes, oldest first, at most `limit` of them.
    history: VecDeque<Change>,
    /// How many changes `history` keeps.
    limit: usize,
    /// Every change at or before this resourceVersion is missing from `history`: the newest change
    /// evicted from it, or the resourceVersion the cluster was restored at (whose history was not
    /// kept), or 0. A watch from an older resourceVersion would miss one, so it gets 410 Gone.
    forgotten_through: u64,
    /// Live subscribers; a closed one is dropped at the next publish.
    subscribers: Vec<mpsc::Sender<Change>>,
    /// Shared with every stream of the type, so a change applies to streams already open.
    controls: Arc<StreamControls>,
}

/// What every stream of a type obeys, set through [`WatchHub::set_delay`] and
/// [`WatchHub::set_blackout`].
#[derive(Default)]
struct StreamControls {
    /// Delivery delay in nanoseconds.
    delay_nanos: AtomicU64,
    /// While set, events are lost.
    dark: AtomicBool,
}

impl StreamControls {
    fn delay(&self) -> Duration {
        // Relaxed: the controls guard no other data; a stream that reads an old value for one
        // more event is indistinguishable from one whose event was already in flight.
        Duration::from_nanos(self.delay_nanos.load(Ordering::Relaxed))
    }

    fn is_dark(&self) -> bool {
        self.dark.load(Ordering::Relaxed)
    }
}

impl WatchHub {
    /// An empty hub keeping the last `limit` changes, which knows nothing of the changes at or
    /// before `forgotten_through`.
    pub(super) fn new(limit: usize, forgotten_through: u64) -> Self {
        WatchHub {
            history: VecDeque::new(),
            limit,
            forgotten_through,
            subscribers: Vec::new(),
            controls: Arc::default(),
        }
    }

    /// Records `change` and sends it to every live subscriber. Must be called in resourceVersion
    /// order, which the state lock guarantees.
    pub(super) fn publish(&mut self, change: Change) {
        // A watcher whose backlog reached the history's length is closed, as the API server
        // closes a watcher too slow for its buffer: its stream ends once drained, and the client
        // watches again from the last event it got, which the history still holds.
        self.subscribers.retain(|tx| tx.try_send(change.clone()).is_ok());
        self.history.push_back(change);
        while self.history.len() > self.limit {
            if let Some(evicted) = self.history.pop_front() {
                self.forgotten_through = evicted.rv;
            }
        }
    }

    /// Sends every live subscriber a progress notification at `rv`, the cluster's newest
    /// resourceVersion: it reaches each after every change already sent to it. Not kept in the
    /// history, and never closes a subscriber (a full one simply gets none).
    pub(super) fn progress(&self, rv: u64) {
        for tx in &self.subscribers {
            let _ = tx.try_send(Change::progress(rv));
        }
    }

    /// Subscribes from `resource_version` (exclusive). `""` and `"0"` start from now.
    pub(super) fn subscribe(&mut self, resource_version: &str) -> Result<Subscription, ApiError> {
        self.subscribe_after(resource_version, Vec::new())
    }

    /// Like [`subscribe`](Self::subscribe), delivering `initial` before anything else.
    pub(super) fn subscribe_after(
        &mut self,
        resource_version: &str,
        mut initial: Vec<Change>,
    ) -> Result<Subscription, ApiError> {
        let replay = match parse_start(resource_version)? {
            None => Vec::new(),
            Some(from) if from < self.forgotten_through => {
                return Err(ApiError::status(
                    StatusReason::Gone,
                    format!("too old resource version: {from} ({})", self.forgotten_through + 1),
                ));
            }
            Some(from) => {
                let start = self.history.partition_point(|c| c.rv <= from);
                self.history.range(start..).cloned().collect()
            }
        };
        let (tx, live) = mpsc::channel(self.limit.max(1));
        self.subscribers.push(tx);
        initial.extend(replay);
        Ok(Subscription {
            replay: initial,
            live,
            controls: Arc::clone(&self.controls),
        })
    }

    /// Delays every later delivery of this type's events by `delay`.
    pub(super) fn set_delay(&self, delay: Duration) {
        let nanos = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        self.controls.delay_nanos.store(nanos, Ordering::Relaxed);
    }

    /// Starts (`true`) or ends a blackout of this type's streams; see
    /// [`SimCluster::set_watch_blackout`](super::SimCluster::set_watch_blackout).
    pub(super) fn set_blackout(&self, dark: bool) {
        self.controls.dark.store(dark, Ordering::Relaxed);
    }
}

/// Parses a watch's starting resourceVersion; `None` means "from now".
fn parse_start(resource_version: &str) -> Result<Option<u64>, ApiError> {
    match resource_version {
        "" | "0" => Ok(None),
        rv => rv
            .parse()
            .map(Some)
            .map_err(|_| bad_request(format!("invalid resource version: {rv:?}"))),
    }
}

/// A registered watcher: what to replay, then the live channel.
pub(super) struct Subscription {
    replay: Vec<Change>,
    live: mpsc::Receiver<Change>,
    controls: Arc<StreamControls>,
}

/// The apiVersion and kind an object is served with, which the store keeps it without.
pub struct Stamp {
    /// The apiVersion the request asked for.
    pub api_version: String,
    /// The type's kind.
    pub kind: String,
}

impl Stamp {
    /// Writes them into `object`.
    pub fn on(&self, object: &mut PartialObjectMeta) {
        self.api_version.clone_into(&mut object.api_version);
        self.kind.clone_into(&mut object.kind);
    }
}

impl Subscription {
    /// The watch stream, stamping every object with `stamp`, or with the stored objects as they
    /// are (without apiVersion and kind) for `None`.
    pub(super) fn into_stream(self, stamp: Option<Stamp>) -> WatchStream {
        let Subscription { replay, live, controls } = self;
        let delivery = Delivery {
            replay: replay.into_iter(),
            live,
            controls,
            stamp,
            broken: false,
            ended: false,
        };
        stream::unfold(delivery, |mut delivery| async move {
            let event = delivery.next().await?;
            Some((event, delivery))
        })
        .boxed()
    }
}

/// One watch stream's state: the replay, then the live channel, under the type's
/// [`StreamControls`]. A single step function rather than a chain of stream adapters, so that
/// each event is moved once on its way out rather than once per adapter.
struct Delivery {
    replay: std::vec::IntoIter<Change>,
    live: mpsc::Receiver<Change>,
    controls: Arc<StreamControls>,
    stamp: Option<Stamp>,
    /// An event was lost in a blackout, so the next one is a 410 instead.
    broken: bool,
    /// The stream ended with an error, as a server closes a watch after an ERROR event.
    ended: bool,
}

impl Delivery {
    /// The next event, after the type's delay; `None` once the stream has ended.
    async fn next(&mut self) -> Option<Result<WatchEvent, ApiError>> {
        if self.ended {
            return None;
        }
        loop {
            let change = match self.replay.next() {
                Some(change) => change,
                None => self.live.recv().await?,
            };
            let delay = self.controls.delay();
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if self.controls.is_dark() {
                self.broken = true;
                continue;
            }
            if self.broken {
                self.ended = true;
                return Some(Err(ApiError::status(StatusReason::Gone, "watch events were lost")));
            }
            return Some(Ok(change.into_event(self.stamp.as_ref())));
        }
    }
}
