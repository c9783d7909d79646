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

use super::{Action, Entry, Evidence, Journal, OwnerState, Record, Seen, Source};
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

impl Change<'_> {
    /// A line about the changed object, seen in the watch streams.
    fn observed(&self, action: Action, reason: &'static str) -> Record {
        Record::new(Source::Observed, action, self.identity, Evidence::Watch, reason)
    }
}

impl Journal {
    /// Records the collector writes `change` shows, judged against `graph` (module docs).
    pub fn witness(&self, graph: &Graph, change: &Change<'_>) {
        if !self.is_dry_run() {
            return;
        }
        let removed: Vec<(OwnerRef, OwnerState, Seen)> = change
            .removed
            .iter()
            .map(|r| (r.clone(), owner_state(graph, &r.uid), Seen::Graph))
            .collect();
        for owner in removed.iter().filter(|(_, state, _)| *state == OwnerState::Orphaning) {
            let mut record = change.observed(Action::Orphan, "the ref to an owner being deleted with orphan went");
            record.refs = vec![owner.0.uid.clone()];
            record.owners = vec![owner.clone()];
            self.record(record);
        }
        let gone: Vec<_> = removed
            .into_iter()
            .filter(|(_, state, _)| matches!(state, OwnerState::Dangling | OwnerState::Waiting))
            .collect();
        if !gone.is_empty() {
            let mut record = change.observed(Action::RemoveOwnerRefs, "refs to dangling or waiting owners went");
            record.refs = gone.iter().map(|(r, _, _)| r.uid.clone()).collect();
            record.owners = gone;
            self.record(record);
        }
        if !change.unblocked.is_empty() {
            let mut record = change.observed(Action::UnblockOwnerRefs, "blockOwnerDeletion turned false");
            record.refs = change.unblocked.to_vec();
            self.record(record);
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
                let mut record = change.observed(Action::RemoveFinalizer, "the finalizer went");
                record.finalizer = Some(finalizer);
                self.record(record);
            }
        }
    }

    fn witness_deletion(&self, graph: &Graph, change: &Change<'_>) {
        let started = change.prior.is_none_or(|p| !p.being_deleted) && (change.now.being_deleted || change.gone);
        if !started || change.owners.is_empty() {
            return;
        }
        let mut record = change.observed(Action::Delete, "deleted while it had owners");
        record.policy = Some(if change.gone {
            PropagationPolicy::Background
        } else {
            policy_of(change.now.finalizers)
        });
        record.owners = change
            .owners
            .iter()
            .map(|r| (r.clone(), owner_state(graph, &r.uid), Seen::Graph))
            .collect();
        self.record(record);
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
