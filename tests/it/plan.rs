//! Cascade plans ([`kube_gc::plan`]) against the reference model ([`kube_gc_sim::model`]): for
//! random clusters (the differential tests' generator: owner chains, shared dependents, cycles of
//! blocking references, cluster-scoped owners, references to kinds nobody serves, user
//! finalizers), the model settles the cluster, a plan of deleting one object with one policy is
//! taken from it, then the model carries the delete out, and every object's fate must be the one
//! the plan gave: removed, held by a finalizer or a dependent, left with exactly the references
//! the plan left it, or untouched.
//!
//! Then the proof on the collector itself: for each policy, the plan of deleting a Deployment is
//! taken from the running collector's graph, the Deployment is deleted, and the deletion journal
//! must show the same objects deleted, orphaned and stripped, in an order the plan's waves allow.
//!
//! A case whose outcome depends on the order the collector works in (the model's region, see its
//! docs) is skipped: the plan shows one order's outcome there. `PROPTEST_CASES` sets the number of
//! cases (default [`DEFAULT_CASES`]).

use crate::differential::{build, cases_from_env, raw_case, HOLD};
use crate::support::process::{kubectl_available, run_bounded, KUBECTL_TIMEOUT};
use crate::support::{
    self, blocking_ref_to, configmaps, create_in, deployments, meta, pods, ref_to, replicasets, Harness,
};
use kube_gc::api::{ObjectMeta, OwnerReference, PartialObjectMeta, PropagationPolicy, FINALIZER_FOREGROUND};
use kube_gc::controller::Config;
use kube_gc::graph::Uid;
use kube_gc::journal::{Action as JournalAction, Entry, Journal, OwnerState};
use kube_gc::plan::{self, Fate, Scope, Served, Snapshot};
use kube_gc_cli::server::PlanAnswer;
use kube_gc_sim::model::{self, Action, Kind, Model, Object};
use kube_gc_sim::SimCluster;
use proptest::prelude::*;
use proptest::sample::Index;
use std::collections::{BTreeMap, BTreeSet};

/// Cases per run unless `PROPTEST_CASES` says otherwise.
const DEFAULT_CASES: u32 = 512;

/// The model's served types, as a plan reads them.
struct Kinds<'m>(&'m Model);

impl Served for Kinds<'_> {
    fn scope(&self, api_version: &str, kind: &str) -> Option<Scope> {
        let kind = self.0.served(api_version, kind)?;
        Some(if kind.namespaced {
            Scope::Namespaced
        } else {
            Scope::Cluster
        })
    }
}

/// A model object as a plan reads it from the collector's graph.
fn plan_object(model: &Model, o: &Object) -> plan::Object {
    plan::Object {
        uid: o.uid.clone(),
        api_version: o.kind.api_version.to_string(),
        kind: o.kind.kind.to_string(),
        namespace: o.namespace.clone(),
        name: o.name.clone(),
        created: None,
        deleting: o.deleting,
        waited: model.deleting_dependents(&o.uid),
        finalizers: o.finalizers.clone(),
        owners: o.owner_references.clone(),
    }
}

const POLICIES: [PropagationPolicy; 3] = [
    PropagationPolicy::Background,
    PropagationPolicy::Foreground,
    PropagationPolicy::Orphan,
];

/// Where the plan and the model part, one line per object; empty when they agree.
fn disagreements(before: &BTreeMap<String, Object>, plan: &plan::Plan, model: &Model) -> Vec<String> {
    let fates: BTreeMap<&str, &Fate> = plan.steps.iter().map(|s| (s.object.uid.as_str(), &s.fate)).collect();
    let mut found = Vec::new();
    for (uid, was) in before {
        let now = model.get(uid);
        let fate = fates.get(uid.as_str()).copied();
        let agrees = match (fate, now) {
            (Some(Fate::Removed { .. }), None) => true,
            (Some(Fate::Removed { .. }), Some(_)) | (_, None) => false,
            // The cycle heuristic may have unblocked its references: their owners are compared.
            (Some(Fate::Held { .. }), Some(now)) => {
                now.deleting && uids(&now.owner_references) == uids(&was.owner_references)
            }
            (Some(Fate::Orphaned { loses } | Fate::Kept { loses, .. }), Some(now)) => {
                let mut kept = was.owner_references.clone();
                kept.retain(|r| !loses.iter().any(|l| l.uid == r.uid));
                now.deleting == was.deleting && now.owner_references == kept
            }
            (Some(Fate::Stuck { .. }), Some(now)) => now == was,
            // Only a namespace's plan waits for pods.
            (Some(Fate::WaitsForPods { .. }), Some(_)) => false,
            (None, Some(now)) => now == was,
        };
        if !agrees {
            found.push(format!("{}: was {was:?}, plan {fate:?}, model {now:?}", was.display()));
        }
    }
    found
}

/// The owner UIDs of `refs`, in order.
fn uids(refs: &[kube_gc::api::OwnerReference]) -> Vec<&str> {
    refs.iter().map(|r| r.uid.as_str()).collect()
}

fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..cases_from_env(DEFAULT_CASES)
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_plan_should_give_every_object_the_fate_the_model_gives_it(
        case in raw_case(),
        pick in any::<Index>(),
        policy in 0..POLICIES.len(),
    ) {
        let mut model = Model::new(build(&case));
        if model.settle().is_err() {
            return Ok(()); // out of the model's region from the start
        }
        let candidates: Vec<&Object> = model.objects().filter(|o| !o.deleting).collect();
        if candidates.is_empty() {
            return Ok(());
        }
        let root = candidates[pick.index(candidates.len())].uid.clone();
        let found = plan_against_model(model, &root, POLICIES[policy]);
        prop_assert!(found.is_ok(), "{}", found.unwrap_err());
    }
}

/// Plans deleting `root` of the settled `model` with `policy`, then deletes it in the model and
/// settles it: the disagreements, if any, as a message. Cases the delete takes out of the model's
/// region agree by definition.
fn plan_against_model(mut model: Model, root: &str, policy: PropagationPolicy) -> Result<plan::Plan, String> {
    let before: BTreeMap<String, Object> = model.objects().map(|o| (o.uid.clone(), o.clone())).collect();
    let snapshot = Snapshot::new(before.values().map(|o| plan_object(&model, o)));
    let plan = plan::simulate(&snapshot, &Kinds(&model), &[root.to_string()], policy);
    model.apply(&Action::Delete {
        uid: root.to_string(),
        policy: Some(policy),
    });
    if model.settle().is_err() {
        return Ok(plan);
    }
    let found = disagreements(&before, &plan, &model);
    if found.is_empty() {
        return Ok(plan);
    }
    Err(format!(
        "deleting {} ({policy:?}):\n{}\nplan: {:#?}",
        before[root].display(),
        found.join("\n"),
        plan.steps
    ))
}

/// A model object with `finalizers`, its UID numbered `i`.
fn model_object(
    kind: Kind,
    namespace: &str,
    name: &str,
    i: u32,
    finalizers: &[&str],
    owners: Vec<OwnerReference>,
) -> Object {
    Object {
        kind,
        namespace: namespace.into(),
        name: name.into(),
        uid: format!("00000000-0000-4000-8000-{i:012x}"),
        owner_references: owners,
        finalizers: finalizers.iter().map(|f| f.to_string()).collect(),
        deleting: false,
    }
}

/// A blocking reference to `owner`.
fn blocking(owner: &Object) -> OwnerReference {
    OwnerReference {
        api_version: owner.kind.api_version.to_string(),
        kind: owner.kind.kind.to_string(),
        name: owner.name.clone(),
        uid: owner.uid.clone(),
        controller: None,
        block_owner_deletion: Some(true),
    }
}

/// A dependent that once deleted its dependents in the foreground keeps the collector's graph's
/// mark after its `foregroundDeletion` finalizer went, and the cycle heuristic reads the mark: a
/// ConfigMap held by a foreign finalizer, blocking its Pod's foreground deletion, has its
/// references unblocked when it is deleted, because its own dependent (a ConfigMap in another
/// namespace whose reference to it dangles, deleted in the foreground before) bears the mark. The
/// Pod goes. A plan read from the objects alone held the Pod forever.
#[test]
fn a_plan_should_read_the_graphs_mark_of_a_foreground_deletion_that_is_over() {
    let pod = model_object(model::POD, "ns-b", "pod-1", 1, &[], vec![]);
    let config = model_object(
        model::CONFIG_MAP,
        "ns-b",
        "configmap-2",
        2,
        &[HOLD],
        vec![blocking(&pod)],
    );
    // In ns-a its reference names no object: the collector deletes it in the foreground, as its
    // finalizer asks, before the plan.
    let marked = model_object(
        model::CONFIG_MAP,
        "ns-a",
        "configmap-3",
        3,
        &[HOLD, FINALIZER_FOREGROUND],
        vec![blocking(&config)],
    );
    let mut model = Model::new([pod.clone(), config, marked.clone()]);
    model.settle().expect("in the model's region");
    assert!(
        model.deleting_dependents(&marked.uid)
            && !model
                .get(&marked.uid)
                .expect("held")
                .finalizers
                .contains(&FINALIZER_FOREGROUND.to_string())
    );
    let plan = plan_against_model(model, &pod.uid, PropagationPolicy::Foreground).unwrap_or_else(|e| panic!("{e}"));
    let fate = plan.steps.iter().find(|s| s.object.uid == pod.uid).map(|s| &s.fate);
    assert!(matches!(fate, Some(Fate::Removed { .. })), "{:#?}", plan.steps);
}

// ---------------------------------------------------------------------------------------------
// The plan against what the collector then does
// ---------------------------------------------------------------------------------------------

/// A shop: Deployment `web` owns ReplicaSets `rs-a` and `rs-b` (blocking), each owning three
/// Pods (blocking); `rs-a-0` has a second, live owner (ConfigMap `keep`), and `rs-b-2` is held by
/// a finalizer that is not the collector's. Returns the collector and `web`.
async fn shop() -> (Harness, PartialObjectMeta) {
    let config = Config {
        journal: Journal::in_memory(),
        ..Config::default()
    };
    let h = Harness::start_with(SimCluster::new(), config).await;
    let web = h.create(&deployments(), meta("shop", "web", vec![]));
    let keep = h.create(&configmaps(), meta("shop", "keep", vec![]));
    for rs in ["rs-a", "rs-b"] {
        let set = h.create(&replicasets(), meta("shop", rs, vec![blocking_ref_to(&web)]));
        for i in 0..3 {
            let mut pod = meta("shop", &format!("{rs}-{i}"), vec![blocking_ref_to(&set)]);
            if rs == "rs-a" && i == 0 {
                pod.owner_references.push(ref_to(&keep));
            }
            if rs == "rs-b" && i == 2 {
                pod.finalizers.push("example.com/hold".into());
            }
            h.create(&pods(), pod);
        }
    }
    h.settle().await;
    (h, web)
}

/// Where each object went in the journal: the index of the write that removed it (a DELETE that
/// left no finalizer, else the removal of its last collector finalizer).
fn removal_order(journal: &[std::sync::Arc<Entry>], removed: &BTreeSet<String>) -> BTreeMap<String, usize> {
    let mut order = BTreeMap::new();
    for (i, entry) in journal.iter().enumerate() {
        let uid = &entry.object.uid;
        if removed.contains(uid) && matches!(entry.action, JournalAction::Delete | JournalAction::RemoveFinalizer) {
            order.insert(uid.clone(), i);
        }
    }
    order
}

/// The UIDs the journal shows `action` on.
fn journaled(journal: &[std::sync::Arc<Entry>], action: JournalAction) -> BTreeSet<String> {
    journal
        .iter()
        .filter(|e| e.action == action)
        .map(|e| e.object.uid.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_should_agree_with_the_journal_for_every_policy() {
    for policy in POLICIES {
        let (h, web) = shop().await;
        let uid = web.metadata.uid.clone();
        let snapshot = plan::from_graph(h.gc.graph(), &[Uid::parse(&uid)]);
        let planned = plan::simulate(&snapshot, &*h.gc.mapper().load(), std::slice::from_ref(&uid), policy);
        h.delete(&deployments(), &web, support::policy(policy));
        h.settle().await;
        let journal = h.gc.journal().latest(kube_gc::journal::LATEST);

        let with = |pick: fn(&Fate) -> bool| -> BTreeSet<String> {
            planned
                .steps
                .iter()
                .filter(|s| pick(&s.fate) && s.object.uid != uid)
                .map(|s| s.object.uid.clone())
                .collect()
        };
        let deleted = with(|f| matches!(f, Fate::Removed { .. } | Fate::Held { .. }));
        let deleted_by_collector: BTreeSet<String> = journaled(&journal, JournalAction::Delete);
        assert_eq!(deleted, deleted_by_collector, "{policy:?}: DELETEs");
        let expected = if policy == PropagationPolicy::Orphan { 0 } else { 7 };
        assert_eq!(
            deleted.len(),
            expected,
            "{policy:?}: two ReplicaSets and the five Pods not kept"
        );
        // An orphaned reference goes by the orphaning worker's patch, or first by the worker
        // that judges the dependent meanwhile (a removal of refs to owners this collector
        // orphaned): either way the dependent is orphaned.
        let (orphaned_by_judge, kept): (Vec<&std::sync::Arc<Entry>>, Vec<_>) = journal
            .iter()
            .filter(|e| e.action == JournalAction::RemoveOwnerRefs)
            .partition(|e| e.owners.iter().any(|o| o.state == OwnerState::Orphaned));
        let mut orphaned = journaled(&journal, JournalAction::Orphan);
        orphaned.extend(orphaned_by_judge.iter().map(|e| e.object.uid.clone()));
        assert_eq!(
            with(|f| matches!(f, Fate::Orphaned { .. })),
            orphaned,
            "{policy:?}: orphaned"
        );
        assert_eq!(
            with(|f| matches!(f, Fate::Kept { .. })),
            kept.iter().map(|e| e.object.uid.clone()).collect(),
            "{policy:?}: kept by another owner"
        );
        let live: BTreeMap<String, PartialObjectMeta> = [deployments(), replicasets(), pods(), configmaps()]
            .iter()
            .flat_map(|gvr| h.cluster.list_objects(gvr))
            .map(|o| (o.metadata.uid.clone(), o))
            .collect();
        for step in &planned.steps {
            let now = live.get(&step.object.uid);
            let fits = match &step.fate {
                Fate::Removed { .. } => now.is_none(),
                Fate::Held { .. } => now.is_some_and(|o| o.metadata.deletion_timestamp.is_some()),
                Fate::Orphaned { loses } | Fate::Kept { loses, .. } => now.is_some_and(|o| {
                    !o.metadata
                        .owner_references
                        .iter()
                        .any(|r| loses.iter().any(|l| l.uid == r.uid))
                }),
                Fate::Stuck { .. } => now.is_some(),
                Fate::WaitsForPods { .. } => now.is_some_and(|o| o.metadata.deletion_timestamp.is_none()),
            };
            assert!(fits, "{policy:?}: {} planned {:?}, now {now:?}", step.object, step.fate);
        }
        // Every removal the plan orders (an owner before its dependent in the background, a
        // blocking dependent before its owner in the foreground) happened in that order.
        let removed: BTreeSet<String> = planned.removed().map(|s| s.object.uid.clone()).collect();
        let order = removal_order(&journal, &removed);
        let at = |uid: &str| {
            if uid == web.metadata.uid && policy == PropagationPolicy::Background {
                Some(0)
            } else {
                order.get(uid).map(|i| i + 1)
            }
        };
        let wave: BTreeMap<&str, u32> = planned
            .steps
            .iter()
            .filter_map(|s| match s.fate {
                Fate::Removed { wave, .. } => Some((s.object.uid.as_str(), wave)),
                _ => None,
            })
            .collect();
        for step in planned.removed() {
            let Some(owner) = step.via.as_deref().filter(|o| removed.contains(*o)) else {
                continue;
            };
            let (first, then) = if wave[owner] < wave[step.object.uid.as_str()] {
                (owner, step.object.uid.as_str())
            } else {
                (step.object.uid.as_str(), owner)
            };
            assert!(
                at(first).is_some() && at(first) < at(then),
                "{policy:?}: {first} (wave {}) went at {:?}, {then} (wave {}) at {:?}",
                wave[first],
                at(first),
                wave[then],
                at(then)
            );
        }
    }
}

/// The namespaces type.
fn namespaces() -> kube_gc::api::Gvr {
    kube_gc::api::Gvr::new("", "v1", "namespaces")
}

/// What the namespace plan of [`shop`]'s namespace says of each object, by name.
fn namespace_plan(h: &Harness) -> BTreeMap<String, Fate> {
    let (namespace, roots) = plan::namespace_roots(h.gc.graph(), "shop").expect("the graph holds the namespace");
    let snapshot = plan::from_graph(h.gc.graph(), &roots);
    let namespace = namespace.to_string();
    let planned = plan::simulate_namespace(
        &snapshot,
        &*h.gc.mapper().load(),
        &namespace,
        PropagationPolicy::Background,
    );
    planned
        .steps
        .into_iter()
        .map(|s| (format!("{}/{}", s.object.kind, s.object.name), s.fate))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_plan_should_agree_with_the_namespace_controller_and_the_collector() {
    for hold in [false, true] {
        let (h, _) = shop().await;
        let shop_ns = h.create(&namespaces(), meta("", "shop", vec![]));
        // A cluster-scoped object owned by the namespace: the collector's, once the namespace goes.
        h.create(&support::persistentvolumes(), meta("", "pv-1", vec![ref_to(&shop_ns)]));
        if !hold {
            let held = h.cluster.get_object(&pods(), "shop", "rs-b-2").expect("the held pod");
            let body = serde_json::json!({"metadata": {"finalizers": null}});
            h.cluster
                .patch_object(&pods(), "shop", "rs-b-2", kube_gc::api::PatchType::Merge, &body)
                .unwrap_or_else(|e| panic!("release {held:?}: {e}"));
        }
        h.settle().await;
        let fates = namespace_plan(&h);
        h.delete(&namespaces(), &shop_ns, support::policy(PropagationPolicy::Background));
        h.settle().await;
        let journal = h.gc.journal().latest(kube_gc::journal::LATEST);
        let exists =
            |gvr: &kube_gc::api::Gvr, namespace: &str, name: &str| h.cluster.get_object(gvr, namespace, name).ok();

        let wave = |name: &str| match fates.get(name) {
            Some(Fate::Removed { wave, by, .. }) => (*wave, *by),
            other => panic!("hold={hold}: {name} planned {other:?}"),
        };
        let by_namespace = plan::Remover::NamespaceController;
        if !hold {
            // Pods first, the rest once they are gone, the namespace once it is empty, and its
            // dependent by the collector after it.
            let (pods_wave, _) = wave("Pod/rs-a-1");
            for name in ["Pod/rs-a-0", "Pod/rs-a-1", "Pod/rs-b-2"] {
                assert_eq!(wave(name), (pods_wave, by_namespace), "hold={hold}: {name}");
            }
            let (rest_wave, _) = wave("ReplicaSet/rs-a");
            for name in ["Deployment/web", "ReplicaSet/rs-b", "ConfigMap/keep"] {
                assert_eq!(wave(name), (rest_wave, by_namespace), "{name}");
            }
            let (namespace_wave, by) = wave("Namespace/shop");
            let (pv_wave, pv_by) = wave("PersistentVolume/pv-1");
            assert!(pods_wave < rest_wave && rest_wave < namespace_wave && namespace_wave < pv_wave);
            assert_eq!((by, pv_by), (plan::Remover::Request, plan::Remover::Collector));
            assert!(exists(&namespaces(), "", "shop").is_none(), "the namespace went");
            assert!(exists(&deployments(), "shop", "web").is_none());
            assert!(exists(&support::persistentvolumes(), "", "pv-1").is_none());
            let collector_deleted: BTreeSet<String> = journal
                .iter()
                .filter(|e| e.action == JournalAction::Delete)
                .map(|e| e.object.name.clone())
                .collect();
            // The collector's own deletion is there; it may also have raced the namespace
            // controller to objects the plan gives to that controller, but to nothing else.
            assert!(collector_deleted.contains("pv-1"), "{collector_deleted:?}");
            let planned: BTreeSet<String> = fates
                .iter()
                .filter(|(_, f)| matches!(f, Fate::Removed { .. }))
                .map(|(name, _)| name.split_once('/').map_or(name.clone(), |(_, n)| n.to_string()))
                .collect();
            assert!(
                collector_deleted.is_subset(&planned),
                "{collector_deleted:?} ⊄ {planned:?}"
            );
            continue;
        }
        // The held pod holds everything else, and the namespace with it.
        assert!(matches!(
            fates["Pod/rs-b-2"],
            Fate::Held {
                why: plan::Hold::Finalizers { .. }
            }
        ));
        for name in ["Deployment/web", "ReplicaSet/rs-a", "ReplicaSet/rs-b", "ConfigMap/keep"] {
            let Fate::WaitsForPods { pods } = &fates[name] else {
                panic!("{name} planned {:?}", fates[name]);
            };
            assert_eq!(
                pods.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
                ["rs-b-2"],
                "{name}"
            );
        }
        let Fate::Held {
            why: plan::Hold::Contents { left, held },
        } = &fates["Namespace/shop"]
        else {
            panic!("the namespace planned {:?}", fates["Namespace/shop"]);
        };
        assert_eq!(
            (*left, held.len()),
            (5, 1),
            "the held pod and the four objects waiting for it"
        );
        assert!(!fates.contains_key("PersistentVolume/pv-1"), "untouched: {fates:?}");
        assert_eq!(wave("Pod/rs-a-0"), (1, by_namespace));

        let pod = exists(&pods(), "shop", "rs-b-2").expect("held");
        assert!(pod.metadata.deletion_timestamp.is_some());
        assert!(exists(&pods(), "shop", "rs-a-0").is_none());
        for (gvr, name) in [(deployments(), "web"), (replicasets(), "rs-a"), (configmaps(), "keep")] {
            let object = exists(&gvr, "shop", name).expect("waiting for the pod");
            assert!(
                object.metadata.deletion_timestamp.is_none(),
                "{name} is not deleted yet"
            );
        }
        let namespace = exists(&namespaces(), "", "shop").expect("held by its contents");
        assert!(namespace.metadata.deletion_timestamp.is_some());
        assert!(exists(&support::persistentvolumes(), "", "pv-1").is_some());
        assert!(
            journal.iter().all(|e| e.action != JournalAction::Delete),
            "the collector deleted nothing"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// `kube-gc plan` and `kubectl gc plan`, as processes
// ---------------------------------------------------------------------------------------------

/// `kube-gc plan ARGS -n shop` against `server`, as a process: its stdout, which must come from a
/// successful run.
fn plan_command(program: &std::path::Path, server: &support::OwnServer, args: &[&str]) -> String {
    let mut command = std::process::Command::new(program);
    command
        .args(["plan", "-n", "shop", "--kubeconfig"])
        .arg(&server.kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .env("RUST_LOG", "off");
    succeeded(&mut command, &format!("kube-gc plan {args:?}"))
}

/// The stdout of `command`, run within [`KUBECTL_TIMEOUT`], which must succeed.
fn succeeded(command: &mut std::process::Command, what: &str) -> String {
    let run = run_bounded(command, KUBECTL_TIMEOUT);
    assert!(run.status.success(), "{what} failed:\n{}{}", run.stdout, run.stderr);
    run.stdout
}

#[test]
fn kube_gc_plan_should_answer_from_the_collector_and_offline_alike_in_every_format() {
    let server = support::serve_on_own_runtime(SimCluster::new(), kube_gc_sim::http::ServerOptions::default());
    let labelled = |name: &str| ObjectMeta {
        labels: [("app".to_string(), "web".to_string())].into(),
        ..meta("shop", name, vec![])
    };
    let web = create_in(&server.cluster, &deployments(), labelled("web"));
    create_in(&server.cluster, &deployments(), labelled("web-canary"));
    create_in(&server.cluster, &deployments(), meta("shop", "db", vec![]));
    create_in(&server.cluster, &namespaces(), meta("", "shop", vec![]));
    for rs in ["rs-a", "rs-b"] {
        let set = create_in(
            &server.cluster,
            &replicasets(),
            meta("shop", rs, vec![blocking_ref_to(&web)]),
        );
        for i in 0..3 {
            let pod = meta("shop", &format!("{rs}-{i}"), vec![blocking_ref_to(&set)]);
            create_in(&server.cluster, &pods(), pod);
        }
    }
    let endpoints = support::collector_endpoints(&server.runtime, server.addr);
    let collector = format!("http://{endpoints}");
    let program = std::path::PathBuf::from(env!("CARGO_BIN_EXE_kube-gc"));
    let removed = |json: &str| -> BTreeSet<(String, u32)> {
        let answer: PlanAnswer = serde_json::from_str(json).unwrap_or_else(|e| panic!("not a plan ({e}): {json}"));
        answer
            .plan
            .steps
            .iter()
            .filter_map(|s| match s.fate {
                Fate::Removed { wave, .. } => Some((s.object.name.clone(), wave)),
                _ => None,
            })
            .collect()
    };

    let table = plan_command(
        &program,
        &server,
        &["deploy/web", "--collector", &collector, "--cascade", "foreground"],
    );
    let header: Vec<&str> = table.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["WAVE", "ACTION", "OBJECT", "DETAIL"], "{table}");
    assert!(
        table.contains("removed: 9 in 3 waves (Deployment 1, Pod 6, ReplicaSet 2)"),
        "{table}"
    );
    let online = plan_command(
        &program,
        &server,
        &[
            "deploy/web",
            "--collector",
            &collector,
            "--cascade",
            "foreground",
            "-o",
            "json",
        ],
    );
    let offline = plan_command(
        &program,
        &server,
        &["deploy/web", "--offline", "--cascade", "foreground", "-o", "json"],
    );
    assert_eq!(
        removed(&online),
        removed(&offline),
        "the graph's plan and the listing's agree"
    );
    assert!(
        removed(&online).contains(&("web".to_string(), 3)),
        "the Deployment goes last"
    );
    let yaml = plan_command(
        &program,
        &server,
        &["deploy/web", "--offline", "--cascade", "orphan", "-o", "yaml"],
    );
    assert!(yaml.contains("fate: orphaned"), "{yaml}");

    // A label selector's objects, and a whole namespace, from the collector and offline alike.
    for (what, removed_count) in [
        (&["deployments", "-l", "app=web"][..], 10),
        (&["namespace/shop"][..], 12),
    ] {
        let ask = |source: &[&str]| plan_command(&program, &server, &[what, source, &["-o", "json"]].concat());
        let online = ask(&["--collector", &collector]);
        assert_eq!(removed(&online), removed(&ask(&["--offline"])), "{what:?}");
        assert_eq!(removed(&online).len(), removed_count, "{what:?}: {online}");
    }
    let table = plan_command(&program, &server, &["namespace/shop", "--collector", &collector]);
    assert!(table.contains("by the namespace controller"), "{table}");
    assert!(
        table.contains("removed: 12 in 3 waves (Deployment 3, Namespace 1, Pod 6, ReplicaSet 2)"),
        "pods, then the rest, then the namespace:\n{table}"
    );
    let refused = std::process::Command::new(&program)
        .args(["plan", "deploy/web", "-l", "app=web", "--kubeconfig"])
        .arg(&server.kubeconfig)
        .output()
        .expect("kube-gc runs");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("give the kind alone"),
        "{stderr}"
    );

    // As the kubectl plugin, through a link named kubectl-gc on PATH.
    let bin = server.dir.path().join("bin");
    std::fs::create_dir(&bin).expect("a bin directory");
    let link = bin.join("kubectl-gc");
    std::os::unix::fs::symlink(&program, &link).expect("link kubectl-gc");
    if !kubectl_available() {
        return;
    }
    let path = std::env::join_paths(
        std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .expect("a PATH");
    let forms: [(&[&str], usize); 5] = [
        (&["deploy/web", "--cascade", "background"], 9),
        (&["deploy/web", "--cascade", "foreground"], 9),
        (&["deploy/web", "--cascade", "orphan"], 1),
        (&["namespace/shop"], 12),
        (&["deploy", "-l", "app=web"], 10),
    ];
    for (form, removed_count) in forms {
        let mut kubectl = std::process::Command::new("kubectl");
        kubectl
            .args(["gc", "plan", "-n", "shop", "--collector", &collector, "-o", "json"])
            .args(form)
            .env("PATH", &path)
            .env("KUBECONFIG", &server.kubeconfig)
            .env("HOME", server.dir.path().join("home"))
            .env("RUST_LOG", "off");
        let stdout = succeeded(&mut kubectl, &format!("kubectl gc plan {form:?}"));
        assert_eq!(removed(&stdout).len(), removed_count, "{form:?}: {stdout}");
    }
}
