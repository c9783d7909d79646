//! The writes another collector is seen making, read from the watch streams by a shadow's
//! builders ([`Source::Observed`]).
//!
//! A watch event does not say who changed an object, so a change is taken for a collector's
//! write by its shape and by what the shadow's graph knows of the owners at that moment:
//!
//! | change | recorded as |
//! |---|---|
//! | refs removed, each owner absent, waiting or orphaning | `orphan` (per orphaning owner) or `remove-owner-refs` |
//! | `blockOwnerDeletion` turned false on refs | `unblock-owner-refs` |
//! | `orphan` or `foregroundDeletion` dropped by an object being deleted, or the object gone with it | `remove-finalizer` |
//! | an object with owners starts being deleted, or goes | `delete`, the policy read from its finalizers |
//!
//! A deletion is recorded with every owner's state, and counts as a collector's only when no
//! owner was solid ([`Entry::is_collector_write`]): an owned object a user deletes while its owner
//! lives is not the collector's doing. The watches of two resources are not ordered, and neither
//! are the builders of two partitions, so a dependent's deletion may be applied before its
//! owner's; the owner then still looks solid and the deletion is not counted unless the shadow
//! decided it too, which can hide a difference but never invents one.
//!
//! Invariant: the witness only reads the graph; the builder calls it before changing the node.

use super::{Action, Entry, Evidence, Journal, ObjectRef, OwnerSeen, OwnerState, Seen, Source};
use crate::api::{PropagationPolicy, FINALIZER_FOREGROUND, FINALIZER_ORPHAN};
use crate::graph::{Graph, Identity, Observation, ObservedFinalizers, OwnerRef, Uid};

/// What a shadow's builder saw of one object's change.
pub struct Change<'a> {
    /// The object.
    pub identity: &'a Identity,
    /// Its state before the event (`None`: first seen).
    pub prior: Option<Observation>,
    /// Its state after (for a delete event, its last state).
    pub now: Observation,
    /// Its owners after the event.
    pub owners: &'a [OwnerRef],
    /// Refs the event removed.
    pub removed: &'a [OwnerRef],
    /// Refs whose `blockOwnerDeletion` the event turned false.
    pub unblocked: &'a [Uid],
    /// The event is the object's deletion.
    pub gone: bool,
}

impl Journal {
    /// Records the collector writes `change` shows, judged against `graph` (module docs).
    pub fn witness(&self, graph: &Graph, change: &Change<'_>) {
        if !self.is_dry_run() {
            return;
        }
        let line = |action, reason: &str| observed(change.identity, action, reason);
        for (owner, state) in change.removed.iter().map(|r| (r, owner_state(graph, &r.uid))) {
            if state == OwnerState::Orphaning {
                let mut entry = line(Action::Orphan, "the ref to an owner being deleted with orphan went");
                entry.refs = vec![owner.uid.to_string()];
                entry.owners = vec![seen(owner, state)];
                self.record(entry);
            }
        }
        let gone_refs: Vec<&OwnerRef> = change
            .removed
            .iter()
            .filter(|r| matches!(owner_state(graph, &r.uid), OwnerState::Dangling | OwnerState::Waiting))
            .collect();
        if !gone_refs.is_empty() {
            let mut entry = line(Action::RemoveOwnerRefs, "refs to dangling or waiting owners went");
            entry.refs = gone_refs.iter().map(|r| r.uid.to_string()).collect();
            entry.owners = gone_refs.iter().map(|r| seen(r, owner_state(graph, &r.uid))).collect();
            self.record(entry);
        }
        if !change.unblocked.is_empty() {
            let mut entry = line(Action::UnblockOwnerRefs, "blockOwnerDeletion turned false");
            entry.refs = change.unblocked.iter().map(ToString::to_string).collect();
            self.record(entry);
        }
        self.witness_finalizers(change);
        self.witness_deletion(graph, change);
    }

    fn witness_finalizers(&self, change: &Change<'_>) {
        let Some(prior) = change.prior.filter(|p| p.being_deleted) else {
            return;
        };
        let dropped = |had: bool, has: bool| had && (change.gone || !has);
        let (before, after) = (prior.finalizers, change.now.finalizers);
        for (finalizer, gone) in [
            (FINALIZER_FOREGROUND, dropped(before.foreground, after.foreground)),
            (FINALIZER_ORPHAN, dropped(before.orphan, after.orphan)),
        ] {
            if gone {
                let mut entry = observed(change.identity, Action::RemoveFinalizer, "the finalizer went");
                entry.finalizer = Some(finalizer.to_string());
                self.record(entry);
            }
        }
    }

    fn witness_deletion(&self, graph: &Graph, change: &Change<'_>) {
        let started = change.prior.is_none_or(|p| !p.being_deleted) && (change.now.being_deleted || change.gone);
        if !started || change.owners.is_empty() {
            return;
        }
        let mut entry = observed(change.identity, Action::Delete, "deleted while it had owners");
        entry.policy = Some(if change.gone {
            PropagationPolicy::Background
        } else {
            policy_of(change.now.finalizers)
        });
        entry.owners = change
            .owners
            .iter()
            .map(|r| seen(r, owner_state(graph, &r.uid)))
            .collect();
        self.record(entry);
    }
}

impl Entry {
    /// True when the line is a collector's write: any line but an observed deletion of an object
    /// one of whose owners was solid (module docs).
    pub fn is_collector_write(&self) -> bool {
        self.source != Source::Observed
            || self.action != Action::Delete
            || self.owners.iter().all(|o| o.state != OwnerState::Solid)
    }
}

/// The policy a deletion that left the object in place was made with, read from the finalizers
/// the server added.
fn policy_of(finalizers: ObservedFinalizers) -> PropagationPolicy {
    if finalizers.orphan {
        PropagationPolicy::Orphan
    } else if finalizers.foreground {
        PropagationPolicy::Foreground
    } else {
        PropagationPolicy::Background
    }
}

/// What the graph says of the owner with `uid` now.
fn owner_state(graph: &Graph, uid: &Uid) -> OwnerState {
    let Some(owner) = graph.get(uid).filter(|o| !o.is_virtual()) else {
        return OwnerState::Dangling;
    };
    let seen = owner.observation();
    match (seen.being_deleted, seen.finalizers) {
        (true, f) if f.orphan => OwnerState::Orphaning,
        (true, f) if f.foreground => OwnerState::Waiting,
        _ => OwnerState::Solid,
    }
}

fn seen(r: &OwnerRef, state: OwnerState) -> OwnerSeen {
    OwnerSeen {
        api_version: r.api_version().to_string(),
        kind: r.kind().to_string(),
        name: r.name.to_string(),
        uid: r.uid.to_string(),
        state,
        seen: Seen::Graph,
    }
}

fn observed(identity: &Identity, action: Action, reason: &str) -> Entry {
    Entry {
        time: crate::api::time::now_rfc3339_micros(),
        source: Source::Observed,
        action,
        object: ObjectRef::of(identity, ""),
        policy: None,
        finalizer: None,
        owners: Vec::new(),
        refs: Vec::new(),
        evidence: Evidence::Watch,
        reason: reason.to_string(),
        preconditions: None,
        patch: None,
        answer: None,
    }
}
