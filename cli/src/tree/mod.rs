//! `kube-gc tree`: one object's owners above it and its dependents below it, each with its
//! deletion state, from one listing of the API.
//!
//! Invariant: the tree is drawn from one [`Listing`] and nothing else, so each line agrees with
//! every other about which objects exist; the listing is read once, resource by resource, and is
//! as stale as its slowest resource's pages (a tree of a cluster that changes meanwhile may show
//! an object next to an owner that is already gone, as `kubectl get` of two resources may).
//!
//! The steps, one submodule each:
//!
//! - [`resolve`]: the KIND argument to a served resource, as kubectl reads it;
//! - [`fetch`]: discovery, the object itself, then every object of its namespace (every listable
//!   namespaced resource, in parallel, by metadata and in pages) and every cluster-scoped one,
//!   indexed by UID and by owner UID; and, when a collector answers, its `/explain` of the objects
//!   that are being deleted or miss an owner;
//! - [`render`](mod@render): a pure function from the listing to the text.
//!
//! Owners can only be in the object's own namespace or cluster-scoped (a reference never crosses
//! namespaces), so the listing holds every owner there is; an owner reference whose UID it does
//! not hold names an owner that does not exist (a virtual owner, in the collector's words), unless
//! its resource could not be listed, which [`fetch`] checks by name. Dependents of a
//! cluster-scoped object can be in any namespace, so for one every namespace is listed.

pub mod fetch;
pub mod render;
pub mod resolve;

pub use fetch::{CollectorClient, Error, Fetched};
pub use render::{render, View};
pub use resolve::{Catalogue, Resource, UnknownKind};

use kube_gc::api::{PartialObjectMeta, FINALIZER_FOREGROUND, FINALIZER_ORPHAN};
use kube_gc::plan::Snapshot;
use std::collections::HashSet;

/// One object, as much of it as the tree shows: the plan's view of it ([`kube_gc::plan::Object`]).
pub use kube_gc::plan::Object;

/// The object of a metadata read of `resource`, whose apiVersion and kind it takes, since a
/// metadata answer's own are `PartialObjectMetadata`'s.
pub fn object_of(meta: PartialObjectMeta, resource: &Resource) -> Object {
    let m = meta.metadata;
    Object {
        uid: m.uid,
        api_version: resource.gvr.api_version(),
        kind: resource.kind.clone(),
        namespace: m.namespace,
        name: m.name,
        created: m.creation_timestamp,
        deleting: m.deletion_timestamp.is_some(),
        // A listing shows no object's past: only the graph keeps that mark.
        waited: false,
        finalizers: m.finalizers,
        owners: m.owner_references,
    }
}

/// Where an object is in its deletion, as the STATE column says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// It exists and no deletion has started.
    Present,
    /// Its deletion has started; the finalizers say with which policy the collector handles it
    /// (`foregroundDeletion`, `orphan`), neither when it was deleted in the background or other
    /// finalizers hold it.
    BeingDeleted {
        /// `foregroundDeletion` is set.
        foreground: bool,
        /// `orphan` is set.
        orphan: bool,
    },
    /// Deleted in the foreground, and this many dependents that block its deletion
    /// (`blockOwnerDeletion`) still exist.
    WaitingOnDependents(usize),
    /// An owner reference names it, but it does not exist.
    Absent,
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            State::Present => f.write_str("present"),
            State::BeingDeleted { foreground, orphan } => match (foreground, orphan) {
                (true, true) => f.write_str("being deleted (foreground, orphan)"),
                (true, false) => f.write_str("being deleted (foreground)"),
                (false, true) => f.write_str("being deleted (orphan)"),
                (false, false) => f.write_str("being deleted"),
            },
            State::WaitingOnDependents(1) => f.write_str("waiting on 1 dependent (foreground)"),
            State::WaitingOnDependents(n) => write!(f, "waiting on {n} dependents (foreground)"),
            State::Absent => f.write_str("absent"),
        }
    }
}

/// Every object read, indexed by UID and by owner UID.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    index: Snapshot<Object>,
}

/// The listing is its index: `get`, `objects`, `len`, `insert` are the snapshot's.
impl std::ops::Deref for Listing {
    type Target = Snapshot<Object>;

    fn deref(&self) -> &Snapshot<Object> {
        &self.index
    }
}

impl std::ops::DerefMut for Listing {
    fn deref_mut(&mut self) -> &mut Snapshot<Object> {
        &mut self.index
    }
}

impl Listing {
    /// Indexes `objects`; an object read twice (a kind served by two groups, such as core and
    /// `events.k8s.io` Events) is kept once, as first read.
    pub fn new(objects: impl IntoIterator<Item = Object>) -> Listing {
        Listing {
            index: Snapshot::new(objects),
        }
    }

    /// The objects whose references name `uid`, sorted by kind, namespace and name.
    pub fn dependents_of(&self, uid: &str) -> Vec<&Object> {
        let mut dependents: Vec<&Object> = self.index.dependents_of(uid).collect();
        dependents.sort_by(|a, b| (&a.kind, &a.namespace, &a.name).cmp(&(&b.kind, &b.namespace, &b.name)));
        dependents
    }

    /// The state of `object`.
    pub fn state(&self, object: &Object) -> State {
        if !object.deleting {
            return State::Present;
        }
        let foreground = object.finalizers.iter().any(|f| f == FINALIZER_FOREGROUND);
        if foreground {
            let blocking = self.blocking_dependents(&object.uid);
            if blocking > 0 {
                return State::WaitingOnDependents(blocking);
            }
        }
        State::BeingDeleted {
            foreground,
            orphan: object.finalizers.iter().any(|f| f == FINALIZER_ORPHAN),
        }
    }

    /// How many dependents of `uid` block its foreground deletion.
    fn blocking_dependents(&self, uid: &str) -> usize {
        self.dependents_of(uid)
            .iter()
            .filter(|d| {
                d.owners
                    .iter()
                    .any(|r| r.uid == uid && r.block_owner_deletion == Some(true))
            })
            .count()
    }

    /// Whether one of `object`'s owners does not exist.
    pub fn misses_an_owner(&self, object: &Object) -> bool {
        object.owners.iter().any(|r| self.index.get(&r.uid).is_none())
    }

    /// The UIDs of `target`, its owners, theirs and so on, and its dependents, theirs and so on:
    /// the objects a tree of `target` shows.
    pub fn shown_with(&self, target: &str) -> HashSet<String> {
        let mut shown = HashSet::new();
        let mut up = vec![target.to_string()];
        while let Some(uid) = up.pop() {
            if let Some(object) = self.index.get(&uid) {
                if shown.insert(uid) {
                    up.extend(object.owners.iter().map(|r| r.uid.clone()));
                }
            }
        }
        let mut down = vec![target.to_string()];
        let mut below = HashSet::new();
        while let Some(uid) = down.pop() {
            if below.insert(uid.clone()) {
                down.extend(self.index.dependents_of(&uid).map(|d| d.uid.clone()));
            }
        }
        shown.extend(below.into_iter().filter(|uid| self.index.get(uid).is_some()));
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_gc::api::OwnerReference;

    fn object(uid: &str, owners: &[&str]) -> Object {
        Object {
            uid: uid.into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "ns".into(),
            name: format!("cm-{uid}"),
            created: None,
            deleting: false,
            waited: false,
            finalizers: Vec::new(),
            owners: owners
                .iter()
                .map(|o| OwnerReference {
                    uid: o.to_string(),
                    ..OwnerReference::default()
                })
                .collect(),
        }
    }

    #[test]
    fn a_listing_should_keep_an_object_read_twice_once_and_index_it_once_per_owner() {
        let mut again = object("b", &["a"]);
        again.name = "read-through-another-group".into();
        let listing = Listing::new([object("a", &[]), object("b", &["a", "a"]), again]);
        assert_eq!(listing.len(), 2);
        let dependents = listing.dependents_of("a");
        assert_eq!(dependents.len(), 1);
        assert_eq!(dependents[0].name, "cm-b", "the first read is kept");
    }

    #[test]
    fn shown_with_should_hold_the_owners_chain_and_the_dependents_but_no_siblings() {
        let listing = Listing::new([
            object("root", &[]),
            object("mid", &["root", "absent"]),
            object("target", &["mid"]),
            object("sibling", &["mid"]),
            object("child", &["target"]),
            object("grandchild", &["child"]),
            object("unrelated", &[]),
        ]);
        let mut shown: Vec<String> = listing.shown_with("target").into_iter().collect();
        shown.sort();
        assert_eq!(shown, ["child", "grandchild", "mid", "root", "target"]);
        assert!(listing.misses_an_owner(listing.get("mid").unwrap()));
        assert!(!listing.misses_an_owner(listing.get("target").unwrap()));
    }
}
