//! The graph builder: applies [`GraphEvent`]s to the [`Graph`] and feeds the work queues
//! (upstream's `GraphBuilder.processGraphChanges`, spec §3).
//!
//! Invariant: the events of one UID are applied by one builder, in the order they were routed.
//! The builder is the only writer of the nodes of its partition; collector workers read the same
//! nodes concurrently and act on a possibly stale view, which the re-queue rules below make safe:
//! an owner is re-queued when a dependent goes away or unblocks it, and dependents are re-queued
//! when their owner goes away or starts a foreground deletion.
//!
//! The node is the builder's memory of the object: besides owners and flags it remembers the
//! finalizers processTransitions reads and the resourceVersion it was observed at, so the "old
//! object" of an update is the node's state before the event, with no separate informer store,
//! and the collector can act on what the graph saw (see [`crate::collector`]).

pub mod metrics;
pub mod references;

pub use metrics::{GraphEventMetrics, GraphEventStats};

use crate::event::{EventObject, EventType, GraphEvent};
use crate::graph::AbsentOwnerCache;
use crate::graph::{
    Graph, GraphWriter, Handle, Linked, Node, Observation, ObservedFinalizers, OwnerRef, OwnerRefs, Uid,
};
use crate::journal::{witness::Change, Journal};
use crate::queue::{RateLimiterConfig, WorkQueue};
use crate::recorder::EventRecorder;
use crate::router::PartitionReceiver;
use references::{alternate_owner_identity, partition_dependents, references_diffs, ReferenceDiff};
use std::collections::VecDeque;
use std::sync::Arc;

/// Events a builder has received and not applied yet, whose lines in the graph it has begun to
/// load: a lookup in a map of millions waits on memory, and with a few events in hand the builder
/// waits for several at once instead of one after the other. Loading is in two stages, since a
/// node's address is in its map slot: an event's slots (its object's and each owner's) as it comes
/// in, its nodes halfway to its turn. Events leave in the order they came.
#[derive(Default)]
pub struct Lookahead(VecDeque<GraphEvent>);

impl Lookahead {
    /// How many events ahead of the one applied: enough that a line asked for arrives before it
    /// is read (an event takes a few hundred nanoseconds, a memory load about two hundred), few
    /// enough that it is still in cache then.
    pub const DEPTH: usize = 8;

    /// Events applied under one pin ([`Lookahead::apply_run`]): long enough that pinning costs
    /// little an event, short enough that what writers retire meanwhile is freed soon after.
    pub const RUN: usize = 64;

    /// Takes `event` in and starts loading its map slots in `graph`, and the nodes of the event
    /// halfway through.
    pub fn push(&mut self, graph: &Graph, event: GraphEvent) {
        let _pinned = graph.pin();
        let each_uid = |e: &GraphEvent, f: &dyn Fn(&Uid)| {
            f(&e.object.uid);
            e.object.owners.iter().for_each(|r| f(&r.uid));
        };
        each_uid(&event, &|uid| graph.prefetch(uid));
        self.0.push_back(event);
        let halfway = self.0.len().checked_sub(Self::DEPTH / 2 + 1);
        if let Some(e) = halfway.and_then(|i| self.0.get(i)) {
            each_uid(e, &|uid| graph.prefetch_node(uid));
        }
    }

    /// Applies up to [`Lookahead::RUN`] events by `apply`, oldest first, taking events from
    /// `source` whenever fewer than [`Lookahead::DEPTH`] are in hand; returns how many it applied,
    /// 0 once both `source` and the lookahead are empty. `source` may have more later.
    ///
    /// The whole run is under one [`Graph::pin`]: each event's own pins are then nested ones,
    /// which cost a thread-local counter instead of a swap on a word that retiring threads write.
    pub fn apply_run(
        &mut self,
        graph: &Graph,
        source: &mut impl Iterator<Item = GraphEvent>,
        mut apply: impl FnMut(GraphEvent),
    ) -> usize {
        let _pinned = graph.pin();
        for applied in 0..Self::RUN {
            while self.0.len() < Self::DEPTH {
                let Some(event) = source.next() else { break };
                self.push(graph, event);
            }
            let Some(event) = self.0.pop_front() else {
                return applied;
            };
            apply(event);
        }
        Self::RUN
    }
}

/// One partition's builder.
#[derive(Clone)]
pub struct GraphBuilder {
    graph: GraphWriter,
    attempt_to_delete: Arc<WorkQueue<Handle>>,
    attempt_to_orphan: Arc<WorkQueue<Handle>>,
    absent_owner_cache: Arc<AbsentOwnerCache>,
    recorder: EventRecorder,
    /// In shadow mode, where the writes other collectors are seen making go
    /// ([`crate::journal::witness`]); `None` outside shadow mode, so that the hot path checks a
    /// field of its own rather than the journal's settings.
    witness: Option<Journal>,
}

impl GraphBuilder {
    /// A builder writing the graph of `graph` and feeding the two queues: the pipeline's
    /// ([`crate::controller::Pipeline`]), which shares them with the workers.
    pub(crate) fn new(
        graph: GraphWriter,
        attempt_to_delete: Arc<WorkQueue<Handle>>,
        attempt_to_orphan: Arc<WorkQueue<Handle>>,
        absent_owner_cache: Arc<AbsentOwnerCache>,
        recorder: EventRecorder,
    ) -> Self {
        GraphBuilder {
            graph,
            attempt_to_delete,
            attempt_to_orphan,
            absent_owner_cache,
            recorder,
            witness: None,
        }
    }

    /// The same builder, recording in shadow mode what it sees other collectors write.
    #[must_use]
    pub fn witnessing(self, journal: Journal) -> Self {
        let witness = journal.is_dry_run().then_some(journal);
        GraphBuilder { witness, ..self }
    }

    /// A builder over `graph` with queues and an absent-owner cache of its own and no event sink
    /// (recorded events are dropped): for replays and benches that measure the builder alone.
    pub fn detached(graph: GraphWriter) -> Self {
        let (recorder, _sink) = EventRecorder::new();
        GraphBuilder::new(
            graph,
            WorkQueue::new(crate::queue::ATTEMPT_TO_DELETE, RateLimiterConfig::default()),
            WorkQueue::new(crate::queue::ATTEMPT_TO_ORPHAN, RateLimiterConfig::default()),
            Arc::new(AbsentOwnerCache::default()),
            recorder,
        )
    }

    /// Applies the events of one partition until its channel closes, counting them as applied a
    /// run at a time. The events already waiting go through a [`Lookahead`] first.
    pub async fn run(self, mut events: PartitionReceiver) {
        let graph = self.graph.graph();
        let mut ahead = Lookahead::default();
        loop {
            let mut waiting = std::iter::from_fn(|| events.try_recv());
            let applied = ahead.apply_run(graph, &mut waiting, |event| self.process_graph_changes(event));
            if applied > 0 {
                events.applied(applied as u64);
                continue;
            }
            match events.recv().await {
                Some(event) => ahead.push(graph, event),
                None => return,
            }
        }
    }

    /// Applies one event (spec §3).
    pub fn process_graph_changes(&self, event: GraphEvent) {
        let _pinned = self.graph.pin();
        self.apply(&event);
    }

    fn apply(&self, event: &GraphEvent) {
        let mut existing = self.graph.get(&event.object.uid);
        let prior = existing.as_ref().and_then(prior_state);
        if let Some(node) = &existing {
            if !event.is_virtual && node.is_virtual() {
                existing = Some(self.observe_virtual_node(node.clone(), event));
            }
        }
        match (event.event_type, existing) {
            (EventType::Add | EventType::Update, None) => self.insert_new_node(event),
            (EventType::Add | EventType::Update, Some(node)) => self.update_node(node, prior, event),
            (EventType::Delete, None) => {
                tracing::trace!(object = %event.identity(), "delete event for an object not in the graph");
            }
            (EventType::Delete, Some(node)) => self.delete_node(node, event),
            (EventType::Unreferenced, Some(node)) => self.drop_unreferenced(&node),
            (EventType::Unreferenced, None) => {}
        }
    }

    /// Step 0 (spec §3.1): the first real event for a virtual node. Returns the node to go on with.
    fn observe_virtual_node(&self, existing: Handle, event: &GraphEvent) -> Handle {
        let observed = event.identity();
        let mut node = existing;
        if observed != *node.identity() {
            let (_, nonmatching) = partition_dependents(&node.dependents(), &observed);
            for dep in nonmatching {
                if !observed.namespace().is_empty() && dep.identity().namespace() != observed.namespace() {
                    let bad_ref = dep.with_owners(|refs| refs.iter().find(|r| r.uid == observed.uid).cloned());
                    if let Some(r) = bad_ref {
                        self.recorder.owner_ref_invalid_namespace(dep.identity(), &r);
                    }
                }
                self.attempt_to_delete.add(dep);
            }
            // The old virtual handle stays virtual; a worker that pops it drops it (spec §4.1).
            node = self.graph.replace(&node, observed);
        }
        self.graph.mark_observed(&node);
        node
    }

    /// Spec §3.2: the first observation of an object.
    fn insert_new_node(&self, event: &GraphEvent) {
        let object = &event.object;
        let node = Handle::new(event.identity(), &object.owners, false);
        self.graph.observe(&node, None, object.observation);
        if object.observation.being_deleted && object.observation.finalizers.foreground {
            self.graph.mark_deleting_dependents(&node);
        }
        if !self.graph.insert_if_absent(&node) {
            // Another partition's builder created a virtual node for this UID since we looked:
            // apply the event to that node instead, as if it had been there all along.
            return self.apply(event);
        }
        self.add_dependent_to_owners(&node, object.owners.iter());
        self.process_transitions(None, object, &node);
    }

    /// Spec §3.3: a later observation of an object the graph knows.
    fn update_node(&self, node: Handle, prior: Option<Observation>, event: &GraphEvent) {
        let node = if event.is_virtual {
            node
        } else {
            self.follow_kind_change(node, event)
        };
        let object = &event.object;
        // The witness needs copies of the removed refs, which are gone once the node is updated.
        let (diff, removed) = node.with_owners(|old| {
            let diff = references_diffs(old, &object.owners);
            let removed = self
                .witness
                .as_ref()
                .map(|_| -> Vec<OwnerRef> { diff.removed.iter().map(|r| old[r.old].clone()).collect() });
            (diff, removed)
        });
        if let Some((witness, removed)) = self.witness.as_ref().zip(removed) {
            let unblocked: Vec<Uid> = diff
                .changed
                .iter()
                .filter(|c| c.unblocks)
                .map(|c| c.uid.clone())
                .collect();
            let change = Change {
                identity: node.identity(),
                prior,
                now: object.observation,
                owners: &object.owners,
                removed: &removed,
                unblocked: &unblocked,
                gone: false,
            };
            witness.witness(&self.graph, &change);
        }
        if diff.is_empty() {
            self.graph.observe(&node, None, object.observation);
        } else {
            self.add_unblocked_owners_to_delete_queue(&diff);
            self.graph.observe(&node, Some(&object.owners), object.observation);
            self.add_dependent_to_owners(&node, diff.added.iter().map(|&i| &object.owners[i]));
            for r in &diff.removed {
                self.unlink_from_owner(&r.uid, &node);
            }
        }
        self.process_transitions(prior, object, &node);
    }

    /// Spec §3.3 step 1: the preferred version (or kind) of an observed object changed. The node is
    /// replaced by a clone under the new apiVersion/kind, in the map and in its owners' dependents.
    fn follow_kind_change(&self, node: Handle, event: &GraphEvent) -> Handle {
        let id = node.identity();
        if id.type_meta() == event.type_meta() {
            return node;
        }
        let replacement = self.graph.replace(&node, id.with_type_meta(event.type_meta().clone()));
        for r in node.owners() {
            self.graph.relink(&r.uid, id, &replacement);
        }
        replacement
    }

    /// Spec §3.2 addDependentToOwners: links `node` under each of `refs`, creating virtual owners
    /// for unknown UIDs, and queues `node` for verification when a ref looks wrong.
    fn add_dependent_to_owners<'r>(&self, node: &Handle, refs: impl IntoIterator<Item = &'r OwnerRef>) {
        let mut suspicious = false;
        for r in refs {
            let virtual_owner = || Handle::new(r.identity_in(node.identity().namespace()), OwnerRefs::NONE, true);
            let check = |owner: &Node| !suspicious && self.is_suspicious_ref(node, owner, r);
            match self.graph.link(&r.uid, node, virtual_owner, check) {
                Linked::CreatedVirtual(owner) => self.attempt_to_delete.add(owner),
                Linked::Existing(found_suspicious) => suspicious |= found_suspicious,
            }
        }
        if suspicious {
            self.attempt_to_delete.add(node.clone());
        }
    }

    /// The three checks of spec §3.2 (a, b, c), first match wins.
    fn is_suspicious_ref(&self, node: &Handle, owner: &Node, r: &OwnerRef) -> bool {
        let (owner_id, node_ns) = (owner.identity(), &node.identity().namespace());
        let owner_is_namespaced = !owner_id.namespace().is_empty();
        if owner_is_namespaced && owner_id.namespace() != *node_ns {
            if !owner.is_virtual() {
                self.recorder.owner_ref_invalid_namespace(node.identity(), r);
            }
            return true;
        }
        if !owner_id.matches_coordinates(r) {
            if !owner.is_virtual() {
                tracing::debug!(item = %node.identity(), owner = %owner_id, "ownerRef coordinates differ from the observed owner");
            }
            return true;
        }
        // issue #98040: a virtual cluster-scoped owner may really be a namespaced kind that a
        // cluster-scoped child names wrongly
        !owner_is_namespaced && owner_id.namespace() != *node_ns && owner.is_virtual()
    }

    /// Queues the owners a dependent stopped blocking (upstream's
    /// `addUnblockedOwnersToDeleteQueue`), before the dependent's owners list is updated.
    fn add_unblocked_owners_to_delete_queue(&self, diff: &ReferenceDiff) {
        for uid in diff.unblocked_owners() {
            if let Some(owner) = self.graph.get(uid) {
                self.attempt_to_delete.add(owner);
            }
        }
    }

    /// Spec §3.5 and §3.7: an object went away (or a worker says it did).
    fn delete_node(&self, existing: Handle, event: &GraphEvent) {
        if event.is_virtual && !self.virtual_delete_removes(&existing, event) {
            return;
        }
        let owners = existing.owners();
        if let Some(witness) = self.witness.as_ref().filter(|_| !event.is_virtual) {
            let change = Change {
                identity: existing.identity(),
                prior: prior_state(&existing),
                now: event.object.observation,
                owners: &owners,
                removed: &[],
                unblocked: &[],
                gone: true,
            };
            witness.witness(&self.graph, &change);
        }
        let dependents = self.remove_node(&existing, &owners);
        if !dependents.is_empty() {
            self.absent_owner_cache.add(event.identity());
            if !event.is_virtual {
                // A watch saw it go: certain, whatever the coordinates a dependent names it by.
                self.graph.record_tombstone(event.object.uid.clone());
            }
        }
        for dep in dependents {
            self.attempt_to_delete.add(dep);
        }
        for r in &owners {
            if let Some(owner) = self.graph.get(&r.uid) {
                if owner.is_deleting_dependents() {
                    self.attempt_to_delete.add(owner);
                }
            }
        }
    }

    /// Spec §3.7: decides whether a virtual delete removes `existing`, handling the dependents
    /// that disagree about the owner's coordinates when it does not.
    fn virtual_delete_removes(&self, existing: &Handle, event: &GraphEvent) -> bool {
        let deleted = event.identity();
        let (matching, nonmatching) = partition_dependents(&existing.dependents(), &deleted);
        if existing.is_virtual() && nonmatching.is_empty() {
            return true;
        }
        if !existing.is_virtual() && *existing.identity() == deleted {
            return true;
        }
        if !matching.is_empty() {
            self.absent_owner_cache.add(deleted.clone());
            for dep in matching {
                self.attempt_to_delete.add(dep);
            }
        }
        if existing.is_virtual() && *existing.identity() == deleted {
            if let Some(alternate) = alternate_owner_identity(&nonmatching, &deleted) {
                let replacement = self.graph.replace(existing, alternate);
                self.attempt_to_delete.add_rate_limited(replacement);
            }
        }
        false
    }

    /// Upstream's `removeNode`: drops the UID and unlinks the node from `owners` (its owners
    /// list, which only this builder writes); returns the node's dependents.
    ///
    /// A retry of the node that waits out its backoff is brought forward, for its worker to
    /// forget at once (its object is gone): a tenant's objects that fail to resolve, deleted in
    /// turn, would otherwise stay in memory through the queue until their backoffs end.
    fn remove_node(&self, node: &Handle, owners: &[OwnerRef]) -> Vec<Handle> {
        let dependents = self.graph.remove_node(node);
        self.attempt_to_delete.expedite(node);
        for r in owners {
            if r.uid == node.identity().uid {
                continue; // a self-owned node: the edge goes with the node
            }
            self.unlink_from_owner(&r.uid, node);
        }
        dependents
    }

    /// Unlinks `dependent` from the owner `owner_uid`. A virtual owner left with no dependents
    /// stands for nothing any more: it is queued, and the worker that takes it has it dropped
    /// ([`Self::drop_unreferenced`]), so that owners a tenant names and deletes in turn (random
    /// uids, kinds no server serves) do not stay in the graph.
    fn unlink_from_owner(&self, owner_uid: &Uid, dependent: &Handle) {
        self.graph.unlink(owner_uid, dependent);
        // A read first: most owners are observed, and a handle taken and dropped is two writes to
        // a line every builder writes.
        if self.graph.read(owner_uid, Node::is_unreferenced) == Some(true) {
            if let Some(owner) = self.graph.get(owner_uid) {
                self.attempt_to_delete.add(owner);
            }
        }
    }

    /// A worker found `node` virtual with no dependents ([`EventType::Unreferenced`]): it goes
    /// if that still holds, with nothing verified and so nothing recorded (no absent-owner entry,
    /// no tombstone). A dependent another partition linked since is left adrift, as any removal
    /// leaves them, and queued to be judged again with its owner read live.
    fn drop_unreferenced(&self, node: &Handle) {
        if !node.is_unreferenced() {
            return;
        }
        for dep in self.remove_node(node, &[]) {
            self.attempt_to_delete.add(dep);
        }
    }

    /// Spec §3.6: starts orphaning or a foreground deletion when the object just entered one.
    fn process_transitions(&self, prior: Option<Observation>, object: &EventObject, node: &Handle) {
        let now = &object.observation;
        let starts = |has_now: bool, had: fn(&ObservedFinalizers) -> bool| {
            now.being_deleted && has_now && prior.is_none_or(|p| !p.being_deleted || !had(&p.finalizers))
        };
        if starts(now.finalizers.orphan, |f| f.orphan) {
            self.attempt_to_orphan.add(node.clone());
            return;
        }
        if starts(now.finalizers.foreground, |f| f.foreground) {
            self.graph.mark_deleting_dependents(node);
            for dep in node.dependents() {
                self.attempt_to_delete.add(dep);
            }
            self.attempt_to_delete.add(node.clone());
        }
    }
}

/// The node's state before an event, or `None` when the object was never observed.
fn prior_state(node: &Handle) -> Option<Observation> {
    (!node.is_virtual()).then(|| node.observation())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(graph: &Graph, n: usize) -> Vec<GraphEvent> {
        (0..n)
            .map(|i| {
                let meta = crate::api::ObjectMeta {
                    name: format!("p{i}"),
                    namespace: "ns".into(),
                    uid: Uid::new_v4(i as u128 + 1).to_string(),
                    ..Default::default()
                };
                GraphEvent::observed(graph, EventType::Add, &meta, "v1", "Pod").expect("an event")
            })
            .collect()
    }

    #[test]
    fn a_run_should_apply_events_in_order_at_most_a_run_at_a_time_and_take_events_that_come_later() {
        let graph = Graph::default();
        let sent = events(&graph, Lookahead::RUN + Lookahead::DEPTH + 5);
        let uids: Vec<Uid> = sent.iter().map(|e| e.object.uid.clone()).collect();
        let (mut ahead, mut applied) = (Lookahead::default(), Vec::new());
        let mut source = sent.into_iter();

        let first = ahead.apply_run(&graph, &mut source, |e| applied.push(e.object.uid.clone()));
        assert_eq!(first, Lookahead::RUN, "a full run, with events still in hand");
        assert_eq!(
            ahead.0.len(),
            Lookahead::DEPTH - 1,
            "the lookahead was full before each event while the source had events"
        );
        let rest = ahead.apply_run(&graph, &mut source, |e| applied.push(e.object.uid.clone()));
        assert_eq!(rest, Lookahead::DEPTH + 5);
        assert_eq!(applied, uids, "every event once, in the order it came");
        assert_eq!(
            ahead.apply_run(&graph, &mut source, |_| unreachable!()),
            0,
            "nothing left"
        );

        let later = events(&graph, 1);
        let uid = later[0].object.uid.clone();
        let taken = ahead.apply_run(&graph, &mut later.into_iter(), |e| applied.push(e.object.uid.clone()));
        assert_eq!(
            (taken, applied.last()),
            (1, Some(&uid)),
            "a source that has more later is read again"
        );
    }
}
