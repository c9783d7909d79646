//! The dependency graph: `uid → node`, owner → dependent edges, and the flags of spec §1.
//!
//! Invariant: only builders write the graph; for any UID, the handle in the map is the one the
//! builder last wrote, and an owner's `dependents` hold the current handle of each dependent once
//! the builder is quiet (see [`invariants`]). Readers (collector workers, dumps) take no graph-wide
//! lock and may see a slightly stale view.

mod dependents;
pub mod dump;
mod edges;
mod identity;
mod intern;
pub mod invariants;
mod name;
mod node;
mod table;
mod uid;

pub use edges::Linked;
pub use identity::{Identity, OwnerRef};
pub use intern::{Sym, TypeMeta};
pub use name::Name;
pub use node::{Handle, Node, ObservedFinalizers};
use table::Shard;
pub use uid::Uid;

/// Number of shards of the `uid → handle` map. A power of two, so that any partition count that
/// is also a power of two (up to 64) maps each shard to exactly one builder, and writers of
/// different partitions never share a shard's lock.
pub const SHARDS: usize = 64;

/// The graph: a sharded concurrent `uid → handle` map ([`table`]), whose lookups take no lock.
pub struct Graph {
    shards: Box<[Shard]>,
    /// Reclaims what writers take out of the shards once no reader can still see it. Declared
    /// after the shards so that it is dropped after them.
    collector: seize::Collector,
}

impl Default for Graph {
    fn default() -> Self {
        Graph {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            collector: seize::Collector::new(),
        }
    }
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// The shard of `uid`, and its hash.
    fn shard(&self, uid: &Uid) -> (&Shard, u64) {
        let hash = uid.hash64();
        (&self.shards[(hash % SHARDS as u64) as usize], hash)
    }

    /// Runs `f` on the node for `uid`, without taking a reference to it.
    fn with_node<R>(&self, uid: &Uid, f: impl FnOnce(Option<&Node>) -> R) -> R {
        let (shard, hash) = self.shard(uid);
        let guard = self.collector.enter();
        f(shard.find(&guard, uid, hash))
    }

    /// The current handle for `uid`.
    pub fn get(&self, uid: &Uid) -> Option<Handle> {
        let (shard, hash) = self.shard(uid);
        let guard = self.collector.enter();
        shard.get(&guard, uid, hash)
    }

    /// True when the graph has a node for `uid` (upstream's `GraphHasUID`).
    pub fn contains(&self, uid: &Uid) -> bool {
        self.with_node(uid, |node| node.is_some())
    }

    /// Builder only: writes `handle` as the node for its UID, replacing any other.
    pub fn insert(&self, handle: Handle) {
        let (shard, hash) = self.shard(&handle.identity().uid);
        shard.insert(&self.collector, &handle, hash, false);
    }

    /// Builder only: removes the node for `uid`.
    pub fn remove(&self, uid: &Uid) -> Option<Handle> {
        let (shard, hash) = self.shard(uid);
        shard.remove(&self.collector, uid, hash)
    }

    /// `name` as a [`Name`], sharing the storage of the node for `uid` when it has that name.
    /// Every holder of an object's name (its node, its dependents' ownerReferences, its monitor)
    /// then shares one copy.
    pub fn shared_name(&self, uid: &Uid, name: &str) -> Name {
        self.with_node(uid, |node| match node {
            Some(node) if *node.identity().name == *name => node.identity().name.clone(),
            _ => Name::new(name),
        })
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.shards.iter().map(Shard::len).sum()
    }

    /// True when the graph has no node.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of every handle, in no order.
    pub fn handles(&self) -> Vec<Handle> {
        let guard = self.collector.enter();
        self.shards.iter().flat_map(|s| s.handles(&guard)).collect()
    }
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph").field("nodes", &self.len()).finish()
    }
}
