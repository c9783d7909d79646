//! Conformance with upstream's unit tests of the garbage collector (gc-spec §10, items 13, 15, 23,
//! 24 and 43), each test named after its checklist item. Items 16, 18, 19 and 22, upstream's
//! unit tests of the workers, are tables of `conformance_graph`, run one event and one queue item
//! at a time like the other graph scenarios.
//!
//! # Tables
//!
//! Every scenario here acts on the whole controller as a sequence of actions and checks: a table
//! of `conformance_cluster`'s [`Step`]s and [`Fact`]s, run by its runner at P = 1, 2 and 4 graph
//! builder partitions (`<scenario>::p{1,2,4}`); its module docs give the format and the runner's
//! invariants. Their extra vocabulary is about discovery, sync and the runtime: `Register`,
//! `Unregister`, `Resync`, `Fault`, `FailDiscovery`, `KeepsSyncing`, `MarkTasks`, and the facts
//! `Monitored`, `Monitor`, `Synced`, `SyncErrorsGrew`, `TasksAtMark`, `MoreTasksThanMark`,
//! `NoListOrWatchSinceMark`. Item 23's discovery documents are also a table of cases of the pure
//! function that reads them, where partitions do not apply.
//!
//! The scenarios are upstream's (`garbagecollector_test.go`, `graph_builder_test.go` and the
//! integration test `TestCascadingDeleteOnCRDConversionFailure`); the fake HTTP servers of the Go
//! tests become the simulated cluster, with [`SimCluster::inject_fault`] standing in for canned
//! error responses.

use crate::conformance_cluster::{
    cluster_scenarios, crd, delete, ghost, gone, in_graph, obj, secs, table, to, Fact,
    Policy::{Background, Foreground},
    Step, Table, Type, CONFIGMAP, DEPLOYMENT, POD, RC, SECRET,
};
use crate::support;

use kube_gc::api::layers::Verb;
use kube_gc::api::{ApiResource, Discovery, Gvk, Gvr, StatusReason};
use kube_gc::controller::{deletable_resources, Config, GroupResource};
use std::collections::BTreeMap;
use std::time::Duration;
use support::*;
use Fact::{
    Monitor, Monitored, MoreTasksThanMark, NoListOrWatchSinceMark, SyncErrorsGrew, Synced, TasksAtMark, Within,
};
use Step::{
    Check, Create, Mark, Register, Resync, Settle, Shutdown, Start, StartUnsynced, Steps, Unregister, Until, Wait,
};
use Step::{ClearFaults, FailDiscovery, KeepsSyncing, MarkSyncErrors, MarkTasks};

/// Every test's namespace, as upstream's `getPod` uses.
const NS: &str = "ns1";

cluster_scenarios!(
    s13_a_resource_that_never_lists_never_syncs_yet_rc_to_pod_cascades_still_work: s13,
    s15_construction_tolerates_an_unservable_resource_and_resync_adds_and_removes_monitors: s15,
    s23_a_failed_or_empty_discovery_changes_no_monitor: s23,
    s24_garbage_collector_sync_survives_discovery_and_sync_failures: s24,
    s43_shutdown_ends_every_task_the_collector_started: s43_shutdown,
    s43_a_monitor_dropped_by_resync_stops: s43_resync,
);

const WIDGET: Type = crd("example.com", "Widget", "widgets");

/// A `Fault` step: `verb` calls about `resource` (all if `None`) answer `reason` with `message`.
fn failing(verb: Verb, resource: Option<Type>, reason: StatusReason, message: &str) -> Step {
    Step::Fault(fault(verb, resource.map(|t| (t.group, t.plural)), reason, message))
}

/// Every read of `resource` fails: its LISTs and its WATCHes, watch-lists included, so that its
/// monitor never syncs whichever way it reads.
fn failing_reads(resource: Type, reason: StatusReason, message: &str) -> Step {
    Steps(vec![
        failing(Verb::List, Some(resource), reason, message),
        failing(Verb::Watch, Some(resource), reason, message),
    ])
}

/// Item 13 (`TestCascadingDeleteOnCRDConversionFailure`): a custom resource whose every read
/// (LIST or watch-list) fails, as behind a broken conversion webhook, never syncs; the collector still starts its
/// workers after the initial sync timeout and cascades an RC's deletion to its pod, and
/// `is_synced` stays false throughout.
#[rustfmt::skip]
fn s13() -> Table {
    let conversion = "conversion webhook for example.com/v1, Kind=Widget failed: connection refused";
    table(NS, vec![
        Register(WIDGET),
        failing_reads(WIDGET, StatusReason::InternalError, conversion),
        StartUnsynced,
        Create(obj(RC, "rc1")),
        Create(obj(POD, "pod1").owned_by([to("rc1")])),
        // a monitor whose reads always fail must not count as synced
        Until(in_graph(["rc1", "pod1"])), Check(Synced(false)),
        delete("rc1", Background),
        Until(gone("pod1")),
        // the broken resource is monitored, unsynced, and keeps the collector unsynced
        Check(Monitor(WIDGET, Some(false))), Check(Monitor(POD, Some(true))), Check(Synced(false)),
        Shutdown,
    ])
}

const UNKNOWN: Type = crd("tpr.io", "Unknown", "unknown");

/// Item 15 (`TestGarbageCollectorConstruction`): a resource the cluster advertises but cannot
/// serve is tolerated (its monitor simply never syncs), and resyncing adds and removes monitors,
/// both while the first sync is still pending (before the workers start) and once the collector
/// runs.
///
/// kube-gc has no "constructed but not running" state: `start` both builds and runs the
/// collector. The closest point to upstream's "before Run" is the initial-sync wait, during which
/// the monitors exist and the workers have not started.
#[rustfmt::skip]
fn s15() -> Table {
    let initial_sync_timeout = Config::default().initial_sync_timeout;
    table(NS, vec![
        failing_reads(UNKNOWN, StatusReason::NotFound, "the server could not find the requested resource"),
        Mark,
        StartUnsynced,
        Until(Monitored(&["pods", "unknown"])), Check(Synced(false)),
        // Before the workers start: drop the unservable resource, then add it back and drop it again.
        Unregister(UNKNOWN), Resync(Some(true)), Check(Monitored(&["pods"])),
        Register(UNKNOWN), Resync(None), Check(Monitored(&["pods", "unknown"])),
        Unregister(UNKNOWN), Resync(None), Check(Monitored(&["pods"])),
        // this half of the table must run before the workers start
        Check(Within(initial_sync_timeout)),
        Until(Synced(true)),
        // Running: the same again.
        Wait(initial_sync_timeout * 2),
        Register(UNKNOWN), Resync(Some(true)), Check(Monitored(&["pods", "unknown"])), Check(Synced(false)),
        Unregister(UNKNOWN), Resync(Some(true)), Check(Monitored(&["pods"])), Check(Synced(true)),
        Shutdown,
    ]).serving(&[POD, UNKNOWN])
}

/// A discovery entry; `verbs` empty means none.
fn resource(gvr: Gvr, kind: &str, verbs: &[&str]) -> ApiResource {
    ApiResource {
        gvr,
        kind: kind.into(),
        namespaced: true,
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        preferred: true,
    }
}

const DELETABLE: [&str; 3] = ["delete", "list", "watch"];

/// Item 23 (`TestGetDeletableResources`), through the controller: when discovery fails
/// outright, or answers a document with no usable resource at all, a sync round changes no
/// monitor (spec §7.7 step 2: never sync down to zero monitors) and counts a sync error. The
/// document cases are [`s23_deletable_resources_keep_usable_results_whatever_discovery_answers`].
#[rustfmt::skip]
fn s23() -> Table {
    table(NS, vec![
        Start, Check(Monitored(&["pods"])),
        // "discovery failure, no results"
        MarkSyncErrors,
        failing(Verb::Discovery, None, StatusReason::InternalError, "internal error"),
        Resync(Some(false)), Check(Monitored(&["pods"])), Check(SyncErrorsGrew),
        ClearFaults,
        // a document whose every group-version failed: nothing usable
        MarkSyncErrors, FailDiscovery("v1", true),
        Resync(Some(false)), Check(Monitored(&["pods"])), Check(SyncErrorsGrew),
        Shutdown,
    ]).serving(&[POD])
}

/// Item 23 (`TestGetDeletableResources`), the discovery documents: only resources with delete,
/// list and watch are monitored, never an invalid group-version, and a group-discovery failure
/// keeps the usable results of the rest. A table of cases of one pure function, so partitions
/// do not apply.
///
/// Upstream's second case, a nonspecific error that still carries partial results, has no
/// counterpart: [`kube_gc::api::ClusterApi::discover`] answers either a document (whose `failed`
/// map is the group-discovery failure) or an error with no results, which [`s23`] covers.
#[test]
fn s23_deletable_resources_keep_usable_results_whatever_discovery_answers() {
    let pods_in_apps = Gvr::new("apps", "v1", "pods");
    let usable = vec![
        resource(pods_in_apps.clone(), "Pod", &DELETABLE),
        resource(Gvr::new("apps", "v1", "services"), "Service", &[]),
        // "foo//whatever" is not a group-version; upstream skips it.
        resource(Gvr::new("foo", "/whatever", "bars"), "Bar", &DELETABLE),
        resource(Gvr::new("acme", "v1", "widgets"), "Widget", &["delete"]),
    ];
    let failure = BTreeMap::from([("foo/v1".to_string(), "discovery failure".to_string())]);
    let only_pods = BTreeMap::from([(pods_in_apps, Gvk::from_api_version("apps/v1", "Pod"))]);
    let cases = [
        ("no error", BTreeMap::new(), &only_pods),
        (
            "partial discovery failure, includes usable results",
            failure,
            &only_pods,
        ),
    ];
    let no_ignores: [GroupResource; 0] = [];
    for (case, failed, want) in cases {
        let discovery = Discovery {
            resources: usable.clone(),
            failed,
        };
        assert_eq!(deletable_resources(&discovery, &no_ignores), *want, "{case}");
    }
}

/// Item 24 (`TestGarbageCollectorSync`): discovery errors, unsyncable resources and partial
/// discovery failures never block the sync loop or the workers; a discovery error changes no
/// monitor, a partial failure keeps the synced monitors of the failed group, the sync-error
/// metric counts the unsynced round, and the collector syncs once the resource recovers.
#[rustfmt::skip]
fn s24() -> Table {
    let both = &["deployments", "pods"];
    let discovery_error = "error calling discoveryClient.ServerPreferredResources()";
    // A resource that maps but never syncs (its reads answer 404).
    let unsyncable = || Steps(vec![
        failing_reads(SECRET, StatusReason::NotFound, "the server could not find the requested resource"),
        Register(SECRET),
    ]);
    table(NS, vec![
        Start, MarkSyncErrors, Check(Monitored(both)),
        // A discovery error: no monitor changes, the loop goes on.
        failing(Verb::Discovery, None, StatusReason::InternalError, discovery_error),
        KeepsSyncing, Check(Monitored(both)), Check(SyncErrorsGrew),
        ClearFaults,
        KeepsSyncing, Check(Monitored(both)),
        // The unsyncable resource replaces deployments.
        unsyncable(), Unregister(DEPLOYMENT),
        KeepsSyncing, Check(Monitored(&["pods", "secrets"])), Check(Synced(false)),
        // Back to normal.
        Unregister(SECRET), Register(DEPLOYMENT),
        KeepsSyncing, Check(Monitored(both)), Until(Synced(true)),
        // Partial discovery failure: apps/v1 fails; its synced deployments monitor is kept.
        unsyncable(), FailDiscovery("apps/v1", true),
        KeepsSyncing, Check(Monitored(&["deployments", "pods", "secrets"])),
        // Back to normal: the unsyncable monitor is removed.
        FailDiscovery("apps/v1", false), Unregister(SECRET),
        KeepsSyncing, Check(Monitored(both)), Until(Synced(true)),
        // An informer that has not synced yet: the round that adds it counts a sync error...
        MarkSyncErrors, unsyncable(), Unregister(DEPLOYMENT),
        KeepsSyncing, Check(Monitored(&["pods", "secrets"])),
        Check(Synced(false)), // the secrets monitor cannot have synced
        Check(SyncErrorsGrew),
        // ...and the collector syncs once the resource lists again.
        ClearFaults, Until(Synced(true)), Check(Monitor(SECRET, Some(true))),
        Shutdown,
    ]).serving(&[POD, DEPLOYMENT])
}

/// Item 43 (`TestGraphBuilderLeak`): shutdown returns, and every task the collector started
/// (builders, workers, monitors, the event sink, the queues' delay timers) is gone afterwards;
/// the workers have work when it comes, including a rate-limited retry of an owner of a kind
/// nobody serves. Each partition is a builder task, so P matters here.
#[rustfmt::skip]
fn s43_shutdown() -> Table {
    let gizmo = ghost("unknown.example.com/v1", "Gizmo", "gizmo", "gizmo-uid");
    table(NS, vec![
        MarkTasks, Start,
        Create(obj(RC, "rc")),
        Create(obj(POD, "pod").owned_by([to("rc")])),
        Create(obj(POD, "stray").owned_by([gizmo])),
        Until(in_graph(["rc", "pod"])),
        delete("rc", Foreground), Until(gone("rc")),
        Check(MoreTasksThanMark),
        Shutdown,
        Until(TasksAtMark(0)),
    ])
}

/// Item 43 (`TestGraphBuilder_SyncMonitorsLeak`): a monitor that a resync drops stops (one task
/// per monitor), and stops calling the API.
#[rustfmt::skip]
fn s43_resync() -> Table {
    table(NS, vec![
        Start, Settle, MarkTasks,
        Register(CONFIGMAP), Resync(Some(true)),
        Check(Monitored(&["configmaps", "pods"])), Until(Synced(true)), Check(TasksAtMark(1)),
        // Removing the type ends its watch; until the resync drops it, its monitor relists.
        Unregister(CONFIGMAP), Resync(Some(true)),
        Check(Monitored(&["pods"])), Until(TasksAtMark(0)),
        Mark, Wait(secs(600)), Check(NoListOrWatchSinceMark),
        Shutdown,
    ]).serving(&[POD])
}

/// Not a checklist item: spec §4.1 retries an item whose owner's kind is not served forever, so
/// the collector is never quiet; `is_settled` tells that nothing else is left to do.
///
/// Stays code: it is about `is_settled` and `is_quiet`, two probes of the controller's own state.
#[tokio::test(start_paused = true)]
async fn is_settled_should_hold_while_an_owner_of_an_unserved_kind_keeps_retrying() {
    let h = Harness::start().await;
    let widget = ref_named("example.com/v1", "Widget", "w", "6f1b3c2e-1d2a-4c3b-9e4f-5a6b7c8d9e0f");
    let pod = h.create(&pods(), meta(NS, "p", vec![widget]));
    h.wait_in_graph(&[&pod]).await;
    h.wait(Duration::from_secs(60)).await;
    h.eventually("the collector settled", || h.gc.is_settled()).await;
    assert!(!h.gc.is_quiet(), "the virtual Widget owner waits for its next retry");
    assert!(h.exists(&pods(), &pod), "a dependent of an unresolvable owner is kept");
    h.gc.shutdown().await;
}
