//! A stream read as a replay script: the objects the cluster starts with, then the user actions
//! that the stream's later events stand for.
//!
//! Invariant: one [`Script`] drives both the simulated cluster and the oracle, so both see the
//! same objects and the same actions in the same order.
//!
//! # Where the later events start
//!
//! The initial objects are the stream's leading ADDED events. The listing ends at a BOOKMARK
//! annotated `k8s.io/initial-events-end: "true"` (how a watch-list stream marks the end of its
//! initial events) or at the first MODIFIED or DELETED event, whichever comes first. An initial
//! object already being deleted (with a `deletionTimestamp`) is created without it and then
//! deleted, with the policy its GC finalizer names, before the collector starts (the prelude).
//!
//! # What a later event stands for
//!
//! Each event is compared with the last state the stream showed of the same UID:
//!
//! - ADDED (or MODIFIED) of a UID not seen before: a create.
//! - DELETED: a delete in the background, unless the stream already showed the object being
//!   deleted; the event then ends a deletion already replayed (the API server removing the object
//!   once its finalizers are gone) and is no user action.
//! - MODIFIED that sets `deletionTimestamp`: a delete, in the foreground when the object carries
//!   `foregroundDeletion`, with orphaning when it carries `orphan`, in the background otherwise.
//! - MODIFIED that changes `ownerReferences`: a patch that sets them (before the delete, if both).
//! - Anything else (finalizers removed, labels, a new resourceVersion): no action. It is the API
//!   server's or the collector's doing, or nothing the collector looks at.
//!
//! A recorded stream also holds the collector's own work (the cascade's DELETED events, orphaned
//! dependents losing a reference); replayed as user actions, they race with the collector doing
//! the same, which changes nothing about where the cluster ends.

use crate::generate::INITIAL_EVENTS_END;
use crate::progress;
use crate::stream::StreamReader;
use kube_gc::api::{
    OwnerReference, PartialObjectMeta, PropagationPolicy, WatchEvent, WatchEventType, FINALIZER_FOREGROUND,
    FINALIZER_ORPHAN,
};
use std::collections::HashMap;
use std::path::Path;

/// The object an action is about: its type, coordinates and UID (so that an action never lands on
/// a namesake).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The object's apiVersion.
    pub api_version: String,
    /// The object's kind.
    pub kind: String,
    /// Its namespace (`""` when cluster-scoped).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
}

impl Target {
    fn of(object: &PartialObjectMeta) -> Target {
        Target {
            api_version: object.api_version.clone(),
            kind: object.kind.clone(),
            namespace: object.metadata.namespace.clone(),
            name: object.metadata.name.clone(),
            uid: object.metadata.uid.clone(),
        }
    }
}

/// What a user does.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Creates the object (with its UID); boxed, as an object is far larger than the other actions.
    Create(Box<PartialObjectMeta>),
    /// Deletes the object with a propagation policy.
    Delete {
        /// The object.
        target: Target,
        /// The policy.
        policy: PropagationPolicy,
    },
    /// Sets the object's ownerReferences.
    SetOwners {
        /// The object.
        target: Target,
        /// The new list.
        owners: Vec<OwnerReference>,
    },
}

/// A stream as initial objects plus actions (module docs).
#[derive(Clone, Debug, Default)]
pub struct Script {
    /// Objects the cluster starts with, without any `deletionTimestamp`.
    pub initial: Vec<PartialObjectMeta>,
    /// Deletions of initial objects that the stream lists as already being deleted.
    pub prelude: Vec<Action>,
    /// What the later events stand for, in stream order.
    pub actions: Vec<Action>,
    /// Watch events read (BOOKMARKs not included).
    pub events: u64,
    /// ADDED events among them.
    pub added: u64,
    /// Later events that stand for no action.
    pub ignored: u64,
    /// Malformed values skipped.
    pub skipped_bad: usize,
}

impl Script {
    /// Reads the stream at `path`.
    pub fn read(path: &Path, skip_bad: bool, quiet: bool) -> anyhow::Result<Script> {
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let bar = progress::bytes(size, quiet, "reading");
        let reader_bar = bar.clone();
        let mut reader = StreamReader::open(path, skip_bad, move |f| Box::new(reader_bar.wrap_read(f)))?;
        let mut builder = ScriptBuilder::default();
        for record in reader.by_ref() {
            builder.push(record?.event);
        }
        bar.finish_and_clear();
        let mut script = builder.script;
        script.skipped_bad = reader.skipped();
        Ok(script)
    }

    /// The script of `events`, in order.
    pub fn from_events(events: impl IntoIterator<Item = WatchEvent>) -> Script {
        let mut builder = ScriptBuilder::default();
        for event in events {
            builder.push(event);
        }
        builder.script
    }

    /// Every object the script creates, initial ones first.
    pub fn created(&self) -> impl Iterator<Item = &PartialObjectMeta> {
        let later = self.actions.iter().filter_map(|a| match a {
            Action::Create(object) => Some(&**object),
            _ => None,
        });
        self.initial.iter().chain(later)
    }
}

/// What the stream last showed of an object.
struct Seen {
    owners: Vec<OwnerReference>,
    deleting: bool,
}

/// Builds a [`Script`] one event at a time.
struct ScriptBuilder {
    script: Script,
    seen: HashMap<String, Seen>,
    /// Still in the initial listing.
    listing: bool,
}

impl Default for ScriptBuilder {
    fn default() -> Self {
        ScriptBuilder {
            script: Script::default(),
            seen: HashMap::new(),
            listing: true,
        }
    }
}

impl ScriptBuilder {
    fn push(&mut self, event: WatchEvent) {
        let object = event.object;
        if event.event_type == WatchEventType::Bookmark {
            let ends_listing = object.metadata.annotations.get(INITIAL_EVENTS_END).map(String::as_str);
            self.listing &= ends_listing != Some("true");
            return;
        }
        self.script.events += 1;
        self.script.added += u64::from(event.event_type == WatchEventType::Added);
        if event.event_type != WatchEventType::Added {
            self.listing = false;
        }
        match self.seen.get(&object.metadata.uid) {
            None if event.event_type == WatchEventType::Deleted => self.script.ignored += 1,
            None => self.create(std::sync::Arc::unwrap_or_clone(object)),
            Some(seen) => {
                let actions = changes(seen, event.event_type, &object);
                self.script.ignored += u64::from(actions.is_empty());
                self.script.actions.extend(actions);
                self.remember(event.event_type, &object);
            }
        }
    }

    /// A new object: part of the initial listing, or a create.
    fn create(&mut self, mut object: PartialObjectMeta) {
        self.remember(WatchEventType::Added, &object);
        let deletion = object.metadata.deletion_timestamp.take().map(|_| Action::Delete {
            target: Target::of(&object),
            policy: policy_of(&object),
        });
        if self.listing {
            self.script.initial.push(object);
            self.script.prelude.extend(deletion);
        } else {
            self.script.actions.push(Action::Create(Box::new(object)));
            self.script.actions.extend(deletion);
        }
    }

    fn remember(&mut self, event_type: WatchEventType, object: &PartialObjectMeta) {
        let uid = &object.metadata.uid;
        if event_type == WatchEventType::Deleted {
            self.seen.remove(uid);
            return;
        }
        self.seen.insert(
            uid.clone(),
            Seen {
                owners: object.metadata.owner_references.clone(),
                deleting: object.metadata.deletion_timestamp.is_some(),
            },
        );
    }
}

/// The actions a later event on a known object stands for (module docs).
fn changes(seen: &Seen, event_type: WatchEventType, object: &PartialObjectMeta) -> Vec<Action> {
    let target = || Target::of(object);
    if event_type == WatchEventType::Deleted {
        if seen.deleting {
            return Vec::new();
        }
        return vec![Action::Delete {
            target: target(),
            policy: PropagationPolicy::Background,
        }];
    }
    let mut actions = Vec::new();
    if seen.owners != object.metadata.owner_references {
        actions.push(Action::SetOwners {
            target: target(),
            owners: object.metadata.owner_references.clone(),
        });
    }
    if !seen.deleting && object.metadata.deletion_timestamp.is_some() {
        actions.push(Action::Delete {
            target: target(),
            policy: policy_of(object),
        });
    }
    actions
}

/// The policy a deletion must have had to leave `object`'s GC finalizer.
fn policy_of(object: &PartialObjectMeta) -> PropagationPolicy {
    if object.metadata.has_finalizer(FINALIZER_FOREGROUND) {
        PropagationPolicy::Foreground
    } else if object.metadata.has_finalizer(FINALIZER_ORPHAN) {
        PropagationPolicy::Orphan
    } else {
        PropagationPolicy::Background
    }
}
