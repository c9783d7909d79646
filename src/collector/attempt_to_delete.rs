//! attemptToDelete: the worker step and the decision table of spec §4.1–§4.4.

use super::classify::Classified;
use super::patch::{delete_owner_refs_merge, delete_owner_refs_smp, unblock_owner_refs_merge, unblock_owner_refs_smp};
use super::{Action, CollectError, Collector, ItemState, Result, Why};
use crate::api::{ClusterApi, PatchType, PropagationPolicy, FINALIZER_FOREGROUND};
use crate::event::GraphEvent;
use crate::graph::{Handle, Identity, OwnerRef, Uid};
use crate::journal::Action as Write;
use crate::shard::Hold;

/// The retries of removeFinalizer: client-go's `retry.DefaultBackoff` (4 steps from 10 ms, ×5,
/// jitter 0.1).
const REMOVE_FINALIZER_STEPS: u32 = 4;
const REMOVE_FINALIZER_FIRST_DELAY_MS: f64 = 10.0;
const REMOVE_FINALIZER_FACTOR: f64 = 5.0;
const REMOVE_FINALIZER_JITTER: f64 = 0.1;

impl<C: ClusterApi> Collector<C> {
    /// Spec §4.1: what to do with one item of attemptToDelete.
    pub(super) async fn attempt_to_delete_worker(&self, item: &Handle) -> Action {
        let current = self.graph.get(&item.identity().uid);
        if current.is_none() {
            // Its UID left the graph: a watch saw the object go, or a worker found it absent, and
            // UIDs are never reused. Upstream's GET would answer 404 and change nothing.
            return Action::Forget;
        }
        if item.is_virtual() && current.as_ref().is_some_and(|n| !n.is_virtual()) {
            // A stale virtual handle: the real object was observed.
            return Action::Forget;
        }
        if item.is_virtual() && current.as_ref().is_some_and(|n| n.is_unreferenced()) {
            // Nothing names the owner any more; the builder drops its placeholder if that still
            // holds when it applies the event.
            self.router.route(GraphEvent::unreferenced(item.identity()));
            return Action::Forget;
        }
        let item = match current {
            Some(n) if n.identity().type_meta() != item.identity().type_meta() => {
                item.clone_with_identity(item.identity().with_type_meta(n.identity().type_meta().clone()))
            }
            _ => item.clone(),
        };
        match self.attempt_to_delete_item(&item).await {
            Err(CollectError::EnqueuedVirtualDeleteEvent(_))
            | Err(CollectError::NamespacedOwnerOfClusterScopedObject { .. }) => Action::Forget,
            Err(err) => Action::after_failure(&err, item.identity()),
            // Keep polling a virtual node until a watch observes it or a virtual delete removes it.
            Ok(()) if item.is_virtual() => Action::Requeue,
            Ok(()) => Action::Forget,
        }
    }

    /// Spec §4.2: decides whether `item` goes, and carries the decision out: from the graph's
    /// observation of it when there is one, else (or when that proves stale) from a live GET.
    pub async fn attempt_to_delete_item(&self, item: &Handle) -> Result<()> {
        let identity = item.identity();
        if item.is_being_deleted() && !item.is_deleting_dependents() {
            return Ok(()); // its dependents are handled when its delete event arrives
        }
        if !item.is_virtual() && !item.is_deleting_dependents() && !self.shard.owns(identity) {
            return Ok(()); // another shard's cluster-scoped object: that shard judges it
        }
        if let Some(observed) = self.observed_state(item) {
            match self.act_on(item, &observed).await {
                Err(e) if e.is_stale_write() => {
                    tracing::debug!(item = %identity, %e, "changed since observed; reading it live");
                }
                other => return other,
            }
        }
        let latest = match self.get_object(identity).await {
            Err(e) if e.is_not_found() => return Err(self.enqueue_virtual_delete_event(identity)),
            other => other?,
        };
        if Uid::parse(&latest.metadata.uid) != identity.uid {
            return Err(self.enqueue_virtual_delete_event(identity));
        }
        self.act_on(item, &ItemState::live(&self.graph, &latest)).await
    }

    /// Spec §4.2 steps 4–7, on one reading of the item.
    async fn act_on(&self, item: &Handle, state: &ItemState) -> Result<()> {
        let identity = item.identity();
        if item.is_deleting_dependents() {
            return self.process_deleting_dependents_item(item, state).await;
        }
        if state.owners.is_empty() {
            return Ok(());
        }
        let mut classes = self.classify_references(item, &state.owners).await?;
        let stripped;
        let state = if classes.orphaned.is_empty() {
            state
        } else {
            // Refs to owners this collector orphaned go first; the rest is judged on the object
            // as the patch left it.
            let uids: Vec<Uid> = classes.orphaned.iter().map(|r| r.uid.clone()).collect();
            let why = why_of(Write::RemoveOwnerRefs, REASON_ORPHANED, state, &classes).refs(&uids);
            stripped = self.remove_owner_refs(identity, state, &uids, &why).await?;
            if stripped.owners.is_empty() {
                return Ok(());
            }
            classes = self.classify_references(item, &stripped.owners).await?;
            &stripped
        };
        if !classes.solid.is_empty() && classes.dangling.is_empty() && classes.waiting.is_empty() {
            return Ok(());
        }
        // Every action from here rests on the dangling owners being absent.
        self.require_owner_views(&classes.dangling, "acting on absent owners")?;
        if !classes.solid.is_empty() {
            let uids: Vec<Uid> = classes
                .dangling
                .iter()
                .chain(&classes.waiting)
                .map(|r| r.uid.clone())
                .collect();
            let why = why_of(Write::RemoveOwnerRefs, REASON_SOLID_REMAINS, state, &classes).refs(&uids);
            return self.remove_owner_refs(identity, state, &uids, &why).await.map(drop);
        }
        if !classes.waiting.is_empty() && self.may_have_dependents(item) {
            if item.dependents().iter().any(|d| d.is_deleting_dependents()) {
                // A dependency cycle through a foreground deletion: unblock, or both wait forever.
                // The heuristic has false positives and races between workers, as upstream's.
                let owners = item.owners();
                let smp = self.fenced_smp(unblock_owner_refs_smp(&identity.uid, &owners), || {
                    state.resource_version.clone()
                });
                let merge = |current: &ItemState| unblock_owner_refs_merge(&current.resource_version, &owners);
                let blocking: Vec<Uid> = owners
                    .iter()
                    .filter(|r| r.blocks_owner_deletion())
                    .map(|r| r.uid.clone())
                    .collect();
                let why = why_of(Write::UnblockOwnerRefs, REASON_UNBLOCK, state, &classes).refs(&blocking);
                self.patch_with_fallback(identity, smp, || state.if_observed(), merge, &why)
                    .await?;
            }
            let why = why_of(Write::Delete, REASON_FOREGROUND, state, &classes);
            return self
                .delete_collected(identity, state, PropagationPolicy::Foreground, &why)
                .await;
        }
        // No solid owner, and nothing to wait for: the item's own finalizers choose the policy.
        let why = why_of(Write::Delete, REASON_NO_SOLID_OWNER, state, &classes);
        self.delete_collected(identity, state, state.deletion_policy(), &why)
            .await
    }

    /// Whether `item` has dependents, or may have ones the graph has not seen: while a view is
    /// incomplete, an empty dependents set proves nothing. It chooses the policy of a dependent of
    /// a waiting owner, where the Foreground way is right whether the item has dependents or not,
    /// and the Background way only when it has none: a dependent deleted in the background ahead
    /// of its own blocking dependents leaves them blocking an owner that is gone
    /// ([`super::partial_view`]). Events in flight to the builders are not waited for here: that
    /// window is upstream's too, and the owner's finalizer still waits for them.
    fn may_have_dependents(&self, item: &Handle) -> bool {
        item.dependents_len() > 0 || !self.partial_view.views.incomplete(None).is_empty()
    }

    /// Strips the refs to `uids` from an item: dangling and waiting owners of an item that has a
    /// solid owner (the waiting refs must go too, or those owners wait on this item forever), or
    /// owners this collector orphaned. Returns the item as the patch left it (in shadow mode, as
    /// it would have).
    async fn remove_owner_refs(
        &self,
        identity: &Identity,
        state: &ItemState,
        uids: &[Uid],
        why: &Why<'_>,
    ) -> Result<ItemState> {
        let smp = self.fenced_smp(delete_owner_refs_smp(&identity.uid, uids), || {
            state.resource_version.clone()
        });
        let merge = |current: &ItemState| delete_owner_refs_merge(&current.resource_version, &current.owners, uids);
        let patched = self
            .patch_with_fallback(identity, smp, || state.if_observed(), merge, why)
            .await?;
        Ok(match patched {
            Some(object) => ItemState::live(&self.graph, &object),
            None => state.without_owners(uids),
        })
    }

    /// Deletes an item judged garbage; a 404 becomes a virtual delete (spec §10 item 58). From an
    /// observed state the precondition is the whole check, and a conflict is the caller's to
    /// handle; from a live one, spec §4.4's conflict rule applies.
    async fn delete_collected(
        &self,
        identity: &Identity,
        state: &ItemState,
        policy: PropagationPolicy,
        why: &Why<'_>,
    ) -> Result<()> {
        let rv = &state.resource_version;
        let result = if state.observed {
            self.send_delete(identity, Some(rv), policy, why).await
        } else {
            self.delete_object(identity, rv, &state.owners, policy, why).await
        };
        match result {
            Err(e) if e.is_not_found() => Err(self.enqueue_virtual_delete_event(identity)),
            other => other,
        }
    }

    /// Spec §4.2 step 4: an owner in a foreground deletion. The finalizer goes only once every
    /// view is complete and the graph, with every event routed so far applied, still shows no
    /// blocking dependent ([`super::partial_view`]).
    async fn process_deleting_dependents_item(&self, item: &Handle, state: &ItemState) -> Result<()> {
        let mut blocking = item.blocking_dependents();
        if blocking.is_empty() {
            self.require_complete_views("removing the foregroundDeletion finalizer")
                .await?;
            blocking = self
                .graph
                .get(&item.identity().uid)
                .map_or_else(Vec::new, |n| n.blocking_dependents());
        }
        let identity = item.identity();
        if blocking.is_empty() {
            if !self.shards_let_go(identity, Hold::Foreground, "removing the foregroundDeletion finalizer")? {
                return Ok(()); // the owner's shard removes the finalizer
            }
            let why = Why::new(Write::RemoveFinalizer, REASON_NO_BLOCKING_DEPENDENT).finalizer(FINALIZER_FOREGROUND);
            return self.remove_finalizer(identity, Some(state), &why).await;
        }
        self.shard_holds(identity, Hold::Foreground);
        for dep in blocking {
            if !dep.is_deleting_dependents() && self.shard.owns(dep.identity()) {
                self.attempt_to_delete.add(dep);
            }
        }
        Ok(())
    }

    /// Spec §4.4: DELETE with UID and resourceVersion preconditions. On a conflict, retries once
    /// with the UID alone if only unrelated fields changed since `rv` (a sharded replica's retry
    /// keeps the version it read then: [`Collector::fenced_version`]).
    async fn delete_object(
        &self,
        identity: &Identity,
        rv: &str,
        owners_at_rv: &[OwnerRef],
        policy: PropagationPolicy,
        why: &Why<'_>,
    ) -> Result<()> {
        let first = self
            .send_delete(identity, (!rv.is_empty()).then_some(rv), policy, why)
            .await;
        let conflict = match first {
            Err(e) if e.is_conflict() && !rv.is_empty() => e,
            other => return other,
        };
        let latest = match self.get_object(identity).await {
            Err(e) if e.is_not_found() => return Err(e),
            Err(_) => return Err(conflict),
            Ok(latest) => latest,
        };
        let meta = &latest.metadata;
        let same_owners = owners_at_rv.iter().map(OwnerRef::to_wire).collect::<Vec<_>>() == meta.owner_references;
        if Uid::parse(&meta.uid) == identity.uid && meta.resource_version != rv && same_owners {
            let fence = self.fenced_version(&meta.resource_version);
            return self.send_delete(identity, fence, policy, why).await;
        }
        Err(conflict)
    }

    /// Spec §5 removeFinalizer: drop `why`'s finalizer with a JSON merge patch at a known
    /// resourceVersion, retried on conflict with client-go's default backoff. The first attempt
    /// patches at the observed version when `known` is an observation listing the finalizer
    /// alone; every other attempt GETs the object first, as upstream's does.
    pub(super) async fn remove_finalizer(
        &self,
        identity: &Identity,
        known: Option<&ItemState>,
        why: &Why<'_>,
    ) -> Result<()> {
        let finalizer = why.finalizer.expect("a finalizer removal names its finalizer");
        if let Some(state) = known.filter(|s| s.observed && s.has_only_finalizer(finalizer)) {
            let body = super::patch::remove_finalizer_merge(&state.resource_version, &[]);
            let why = why.observed(true);
            match self.patch_object(identity, PatchType::Merge, body, &why).await {
                Err(e) if e.is_conflict() => {} // changed since observed: the loop reads it live
                Err(e) if e.is_not_found() => return Ok(()),
                other => return other.map(drop),
            }
        }
        for attempt in 0..REMOVE_FINALIZER_STEPS {
            if attempt > 0 {
                tokio::time::sleep(backoff_delay(attempt)).await;
            }
            let object = match self.get_object(identity).await {
                Err(e) if e.is_not_found() => return Ok(()),
                other => other?,
            };
            let meta = &object.metadata;
            if !meta.has_finalizer(finalizer) {
                return Ok(());
            }
            let remaining: Vec<String> = meta.finalizers.iter().filter(|f| *f != finalizer).cloned().collect();
            let body = super::patch::remove_finalizer_merge(&meta.resource_version, &remaining);
            match self.patch_object(identity, PatchType::Merge, body, why).await {
                Err(e) if e.is_conflict() => continue,
                other => return other.map(drop),
            }
        }
        Err(CollectError::UpdateMaxRetries {
            retries: REMOVE_FINALIZER_STEPS,
            owner: Box::new(identity.clone()),
        })
    }
}

const REASON_ORPHANED: &str = "refs to owners this collector orphaned are removed first";
const REASON_SOLID_REMAINS: &str = "a solid owner remains: refs to dangling or waiting owners are removed";
const REASON_UNBLOCK: &str =
    "a dependent deletes its own dependents in the foreground: refs unblocked to break a possible cycle";
const REASON_FOREGROUND: &str =
    "no solid owner, an owner waits on its dependents and the item has dependents (or the graph may not show them yet): deleted in the foreground";
const REASON_NO_SOLID_OWNER: &str = "no solid owner: every owner is dangling or waiting";
const REASON_NO_BLOCKING_DEPENDENT: &str = "no blocking dependent is left";

/// The journal's account of a decision on `state` with `classes`.
fn why_of<'a>(action: Write, reason: &'static str, state: &'a ItemState, classes: &'a Classified) -> Why<'a> {
    Why::new(action, reason)
        .owners(&state.owners, &classes.judged)
        .observed(state.observed)
}

/// The wait before retry `attempt` (1-based): 10 ms · 5^(attempt-1), plus up to 10 % jitter.
fn backoff_delay(attempt: u32) -> std::time::Duration {
    let base = REMOVE_FINALIZER_FIRST_DELAY_MS * REMOVE_FINALIZER_FACTOR.powi(attempt as i32 - 1);
    let jitter = 1.0 + REMOVE_FINALIZER_JITTER * rand::random::<f64>();
    std::time::Duration::from_secs_f64(base * jitter / 1000.0)
}
