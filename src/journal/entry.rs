//! One line of the journal: a write the collector made (or, in shadow mode, would have made), or
//! a collector's write seen in the watch streams.
//!
//! The line is self-contained: it names the object by resource, namespace, name and UID, and
//! says why in the collector's own terms (each owner's state and where that state was read), so
//! an operator can answer "why was this deleted?" from the line alone, long after the graph
//! has forgotten the object.

use crate::api::{ApiError, Preconditions, PropagationPolicy};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the line records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// A write the collector sent, with the server's answer.
    Sent,
    /// A write the collector decided in shadow mode (`--dry-run`) and did not send.
    DryRun,
    /// A write some collector made, as the watch streams showed it (shadow mode only).
    Observed,
}

/// The kind of write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// DELETE of a dependent whose owners are all gone or waiting (spec §4.2).
    Delete,
    /// A strategic merge patch removing the ref to an owner being deleted with `orphan` (§5).
    Orphan,
    /// A patch removing refs to dangling or waiting owners of a dependent that keeps a solid
    /// owner, or to owners this collector orphaned (§4.2 step 5).
    RemoveOwnerRefs,
    /// A patch setting `blockOwnerDeletion: false` on a dependent's refs (§4.2, §6.3).
    UnblockOwnerRefs,
    /// A merge patch removing the `orphan` or `foregroundDeletion` finalizer (§5).
    RemoveFinalizer,
}

impl Action {
    /// The action's name, as the line writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Delete => "delete",
            Action::Orphan => "orphan",
            Action::RemoveOwnerRefs => "remove-owner-refs",
            Action::UnblockOwnerRefs => "unblock-owner-refs",
            Action::RemoveFinalizer => "remove-finalizer",
        }
    }
}

/// What the collector found an owner to be (spec §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OwnerState {
    /// It exists and does not wait on its dependents.
    Solid,
    /// It does not exist: 404, or its name holds another UID.
    Dangling,
    /// It is being deleted in the foreground and waits on its dependents.
    Waiting,
    /// This collector orphaned its dependents: the ref goes whatever the rest.
    Orphaned,
    /// It is being deleted with the `orphan` finalizer (the owner of an orphaning patch).
    Orphaning,
    /// It is being deleted and the decision is about itself (a finalizer's removal).
    Itself,
}

/// Where an owner's state was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Seen {
    /// absentOwnerCache: a GET or a virtual delete found it absent before.
    AbsentOwnerCache,
    /// A watch reported its UID deleted.
    Tombstone,
    /// The graph's last observation of it.
    Graph,
    /// A live GET.
    Live,
    /// This collector's own record of what it orphaned.
    Collector,
}

/// Which reading of the object the write rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Evidence {
    /// The graph's last observation, the write conditioned on its resourceVersion.
    Graph,
    /// A live GET.
    Live,
    /// The watch streams (an observed write).
    Watch,
}

/// An object, as the journal names it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// `apiVersion`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Resource (plural), when the collector mapped it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// Namespace; empty for a cluster-scoped object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
}

impl ObjectRef {
    /// The object with `identity`, of `resource` (empty when not mapped).
    pub fn of(identity: &crate::graph::Identity, resource: &str) -> Self {
        ObjectRef {
            api_version: identity.api_version().to_string(),
            kind: identity.kind().to_string(),
            resource: resource.to_string(),
            namespace: identity.namespace().to_string(),
            name: identity.name.to_string(),
            uid: identity.uid.to_string(),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    /// `Kind namespace/name (uid)`, or `Kind name (uid)` for a cluster-scoped object.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ", self.kind)?;
        if !self.namespace.is_empty() {
            write!(f, "{}/", self.namespace)?;
        }
        write!(f, "{} ({})", self.name, self.uid)
    }
}

/// One owner of the object and what the collector found it to be.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerSeen {
    /// `apiVersion` of the ref.
    pub api_version: String,
    /// Kind of the ref.
    pub kind: String,
    /// Name of the ref.
    pub name: String,
    /// UID of the ref.
    pub uid: String,
    /// What the owner was found to be.
    pub state: OwnerState,
    /// Where that was read.
    pub seen: Seen,
}

impl OwnerSeen {
    /// The owner `r`, found `state` by reading `seen`.
    pub fn of(r: &crate::graph::OwnerRef, state: OwnerState, seen: Seen) -> Self {
        OwnerSeen {
            api_version: r.api_version().to_string(),
            kind: r.kind().to_string(),
            name: r.name.to_string(),
            uid: r.uid.to_string(),
            state,
            seen,
        }
    }
}

/// The server's answer to a write, or why there was none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// The HTTP code; 0 when the request was not sent or got no answer.
    pub code: u16,
    /// The Status reason of a refusal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The Status message of a refusal, or why the write was not sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Answer {
    /// The answer to a write that succeeded with `code`.
    pub fn ok(code: u16) -> Self {
        Answer {
            code,
            ..Answer::default()
        }
    }

    /// The answer a write got from the server, or the transport error that stood for one.
    pub fn of(result: &Result<(), &ApiError>, ok_code: u16) -> Self {
        match result {
            Ok(()) => Answer::ok(ok_code),
            Err(e) => Answer {
                code: e.reason().map_or(0, |r| r.code()),
                reason: e.reason().map(|r| format!("{r:?}")),
                message: Some(e.to_string()),
            },
        }
    }

    /// True for a 2xx answer.
    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.code)
    }
}

/// One line of the journal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// When the line was written, RFC 3339 with microseconds, UTC.
    pub time: String,
    /// Sent, decided in shadow mode, or observed.
    pub source: Source,
    /// The write.
    pub action: Action,
    /// The object written.
    pub object: ObjectRef,
    /// The propagation policy of a DELETE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PropagationPolicy>,
    /// The finalizer a finalizer removal removes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizer: Option<String>,
    /// The owners the decision weighed, each with its state and where it was read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<OwnerSeen>,
    /// The UIDs of the refs a patch removes or unblocks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<String>,
    /// Which reading of the object the write rests on.
    pub evidence: Evidence,
    /// The decision in words.
    pub reason: String,
    /// The DELETE's preconditions, or the resourceVersion/UID a patch is conditioned on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preconditions: Option<Preconditions>,
    /// The patch body sent (or that would have been sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<Value>,
    /// The server's answer; none for a write not sent or observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
}

impl Entry {
    /// The line's key for comparing a shadow's decisions with observed writes: the object, the
    /// action, and the policy, finalizer or refs that tell two writes of one action apart. An
    /// orphaning patch and a ref removal are one write on the wire (a strategic merge patch
    /// deleting refs by UID), and which one a watch shows depends on whether the owner's own
    /// events were applied first, so they share a key.
    pub fn key(&self) -> (String, Action, String) {
        let action = match self.action {
            Action::Orphan => Action::RemoveOwnerRefs,
            other => other,
        };
        let detail = match (self.policy, &self.finalizer) {
            (Some(policy), _) => policy.as_str().to_string(),
            (None, Some(finalizer)) => finalizer.clone(),
            (None, None) => {
                let mut refs = self.refs.clone();
                refs.sort();
                refs.join(",")
            }
        };
        (self.object.uid.clone(), action, detail)
    }
}

/// A journal line as a worker or a builder hands it over: the facts, cheaply cloned, with nothing
/// formatted yet. The journal's thread turns it into an [`Entry`] (times, UIDs and names written
/// out), so that recording costs a worker a few reference counts and one allocation.
#[derive(Clone, Debug)]
pub struct Record {
    /// When it happened.
    pub at: std::time::SystemTime,
    /// Sent, decided in shadow mode, or observed.
    pub source: Source,
    /// The write.
    pub action: Action,
    /// The object written.
    pub object: crate::graph::Identity,
    /// Its resource, when the collector mapped it; empty otherwise.
    pub resource: crate::graph::Sym,
    /// The propagation policy of a DELETE.
    pub policy: Option<PropagationPolicy>,
    /// The finalizer a finalizer removal removes.
    pub finalizer: Option<&'static str>,
    /// The owners weighed, each with its state and where it was read.
    pub owners: Vec<(crate::graph::OwnerRef, OwnerState, Seen)>,
    /// The refs a patch removes or unblocks.
    pub refs: Vec<crate::graph::Uid>,
    /// Which reading of the object the write rests on.
    pub evidence: Evidence,
    /// The decision in words.
    pub reason: &'static str,
    /// The preconditions sent.
    pub preconditions: Option<Preconditions>,
    /// The patch body sent.
    pub patch: Option<Value>,
    /// The server's answer.
    pub answer: Option<Answer>,
}

impl Record {
    /// A line about `object`, now, with nothing but its source, action, evidence and reason.
    pub fn new(
        source: Source,
        action: Action,
        object: &crate::graph::Identity,
        evidence: Evidence,
        reason: &'static str,
    ) -> Record {
        Record {
            at: std::time::SystemTime::now(),
            source,
            action,
            object: object.clone(),
            resource: crate::graph::Sym::new(""),
            policy: None,
            finalizer: None,
            owners: Vec::new(),
            refs: Vec::new(),
            evidence,
            reason,
            preconditions: None,
            patch: None,
            answer: None,
        }
    }

    /// The line written out, stamped `time`.
    pub fn to_entry(&self, time: String) -> Entry {
        Entry {
            time,
            source: self.source,
            action: self.action,
            object: ObjectRef::of(&self.object, self.resource.as_str()),
            policy: self.policy,
            finalizer: self.finalizer.map(str::to_string),
            owners: self
                .owners
                .iter()
                .map(|(r, state, seen)| OwnerSeen::of(r, *state, *seen))
                .collect(),
            refs: self.refs.iter().map(ToString::to_string).collect(),
            evidence: self.evidence,
            reason: self.reason.to_string(),
            preconditions: self.preconditions.clone(),
            patch: self.patch.clone(),
            answer: self.answer.clone(),
        }
    }
}
