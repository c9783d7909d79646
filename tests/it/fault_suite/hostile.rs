//! A hostile tenant, for the `hostile-tenant` scenario: while the workload's trees are collected
//! in [`NS`](super::workload::NS), a tenant with rights over its own namespaces only churns
//! objects built to hurt the collector, cycle after cycle, each in a fresh namespace:
//!
//! - *dangling*: ConfigMaps owned by ConfigMaps that do not exist, with 200-character random uids
//!   and owner names a client must escape (spaces, `../` aimed at the victim's objects, `?`, `#`,
//!   `%`, unicode); every seventh object's own name is 253 characters long;
//! - *unjudgeable*: owned by a random kind of a random group that no server serves, which the
//!   collector cannot judge and must leave alone;
//! - *cross-namespace*: owned by one of the victim's roots, named by its kind, name and uid (half
//!   of them with `blockOwnerDeletion`, which a tenant may set on its own objects), which the
//!   collector must find absent from the tenant's namespace without touching the victim.
//!
//! A cycle creates its objects, waits until the collector has collected the dangling and
//! cross-namespace ones, deletes the namespace, waits until it is gone, and reads the collector's
//! resident set. [`check`] then holds the collector to what it owes the other tenant: no
//! unjudgeable object deleted, a resident set that does not grow from the first cycle's end to
//! the last's by more than [`MAX_GROWTH`], the tenant's objects collected at [`MIN_RATE`] or
//! faster, and the victim's trees converged within [`VICTIM_CONVERGENCE`].

use super::audit;
use super::workload;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::Client;
use rand::distributions::{Alphanumeric, DistString};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use std::future::Future;
use std::time::{Duration, Instant};

/// Cycles a run makes.
pub const CYCLES: usize = 5;
/// The tenant's objects per cycle, per unit of the scenario's scale.
pub const OBJECTS_PER_SCALE: usize = 300;
/// How much the collector's resident set may grow from the first cycle's end to the last's.
const MAX_GROWTH: u64 = 8 << 20;
/// The slowest the collector may collect the tenant's collectable objects, in objects a second.
const MIN_RATE: f64 = 20.0;
/// How long after the workload's end the victim's trees may take to match the oracle.
pub const VICTIM_CONVERGENCE: Duration = Duration::from_secs(30);
/// The bound on each wait of a cycle.
const PATIENCE: Duration = Duration::from_secs(90);
/// Creates in flight at once.
const CONCURRENCY: usize = 16;
/// Name prefixes of the three classes; the checks read an object's class from its name.
const DANGLING: &str = "dangling-";
const UNJUDGEABLE: &str = "unjudgeable-";
const CROSS: &str = "cross-";
/// Where every tenant namespace's name starts.
const TENANT: &str = "fs-tenant-";

/// What one cycle ended with.
#[derive(Clone, Debug)]
pub struct Cycle {
    /// The collector's resident bytes at its end.
    pub resident: u64,
    /// Objects the collector collected, and the seconds from their creation's end until the
    /// tenant's namespace settled.
    pub collected: usize,
    pub collect_secs: f64,
}

/// Runs [`CYCLES`] cycles of `objects` objects each against the collector whose process is
/// `collector`; `victims` are owner references to the victim's roots.
pub async fn churn(
    client: Client,
    collector: u32,
    objects: usize,
    victims: Vec<Value>,
    seed: u64,
) -> Result<Vec<Cycle>, String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut cycles = Vec::with_capacity(CYCLES);
    for index in 0..CYCLES {
        let ns = format!("{TENANT}{index}-{}", random(&mut rng, 8).to_lowercase());
        let cycle = one_cycle(&client, &ns, collector, objects, &victims, &mut rng)
            .await
            .map_err(|e| format!("hostile cycle {} of {CYCLES}: {e}", index + 1))?;
        cycles.push(cycle);
    }
    Ok(cycles)
}

async fn one_cycle(
    client: &Client,
    ns: &str,
    collector: u32,
    objects: usize,
    victims: &[Value],
    rng: &mut SmallRng,
) -> Result<Cycle, String> {
    workload::create_one(client, (&workload::namespaces(), ""), ns, vec![]).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let made: Vec<ConfigMap> = (0..objects).map(|i| hostile_configmap(i, victims, rng)).collect();
    futures::stream::iter(made)
        .map(|cm| {
            let configmaps = configmaps.clone();
            async move { configmaps.create(&PostParams::default(), &cm).await }
        })
        .buffer_unordered(CONCURRENCY)
        .try_for_each(|_| async { Ok(()) })
        .await
        .map_err(|e| format!("creating the tenant's objects: {e}"))?;
    let created = Instant::now();
    // Settled once every object left names an owner no server serves, or none: a victim's root
    // deleted with the Orphan policy has its reference removed from the tenant's objects that
    // named it, as from its own dependents, if that comes before the collector finds the root
    // absent from the tenant's namespace.
    let settled = || {
        let configmaps = &configmaps;
        async move {
            let listed = configmaps
                .list_metadata(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            let pending = listed.items.iter().any(|cm| {
                class(cm.metadata.name.as_deref()) != UNJUDGEABLE
                    && cm
                        .metadata
                        .owner_references
                        .as_ref()
                        .is_some_and(|refs| !refs.is_empty())
            });
            Ok((!pending).then_some(listed.items.len()))
        }
    };
    let left = wait_for("the collector to collect the tenant's dangling objects", settled).await?;
    let collect_secs = created.elapsed().as_secs_f64();
    namespaces
        .delete(ns, &DeleteParams::default())
        .await
        .map_err(|e| format!("deleting namespace {ns}: {e}"))?;
    wait_for("the tenant's namespace to go", || {
        let namespaces = &namespaces;
        async move {
            Ok(namespaces
                .get_opt(ns)
                .await
                .map_err(|e| e.to_string())?
                .is_none()
                .then_some(()))
        }
    })
    .await?;
    Ok(Cycle {
        resident: resident(collector)?,
        collected: objects - left,
        collect_secs,
    })
}

/// The `i`th object of a cycle, of the class `i % 3` says.
fn hostile_configmap(i: usize, victims: &[Value], rng: &mut SmallRng) -> ConfigMap {
    let owner = match i % 3 {
        0 => serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                                "name": HOSTILE_OWNER_NAMES[i / 3 % HOSTILE_OWNER_NAMES.len()],
                                "uid": random(rng, 200)}),
        1 => serde_json::json!({"apiVersion": format!("{}.example.com/v1", random(rng, 10).to_lowercase()),
                                "kind": format!("K{}", random(rng, 10)),
                                "name": format!("absent-{i}"), "uid": random(rng, 200)}),
        _ if victims.is_empty() => unreachable!("the victim's roots are created first"),
        _ => {
            let mut owner = victims[rng.gen_range(0..victims.len())].clone();
            owner["blockOwnerDeletion"] = Value::Bool(i.is_multiple_of(2));
            owner["controller"] = Value::Bool(false);
            owner
        }
    };
    let prefix = [DANGLING, UNJUDGEABLE, CROSS][i % 3];
    let mut name = format!("{prefix}{i}");
    if i.is_multiple_of(7) {
        name = format!("{name}.{}", "x".repeat(253 - name.len() - 1));
    }
    let owner = serde_json::from_value(owner).expect("an owner reference");
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

/// Owner names a request path must escape; some aim at the victim's objects through `../`.
const HOSTILE_OWNER_NAMES: &[&str] = &[
    "name with spaces",
    "../../default/deployments/fs-d-0",
    "../../../../apis/apps/v1/namespaces/default/deployments/fs-d-1",
    "q?labelSelector=x",
    "frag#ment",
    "100%25",
    "%2e%2e",
    "ünïcödé-ñame",
];

/// The class prefix of an object's name.
fn class(name: Option<&str>) -> &'static str {
    let name = name.unwrap_or_default();
    [DANGLING, UNJUDGEABLE, CROSS]
        .into_iter()
        .find(|p| name.starts_with(p))
        .unwrap_or("")
}

fn random(rng: &mut SmallRng, len: usize) -> String {
    Alphanumeric.sample_string(rng, len)
}

/// The resident set of process `pid`, in bytes.
fn resident(pid: u32) -> Result<u64, String> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| format!("the collector's status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|kib| kib << 10)
        .ok_or_else(|| "no VmRSS in the collector's status".to_string())
}

/// Polls `done` until it gives a value, [`PATIENCE`] at most.
async fn wait_for<T, F: Future<Output = Result<Option<T>, String>>>(
    what: &str,
    mut done: impl FnMut() -> F,
) -> Result<T, String> {
    let started = Instant::now();
    loop {
        if let Some(value) = done().await? {
            return Ok(value);
        }
        if started.elapsed() >= PATIENCE {
            return Err(format!("gave up waiting for {what} after {PATIENCE:?}"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The collector's deletions of the tenant's objects it could not judge: wrongful, whatever
/// else happened.
pub fn wrongful_deletions(lines: &[audit::Line]) -> Vec<String> {
    audit::collector_deletes(lines)
        .filter(|l| l.namespace.starts_with(TENANT) && class(Some(&l.name)) == UNJUDGEABLE)
        .map(|l| {
            format!(
                "WRONGFUL DELETION of the tenant's {}/{}, whose owner no server serves (request {:?})",
                l.namespace,
                l.name,
                l.when()
            )
        })
        .collect()
}

/// What the collector owes the victim and itself after the tenant's `cycles`, and a line of
/// figures for the scenario's directory.
pub fn check(cycles: &[Cycle], victim_converged_in: Option<f64>) -> (Vec<String>, String) {
    let mut failures = Vec::new();
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    if let (Some(first), Some(last)) = (cycles.first(), cycles.last()) {
        if last.resident > first.resident + MAX_GROWTH {
            failures.push(format!(
                "the collector's resident set grew from {:.1} MiB to {:.1} MiB over the tenant's cycles (at most {:.0} MiB allowed)",
                mib(first.resident),
                mib(last.resident),
                mib(MAX_GROWTH)
            ));
        }
    }
    for (i, c) in cycles.iter().enumerate() {
        let rate = c.collected as f64 / c.collect_secs.max(1e-3);
        if rate < MIN_RATE {
            failures.push(format!(
                "hostile cycle {}: {} objects collected in {:.1} s, {rate:.0}/s (at least {MIN_RATE}/s)",
                i + 1,
                c.collected,
                c.collect_secs
            ));
        }
    }
    if victim_converged_in.is_some_and(|s| s > VICTIM_CONVERGENCE.as_secs_f64()) {
        failures.push(format!(
            "the victim's trees took {:.1} s to converge beside the tenant (at most {VICTIM_CONVERGENCE:?})",
            victim_converged_in.unwrap_or_default()
        ));
    }
    let figures: Vec<String> = cycles
        .iter()
        .enumerate()
        .map(|(i, c)| {
            format!(
                "cycle {}: {:.1} MiB resident, {} collected in {:.1} s",
                i + 1,
                mib(c.resident),
                c.collected,
                c.collect_secs
            )
        })
        .collect();
    (failures, figures.join("\n"))
}
