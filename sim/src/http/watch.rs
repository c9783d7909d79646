//! Watches over HTTP: one chunked response of watch events in resourceVersion order (JSON, one per
//! line, or protobuf frames, as [negotiated](super::represent)), that ends when the client's `timeoutSeconds` passes, an injected drop fires, the type
//! stops being served, or the server stops.
//!
//! The events come from the store's watch ([`SimCluster::watch_stored`]), filtered by the
//! request's namespace and selectors and presented in the negotiated representation. A watch from
//! a resourceVersion the history no longer holds is answered, as a real server does, with a 200
//! whose only event is an ERROR carrying a 410 `Status`.
//!
//! A watch-list (`sendInitialEvents=true`, [`super::list_options`]) starts from the newest state
//! and, once its initial ADDED events are out, sends the bookmark annotated
//! `k8s.io/initial-events-end`; `sendInitialEvents=false` sends changes only.
//!
//! Bookmarks (with `allowWatchBookmarks`) carry the newest resourceVersion the watch has reported
//! every change up to: never less than the last event sent, and never sent while the initial ADDED
//! events of a watch from "now" are still being delivered, since those come in name order. At each
//! bookmark tick the watch asks the cluster for progress ([`SimCluster::request_watch_progress`]),
//! as the API server's watch cache asks etcd, and sends the bookmark when the notification comes
//! through its stream: at the cluster's newest resourceVersion, after every change before it, so
//! the bookmarks of a quiet type move on with the cluster as a real server's do.
//!
//! [`SimCluster::watch_objects`]: crate::SimCluster::watch_objects

use super::list_options::Start;
use super::represent::Presentation;
use super::request::{Params, ResourcePath};
use crate::{SimCluster, Stamp, WatchStart};
use axum::body::Body;
use futures::{FutureExt, StreamExt};
use kube_gc::api::{ApiError, WatchEvent, WatchEventType, WatchStream};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, Interval, Sleep};
use tokio_util::sync::CancellationToken;

/// What ends a watch and what it interleaves.
pub(super) struct WatchLimits {
    /// When the watch ends by itself.
    pub(super) deadline: Option<Duration>,
    /// How many events it sends before it ends.
    pub(super) max_events: Option<usize>,
    /// How often it sends a bookmark, when asked to.
    pub(super) bookmark_every: Option<Duration>,
    /// Whether a watch-list's initial events end with their bookmark (an injected fault stands
    /// for a server that never sends it).
    pub(super) initial_events_end: bool,
    /// Cancelled when the server stops: the watch ends then, so that it does not hold the
    /// server's graceful shutdown up.
    pub(super) stopping: CancellationToken,
}

struct Watch {
    /// The cluster, asked for progress at each bookmark tick.
    cluster: Arc<SimCluster>,
    events: WatchStream,
    path: ResourcePath,
    params: Params,
    presentation: Presentation,
    /// What the stored objects are served as.
    stamp: Stamp,
    deadline: Option<Pin<Box<Sleep>>>,
    events_left: Option<usize>,
    bookmarks: Option<Interval>,
    /// Initial ADDED events still to come.
    initial_left: usize,
    /// A watch-list's bookmark that ends its initial events, still to send.
    end_marker: bool,
    /// Every change up to this resourceVersion has been reported (once `initial_left` is 0).
    current: u64,
    stopping: CancellationToken,
    done: bool,
}

/// The streaming body of a watch request, or the error that keeps it from opening.
pub(super) fn open(
    cluster: &Arc<SimCluster>,
    path: ResourcePath,
    params: Params,
    presentation: Presentation,
    start: Start,
    limits: WatchLimits,
) -> Result<Body, ApiError> {
    let stamp = Stamp {
        api_version: path.gvr.api_version(),
        kind: cluster.type_def(&path.gvr)?.kind,
    };
    // A watch-list reads the newest state, never older than the version asked for; a watch of
    // changes only starts from now when it names no version.
    let from = match (start, params.resource_version.as_str()) {
        (Start::InitialEvents, _) => String::new(),
        (Start::ChangesOnly, "" | "0") => cluster.resource_version().to_string(),
        (_, rv) => rv.to_string(),
    };
    let end_marker = start == Start::InitialEvents && params.allow_bookmarks && limits.initial_events_end;
    let start = match cluster.watch_stored(&path.gvr, &from) {
        Ok(start) => start,
        Err(e) if e.reason() == Some(kube_gc::api::StatusReason::Gone) => {
            return Ok(Body::from(presentation.error_event(&e)));
        }
        Err(e) => return Err(e),
    };
    let WatchStart {
        stream,
        initial_events,
        resource_version,
    } = start;
    let watch = Watch {
        cluster: Arc::clone(cluster),
        events: stream,
        bookmarks: limits
            .bookmark_every
            .filter(|_| params.allow_bookmarks)
            .map(|every| tokio::time::interval_at(Instant::now() + every, every)),
        path,
        params,
        presentation,
        stamp,
        deadline: limits.deadline.map(|d| Box::pin(tokio::time::sleep(d))),
        events_left: limits.max_events,
        initial_left: initial_events,
        end_marker,
        current: resource_version,
        stopping: limits.stopping,
        done: false,
    };
    let chunks = futures::stream::unfold(watch, |mut watch| async move {
        let chunk = watch.next_chunk().await?;
        Some((Ok::<_, Infallible>(chunk), watch))
    });
    Ok(Body::from_stream(chunks))
}

/// The most a chunk holds of events that were ready together; a single larger event is one chunk
/// of its own.
const CHUNK_BYTES: usize = 64 * 1024;

impl Watch {
    /// The next lines to send, or `None` when the watch ends: the next line, then every line
    /// ready at once after it, up to [`CHUNK_BYTES`]. A real API server flushes its response only
    /// when no further event is waiting, so a watch-list's initial events travel in large writes,
    /// not one per object. Dropping a [`Watch::next_line`] that is not ready loses nothing: each of
    /// its waits can be cancelled and started again.
    async fn next_chunk(&mut self) -> Option<Vec<u8>> {
        let mut chunk = self.next_line().await?;
        while chunk.len() < CHUNK_BYTES {
            match self.next_line().now_or_never() {
                Some(Some(line)) => chunk.extend_from_slice(&line),
                Some(None) | None => break,
            }
        }
        Some(chunk)
    }

    /// The next line (or frame) to send, or `None` when the watch ends.
    async fn next_line(&mut self) -> Option<Vec<u8>> {
        loop {
            if self.done || self.events_left == Some(0) {
                return None;
            }
            if self.end_marker && self.initial_left == 0 {
                self.end_marker = false;
                return Some(self.presentation.bookmark_event(&self.stamp, self.current, true));
            }
            tokio::select! {
                () = self.stopping.cancelled() => return None,
                _ = wait(&mut self.deadline) => return None,
                _ = tick(&mut self.bookmarks), if self.initial_left == 0 => {
                    // The bookmark goes out when the notification comes through the stream,
                    // after every change before it ([`deliver`](Self::deliver)).
                    if self.cluster.request_watch_progress(&self.path.gvr).is_err() {
                        return None; // the type is no longer served
                    }
                }
                event = self.events.next() => match event {
                    None => {
                        // A finished stream must not be polled again.
                        self.done = true;
                        return None;
                    }
                    Some(Err(e)) => {
                        self.done = true;
                        return Some(self.presentation.error_event(&e));
                    }
                    Some(Ok(event)) => {
                        if let Some(text) = self.deliver(event) {
                            return Some(text);
                        }
                    }
                },
            }
        }
    }

    /// Accounts for `event` and presents it, unless the request's filters leave it out.
    fn deliver(&mut self, event: WatchEvent) -> Option<Vec<u8>> {
        let rv: u64 = event.object.metadata.resource_version.parse().unwrap_or(0);
        self.current = self.current.max(rv);
        if event.event_type == WatchEventType::Bookmark {
            let send = self.params.allow_bookmarks && self.initial_left == 0;
            return send.then(|| self.presentation.bookmark_event(&self.stamp, self.current, false));
        }
        self.initial_left = self.initial_left.saturating_sub(1);
        let meta = &event.object.metadata;
        let in_scope = self.path.namespace.as_ref().is_none_or(|ns| *ns == meta.namespace)
            && self.params.labels.matches(meta)
            && self.params.fields.matches(meta)
            && self.params.shards.matches(meta);
        if !in_scope {
            return None;
        }
        if let Some(left) = &mut self.events_left {
            *left -= 1;
        }
        Some(self.presentation.event(event.event_type, &event.object, &self.stamp))
    }
}

async fn wait(deadline: &mut Option<Pin<Box<Sleep>>>) {
    match deadline {
        Some(sleep) => sleep.await,
        None => std::future::pending().await,
    }
}

async fn tick(bookmarks: &mut Option<Interval>) {
    match bookmarks {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}
