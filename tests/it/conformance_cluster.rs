//! Cluster-level conformance: gc-spec §10 items 1–12 and 14 (upstream's integration tests in
//! `test/integration/garbagecollector`) and 45–55 (upstream's e2e tests in
//! `test/e2e/apimachinery/garbage_collector.go`).
//!
//! # Tables
//!
//! Every scenario is a [`Table`]: a default namespace and a list of [`Step`]s over objects named
//! by their `metadata.name` (unique within a table, whatever their type). `Create` before `Start`
//! puts an object in the cluster before the controller runs (as after a controller-manager
//! restart); after it, a user creates it. An [`Obj`] states its type, owners ([`Ref`]s, with
//! `controller` and `blockOwnerDeletion`) and finalizers. The user's other actions are `Delete`
//! with a [`Policy`], `AddRef`, `Release` (taking off [`HOLD`]), and serving or dropping a type.
//! The expected state is a list of [`Fact`]s: which objects exist or are gone, with exactly which
//! ownerReferences and finalizers, whether they are being deleted, what the graph holds, the
//! events recorded, how long something took. `Until` waits for a fact, `Check` asserts it now;
//! `Settle` lets the collector go quiet first. Grids are generators returning a table, smaller
//! than upstream's with the same shape.
//!
//! # The runner
//!
//! [`run`] executes a table against the whole controller with 1, 2 and 4 graph builder
//! partitions: `<scenario>::p{1,2,4}`, so `cargo test --test it conformance_cluster::s04` runs
//! one scenario three times. Its invariants:
//!
//! - A fact is one predicate, evaluated the same way by `Until` and `Check`, so what a table
//!   waits for and what it asserts cannot drift apart.
//! - Refs are compared whole (apiVersion, kind, name, UID and both flags) and in order, and
//!   finalizers exactly, so a table states the complete metadata it expects.
//! - Time is virtual (tokio's paused clock): waits of seconds cost nothing, and every `Until` is
//!   bounded by [`support::PATIENCE`] and names the fact it never saw.
//! - The collector runs in its default mode: these scenarios check outcomes, which the mode
//!   must not change (`conformance_graph` compares the modes call by call).
//!
//! `conformance_units` runs its controller-level scenarios through this runner too.

use crate::support;

use kube_gc::api::layers::Fault;
use kube_gc::api::{
    DeleteOptions, Gvr, ObjectMeta, OwnerReference, PartialObjectMeta, PropagationPolicy, FINALIZER_FOREGROUND,
};
use kube_gc::controller::Config;
use kube_gc::graph::{Handle, Uid};
use kube_gc_sim::{ApiCalls, SimCluster, TypeDef};
use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;
use support::{create_in, Harness, PATIENCE};

use Fact::*;
use Policy::*;
use Step::*;

// ---------------------------------------------------------------------------------------------
// The vocabulary
// ---------------------------------------------------------------------------------------------

/// An object's name; generators make theirs at run time.
pub type Name = Cow<'static, str>;

/// A finalizer no controller removes: it keeps a deleted object around, as a pod's graceful
/// termination does on a real cluster, until `Release` takes it off.
pub const HOLD: &str = "x/y";

/// A served type, always at version v1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Type {
    pub group: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    /// A custom resource (a CRD): strategic merge patches of it are answered with 415.
    pub custom: bool,
}

const fn builtin(group: &'static str, kind: &'static str, plural: &'static str) -> Type {
    Type {
        group,
        kind,
        plural,
        custom: false,
    }
}

pub const fn crd(group: &'static str, kind: &'static str, plural: &'static str) -> Type {
    Type {
        custom: true,
        ..builtin(group, kind, plural)
    }
}

pub const POD: Type = builtin("", "Pod", "pods");
pub const RC: Type = builtin("", "ReplicationController", "replicationcontrollers");
pub const CONFIGMAP: Type = builtin("", "ConfigMap", "configmaps");
pub const SECRET: Type = builtin("", "Secret", "secrets");
pub const PV: Type = builtin("", "PersistentVolume", "persistentvolumes");
pub const DEPLOYMENT: Type = builtin("apps", "Deployment", "deployments");
pub const REPLICASET: Type = builtin("apps", "ReplicaSet", "replicasets");
pub const JOB: Type = builtin("batch", "Job", "jobs");
pub const CRONJOB: Type = builtin("batch", "CronJob", "cronjobs");

impl Type {
    pub fn gvr(self) -> Gvr {
        Gvr::new(self.group, "v1", self.plural)
    }

    pub fn def(self) -> TypeDef {
        let def = TypeDef::new(self.group, "v1", self.kind, self.plural, true);
        if self.custom {
            def.custom()
        } else {
            def
        }
    }
}

/// Who an ownerReference names.
#[derive(Clone, Debug)]
pub enum Owner {
    /// An object of the table, by name: the ref carries its apiVersion, kind, name and UID.
    Obj(Name),
    /// An object that never existed.
    Ghost {
        api_version: &'static str,
        kind: &'static str,
        name: &'static str,
        uid: &'static str,
    },
    /// The UID of an object of the table under another apiVersion, kind and name.
    Posing {
        uid_of: Name,
        api_version: &'static str,
        kind: &'static str,
        name: &'static str,
    },
}

#[derive(Clone, Debug)]
pub struct Ref {
    pub owner: Owner,
    pub block: Option<bool>,
    pub controller: Option<bool>,
}

pub fn to(owner: impl Into<Name>) -> Ref {
    Ref {
        owner: Owner::Obj(owner.into()),
        block: None,
        controller: None,
    }
}

pub fn ghost(api_version: &'static str, kind: &'static str, name: &'static str, uid: &'static str) -> Ref {
    Ref {
        owner: Owner::Ghost {
            api_version,
            kind,
            name,
            uid,
        },
        block: None,
        controller: None,
    }
}

/// A controller ref, as workload controllers set on what they create.
pub fn controller_of(owner: impl Into<Name>) -> Ref {
    to(owner).blocking().controller(true)
}

impl Ref {
    pub fn blocking(self) -> Ref {
        Ref {
            block: Some(true),
            ..self
        }
    }
    pub fn non_blocking(self) -> Ref {
        Ref {
            block: Some(false),
            ..self
        }
    }
    pub fn controller(self, controller: bool) -> Ref {
        Ref {
            controller: Some(controller),
            ..self
        }
    }
}

/// An object to create.
#[derive(Clone, Debug)]
pub struct Obj {
    pub ty: Type,
    /// `None`: the table's namespace.
    pub ns: Option<&'static str>,
    pub name: Name,
    pub refs: Vec<Ref>,
    pub finalizers: Vec<&'static str>,
}

pub fn obj(ty: Type, name: impl Into<Name>) -> Obj {
    Obj {
        ty,
        ns: None,
        name: name.into(),
        refs: Vec::new(),
        finalizers: Vec::new(),
    }
}

impl Obj {
    pub fn owned_by(self, refs: impl IntoIterator<Item = Ref>) -> Obj {
        Obj {
            refs: refs.into_iter().collect(),
            ..self
        }
    }
    pub fn in_ns(self, ns: &'static str) -> Obj {
        Obj { ns: Some(ns), ..self }
    }
    /// Carries [`HOLD`], so a deletion cannot remove it until `Release`.
    pub fn held(mut self) -> Obj {
        self.finalizers.push(HOLD);
        self
    }
    pub fn finalizers(self, finalizers: &[&'static str]) -> Obj {
        Obj {
            finalizers: finalizers.to_vec(),
            ..self
        }
    }
}

/// How the user deletes.
#[derive(Clone, Copy, Debug)]
pub enum Policy {
    /// No options: the type's default (Orphan for RCs, spec §3.4).
    Unset,
    Background,
    Foreground,
    Orphan,
    /// The legacy `orphanDependents` flag.
    OrphanDependents(bool),
}

impl Policy {
    fn options(self) -> DeleteOptions {
        let policy = |p| DeleteOptions {
            propagation_policy: Some(p),
            ..Default::default()
        };
        match self {
            Unset => DeleteOptions::default(),
            Background => policy(PropagationPolicy::Background),
            Foreground => policy(PropagationPolicy::Foreground),
            Orphan => policy(PropagationPolicy::Orphan),
            OrphanDependents(orphan) => support::orphan_dependents(orphan),
        }
    }
}

/// Something a table waits for or asserts.
#[derive(Clone, Debug)]
pub enum Fact {
    Exists(Name),
    Gone(Name),
    /// The object exists with exactly these ownerReferences.
    Refs(Name, Vec<Ref>),
    /// The object exists with exactly these finalizers.
    Finalizers(Name, Vec<&'static str>),
    /// The object exists with a deletionTimestamp, or without one.
    Deleting(Name),
    NotDeleting(Name),
    InGraph(Vec<Name>),
    OutOfGraph(Name),
    /// The graph has an observed (not virtual) node for the object, or none.
    Observed(Name),
    Unobserved(Name),
    /// The object's node has this many dependents.
    Dependents(Name, usize),
    GraphEmpty,
    /// How many objects of the type the table's namespace holds.
    Count(Type, usize),
    NotMonitored(Type),
    /// The object's first event is the OwnerRefInvalidNamespace warning about this ref (§3.9).
    InvalidNamespace(Name, Ref),
    NoEvents(Name),
    /// Less than this virtual time has passed since `Mark`.
    Within(Duration),
    /// The collector's sync state, and one monitor's (`None`: not monitored).
    Synced(bool),
    Monitor(Type, Option<bool>),
    /// Every monitored resource, by plural, sorted.
    Monitored(&'static [&'static str]),
    /// The sync-error metric grew since `MarkSyncErrors`.
    SyncErrorsGrew,
    /// Exactly this many more runtime tasks are alive than at `MarkTasks` (negative: fewer).
    TasksAtMark(isize),
    /// More runtime tasks are alive than at `MarkTasks`.
    MoreTasksThanMark,
    /// No LIST or WATCH was sent since `Mark`.
    NoListOrWatchSinceMark,
    All(Vec<Fact>),
}

pub fn exists(name: impl Into<Name>) -> Fact {
    Exists(name.into())
}
pub fn gone(name: impl Into<Name>) -> Fact {
    Gone(name.into())
}
pub fn refs(name: impl Into<Name>, refs: impl IntoIterator<Item = Ref>) -> Fact {
    Refs(name.into(), refs.into_iter().collect())
}
pub fn finalizers(name: impl Into<Name>, finalizers: &[&'static str]) -> Fact {
    Finalizers(name.into(), finalizers.to_vec())
}
pub fn in_graph<N: Into<Name>>(names: impl IntoIterator<Item = N>) -> Fact {
    InGraph(names.into_iter().map(Into::into).collect())
}
pub fn out_of_graph(name: impl Into<Name>) -> Fact {
    OutOfGraph(name.into())
}
pub fn deleting(name: impl Into<Name>) -> Fact {
    Deleting(name.into())
}
pub fn not_deleting(name: impl Into<Name>) -> Fact {
    NotDeleting(name.into())
}
/// Every object named is gone.
pub fn all_gone<N: Into<Name>>(names: impl IntoIterator<Item = N>) -> Fact {
    All(names.into_iter().map(gone).collect())
}

/// One step of a scenario.
#[derive(Debug)]
pub enum Step {
    Create(Obj),
    /// Starts the controller and waits for its monitors to sync; `StartUnsynced` does not wait.
    Start,
    StartUnsynced,
    Delete(Name, Policy),
    /// The user PUTs the object with one more ownerReference.
    AddRef(Name, Ref),
    /// The user takes [`HOLD`] off the object.
    Release(Name),
    /// Serves a custom type and waits until the collector monitors it.
    Serve(Type),
    /// Drops a type, with every object of it (deleting a CRD).
    Unregister(Type),
    /// Serves a type, leaving the collector to find it.
    Register(Type),
    /// One sync round; `Some`: whether it must change the monitors.
    Resync(Option<bool>),
    /// Discovery of the group-version fails, or stops failing.
    FailDiscovery(&'static str, bool),
    ClearFaults,
    /// Waits three sync periods and checks that the sync loop read discovery at least twice (a
    /// round that changes the monitors also waits up to one period for them to sync), as
    /// upstream's `expectSyncNotBlocked` does.
    KeepsSyncing,
    /// Remembers the sync-error metric for `SyncErrorsGrew`.
    MarkSyncErrors,
    /// Remembers how many runtime tasks are alive, for `TasksAtMark` and `MoreTasksThanMark`.
    MarkTasks,
    /// The type's watch events arrive this late.
    WatchDelay(Type, Duration),
    Fault(Fault),
    Until(Fact),
    Check(Fact),
    /// Lets the collector run until it is quiet, then checks the graph invariants.
    Settle,
    Wait(Duration),
    /// Starts the clock `Within` reads, and the call counts `NoListOrWatchSinceMark` reads.
    Mark,
    Shutdown,
    Steps(Vec<Step>),
}

pub fn delete(name: impl Into<Name>, policy: Policy) -> Step {
    Delete(name.into(), policy)
}
pub fn release(name: impl Into<Name>) -> Step {
    Release(name.into())
}
pub const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

pub struct Table {
    /// The namespace of every object that names none.
    pub ns: &'static str,
    /// `None`: the built-in types; else only these, so monitor sets stay small and exact.
    pub serving: Option<Vec<Type>>,
    pub steps: Vec<Step>,
}

pub fn table(ns: &'static str, steps: Vec<Step>) -> Table {
    Table {
        ns,
        serving: None,
        steps,
    }
}

impl Table {
    pub fn serving(self, types: &[Type]) -> Table {
        Table {
            serving: Some(types.to_vec()),
            ..self
        }
    }
}

/// A cluster serving only these types.
pub fn cluster_serving(types: &[Type]) -> SimCluster {
    let cluster = SimCluster::empty();
    for t in types {
        cluster.register(t.def());
    }
    cluster
}

// ---------------------------------------------------------------------------------------------
// The runner
// ---------------------------------------------------------------------------------------------

/// One `#[tokio::test]` per partition count for each scenario and its table generator.
macro_rules! cluster_scenarios {
    ($($name:ident: $table:ident,)*) => {$(
        mod $name {
            use crate::conformance_cluster::run;

            #[tokio::test(start_paused = true)]
            async fn p1() { run(super::$table(), 1).await }
            #[tokio::test(start_paused = true)]
            async fn p2() { run(super::$table(), 2).await }
            #[tokio::test(start_paused = true)]
            async fn p4() { run(super::$table(), 4).await }
        }
    )*};
}
pub(crate) use cluster_scenarios;

/// Runs `table` on a fresh cluster and a controller with `partitions` graph builders.
pub async fn run(table: Table, partitions: usize) {
    let cluster = table.serving.as_deref().map_or_else(SimCluster::new, cluster_serving);
    let mut steps = Vec::new();
    flatten(table.steps, &mut steps);
    let mut s = Scenario {
        ns: table.ns,
        partitions,
        cluster: Some(cluster),
        h: None,
        objects: HashMap::new(),
        mark: tokio::time::Instant::now(),
        calls_at_mark: Default::default(),
        sync_errors: 0,
        tasks: 0,
    };
    for step in steps {
        s.step(step).await;
    }
}

/// The tasks alive on this test's runtime: the collector's builders, workers, monitors and timers
/// among them.
fn alive_tasks() -> usize {
    tokio::runtime::Handle::current().metrics().num_alive_tasks()
}

fn flatten(table: Vec<Step>, out: &mut Vec<Step>) {
    for step in table {
        match step {
            Steps(shared) => flatten(shared, out),
            step => out.push(step),
        }
    }
}

struct Scenario {
    ns: &'static str,
    partitions: usize,
    /// The cluster until `Start` hands it to the controller.
    cluster: Option<SimCluster>,
    h: Option<Harness>,
    /// Every object created, by name, as the server returned it.
    objects: HashMap<Name, (Type, PartialObjectMeta)>,
    mark: tokio::time::Instant,
    calls_at_mark: ApiCalls,
    sync_errors: u64,
    /// Alive runtime tasks at `MarkTasks`.
    tasks: usize,
}

impl Scenario {
    fn h(&self) -> &Harness {
        self.h
            .as_ref()
            .expect("the table acts on the controller before `Start`")
    }

    fn cluster(&self) -> &SimCluster {
        match &self.h {
            Some(h) => &h.cluster,
            None => self.cluster.as_ref().expect("a cluster"),
        }
    }

    fn config(&self) -> Config {
        Config {
            partitions: self.partitions,
            ..Config::default()
        }
    }

    fn object(&self, name: &str) -> &(Type, PartialObjectMeta) {
        self.objects
            .get(name)
            .unwrap_or_else(|| panic!("the table never created {name}"))
    }

    async fn step(&mut self, step: Step) {
        match step {
            Create(o) => {
                let meta = ObjectMeta {
                    finalizers: o.finalizers.iter().map(|f| f.to_string()).collect(),
                    ..support::meta(o.ns.unwrap_or(self.ns), &o.name, self.wire_refs(&o.refs))
                };
                let created = create_in(self.cluster(), &o.ty.gvr(), meta);
                let previous = self.objects.insert(o.name.clone(), (o.ty, created));
                assert!(previous.is_none(), "{} created twice", o.name);
            }
            Start => {
                let cluster = self.cluster.take().expect("started twice");
                self.h = Some(Harness::start_with(cluster, self.config()).await);
            }
            StartUnsynced => {
                let cluster = self.cluster.take().expect("started twice");
                self.h = Some(Harness::start_unsynced(cluster, self.config()).await);
            }
            Delete(name, policy) => {
                let (ty, o) = self.object(&name);
                self.h().delete(&ty.gvr(), o, policy.options());
            }
            AddRef(name, r) => {
                let r = self.wire(&r);
                let (ty, o) = self.object(&name);
                self.h().edit(&ty.gvr(), o, |m| m.owner_references.push(r));
            }
            Release(name) => {
                let (ty, o) = self.object(&name);
                self.h().edit(&ty.gvr(), o, |m| m.finalizers.retain(|f| f != HOLD));
            }
            Serve(ty) => assert_eq!(self.h().serve(ty.def()).await, ty.gvr()),
            Unregister(ty) => self.cluster().unregister(ty.group, ty.plural),
            WatchDelay(ty, delay) => self.cluster().set_watch_delay(ty.group, ty.plural, delay),
            Fault(fault) => self.cluster().inject_fault(fault),
            Register(ty) => self.cluster().register(ty.def()),
            Resync(want) => {
                let changed = self.h().gc.sync_once().await;
                assert!(
                    want.is_none_or(|w| w == changed),
                    "the sync round changed monitors: {changed}"
                );
            }
            FailDiscovery(group_version, fail) => self.cluster().fail_discovery(group_version, fail),
            ClearFaults => self.cluster().clear_faults(),
            KeepsSyncing => {
                let h = self.h();
                let before = h.cluster.api_calls().discover;
                h.wait(Config::default().sync_period * 3 + secs(1)).await;
                let after = h.cluster.api_calls().discover;
                assert!(
                    after >= before + 2,
                    "likely blocked: the sync loop stopped reading discovery"
                );
            }
            MarkSyncErrors => self.sync_errors = self.h().gc.metrics().sync_errors.get(),
            MarkTasks => self.tasks = alive_tasks(),
            Until(fact) => {
                let deadline = tokio::time::Instant::now() + PATIENCE;
                while let Err(why) = self.holds(&fact) {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "likely stuck: never saw {fact:?}: {why}"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            Check(fact) => {
                if let Err(why) = self.holds(&fact) {
                    panic!("{fact:?}: {why}");
                }
            }
            Settle => self.h().settle().await,
            Wait(d) => tokio::time::sleep(d).await,
            Mark => {
                self.mark = tokio::time::Instant::now();
                self.calls_at_mark = self.cluster().api_calls();
            }
            Shutdown => self.h().gc.shutdown().await,
            Steps(_) => unreachable!("the runner expands these"),
        }
    }

    fn wire_refs(&self, refs: &[Ref]) -> Vec<OwnerReference> {
        refs.iter().map(|r| self.wire(r)).collect()
    }

    /// The ownerReference as the cluster stores it.
    fn wire(&self, r: &Ref) -> OwnerReference {
        let base = match &r.owner {
            Owner::Obj(name) => support::ref_to(&self.object(name).1),
            Owner::Ghost {
                api_version,
                kind,
                name,
                uid,
            } => OwnerReference {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                name: name.to_string(),
                uid: uid.to_string(),
                ..Default::default()
            },
            Owner::Posing {
                uid_of,
                api_version,
                kind,
                name,
            } => OwnerReference {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                name: name.to_string(),
                uid: self.object(uid_of).1.metadata.uid.clone(),
                ..Default::default()
            },
        };
        OwnerReference {
            block_owner_deletion: r.block,
            controller: r.controller,
            ..base
        }
    }

    /// The object's current state, if it still exists under the same UID.
    fn get(&self, name: &str) -> Option<PartialObjectMeta> {
        let (ty, o) = self.object(name);
        self.h().get(&ty.gvr(), o)
    }

    fn live(&self, name: &str) -> Result<ObjectMeta, String> {
        self.get(name)
            .map(|o| o.metadata)
            .ok_or_else(|| format!("{name} is gone"))
    }

    fn node(&self, name: &str) -> Option<Handle> {
        let uid = Uid::parse(&self.object(name).1.metadata.uid);
        self.h().gc.graph().get(&uid)
    }

    /// Ok if the fact holds, else what was seen instead.
    fn holds(&self, fact: &Fact) -> Result<(), String> {
        let h = self.h();
        let expect = |ok: bool, seen: String| if ok { Ok(()) } else { Err(seen) };
        match fact {
            Exists(name) => self.live(name).map(drop),
            Gone(name) => expect(self.get(name).is_none(), format!("{name} exists")),
            Refs(name, refs) => {
                let got = self.live(name)?.owner_references;
                expect(got == self.wire_refs(refs), format!("its refs are {got:?}"))
            }
            Finalizers(name, want) => {
                let got = self.live(name)?.finalizers;
                expect(got == *want, format!("its finalizers are {got:?}"))
            }
            Deleting(name) => expect(
                self.live(name)?.deletion_timestamp.is_some(),
                "no deletionTimestamp".into(),
            ),
            NotDeleting(name) => {
                let at = self.live(name)?.deletion_timestamp;
                expect(at.is_none(), format!("deleted at {at:?}"))
            }
            InGraph(names) => {
                let missing: Vec<&Name> = names.iter().filter(|n| self.node(n).is_none()).collect();
                expect(missing.is_empty(), format!("not in the graph: {missing:?}"))
            }
            OutOfGraph(name) => expect(self.node(name).is_none(), "still in the graph".into()),
            Observed(name) => expect(self.node(name).is_some_and(|n| !n.is_virtual()), "not observed".into()),
            Unobserved(name) => expect(self.node(name).is_none_or(|n| n.is_virtual()), "observed".into()),
            Dependents(name, want) => {
                let got = self.node(name).map(|n| n.dependents_len());
                expect(got == Some(*want), format!("dependents: {got:?}"))
            }
            GraphEmpty => {
                let left = h.gc.graph().len();
                expect(left == 0, format!("{left} nodes left behind"))
            }
            Count(ty, want) => {
                let got = (h.cluster.list_objects(&ty.gvr()).into_iter())
                    .filter(|o| o.metadata.namespace == self.ns)
                    .count();
                expect(got == *want, format!("{got} in {}", self.ns))
            }
            NotMonitored(ty) => expect(!h.gc.monitor_states().contains_key(&ty.gvr()), "still monitored".into()),
            InvalidNamespace(name, r) => {
                let (_, o) = self.object(name);
                let r = self.wire(r);
                let ns = &o.metadata.namespace;
                let want = (
                    "OwnerRefInvalidNamespace".to_string(),
                    "Warning".to_string(),
                    format!(
                        "ownerRef [{}/{}, namespace: {ns}, name: {}, uid: {}] does not exist in namespace \"{ns}\"",
                        r.api_version, r.kind, r.name, r.uid
                    ),
                );
                let events = h.cluster.events();
                let got = (events.iter())
                    .find(|e| e.involved_object.uid == o.metadata.uid)
                    .map(|e| (e.reason.clone(), e.event_type.clone(), e.message.clone()));
                expect(got.as_ref() == Some(&want), format!("its first event is {got:?}"))
            }
            NoEvents(name) => {
                let uid = &self.object(name).1.metadata.uid;
                let n = (h.cluster.events().iter())
                    .filter(|e| e.involved_object.uid == *uid)
                    .count();
                expect(n == 0, format!("{n} events"))
            }
            Within(d) => {
                let took = self.mark.elapsed();
                expect(took < *d, format!("took {took:?}"))
            }
            Synced(want) => expect(h.gc.is_synced() == *want, format!("is_synced is {}", !want)),
            Monitor(ty, want) => {
                let got = h.gc.monitor_states().get(&ty.gvr()).copied();
                expect(got == *want, format!("its monitor: {got:?}"))
            }
            Monitored(want) => {
                let got = h.monitored();
                expect(got == *want, format!("monitored: {got:?}"))
            }
            SyncErrorsGrew => {
                let now = h.gc.metrics().sync_errors.get();
                expect(now > self.sync_errors, format!("still {now}"))
            }
            TasksAtMark(more) => {
                let alive = alive_tasks();
                let want = self.tasks.checked_add_signed(*more).expect("a task count");
                expect(
                    alive == want,
                    format!("{alive} tasks alive, {} at the mark", self.tasks),
                )
            }
            MoreTasksThanMark => {
                let alive = alive_tasks();
                expect(
                    alive > self.tasks,
                    format!("{alive} tasks alive, {} at the mark", self.tasks),
                )
            }
            NoListOrWatchSinceMark => {
                let (then, now) = (self.calls_at_mark, h.cluster.api_calls());
                expect(
                    (now.list, now.watch) == (then.list, then.watch),
                    format!(
                        "{} lists and {} watches since",
                        now.list - then.list,
                        now.watch - then.watch
                    ),
                )
            }
            All(facts) => facts
                .iter()
                .try_for_each(|f| self.holds(f).map_err(|why| format!("{f:?}: {why}"))),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Integration tests (gc-spec §10 items 1–14)
// ---------------------------------------------------------------------------------------------

cluster_scenarios!(
    s01_cross_namespace_references_delete_only_children_of_the_bad_owner: s01,
    s02_cascading_deletion_deletes_only_owned_pods: s02,
    s03_create_with_non_existent_owner_deletes_the_pod: s03,
    s04_stressing_cascading_deletion_deletes_pods_of_the_non_orphaning_group_only: s04,
    s05_orphaning_keeps_the_pods_and_empties_their_owner_refs: s05,
    s06_solid_owner_does_not_block_waiting_owner: s06,
    s07_non_blocking_owner_refs_do_not_block_foreground_deletion: s07,
    s08_double_deletion_with_finalizer_strips_foreground_deletion_each_time: s08,
    s09_blocking_owner_ref_blocks_foreground_deletion: s09,
    s10_custom_resource_cascading_deletion_in_foreground: s10,
    s11_mixed_relationships_cascade_both_ways: s11,
    s12_crd_deletion_cascades_to_the_dependents_of_its_resources: s12,
    s14_cluster_scoped_owners_are_judged_before_their_watch_catches_up: s14,
    s45_deleting_rc_without_orphaning_deletes_pods: s45,
    s46_orphan_delete_options_orphan_rc_pods: s46,
    s47_rc_deleted_without_options_orphans_its_pods: s47,
    s48_deployment_deleted_in_background_deletes_its_replicasets: s48,
    s49_deployment_deleted_with_orphan_keeps_replicasets_without_controller_ref: s49,
    s50_foreground_delete_keeps_the_rc_until_all_its_pods_are_gone: s50,
    s51_dependents_with_a_valid_owner_and_a_waiting_owner_are_not_deleted: s51,
    s52_dependency_circle_does_not_block_foreground_deletion: s52,
    s53_custom_resource_cascading_deletion: s53,
    s54_custom_resource_orphan_deletion: s54,
    s55_deleting_a_cronjob_deletes_its_jobs_and_their_pods: s55,
);

/// `<prefix>0` … `<prefix>{n-1}`.
fn names(prefix: &str, n: usize) -> Vec<Name> {
    (0..n).map(|i| format!("{prefix}{i}").into()).collect()
}

/// One step per name.
fn each(names: &[Name], step: impl Fn(Name) -> Step) -> Step {
    Steps(names.iter().cloned().map(step).collect())
}

/// §10.1: valid children in the owner's namespace, and bad children of three shapes in another
/// (upstream runs this with and without the API server's watch cache; the simulated cluster
/// serves every watch from one ordered history, so one run covers both).
#[rustfmt::skip]
fn s01() -> Table {
    const NS_A: &str = "namespace-a";
    let valid = names("child-", 10);
    let valid_ref = || to("parent").controller(false);
    // The parent's UID, but claiming to be a Pod in the child's namespace.
    let bad_ref = || Ref {
        owner: Owner::Posing { uid_of: "parent".into(), api_version: "v1", kind: "Pod", name: "invalid" },
        ..to("").controller(false)
    };
    // Refs to 5 kinds no one serves (upstream: 25), and the bad one.
    let kinds = ["invalid0", "invalid1", "invalid2", "invalid3", "invalid4"];
    let uids = ["invalid-0", "invalid-1", "invalid-2", "invalid-3", "invalid-4"];
    let mut invalid_refs: Vec<Ref> = (0..5).map(|i| ghost("test/v1", kinds[i], "invalid", uids[i])).collect();
    invalid_refs.push(bad_ref());
    let many_refs = names("invalid-child-", 3);
    let many_refs_a = names("invalid-child-a-", 3);
    let only_bad_ref = names("invalid-child-b-", 3);
    let bad = |o: Obj| Create(o.in_ns(NS_A).owned_by([bad_ref()]));
    let holding_every_ref = |o: Obj| Create(o.in_ns(NS_A).owned_by(invalid_refs.clone()));
    table("namespace-b", vec![
        // Everything exists before the controller starts, as after a controller-manager restart.
        Create(obj(CONFIGMAP, "parent")),
        each(&valid, |c| Create(obj(SECRET, c).owned_by([valid_ref()]))),
        each(&many_refs, |c| holding_every_ref(obj(CONFIGMAP, c))),
        each(&many_refs_a, |c| holding_every_ref(obj(SECRET, c))),
        each(&only_bad_ref, |c| bad(obj(SECRET, c))),
        Start,
        Until(all_gone(only_bad_ref.clone())), Wait(secs(10)),
        each(&valid, |c| Check(refs(c, [valid_ref()]))),
        Check(exists("parent")),
        // Refs to kinds no one serves cannot be resolved, so these are retried forever and never
        // deleted (spec §4.1, §12.6).
        each(&[many_refs.clone(), many_refs_a.clone()].concat(), |c| Check(refs(c, invalid_refs.clone()))),
        // Every child holding the bad ref got an OwnerRefInvalidNamespace event (spec §3.9).
        each(&[only_bad_ref, many_refs, many_refs_a].concat(), |c| Check(InvalidNamespace(c, bad_ref()))),
        each(&valid, |c| Check(NoEvents(c))),
        // A bad child created while the controller runs goes too.
        bad(obj(SECRET, "invalid-child-c")), Until(gone("invalid-child-c")),
        Check(Count(SECRET, valid.len())),
    ])
}

/// §10.2.
#[rustfmt::skip]
fn s02() -> Table {
    table("gc-cascading-deletion", vec![
        Create(obj(RC, "test.rc.1")),
        Create(obj(RC, "test.rc.2")),
        Create(obj(POD, "test.pod.1").owned_by([to("test.rc.1")])),
        Create(obj(POD, "test.pod.2")),
        Create(obj(POD, "test.pod.3").owned_by([to("test.rc.1"), to("test.rc.2")])),
        Start,
        delete("test.rc.1", OrphanDependents(false)),
        Until(out_of_graph("test.rc.1")), Until(gone("test.pod.1")), Settle,
        Check(refs("test.pod.2", [])),
        // The dangling ref is stripped; the live owner's stays (spec §4.2 step 7).
        Check(refs("test.pod.3", [to("test.rc.2")])),
        Check(exists("test.rc.2")),
    ])
}

/// §10.3.
#[rustfmt::skip]
fn s03() -> Table {
    table("gc-non-existing-owner", vec![
        Create(obj(POD, "test.pod.1").owned_by([ghost("v1", "ReplicationController", "test.rc.1", "doesn't matter")])),
        Start,
        Until(gone("test.pod.1")), Settle,
        Check(out_of_graph("test.pod.1")), Check(GraphEmpty),
    ])
}

/// §10.4: five ways of deleting an RC, each on 2 RCs with 3 pods (upstream: 10 per way). Only
/// the RC created with the orphan finalizer and deleted with `orphanDependents: false` has its
/// pods deleted: every other combination orphans (the RC registry's default is Orphan).
#[rustfmt::skip]
fn s04() -> Table {
    // (group, the RCs' finalizers, how they are deleted, whether their pods are orphaned)
    let groups: [(&str, &[&str], Policy, bool); 5] = [
        ("collection1", &[], Unset, true),
        ("collection2", &["orphan"], Unset, true),
        ("collection3", &["orphan"], OrphanDependents(false), false),
        ("collection4", &[], OrphanDependents(true), true),
        ("collection5", &[], Orphan, true),
    ];
    let (mut create, mut orphaned, mut deletes, mut outcome) = (vec![], vec![], vec![], vec![]);
    for (group, rc_finalizers, policy, orphans) in groups {
        for i in 0..2 {
            let rc = format!("test.rc.{group}-{i}");
            create.push(Create(obj(RC, rc.clone()).finalizers(rc_finalizers)));
            for pod in names(&format!("test.pod.{group}-{i}-"), 3) {
                create.push(Create(obj(POD, pod.clone()).owned_by([to(rc.clone())])));
                outcome.push(Check(if orphans { refs(pod.clone(), []) } else { Gone(pod.clone()) }));
                if orphans { orphaned.push(pod) }
            }
            deletes.push(delete(rc.clone(), policy));
            outcome.push(Check(out_of_graph(rc)));
        }
    }
    let left = orphaned.len();
    table("gc-stressing-cascading-deletion", vec![
        Start,
        Steps(create),
        // Orphaning only reaches the dependents the graph knows of (spec §12.9).
        Until(InGraph(orphaned)),
        Steps(deletes),
        Until(All(vec![Count(RC, 0), Count(POD, left)])), Settle,
        Steps(outcome),
    ])
}

/// §10.5.
#[rustfmt::skip]
fn s05() -> Table {
    let pods = names("test.pod.1", 3);
    table("gc-orphaning", vec![
        Start,
        Create(obj(RC, "test.rc.1")),
        each(&pods, |p| Create(obj(POD, p).owned_by([to("test.rc.1")]))),
        Until(InGraph(pods.clone())),
        delete("test.rc.1", OrphanDependents(true)),
        Until(out_of_graph("test.rc.1")), Settle,
        Check(gone("test.rc.1")),
        each(&pods, |p| Check(refs(p, []))),
    ])
}

/// §10.6.
#[rustfmt::skip]
fn s06() -> Table {
    table("gc-foreground1", vec![
        Start,
        Create(obj(RC, "test.rc.1")),
        Create(obj(RC, "test.rc.2")),
        Create(obj(POD, "test.pod.1").owned_by([to("test.rc.1").blocking(), to("test.rc.2")])),
        Until(in_graph(["test.pod.1"])),
        delete("test.rc.1", Foreground),
        Until(gone("test.rc.1")), Settle,
        Check(refs("test.pod.1", [to("test.rc.2")])), Check(not_deleting("test.pod.1")),
    ])
}

/// §10.7.
#[rustfmt::skip]
fn s07() -> Table {
    table("gc-foreground2", vec![
        Start,
        Create(obj(RC, "test.rc.1")),
        Create(obj(POD, "test.pod.1").owned_by([to("test.rc.1").non_blocking()]).held()),
        Create(obj(POD, "test.pod.2").owned_by([to("test.rc.1")]).held()),
        Until(in_graph(["test.pod.1", "test.pod.2"])),
        delete("test.rc.1", Foreground),
        Until(gone("test.rc.1")), Settle,
        // The pods are still there (their finalizer holds them), so nothing waited for them.
        Check(finalizers("test.pod.1", &[HOLD])), Check(finalizers("test.pod.2", &[HOLD])),
        release("test.pod.1"), release("test.pod.2"),
        Until(all_gone(["test.pod.1", "test.pod.2"])),
    ])
}

/// §10.8.
#[rustfmt::skip]
fn s08() -> Table {
    let delete_in_foreground = || Steps(vec![
        delete("test.pod.1", Foreground),
        Check(finalizers("test.pod.1", &[HOLD, FINALIZER_FOREGROUND])),
        Until(finalizers("test.pod.1", &[HOLD])),
    ]);
    table("gc-foreground3", vec![
        Start,
        Create(obj(POD, "test.pod.1").held()),
        Until(in_graph(["test.pod.1"])),
        delete_in_foreground(),
        delete_in_foreground(),
        release("test.pod.1"),
        Until(gone("test.pod.1")), Settle,
        Check(out_of_graph("test.pod.1")),
    ])
}

/// §10.9.
#[rustfmt::skip]
fn s09() -> Table {
    table("gc-foreground4", vec![
        Start,
        Create(obj(RC, "test.rc.1")),
        Create(obj(POD, "test.pod.1").owned_by([to("test.rc.1").blocking()]).held()),
        Until(in_graph(["test.rc.1", "test.pod.1"])),
        delete("test.rc.1", Foreground),
        Wait(secs(15)),
        Check(deleting("test.rc.1")), Check(finalizers("test.rc.1", &[FINALIZER_FOREGROUND])),
        Check(deleting("test.pod.1")),
        // Once the dependent can go, so can the owner.
        release("test.pod.1"),
        Until(gone("test.rc.1")),
    ])
}

const FOO: Type = crd("mygroup.example.com", "Foo", "foos");

/// §10.10: a second dependent also has a solid owner: it is kept, and its ref to the waiting
/// owner is removed through the JSON merge fallback, since a custom resource answers a strategic
/// merge patch with 415 (spec §4.2 step 7, §6.2).
#[rustfmt::skip]
fn s10() -> Table {
    table("crd-foreground", vec![
        Start,
        Serve(FOO),
        Create(obj(FOO, "owner")),
        Create(obj(FOO, "dependent").owned_by([to("owner").blocking()])),
        Create(obj(FOO, "anchor")),
        Create(obj(FOO, "shared").owned_by([to("owner").blocking(), to("anchor")])),
        Until(in_graph(["owner", "dependent", "shared"])),
        delete("owner", Foreground),
        Until(all_gone(["owner", "dependent"])), Settle,
        Check(out_of_graph("owner")), Check(out_of_graph("dependent")),
        Check(refs("shared", [to("anchor")])), Check(not_deleting("shared")),
    ])
}

/// §10.11.
#[rustfmt::skip]
fn s11() -> Table {
    table("crd-mixed", vec![
        Start,
        Serve(FOO),
        Create(obj(FOO, "own-instance")),
        Create(obj(CONFIGMAP, "dep-configmap").owned_by([to("own-instance")])),
        Create(obj(CONFIGMAP, "own-configmap")),
        Create(obj(FOO, "dep-instance").owned_by([to("own-configmap")])),
        Until(in_graph(["dep-configmap", "dep-instance"])),
        delete("own-instance", Unset),
        Until(gone("dep-configmap")),
        delete("own-configmap", Foreground),
        Until(gone("dep-instance")), Until(gone("own-configmap")), Settle,
        Check(GraphEmpty),
    ])
}

/// §10.12: deleting the CRD is `Unregister`: its objects go at once, with DELETED events, and
/// the type leaves discovery. The collector is left to find out on its own: the next periodic
/// sync round drops the monitor, and serving the type again brings one back. Run twice, as
/// upstream does.
#[rustfmt::skip]
fn s12() -> Table {
    const FOOS: Type = crd("crd-deletion.example.com", "Foo", "foos");
    let sync_period = Config::default().sync_period;
    let round = |i: usize| {
        let (owner, dependent) = (format!("owner-{i}"), format!("dependent-{i}"));
        Steps(vec![
            Serve(FOOS),
            Create(obj(FOOS, owner.clone())),
            Create(obj(CONFIGMAP, dependent.clone()).owned_by([to(owner.clone())])),
            Until(in_graph([owner.clone(), dependent.clone()])),
            Unregister(FOOS),
            Until(gone(dependent)), Check(out_of_graph(owner)),
            Wait(sync_period + secs(1)), Check(NotMonitored(FOOS)),
            Settle, Check(GraphEmpty),
        ])
    };
    table("crd-deletion", vec![Start, round(0), round(1)])
}

/// §10.14: the PV watch lags by a minute, so the collector must judge the configmaps' PV owners
/// with live lookups before it has observed any PV.
#[rustfmt::skip]
fn s14() -> Table {
    const PV_WATCH_DELAY: Duration = secs(60);
    let unknown_type = || ghost("unknown.group/v1", "UnknownType", "unknown", "unknown-uid");
    table("cluster-scoped-owners", vec![
        Start,
        WatchDelay(PV, PV_WATCH_DELAY), Mark,
        Create(obj(PV, "pv-valid").in_ns("")),
        Create(obj(CONFIGMAP, "cm-valid").owned_by([to("pv-valid")])),
        Create(obj(CONFIGMAP, "cm-missing").owned_by([ghost("v1", "PersistentVolume", "pv-missing", "pv-missing-uid")])),
        Create(obj(CONFIGMAP, "cm-unknown").owned_by([unknown_type()])),
        Until(gone("cm-missing")),
        // The GC did not wait for the PV watch.
        Check(Within(PV_WATCH_DELAY)), Check(Unobserved("pv-valid".into())),
        Until(Observed("pv-valid".into())), Wait(secs(30)),
        Check(refs("cm-valid", [to("pv-valid")])),
        Check(refs("cm-unknown", [unknown_type()])),
        Check(exists("pv-valid")),
    ])
}

// ---------------------------------------------------------------------------------------------
// End-to-end tests (gc-spec §10 items 45–55)
// ---------------------------------------------------------------------------------------------

/// An RC and the pods its controller made (controller refs with blockOwnerDeletion), once the
/// graph has them all.
fn rc_with_pods(rc: &'static str, pods: &[Name], pod: fn(Obj) -> Obj) -> Step {
    Steps(vec![
        Create(obj(RC, rc)),
        each(pods, |p| Create(pod(obj(POD, p).owned_by([controller_of(rc)])))),
        Until(InGraph(pods.to_vec())),
    ])
}

/// The RC goes, and its pods outlive a 30 s wait with no ref left.
fn orphaned(rc: &'static str, pods: &[Name]) -> Step {
    Steps(vec![
        Until(All(vec![gone(rc), out_of_graph(rc)])),
        Wait(secs(30)),
        each(pods, |p| Check(refs(p, []))),
    ])
}

/// No object of these types left, and the graph empty once the collector is quiet.
fn all_collected(types: &[Type]) -> Step {
    let none_left = types.iter().map(|t| Count(*t, 0)).collect();
    Steps(vec![Until(All(none_left)), Settle, Check(GraphEmpty)])
}

/// §10.45.
#[rustfmt::skip]
fn s45() -> Table {
    table("gc-e2e-45", vec![
        Start,
        rc_with_pods("simpletest.rc", &names("simpletest.rc-pod-", 5), |p| p),
        delete("simpletest.rc", Background),
        Until(Count(POD, 0)), Check(gone("simpletest.rc")),
        all_collected(&[POD, RC]),
    ])
}

/// §10.46.
#[rustfmt::skip]
fn s46() -> Table {
    let by = |rc: &'static str, policy| {
        let pods = names(&format!("{rc}-pod-"), 3);
        Steps(vec![rc_with_pods(rc, &pods, |p| p), delete(rc, policy), orphaned(rc, &pods)])
    };
    table("gc-e2e-46", vec![Start, by("by-policy", Orphan), by("by-legacy-flag", OrphanDependents(true))])
}

/// §10.47.
#[rustfmt::skip]
fn s47() -> Table {
    let pods = names("simpletest.rc-pod-", 3);
    table("gc-e2e-47", vec![
        Start,
        rc_with_pods("simpletest.rc", &pods, |p| p),
        delete("simpletest.rc", Unset),
        orphaned("simpletest.rc", &pods),
    ])
}

/// Two owners of `owned` type under `top`, each with two pods, all linked by controller refs,
/// once the graph has them all; with the owners and the (owner, pod) pairs.
fn two_levels(top: Obj, owned: Type, prefix: &str) -> (Step, Vec<Name>, Vec<(Name, Name)>) {
    let top_name = top.name.clone();
    let (mut steps, mut owners, mut pods) = (vec![Create(top)], vec![], vec![]);
    for owner in names(prefix, 2) {
        steps.push(Create(
            obj(owned, owner.clone()).owned_by([controller_of(top_name.clone())]),
        ));
        for pod in names(&format!("{owner}-"), 2) {
            steps.push(Create(obj(POD, pod.clone()).owned_by([controller_of(owner.clone())])));
            pods.push((owner.clone(), pod));
        }
        owners.push(owner);
    }
    let all = owners.iter().chain(pods.iter().map(|(_, pod)| pod));
    steps.push(Until(InGraph(all.cloned().collect())));
    (Steps(steps), owners, pods)
}

/// A Deployment with two ReplicaSets, each with two pods.
fn rollout() -> (Step, Vec<Name>, Vec<(Name, Name)>) {
    two_levels(obj(DEPLOYMENT, "simpletest.deployment"), REPLICASET, "simpletest.rs-")
}

/// §10.48.
#[rustfmt::skip]
fn s48() -> Table {
    let (create, _, _) = rollout();
    table("gc-e2e-48", vec![
        Start,
        create,
        delete("simpletest.deployment", Background),
        all_collected(&[REPLICASET, POD]),
    ])
}

/// §10.49.
#[rustfmt::skip]
fn s49() -> Table {
    let (create, sets, pods) = rollout();
    table("gc-e2e-49", vec![
        Start,
        create,
        delete("simpletest.deployment", Orphan),
        Until(gone("simpletest.deployment")), Wait(secs(30)),
        each(&sets, |rs| Check(refs(rs, []))),
        // The ReplicaSets still own their pods: orphaning goes one level only.
        Steps(pods.into_iter().map(|(rs, pod)| Check(refs(pod, [controller_of(rs)]))).collect()),
    ])
}

/// §10.50: the sim deletes pods at once, so each pod carries a finalizer that stands for its
/// graceful termination; the table ends it pod by pod and checks the RC waits for the last one.
#[rustfmt::skip]
fn s50() -> Table {
    let pods = names("simpletest.rc-pod-", 4);
    table("gc-e2e-50", vec![
        Start,
        rc_with_pods("simpletest.rc", &pods, Obj::held),
        delete("simpletest.rc", Foreground),
        Until(All(pods.iter().cloned().map(Deleting).collect())),
        each(&pods, |p| Steps(vec![
            Wait(secs(5)),
            Check(deleting("simpletest.rc")), Check(finalizers("simpletest.rc", &[FINALIZER_FOREGROUND])),
            Release(p),
        ])),
        Until(gone("simpletest.rc")), Settle,
        Check(GraphEmpty),
    ])
}

/// §10.51: half the pods of the RC being deleted also belong to a second, live RC (the ref is
/// added after creation, as the e2e test patches it in).
#[rustfmt::skip]
fn s51() -> Table {
    const TO_DELETE: &str = "simpletest-rc-to-be-deleted";
    const TO_STAY: &str = "simpletest-rc-to-stay";
    let pods = names(&format!("{TO_DELETE}-pod-"), 6);
    let (shared, only_owned) = pods.split_at(3);
    table("gc-e2e-51", vec![
        Start,
        rc_with_pods(TO_DELETE, &pods, |p| p),
        Create(obj(RC, TO_STAY)),
        each(shared, |p| AddRef(p, to(TO_STAY))),
        Until(Dependents(TO_STAY.into(), shared.len())),
        delete(TO_DELETE, Foreground),
        Until(gone(TO_DELETE)), Settle,
        Check(all_gone(only_owned.to_vec())),
        each(shared, |p| Steps(vec![Check(refs(p.clone(), [to(TO_STAY)])), Check(NotDeleting(p))])),
    ])
}

/// §10.52: A owns B, B owns C, C owns A, every ref blocking: a foreground delete of A would wait
/// forever without the unblock patch of spec §4.2 step 7.
#[rustfmt::skip]
fn s52() -> Table {
    table("gc-e2e-52", vec![
        Start,
        Create(obj(POD, "pod1")),
        Create(obj(POD, "pod2").owned_by([to("pod1").blocking()])),
        Create(obj(POD, "pod3").owned_by([to("pod2").blocking()])),
        AddRef("pod1".into(), to("pod3").blocking()),
        Until(in_graph(["pod1", "pod2", "pod3"])), Until(Dependents("pod3".into(), 1)),
        Mark,
        delete("pod1", Foreground),
        Until(all_gone(["pod1", "pod2", "pod3"])), Check(Within(secs(30))), Settle,
        Check(GraphEmpty),
    ])
}

/// A custom owner and its custom dependent, the owner deleted with `policy`.
fn custom_pair(group: &'static str, policy: Policy) -> Step {
    let (owners, dependents) = (crd(group, "Owner", "owners"), crd(group, "Dependent", "dependents"));
    Steps(vec![
        Serve(owners),
        Serve(dependents),
        Create(obj(owners, "owner")),
        Create(obj(dependents, "dependent").owned_by([to("owner")])),
        Until(in_graph(["owner", "dependent"])),
        delete("owner", policy),
    ])
}

/// §10.53.
#[rustfmt::skip]
fn s53() -> Table {
    table("gc-e2e-53", vec![
        Start,
        custom_pair("e2e-53.example.com", Unset),
        Until(gone("dependent")), Check(gone("owner")), Settle,
        Check(GraphEmpty),
    ])
}

/// §10.54: orphaning a custom resource takes the JSON merge fallback: the strategic merge patch
/// is answered with 415 (spec §6.2).
#[rustfmt::skip]
fn s54() -> Table {
    table("gc-e2e-54", vec![
        Start,
        custom_pair("e2e-54.example.com", Orphan),
        Until(gone("owner")), Wait(secs(30)),
        Check(refs("dependent", [])),
    ])
}

/// §10.55.
#[rustfmt::skip]
fn s55() -> Table {
    let (create, _, _) = two_levels(obj(CRONJOB, "simple"), JOB, "simple-");
    table("gc-e2e-55", vec![Start, create, delete("simple", Background), all_collected(&[JOB, POD])])
}
