//! [`ItemState`]: the one reading of an object a decision rests on, from a live GET (upstream's
//! `latest`) or from the graph's last observation.
//!
//! Invariant: the fields come from one version of the object, and every write the decision leads
//! to carries that version (a DELETE precondition, a merge patch's resourceVersion) or the
//! object's UID (a strategic merge patch), so a write aimed at a version that is no longer current
//! fails instead of landing on it.

use crate::api::{PartialObjectMeta, PropagationPolicy};
use crate::event::owner_ref;
use crate::graph::{Graph, Node, ObservedFinalizers, OwnerRef};

/// An object as of one resourceVersion.
#[derive(Clone, Debug)]
pub(super) struct ItemState {
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// `metadata.ownerReferences`.
    pub owners: Vec<OwnerRef>,
    /// The finalizers, as far as the GC tells them apart.
    pub finalizers: ObservedFinalizers,
    /// Read from the graph, not from the API: writes are conditioned on this version alone and a
    /// conflict means "look again".
    pub observed: bool,
}

impl ItemState {
    /// The state a live GET returned.
    pub fn live(graph: &Graph, latest: &PartialObjectMeta) -> Self {
        let meta = &latest.metadata;
        ItemState {
            resource_version: meta.resource_version.clone(),
            owners: meta.owner_references.iter().map(|r| owner_ref(graph, r)).collect(),
            finalizers: ObservedFinalizers::from_list(&meta.finalizers),
            observed: false,
        }
    }

    /// The state the graph last observed of `node`; `None` for a virtual node or an unknown
    /// resourceVersion.
    pub fn observed(node: &Node) -> Option<Self> {
        let observed = node.observed()?;
        let seen = observed.observation;
        Some(ItemState {
            resource_version: seen.resource_version.to_string(),
            owners: observed.owners,
            finalizers: seen.finalizers,
            observed: true,
        })
    }

    /// A copy when the state was read from the graph, for a fallback that builds on it.
    pub fn if_observed(&self) -> Option<Self> {
        self.observed.then(|| self.clone())
    }

    /// The state a patch removing the refs to `uids` would leave, for shadow mode, where the
    /// patch is not sent and the server cannot say.
    pub fn without_owners(&self, uids: &[crate::graph::Uid]) -> Self {
        ItemState {
            owners: self.owners.iter().filter(|r| !uids.contains(&r.uid)).cloned().collect(),
            ..self.clone()
        }
    }

    /// The policy an ownerless item is deleted with: its own finalizers choose (spec §4.2 step 7).
    pub fn deletion_policy(&self) -> PropagationPolicy {
        if self.finalizers.orphan {
            PropagationPolicy::Orphan
        } else if self.finalizers.foreground {
            PropagationPolicy::Foreground
        } else {
            PropagationPolicy::Background
        }
    }

    /// True when `finalizer` is the only finalizer: removing it leaves none, so the patch needs
    /// no list read live.
    pub fn has_only_finalizer(&self, finalizer: &str) -> bool {
        let f = self.finalizers;
        let only = |a: bool, b: bool| a && !b && !f.other;
        match finalizer {
            crate::api::FINALIZER_ORPHAN => only(f.orphan, f.foreground),
            crate::api::FINALIZER_FOREGROUND => only(f.foreground, f.orphan),
            _ => false,
        }
    }
}
