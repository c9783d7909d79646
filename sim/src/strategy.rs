//! What the registry of a built-in type does to an object before it stores it, beyond the metadata
//! rules of [`super::store`] (upstream's `PrepareForCreate` and `PrepareForUpdate`): the type's
//! [defaults](super::defaults), the values it allocates (a Service's cluster IP and node ports, a
//! Job's selector), and which part of the object a write may change.
//!
//! # Invariants
//!
//! - A type with a `status` subresource ([`has_status`]) keeps its `.status` through a write of
//!   the object itself, and keeps everything but its `.status` through a write of the subresource
//!   ([`Part::Status`]): a client that reads, changes and writes back either part can never undo a
//!   concurrent change to the other.
//! - An allocated value stays allocated: an update that leaves out a Service's cluster IP or a
//!   port's node port keeps the one it had, as the Service registry patches them back in.
//! - A value is allocated only when nothing else holds it, among the objects stored when the
//!   create is made (under the state's lock, so two creates never take the same one).
//!
//! Create keeps a `.status` given in its body, unlike a cluster, which resets it: without
//! controllers to write it, that is how a test gives an object the status it needs.

use super::defaults;
use super::status::invalid;
use super::types::TypeDef;
use kube_gc::api::{ApiError, PartialObjectMeta};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::Arc;

/// Which part of an object a write goes to: the object, or its `status` subresource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Part {
    /// The object: its `.status` is kept from the stored object when the type has a `status`
    /// subresource.
    #[default]
    Main,
    /// The `status` subresource: only `.status` is taken from the request.
    Status,
}

/// The built-in types served with a `status` subresource.
const WITH_STATUS: [(&str, &str); 14] = [
    ("", "pods"),
    ("", "services"),
    ("", "namespaces"),
    ("", "nodes"),
    ("", "persistentvolumes"),
    ("", "replicationcontrollers"),
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("batch", "jobs"),
    ("batch", "cronjobs"),
    ("storagemigration.k8s.io", "storageversionmigrations"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
];

/// The built-in types served with a `scale` subresource.
const WITH_SCALE: [(&str, &str); 4] = [
    ("", "replicationcontrollers"),
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
];

fn listed(list: &[(&str, &str)], def: &TypeDef) -> bool {
    !def.custom && list.iter().any(|(g, r)| *g == def.group && *r == def.resource)
}

/// True when `def`'s type has a `status` subresource.
pub(super) fn has_status(def: &TypeDef) -> bool {
    listed(&WITH_STATUS, def)
}

/// True when `def`'s type has a `scale` subresource.
pub(super) fn has_scale(def: &TypeDef) -> bool {
    listed(&WITH_SCALE, def)
}

/// The service network cluster IPs are allocated from: `10.96.0.0/12`, kubeadm's default.
const SERVICE_NETWORK: (Ipv4Addr, u32) = (Ipv4Addr::new(10, 96, 0, 0), 12);
/// The node port range, the API server's default.
const NODE_PORTS: std::ops::RangeInclusive<u64> = 30000..=32767;

/// Prepares a new object of `def`'s type: defaults, then what the registry allocates among the
/// `stored` objects of the type. A cluster IP outside the service network or already taken is 422.
pub(super) fn prepare_create<'a>(
    def: &TypeDef,
    obj: &mut PartialObjectMeta,
    stored: impl Iterator<Item = &'a Arc<PartialObjectMeta>>,
) -> Result<(), ApiError> {
    defaults::apply(def, obj);
    match (def.group.as_str(), def.resource.as_str()) {
        ("", "services") => allocate_service(def, obj, stored),
        ("batch", "jobs") => {
            job_selector(obj);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Prepares `new`, written to `part` over `old`: the part the write may not change is taken from
/// `old`, allocated values are kept, and the result is defaulted.
pub(super) fn prepare_update(def: &TypeDef, part: Part, old: &PartialObjectMeta, new: &mut PartialObjectMeta) {
    if part == Part::Status {
        let mut kept = old.clone();
        kept.metadata.resource_version = std::mem::take(&mut new.metadata.resource_version);
        kept.metadata.uid = std::mem::take(&mut new.metadata.uid);
        match new.rest.remove("status") {
            Some(status) => kept.rest.insert("status".into(), status),
            None => kept.rest.remove("status"),
        };
        *new = kept;
        return;
    }
    if has_status(def) {
        match old.rest.get("status") {
            Some(status) => new.rest.insert("status".into(), status.clone()),
            None => new.rest.remove("status"),
        };
    }
    if def.group.is_empty() && def.resource == "services" {
        keep_allocated(old, new);
    }
    defaults::apply(def, new);
}

/// The object at `obj.spec`, if it is one.
fn spec_mut(obj: &mut PartialObjectMeta) -> Option<&mut Map<String, Value>> {
    obj.rest.get_mut("spec").and_then(Value::as_object_mut)
}

/// Puts back the cluster IPs, IP families and node ports an update leaves out.
fn keep_allocated(old: &PartialObjectMeta, new: &mut PartialObjectMeta) {
    let Some(old_spec) = old.rest.get("spec").and_then(Value::as_object) else {
        return;
    };
    let Some(spec) = spec_mut(new) else { return };
    let unset = |spec: &Map<String, Value>, key: &str| spec.get(key).is_none_or(|v| v.is_null() || *v == json!(""));
    if unset(spec, "clusterIP") {
        for key in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if let Some(value) = old_spec.get(key).filter(|_| unset(spec, key)) {
                spec.insert(key.into(), value.clone());
            }
        }
    }
    let old_ports: Vec<&Value> = old_spec
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    for port in ports_mut(spec) {
        let same = old_ports.iter().find(|o| o.get("port") == port.get("port"));
        if let Some(node_port) = same.and_then(|o| o.get("nodePort")) {
            port.entry("nodePort").or_insert_with(|| node_port.clone());
        }
    }
}

/// The port objects of a Service's spec.
fn ports_mut(spec: &mut serde_json::Map<String, Value>) -> impl Iterator<Item = &mut serde_json::Map<String, Value>> {
    spec.get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// A Service's cluster IP (with its families) and node ports, allocated among `stored`.
fn allocate_service<'a>(
    def: &TypeDef,
    obj: &mut PartialObjectMeta,
    stored: impl Iterator<Item = &'a Arc<PartialObjectMeta>>,
) -> Result<(), ApiError> {
    let mut ips = BTreeSet::new();
    let mut node_ports = BTreeSet::new();
    for service in stored {
        let spec = service.rest.get("spec");
        ips.extend(
            spec.and_then(|s| s.get("clusterIP"))
                .and_then(Value::as_str)
                .map(str::to_string),
        );
        let ports = spec
            .and_then(|s| s.get("ports"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        node_ports.extend(ports.filter_map(|p| p.get("nodePort")?.as_u64()));
    }
    let name = obj.metadata.name.clone();
    let Some(spec) = spec_mut(obj) else { return Ok(()) };
    let kind = spec.get("type").and_then(Value::as_str).unwrap_or_default().to_string();
    if kind == "ExternalName" {
        return Ok(());
    }
    let given = spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let (ip, families, policy) = match given.as_str() {
        "None"
            if spec
                .get("selector")
                .is_some_and(|s| s.as_object().is_some_and(|s| !s.is_empty())) =>
        {
            ("None".to_string(), json!(["IPv4"]), "SingleStack")
        }
        "None" => ("None".to_string(), json!(["IPv4", "IPv6"]), "RequireDualStack"),
        "" => {
            let ip = free_cluster_ip(&ips)
                .ok_or_else(|| invalid(def, &name, "spec.clusterIPs: Internal error: range is full"))?;
            (ip, json!(["IPv4"]), "SingleStack")
        }
        wanted => {
            check_cluster_ip(wanted, &ips).map_err(|detail| invalid(def, &name, detail))?;
            (wanted.to_string(), json!(["IPv4"]), "SingleStack")
        }
    };
    spec.insert("clusterIP".into(), json!(ip));
    spec.entry("clusterIPs").or_insert_with(|| json!([ip]));
    spec.entry("ipFamilies").or_insert(families);
    spec.entry("ipFamilyPolicy").or_insert_with(|| json!(policy));
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer") {
        for port in ports_mut(spec) {
            if port.get("nodePort").is_none_or(|p| p.is_null() || *p == json!(0)) {
                let free = NODE_PORTS.clone().find(|p| !node_ports.contains(p));
                let free = free.ok_or_else(|| invalid(def, &name, "spec.ports: Internal error: range is full"))?;
                node_ports.insert(free);
                port.insert("nodePort".into(), json!(free));
            }
        }
    }
    Ok(())
}

/// The addresses of the service network, without its network address.
fn service_addresses() -> impl Iterator<Item = Ipv4Addr> {
    let (base, prefix) = SERVICE_NETWORK;
    let first = u32::from(base);
    (1..(1u32 << (32 - prefix)) - 1).map(move |offset| Ipv4Addr::from(first + offset))
}

/// The lowest address of the service network not in `taken`.
fn free_cluster_ip(taken: &BTreeSet<String>) -> Option<String> {
    service_addresses()
        .map(|ip| ip.to_string())
        .find(|ip| !taken.contains(ip))
}

/// A requested cluster IP must be an address of the service network not held by another Service.
fn check_cluster_ip(wanted: &str, taken: &BTreeSet<String>) -> Result<(), String> {
    let (base, prefix) = SERVICE_NETWORK;
    let mask = u32::MAX << (32 - prefix);
    let in_network = wanted
        .parse::<Ipv4Addr>()
        .is_ok_and(|ip| u32::from(ip) & mask == u32::from(base));
    if !in_network {
        return Err(format!(
            "spec.clusterIPs: Invalid value: [{wanted:?}]: failed to allocate IP {wanted}: the provided IP ({wanted}) \
             is not in the valid range. The range of valid IPs is {base}/{prefix}"
        ));
    }
    if taken.contains(wanted) {
        return Err(format!(
            "spec.clusterIPs: Invalid value: [{wanted:?}]: failed to allocate IP {wanted}: provided IP is already \
             allocated"
        ));
    }
    Ok(())
}

/// The label a Job's pods carry with its UID, which its generated selector matches.
const JOB_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
/// The label a Job's pods carry with its name.
const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";

/// A Job without `manualSelector` gets a selector of its UID, and its template the labels that
/// selector matches (with their legacy unprefixed forms), as the Job registry generates them.
fn job_selector(obj: &mut PartialObjectMeta) {
    let (uid, name) = (obj.metadata.uid.clone(), obj.metadata.name.clone());
    let Some(spec) = spec_mut(obj) else { return };
    if spec.get("manualSelector") == Some(&json!(true)) {
        return;
    }
    spec.insert("selector".into(), json!({"matchLabels": {JOB_UID_LABEL: uid}}));
    let template = spec.entry("template").or_insert_with(|| json!({}));
    let Some(template) = template.as_object_mut() else {
        return;
    };
    let metadata = template.entry("metadata").or_insert_with(|| json!({}));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    let labels = metadata.entry("labels").or_insert_with(|| json!({}));
    let Some(labels) = labels.as_object_mut() else { return };
    for (key, value) in [
        ("controller-uid", &uid),
        (JOB_UID_LABEL, &uid),
        ("job-name", &name),
        (JOB_NAME_LABEL, &name),
    ] {
        labels.insert(key.into(), json!(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::builtin_catalogue;
    use kube_gc::api::StatusReason;

    fn def(resource: &str) -> TypeDef {
        builtin_catalogue()
            .into_iter()
            .find(|d| d.resource == resource)
            .expect("built-in")
    }

    fn object(body: Value) -> PartialObjectMeta {
        serde_json::from_value(body).expect("an object")
    }

    fn created(resource: &str, body: Value, stored: &[Arc<PartialObjectMeta>]) -> Result<Value, StatusReason> {
        let mut obj = object(body);
        prepare_create(&def(resource), &mut obj, stored.iter()).map_err(|e| e.reason().expect("a status"))?;
        Ok(serde_json::to_value(obj).expect("json"))
    }

    #[test]
    fn services_should_get_the_lowest_free_cluster_ip_and_node_ports() {
        let first = created(
            "services",
            json!({"metadata": {"name": "a"}, "spec": {"type": "NodePort",
            "ports": [{"port": 80}]}}),
            &[],
        )
        .expect("created");
        assert_eq!(first["spec"]["clusterIP"], "10.96.0.1");
        assert_eq!(first["spec"]["clusterIPs"], json!(["10.96.0.1"]));
        assert_eq!(first["spec"]["ipFamilies"], json!(["IPv4"]));
        assert_eq!(first["spec"]["ipFamilyPolicy"], "SingleStack");
        assert_eq!(first["spec"]["ports"][0]["nodePort"], 30000);
        let stored = [Arc::new(object(first))];
        let second = created(
            "services",
            json!({"metadata": {"name": "b"}, "spec": {"type": "NodePort",
            "ports": [{"port": 80}]}}),
            &stored,
        )
        .expect("created");
        assert_eq!(second["spec"]["clusterIP"], "10.96.0.2");
        assert_eq!(second["spec"]["ports"][0]["nodePort"], 30001);
        let cases = [
            (json!({"clusterIP": "10.96.0.1"}), Err(StatusReason::Invalid)),
            (json!({"clusterIP": "192.168.0.1"}), Err(StatusReason::Invalid)),
            (json!({"clusterIP": "10.100.0.7"}), Ok(json!("10.100.0.7"))),
            (json!({"clusterIP": "None", "selector": {"a": "b"}}), Ok(json!("None"))),
            (
                json!({"type": "ExternalName", "externalName": "x.example"}),
                Ok(Value::Null),
            ),
        ];
        for (spec, expected) in cases {
            let out = created("services", json!({"metadata": {"name": "c"}, "spec": spec}), &stored);
            assert_eq!(out.map(|o| o["spec"]["clusterIP"].clone()), expected, "{spec}");
        }
    }

    #[test]
    fn an_update_should_keep_status_or_all_but_status_by_part() {
        let old = object(
            json!({"metadata": {"name": "d", "resourceVersion": "5", "labels": {"a": "1"}},
            "spec": {"replicas": 2}, "status": {"replicas": 2}}),
        );
        let write = json!({"metadata": {"name": "d", "resourceVersion": "5", "labels": {"a": "2"}},
            "spec": {"replicas": 3}, "status": {"replicas": 9}});
        let mut main = object(write.clone());
        prepare_update(&def("deployments"), Part::Main, &old, &mut main);
        assert_eq!(main.rest["spec"]["replicas"], 3);
        assert_eq!(
            main.rest["status"],
            json!({"replicas": 2}),
            "the object's write keeps the status"
        );
        assert_eq!(main.metadata.labels["a"], "2");
        let mut status = object(write);
        prepare_update(&def("deployments"), Part::Status, &old, &mut status);
        assert_eq!(status.rest["spec"]["replicas"], 2, "the status write keeps the spec");
        assert_eq!(status.metadata.labels["a"], "1");
        assert_eq!(status.rest["status"], json!({"replicas": 9}));
        assert_eq!(status.metadata.resource_version, "5", "the precondition stays");
        let mut config = object(json!({"metadata": {"name": "c"}, "data": {}, "status": {"x": 1}}));
        prepare_update(&def("configmaps"), Part::Main, &old, &mut config);
        assert_eq!(config.rest["status"], json!({"x": 1}), "a type without the subresource");
    }

    #[test]
    fn a_service_update_should_keep_what_was_allocated() {
        let old = object(
            json!({"metadata": {"name": "s"}, "spec": {"type": "NodePort", "clusterIP": "10.96.0.4",
            "clusterIPs": ["10.96.0.4"], "ports": [{"port": 80, "nodePort": 30080}]}}),
        );
        let mut new = object(json!({"metadata": {"name": "s"}, "spec": {"type": "NodePort",
            "ports": [{"port": 80}, {"port": 81}]}}));
        prepare_update(&def("services"), Part::Main, &old, &mut new);
        assert_eq!(new.rest["spec"]["clusterIP"], "10.96.0.4");
        assert_eq!(new.rest["spec"]["ports"][0]["nodePort"], 30080);
        assert_eq!(new.rest["spec"]["ports"][1].get("nodePort"), None);
    }

    #[test]
    fn a_job_should_get_a_selector_of_its_uid() {
        let body = json!({"metadata": {"name": "j", "uid": "u-1"}, "spec": {"template": {"spec": {}}}});
        let job = created("jobs", body, &[]).expect("created");
        assert_eq!(job["spec"]["selector"], json!({"matchLabels": {JOB_UID_LABEL: "u-1"}}));
        assert_eq!(job["spec"]["template"]["metadata"]["labels"]["job-name"], "j");
        let manual = json!({"metadata": {"name": "j", "uid": "u"}, "spec": {"manualSelector": true}});
        assert_eq!(
            created("jobs", manual, &[]).expect("created")["spec"].get("selector"),
            None
        );
    }
}
