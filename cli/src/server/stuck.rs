//! `/debug/stuck?older-than=D&limit=N`: every object that has waited on the collector for at least
//! `D`, oldest first, each with what [`/explain`](super::explain) says about it.
//!
//! An object waits on the collector while it is being deleted with the `foregroundDeletion` or
//! `orphan` finalizer ([`waits_on_collector`](kube_gc::controller::stall::waits_on_collector)),
//! timed from the stall detector's first reading that saw it so (at most one detector tick after
//! its deletionTimestamp), or while it is an item of attemptToDelete or attemptToOrphan, timed as
//! [`WorkQueue::for_each_waiting`] says. An object that is both is listed once, with the earlier
//! time and every reason. `D` defaults to `--stall-after`, so that what a stall alarm reports is
//! what the page lists; `N` (default [`DEFAULT_LIMIT`]) bounds the answer, whose `total` still
//! counts every object found.

use super::explain::explain;
use kube_gc::api::ClusterApi;
use kube_gc::controller::GarbageCollector;
use kube_gc::graph::{Handle, Uid};
use kube_gc::queue::WorkQueue;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// How many objects the page lists unless told otherwise: each carries a whole explanation.
pub(super) const DEFAULT_LIMIT: usize = 1000;

/// One object found waiting: since when, and on what.
struct Found {
    since: Instant,
    waiting_for: Vec<&'static str>,
}

/// The page: the objects that have waited at least `older_than`, the `limit` oldest of them.
pub(super) fn stuck<C: ClusterApi>(gc: &GarbageCollector<C>, older_than: Duration, limit: usize) -> Value {
    let now = Instant::now();
    let old_enough = |since: Instant| now.saturating_duration_since(since) >= older_than;
    let mut found: HashMap<Uid, Found> = HashMap::new();
    let mut note = |uid: Uid, since: Instant, what: &'static str| {
        let entry = found.entry(uid).or_insert(Found {
            since,
            waiting_for: Vec::new(),
        });
        entry.since = entry.since.min(since);
        if !entry.waiting_for.contains(&what) {
            entry.waiting_for.push(what);
        }
    };
    for (uid, since) in gc.stall().waiting_objects() {
        let Some(node) = gc.graph().get(&uid).filter(|_| old_enough(since)) else {
            continue;
        };
        let seen = node.observation();
        if seen.finalizers.foreground {
            note(uid.clone(), since, "foregroundDeletion finalizer");
        }
        if seen.finalizers.orphan {
            note(uid, since, "orphan finalizer");
        }
    }
    let queues: [(&WorkQueue<Handle>, &'static str); 2] = [
        (gc.attempt_to_delete(), "attemptToDelete"),
        (gc.attempt_to_orphan(), "attemptToOrphan"),
    ];
    for (queue, name) in queues {
        // Only notes here: the queue holds its limiter's lock while it calls back.
        queue.for_each_waiting(|item, since| {
            if old_enough(since) {
                note(item.identity().uid.clone(), since, name);
            }
        });
    }
    let total = found.len();
    let mut oldest: Vec<(Uid, Found)> = found.into_iter().collect();
    oldest.sort_by(|(a_uid, a), (b_uid, b)| a.since.cmp(&b.since).then(a_uid.cmp(b_uid)));
    let objects: Vec<Value> = oldest
        .into_iter()
        .take(limit)
        .map(|(uid, f)| {
            json!({
                "uid": uid.to_string(),
                "waitingSeconds": now.saturating_duration_since(f.since).as_secs_f64(),
                "waitingFor": f.waiting_for,
                "explain": explain(gc, uid),
            })
        })
        .collect();
    json!({
        "olderThanSeconds": older_than.as_secs_f64(),
        "stalled": gc.stall_status().stalled,
        "total": total,
        "objects": objects,
    })
}
