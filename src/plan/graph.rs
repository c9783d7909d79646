//! A plan's snapshot taken from the collector's graph: the requested objects, everything below
//! them through the graph's dependents, and the owners of each of those, so that the play can
//! tell a dependent's other owners live or gone.
//!
//! Virtual nodes (owners the graph has only seen named) are left out: in the play their
//! references dangle, as they do for the collector. The graph keeps of an object's finalizers
//! only the collector's two and whether there was another; that other one is
//! [`OTHER_FINALIZER`](super::OTHER_FINALIZER) here.

use super::{Object, Snapshot, OTHER_FINALIZER};
use crate::api::{FINALIZER_FOREGROUND, FINALIZER_ORPHAN};
use crate::graph::{Graph, Handle, Uid};
use foldhash::HashSet;

/// The UID of the namespace `name`, and the UIDs of it and of every real object in it (the roots
/// of its plan), read from `graph` now in one walk; `None` when the graph holds no such namespace.
pub fn namespace_roots(graph: &Graph, name: &str) -> Option<(Uid, Vec<Uid>)> {
    let mut namespace = None;
    let mut roots = Vec::new();
    graph.for_each_node(|node| {
        let identity = node.identity();
        if node.is_virtual() {
            return;
        }
        if *identity.namespace() == *name {
            roots.push(identity.uid.clone());
        } else if identity.namespace().is_empty()
            && identity.name == *name
            && &**identity.kind() == "Namespace"
            && &**identity.api_version() == "v1"
        {
            namespace = Some(identity.uid.clone());
            roots.push(identity.uid.clone());
        }
    });
    Some((namespace?, roots))
}

/// The snapshot a plan of deleting `requested` needs, read from `graph` now.
pub fn from_graph(graph: &Graph, requested: &[Uid]) -> Snapshot {
    let mut snapshot = Snapshot::default();
    let mut below: Vec<Handle> = requested.iter().filter_map(|uid| graph.get(uid)).collect();
    let mut descended: HashSet<Uid> = HashSet::default();
    // The objects read into the snapshot, so that an owner of a thousand dependents is read once.
    let mut read: HashSet<Uid> = HashSet::default();
    while let Some(handle) = below.pop() {
        let uid = handle.identity().uid.clone();
        if handle.is_virtual() || !descended.insert(uid.clone()) {
            continue;
        }
        for owner in handle.owners() {
            if !read.insert(owner.uid.clone()) {
                continue;
            }
            if let Some(owner) = graph.get(&owner.uid).filter(|o| !o.is_virtual()) {
                snapshot.insert(object_of(&owner));
            }
        }
        if read.insert(uid) {
            snapshot.insert(object_of(&handle));
        }
        below.extend(handle.dependents());
    }
    snapshot
}

/// The plan's view of a node.
fn object_of(node: &Handle) -> Object {
    let identity = node.identity();
    let seen = node.observation();
    let finalizers = [
        (seen.finalizers.orphan, FINALIZER_ORPHAN),
        (seen.finalizers.foreground, FINALIZER_FOREGROUND),
        (seen.finalizers.other, OTHER_FINALIZER),
    ];
    Object {
        uid: identity.uid.to_string(),
        api_version: identity.api_version().to_string(),
        kind: identity.kind().to_string(),
        namespace: identity.namespace().to_string(),
        name: identity.name.to_string(),
        created: None,
        deleting: seen.being_deleted,
        waited: node.is_deleting_dependents(),
        finalizers: finalizers
            .iter()
            .filter(|(listed, _)| *listed)
            .map(|(_, f)| f.to_string())
            .collect(),
        owners: node.owners().iter().map(|r| r.to_wire()).collect(),
    }
}
