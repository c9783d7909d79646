//! `loadgen hostile`: whether a tenant's hostile objects leave `kube-gc run`'s memory where they
//! found it.
//!
//! A simulator (`kube-gc sim-apiserver --preset P`) and a collector start as for `loadgen sync`.
//! Then each cycle, as a tenant with rights in its own namespaces only would:
//!
//! 1. creates a namespace with a random name, and in it `objects` ConfigMaps, each with one owner
//!    reference to an owner that does not exist, with a long random uid: half name a served kind
//!    (ConfigMap), which the collector finds absent and collects; half name a random kind of a
//!    random group that no server serves, which it cannot judge;
//! 2. waits until the collector has collected the first half, then deletes the namespace, which
//!    takes the second half, and waits until the namespace is gone;
//! 3. waits until the collector's graph holds the same number of nodes for two polls running,
//!    and reads its node count and resident set (`VmRSS`).
//!
//! The first cycle warms the allocator and the collector's tables; the figure is the growth of the
//! resident set from the end of the first cycle to the end of the last, which must stay under
//! `--max-growth-mib` when memory is bounded by what is live. Every wait is bounded.

use crate::sync::{create_all, status_bytes, Pair, Process, SyncOptions, POLL_EVERY};
use anyhow::{bail, Context};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use rand::distributions::{Alphanumeric, DistString};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Length of the random uids of the owner references.
const UID_LEN: usize = 200;

/// What one cycle ended with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cycle {
    /// The collector's graph nodes once settled.
    pub nodes: u64,
    /// The collector's resident bytes then.
    pub resident: u64,
    /// How long the cycle took.
    pub took: Duration,
}

/// Runs `cycles` cycles of `objects` objects each, calling `each` after each. With
/// `random_kinds` off, every unserved owner names one kind of one group, so that what a new kind
/// costs can be told from what a new object costs.
pub fn measure(
    options: &SyncOptions,
    objects: usize,
    cycles: usize,
    random_kinds: bool,
    mut each: impl FnMut(usize, &Cycle),
) -> anyhow::Result<Vec<Cycle>> {
    let Pair {
        mut simulator,
        mut collector,
        endpoints: metrics,
        runtime,
        client,
        ..
    } = Pair::start(options, "hostile")?;
    let mut done = Vec::with_capacity(cycles);
    for index in 0..cycles {
        let started = Instant::now();
        let deadline = started + options.timeout;
        runtime
            .block_on(churn(&client, objects, random_kinds, deadline))
            .with_context(|| format!("cycle {} of {cycles}", index + 1))?;
        let nodes = settled_nodes(&mut collector, &mut simulator, metrics, deadline)?;
        let cycle = Cycle {
            nodes,
            resident: status_bytes(collector.pid(), "VmRSS")?,
            took: started.elapsed(),
        };
        each(index, &cycle);
        done.push(cycle);
    }
    Ok(done)
}

/// One cycle's creations and deletions (steps 1 and 2 of the module docs).
async fn churn(client: &kube::Client, objects: usize, random_kinds: bool, deadline: Instant) -> anyhow::Result<()> {
    let ns = format!("tenant-{}", random(12).to_lowercase());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(ns.clone()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces.create(&PostParams::default(), &namespace).await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let tenant = (0..objects).map(|i| hostile_configmap(i, i % 2 == 0, random_kinds));
    create_all(&configmaps, tenant)
        .await
        .context("creating the tenant's objects")?;
    let unjudgeable = objects / 2;
    wait_until(
        "the collector to collect the dependents of absent owners",
        deadline,
        async || {
            let listed = configmaps.list_metadata(&ListParams::default()).await?;
            Ok(listed.items.len() <= unjudgeable)
        },
    )
    .await?;
    namespaces.delete(&ns, &DeleteParams::default()).await?;
    wait_until("the tenant's namespace to go", deadline, async || {
        Ok(namespaces.get_opt(&ns).await?.is_none())
    })
    .await
}

/// The `i`th object: owned by an absent ConfigMap when `served`, else by an object of a kind no
/// server serves (a random one when `random_kind`); the owner's uid is long random text either way.
fn hostile_configmap(i: usize, served: bool, random_kind: bool) -> ConfigMap {
    let (api_version, kind) = if served {
        ("v1".to_owned(), "ConfigMap".to_owned())
    } else if !random_kind {
        ("tenant.example.com/v1".to_owned(), "Widget".to_owned())
    } else {
        let group = random(10).to_lowercase();
        (format!("{group}.example.com/v1"), format!("K{}", random(10)))
    };
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("hostile-{i}")),
            owner_references: Some(vec![OwnerReference {
                api_version,
                kind,
                name: format!("gone-{i}"),
                uid: random(UID_LEN),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

fn random(len: usize) -> String {
    Alphanumeric.sample_string(&mut rand::thread_rng(), len)
}

/// Polls `done` every [`POLL_EVERY`] × 10 until it is true; fails after `deadline`.
async fn wait_until(what: &str, deadline: Instant, done: impl AsyncFn() -> anyhow::Result<bool>) -> anyhow::Result<()> {
    while !done().await? {
        if Instant::now() >= deadline {
            bail!("gave up waiting for {what}");
        }
        tokio::time::sleep(POLL_EVERY * 10).await;
    }
    Ok(())
}

/// The collector's graph node count once two polls running agree (step 3 of the module docs).
pub(crate) fn settled_nodes(
    collector: &mut Process,
    simulator: &mut Process,
    metrics: SocketAddr,
    deadline: Instant,
) -> anyhow::Result<u64> {
    let mut last = None;
    loop {
        collector.check_alive()?;
        simulator.check_alive()?;
        let nodes = crate::shards::get(metrics, "/metrics").and_then(|text| graph_nodes(&text));
        if nodes.is_some() && nodes == last {
            return nodes.context("read above");
        }
        if Instant::now() >= deadline {
            bail!("the collector's graph did not settle in time");
        }
        last = nodes;
        std::thread::sleep(POLL_EVERY * 20);
    }
}

/// `kube_gc_graph_nodes` in a `/metrics` text.
fn graph_nodes(text: &str) -> Option<u64> {
    text.lines()
        .filter_map(|line| line.strip_prefix("kube_gc_graph_nodes "))
        .find_map(|value| value.trim().parse::<f64>().ok())
        .map(|value| value as u64)
}

/// The growth of the resident set from the end of the first cycle to the end of the last.
pub fn growth(cycles: &[Cycle]) -> i64 {
    match (cycles.first(), cycles.last()) {
        (Some(first), Some(last)) => last.resident as i64 - first.resident as i64,
        _ => 0,
    }
}

/// One cycle as a line of the report.
pub fn line(index: usize, cycle: &Cycle) -> String {
    format!(
        "cycle {:>3}: {:>8} graph nodes, {:>8.1} MiB resident, {:>6.1} s",
        index + 1,
        cycle.nodes,
        cycle.resident as f64 / MIB,
        cycle.took.as_secs_f64()
    )
}

const MIB: f64 = 1024.0 * 1024.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_nodes_should_be_read_from_the_metrics_text() {
        let text = "# HELP kube_gc_graph_nodes nodes\nkube_gc_graph_nodes 1234\nkube_gc_graph_nodes_x 9\n";
        assert_eq!(graph_nodes(text), Some(1234));
        assert_eq!(graph_nodes("nothing"), None);
    }

    #[test]
    fn hostile_objects_should_name_an_absent_owner_with_a_long_uid() {
        let served = hostile_configmap(0, true, true);
        let other = hostile_configmap(1, false, true);
        let owner = |cm: &ConfigMap| cm.metadata.owner_references.clone().unwrap().remove(0);
        assert_eq!(
            (owner(&served).api_version.as_str(), owner(&served).kind.as_str()),
            ("v1", "ConfigMap")
        );
        assert!(owner(&other).api_version.ends_with(".example.com/v1"));
        assert_eq!(owner(&other).uid.len(), UID_LEN);
        assert_eq!(owner(&hostile_configmap(1, false, false)).kind, "Widget");
    }
}
