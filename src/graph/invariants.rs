//! Once the builders are quiet, owner references and `dependents` sets mirror each other exactly,
//! through the handles the map holds now.
//!
//! That holds across an owner's removal too. The dependents of a removed node keep naming its UID
//! until each is collected or patched, and some never are (one held by a finalizer, a
//! cluster-scoped object naming a namespaced owner). When a node for that UID appears again — a
//! virtual owner made by another dependent's reference, possibly applied by another partition
//! after the removal, or the object observed behind a lagging watch — it starts with the edges
//! the removal left adrift (see [`super::edges`]), so it lists every dependent that names it.
//!
//! [`check`] states that as four rules and lists every violation it finds:
//!
//! 1. each node is the map's current handle for its own UID (the map key is the identity's UID);
//! 2. for each owner reference of a node, the owner's node, if the map has one, lists this node's
//!    current handle among its dependents (by pointer, as queues compare them);
//! 3. each dependent listed by a node is the current handle for its UID, and still has an owner
//!    reference to that node's UID;
//! 4. virtual nodes have no owners.
//!
//! The check reads the graph without a lock, so it only means something while no builder writes.
//! Tests call it at quiescence; [`assert_ok`] is the panicking form for them.

use super::{Graph, Handle};

/// Every violation of the module's rules, as one human-readable line each; empty when the graph
/// is consistent.
pub fn check(graph: &Graph) -> Vec<String> {
    let mut violations = Vec::new();
    for node in graph.handles() {
        check_current(graph, &node, &mut violations);
        check_owners(graph, &node, &mut violations);
        check_dependents(graph, &node, &mut violations);
    }
    violations
}

/// Checks the graph and panics listing every violation; for tests.
///
/// # Panics
///
/// When [`check`] finds any violation.
pub fn assert_ok(graph: &Graph) {
    let violations = check(graph);
    assert!(
        violations.is_empty(),
        "graph invariants violated:\n  {}",
        violations.join("\n  ")
    );
}

/// Rules 1 and 4.
fn check_current(graph: &Graph, node: &Handle, violations: &mut Vec<String>) {
    let id = node.identity();
    if !graph.get(&id.uid).is_some_and(|current| Handle::ptr_eq(&current, node)) {
        violations.push(format!("{id} is in the map, but not under its own uid"));
    }
    let owners = node.with_owners(<[_]>::len);
    if node.is_virtual() && owners > 0 {
        violations.push(format!("{id} is virtual but has {owners} owner reference(s)"));
    }
}

/// Rule 2.
fn check_owners(graph: &Graph, node: &Handle, violations: &mut Vec<String>) {
    for owner_ref in node.owners() {
        let Some(owner) = graph.get(&owner_ref.uid) else {
            continue;
        };
        if !owner.dependents().iter().any(|d| Handle::ptr_eq(d, node)) {
            violations.push(format!(
                "{} refers to owner {}, whose dependents lack its current handle",
                node.identity(),
                owner.identity()
            ));
        }
    }
}

/// Rule 3.
fn check_dependents(graph: &Graph, owner: &Handle, violations: &mut Vec<String>) {
    let owner_uid = &owner.identity().uid;
    for dependent in owner.dependents() {
        let id = dependent.identity();
        if !graph
            .get(&id.uid)
            .is_some_and(|current| Handle::ptr_eq(&current, &dependent))
        {
            violations.push(format!(
                "{} lists dependent {id}, which is not the map's current handle for that uid",
                owner.identity()
            ));
        }
        if !dependent.with_owners(|refs| refs.iter().any(|r| r.uid == *owner_uid)) {
            violations.push(format!(
                "{} lists dependent {id}, which has no owner reference to it",
                owner.identity()
            ));
        }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::graph::GraphWriter;
    use crate::graph::{Identity, OwnerRef, Sym, TypeMeta, Uid};

    fn identity(uid: &str) -> Identity {
        Identity::new(
            TypeMeta::new(Sym::new("v1"), Sym::new("Pod")),
            uid,
            Uid::parse(uid),
            Sym::new("ns"),
        )
    }

    fn owner_ref(uid: &str) -> OwnerRef {
        let id = identity(uid);
        OwnerRef::new(
            TypeMeta::new(id.api_version().clone(), id.kind().clone()),
            id.name.to_name(),
            id.uid,
            None,
            Some(true),
        )
    }

    /// Inserts an observed node `uid` owned by `owners`, without touching the owners' nodes.
    fn insert(graph: &GraphWriter, uid: &str, owners: &[&str]) -> Handle {
        let refs: Vec<OwnerRef> = owners.iter().map(|o| owner_ref(o)).collect();
        let handle = Handle::new(identity(uid), refs.as_slice(), false);
        graph.insert(handle.clone());
        handle
    }

    /// owner ← dependent, both consistent, plus a dependent whose owner is absent.
    fn consistent_graph() -> (GraphWriter, Handle, Handle) {
        let graph = GraphWriter::new();
        let owner = insert(&graph, "owner", &[]);
        let dependent = insert(&graph, "dependent", &["owner"]);
        owner.add_dependent(dependent.clone());
        insert(&graph, "orphan", &["absent-owner"]);
        (graph, owner, dependent)
    }

    #[test]
    fn check_should_accept_a_consistent_graph_with_an_absent_owner() {
        let (graph, _, _) = consistent_graph();
        assert_eq!(check(&graph), Vec::<String>::new());
        assert_ok(&graph);
    }

    #[test]
    fn check_should_report_an_owner_missing_the_back_edge() {
        let (graph, owner, dependent) = consistent_graph();
        owner.remove_dependent(&dependent);
        let violations = check(&graph);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].contains("whose dependents lack its current handle"));
    }

    #[test]
    fn check_should_report_a_stale_dependent_handle() {
        let (graph, _, dependent) = consistent_graph();
        // The builder replaced the dependent's node but forgot to fix up the owner.
        let replacement = dependent.clone_with_identity(dependent.identity().clone());
        graph.insert(replacement);
        let violations = check(&graph);
        assert_eq!(violations.len(), 2, "{violations:?}");
        assert!(violations.iter().any(|v| v.contains("lack its current handle")));
        assert!(violations.iter().any(|v| v.contains("not the map's current handle")));
    }

    #[test]
    fn check_should_report_a_dependent_without_a_reference_to_its_owner() {
        let (graph, _, dependent) = consistent_graph();
        dependent.observe(
            Some(&crate::graph::OwnerRefs::default()),
            crate::graph::Observation::default(),
        );
        let violations = check(&graph);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].contains("has no owner reference to it"));
    }

    #[test]
    fn check_should_report_a_virtual_node_with_owners() {
        let graph = GraphWriter::new();
        let refs = vec![owner_ref("absent-owner")];
        graph.insert(Handle::new(identity("ghost"), refs.as_slice(), true));
        let violations = check(&graph);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].contains("is virtual"));
    }

    #[test]
    #[should_panic(expected = "graph invariants violated")]
    fn assert_ok_should_panic_listing_violations() {
        let (graph, owner, dependent) = consistent_graph();
        owner.remove_dependent(&dependent);
        assert_ok(&graph);
    }
}
