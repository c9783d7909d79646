//! [`GraphEvent`]: the one type that travels monitor → router → builder, and collector → router
//! for virtual deletes (spec §1.5).
//!
//! Invariant: a `GraphEvent` only exists for readable metadata. The conversion from a watched
//! object ([`GraphEvent::observed`]) is the edge where malformed input is rejected, with a reason,
//! so the builder never re-checks.

use crate::api::{self, validate_owner_references, InvalidOwnerReference, ObjectMeta};
use crate::graph::{
    Graph, Identity, Name, ObjectName, Observation, ObservedFinalizers, OwnerRef, OwnerRefs, ResourceVersion, Scope,
    Sym, TypeMeta, Uid,
};
use std::cell::RefCell;
use thiserror::Error;

/// What happened to the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Watch ADDED (or listed).
    Add,
    /// Watch MODIFIED.
    Update,
    /// Watch DELETED, or a virtual delete from a worker.
    Delete,
    /// From a worker: a virtual node has no dependents left, so nothing names the owner it stands
    /// for; the builder drops it if that still holds. Nothing is concluded about the owner.
    Unreferenced,
}

impl EventType {
    /// The graph event a watch event of type `t` makes; none for a BOOKMARK, which only carries a
    /// resourceVersion.
    pub fn of_watch(t: api::WatchEventType) -> Option<EventType> {
        match t {
            api::WatchEventType::Added => Some(EventType::Add),
            api::WatchEventType::Modified => Some(EventType::Update),
            api::WatchEventType::Deleted => Some(EventType::Delete),
            api::WatchEventType::Bookmark => None,
        }
    }
}

/// The object an event carries, already in the graph's compact form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventObject {
    /// UID.
    pub uid: Uid,
    /// Name.
    pub name: ObjectName,
    /// `metadata.ownerReferences`, verbatim.
    pub owners: OwnerRefs,
    /// resourceVersion, deletionTimestamp and finalizers, as far as the GC tells them apart.
    pub observation: Observation,
}

/// One change to apply to the graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphEvent {
    /// add, update or delete.
    pub event_type: EventType,
    /// A virtual delete, sent by a worker that saw the object gone (spec §1.5).
    pub is_virtual: bool,
    /// The object.
    pub object: EventObject,
    /// The namespace (`""` when cluster-scoped), apiVersion and kind: the monitor's type (its
    /// preferred version), or the virtual identity's.
    pub scope: Scope,
}

/// Why a watched object could not become an event.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum InvalidObject {
    /// No `metadata.uid`.
    #[error("object {namespace}/{name} has no metadata.uid")]
    MissingUid {
        /// Namespace of the object.
        namespace: String,
        /// Name of the object.
        name: String,
    },
    /// A malformed ownerReference.
    #[error("object {namespace}/{name}: {source}")]
    OwnerReference {
        /// Namespace of the object.
        namespace: String,
        /// Name of the object.
        name: String,
        /// What is wrong with it.
        #[source]
        source: InvalidOwnerReference,
    },
}

/// Where the names of a new event come from. A graph object's name is stored once and shared by
/// everything that names it ([`Name`]); the graph itself is the source in the collector (see
/// [`Graph::shared_name`]), and a replay that decodes a stream before applying it, when the graph
/// is still empty, keeps a table of its own.
pub trait SharedNames {
    /// `name` as a [`Name`], the one already held for `uid` when it has that name.
    fn shared_name(&self, uid: &Uid, name: &str) -> Name;
}

impl SharedNames for Graph {
    fn shared_name(&self, uid: &Uid, name: &str) -> Name {
        Graph::shared_name(self, uid, name)
    }
}

impl<T: SharedNames + ?Sized> SharedNames for std::sync::Arc<T> {
    fn shared_name(&self, uid: &Uid, name: &str) -> Name {
        T::shared_name(self, uid, name)
    }
}

/// Names of their own, shared with nothing: what a delete's names are made from. A delete's names
/// outlive it nowhere (the builder removes the node, keeping its own identity and owners), so
/// looking up a copy to share would only cost a lookup in the graph: a cache miss per name, on
/// the node the builder is about to look up itself, which was a quarter of a million-object
/// replay's conversion of a watch event.
struct UnsharedNames;

impl SharedNames for UnsharedNames {
    fn shared_name(&self, _uid: &Uid, name: &str) -> Name {
        Name::new(name)
    }
}

impl GraphEvent {
    /// An event for an object a watch delivered, with the monitor's apiVersion and kind.
    ///
    /// An add or an update takes its names from `graph`, so that the node and everything naming
    /// it share one copy; a delete's names are its own ([`UnsharedNames`]), equal by text.
    pub fn observed(
        graph: &impl SharedNames,
        event_type: EventType,
        meta: &ObjectMeta,
        api_version: &str,
        kind: &str,
    ) -> Result<GraphEvent, InvalidObject> {
        let type_meta = TypeMeta::new(Sym::new(api_version), Sym::new(kind));
        Self::observed_as(graph, event_type, meta, &type_meta)
    }

    /// [`observed`](Self::observed), with the apiVersion and kind already interned, as a monitor
    /// keeps them: interning them for each event of a million-object sync was a few per cent of
    /// its CPU.
    pub fn observed_as(
        graph: &impl SharedNames,
        event_type: EventType,
        meta: &ObjectMeta,
        type_meta: &TypeMeta,
    ) -> Result<GraphEvent, InvalidObject> {
        if event_type == EventType::Delete {
            Self::observed_with(&UnsharedNames, event_type, meta, type_meta)
        } else {
            Self::observed_with(graph, event_type, meta, type_meta)
        }
    }

    /// [`observed_as`](Self::observed_as), with every name from `graph`.
    fn observed_with(
        graph: &impl SharedNames,
        event_type: EventType,
        meta: &ObjectMeta,
        type_meta: &TypeMeta,
    ) -> Result<GraphEvent, InvalidObject> {
        if meta.uid.is_empty() {
            return Err(InvalidObject::MissingUid {
                namespace: meta.namespace.clone(),
                name: meta.name.clone(),
            });
        }
        validate_owner_references(&meta.owner_references).map_err(|source| InvalidObject::OwnerReference {
            namespace: meta.namespace.clone(),
            name: meta.name.clone(),
            source,
        })?;
        let owners = owner_refs(graph, &meta.owner_references);
        let uid = Uid::parse(&meta.uid);
        Ok(GraphEvent {
            event_type,
            is_virtual: false,
            object: EventObject {
                uid: uid.clone(),
                name: own_name(graph, &uid, &meta.name, &owners),
                owners,
                observation: Observation {
                    resource_version: ResourceVersion::parse(&meta.resource_version),
                    being_deleted: meta.deletion_timestamp.is_some(),
                    finalizers: ObservedFinalizers::from_list(&meta.finalizers),
                },
            },
            scope: Scope::of(&meta.namespace, type_meta),
        })
    }

    /// A virtual delete for `identity` (upstream's `enqueueVirtualDeleteEvent`).
    pub fn virtual_delete(identity: &Identity) -> GraphEvent {
        GraphEvent::from_worker(EventType::Delete, identity)
    }

    /// An [`EventType::Unreferenced`] event for the virtual node of `identity`.
    pub fn unreferenced(identity: &Identity) -> GraphEvent {
        GraphEvent::from_worker(EventType::Unreferenced, identity)
    }

    fn from_worker(event_type: EventType, identity: &Identity) -> GraphEvent {
        GraphEvent {
            event_type,
            is_virtual: true,
            object: EventObject {
                uid: identity.uid.clone(),
                name: identity.name.clone(),
                owners: OwnerRefs::default(),
                observation: Observation::default(),
            },
            scope: identity.scope.clone(),
        }
    }

    /// The identity the event names (upstream's `identityFromEvent`).
    pub fn identity(&self) -> Identity {
        Identity {
            scope: self.scope.clone(),
            name: self.object.name.clone(),
            uid: self.object.uid.clone(),
        }
    }

    /// apiVersion and kind.
    pub fn type_meta(&self) -> &TypeMeta {
        self.scope.type_meta()
    }

    /// The object's namespace (`""` when cluster-scoped).
    pub fn namespace(&self) -> &Sym {
        self.scope.namespace()
    }
}

/// An object's own name in the graph's form: a suffix of its owner's name when a controller named
/// it after that owner ([`ObjectName::derived`]: a ReplicaSet's pods, a Job's), else the name,
/// shared with its node's.
fn own_name(graph: &impl SharedNames, uid: &Uid, name: &str, owners: &[OwnerRef]) -> ObjectName {
    owners
        .iter()
        .find_map(|owner| ObjectName::derived(&owner.name, name))
        .unwrap_or_else(|| graph.shared_name(uid, name).into())
}

/// Lists [`owner_refs`] remembers on each thread, by their first owner's UID.
const RECENT_OWNER_REFS: usize = 1024;

thread_local! {
    /// The owner lists this thread made last ([`owner_refs`]). Each slot keeps at most one list
    /// alive after the graph dropped it: a bounded cost, of 1024 lists a thread.
    static RECENT: RefCell<Box<[Option<OwnerRefs>]>> = RefCell::new(vec![None; RECENT_OWNER_REFS].into());
}

/// The graph's form of an object's ownerReferences: the list this thread made last for equal
/// wire refs, when the slot of their first owner's UID still holds it, else a new list of
/// [`owner_ref`]s, which takes the slot.
///
/// Siblings (a ReplicaSet's pods, a Job's) come one after another in a LIST, which is in name
/// order, and mostly in a watch, so they share one list: each node spends 8 bytes on its owners
/// instead of a list of its own, and a sibling after the first costs no interning and no lookup
/// of its owner's name. Equal wire refs make equal lists, so which list an event gets never
/// changes what the graph decides.
pub fn owner_refs(graph: &impl SharedNames, refs: &[api::OwnerReference]) -> OwnerRefs {
    let Some((first, rest)) = refs.split_first() else {
        return OwnerRefs::NONE;
    };
    let first_uid = Uid::parse(&first.uid);
    let slot = (first_uid.hash64() as usize) % RECENT_OWNER_REFS;
    RECENT.with(|recent| {
        let mut recent = recent.borrow_mut();
        if let Some(list) = recent[slot].as_ref().filter(|list| same_refs(list, refs, &first_uid)) {
            return list.clone();
        }
        let first = owner_ref_of(graph, first, first_uid);
        let list: OwnerRefs = std::iter::once(first)
            .chain(rest.iter().map(|r| owner_ref(graph, r)))
            .collect();
        recent[slot] = Some(list.clone());
        list
    })
}

/// True when [`owner_ref`] would make exactly `list` of `refs`, the first of whose UIDs is
/// `first_uid`.
fn same_refs(list: &[OwnerRef], refs: &[api::OwnerReference], first_uid: &Uid) -> bool {
    list.len() == refs.len()
        && list.first().is_some_and(|r| r.uid == *first_uid)
        && list.iter().zip(refs).enumerate().all(|(i, (r, w))| {
            *r.name == *w.name
                && **r.kind() == *w.kind
                && **r.api_version() == *w.api_version
                && r.controller() == w.controller
                && r.block_owner_deletion() == w.block_owner_deletion
                && (i == 0 || r.uid == Uid::parse(&w.uid))
        })
}

/// The graph's form of a wire owner reference: strings interned, and the name shared with the
/// owner's node when the graph has it.
pub fn owner_ref(graph: &impl SharedNames, r: &api::OwnerReference) -> OwnerRef {
    owner_ref_of(graph, r, Uid::parse(&r.uid))
}

/// [`owner_ref`], with `r`'s UID already parsed.
fn owner_ref_of(graph: &impl SharedNames, r: &api::OwnerReference, uid: Uid) -> OwnerRef {
    OwnerRef::new(
        TypeMeta::new(Sym::new(&r.api_version), Sym::new(&r.kind)),
        graph.shared_name(&uid, &r.name),
        uid,
        r.controller,
        r.block_owner_deletion,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::OwnerReference;
    use crate::graph::Handle;

    const POD_UID: &str = "d0a9b805-ab50-49cf-b1a3-d9bfc61926a1";
    const RS_UID: &str = "85a86e72-4ef8-4350-8e50-0821a4e748fe";

    fn pod() -> ObjectMeta {
        ObjectMeta {
            name: "web-0000-l6lcpphwrk-cwckq".into(),
            namespace: "team-0000".into(),
            uid: POD_UID.into(),
            resource_version: "1002".into(),
            owner_references: vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "web-0000-l6lcpphwrk".into(),
                uid: RS_UID.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }],
            ..Default::default()
        }
    }

    fn event(graph: &Graph, event_type: EventType) -> GraphEvent {
        GraphEvent::observed(graph, event_type, &pod(), "v1", "Pod").expect("a readable object")
    }

    /// A pod whose name is not its owner's and a suffix, as a controller would name it.
    fn named_by_hand(graph: &Graph, event_type: EventType) -> GraphEvent {
        let meta = ObjectMeta {
            name: "hand-made".into(),
            ..pod()
        };
        GraphEvent::observed(graph, event_type, &meta, "v1", "Pod").expect("a readable object")
    }

    #[test]
    fn a_pod_named_after_its_owner_should_keep_only_its_suffix() {
        let graph = crate::graph::GraphWriter::new();
        let added = event(&graph, EventType::Add);
        assert!(added.object.name.as_whole().is_none(), "derived from the owner's name");
        assert_eq!(added.object.name, "web-0000-l6lcpphwrk-cwckq");
        assert_eq!(added.object.name, event(&graph, EventType::Delete).object.name);
    }

    #[test]
    fn an_update_should_share_the_nodes_name_and_a_delete_should_carry_an_equal_one() {
        let graph = crate::graph::GraphWriter::new();
        let added = named_by_hand(&graph, EventType::Add);
        graph.insert(Handle::new(added.identity(), &added.object.owners, false));
        let node = graph.get(&Uid::parse(POD_UID)).expect("the node");
        let node_name = node.identity().name.as_whole().expect("a whole name");

        let updated = named_by_hand(&graph, EventType::Update);
        assert!(
            Name::ptr_eq(updated.object.name.as_whole().expect("whole"), node_name),
            "an update shares the node's name"
        );

        let deleted = named_by_hand(&graph, EventType::Delete);
        assert!(
            !Name::ptr_eq(deleted.object.name.as_whole().expect("whole"), node_name),
            "a delete looks nothing up"
        );
        assert_eq!(deleted.object.name, *node_name);
        assert_eq!(deleted.identity(), updated.identity());
        assert_eq!(deleted.object.owners, updated.object.owners);
        assert_eq!(deleted.object.owners.as_slice()[0].name.as_str(), "web-0000-l6lcpphwrk");
    }

    #[test]
    fn siblings_should_share_one_owner_list_and_any_difference_should_make_another() {
        let graph = crate::graph::GraphWriter::new();
        let convert = |meta: &ObjectMeta| {
            GraphEvent::observed(&*graph, EventType::Add, meta, "v1", "Pod")
                .expect("a readable object")
                .object
                .owners
        };
        let first = convert(&pod());
        let sibling = ObjectMeta {
            name: "web-0000-l6lcpphwrk-x2x9z".into(),
            uid: "3b2fa9a4-1d8e-4c1e-9d0e-5c6a7b8c9d0e".into(),
            ..pod()
        };
        assert!(
            OwnerRefs::ptr_eq(&first, &convert(&sibling)),
            "a sibling shares the list"
        );
        let changes: [fn(&mut OwnerReference); 6] = [
            |r| r.name.push('x'),
            |r| r.kind = "StatefulSet".into(),
            |r| r.api_version = "apps/v2".into(),
            |r| r.controller = None,
            |r| r.block_owner_deletion = Some(false),
            |r| r.uid = RS_UID.replace('8', "9"),
        ];
        for change in changes {
            let mut other = pod();
            change(&mut other.owner_references[0]);
            let owners = convert(&other);
            assert_ne!(owners, first, "{:?}", other.owner_references);
            assert_eq!(owners.as_slice(), [owner_ref(&*graph, &other.owner_references[0])]);
            assert!(
                OwnerRefs::ptr_eq(&owners, &convert(&other)),
                "the changed list is shared in turn"
            );
        }
        let mut two = pod();
        two.owner_references.push(two.owner_references[0].clone());
        two.owner_references[1].uid = RS_UID.replace('8', "7");
        two.owner_references[1].controller = None;
        let with_two = convert(&two);
        assert_eq!(with_two.len(), 2, "a longer list is another list");
        two.owner_references[1].uid = RS_UID.replace('8', "6");
        let second_changed = convert(&two);
        assert!(
            !OwnerRefs::ptr_eq(&with_two, &second_changed),
            "a change in the second owner's UID makes another list"
        );
        assert_eq!(second_changed[1].uid, Uid::parse(&two.owner_references[1].uid));
        assert_eq!(convert(&pod()), first);
        let none = ObjectMeta {
            owner_references: Vec::new(),
            ..pod()
        };
        assert!(convert(&none).is_empty());
    }

    #[test]
    fn a_delete_should_be_refused_for_the_same_reasons_as_an_add() {
        let graph = Graph::new();
        let mut meta = pod();
        meta.uid.clear();
        let refused = GraphEvent::observed(&graph, EventType::Delete, &meta, "v1", "Pod");
        assert!(matches!(refused, Err(InvalidObject::MissingUid { .. })), "{refused:?}");
    }
}
