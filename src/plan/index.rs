//! The play's index of a snapshot: every owner reference resolved once, before the first round,
//! to the position of the object it names (the snapshot itself lists each object's dependents by
//! position).
//!
//! A play of a 100 000-object cascade reads references millions of times; resolved here, each
//! read is an array access where it was a hash of a 36-byte UID (and a discovery lookup of the
//! reference's kind).
//!
//! # Invariants
//!
//! - The links of object `i` are its `ownerReferences`, in their order: link `k` of `i` is
//!   reference `k` of `i`.
//! - A link's `at` is the position of the held object with the reference's UID, whatever its
//!   kind or name; [`Target`] says whether that object is the owner the reference names.

use super::{Object, Scope, Served, Snapshot};
use crate::api::OwnerReference;

/// The position `at` of a link whose UID names no held object.
pub(super) const NOWHERE: u32 = u32::MAX;

/// Where one owner reference leads.
#[derive(Clone, Copy, Debug)]
pub(super) struct Link {
    /// The position of the object with the reference's UID, or [`NOWHERE`].
    pub at: u32,
    /// How the reference reads while that object is there.
    pub target: Target,
}

/// What an owner reference names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// The object at the link's `at`: same UID, kind, group, name and namespace.
    Owner,
    /// No held object: the reference dangles from the start.
    Absent,
    /// The collector cannot read it at all; why is [`Index::why`] at this position.
    Unreadable(u32),
}

/// The links of every object of a snapshot, by position.
pub(super) struct Index {
    /// Object `i`'s links are `links[link_start[i]..link_start[i + 1]]`.
    link_start: Vec<u32>,
    links: Vec<Link>,
    why: Vec<String>,
}

impl Index {
    /// Resolves every reference of `snapshot` against itself and the types `served`.
    pub fn new(snapshot: &Snapshot, served: &impl Served) -> Index {
        let mut index = Index {
            link_start: Vec::with_capacity(snapshot.len() + 1),
            links: Vec::with_capacity(snapshot.len()),
            why: Vec::new(),
        };
        for object in &snapshot.objects {
            index.link_start.push(index.links.len() as u32);
            for r in &object.owners {
                let link = index.link(snapshot, served, object, r);
                index.links.push(link);
            }
        }
        index.link_start.push(index.links.len() as u32);
        index
    }

    fn link(&mut self, snapshot: &Snapshot, served: &impl Served, object: &Object, r: &OwnerReference) -> Link {
        let at = snapshot.position(&r.uid).unwrap_or(NOWHERE);
        let target = match scope_of(served, object, r) {
            Err(why) => {
                self.why.push(why);
                Target::Unreadable(self.why.len() as u32 - 1)
            }
            Ok(namespace) => {
                let named = (at != NOWHERE).then(|| &snapshot.objects[at as usize]);
                if named.is_some_and(|owner| is_named_by(owner, r, namespace)) {
                    Target::Owner
                } else {
                    Target::Absent
                }
            }
        };
        Link { at, target }
    }

    /// The links of object `i`.
    pub fn links(&self, i: u32) -> &[Link] {
        let i = i as usize;
        &self.links[self.link_start[i] as usize..self.link_start[i + 1] as usize]
    }

    /// Why the reference of an [`Target::Unreadable`] link cannot be read.
    pub fn why(&self, unreadable: u32) -> &str {
        &self.why[unreadable as usize]
    }
}

/// The namespace `dependent`'s reference `r` is read in: the dependent's for a namespaced owner,
/// none for a cluster-scoped one; an error says why it cannot be read at all.
pub(super) fn scope_of<'o>(served: &impl Served, dependent: &'o Object, r: &OwnerReference) -> Result<&'o str, String> {
    let scope = served
        .scope(&r.api_version, &r.kind)
        .ok_or_else(|| format!("no version of {}'s group serves kind {}", r.api_version, r.kind))?;
    match scope {
        Scope::Namespaced if dependent.namespace.is_empty() => Err(format!(
            "a cluster-scoped object cannot have a namespaced owner ({})",
            r.kind
        )),
        Scope::Namespaced => Ok(dependent.namespace.as_str()),
        Scope::Cluster => Ok(""),
    }
}

/// True when `owner` is the object `r`, read in `namespace`, names.
fn is_named_by(owner: &Object, r: &OwnerReference, namespace: &str) -> bool {
    owner.name == r.name
        && owner.kind == r.kind
        && group(&owner.api_version) == group(&r.api_version)
        && owner.namespace == namespace
}

/// The group of an apiVersion (`apps/v1` → `apps`, `v1` → ``).
fn group(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deployments and ReplicaSets are namespaced; nothing else is served.
    struct Apps;

    impl Served for Apps {
        fn scope(&self, api_version: &str, kind: &str) -> Option<Scope> {
            (api_version.starts_with("apps/") && ["Deployment", "ReplicaSet"].contains(&kind))
                .then_some(Scope::Namespaced)
        }
    }

    fn object(uid: &str, kind: &str, name: &str, owners: Vec<OwnerReference>) -> Object {
        Object {
            uid: uid.into(),
            api_version: "apps/v1".into(),
            kind: kind.into(),
            namespace: "default".into(),
            name: name.into(),
            owners,
            ..Object::default()
        }
    }

    fn reference(uid: &str, kind: &str, name: &str) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            ..OwnerReference::default()
        }
    }

    #[test]
    fn links_should_tell_the_named_owner_from_a_uid_with_another_identity_and_an_unserved_kind() {
        let snapshot = Snapshot::new([
            object("d", "Deployment", "web", vec![]),
            object(
                "r",
                "ReplicaSet",
                "web-1",
                vec![
                    reference("d", "Deployment", "web"),
                    reference("d", "Deployment", "other-name"),
                    reference("x", "Deployment", "gone"),
                    reference("d", "Widget", "web"),
                ],
            ),
        ]);
        let index = Index::new(&snapshot, &Apps);
        let links = index.links(1);
        assert_eq!((links[0].at, links[0].target), (0, Target::Owner));
        assert_eq!((links[1].at, links[1].target), (0, Target::Absent));
        assert_eq!((links[2].at, links[2].target), (NOWHERE, Target::Absent));
        assert_eq!(links[3].at, 0);
        let Target::Unreadable(why) = links[3].target else {
            panic!("an unserved kind should be unreadable: {:?}", links[3]);
        };
        assert_eq!(index.why(why), "no version of apps/v1's group serves kind Widget");
        assert!(index.links(0).is_empty());
    }

    #[test]
    fn dependents_should_be_listed_once_each_in_the_snapshots_order() {
        let snapshot = Snapshot::new([
            object("b", "ReplicaSet", "b", vec![reference("a", "Deployment", "a")]),
            object("a", "Deployment", "a", vec![]),
            object(
                "c",
                "ReplicaSet",
                "c",
                vec![reference("a", "Deployment", "a"), reference("a", "Deployment", "a")],
            ),
            object("d", "ReplicaSet", "d", vec![reference("c", "ReplicaSet", "c")]),
        ]);
        assert_eq!(snapshot.dependents_at(1), &[0, 2]);
        assert_eq!(snapshot.dependents_at(2), &[3]);
        assert!(snapshot.dependents_at(0).is_empty());
        assert!(snapshot.dependents_at(3).is_empty());
    }
}
