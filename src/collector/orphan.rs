//! attemptToOrphan (spec §5): strip an owner's ref from all its dependents, then remove the
//! owner's `orphan` finalizer.

use super::patch::{delete_owner_refs_merge, delete_owner_refs_smp};
use super::{CollectError, Collector, ItemState, Result, Why};
use crate::api::{ClusterApi, FINALIZER_ORPHAN};
use crate::graph::{Handle, Identity, OwnerRef, Uid};
use crate::journal::{Action, OwnerState, Seen};
use crate::shard::Hold;
use futures::stream::{self, StreamExt};
use std::collections::HashSet;

/// Times the orphan worker looks again for dependents that reached the graph while it patched
/// the ones it knew, before it gives the owner back to the queue.
const ORPHAN_ROUNDS: usize = 3;

impl<C: ClusterApi> Collector<C> {
    /// Orphans the dependents of `owner`, then lets the owner go: only on a complete view, and
    /// only once a look at the graph with every event routed so far applied finds no dependent
    /// left unpatched ([`super::partial_view`]). The owner is remembered as orphaned before its
    /// finalizer goes, so that a dependent whose event is still on its way has the reference
    /// removed, not the dependent.
    pub async fn attempt_to_orphan_worker(&self, owner: &Handle) -> Result<()> {
        let uid = owner.identity().uid.clone();
        let mut patched: HashSet<Uid> = HashSet::new();
        for _ in 0..ORPHAN_ROUNDS {
            self.require_complete_views("orphaning dependents").await?;
            // The graph's node for the UID: a clone that replaced `owner` holds the newer edges.
            let current = self.graph.get(&uid).unwrap_or_else(|| owner.clone());
            // Another shard's cluster-scoped dependents are that shard's to patch.
            let fresh: Vec<Handle> = current
                .dependents()
                .into_iter()
                .filter(|d| !patched.contains(&d.identity().uid) && self.shard.owns(d.identity()))
                .collect();
            if fresh.is_empty() {
                self.partial_view.orphaned.record(uid.clone());
                self.shard.orphaned(&uid);
                if !self.shards_let_go(owner.identity(), Hold::Orphan, "removing the orphan finalizer")? {
                    return Ok(()); // the owner's shard removes the finalizer
                }
                let observed = self.observed_state(owner);
                let why = Why::new(Action::RemoveFinalizer, "every dependent is orphaned").finalizer(FINALIZER_ORPHAN);
                return self.remove_finalizer(owner.identity(), observed.as_ref(), &why).await;
            }
            self.shard_holds(owner.identity(), Hold::Orphan);
            self.orphan_dependents(owner.identity(), &fresh).await?;
            patched.extend(fresh.iter().map(|d| d.identity().uid.clone()));
        }
        Err(CollectError::PartialView {
            incomplete: Vec::new(),
            before: "removing the orphan finalizer (dependents kept arriving)",
        })
    }

    /// Patches every dependent, `orphan_concurrency` at a time (upstream starts one goroutine per
    /// dependent with no bound; a bound keeps a million-dependent owner from flooding the server).
    /// A dependent that is already gone is fine; any other failure fails the whole step.
    async fn orphan_dependents(&self, owner: &Identity, dependents: &[Handle]) -> Result<()> {
        let owner_uid = [owner.uid.clone()];
        let failures: Vec<String> = stream::iter(dependents.iter().cloned())
            .map(|dep| self.orphan_one(dep, &owner_uid))
            .buffer_unordered(self.config.orphan_concurrency.max(1))
            .filter_map(|failure| async move { failure })
            .collect()
            .await;
        if failures.is_empty() {
            Ok(())
        } else {
            Err(CollectError::OrphanDependents {
                owner: Box::new(owner.clone()),
                errors: failures.join(", "),
            })
        }
    }

    /// Removes the ref to `owner_uid` from one dependent; returns the failure, if any.
    async fn orphan_one(&self, dep: Handle, owner_uid: &[Uid]) -> Option<String> {
        let id = dep.identity();
        // The decision rests on the owner alone; the dependent's last observed version fences it.
        // (none known for a virtual node: the empty string, which adds no condition).
        let smp = self.fenced_smp(delete_owner_refs_smp(&id.uid, owner_uid), || {
            dep.observation().resource_version.to_string()
        });
        let merge =
            |current: &ItemState| delete_owner_refs_merge(&current.resource_version, &current.owners, owner_uid);
        let owner: Vec<OwnerRef> =
            dep.with_owners(|refs| refs.iter().filter(|r| r.uid == owner_uid[0]).cloned().collect());
        let why = Why::new(Action::Orphan, "the owner is being deleted with the orphan finalizer")
            .owners(&owner, &[(OwnerState::Orphaning, Seen::Graph)])
            .observed(!self.config.verify_with_get)
            .refs(owner_uid);
        match self
            .patch_with_fallback(id, smp, || self.observed_state(&dep), merge, &why)
            .await
        {
            // a ref that is not there is not an error, and neither is a dependent that is gone
            Err(e) if !e.is_not_found() => Some(format!("orphaning {id} failed, {e}")),
            _ => None,
        }
    }
}
