//! The event recorder: OwnerRefInvalidNamespace (spec §3.9), and, with `--journal-owner-events`, one
//! `DependentDeleted` on each owner of an object the collector deleted. Built here, written by an
//! event sink task.
//!
//! Neither a builder nor a worker may block on I/O for an event, so the recorder only queues the
//! record; the controller's sink drains the queue into `ClusterApi::create_event`.

use crate::api::{EventRecord, InvolvedObject, PropagationPolicy};
use crate::graph::{Identity, OwnerRef};
use tokio::sync::mpsc;

/// The source component named on every event, as upstream's recorder names it.
pub const SOURCE_COMPONENT: &str = "garbage-collector-controller";
/// The reason of upstream's one event.
pub const REASON_OWNER_REF_INVALID_NAMESPACE: &str = "OwnerRefInvalidNamespace";
/// The reason of the event on an owner whose dependent the collector deleted.
pub const REASON_DEPENDENT_DELETED: &str = "DependentDeleted";

/// Events waiting for the sink at most; more are dropped (client-go's broadcaster queues 1000).
pub const EVENT_QUEUE: usize = 1000;

/// Queues events for the sink. Cheap to clone.
#[derive(Clone, Debug)]
pub struct EventRecorder {
    tx: mpsc::Sender<EventRecord>,
}

/// The sink's end of the recorder.
pub type EventSink = mpsc::Receiver<EventRecord>;

impl EventRecorder {
    /// A recorder and the receiver its events arrive on.
    pub fn new() -> (EventRecorder, EventSink) {
        let (tx, rx) = mpsc::channel(EVENT_QUEUE);
        (EventRecorder { tx }, rx)
    }

    /// Records that `dependent`'s ref `r` names an owner that cannot be in its namespace.
    pub fn owner_ref_invalid_namespace(&self, dependent: &Identity, r: &OwnerRef) {
        let claimed = r.identity_in(dependent.namespace());
        let message = format!(
            "ownerRef {claimed} does not exist in namespace {:?}",
            dependent.namespace()
        );
        let event = event(dependent, "Warning", REASON_OWNER_REF_INVALID_NAMESPACE, message);
        tracing::info!(target: "kube_gc::events", object = %dependent, reason = %event.reason, message = %event.message);
        self.send(event);
    }

    /// Records on `owner` that its dependent `deleted` was deleted with `policy`, because `why`.
    pub fn dependent_deleted(&self, owner: &OwnerRef, deleted: &Identity, policy: PropagationPolicy, why: &str) {
        let message = format!(
            "deleted dependent {} ({}): {why}",
            crate::journal::ObjectRef::of(deleted, ""),
            policy.as_str()
        );
        let owner = owner.identity_in(deleted.namespace());
        self.send(event(&owner, "Normal", REASON_DEPENDENT_DELETED, message));
    }

    /// A full queue drops the event, as client-go's broadcaster does, so a slow or failing event
    /// API never holds memory, a builder or a worker; a closed one means the controller is
    /// shutting down.
    fn send(&self, event: EventRecord) {
        let _ = self.tx.try_send(event);
    }
}

/// An event of `event_type` about `object`.
fn event(object: &Identity, event_type: &str, reason: &str, message: String) -> EventRecord {
    EventRecord {
        involved_object: InvolvedObject {
            api_version: object.api_version().to_string(),
            kind: object.kind().to_string(),
            namespace: object.namespace().to_string(),
            name: object.name.to_string(),
            uid: object.uid.to_string(),
        },
        event_type: event_type.into(),
        reason: reason.into(),
        message,
        source_component: SOURCE_COMPONENT.into(),
    }
}
