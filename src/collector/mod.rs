//! Collector workers: decide and carry out deletion, orphaning and finalizer removal (spec §4–§6).
//!
//! Invariant: workers never mutate the graph, and never delete an object upstream would keep.
//! What they learn about the cluster goes back to the builder as virtual delete events through
//! the [`Router`]; what they decide goes to the cluster through [`ClusterApi`]. A worker reads
//! nodes without a graph-wide lock and may act on a stale view; the builder's re-queue rules bring
//! an item back whenever the facts it was judged on change.
//!
//! Each queue item ends in exactly one of two actions, as upstream's `workQueueItemAction`:
//! forget (reset its backoff) or requeue with rate limiting.
//!
//! # One API call per collected object
//!
//! Upstream reads the item with a GET, each owner with a GET, then sends the DELETE: about two
//! calls per collected object. The graph already holds what those GETs return for every object a
//! watch delivered: its owners, finalizers, deletion mark and resourceVersion (see
//! [`crate::graph::Node::observe`]). So by default ([`CollectorConfig::verify_with_get`] false)
//! a worker decides from the graph and reads live only what the graph cannot vouch for. Each
//! shortcut, and why it deletes nothing upstream would keep:
//!
//! 1. **The item, from its last observation** instead of a GET. Every write the decision leads to
//!    is conditioned on the observed version: the DELETE carries the preconditions
//!    `{uid, resourceVersion: observed}`, merge patches carry the observed resourceVersion, and
//!    strategic merge patches carry the UID. If the object changed in any way since the graph saw
//!    it (an ownerReference added back, a finalizer added, the name recreated with another UID),
//!    the server refuses with 409 (422 for a UID guard), and the worker starts over on upstream's
//!    path: GET, reclassify, and the conflict rule of spec §4.4. A write that succeeds therefore
//!    acted on exactly the state the decision was made from, which is more than upstream
//!    guarantees (its conflict rule retries with the UID alone when only the ownerReferences are
//!    unchanged). A virtual item, or one observed at a resourceVersion that is not a decimal
//!    number, always takes upstream's path.
//! 2. **An owner whose deletion a watch reported is dangling** ([`crate::graph::Tombstones`]).
//!    UIDs are never reused, so no later GET could find that owner: upstream's GET would answer
//!    404 (dangling) or another UID under the name (dangling). Only real delete events make
//!    tombstones, never a worker's virtual delete.
//! 3. **An observed owner is solid or waiting as last observed**, when the graph's node has
//!    exactly the identity upstream would GET (the ref's apiVersion, kind and name, in the
//!    namespace the GET would use); otherwise the owner is read live. If the graph is behind, the
//!    answer errs one of two ways. "Solid" while the owner is really gone keeps the item, and
//!    only until the owner's delete event, which re-queues every dependent (spec §3.5): a delay,
//!    never a wrongful deletion. "Waiting" while the owner has since dropped its
//!    `foregroundDeletion` finalizer is a state the owner really was in; upstream, too, judges
//!    owners as of its GET and sends the DELETE later with no precondition on any owner, so its
//!    decision rests on owner states just as past. An owner's deletion mark is never cleared.
//! 4. **Owners the graph never observed are read live**, exactly as upstream does: a virtual owner
//!    (one only a reference names so far) or a UID the graph does not know. This is the case that
//!    protects a dependent whose owner was just created and whose watch event has not arrived.
//! 5. **removeFinalizer and the JSON-merge fallbacks** patch at the observed resourceVersion (the
//!    finalizer list is known exactly when the observed one is the finalizer alone), as upstream
//!    patches from its informer cache; a 409 falls back to a GET and retries.
//!
//! `verify_with_get` restores upstream's call pattern exactly, and the graph then keeps no
//! tombstones.

mod attempt_to_delete;
mod classify;
mod error;
mod orphan;
pub mod partial_view;
pub mod patch;
mod state;
mod write;

pub use error::{CollectError, Result};
pub use partial_view::{PartialView, Views, Waiting};

use crate::api::{ApiError, ClusterApi, Gvr, PartialObjectMeta, PatchType, SharedRestMapper};
use crate::event::GraphEvent;
use crate::graph::{AbsentOwnerCache, Graph, Handle, Identity, OwnerRef};
use crate::journal::Journal;
use crate::queue::WorkQueue;
use crate::recorder::EventRecorder;
use crate::router::Router;
use crate::shard::{Finding, Hold, Shard};
use serde_json::Value;
use state::ItemState;
use std::sync::Arc;
use write::Why;

/// Settings of the workers.
#[derive(Clone, Debug)]
pub struct CollectorConfig {
    /// How many dependents one orphan worker patches at once (upstream: unbounded).
    pub orphan_concurrency: usize,
    /// Read every item and every owner live before acting, as upstream does (`--verify-with-get`);
    /// by default the workers act on what the graph observed (see the [module docs](self)).
    pub verify_with_get: bool,
}

impl Default for CollectorConfig {
    fn default() -> Self {
        CollectorConfig {
            orphan_concurrency: 64,
            verify_with_get: false,
        }
    }
}

/// What a worker does with the item it took.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Action {
    /// Done with it: reset its backoff.
    Forget,
    /// Try again later, with backoff.
    Requeue,
    /// Look again after [`partial_view::WAIT`], without counting a failure: the decision waits
    /// for the views of these resources (none: for the builders to catch up).
    Wait(Vec<Gvr>),
}

impl Action {
    /// The action for an attempt that failed with `err`, after logging it.
    fn after_failure(err: &CollectError, item: &Identity) -> Action {
        match err {
            CollectError::PartialView { incomplete, .. } => {
                tracing::debug!(item = %item, %err, "decision deferred");
                Action::Wait(incomplete.clone())
            }
            CollectError::RestMapping { .. } => {
                tracing::debug!(item = %item, %err, "error syncing item");
                Action::Requeue
            }
            _ => {
                tracing::warn!(item = %item, %err, "error syncing item");
                Action::Requeue
            }
        }
    }
}

/// Shared state of every collector worker. Built by [`crate::controller::Pipeline`] alone and
/// shared behind an `Arc`; nothing in it changes after construction.
pub struct Collector<C> {
    /// The cluster.
    pub(crate) api: Arc<C>,
    /// The REST mapper in force.
    pub(crate) mapper: Arc<SharedRestMapper>,
    /// The graph the builders write; workers only read it.
    pub(crate) graph: Arc<Graph>,
    /// Where virtual delete events go.
    pub(crate) router: Router,
    /// The attemptToDelete queue.
    pub(crate) attempt_to_delete: Arc<WorkQueue<Handle>>,
    /// The attemptToOrphan queue.
    pub(crate) attempt_to_orphan: Arc<WorkQueue<Handle>>,
    /// Owners known to be absent, shared with the builder.
    pub(crate) absent_owner_cache: Arc<AbsentOwnerCache>,
    /// What the workers know of the monitors' views, and the owners they orphaned.
    pub(crate) partial_view: PartialView,
    /// Settings.
    pub(crate) config: CollectorConfig,
    /// Where every write is recorded; in shadow mode, instead of being sent.
    pub(crate) journal: Journal,
    /// Where Events on the owners of deleted objects go (`--journal-owner-events`).
    pub(crate) events: EventRecorder,
    /// The part of the cluster this collector acts on, and what the other shards reported
    /// ([`crate::shard`]).
    pub(crate) shard: Arc<Shard>,
}

impl<C> Collector<C> {
    /// The REST mapper in force.
    pub fn mapper(&self) -> &Arc<SharedRestMapper> {
        &self.mapper
    }

    /// The attemptToDelete queue.
    pub fn attempt_to_delete(&self) -> &Arc<WorkQueue<Handle>> {
        &self.attempt_to_delete
    }

    /// The attemptToOrphan queue.
    pub fn attempt_to_orphan(&self) -> &Arc<WorkQueue<Handle>> {
        &self.attempt_to_orphan
    }

    /// Owners known to be absent, shared with the builders.
    pub fn absent_owner_cache(&self) -> &Arc<AbsentOwnerCache> {
        &self.absent_owner_cache
    }

    /// What the workers know of the monitors' views.
    pub fn partial_view(&self) -> &PartialView {
        &self.partial_view
    }

    /// The workers' settings.
    pub fn config(&self) -> &CollectorConfig {
        &self.config
    }

    /// The part of the cluster this collector acts on.
    pub fn shard(&self) -> &Arc<Shard> {
        &self.shard
    }

    /// A collector like this one, sharing its graph, queues, cache, journal and settings, that
    /// talks to the cluster through `api` and knows the monitors' views through `partial_view`:
    /// for a test whose cluster must misbehave on cue, or be watched call by call.
    pub fn with_api<D>(&self, api: Arc<D>, partial_view: PartialView) -> Collector<D> {
        Collector {
            api,
            mapper: self.mapper.clone(),
            graph: self.graph.clone(),
            router: self.router.clone(),
            attempt_to_delete: self.attempt_to_delete.clone(),
            attempt_to_orphan: self.attempt_to_orphan.clone(),
            absent_owner_cache: self.absent_owner_cache.clone(),
            partial_view,
            config: self.config.clone(),
            journal: self.journal.clone(),
            events: self.events.clone(),
            shard: self.shard.clone(),
        }
    }
}

impl<C: ClusterApi> Collector<C> {
    /// Once no dependent in this shard holds `owner` for the deletion `hold`: whether this shard
    /// removes the owner's finalizer now. A namespaced owner's dependents are all in its own
    /// shard: yes. For a cluster-scoped one, this shard's finding is recorded for the others;
    /// `false` when the owner is another shard's, an error to wait on when another shard's
    /// ranges may still hold dependents.
    fn shards_let_go(&self, owner: &Identity, hold: Hold, before: &'static str) -> Result<bool> {
        if !owner.namespace().is_empty() {
            return Ok(true);
        }
        self.record_finding(owner, hold, Finding::Clear);
        if !self.shard.owns(owner) {
            return Ok(false);
        }
        match self.shard.agreed(&owner.uid, hold) {
            Ok(()) => Ok(true),
            Err(holding) => {
                tracing::debug!(owner = %owner, ?holding, "{before}: waiting for the other shards");
                Err(CollectError::PartialView {
                    incomplete: Vec::new(),
                    before,
                })
            }
        }
    }

    /// Records that dependents in this shard still hold the cluster-scoped `owner` for the
    /// deletion `hold`.
    fn shard_holds(&self, owner: &Identity, hold: Hold) {
        if owner.namespace().is_empty() {
            self.record_finding(owner, hold, Finding::Pending);
        }
    }

    /// Records `finding` for the deletion of `owner` held by `hold`, if the graph still observes
    /// the owner held that way ([`Shard::record`]).
    fn record_finding(&self, owner: &Identity, hold: Hold, finding: Finding) {
        self.shard.record(owner.uid.clone(), hold, finding, || {
            self.graph
                .get(&owner.uid)
                .filter(|n| !n.is_virtual())
                .is_some_and(|n| hold.held_by(&n.observation().finalizers))
        });
    }

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
            Err(err) => Action::after_failure(&err, owner.identity()),
        };
        self.finish(&self.attempt_to_orphan, owner, action);
        true
    }

    fn finish(&self, queue: &Arc<WorkQueue<Handle>>, item: Handle, action: Action) {
        let waiting = &self.partial_view.waiting;
        match action {
            Action::Forget => queue.forget(&item),
            Action::Requeue => queue.add_rate_limited(item.clone()),
            Action::Wait(_) => queue.add_after(item.clone(), partial_view::WAIT),
        }
        match &action {
            Action::Wait(resources) => waiting.wait(item.identity().uid.clone(), resources),
            _ => waiting.done(&item.identity().uid),
        }
        queue.done(&item);
    }

    /// Fails with [`CollectError::PartialView`] unless every monitor's view is complete and the
    /// builders have applied every event routed so far: the condition for letting an owner go
    /// (see [`partial_view`]). `before` names the decision.
    async fn require_complete_views(&self, before: &'static str) -> Result<()> {
        self.require_views(None, before)?;
        if self.router.caught_up(partial_view::BARRIER_PATIENCE).await {
            return Ok(());
        }
        Err(CollectError::PartialView {
            incomplete: Vec::new(),
            before,
        })
    }

    /// Fails with [`CollectError::PartialView`] unless the views of `resources` (every view, for
    /// `None`) are complete.
    fn require_views(&self, resources: Option<&[Gvr]>, before: &'static str) -> Result<()> {
        let incomplete = self.partial_view.views.incomplete(resources);
        if incomplete.is_empty() {
            Ok(())
        } else {
            Err(CollectError::PartialView { incomplete, before })
        }
    }

    /// Fails with [`CollectError::PartialView`] unless the views of the resources of `absent`
    /// owners are complete: the condition for acting on their absence (see [`partial_view`]).
    /// An owner whose kind maps to no resource has no view to wait for.
    fn require_owner_views(&self, absent: &[OwnerRef], before: &'static str) -> Result<()> {
        if absent.is_empty() {
            return Ok(());
        }
        let mapper = self.mapper.load();
        let mut resources: Vec<Gvr> = absent
            .iter()
            .filter_map(|r| mapper.rest_mapping_any_version(r.api_version(), r.kind()).ok())
            .map(|m| m.gvr)
            .collect();
        resources.sort();
        resources.dedup();
        self.require_views(Some(&resources), before)
    }

    /// Routes a virtual delete for `identity` and returns the sentinel that says so.
    fn enqueue_virtual_delete_event(&self, identity: &Identity) -> CollectError {
        self.router.route(GraphEvent::virtual_delete(identity));
        CollectError::EnqueuedVirtualDeleteEvent(Box::new(identity.clone()))
    }

    /// Maps an apiVersion/kind, or fails with a restMappingError. A version that is no longer
    /// served is read through the group's preferred served version of the kind: the object, and
    /// its UID, are the same through any version, and every decision on an owner found this way
    /// still compares UIDs (kubernetes#102641, where upstream retries the mapping forever). Only a
    /// kind no version serves fails.
    fn mapping(&self, api_version: &str, kind: &str) -> Result<crate::api::RestMapping> {
        self.mapper
            .load()
            .rest_mapping_any_version(api_version, kind)
            .map_err(|source| CollectError::RestMapping {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                source,
            })
    }

    /// Resource and namespace for `identity`, with upstream's namespace rule (spec §4.5).
    fn locate(&self, identity: &Identity) -> Result<(Gvr, String, bool)> {
        let mapping = self.mapping(identity.api_version(), identity.kind())?;
        let namespace = if mapping.namespaced {
            identity.namespace().to_string()
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
            .get(&gvr, &namespace, &identity.name.to_string())
            .await
            .map_err(|e| api_error("get", identity, e))
    }

    /// The graph's last observation of `node`, when workers may act on it (module docs).
    fn observed_state(&self, node: &crate::graph::Node) -> Option<ItemState> {
        if self.config.verify_with_get {
            None
        } else {
            ItemState::observed(node)
        }
    }

    /// upstream's `patch`: a strategic merge patch, or, when the resource answers 415 (custom
    /// resources, aggregated APIs), the JSON merge patch `merge` builds from the object's state.
    /// Upstream takes that state from its informer cache; kube-gc takes it from `observed` (the
    /// graph's observation, read only when needed), and from a live GET when there is none or
    /// when the observed version is stale. `None` in shadow mode, where nothing is sent.
    async fn patch_with_fallback(
        &self,
        identity: &Identity,
        smp: Value,
        observed: impl FnOnce() -> Option<ItemState>,
        merge: impl Fn(&ItemState) -> Value,
        why: &Why<'_>,
    ) -> Result<Option<PartialObjectMeta>> {
        match self.patch_object(identity, PatchType::StrategicMerge, smp, why).await {
            Err(e) if e.api_error().is_some_and(ApiError::is_unsupported_media_type) => {
                if let Some(state) = observed() {
                    let why = Why { observed: true, ..*why };
                    match self.patch_object(identity, PatchType::Merge, merge(&state), &why).await {
                        Err(e) if e.is_conflict() => {} // changed since observed: read it live
                        other => return other,
                    }
                }
                let current = ItemState::live(&self.graph, &self.get_object(identity).await?);
                let why = Why {
                    observed: false,
                    ..*why
                };
                self.patch_object(identity, PatchType::Merge, merge(&current), &why)
                    .await
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
