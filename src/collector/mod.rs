//! Collector workers: decide and carry out deletion, orphaning and finalizer removal (spec §4–§6).
//!
//! Invariant: workers never mutate the graph. What they learn about the cluster goes back to the
//! builder as virtual delete events through the [`Router`]; what they decide goes to the cluster
//! through [`ClusterApi`]. A worker reads nodes without a graph-wide lock and may act on a stale
//! view: every decision is re-checked against a live GET (upstream's call pattern), and the
//! builder's re-queue rules bring an item back whenever the facts it was judged on change.
//!
//! Each queue item ends in exactly one of two actions, as upstream's `workQueueItemAction`:
//! forget (reset its backoff) or requeue with rate limiting.

mod absent_owner_cache;
mod attempt_to_delete;
mod classify;
mod error;
mod orphan;
pub mod patch;

pub use absent_owner_cache::{AbsentOwnerCache, DEFAULT_CAPACITY as DEFAULT_ABSENT_OWNER_CACHE_CAPACITY};
pub use error::{CollectError, Result};

use crate::api::{ApiError, ClusterApi, Gvr, PartialObjectMeta, PatchType, SharedRestMapper};
use crate::event::GraphEvent;
use crate::graph::{Graph, Handle, Identity};
use crate::queue::WorkQueue;
use crate::router::Router;
use serde_json::Value;
use std::sync::Arc;

/// Settings of the workers.
#[derive(Clone, Debug)]
pub struct CollectorConfig {
    /// How many dependents one orphan worker patches at once (upstream: unbounded).
    pub orphan_concurrency: usize,
}

impl Default for CollectorConfig {
    fn default() -> Self {
        CollectorConfig { orphan_concurrency: 64 }
    }
}

/// What a worker does with the item it took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// Done with it: reset its backoff.
    Forget,
    /// Try again later, with backoff.
    Requeue,
}

/// Shared state of every collector worker. Built once by the controller (or a test rig) and
/// shared behind an `Arc`; nothing in it changes after construction.
pub struct Collector<C> {
    /// The cluster.
    pub api: Arc<C>,
    /// The REST mapper in force.
    pub mapper: Arc<SharedRestMapper>,
    /// The graph the builders write; workers only read it.
    pub graph: Arc<Graph>,
    /// Where virtual delete events go.
    pub router: Router,
    /// The attemptToDelete queue.
    pub attempt_to_delete: Arc<WorkQueue<Handle>>,
    /// The attemptToOrphan queue.
    pub attempt_to_orphan: Arc<WorkQueue<Handle>>,
    /// Owners known to be absent, shared with the builder.
    pub absent_owner_cache: Arc<AbsentOwnerCache>,
    /// Settings.
    pub config: CollectorConfig,
}

impl<C: ClusterApi> Collector<C> {
    /// One attemptToDelete worker: runs until its queue shuts down.
    pub async fn run_attempt_to_delete_worker(self: Arc<Self>) {
        while self.process_attempt_to_delete_worker().await {}
    }

    /// One attemptToOrphan worker: runs until its queue shuts down.
    pub async fn run_attempt_to_orphan_worker(self: Arc<Self>) {
        while self.process_attempt_to_orphan_worker().await {}
    }

    /// Takes one item of attemptToDelete and handles it; false once the queue has shut down
    /// (upstream's `processAttemptToDeleteWorker`).
    pub async fn process_attempt_to_delete_worker(&self) -> bool {
        let Some(item) = self.attempt_to_delete.get().await else {
            return false;
        };
        let action = self.attempt_to_delete_worker(&item).await;
        self.finish(&self.attempt_to_delete, item, action);
        true
    }

    /// Takes one owner of attemptToOrphan and handles it; false once the queue has shut down.
    pub async fn process_attempt_to_orphan_worker(&self) -> bool {
        let Some(owner) = self.attempt_to_orphan.get().await else {
            return false;
        };
        let action = match self.attempt_to_orphan_worker(&owner).await {
            Ok(()) => Action::Forget,
            Err(err) => {
                tracing::warn!(owner = %owner.identity(), %err, "orphaning failed; will retry");
                Action::Requeue
            }
        };
        self.finish(&self.attempt_to_orphan, owner, action);
        true
    }

    fn finish(&self, queue: &Arc<WorkQueue<Handle>>, item: Handle, action: Action) {
        match action {
            Action::Forget => queue.forget(&item),
            Action::Requeue => queue.add_rate_limited(item.clone()),
        }
        queue.done(&item);
    }

    /// Routes a virtual delete for `identity` and returns the sentinel that says so.
    fn enqueue_virtual_delete_event(&self, identity: &Identity) -> CollectError {
        self.router.route(GraphEvent::virtual_delete(identity));
        CollectError::EnqueuedVirtualDeleteEvent(Box::new(identity.clone()))
    }

    /// Maps an apiVersion/kind, or fails with a restMappingError.
    fn mapping(&self, api_version: &str, kind: &str) -> Result<crate::api::RestMapping> {
        self.mapper
            .load()
            .rest_mapping(api_version, kind)
            .map_err(|source| CollectError::RestMapping {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                source,
            })
    }

    /// Resource and namespace for `identity`, with upstream's namespace rule (spec §4.5).
    fn locate(&self, identity: &Identity) -> Result<(Gvr, String, bool)> {
        let mapping = self.mapping(&identity.api_version(), &identity.kind())?;
        let namespace = if mapping.namespaced {
            identity.namespace.to_string()
        } else {
            String::new()
        };
        Ok((mapping.gvr, namespace, mapping.namespaced))
    }

    /// upstream's `getObject`: a live metadata GET (spec §4.5).
    async fn get_object(&self, identity: &Identity) -> Result<PartialObjectMeta> {
        let (gvr, namespace, namespaced) = self.locate(identity)?;
        if namespaced && namespace.is_empty() {
            return Err(CollectError::NamespacedOwnerOfClusterScopedObject {
                item: Box::new(identity.clone()),
                owner_kind: identity.kind().to_string(),
            });
        }
        self.api
            .get(&gvr, &namespace, &identity.name)
            .await
            .map_err(|e| api_error("get", identity, e))
    }

    /// upstream's `patchObject`.
    async fn patch_object(
        &self,
        identity: &Identity,
        patch_type: PatchType,
        body: &Value,
    ) -> Result<PartialObjectMeta> {
        let (gvr, namespace, _) = self.locate(identity)?;
        self.api
            .patch(&gvr, &namespace, &identity.name, patch_type, body)
            .await
            .map_err(|e| api_error("patch", identity, e))
    }

    /// upstream's `patch`: a strategic merge patch, or, when the resource answers 415 (custom
    /// resources, aggregated APIs), the JSON merge patch built from the current object by `merge`.
    async fn patch_with_fallback(
        &self,
        identity: &Identity,
        smp: &Value,
        merge: impl FnOnce(&PartialObjectMeta) -> Value,
    ) -> Result<PartialObjectMeta> {
        match self.patch_object(identity, PatchType::StrategicMerge, smp).await {
            Err(e) if e.api_error().is_some_and(ApiError::is_unsupported_media_type) => {
                // Upstream reads the object from the informer cache when one watches this exact
                // resource; kube-gc keeps no object cache, so it reads the object live.
                let current = self.get_object(identity).await?;
                self.patch_object(identity, PatchType::Merge, &merge(&current)).await
            }
            other => other,
        }
    }
}

fn api_error(verb: &'static str, object: &Identity, source: ApiError) -> CollectError {
    CollectError::Api {
        verb,
        object: Box::new(object.clone()),
        source,
    }
}
