//! [`GraphWriter`]: the one right to change a graph.
//!
//! Invariant: a graph is written only through the writer that created it (and its clones). The
//! pipeline ([`crate::controller::Pipeline`]) hands that writer to the builders and to nothing
//! else; workers, the audit, dumps and tools hold an `Arc<Graph>`, whose methods only read. The
//! compiler keeps the rule: the writes exist on [`GraphWriter`] alone, and no writer can be made
//! for a graph that exists already.
//!
//! ```compile_fail,E0599
//! use kube_gc::graph::{GraphWriter, Uid};
//!
//! let writer = GraphWriter::new();
//! let graph = writer.graph().clone();
//! // A reader of the graph cannot remove a node from it.
//! graph.remove(&Uid::parse("a"));
//! ```

use super::{Graph, Handle, Node, Observation, OwnerRefs, Uid};
use std::ops::Deref;
use std::sync::Arc;

/// A graph's writer; it reads the graph too (it derefs to [`Graph`]). Cheap to clone: every
/// builder partition holds one.
#[derive(Clone, Default)]
pub struct GraphWriter(Arc<Graph>);

impl GraphWriter {
    /// A new, empty graph and its writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new, empty graph keeping about `capacity` tombstones (0: none, for a collector that
    /// verifies every owner with a GET and would never read them), and its writer.
    pub fn with_tombstones(capacity: usize) -> Self {
        GraphWriter(Arc::new(Graph::with_tombstones(capacity)))
    }

    /// The graph, for its readers.
    #[inline]
    pub fn graph(&self) -> &Arc<Graph> {
        &self.0
    }

    /// Writes `handle` as the node for its UID, replacing any other.
    #[inline]
    pub fn insert(&self, handle: Handle) {
        self.shard(&handle.identity().uid).insert(handle);
    }

    /// Removes the node for `uid`.
    #[inline]
    pub fn remove(&self, uid: &Uid) -> Option<Handle> {
        self.shard(uid).remove(uid)
    }

    /// Clears `node`'s virtual flag (spec §1.2 `markObserved`).
    #[inline]
    pub fn mark_observed(&self, node: &Node) {
        node.mark_observed();
    }

    /// Sets `node`'s deletingDependents (and beingDeleted, which it implies).
    #[inline]
    pub fn mark_deleting_dependents(&self, node: &Node) {
        node.mark_deleting_dependents();
    }

    /// Records an observation of `node`, and the owners it listed when they changed, in one
    /// critical section of the node's edges lock. beingDeleted is never cleared.
    #[inline]
    pub fn observe(&self, node: &Node, owners: Option<&OwnerRefs>, seen: Observation) {
        node.observe(owners, seen);
    }

    /// Remembers that a watch reported the owner `uid` deleted ([`Graph::tombstones`]).
    #[inline]
    pub fn record_tombstone(&self, uid: Uid) {
        self.tombstones.record(uid);
    }
}

impl Deref for GraphWriter {
    type Target = Graph;

    #[inline]
    fn deref(&self) -> &Graph {
        &self.0
    }
}
