//! The two writes every decision ends in, DELETE and PATCH, each recorded in the
//! [journal](crate::journal) with why it was made; in shadow mode recorded instead of sent.
//!
//! Invariant: no other code of the workers writes to the cluster, so the journal holds every
//! write the collector made, and shadow mode sends none.

use super::{Collector, Result};
use crate::api::{
    ClusterApi, DeleteOptions, Gvr, PartialObjectMeta, Patch, PatchType, Preconditions, PropagationPolicy,
};
use crate::graph::{Identity, OwnerRef, Sym, Uid};
use crate::journal::{Action, Answer, Evidence, OwnerState, Record, Seen, Source};
use serde_json::Value;

/// What the API answered to one request.
type ApiResult<T> = std::result::Result<T, crate::api::ApiError>;

/// Why a write is made: the decision as the journal tells it.
#[derive(Clone, Copy)]
pub(super) struct Why<'a> {
    /// The write.
    pub action: Action,
    /// The owners the decision weighed.
    pub owners: &'a [OwnerRef],
    /// What each of `owners` was found to be, in order (may be shorter: unjudged owners are left
    /// out of the line).
    pub judged: &'a [(OwnerState, Seen)],
    /// Whether the object was read from the graph or live.
    pub observed: bool,
    /// The UIDs of the refs a patch removes or unblocks.
    pub refs: &'a [Uid],
    /// The finalizer a finalizer removal removes.
    pub finalizer: Option<&'static str>,
    /// The decision in words.
    pub reason: &'static str,
}

impl<'a> Why<'a> {
    /// `action`, for `reason`, weighing no owner, on a live reading.
    pub fn new(action: Action, reason: &'static str) -> Self {
        Why {
            action,
            owners: &[],
            judged: &[],
            observed: false,
            refs: &[],
            finalizer: None,
            reason,
        }
    }

    /// The owners weighed, and what each was found to be.
    pub fn owners(self, owners: &'a [OwnerRef], judged: &'a [(OwnerState, Seen)]) -> Self {
        Why { owners, judged, ..self }
    }

    /// Whether the object was read from the graph.
    pub fn observed(self, observed: bool) -> Self {
        Why { observed, ..self }
    }

    /// The refs a patch removes or unblocks.
    pub fn refs(self, refs: &'a [Uid]) -> Self {
        Why { refs, ..self }
    }

    /// The finalizer removed.
    pub fn finalizer(self, finalizer: &'static str) -> Self {
        Why {
            finalizer: Some(finalizer),
            ..self
        }
    }
}

impl<C: ClusterApi> Collector<C> {
    /// DELETE `identity` with `policy`, conditioned on its UID and on `rv` when given.
    pub(super) async fn send_delete(
        &self,
        identity: &Identity,
        rv: Option<&str>,
        policy: PropagationPolicy,
        why: &Why<'_>,
    ) -> Result<()> {
        let (gvr, namespace, _) = self.locate(identity)?;
        let options = DeleteOptions {
            preconditions: Some(Preconditions {
                uid: Some(identity.uid.to_string()),
                resource_version: rv.map(str::to_string),
            }),
            propagation_policy: Some(policy),
            ..DeleteOptions::default()
        };
        let result = if self.journal.is_dry_run() {
            None
        } else {
            Some(
                self.api
                    .delete(&gvr, &namespace, &identity.name.to_string(), &options)
                    .await,
            )
        };
        if self.journal.is_enabled() {
            let mut record = self.record(identity, &gvr, why, result.as_ref());
            record.policy = Some(policy);
            record.preconditions = options.preconditions;
            self.journal.record(record);
        }
        if matches!(result, Some(Ok(()))) && self.journal.owner_events() {
            self.tell_owners(identity, policy, why);
        }
        result
            .unwrap_or(Ok(()))
            .map_err(|e| super::api_error("delete", identity, e))
    }

    /// A strategic merge patch as this collector sends it. A sharded replica's is conditioned on
    /// the resourceVersion its decision read: a patch that passed the fence just before the
    /// process stopped is sent when it wakes, maybe after the replica that took its namespaces
    /// wrote the object, and the server must then refuse it. An unsharded collector's is upstream's,
    /// conditioned on the UID alone, and `resource_version` is not read.
    pub(super) fn fenced_smp(&self, smp: Value, resource_version: impl FnOnce() -> String) -> Value {
        if self.shard.selector().is_some() {
            super::patch::at_resource_version(smp, &resource_version())
        } else {
            smp
        }
    }

    /// The resourceVersion precondition of a DELETE that upstream conditions on the UID alone
    /// (spec §4.4's retry after a conflict): `resource_version`, the one just read, for a sharded
    /// replica, for the reason [`fenced_smp`](Self::fenced_smp) gives; none for an unsharded
    /// collector.
    pub(super) fn fenced_version<'a>(&self, resource_version: &'a str) -> Option<&'a str> {
        self.shard.selector().is_some().then_some(resource_version)
    }

    /// PATCH `identity` (upstream's `patchObject`); `None` in shadow mode, where nothing is sent.
    pub(super) async fn patch_object(
        &self,
        identity: &Identity,
        patch_type: PatchType,
        body: Value,
        why: &Why<'_>,
    ) -> Result<Option<PartialObjectMeta>> {
        let (gvr, namespace, _) = self.locate(identity)?;
        let patch = Patch::new(patch_type, body);
        let result = if self.journal.is_dry_run() {
            None
        } else {
            Some(
                self.api
                    .patch(&gvr, &namespace, &identity.name.to_string(), &patch)
                    .await,
            )
        };
        if self.journal.is_enabled() {
            let mut record = self.record(identity, &gvr, why, result.as_ref());
            record.finalizer = why.finalizer;
            record.preconditions = patch_preconditions(&patch.body);
            record.patch = Some(patch.body);
            self.journal.record(record);
        }
        result.transpose().map_err(|e| super::api_error("patch", identity, e))
    }

    /// The journal line of a write, before the action's own fields; `sent` is the server's
    /// answer, `None` in shadow mode.
    fn record<T>(&self, identity: &Identity, gvr: &Gvr, why: &Why<'_>, sent: Option<&ApiResult<T>>) -> Record {
        let answer = sent.map(|r| Answer::of(&r.as_ref().map(drop), 200));
        let source = if answer.is_some() { Source::Sent } else { Source::DryRun };
        let evidence = if why.observed { Evidence::Graph } else { Evidence::Live };
        let mut record = Record::new(source, why.action, identity, evidence, why.reason);
        record.resource = Sym::new(&gvr.resource);
        record.owners = why
            .owners
            .iter()
            .zip(why.judged)
            .map(|(r, &(state, seen))| (r.clone(), state, seen))
            .collect();
        record.refs = why.refs.to_vec();
        record.answer = answer;
        record
    }

    /// Posts an Event on each owner of a deleted object (`--journal-owner-events`).
    fn tell_owners(&self, deleted: &Identity, policy: PropagationPolicy, why: &Why<'_>) {
        for owner in why.owners {
            self.events.dependent_deleted(owner, deleted, policy, why.reason);
        }
    }
}

/// What a patch body is conditioned on: the UID of a strategic merge patch, the resourceVersion
/// of a JSON merge patch.
fn patch_preconditions(body: &Value) -> Option<Preconditions> {
    let metadata = &body["metadata"];
    let field = |name: &str| metadata[name].as_str().map(str::to_string);
    let preconditions = Preconditions {
        uid: field("uid"),
        resource_version: field("resourceVersion"),
    };
    (preconditions != Preconditions::default()).then_some(preconditions)
}
