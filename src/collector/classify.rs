//! classifyReferences and isDangling (spec §4.3): sorts an item's owner refs into solid, dangling
//! and waiting-for-dependents, consulting absentOwnerCache before each live GET.

use super::{CollectError, Collector, Result};
use crate::api::{ClusterApi, OwnerReference, FINALIZER_FOREGROUND};
use crate::event::owner_ref;
use crate::graph::{Handle, Identity, Sym, Uid};

/// An item's owner refs, sorted by what their owners are doing.
#[derive(Debug, Default)]
pub(super) struct Classified {
    /// Owners that exist and are not waiting on their dependents.
    pub solid: Vec<OwnerReference>,
    /// Owners that do not exist (404, or the name now has another UID).
    pub dangling: Vec<OwnerReference>,
    /// Owners in a foreground deletion.
    pub waiting: Vec<OwnerReference>,
}

/// What one owner ref turned out to name.
enum Owner {
    Dangling,
    Solid,
    Waiting,
}

impl<C: ClusterApi> Collector<C> {
    /// Classifies every ref, in order; the first error aborts.
    pub(super) async fn classify_references(&self, item: &Handle, refs: &[OwnerReference]) -> Result<Classified> {
        let mut out = Classified::default();
        for r in refs {
            match self.is_dangling(item.identity(), r).await? {
                Owner::Dangling => out.dangling.push(r.clone()),
                Owner::Solid => out.solid.push(r.clone()),
                Owner::Waiting => out.waiting.push(r.clone()),
            }
        }
        Ok(out)
    }

    /// Looks an owner up: first in absentOwnerCache under two keys (cluster-scoped, then the
    /// item's namespace, since a virtual owner may have been cached under either), then live.
    async fn is_dangling(&self, item: &Identity, r: &OwnerReference) -> Result<Owner> {
        let mut key: Identity = owner_ref(&self.graph, r).identity_in(&Sym::new(""));
        if self.absent_owner_cache.has(&key) {
            return Ok(Owner::Dangling);
        }
        key.namespace = item.namespace;
        if self.absent_owner_cache.has(&key) {
            return Ok(Owner::Dangling);
        }
        let mapping = self.mapping(&r.api_version, &r.kind)?;
        if !mapping.namespaced {
            key.namespace = Sym::new("");
        }
        if item.namespace.is_empty() && mapping.namespaced {
            return Err(CollectError::NamespacedOwnerOfClusterScopedObject {
                item: Box::new(item.clone()),
                owner_kind: r.kind.clone(),
            });
        }
        let namespace = if mapping.namespaced { &*item.namespace } else { "" };
        let owner = match self.api.get(&mapping.gvr, namespace, &r.name).await {
            Err(e) if e.is_not_found() => {
                self.absent_owner_cache.add(key);
                return Ok(Owner::Dangling);
            }
            Err(e) => return Err(super::api_error("get", &key, e)),
            Ok(owner) => owner,
        };
        if Uid::parse(&owner.metadata.uid) != key.uid {
            self.absent_owner_cache.add(key);
            return Ok(Owner::Dangling);
        }
        let meta = &owner.metadata;
        Ok(
            if meta.deletion_timestamp.is_some() && meta.has_finalizer(FINALIZER_FOREGROUND) {
                Owner::Waiting
            } else {
                Owner::Solid
            },
        )
    }
}
