//! `/explain?uid=U`: why an object is not collected yet, from what the collector knows now.
//!
//! The answer lists the object's state in the graph, each owner with its state (not in the graph,
//! virtual, being deleted, deleting its dependents, or present), the blocking dependents that hold
//! a foreground deletion, where the object is in the two work queues with its retry count, and
//! the monitors whose incomplete view its decision waits for (`waitingOnViews`).
//! `reasons` sums these up in words; an object the graph does not hold gets a single reason.

use kube_gc::api::ClusterApi;
use kube_gc::controller::GarbageCollector;
use kube_gc::graph::{Handle, Identity, OwnerRef, Uid};
use kube_gc::queue::{QueueState, WorkQueue};
use serde_json::{json, Value};

/// How many blocking dependents a reason names; the rest are counted.
const NAMED_DEPENDENTS: usize = 5;

/// The explanation for `uid`.
pub(super) fn explain<C: ClusterApi>(gc: &GarbageCollector<C>, uid: Uid) -> Value {
    let Some(node) = gc.graph().get(&uid) else {
        return json!({
            "uid": uid.to_string(),
            "inGraph": false,
            "reasons": ["the collector has not observed this object: it does not exist, its resource is not \
                         monitored (yet), or its events have not been processed"],
        });
    };
    let owners: Vec<Value> = node.owners().iter().map(|r| owner(gc, r)).collect();
    let blocking_dependents = if node.is_deleting_dependents() {
        node.blocking_dependents()
    } else {
        Vec::new()
    };
    let blocking: Vec<Value> = blocking_dependents.iter().map(|d| identity(d.identity())).collect();
    let queues = json!({
        "attemptToDelete": queue_entry(gc.attempt_to_delete(), &node),
        "attemptToOrphan": queue_entry(gc.attempt_to_orphan(), &node),
    });
    let waiting_on: Option<Vec<String>> = gc
        .waiting()
        .on(&uid)
        .map(|resources| resources.iter().map(ToString::to_string).collect());
    let mut reasons = reasons(&node, &owners, &blocking_dependents);
    if let Some(resources) = &waiting_on {
        reasons.insert(0, waiting_reason(resources));
    }
    json!({
        "uid": uid.to_string(),
        "inGraph": true,
        "object": identity(node.identity()),
        "virtual": node.is_virtual(),
        "beingDeleted": node.is_being_deleted(),
        "deletingDependents": node.is_deleting_dependents(),
        "dependents": node.dependents_len(),
        "owners": owners,
        "blockingDependents": blocking,
        "queues": queues,
        "waitingOnViews": waiting_on,
        "reasons": reasons,
    })
}

fn identity(id: &Identity) -> Value {
    json!({
        "apiVersion": id.api_version().to_string(),
        "kind": id.kind().to_string(),
        "namespace": id.namespace().to_string(),
        "name": id.name.to_string(),
        "uid": id.uid.to_string(),
    })
}

fn owner<C: ClusterApi>(gc: &GarbageCollector<C>, r: &OwnerRef) -> Value {
    let state = match gc.graph().get(&r.uid) {
        None => "absent",
        Some(o) if o.is_virtual() => "virtual",
        Some(o) if o.is_deleting_dependents() => "deletingDependents",
        Some(o) if o.is_being_deleted() => "beingDeleted",
        Some(_) => "present",
    };
    json!({
        "apiVersion": r.api_version().to_string(),
        "kind": r.kind().to_string(),
        "name": r.name.to_string(),
        "uid": r.uid.to_string(),
        "blockOwnerDeletion": r.blocks_owner_deletion(),
        "state": state,
    })
}

fn queue_entry(queue: &WorkQueue<Handle>, node: &Handle) -> Value {
    let state = match queue.contains(node) {
        QueueState::Absent => "absent",
        QueueState::Queued => "queued",
        QueueState::Processing => "processing",
        QueueState::ProcessingDirty => "processingAndQueuedAgain",
        QueueState::Delayed => "waitingForRetry",
    };
    json!({"state": state, "retries": queue.num_requeues(node)})
}

/// A blocking dependent as a reason names it: kind, namespace/name and, when it is being deleted
/// but held by a finalizer the collector does not remove, that too (kubernetes#77081: such a
/// dependent holds its foreground owner until someone removes that finalizer).
fn dependent_in_words(dependent: &Handle) -> String {
    let id = dependent.identity();
    let name = if id.namespace().is_empty() {
        id.name.to_string()
    } else {
        format!("{}/{}", id.namespace(), id.name)
    };
    let seen = dependent.observation();
    let held = if seen.being_deleted && seen.finalizers.other {
        " (being deleted, held by a finalizer the collector does not remove)"
    } else if seen.being_deleted {
        " (being deleted)"
    } else {
        ""
    };
    format!("{} {name}{held}", id.kind())
}

/// Why a decision waits for the monitors' views (the collector's partial-view rules).
fn waiting_reason(resources: &[String]) -> String {
    if resources.is_empty() {
        return "its decision waits for the graph builders to apply the events received before it".to_string();
    }
    format!(
        "its decision waits until the collector's view of {} is complete (listed in full, not \
         relisting): deciding on a partial view could delete what should live",
        resources.join(", ")
    )
}

/// The reasons in words, most decisive first.
fn reasons(node: &Handle, owners: &[Value], blocking: &[Handle]) -> Vec<String> {
    let mut reasons = Vec::new();
    if node.is_virtual() {
        reasons.push(
            "virtual: only other objects' ownerReferences name it, so the collector asks the API server \
             whether it exists, and retries while it cannot tell (a kind no resource serves, say)"
                .to_string(),
        );
    }
    if node.is_deleting_dependents() && !blocking.is_empty() {
        let mut named: Vec<String> = blocking.iter().take(NAMED_DEPENDENTS).map(dependent_in_words).collect();
        if blocking.len() > NAMED_DEPENDENTS {
            named.push(format!("and {} more", blocking.len() - NAMED_DEPENDENTS));
        }
        reasons.push(format!(
            "being deleted in the foreground: waits for {} blocking dependent(s) to go: {}",
            blocking.len(),
            named.join(", ")
        ));
    }
    let live: Vec<&str> = owners
        .iter()
        .filter(|o| o["state"] == "present")
        .filter_map(|o| o["name"].as_str())
        .collect();
    if !live.is_empty() {
        reasons.push(format!("has live owner(s): {}", live.join(", ")));
    }
    let waiting = owners.iter().filter(|o| o["state"] == "deletingDependents").count();
    if waiting > 0 && live.is_empty() {
        reasons.push(format!(
            "{waiting} owner(s) being deleted in the foreground: this object goes once they reach it"
        ));
    }
    if owners.is_empty() && !node.is_deleting_dependents() && !node.is_virtual() {
        reasons.push("has no owners: the collector never deletes it".to_string());
    }
    if reasons.is_empty() {
        reasons.push("no live owner: it is (or is about to be) queued for deletion".to_string());
    }
    reasons
}
