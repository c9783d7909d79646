//! Owner → dependent edges across builder partitions (DESIGN §3, "cross-partition edges").
//!
//! Invariant: an edge is never written to a handle that has left the map. Each handle carries a
//! `retired` mark under its edges lock. The builder that owns a UID retires its node — when
//! it replaces the node by a clone ([`GraphWriter::replace`]) or removes it ([`GraphWriter::remove_node`]) —
//! by setting the mark and updating the map *while holding that lock*. Every edge writer
//! ([`GraphWriter::link`], [`GraphWriter::unlink`], [`GraphWriter::relink`]) takes the same lock, and if it finds
//! the mark it looks the UID up again: by then the map already holds the clone (which copied every
//! edge written before the mark) or nothing, in which case `link` creates a virtual owner with an
//! insert-if-absent, exactly as it would have had it run after the removal. That virtual owner is
//! then verified against the API like any other, so no dependent is left hanging under a node
//! nobody will look at again.
//!
//! Only the UID's own builder replaces or removes its entry, and every insertion of a new node,
//! by any builder, is an insert-if-absent ([`GraphWriter::link`] for virtual owners,
//! [`GraphWriter::insert_if_absent`] for observed objects), so no node holding edges is ever
//! overwritten. So a retry loop takes at most one extra turn per concurrent
//! replacement, and the map entry a builder acts on is always the one it read.
//!
//! Edges outlive their owner's node. A node removed while it still has dependents (its object was
//! deleted, or a worker found it absent) leaves them *adrift*: the dependents still name its UID
//! until each is collected or patched, and any of them may stay for good (one held by a
//! finalizer, a cluster-scoped object naming a namespaced owner, which is never collected). So
//! the graph keeps the adrift edges by owner UID, and a node created for that UID later — a
//! virtual owner that another dependent's reference makes, or the object itself observed behind
//! a lagging watch — starts with them. Otherwise that node would lack them for its whole life,
//! which for a virtual owner no worker can verify (a namespaced kind named by a cluster-scoped
//! object, an unknown kind) is forever. `unlink` and `relink` edit the adrift edges when the
//! owner has no node, as they edit the node's dependents when it has one.
//!
//! The adrift edges of the UIDs of one map shard sit under the shard's writer lock, which every
//! insert into the shard and every removal from it takes, so whether a UID has a node changes
//! only under that lock. A writer that holds it and finds no node sees every edge the last
//! removal left adrift, and no node can appear before it is done; an insert takes its UID's
//! adrift edges in the critical section that fills the slot, so it costs no lock of its own. The
//! lock is taken with no node lock held, or under the lock of the node being removed or replaced,
//! and nothing holding it waits for the lock of a node in the map (an insert locks only the node
//! it inserts, which no other thread can reach yet), so it adds no deadlock.
//!
//! `loom_models.rs` model-checks this protocol on the real node, table and graph code (the node's
//! lock and flags and the table's slots come from [`crate::sync`]): every edge writer racing a
//! replacement or a removal of the owner, and links from two partitions racing to create the same
//! virtual owner (`cargo test --release -p kube-gc --lib --features loom -- graph::`).

use super::dependents::Dependents;
use super::{Graph, GraphWriter, Handle, Identity, Node, Uid};
use std::collections::HashMap;

/// What [`GraphWriter::link`] found for the owner.
pub enum Linked<R = Handle> {
    /// The owner was in the graph; the edge is on it, and this is what the caller's function
    /// made of it.
    Existing(R),
    /// No owner was in the graph; this new virtual node now holds the edge, and the edges the
    /// owner's last node left adrift.
    CreatedVirtual(Handle),
}

/// The adrift edges of the owners of one map shard: owner UID → dependents (module docs).
#[derive(Default)]
pub(super) struct Adrift(HashMap<Uid, Dependents, foldhash::fast::FixedState>);

impl GraphWriter {
    /// Adds `dependent` to the dependents of the live node for `owner_uid` and returns what
    /// `existing` makes of that node, or, when there is none, inserts `make_virtual()` with the
    /// edge already on it, and every edge adrift for `owner_uid`.
    ///
    /// An existing owner is borrowed, not cloned: most owners have their dependents spread over
    /// every partition, so a reference taken and dropped here would be two more writes, per
    /// dependent, to a cache line that every builder's core writes.
    pub fn link<R>(
        &self,
        owner_uid: &Uid,
        dependent: &Handle,
        make_virtual: impl Fn() -> Handle,
        existing: impl Fn(&Node) -> R,
    ) -> Linked<R> {
        loop {
            let linked = self.read(owner_uid, |owner| {
                owner.add_dependent(dependent.clone()).then(|| existing(owner))
            });
            match linked {
                Some(Some(found)) => return Linked::Existing(found),
                // Retired meanwhile: the map holds its clone, or nothing, by now.
                Some(None) => {}
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

    /// Removes `dependent` from the dependents of the live node for `owner_uid`, or from the
    /// edges adrift for `owner_uid` when it has no node.
    pub fn unlink(&self, owner_uid: &Uid, dependent: &Handle) {
        loop {
            let done = match self.read(owner_uid, |owner| owner.remove_dependent(dependent)) {
                Some(removed) => removed,
                None => self.edit_adrift(owner_uid, |set| {
                    set.remove(dependent);
                }),
            };
            if done {
                return;
            }
        }
    }

    /// In the live node for `owner_uid` (or the edges adrift for it), replaces the dependent whose
    /// coordinates are `old`'s by `new`, if there is one (spec §3.3 step 1, "replace if it
    /// exists").
    pub fn relink(&self, owner_uid: &Uid, old: &Identity, new: &Handle) {
        let replace = |set: &mut Dependents| {
            set.replace(
                |d| {
                    let id = d.identity();
                    id.uid == old.uid && id.name == old.name && id.type_meta() == old.type_meta()
                },
                new.clone(),
            );
        };
        loop {
            let live = |owner: &Node| owner.with_live_dependents(replace).is_some();
            let done = match self.read(owner_uid, live) {
                Some(done) => done,
                None => self.edit_adrift(owner_uid, replace),
            };
            if done {
                return;
            }
        }
    }

    /// Runs `f` on the edges adrift for `owner_uid` (dropping them once empty) unless a node for
    /// it appeared meanwhile; false, with nothing done, if one did.
    fn edit_adrift(&self, owner_uid: &Uid, f: impl FnOnce(&mut Dependents)) -> bool {
        let mut shard = self.shard(owner_uid).lock();
        if shard.contains(owner_uid) {
            return false;
        }
        let adrift = shard.beside();
        if let Some(set) = adrift.0.get_mut(owner_uid) {
            f(set);
            if set.is_empty() {
                adrift.0.remove(owner_uid);
            }
        }
        true
    }

    /// Builder only: inserts a new node (an observed object, or a virtual owner from
    /// [`GraphWriter::link`]) unless another builder has meanwhile created a (virtual) node for its UID;
    /// true if inserted. An inserted node takes the edges adrift for its UID.
    pub fn insert_if_absent(&self, node: &Handle) -> bool {
        let uid = &node.identity().uid;
        self.shard(uid).lock().try_insert(node, |adrift| {
            if let Some(edges) = adrift.0.remove(uid) {
                // Not in the map yet, so nobody else holds its lock.
                node.with_live_dependents(|set| {
                    for d in edges.iter() {
                        set.insert(d.clone());
                    }
                });
            }
        })
    }

    /// Builder only: replaces `old` in the map by a clone with `identity` and every edge `old`
    /// had; `old` is retired.
    pub fn replace(&self, old: &Handle, identity: Identity) -> Handle {
        old.retire_into_clone(identity, |new| self.insert(new.clone()))
    }

    /// Builder only: removes `node` from the map and retires it, leaving its edges adrift;
    /// returns its dependents.
    pub fn remove_node(&self, node: &Handle) -> Vec<Handle> {
        let uid = &node.identity().uid;
        node.retire(|set| {
            let mut shard = self.shard(uid).lock();
            shard.remove(uid);
            let dependents: Vec<Handle> = set.iter().cloned().collect();
            // A self-owned node would otherwise keep itself alive.
            set.remove(node);
            if !set.is_empty() {
                let kept = shard.beside().0.entry(uid.clone()).or_default();
                for d in set.iter() {
                    kept.insert(d.clone());
                }
            }
            dependents
        })
    }
}

impl Graph {
    /// Number of owner UIDs that have edges adrift (module docs).
    pub fn adrift_owners(&self) -> usize {
        self.shards.iter().map(|s| s.lock().beside().0.len()).sum()
    }

    /// The dependents adrift for `owner_uid`, in no order.
    #[cfg(test)]
    pub(super) fn adrift_of(&self, owner_uid: &Uid) -> Vec<Handle> {
        self.shard(owner_uid)
            .lock()
            .beside()
            .0
            .get(owner_uid)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::graph::{Name, OwnerRefs, Sym, TypeMeta};

    fn identity(uid: &str) -> Identity {
        Identity::new(
            TypeMeta::new(Sym::new("v1"), Sym::new("ConfigMap")),
            Name::new(uid),
            Uid::parse(uid),
            Sym::new("ns"),
        )
    }

    #[test]
    fn link_should_land_on_the_clone_when_the_owner_was_replaced() {
        let graph = GraphWriter::new();
        let owner = Handle::new(identity("o"), OwnerRefs::NONE, true);
        graph.insert(owner.clone());
        let clone = graph.replace(&owner, identity("o"));
        let dep = Handle::new(identity("d"), OwnerRefs::NONE, false);
        assert!(
            matches!(graph.link(&Uid::parse("o"), &dep, || unreachable!(), Node::handle), Linked::Existing(h) if h == clone)
        );
        assert!(owner.dependents().is_empty(), "no edge on the retired handle");
        assert_eq!(clone.dependents(), vec![dep]);
    }

    #[test]
    fn link_should_create_a_virtual_owner_when_the_owner_was_removed() {
        let graph = GraphWriter::new();
        let owner = Handle::new(identity("o"), OwnerRefs::NONE, false);
        graph.insert(owner.clone());
        assert!(graph.remove_node(&owner).is_empty());
        let dep = Handle::new(identity("d"), OwnerRefs::NONE, false);
        let virtual_owner = || Handle::new(identity("o"), OwnerRefs::NONE, true);
        let Linked::CreatedVirtual(created) = graph.link(&Uid::parse("o"), &dep, virtual_owner, Node::handle) else {
            panic!("expected a new virtual owner");
        };
        assert!(created.is_virtual());
        assert_eq!(graph.get(&Uid::parse("o")), Some(created));
        assert!(!owner.add_dependent(dep), "a retired handle takes no edge");
    }

    #[test]
    fn a_virtual_owner_should_take_the_edges_its_removed_predecessor_left_adrift() {
        // The owner goes with a dependent that keeps its reference (held by a finalizer, say);
        // another dependent's reference then makes a virtual owner for the same UID.
        let graph = GraphWriter::new();
        let owner = Handle::new(identity("o"), OwnerRefs::NONE, false);
        graph.insert(owner.clone());
        let (held, self_owned) = (Handle::new(identity("held"), OwnerRefs::NONE, false), owner.clone());
        assert!(owner.add_dependent(held.clone()) && owner.add_dependent(self_owned));
        assert_eq!(graph.remove_node(&owner).len(), 2, "every dependent is returned");
        assert_eq!(
            graph.adrift_of(&Uid::parse("o")),
            std::slice::from_ref(&held),
            "the removed node is not"
        );

        let newcomer = Handle::new(identity("new"), OwnerRefs::NONE, false);
        let virtual_owner = || Handle::new(identity("o"), OwnerRefs::NONE, true);
        let Linked::CreatedVirtual(created) = graph.link(&Uid::parse("o"), &newcomer, virtual_owner, Node::handle)
        else {
            panic!("expected a new virtual owner");
        };
        let mut dependents = created.dependents();
        dependents.sort_by_key(|d| d.identity().name.to_string());
        assert_eq!(dependents, [held, newcomer]);
        assert_eq!(graph.adrift_owners(), 0);
    }

    #[test]
    fn an_observed_node_should_take_the_edges_left_adrift_for_its_uid() {
        let graph = GraphWriter::new();
        let owner = Handle::new(identity("o"), OwnerRefs::NONE, true);
        graph.insert(owner.clone());
        let dep = Handle::new(identity("d"), OwnerRefs::NONE, false);
        assert!(owner.add_dependent(dep.clone()));
        graph.remove_node(&owner);

        let observed = Handle::new(identity("o"), OwnerRefs::NONE, false);
        assert!(graph.insert_if_absent(&observed));
        assert_eq!(observed.dependents(), [dep]);
        assert!(!graph.insert_if_absent(&Handle::new(identity("o"), OwnerRefs::NONE, false)));
    }

    #[test]
    fn unlink_and_relink_should_edit_the_edges_adrift_when_the_owner_has_no_node() {
        let graph = GraphWriter::new();
        let owner = Handle::new(identity("o"), OwnerRefs::NONE, false);
        graph.insert(owner.clone());
        let (stays, goes) = (
            Handle::new(identity("stays"), OwnerRefs::NONE, false),
            Handle::new(identity("goes"), OwnerRefs::NONE, false),
        );
        assert!(owner.add_dependent(stays.clone()) && owner.add_dependent(goes.clone()));
        graph.remove_node(&owner);

        graph.unlink(&Uid::parse("o"), &goes);
        let renamed = identity("stays").with_type_meta(TypeMeta::new(Sym::new("v1"), Sym::new("Secret")));
        let replacement = stays.clone_with_identity(renamed);
        graph.relink(&Uid::parse("o"), stays.identity(), &replacement);
        assert_eq!(graph.adrift_of(&Uid::parse("o")), std::slice::from_ref(&replacement));

        graph.unlink(&Uid::parse("o"), &replacement);
        assert_eq!(graph.adrift_owners(), 0, "an owner with nothing adrift is dropped");
    }

    #[test]
    fn concurrent_links_and_removals_should_leave_every_dependent_on_a_live_node() {
        // Two threads: one links dependents to an owner UID, the other keeps removing and
        // re-creating that owner. Every dependent must end up on whatever node is in the map, or
        // on a node that was removed after the edge was written (and was returned by remove_node).
        let graph = GraphWriter::new();
        let uid = Uid::parse("o");
        graph.insert(Handle::new(identity("o"), OwnerRefs::NONE, false));
        let deps: Vec<Handle> = (0..20_000)
            .map(|i| Handle::new(identity(&format!("d{i}")), OwnerRefs::NONE, false))
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
                        graph.link(&uid, d, || Handle::new(identity("o"), OwnerRefs::NONE, true), |_| ());
                    }
                    if removals.load(std::sync::atomic::Ordering::Relaxed) >= 20 {
                        break;
                    }
                }
            });
            let mut reported = Vec::new();
            start.wait();
            // A bounded number of removals: each returns every dependent the owner had, so an
            // unbounded remover spinning beside a slow linker collects millions of handles.
            while !linker.is_finished() {
                match graph.get(&uid) {
                    Some(owner) if removals.load(std::sync::atomic::Ordering::Relaxed) < 200 => {
                        reported.extend(graph.remove_node(&owner));
                        removals.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    _ => std::thread::yield_now(),
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
