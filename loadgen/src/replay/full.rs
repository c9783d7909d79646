//! `replay --mode full`: the whole collector against the in-memory simulated cluster, its outcome
//! checked against the oracle, kube-gc's reference model ([`kube_gc_sim::model`]).
//!
//! Invariant: the cluster and the model are driven by the same [`Script`]; the outcome is
//! compared once the collector has settled, and the timed part is only the replay of the later
//! events and the collection it causes.
//!
//! # Steps
//!
//! 1. The stream is read into a [`Script`] (initial objects, prelude, actions).
//! 2. Every kind the stream's objects have is served: a built-in type when the simulated cluster
//!    has one, otherwise a custom type (plural: the lowercased kind plus `s`), namespaced when its
//!    first object has a namespace. Kinds that only references name are not served, so those
//!    references stay unresolvable, as they would be on a cluster without their CRD.
//! 3. The initial objects are created (with their UIDs) and the prelude applied.
//! 4. The collector starts (`--partitions`, `--workers`), or with `--shards N` N collectors that
//!    split the cluster as sharded replicas do ([`replicas`](super::replicas)); once their
//!    monitors have synced they are left to settle: garbage present from the start (dangling
//!    owners, invalid cross-namespace references) is collected then.
//! 5. The clock starts; the actions are applied as a user would, as fast as they come; the clock
//!    stops at the first check that finds the collector settled for good (checks are
//!    [`QUIET_CHECK_PERIOD`](kube_gc_sim::simulate::QUIET_CHECK_PERIOD) apart, so the time is late by
//!    at most about one period).
//! 6. The cluster's objects are compared with the model's outcome.
//!
//! "Settled" means: no event in flight, no queued, running or waiting item (in any replica), and
//! no API call by the collector since the previous check, at every check for
//! [`QUIET_FOR`](kube_gc_sim::simulate::QUIET_FOR). Items retrying with backoff may remain (an owner
//! of a kind nobody serves is retried forever); they make no API call.

use super::migration::{self, MigrateOptions, MigrationFigures};
use super::oracle;
use super::replicas::{Replicas, ShardFigures};
use super::script::{Action, Script, Target};
use super::{cpu_time, ReplayOptions};
use crate::progress;
use crate::report::{ApiCallCounts, BucketPercentiles, ReplayedStream, Report};
use anyhow::Context;
use kube_gc::api::layers::{Latency, Layered};
use kube_gc::api::{
    split_api_version, ApiError, ApiResource, ClusterApi, DeleteOptions, Gvr, PatchType, Preconditions, RestMapper,
    StatusReason,
};
use kube_gc::collector::CollectorConfig;
use kube_gc::controller::{Config, GarbageCollector};
use kube_gc::journal::{FileConfig, Journal, JournalConfig};
use kube_gc_sim::model::{differences, Outcome};
use kube_gc_sim::simulate::wait_until_quiet;
use kube_gc_sim::{ApiCalls, SimCluster, TypeDef};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many differences the report lists.
const SHOWN_DIFFERENCES: usize = 10;

/// Actions applied between two yields to the runtime, so that the collector's tasks keep running
/// while a long script is replayed.
const ACTIONS_PER_YIELD: usize = 256;

/// What full mode needs besides the common options.
#[derive(Clone, Debug)]
pub struct FullOptions {
    /// Collector workers.
    pub workers: usize,
    /// How long each wait for the collector may take.
    pub timeout: Duration,
    /// Workers read every item and owner live, as upstream's do (`--verify-with-get`).
    pub verify_with_get: bool,
    /// How long each of the collector's API calls waits before it reaches the cluster.
    pub api_latency: Duration,
    /// The journal file the collector records its writes in, if any (`--journal`).
    pub journal: Option<std::path::PathBuf>,
    /// Collectors splitting the cluster as `kube-gc run --shards auto` replicas (1: unsharded).
    pub shards: usize,
    /// A storage version migration to run during the cascade (`--migrate`).
    pub migrate: Option<MigrateOptions>,
}

/// The collector's view of the cluster: the in-memory one behind `--api-latency`.
pub(super) type Api = Layered<Latency, SimCluster>;

/// Replays `path` into the whole collector; see the module docs.
pub async fn run(path: &Path, options: &ReplayOptions, full: &FullOptions) -> anyhow::Result<Report> {
    let script = Script::read(path, options.skip_bad, options.quiet)?;
    let api = Arc::new(Layered::new(Latency(full.api_latency), SimCluster::new()));
    // The collector calls through the latency; the replay acts on the cluster directly, as a user.
    let cluster = api.inner();
    let types = Types::serve(cluster, &script).await?;
    load(cluster, &types, &script, options.quiet)?;
    let resources = cluster.discover().await.context("reading discovery")?.resources;
    let namespaces: Vec<String> = {
        let mut all: Vec<String> = script.created().map(|o| o.metadata.namespace.clone()).collect();
        all.sort_unstable();
        all.dedup();
        all.retain(|n| !n.is_empty());
        all
    };
    let migrated = match &full.migrate {
        Some(migrate) => {
            let gvr = migration::served(&resources, migrate)?;
            let namespaced = resources.iter().any(|r| r.gvr == gvr && r.namespaced);
            let added = migration::populate(cluster, &gvr, namespaced, &namespaces, migrate.objects)?;
            Some((gvr, migrate.clone(), added))
        }
        None => None,
    };
    let loaded = cluster.object_count();
    let expected = expected_outcome(&resources, &script, options.quiet);
    let partitions = options.partitions.first().copied().unwrap_or(1);
    let config = Config {
        workers: full.workers,
        partitions,
        collector: CollectorConfig {
            verify_with_get: full.verify_with_get,
            ..CollectorConfig::default()
        },
        journal: journal(full.journal.as_deref())?,
        ..Config::default()
    };
    let replicas = Replicas::start(&api, &config, full.shards, namespaces.iter().map(String::as_str)).await;
    let ends = Ends {
        model: (expected.settled, expected.outcome.len()),
        migration: migrated.as_ref().map(|(gvr, options, _)| (&api, gvr, options)),
    };
    let run = drive(&replicas, cluster, &types, &script, (full.timeout, options.quiet), ends).await;
    replicas.shutdown().await;
    let run = run?;
    let mut actual = types.outcome(cluster, &resources);
    // The objects added for a migration are not the stream's, and the model knows nothing of them.
    for uid in migrated.iter().flat_map(|(_, _, added)| added) {
        actual.remove(uid);
    }
    let found = differences(&expected.outcome, &actual);
    let replayed = Report::of(ReplayedStream {
        mode: "full",
        stream: path,
        events: script.events,
        skipped_bad: script.skipped_bad,
        objects: script.added,
        partitions,
    });
    Ok(Report {
        journal: full.journal.as_ref().map(|p| p.display().to_string()),
        workers: Some(full.workers),
        verify_with_get: Some(full.verify_with_get),
        api_latency_ms: Some(full.api_latency.as_secs_f64() * 1e3),
        initial_collected: Some(loaded.saturating_sub(run.settled_objects) as u64),
        outcome_ok: Some(found.is_empty()),
        outcome_differences: found.into_iter().take(SHOWN_DIFFERENCES).collect(),
        oracle_timing_independent: Some(expected.timing_independent),
        shards: Some(run.shards.clone()),
        ..run.report(&script, replayed)
    })
}

/// The journal `--journal` asks for: a file that is never rotated, or none.
fn journal(path: Option<&Path>) -> anyhow::Result<Journal> {
    let Some(path) = path else {
        return Ok(Journal::disabled());
    };
    let file = FileConfig {
        path: path.to_path_buf(),
        max_bytes: u64::MAX,
        max_files: 0,
    };
    let config = JournalConfig {
        file: Some(file),
        ..JournalConfig::default()
    };
    Journal::open(config).with_context(|| format!("opening --journal {}", path.display()))
}

/// Serves the stream's kinds (module docs, step 2) and maps them to resources.
struct Types {
    /// apiVersion and kind → resource.
    gvrs: HashMap<(String, String), Gvr>,
}

impl Types {
    async fn serve(cluster: &SimCluster, script: &Script) -> anyhow::Result<Types> {
        let discovery = cluster.discover().await.context("reading discovery")?;
        let mapper = RestMapper::new(&discovery.resources);
        let mut gvrs = HashMap::new();
        for object in script.created() {
            let key = (object.api_version.clone(), object.kind.clone());
            if gvrs.contains_key(&key) {
                continue;
            }
            let gvr = match mapper.rest_mapping(&key.0, &key.1) {
                Ok(mapping) => mapping.gvr,
                Err(_) => {
                    let (group, version) = split_api_version(&key.0);
                    if let Some(other) = discovery
                        .resources
                        .iter()
                        .find(|r| r.gvr.group == group && r.kind == key.1)
                    {
                        anyhow::bail!(
                            "the stream has {} {} objects, but the simulated cluster serves {} at version {} only",
                            key.0,
                            key.1,
                            key.1,
                            other.gvr.version
                        );
                    }
                    let resource = format!("{}s", key.1.to_lowercase());
                    let namespaced = !object.metadata.namespace.is_empty();
                    cluster.register(TypeDef::new(group, version, &key.1, &resource, namespaced).custom());
                    Gvr::new(group, version, &resource)
                }
            };
            gvrs.insert(key, gvr);
        }
        Ok(Types { gvrs })
    }

    fn gvr(&self, api_version: &str, kind: &str) -> Option<&Gvr> {
        self.gvrs.get(&(api_version.to_string(), kind.to_string()))
    }

    /// Every object of the stream's kinds, by UID, as the model describes it.
    fn outcome(&self, cluster: &SimCluster, served: &[ApiResource]) -> Outcome {
        let mut resources: Vec<&Gvr> = self.gvrs.values().collect();
        resources.sort();
        resources.dedup();
        let objects: Vec<_> = resources
            .into_iter()
            .flat_map(|gvr| cluster.list_objects(gvr))
            .collect();
        oracle::outcome(&oracle::model(served), &objects)
    }
}

/// Creates the initial objects and applies the prelude, before any collector runs.
fn load(cluster: &SimCluster, types: &Types, script: &Script, quiet: bool) -> anyhow::Result<()> {
    let bar = progress::bar(script.initial.len() as u64, quiet, "loading");
    for object in &script.initial {
        let gvr = types
            .gvr(&object.api_version, &object.kind)
            .context("an initial object of an unserved kind")?;
        cluster.create(gvr, object.clone()).with_context(|| {
            let m = &object.metadata;
            format!("creating {} {}/{} ({})", object.kind, m.namespace, m.name, m.uid)
        })?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    for action in &script.prelude {
        apply(cluster, types, action).with_context(|| format!("applying {action:?} before the collector starts"))?;
    }
    Ok(())
}

/// What an action did to the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effect {
    /// It was carried out; the object is still there.
    Applied,
    /// A delete removed the object at once (no finalizer left): the user, not the collector,
    /// removed it.
    Removed,
    /// Its object was already gone (or replaced under the same name).
    Missed,
}

/// Applies one action as a user would; errors other than "the object is gone" are returned.
fn apply(cluster: &SimCluster, types: &Types, action: &Action) -> Result<Effect, ApiError> {
    match action {
        Action::Create(object) => match types.gvr(&object.api_version, &object.kind) {
            Some(gvr) => cluster.create(gvr, (**object).clone()).map(|_| Effect::Applied),
            None => Ok(Effect::Missed),
        },
        Action::Delete { target, policy } => on_target(types, target, |gvr| {
            let options = DeleteOptions {
                preconditions: Some(Preconditions {
                    uid: Some(target.uid.clone()),
                    resource_version: None,
                }),
                propagation_policy: Some(*policy),
                ..Default::default()
            };
            cluster.delete_object(gvr, &target.namespace, &target.name, &options)?;
            let gone = cluster
                .get_object(gvr, &target.namespace, &target.name)
                .map_or(true, |o| o.metadata.uid != target.uid);
            Ok(if gone { Effect::Removed } else { Effect::Applied })
        }),
        Action::SetOwners { target, owners } => on_target(types, target, |gvr| {
            // The UID in the body makes the patch fail (422) rather than land on a namesake.
            let body = serde_json::json!({"metadata": {"uid": target.uid, "ownerReferences": owners}});
            cluster
                .patch_object(gvr, &target.namespace, &target.name, PatchType::Merge, &body)
                .map(|_| Effect::Applied)
        }),
    }
}

/// Runs `act` on the target's resource; an object that is gone is a miss, not an error.
fn on_target(
    types: &Types,
    target: &Target,
    act: impl FnOnce(&Gvr) -> Result<Effect, ApiError>,
) -> Result<Effect, ApiError> {
    let Some(gvr) = types.gvr(&target.api_version, &target.kind) else {
        return Ok(Effect::Missed);
    };
    match act(gvr) {
        // Gone (404), or another object holds its name now: the UID precondition fails with 409
        // on a delete and 422 on a patch.
        Err(e)
            if matches!(
                e.reason(),
                Some(StatusReason::NotFound | StatusReason::Conflict | StatusReason::Invalid)
            ) =>
        {
            Ok(Effect::Missed)
        }
        other => other,
    }
}

/// What the collector did with the script.
struct Run {
    initial_settle: Duration,
    settled_objects: usize,
    converge: Duration,
    /// CPU time of the whole process (collector and simulated cluster) from the first action to
    /// the end of the settle.
    converge_cpu: Duration,
    collected: u64,
    removed: u64,
    missed: u64,
    failed: u64,
    calls: (ApiCalls, ApiCalls),
    queue_wait: BucketPercentiles,
    attempt: BucketPercentiles,
    /// Each replica's part once the first settle is over.
    shards: Vec<ShardFigures>,
    /// From the first action until the cluster held what the model ends with.
    cascade: Option<Duration>,
    /// `--migrate`: what the migration came to.
    migration: Option<MigrationFigures>,
}

impl Run {
    /// `replayed` with the run's own figures.
    fn report(&self, script: &Script, replayed: Report) -> Report {
        let (before, after) = self.calls;
        let calls = ApiCallCounts {
            get: after.get - before.get,
            patch: after.patch - before.patch,
            delete: after.delete - before.delete,
            list: after.list - before.list,
            watch: after.watch - before.watch,
        };
        let elapsed = self.converge.as_secs_f64();
        Report {
            elapsed_s: elapsed,
            initial_settle_s: Some(self.initial_settle.as_secs_f64()),
            actions: Some(script.actions.len() as u64),
            actions_missed: Some(self.missed),
            actions_failed: Some(self.failed),
            actions_removed: Some(self.removed),
            objects_collected: Some(self.collected),
            collected_per_sec: Some(self.collected as f64 / elapsed.max(f64::MIN_POSITIVE)),
            converge_cpu_s: Some(self.converge_cpu.as_secs_f64()),
            api_calls_per_collected_object: (self.collected > 0)
                .then(|| (calls.get + calls.patch + calls.delete) as f64 / self.collected as f64),
            api_calls: Some(calls),
            queue_wait_ns_le: Some(self.queue_wait),
            attempt_to_delete_ns_le: Some(self.attempt),
            cascade_s: self.cascade.map(|d| d.as_secs_f64()),
            cascade_collected_per_sec: self
                .cascade
                .map(|d| self.collected as f64 / d.as_secs_f64().max(f64::MIN_POSITIVE)),
            migration: self.migration.clone(),
            ..replayed
        }
    }
}

/// Steps 4 and 5 of the module docs.
/// What tells the cascade's end, and the migration to run beside it.
struct Ends<'a> {
    /// The model's object counts: once settled before the actions, and at the end.
    model: (usize, usize),
    /// `--migrate`: the collector's API, the resource and the migration's options.
    migration: Option<(&'a Arc<Api>, &'a Gvr, &'a MigrateOptions)>,
}

async fn drive(
    replicas: &Replicas,
    cluster: &SimCluster,
    types: &Types,
    script: &Script,
    (timeout, quiet): (Duration, bool),
    ends: Ends<'_>,
) -> anyhow::Result<Run> {
    let started = Instant::now();
    if !replicas.wait_for_sync(timeout).await {
        anyhow::bail!("the collector's monitors did not sync within {timeout:?}");
    }
    let initial_settle = settle(replicas, cluster, timeout, quiet).await? - started;
    let shards = replicas.figures();
    let settled_objects = cluster.object_count();
    // Objects the model does not hold (namespaces, the objects to migrate) stay as they are.
    let (model_settled, model_end) = ends.model;
    let end_objects = (settled_objects + model_end).saturating_sub(model_settled);
    let calls_before = cluster.api_calls();
    let (wait_before, work_before) = replicas.attempt_to_delete_histograms();
    let started = match ends.migration {
        Some((api, gvr, options)) => Some(migration::begin(cluster, api, replicas, gvr, options)?),
        None => None,
    };
    let end_objects = end_objects + usize::from(started.is_some());
    let began = Instant::now();
    let cpu_before = cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID);
    let replayed = replay_actions(cluster, types, &script.actions).await;
    // After the last action the count only falls, to where the model ends.
    let cascade = migration::cascade_ends(cluster, end_objects, (began, timeout), || {
        // Replicas publish their reports as they go, not only once quiet: a shard's Foreground or
        // Orphan owner waits for the others' reports before it goes.
        replicas.exchange_reports();
        if let Some(started) = &started {
            migration::notify_progress(cluster, started);
        }
    })
    .await;
    let migration = match started {
        Some(started) => Some(migration::finish(cluster, replicas, started, timeout).await?),
        None => None,
    };
    let converge = settle(replicas, cluster, timeout, quiet).await? - began;
    let converge_cpu = cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID).saturating_sub(cpu_before);
    let (wait_after, work_after) = replicas.attempt_to_delete_histograms();
    // The migration object is the replay's own, not a survivor of the cascade.
    let remaining = cluster.object_count() as u64 - u64::from(migration.is_some());
    Ok(Run {
        initial_settle,
        settled_objects,
        converge,
        converge_cpu,
        collected: (settled_objects as u64 + replayed.created).saturating_sub(remaining + replayed.removed_by_user),
        removed: replayed.removed_by_user,
        missed: replayed.missed,
        failed: replayed.failed,
        calls: (calls_before, cluster.api_calls()),
        queue_wait: BucketPercentiles::between(&wait_before, &wait_after),
        attempt: BucketPercentiles::between(&work_before, &work_after),
        shards,
        cascade,
        migration,
    })
}

/// What replaying the actions did, as far as counting collected objects goes.
#[derive(Default)]
struct Replayed {
    created: u64,
    removed_by_user: u64,
    missed: u64,
    failed: u64,
}

/// Applies the actions in order, yielding now and then so the collector keeps up; failures are
/// counted and the first few printed.
async fn replay_actions(cluster: &SimCluster, types: &Types, actions: &[Action]) -> Replayed {
    let mut r = Replayed::default();
    for (i, action) in actions.iter().enumerate() {
        match apply(cluster, types, action) {
            Ok(Effect::Removed) => r.removed_by_user += 1,
            Ok(Effect::Applied) => r.created += u64::from(matches!(action, Action::Create(_))),
            Ok(Effect::Missed) => r.missed += 1,
            Err(e) => {
                r.failed += 1;
                if r.failed <= SHOWN_DIFFERENCES as u64 {
                    eprintln!("loadgen: warning: replaying {action:?}: {e}");
                }
            }
        }
        if i % ACTIONS_PER_YIELD == ACTIONS_PER_YIELD - 1 {
            tokio::task::yield_now().await;
        }
    }
    r
}

/// Waits until the collector has settled (module docs); returns when it was first seen settled
/// in the final run of checks, which is within one check period of when it really settled.
async fn settle(replicas: &Replicas, cluster: &SimCluster, timeout: Duration, quiet: bool) -> anyhow::Result<Instant> {
    let mut last_calls = None;
    let mut settled_since = None;
    let settled = |_: &GarbageCollector<Api>| {
        let calls = Some(cluster.api_calls().total());
        let replicas_idle = replicas.exchange_and_check();
        let idle = std::mem::replace(&mut last_calls, calls) == calls && replicas_idle;
        settled_since = if idle {
            settled_since.or(Some(Instant::now()))
        } else {
            None
        };
        idle
    };
    if !wait_until_quiet(replicas.first(), timeout, !quiet, settled).await {
        anyhow::bail!("the collector did not settle within {timeout:?}");
    }
    settled_since.context("settled without a settled check")
}

/// The model's outcome for the script, and whether it is the same under both extremes of timing.
pub struct Expected {
    /// How many objects the model holds once settled, before the actions.
    pub settled: usize,
    /// Where the cluster must end.
    pub outcome: Outcome,
    /// Whether settling after each action ends in the same place.
    pub timing_independent: bool,
}

/// Settles the model, serving `resources`, on the initial objects, then applies the actions all
/// at once and settles (what a replay faster than the collector sees), and compares with settling
/// after each action.
pub fn expected_outcome(resources: &[ApiResource], script: &Script, quiet: bool) -> Expected {
    let spinner = progress::spinner(quiet);
    spinner.set_message("computing the expected outcome");
    let mut start = oracle::model(resources);
    for object in &script.initial {
        oracle::create(&mut start, object);
    }
    for action in &script.prelude {
        oracle::apply(&mut start, action);
    }
    start.settle_in_one_order();
    let settled = start.outcome().len();
    let mut stepwise = start.clone();
    let mut burst = start;
    for action in &script.actions {
        oracle::apply(&mut burst, action);
        oracle::apply(&mut stepwise, action);
        stepwise.settle_in_one_order();
    }
    burst.settle_in_one_order();
    let outcome = burst.outcome();
    let timing_independent = outcome == stepwise.outcome();
    spinner.finish_and_clear();
    Expected {
        settled,
        outcome,
        timing_independent,
    }
}
