//! classifyReferences and isDangling (spec §4.3): sorts an item's owner refs into solid, dangling
//! and waiting-for-dependents, consulting absentOwnerCache, then what the graph knows for certain
//! (see the [collector docs](super), shortcuts 2–4), then a live GET.

use super::{CollectError, Collector, Result};
use crate::api::{ClusterApi, FINALIZER_FOREGROUND};
use crate::graph::{Handle, Identity, OwnerRef, Sym, Uid};
use crate::journal::{OwnerState, Seen};

/// An item's owner refs, sorted by what their owners are doing.
#[derive(Debug, Default)]
pub(super) struct Classified {
    /// Owners that exist and are not waiting on their dependents.
    pub solid: Vec<OwnerRef>,
    /// Owners that do not exist (404, or the name now has another UID).
    pub dangling: Vec<OwnerRef>,
    /// Owners in a foreground deletion.
    pub waiting: Vec<OwnerRef>,
    /// Owners this collector orphaned: the ref must go, whatever the rest.
    pub orphaned: Vec<OwnerRef>,
    /// What each ref turned out to name and where that was read, in the refs' order: the
    /// journal's account of the decision.
    pub judged: Vec<(OwnerState, Seen)>,
}

/// Upstream's rule for an owner that exists: waiting when being deleted with
/// `foregroundDeletion`, else solid.
fn existing(being_deleted: bool, foreground: bool) -> OwnerState {
    if being_deleted && foreground {
        OwnerState::Waiting
    } else {
        OwnerState::Solid
    }
}

impl<C: ClusterApi> Collector<C> {
    /// Classifies every ref, in order; the first error aborts.
    pub(super) async fn classify_references(&self, item: &Handle, refs: &[OwnerRef]) -> Result<Classified> {
        let mut out = Classified::default();
        for r in refs {
            let (state, seen) = self.is_dangling(item.identity(), r).await?;
            let class = match state {
                OwnerState::Dangling => &mut out.dangling,
                OwnerState::Waiting => &mut out.waiting,
                OwnerState::Orphaned => &mut out.orphaned,
                _ => &mut out.solid,
            };
            class.push(r.clone());
            out.judged.push((state, seen));
        }
        Ok(out)
    }

    /// Looks an owner up: first among the owners this collector, or another collector of its
    /// replica or group, orphaned (by UID, which is never reused; [`crate::shard::orphaned`]),
    /// then in absentOwnerCache under two keys (cluster-scoped, then the
    /// item's namespace, since a virtual owner may have been cached under either), then in the
    /// graph, then live.
    async fn is_dangling(&self, item: &Identity, r: &OwnerRef) -> Result<(OwnerState, Seen)> {
        if self.partial_view.orphaned.contains(&r.uid) || self.shard.was_orphaned(&r.uid) {
            return Ok((OwnerState::Orphaned, Seen::Collector));
        }
        let mut key: Identity = r.identity_in(&Sym::new(""));
        if self.absent_owner_cache.has(&key) {
            return Ok((OwnerState::Dangling, Seen::AbsentOwnerCache));
        }
        key = key.with_namespace(item.namespace().clone());
        if self.absent_owner_cache.has(&key) {
            return Ok((OwnerState::Dangling, Seen::AbsentOwnerCache));
        }
        let mapping = self.mapping(r.api_version(), r.kind())?;
        if !mapping.namespaced {
            key = key.with_namespace(Sym::new(""));
        }
        if item.namespace().is_empty() && mapping.namespaced {
            return Err(CollectError::NamespacedOwnerOfClusterScopedObject {
                item: Box::new(item.clone()),
                owner_kind: r.kind().to_string(),
            });
        }
        if let Some(known) = self.owner_from_graph(&key) {
            return Ok(known);
        }
        // `key` now names the owner exactly as the GET does: in the item's namespace when the
        // owner's type is namespaced.
        let gvr = self.observed_owner_resource(&key).unwrap_or(mapping.gvr);
        let owner = match self.api.get(&gvr, key.namespace(), &key.name.to_string()).await {
            Err(e) if e.is_not_found() => {
                self.absent_owner_cache.add(key);
                return Ok((OwnerState::Dangling, Seen::Live));
            }
            Err(e) => return Err(super::api_error("get", &key, e)),
            Ok(owner) => owner,
        };
        if Uid::parse(&owner.metadata.uid) != key.uid {
            self.absent_owner_cache.add(key);
            return Ok((OwnerState::Dangling, Seen::Live));
        }
        let meta = &owner.metadata;
        let state = existing(
            meta.deletion_timestamp.is_some(),
            meta.has_finalizer(FINALIZER_FOREGROUND),
        );
        Ok((state, Seen::Live))
    }

    /// The resource the graph observed the owner `key` through, when that is another version of
    /// the ref's group and kind (same UID, name and namespace): its monitor reads that version,
    /// so it is served now, whereas the ref's version may have been dropped since the mapper was
    /// last rebuilt, and a GET through a dropped version answers 404 for a live owner
    /// (kubernetes#102641). The UID comparison after the GET still decides.
    fn observed_owner_resource(&self, key: &Identity) -> Option<crate::api::Gvr> {
        let node = self.graph.get(&key.uid)?;
        let seen = node.identity();
        let group = |api_version: &str| api_version.rsplit_once('/').map_or("", |(g, _)| g).to_string();
        let other_version = seen.api_version() != key.api_version()
            && group(seen.api_version()) == group(key.api_version())
            && seen.kind() == key.kind()
            && seen.name == key.name
            && seen.namespace() == key.namespace();
        if node.is_virtual() || !other_version {
            return None;
        }
        let mapper = self.mapper.load();
        mapper.rest_mapping(seen.api_version(), seen.kind()).ok().map(|m| m.gvr)
    }

    /// What the graph knows for certain of the owner a GET of `key` would read, if anything:
    /// dangling when a watch reported its UID deleted, as last observed when the graph's node
    /// has exactly that identity, nothing for a virtual or unknown owner (collector docs).
    fn owner_from_graph(&self, key: &Identity) -> Option<(OwnerState, Seen)> {
        if self.config.verify_with_get {
            return None;
        }
        if self.graph.tombstones().contains(&key.uid) {
            return Some((OwnerState::Dangling, Seen::Tombstone));
        }
        let node = self.graph.get(&key.uid)?;
        if node.is_virtual() || node.identity() != key {
            return None;
        }
        let seen = node.observation();
        Some((existing(seen.being_deleted, seen.finalizers.foreground), Seen::Graph))
    }
}
