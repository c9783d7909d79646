//! `replay --mode full`: streams read as scripts, the collector's outcome against the oracle, and
//! the oracle against the reference model of the core's differential tests.

#[path = "../../tests/it/support/model.rs"]
#[allow(dead_code)] // the differential tests use more of the model than this file does
mod model;

use indicatif::ProgressBar;
use kube_gc::api::{ApiResource, Gvr, PropagationPolicy, RestMapper};
use loadgen::generate::{generate, Amount, Preset, Topology};
use loadgen::replay::full::{self, FullOptions};
use loadgen::replay::oracle::Oracle;
use loadgen::replay::script::{Action, Script};
use loadgen::replay::ReplayOptions;
use loadgen::report::Report;
use loadgen::stream::StreamWriter;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// Replays `path` with the collector's default fast path, or with `verify_with_get`.
fn replay_full(path: &Path, verify_with_get: bool) -> Report {
    let options = ReplayOptions {
        partitions: vec![2],
        skip_bad: false,
        quiet: true,
    };
    let full = FullOptions {
        workers: 20,
        timeout: Duration::from_secs(120),
        verify_with_get,
        api_latency: Duration::ZERO,
    };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(full::run(path, &options, &full)).expect("replay")
}

fn assert_outcome_ok(report: &Report) {
    assert_eq!(report.outcome_ok, Some(true), "{:#?}", report.outcome_differences);
    assert_eq!(report.oracle_timing_independent, Some(true));
}

#[test]
fn the_independent_stream_should_read_as_its_initial_objects_and_44_user_actions() {
    let script = Script::read(&data("independent-small.jsonl"), false, true).expect("read");
    assert_eq!(script.initial.len(), 180);
    assert!(script.prelude.is_empty());
    // Of the 50 later events, six end deletions already replayed (finalizers removed, then the
    // object gone): they stand for no user action.
    assert_eq!((script.actions.len(), script.ignored), (44, 6));
    let Action::Delete { target, policy } = &script.actions[0] else {
        panic!(
            "the first later event is a foreground deletion: {:?}",
            script.actions[0]
        );
    };
    assert_eq!(
        (target.name.as_str(), *policy),
        ("app-003", PropagationPolicy::Foreground)
    );
}

#[test]
fn full_replay_of_the_independent_streams_should_end_as_the_oracle_expects() {
    for name in ["independent-small.jsonl", "independent-small.kubectl.json"] {
        for verify_with_get in [false, true] {
            let report = replay_full(&data(name), verify_with_get);
            assert_outcome_ok(&report);
            assert_eq!((report.objects, report.actions), (180, Some(44)), "{name}");
        }
    }
}

#[test]
fn full_replay_of_the_small_preset_should_end_as_the_oracle_expects() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("small.jsonl.zst");
    let mut writer = StreamWriter::create(&path).expect("create");
    let summary = generate(&Preset::Small.topology(), 11, &mut writer, &ProgressBar::hidden()).expect("generate");
    writer.finish().expect("finish");
    for verify_with_get in [false, true] {
        let report = replay_full(&path, verify_with_get);
        assert_outcome_ok(&report);
        let special = |name: &str| summary.special[name] as u64;
        assert_eq!(
            report.initial_collected,
            Some(special("dangling") + special("cross_namespace")),
            "garbage from the start: pods of absent owners, config maps naming another namespace's owner"
        );
        assert!(report.objects_collected.is_some_and(|n| n > 0));
        assert_eq!(report.actions_failed, Some(0));
    }
}

/// DESIGN §5: at most 1.05 API calls per collected object in a Background cascade, where
/// upstream's pattern (`verify_with_get`) spends about two.
#[test]
fn a_background_cascade_should_cost_one_api_call_per_collected_object() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("small-background.jsonl.zst");
    let topology = Topology {
        churn: 0,
        delete_background: Amount::Share(0.2),
        delete_foreground: Amount::Count(0),
        delete_orphan: Amount::Count(0),
        ..Preset::Small.topology()
    };
    let mut writer = StreamWriter::create(&path).expect("create");
    generate(&topology, 3, &mut writer, &ProgressBar::hidden()).expect("generate");
    writer.finish().expect("finish");
    let per_object = |verify_with_get: bool| {
        let report = replay_full(&path, verify_with_get);
        assert_outcome_ok(&report);
        report.api_calls_per_collected_object.expect("objects were collected")
    };
    let (fast, upstream) = (per_object(false), per_object(true));
    assert!(fast <= 1.05, "fast path: {fast:.3} calls per collected object");
    assert!(
        upstream >= 1.9,
        "upstream's pattern: {upstream:.3} calls per collected object"
    );
}

/// Served types of the reference model, as a discovery document would list them.
fn model_mapper() -> RestMapper {
    let resources: Vec<ApiResource> = model::KINDS
        .iter()
        .map(|k| ApiResource {
            gvr: Gvr::new(k.group, k.api_version.rsplit('/').next().unwrap_or("v1"), k.resource),
            kind: k.kind.to_string(),
            namespaced: k.namespaced,
            verbs: ["get", "list", "watch", "delete"].map(String::from).to_vec(),
            preferred: true,
        })
        .collect();
    RestMapper::new(&resources)
}

/// A stream small enough for the model, with every kind it serves and every policy; no churn,
/// whose owner changes the model's actions cannot express.
fn tiny(seed: u64) -> Script {
    let topology = Topology {
        namespaces: 2,
        deployments: 3,
        replicasets: 2,
        pods: 2,
        jobs: 0,
        chains: 0,
        cluster_owners: 0,
        multi_owner: 2,
        dangling: 2,
        cross_namespace: 1,
        cycles: 2,
        pods_before_owner: 0.2,
        churn: 0,
        delete_background: Amount::Count(2),
        delete_foreground: Amount::Count(2),
        delete_orphan: Amount::Count(2),
        ..Preset::Small.topology()
    };
    let mut events = Vec::new();
    generate(&topology, seed, &mut events, &ProgressBar::hidden()).expect("generate");
    Script::from_events(events)
}

fn model_object(object: &kube_gc::api::PartialObjectMeta) -> model::Object {
    let m = &object.metadata;
    model::Object {
        kind: model::served(&object.api_version, &object.kind).expect("a kind the model serves"),
        namespace: m.namespace.clone(),
        name: m.name.clone(),
        uid: m.uid.clone(),
        owner_references: m.owner_references.clone(),
        finalizers: m.finalizers.clone(),
        deleting: false,
    }
}

#[test]
fn oracle_should_agree_with_the_reference_model_on_tiny_generated_streams() {
    for seed in 1..=6 {
        let script = tiny(seed);
        let mut model = model::Model::new(script.initial.iter().map(model_object));
        let mut oracle = Oracle::new(model_mapper());
        for object in &script.initial {
            oracle.create(object);
        }
        model
            .settle()
            .expect("the initial objects settle in the model's region");
        oracle.settle();
        for action in &script.actions {
            let Action::Delete { target, policy } = action else {
                panic!("only deletions without churn: {action:?}");
            };
            model.apply(&model::Action::Delete {
                uid: target.uid.clone(),
                policy: Some(*policy),
            });
            oracle.apply(action);
        }
        model
            .settle()
            .unwrap_or_else(|e| panic!("seed {seed}: out of the model's region: {e}"));
        oracle.settle();
        let expected = model.outcome();
        let actual = oracle.outcome();
        assert!(
            expected.keys().eq(actual.keys()),
            "seed {seed}: the same objects remain"
        );
        for (uid, e) in &expected {
            let a = &actual[uid];
            assert_eq!(
                (e.deleting, &e.finalizers, &e.owner_references),
                (a.deleting, &a.finalizers, &a.owners),
                "seed {seed}: {}",
                e.display()
            );
        }
    }
}
