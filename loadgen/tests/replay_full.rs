//! `replay --mode full`: streams read as scripts, the collector's outcome against the oracle
//! (kube-gc's reference model), and the replay's expected outcome against the model checked in
//! every order.

use indicatif::ProgressBar;
use kube_gc::api::{ApiResource, Gvr, PropagationPolicy};
use kube_gc::journal::{Action as Write, Source};
use kube_gc_sim::model;
use loadgen::generate::{generate, Amount, Preset, Summary, Topology};
use loadgen::replay::full::{self, FullOptions};
use loadgen::replay::migration::MigrateOptions;
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
    replay_journaled(path, verify_with_get, None)
}

/// [`replay_full`], the collector recording its writes in `journal`.
fn replay_journaled(path: &Path, verify_with_get: bool, journal: Option<PathBuf>) -> Report {
    replay_with(path, verify_with_get, journal, 1)
}

/// [`replay_journaled`] by `shards` collectors splitting the cluster.
fn replay_with(path: &Path, verify_with_get: bool, journal: Option<PathBuf>, shards: usize) -> Report {
    replay_migrating(path, (verify_with_get, journal, shards), None)
}

/// [`replay_with`], with a storage version migration beside the cascade when `migrate` says so.
fn replay_migrating(
    path: &Path,
    (verify_with_get, journal, shards): (bool, Option<PathBuf>, usize),
    migrate: Option<MigrateOptions>,
) -> Report {
    let options = ReplayOptions {
        partitions: vec![2],
        segment_events: loadgen::replay::builder::SEGMENT,
        skip_bad: false,
        quiet: true,
    };
    let full = FullOptions {
        workers: 20,
        timeout: Duration::from_secs(120),
        verify_with_get,
        api_latency: Duration::ZERO,
        journal,
        shards,
        migrate,
    };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(full::run(path, &options, &full)).expect("replay")
}

/// A stream generated from `topology` with `seed`, in a directory of its own (kept alive by the
/// returned guard), and what the generator made.
fn stream_of(topology: &Topology, seed: u64) -> (tempfile::TempDir, PathBuf, Summary) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("stream.jsonl.zst");
    let mut writer = StreamWriter::create(&path).expect("create");
    let summary = generate(topology, seed, &mut writer, &ProgressBar::hidden()).expect("generate");
    writer.finish().expect("finish");
    (dir, path, summary)
}

fn assert_outcome_ok(report: &Report) {
    assert_eq!(report.outcome_ok, Some(true), "{:#?}", report.outcome_differences);
    assert_eq!(report.oracle_timing_independent, Some(true));
    assert!(
        report.cascade_s.is_some(),
        "the cluster should reach the model's object count before the timeout"
    );
}

/// The objects the collector or the user's deletes removed after the first later event: the same
/// whichever of the two comes first to an object both would remove.
fn collected_or_removed(report: &Report) -> Option<u64> {
    Some(report.objects_collected? + report.actions_removed?)
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
    let (_dir, path, summary) = stream_of(&Preset::Small.topology(), 11);
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

/// A storage version migration beside the cascade rewrites every ConfigMap, the ones added for it
/// and the stream's, and changes nothing of the cascade's outcome; the cascade's own time is
/// reported with and without it.
#[test]
fn a_migration_beside_the_cascade_should_rewrite_every_object_and_change_no_outcome() {
    let (_dir, path, _) = stream_of(&Preset::Small.topology(), 11);
    let alone = replay_with(&path, false, None, 1);
    assert_outcome_ok(&alone);
    assert!(alone.cascade_s.is_some_and(|s| s > 0.0) && alone.migration.is_none());
    let migrate = MigrateOptions {
        resource: "configmaps".parse().expect("a resource"),
        objects: 2000,
        qps: 0.0,
    };
    let beside = replay_migrating(&path, (false, None, 1), Some(migrate));
    assert_outcome_ok(&beside);
    assert_eq!(collected_or_removed(&beside), collected_or_removed(&alone));
    assert!(beside.cascade_s.is_some(), "the cascade's end was seen");
    let migration = beside.migration.expect("the migration's figures");
    assert_eq!(migration.stale_after, 0, "{migration:?}");
    assert!(
        migration.rewritten >= 2000 && migration.rewritten as usize <= migration.objects,
        "the added ones and at most the rest, once: {migration:?}"
    );
}

/// Three sharded collectors end where one does, on a cluster whose cluster-scoped owners (Fleets)
/// hold ConfigMaps across the namespaces and are deleted in every policy: the owners' shards
/// wait for the others' reports before they let a Foreground or Orphan owner go.
#[test]
fn three_sharded_collectors_should_end_as_one_does_each_holding_part_of_the_graph() {
    let (_dir, path, _) = stream_of(&Preset::Small.topology(), 11);
    let one = replay_with(&path, false, None, 1);
    assert_outcome_ok(&one);
    let whole = &one.shards.as_ref().expect("the collector's figures")[0];
    assert_eq!(
        (whole.hash_share, whole.namespaces),
        (1.0, Preset::Small.topology().namespaces)
    );
    let three = replay_with(&path, false, None, 3);
    assert_outcome_ok(&three);
    assert_eq!(
        (three.initial_collected, collected_or_removed(&three)),
        (one.initial_collected, collected_or_removed(&one))
    );
    let shards = three.shards.expect("the replicas' figures");
    assert_eq!(shards.len(), 3);
    let share: f64 = shards.iter().map(|s| s.hash_share).sum();
    assert!(
        (share - 1.0).abs() < 1e-9,
        "the ranges cover the hash space once: {share}"
    );
    assert_eq!(
        shards.iter().map(|s| s.namespaces).sum::<usize>(),
        Preset::Small.topology().namespaces
    );
    let nodes: Vec<u64> = shards.iter().map(|s| s.graph_nodes).collect();
    let all = whole.graph_nodes;
    assert!(
        nodes.iter().all(|&n| n > all / 10 && n < all * 2 / 3),
        "each replica holds a part of the {all} nodes one collector holds: {nodes:?}"
    );
}

/// DESIGN §5: at most 1.05 API calls per collected object in a Background cascade, where
/// upstream's pattern (`verify_with_get`) spends about two.
#[test]
fn a_background_cascade_should_cost_one_api_call_per_collected_object() {
    let topology = Topology {
        churn: 0,
        delete_background: Amount::Share(0.2),
        delete_foreground: Amount::Count(0),
        delete_orphan: Amount::Count(0),
        ..Preset::Small.topology()
    };
    let (_dir, path, _) = stream_of(&topology, 3);
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

#[test]
fn a_journaled_replay_should_record_one_line_per_write_the_collector_sent() {
    let (dir, path, _) = stream_of(&Preset::Small.topology(), 5);
    let journal = dir.path().join("journal.jsonl");
    let report = replay_journaled(&path, false, Some(journal.clone()));
    assert_outcome_ok(&report);
    let lines = kube_gc::journal::read(&journal).expect("the journal");
    let calls = report.api_calls.expect("API calls counted");
    let sent = |actions: &[Write]| lines.iter().filter(|l| actions.contains(&l.action)).count() as u64;
    // The report counts the calls of the replayed actions; before them, the garbage the stream
    // starts with was collected, one DELETE each.
    let initial = report.initial_collected.expect("counted");
    assert_eq!(sent(&[Write::Delete]), calls.delete + initial, "one line per DELETE");
    let patches = [
        Write::Orphan,
        Write::RemoveOwnerRefs,
        Write::UnblockOwnerRefs,
        Write::RemoveFinalizer,
    ];
    assert_eq!(sent(&patches), calls.patch, "one line per PATCH");
    assert!(calls.delete > 0 && calls.patch > 0, "{calls:?}");
    assert!(lines.iter().all(|l| l.source == Source::Sent && l.answer.is_some()));
}

/// The reference model's types, as a discovery document would list them.
fn model_resources() -> Vec<ApiResource> {
    model::KINDS
        .iter()
        .map(|k| ApiResource {
            gvr: Gvr::new(&k.group, k.api_version.rsplit('/').next().unwrap_or("v1"), &k.resource),
            kind: k.kind.to_string(),
            namespaced: k.namespaced,
            verbs: ["get", "list", "watch", "delete"].map(String::from).to_vec(),
            preferred: true,
        })
        .collect()
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

/// The replay settles the model in one order, visiting only what changed; on streams small
/// enough to try every order, it must end where the model checked in every order does, which
/// also shows the generator keeps these streams in the model's region.
#[test]
fn the_replays_expected_outcome_should_be_the_models_checked_in_every_order_on_tiny_streams() {
    for seed in 1..=6 {
        let script = tiny(seed);
        let expected = full::expected_outcome(&model_resources(), &script, true);
        assert!(expected.timing_independent, "seed {seed}");
        let initial = script.initial.iter().map(|o| {
            let kind = model::KINDS
                .into_iter()
                .find(|k| k.api_version == o.api_version && k.kind == o.kind);
            model::Object::of(kind.expect("a kind the model serves"), o)
        });
        let mut checked = model::Model::new(initial);
        checked
            .settle()
            .expect("the initial objects settle in the model's region");
        for action in &script.actions {
            let Action::Delete { target, policy } = action else {
                panic!("only deletions without churn: {action:?}");
            };
            checked.apply(&model::Action::Delete {
                uid: target.uid.clone(),
                policy: Some(*policy),
            });
        }
        checked
            .settle()
            .unwrap_or_else(|e| panic!("seed {seed}: out of the model's region: {e}"));
        let differences = model::differences(&checked.outcome(), &expected.outcome);
        assert!(differences.is_empty(), "seed {seed}: {differences:#?}");
    }
}
