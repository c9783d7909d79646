//! The functions the simulated API server's fuzz targets of `tests/fuzz` run, beside the engine's
//! ([`kube_gc::fuzzing`]): `sim_request`, a whole HTTP request to the server, and `sim_patch`, a
//! PATCH body applied to a stored object. Hidden from the docs, as the engine's are.
//!
//! Each function panics exactly when an invariant of the code it drives is broken.

use crate::SimCluster;
use kube_gc::api::{Gvr, PartialObjectMeta, PatchType, StatusReason};
use std::sync::LazyLock;

pub use crate::http::fuzzing::request as sim_request;

/// The object every [`sim_patch`] input patches.
const PATCHED: (&str, &str) = ("team-a", "web-0");

/// A cluster holding one Pod, with owners, finalizers, labels and containers for patches to work
/// on; patches run dry, so it never changes.
static CLUSTER: LazyLock<(SimCluster, PartialObjectMeta)> = LazyLock::new(|| {
    let cluster = SimCluster::new();
    let pod = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": PATCHED.1,
            "namespace": PATCHED.0,
            "labels": {"app": "web"},
            "finalizers": ["example.com/keep"],
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                "uid": "0a1b2c3d-0000-4000-8000-00000000ffff", "controller": true, "blockOwnerDeletion": true
            }]
        },
        "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}
    });
    let pod = serde_json::from_value(pod).expect("a Pod");
    cluster.create(&pods(), pod).expect("the Pod is created");
    let stored = cluster.get_object(&pods(), PATCHED.0, PATCHED.1).expect("the Pod");
    (cluster, stored)
});

fn pods() -> Gvr {
    Gvr::new("", "v1", "pods")
}

/// A PATCH of the simulated server's Pod: the first byte picks a merge, strategic merge or JSON
/// patch or a server-side apply (forced or not), and the rest is its body, JSON or for an apply
/// YAML, read as the server reads a request's body.
///
/// Invariants: a patch never panics and is never answered 500; a patched object keeps its name,
/// namespace and UID; a dry run leaves the object as it was.
pub fn sim_patch(data: &[u8]) {
    let (&kind, body) = data.split_first().unwrap_or((&0, &[]));
    let (cluster, pod) = &*CLUSTER;
    let gvr = pods();
    let (namespace, name) = PATCHED;
    let writes = cluster.dry_run().by("fuzz");
    let result = if kind % 4 == 3 {
        let Ok(config) = serde_yaml_ng::from_slice(body) else {
            return;
        };
        writes.apply(&gvr, namespace, name, &config, kind & 4 != 0)
    } else {
        let body = if body.is_empty() {
            serde_json::Value::Null
        } else {
            let Ok(body) = serde_json::from_slice(body) else {
                return;
            };
            body
        };
        let patch_type = [PatchType::Merge, PatchType::StrategicMerge, PatchType::Json][usize::from(kind % 4)];
        writes.patch_object(&gvr, namespace, name, patch_type, &body)
    };
    match result {
        Ok(written) => {
            let meta = written.into_object().metadata;
            assert_eq!((meta.namespace.as_str(), meta.name.as_str()), PATCHED);
            assert_eq!(meta.uid, pod.metadata.uid);
        }
        Err(e) => assert_ne!(e.reason(), Some(StatusReason::InternalError), "{e}"),
    }
    let now = cluster.get_object(&gvr, namespace, name).expect("the Pod stays");
    assert_eq!(&now, pod);
}
