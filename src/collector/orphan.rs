//! attemptToOrphan (spec §5): strip an owner's ref from all its dependents, then remove the
//! owner's `orphan` finalizer.

use super::patch::{delete_owner_refs_merge, delete_owner_refs_smp};
use super::{CollectError, Collector, ItemState, Result};
use crate::api::{ClusterApi, FINALIZER_ORPHAN};
use crate::graph::{Handle, Identity, Uid};
use futures::stream::{self, StreamExt};

impl<C: ClusterApi> Collector<C> {
    /// Orphans the dependents of `owner`, then lets the owner go.
    pub async fn attempt_to_orphan_worker(&self, owner: &Handle) -> Result<()> {
        let dependents = owner.dependents();
        self.orphan_dependents(owner.identity(), &dependents).await?;
        let observed = self.observed_state(owner);
        self.remove_finalizer(owner.identity(), FINALIZER_ORPHAN, observed.as_ref())
            .await
    }

    /// Patches every dependent, `orphan_concurrency` at a time (upstream starts one goroutine per
    /// dependent with no bound; a bound keeps a million-dependent owner from flooding the server).
    /// A dependent that is already gone is fine; any other failure fails the whole step.
    async fn orphan_dependents(&self, owner: &Identity, dependents: &[Handle]) -> Result<()> {
        let owner_uid = [owner.uid];
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
        let smp = delete_owner_refs_smp(&id.uid, owner_uid);
        let merge =
            |current: &ItemState| delete_owner_refs_merge(&current.resource_version, &current.owners, owner_uid);
        match self
            .patch_with_fallback(id, &smp, || self.observed_state(&dep), merge)
            .await
        {
            // a ref that is not there is not an error, and neither is a dependent that is gone
            Err(e) if !e.is_not_found() => Some(format!("orphaning {id} failed, {e}")),
            _ => None,
        }
    }
}
