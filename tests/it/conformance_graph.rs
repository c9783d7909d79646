//! Conformance tests for the graph builder and the attemptToDelete worker, driven one event and
//! one queue item at a time (gc-spec §10 items 17, 25–42 and 56–58).
//!
//! Each TestConflictingData scenario (25–40) is a list of steps: a watch event applied to the
//! builder, one attemptToDelete worker step, or a virtual delete applied from the routed events.
//! After each step the whole state is checked: the graph (identities, virtual flags, owners), the
//! graph invariants, the immediately queued attemptToDelete items in order, the rate-limited ones,
//! the routed virtual deletes not yet applied, absentOwnerCache, recorded events and the API calls
//! made since the previous check.
//!
//! Every scenario runs twice (see [`Mode`]): with `verify_with_get`, where the calls are
//! upstream's exactly, and with the default fast path, where the graph, queues, events and
//! outcome must be the same and only GETs the graph makes needless may go.
//!
//! Upstream's test queue treats a rate-limited re-add as an immediate one. Here a rate-limited
//! re-add really waits, so a check lists it as delayed; the next step then lets the paused clock
//! run until it is due, which puts it at the back of the queue exactly where upstream expects it.

use crate::support;

use kube_gc::api::{DeleteOptions, EventRecord, Gvr, ObjectMeta, OwnerReference, PartialObjectMeta, PropagationPolicy};
use kube_gc::builder::references::alternate_owner_identity;
use kube_gc::collector::CollectorConfig;
use kube_gc::event::{EventType, GraphEvent};
use kube_gc::graph::{Graph, Handle, Identity, OwnerRef, Sym, TypeMeta, Uid};
use kube_gc::queue::QueueState;
use kube_gc::sim::{ApiCalls, SimCluster, TypeDef};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use support::{configmaps, deployments, pods, Recorder, Rig};

// ---------------------------------------------------------------------------------------------
// Scenario kit
// ---------------------------------------------------------------------------------------------

/// The two ways the workers may run: every scenario runs in both, and checks the same graph,
/// queues and outcome in each; only the number of GETs may differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `verify_with_get`: upstream's call pattern.
    Upstream,
    /// The default: the workers act on what the graph observed.
    FastPath,
}

impl Mode {
    /// `upstream` calls in upstream's pattern, `fast_path` in the default one.
    fn calls(self, upstream: u64, fast_path: u64) -> u64 {
        match self {
            Mode::Upstream => upstream,
            Mode::FastPath => fast_path,
        }
    }
}

/// One `#[tokio::test]` per mode for each scenario function named: `<name>::upstream` and
/// `<name>::fast_path`.
macro_rules! in_both_modes {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(start_paused = true)]
            async fn upstream() {
                super::$name(super::Mode::Upstream).await;
            }

            #[tokio::test(start_paused = true)]
            async fn fast_path() {
                super::$name(super::Mode::FastPath).await;
            }
        }
    )*};
}

in_both_modes!(
    s25_good_child_with_cluster_scoped_owner_drops_stale_virtual_handle,
    s26_bad_child_with_owner_in_other_namespace_child_first_is_deleted,
    s27_bad_child_with_owner_in_other_namespace_owner_first_is_deleted,
    s28_cluster_scoped_child_with_namespaced_owner_child_first_is_kept,
    s29_cluster_scoped_child_with_namespaced_owner_owner_first_is_kept,
    s30_child_of_owner_seen_through_non_preferred_version_waits_for_real_owner,
    s31_child_of_owner_with_unserved_version_child_first_is_never_deleted,
    s32_child_of_owner_with_unserved_version_owner_first_is_never_deleted,
    s33_absent_owner_with_unserved_version_seen_first_keeps_polling,
    s34_absent_owner_with_served_version_seen_first_switches_to_alternate_identity,
    s35_bad_child_wrong_kind_then_virtual_delete_then_good_parent,
    s36_bad_child_wrong_kind_good_parent_observed_before_virtual_delete,
    s37_good_child_then_bad_child_then_good_parent,
    s38_cluster_scoped_bad_child_and_namespaced_good_child_with_missing_parent,
    s39_cluster_scoped_bad_child_and_late_observed_parent_records_event,
    s40_namespaced_good_child_first_replaces_virtual_parent_with_cluster_form,
    s41_conflict_between_get_and_delete_retries_or_requeues,
    s56_preferred_version_change_replaces_node_and_fixes_owner_dependents,
    s57_unblocking_a_dependent_requeues_the_waiting_owner,
    s58_delete_answering_not_found_routes_virtual_delete,
);

fn nodes() -> Gvr {
    Gvr::new("", "v1", "nodes")
}

fn roles() -> Gvr {
    Gvr::new("rbac.authorization.k8s.io", "v1", "roles")
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

/// Metadata of the object `id`, owned by `owners`.
fn meta_of(id: &Identity, owners: &[&Identity]) -> ObjectMeta {
    ObjectMeta {
        name: id.name.to_string(),
        namespace: id.namespace.to_string(),
        uid: id.uid.to_string(),
        owner_references: owners.iter().map(|o| wire_ref(o)).collect(),
        ..Default::default()
    }
}

/// What a check expects of one graph node.
struct NodeSpec {
    id: Identity,
    is_virtual: bool,
    owners: Vec<Identity>,
}

/// An observed node with these owner coordinates.
fn node(id: &Identity, owners: &[&Identity]) -> NodeSpec {
    NodeSpec {
        id: id.clone(),
        is_virtual: false,
        owners: owners.iter().map(|o| (*o).clone()).collect(),
    }
}

/// A virtual node (never has owners).
fn virtual_node(id: &Identity) -> NodeSpec {
    NodeSpec {
        id: id.clone(),
        is_virtual: true,
        owners: Vec::new(),
    }
}

/// An observed handle waiting in attemptToDelete.
fn queued(id: &Identity) -> (Identity, bool) {
    (id.clone(), false)
}

/// A virtual handle waiting in attemptToDelete.
fn queued_virtual(id: &Identity) -> (Identity, bool) {
    (id.clone(), true)
}

/// Everything one check compares. Unset fields expect nothing: an empty graph, empty queues, no
/// cache entries, no events, no API calls since the previous check.
#[derive(Default)]
struct State {
    /// The whole graph, in any order.
    graph: Vec<NodeSpec>,
    /// Immediately queued attemptToDelete handles, in queue order: (identity, virtual).
    queued: Vec<(Identity, bool)>,
    /// Rate-limited attemptToDelete items waiting for their delay, by the graph's current handle.
    delayed: Vec<Identity>,
    /// Routed virtual deletes not applied yet, in order.
    pending: Vec<Identity>,
    /// The whole absentOwnerCache.
    absent: Vec<Identity>,
    /// Events recorded since the previous check, as `type reason message involvedObject{..}`.
    events: Vec<String>,
    /// GETs since the previous check.
    gets: u64,
    /// DELETEs since the previous check.
    deletes: u64,
}

/// A rig plus the bookkeeping of upstream's step-by-step tests.
struct Scenario {
    rig: Rig,
    /// Virtual deletes the workers routed and no step has applied yet (upstream's graphChanges).
    pending: Vec<GraphEvent>,
    /// API calls counted at the previous check.
    calls: ApiCalls,
}

impl Scenario {
    /// A scenario over the built-in types, with rbac Role also served at v1beta1 (v1 preferred)
    /// and extensions/v1beta1 not served at all.
    async fn new(mode: Mode) -> Scenario {
        let cluster = SimCluster::new();
        cluster.register(
            TypeDef::new("rbac.authorization.k8s.io", "v1", "Role", "roles", true)
                .with_versions(&["v1", "v1beta1"], "v1"),
        );
        Scenario::over(cluster, mode).await
    }

    async fn over(cluster: SimCluster, mode: Mode) -> Scenario {
        let config = CollectorConfig {
            verify_with_get: mode == Mode::Upstream,
            ..CollectorConfig::default()
        };
        let rig = Rig::with_config(cluster, 500, config).await;
        let calls = rig.cluster.api_calls();
        Scenario {
            rig,
            pending: Vec::new(),
            calls,
        }
    }

    fn id(&self, api_version: &str, kind: &str, namespace: &str, name: &str, uid: &str) -> Identity {
        let _graph = &self.rig.graph;
        Identity {
            type_meta: TypeMeta::new(Sym::new(api_version), Sym::new(kind)),
            name: name.into(),
            uid: Uid::parse(uid),
            namespace: Sym::new(namespace),
        }
    }

    /// Creates `id` in the cluster, as a user would (not counted as a GC call).
    fn create(&self, gvr: &Gvr, id: &Identity, owners: &[&Identity]) {
        let obj = PartialObjectMeta {
            metadata: meta_of(id, owners),
            ..Default::default()
        };
        self.rig
            .cluster
            .create(gvr, obj)
            .unwrap_or_else(|e| panic!("create {id}: {e}"));
    }

    /// Deletes `id` from the cluster, as a user would.
    fn remove(&self, gvr: &Gvr, id: &Identity) {
        self.rig
            .cluster
            .delete_object(gvr, &id.namespace, &id.name, &DeleteOptions::default())
            .unwrap_or_else(|e| panic!("delete {id}: {e}"));
    }

    fn exists(&self, gvr: &Gvr, id: &Identity) -> bool {
        self.rig
            .cluster
            .get_object(gvr, &id.namespace, &id.name)
            .is_ok_and(|o| o.metadata.uid == id.uid.to_string())
    }

    /// Applies a watch event for `id` as the monitor of its apiVersion/kind would deliver it.
    fn observe(&self, event_type: EventType, id: &Identity, owners: &[&Identity]) {
        let event = self
            .rig
            .event(event_type, &meta_of(id, owners), &id.api_version(), &id.kind());
        self.rig.apply(event);
    }

    /// Runs one attemptToDelete worker step on the head of the queue, first letting any
    /// rate-limited item come due (upstream's queue re-adds those at once, at the back).
    async fn process(&mut self) {
        self.rig.release_delayed().await;
        assert!(self.rig.step_delete().await, "expected an item in attemptToDelete");
        self.pending.extend(self.rig.take_routed());
    }

    /// Applies the oldest `n` routed virtual deletes.
    fn apply_pending(&mut self, n: usize) {
        assert!(
            self.pending.len() >= n,
            "expected {n} pending graph changes, have {}",
            self.pending.len()
        );
        for event in self.pending.drain(..n).collect::<Vec<_>>() {
            self.rig.apply(event);
        }
    }

    /// The graph's current handle for `id`'s UID.
    fn handle(&self, id: &Identity) -> Handle {
        self.rig
            .graph
            .get(&id.uid)
            .unwrap_or_else(|| panic!("no node for {id}"))
    }

    /// Compares everything `want` describes with the rig's state, then starts counting API calls
    /// afresh.
    async fn check(&mut self, step: &str, want: State) {
        kube_gc::graph::invariants::assert_ok(&self.rig.graph);
        self.check_calls(step, &want);
        self.check_events(step, &want);
        self.check_graph(step, &want);
        self.check_pending(step, &want);
        self.check_queue(step, &want).await;
        self.check_absent(step, &want);
        assert!(
            self.rig.attempt_to_orphan.is_idle(),
            "{step}: attemptToOrphan should be empty"
        );
    }

    fn check_calls(&mut self, step: &str, want: &State) {
        let now = self.rig.cluster.api_calls();
        let (gets, deletes, patches) = (
            now.get - self.calls.get,
            now.delete - self.calls.delete,
            now.patch - self.calls.patch,
        );
        self.calls = now;
        assert_eq!(
            (gets, deletes, patches),
            (want.gets, want.deletes, 0),
            "{step}: (GET, DELETE, PATCH) calls"
        );
    }

    fn check_events(&mut self, step: &str, want: &State) {
        let got: Vec<String> = self.rig.recorded_events().iter().map(event_line).collect();
        assert_eq!(got, want.events, "{step}: recorded events");
    }

    fn check_graph(&self, step: &str, want: &State) {
        assert_eq!(self.rig.graph.len(), want.graph.len(), "{step}: number of graph nodes");
        for spec in &want.graph {
            let n = self
                .rig
                .graph
                .get(&spec.id.uid)
                .unwrap_or_else(|| panic!("{step}: no node with uid {}", spec.id.uid));
            assert_eq!(*n.identity(), spec.id, "{step}: identity of uid {}", spec.id.uid);
            assert_eq!(n.is_virtual(), spec.is_virtual, "{step}: virtual flag of {}", spec.id);
            let owners: Vec<OwnerReference> = n.owners().iter().map(OwnerRef::to_wire).collect();
            let expected: Vec<OwnerReference> = spec.owners.iter().map(wire_ref).collect();
            assert_eq!(owners, expected, "{step}: owners of {}", spec.id);
        }
    }

    fn check_pending(&self, step: &str, want: &State) {
        for e in &self.pending {
            assert!(
                e.is_virtual && e.event_type == EventType::Delete,
                "{step}: a routed event is not a virtual delete: {e:?}"
            );
        }
        let got: Vec<Identity> = self.pending.iter().map(GraphEvent::identity).collect();
        assert_eq!(got, want.pending, "{step}: pending virtual deletes");
    }

    async fn check_queue(&self, step: &str, want: &State) {
        let got: Vec<(Identity, bool)> = self
            .rig
            .peek_delete_queue()
            .await
            .iter()
            .map(|h| (h.identity().clone(), h.is_virtual()))
            .collect();
        assert_eq!(
            got, want.queued,
            "{step}: queued attemptToDelete items (identity, virtual)"
        );
        let queue = &self.rig.attempt_to_delete;
        assert_eq!(queue.delayed_len(), want.delayed.len(), "{step}: rate-limited items");
        for id in &want.delayed {
            assert_eq!(
                queue.contains(&self.handle(id)),
                QueueState::Delayed,
                "{step}: {id} should wait for its backoff"
            );
        }
    }

    fn check_absent(&self, step: &str, want: &State) {
        let cache = &self.rig.absent_owner_cache;
        assert_eq!(cache.len(), want.absent.len(), "{step}: absentOwnerCache size");
        for id in &want.absent {
            assert!(cache.has(id), "{step}: {id} should be cached as absent");
        }
    }
}

/// One recorded event in the shape upstream's fake recorder prints.
fn event_line(e: &EventRecord) -> String {
    assert_eq!(e.source_component, "garbage-collector-controller");
    format!(
        "{} {} {} involvedObject{{kind={},apiVersion={}}}",
        e.event_type, e.reason, e.message, e.involved_object.kind, e.involved_object.api_version
    )
}

/// The object references of TestConflictingData.
struct Ids {
    pod1ns1: Identity,
    pod2ns1: Identity,
    pod2ns2: Identity,
    node1: Identity,
    role1v1beta1: Identity,
    role1v1: Identity,
    deployment1apps: Identity,
    /// Not served, still referenced.
    deployment1extensions: Identity,
    /// The virtual node a namespaced dependent creates for node1.
    node1_with_namespace: Identity,
    /// The virtual node a cluster-scoped dependent creates for pod1.
    pod1_no_namespace: Identity,
    /// A Secret ref that carries the UID of deployment1.
    bad_secret_ref: Identity,
    bad_child_pod: Identity,
    good_child_pod: Identity,
}

impl Ids {
    fn new(s: &Scenario) -> Ids {
        Ids {
            pod1ns1: s.id("v1", "Pod", "ns1", "podname1", "poduid1"),
            pod2ns1: s.id("v1", "Pod", "ns1", "podname2", "poduid2"),
            pod2ns2: s.id("v1", "Pod", "ns2", "podname2", "poduid2"),
            node1: s.id("v1", "Node", "", "nodename", "nodeuid1"),
            role1v1beta1: s.id("rbac.authorization.k8s.io/v1beta1", "Role", "ns1", "role1", "roleuid1"),
            role1v1: s.id("rbac.authorization.k8s.io/v1", "Role", "ns1", "role1", "roleuid1"),
            deployment1apps: s.id("apps/v1", "Deployment", "ns1", "deployment1", "deploymentuid1"),
            deployment1extensions: s.id(
                "extensions/v1beta1",
                "Deployment",
                "ns1",
                "deployment1",
                "deploymentuid1",
            ),
            node1_with_namespace: s.id("v1", "Node", "ns1", "nodename", "nodeuid1"),
            pod1_no_namespace: s.id("v1", "Pod", "", "podname1", "poduid1"),
            bad_secret_ref: s.id("v1", "Secret", "ns1", "secretname", "deploymentuid1"),
            bad_child_pod: s.id("v1", "Pod", "ns1", "badpod", "badpoduid"),
            good_child_pod: s.id("v1", "Pod", "ns1", "goodpod", "goodpoduid"),
        }
    }
}

/// The OwnerRefInvalidNamespace line for `dependent` (kind, apiVersion) whose ref `claimed` (with
/// the dependent's namespace) does not exist there (spec §3.9).
fn invalid_namespace_event(claimed: &str, dependent_ns: &str, kind: &str) -> String {
    format!(
        "Warning OwnerRefInvalidNamespace ownerRef {claimed} does not exist in namespace \"{dependent_ns}\" \
         involvedObject{{kind={kind},apiVersion=v1}}"
    )
}

// ---------------------------------------------------------------------------------------------
// 17: ProcessEvent
// ---------------------------------------------------------------------------------------------

/// One ProcessEvent step: an event for the object with this UID, owned by these UIDs.
type Step = (EventType, &'static str, &'static [&'static str]);

/// Applies `steps` to a fresh rig (each `apply` checks the invariants) and returns the rig.
async fn process_events(steps: &[Step]) -> Rig {
    let rig = Rig::new(SimCluster::new()).await;
    for (event_type, uid, owners) in steps {
        let refs = owners
            .iter()
            .map(|o| OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: (*o).into(),
                uid: (*o).into(),
                ..Default::default()
            })
            .collect();
        let meta = ObjectMeta {
            name: (*uid).into(),
            uid: (*uid).into(),
            owner_references: refs,
            ..Default::default()
        };
        rig.apply(rig.event(*event_type, &meta, "v1", "Pod"));
    }
    rig
}

/// The graph as `uid → sorted dependent uids`; every node must be observed.
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

fn expected_graph(edges: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
    edges
        .iter()
        .map(|(uid, deps)| (uid.to_string(), deps.iter().map(|d| d.to_string()).collect()))
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

#[tokio::test(start_paused = true)]
async fn s17_process_event_sequences_keep_owners_and_dependents_consistent() {
    use EventType::{Add, Delete, Update};

    // test1: a chain of adds, owners first.
    let rig = process_events(&[(Add, "1", &[]), (Add, "2", &["1"]), (Add, "3", &["1", "2"])]).await;
    assert_eq!(
        dependents_by_uid(&rig.graph),
        expected_graph(&[("1", &["2", "3"]), ("2", &["3"]), ("3", &[])])
    );

    // test2: deleting an owner with two dependents.
    let test2: &[Step] = &[
        (Add, "1", &[]),
        (Add, "2", &["1"]),
        (Add, "3", &["1", "2"]),
        (Add, "4", &["2"]),
        (Delete, "2", &["doesn't matter"]),
    ];
    let rig = process_events(test2).await;
    assert_eq!(
        dependents_by_uid(&rig.graph),
        expected_graph(&[("1", &["3"]), ("3", &[]), ("4", &[])])
    );
    assert_eq!(
        queued_uids(&rig).await,
        ["3", "4"],
        "dependents of a deleted owner are queued"
    );
    assert_eq!(rig.absent_owner_cache.len(), 1, "the deleted owner had dependents");

    // test3: an update that swaps an owner and closes a cycle 2 → 4 → 3 → 2.
    let rig = process_events(&[
        (Add, "1", &[]),
        (Add, "2", &["1"]),
        (Add, "3", &["1", "2"]),
        (Add, "4", &["3"]),
        (Update, "2", &["4"]),
    ])
    .await;
    assert_eq!(
        dependents_by_uid(&rig.graph),
        expected_graph(&[("1", &["3"]), ("2", &["3"]), ("3", &["4"]), ("4", &["2"])])
    );

    // reverse test2: dependents first, so owners start virtual and are observed later.
    let rig = process_events(&[
        (Add, "4", &["2"]),
        (Add, "3", &["1", "2"]),
        (Add, "2", &["1"]),
        (Add, "1", &[]),
        (Delete, "2", &["doesn't matter"]),
    ])
    .await;
    assert_eq!(
        dependents_by_uid(&rig.graph),
        expected_graph(&[("1", &["3"]), ("3", &[]), ("4", &[])])
    );
}

// ---------------------------------------------------------------------------------------------
// 25–40: TestConflictingData
// ---------------------------------------------------------------------------------------------

async fn s25_good_child_with_cluster_scoped_owner_drops_stale_virtual_handle(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let i = Ids::new(&s);
    s.create(&nodes(), &i.node1, &[]);
    s.create(&pods(), &i.pod1ns1, &[&i.node1]);

    // a namespaced child of a not yet observed cluster-scoped owner: the virtual owner takes the
    // child's namespace
    s.observe(EventType::Add, &i.pod1ns1, &[&i.node1]);
    s.check(
        "observe child",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.node1]), virtual_node(&i.node1_with_namespace)],
            queued: vec![queued_virtual(&i.node1_with_namespace)],
            ..Default::default()
        },
    )
    .await;
    let stale = s.handle(&i.node1_with_namespace);

    // the owner exists, but a virtual node keeps polling until a watch observes it
    s.process().await;
    s.check(
        "attempt virtual owner",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.node1]), virtual_node(&i.node1_with_namespace)],
            delayed: vec![i.node1_with_namespace.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;
    s.rig.release_delayed().await;

    // observing the owner fixes its namespace; the old virtual handle is still queued
    s.observe(EventType::Add, &i.node1, &[]);
    s.check(
        "observe owner",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.node1]), node(&i.node1, &[])],
            queued: vec![queued_virtual(&i.node1_with_namespace)],
            ..Default::default()
        },
    )
    .await;
    assert!(
        !Handle::ptr_eq(&stale, &s.handle(&i.node1)),
        "observation replaced the handle"
    );

    // the stale virtual handle is dropped without an API call
    s.process().await;
    s.check(
        "drop stale handle",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.node1]), node(&i.node1, &[])],
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        s.rig.attempt_to_delete.num_requeues(&stale),
        0,
        "the stale handle was forgotten"
    );
}

async fn s26_bad_child_with_owner_in_other_namespace_child_first_is_deleted(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let i = Ids::new(&s);
    s.create(&pods(), &i.pod1ns1, &[&i.pod2ns1]);
    s.create(&pods(), &i.pod2ns2, &[]);

    s.observe(EventType::Add, &i.pod1ns1, &[&i.pod2ns2]);
    s.check(
        "observe child",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.pod2ns2]), virtual_node(&i.pod2ns1)],
            queued: vec![queued_virtual(&i.pod2ns1)],
            ..Default::default()
        },
    )
    .await;

    // the owner turns out to live in ns2: the child disagrees, gets an event and is queued
    s.observe(EventType::Add, &i.pod2ns2, &[]);
    s.check(
        "observe owner",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.pod2ns2]), node(&i.pod2ns2, &[])],
            queued: vec![queued_virtual(&i.pod2ns1), queued(&i.pod1ns1)],
            events: vec![invalid_namespace_event(
                "[v1/Pod, namespace: ns1, name: podname2, uid: poduid2]",
                "ns1",
                "Pod",
            )],
            ..Default::default()
        },
    )
    .await;

    s.process().await;
    s.check(
        "drop stale virtual owner",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.pod2ns2]), node(&i.pod2ns2, &[])],
            queued: vec![queued(&i.pod1ns1)],
            ..Default::default()
        },
    )
    .await;

    // GET child, GET pod2 in ns1 (404), DELETE child
    s.process().await;
    s.check(
        "delete bad child",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.pod2ns2]), node(&i.pod2ns2, &[])],
            absent: vec![i.pod2ns1.clone()],
            gets: 2,
            deletes: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(!s.exists(&pods(), &i.pod1ns1), "the bad child was deleted");
    assert!(s.exists(&pods(), &i.pod2ns2), "the owner in ns2 was left alone");

    s.observe(EventType::Delete, &i.pod1ns1, &[]);
    s.check(
        "observe child deletion",
        State {
            graph: vec![node(&i.pod2ns2, &[])],
            absent: vec![i.pod2ns1.clone()],
            ..Default::default()
        },
    )
    .await;
}

async fn s27_bad_child_with_owner_in_other_namespace_owner_first_is_deleted(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let i = Ids::new(&s);
    s.create(&pods(), &i.pod1ns1, &[&i.pod2ns1]);
    s.create(&pods(), &i.pod2ns2, &[]);

    s.observe(EventType::Add, &i.pod2ns2, &[]);
    s.check(
        "observe owner",
        State {
            graph: vec![node(&i.pod2ns2, &[])],
            ..Default::default()
        },
    )
    .await;

    s.observe(EventType::Add, &i.pod1ns1, &[&i.pod2ns1]);
    s.check(
        "observe child",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.pod2ns1]), node(&i.pod2ns2, &[])],
            queued: vec![queued(&i.pod1ns1)],
            events: vec![invalid_namespace_event(
                "[v1/Pod, namespace: ns1, name: podname2, uid: poduid2]",
                "ns1",
                "Pod",
            )],
            ..Default::default()
        },
    )
    .await;

    s.process().await;
    s.check(
        "delete bad child",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.pod2ns1]), node(&i.pod2ns2, &[])],
            absent: vec![i.pod2ns1.clone()],
            gets: 2,
            deletes: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(!s.exists(&pods(), &i.pod1ns1));

    s.observe(EventType::Delete, &i.pod1ns1, &[]);
    s.check(
        "observe child deletion",
        State {
            graph: vec![node(&i.pod2ns2, &[])],
            absent: vec![i.pod2ns1.clone()],
            ..Default::default()
        },
    )
    .await;
}

async fn s28_cluster_scoped_child_with_namespaced_owner_child_first_is_kept(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let i = Ids::new(&s);
    s.create(&nodes(), &i.node1, &[&i.pod1ns1]);
    s.create(&pods(), &i.pod1ns1, &[]);

    // a cluster-scoped child creates a virtual owner without a namespace
    s.observe(EventType::Add, &i.node1, &[&i.pod1ns1]);
    s.check(
        "observe child",
        State {
            graph: vec![
                node(&i.node1, &[&i.pod1_no_namespace]),
                virtual_node(&i.pod1_no_namespace),
            ],
            queued: vec![queued_virtual(&i.pod1_no_namespace)],
            ..Default::default()
        },
    )
    .await;

    // a namespaced virtual owner without a namespace cannot be looked up: dropped, not requeued
    s.process().await;
    s.check(
        "attempt virtual owner",
        State {
            graph: vec![
                node(&i.node1, &[&i.pod1_no_namespace]),
                virtual_node(&i.pod1_no_namespace),
            ],
            ..Default::default()
        },
    )
    .await;

    s.observe(EventType::Add, &i.pod1ns1, &[]);
    s.check(
        "observe owner",
        State {
            graph: vec![node(&i.node1, &[&i.pod1_no_namespace]), node(&i.pod1ns1, &[])],
            queued: vec![queued(&i.node1)],
            events: vec![invalid_namespace_event(
                "[v1/Pod, namespace: , name: podname1, uid: poduid1]",
                "",
                "Node",
            )],
            ..Default::default()
        },
    )
    .await;

    // GET the node; its namespaced owner is never looked up and the node is never deleted
    s.process().await;
    s.check(
        "attempt bad child",
        State {
            graph: vec![node(&i.node1, &[&i.pod1_no_namespace]), node(&i.pod1ns1, &[])],
            gets: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(s.exists(&nodes(), &i.node1));
}

async fn s29_cluster_scoped_child_with_namespaced_owner_owner_first_is_kept(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let i = Ids::new(&s);
    s.create(&nodes(), &i.node1, &[&i.pod1ns1]);
    s.create(&pods(), &i.pod1ns1, &[]);

    s.observe(EventType::Add, &i.pod1ns1, &[]);
    s.check(
        "observe owner",
        State {
            graph: vec![node(&i.pod1ns1, &[])],
            ..Default::default()
        },
    )
    .await;

    s.observe(EventType::Add, &i.node1, &[&i.pod1ns1]);
    s.check(
        "observe child",
        State {
            graph: vec![node(&i.node1, &[&i.pod1_no_namespace]), node(&i.pod1ns1, &[])],
            queued: vec![queued(&i.node1)],
            events: vec![invalid_namespace_event(
                "[v1/Pod, namespace: , name: podname1, uid: poduid1]",
                "",
                "Node",
            )],
            ..Default::default()
        },
    )
    .await;

    s.process().await;
    s.check(
        "attempt bad child",
        State {
            graph: vec![node(&i.node1, &[&i.pod1_no_namespace]), node(&i.pod1ns1, &[])],
            gets: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(s.exists(&nodes(), &i.node1));
}

async fn s30_child_of_owner_seen_through_non_preferred_version_waits_for_real_owner(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let i = Ids::new(&s);
    // one stored Role, readable at v1 (preferred) and v1beta1
    s.create(&roles(), &i.role1v1, &[]);
    s.create(&pods(), &i.pod1ns1, &[&i.role1v1beta1]);

    s.observe(EventType::Add, &i.pod1ns1, &[&i.role1v1beta1]);
    s.check(
        "observe child",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.role1v1beta1]), virtual_node(&i.role1v1beta1)],
            queued: vec![queued_virtual(&i.role1v1beta1)],
            ..Default::default()
        },
    )
    .await;

    // GET role at v1beta1: it exists; still unobserved, so it polls with backoff
    s.process().await;
    s.check(
        "attempt virtual owner",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.role1v1beta1]), virtual_node(&i.role1v1beta1)],
            delayed: vec![i.role1v1beta1.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;
    s.rig.release_delayed().await;

    // observed through v1: identity corrected, the v1beta1 child disagrees and is queued
    s.observe(EventType::Add, &i.role1v1, &[]);
    s.check(
        "observe owner via v1",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.role1v1beta1]), node(&i.role1v1, &[])],
            queued: vec![queued_virtual(&i.role1v1beta1), queued(&i.pod1ns1)],
            ..Default::default()
        },
    )
    .await;

    s.process().await;
    s.check(
        "drop stale virtual owner",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.role1v1beta1]), node(&i.role1v1, &[])],
            queued: vec![queued(&i.pod1ns1)],
            ..Default::default()
        },
    )
    .await;

    // GET child, GET role at v1beta1: solid, nothing to do
    s.process().await;
    s.check(
        "verify child",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.role1v1beta1]), node(&i.role1v1, &[])],
            gets: 2,
            ..Default::default()
        },
    )
    .await;

    s.remove(&roles(), &i.role1v1);
    s.observe(EventType::Delete, &i.role1v1, &[]);
    s.check(
        "observe owner deletion via v1",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.role1v1beta1])],
            queued: vec![queued(&i.pod1ns1)],
            absent: vec![i.role1v1.clone()],
            ..Default::default()
        },
    )
    .await;

    // GET child, GET role at v1beta1 (404), DELETE child. The graph saw the role's UID deleted,
    // so the fast path knows it dangling under any version and does not GET it.
    let absent = match mode {
        Mode::Upstream => vec![i.role1v1.clone(), i.role1v1beta1.clone()],
        Mode::FastPath => vec![i.role1v1.clone()],
    };
    s.process().await;
    s.check(
        "delete child",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.role1v1beta1])],
            absent: absent.clone(),
            gets: mode.calls(2, 1),
            deletes: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(!s.exists(&pods(), &i.pod1ns1));

    s.observe(EventType::Delete, &i.pod1ns1, &[]);
    s.check(
        "observe child deletion",
        State {
            absent,
            ..Default::default()
        },
    )
    .await;
}

async fn s31_child_of_owner_with_unserved_version_child_first_is_never_deleted(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let i = Ids::new(&s);
    s.create(&deployments(), &i.deployment1apps, &[]);
    s.create(&pods(), &i.pod1ns1, &[&i.deployment1extensions]);

    s.observe(EventType::Add, &i.pod1ns1, &[&i.deployment1extensions]);
    s.check(
        "observe child",
        State {
            graph: vec![
                node(&i.pod1ns1, &[&i.deployment1extensions]),
                virtual_node(&i.deployment1extensions),
            ],
            queued: vec![queued_virtual(&i.deployment1extensions)],
            ..Default::default()
        },
    )
    .await;

    // the REST mapper does not know extensions/v1beta1: retried with backoff, no API call
    s.process().await;
    s.check(
        "attempt virtual owner",
        State {
            graph: vec![
                node(&i.pod1ns1, &[&i.deployment1extensions]),
                virtual_node(&i.deployment1extensions),
            ],
            delayed: vec![i.deployment1extensions.clone()],
            ..Default::default()
        },
    )
    .await;
    s.rig.release_delayed().await;

    s.observe(EventType::Add, &i.deployment1apps, &[]);
    s.check(
        "observe owner via apps/v1",
        State {
            graph: vec![
                node(&i.pod1ns1, &[&i.deployment1extensions]),
                node(&i.deployment1apps, &[]),
            ],
            queued: vec![queued_virtual(&i.deployment1extensions), queued(&i.pod1ns1)],
            ..Default::default()
        },
    )
    .await;

    s.process().await;
    s.check(
        "drop stale virtual owner",
        State {
            graph: vec![
                node(&i.pod1ns1, &[&i.deployment1extensions]),
                node(&i.deployment1apps, &[]),
            ],
            queued: vec![queued(&i.pod1ns1)],
            ..Default::default()
        },
    )
    .await;

    // GET child, then the unmappable ref: retried with backoff
    s.process().await;
    s.check(
        "attempt child",
        State {
            graph: vec![
                node(&i.pod1ns1, &[&i.deployment1extensions]),
                node(&i.deployment1apps, &[]),
            ],
            delayed: vec![i.pod1ns1.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;
    s.rig.release_delayed().await;

    s.remove(&deployments(), &i.deployment1apps);
    s.observe(EventType::Delete, &i.deployment1apps, &[]);
    s.check(
        "observe owner deletion",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.deployment1extensions])],
            queued: vec![queued(&i.pod1ns1)],
            absent: vec![i.deployment1apps.clone()],
            ..Default::default()
        },
    )
    .await;

    s.process().await;
    s.check(
        "attempt child again",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.deployment1extensions])],
            delayed: vec![i.pod1ns1.clone()],
            absent: vec![i.deployment1apps.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(
        s.exists(&pods(), &i.pod1ns1),
        "a child with an unmappable ref is never deleted"
    );
}

async fn s32_child_of_owner_with_unserved_version_owner_first_is_never_deleted(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let i = Ids::new(&s);
    s.create(&deployments(), &i.deployment1apps, &[]);
    s.create(&pods(), &i.pod1ns1, &[&i.deployment1extensions]);

    s.observe(EventType::Add, &i.deployment1apps, &[]);
    s.check(
        "observe owner",
        State {
            graph: vec![node(&i.deployment1apps, &[])],
            ..Default::default()
        },
    )
    .await;

    // the ref's coordinates disagree with the observed owner: the child is queued
    s.observe(EventType::Add, &i.pod1ns1, &[&i.deployment1extensions]);
    s.check(
        "observe child",
        State {
            graph: vec![
                node(&i.pod1ns1, &[&i.deployment1extensions]),
                node(&i.deployment1apps, &[]),
            ],
            queued: vec![queued(&i.pod1ns1)],
            ..Default::default()
        },
    )
    .await;

    s.process().await;
    s.check(
        "attempt child",
        State {
            graph: vec![
                node(&i.pod1ns1, &[&i.deployment1extensions]),
                node(&i.deployment1apps, &[]),
            ],
            delayed: vec![i.pod1ns1.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;
    s.rig.release_delayed().await;

    s.remove(&deployments(), &i.deployment1apps);
    s.observe(EventType::Delete, &i.deployment1apps, &[]);
    s.check(
        "observe owner deletion",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.deployment1extensions])],
            queued: vec![queued(&i.pod1ns1)],
            absent: vec![i.deployment1apps.clone()],
            ..Default::default()
        },
    )
    .await;

    s.process().await;
    s.check(
        "attempt child again",
        State {
            graph: vec![node(&i.pod1ns1, &[&i.deployment1extensions])],
            delayed: vec![i.pod1ns1.clone()],
            absent: vec![i.deployment1apps.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(s.exists(&pods(), &i.pod1ns1));
}

async fn s33_absent_owner_with_unserved_version_seen_first_keeps_polling(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let i = Ids::new(&s);
    s.create(&pods(), &i.pod1ns1, &[&i.deployment1extensions]);
    s.create(&pods(), &i.pod2ns1, &[&i.deployment1apps]);

    s.observe(EventType::Add, &i.pod1ns1, &[&i.deployment1extensions]);
    s.check(
        "observe child of unserved version",
        State {
            graph: vec![
                node(&i.pod1ns1, &[&i.deployment1extensions]),
                virtual_node(&i.deployment1extensions),
            ],
            queued: vec![queued_virtual(&i.deployment1extensions)],
            ..Default::default()
        },
    )
    .await;

    s.observe(EventType::Add, &i.pod2ns1, &[&i.deployment1apps]);
    let graph = || {
        vec![
            node(&i.pod1ns1, &[&i.deployment1extensions]),
            virtual_node(&i.deployment1extensions),
            node(&i.pod2ns1, &[&i.deployment1apps]),
        ]
    };
    s.check(
        "observe child of served version",
        State {
            graph: graph(),
            queued: vec![queued_virtual(&i.deployment1extensions), queued(&i.pod2ns1)],
            ..Default::default()
        },
    )
    .await;

    s.process().await;
    s.check(
        "attempt unmappable virtual owner",
        State {
            graph: graph(),
            queued: vec![queued(&i.pod2ns1)],
            delayed: vec![i.deployment1extensions.clone()],
            ..Default::default()
        },
    )
    .await;

    // GET pod2, GET deployment (404), DELETE pod2; the virtual owner comes due behind it
    s.process().await;
    s.check(
        "delete child of absent served owner",
        State {
            graph: graph(),
            queued: vec![queued_virtual(&i.deployment1extensions)],
            absent: vec![i.deployment1apps.clone()],
            gets: 2,
            deletes: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(!s.exists(&pods(), &i.pod2ns1));

    s.observe(EventType::Delete, &i.pod2ns1, &[&i.deployment1apps]);
    let graph = || {
        vec![
            node(&i.pod1ns1, &[&i.deployment1extensions]),
            virtual_node(&i.deployment1extensions),
        ]
    };
    s.check(
        "observe child deletion",
        State {
            graph: graph(),
            queued: vec![queued_virtual(&i.deployment1extensions)],
            absent: vec![i.deployment1apps.clone()],
            ..Default::default()
        },
    )
    .await;

    s.process().await;
    s.check(
        "virtual owner keeps polling",
        State {
            graph: graph(),
            delayed: vec![i.deployment1extensions.clone()],
            absent: vec![i.deployment1apps.clone()],
            ..Default::default()
        },
    )
    .await;
    let ext = s.handle(&i.deployment1extensions);
    assert_eq!(
        s.rig.attempt_to_delete.num_requeues(&ext),
        2,
        "the backoff keeps growing"
    );
    assert!(s.exists(&pods(), &i.pod1ns1));
}

async fn s34_absent_owner_with_served_version_seen_first_switches_to_alternate_identity(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let i = Ids::new(&s);
    s.create(&pods(), &i.pod1ns1, &[&i.deployment1extensions]);
    s.create(&pods(), &i.pod2ns1, &[&i.deployment1apps]);

    s.observe(EventType::Add, &i.pod2ns1, &[&i.deployment1apps]);
    s.check(
        "observe child of served version",
        State {
            graph: vec![
                node(&i.pod2ns1, &[&i.deployment1apps]),
                virtual_node(&i.deployment1apps),
            ],
            queued: vec![queued_virtual(&i.deployment1apps)],
            ..Default::default()
        },
    )
    .await;

    s.observe(EventType::Add, &i.pod1ns1, &[&i.deployment1extensions]);
    let graph = |owner: NodeSpec| {
        vec![
            node(&i.pod2ns1, &[&i.deployment1apps]),
            owner,
            node(&i.pod1ns1, &[&i.deployment1extensions]),
        ]
    };
    s.check(
        "observe child of unserved version",
        State {
            graph: graph(virtual_node(&i.deployment1apps)),
            queued: vec![queued_virtual(&i.deployment1apps), queued(&i.pod1ns1)],
            ..Default::default()
        },
    )
    .await;

    // GET deployment (404): a virtual delete is routed
    s.process().await;
    s.check(
        "attempt virtual owner",
        State {
            graph: graph(virtual_node(&i.deployment1apps)),
            queued: vec![queued(&i.pod1ns1)],
            pending: vec![i.deployment1apps.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;

    s.process().await;
    s.check(
        "attempt child of unserved version",
        State {
            graph: graph(virtual_node(&i.deployment1apps)),
            delayed: vec![i.pod1ns1.clone()],
            pending: vec![i.deployment1apps.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;
    s.rig.release_delayed().await;

    // the virtual delete: apps/v1 is absent, but pod1 names the UID otherwise, so the virtual
    // node switches to that identity and is re-queued with rate limiting
    let apps_handle = s.handle(&i.deployment1apps);
    s.apply_pending(1);
    s.check(
        "apply virtual delete",
        State {
            graph: graph(virtual_node(&i.deployment1extensions)),
            queued: vec![queued(&i.pod1ns1), queued(&i.pod2ns1)],
            delayed: vec![i.deployment1extensions.clone()],
            absent: vec![i.deployment1apps.clone()],
            ..Default::default()
        },
    )
    .await;
    assert!(!Handle::ptr_eq(&apps_handle, &s.handle(&i.deployment1extensions)));

    s.process().await;
    s.check(
        "attempt child of unserved version again",
        State {
            graph: graph(virtual_node(&i.deployment1extensions)),
            queued: vec![queued(&i.pod2ns1), queued_virtual(&i.deployment1extensions)],
            delayed: vec![i.pod1ns1.clone()],
            absent: vec![i.deployment1apps.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;

    // GET pod2; the absent owner is cached, so no GET of it; DELETE pod2
    s.process().await;
    s.check(
        "delete child of absent owner",
        State {
            graph: graph(virtual_node(&i.deployment1extensions)),
            queued: vec![queued_virtual(&i.deployment1extensions), queued(&i.pod1ns1)],
            absent: vec![i.deployment1apps.clone()],
            gets: 1,
            deletes: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(!s.exists(&pods(), &i.pod2ns1));

    s.process().await;
    s.check(
        "attempt alternate virtual owner",
        State {
            graph: graph(virtual_node(&i.deployment1extensions)),
            queued: vec![queued(&i.pod1ns1)],
            delayed: vec![i.deployment1extensions.clone()],
            absent: vec![i.deployment1apps.clone()],
            ..Default::default()
        },
    )
    .await;
    s.rig.release_delayed().await;

    s.observe(EventType::Delete, &i.pod2ns1, &[&i.deployment1apps]);
    s.check(
        "observe child deletion",
        State {
            graph: vec![
                virtual_node(&i.deployment1extensions),
                node(&i.pod1ns1, &[&i.deployment1extensions]),
            ],
            queued: vec![queued(&i.pod1ns1), queued_virtual(&i.deployment1extensions)],
            absent: vec![i.deployment1apps.clone()],
            ..Default::default()
        },
    )
    .await;
    assert!(s.exists(&pods(), &i.pod1ns1));
}

/// Steps 35–36 share: bad child, good child, attempt on the virtual Secret owner (404, virtual
/// delete routed), attempt on the good child (solid owner).
async fn bad_child_then_good_child(s: &mut Scenario, i: &Ids) {
    s.create(&deployments(), &i.deployment1apps, &[]);
    s.create(&pods(), &i.bad_child_pod, &[&i.bad_secret_ref]);
    s.create(&pods(), &i.good_child_pod, &[&i.deployment1apps]);

    s.observe(EventType::Add, &i.bad_child_pod, &[&i.bad_secret_ref]);
    s.check(
        "observe bad child",
        State {
            graph: vec![
                node(&i.bad_child_pod, &[&i.bad_secret_ref]),
                virtual_node(&i.bad_secret_ref),
            ],
            queued: vec![queued_virtual(&i.bad_secret_ref)],
            ..Default::default()
        },
    )
    .await;

    s.observe(EventType::Add, &i.good_child_pod, &[&i.deployment1apps]);
    let graph = || {
        vec![
            node(&i.good_child_pod, &[&i.deployment1apps]),
            node(&i.bad_child_pod, &[&i.bad_secret_ref]),
            virtual_node(&i.bad_secret_ref),
        ]
    };
    s.check(
        "observe good child",
        State {
            graph: graph(),
            queued: vec![queued_virtual(&i.bad_secret_ref), queued(&i.good_child_pod)],
            ..Default::default()
        },
    )
    .await;

    // GET secret (404)
    s.process().await;
    s.check(
        "attempt virtual secret owner",
        State {
            graph: graph(),
            queued: vec![queued(&i.good_child_pod)],
            pending: vec![i.bad_secret_ref.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;

    // GET good child, GET deployment (200)
    s.process().await;
    s.check(
        "attempt good child",
        State {
            graph: graph(),
            pending: vec![i.bad_secret_ref.clone()],
            gets: 2,
            ..Default::default()
        },
    )
    .await;
}

async fn s35_bad_child_wrong_kind_then_virtual_delete_then_good_parent(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let i = Ids::new(&s);
    bad_child_then_good_child(&mut s, &i).await;
    let graph = |owner: NodeSpec| {
        vec![
            node(&i.good_child_pod, &[&i.deployment1apps]),
            node(&i.bad_child_pod, &[&i.bad_secret_ref]),
            owner,
        ]
    };

    // the Secret coordinates are absent; the good child names the UID as a Deployment
    s.apply_pending(1);
    s.check(
        "apply virtual delete",
        State {
            graph: graph(virtual_node(&i.deployment1apps)),
            queued: vec![queued(&i.bad_child_pod)],
            delayed: vec![i.deployment1apps.clone()],
            absent: vec![i.bad_secret_ref.clone()],
            ..Default::default()
        },
    )
    .await;

    // GET bad child; the Secret owner is cached absent; DELETE bad child
    s.process().await;
    s.check(
        "delete bad child",
        State {
            graph: graph(virtual_node(&i.deployment1apps)),
            queued: vec![queued_virtual(&i.deployment1apps)],
            absent: vec![i.bad_secret_ref.clone()],
            gets: 1,
            deletes: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(!s.exists(&pods(), &i.bad_child_pod));

    // GET deployment (200): exists, still unobserved, so it polls
    s.process().await;
    s.check(
        "attempt alternate virtual owner",
        State {
            graph: graph(virtual_node(&i.deployment1apps)),
            delayed: vec![i.deployment1apps.clone()],
            absent: vec![i.bad_secret_ref.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;
    s.rig.release_delayed().await;

    s.observe(EventType::Add, &i.deployment1apps, &[]);
    s.check(
        "observe good parent",
        State {
            graph: graph(node(&i.deployment1apps, &[])),
            queued: vec![queued(&i.deployment1apps)],
            absent: vec![i.bad_secret_ref.clone()],
            ..Default::default()
        },
    )
    .await;

    s.observe(EventType::Delete, &i.bad_child_pod, &[&i.bad_secret_ref]);
    let graph = vec![
        node(&i.good_child_pod, &[&i.deployment1apps]),
        node(&i.deployment1apps, &[]),
    ];
    s.check(
        "observe bad child deletion",
        State {
            graph,
            queued: vec![queued(&i.deployment1apps)],
            absent: vec![i.bad_secret_ref.clone()],
            ..Default::default()
        },
    )
    .await;

    s.process().await;
    s.check(
        "attempt good parent",
        State {
            graph: vec![
                node(&i.good_child_pod, &[&i.deployment1apps]),
                node(&i.deployment1apps, &[]),
            ],
            absent: vec![i.bad_secret_ref.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(s.exists(&pods(), &i.good_child_pod));
    assert!(s.exists(&deployments(), &i.deployment1apps));
}

async fn s36_bad_child_wrong_kind_good_parent_observed_before_virtual_delete(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let i = Ids::new(&s);
    bad_child_then_good_child(&mut s, &i).await;
    let graph = || {
        vec![
            node(&i.good_child_pod, &[&i.deployment1apps]),
            node(&i.bad_child_pod, &[&i.bad_secret_ref]),
            node(&i.deployment1apps, &[]),
        ]
    };

    // the good parent's add event overtakes the pending virtual delete
    s.observe(EventType::Add, &i.deployment1apps, &[]);
    s.check(
        "observe good parent",
        State {
            graph: graph(),
            queued: vec![queued(&i.bad_child_pod)],
            pending: vec![i.bad_secret_ref.clone()],
            ..Default::default()
        },
    )
    .await;

    // an observed node is never removed by a virtual delete under other coordinates; the
    // dependents that agree with those coordinates are queued and the coordinates cached
    s.apply_pending(1);
    s.check(
        "apply virtual delete",
        State {
            graph: graph(),
            queued: vec![queued(&i.bad_child_pod)],
            absent: vec![i.bad_secret_ref.clone()],
            ..Default::default()
        },
    )
    .await;

    s.process().await;
    s.check(
        "delete bad child",
        State {
            graph: graph(),
            absent: vec![i.bad_secret_ref.clone()],
            gets: 1,
            deletes: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(!s.exists(&pods(), &i.bad_child_pod));

    s.observe(EventType::Delete, &i.bad_child_pod, &[&i.bad_secret_ref]);
    s.check(
        "observe bad child deletion",
        State {
            graph: vec![
                node(&i.good_child_pod, &[&i.deployment1apps]),
                node(&i.deployment1apps, &[]),
            ],
            absent: vec![i.bad_secret_ref.clone()],
            ..Default::default()
        },
    )
    .await;
    assert!(s.exists(&pods(), &i.good_child_pod));
}

async fn s37_good_child_then_bad_child_then_good_parent(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let i = Ids::new(&s);
    s.create(&deployments(), &i.deployment1apps, &[]);
    s.create(&pods(), &i.bad_child_pod, &[&i.bad_secret_ref]);
    s.create(&pods(), &i.good_child_pod, &[&i.deployment1apps]);

    s.observe(EventType::Add, &i.good_child_pod, &[&i.deployment1apps]);
    s.check(
        "observe good child",
        State {
            graph: vec![
                node(&i.good_child_pod, &[&i.deployment1apps]),
                virtual_node(&i.deployment1apps),
            ],
            queued: vec![queued_virtual(&i.deployment1apps)],
            ..Default::default()
        },
    )
    .await;

    s.observe(EventType::Add, &i.bad_child_pod, &[&i.bad_secret_ref]);
    let graph = |parent: NodeSpec| {
        vec![
            node(&i.good_child_pod, &[&i.deployment1apps]),
            parent,
            node(&i.bad_child_pod, &[&i.bad_secret_ref]),
        ]
    };
    s.check(
        "observe bad child",
        State {
            graph: graph(virtual_node(&i.deployment1apps)),
            queued: vec![queued_virtual(&i.deployment1apps), queued(&i.bad_child_pod)],
            ..Default::default()
        },
    )
    .await;

    // GET deployment (200): exists but unobserved, polls
    s.process().await;
    s.check(
        "attempt virtual parent",
        State {
            graph: graph(virtual_node(&i.deployment1apps)),
            queued: vec![queued(&i.bad_child_pod)],
            delayed: vec![i.deployment1apps.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;

    // GET bad child, GET secret (404), DELETE bad child
    s.process().await;
    s.check(
        "delete bad child",
        State {
            graph: graph(virtual_node(&i.deployment1apps)),
            queued: vec![queued_virtual(&i.deployment1apps)],
            absent: vec![i.bad_secret_ref.clone()],
            gets: 2,
            deletes: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(!s.exists(&pods(), &i.bad_child_pod));

    // same coordinates: the queued handle itself becomes observed
    s.observe(EventType::Add, &i.deployment1apps, &[]);
    s.check(
        "observe good parent",
        State {
            graph: graph(node(&i.deployment1apps, &[])),
            queued: vec![queued(&i.deployment1apps)],
            absent: vec![i.bad_secret_ref.clone()],
            ..Default::default()
        },
    )
    .await;

    s.observe(EventType::Delete, &i.bad_child_pod, &[&i.bad_secret_ref]);
    let graph = || {
        vec![
            node(&i.good_child_pod, &[&i.deployment1apps]),
            node(&i.deployment1apps, &[]),
        ]
    };
    s.check(
        "observe bad child deletion",
        State {
            graph: graph(),
            queued: vec![queued(&i.deployment1apps)],
            absent: vec![i.bad_secret_ref.clone()],
            ..Default::default()
        },
    )
    .await;

    s.process().await;
    s.check(
        "attempt good parent",
        State {
            graph: graph(),
            absent: vec![i.bad_secret_ref.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(s.exists(&pods(), &i.good_child_pod));
}

async fn s38_cluster_scoped_bad_child_and_namespaced_good_child_with_missing_parent(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let i = Ids::new(&s);
    s.create(&pods(), &i.pod2ns1, &[&i.pod1ns1]);
    s.create(&nodes(), &i.node1, &[&i.pod1_no_namespace]);

    s.observe(EventType::Add, &i.node1, &[&i.pod1_no_namespace]);
    s.check(
        "observe bad child",
        State {
            graph: vec![
                node(&i.node1, &[&i.pod1_no_namespace]),
                virtual_node(&i.pod1_no_namespace),
            ],
            queued: vec![queued_virtual(&i.pod1_no_namespace)],
            ..Default::default()
        },
    )
    .await;

    // issue #98040: a namespaced child of a virtual owner without a namespace is suspicious
    s.observe(EventType::Add, &i.pod2ns1, &[&i.pod1ns1]);
    let graph = || {
        vec![
            node(&i.node1, &[&i.pod1_no_namespace]),
            node(&i.pod2ns1, &[&i.pod1ns1]),
            virtual_node(&i.pod1_no_namespace),
        ]
    };
    s.check(
        "observe good child",
        State {
            graph: graph(),
            queued: vec![queued_virtual(&i.pod1_no_namespace), queued(&i.pod2ns1)],
            ..Default::default()
        },
    )
    .await;

    s.process().await;
    s.check(
        "attempt virtual parent without namespace",
        State {
            graph: graph(),
            queued: vec![queued(&i.pod2ns1)],
            ..Default::default()
        },
    )
    .await;

    // GET pod2, GET pod1 in ns1 (404), DELETE pod2
    s.process().await;
    s.check(
        "delete good child",
        State {
            graph: graph(),
            absent: vec![i.pod1ns1.clone()],
            gets: 2,
            deletes: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(!s.exists(&pods(), &i.pod2ns1));

    s.observe(EventType::Delete, &i.pod2ns1, &[&i.pod1ns1]);
    s.check(
        "observe good child deletion",
        State {
            graph: vec![
                node(&i.node1, &[&i.pod1_no_namespace]),
                virtual_node(&i.pod1_no_namespace),
            ],
            absent: vec![i.pod1ns1.clone()],
            ..Default::default()
        },
    )
    .await;
    assert!(s.exists(&nodes(), &i.node1));
}

async fn s39_cluster_scoped_bad_child_and_late_observed_parent_records_event(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let i = Ids::new(&s);
    s.create(&pods(), &i.pod1ns1, &[]);
    s.create(&pods(), &i.pod2ns1, &[&i.pod1ns1]);
    s.create(&nodes(), &i.node1, &[&i.pod1_no_namespace]);

    s.observe(EventType::Add, &i.node1, &[&i.pod1_no_namespace]);
    s.check(
        "observe bad child",
        State {
            graph: vec![
                node(&i.node1, &[&i.pod1_no_namespace]),
                virtual_node(&i.pod1_no_namespace),
            ],
            queued: vec![queued_virtual(&i.pod1_no_namespace)],
            ..Default::default()
        },
    )
    .await;

    s.observe(EventType::Add, &i.pod2ns1, &[&i.pod1ns1]);
    let graph = |parent: NodeSpec| {
        vec![
            node(&i.node1, &[&i.pod1_no_namespace]),
            node(&i.pod2ns1, &[&i.pod1ns1]),
            parent,
        ]
    };
    s.check(
        "observe good child",
        State {
            graph: graph(virtual_node(&i.pod1_no_namespace)),
            queued: vec![queued_virtual(&i.pod1_no_namespace), queued(&i.pod2ns1)],
            ..Default::default()
        },
    )
    .await;

    s.process().await;
    s.check(
        "attempt virtual parent without namespace",
        State {
            graph: graph(virtual_node(&i.pod1_no_namespace)),
            queued: vec![queued(&i.pod2ns1)],
            ..Default::default()
        },
    )
    .await;

    // GET pod2, GET pod1 in ns1 (200): solid
    s.process().await;
    s.check(
        "verify good child",
        State {
            graph: graph(virtual_node(&i.pod1_no_namespace)),
            gets: 2,
            ..Default::default()
        },
    )
    .await;

    s.observe(EventType::Add, &i.pod1ns1, &[]);
    s.check(
        "observe parent late",
        State {
            graph: graph(node(&i.pod1ns1, &[])),
            queued: vec![queued(&i.node1)],
            events: vec![invalid_namespace_event(
                "[v1/Pod, namespace: , name: podname1, uid: poduid1]",
                "",
                "Node",
            )],
            ..Default::default()
        },
    )
    .await;

    // GET node; never deleted, not retried
    s.process().await;
    s.check(
        "attempt bad child",
        State {
            graph: graph(node(&i.pod1ns1, &[])),
            gets: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(s.exists(&nodes(), &i.node1));
    assert!(s.exists(&pods(), &i.pod2ns1));
}

async fn s40_namespaced_good_child_first_replaces_virtual_parent_with_cluster_form(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let i = Ids::new(&s);
    s.create(&pods(), &i.pod2ns1, &[&i.pod1ns1]);
    s.create(&nodes(), &i.node1, &[&i.pod1_no_namespace]);

    s.observe(EventType::Add, &i.pod2ns1, &[&i.pod1ns1]);
    s.check(
        "observe good child",
        State {
            graph: vec![node(&i.pod2ns1, &[&i.pod1ns1]), virtual_node(&i.pod1ns1)],
            queued: vec![queued_virtual(&i.pod1ns1)],
            ..Default::default()
        },
    )
    .await;

    s.observe(EventType::Add, &i.node1, &[&i.pod1_no_namespace]);
    let graph = |parent: NodeSpec| {
        vec![
            node(&i.pod2ns1, &[&i.pod1ns1]),
            node(&i.node1, &[&i.pod1_no_namespace]),
            parent,
        ]
    };
    s.check(
        "observe bad child",
        State {
            graph: graph(virtual_node(&i.pod1ns1)),
            queued: vec![queued_virtual(&i.pod1ns1), queued(&i.node1)],
            ..Default::default()
        },
    )
    .await;

    // GET pod1 in ns1 (404)
    s.process().await;
    s.check(
        "attempt virtual parent",
        State {
            graph: graph(virtual_node(&i.pod1ns1)),
            queued: vec![queued(&i.node1)],
            pending: vec![i.pod1ns1.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;

    // GET node; its namespaced owner is never looked up
    s.process().await;
    s.check(
        "attempt bad child",
        State {
            graph: graph(virtual_node(&i.pod1ns1)),
            pending: vec![i.pod1ns1.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;

    // pod1@ns1 is absent; the node child names it without a namespace, so the virtual node
    // switches to that form
    s.apply_pending(1);
    s.check(
        "apply virtual delete",
        State {
            graph: graph(virtual_node(&i.pod1_no_namespace)),
            queued: vec![queued(&i.pod2ns1)],
            delayed: vec![i.pod1_no_namespace.clone()],
            absent: vec![i.pod1ns1.clone()],
            ..Default::default()
        },
    )
    .await;

    // GET pod2; pod1@ns1 is cached absent; DELETE pod2
    s.process().await;
    s.check(
        "delete good child",
        State {
            graph: graph(virtual_node(&i.pod1_no_namespace)),
            queued: vec![queued_virtual(&i.pod1_no_namespace)],
            absent: vec![i.pod1ns1.clone()],
            gets: 1,
            deletes: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(!s.exists(&pods(), &i.pod2ns1));

    s.observe(EventType::Delete, &i.pod2ns1, &[&i.pod1ns1]);
    let graph = || {
        vec![
            node(&i.node1, &[&i.pod1_no_namespace]),
            virtual_node(&i.pod1_no_namespace),
        ]
    };
    s.check(
        "observe good child deletion",
        State {
            graph: graph(),
            queued: vec![queued_virtual(&i.pod1_no_namespace)],
            absent: vec![i.pod1ns1.clone()],
            ..Default::default()
        },
    )
    .await;

    // steady state: the bad cluster-scoped child and its virtual parent, with no retries
    s.process().await;
    s.check(
        "attempt virtual parent without namespace",
        State {
            graph: graph(),
            absent: vec![i.pod1ns1.clone()],
            ..Default::default()
        },
    )
    .await;
    assert!(s.exists(&nodes(), &i.node1));
}

// ---------------------------------------------------------------------------------------------
// 41, 58: a cluster that changes under the GC between its GET and its DELETE
// ---------------------------------------------------------------------------------------------

/// A pod whose only owner, an RC, never existed; observed, with its virtual owner attempted
/// (404) and removed by the resulting virtual delete, which caches the RC as absent and queues
/// the pod. Returns the pod's and the RC's identities and the pod's resourceVersion.
async fn orphan_pod_queued(s: &mut Scenario) -> (Identity, Identity, String) {
    let rc = s.id("v1", "ReplicationController", "ns1", "gone", "rc-uid");
    let pod = s.id("v1", "Pod", "ns1", "pod", "pod-uid");
    s.create(&pods(), &pod, &[&rc]);
    s.observe(EventType::Add, &pod, &[&rc]);
    s.process().await;
    s.check(
        "attempt virtual rc",
        State {
            graph: vec![node(&pod, &[&rc]), virtual_node(&rc)],
            pending: vec![rc.clone()],
            gets: 1,
            ..Default::default()
        },
    )
    .await;
    s.apply_pending(1);
    s.check(
        "apply virtual delete of rc",
        State {
            graph: vec![node(&pod, &[&rc])],
            queued: vec![queued(&pod)],
            absent: vec![rc.clone()],
            ..Default::default()
        },
    )
    .await;
    let rv = s
        .rig
        .cluster
        .get_object(&pods(), "ns1", "pod")
        .expect("pod exists")
        .metadata
        .resource_version;
    (pod, rc, rv)
}

/// The user's PUT of `pod` with `change` applied.
fn user_update(sim: &SimCluster, pod: &str, change: impl FnOnce(&mut ObjectMeta)) {
    let mut obj = sim.get_object(&pods(), "ns1", pod).expect("pod exists");
    change(&mut obj.metadata);
    sim.update(&pods(), obj).expect("user update");
}

async fn s41_conflict_between_get_and_delete_retries_or_requeues(mode: Mode) {
    // Unrelated change (a label): the DELETE at the GET's resourceVersion conflicts, a fresh GET
    // shows the same UID and ownerReferences, and the DELETE is retried with the UID alone.
    let mut s = Scenario::new(mode).await;
    let (pod, rc, rv) = orphan_pod_queued(&mut s).await;
    let cluster = Arc::new(Recorder::new(s.rig.cluster.clone()));
    let collector = s.rig.collector_over(cluster.clone()).await;
    cluster.before_next_delete(|sim| {
        user_update(sim, "pod", |m| {
            m.labels.insert("touched".into(), "yes".into());
        })
    });
    assert!(collector.process_attempt_to_delete_worker().await);
    s.check(
        "delete after unrelated change",
        State {
            graph: vec![node(&pod, &[&rc])],
            absent: vec![rc.clone()],
            gets: 2,
            deletes: 2,
            ..Default::default()
        },
    )
    .await;
    let deletes = cluster.deletes();
    let preconditions: Vec<_> = deletes
        .iter()
        .map(|d| d.preconditions.clone().unwrap_or_default())
        .collect();
    assert_eq!(preconditions[0].uid.as_deref(), Some("pod-uid"));
    assert_eq!(preconditions[0].resource_version.as_deref(), Some(rv.as_str()));
    assert_eq!(preconditions[1].uid.as_deref(), Some("pod-uid"));
    assert_eq!(
        preconditions[1].resource_version, None,
        "the retry carries the UID alone"
    );
    assert!(deletes
        .iter()
        .all(|d| d.propagation_policy == Some(PropagationPolicy::Background)));
    assert!(!s.exists(&pods(), &pod), "the pod was deleted on the retry");
    assert_eq!(s.rig.attempt_to_delete.num_requeues(&s.handle(&pod)), 0);

    // Owner change: the pod gains a live owner between the GC's GET and its DELETE. The DELETE
    // conflicts, the fresh GET shows other ownerReferences, and the item is requeued instead.
    let mut s = Scenario::new(mode).await;
    let owner = s.id("v1", "ConfigMap", "ns1", "owner", "owner-uid");
    s.create(&configmaps(), &owner, &[]);
    let (pod, rc, _) = orphan_pod_queued(&mut s).await;
    s.observe(EventType::Add, &owner, &[]);
    let cluster = Arc::new(Recorder::new(s.rig.cluster.clone()));
    let collector = s.rig.collector_over(cluster.clone()).await;
    let new_ref = wire_ref(&owner);
    cluster.before_next_delete(move |sim| user_update(sim, "pod", |m| m.owner_references.push(new_ref)));
    assert!(collector.process_attempt_to_delete_worker().await);
    s.check(
        "conflict after owner change",
        State {
            graph: vec![node(&pod, &[&rc]), node(&owner, &[])],
            delayed: vec![pod.clone()],
            absent: vec![rc.clone()],
            gets: 2,
            deletes: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(
        s.exists(&pods(), &pod),
        "a conflicting DELETE is not retried when owners changed"
    );

    // The watch delivers the change; the next attempt reclassifies and keeps the pod, dropping
    // only the dangling ref.
    s.observe(EventType::Update, &pod, &[&rc, &owner]);
    s.rig.release_delayed().await;
    assert!(s.rig.step_delete().await);
    let calls = s.rig.cluster.api_calls();
    assert_eq!(
        (
            calls.get - s.calls.get,
            calls.patch - s.calls.patch,
            calls.delete - s.calls.delete
        ),
        (mode.calls(2, 1), 1, 0),
        "GET pod, GET live owner (the RC is cached absent; the fast path knows the owner solid \
         from the graph), PATCH away the dangling ref"
    );
    let left = s.rig.cluster.get_object(&pods(), "ns1", "pod").expect("pod kept");
    assert_eq!(left.metadata.owner_references, vec![wire_ref(&owner)]);
}

async fn s58_delete_answering_not_found_routes_virtual_delete(mode: Mode) {
    let mut s = Scenario::new(mode).await;
    let (pod, rc, _) = orphan_pod_queued(&mut s).await;
    let cluster = Arc::new(Recorder::new(s.rig.cluster.clone()));
    let collector = s.rig.collector_over(cluster.clone()).await;
    // someone else deletes the pod after the GC's GET
    let victim = pod.clone();
    cluster.before_next_delete(move |sim| {
        sim.delete_object(&pods(), &victim.namespace, &victim.name, &DeleteOptions::default())
            .expect("user delete");
    });
    assert!(collector.process_attempt_to_delete_worker().await);
    s.pending.extend(s.rig.take_routed());
    s.check(
        "DELETE answers 404",
        State {
            graph: vec![node(&pod, &[&rc])],
            pending: vec![pod.clone()],
            absent: vec![rc.clone()],
            gets: 1,
            deletes: 1,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        s.rig.attempt_to_delete.num_requeues(&s.handle(&pod)),
        0,
        "the item is forgotten, not retried"
    );

    // the builder removes the observed node whose identity the virtual delete names
    s.apply_pending(1);
    s.check(
        "apply virtual delete",
        State {
            absent: vec![rc.clone()],
            ..Default::default()
        },
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// 42: getAlternateOwnerIdentity
// ---------------------------------------------------------------------------------------------

#[test]
fn s42_alternate_owner_identity_cases() {
    let _graph = Graph::new();
    let id = |api_version: &str, kind: &str, namespace: &str, name: &str, uid: &str| Identity {
        type_meta: TypeMeta::new(Sym::new(api_version), Sym::new(kind)),
        name: name.into(),
        uid: Uid::parse(uid),
        namespace: Sym::new(namespace),
    };
    let dependent = |child: &Identity, owners: &[&Identity]| {
        let refs: Vec<OwnerRef> = owners
            .iter()
            .map(|o| OwnerRef {
                type_meta: TypeMeta::new(o.api_version(), o.kind()),
                name: o.name.clone(),
                uid: o.uid,
                controller: None,
                block_owner_deletion: None,
            })
            .collect();
        Handle::new(child.clone(), &refs, false)
    };

    let ns1_child1 = id("v1", "Child", "ns1", "child1", "childuid11");
    let ns1_child2 = id("v1", "Child", "ns1", "child2", "childuid12");
    let ns2_child1 = id("v1", "Child", "ns2", "child1", "childuid21");
    let cluster_child1 = id("v1", "Child", "", "child1", "childuidc1");

    let ns_parent_ns1 = id("v1", "NSParent", "ns1", "parentname", "parentuid");
    let ns_parent_ns2 = id("v1", "NSParent", "ns2", "parentname", "parentuid");
    let ns_parent_version = id("xx", "NSParent", "ns1", "parentname", "parentuid");
    let ns_parent_kind = id("v1", "xxxxxxxx", "ns1", "parentname", "parentuid");
    let ns_parent_name = id("v1", "NSParent", "ns1", "xxxxxxxxxx", "parentuid");

    let cluster_parent = id("v1", "ClusterParent", "", "parentname", "parentuid");
    let cluster_parent_version = id("xx", "ClusterParent", "", "parentname", "parentuid");
    let cluster_parent_kind = id("v1", "xxxxxxxxxxxxx", "", "parentname", "parentuid");
    let cluster_parent_name = id("v1", "ClusterParent", "", "xxxxxxxxxx", "parentuid");
    let cluster_parent_ns1_version = id("xx", "ClusterParent", "ns1", "parentname", "parentuid");
    let cluster_parent_ns1_kind = id("v1", "xxxxxxxxxxxxx", "ns1", "parentname", "parentuid");

    let versions = ["v1", "v2", "v3", "v4", "v5"];
    let ordered_ns: Vec<Identity> = versions.iter().map(|v| id(v, "kind", "ns1", "name", "uid")).collect();
    let ordered_cluster: Vec<Identity> = versions.iter().map(|v| id(v, "kind", "", "name", "uid")).collect();
    let ordered_ns_refs: Vec<&Identity> = ordered_ns.iter().collect();
    let ordered_cluster_refs: Vec<&Identity> = ordered_cluster.iter().collect();
    let unrelated = id("v1", "Parent", "ns1", "name", "anotheruid");

    struct Case<'a> {
        name: &'a str,
        deps: Vec<Handle>,
        absent: &'a Identity,
        expected: Option<&'a Identity>,
    }

    let cases = vec![
        Case {
            name: "namespaced alternate version",
            deps: vec![
                dependent(&ns1_child1, &[&ns_parent_ns1]),
                dependent(&ns1_child2, &[&ns_parent_version]),
            ],
            absent: &ns_parent_ns1,
            expected: Some(&ns_parent_version),
        },
        Case {
            name: "namespaced alternate kind",
            deps: vec![
                dependent(&ns1_child1, &[&ns_parent_ns1]),
                dependent(&ns1_child2, &[&ns_parent_kind]),
            ],
            absent: &ns_parent_ns1,
            expected: Some(&ns_parent_kind),
        },
        Case {
            name: "namespaced alternate namespace",
            deps: vec![
                dependent(&ns1_child1, &[&ns_parent_ns1]),
                dependent(&ns2_child1, &[&ns_parent_ns2]),
            ],
            absent: &ns_parent_ns1,
            expected: Some(&ns_parent_ns2),
        },
        Case {
            name: "namespaced alternate name",
            deps: vec![
                dependent(&ns1_child1, &[&ns_parent_ns1]),
                dependent(&ns1_child1, &[&ns_parent_name]),
            ],
            absent: &ns_parent_ns1,
            expected: Some(&ns_parent_name),
        },
        Case {
            // the new version is not known to be cluster-scoped: it takes the dependent's namespace
            name: "cluster alternate version",
            deps: vec![
                dependent(&ns1_child1, &[&cluster_parent]),
                dependent(&ns1_child2, &[&cluster_parent_version]),
            ],
            absent: &cluster_parent,
            expected: Some(&cluster_parent_ns1_version),
        },
        Case {
            name: "cluster alternate kind",
            deps: vec![
                dependent(&ns1_child1, &[&cluster_parent]),
                dependent(&ns1_child2, &[&cluster_parent_kind]),
            ],
            absent: &cluster_parent,
            expected: Some(&cluster_parent_ns1_kind),
        },
        Case {
            // apiVersion/kind proved cluster-scoped: namespaces of dependents do not matter
            name: "cluster alternate namespace",
            deps: vec![
                dependent(&ns1_child1, &[&cluster_parent]),
                dependent(&ns2_child1, &[&cluster_parent]),
            ],
            absent: &cluster_parent,
            expected: None,
        },
        Case {
            // same apiVersion/kind as the cluster-scoped absent owner: the namespace is dropped
            name: "cluster alternate name",
            deps: vec![
                dependent(&ns1_child1, &[&cluster_parent]),
                dependent(&ns1_child1, &[&cluster_parent_name]),
            ],
            absent: &cluster_parent,
            expected: Some(&cluster_parent_name),
        },
        Case {
            name: "namespaced refs wrap around to the first when absent sorts last",
            deps: vec![dependent(&ns1_child1, &ordered_ns_refs)],
            absent: &ordered_ns[4],
            expected: Some(&ordered_ns[0]),
        },
        Case {
            name: "namespaced refs give the next after absent",
            deps: vec![dependent(&ns1_child1, &ordered_ns_refs)],
            absent: &ordered_ns[3],
            expected: Some(&ordered_ns[4]),
        },
        Case {
            name: "cluster refs wrap around to the first when absent sorts last",
            deps: vec![dependent(&cluster_child1, &ordered_cluster_refs)],
            absent: &ordered_cluster[4],
            expected: Some(&ordered_cluster[0]),
        },
        Case {
            name: "cluster refs give the next after absent",
            deps: vec![dependent(&cluster_child1, &ordered_cluster_refs)],
            absent: &ordered_cluster[3],
            expected: Some(&ordered_cluster[4]),
        },
        Case {
            name: "unrelated UIDs are ignored",
            deps: vec![dependent(&ns1_child1, &[&cluster_parent, &unrelated])],
            absent: &cluster_parent,
            expected: None,
        },
        Case {
            name: "exact matches are ignored",
            deps: vec![dependent(&ns1_child1, &[&cluster_parent, &cluster_parent])],
            absent: &cluster_parent,
            expected: None,
        },
        Case {
            name: "duplicates collapse",
            deps: vec![dependent(
                &cluster_child1,
                &[&cluster_parent, &cluster_parent_kind, &cluster_parent_kind],
            )],
            absent: &cluster_parent,
            expected: Some(&cluster_parent_kind),
        },
    ];
    assert_eq!(cases.len(), 15);
    for case in cases {
        let got = alternate_owner_identity(&case.deps, case.absent);
        assert_eq!(got.as_ref(), case.expected, "{}", case.name);
    }
}

// ---------------------------------------------------------------------------------------------
// 56, 57: our own additions
// ---------------------------------------------------------------------------------------------

async fn s56_preferred_version_change_replaces_node_and_fixes_owner_dependents(mode: Mode) {
    // Widgets are served at v1 only now; the monitor used to see them at v1beta1.
    let cluster = SimCluster::new();
    cluster.register(TypeDef::new("example.com", "v1", "Widget", "widgets", true));
    let widgets = Gvr::new("example.com", "v1", "widgets");
    let mut s = Scenario::over(cluster, mode).await;
    let cm = s.id("v1", "ConfigMap", "ns1", "cm", "cm-uid");
    let w_old = s.id("example.com/v1beta1", "Widget", "ns1", "w", "w-uid");
    let w_new = s.id("example.com/v1", "Widget", "ns1", "w", "w-uid");
    let pod = s.id("v1", "Pod", "ns1", "pod", "pod-uid");
    let w2_old = s.id("example.com/v1beta1", "Widget", "ns1", "w2", "w2-uid");
    let w2_new = s.id("example.com/v1", "Widget", "ns1", "w2", "w2-uid");
    s.create(&configmaps(), &cm, &[]);
    s.create(&widgets, &w_new, &[&cm]);
    s.create(&pods(), &pod, &[&w_old]);
    s.create(&widgets, &w2_new, &[&cm]);

    s.observe(EventType::Add, &cm, &[]);
    s.observe(EventType::Add, &w_old, &[&cm]);
    s.observe(EventType::Add, &pod, &[&w_old]);
    s.observe(EventType::Add, &w2_old, &[&cm]);
    let old = s.handle(&w_old);
    assert_eq!(*old.identity(), w_old);
    // the old handle waits in the queue from before the change
    s.rig.drain_delete_queue().await;
    s.rig.attempt_to_delete.add(old.clone());

    // the preferred version changed: the new monitor's list delivers example.com/v1
    s.observe(EventType::Add, &w_new, &[&cm]);
    let new = s.handle(&w_new);
    assert!(!Handle::ptr_eq(&old, &new), "the node is replaced, not edited in place");
    assert_eq!(*new.identity(), w_new);
    assert!(!new.is_virtual());
    let cm_node = s.handle(&cm);
    let cm_deps = cm_node.dependents();
    assert!(
        cm_deps.iter().any(|d| Handle::ptr_eq(d, &new)),
        "the owner lists the new handle"
    );
    assert!(
        !cm_deps.iter().any(|d| Handle::ptr_eq(d, &old)),
        "and no longer the old one"
    );
    let w_deps = new.dependents();
    assert_eq!(w_deps.len(), 1);
    assert_eq!(*w_deps[0].identity(), pod, "the replacement keeps its dependents");

    // a version change and an owner removal in one update: the owner drops the new handle
    s.observe(EventType::Update, &w2_new, &[]);
    let cm_deps: Vec<Identity> = cm_node.dependents().iter().map(|d| d.identity().clone()).collect();
    assert_eq!(cm_deps, vec![w_new.clone()]);
    assert_eq!(*s.handle(&w2_new).identity(), w2_new);

    // the old handle is processed under the graph's apiVersion: GET widget at v1 and its owner
    // (which the fast path knows solid from the graph), both fine, so it is forgotten rather than
    // retried on a mapping error
    s.process().await;
    s.check(
        "attempt old handle",
        State {
            graph: vec![
                node(&cm, &[]),
                node(&w_new, &[&cm]),
                node(&pod, &[&w_old]),
                node(&w2_new, &[]),
            ],
            gets: mode.calls(2, 1),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(s.rig.attempt_to_delete.num_requeues(&old), 0);
    assert!(s.exists(&widgets, &w_new));
}

async fn s57_unblocking_a_dependent_requeues_the_waiting_owner(mode: Mode) {
    let s = Scenario::new(mode).await;
    let owner = s.id("apps/v1", "Deployment", "ns1", "owner", "owner-uid");
    let other = s.id("v1", "ConfigMap", "ns1", "other", "other-uid");
    let child = s.id("v1", "Pod", "ns1", "child", "child-uid");
    s.observe(EventType::Add, &owner, &[]);
    s.observe(EventType::Add, &other, &[]);

    // Applies an update of `child` with these refs and returns the UIDs queued by it.
    async fn update_child(s: &Scenario, child: &Identity, refs: Vec<OwnerReference>) -> Vec<String> {
        let meta = ObjectMeta {
            owner_references: refs,
            ..meta_of(child, &[])
        };
        s.rig.apply(s.rig.event(EventType::Update, &meta, "v1", "Pod"));
        queued_uids(&s.rig).await
    }
    let with_block = |owner: &Identity, block: Option<bool>| OwnerReference {
        block_owner_deletion: block,
        ..wire_ref(owner)
    };

    s.observe(EventType::Add, &child, &[]);
    let blocking = with_block(&owner, Some(true));
    assert!(update_child(&s, &child, vec![blocking.clone()]).await.is_empty());
    assert_eq!(
        update_child(&s, &child, vec![with_block(&owner, Some(false))]).await,
        ["owner-uid"],
        "true → false requeues the owner"
    );
    assert!(
        update_child(&s, &child, vec![blocking.clone()]).await.is_empty(),
        "false → true blocks, it does not unblock"
    );
    assert_eq!(
        update_child(&s, &child, vec![with_block(&owner, None)]).await,
        ["owner-uid"],
        "true → nil requeues the owner"
    );
    let controller = OwnerReference {
        controller: Some(true),
        ..blocking.clone()
    };
    assert!(update_child(&s, &child, vec![blocking.clone()]).await.is_empty());
    assert!(
        update_child(&s, &child, vec![controller]).await.is_empty(),
        "other fields changing on a blocking ref unblock nothing"
    );
    assert_eq!(
        update_child(&s, &child, vec![with_block(&other, None)]).await,
        ["owner-uid"],
        "removing a blocking ref requeues its owner"
    );
    assert!(
        update_child(&s, &child, vec![]).await.is_empty(),
        "removing a non-blocking ref requeues nothing"
    );

    // End to end: a foreground-deleted owner waits for a blocking dependent, which then drops
    // blockOwnerDeletion; the owner comes back and finishes.
    let mut s = Scenario::new(mode).await;
    s.create(&deployments(), &owner, &[]);
    let c = PartialObjectMeta {
        metadata: ObjectMeta {
            owner_references: vec![blocking.clone()],
            ..meta_of(&child, &[])
        },
        ..Default::default()
    };
    s.rig.cluster.create(&pods(), c).expect("create child");
    let foreground = DeleteOptions {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..Default::default()
    };
    s.rig
        .cluster
        .delete_object(&deployments(), "ns1", "owner", &foreground)
        .expect("foreground delete");
    let deleting = s
        .rig
        .cluster
        .get_object(&deployments(), "ns1", "owner")
        .expect("owner waits");
    s.rig
        .apply(s.rig.event(EventType::Add, &deleting.metadata, "apps/v1", "Deployment"));
    let child_meta = s
        .rig
        .cluster
        .get_object(&pods(), "ns1", "child")
        .expect("child")
        .metadata;
    s.rig.apply(s.rig.event(EventType::Add, &child_meta, "v1", "Pod"));
    let owner_node = s.handle(&owner);
    assert!(owner_node.is_deleting_dependents());

    // the owner finds a blocking dependent: it queues the dependent and is not requeued itself
    s.process().await;
    assert_eq!(s.rig.attempt_to_delete.contains(&owner_node), QueueState::Absent);
    assert_eq!(
        queued_uids(&s.rig).await,
        ["child-uid"],
        "the blocking dependent is queued"
    );

    // the dependent stops blocking before a worker gets to it
    let mut c = s.rig.cluster.get_object(&pods(), "ns1", "child").expect("child");
    c.metadata.owner_references[0].block_owner_deletion = Some(false);
    let c = s.rig.cluster.update(&pods(), c).expect("unblock");
    s.rig.apply(s.rig.event(EventType::Update, &c.metadata, "v1", "Pod"));
    assert_eq!(s.rig.attempt_to_delete.contains(&owner_node), QueueState::Queued);

    // nothing blocks now: GET, remove foregroundDeletion (GET, PATCH), and the owner is gone;
    // the fast path patches at the version the graph observed, with no GET
    let before = s.rig.cluster.api_calls();
    s.process().await;
    let after = s.rig.cluster.api_calls();
    assert_eq!(
        (after.get - before.get, after.patch - before.patch),
        (mode.calls(2, 0), 1)
    );
    assert!(
        !s.exists(&deployments(), &owner),
        "the owner finished its foreground deletion"
    );
    assert!(s.exists(&pods(), &child), "the unblocked dependent stays");
}
