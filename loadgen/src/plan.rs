//! `loadgen plan`: how long a running collector takes to plan a large cascade (`kube-gc plan`,
//! `/debug/plan`), and what asking for plans in a loop costs its graph builders.
//!
//! A simulator (`kube-gc sim-apiserver --preset P`, 1M objects for `1m`) and a collector start
//! as for `loadgen sync`. Then, over HTTP as a user would:
//!
//! 1. a cascade of about `cascade` objects is created in namespace `plan-bench`: one Deployment,
//!    ReplicaSets of 1 000 Pods each, every reference blocking, and the collector's graph is
//!    left to settle;
//! 2. the plan of deleting that Deployment in the foreground is asked for [`QUIET_PLANS`] times
//!    on the quiet collector;
//! 3. two phases of equal work follow, each deleting `deletions` of the preset's Deployments
//!    (Background) and timing the collector's graph builders until their event counter
//!    (`kube_gc_graph_events_total`) stops rising: the first alone, the second while a loop
//!    asks for the plan one request after the other.
//!
//! A phase's throughput is its graph events over the time from its first DELETE to its last
//! event; each plan's time is the wall time of the whole answer, as `kube-gc plan` waits for it,
//! beside the time the collector reports for the play itself. Every wait is bounded.

use crate::sync::{create_all, Pair, SyncOptions, CONCURRENCY, POLL_EVERY};
use anyhow::{bail, Context};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::Resource;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The namespace of the planned cascade.
const NAMESPACE: &str = "plan-bench";
/// Pods per ReplicaSet of the cascade.
const PODS_PER_SET: usize = 1000;
/// Plans asked for on the quiet collector.
pub const QUIET_PLANS: usize = 5;
/// How long the event counter must stay still for a phase to be over.
const STILL: Duration = Duration::from_secs(2);

/// One plan's answer, timed.
#[derive(Clone, Debug, PartialEq)]
pub struct Timed {
    /// From the request to the whole answer read.
    pub wall: Duration,
    /// The collector's own time for the snapshot and the play (the answer's `seconds`).
    pub play: f64,
    /// Objects the plan reached.
    pub steps: usize,
}

/// One phase of deletions.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    /// Graph events the builders applied.
    pub events: u64,
    /// From the first DELETE to the last event.
    pub took: Duration,
    /// Plans answered during it.
    pub plans: Vec<Timed>,
}

impl Phase {
    /// Graph events a second.
    pub fn throughput(&self) -> f64 {
        self.events as f64 / self.took.as_secs_f64().max(1e-9)
    }
}

/// What one run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanRun {
    /// Objects the simulator served at its start.
    pub objects: u64,
    /// Objects of the planned cascade.
    pub cascade: usize,
    /// Plans on the quiet collector.
    pub quiet: Vec<Timed>,
    /// The deletions alone.
    pub alone: Phase,
    /// The same deletions while plans are asked for in a loop.
    pub with_plans: Phase,
}

/// Runs the measure of the module docs.
pub fn measure(options: &SyncOptions, cascade: usize, deletions: usize) -> anyhow::Result<PlanRun> {
    let Pair {
        mut simulator,
        mut collector,
        endpoints,
        objects,
        runtime,
        client,
    } = Pair::start(options, "plan")?;
    let deadline = Instant::now() + options.timeout;
    let (root, created) = runtime.block_on(create_cascade(&client, cascade))?;
    let victims = runtime.block_on(preset_deployments(&client, 2 * deletions))?;
    if victims.len() < 2 * deletions {
        bail!(
            "the preset holds {} Deployments, fewer than the {} two phases delete",
            victims.len(),
            2 * deletions
        );
    }
    crate::hostile::settled_nodes(&mut collector, &mut simulator, endpoints, deadline)?;
    let path = format!("/debug/plan?uid={root}&policy=foreground");
    let quiet = (0..QUIET_PLANS)
        .map(|_| ask(endpoints, &path))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (first, second) = victims.split_at(deletions);
    let phase = |victims: &[(String, String)], plans: bool| {
        run_phase(
            &runtime,
            (&client, endpoints),
            victims,
            plans.then_some(path.as_str()),
            deadline,
        )
    };
    let alone = phase(first, false)?;
    let with_plans = phase(second, true)?;
    collector.check_alive()?;
    Ok(PlanRun {
        objects,
        cascade: created,
        quiet,
        alone,
        with_plans,
    })
}

/// Creates the cascade of step 1: returns its Deployment's UID and how many objects it holds.
async fn create_cascade(client: &kube::Client, objects: usize) -> anyhow::Result<(String, usize)> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: named(NAMESPACE, None),
        ..Namespace::default()
    };
    namespaces.create(&PostParams::default(), &namespace).await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let web = Deployment {
        metadata: named("web", None),
        ..Deployment::default()
    };
    let web = deployments.create(&PostParams::default(), &web).await?;
    let sets = objects.div_ceil(PODS_PER_SET).max(1);
    let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), NAMESPACE);
    let owner = blocking_ref(&web)?;
    let sets = (0..sets).map(|i| ReplicaSet {
        metadata: named(&format!("web-{i:04}"), Some(owner.clone())),
        ..ReplicaSet::default()
    });
    let sets = create_all(&replicasets, sets)
        .await
        .context("creating the cascade's ReplicaSets")?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let mut made = Vec::with_capacity(sets.len() * PODS_PER_SET);
    for set in &sets {
        let owner = blocking_ref(set)?;
        let name = set.metadata.name.clone().unwrap_or_default();
        made.extend((0..PODS_PER_SET).map(|i| Pod {
            metadata: named(&format!("{name}-{i:04}"), Some(owner.clone())),
            ..Pod::default()
        }));
    }
    let count = made.len();
    create_all(&pods, made).await.context("creating the cascade's Pods")?;
    let uid = web.metadata.uid.context("the created Deployment has no UID")?;
    Ok((uid, 1 + sets.len() + count))
}

fn named(name: &str, owner: Option<OwnerReference>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        owner_references: owner.map(|o| vec![o]),
        ..ObjectMeta::default()
    }
}

/// A controller reference to `owner` with `blockOwnerDeletion`, as the controllers write them.
fn blocking_ref<K: Resource<DynamicType = ()>>(owner: &K) -> anyhow::Result<OwnerReference> {
    let meta = owner.meta();
    Ok(OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: meta.name.clone().context("a created object has a name")?,
        uid: meta.uid.clone().context("a created object has a UID")?,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

/// Up to `n` of the preset's Deployments, as `(namespace, name)`.
async fn preset_deployments(client: &kube::Client, n: usize) -> anyhow::Result<Vec<(String, String)>> {
    let all: Api<Deployment> = Api::all(client.clone());
    let listed = all.list_metadata(&ListParams::default()).await?;
    Ok(listed
        .items
        .into_iter()
        .filter_map(|d| Some((d.metadata.namespace?, d.metadata.name?)))
        .filter(|(namespace, _)| namespace != NAMESPACE)
        .take(n)
        .collect())
}

/// One phase of step 3: deletes `victims` and times the builders until their events stop; with
/// a plan `path`, asks for it in a loop meanwhile.
fn run_phase(
    runtime: &tokio::runtime::Runtime,
    (client, endpoints): (&kube::Client, SocketAddr),
    victims: &[(String, String)],
    path: Option<&str>,
    deadline: Instant,
) -> anyhow::Result<Phase> {
    let before = graph_events(endpoints)?;
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let asking = path.map(|path| {
            let done = &done;
            scope.spawn(move || {
                let mut plans = Vec::new();
                while !done.load(Ordering::Relaxed) {
                    plans.push(ask(endpoints, path)?);
                }
                anyhow::Ok(plans)
            })
        });
        let started = Instant::now();
        let timed = runtime
            .block_on(delete_all(client, victims))
            .and_then(|()| last_event(endpoints, before, deadline));
        done.store(true, Ordering::Relaxed);
        let plans = match asking {
            Some(asking) => asking.join().expect("the plan loop does not panic")?,
            None => Vec::new(),
        };
        let (events, last) = timed?;
        Ok(Phase {
            events: events - before,
            took: last - started,
            plans,
        })
    })
}

/// Deletes each of `victims`, Background.
async fn delete_all(client: &kube::Client, victims: &[(String, String)]) -> anyhow::Result<()> {
    futures::stream::iter(victims)
        .map(|(namespace, name)| {
            let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
            async move { deployments.delete(name, &DeleteParams::background()).await }
        })
        .buffer_unordered(CONCURRENCY)
        .try_for_each(|_| async { Ok(()) })
        .await
        .context("deleting the preset's Deployments")
}

/// Polls the event counter until it has not moved for [`STILL`]: its last value, and when it
/// was first seen.
fn last_event(endpoints: SocketAddr, before: u64, deadline: Instant) -> anyhow::Result<(u64, Instant)> {
    let (mut last, mut at) = (before, Instant::now());
    loop {
        let now = graph_events(endpoints)?;
        if now != last {
            (last, at) = (now, Instant::now());
        } else if at.elapsed() >= STILL && now > before {
            return Ok((last, at));
        }
        if Instant::now() >= deadline {
            bail!("the collector's graph builders did not go quiet in time");
        }
        std::thread::sleep(POLL_EVERY);
    }
}

/// `kube_gc_graph_events_total`, summed over its labels.
fn graph_events(endpoints: SocketAddr) -> anyhow::Result<u64> {
    let text = crate::shards::get(endpoints, "/metrics").context("reading the collector's /metrics")?;
    let sum: f64 = text
        .lines()
        .filter(|line| line.starts_with("kube_gc_graph_events_total"))
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    Ok(sum as u64)
}

/// One plan, timed.
fn ask(endpoints: SocketAddr, path: &str) -> anyhow::Result<Timed> {
    let started = Instant::now();
    let body = crate::shards::get_within(endpoints, path, Duration::from_secs(60))
        .with_context(|| format!("asking the collector for {path}"))?;
    let wall = started.elapsed();
    let answer: serde_json::Value = serde_json::from_str(&body).context("reading the plan")?;
    Ok(Timed {
        wall,
        play: answer["seconds"].as_f64().unwrap_or_default(),
        steps: answer["plan"]["steps"].as_array().map_or(0, Vec::len),
    })
}

/// The median and the largest of `values`.
fn median_max(mut values: Vec<f64>) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    let median = values.get(values.len() / 2).copied().unwrap_or_default();
    (median, values.last().copied().unwrap_or_default())
}

/// The run as the lines the README quotes.
pub fn summary(run: &PlanRun) -> String {
    let plans = |plans: &[Timed]| {
        let (wall, wall_max) = median_max(plans.iter().map(|p| p.wall.as_secs_f64()).collect());
        let (play, _) = median_max(plans.iter().map(|p| p.play).collect());
        let steps = plans.first().map_or(0, |p| p.steps);
        format!(
            "{} plans of {steps} objects: {wall:.3} s median, {wall_max:.3} s max (the play itself {play:.3} s median)",
            plans.len()
        )
    };
    let phase = |p: &Phase| {
        format!(
            "{} graph events in {:.2} s, {:.0} events/s",
            p.events,
            p.took.as_secs_f64(),
            p.throughput()
        )
    };
    format!(
        "{} objects served, a cascade of {} added\n\
         quiet collector: {}\n\
         deletions alone: {}\n\
         deletions while planning: {}; {}\n\
         builders' throughput while planning / alone: {:.2}",
        run.objects,
        run.cascade,
        plans(&run.quiet),
        phase(&run.alone),
        phase(&run.with_plans),
        plans(&run.with_plans.plans),
        run.with_plans.throughput() / run.alone.throughput().max(1e-9),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocking_ref_should_name_its_owner_as_a_controller() {
        let web = Deployment {
            metadata: ObjectMeta {
                name: Some("web".into()),
                uid: Some("u-1".into()),
                ..ObjectMeta::default()
            },
            ..Deployment::default()
        };
        let r = blocking_ref(&web).expect("a reference");
        assert_eq!(
            (r.api_version.as_str(), r.kind.as_str(), r.uid.as_str()),
            ("apps/v1", "Deployment", "u-1")
        );
        assert_eq!((r.controller, r.block_owner_deletion), (Some(true), Some(true)));
    }

    #[test]
    fn the_median_should_be_the_middle_value() {
        assert_eq!(median_max(vec![3.0, 1.0, 2.0]), (2.0, 3.0));
        assert_eq!(median_max(Vec::new()), (0.0, 0.0));
    }
}
