//! Conformance tests for the graph builder and the workers, driven one event and one queue item
//! at a time (gc-spec §10 items 16–22, 25–42 and 56–58).
//!
//! # Tables
//!
//! Every scenario but 42 is a table of [`Step`]s over named objects ([`Id`]): the user's
//! actions on the cluster (`Create`, `Remove`, `RemoveOrphan`, `Edit`, or a
//! `RaceEdit`/`RaceDelete` slipped between a worker's GET and its DELETE), watch events
//! (`Observe`), one attemptToDelete or attemptToOrphan worker step (`Process`, `ProcessOrphan`),
//! the virtual deletes the workers routed (`ApplyPending`), and the expected state. A `Check`
//! compares the whole state with an [`Expect`]: the graph (identities, virtual flags, owners) and
//! its invariants, the immediately queued attemptToDelete items in order, the rate-limited ones,
//! the routed virtual deletes not applied yet, the whole absentOwnerCache, the events recorded
//! and the GET/DELETE/PATCH calls made since the previous check; attemptToOrphan must be idle,
//! and anything an `Expect` leaves unset must be empty or zero. The few facts a check cannot
//! state (a handle replaced or forgotten, a node's dependents, a DELETE's preconditions, an
//! owner's place in attemptToOrphan) have a step each.
//!
//! Upstream's unit tests of the workers (16, 19, 22) also call a worker's function by hand
//! (`Attempt`, `OrphanFails`), check the exact requests it sent (`Requests`), start with a small
//! absentOwnerCache (`RestartWithCache`) or make the cluster refuse a verb (`Fault`,
//! `ClearFaults`). Item 18 races a thread feeding the builders against the orphan worker in one
//! step (`RaceOrphan`). Scenario 42 calls one pure function and is a plain table of cases.
//!
//! # The runner
//!
//! [`run`] executes a table in each [`Mode`] and with the router spreading events over 1, 2
//! and 4 builder partitions: `<scenario>::{upstream,fast_path}_p{1,2,4}`, so
//! `cargo test --test it conformance_graph::s26` runs one scenario in all six. Its invariants:
//!
//! - Every event, observed or routed by a worker, reaches the graph through the router, and each
//!   step drains every partition before the next, so the builders apply events in the order the
//!   table gives them whatever the number of partitions, and one table holds for all of them.
//!   `RaceOrphan` alone leaves the order of its events against the worker to the race, and
//!   states only what holds whatever it is.
//! - Routed virtual deletes are taken out of the partitions right after the worker step that
//!   routed them, and applied only by `ApplyPending` (upstream's graphChanges queue), routed
//!   again. The router orders events within a partition only, so pending deletes are listed
//!   partition by partition; no table has two pending at once, so the order never depends on
//!   the number of partitions.
//! - The two modes must agree on the graph, queues, events and outcome; only GETs the graph makes
//!   needless may go (`fast_gets`), and with them the absentOwnerCache entries those GETs would
//!   have made (`absent_upstream`).
//!
//! Upstream's test queue treats a rate-limited re-add as an immediate one. Here a rate-limited
//! re-add really waits, so a check lists it as delayed; `Process`, `ProcessOrphan` and `Release`
//! let the paused clock run until it is due, which puts it at the back of the queue where
//! upstream expects it.

use crate::support;

use kube_gc::api::layers::Verb;
use kube_gc::api::{
    DeleteOptions, EventRecord, Gvr, ObjectMeta, OwnerReference, PartialObjectMeta, PropagationPolicy, StatusReason,
};
use kube_gc::builder::references::alternate_owner_identity;
use kube_gc::collector::{CollectError, CollectorConfig};
use kube_gc::event::{EventType, GraphEvent};
use kube_gc::graph::{Graph, Handle, Identity, OwnerRef, OwnerRefs, Sym, TypeMeta, Uid};
use kube_gc::queue::QueueState;
use kube_gc_sim::{ApiCalls, SimCluster, TypeDef};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use support::{Recorder, Rig};

use Change::{AddRef, Label};
use EventType::{Add, Delete, Update};
use Id::*;
use Step::*;

// ---------------------------------------------------------------------------------------------
// The vocabulary
// ---------------------------------------------------------------------------------------------

/// The two ways the workers may run: every table runs in both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `verify_with_get`: upstream's call pattern, counted exactly.
    Upstream,
    /// The default: the workers act on what the graph observed.
    FastPath,
}

/// The objects the scenarios name; see [`Id::coordinates`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Id {
    // TestConflictingData's references.
    Pod1Ns1,
    Pod2Ns1,
    Pod2Ns2,
    Node1,
    Role1V1beta1,
    Role1V1,
    Deployment1Apps,
    /// Not served, still referenced.
    Deployment1Extensions,
    /// The virtual node a namespaced dependent creates for node1.
    Node1WithNamespace,
    /// The virtual node a cluster-scoped dependent creates for pod1.
    Pod1NoNamespace,
    /// A Secret ref that carries the UID of deployment1.
    BadSecretRef,
    BadChildPod,
    GoodChildPod,
    // 41, 56, 57, 58.
    Pod,
    /// An RC that never existed.
    Rc,
    /// A second one.
    RcGone2,
    CmOwner,
    Cm,
    /// A Widget as the monitor saw it before its preferred version changed, and after.
    WOld,
    WNew,
    W2Old,
    W2New,
    Owner,
    Other,
    Child,
    GrandChild,
    // 17: pods named by their UIDs.
    N1,
    N2,
    N3,
    N4,
    Nobody,
    // 16.
    ToBeDeletedPod,
    /// An RC that never existed.
    Owner1,
    // 18, 22: a real RC.
    RcOwner,
    // 19: pods of RCs that never existed.
    Rc1Pod1,
    Rc1Pod2,
    Rc2Pod1,
    Rc3Pod1,
    Rc1,
    Rc2,
    Rc3,
}

impl Id {
    /// (apiVersion, kind, namespace, name, uid).
    fn coordinates(self) -> [&'static str; 5] {
        match self {
            Pod1Ns1 => ["v1", "Pod", "ns1", "podname1", "poduid1"],
            Pod2Ns1 => ["v1", "Pod", "ns1", "podname2", "poduid2"],
            Pod2Ns2 => ["v1", "Pod", "ns2", "podname2", "poduid2"],
            Node1 => ["v1", "Node", "", "nodename", "nodeuid1"],
            Role1V1beta1 => ["rbac.authorization.k8s.io/v1beta1", "Role", "ns1", "role1", "roleuid1"],
            Role1V1 => ["rbac.authorization.k8s.io/v1", "Role", "ns1", "role1", "roleuid1"],
            Deployment1Apps => ["apps/v1", "Deployment", "ns1", "deployment1", "deploymentuid1"],
            Deployment1Extensions => [
                "extensions/v1beta1",
                "Deployment",
                "ns1",
                "deployment1",
                "deploymentuid1",
            ],
            Node1WithNamespace => ["v1", "Node", "ns1", "nodename", "nodeuid1"],
            Pod1NoNamespace => ["v1", "Pod", "", "podname1", "poduid1"],
            BadSecretRef => ["v1", "Secret", "ns1", "secretname", "deploymentuid1"],
            BadChildPod => ["v1", "Pod", "ns1", "badpod", "badpoduid"],
            GoodChildPod => ["v1", "Pod", "ns1", "goodpod", "goodpoduid"],
            Pod => ["v1", "Pod", "ns1", "pod", "pod-uid"],
            Rc => ["v1", "ReplicationController", "ns1", "gone", "rc-uid"],
            RcGone2 => ["v1", "ReplicationController", "ns1", "gone2", "rc2-uid"],
            CmOwner => ["v1", "ConfigMap", "ns1", "owner", "owner-uid"],
            Cm => ["v1", "ConfigMap", "ns1", "cm", "cm-uid"],
            WOld => ["example.com/v1beta1", "Widget", "ns1", "w", "w-uid"],
            WNew => ["example.com/v1", "Widget", "ns1", "w", "w-uid"],
            W2Old => ["example.com/v1beta1", "Widget", "ns1", "w2", "w2-uid"],
            W2New => ["example.com/v1", "Widget", "ns1", "w2", "w2-uid"],
            Owner => ["apps/v1", "Deployment", "ns1", "owner", "owner-uid"],
            Other => ["v1", "ConfigMap", "ns1", "other", "other-uid"],
            Child => ["v1", "Pod", "ns1", "child", "child-uid"],
            GrandChild => ["v1", "Pod", "ns1", "grandchild", "grandchild-uid"],
            N1 => ["v1", "Pod", "", "1", "1"],
            N2 => ["v1", "Pod", "", "2", "2"],
            N3 => ["v1", "Pod", "", "3", "3"],
            N4 => ["v1", "Pod", "", "4", "4"],
            Nobody => ["v1", "Pod", "", "doesn't matter", "doesn't matter"],
            ToBeDeletedPod => ["v1", "Pod", "ns1", "to-be-deleted-pod", "456"],
            Owner1 => ["v1", "ReplicationController", "ns1", "owner1", "123"],
            RcOwner => ["v1", "ReplicationController", "ns1", "owner", "rc-owner-uid"],
            Rc1Pod1 => ["v1", "Pod", "ns1", "rc1-pod1", "p11"],
            Rc1Pod2 => ["v1", "Pod", "ns1", "rc1-pod2", "p12"],
            Rc2Pod1 => ["v1", "Pod", "ns1", "rc2-pod1", "p21"],
            Rc3Pod1 => ["v1", "Pod", "ns1", "rc3-pod1", "p31"],
            Rc1 => ["v1", "ReplicationController", "ns1", "rc1", "1"],
            Rc2 => ["v1", "ReplicationController", "ns1", "rc2", "2"],
            Rc3 => ["v1", "ReplicationController", "ns1", "rc3", "3"],
        }
    }

    fn identity(self) -> Identity {
        identity(self.coordinates())
    }

    /// The resource the object is served under: every kind the tables create is served at the
    /// apiVersion they name it by, under its lowercased plural.
    fn gvr(self) -> Gvr {
        let [api_version, kind, ..] = self.coordinates();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        Gvr::new(group, version, &format!("{}s", kind.to_lowercase()))
    }
}

fn identity([api_version, kind, namespace, name, uid]: [&str; 5]) -> Identity {
    Identity::new(
        TypeMeta::new(Sym::new(api_version), Sym::new(kind)),
        name,
        Uid::parse(uid),
        Sym::new(namespace),
    )
}

/// An ownerReference with the flags plain [`Id`] lists leave unset.
#[derive(Clone, Copy)]
struct Ref {
    owner: Id,
    block: Option<bool>,
    controller: Option<bool>,
}

const fn to(owner: Id) -> Ref {
    Ref {
        owner,
        block: None,
        controller: None,
    }
}

const fn blocking(owner: Id) -> Ref {
    Ref {
        block: Some(true),
        ..to(owner)
    }
}

const fn unblocking(owner: Id) -> Ref {
    Ref {
        block: Some(false),
        ..to(owner)
    }
}

const fn controlled_by(owner: Id, controller: bool) -> Ref {
    Ref {
        controller: Some(controller),
        ..to(owner)
    }
}

/// A user's change to an object's metadata.
#[derive(Clone, Copy)]
enum Change {
    Label,
    AddRef(Id),
    Refs(&'static [Ref]),
}

/// One step of a scenario.
#[derive(Clone, Copy)]
enum Step {
    /// The user creates the object with these owners (not a GC call).
    Create(Id, &'static [Id]),
    CreateRefs(Id, &'static [Ref]),
    /// The user deletes the object, in the background, in the foreground, or orphaning its
    /// dependents.
    Remove(Id),
    RemoveForeground(Id),
    RemoveOrphan(Id),
    /// The user PUTs a change.
    Edit(Id, Change),
    /// A watch event for the object with these owners, as its monitor would route it.
    Observe(EventType, Id, &'static [Id]),
    ObserveRefs(EventType, Id, &'static [Ref]),
    /// A watch event carrying the object as the cluster stores it now.
    ObserveStored(EventType, Id),
    /// One attemptToDelete worker step, after any rate-limited item has come due.
    Process,
    /// Lets every rate-limited item come due.
    Release,
    /// Applies the oldest routed virtual deletes.
    ApplyPending(usize),
    /// attempt_to_delete_item, called by hand on a handle of the object with no owners (virtual
    /// or not), as upstream's unit tests build their items: it succeeds and leaves the handle's
    /// virtual flag alone. Its requests are kept for `Requests`.
    Attempt(Id, bool),
    /// The requests the `Attempt` steps sent since the previous `Requests`, in order.
    Requests(&'static [&'static str]),
    /// One attemptToOrphan worker step, after any rate-limited owner has come due.
    ProcessOrphan,
    /// attempt_to_orphan_worker, called by hand on the graph's handle of the owner, fails to
    /// orphan its dependents with an error whose message has each of these.
    OrphanFails(Id, &'static [&'static str]),
    /// With the owner observed, a thread applies an add and a delete for each of this many new
    /// dependents of it while the orphan worker orphans the owner at least as many times and
    /// until the thread is done; afterwards the graph is consistent, only the owner is left in
    /// it, with no dependents, and every dependent is still stored.
    RaceOrphan(Id, usize),
    /// Every `verb` call on the object's resource answers `reason` with `message`, until
    /// `ClearFaults`.
    Fault(Verb, Id, StatusReason, &'static str),
    ClearFaults,
    /// One attemptToDelete worker step whose DELETE the user's change (or delete) precedes.
    RaceEdit(Id, Change),
    RaceDelete(Id),
    Check(&'static str, Expect),
    /// Only the call counts of an [`Expect`], since the previous check.
    Calls(&'static str, Expect),
    /// Counts calls afresh from here, without a check.
    Recount,
    Exists(Id),
    Gone(Id),
    /// The stored object's ownerReferences are exactly these, with plain flags or with these.
    StoredRefs(Id, &'static [Id]),
    StoredRefFlags(Id, &'static [Ref]),
    /// The stored object's finalizers are exactly these.
    StoredFinalizers(Id, &'static [&'static str]),
    /// Keeps the graph's handle for the object (whose identity it must be), for the next three.
    Remember(Id),
    /// The graph's handle for the object's UID is no longer the remembered one.
    Replaced(Id),
    /// The remembered handle has no backoff left.
    Forgotten(Id),
    /// The graph's handle for the object has been requeued this many times.
    Requeues(Id, u32),
    /// attemptToDelete holds the remembered handle alone, as queued before the steps that follow.
    Requeue(Id),
    InQueue(Id, QueueState),
    /// The same for attemptToOrphan.
    InOrphanQueue(Id, QueueState),
    OrphanRequeues(Id, u32),
    DeletingDependents(Id),
    /// The node, its owners and its dependents (any order), each the graph's current handle.
    Dependents(Node, &'static [Id]),
    /// Takes the queued attemptToDelete items and compares their UIDs, in any order.
    Queued(&'static str, &'static [Id]),
    /// The graph as `node → dependents`, every node observed.
    Edges(&'static [(Id, &'static [Id])]),
    AbsentCount(usize),
    /// Each DELETE of the last race named the object's UID and, if asked, the resourceVersion it
    /// had before the race; all in the background.
    Preconditions(Id, &'static [Pre]),
    /// Starts over with a fresh cluster and rig.
    Restart,
    /// The same, with an absentOwnerCache of this capacity (otherwise 500).
    RestartWithCache(usize),
    /// A shared sequence.
    Steps(&'static [Step]),
}

#[derive(Clone, Copy)]
enum Pre {
    UidAndVersion,
    UidAlone,
}

/// What a check expects of one graph node.
#[derive(Clone, Copy)]
enum Node {
    Observed(Id, &'static [Id]),
    ObservedRefs(Id, &'static [Ref]),
    Virtual(Id),
}

/// An observed node with these owner coordinates.
const fn node(id: Id, owners: &'static [Id]) -> Node {
    Node::Observed(id, owners)
}

/// An observed node with these owner references, flags included.
const fn node_refs(id: Id, refs: &'static [Ref]) -> Node {
    Node::ObservedRefs(id, refs)
}

/// A virtual node (never has owners).
const fn virt(id: Id) -> Node {
    Node::Virtual(id)
}

/// An attemptToDelete item: (object, virtual).
type Item = (Id, bool);

const fn q(id: Id) -> Item {
    (id, false)
}

const fn qv(id: Id) -> Item {
    (id, true)
}

/// An OwnerRefInvalidNamespace event on a dependent (its namespace and kind, apiVersion v1) whose
/// ref `claimed` (with the dependent's namespace) does not exist there (spec §3.9).
#[derive(Clone, Copy)]
struct InvalidNamespace {
    claimed: &'static str,
    namespace: &'static str,
    kind: &'static str,
}

const fn invalid_ns(claimed: &'static str, namespace: &'static str, kind: &'static str) -> InvalidNamespace {
    InvalidNamespace {
        claimed,
        namespace,
        kind,
    }
}

/// Everything one check compares; built as `graph(..)` or [`NOTHING`] and the setters below.
#[derive(Clone, Copy)]
struct Expect {
    /// The whole graph, in any order.
    graph: &'static [Node],
    /// Immediately queued attemptToDelete items, in queue order.
    queued: &'static [Item],
    /// Rate-limited attemptToDelete items waiting for their delay, by the graph's current handle.
    delayed: &'static [Id],
    /// Routed virtual deletes not applied yet, in order.
    pending: &'static [Id],
    /// The whole absentOwnerCache...
    absent: &'static [Id],
    /// ...plus these in `Upstream` mode, cached by GETs the fast path does not make.
    absent_upstream: &'static [Id],
    events: &'static [InvalidNamespace],
    gets: u64,
    /// The fast path's GETs, when fewer.
    fast_gets: Option<u64>,
    deletes: u64,
    patches: u64,
}

const NOTHING: Expect = Expect {
    graph: &[],
    queued: &[],
    delayed: &[],
    pending: &[],
    absent: &[],
    absent_upstream: &[],
    events: &[],
    gets: 0,
    fast_gets: None,
    deletes: 0,
    patches: 0,
};

const fn graph(graph: &'static [Node]) -> Expect {
    Expect { graph, ..NOTHING }
}

impl Expect {
    const fn queued(self, queued: &'static [Item]) -> Expect {
        Expect { queued, ..self }
    }
    const fn delayed(self, delayed: &'static [Id]) -> Expect {
        Expect { delayed, ..self }
    }
    const fn pending(self, pending: &'static [Id]) -> Expect {
        Expect { pending, ..self }
    }
    const fn absent(self, absent: &'static [Id]) -> Expect {
        Expect { absent, ..self }
    }
    const fn absent_upstream(self, absent_upstream: &'static [Id]) -> Expect {
        Expect {
            absent_upstream,
            ..self
        }
    }
    const fn events(self, events: &'static [InvalidNamespace]) -> Expect {
        Expect { events, ..self }
    }
    const fn gets(self, gets: u64) -> Expect {
        Expect { gets, ..self }
    }
    const fn fast_gets(self, gets: u64) -> Expect {
        Expect {
            fast_gets: Some(gets),
            ..self
        }
    }
    const fn deletes(self, deletes: u64) -> Expect {
        Expect { deletes, ..self }
    }
    const fn patches(self, patches: u64) -> Expect {
        Expect { patches, ..self }
    }
}

// ---------------------------------------------------------------------------------------------
// The runner
// ---------------------------------------------------------------------------------------------

/// One `#[tokio::test]` per mode and partition count for each scenario and its table.
macro_rules! scenarios {
    ($($name:ident: $table:ident,)*) => {$(
        mod $name {
            use super::{run, Mode::*, $table as TABLE};

            #[tokio::test(start_paused = true)]
            async fn upstream_p1() { run(TABLE, Upstream, 1).await }
            #[tokio::test(start_paused = true)]
            async fn upstream_p2() { run(TABLE, Upstream, 2).await }
            #[tokio::test(start_paused = true)]
            async fn upstream_p4() { run(TABLE, Upstream, 4).await }
            #[tokio::test(start_paused = true)]
            async fn fast_path_p1() { run(TABLE, FastPath, 1).await }
            #[tokio::test(start_paused = true)]
            async fn fast_path_p2() { run(TABLE, FastPath, 2).await }
            #[tokio::test(start_paused = true)]
            async fn fast_path_p4() { run(TABLE, FastPath, 4).await }
        }
    )*};
}

scenarios!(
    s16_attempt_to_delete_item_deletes_a_virtual_item_whose_owner_is_absent: S16,
    s17_process_event_sequences_keep_owners_and_dependents_consistent: S17,
    s18_dependents_race_between_the_builder_and_an_orphan_worker_stays_consistent: S18,
    s19_absent_owner_cache_saves_a_get_and_evicts_lru: S19,
    s22_a_conflict_on_the_orphan_patch_fails_the_owner_and_requeues_it: S22,
    s25_good_child_with_cluster_scoped_owner_drops_stale_virtual_handle: S25,
    s26_bad_child_with_owner_in_other_namespace_child_first_is_deleted: S26,
    s27_bad_child_with_owner_in_other_namespace_owner_first_is_deleted: S27,
    s28_cluster_scoped_child_with_namespaced_owner_child_first_is_kept: S28,
    s29_cluster_scoped_child_with_namespaced_owner_owner_first_is_kept: S29,
    s30_child_of_owner_seen_through_non_preferred_version_waits_for_real_owner: S30,
    s31_child_of_owner_with_unserved_version_child_first_is_never_deleted: S31,
    s32_child_of_owner_with_unserved_version_owner_first_is_never_deleted: S32,
    s33_absent_owner_with_unserved_version_seen_first_keeps_polling: S33,
    s34_absent_owner_with_served_version_seen_first_switches_to_alternate_identity: S34,
    s35_bad_child_wrong_kind_then_virtual_delete_then_good_parent: S35,
    s36_bad_child_wrong_kind_good_parent_observed_before_virtual_delete: S36,
    s37_good_child_then_bad_child_then_good_parent: S37,
    s38_cluster_scoped_bad_child_and_namespaced_good_child_with_missing_parent: S38,
    s39_cluster_scoped_bad_child_and_late_observed_parent_records_event: S39,
    s40_namespaced_good_child_first_replaces_virtual_parent_with_cluster_form: S40,
    s20_delete_owner_ref_patch_removes_the_dangling_refs_and_keeps_the_solid_one: S20,
    s21_unblock_owner_reference_patch_unblocks_only_the_blocking_refs: S21,
    s41_conflict_between_get_and_delete_retries_or_requeues: S41,
    s56_preferred_version_change_replaces_node_and_fixes_owner_dependents: S56,
    s57_unblocking_a_dependent_requeues_the_waiting_owner: S57,
    s58_delete_answering_not_found_routes_virtual_delete: S58,
);

/// Runs `table` on a fresh rig in `mode` with `partitions` builders.
async fn run(table: &'static [Step], mode: Mode, partitions: usize) {
    let mut steps = Vec::new();
    flatten(table, &mut steps);
    let mut s = Scenario::new(mode, partitions, CACHE).await;
    for step in steps {
        match step {
            Restart => s = Scenario::new(mode, partitions, CACHE).await,
            RestartWithCache(capacity) => s = Scenario::new(mode, partitions, capacity).await,
            step => s.step(step).await,
        }
    }
}

fn flatten(table: &'static [Step], out: &mut Vec<Step>) {
    for step in table {
        match step {
            Steps(shared) => flatten(shared, out),
            step => out.push(*step),
        }
    }
}

/// The absentOwnerCache's capacity unless a table says otherwise.
const CACHE: usize = 500;

/// A rig plus the bookkeeping of upstream's step-by-step tests.
struct Scenario {
    mode: Mode,
    rig: Rig,
    /// Virtual deletes the workers routed and no step has applied yet (upstream's graphChanges).
    pending: Vec<GraphEvent>,
    /// API calls counted at the previous check.
    calls: ApiCalls,
    remembered: HashMap<Id, Handle>,
    /// The DELETEs of the last race, and the raced object's resourceVersion before it.
    raced: (Vec<DeleteOptions>, String),
    /// The requests of the `Attempt` steps since the previous `Requests`.
    requests: Vec<String>,
}

impl Scenario {
    /// The built-in types, rbac Role also served at v1beta1 (v1 preferred), extensions/v1beta1
    /// not served at all, and Widgets served at v1 only (56: the monitor used to see v1beta1).
    async fn new(mode: Mode, partitions: usize, cache_capacity: usize) -> Scenario {
        let cluster = SimCluster::new();
        cluster.register(
            TypeDef::new("rbac.authorization.k8s.io", "v1", "Role", "roles", true)
                .with_versions(&["v1", "v1beta1"], "v1"),
        );
        cluster.register(TypeDef::new("example.com", "v1", "Widget", "widgets", true));
        let config = CollectorConfig {
            verify_with_get: mode == Mode::Upstream,
            ..CollectorConfig::default()
        };
        let rig = Rig::with_partitions(cluster, cache_capacity, config, partitions).await;
        let calls = rig.cluster.api_calls();
        Scenario {
            mode,
            rig,
            pending: Vec::new(),
            calls,
            remembered: HashMap::new(),
            raced: Default::default(),
            requests: Vec::new(),
        }
    }

    async fn step(&mut self, step: Step) {
        let cluster = self.rig.cluster.clone();
        match step {
            Create(id, owners) => self.create(id, owners.iter().map(|o| wire_ref(&o.identity())).collect()),
            CreateRefs(id, refs) => self.create(id, refs.iter().copied().map(Ref::to_wire).collect()),
            Remove(id) => delete(&cluster, id, DeleteOptions::default()),
            RemoveForeground(id) => delete(
                &cluster,
                id,
                DeleteOptions {
                    propagation_policy: Some(PropagationPolicy::Foreground),
                    ..Default::default()
                },
            ),
            RemoveOrphan(id) => delete(
                &cluster,
                id,
                DeleteOptions {
                    propagation_policy: Some(PropagationPolicy::Orphan),
                    ..Default::default()
                },
            ),
            Edit(id, change) => edit(&cluster, id, change),
            Observe(event_type, id, owners) => {
                let refs = owners.iter().map(|o| wire_ref(&o.identity())).collect();
                self.observe(event_type, id, &meta_of(id, refs));
            }
            ObserveRefs(event_type, id, refs) => self.observe(
                event_type,
                id,
                &meta_of(id, refs.iter().copied().map(Ref::to_wire).collect()),
            ),
            ObserveStored(event_type, id) => self.observe(event_type, id, &stored(&cluster, id).metadata),
            Process => {
                self.rig.release_delayed().await;
                assert!(self.rig.step_delete().await, "expected an item in attemptToDelete");
                self.pending.extend(self.rig.take_routed());
            }
            Release => self.rig.release_delayed().await,
            ApplyPending(n) => {
                assert!(self.pending.len() >= n, "expected {n} pending graph changes");
                for event in self.pending.drain(..n).collect::<Vec<_>>() {
                    self.rig.apply(event);
                }
            }
            Attempt(id, is_virtual) => self.attempt(id, is_virtual).await,
            Requests(want) => assert_eq!(std::mem::take(&mut self.requests), want, "requests of the attempts"),
            ProcessOrphan => {
                self.rig.release_delayed_orphans().await;
                assert!(self.rig.step_orphan().await, "expected an owner in attemptToOrphan");
                self.pending.extend(self.rig.take_routed());
            }
            OrphanFails(id, want) => {
                let err = self
                    .rig
                    .collector
                    .attempt_to_orphan_worker(&self.handle(id))
                    .await
                    .expect_err("orphaning must fail");
                assert!(matches!(err, CollectError::OrphanDependents { .. }), "{err:?}");
                let message = err.to_string();
                for text in want {
                    assert!(message.contains(text), "{text:?} not in {message:?}");
                }
                self.pending.extend(self.rig.take_routed());
            }
            RaceOrphan(owner, n) => self.race_orphan(owner, n).await,
            Fault(verb, id, reason, message) => {
                let gvr = id.gvr();
                cluster.inject_fault(support::fault(verb, Some((&gvr.group, &gvr.resource)), reason, message));
            }
            ClearFaults => cluster.clear_faults(),
            RaceEdit(id, change) => self.race(id, move |sim| edit(sim, id, change)).await,
            RaceDelete(id) => {
                self.race(id, move |sim| delete(sim, id, DeleteOptions::default()))
                    .await
            }
            Check(label, want) => self.check(label, &want).await,
            Calls(label, want) => self.check_calls(label, &want),
            Recount => self.calls = self.rig.cluster.api_calls(),
            Exists(id) => assert!(exists(&cluster, id), "{id:?} should exist"),
            Gone(id) => assert!(!exists(&cluster, id), "{id:?} should be gone"),
            StoredRefs(id, owners) => {
                let want: Vec<OwnerReference> = owners.iter().map(|o| wire_ref(&o.identity())).collect();
                assert_eq!(stored(&cluster, id).metadata.owner_references, want, "refs of {id:?}");
            }
            StoredRefFlags(id, refs) => {
                let want: Vec<OwnerReference> = refs.iter().copied().map(Ref::to_wire).collect();
                assert_eq!(stored(&cluster, id).metadata.owner_references, want, "refs of {id:?}");
            }
            StoredFinalizers(id, want) => {
                assert_eq!(stored(&cluster, id).metadata.finalizers, want, "finalizers of {id:?}")
            }
            Remember(id) => {
                let handle = self.handle(id);
                assert_eq!(*handle.identity(), id.identity(), "the handle remembered for {id:?}");
                self.remembered.insert(id, handle);
            }
            Replaced(id) => assert!(
                !Handle::ptr_eq(&self.remembered[&id], &self.handle(id)),
                "{id:?}: a new handle replaced the remembered one"
            ),
            Forgotten(id) => assert_eq!(
                self.rig
                    .collector
                    .attempt_to_delete()
                    .num_requeues(&self.remembered[&id]),
                0,
                "{id:?}: the remembered handle was forgotten"
            ),
            Requeues(id, n) => assert_eq!(
                self.rig.collector.attempt_to_delete().num_requeues(&self.handle(id)),
                n,
                "{id:?}"
            ),
            Requeue(id) => {
                self.rig.drain_delete_queue().await;
                self.rig.collector.attempt_to_delete().add(self.remembered[&id].clone());
            }
            InQueue(id, state) => assert_eq!(
                self.rig.collector.attempt_to_delete().contains(&self.handle(id)),
                state,
                "{id:?}"
            ),
            InOrphanQueue(id, state) => {
                assert_eq!(
                    self.rig.collector.attempt_to_orphan().contains(&self.handle(id)),
                    state,
                    "{id:?}"
                )
            }
            OrphanRequeues(id, n) => assert_eq!(
                self.rig.collector.attempt_to_orphan().num_requeues(&self.handle(id)),
                n,
                "{id:?}"
            ),
            DeletingDependents(id) => assert!(self.handle(id).is_deleting_dependents(), "{id:?}"),
            Dependents(spec, want) => self.check_dependents(spec, want),
            Queued(label, want) => {
                let mut want: Vec<String> = want.iter().map(|id| id.identity().uid.to_string()).collect();
                want.sort();
                assert_eq!(queued_uids(&self.rig).await, want, "{label}");
            }
            Edges(edges) => {
                let uid = |id: &Id| id.identity().uid.to_string();
                let want: BTreeMap<String, BTreeSet<String>> = edges
                    .iter()
                    .map(|(id, deps)| (uid(id), deps.iter().map(uid).collect()))
                    .collect();
                assert_eq!(dependents_by_uid(&self.rig.graph), want);
            }
            AbsentCount(n) => assert_eq!(
                self.rig.collector.absent_owner_cache().len(),
                n,
                "absentOwnerCache size"
            ),
            Preconditions(id, want) => self.check_preconditions(id, want),
            Restart | RestartWithCache(_) | Steps(_) => unreachable!("the runner expands these"),
        }
    }

    /// Creates the object in the cluster, as a user would (not counted as a GC call).
    fn create(&self, id: Id, refs: Vec<OwnerReference>) {
        let obj = PartialObjectMeta {
            metadata: meta_of(id, refs),
            ..Default::default()
        };
        self.rig
            .cluster
            .create(&id.gvr(), obj)
            .unwrap_or_else(|e| panic!("create {id:?}: {e}"));
    }

    /// Applies a watch event for `meta` as the monitor of `id`'s apiVersion/kind would route it.
    fn observe(&self, event_type: EventType, id: Id, meta: &ObjectMeta) {
        let identity = id.identity();
        let event = self
            .rig
            .event(event_type, meta, identity.api_version(), identity.kind());
        self.rig.apply(event);
    }

    /// Runs one worker step through a [`Recorder`] that lets `race` act right before the DELETE.
    async fn race(&mut self, id: Id, race: impl FnOnce(&SimCluster) + Send + 'static) {
        let version = stored(&self.rig.cluster, id).metadata.resource_version;
        let recorder = Arc::new(Recorder::new(self.rig.cluster.clone()));
        let collector = self.rig.collector_over(recorder.clone()).await;
        recorder.before_next_delete(race);
        assert!(collector.process_attempt_to_delete_worker().await);
        self.pending.extend(self.rig.take_routed());
        self.raced = (recorder.deletes(), version);
    }

    /// attempt_to_delete_item on a hand-made handle of `id` with no owners, through a
    /// [`Recorder`] that keeps its requests.
    async fn attempt(&mut self, id: Id, is_virtual: bool) {
        let recorder = Arc::new(Recorder::new(self.rig.cluster.clone()));
        let collector = self.rig.collector_over(recorder.clone()).await;
        let item = Handle::new(id.identity(), OwnerRefs::NONE, is_virtual);
        collector
            .attempt_to_delete_item(&item)
            .await
            .unwrap_or_else(|e| panic!("attempt {id:?}: {e}"));
        assert_eq!(
            item.is_virtual(),
            is_virtual,
            "{id:?}: the attempt left the virtual flag alone"
        );
        self.pending.extend(self.rig.take_routed());
        self.requests.extend(recorder.calls());
    }

    /// Creates `n` pods owned by `owner` and races a thread that applies an add and a delete
    /// for each against orphan worker steps on `owner` (at least `n`, and until the thread is
    /// done), then checks what both leave.
    ///
    /// Every event still goes through the router, and the thread drains every partition after
    /// each one; which worker step sees which dependents is left to the race. The thread is a
    /// plain one, not `spawn_blocking`: on a paused clock a blocking task stops the clock from
    /// advancing until it ends, so the worker's first wait (for the builders to catch up) would
    /// hold it until the whole churn was over.
    async fn race_orphan(&mut self, owner: Id, n: usize) {
        let node = self.handle(owner);
        let [_, _, namespace, ..] = owner.coordinates();
        let pods = Gvr::new("", "v1", "pods");
        let dependents: Vec<ObjectMeta> = (0..n)
            .map(|i| {
                let meta = ObjectMeta {
                    name: format!("dep-{i}"),
                    namespace: namespace.into(),
                    owner_references: vec![wire_ref(&owner.identity())],
                    ..Default::default()
                };
                let obj = PartialObjectMeta {
                    metadata: meta,
                    ..Default::default()
                };
                let created = self.rig.cluster.create(&pods, obj).expect("create a dependent");
                created.metadata
            })
            .collect();
        let applier = self.rig.applier();
        // both sides start together: the thread could otherwise be slower to start than the
        // whole orphan side is to run
        let start = Arc::new(std::sync::Barrier::new(2));
        let started = start.clone();
        let churn = std::thread::spawn(move || {
            started.wait();
            for dep in &dependents {
                for event_type in [Add, Delete] {
                    applier.apply(applier.event(event_type, dep, "v1", "Pod"));
                }
            }
        });
        start.wait();
        let mut rounds = 0;
        while rounds < n || !churn.is_finished() {
            rounds += 1;
            self.rig.collector.attempt_to_orphan().add(node.clone());
            assert!(self.rig.collector.process_attempt_to_orphan_worker().await);
        }
        churn.join().expect("the builder side panicked");

        kube_gc::graph::invariants::assert_ok(&self.rig.graph);
        assert_eq!(node.dependents_len(), 0, "every dependent added was removed");
        assert_eq!(self.rig.graph.len(), 1, "only the owner is left in the graph");
        assert!(
            Handle::ptr_eq(&node, &self.handle(owner)),
            "the owner's node is the one raced on"
        );
        assert_eq!(
            self.rig.cluster.list_objects(&pods).len(),
            n,
            "orphaning deletes nothing"
        );
    }

    /// The graph's current handle for `id`'s UID.
    fn handle(&self, id: Id) -> Handle {
        self.rig
            .graph
            .get(&id.identity().uid)
            .unwrap_or_else(|| panic!("no node for {id:?}"))
    }

    /// Compares everything `want` describes with the rig's state, then counts calls afresh.
    async fn check(&mut self, step: &str, want: &Expect) {
        kube_gc::graph::invariants::assert_ok(&self.rig.graph);
        self.check_calls(step, want);
        let events: Vec<String> = self.rig.recorded_events().iter().map(event_line).collect();
        let want_events: Vec<String> = want.events.iter().map(InvalidNamespace::line).collect();
        assert_eq!(events, want_events, "{step}: recorded events");
        assert_eq!(self.rig.graph.len(), want.graph.len(), "{step}: number of graph nodes");
        for spec in want.graph {
            self.check_node(step, spec);
        }
        self.check_pending(step, want);
        self.check_queue(step, want).await;
        self.check_absent(step, want);
        assert!(
            self.rig.collector.attempt_to_orphan().is_idle(),
            "{step}: attemptToOrphan should be empty"
        );
    }

    fn check_calls(&mut self, step: &str, want: &Expect) {
        let now = self.rig.cluster.api_calls();
        let got = (
            now.get - self.calls.get,
            now.delete - self.calls.delete,
            now.patch - self.calls.patch,
        );
        self.calls = now;
        let gets = match self.mode {
            Mode::Upstream => want.gets,
            Mode::FastPath => want.fast_gets.unwrap_or(want.gets),
        };
        assert_eq!(
            got,
            (gets, want.deletes, want.patches),
            "{step}: (GET, DELETE, PATCH) calls"
        );
    }

    /// Checks one node's identity, virtual flag and owners; returns its handle.
    fn check_node(&self, step: &str, spec: &Node) -> Handle {
        let (id, is_virtual, want) = match *spec {
            Node::Observed(id, owners) => (id, false, owners.iter().map(|o| wire_ref(&o.identity())).collect()),
            Node::ObservedRefs(id, refs) => (id, false, refs.iter().copied().map(Ref::to_wire).collect()),
            Node::Virtual(id) => (id, true, Vec::new()),
        };
        let identity = id.identity();
        let n = self
            .rig
            .graph
            .get(&identity.uid)
            .unwrap_or_else(|| panic!("{step}: no node with uid {}", identity.uid));
        assert_eq!(*n.identity(), identity, "{step}: identity of uid {}", identity.uid);
        assert_eq!(n.is_virtual(), is_virtual, "{step}: virtual flag of {id:?}");
        let got: Vec<OwnerReference> = n.owners().iter().map(OwnerRef::to_wire).collect();
        assert_eq!(got, want, "{step}: owners of {id:?}");
        n
    }

    fn check_pending(&self, step: &str, want: &Expect) {
        for e in &self.pending {
            assert!(
                e.is_virtual && e.event_type == EventType::Delete,
                "{step}: a routed event is not a virtual delete: {e:?}"
            );
        }
        let got: Vec<Identity> = self.pending.iter().map(GraphEvent::identity).collect();
        let want: Vec<Identity> = want.pending.iter().map(|id| id.identity()).collect();
        assert_eq!(got, want, "{step}: pending virtual deletes");
    }

    async fn check_queue(&self, step: &str, want: &Expect) {
        let got: Vec<(Identity, bool)> = self
            .rig
            .peek_delete_queue()
            .await
            .iter()
            .map(|h| (h.identity().clone(), h.is_virtual()))
            .collect();
        let queued: Vec<(Identity, bool)> = want.queued.iter().map(|(id, v)| (id.identity(), *v)).collect();
        assert_eq!(got, queued, "{step}: queued attemptToDelete items (identity, virtual)");
        let queue = self.rig.collector.attempt_to_delete();
        assert_eq!(queue.delayed_len(), want.delayed.len(), "{step}: rate-limited items");
        for id in want.delayed {
            assert_eq!(
                queue.contains(&self.handle(*id)),
                QueueState::Delayed,
                "{step}: {id:?} should wait for its backoff"
            );
        }
    }

    fn check_absent(&self, step: &str, want: &Expect) {
        let extra = match self.mode {
            Mode::Upstream => want.absent_upstream,
            Mode::FastPath => &[],
        };
        let cache = self.rig.collector.absent_owner_cache();
        assert_eq!(
            cache.len(),
            want.absent.len() + extra.len(),
            "{step}: absentOwnerCache size"
        );
        for id in want.absent.iter().chain(extra) {
            assert!(cache.has(&id.identity()), "{step}: {id:?} should be cached as absent");
        }
    }

    fn check_dependents(&self, spec: Node, want: &[Id]) {
        let node = self.check_node("dependents", &spec);
        let mut got: Vec<Handle> = node.dependents();
        got.sort_by_key(|d| d.identity().uid.to_string());
        let mut want: Vec<Id> = want.to_vec();
        want.sort_by_key(|id| id.identity().uid.to_string());
        let ids: Vec<Identity> = got.iter().map(|d| d.identity().clone()).collect();
        assert_eq!(
            ids,
            want.iter().map(|id| id.identity()).collect::<Vec<_>>(),
            "dependents"
        );
        for (dep, id) in got.iter().zip(want) {
            assert!(
                Handle::ptr_eq(dep, &self.handle(id)),
                "{id:?} is listed by its current handle"
            );
        }
    }

    fn check_preconditions(&self, id: Id, want: &[Pre]) {
        let (deletes, version) = &self.raced;
        assert_eq!(deletes.len(), want.len(), "DELETEs of the race");
        for (d, pre) in deletes.iter().zip(want) {
            let p = d.preconditions.clone().unwrap_or_default();
            assert_eq!(p.uid, Some(id.identity().uid.to_string()), "the DELETE names the UID");
            let want_version = match pre {
                Pre::UidAndVersion => Some(version.clone()),
                Pre::UidAlone => None,
            };
            assert_eq!(p.resource_version, want_version, "the DELETE's resourceVersion");
            assert_eq!(d.propagation_policy, Some(PropagationPolicy::Background));
        }
    }
}

impl Ref {
    fn to_wire(self) -> OwnerReference {
        OwnerReference {
            block_owner_deletion: self.block,
            controller: self.controller,
            ..wire_ref(&self.owner.identity())
        }
    }
}

impl InvalidNamespace {
    fn line(&self) -> String {
        let Self {
            claimed,
            namespace,
            kind,
        } = self;
        format!(
            "Warning OwnerRefInvalidNamespace ownerRef {claimed} does not exist in namespace \"{namespace}\" \
             involvedObject{{kind={kind},apiVersion=v1}}"
        )
    }
}

/// The wire ref naming `owner`'s coordinates.
fn wire_ref(owner: &Identity) -> OwnerReference {
    OwnerReference {
        api_version: owner.api_version().to_string(),
        kind: owner.kind().to_string(),
        name: owner.name.to_string(),
        uid: owner.uid.to_string(),
        ..Default::default()
    }
}

/// Metadata of the object `id` with these refs.
fn meta_of(id: Id, owner_references: Vec<OwnerReference>) -> ObjectMeta {
    let [_, _, namespace, name, uid] = id.coordinates();
    ObjectMeta {
        name: name.into(),
        namespace: namespace.into(),
        uid: uid.into(),
        owner_references,
        ..Default::default()
    }
}

fn stored(cluster: &SimCluster, id: Id) -> PartialObjectMeta {
    let [_, _, namespace, name, _] = id.coordinates();
    cluster
        .get_object(&id.gvr(), namespace, name)
        .unwrap_or_else(|e| panic!("{id:?} should be stored: {e}"))
}

fn exists(cluster: &SimCluster, id: Id) -> bool {
    let [_, _, namespace, name, uid] = id.coordinates();
    cluster
        .get_object(&id.gvr(), namespace, name)
        .is_ok_and(|o| o.metadata.uid == uid)
}

fn delete(cluster: &SimCluster, id: Id, options: DeleteOptions) {
    let [_, _, namespace, name, _] = id.coordinates();
    cluster
        .delete_object(&id.gvr(), namespace, name, &options)
        .unwrap_or_else(|e| panic!("delete {id:?}: {e}"));
}

/// The user's PUT of the object with `change` applied.
fn edit(cluster: &SimCluster, id: Id, change: Change) {
    let mut obj = stored(cluster, id);
    let refs = &mut obj.metadata.owner_references;
    match change {
        Label => {
            obj.metadata.labels.insert("touched".into(), "yes".into());
        }
        AddRef(owner) => refs.push(wire_ref(&owner.identity())),
        Change::Refs(new) => *refs = new.iter().copied().map(Ref::to_wire).collect(),
    }
    cluster
        .update(&id.gvr(), obj)
        .unwrap_or_else(|e| panic!("edit {id:?}: {e}"));
}

/// One recorded event in the shape upstream's fake recorder prints.
fn event_line(e: &EventRecord) -> String {
    assert_eq!(e.source_component, "garbage-collector-controller");
    format!(
        "{} {} {} involvedObject{{kind={},apiVersion={}}}",
        e.event_type, e.reason, e.message, e.involved_object.kind, e.involved_object.api_version
    )
}

/// The graph as `uid → dependent uids`; every node must be observed.
fn dependents_by_uid(graph: &Graph) -> BTreeMap<String, BTreeSet<String>> {
    graph
        .handles()
        .iter()
        .map(|n| {
            assert!(!n.is_virtual(), "{} is still virtual", n.identity());
            let deps = n.dependents().iter().map(|d| d.identity().uid.to_string()).collect();
            (n.identity().uid.to_string(), deps)
        })
        .collect()
}

/// Takes the queued attemptToDelete items and returns their UIDs, sorted.
async fn queued_uids(rig: &Rig) -> Vec<String> {
    let mut uids: Vec<String> = rig
        .drain_delete_queue()
        .await
        .iter()
        .map(|h| h.identity().uid.to_string())
        .collect();
    uids.sort();
    uids
}

// ---------------------------------------------------------------------------------------------
// 17: ProcessEvent
// ---------------------------------------------------------------------------------------------

#[rustfmt::skip]
const S17: &[Step] = &[
    // test1: a chain of adds, owners first.
    Observe(Add, N1, &[]), Observe(Add, N2, &[N1]), Observe(Add, N3, &[N1, N2]),
    Edges(&[(N1, &[N2, N3]), (N2, &[N3]), (N3, &[])]),
    // test2: deleting an owner with two dependents.
    Restart,
    Observe(Add, N1, &[]), Observe(Add, N2, &[N1]), Observe(Add, N3, &[N1, N2]), Observe(Add, N4, &[N2]),
    Observe(Delete, N2, &[Nobody]),
    Edges(&[(N1, &[N3]), (N3, &[]), (N4, &[])]),
    Queued("dependents of a deleted owner are queued", &[N3, N4]),
    AbsentCount(1), // the deleted owner had dependents
    // test3: an update that swaps an owner and closes a cycle 2 → 4 → 3 → 2.
    Restart,
    Observe(Add, N1, &[]), Observe(Add, N2, &[N1]), Observe(Add, N3, &[N1, N2]), Observe(Add, N4, &[N3]),
    Observe(Update, N2, &[N4]),
    Edges(&[(N1, &[N3]), (N2, &[N3]), (N3, &[N4]), (N4, &[N2])]),
    // reverse test2: dependents first, so owners start virtual and are observed later.
    Restart,
    Observe(Add, N4, &[N2]), Observe(Add, N3, &[N1, N2]), Observe(Add, N2, &[N1]), Observe(Add, N1, &[]),
    Observe(Delete, N2, &[Nobody]),
    Edges(&[(N1, &[N3]), (N3, &[]), (N4, &[])]),
];

// ---------------------------------------------------------------------------------------------
// 16, 18, 19, 22: the workers' unit tests
// ---------------------------------------------------------------------------------------------

#[rustfmt::skip]
const S16: &[Step] = &[
    Create(ToBeDeletedPod, &[Owner1]),
    // a virtual item with no owners: the attempt reads the live object, then its owner (404)
    Attempt(ToBeDeletedPod, true),
    Requests(&[
        "get v1/pods ns1/to-be-deleted-pod",
        "get v1/replicationcontrollers ns1/owner1",
        "delete v1/pods ns1/to-be-deleted-pod",
    ]),
    Check("delete the item", NOTHING.absent(&[Owner1]).gets(2).deletes(1)),
    Gone(ToBeDeletedPod),
];

#[rustfmt::skip]
const S18: &[Step] = &[
    // Ten times upstream's 100 rounds, for more overlap between the two sides. Rust rules out
    // the data race upstream hunts with the race detector; what is left is that neither side
    // deadlocks or panics and that the graph is consistent afterwards.
    Create(RcOwner, &[]),
    Observe(Add, RcOwner, &[]),
    RaceOrphan(RcOwner, 1000),
];

#[rustfmt::skip]
const S19: &[Step] = &[
    RestartWithCache(2),
    CreateRefs(Rc1Pod1, &[controlled_by(Rc1, true)]),
    CreateRefs(Rc1Pod2, &[controlled_by(Rc1, false)]),
    Create(Rc2Pod1, &[Rc2]),
    Create(Rc3Pod1, &[Rc3]),
    Attempt(Rc1Pod1, false),
    Attempt(Rc2Pod1, false),
    Check("rc1 and rc2 cached under their namespace", NOTHING.absent(&[Rc1, Rc2]).gets(4).deletes(2)),
    // a ref that differs only in `controller` hits rc1's entry, and the hit promotes it...
    Attempt(Rc1Pod2, false),
    // ...so rc3 evicts rc2
    Attempt(Rc3Pod1, false),
    Check("rc1 hit, rc2 evicted", NOTHING.absent(&[Rc1, Rc3]).gets(3).deletes(2)),
    Requests(&[
        "get v1/pods ns1/rc1-pod1",
        "get v1/replicationcontrollers ns1/rc1",
        "delete v1/pods ns1/rc1-pod1",
        "get v1/pods ns1/rc2-pod1",
        "get v1/replicationcontrollers ns1/rc2",
        "delete v1/pods ns1/rc2-pod1",
        "get v1/pods ns1/rc1-pod2",
        "delete v1/pods ns1/rc1-pod2",
        "get v1/pods ns1/rc3-pod1",
        "get v1/replicationcontrollers ns1/rc3",
        "delete v1/pods ns1/rc3-pod1",
    ]),
    Gone(Rc1Pod1), Gone(Rc1Pod2), Gone(Rc2Pod1), Gone(Rc3Pod1),
];

const S22_GRAPH: &[Node] = &[node(Pod, &[RcOwner]), node(RcOwner, &[])];

#[rustfmt::skip]
const S22: &[Step] = &[
    Create(RcOwner, &[]),
    Create(Pod, &[RcOwner]),
    Observe(Add, Pod, &[RcOwner]),
    RemoveOrphan(RcOwner),
    ObserveStored(Add, RcOwner),
    InOrphanQueue(RcOwner, QueueState::Queued),
    // upstream's fake server answers the patch with a bare 409, which client-go reports so
    Fault(Verb::Patch, Pod, StatusReason::Conflict, "the server reported a conflict"),
    OrphanFails(RcOwner, &["failed to orphan dependents of owner", "the server reported a conflict"]),
    // the worker fails the same way: the owner keeps its finalizer and is requeued with backoff
    ProcessOrphan,
    InOrphanQueue(RcOwner, QueueState::Delayed),
    OrphanRequeues(RcOwner, 1),
    StoredFinalizers(RcOwner, &["orphan"]),
    StoredRefs(Pod, &[RcOwner]),
    Calls("two refused PATCHes of the pod", NOTHING.patches(2)),
    // without the conflict, the requeued owner comes back and succeeds, forgetting its backoff
    ClearFaults,
    ProcessOrphan,
    OrphanRequeues(RcOwner, 0),
    StoredRefs(Pod, &[]),
    Gone(RcOwner), // the owner went with its finalizer
    // PATCH the pod, GET the owner and PATCH its finalizer away (the fast path knows the
    // finalizers from the graph, with no GET); the owner's item, queued when only the pod named
    // it, still waits, its node observed since
    Check("orphaned", graph(S22_GRAPH).queued(&[q(RcOwner)]).gets(1).fast_gets(0).patches(2)),
];

// ---------------------------------------------------------------------------------------------
// 25–40: TestConflictingData
// ---------------------------------------------------------------------------------------------

const INVALID_POD2_IN_NS1: InvalidNamespace =
    invalid_ns("[v1/Pod, namespace: ns1, name: podname2, uid: poduid2]", "ns1", "Pod");
const INVALID_POD1_ON_NODE: InvalidNamespace =
    invalid_ns("[v1/Pod, namespace: , name: podname1, uid: poduid1]", "", "Node");

#[rustfmt::skip]
const S25: &[Step] = &[
    Create(Node1, &[]),
    Create(Pod1Ns1, &[Node1]),
    // a namespaced child of a not yet observed cluster-scoped owner: the virtual owner takes the
    // child's namespace
    Observe(Add, Pod1Ns1, &[Node1]),
    Check("observe child", graph(&[node(Pod1Ns1, &[Node1]), virt(Node1WithNamespace)]).queued(&[qv(Node1WithNamespace)])),
    Remember(Node1WithNamespace),
    // the owner exists, but a virtual node keeps polling until a watch observes it
    Process,
    Check("attempt virtual owner", graph(&[node(Pod1Ns1, &[Node1]), virt(Node1WithNamespace)]).delayed(&[Node1WithNamespace]).gets(1)),
    Release,
    // observing the owner fixes its namespace; the old virtual handle is still queued
    Observe(Add, Node1, &[]),
    Check("observe owner", graph(&[node(Pod1Ns1, &[Node1]), node(Node1, &[])]).queued(&[qv(Node1WithNamespace)])),
    Replaced(Node1WithNamespace),
    // the stale virtual handle is dropped without an API call
    Process,
    Check("drop stale handle", graph(&[node(Pod1Ns1, &[Node1]), node(Node1, &[])])),
    Forgotten(Node1WithNamespace),
];

#[rustfmt::skip]
const S26: &[Step] = &[
    Create(Pod1Ns1, &[Pod2Ns1]),
    Create(Pod2Ns2, &[]),
    Observe(Add, Pod1Ns1, &[Pod2Ns2]),
    Check("observe child", graph(&[node(Pod1Ns1, &[Pod2Ns2]), virt(Pod2Ns1)]).queued(&[qv(Pod2Ns1)])),
    // the owner turns out to live in ns2: the child disagrees, gets an event and is queued
    Observe(Add, Pod2Ns2, &[]),
    Check("observe owner", graph(&[node(Pod1Ns1, &[Pod2Ns2]), node(Pod2Ns2, &[])])
        .queued(&[qv(Pod2Ns1), q(Pod1Ns1)]).events(&[INVALID_POD2_IN_NS1])),
    Process,
    Check("drop stale virtual owner", graph(&[node(Pod1Ns1, &[Pod2Ns2]), node(Pod2Ns2, &[])]).queued(&[q(Pod1Ns1)])),
    // GET child, GET pod2 in ns1 (404), DELETE child
    Process,
    Check("delete bad child", graph(&[node(Pod1Ns1, &[Pod2Ns2]), node(Pod2Ns2, &[])]).absent(&[Pod2Ns1]).gets(2).deletes(1)),
    Gone(Pod1Ns1),
    Exists(Pod2Ns2), // the owner in ns2 was left alone
    Observe(Delete, Pod1Ns1, &[]),
    Check("observe child deletion", graph(&[node(Pod2Ns2, &[])]).absent(&[Pod2Ns1])),
];

#[rustfmt::skip]
const S27: &[Step] = &[
    Create(Pod1Ns1, &[Pod2Ns1]),
    Create(Pod2Ns2, &[]),
    Observe(Add, Pod2Ns2, &[]),
    Check("observe owner", graph(&[node(Pod2Ns2, &[])])),
    Observe(Add, Pod1Ns1, &[Pod2Ns1]),
    Check("observe child", graph(&[node(Pod1Ns1, &[Pod2Ns1]), node(Pod2Ns2, &[])])
        .queued(&[q(Pod1Ns1)]).events(&[INVALID_POD2_IN_NS1])),
    Process,
    Check("delete bad child", graph(&[node(Pod1Ns1, &[Pod2Ns1]), node(Pod2Ns2, &[])]).absent(&[Pod2Ns1]).gets(2).deletes(1)),
    Gone(Pod1Ns1),
    Observe(Delete, Pod1Ns1, &[]),
    Check("observe child deletion", graph(&[node(Pod2Ns2, &[])]).absent(&[Pod2Ns1])),
];

#[rustfmt::skip]
const S28: &[Step] = &[
    Create(Node1, &[Pod1Ns1]),
    Create(Pod1Ns1, &[]),
    // a cluster-scoped child creates a virtual owner without a namespace
    Observe(Add, Node1, &[Pod1Ns1]),
    Check("observe child", graph(&[node(Node1, &[Pod1NoNamespace]), virt(Pod1NoNamespace)]).queued(&[qv(Pod1NoNamespace)])),
    // a namespaced virtual owner without a namespace cannot be looked up: dropped, not requeued
    Process,
    Check("attempt virtual owner", graph(&[node(Node1, &[Pod1NoNamespace]), virt(Pod1NoNamespace)])),
    Observe(Add, Pod1Ns1, &[]),
    Check("observe owner", graph(&[node(Node1, &[Pod1NoNamespace]), node(Pod1Ns1, &[])])
        .queued(&[q(Node1)]).events(&[INVALID_POD1_ON_NODE])),
    // GET the node; its namespaced owner is never looked up and the node is never deleted
    Process,
    Check("attempt bad child", graph(&[node(Node1, &[Pod1NoNamespace]), node(Pod1Ns1, &[])]).gets(1)),
    Exists(Node1),
];

#[rustfmt::skip]
const S29: &[Step] = &[
    Create(Node1, &[Pod1Ns1]),
    Create(Pod1Ns1, &[]),
    Observe(Add, Pod1Ns1, &[]),
    Check("observe owner", graph(&[node(Pod1Ns1, &[])])),
    Observe(Add, Node1, &[Pod1Ns1]),
    Check("observe child", graph(&[node(Node1, &[Pod1NoNamespace]), node(Pod1Ns1, &[])])
        .queued(&[q(Node1)]).events(&[INVALID_POD1_ON_NODE])),
    Process,
    Check("attempt bad child", graph(&[node(Node1, &[Pod1NoNamespace]), node(Pod1Ns1, &[])]).gets(1)),
    Exists(Node1),
];

#[rustfmt::skip]
const S30: &[Step] = &[
    // one stored Role, readable at v1 (preferred) and v1beta1
    Create(Role1V1, &[]),
    Create(Pod1Ns1, &[Role1V1beta1]),
    Observe(Add, Pod1Ns1, &[Role1V1beta1]),
    Check("observe child", graph(&[node(Pod1Ns1, &[Role1V1beta1]), virt(Role1V1beta1)]).queued(&[qv(Role1V1beta1)])),
    // GET role at v1beta1: it exists; still unobserved, so it polls with backoff
    Process,
    Check("attempt virtual owner", graph(&[node(Pod1Ns1, &[Role1V1beta1]), virt(Role1V1beta1)]).delayed(&[Role1V1beta1]).gets(1)),
    Release,
    // observed through v1: identity corrected, the v1beta1 child disagrees and is queued
    Observe(Add, Role1V1, &[]),
    Check("observe owner via v1", graph(&[node(Pod1Ns1, &[Role1V1beta1]), node(Role1V1, &[])])
        .queued(&[qv(Role1V1beta1), q(Pod1Ns1)])),
    Process,
    Check("drop stale virtual owner", graph(&[node(Pod1Ns1, &[Role1V1beta1]), node(Role1V1, &[])]).queued(&[q(Pod1Ns1)])),
    // GET child, GET role at v1beta1: solid, nothing to do
    Process,
    Check("verify child", graph(&[node(Pod1Ns1, &[Role1V1beta1]), node(Role1V1, &[])]).gets(2)),
    Remove(Role1V1),
    Observe(Delete, Role1V1, &[]),
    Check("observe owner deletion via v1", graph(&[node(Pod1Ns1, &[Role1V1beta1])]).queued(&[q(Pod1Ns1)]).absent(&[Role1V1])),
    // GET child, GET role at v1beta1 (404), DELETE child. The graph saw the role's UID deleted,
    // so the fast path knows it dangling under any version and does not GET it.
    Process,
    Check("delete child", graph(&[node(Pod1Ns1, &[Role1V1beta1])])
        .absent(&[Role1V1]).absent_upstream(&[Role1V1beta1]).gets(2).fast_gets(1).deletes(1)),
    Gone(Pod1Ns1),
    Observe(Delete, Pod1Ns1, &[]),
    Check("observe child deletion", NOTHING.absent(&[Role1V1]).absent_upstream(&[Role1V1beta1])),
];

const POD1_UNDER_EXTENSIONS: Node = node(Pod1Ns1, &[Deployment1Extensions]);

#[rustfmt::skip]
const S31: &[Step] = &[
    Create(Deployment1Apps, &[]),
    Create(Pod1Ns1, &[Deployment1Extensions]),
    Observe(Add, Pod1Ns1, &[Deployment1Extensions]),
    Check("observe child", graph(&[POD1_UNDER_EXTENSIONS, virt(Deployment1Extensions)]).queued(&[qv(Deployment1Extensions)])),
    // the REST mapper does not know extensions/v1beta1: retried with backoff, no API call
    Process,
    Check("attempt virtual owner", graph(&[POD1_UNDER_EXTENSIONS, virt(Deployment1Extensions)]).delayed(&[Deployment1Extensions])),
    Release,
    Observe(Add, Deployment1Apps, &[]),
    Check("observe owner via apps/v1", graph(&[POD1_UNDER_EXTENSIONS, node(Deployment1Apps, &[])])
        .queued(&[qv(Deployment1Extensions), q(Pod1Ns1)])),
    Process,
    Check("drop stale virtual owner", graph(&[POD1_UNDER_EXTENSIONS, node(Deployment1Apps, &[])]).queued(&[q(Pod1Ns1)])),
    // GET child, then the unmappable ref: retried with backoff
    Process,
    Check("attempt child", graph(&[POD1_UNDER_EXTENSIONS, node(Deployment1Apps, &[])]).delayed(&[Pod1Ns1]).gets(1)),
    Steps(OWNER_DELETED_CHILD_WITH_UNMAPPABLE_REF_KEPT),
];

/// 31 and 32 end alike: the served owner goes, and the child, whose ref cannot be mapped, stays.
#[rustfmt::skip]
const OWNER_DELETED_CHILD_WITH_UNMAPPABLE_REF_KEPT: &[Step] = &[
    Release,
    Remove(Deployment1Apps),
    Observe(Delete, Deployment1Apps, &[]),
    Check("observe owner deletion", graph(&[POD1_UNDER_EXTENSIONS]).queued(&[q(Pod1Ns1)]).absent(&[Deployment1Apps])),
    Process,
    Check("attempt child again", graph(&[POD1_UNDER_EXTENSIONS]).delayed(&[Pod1Ns1]).absent(&[Deployment1Apps]).gets(1)),
    Exists(Pod1Ns1), // a child with an unmappable ref is never deleted
];

#[rustfmt::skip]
const S32: &[Step] = &[
    Create(Deployment1Apps, &[]),
    Create(Pod1Ns1, &[Deployment1Extensions]),
    Observe(Add, Deployment1Apps, &[]),
    Check("observe owner", graph(&[node(Deployment1Apps, &[])])),
    // the ref's coordinates disagree with the observed owner: the child is queued
    Observe(Add, Pod1Ns1, &[Deployment1Extensions]),
    Check("observe child", graph(&[POD1_UNDER_EXTENSIONS, node(Deployment1Apps, &[])]).queued(&[q(Pod1Ns1)])),
    Process,
    Check("attempt child", graph(&[POD1_UNDER_EXTENSIONS, node(Deployment1Apps, &[])]).delayed(&[Pod1Ns1]).gets(1)),
    Steps(OWNER_DELETED_CHILD_WITH_UNMAPPABLE_REF_KEPT),
];

const S33_GRAPH: &[Node] = &[
    POD1_UNDER_EXTENSIONS,
    virt(Deployment1Extensions),
    node(Pod2Ns1, &[Deployment1Apps]),
];

#[rustfmt::skip]
const S33: &[Step] = &[
    Create(Pod1Ns1, &[Deployment1Extensions]),
    Create(Pod2Ns1, &[Deployment1Apps]),
    Observe(Add, Pod1Ns1, &[Deployment1Extensions]),
    Check("observe child of unserved version", graph(&[POD1_UNDER_EXTENSIONS, virt(Deployment1Extensions)])
        .queued(&[qv(Deployment1Extensions)])),
    Observe(Add, Pod2Ns1, &[Deployment1Apps]),
    Check("observe child of served version", graph(S33_GRAPH).queued(&[qv(Deployment1Extensions), q(Pod2Ns1)])),
    Process,
    Check("attempt unmappable virtual owner", graph(S33_GRAPH).queued(&[q(Pod2Ns1)]).delayed(&[Deployment1Extensions])),
    // GET pod2, GET deployment (404), DELETE pod2; the virtual owner comes due behind it
    Process,
    Check("delete child of absent served owner", graph(S33_GRAPH)
        .queued(&[qv(Deployment1Extensions)]).absent(&[Deployment1Apps]).gets(2).deletes(1)),
    Gone(Pod2Ns1),
    Observe(Delete, Pod2Ns1, &[Deployment1Apps]),
    Check("observe child deletion", graph(&[POD1_UNDER_EXTENSIONS, virt(Deployment1Extensions)])
        .queued(&[qv(Deployment1Extensions)]).absent(&[Deployment1Apps])),
    Process,
    Check("virtual owner keeps polling", graph(&[POD1_UNDER_EXTENSIONS, virt(Deployment1Extensions)])
        .delayed(&[Deployment1Extensions]).absent(&[Deployment1Apps])),
    Requeues(Deployment1Extensions, 2), // the backoff keeps growing
    Exists(Pod1Ns1),
];

const S34_APPS: &[Node] = &[
    node(Pod2Ns1, &[Deployment1Apps]),
    virt(Deployment1Apps),
    POD1_UNDER_EXTENSIONS,
];
const S34_EXTENSIONS: &[Node] = &[
    node(Pod2Ns1, &[Deployment1Apps]),
    virt(Deployment1Extensions),
    POD1_UNDER_EXTENSIONS,
];

#[rustfmt::skip]
const S34: &[Step] = &[
    Create(Pod1Ns1, &[Deployment1Extensions]),
    Create(Pod2Ns1, &[Deployment1Apps]),
    Observe(Add, Pod2Ns1, &[Deployment1Apps]),
    Check("observe child of served version", graph(&[node(Pod2Ns1, &[Deployment1Apps]), virt(Deployment1Apps)])
        .queued(&[qv(Deployment1Apps)])),
    Observe(Add, Pod1Ns1, &[Deployment1Extensions]),
    Check("observe child of unserved version", graph(S34_APPS).queued(&[qv(Deployment1Apps), q(Pod1Ns1)])),
    // GET deployment (404): a virtual delete is routed
    Process,
    Check("attempt virtual owner", graph(S34_APPS).queued(&[q(Pod1Ns1)]).pending(&[Deployment1Apps]).gets(1)),
    Process,
    Check("attempt child of unserved version", graph(S34_APPS).delayed(&[Pod1Ns1]).pending(&[Deployment1Apps]).gets(1)),
    Release,
    // the virtual delete: apps/v1 is absent, but pod1 names the UID otherwise, so the virtual
    // node switches to that identity and is re-queued with rate limiting
    Remember(Deployment1Apps),
    ApplyPending(1),
    Check("apply virtual delete", graph(S34_EXTENSIONS)
        .queued(&[q(Pod1Ns1), q(Pod2Ns1)]).delayed(&[Deployment1Extensions]).absent(&[Deployment1Apps])),
    Replaced(Deployment1Apps),
    Process,
    Check("attempt child of unserved version again", graph(S34_EXTENSIONS)
        .queued(&[q(Pod2Ns1), qv(Deployment1Extensions)]).delayed(&[Pod1Ns1]).absent(&[Deployment1Apps]).gets(1)),
    // GET pod2; the absent owner is cached, so no GET of it; DELETE pod2
    Process,
    Check("delete child of absent owner", graph(S34_EXTENSIONS)
        .queued(&[qv(Deployment1Extensions), q(Pod1Ns1)]).absent(&[Deployment1Apps]).gets(1).deletes(1)),
    Gone(Pod2Ns1),
    Process,
    Check("attempt alternate virtual owner", graph(S34_EXTENSIONS)
        .queued(&[q(Pod1Ns1)]).delayed(&[Deployment1Extensions]).absent(&[Deployment1Apps])),
    Release,
    Observe(Delete, Pod2Ns1, &[Deployment1Apps]),
    Check("observe child deletion", graph(&[virt(Deployment1Extensions), POD1_UNDER_EXTENSIONS])
        .queued(&[q(Pod1Ns1), qv(Deployment1Extensions)]).absent(&[Deployment1Apps])),
    Exists(Pod1Ns1),
];

const GOOD_CHILD: Node = node(GoodChildPod, &[Deployment1Apps]);
const BAD_CHILD: Node = node(BadChildPod, &[BadSecretRef]);
const GOOD_AND_BAD_CHILD: &[Node] = &[GOOD_CHILD, BAD_CHILD, virt(BadSecretRef)];

/// 35 and 36 begin alike: bad child, good child, attempt on the virtual Secret owner (404,
/// virtual delete routed), attempt on the good child (solid owner).
#[rustfmt::skip]
const BAD_CHILD_THEN_GOOD_CHILD: &[Step] = &[
    Create(Deployment1Apps, &[]),
    Create(BadChildPod, &[BadSecretRef]),
    Create(GoodChildPod, &[Deployment1Apps]),
    Observe(Add, BadChildPod, &[BadSecretRef]),
    Check("observe bad child", graph(&[BAD_CHILD, virt(BadSecretRef)]).queued(&[qv(BadSecretRef)])),
    Observe(Add, GoodChildPod, &[Deployment1Apps]),
    Check("observe good child", graph(GOOD_AND_BAD_CHILD).queued(&[qv(BadSecretRef), q(GoodChildPod)])),
    // GET secret (404)
    Process,
    Check("attempt virtual secret owner", graph(GOOD_AND_BAD_CHILD).queued(&[q(GoodChildPod)]).pending(&[BadSecretRef]).gets(1)),
    // GET good child, GET deployment (200)
    Process,
    Check("attempt good child", graph(GOOD_AND_BAD_CHILD).pending(&[BadSecretRef]).gets(2)),
];

const S35_VIRTUAL_PARENT: &[Node] = &[GOOD_CHILD, BAD_CHILD, virt(Deployment1Apps)];
const GOOD_CHILD_AND_PARENT: &[Node] = &[GOOD_CHILD, node(Deployment1Apps, &[])];

#[rustfmt::skip]
const S35: &[Step] = &[
    Steps(BAD_CHILD_THEN_GOOD_CHILD),
    // the Secret coordinates are absent; the good child names the UID as a Deployment
    ApplyPending(1),
    Check("apply virtual delete", graph(S35_VIRTUAL_PARENT)
        .queued(&[q(BadChildPod)]).delayed(&[Deployment1Apps]).absent(&[BadSecretRef])),
    // GET bad child; the Secret owner is cached absent; DELETE bad child
    Process,
    Check("delete bad child", graph(S35_VIRTUAL_PARENT)
        .queued(&[qv(Deployment1Apps)]).absent(&[BadSecretRef]).gets(1).deletes(1)),
    Gone(BadChildPod),
    // GET deployment (200): exists, still unobserved, so it polls
    Process,
    Check("attempt alternate virtual owner", graph(S35_VIRTUAL_PARENT).delayed(&[Deployment1Apps]).absent(&[BadSecretRef]).gets(1)),
    Release,
    Observe(Add, Deployment1Apps, &[]),
    Check("observe good parent", graph(&[GOOD_CHILD, BAD_CHILD, node(Deployment1Apps, &[])])
        .queued(&[q(Deployment1Apps)]).absent(&[BadSecretRef])),
    Observe(Delete, BadChildPod, &[BadSecretRef]),
    Check("observe bad child deletion", graph(GOOD_CHILD_AND_PARENT).queued(&[q(Deployment1Apps)]).absent(&[BadSecretRef])),
    Process,
    Check("attempt good parent", graph(GOOD_CHILD_AND_PARENT).absent(&[BadSecretRef]).gets(1)),
    Exists(GoodChildPod),
    Exists(Deployment1Apps),
];

const S36_GRAPH: &[Node] = &[GOOD_CHILD, BAD_CHILD, node(Deployment1Apps, &[])];

#[rustfmt::skip]
const S36: &[Step] = &[
    Steps(BAD_CHILD_THEN_GOOD_CHILD),
    // the good parent's add event overtakes the pending virtual delete
    Observe(Add, Deployment1Apps, &[]),
    Check("observe good parent", graph(S36_GRAPH).queued(&[q(BadChildPod)]).pending(&[BadSecretRef])),
    // an observed node is never removed by a virtual delete under other coordinates; the
    // dependents that agree with those coordinates are queued and the coordinates cached
    ApplyPending(1),
    Check("apply virtual delete", graph(S36_GRAPH).queued(&[q(BadChildPod)]).absent(&[BadSecretRef])),
    Process,
    Check("delete bad child", graph(S36_GRAPH).absent(&[BadSecretRef]).gets(1).deletes(1)),
    Gone(BadChildPod),
    Observe(Delete, BadChildPod, &[BadSecretRef]),
    Check("observe bad child deletion", graph(GOOD_CHILD_AND_PARENT).absent(&[BadSecretRef])),
    Exists(GoodChildPod),
];

const S37_VIRTUAL_PARENT: &[Node] = &[GOOD_CHILD, virt(Deployment1Apps), BAD_CHILD];

#[rustfmt::skip]
const S37: &[Step] = &[
    Create(Deployment1Apps, &[]),
    Create(BadChildPod, &[BadSecretRef]),
    Create(GoodChildPod, &[Deployment1Apps]),
    Observe(Add, GoodChildPod, &[Deployment1Apps]),
    Check("observe good child", graph(&[GOOD_CHILD, virt(Deployment1Apps)]).queued(&[qv(Deployment1Apps)])),
    Observe(Add, BadChildPod, &[BadSecretRef]),
    Check("observe bad child", graph(S37_VIRTUAL_PARENT).queued(&[qv(Deployment1Apps), q(BadChildPod)])),
    // GET deployment (200): exists but unobserved, polls
    Process,
    Check("attempt virtual parent", graph(S37_VIRTUAL_PARENT).queued(&[q(BadChildPod)]).delayed(&[Deployment1Apps]).gets(1)),
    // GET bad child, GET secret (404), DELETE bad child
    Process,
    Check("delete bad child", graph(S37_VIRTUAL_PARENT)
        .queued(&[qv(Deployment1Apps)]).absent(&[BadSecretRef]).gets(2).deletes(1)),
    Gone(BadChildPod),
    // same coordinates: the queued handle itself becomes observed
    Observe(Add, Deployment1Apps, &[]),
    Check("observe good parent", graph(&[GOOD_CHILD, node(Deployment1Apps, &[]), BAD_CHILD])
        .queued(&[q(Deployment1Apps)]).absent(&[BadSecretRef])),
    Observe(Delete, BadChildPod, &[BadSecretRef]),
    Check("observe bad child deletion", graph(GOOD_CHILD_AND_PARENT).queued(&[q(Deployment1Apps)]).absent(&[BadSecretRef])),
    Process,
    Check("attempt good parent", graph(GOOD_CHILD_AND_PARENT).absent(&[BadSecretRef]).gets(1)),
    Exists(GoodChildPod),
];

const BAD_NODE: Node = node(Node1, &[Pod1NoNamespace]);
const GOOD_POD2: Node = node(Pod2Ns1, &[Pod1Ns1]);
const NAMESPACELESS_PARENT: &[Node] = &[BAD_NODE, GOOD_POD2, virt(Pod1NoNamespace)];

/// 38 and 39 begin alike: the cluster-scoped bad child, then the namespaced good child, then the
/// virtual parent without a namespace dropped.
#[rustfmt::skip]
const BAD_NODE_THEN_GOOD_POD: &[Step] = &[
    Observe(Add, Node1, &[Pod1NoNamespace]),
    Check("observe bad child", graph(&[BAD_NODE, virt(Pod1NoNamespace)]).queued(&[qv(Pod1NoNamespace)])),
    // issue #98040: a namespaced child of a virtual owner without a namespace is suspicious
    Observe(Add, Pod2Ns1, &[Pod1Ns1]),
    Check("observe good child", graph(NAMESPACELESS_PARENT).queued(&[qv(Pod1NoNamespace), q(Pod2Ns1)])),
    Process,
    Check("attempt virtual parent without namespace", graph(NAMESPACELESS_PARENT).queued(&[q(Pod2Ns1)])),
];

#[rustfmt::skip]
const S38: &[Step] = &[
    Create(Pod2Ns1, &[Pod1Ns1]),
    Create(Node1, &[Pod1NoNamespace]),
    Steps(BAD_NODE_THEN_GOOD_POD),
    // GET pod2, GET pod1 in ns1 (404), DELETE pod2
    Process,
    Check("delete good child", graph(NAMESPACELESS_PARENT).absent(&[Pod1Ns1]).gets(2).deletes(1)),
    Gone(Pod2Ns1),
    Observe(Delete, Pod2Ns1, &[Pod1Ns1]),
    Check("observe good child deletion", graph(&[BAD_NODE, virt(Pod1NoNamespace)]).absent(&[Pod1Ns1])),
    Exists(Node1),
];

const S39_OBSERVED_PARENT: &[Node] = &[BAD_NODE, GOOD_POD2, node(Pod1Ns1, &[])];

#[rustfmt::skip]
const S39: &[Step] = &[
    Create(Pod1Ns1, &[]),
    Create(Pod2Ns1, &[Pod1Ns1]),
    Create(Node1, &[Pod1NoNamespace]),
    Steps(BAD_NODE_THEN_GOOD_POD),
    // GET pod2, GET pod1 in ns1 (200): solid
    Process,
    Check("verify good child", graph(NAMESPACELESS_PARENT).gets(2)),
    Observe(Add, Pod1Ns1, &[]),
    Check("observe parent late", graph(S39_OBSERVED_PARENT).queued(&[q(Node1)]).events(&[INVALID_POD1_ON_NODE])),
    // GET node; never deleted, not retried
    Process,
    Check("attempt bad child", graph(S39_OBSERVED_PARENT).gets(1)),
    Exists(Node1),
    Exists(Pod2Ns1),
];

const S40_NAMESPACED: &[Node] = &[GOOD_POD2, BAD_NODE, virt(Pod1Ns1)];
const S40_NAMESPACELESS: &[Node] = &[GOOD_POD2, BAD_NODE, virt(Pod1NoNamespace)];

#[rustfmt::skip]
const S40: &[Step] = &[
    Create(Pod2Ns1, &[Pod1Ns1]),
    Create(Node1, &[Pod1NoNamespace]),
    Observe(Add, Pod2Ns1, &[Pod1Ns1]),
    Check("observe good child", graph(&[GOOD_POD2, virt(Pod1Ns1)]).queued(&[qv(Pod1Ns1)])),
    Observe(Add, Node1, &[Pod1NoNamespace]),
    Check("observe bad child", graph(S40_NAMESPACED).queued(&[qv(Pod1Ns1), q(Node1)])),
    // GET pod1 in ns1 (404)
    Process,
    Check("attempt virtual parent", graph(S40_NAMESPACED).queued(&[q(Node1)]).pending(&[Pod1Ns1]).gets(1)),
    // GET node; its namespaced owner is never looked up
    Process,
    Check("attempt bad child", graph(S40_NAMESPACED).pending(&[Pod1Ns1]).gets(1)),
    // pod1@ns1 is absent; the node child names it without a namespace, so the virtual node
    // switches to that form
    ApplyPending(1),
    Check("apply virtual delete", graph(S40_NAMESPACELESS)
        .queued(&[q(Pod2Ns1)]).delayed(&[Pod1NoNamespace]).absent(&[Pod1Ns1])),
    // GET pod2; pod1@ns1 is cached absent; DELETE pod2
    Process,
    Check("delete good child", graph(S40_NAMESPACELESS)
        .queued(&[qv(Pod1NoNamespace)]).absent(&[Pod1Ns1]).gets(1).deletes(1)),
    Gone(Pod2Ns1),
    Observe(Delete, Pod2Ns1, &[Pod1Ns1]),
    Check("observe good child deletion", graph(&[BAD_NODE, virt(Pod1NoNamespace)])
        .queued(&[qv(Pod1NoNamespace)]).absent(&[Pod1Ns1])),
    // steady state: the bad cluster-scoped child and its virtual parent, with no retries
    Process,
    Check("attempt virtual parent without namespace", graph(&[BAD_NODE, virt(Pod1NoNamespace)]).absent(&[Pod1Ns1])),
    Exists(Node1),
];

// ---------------------------------------------------------------------------------------------
// 20: the patch that drops dangling references
// ---------------------------------------------------------------------------------------------

/// Upstream's `TestDeleteOwnerRefPatch` checks the body that removes refs 2 and 3 and keeps 1;
/// here the worker sends it: a pod owned by a live ConfigMap and two RCs that never existed
/// keeps only the ConfigMap's ref (the exact body is `collector::patch`'s unit test).
#[rustfmt::skip]
const S20: &[Step] = &[
    Create(CmOwner, &[]),
    Create(Pod, &[CmOwner, Rc, RcGone2]),
    Observe(Add, CmOwner, &[]),
    Observe(Add, Pod, &[CmOwner, Rc, RcGone2]),
    // each absent RC is a virtual node: attempted (404), removed, cached absent; the pod queued
    Process,
    Check("attempt the first rc", graph(&[node(CmOwner, &[]), node(Pod, &[CmOwner, Rc, RcGone2]), virt(Rc), virt(RcGone2)])
        .queued(&[qv(RcGone2)]).pending(&[Rc]).gets(1)),
    ApplyPending(1),
    Process,
    Check("attempt the second rc", graph(&[node(CmOwner, &[]), node(Pod, &[CmOwner, Rc, RcGone2]), virt(RcGone2)])
        .queued(&[q(Pod)]).pending(&[RcGone2]).absent(&[Rc]).gets(1)),
    ApplyPending(1),
    // the pod has a solid owner: one strategic merge patch drops both dangling refs (upstream
    // GETs the pod and its live owner; the fast path knows the owner solid from the graph)
    Process,
    Check("strip the dangling refs", graph(&[node(CmOwner, &[]), node(Pod, &[CmOwner, Rc, RcGone2])])
        .absent(&[Rc, RcGone2]).gets(2).fast_gets(1).patches(1)),
    StoredRefs(Pod, &[CmOwner]),
    Exists(Pod),
];

// ---------------------------------------------------------------------------------------------
// 21: the patch that unblocks an owner
// ---------------------------------------------------------------------------------------------

/// Upstream's `TestUnblockOwnerReference` checks the body that sets blockOwnerDeletion false on
/// blocking refs and leaves the others; here the worker sends it (§4.2 step 7, the cycle
/// heuristic): a child with no solid owner, an owner waiting for it, and a dependent that is
/// itself deleting its dependents, is unblocked and then deleted in the foreground.
#[rustfmt::skip]
const S21: &[Step] = &[
    Create(Owner, &[]),
    CreateRefs(Child, CHILD_REFS),
    CreateRefs(GrandChild, &[blocking(Child)]),
    RemoveForeground(Owner),
    RemoveForeground(GrandChild),
    ObserveStored(Add, Owner),
    ObserveStored(Add, Child),
    ObserveStored(Add, GrandChild),
    DeletingDependents(GrandChild),
    // the owner waits for its blocking child, and queues it behind the virtual RCs and the
    // grandchild
    Process,
    Check("the owner waits", graph(FAMILY).queued(&[qv(Rc), qv(RcGone2), q(GrandChild), q(Child)]).gets(1).fast_gets(0)),
    // the RCs never existed
    Process, ApplyPending(1),
    Process, ApplyPending(1),
    // the grandchild has no dependent: its foregroundDeletion goes, and so does it
    Process,
    Gone(GrandChild),
    // the child: no solid owner, a waiting one, and a dependent deleting its dependents (as
    // far as the graph knows): it unblocks its refs, then is deleted in the foreground. The
    // DELETE at the version read before the patch conflicts; upstream requeues the child, the
    // fast path reads it again and deletes it, so only the patch's result is common to both.
    Process,
    StoredRefFlags(Child, &[unblocking(Owner), unblocking(Rc), to(RcGone2)]),
    Exists(Child),
];

const CHILD_REFS: &[Ref] = &[blocking(Owner), unblocking(Rc), to(RcGone2)];

const FAMILY: &[Node] = &[
    node(Owner, &[]),
    node_refs(Child, CHILD_REFS),
    virt(Rc),
    virt(RcGone2),
    node_refs(GrandChild, &[blocking(Child)]),
];

// ---------------------------------------------------------------------------------------------
// 41, 58: a cluster that changes under the GC between its GET and its DELETE
// ---------------------------------------------------------------------------------------------

/// A pod whose only owner, an RC, never existed; observed, with its virtual owner attempted
/// (404) and removed by the resulting virtual delete, which caches the RC as absent and queues
/// the pod.
#[rustfmt::skip]
const ORPHAN_POD_QUEUED: &[Step] = &[
    Create(Pod, &[Rc]),
    Observe(Add, Pod, &[Rc]),
    Process,
    Check("attempt virtual rc", graph(&[node(Pod, &[Rc]), virt(Rc)]).pending(&[Rc]).gets(1)),
    ApplyPending(1),
    Check("apply virtual delete of rc", graph(&[node(Pod, &[Rc])]).queued(&[q(Pod)]).absent(&[Rc])),
];

#[rustfmt::skip]
const S41: &[Step] = &[
    // Unrelated change (a label): the DELETE at the GET's resourceVersion conflicts, a fresh GET
    // shows the same UID and ownerReferences, and the DELETE is retried with the UID alone.
    Steps(ORPHAN_POD_QUEUED),
    RaceEdit(Pod, Label),
    Check("delete after unrelated change", graph(&[node(Pod, &[Rc])]).absent(&[Rc]).gets(2).deletes(2)),
    Preconditions(Pod, &[Pre::UidAndVersion, Pre::UidAlone]),
    Gone(Pod), // deleted on the retry
    Requeues(Pod, 0),
    // Owner change: the pod gains a live owner between the GC's GET and its DELETE. The DELETE
    // conflicts, the fresh GET shows other ownerReferences, and the item is requeued instead.
    Restart,
    Create(CmOwner, &[]),
    Steps(ORPHAN_POD_QUEUED),
    Observe(Add, CmOwner, &[]),
    RaceEdit(Pod, AddRef(CmOwner)),
    Check("conflict after owner change", graph(&[node(Pod, &[Rc]), node(CmOwner, &[])])
        .delayed(&[Pod]).absent(&[Rc]).gets(2).deletes(1)),
    Exists(Pod), // a conflicting DELETE is not retried when owners changed
    // The watch delivers the change; the next attempt reclassifies and keeps the pod, dropping
    // only the dangling ref: GET pod, GET live owner (the RC is cached absent; the fast path
    // knows the owner solid from the graph), PATCH away the dangling ref.
    Observe(Update, Pod, &[Rc, CmOwner]),
    Process,
    Calls("reclassify", NOTHING.gets(2).fast_gets(1).patches(1)),
    StoredRefs(Pod, &[CmOwner]),
];

#[rustfmt::skip]
const S58: &[Step] = &[
    Steps(ORPHAN_POD_QUEUED),
    // someone else deletes the pod after the GC's GET
    RaceDelete(Pod),
    Check("DELETE answers 404", graph(&[node(Pod, &[Rc])]).pending(&[Pod]).absent(&[Rc]).gets(1).deletes(1)),
    Requeues(Pod, 0), // forgotten, not retried
    // the builder removes the observed node whose identity the virtual delete names
    ApplyPending(1),
    Check("apply virtual delete", NOTHING.absent(&[Rc])),
];

// ---------------------------------------------------------------------------------------------
// 56, 57: our own additions
// ---------------------------------------------------------------------------------------------

#[rustfmt::skip]
const S56: &[Step] = &[
    // Widgets are served at v1 only now; the monitor used to see them at v1beta1.
    Create(Cm, &[]),
    Create(WNew, &[Cm]),
    Create(Pod, &[WOld]),
    Create(W2New, &[Cm]),
    Observe(Add, Cm, &[]), Observe(Add, WOld, &[Cm]), Observe(Add, Pod, &[WOld]), Observe(Add, W2Old, &[Cm]),
    Remember(WOld),
    Requeue(WOld), // the old handle waits in the queue from before the change
    // the preferred version changed: the new monitor's list delivers example.com/v1; the node is
    // replaced, not edited in place, in the owner's dependents too, and keeps its own
    Observe(Add, WNew, &[Cm]),
    Replaced(WOld),
    Dependents(node(Cm, &[]), &[WNew, W2Old]),
    Dependents(node(WNew, &[Cm]), &[Pod]),
    // a version change and an owner removal in one update: the owner drops the new handle
    Observe(Update, W2New, &[]),
    Dependents(node(Cm, &[]), &[WNew]),
    Dependents(node(W2New, &[]), &[]),
    // the old handle is processed under the graph's apiVersion: GET widget at v1 and its owner
    // (which the fast path knows solid from the graph), both fine, so it is forgotten rather than
    // retried on a mapping error
    Process,
    Check("attempt old handle", graph(&[node(Cm, &[]), node(WNew, &[Cm]), node(Pod, &[WOld]), node(W2New, &[])])
        .gets(2).fast_gets(1)),
    Forgotten(WOld),
    Exists(WNew),
];

const CONTROLLER: Ref = Ref {
    controller: Some(true),
    ..blocking(Owner)
};

#[rustfmt::skip]
const S57: &[Step] = &[
    // the owners a child's update unblocks are queued
    Observe(Add, Owner, &[]),
    Observe(Add, Other, &[]),
    Observe(Add, Child, &[]),
    ObserveRefs(Update, Child, &[blocking(Owner)]), Queued("a new blocking ref", &[]),
    ObserveRefs(Update, Child, &[unblocking(Owner)]), Queued("true → false requeues the owner", &[Owner]),
    ObserveRefs(Update, Child, &[blocking(Owner)]), Queued("false → true blocks, it does not unblock", &[]),
    ObserveRefs(Update, Child, &[to(Owner)]), Queued("true → nil requeues the owner", &[Owner]),
    ObserveRefs(Update, Child, &[blocking(Owner)]), Queued("nil → true", &[]),
    ObserveRefs(Update, Child, &[CONTROLLER]), Queued("other fields changing on a blocking ref unblock nothing", &[]),
    ObserveRefs(Update, Child, &[to(Other)]), Queued("removing a blocking ref requeues its owner", &[Owner]),
    ObserveRefs(Update, Child, &[]), Queued("removing a non-blocking ref requeues nothing", &[]),
    // End to end: a foreground-deleted owner waits for a blocking dependent, which then drops
    // blockOwnerDeletion; the owner comes back and finishes.
    Restart,
    Create(Owner, &[]),
    CreateRefs(Child, &[blocking(Owner)]),
    RemoveForeground(Owner),
    ObserveStored(Add, Owner),
    ObserveStored(Add, Child),
    DeletingDependents(Owner),
    // the owner finds a blocking dependent: it queues the dependent and is not requeued itself
    Process,
    InQueue(Owner, QueueState::Absent),
    Queued("the blocking dependent is queued", &[Child]),
    // the dependent stops blocking before a worker gets to it
    Edit(Child, Change::Refs(&[unblocking(Owner)])),
    ObserveStored(Update, Child),
    InQueue(Owner, QueueState::Queued),
    // nothing blocks now: GET, remove foregroundDeletion (GET, PATCH), and the owner is gone;
    // the fast path patches at the version the graph observed, with no GET
    Recount,
    Process,
    Calls("finish the foreground deletion", NOTHING.gets(2).fast_gets(0).patches(1)),
    Gone(Owner), // the owner finished its foreground deletion
    Exists(Child), // the unblocked dependent stays
];

// ---------------------------------------------------------------------------------------------
// 42: getAlternateOwnerIdentity
// ---------------------------------------------------------------------------------------------

/// (apiVersion, kind, namespace, name, uid).
type Coords = [&'static str; 5];

const NS1_CHILD1: Coords = ["v1", "Child", "ns1", "child1", "childuid11"];
const NS1_CHILD2: Coords = ["v1", "Child", "ns1", "child2", "childuid12"];
const NS2_CHILD1: Coords = ["v1", "Child", "ns2", "child1", "childuid21"];
const CLUSTER_CHILD1: Coords = ["v1", "Child", "", "child1", "childuidc1"];

const NS_PARENT_NS1: Coords = ["v1", "NSParent", "ns1", "parentname", "parentuid"];
const NS_PARENT_NS2: Coords = ["v1", "NSParent", "ns2", "parentname", "parentuid"];
const NS_PARENT_VERSION: Coords = ["xx", "NSParent", "ns1", "parentname", "parentuid"];
const NS_PARENT_KIND: Coords = ["v1", "xxxxxxxx", "ns1", "parentname", "parentuid"];
const NS_PARENT_NAME: Coords = ["v1", "NSParent", "ns1", "xxxxxxxxxx", "parentuid"];

const CLUSTER_PARENT: Coords = ["v1", "ClusterParent", "", "parentname", "parentuid"];
const CLUSTER_PARENT_VERSION: Coords = ["xx", "ClusterParent", "", "parentname", "parentuid"];
const CLUSTER_PARENT_KIND: Coords = ["v1", "xxxxxxxxxxxxx", "", "parentname", "parentuid"];
const CLUSTER_PARENT_NAME: Coords = ["v1", "ClusterParent", "", "xxxxxxxxxx", "parentuid"];
const CLUSTER_PARENT_NS1_VERSION: Coords = ["xx", "ClusterParent", "ns1", "parentname", "parentuid"];
const CLUSTER_PARENT_NS1_KIND: Coords = ["v1", "xxxxxxxxxxxxx", "ns1", "parentname", "parentuid"];

const fn versioned(version: &'static str, namespace: &'static str) -> Coords {
    [version, "kind", namespace, "name", "uid"]
}
const ORDERED_NS: [Coords; 5] = [
    versioned("v1", "ns1"),
    versioned("v2", "ns1"),
    versioned("v3", "ns1"),
    versioned("v4", "ns1"),
    versioned("v5", "ns1"),
];
const ORDERED_CLUSTER: [Coords; 5] = [
    versioned("v1", ""),
    versioned("v2", ""),
    versioned("v3", ""),
    versioned("v4", ""),
    versioned("v5", ""),
];
const UNRELATED: Coords = ["v1", "Parent", "ns1", "name", "anotheruid"];

/// (case, dependents with their owners, the absent owner, the alternate identity expected).
type Case = (
    &'static str,
    &'static [(Coords, &'static [Coords])],
    Coords,
    Option<Coords>,
);

#[rustfmt::skip]
const S42: &[Case] = &[
    ("namespaced alternate version", &[(NS1_CHILD1, &[NS_PARENT_NS1]), (NS1_CHILD2, &[NS_PARENT_VERSION])],
        NS_PARENT_NS1, Some(NS_PARENT_VERSION)),
    ("namespaced alternate kind", &[(NS1_CHILD1, &[NS_PARENT_NS1]), (NS1_CHILD2, &[NS_PARENT_KIND])],
        NS_PARENT_NS1, Some(NS_PARENT_KIND)),
    ("namespaced alternate namespace", &[(NS1_CHILD1, &[NS_PARENT_NS1]), (NS2_CHILD1, &[NS_PARENT_NS2])],
        NS_PARENT_NS1, Some(NS_PARENT_NS2)),
    ("namespaced alternate name", &[(NS1_CHILD1, &[NS_PARENT_NS1]), (NS1_CHILD1, &[NS_PARENT_NAME])],
        NS_PARENT_NS1, Some(NS_PARENT_NAME)),
    // the new version is not known to be cluster-scoped: it takes the dependent's namespace
    ("cluster alternate version", &[(NS1_CHILD1, &[CLUSTER_PARENT]), (NS1_CHILD2, &[CLUSTER_PARENT_VERSION])],
        CLUSTER_PARENT, Some(CLUSTER_PARENT_NS1_VERSION)),
    ("cluster alternate kind", &[(NS1_CHILD1, &[CLUSTER_PARENT]), (NS1_CHILD2, &[CLUSTER_PARENT_KIND])],
        CLUSTER_PARENT, Some(CLUSTER_PARENT_NS1_KIND)),
    // apiVersion/kind proved cluster-scoped: namespaces of dependents do not matter
    ("cluster alternate namespace", &[(NS1_CHILD1, &[CLUSTER_PARENT]), (NS2_CHILD1, &[CLUSTER_PARENT])],
        CLUSTER_PARENT, None),
    // same apiVersion/kind as the cluster-scoped absent owner: the namespace is dropped
    ("cluster alternate name", &[(NS1_CHILD1, &[CLUSTER_PARENT]), (NS1_CHILD1, &[CLUSTER_PARENT_NAME])],
        CLUSTER_PARENT, Some(CLUSTER_PARENT_NAME)),
    ("namespaced refs wrap around to the first when absent sorts last", &[(NS1_CHILD1, &ORDERED_NS)],
        ORDERED_NS[4], Some(ORDERED_NS[0])),
    ("namespaced refs give the next after absent", &[(NS1_CHILD1, &ORDERED_NS)],
        ORDERED_NS[3], Some(ORDERED_NS[4])),
    ("cluster refs wrap around to the first when absent sorts last", &[(CLUSTER_CHILD1, &ORDERED_CLUSTER)],
        ORDERED_CLUSTER[4], Some(ORDERED_CLUSTER[0])),
    ("cluster refs give the next after absent", &[(CLUSTER_CHILD1, &ORDERED_CLUSTER)],
        ORDERED_CLUSTER[3], Some(ORDERED_CLUSTER[4])),
    ("unrelated UIDs are ignored", &[(NS1_CHILD1, &[CLUSTER_PARENT, UNRELATED])],
        CLUSTER_PARENT, None),
    ("exact matches are ignored", &[(NS1_CHILD1, &[CLUSTER_PARENT, CLUSTER_PARENT])],
        CLUSTER_PARENT, None),
    ("duplicates collapse", &[(CLUSTER_CHILD1, &[CLUSTER_PARENT, CLUSTER_PARENT_KIND, CLUSTER_PARENT_KIND])],
        CLUSTER_PARENT, Some(CLUSTER_PARENT_KIND)),
];

/// A pure function of its arguments: no cluster, mode or partitions to vary.
#[test]
fn s42_alternate_owner_identity_cases() {
    assert_eq!(S42.len(), 15);
    for (name, deps, absent, expected) in S42 {
        let deps: Vec<Handle> = deps
            .iter()
            .map(|(child, owners)| {
                let refs: OwnerRefs = owners
                    .iter()
                    .map(|o| {
                        let o = identity(*o);
                        OwnerRef::new(
                            TypeMeta::new(o.api_version().clone(), o.kind().clone()),
                            o.name.to_name(),
                            o.uid,
                            None,
                            None,
                        )
                    })
                    .collect();
                Handle::new(identity(*child), refs, false)
            })
            .collect();
        let got = alternate_owner_identity(&deps, &identity(*absent));
        assert_eq!(got, expected.map(identity), "{name}");
    }
}
