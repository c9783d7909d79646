//! kube-gc's simulated Kubernetes cluster, and the tools built on it: the in-memory API server
//! ([`SimCluster`], served over HTTP by [`http`]), the generator of synthetic clusters
//! ([`generate`]), the reference model of the collector's decisions ([`model`]) that the
//! differential tests and `loadgen replay --mode full` check the engine against, and the demo job
//! that runs the engine against a simulated cluster ([`simulate`]). It depends on the engine
//! (`kube_gc`) for the API types the collector speaks; the engine never depends on it.
//!
//! # The simulated API server
//!
//! The in-memory simulated cluster keeps one totally ordered history: every write takes the next
//! value of a single resourceVersion counter, and every watcher of a type sees that type's part of
//! the history in order, with nothing missed or repeated.
//!
//! [`SimCluster`] reproduces the API server's metadata semantics that the garbage collector depends
//! on: UIDs and resourceVersions, the registry's deletion rules (finalizers, `deletionTimestamp`,
//! propagation-policy defaults per type, UID and resourceVersion preconditions), the update rules
//! (optimistic concurrency, immutable fields, no new finalizers while deleting, removal once the
//! last finalizer goes), JSON merge, strategic merge and JSON patches, server-side apply with its
//! field ownership (`managed`, kept beside the objects, never in them), the 404/409/410/415/422
//! answers, discovery, and watches with a bounded replay history.
//!
//! # Model
//!
//! - One lock ([`StateLock`], a `parking_lot` mutex that spins before it parks) guards the whole
//!   state. Each operation takes it once and does all its work under it, so operations are
//!   linearizable. It is never held across an `.await`, and no caller code runs under it: watch
//!   events reach their streams through bounded channels that are filled under the lock without
//!   waiting (a full one closes its watch) and drained outside it.
//! - Objects are stored once per type (group + resource) and keyed by namespace and name. Reading
//!   or watching through any served version of a type stamps the object with that version's
//!   `apiVersion` and the type's `kind`.
//! - There are two faces. The [`ClusterApi`](kube_gc::api::ClusterApi) implementation is what the
//!   GC uses; each of its calls is counted in [`ApiCalls`]. The inherent methods
//!   ([`SimCluster::create`], [`SimCluster::update`], [`SimCluster::delete_object`], …) are how
//!   tests and the demo act as users; they are not counted.
//! - Failures are injected on the trait face only ([`SimCluster::inject_fault`], through the
//!   [`Faults`] layer): the GC sees a broken resource or a flaky verb while the user methods keep
//!   working.
//! - A cluster can be saved and restored ([`SimCluster::save_state`],
//!   [`SimCluster::load_state`]) with its types, objects and resourceVersion counter, but not its
//!   watch history: a watch from before the restore gets 410 Gone, and its client relists.
//! - Lists on the trait face come in pages from one snapshot, as over HTTP ([`pages`]): every
//!   page of a list shows the collection at the first page's resourceVersion, so reading it in
//!   pages changes nothing but when each object arrives.
//!
//! # Deliberate simplifications
//!
//! - No graceful deletion: a DELETE of an object without finalizers removes it at once, pods too.
//! - Namespaces and CRDs go through their lifecycles ([`lifecycle`]), but a create in a namespace
//!   that does not exist is accepted unless [`SimCluster::enforce_namespaces`] is on (`kube-gc
//!   sim-apiserver` turns it on).
//! - Create keeps a non-empty `metadata.uid` from the request, so recorded streams can be loaded
//!   with their UIDs; a real API server always assigns its own. A resourceVersion sent on create is
//!   ignored rather than rejected.
//! - A watch from `""` or `"0"` starts at the present and sends nothing for existing objects
//!   (callers list first); a watch from a resourceVersion newer than the current one is accepted
//!   and simply waits for later changes.
//! - Names and finalizer names are not checked against the DNS-label grammar.

#![deny(missing_docs)]
#![allow(clippy::mutable_key_type)]
#![allow(rustdoc::private_intra_doc_links)]

mod calls;
mod crd;
mod defaults;
mod delete;
mod dry_run;
#[doc(hidden)]
pub mod fuzzing;
pub mod generate;
pub mod http;
mod lifecycle;
pub mod limits;
mod managed;
mod meta;
pub mod model;
mod pages;
mod patch;
pub mod persist;
pub mod simulate;
mod status;
mod storage_version;
mod store;
mod strategy;
mod types;
mod validation;
mod watch;

#[cfg(test)]
mod tests;

pub use calls::ApiCalls;
pub use delete::Deletion;
pub use dry_run::{Writes, Written};
pub use lifecycle::{DEFAULT_NAMESPACES, FINALIZER_CRD_CLEANUP, FINALIZER_KUBERNETES};
pub(crate) use managed::FieldsTable;
pub use managed::ManagedFieldsList;
pub use persist::{temporary_state_path, StateError};
pub use storage_version::StorageReport;
pub use store::{Snapshot, WatchStart};
pub use strategy::Part;
pub use types::TypeDef;
pub use watch::Stamp;

use kube_gc::api::layers::{Fault, Faults};
use kube_gc::api::{ApiError, DeleteOptions, EventRecord, Gvr, PartialObjectMeta, PatchType};
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::time::Duration;

/// How many watch events each type keeps for replay unless told otherwise.
pub const DEFAULT_HISTORY: usize = 100_000;

/// An in-memory Kubernetes API server for metadata; see the [module docs](self).
///
/// Cheap to share as `Arc<SimCluster>`: every method takes `&self`.
///
/// ```
/// use kube_gc_sim::SimCluster;
/// use kube_gc::api::{DeleteOptions, Gvr, ObjectMeta, PartialObjectMeta};
///
/// let cluster = SimCluster::new();
/// let pods = Gvr::new("", "v1", "pods");
/// let pod = PartialObjectMeta {
///     metadata: ObjectMeta { name: "p".into(), namespace: "default".into(), ..Default::default() },
///     ..Default::default()
/// };
/// let created = cluster.create(&pods, pod).unwrap();
/// assert!(!created.metadata.uid.is_empty());
/// cluster.delete_object(&pods, "default", "p", &DeleteOptions::default()).unwrap();
/// assert_eq!(cluster.object_count(), 0);
/// ```
pub struct SimCluster {
    state: StateLock<store::State>,
    /// The objects' managed fields, read without the state's lock ([`managed`]).
    fields: std::sync::Arc<FieldsTable>,
    calls: kube_gc::api::layers::Count,
    faults: Faults,
    /// The lists in progress on the [`ClusterApi`](kube_gc::api::ClusterApi) face.
    pages: pages::Pages,
}

impl SimCluster {
    /// A cluster serving the built-in catalogue: core, apps, batch, RBAC, coordination and
    /// events.k8s.io types.
    pub fn new() -> Self {
        Self::with_history(DEFAULT_HISTORY)
    }

    /// Like [`SimCluster::new`], keeping the last `events_per_type` watch events of each type for
    /// replay. A watch from an older resourceVersion gets 410 Gone.
    pub fn with_history(events_per_type: usize) -> Self {
        Self::build(types::builtin_catalogue(), events_per_type)
    }

    /// A cluster serving no types at all.
    pub fn empty() -> Self {
        Self::build(Vec::new(), DEFAULT_HISTORY)
    }

    fn build(types: Vec<TypeDef>, history: usize) -> Self {
        Self::from_state(store::State::new(types, history))
    }

    fn from_state(state: store::State) -> Self {
        SimCluster {
            fields: std::sync::Arc::clone(&state.fields),
            state: StateLock::new(state),
            calls: Default::default(),
            faults: Faults::default(),
            pages: pages::Pages::default(),
        }
    }

    /// Serves a type (a CRD), or replaces a served type's definition while keeping its objects
    /// and open watches.
    pub fn register(&self, def: TypeDef) {
        self.state.lock().register(def);
    }

    /// Stops serving a type: each of its objects is deleted, with a DELETED event, and then its
    /// watch streams end. Unknown types are ignored.
    pub fn unregister(&self, group: &str, resource: &str) {
        self.state.lock().unregister(group, resource);
    }

    /// Creates an object, as a user would.
    ///
    /// The name comes from `metadata.name`, or from `generateName` plus five random characters.
    /// A namespaced type needs a namespace and a cluster-scoped one must have none (422 Invalid);
    /// a taken name is 409 AlreadyExists; invalid owner references, a `deletionTimestamp`, or both
    /// GC finalizers at once are 422 Invalid. The server sets `resourceVersion`,
    /// `creationTimestamp` and, unless one is given (see the module docs), `uid`.
    pub fn create(&self, gvr: &Gvr, obj: PartialObjectMeta) -> Result<PartialObjectMeta, ApiError> {
        self.writes(false).create(gvr, obj).map(Written::into_object)
    }

    /// Reads an object, as a user would; 404 if it does not exist.
    pub fn get_object(&self, gvr: &Gvr, namespace: &str, name: &str) -> Result<PartialObjectMeta, ApiError> {
        self.state.lock().get(gvr, namespace, name)
    }

    /// Asks for a progress notification on every open watch of `gvr`'s type, as the API server's
    /// watch cache asks etcd: each watch then gets a BOOKMARK event at the cluster's newest
    /// resourceVersion, once it has delivered every change before it. Bookmarks of quiet types
    /// thus move on with the cluster, as a real server's do.
    pub fn request_watch_progress(&self, gvr: &Gvr) -> Result<(), ApiError> {
        self.state.lock().request_progress(gvr)
    }

    /// Every object of a type, in all namespaces; empty for an unknown type.
    pub fn list_objects(&self, gvr: &Gvr) -> Vec<PartialObjectMeta> {
        self.state.lock().list(gvr).unwrap_or_default()
    }

    /// Replaces an object's labels, annotations, owner references, finalizers and other fields, as
    /// a PUT does.
    ///
    /// A non-empty `resourceVersion` that is not the stored one is 409 Conflict, and so is a
    /// non-empty `uid` that is not the stored one (a PUT's UID is a precondition). Name,
    /// namespace, UID and timestamps are kept from the stored object. While the object is being
    /// deleted no finalizer may be added (422); once its last finalizer is removed it is deleted.
    /// An update that changes nothing writes nothing.
    pub fn update(&self, gvr: &Gvr, obj: PartialObjectMeta) -> Result<PartialObjectMeta, ApiError> {
        self.writes(false).update(gvr, obj).map(Written::into_object)
    }

    /// Patches an object, as a user would; the result goes through the same rules as
    /// [`SimCluster::update`], except that a `metadata.uid` that differs from the stored one is
    /// 422 Invalid. A strategic merge patch of a custom type is 415; a malformed body is 400.
    pub fn patch_object(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        body: &serde_json::Value,
    ) -> Result<PartialObjectMeta, ApiError> {
        self.writes(false)
            .patch_object(gvr, namespace, name, patch_type, body)
            .map(Written::into_object)
    }

    /// Deletes an object, as a user would: preconditions (409 on mismatch), then the GC
    /// finalizers the options and the type's default call for. With finalizers left the object is
    /// marked with a `deletionTimestamp` and stays; without, it is removed now.
    ///
    /// Returns the object marked as deleting when it stays, or as it was when it is gone. A
    /// namespace or a CRD stays until what it holds is gone ([`lifecycle`]).
    pub fn delete_object(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deletion, ApiError> {
        self.writes(false).delete_object(gvr, namespace, name, opts)
    }

    /// The objects of `gvr`'s type in `namespace` (all namespaces for `None`), with the
    /// resourceVersion they were read at.
    pub fn snapshot(&self, gvr: &Gvr, namespace: Option<&str>) -> Result<Snapshot, ApiError> {
        self.state.lock().snapshot(gvr, namespace)
    }

    /// Opens a watch of `gvr`'s type in all namespaces. From a resourceVersion, the watch replays
    /// what came after it; from `""` or `"0"` it first reports every existing object as ADDED, as a
    /// real server does, and the snapshot and the start of the watch are taken in one step.
    pub fn watch_objects(&self, gvr: &Gvr, resource_version: &str) -> Result<WatchStart, ApiError> {
        self.state.lock().watch_with_initial(gvr, resource_version, true)
    }

    /// [`watch_objects`](Self::watch_objects), with each added or modified object the stored one
    /// itself, shared rather than copied, so without its apiVersion and kind (the store keeps
    /// neither): for a presentation that writes them itself, as the HTTP server does.
    pub fn watch_stored(&self, gvr: &Gvr, resource_version: &str) -> Result<WatchStart, ApiError> {
        self.state.lock().watch_with_initial(gvr, resource_version, false)
    }

    /// The definition of the type serving `gvr`; 404 when that version of it is not served.
    pub fn type_def(&self, gvr: &Gvr) -> Result<TypeDef, ApiError> {
        self.state.lock().type_of(gvr).map(|ty| ty.def.clone())
    }

    /// The last resourceVersion handed out, over all types.
    pub fn resource_version(&self) -> u64 {
        self.state.lock().resource_version()
    }

    /// The definitions of every served type, and the group-versions whose discovery fails.
    pub fn served_types(&self) -> (Vec<TypeDef>, BTreeSet<String>) {
        let state = self.state.lock();
        (state.defs().cloned().collect(), state.failing_discovery.clone())
    }

    /// The core/v1 events recorded through
    /// [`ClusterApi::create_event`](kube_gc::api::ClusterApi::create_event), in order.
    pub fn events(&self) -> Vec<EventRecord> {
        self.state.lock().events.clone()
    }

    /// How many [`ClusterApi`](kube_gc::api::ClusterApi) calls were made so far, by verb.
    pub fn api_calls(&self) -> ApiCalls {
        ApiCalls::from_count(&self.calls)
    }

    /// Refuses every write from now on with 503 ServiceUnavailable, reads and watches still
    /// served: a server that stops seals its cluster before saving it, so that a write still in
    /// flight is either in the saved state or was never acknowledged, as a real API server
    /// acknowledges only what its storage committed.
    pub fn seal(&self) {
        self.state.lock().seal();
    }

    /// How many objects are stored, over all types.
    pub fn object_count(&self) -> usize {
        self.state.lock().object_count()
    }

    /// The user's writes, made or, for a `dry_run`, answered without being made as `dryRun=All`
    /// asks ([`dry_run`]). They are recorded as no field manager's unless [`Writes::by`] names one.
    pub fn writes(&self, dry_run: bool) -> Writes<'_> {
        Writes {
            cluster: self,
            dry_run,
            manager: None,
            part: Part::Main,
        }
    }

    /// The managed fields (`metadata.managedFields`) of the object with `uid`: `None` until a field
    /// manager writes it ([`Writes::by`]).
    pub fn managed_fields(&self, uid: &str) -> Option<ManagedFieldsList> {
        self.fields.get(uid)
    }

    /// Every object's managed fields, for the HTTP presentation to read without the state's lock.
    pub(crate) fn fields_table(&self) -> std::sync::Arc<FieldsTable> {
        std::sync::Arc::clone(&self.fields)
    }

    /// The user's writes answered without being made.
    pub fn dry_run(&self) -> Writes<'_> {
        self.writes(true)
    }

    /// Makes a create in a namespace that does not exist fail with 404, as on a real cluster. Off
    /// by default, so that tests can use any namespace without creating it first.
    pub fn enforce_namespaces(&self, enforced: bool) {
        self.state.lock().set_namespaces_enforced(enforced);
    }

    /// Makes discovery of `group_version` (`apps/v1`, `v1`) fail, or succeed again. A failing
    /// group-version's resources are left out of the document and listed in its `failed` map.
    pub fn fail_discovery(&self, group_version: &str, fail: bool) {
        let mut state = self.state.lock();
        if fail {
            state.failing_discovery.insert(group_version.to_string());
        } else {
            state.failing_discovery.remove(group_version);
        }
    }

    /// Arms `fault`: from now on, the [`ClusterApi`](kube_gc::api::ClusterApi) calls it matches fail
    /// with its error (still counted in [`api_calls`](Self::api_calls)), until it has answered
    /// `fault.times` calls or [`clear_faults`](Self::clear_faults) is called. The user methods are
    /// never affected. When several faults match a call, the one injected first answers; see
    /// [`Fault`] for the matching rules.
    pub fn inject_fault(&self, fault: Fault) {
        self.faults.inject(fault);
    }

    /// Disarms every injected fault.
    pub fn clear_faults(&self) {
        self.faults.clear();
    }

    /// Delays the delivery of every watch event of a type by `delay`, in every open and future
    /// watch stream of that type, to model a lagging watch. Unknown types are ignored.
    pub fn set_watch_delay(&self, gvr_group: &str, resource: &str, delay: Duration) {
        if let Some(hub) = self.state.lock().hub(gvr_group, resource) {
            hub.set_delay(delay);
        }
    }

    /// Starts (`dark`) or ends a blackout of a type's watches: while it lasts, every open and future
    /// watch stream of the type loses the events it would deliver; the first event a stream meets
    /// after the blackout ends closes it with 410 Gone, so its watcher relists, as after a watch
    /// that fell too far behind. Unknown types are ignored.
    pub fn set_watch_blackout(&self, gvr_group: &str, resource: &str, dark: bool) {
        if let Some(hub) = self.state.lock().hub(gvr_group, resource) {
            hub.set_blackout(dark);
        }
    }
}

impl Default for SimCluster {
    fn default() -> Self {
        Self::new()
    }
}

/// Compile-time proof that the cluster can be shared across tasks.
const _: fn() = || {
    fn shared<T: Send + Sync + 'static>() {}
    shared::<SimCluster>();
};

/// The state's lock: spins a while before it parks.
///
/// Every call of the cluster takes the lock from a Tokio worker thread and holds it for a few
/// microseconds. `parking_lot` parks a waiter after a few spins and yields, and a parked worker
/// leaves its core idle, with its other tasks, until the holder wakes it: on two cores the full
/// replay (`loadgen replay --mode full`) kept 1.48 of them busy and collected 150k–160k objects/s.
/// Waiting out a hold on the core instead keeps 1.62–1.68 busy (165k–185k/s, alternating runs).
/// The spin is bounded, so a holder that was preempted costs a waiter at most
/// [`StateLock::SPINS`] pauses before it parks.
struct StateLock<T>(Mutex<T>);

impl<T> StateLock<T> {
    /// Pauses before a waiter parks: on the order of 10–100 µs, several times a common hold.
    const SPINS: usize = 1024;

    fn new(value: T) -> Self {
        StateLock(Mutex::new(value))
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, T> {
        for _ in 0..Self::SPINS {
            // Read before trying: a waiter spins on its cached copy of the line, not by writing it.
            if !self.0.is_locked() {
                if let Some(guard) = self.0.try_lock() {
                    return guard;
                }
            }
            std::hint::spin_loop();
        }
        self.0.lock()
    }
}
