//! Loom models of the cross-partition edge protocol of [`super::edges`] and of the map's lock-free
//! table ([`super::raw::table`]): the real [`GraphWriter`], node and table code, with the node's lock and
//! flags and the table's slots, counters and writer lock on loom's primitives.
//! Each model has two or three threads, one of which plays the owner's builder (the only one that
//! replaces or removes the owner), and is named after the scenario it checks.
//!
//! Run them with
//!
//! ```text
//! cargo test --release -p kube-gc --lib --features loom -- graph::
//! ```
//!
//! Each model ends by checking where every edge went: on the node the map holds for the owner's
//! UID at the end, or, when it holds none, adrift and in what [`GraphWriter::remove_node`] returned to
//! its builder (which re-queues it), and never written to a handle after it was retired.

use super::raw::table::{self, UidTable};
use super::{GraphWriter, Handle, Identity, Linked, Name, Node, OwnerRefs, Sym, TypeMeta, Uid};
use loom::sync::Arc;
use loom::thread;

/// Runs `f` under loom. Each lookup probes the real table, whose every slot load is a point where
/// loom may branch, so a run has more branches than loom's default allows; preemptions stay
/// bounded (as tokio bounds its models) so that the search ends in seconds.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 100_000;
    builder.preemption_bound.get_or_insert(3);
    builder.check(f);
}

/// The owner every model links to.
const OWNER: &str = "owner";

fn identity(uid: &str, kind: &str) -> Identity {
    Identity::new(
        TypeMeta::new(Sym::new("v1"), Sym::new(kind)),
        Name::new(uid),
        Uid::parse(uid),
        Sym::new("ns"),
    )
}

/// An observed node with no owners.
fn observed(uid: &str) -> Handle {
    Handle::new(identity(uid, "ConfigMap"), OwnerRefs::NONE, false)
}

/// The virtual owner `link` creates when the owner is absent, as the builder's factory does.
fn virtual_owner() -> Handle {
    Handle::new(identity(OWNER, "ConfigMap"), OwnerRefs::NONE, true)
}

/// The factory for a `link` whose owner is in the map throughout, so must never be called.
fn no_virtual_owner() -> Handle {
    panic!("a virtual owner was created while the owner stayed in the graph")
}

fn owner_uid() -> Uid {
    Uid::parse(OWNER)
}

/// A graph holding the observed owner, shared with the threads.
fn graph_with_owner() -> (GraphWriter, Handle) {
    let graph = GraphWriter::new();
    let owner = observed(OWNER);
    graph.insert(owner.clone());
    (graph, owner)
}

/// Runs `link(OWNER, dependent)` on another thread.
fn spawn_link(graph: &GraphWriter, dependent: &Handle, make_virtual: fn() -> Handle) -> thread::JoinHandle<Linked> {
    let (graph, dependent) = (graph.clone(), dependent.clone());
    thread::spawn(move || graph.link(&owner_uid(), &dependent, make_virtual, Node::handle))
}

/// A graph holding the observed owner and an observed `dependent` that another thread is linking
/// to it, with `make_virtual` as the link's factory.
fn link_from_another_thread(make_virtual: fn() -> Handle) -> (GraphWriter, Handle, Handle, thread::JoinHandle<Linked>) {
    let (graph, owner) = graph_with_owner();
    let dependent = observed("dependent");
    let linker = spawn_link(&graph, &dependent, make_virtual);
    (graph, owner, dependent, linker)
}

/// A graph holding the observed owner with an edge to an observed `dependent`, which another
/// thread is unlinking.
fn unlink_from_another_thread() -> (GraphWriter, Handle, Handle, thread::JoinHandle<()>) {
    let (graph, owner) = graph_with_owner();
    let dependent = observed("dependent");
    assert!(owner.add_dependent(dependent.clone()));
    let unlinker = thread::spawn({
        let (graph, dependent) = (graph.clone(), dependent.clone());
        move || graph.unlink(&owner_uid(), &dependent)
    });
    (graph, owner, dependent, unlinker)
}

#[test]
fn link_racing_remove_node_leaves_the_edge_on_a_new_virtual_owner_or_returns_it() {
    model(|| {
        let (graph, owner, dependent, linker) = link_from_another_thread(virtual_owner);
        let returned = graph.remove_node(&owner);
        let linked = linker.join().expect("linker");

        let current = graph.get(&owner_uid());
        match linked {
            Linked::Existing(found) => {
                assert_eq!(found, owner, "the only existing owner is the removed one");
                assert_eq!(
                    returned,
                    std::slice::from_ref(&dependent),
                    "an edge written before the removal is returned"
                );
                assert_eq!(current, None, "nothing re-created the owner");
                assert_eq!(graph.adrift_of(&owner_uid()), [dependent], "and left adrift");
            }
            Linked::CreatedVirtual(created) => {
                assert!(returned.is_empty(), "an edge written after the removal is not returned");
                assert!(created.is_virtual());
                assert_eq!(current.as_ref(), Some(&created), "the new virtual owner is in the map");
                assert_eq!(created.dependents(), [dependent], "and holds the edge");
            }
        }
        assert!(owner.is_retired());
    });
}

#[test]
fn link_racing_replace_lands_on_the_clone_or_is_copied_by_it() {
    model(|| {
        let (graph, owner, dependent, linker) = link_from_another_thread(no_virtual_owner);
        let clone = graph.replace(&owner, identity(OWNER, "Secret"));
        let Linked::Existing(found) = linker.join().expect("linker") else {
            unreachable!("no_virtual_owner panics");
        };

        assert_eq!(graph.get(&owner_uid()).as_ref(), Some(&clone));
        assert_eq!(
            clone.dependents(),
            std::slice::from_ref(&dependent),
            "the clone holds the edge"
        );
        if found == clone {
            assert!(owner.dependents().is_empty(), "no edge on the retired handle");
        } else {
            assert_eq!(found, owner);
            assert_eq!(owner.dependents(), [dependent], "written before the clone copied it");
        }
    });
}

#[test]
fn unlink_racing_replace_leaves_no_edge_on_the_clone() {
    model(|| {
        let (graph, owner, _dependent, unlinker) = unlink_from_another_thread();
        let clone = graph.replace(&owner, identity(OWNER, "Secret"));
        unlinker.join().expect("unlinker");

        assert_eq!(graph.get(&owner_uid()).as_ref(), Some(&clone));
        assert!(clone.dependents().is_empty(), "the edge survived on the clone");
    });
}

#[test]
fn relink_racing_replace_leaves_the_new_dependent_on_the_clone() {
    model(|| {
        let (graph, owner) = graph_with_owner();
        let old = observed("dependent");
        assert!(owner.add_dependent(old.clone()));
        let new = old.clone_with_identity(identity("dependent", "Secret"));
        let relinker = thread::spawn({
            let (graph, old, new) = (graph.clone(), old.clone(), new.clone());
            move || graph.relink(&owner_uid(), old.identity(), &new)
        });
        let clone = graph.replace(&owner, identity(OWNER, "Secret"));
        relinker.join().expect("relinker");

        assert_eq!(graph.get(&owner_uid()).as_ref(), Some(&clone));
        assert_eq!(clone.dependents(), [new], "the clone holds the new handle only");
    });
}

#[test]
fn two_links_to_an_absent_owner_create_one_virtual_owner_holding_both_edges() {
    model(|| {
        let graph = GraphWriter::new();
        let (first, second) = (observed("first"), observed("second"));
        let other = spawn_link(&graph, &second, virtual_owner);
        let mine = graph.link(&owner_uid(), &first, virtual_owner, Node::handle);
        let theirs = other.join().expect("linker");

        let created = match (mine, theirs) {
            (Linked::CreatedVirtual(created), Linked::Existing(found))
            | (Linked::Existing(found), Linked::CreatedVirtual(created)) => {
                assert_eq!(found, created, "the second link found the first one's owner");
                created
            }
            _ => panic!("exactly one of two links must create the virtual owner"),
        };
        assert_eq!(graph.get(&owner_uid()).as_ref(), Some(&created));
        assert_eq!(graph.len(), 1);
        let mut dependents = created.dependents();
        dependents.sort_by_key(|d| d.identity().name.to_string());
        assert_eq!(dependents, [first, second]);
    });
}

#[test]
fn link_racing_the_owners_first_observation_leaves_the_edge_on_the_node_in_the_map() {
    model(|| {
        let graph = GraphWriter::new();
        let dependent = observed("dependent");
        let linker = spawn_link(&graph, &dependent, virtual_owner);
        let owner = observed(OWNER);
        let inserted = graph.insert_if_absent(&owner);
        let linked = linker.join().expect("linker");

        // The owner's builder applies its event to the virtual owner when its insert loses, so
        // the edge must be on whichever node won.
        let winner = match linked {
            Linked::Existing(found) => {
                assert!(
                    inserted,
                    "link found an owner only because the observed one was inserted"
                );
                assert_eq!(found, owner);
                found
            }
            Linked::CreatedVirtual(created) => {
                assert!(!inserted, "the observed owner cannot be inserted over the virtual one");
                created
            }
        };
        assert_eq!(graph.get(&owner_uid()).as_ref(), Some(&winner));
        assert_eq!(winner.dependents(), [dependent]);
    });
}

#[test]
fn link_racing_replace_then_remove_node_follows_the_clone_or_creates_a_virtual_owner() {
    model(|| {
        let (graph, owner, dependent, linker) = link_from_another_thread(virtual_owner);
        let clone = graph.replace(&owner, identity(OWNER, "Secret"));
        let returned = graph.remove_node(&clone);
        let linked = linker.join().expect("linker");

        let current = graph.get(&owner_uid());
        match linked {
            Linked::Existing(found) => {
                assert!(found == owner || found == clone);
                assert_eq!(
                    returned,
                    std::slice::from_ref(&dependent),
                    "the clone had the edge when it was removed"
                );
                assert_eq!(current, None);
                assert_eq!(graph.adrift_of(&owner_uid()), [dependent]);
            }
            Linked::CreatedVirtual(created) => {
                assert!(returned.is_empty());
                assert_eq!(current.as_ref(), Some(&created));
                assert_eq!(created.dependents(), [dependent]);
            }
        }
    });
}

#[test]
fn two_links_racing_remove_node_lose_no_edge_and_share_one_virtual_owner() {
    // Unbounded: about 25k interleavings, 2.4 s in release mode.
    model(|| {
        let (graph, owner) = graph_with_owner();
        let (first, second) = (observed("first"), observed("second"));
        let linkers = [&first, &second].map(|d| spawn_link(&graph, d, virtual_owner));
        let returned = graph.remove_node(&owner);
        let linked = linkers.map(|l| l.join().expect("linker"));

        let current = graph.get(&owner_uid());
        let on_current = current.as_ref().map(|c| c.dependents()).unwrap_or_default();
        let mut created = 0;
        for (dependent, linked) in [&first, &second].into_iter().zip(&linked) {
            match linked {
                Linked::Existing(found) if *found == owner => {
                    assert!(returned.contains(dependent), "an edge on the removed owner is returned");
                }
                Linked::Existing(found) => assert_eq!(Some(found), current.as_ref()),
                Linked::CreatedVirtual(found) => {
                    created += 1;
                    assert_eq!(Some(found), current.as_ref(), "the virtual owner is in the map");
                }
            }
            // An edge the removal returned is adrift, or on the virtual owner made since.
            let adrift = graph.adrift_of(&owner_uid());
            assert!(
                on_current.contains(dependent) || adrift.contains(dependent),
                "the edge to {:?} is lost",
                dependent.identity().name
            );
            assert!(
                !(on_current.contains(dependent) && adrift.contains(dependent)),
                "the edge to {:?} is both on the owner and adrift",
                dependent.identity().name
            );
        }
        assert!(created <= 1, "two virtual owners for one UID");
        assert_eq!(
            created == 1,
            current.is_some(),
            "only a created virtual owner is in the map"
        );
    });
}

#[test]
fn link_racing_remove_node_puts_the_edges_left_adrift_on_the_new_virtual_owner() {
    model(|| {
        let (graph, owner) = graph_with_owner();
        let (earlier, later) = (observed("earlier"), observed("later"));
        assert!(owner.add_dependent(earlier.clone()));
        let linker = spawn_link(&graph, &later, virtual_owner);
        let returned = graph.remove_node(&owner);
        let linked = linker.join().expect("linker");

        let current = graph.get(&owner_uid());
        let mut on_current = current.as_ref().map(|c| c.dependents()).unwrap_or_default();
        on_current.sort_by_key(|d| d.identity().name.to_string());
        let mut adrift = graph.adrift_of(&owner_uid());
        adrift.sort_by_key(|d| d.identity().name.to_string());
        match linked {
            Linked::Existing(found) => {
                assert_eq!(found, owner);
                assert_eq!(current, None);
                assert_eq!(returned.len(), 2, "both edges were on the removed owner");
                assert_eq!(adrift, [earlier, later], "and both are adrift");
            }
            Linked::CreatedVirtual(created) => {
                assert_eq!(returned, std::slice::from_ref(&earlier));
                assert_eq!(current.as_ref(), Some(&created));
                assert_eq!(
                    on_current,
                    [earlier, later],
                    "the virtual owner took the edge left adrift"
                );
                assert!(adrift.is_empty(), "nothing is adrift for an owner in the map");
            }
        }
    });
}

#[test]
fn unlink_racing_remove_node_leaves_the_edge_neither_adrift_nor_on_an_owner() {
    model(|| {
        let (graph, owner, _dependent, unlinker) = unlink_from_another_thread();
        graph.remove_node(&owner);
        unlinker.join().expect("unlinker");

        assert_eq!(graph.get(&owner_uid()), None);
        assert!(graph.adrift_of(&owner_uid()).is_empty(), "the unlinked edge is adrift");
        assert_eq!(graph.adrift_owners(), 0);
    });
}

// The lock-free table on its own: one writer (a shard's builder holds its lock) racing a reader
// that takes no lock. Tables start at one group of slots here, so a seventh entry resizes.

/// A table holding `entries` observed nodes, shared with the threads.
fn table_with(entries: &[&str]) -> (Arc<UidTable>, Vec<Handle>) {
    let table = Arc::new(UidTable::default());
    let handles: Vec<Handle> = entries.iter().map(|uid| observed(uid)).collect();
    for handle in &handles {
        table.insert(handle.clone());
    }
    (table, handles)
}

/// A lookup's answer is either nothing or a node with the UID asked for.
fn found_is(found: Option<Handle>, uid: &str) -> Option<Handle> {
    if let Some(node) = &found {
        assert_eq!(
            node.identity().uid,
            Uid::parse(uid),
            "a lookup returned another object's node"
        );
    }
    found
}

#[test]
fn table_reader_racing_a_resize_finds_every_entry_that_stays() {
    model(|| {
        let (table, handles) = table_with(&["a", "b", "c", "d", "e", "f"]);
        let writer = thread::spawn({
            let table = table.clone();
            move || table.insert(observed("g"))
        });
        assert_eq!(found_is(table.get(&Uid::parse("a")), "a").as_ref(), Some(&handles[0]));
        found_is(table.get(&Uid::parse("g")), "g");
        writer.join().expect("writer");
        assert_eq!(table.len(), 7);
        assert!(
            found_is(table.get(&Uid::parse("g")), "g").is_some(),
            "the new entry is there"
        );
    });
}

#[test]
fn table_reader_racing_a_removal_and_reuse_of_the_slot_never_gets_another_objects_node() {
    // Two UIDs whose probes start at the same slot, so the second reuses the first's tombstone.
    let (first, second) = same_start_slot();
    model(move || {
        let (table, handles) = table_with(&[first]);
        let writer = thread::spawn({
            let table = table.clone();
            move || {
                table.remove(&Uid::parse(first)).expect("present");
                table.insert(observed(second));
            }
        });
        let before = found_is(table.get(&Uid::parse(first)), first);
        assert!(before.is_none() || before.as_ref() == Some(&handles[0]));
        found_is(table.get(&Uid::parse(second)), second);
        writer.join().expect("writer");
        assert_eq!(table.get(&Uid::parse(first)), None);
        assert!(table.get(&Uid::parse(second)).is_some());
    });
}

#[test]
fn table_reader_racing_a_replacement_gets_the_old_node_or_the_new_one() {
    model(|| {
        let (table, handles) = table_with(&["a"]);
        let replacement = observed("a");
        let writer = thread::spawn({
            let (table, replacement) = (table.clone(), replacement.clone());
            move || table.insert(replacement)
        });
        let seen = found_is(table.get(&Uid::parse("a")), "a").expect("never absent");
        assert!(seen == handles[0] || seen == replacement);
        writer.join().expect("writer");
        assert_eq!(table.get(&Uid::parse("a")), Some(replacement));
    });
}

/// Two of the names `u0`, `u1`, … whose UIDs start their probe at the same slot of the smallest
/// table.
fn same_start_slot() -> (&'static str, &'static str) {
    let names: Vec<&'static str> = (0..64).map(|i| &*format!("u{i}").leak()).collect();
    let slot = |name: &str| table::fragment(Uid::parse(name).hash64()) as usize % table::MIN_SLOTS;
    names
        .iter()
        .enumerate()
        .find_map(|(i, a)| names[i + 1..].iter().find(|b| slot(a) == slot(b)).map(|b| (*a, *b)))
        .expect("64 names over 8 slots share one")
}
