//! Watch fan-out: every watcher of a type sees each of that type's changes after its starting
//! resourceVersion exactly once, in resourceVersion order, whether replayed or live.
//!
//! The store publishes each change while it holds the state lock: the change is appended to the
//! type's bounded history and pushed into every subscriber's unbounded channel. Subscribing happens
//! under the same lock, cutting the replay from the history and registering the channel in one
//! step, so the seam between replay and live delivery can neither drop nor repeat a change.
//! Streams never take the lock; they drain their channel and apply the type's configured delay
//! before each event. Dropping the hub (the type was unregistered) drops every sender, which ends
//! the streams once they have drained what was already sent.

use super::status::bad_request;
use crate::api::{ApiError, PartialObjectMeta, StatusReason, WatchEvent, WatchEventType, WatchStream};
use futures::stream::{self, StreamExt};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// `kind` are filled in per watcher, since each watches through its own version.
    pub(super) object: Arc<PartialObjectMeta>,
}

impl Change {
    /// An ADDED event for an object that already exists, as a watch from "now" reports it first.
    pub(super) fn added(object: Arc<PartialObjectMeta>) -> Self {
        let rv = object.metadata.resource_version.parse().unwrap_or(0);
        Change {
            rv,
            event_type: WatchEventType::Added,
            object,
        }
    }

    fn into_event(self, api_version: &str, kind: &str) -> WatchEvent {
        let mut object = Arc::unwrap_or_clone(self.object);
        object.api_version = api_version.to_string();
        object.kind = kind.to_string();
        WatchEvent {
            event_type: self.event_type,
            object,
        }
    }
}

/// The history and subscribers of one type.
pub(super) struct WatchHub {
    /// The newest changes, oldest first, at most `limit` of them.
    history: VecDeque<Change>,
    /// How many changes `history` keeps.
    limit: usize,
    /// The resourceVersion of the newest change evicted from `history` (0 if none was): a watch
    /// from an older resourceVersion would miss it, so it is answered with 410 Gone.
    evicted_through: u64,
    /// Live subscribers; a closed one is dropped at the next publish.
    subscribers: Vec<mpsc::UnboundedSender<Change>>,
    /// Delivery delay in nanoseconds, shared with every stream of the type so a change applies to
    /// streams already open.
    delay_nanos: Arc<AtomicU64>,
}

impl WatchHub {
    /// An empty hub keeping the last `limit` changes.
    pub(super) fn new(limit: usize) -> Self {
        WatchHub {
            history: VecDeque::new(),
            limit,
            evicted_through: 0,
            subscribers: Vec::new(),
            delay_nanos: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Records `change` and sends it to every live subscriber. Must be called in resourceVersion
    /// order, which the state lock guarantees.
    pub(super) fn publish(&mut self, change: Change) {
        self.subscribers.retain(|tx| tx.send(change.clone()).is_ok());
        self.history.push_back(change);
        while self.history.len() > self.limit {
            if let Some(evicted) = self.history.pop_front() {
                self.evicted_through = evicted.rv;
            }
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
            Some(from) if from < self.evicted_through => {
                return Err(ApiError::status(
                    StatusReason::Gone,
                    format!("too old resource version: {from} ({})", self.evicted_through + 1),
                ));
            }
            Some(from) => {
                let start = self.history.partition_point(|c| c.rv <= from);
                self.history.range(start..).cloned().collect()
            }
        };
        let (tx, live) = mpsc::unbounded_channel();
        self.subscribers.push(tx);
        initial.extend(replay);
        Ok(Subscription {
            replay: initial,
            live,
            delay_nanos: Arc::clone(&self.delay_nanos),
        })
    }

    /// Delays every later delivery of this type's events by `delay`.
    pub(super) fn set_delay(&self, delay: Duration) {
        let nanos = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        // Relaxed: the delay guards no other data; a stream that reads the old value for one more
        // event is indistinguishable from one whose event was already in flight.
        self.delay_nanos.store(nanos, Ordering::Relaxed);
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
    live: mpsc::UnboundedReceiver<Change>,
    delay_nanos: Arc<AtomicU64>,
}

impl Subscription {
    /// The watch stream, stamping every object with `api_version` and `kind`.
    pub(super) fn into_stream(self, api_version: String, kind: String) -> WatchStream {
        let Subscription {
            replay,
            live,
            delay_nanos,
        } = self;
        let live = stream::unfold(live, |mut rx| async move { rx.recv().await.map(|change| (change, rx)) });
        let stamp: Arc<(String, String)> = Arc::new((api_version, kind));
        stream::iter(replay)
            .chain(live)
            .then(move |change| {
                let delay_nanos = Arc::clone(&delay_nanos);
                let stamp = Arc::clone(&stamp);
                async move {
                    let nanos = delay_nanos.load(Ordering::Relaxed);
                    if nanos > 0 {
                        tokio::time::sleep(Duration::from_nanos(nanos)).await;
                    }
                    Ok(change.into_event(&stamp.0, &stamp.1))
                }
            })
            .boxed()
    }
}
