//! The object store: every write takes the next value of one global resourceVersion counter, is
//! applied to exactly one type's objects, and is published to that type's watchers before the state
//! lock is released.
//!
//! [`State`] is the whole simulated cluster behind [`super::SimCluster`]'s one mutex. Operations
//! resolve a [`Gvr`] to its type and get a [`Writer`], the only way to the resourceVersion counter;
//! the writer's `store`, `remove` and `replace` are the only code that changes an object, so every
//! change gets a resourceVersion and a watch event. The one exception is [`State::restore`], which
//! puts a saved cluster's objects back, resourceVersions and all, into a state no one can watch yet
//! and whose watch histories start after them. Objects are kept in stored form, without
//! `apiVersion` and `kind`, which [`present`] adds for the version asked for.
//!
//! The writer also keeps the objects' managed fields ([`super::managed`]) beside them: every
//! write records what changed for the operation's [`Author`] (or for no one), and a removed
//! object's managed fields go with it.

use super::crd::{self, CrdChange, CrdRegistry};
use super::lifecycle::{self, Container};
use super::managed::fieldset::{Comparison, FieldSet};
use super::managed::{Author, FieldsTable, ManagedFieldsList, Managers};
use super::meta::{generated_name, new_uid};
use super::patch::lists::Shape;
use super::status::{already_exists, conflict, invalid, not_found, resource_not_found, OPTIMISTIC_LOCK};
use super::strategy::{self, Part};
use super::types::{TypeDef, CRD_GROUP, CRD_RESOURCE};
use super::validation::{self, Write};
use super::watch::{Change, Stamp, WatchHub};
use kube_gc::api::time::now_rfc3339;
use kube_gc::api::{
    ApiError, Discovery, EventRecord, Gvr, ObjectMeta, OwnerReference, PartialObjectMeta, StatusReason, WatchEvent,
    WatchEventType, WatchStream,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// How many times create draws a fresh `generateName` suffix before giving up, as the API server's
/// `RetryGenerateName` does.
const GENERATE_NAME_ATTEMPTS: usize = 8;

/// What a failed discovery reports for a group-version.
const DISCOVERY_FAILURE: &str = "the server is currently unable to handle the request";

/// The objects of one type, by namespace then name. Nested maps let lookups borrow `&str` keys
/// instead of allocating a tuple per call.
#[derive(Default)]
struct Objects {
    by_namespace: BTreeMap<String, BTreeMap<String, Arc<PartialObjectMeta>>>,
    len: usize,
}

impl Objects {
    fn get(&self, namespace: &str, name: &str) -> Option<&Arc<PartialObjectMeta>> {
        self.by_namespace.get(namespace)?.get(name)
    }

    fn insert(&mut self, obj: Arc<PartialObjectMeta>) {
        let names = self.by_namespace.entry(obj.metadata.namespace.clone()).or_default();
        if names.insert(obj.metadata.name.clone(), obj).is_none() {
            self.len += 1;
        }
    }

    fn remove(&mut self, namespace: &str, name: &str) -> Option<Arc<PartialObjectMeta>> {
        let names = self.by_namespace.get_mut(namespace)?;
        let removed = names.remove(name)?;
        if names.is_empty() {
            self.by_namespace.remove(namespace);
        }
        self.len -= 1;
        Some(removed)
    }

    fn iter(&self) -> impl Iterator<Item = &Arc<PartialObjectMeta>> {
        self.by_namespace.values().flat_map(|names| names.values())
    }

    fn in_namespace(&self, namespace: &str) -> impl Iterator<Item = &Arc<PartialObjectMeta>> {
        self.by_namespace
            .get(namespace)
            .into_iter()
            .flat_map(|names| names.values())
    }
}

/// A type's objects at one resourceVersion, in stored form (see [`present`]), ordered by namespace
/// then name; what a paginated list serves its pages from.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The objects.
    pub items: Vec<Arc<PartialObjectMeta>>,
    /// The resourceVersion the snapshot was taken at.
    pub resource_version: u64,
    /// The `apiVersion` of the version the snapshot was read through.
    pub api_version: String,
    /// The type's kind.
    pub kind: String,
}

/// One served type: its definition, objects and watch hub.
pub(super) struct TypeState {
    pub(super) def: TypeDef,
    objects: Objects,
    hub: WatchHub,
}

tokio::task_local! {
    /// The resourceVersion of the last write the request being served committed: what its audit
    /// line orders by, since two requests that race may be logged in either order.
    pub(crate) static COMMITTED: std::cell::Cell<Option<u64>>;
}

/// The type of `types` serving `gvr`, if that version is served.
fn served_mut<'a>(types: &'a mut Types, gvr: &Gvr) -> Result<&'a mut TypeState, ApiError> {
    types
        .get_mut(gvr.group.as_str())
        .and_then(|resources| resources.get_mut(gvr.resource.as_str()))
        .filter(|ty| ty.def.serves(&gvr.version))
        .ok_or_else(|| resource_not_found(gvr))
}

/// The whole simulated cluster.
pub(super) struct State {
    /// The last resourceVersion handed out. It starts at 1, as etcd's revision does, so that no
    /// list ever returns `"0"`, which a watch would read as "from now"; or, in a restored cluster,
    /// at the saved one.
    last_rv: u64,
    /// Types by group, then resource.
    types: Types,
    /// Set once the server stops: every write is refused from then on, so that a saved state
    /// holds every write a client was ever told succeeded.
    sealed: bool,
    /// How many changes each type's watch history keeps.
    history_limit: usize,
    /// Recorded core/v1 events, in order.
    pub(super) events: Vec<EventRecord>,
    /// Group-versions whose discovery fails.
    pub(super) failing_discovery: BTreeSet<String>,
    /// The types served because a CRD object describes them.
    crds: CrdRegistry,
    /// The resourceVersion the cluster was restored at, 0 if it was not: every type's watch history
    /// starts after it, since the changes up to it were not kept.
    restored_at: u64,
    /// Whether a create in a namespace that does not exist is refused ([`super::lifecycle`]).
    pub(super) namespaces_enforced: bool,
    /// The namespaces and CRDs waiting for their contents to go ([`super::lifecycle`]).
    pub(super) terminating: BTreeSet<Container>,
    /// The terminating namespaces whose pods go first: their other objects are deleted once no
    /// pod is left ([`super::lifecycle`]).
    pub(super) pods_first: BTreeSet<String>,
    /// Set for the length of one `dryRun=All` operation: writers check and compute everything and
    /// store nothing, send no event and start no cascade.
    pub(super) dry_run: bool,
    /// The managed fields of the objects, by UID; shared with the readers that present objects.
    pub(super) fields: Arc<FieldsTable>,
    /// Who the writes of the current operation are recorded as; set, like `dry_run`, for the length
    /// of one user operation. `None`: no one (the simulator's own writes and the collector's).
    pub(super) author: Option<Author>,
    /// The managed fields the current operation's last write left its object with.
    pub(super) written_fields: Option<ManagedFieldsList>,
    /// The part of its object the current operation writes; set, like `dry_run`, for the length of
    /// one user operation ([`super::strategy`]).
    pub(super) part: Part,
}

/// How a write records its author in the object's managed fields.
pub(super) enum Recording {
    /// As an update: the author takes what it added or changed.
    Update,
    /// As an apply of a configuration setting `applied`; `force` takes conflicting fields.
    Apply { applied: FieldSet, force: bool },
}

/// Types by group, then resource, as [`State`] keeps them.
type Types = BTreeMap<String, BTreeMap<String, TypeState>>;

/// The stored objects of one type of `types`; none for an unknown type.
fn stored_in<'a>(types: &'a Types, group: &str, resource: &str) -> impl Iterator<Item = &'a Arc<PartialObjectMeta>> {
    types
        .get(group)
        .and_then(|resources| resources.get(resource))
        .into_iter()
        .flat_map(|ty| ty.objects.iter())
}

/// Why [`State::restore`] refused an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RestoreRefusal {
    /// No served type has that group and resource.
    UnknownType,
    /// An object of that type, namespace and name is already there.
    Taken,
    /// The object's resourceVersion is not a number at most the cluster's counter, so a later
    /// write could hand the same resourceVersion out again.
    BadResourceVersion,
}

impl State {
    /// A cluster serving `types`, each keeping `history_limit` watch events.
    pub(super) fn new(types: Vec<TypeDef>, history_limit: usize) -> Self {
        Self::at(types, history_limit, 1, 0)
    }

    /// A cluster serving `types` and no objects yet, restored at resourceVersion `rv`: the
    /// counter goes on from there, and a watch from an older resourceVersion gets 410 Gone.
    pub(super) fn restored(types: Vec<TypeDef>, history_limit: usize, rv: u64) -> Self {
        // Never below 1, for the reason `last_rv` gives.
        Self::at(types, history_limit, rv.max(1), rv)
    }

    fn at(types: Vec<TypeDef>, history_limit: usize, last_rv: u64, restored_at: u64) -> Self {
        let mut state = State {
            last_rv,
            types: BTreeMap::new(),
            sealed: false,
            history_limit,
            events: Vec::new(),
            failing_discovery: BTreeSet::new(),
            crds: CrdRegistry::default(),
            restored_at,
            namespaces_enforced: false,
            terminating: BTreeSet::new(),
            pods_first: BTreeSet::new(),
            dry_run: false,
            fields: Arc::default(),
            author: None,
            written_fields: None,
            part: Part::Main,
        };
        for def in types {
            state.register(def);
        }
        state
    }

    /// Puts back an object of a restored cluster as it was saved, resourceVersion included. It
    /// takes no resourceVersion and sends no watch event: every watch of a restored cluster starts
    /// after it was restored. Restoring a CRD does not serve its type until
    /// [`sync_crds`](Self::sync_crds).
    pub(super) fn restore(
        &mut self,
        group: &str,
        resource: &str,
        obj: Arc<PartialObjectMeta>,
        managed_fields: Option<ManagedFieldsList>,
    ) -> Result<(), RestoreRefusal> {
        let ty = self
            .types
            .get_mut(group)
            .and_then(|resources| resources.get_mut(resource))
            .ok_or(RestoreRefusal::UnknownType)?;
        let rv: u64 = obj
            .metadata
            .resource_version
            .parse()
            .map_err(|_| RestoreRefusal::BadResourceVersion)?;
        if rv > self.last_rv {
            return Err(RestoreRefusal::BadResourceVersion);
        }
        if ty.objects.get(&obj.metadata.namespace, &obj.metadata.name).is_some() {
            return Err(RestoreRefusal::Taken);
        }
        if managed_fields.is_some() {
            self.fields.set(&obj.metadata.uid, managed_fields);
        }
        ty.objects.insert(obj);
        Ok(())
    }

    /// Adds a type, or replaces the definition of a registered one, keeping its objects and
    /// watchers (as updating a CRD does).
    pub(super) fn register(&mut self, def: TypeDef) {
        let resources = self.types.entry(def.group.clone()).or_default();
        match resources.get_mut(&def.resource) {
            Some(existing) => {
                let rotations = std::mem::take(&mut existing.def.storage_rotations);
                existing.def = TypeDef {
                    storage_rotations: rotations,
                    ..def
                };
            }
            None => {
                let state = TypeState {
                    def,
                    objects: Objects::default(),
                    hub: WatchHub::new(self.history_limit, self.restored_at),
                };
                resources.insert(state.def.resource.clone(), state);
            }
        }
    }

    /// Removes a type: each object is deleted (with its DELETED event), then the type's watch
    /// streams end.
    pub(super) fn unregister(&mut self, group: &str, resource: &str) {
        let Some(resources) = self.types.get_mut(group) else {
            return;
        };
        let Some(mut ty) = resources.remove(resource) else {
            return;
        };
        if resources.is_empty() {
            self.types.remove(group);
        }
        let keys: Vec<(String, String)> = ty
            .objects
            .iter()
            .map(|o| (o.metadata.namespace.clone(), o.metadata.name.clone()))
            .collect();
        let mut writer = Writer {
            ty: &mut ty,
            last_rv: &mut self.last_rv,
            dry_run: false,
            part: Part::Main,
            fields: FieldsWriter {
                table: &self.fields,
                author: None,
                crd: None,
                written: &mut self.written_fields,
            },
        };
        for (namespace, name) in keys {
            writer.remove(&namespace, &name);
        }
    }

    /// The type serving `gvr`, if that version is served.
    pub(super) fn type_of(&self, gvr: &Gvr) -> Result<&TypeState, ApiError> {
        self.types
            .get(gvr.group.as_str())
            .and_then(|resources| resources.get(gvr.resource.as_str()))
            .filter(|ty| ty.def.serves(&gvr.version))
            .ok_or_else(|| resource_not_found(gvr))
    }

    /// Refuses every write from now on; see [`super::SimCluster::seal`].
    pub(super) fn seal(&mut self) {
        self.sealed = true;
    }

    /// The type serving `gvr`, to change its watchers rather than its objects.
    fn type_mut(&mut self, gvr: &Gvr) -> Result<&mut TypeState, ApiError> {
        served_mut(&mut self.types, gvr)
    }

    /// Moves the type serving `gvr` to its next storage generation ([`super::storage_version`]);
    /// the objects written from now on take resourceVersions after the last one handed out.
    pub(super) fn rotate_storage(&mut self, gvr: &Gvr) -> Result<u32, ApiError> {
        let last_rv = self.last_rv;
        let ty = self.type_mut(gvr)?;
        ty.def.storage_rotations.push(last_rv);
        Ok(ty.def.storage_generation())
    }

    /// Gives the served type `group`/`resource` the storage generations of a saved cluster.
    pub(super) fn restore_storage_rotations(&mut self, group: &str, resource: &str, rotations: Vec<u64>) {
        if let Some(ty) = self.types.get_mut(group).and_then(|r| r.get_mut(resource)) {
            ty.def.storage_rotations = rotations;
        }
    }

    /// The type serving `gvr` and the resourceVersion of each of its objects.
    pub(super) fn stored_versions(&self, gvr: &Gvr) -> Result<(&TypeDef, Vec<u64>), ApiError> {
        let ty = self.type_of(gvr)?;
        let versions = ty
            .objects
            .iter()
            .map(|o| o.metadata.resource_version.parse().unwrap_or(0));
        Ok((&ty.def, versions.collect()))
    }

    /// A writer for the type serving `gvr`; 503 once the cluster is sealed.
    pub(super) fn writer(&mut self, gvr: &Gvr) -> Result<Writer<'_>, ApiError> {
        if self.sealed {
            return Err(ApiError::status(
                StatusReason::ServiceUnavailable,
                "the server is shutting down; the write was not made",
            ));
        }
        let crd = self.describing_crd(gvr);
        Ok(Writer {
            ty: served_mut(&mut self.types, gvr)?,
            last_rv: &mut self.last_rv,
            dry_run: self.dry_run,
            part: self.part,
            fields: FieldsWriter {
                table: &self.fields,
                author: self.author.as_ref(),
                crd: crd.map(|crd| (crd, gvr.version.clone())),
                written: &mut self.written_fields,
            },
        })
    }

    /// The CRD object describing `gvr`'s type, whose schema tells its lists apart; looked up only
    /// when a write may have managed fields to record.
    fn describing_crd(&self, gvr: &Gvr) -> Option<Arc<PartialObjectMeta>> {
        let recording = self.author.is_some() || !self.fields.is_empty();
        if !recording || !self.type_of(gvr).is_ok_and(|ty| ty.def.custom) {
            return None;
        }
        let name = format!("{}.{}", gvr.resource, gvr.group);
        self.stored_object(CRD_GROUP, CRD_RESOURCE, "", &name).cloned()
    }

    /// Creates an object; see [`super::SimCluster::create`].
    pub(super) fn create(&mut self, gvr: &Gvr, obj: PartialObjectMeta) -> Result<PartialObjectMeta, ApiError> {
        self.create_recorded(gvr, obj, &Recording::Update)
    }

    /// Creates an object, recording its author as `recording` says.
    pub(super) fn create_recorded(
        &mut self,
        gvr: &Gvr,
        mut obj: PartialObjectMeta,
        recording: &Recording,
    ) -> Result<PartialObjectMeta, ApiError> {
        self.check_create_allowed(gvr, &obj.metadata.namespace)?;
        let mut w = self.writer(gvr)?;
        // The name is made before validation, as upstream's registry makes it, so that both the
        // prefix and the name made from it are checked.
        if obj.metadata.name.is_empty() && !obj.metadata.generate_name.is_empty() {
            obj.metadata.name = w.free_generated_name(&obj.metadata)?;
        }
        prepare_create(&w.ty.def, &mut obj.metadata)?;
        if crd::is_crd_type(gvr) {
            crd::prepare_create(&w.ty.def, &mut obj)?;
        }
        if lifecycle::is_namespace_type(gvr) {
            lifecycle::prepare_namespace(&mut obj);
        }
        if w.ty.objects.get(&obj.metadata.namespace, &obj.metadata.name).is_some() {
            return Err(already_exists(&w.ty.def, &obj.metadata.name));
        }
        check_size(&obj)?;
        if obj.metadata.uid.is_empty() {
            obj.metadata.uid = new_uid();
        }
        obj.metadata.creation_timestamp = Some(now_rfc3339());
        obj.api_version.clear();
        obj.kind.clear();
        strategy::prepare_create(&w.ty.def, &mut obj, w.ty.objects.iter())?;
        validation::object_spec(&w.ty.def, None, &obj)?;
        let stored = w.store_new(obj, recording)?;
        let out = present(&stored, gvr, &w.ty.def);
        self.after_write(gvr);
        Ok(out)
    }

    /// What every successful write does last: a write to the CRD type changes the served types,
    /// and a terminating container that is now empty goes.
    pub(super) fn after_write(&mut self, gvr: &Gvr) {
        if self.dry_run {
            return;
        }
        if crd::is_crd_type(gvr) {
            self.sync_crds();
        }
        self.finish_terminating();
        // Outside a request (the in-memory face, tests), nobody reads it.
        let _ = COMMITTED.try_with(|rv| rv.set(Some(self.last_rv)));
    }

    /// Makes the served custom types match the stored CRDs ([`super::crd`]).
    pub(super) fn sync_crds(&mut self) {
        let State { types, crds, .. } = self;
        let stored = stored_in(types, CRD_GROUP, CRD_RESOURCE).map(|crd| &**crd);
        let served = |group: &str, resource: &str| {
            let def = &types.get(group)?.get(resource)?.def;
            Some(TypeDef {
                storage_rotations: Vec::new(),
                ..def.clone()
            })
        };
        for change in crds.reconcile(stored, served) {
            match change {
                CrdChange::Register(def) => self.register(def),
                CrdChange::Unregister { group, resource } => self.unregister(&group, &resource),
                CrdChange::RotateStorage { group, resource } => {
                    let last_rv = self.last_rv;
                    if let Some(ty) = self.types.get_mut(&group).and_then(|r| r.get_mut(&resource)) {
                        ty.def.storage_rotations.push(last_rv);
                    }
                }
            }
        }
    }

    /// True when `def` is served because a CRD asks for it.
    pub(super) fn is_crd_backed(&self, def: &TypeDef) -> bool {
        self.crds.serves(&def.group, &def.resource)
    }

    /// The stored objects of a type, by group and resource; none for an unknown type.
    pub(super) fn stored(&self, group: &str, resource: &str) -> impl Iterator<Item = &Arc<PartialObjectMeta>> {
        stored_in(&self.types, group, resource)
    }

    /// Every served type's definition.
    pub(super) fn defs(&self) -> impl Iterator<Item = &TypeDef> {
        self.types
            .values()
            .flat_map(|resources| resources.values())
            .map(|ty| &ty.def)
    }

    /// The last resourceVersion handed out.
    pub(super) fn resource_version(&self) -> u64 {
        self.last_rv
    }

    /// The objects of the type serving `gvr`, in one namespace or all of them (`None`).
    pub(super) fn snapshot(&self, gvr: &Gvr, namespace: Option<&str>) -> Result<Snapshot, ApiError> {
        let ty = self.type_of(gvr)?;
        let items = match namespace {
            Some(namespace) => ty.objects.in_namespace(namespace).cloned().collect(),
            None => ty.objects.iter().cloned().collect(),
        };
        Ok(Snapshot {
            items,
            resource_version: self.last_rv,
            api_version: gvr.api_version(),
            kind: ty.def.kind.clone(),
        })
    }

    /// Reads one object.
    pub(super) fn get(&self, gvr: &Gvr, namespace: &str, name: &str) -> Result<PartialObjectMeta, ApiError> {
        let ty = self.type_of(gvr)?;
        let obj = ty
            .objects
            .get(namespace, name)
            .ok_or_else(|| not_found(&ty.def, name))?;
        Ok(present(obj, gvr, &ty.def))
    }

    /// Every object of a type, in all namespaces.
    pub(super) fn list(&self, gvr: &Gvr) -> Result<Vec<PartialObjectMeta>, ApiError> {
        let ty = self.type_of(gvr)?;
        Ok(ty.objects.iter().map(|o| present(o, gvr, &ty.def)).collect())
    }

    /// Replaces an object's user-settable fields; see [`super::SimCluster::update`].
    pub(super) fn update(&mut self, gvr: &Gvr, obj: PartialObjectMeta) -> Result<PartialObjectMeta, ApiError> {
        let mut w = self.writer(gvr)?;
        let old = w.existing(&obj.metadata.namespace, &obj.metadata.name)?;
        // A PUT carries its object's UID as a storage precondition (`defaultUpdatedObjectInfo`),
        // so a mismatch is a 409 here, unlike a patch's 422.
        if !obj.metadata.uid.is_empty() && obj.metadata.uid != old.metadata.uid {
            let detail = format!(
                "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                obj.metadata.uid, old.metadata.uid
            );
            return Err(conflict(&w.ty.def, &old.metadata.name, &detail));
        }
        let out = w.replace(&old, obj)?;
        let out = present(&out, gvr, &w.ty.def);
        self.after_write(gvr);
        Ok(out)
    }

    /// Opens a watch on the type serving `gvr`.
    pub(super) fn watch(&mut self, gvr: &Gvr, resource_version: &str) -> Result<WatchStream, ApiError> {
        let ty = self.type_mut(gvr)?;
        let subscription = ty.hub.subscribe(resource_version)?;
        Ok(subscription.into_stream(Some(stamp(gvr, &ty.def))))
    }

    /// Opens a watch that, from `""` or `"0"`, first reports every existing object as ADDED,
    /// stamped with apiVersion and kind if `stamped`; see [`super::SimCluster::watch_objects`].
    pub(super) fn watch_with_initial(
        &mut self,
        gvr: &Gvr,
        resource_version: &str,
        stamped: bool,
    ) -> Result<WatchStart, ApiError> {
        let now = self.last_rv;
        let ty = self.type_mut(gvr)?;
        let (start, initial) = match resource_version {
            "" | "0" => (now, ty.objects.iter().map(|o| Change::added(Arc::clone(o))).collect()),
            rv => (rv.parse().unwrap_or(0), Vec::new()),
        };
        let initial_events = initial.len();
        let subscription = ty.hub.subscribe_after(resource_version, initial)?;
        let stamp = stamped.then(|| stamp(gvr, &ty.def));
        Ok(WatchStart {
            stream: subscription.into_stream(stamp),
            initial_events,
            resource_version: start,
        })
    }

    /// Sends every open watch of the type serving `gvr` a progress notification at the newest
    /// resourceVersion ([`WatchHub::progress`]).
    pub(super) fn request_progress(&self, gvr: &Gvr) -> Result<(), ApiError> {
        self.type_of(gvr)?.hub.progress(self.last_rv);
        Ok(())
    }

    /// The watch hub of a type, by group and resource.
    pub(super) fn hub(&self, group: &str, resource: &str) -> Option<&WatchHub> {
        Some(&self.types.get(group)?.get(resource)?.hub)
    }

    /// The discovery document, leaving out failing group-versions.
    pub(super) fn discover(&self) -> Discovery {
        let mut discovery = Discovery::default();
        for ty in self.types.values().flat_map(|resources| resources.values()) {
            for resource in ty.def.api_resources() {
                let group_version = resource.gvr.api_version();
                if self.failing_discovery.contains(&group_version) {
                    discovery.failed.insert(group_version, DISCOVERY_FAILURE.to_string());
                } else {
                    discovery.resources.push(resource);
                }
            }
        }
        discovery
    }

    /// The stored object of the type `group`/`resource` at `namespace`/`name`, without a copy.
    pub(super) fn stored_object(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Option<&Arc<PartialObjectMeta>> {
        self.types.get(group)?.get(resource)?.objects.get(namespace, name)
    }

    /// True when no namespaced type has an object in `namespace`.
    pub(super) fn namespace_is_empty(&self, namespace: &str) -> bool {
        let types = self.types.values().flat_map(|resources| resources.values());
        types
            .filter(|ty| ty.def.namespaced)
            .all(|ty| ty.objects.in_namespace(namespace).next().is_none())
    }

    /// True when the type `group`/`resource` holds an object in `namespace`.
    pub(super) fn holds_in_namespace(&self, group: &str, resource: &str, namespace: &str) -> bool {
        self.types
            .get(group)
            .and_then(|resources| resources.get(resource))
            .is_some_and(|ty| ty.objects.in_namespace(namespace).next().is_some())
    }

    /// How many objects the type `group`/`resource` holds; 0 for an unknown type.
    pub(super) fn count(&self, group: &str, resource: &str) -> usize {
        self.types
            .get(group)
            .and_then(|resources| resources.get(resource))
            .map_or(0, |ty| ty.objects.len)
    }

    /// How many objects are stored, over all types.
    pub(super) fn object_count(&self) -> usize {
        self.types
            .values()
            .flat_map(|resources| resources.values())
            .map(|ty| ty.objects.len)
            .sum()
    }
}

/// An open watch and where it starts.
pub struct WatchStart {
    /// The events.
    pub stream: WatchStream,
    /// How many of the first events report objects that existed when the watch started.
    pub initial_events: usize,
    /// Once those are delivered, the watch has reported every change of its type up to this
    /// resourceVersion.
    pub resource_version: u64,
}

impl WatchStart {
    /// The events of a watch-list: the initial ones, then the bookmark that ends them, at the
    /// version they show, then the changes after it.
    pub fn with_initial_events_end(self) -> WatchStream {
        use futures::stream::{self, StreamExt};
        let WatchStart {
            stream,
            initial_events,
            resource_version,
        } = self;
        let end = move || Ok(WatchEvent::initial_events_end(resource_version.to_string()));
        let before_any = (initial_events == 0).then(end);
        let events = stream.enumerate().flat_map(move |(i, event)| {
            let after_last_initial = (i + 1 == initial_events).then(end);
            stream::iter(std::iter::once(event).chain(after_last_initial))
        });
        stream::iter(before_any).chain(events).boxed()
    }
}

/// Write access to one type plus the resourceVersion counter.
pub(super) struct Writer<'a> {
    pub(super) ty: &'a mut TypeState,
    last_rv: &'a mut u64,
    /// Compute each write, make none ([`State::dry_run`]).
    dry_run: bool,
    /// [`State::part`].
    part: Part,
    fields: FieldsWriter<'a>,
}

/// Write access to the managed fields of the objects a [`Writer`] writes.
struct FieldsWriter<'a> {
    table: &'a FieldsTable,
    /// [`State::author`].
    author: Option<&'a Author>,
    /// The CRD describing the type, and the version written through, for the type's shape.
    crd: Option<(Arc<PartialObjectMeta>, String)>,
    /// [`State::written_fields`].
    written: &'a mut Option<ManagedFieldsList>,
}

impl Writer<'_> {
    /// The stored object, or 404.
    pub(super) fn existing(&self, namespace: &str, name: &str) -> Result<Arc<PartialObjectMeta>, ApiError> {
        self.ty
            .objects
            .get(namespace, name)
            .cloned()
            .ok_or_else(|| not_found(&self.ty.def, name))
    }

    /// The managers of the stored object with `uid`.
    pub(super) fn managers(&self, uid: &str) -> Managers {
        Managers::decode(self.fields.table.get(uid).as_deref())
    }

    /// The shape of the type's objects, which tells their lists apart.
    pub(super) fn shape(&self) -> Shape<'_> {
        let schema = self
            .fields
            .crd
            .as_ref()
            .and_then(|(crd, version)| super::crd::schema(crd, version));
        Shape::root(&self.ty.def.kind, self.ty.def.custom, schema)
    }

    /// The managed fields `new` has once written over `old` (`None`: a create), recorded as
    /// `recording` says; an apply that changes another manager's field is 409 Conflict.
    fn fields_after(
        &self,
        old: Option<&PartialObjectMeta>,
        new: &PartialObjectMeta,
        recording: &Recording,
    ) -> Result<Option<ManagedFieldsList>, ApiError> {
        let current = old.and_then(|old| self.fields.table.get(&old.metadata.uid));
        let author = self.fields.author;
        if current.is_none() && author.is_none() {
            return Ok(None);
        }
        let as_json = |o: &PartialObjectMeta| serde_json::to_value(o).unwrap_or_default();
        let change = Comparison::of(old.map(as_json).as_ref(), &as_json(new), self.shape());
        let mut managers = Managers::decode(current.as_deref());
        match (recording, author) {
            (Recording::Apply { applied, force }, Some(author)) => {
                managers.record_apply(author, applied.clone(), &change, *force)?;
            }
            (_, author) => managers.record_update(author, &change),
        }
        Ok(managers.encode())
    }

    /// Stores a new object, recording its author as `recording` says.
    pub(super) fn store_new(
        &mut self,
        obj: PartialObjectMeta,
        recording: &Recording,
    ) -> Result<Arc<PartialObjectMeta>, ApiError> {
        let fields = self.fields_after(None, &obj, recording)?;
        Ok(self.put(obj, WatchEventType::Added, fields))
    }

    /// Stores `obj` at the next resourceVersion and publishes it as `event_type`, keeping its
    /// managed fields as they are; in a dry run, returns it as it stands.
    pub(super) fn store(&mut self, obj: PartialObjectMeta, event_type: WatchEventType) -> Arc<PartialObjectMeta> {
        let fields = self.fields.table.get(&obj.metadata.uid);
        self.put(obj, event_type, fields)
    }

    /// Stores `obj` with the managed fields `fields`.
    fn put(
        &mut self,
        mut obj: PartialObjectMeta,
        event_type: WatchEventType,
        fields: Option<ManagedFieldsList>,
    ) -> Arc<PartialObjectMeta> {
        fields.clone_into(self.fields.written);
        if self.dry_run {
            return Arc::new(obj);
        }
        if fields.is_some() || self.fields.table.get(&obj.metadata.uid).is_some() {
            self.fields.table.set(&obj.metadata.uid, fields);
        }
        *self.last_rv += 1;
        let rv = *self.last_rv;
        obj.metadata.resource_version = rv.to_string();
        let obj = Arc::new(obj);
        self.ty.objects.insert(Arc::clone(&obj));
        self.ty.hub.publish(Change {
            rv,
            event_type,
            object: Arc::clone(&obj),
        });
        obj
    }

    /// Removes an object now. Its DELETED event carries its last stored state at a fresh
    /// resourceVersion, as etcd reports a delete; that resourceVersion is returned.
    pub(super) fn remove(&mut self, namespace: &str, name: &str) -> Option<u64> {
        if self.dry_run {
            return self.ty.objects.get(namespace, name).map(|_| *self.last_rv);
        }
        let last = self.ty.objects.remove(namespace, name)?;
        if self.fields.table.get(&last.metadata.uid).is_some() {
            self.fields.table.set(&last.metadata.uid, None);
        }
        *self.last_rv += 1;
        let rv = *self.last_rv;
        // The object goes out as it was stored; its delivery stamps `rv` on it ([`Change`]).
        self.ty.hub.publish(Change {
            rv,
            event_type: WatchEventType::Deleted,
            object: last,
        });
        Some(rv)
    }

    /// Writes `new` over `old` with the registry's update rules (`Store.Update`): resourceVersion
    /// and UID guards, immutable system fields, validation, no new finalizers while deleting, no
    /// write at all when nothing changed, and removal once a deleting object has no finalizers
    /// left (`errEmptiedFinalizers`: no MODIFIED, only the DELETED). Returns the object as written.
    pub(super) fn replace(
        &mut self,
        old: &Arc<PartialObjectMeta>,
        new: PartialObjectMeta,
    ) -> Result<Arc<PartialObjectMeta>, ApiError> {
        self.replace_recorded(old, new, &Recording::Update)
    }

    /// [`replace`](Self::replace), recording the author as `recording` says. A write that
    /// changes neither the object nor its managed fields writes nothing.
    pub(super) fn replace_recorded(
        &mut self,
        old: &Arc<PartialObjectMeta>,
        mut new: PartialObjectMeta,
        recording: &Recording,
    ) -> Result<Arc<PartialObjectMeta>, ApiError> {
        strategy::prepare_update(&self.ty.def, self.part, old, &mut new);
        check_replace(&self.ty.def, old, &mut new)?;
        if crd::is_crd_def(&self.ty.def) {
            crd::prepare_update(&self.ty.def, self.part, old, &mut new)?;
        }
        let fields = self.fields_after(Some(old), &new, recording)?;
        // A write that changes nothing is stored anyway while the object is stale
        // ([`super::storage_version`]); its version is read only for such a write.
        let stale = || self.ty.def.is_stale(old.metadata.resource_version.parse().unwrap_or(0));
        if new == **old && fields == self.fields.table.get(&old.metadata.uid) && !stale() {
            fields.clone_into(self.fields.written);
            return Ok(Arc::clone(old));
        }
        let held = lifecycle::held_by_spec(&self.ty.def.group, &self.ty.def.resource, &new);
        if new.metadata.deletion_timestamp.is_some() && new.metadata.finalizers.is_empty() && !held {
            if let Some(rv) = self.remove(&old.metadata.namespace, &old.metadata.name) {
                new.metadata.resource_version = rv.to_string();
            }
            return Ok(Arc::new(new));
        }
        Ok(self.put(new, WatchEventType::Modified, fields))
    }

    /// A `generateName` name not taken yet.
    fn free_generated_name(&self, meta: &ObjectMeta) -> Result<String, ApiError> {
        (0..GENERATE_NAME_ATTEMPTS)
            .map(|_| generated_name(&meta.generate_name))
            .find(|name| self.ty.objects.get(&meta.namespace, name).is_none())
            .ok_or_else(|| already_exists(&self.ty.def, &meta.generate_name))
    }
}

/// Create-time checks and defaults that do not depend on other objects.
fn prepare_create(def: &TypeDef, meta: &mut ObjectMeta) -> Result<(), ApiError> {
    let shown = meta.name.clone();
    // The server keeps the generation; the types that have one start it themselves.
    meta.generation = None;
    if let Some(ts) = &meta.deletion_timestamp {
        let detail = format!("metadata.deletionTimestamp: Invalid value: {ts:?}: must not be set on create");
        return Err(invalid(def, &shown, detail));
    }
    dedup_owner_references(&mut meta.owner_references);
    validation::object_meta(def, &shown, meta, Write::Create)
}

/// The guards and fix-ups of an update, applied to `new` in place.
fn check_replace(def: &TypeDef, old: &PartialObjectMeta, new: &mut PartialObjectMeta) -> Result<(), ApiError> {
    let name = old.metadata.name.as_str();
    let rv = std::mem::take(&mut new.metadata.resource_version);
    if !rv.is_empty() && rv != old.metadata.resource_version {
        return Err(conflict(def, name, OPTIMISTIC_LOCK));
    }
    if !new.metadata.uid.is_empty() && new.metadata.uid != old.metadata.uid {
        let detail = format!(
            "metadata.uid: Invalid value: {:?}: field is immutable",
            new.metadata.uid
        );
        return Err(invalid(def, name, detail));
    }
    keep_system_fields(old, new);
    dedup_owner_references(&mut new.metadata.owner_references);
    validation::object_meta(def, name, &new.metadata, Write::Update)?;
    validation::object_spec(def, Some(old), new)?;
    check_size(new)?;
    if old.metadata.deletion_timestamp.is_some() {
        let added: BTreeSet<&String> = new
            .metadata
            .finalizers
            .iter()
            .filter(|f| !old.metadata.finalizers.contains(f))
            .collect();
        if !added.is_empty() {
            let detail = format!(
                "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, \
                 found new finalizers {added:?}"
            );
            return Err(invalid(def, name, detail));
        }
    }
    Ok(())
}

/// Copies what an update can never change from the stored object.
fn keep_system_fields(old: &PartialObjectMeta, new: &mut PartialObjectMeta) {
    new.api_version.clear();
    new.kind.clear();
    let (o, n) = (&old.metadata, &mut new.metadata);
    n.name.clone_from(&o.name);
    n.namespace.clone_from(&o.namespace);
    n.uid.clone_from(&o.uid);
    n.resource_version.clone_from(&o.resource_version);
    n.creation_timestamp.clone_from(&o.creation_timestamp);
    n.deletion_timestamp.clone_from(&o.deletion_timestamp);
    n.deletion_grace_period_seconds = o.deletion_grace_period_seconds;
    n.generation = o.generation;
}

/// Drops exact duplicate owner references, keeping the first, as the API server has done since
/// 1.20 (`dedupOwnerReferences`); refs that share a UID but differ elsewhere are kept.
fn dedup_owner_references(refs: &mut Vec<OwnerReference>) {
    let mut kept: Vec<OwnerReference> = Vec::with_capacity(refs.len());
    for r in refs.drain(..) {
        if !kept.contains(&r) {
            kept.push(r);
        }
    }
    *refs = kept;
}

/// The storage's refusal of an object too large for it ([`super::limits::too_large`]).
fn check_size(obj: &PartialObjectMeta) -> Result<(), ApiError> {
    if super::limits::too_large(obj) {
        return Err(ApiError::status(StatusReason::Unknown, super::limits::OBJECT_TOO_LARGE));
    }
    Ok(())
}

/// `obj` as read through `gvr`: `apiVersion` is the GVR's, `kind` the type's.
/// What a watch of `gvr` stamps on its objects.
fn stamp(gvr: &Gvr, def: &TypeDef) -> Stamp {
    Stamp {
        api_version: gvr.api_version(),
        kind: def.kind.clone(),
    }
}

pub(super) fn present(obj: &PartialObjectMeta, gvr: &Gvr, def: &TypeDef) -> PartialObjectMeta {
    let mut out = obj.clone();
    out.api_version = gvr.api_version();
    out.kind.clone_from(&def.kind);
    out
}
