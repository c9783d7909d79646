//! The defaults the API server gives the built-in types, as its versioned types' `SetDefaults_*`
//! functions do on every decode: a field the request leaves out (or sets to `null`) reads back
//! with the value a cluster gives it, so that a client sees what it would see on a cluster.
//!
//! # Invariants
//!
//! - Defaulting only fills fields that are absent or `null`; it never changes a value the request
//!   gave, so applying it twice changes nothing ([`apply`] is idempotent).
//! - It runs on create and on every update (a PUT, a patch's result, an apply's merge), as the
//!   server defaults every object it decodes, and before the managed fields are computed, so that a
//!   defaulted field is owned by the manager whose write brought it, as on a cluster.
//! - It reads nothing but the object: what needs other objects (a Service's cluster IP, a Job's
//!   selector) is the registry's, in [`super::strategy`].
//! - It never makes up what holds the defaulted fields: an object without a `spec` (or a workload
//!   without a pod template) stays without one. A client's object always has them (validation
//!   requires them); the objects the simulator's own generators and tests make with metadata
//!   alone stay as small as they were.
//!
//! Only the defaults of the fields a client commonly reads back are made: the pod template's, the
//! workloads', a Service's, a Secret's, a PersistentVolume's. Defaults that come from admission
//! plugins on a cluster (a pod's service account, priority, tolerations) are not.

use super::types::TypeDef;
use kube_gc::api::PartialObjectMeta;
use serde_json::{json, Map, Value};

/// Fills the defaults of `def`'s type into `obj`; see the [module docs](self).
pub(super) fn apply(def: &TypeDef, obj: &mut PartialObjectMeta) {
    let rest = &mut obj.rest;
    match (def.group.as_str(), def.resource.as_str()) {
        ("", "pods") => pod(rest),
        ("", "secrets") => set(rest, "type", json!("Opaque")),
        ("", "services") => service(spec(rest)),
        ("", "persistentvolumes") => persistent_volume(rest),
        ("", "replicationcontrollers") => replication_controller(spec(rest)),
        ("apps", "deployments") => deployment(spec(rest)),
        ("apps", "replicasets") => replica_set(spec(rest)),
        ("apps", "statefulsets") => stateful_set(spec(rest)),
        ("apps", "daemonsets") => daemon_set(spec(rest)),
        ("batch", "jobs") => job(spec(rest)),
        ("batch", "cronjobs") => cron_job(spec(rest)),
        _ => {}
    }
}

/// Sets `map[key]` to `value` unless the request gave it (a `null` counts as not given).
fn set(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_string(), value);
    }
}

/// The object at `map[key]`, made one if the request left it out; `None` when the request gave
/// something else there, which validation, not defaulting, answers.
fn object<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    set(map, key, json!({}));
    map.get_mut(key)?.as_object_mut()
}

/// The items of the list at `map[key]` that are objects.
fn items<'a>(map: &'a mut Map<String, Value>, key: &str) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    map.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// The containers and init containers of a pod spec.
fn containers(spec: &mut Map<String, Value>) -> impl Iterator<Item = &mut Map<String, Value>> {
    spec.iter_mut()
        .filter(|(key, _)| matches!(key.as_str(), "containers" | "initContainers"))
        .filter_map(|(_, list)| list.as_array_mut())
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// The object at `map[key]` when the request gave one: what holds the defaulted fields (a spec, a
/// pod template) is never made up, so an object given without it stays without it.
fn given<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    map.get_mut(key)?.as_object_mut()
}

/// The object's `spec`, when the request gave one.
fn spec(rest: &mut Map<String, Value>) -> Option<&mut Map<String, Value>> {
    given(rest, "spec")
}

fn pod(rest: &mut Map<String, Value>) {
    let Some(spec) = spec(rest) else { return };
    pod_spec(spec);
    set(spec, "enableServiceLinks", json!(true));
    for container in containers(spec) {
        requests_from_limits(container);
    }
    if let Some(status) = object(rest, "status") {
        set(status, "phase", json!("Pending"));
    }
}

/// A pod's container whose limits name a resource its requests do not requests that much of it
/// (`SetDefaults_Pod`).
fn requests_from_limits(container: &mut Map<String, Value>) {
    let Some(limits) = container.get("resources").and_then(|r| r.get("limits")).cloned() else {
        return;
    };
    let (Value::Object(limits), Some(resources)) = (limits, object(container, "resources")) else {
        return;
    };
    let Some(requests) = object(resources, "requests") else {
        return;
    };
    for (resource, quantity) in limits {
        requests.entry(resource).or_insert(quantity);
    }
}

/// The defaults of a pod's spec, in a pod or in a template (`SetDefaults_PodSpec` and its
/// containers').
fn pod_spec(spec: &mut Map<String, Value>) {
    set(spec, "restartPolicy", json!("Always"));
    set(spec, "dnsPolicy", json!("ClusterFirst"));
    set(spec, "terminationGracePeriodSeconds", json!(30));
    set(spec, "securityContext", json!({}));
    set(spec, "schedulerName", json!("default-scheduler"));
    for container in containers(spec) {
        container_defaults(container);
    }
}

fn container_defaults(container: &mut Map<String, Value>) {
    let policy = image_pull_policy(container.get("image").and_then(Value::as_str).unwrap_or_default());
    set(container, "imagePullPolicy", json!(policy));
    set(container, "terminationMessagePath", json!("/dev/termination-log"));
    set(container, "terminationMessagePolicy", json!("File"));
    set(container, "resources", json!({}));
    for port in items(container, "ports") {
        set(port, "protocol", json!("TCP"));
    }
}

/// `Always` for an image without a tag or tagged `latest` (and not pinned by digest), else
/// `IfNotPresent`.
fn image_pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    // A tag follows the last `:` after the last `/`; a `:` before it is a registry's port.
    let last_part = image.rsplit('/').next().unwrap_or(image);
    match last_part.rsplit_once(':') {
        Some((_, tag)) if tag != "latest" => "IfNotPresent",
        _ => "Always",
    }
}

/// The pod template at `spec.template`, its spec defaulted.
fn template(spec: &mut Map<String, Value>) {
    if let Some(template_spec) = given(spec, "template").and_then(|t| given(t, "spec")) {
        pod_spec(template_spec);
    }
}

fn deployment(spec: Option<&mut Map<String, Value>>) {
    let Some(spec) = spec else { return };
    set(spec, "replicas", json!(1));
    if let Some(strategy) = object(spec, "strategy") {
        set(strategy, "type", json!("RollingUpdate"));
        rolling_update(strategy, json!("25%"), json!("25%"));
    }
    set(spec, "revisionHistoryLimit", json!(10));
    set(spec, "progressDeadlineSeconds", json!(600));
    template(spec);
}

/// A `RollingUpdate` strategy's surge and unavailability.
fn rolling_update(strategy: &mut Map<String, Value>, max_unavailable: Value, max_surge: Value) {
    if strategy.get("type").and_then(Value::as_str) != Some("RollingUpdate") {
        return;
    }
    if let Some(rolling) = object(strategy, "rollingUpdate") {
        set(rolling, "maxUnavailable", max_unavailable);
        set(rolling, "maxSurge", max_surge);
    }
}

fn replica_set(spec: Option<&mut Map<String, Value>>) {
    let Some(spec) = spec else { return };
    set(spec, "replicas", json!(1));
    template(spec);
}

/// Also the selector from the template's labels, as the core/v1 registry still does.
fn replication_controller(spec: Option<&mut Map<String, Value>>) {
    let Some(spec) = spec else { return };
    let labels = spec
        .get("template")
        .and_then(|t| t.get("metadata"))
        .and_then(|m| m.get("labels"));
    if let Some(labels) = labels.filter(|l| l.as_object().is_some_and(|l| !l.is_empty())).cloned() {
        set(spec, "selector", labels);
    }
    replica_set(Some(spec));
}

fn stateful_set(spec: Option<&mut Map<String, Value>>) {
    let Some(spec) = spec else { return };
    set(spec, "replicas", json!(1));
    set(spec, "podManagementPolicy", json!("OrderedReady"));
    if let Some(strategy) = object(spec, "updateStrategy") {
        set(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            if let Some(rolling) = object(strategy, "rollingUpdate") {
                set(rolling, "partition", json!(0));
            }
        }
    }
    set(spec, "revisionHistoryLimit", json!(10));
    set(
        spec,
        "persistentVolumeClaimRetentionPolicy",
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
    );
    template(spec);
}

fn daemon_set(spec: Option<&mut Map<String, Value>>) {
    let Some(spec) = spec else { return };
    if let Some(strategy) = object(spec, "updateStrategy") {
        set(strategy, "type", json!("RollingUpdate"));
        rolling_update(strategy, json!(1), json!(0));
    }
    set(spec, "revisionHistoryLimit", json!(10));
    template(spec);
}

/// `SetDefaults_Job`: without completions or parallelism the job runs one pod to one completion.
fn job(spec: Option<&mut Map<String, Value>>) {
    let Some(spec) = spec else { return };
    let given = |spec: &Map<String, Value>, key: &str| spec.get(key).is_some_and(|v| !v.is_null());
    if !given(spec, "completions") && !given(spec, "parallelism") {
        set(spec, "completions", json!(1));
    }
    set(spec, "parallelism", json!(1));
    let per_index = given(spec, "backoffLimitPerIndex");
    set(spec, "backoffLimit", json!(if per_index { i32::MAX } else { 6 }));
    set(spec, "completionMode", json!("NonIndexed"));
    set(spec, "suspend", json!(false));
    let replacement = if given(spec, "podFailurePolicy") {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    set(spec, "podReplacementPolicy", json!(replacement));
    template(spec);
}

fn cron_job(spec: Option<&mut Map<String, Value>>) {
    let Some(spec) = spec else { return };
    set(spec, "concurrencyPolicy", json!("Allow"));
    set(spec, "suspend", json!(false));
    set(spec, "successfulJobsHistoryLimit", json!(3));
    set(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(job_spec) = given(spec, "jobTemplate").and_then(|t| given(t, "spec")) {
        template(job_spec);
    }
}

/// `SetDefaults_Service`, for what needs no allocation.
fn service(spec: Option<&mut Map<String, Value>>) {
    let Some(spec) = spec else { return };
    set(spec, "type", json!("ClusterIP"));
    set(spec, "sessionAffinity", json!("None"));
    let kind = spec.get("type").and_then(Value::as_str).unwrap_or_default().to_string();
    if kind == "ExternalName" {
        return;
    }
    set(spec, "internalTrafficPolicy", json!("Cluster"));
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer") {
        set(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        set(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    for port in items(spec, "ports") {
        set(port, "protocol", json!("TCP"));
        let target_unset = port
            .get("targetPort")
            .is_none_or(|t| t.is_null() || *t == json!(0) || *t == json!(""));
        if target_unset {
            if let Some(number) = port.get("port").cloned() {
                port.insert("targetPort".into(), number);
            }
        }
    }
}

fn persistent_volume(rest: &mut Map<String, Value>) {
    let Some(spec) = spec(rest) else { return };
    set(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
    set(spec, "volumeMode", json!("Filesystem"));
    if let Some(status) = object(rest, "status") {
        set(status, "phase", json!("Pending"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::builtin_catalogue;

    fn defaulted(resource: &str, body: Value) -> Value {
        let def = builtin_catalogue()
            .into_iter()
            .find(|d| d.resource == resource)
            .expect("a built-in type");
        let mut obj: PartialObjectMeta = serde_json::from_value(body).expect("an object");
        apply(&def, &mut obj);
        let once = obj.clone();
        apply(&def, &mut obj);
        assert_eq!(obj, once, "defaulting twice changes nothing");
        Value::Object(obj.rest)
    }

    fn pod_template(image: &str) -> Value {
        json!({"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": image}]}})
    }

    #[test]
    fn each_type_should_read_back_with_the_defaults_a_cluster_gives() {
        let cases = [
            ("secrets", json!({}), "/type", json!("Opaque")),
            ("configmaps", json!({"data": {}}), "/spec", Value::Null),
            ("pods", json!({}), "", json!({})),
            ("deployments", json!({}), "", json!({})),
            ("deployments", json!({"spec": {}}), "/spec/template", Value::Null),
            ("services", json!({"spec": {}}), "/spec/type", json!("ClusterIP")),
            ("services", json!({"spec": {}}), "/spec/sessionAffinity", json!("None")),
            (
                "services",
                json!({"spec": {}}),
                "/spec/internalTrafficPolicy",
                json!("Cluster"),
            ),
            (
                "services",
                json!({"spec": {"ports": [{"port": 80}]}}),
                "/spec/ports/0",
                json!({"port": 80, "protocol": "TCP", "targetPort": 80}),
            ),
            (
                "services",
                json!({"spec": {"ports": [{"port": 80, "targetPort": "http", "protocol": "UDP"}]}}),
                "/spec/ports/0",
                json!({"port": 80, "protocol": "UDP", "targetPort": "http"}),
            ),
            (
                "services",
                json!({"spec": {"type": "LoadBalancer"}}),
                "/spec/externalTrafficPolicy",
                json!("Cluster"),
            ),
            (
                "services",
                json!({"spec": {"type": "ExternalName"}}),
                "/spec/internalTrafficPolicy",
                Value::Null,
            ),
            ("deployments", json!({"spec": {}}), "/spec/replicas", json!(1)),
            (
                "deployments",
                json!({"spec": {"replicas": 0}}),
                "/spec/replicas",
                json!(0),
            ),
            (
                "deployments",
                json!({"spec": {}}),
                "/spec/strategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
            ),
            (
                "deployments",
                json!({"spec": {"strategy": {"type": "Recreate"}}}),
                "/spec/strategy",
                json!({"type": "Recreate"}),
            ),
            (
                "deployments",
                json!({"spec": {}}),
                "/spec/revisionHistoryLimit",
                json!(10),
            ),
            (
                "deployments",
                json!({"spec": {}}),
                "/spec/progressDeadlineSeconds",
                json!(600),
            ),
            ("replicasets", json!({"spec": {}}), "/spec/replicas", json!(1)),
            (
                "statefulsets",
                json!({"spec": {}}),
                "/spec/podManagementPolicy",
                json!("OrderedReady"),
            ),
            (
                "statefulsets",
                json!({"spec": {}}),
                "/spec/updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            ),
            (
                "daemonsets",
                json!({"spec": {}}),
                "/spec/updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            ),
            ("jobs", json!({"spec": {}}), "/spec/completions", json!(1)),
            (
                "jobs",
                json!({"spec": {"parallelism": 3}}),
                "/spec/completions",
                Value::Null,
            ),
            ("jobs", json!({"spec": {}}), "/spec/parallelism", json!(1)),
            ("jobs", json!({"spec": {}}), "/spec/backoffLimit", json!(6)),
            ("jobs", json!({"spec": {}}), "/spec/completionMode", json!("NonIndexed")),
            (
                "cronjobs",
                json!({"spec": {}}),
                "/spec/concurrencyPolicy",
                json!("Allow"),
            ),
            (
                "cronjobs",
                json!({"spec": {}}),
                "/spec/successfulJobsHistoryLimit",
                json!(3),
            ),
            ("pods", json!({"spec": {}}), "/status/phase", json!("Pending")),
            (
                "persistentvolumes",
                json!({"spec": {}}),
                "/spec/persistentVolumeReclaimPolicy",
                json!("Retain"),
            ),
            (
                "replicationcontrollers",
                json!({"spec": {"template": pod_template("nginx")}}),
                "/spec/selector",
                json!({"app": "a"}),
            ),
        ];
        for (resource, body, pointer, expected) in cases {
            let out = defaulted(resource, body.clone());
            let got = out.pointer(pointer).cloned().unwrap_or(Value::Null);
            assert_eq!(got, expected, "{resource} {body} at {pointer}");
        }
    }

    #[test]
    fn pod_templates_should_get_the_pod_spec_and_container_defaults() {
        for resource in ["deployments", "replicasets", "statefulsets", "daemonsets", "jobs"] {
            let out = defaulted(resource, json!({"spec": {"template": pod_template("nginx:1.25")}}));
            let spec = &out["spec"]["template"]["spec"];
            assert_eq!(spec["restartPolicy"], "Always", "{resource}");
            assert_eq!(spec["dnsPolicy"], "ClusterFirst", "{resource}");
            assert_eq!(spec["terminationGracePeriodSeconds"], 30, "{resource}");
            assert_eq!(spec["schedulerName"], "default-scheduler", "{resource}");
            let container = &spec["containers"][0];
            assert_eq!(container["imagePullPolicy"], "IfNotPresent", "{resource}");
            assert_eq!(
                container["terminationMessagePath"], "/dev/termination-log",
                "{resource}"
            );
            assert_eq!(container["terminationMessagePolicy"], "File", "{resource}");
        }
        let cron = defaulted(
            "cronjobs",
            json!({"spec": {"jobTemplate": {"spec": {"template": pod_template("x")}}}}),
        );
        assert_eq!(
            cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"],
            "ClusterFirst"
        );
        assert_eq!(
            cron["spec"]["jobTemplate"]["spec"]["backoffLimit"],
            Value::Null,
            "not a Job's defaults"
        );
    }

    #[test]
    fn image_pull_policy_should_follow_the_tag() {
        let cases = [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.25", "IfNotPresent"),
            ("registry:5000/nginx", "Always"),
            ("registry:5000/nginx:1", "IfNotPresent"),
            ("nginx@sha256:abc", "IfNotPresent"),
        ];
        for (image, policy) in cases {
            assert_eq!(image_pull_policy(image), policy, "{image}");
        }
    }

    #[test]
    fn a_pods_limits_should_become_its_missing_requests() {
        let body = json!({"spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}}]}});
        let out = defaulted("pods", body);
        let requests = &out["spec"]["containers"][0]["resources"]["requests"];
        assert_eq!(requests, &json!({"cpu": "500m", "memory": "1Gi"}));
        assert_eq!(out["spec"]["enableServiceLinks"], true);
    }
}
