//! The dependency graph: `uid → node`, owner → dependent edges, and the flags of spec §1.
//!
//! Invariant: only builders write the graph (they alone hold its [`GraphWriter`]; everyone else
//! reads an `Arc<Graph>`); for any UID, the handle in the map is the one the
//! builder last wrote, and an owner's `dependents` hold the current handle of each dependent once
//! the builder is quiet (see [`invariants`]). Readers (collector workers, dumps) take no graph-wide
//! lock and may see a slightly stale view. Besides the nodes, the graph keeps the edges of owners
//! that have no node (see [`edges`]: a node re-created for such an owner takes them back), and
//! [`Tombstones`]: the UIDs of owners whose deletion a watch reported, which stay true forever.

/// What [`Sym`] and [`Name`] share as views of a string: they deref to `str`, order, print and
/// compare with plain strings as their text does, and [`From<&str>`] calls the type's `new`. Each
/// defines its own equality and hash: by address for an interned `Sym`, by text for a `Name`.
macro_rules! string_view {
    ($t:ty) => {
        impl std::ops::Deref for $t {
            type Target = str;
            fn deref(&self) -> &str {
                self.as_str()
            }
        }

        impl PartialEq<str> for $t {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $t {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl Ord for $t {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                self.as_str().cmp(other.as_str())
            }
        }

        impl PartialOrd for $t {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }

        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(self.as_str(), f)
            }
        }

        impl From<&str> for $t {
            fn from(s: &str) -> Self {
                <$t>::new(s)
            }
        }
    };
}
use string_view;

mod absent_owner_cache;
mod dependents;
pub mod dump;
mod edges;
mod identity;
pub mod invariants;
mod node;
#[allow(unsafe_code)]
mod raw;
mod resource_version;
mod tombstones;
mod writer;

#[cfg(all(test, feature = "loom"))]
mod loom_models;

pub use absent_owner_cache::{AbsentOwnerCache, DEFAULT_CAPACITY as DEFAULT_ABSENT_OWNER_CACHE_CAPACITY};
use crossbeam_utils::CachePadded;
use edges::Adrift;
pub use edges::Linked;
pub use identity::{Identity, OwnerRef, OwnerRefs};
pub use node::{Handle, Node, Observation, Observed, ObservedFinalizers};
pub use raw::intern::{Scope, Sym, TypeMeta, TypeMetaRef};
pub use raw::name::Name;
pub use raw::object_name::ObjectName;
use raw::table::UidTable;
pub use raw::uid::Uid;
pub use resource_version::ResourceVersion;
pub use tombstones::{Tombstones, DEFAULT_CAPACITY as DEFAULT_TOMBSTONE_CAPACITY};
pub use writer::GraphWriter;

/// Number of shards of the `uid → handle` map. Builders of different partitions may write one
/// shard (the router partitions by namespace, the map by UID); its writer lock serialises them.
pub const SHARDS: usize = 64;

/// The graph: a sharded concurrent `uid → handle` map whose lookups take no lock ([`raw::table`]),
/// and the tombstones of deleted owners.
///
/// Each shard sits on cache lines of its own, apart from its neighbours: a builder writes a
/// shard's lock and count at every insert, and unpadded, two shards that different builders
/// write would share a line.
pub struct Graph {
    /// Each shard keeps, under its writer lock, the edges of its owners that have no node
    /// ([`edges`]).
    shards: Box<[CachePadded<UidTable<Adrift>>]>,
    tombstones: Tombstones,
}

impl Default for Graph {
    fn default() -> Self {
        Graph::with_tombstones(DEFAULT_TOMBSTONE_CAPACITY)
    }
}

impl Graph {
    /// An empty graph that nothing can write, for code that only needs one to read; a graph to
    /// build comes with its writer from [`GraphWriter::new`].
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty graph keeping about `capacity` tombstones (0: none, for a collector that
    /// verifies every owner with a GET and would never read them).
    pub(super) fn with_tombstones(capacity: usize) -> Self {
        Graph {
            shards: (0..SHARDS).map(|_| CachePadded::default()).collect(),
            tombstones: Tombstones::new(capacity),
        }
    }

    /// The UIDs of deleted owners: builders record, workers read.
    pub fn tombstones(&self) -> &Tombstones {
        &self.tombstones
    }

    fn shard_index(uid: &Uid) -> usize {
        Self::shard_of_hash(uid.hash64())
    }

    fn shard_of_hash(hash: u64) -> usize {
        (hash % SHARDS as u64) as usize
    }

    #[inline]
    fn shard(&self, uid: &Uid) -> &UidTable<Adrift> {
        &self.shards[Self::shard_index(uid)]
    }

    /// Starts loading the map lines a lookup of `uid` reads first (see [`GraphBuilder`]'s
    /// lookahead): a hint, with no effect but on speed.
    ///
    /// [`GraphBuilder`]: crate::builder::GraphBuilder
    pub fn prefetch(&self, uid: &Uid) {
        let hash = uid.hash64();
        self.shards[Self::shard_of_hash(hash)].prefetch(hash);
    }

    /// Starts loading the node of `uid`, best once [`prefetch`](Self::prefetch) brought in its
    /// map lines: a hint, with no effect but on speed.
    pub fn prefetch_node(&self, uid: &Uid) {
        let hash = uid.hash64();
        self.shards[Self::shard_of_hash(hash)].prefetch_node(hash);
    }

    /// Keeps the graph's lookups protected from reclamation until the returned value is dropped,
    /// so that the many lookups of one event each cost a counter rather than a store and a swap
    /// on a word other threads read. Hold it for a short run of events, not longer: nothing a
    /// writer retires is freed while some thread holds one, and it must not be held across an
    /// `.await`.
    pub fn pin(&self) -> Pinned {
        Pinned {
            _guard: raw::reclaim::pin(),
        }
    }

    /// The current handle for `uid`.
    pub fn get(&self, uid: &Uid) -> Option<Handle> {
        self.shard(uid).get(uid)
    }

    /// Runs `f` on the current node for `uid` without taking a reference to it.
    pub fn read<R>(&self, uid: &Uid, f: impl FnOnce(&Node) -> R) -> Option<R> {
        self.shard(uid).read(uid, f)
    }

    /// True when the graph has a node for `uid` (upstream's `GraphHasUID`).
    pub fn contains(&self, uid: &Uid) -> bool {
        self.read(uid, |_| ()).is_some()
    }

    /// `name` as a [`Name`], sharing the storage of the node for `uid` when it has that name.
    /// Every holder of an object's name (its node, its dependents' ownerReferences, its monitor)
    /// then shares one copy. A node whose name is derived from its owner's ([`ObjectName`]) has
    /// no copy to share, and `name` is copied.
    pub fn shared_name(&self, uid: &Uid, name: &str) -> Name {
        let same = |node: &Node| {
            node.identity()
                .name
                .as_whole()
                .filter(|whole| **whole == *name)
                .cloned()
        };
        self.shard(uid)
            .read(uid, same)
            .flatten()
            .unwrap_or_else(|| Name::new(name))
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.len()).sum()
    }

    /// True when the graph has no node.
    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| s.len() == 0)
    }

    /// A snapshot of every handle, in no order.
    pub fn handles(&self) -> Vec<Handle> {
        self.shards.iter().flat_map(|s| s.handles()).collect()
    }

    /// Runs `f` on every node, in no order and without a graph-wide lock, taking no reference to
    /// any (unlike [`handles`](Self::handles), which clones every handle): for periodic scans of
    /// a large graph. Nodes written meanwhile may or may not be seen.
    pub fn for_each_node(&self, mut f: impl FnMut(&Node)) {
        for shard in self.shards.iter() {
            shard.for_each(&mut f);
        }
    }

    /// Up to `n` handles drawn at random: the shards are walked in a random order until they have
    /// given `n`, so a sample of a large graph costs one shard's walk (about 1/[`SHARDS`] of the
    /// graph), not the graph's. For the periodic audit.
    pub fn sample(&self, n: usize, rng: &mut impl rand::Rng) -> Vec<Handle> {
        use rand::seq::SliceRandom;
        let mut order: Vec<usize> = (0..SHARDS).collect();
        order.shuffle(rng);
        let mut handles = Vec::new();
        for i in order {
            if handles.len() >= n {
                break;
            }
            handles.extend(self.shards[i].handles());
        }
        handles.shuffle(rng);
        handles.truncate(n);
        handles
    }
}

/// See [`Graph::pin`]. Tied to its thread.
pub struct Pinned {
    _guard: raw::reclaim::Guard,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph").field("nodes", &self.len()).finish()
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use std::collections::HashSet;

    fn node(i: usize) -> Handle {
        let uid = format!("00000000-0000-4000-8000-{i:012}");
        let identity = Identity::new(
            TypeMeta::new(Sym::new("v1"), Sym::new("ConfigMap")),
            Name::new(&uid),
            Uid::parse(&uid),
            Sym::new("ns"),
        );
        Handle::new(identity, OwnerRefs::NONE, false)
    }

    #[test]
    fn sample_should_draw_distinct_nodes_of_the_graph_up_to_the_size_asked() {
        let graph = GraphWriter::new();
        let uids: HashSet<Uid> = (0..500)
            .map(|i| {
                let n = node(i);
                graph.insert(n.clone());
                n.identity().uid.clone()
            })
            .collect();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let drawn = graph.sample(40, &mut rng);
        assert_eq!(drawn.len(), 40);
        let distinct: HashSet<Uid> = drawn.iter().map(|h| h.identity().uid.clone()).collect();
        assert_eq!(distinct.len(), 40, "no node twice");
        assert!(distinct.is_subset(&uids));
        assert_eq!(graph.sample(10_000, &mut rng).len(), 500, "at most the whole graph");
        assert!(Graph::new().sample(5, &mut rng).is_empty());
    }
}
