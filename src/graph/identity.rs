//! Identities and owner references as the graph keeps them (spec §1.1).
//!
//! An [`Identity`] names one object: apiVersion, kind, name, uid and namespace, and equality
//! compares all five. An [`OwnerRef`] is one entry of `metadata.ownerReferences`; its
//! *coordinates* are (uid, name, kind, apiVersion), and namespace is never part of it.

use super::raw::intern::{Scope, Sym, TaggedTypeMeta, TypeMeta, TypeMetaRef};
use super::raw::name::Name;
use super::raw::object_name::ObjectName;
use super::raw::uid::Uid;
use std::fmt;
use triomphe::ThinArc;

/// One `metadata.ownerReferences` entry, stored verbatim (controller and blockOwnerDeletion too),
/// in 32 bytes: the two optional flags ride in the low bits of the type's pointer
/// ([`TaggedTypeMeta`]), so that a node with one owner fits a smaller allocation.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct OwnerRef {
    /// The owner's name.
    pub name: Name,
    /// The owner's UID.
    pub uid: Uid,
    /// The owner's apiVersion and kind, with `controller` and `blockOwnerDeletion`.
    type_and_flags: TaggedTypeMeta,
}

impl OwnerRef {
    /// An owner reference.
    pub fn new(
        type_meta: TypeMeta,
        name: Name,
        uid: Uid,
        controller: Option<bool>,
        block_owner_deletion: Option<bool>,
    ) -> OwnerRef {
        let tag = flag_bits(controller) | flag_bits(block_owner_deletion) << 2;
        OwnerRef {
            name,
            uid,
            type_and_flags: type_meta.tagged(tag),
        }
    }

    /// The owner's apiVersion and kind.
    pub fn type_meta(&self) -> TypeMetaRef<'_> {
        self.type_and_flags.type_meta()
    }

    /// `controller`.
    pub fn controller(&self) -> Option<bool> {
        flag_of(self.type_and_flags.tag())
    }

    /// `blockOwnerDeletion`.
    pub fn block_owner_deletion(&self) -> Option<bool> {
        flag_of(self.type_and_flags.tag() >> 2)
    }

    /// The owner's apiVersion.
    pub fn api_version(&self) -> &Sym {
        self.type_meta().api_version()
    }

    /// The owner's kind.
    pub fn kind(&self) -> &Sym {
        self.type_meta().kind()
    }

    /// True when `blockOwnerDeletion` is set to true.
    pub fn blocks_owner_deletion(&self) -> bool {
        self.block_owner_deletion() == Some(true)
    }

    /// The identity this ref names when read from a dependent in `namespace`.
    pub fn identity_in(&self, namespace: &Sym) -> Identity {
        Identity::new(
            self.type_meta().clone(),
            self.name.clone(),
            self.uid.clone(),
            namespace.clone(),
        )
    }

    /// The wire form.
    pub fn to_wire(&self) -> crate::api::OwnerReference {
        crate::api::OwnerReference {
            api_version: self.api_version().to_string(),
            kind: self.kind().to_string(),
            name: self.name.to_string(),
            uid: self.uid.to_string(),
            controller: self.controller(),
            block_owner_deletion: self.block_owner_deletion(),
        }
    }
}

/// Two bits for an optional flag: 0 unset, 1 false, 2 true.
fn flag_bits(flag: Option<bool>) -> u8 {
    match flag {
        None => 0,
        Some(false) => 1,
        Some(true) => 2,
    }
}

fn flag_of(bits: u8) -> Option<bool> {
    match bits & 0b11 {
        1 => Some(false),
        2 => Some(true),
        _ => None,
    }
}

impl fmt::Debug for OwnerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnerRef")
            .field("type_meta", &*self.type_meta())
            .field("name", &self.name)
            .field("uid", &self.uid)
            .field("controller", &self.controller())
            .field("block_owner_deletion", &self.block_owner_deletion())
            .finish()
    }
}

/// An ownerReferences list as the graph and its events keep it: one pointer, to an immutable
/// list that every holder of an equal list may share, or none for an empty list. A node thus
/// costs 8 bytes for its owners, not the 32 of one ref inline, and the pods of a ReplicaSet hold
/// one list between them when they were converted through [`crate::event::owner_refs`], which
/// hands out a list it recently made for equal wire refs. Derefs to a slice.
///
/// `repr(transparent)`: a node's edges word holds it bit for bit (`raw::links`).
#[derive(Clone, Default)]
#[repr(transparent)]
pub struct OwnerRefs(Option<ThinArc<(), OwnerRef>>);

impl OwnerRefs {
    /// No owners: a root's, or a virtual node's.
    pub const NONE: OwnerRefs = OwnerRefs(None);

    /// The refs, in order.
    pub fn as_slice(&self) -> &[OwnerRef] {
        self.0.as_ref().map_or(&[], |list| &list.slice)
    }

    /// Holders of the list; 1 for no owners.
    #[cfg(all(test, not(feature = "loom")))]
    pub(in crate::graph) fn strong_count(&self) -> usize {
        self.0.as_ref().map_or(1, ThinArc::strong_count)
    }

    /// True when both hold the same list, not only equal ones.
    pub fn ptr_eq(a: &OwnerRefs, b: &OwnerRefs) -> bool {
        match (&a.0, &b.0) {
            (Some(a), Some(b)) => a.ptr() == b.ptr(),
            (None, None) => true,
            _ => false,
        }
    }
}

impl PartialEq for OwnerRefs {
    fn eq(&self, other: &Self) -> bool {
        OwnerRefs::ptr_eq(self, other) || self.as_slice() == other.as_slice()
    }
}

impl Eq for OwnerRefs {}

impl std::ops::Deref for OwnerRefs {
    type Target = [OwnerRef];
    fn deref(&self) -> &[OwnerRef] {
        self.as_slice()
    }
}

impl fmt::Debug for OwnerRefs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl From<&[OwnerRef]> for OwnerRefs {
    fn from(refs: &[OwnerRef]) -> Self {
        refs.iter().cloned().collect()
    }
}

impl From<&OwnerRefs> for OwnerRefs {
    fn from(refs: &OwnerRefs) -> Self {
        refs.clone()
    }
}

impl FromIterator<OwnerRef> for OwnerRefs {
    fn from_iter<I: IntoIterator<Item = OwnerRef>>(iter: I) -> Self {
        let refs: Vec<OwnerRef> = iter.into_iter().collect();
        if refs.is_empty() {
            return OwnerRefs(None);
        }
        OwnerRefs(Some(ThinArc::from_header_and_iter((), refs.into_iter())))
    }
}

/// An object reference: the five fields that identify a node, a cache key or an event's object.
/// The namespace, apiVersion and kind are one interned [`Scope`], so that an identity is 40 bytes
/// with its name's inline suffix ([`ObjectName`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    /// Namespace, apiVersion and kind.
    pub scope: Scope,
    /// Name.
    pub name: ObjectName,
    /// UID.
    pub uid: Uid,
}

impl Identity {
    /// The identity of `name` and `uid`, of type `type_meta`, in `namespace` (`""` when
    /// cluster-scoped).
    pub fn new(type_meta: TypeMeta, name: impl Into<ObjectName>, uid: Uid, namespace: Sym) -> Identity {
        Identity {
            scope: Scope::new(namespace, type_meta),
            name: name.into(),
            uid,
        }
    }

    /// apiVersion and kind.
    pub fn type_meta(&self) -> &TypeMeta {
        self.scope.type_meta()
    }

    /// Namespace; `""` for cluster-scoped objects.
    pub fn namespace(&self) -> &Sym {
        self.scope.namespace()
    }

    /// apiVersion.
    pub fn api_version(&self) -> &Sym {
        self.type_meta().api_version()
    }

    /// Kind.
    pub fn kind(&self) -> &Sym {
        self.type_meta().kind()
    }

    /// True when `r` has exactly these coordinates (uid, name, kind, apiVersion).
    pub fn matches_coordinates(&self, r: &OwnerRef) -> bool {
        self.uid == r.uid && self.name == r.name && *self.type_meta() == *r.type_meta()
    }

    /// This identity with another namespace.
    pub fn with_namespace(&self, namespace: Sym) -> Identity {
        Identity {
            scope: Scope::new(namespace, self.type_meta().clone()),
            ..self.clone()
        }
    }

    /// This identity with another apiVersion and kind.
    pub fn with_type_meta(&self, type_meta: TypeMeta) -> Identity {
        Identity {
            scope: Scope::new(self.namespace().clone(), type_meta),
            ..self.clone()
        }
    }

    /// True for the identity of a cluster-scoped object (or a virtual owner assumed to be one).
    pub fn is_cluster_scoped(&self) -> bool {
        self.namespace().is_empty()
    }
}

/// The display form used in event messages:
/// `[<apiVersion>/<kind>, namespace: <ns>, name: <name>, uid: <uid>]`.
impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}/{}, namespace: {}, name: {}, uid: {}]",
            self.api_version(),
            self.kind(),
            self.namespace(),
            self.name,
            self.uid
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_should_take_40_bytes_and_read_back_its_scope() {
        assert_eq!(std::mem::size_of::<Identity>(), 40, "a node is one 64-byte block");
        let pods = TypeMeta::new(Sym::new("v1"), Sym::new("Pod"));
        let id = Identity::new(pods.clone(), "web-1", Uid::parse("u"), Sym::new("team-a"));
        assert_eq!((id.type_meta(), &**id.namespace()), (&pods, "team-a"));
        let moved = id
            .with_namespace(Sym::new(""))
            .with_type_meta(TypeMeta::new(Sym::new("v1"), Sym::new("Node")));
        assert!(moved.is_cluster_scoped());
        assert_eq!((&**moved.kind(), &moved.name, &moved.uid), ("Node", &id.name, &id.uid));
        assert_ne!(moved, id);
        assert_eq!(moved.with_namespace(Sym::new("team-a")).with_type_meta(pods), id);
    }

    #[test]
    fn owner_ref_should_give_back_every_combination_of_its_flags() {
        let type_meta = TypeMeta::new(Sym::new("apps/v1"), Sym::new("ReplicaSet"));
        let flags = [None, Some(false), Some(true)];
        for controller in flags {
            for block in flags {
                let r = OwnerRef::new(type_meta.clone(), Name::new("rs"), Uid::parse("u"), controller, block);
                assert_eq!(
                    (r.type_meta().clone(), r.controller(), r.block_owner_deletion()),
                    (type_meta.clone(), controller, block)
                );
                let wire = r.to_wire();
                assert_eq!((wire.controller, wire.block_owner_deletion), (controller, block));
                assert_eq!(r.blocks_owner_deletion(), block == Some(true));
            }
        }
    }
}
