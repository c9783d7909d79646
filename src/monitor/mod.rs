//! Monitors: one list-and-watch per deletable resource, turning watch events into
//! [`GraphEvent`]s for the router (spec §2).
//!
//! Invariant: a monitor routes the events of its resource in the order the server sent them, and
//! after a relist it routes a delete for every object that vanished while it was not watching, so
//! the graph never keeps a node for an object its monitor no longer sees. It keeps only each
//! object's UID, name and namespace for that purpose: kube-gc has no informer object cache.
//!
//! A list is read in pages, each routed as it arrives, so a monitor holds one page at a time, not
//! the whole resource. The deletes for vanished objects wait for the last page, and the monitor
//! reports synced only then; a list that fails midway starts over from its first page.
//!
//! Like an informer with resync period 0, a monitor forwards every update, unfiltered (spec §12.1).

use crate::api::{ApiError, ClusterApi, Gvk, Gvr, ObjectMeta};
use crate::event::{EventType, GraphEvent};
use crate::graph::{Graph, Name, Sym, Uid};
use crate::router::Router;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Objects per list page, as client-go's pager asks for by default. Each page is routed before
/// the next is asked for, so a monitor holds one page at a time, whatever the size of the
/// resource.
const LIST_PAGE_SIZE: usize = 500;

/// Wait before retrying a failed list or watch; doubles up to [`MAX_RETRY_DELAY`].
const FIRST_RETRY_DELAY: Duration = Duration::from_millis(200);
const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// A running monitor of one resource.
pub struct Monitor {
    /// The kind the resource maps to (the one stamped on its events).
    pub gvk: Gvk,
    synced: Arc<AtomicBool>,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Monitor {
    /// True once the first list has been routed (upstream's `HasSynced`).
    pub fn has_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
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

/// What a monitor remembers of an object: enough to route its delete after a relist.
/// The strings are the event's own, which the graph node shares, so remembering an object costs
/// the map entry and two pointers.
struct Known {
    name: Name,
    namespace: Sym,
}

/// What a monitor's task needs.
struct Watcher<C> {
    api: Arc<C>,
    graph: Arc<Graph>,
    router: Router,
    gvr: Gvr,
    api_version: Sym,
    kind: Sym,
    synced: Arc<AtomicBool>,
    /// Every object the monitor has routed and not yet seen deleted.
    known: HashMap<Uid, Known>,
}

/// Starts a monitor of `gvr`, whose objects are of kind `gvk`, on the current runtime.
pub fn start<C: ClusterApi>(api: Arc<C>, graph: Arc<Graph>, router: Router, gvr: Gvr, gvk: Gvk) -> Monitor {
    let synced = Arc::new(AtomicBool::new(false));
    let stop = CancellationToken::new();
    let watcher = Watcher {
        api_version: Sym::new(&gvk.api_version()),
        kind: Sym::new(&gvk.kind),
        api,
        graph,
        router,
        gvr,
        synced: synced.clone(),
        known: HashMap::new(),
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
        synced,
        stop,
        task: Some(task),
    }
}

impl<C: ClusterApi> Watcher<C> {
    /// List, then watch from the list's version; relist on 410 Gone; back off on errors.
    async fn run(mut self) {
        let mut delay = FIRST_RETRY_DELAY;
        loop {
            let err = match self.list().await {
                Ok(rv) => {
                    delay = FIRST_RETRY_DELAY;
                    self.watch_from(rv).await
                }
                Err(e) => e,
            };
            if err.is_gone() {
                tracing::debug!(resource = %self.gvr, "watch expired; relisting");
                continue;
            }
            tracing::warn!(resource = %self.gvr, error = %err, ?delay, "list/watch failed; retrying");
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(MAX_RETRY_DELAY);
        }
    }

    /// Lists the resource page by page, routing each page as it arrives: objects the monitor knows
    /// as updates, others as adds and, once the last page is in, a delete for every known object
    /// the list did not show. Returns the list's resourceVersion, which is its first page's.
    ///
    /// A list that fails midway proves nothing about the objects it did not reach: they stay
    /// known, beside those its pages routed, and the next list, which starts again from the first
    /// page, decides about all of them.
    async fn list(&mut self) -> Result<String, ApiError> {
        let mut unseen = std::mem::take(&mut self.known);
        let listed = self.route_pages(&mut unseen).await;
        if listed.is_err() {
            self.known.extend(unseen);
            return listed;
        }
        for (uid, known) in unseen {
            let meta = ObjectMeta {
                name: known.name.to_string(),
                namespace: known.namespace.to_string(),
                uid: uid.to_string(),
                ..Default::default()
            };
            self.route(EventType::Delete, meta);
        }
        self.synced.store(true, Ordering::Release);
        listed
    }

    /// Routes the pages of one list as they arrive, taking each object they show out of `unseen`;
    /// returns the first page's resourceVersion.
    async fn route_pages(&mut self, unseen: &mut HashMap<Uid, Known>) -> Result<String, ApiError> {
        let mut page = self.api.list_page(&self.gvr, "", LIST_PAGE_SIZE).await?;
        let resource_version = std::mem::take(&mut page.resource_version);
        loop {
            for item in std::mem::take(&mut page.items) {
                let uid = Uid::parse(&item.metadata.uid);
                // Known before the list, or from an earlier page of it.
                let known = unseen.remove(&uid).is_some() || self.known.contains_key(&uid);
                let event_type = if known { EventType::Update } else { EventType::Add };
                self.route(event_type, item.metadata);
            }
            if page.continue_token.is_empty() {
                return Ok(resource_version);
            }
            page = self
                .api
                .list_page(&self.gvr, &page.continue_token, LIST_PAGE_SIZE)
                .await?;
        }
    }

    /// Watches, resuming from the last version seen whenever the server closes the stream, until
    /// a watch fails.
    async fn watch_from(&mut self, mut rv: String) -> ApiError {
        loop {
            let mut stream = match self.api.watch(&self.gvr, &rv).await {
                Ok(stream) => stream,
                Err(e) => return e,
            };
            while let Some(event) = stream.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(e) => return e,
                };
                let meta = event.object.metadata;
                if !meta.resource_version.is_empty() {
                    rv.clone_from(&meta.resource_version);
                }
                let Some(event_type) = EventType::of_watch(event.event_type) else {
                    continue;
                };
                self.route(event_type, meta);
            }
        }
    }

    fn route(&mut self, event_type: EventType, meta: ObjectMeta) {
        match GraphEvent::observed(&self.graph, event_type, &meta, &self.api_version, &self.kind) {
            Ok(event) => {
                if event_type == EventType::Delete {
                    self.known.remove(&event.object.uid);
                } else {
                    // A UID's name and namespace never change: remember them once.
                    self.known.entry(event.object.uid).or_insert_with(|| Known {
                        name: event.object.name.clone(),
                        namespace: event.object.namespace,
                    });
                }
                self.router.route(event);
            }
            Err(e) => tracing::warn!(resource = %self.gvr, error = %e, "dropping an unreadable object"),
        }
    }
}
