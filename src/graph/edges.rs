//! Owner → dependent edges across builder partitions (DESIGN §3, "cross-partition edges").
//!
//! Invariant: an edge is never written to a handle that has left the map. Each handle carries a
//! `retired` mark under its edges lock. The builder that owns a UID retires its node — when
//! it replaces the node by a clone ([`Graph::replace`]) or removes it ([`Graph::remove_node`]) —
//! by setting the mark and updating the map *while holding that lock*. Every edge writer
//! ([`Graph::link`], [`Graph::unlink`], [`Graph::relink`]) takes the same lock, and if it finds
//! the mark it looks the UID up again: by then the map already holds the clone (which copied every
//! edge written before the mark) or nothing, in which case `link` creates a virtual owner with an
//! insert-if-absent, exactly as it would have had it run after the removal. That virtual owner is
//! then verified against the API like any other, so no dependent is left hanging under a node
//! nobody will look at again.
//!
//! Only the UID's own builder replaces or removes its entry, and every insertion of a new node,
//! by any builder, is an insert-if-absent ([`Graph::link`] for virtual owners,
//! [`Graph::insert_if_absent`] for observed objects), so no node holding edges is ever
//! overwritten. So a retry loop takes at most one extra turn per concurrent
//! replacement, and the map entry a builder acts on is always the one it read.
//!
//! `loom_models.rs` model-checks this protocol on the real node and graph code (each node's lock
//! and flags come from [`crate::sync`], each map shard is a linearizable stand-in for papaya, see
//! `shard.rs`): every edge writer racing a replacement or a removal of the owner, and links from
//! two partitions racing to create the same virtual owner
//! (`RUSTFLAGS="--cfg kube_gc_loom" cargo test --release --lib graph::`).

use super::{Graph, Handle, Identity, Uid};

/// What [`Graph::link`] found for the owner.
pub enum Linked {
    /// The owner was in the graph; the edge is on it.
    Existing(Handle),
    /// No owner was in the graph; this new virtual node now holds the edge.
    CreatedVirtual(Handle),
}

impl Graph {
    /// Adds `dependent` to the dependents of the live node for `owner_uid`, or, when there is
    /// none, inserts `make_virtual()` with the edge already on it.
    pub fn link(&self, owner_uid: &Uid, dependent: &Handle, make_virtual: impl Fn() -> Handle) -> Linked {
        loop {
            match self.get(owner_uid) {
                Some(owner) => {
                    if owner.add_dependent(dependent.clone()) {
                        return Linked::Existing(owner);
                    }
                }
                None => {
                    let owner = make_virtual();
                    owner.add_dependent(dependent.clone());
                    if self.insert_if_absent(&owner) {
                        return Linked::CreatedVirtual(owner);
                    }
                }
            }
        }
    }

    /// Removes `dependent` from the dependents of the live node for `owner_uid`, if any.
    pub fn unlink(&self, owner_uid: &Uid, dependent: &Handle) {
        while let Some(owner) = self.get(owner_uid) {
            if owner.remove_dependent(dependent) {
                return;
            }
        }
    }

    /// In the live node for `owner_uid`, replaces the dependent whose coordinates are `old`'s by
    /// `new`, if there is one (spec §3.3 step 1, "replace if it exists").
    pub fn relink(&self, owner_uid: &Uid, old: &Identity, new: &Handle) {
        while let Some(owner) = self.get(owner_uid) {
            let done = owner.with_live_dependents(|set| {
                set.replace(
                    |d| {
                        let id = d.identity();
                        id.uid == old.uid && id.name == old.name && id.type_meta == old.type_meta
                    },
                    new.clone(),
                )
            });
            if done.is_some() {
                return;
            }
        }
    }

    /// Builder only: inserts a newly observed node unless another builder has meanwhile created a
    /// (virtual) node for its UID; true if inserted.
    pub fn insert_if_absent(&self, node: &Handle) -> bool {
        self.shard(&node.identity().uid).try_insert(node)
    }

    /// Builder only: replaces `old` in the map by a clone with `identity` and every edge `old`
    /// had; `old` is retired.
    pub fn replace(&self, old: &Handle, identity: Identity) -> Handle {
        old.retire_into_clone(identity, |new| self.insert(new.clone()))
    }

    /// Builder only: removes `node` from the map and retires it; returns its dependents.
    pub fn remove_node(&self, node: &Handle) -> Vec<Handle> {
        node.retire(|set| {
            self.remove(&node.identity().uid);
            let dependents: Vec<Handle> = set.iter().cloned().collect();
            // A self-owned node would otherwise keep itself alive.
            set.remove(node);
            dependents
        })
    }
}

#[cfg(all(test, not(kube_gc_loom)))]
mod tests {
    use super::*;
    use crate::graph::{Name, Sym, TypeMeta};
    use std::sync::Arc;

    fn identity(uid: &str) -> Identity {
        Identity {
            type_meta: TypeMeta::new(Sym::new("v1"), Sym::new("ConfigMap")),
            name: Name::new(uid),
            uid: Uid::parse(uid),
            namespace: Sym::new("ns"),
        }
    }

    #[test]
    fn link_should_land_on_the_clone_when_the_owner_was_replaced() {
        let graph = Graph::new();
        let owner = Handle::new(identity("o"), &[], true);
        graph.insert(owner.clone());
        let clone = graph.replace(&owner, identity("o"));
        let dep = Handle::new(identity("d"), &[], false);
        assert!(matches!(graph.link(&Uid::parse("o"), &dep, || unreachable!()), Linked::Existing(h) if h == clone));
        assert!(owner.dependents().is_empty(), "no edge on the retired handle");
        assert_eq!(clone.dependents(), vec![dep]);
    }

    #[test]
    fn link_should_create_a_virtual_owner_when_the_owner_was_removed() {
        let graph = Graph::new();
        let owner = Handle::new(identity("o"), &[], false);
        graph.insert(owner.clone());
        assert!(graph.remove_node(&owner).is_empty());
        let dep = Handle::new(identity("d"), &[], false);
        let virtual_owner = || Handle::new(identity("o"), &[], true);
        let Linked::CreatedVirtual(created) = graph.link(&Uid::parse("o"), &dep, virtual_owner) else {
            panic!("expected a new virtual owner");
        };
        assert!(created.is_virtual());
        assert_eq!(graph.get(&Uid::parse("o")), Some(created));
        assert!(!owner.add_dependent(dep), "a retired handle takes no edge");
    }

    #[test]
    fn concurrent_links_and_removals_should_leave_every_dependent_on_a_live_node() {
        // Two threads: one links dependents to an owner UID, the other keeps removing and
        // re-creating that owner. Every dependent must end up on whatever node is in the map, or
        // on a node that was removed after the edge was written (and was returned by remove_node).
        let graph = Arc::new(Graph::new());
        let uid = Uid::parse("o");
        graph.insert(Handle::new(identity("o"), &[], false));
        let deps: Vec<Handle> = (0..20_000)
            .map(|i| Handle::new(identity(&format!("d{i}")), &[], false))
            .collect();
        let start = std::sync::Barrier::new(2);
        let removals = std::sync::atomic::AtomicUsize::new(0);
        let reported = std::thread::scope(|scope| {
            let linker = scope.spawn(|| {
                start.wait();
                // Linking is fast: go round again (relinking is harmless) until the remover has
                // raced it a few times, within a bounded number of rounds.
                for _ in 0..1_000 {
                    for d in &deps {
                        graph.link(&uid, d, || Handle::new(identity("o"), &[], true));
                    }
                    if removals.load(std::sync::atomic::Ordering::Relaxed) >= 20 {
                        break;
                    }
                }
            });
            let mut reported = Vec::new();
            start.wait();
            while !linker.is_finished() {
                if let Some(owner) = graph.get(&uid) {
                    reported.extend(graph.remove_node(&owner));
                    removals.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
            let removals = removals.load(std::sync::atomic::Ordering::Relaxed);
            assert!(removals > 0, "the owner was never removed while links were written");
            reported
        });
        let reported: std::collections::HashSet<Handle> = reported.into_iter().collect();
        let live: std::collections::HashSet<Handle> = graph
            .get(&uid)
            .map(|o| o.dependents())
            .unwrap_or_default()
            .into_iter()
            .collect();
        for d in &deps {
            assert!(
                live.contains(d) || reported.contains(d),
                "edge to {:?} lost",
                d.identity().name
            );
        }
    }
}
