//! The dependency graph: `uid → node`, owner → dependent edges, and the flags of spec §1.
//!
//! Invariant: only builders write the graph; for any UID, the handle in the map is the one the
//! builder last wrote, and an owner's `dependents` hold the current handle of each dependent once
//! the builder is quiet (see [`invariants`]). Readers (collector workers, dumps) take no graph-wide
//! lock and may see a slightly stale view.

pub mod dump;
mod identity;
mod intern;
pub mod invariants;
mod node;
mod uid;

pub use identity::{Identity, OwnerRef};
pub use intern::{Interner, Sym};
pub use node::{Handle, Node, ObservedFinalizers};
pub use uid::Uid;

/// The graph: a concurrent `uid → handle` map plus the intern table its strings come from.
#[derive(Default)]
pub struct Graph {
    nodes: papaya::HashMap<Uid, Handle>,
    interner: Interner,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current handle for `uid`.
    pub fn get(&self, uid: &Uid) -> Option<Handle> {
        self.nodes.pin().get(uid).cloned()
    }

    /// True when the graph has a node for `uid` (upstream's `GraphHasUID`).
    pub fn contains(&self, uid: &Uid) -> bool {
        self.nodes.pin().contains_key(uid)
    }

    /// Builder only: writes `handle` as the node for its UID.
    pub fn insert(&self, handle: Handle) {
        self.nodes.pin().insert(handle.identity().uid.clone(), handle);
    }

    /// Builder only: removes the node for `uid`.
    pub fn remove(&self, uid: &Uid) -> Option<Handle> {
        self.nodes.pin().remove(uid).cloned()
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when the graph has no node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// A snapshot of every handle, in no order.
    pub fn handles(&self) -> Vec<Handle> {
        self.nodes.pin().values().cloned().collect()
    }

    /// Interns an apiVersion, kind or namespace.
    pub fn intern(&self, s: &str) -> Sym {
        self.interner.intern(s)
    }
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph").field("nodes", &self.len()).finish()
    }
}
