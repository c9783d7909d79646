//! The workload a scenario drives, as a user would through kube-rs: owner trees of several kinds,
//! then deletions with all three policies. Seeded, so a failing run can be replayed.
//!
//! Trees: Deployments → ReplicaSets → Pods and Jobs → Pods (refs with blockOwnerDeletion, as
//! their controllers write them), Widgets (a custom resource) → ConfigMaps, ConfigMaps owned by a
//! Deployment and a Job at once, Pods whose owner never existed, and late dependents: Pods added to
//! existing ReplicaSets in a second wave. Every name starts with `fs-` and none is reused.
//!
//! Spread ([`Layout::Spread`], the sharded scenarios): the trees go to [`SPREAD`] namespaces, and
//! ClusterRoles own ConfigMaps in several namespaces and a ClusterRole each, so that a
//! cluster-scoped owner's Foreground or Orphan deletion needs every shard. Two more workloads
//! serve the sharded scenarios: owners with dependents in every namespace whose Foreground
//! deletion turns to Orphan mid-cascade ([`switch_to_orphan`]), and thousands of cluster-scoped
//! owners deleted in the Foreground way at once ([`delete_all_foreground`]).

use super::oracle::{Obj, Resource, Universe};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::Client;
use kube_gc::api::PropagationPolicy as Policy;
use rand::rngs::SmallRng;
use rand::Rng;
use serde_json::{json, Value};

/// Every workload object lives here.
pub const NS: &str = "default";

/// Namespaces of a spread workload.
pub const SPREAD: usize = 12;

/// Where the workload's objects go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Every object in [`NS`].
    One,
    /// Trees over [`SPREAD`] namespaces, and cluster-scoped owners with dependents in several.
    Spread,
}

impl Layout {
    /// The namespace of the `i`-th tree.
    fn namespace(self, i: usize) -> String {
        match self {
            Layout::One => NS.to_string(),
            Layout::Spread => format!("fs-ns-{}", i % SPREAD),
        }
    }
}

/// Owner-less ConfigMaps that [`churn`] relabels.
const CHURNED: usize = 4;

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    let api_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version,
        kind: kind.into(),
        plural: plural.into(),
    }
}

pub fn deployments() -> ApiResource {
    resource("apps", "v1", "Deployment", "deployments")
}
pub fn replicasets() -> ApiResource {
    resource("apps", "v1", "ReplicaSet", "replicasets")
}
pub fn pods() -> ApiResource {
    resource("", "v1", "Pod", "pods")
}
pub fn jobs() -> ApiResource {
    resource("batch", "v1", "Job", "jobs")
}
pub fn configmaps() -> ApiResource {
    resource("", "v1", "ConfigMap", "configmaps")
}
pub fn widgets() -> ApiResource {
    resource("example.com", "v1", "Widget", "widgets")
}
pub fn clusterroles() -> ApiResource {
    resource("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles")
}
pub fn namespaces() -> ApiResource {
    resource("", "v1", "Namespace", "namespaces")
}

/// The API of `ar` objects in `namespace` (`""`: cluster-scoped).
fn api_in(client: &Client, namespace: &str, ar: &ApiResource) -> Api<DynamicObject> {
    if namespace.is_empty() {
        Api::all_with(client.clone(), ar)
    } else {
        Api::namespaced_with(client.clone(), namespace, ar)
    }
}

/// A reference to `owner`, of kind `ar`, as a controller writes it.
fn owner_ref(ar: &ApiResource, owner: &Obj) -> Value {
    json!({"apiVersion": ar.api_version, "kind": ar.kind, "name": owner.key.name, "uid": owner.uid(),
           "controller": true, "blockOwnerDeletion": true})
}

/// The objects whose deletion the workload decides.
#[derive(Default)]
pub struct Roots(Vec<(ApiResource, Obj)>);

impl Roots {
    /// A reference to each root, as its controller would write it.
    pub fn owner_refs(&self) -> Vec<Value> {
        self.0.iter().map(|(ar, obj)| owner_ref(ar, obj)).collect()
    }
}

/// Creates `name` of kind `ar` in `namespace` (`""`: cluster-scoped) owned as `owners` says, and
/// adds it to the universe.
async fn create(
    client: &Client,
    universe: &mut Universe,
    (ar, namespace): (&ApiResource, &str),
    name: &str,
    owners: Vec<Value>,
) -> Obj {
    let obj = create_one(client, (ar, namespace), name, owners).await;
    universe.add(obj.clone());
    obj
}

/// Creates `name` as [`create`] does, without adding it to the universe.
pub async fn create_one(client: &Client, (ar, namespace): (&ApiResource, &str), name: &str, owners: Vec<Value>) -> Obj {
    let api = api_in(client, namespace, ar);
    let manifest = json!({"apiVersion": ar.api_version, "kind": ar.kind,
                          "metadata": {"name": name, "ownerReferences": owners}});
    let object: DynamicObject = serde_json::from_value(manifest).expect("a valid manifest");
    let created = api
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating {} {name}: {e}", ar.plural));
    Obj::of(&Resource::new(ar.clone(), !namespace.is_empty()), &created)
}

/// The first wave: every tree, multi-owner objects and dependents of owners that never existed.
pub async fn create_trees(client: &Client, universe: &mut Universe, scale: usize, layout: Layout) -> (Roots, Vec<Obj>) {
    let (d, rs, p, j, w, cm) = (deployments(), replicasets(), pods(), jobs(), widgets(), configmaps());
    if layout == Layout::Spread {
        for i in 0..SPREAD {
            create(client, universe, (&namespaces(), ""), &layout.namespace(i), vec![]).await;
        }
    }
    let mut roots = Vec::new();
    let mut replica_sets = Vec::new();
    for i in 0..scale * 4 {
        let ns = layout.namespace(i);
        let deployment = create(client, universe, (&d, &ns), &format!("fs-d-{i}"), vec![]).await;
        let set = create(
            client,
            universe,
            (&rs, &ns),
            &format!("fs-rs-{i}"),
            vec![owner_ref(&d, &deployment)],
        )
        .await;
        let owners = vec![owner_ref(&rs, &set)];
        for k in 0..2 {
            create(client, universe, (&p, &ns), &format!("fs-p-{i}-{k}"), owners.clone()).await;
        }
        roots.push((d.clone(), deployment));
        replica_sets.push(set);
    }
    let mut job_objs = Vec::new();
    for i in 0..scale * 2 {
        let ns = layout.namespace(i);
        let job = create(client, universe, (&j, &ns), &format!("fs-j-{i}"), vec![]).await;
        let owners = vec![owner_ref(&j, &job)];
        for k in 0..2 {
            create(client, universe, (&p, &ns), &format!("fs-jp-{i}-{k}"), owners.clone()).await;
        }
        roots.push((j.clone(), job.clone()));
        job_objs.push(job);
    }
    for i in 0..scale * 2 {
        let ns = layout.namespace(i);
        let widget = create(client, universe, (&w, &ns), &format!("fs-w-{i}"), vec![]).await;
        let owners = vec![owner_ref(&w, &widget)];
        for k in 0..2 {
            create(client, universe, (&cm, &ns), &format!("fs-cm-{i}-{k}"), owners.clone()).await;
        }
        roots.push((w.clone(), widget));
    }
    for i in 0..scale * 2 {
        let (deployment_kind, deployment) = &roots[i % (scale * 4)];
        let job = &job_objs[i % job_objs.len()];
        let mut second = owner_ref(&j, job);
        second["controller"] = json!(false); // one controller per object
        let owners = vec![owner_ref(deployment_kind, deployment), second];
        // The Deployment and the Job of index i share the namespace of index i.
        let ns = layout.namespace(i);
        create(client, universe, (&cm, &ns), &format!("fs-multi-{i}"), owners).await;
    }
    for i in 0..CHURNED {
        create(client, universe, (&cm, NS), &format!("fs-churn-{i}"), vec![]).await;
    }
    if layout == Layout::Spread {
        roots.extend(create_cluster_scoped_trees(client, universe, scale).await);
    }
    for i in 0..scale {
        let ghost = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("fs-ghost-{i}"),
                           "uid": format!("0000fa17-0000-4000-8000-{i:012}"), "blockOwnerDeletion": true});
        let ns = layout.namespace(i);
        create(
            client,
            universe,
            (&p, &ns),
            &format!("fs-orphan-of-ghost-{i}"),
            vec![ghost],
        )
        .await;
    }
    (Roots(roots), replica_sets)
}

/// ClusterRoles, each owning ConfigMaps in three namespaces and a ClusterRole: the roots whose
/// dependents are in several shards.
async fn create_cluster_scoped_trees(
    client: &Client,
    universe: &mut Universe,
    scale: usize,
) -> Vec<(ApiResource, Obj)> {
    let (cr, cm) = (clusterroles(), configmaps());
    let mut roots = Vec::new();
    for i in 0..scale * 2 {
        let role = create(client, universe, (&cr, ""), &format!("fs-cr-{i}"), vec![]).await;
        let owners = vec![owner_ref(&cr, &role)];
        for k in 0..3 {
            let ns = Layout::Spread.namespace(i + k * 5);
            create(
                client,
                universe,
                (&cm, &ns),
                &format!("fs-crcm-{i}-{k}"),
                owners.clone(),
            )
            .await;
        }
        create(client, universe, (&cr, ""), &format!("fs-crdep-{i}"), owners).await;
        roots.push((cr.clone(), role));
    }
    roots
}

/// ConfigMaps each switched owner has in every namespace of a spread workload.
const SWITCHED_PER_NAMESPACE: usize = 4;

/// ClusterRoles with ConfigMaps in every namespace of a spread workload, so in every shard: the
/// owners whose Foreground deletion [`switch_to_orphan`] turns to Orphan mid-cascade.
pub async fn create_switched_owners(client: &Client, universe: &mut Universe, count: usize) -> Vec<Obj> {
    let (cr, cm) = (clusterroles(), configmaps());
    let mut owners = Vec::new();
    for i in 0..count {
        let role = create(client, universe, (&cr, ""), &format!("fs-sw-{i}"), vec![]).await;
        let refs = vec![owner_ref(&cr, &role)];
        for n in 0..SPREAD {
            let ns = Layout::Spread.namespace(n);
            for k in 0..SWITCHED_PER_NAMESPACE {
                create(client, universe, (&cm, &ns), &format!("fs-swcm-{i}-{k}"), refs.clone()).await;
            }
        }
        owners.push(role);
    }
    owners
}

/// How long [`switch_to_orphan`] waits for the collector to delete a first dependent of each
/// owner, before it switches anyway.
const CASCADE_UNDER_WAY: std::time::Duration = std::time::Duration::from_secs(30);

/// Deletes each of `owners` in the Foreground way and, once the collector has deleted one of the
/// dependents of each (the cascade is under way in some shard), again with the Orphan policy:
/// the API server swaps the `foregroundDeletion` finalizer for `orphan`, and what the cascade has
/// not deleted yet must be orphaned.
pub async fn switch_to_orphan(client: &Client, universe: &mut Universe, owners: &[Obj]) {
    let api = Api::<DynamicObject>::all_with(client.clone(), &clusterroles());
    let delete = |policy| DeleteParams {
        propagation_policy: Some(policy),
        ..DeleteParams::default()
    };
    for owner in owners {
        api.delete(&owner.key.name, &delete(PropagationPolicy::Foreground))
            .await
            .unwrap_or_else(|e| panic!("deleting {}: {e}", owner.key));
        universe.delete(owner.uid(), Policy::Foreground);
    }
    let configmaps = Api::<DynamicObject>::all_with(client.clone(), &configmaps());
    let started = std::time::Instant::now();
    while started.elapsed() < CASCADE_UNDER_WAY {
        let Ok(list) = configmaps.list(&Default::default()).await else {
            // The server failed the read: ask again after the same pause, not at once.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let left = |owner: &Obj| {
            list.items
                .iter()
                .filter(|o| {
                    o.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|r| r.uid == owner.uid())
                })
                .count()
        };
        if owners.iter().all(|o| left(o) < SPREAD * SWITCHED_PER_NAMESPACE) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for owner in owners {
        api.delete(&owner.key.name, &delete(PropagationPolicy::Orphan))
            .await
            .unwrap_or_else(|e| panic!("deleting {} again: {e}", owner.key));
        universe.switch_to_orphan(owner.uid());
    }
}

/// `count` ClusterRoles, each with a ConfigMap (blockOwnerDeletion) in a namespace of a spread
/// workload: the owners deleted in the Foreground way all at once.
pub async fn create_cluster_owners(client: &Client, universe: &mut Universe, count: usize) -> Vec<Obj> {
    let (cr, cm) = (clusterroles(), configmaps());
    for i in 0..SPREAD {
        create(
            client,
            universe,
            (&namespaces(), ""),
            &Layout::Spread.namespace(i),
            vec![],
        )
        .await;
    }
    let created: Vec<(Obj, Obj)> = futures::stream::iter(0..count)
        .map(|i| {
            let (cr, cm) = (cr.clone(), cm.clone());
            async move {
                let role = create_one(client, (&cr, ""), &format!("fs-many-{i}"), vec![]).await;
                let ns = Layout::Spread.namespace(i);
                let refs = vec![owner_ref(&cr, &role)];
                let dependent = create_one(client, (&cm, &ns), &format!("fs-manycm-{i}"), refs).await;
                (role, dependent)
            }
        })
        .buffer_unordered(CONCURRENT_REQUESTS)
        .collect()
        .await;
    let mut owners = Vec::with_capacity(count);
    for (role, dependent) in created {
        universe.add(role.clone());
        universe.add(dependent);
        owners.push(role);
    }
    owners
}

/// How many requests the bulk steps keep in flight: a controller creating or deleting at once.
const CONCURRENT_REQUESTS: usize = 32;

/// Deletes every one of `owners` (ClusterRoles) in the Foreground way, [`CONCURRENT_REQUESTS`] at
/// a time.
pub async fn delete_all_foreground(client: &Client, universe: &mut Universe, owners: &[Obj]) {
    let api = Api::<DynamicObject>::all_with(client.clone(), &clusterroles());
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..DeleteParams::default()
    };
    futures::stream::iter(owners)
        .map(|owner| {
            let (api, params) = (&api, &params);
            async move {
                api.delete(&owner.key.name, params)
                    .await
                    .unwrap_or_else(|e| panic!("deleting {}: {e}", owner.key));
            }
        })
        .buffer_unordered(CONCURRENT_REQUESTS)
        .collect::<()>()
        .await;
    for owner in owners {
        universe.delete(owner.uid(), Policy::Foreground);
    }
}

/// The second wave: Pods added to existing ReplicaSets once the collector runs.
pub async fn create_late_dependents(
    client: &Client,
    universe: &mut Universe,
    replica_sets: &[Obj],
    rng: &mut SmallRng,
) {
    let rs = replicasets();
    for i in 0..replica_sets.len() / 2 {
        let owner = &replica_sets[rng.gen_range(0..replica_sets.len())];
        create(
            client,
            universe,
            (&pods(), &owner.key.namespace),
            &format!("fs-late-{i}"),
            vec![owner_ref(&rs, owner)],
        )
        .await;
    }
}

/// Deletes a seeded three quarters of the roots, a third of those with each policy, and records
/// them; `halfway` runs once half the deletions are sent.
pub async fn delete_roots(
    client: &Client,
    universe: &mut Universe,
    roots: &Roots,
    rng: &mut SmallRng,
    mut halfway: impl FnMut(),
) {
    let mut chosen: Vec<(&ApiResource, &Obj, Policy)> = Vec::new();
    for (ar, obj) in &roots.0 {
        let policy = match rng.gen_range(0..4) {
            0 => continue,
            1 => Policy::Background,
            2 => Policy::Foreground,
            _ => Policy::Orphan,
        };
        chosen.push((ar, obj, policy));
    }
    let half = chosen.len() / 2;
    for (i, (ar, obj, policy)) in chosen.into_iter().enumerate() {
        if i == half {
            halfway();
        }
        let api = api_in(client, &obj.key.namespace, ar);
        let params = DeleteParams {
            propagation_policy: Some(match policy {
                Policy::Background => PropagationPolicy::Background,
                Policy::Foreground => PropagationPolicy::Foreground,
                Policy::Orphan => PropagationPolicy::Orphan,
            }),
            ..DeleteParams::default()
        };
        api.delete(&obj.key.name, &params)
            .await
            .unwrap_or_else(|e| panic!("deleting {}: {e}", obj.key));
        universe.delete(obj.uid(), policy);
    }
}

/// Label changes on `n` workload objects that stay: watch events that change no decision, to
/// push a short watch history past what a frozen collector saw.
pub async fn churn(client: &Client, n: usize) {
    let cm = configmaps();
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), NS, &cm);
    for i in 0..n {
        let name = format!("fs-churn-{}", i % CHURNED);
        let name = name.as_str();
        let patch = json!({"metadata": {"labels": {"churn": i.to_string()}}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("labelling {name}: {e}"));
    }
}
