//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`) of built-in types, read into the
//! JSON object the rest of the server handles.
//!
//! # What is accepted
//!
//! A create or update body of a built-in type the simulated cluster serves (core/v1, apps/v1,
//! batch/v1, rbac.authorization.k8s.io/v1, coordination.k8s.io/v1 and events.k8s.io/v1; not
//! CustomResourceDefinitions, whose schema types have JSON forms of their own and which kubectl
//! sends as JSON), in the API server's envelope: the 4 magic bytes `k8s\0`, then a
//! `runtime.Unknown` message whose `typeMeta` names the object's apiVersion and kind and whose
//! `raw` is the typed message (for example `k8s.io.api.core.v1.Namespace`). Custom resources have
//! no protobuf form: [`message`] finds none for them and the request gets 415, as a real server
//! answers. Responses of full objects stay JSON (a client that accepts only protobuf objects gets
//! 406 from the `Accept` negotiation); metadata responses are written in protobuf by
//! [`kube_gc::api::protobuf`] (see [`super::represent`]), whose output this module's tests read
//! back with the crate's generated messages.
//!
//! # Invariants
//!
//! - No input panics out of [`decode`]: a body that is not an envelope, is cut short, or holds a
//!   message that does not parse (nesting is bounded by the protobuf crate's recursion limit) is a
//!   [`DecodeError`], which the handler answers with 400; so is a value the crate's serializers
//!   cannot express (they panic on a `Quantity` without its string or a time out of range: that
//!   panic is caught here and never reaches the handler).
//! - The JSON is the object's JSON form, as the API server would print the decoded object:
//!   `metav1.Time` is an RFC 3339 string of whole seconds, and the zero time (Go writes an empty
//!   message, which the crate prints as the epoch) is left out; a `MicroTime` keeps microseconds
//!   (but the crate types events.k8s.io's `eventTime` as a `Time`, so whole seconds there);
//!   `IntOrString` is a number or a string; `Quantity` is its string; `bytes` fields (Secret
//!   `data`, ConfigMap `binaryData`, `caBundle`) are base64; `RawExtension` and `FieldsV1` are the
//!   JSON they hold; a field named `type` is `type` (the crate's Rust name is `type_`).
//! - Absent fields, nulls, empty strings, empty lists and empty objects are left out: Go's encoder
//!   writes every non-pointer field, and its JSON leaves those out (`omitempty`), and for every
//!   object the server keeps an empty value means what an absent one does. Numbers and booleans
//!   are kept as sent, since a pointer field's zero (`replicas: 0`) means something.
//! - Known limit: the crate prints an `IntOrString` as its `intVal` whenever that is set, and Go
//!   writes `intVal` (0) next to the `strVal` of a string such as `maxSurge: 25%`, which then
//!   reads as 0. kubectl's imperative `create` commands send no `IntOrString`; a Go client that
//!   sends a string one should send JSON.
//!
//! # The crate
//!
//! Messages are decoded by [`k8s-rs-pb`](k8s_rs_pb) 0.5 (Kubernetes 1.35 protos, generated with
//! the `protobuf` crate 3.7, feature `v1_35`): its typed messages parse the bytes, and its serde
//! derives print them as JSON, which is then brought to the Kubernetes JSON form ([`normalize`]).
//! Its conversion to k8s-openapi types goes through JSON (`serde_json::to_value` then
//! `from_value`), so it is tied to no k8s-openapi version (ours is 0.29, with Kubernetes 1.37's
//! types; the crate names k8s-openapi only as a test dependency), and this module needs no
//! k8s-openapi type at all: the JSON is what the server stores. No field of any type is decoded by
//! hand; what is written here is the envelope check, the table of served kinds, and the JSON
//! touch-ups. The alternatives weighed, in order:
//!
//! - `k8s-pb` 0.9 (kube-rs, prost): its messages derive neither serde nor reflection, no feature
//!   adds either, and it ships neither a descriptor set nor the `.proto` files for a generic route
//!   such as prost-reflect, so turning its messages into JSON would mean a converter per type.
//! - `k8s-rs-pb`'s runtime reflection (which would have allowed one schema-driven walk) cannot be
//!   used: each generated file's descriptor lists itself as its dependency, so the first call of
//!   any `file_descriptor()` re-enters its own lazy initialisation and hangs. Its
//!   `parse_from_apiserver_bytes` panics on a body shorter than 4 bytes, so the envelope is read
//!   here with its `Unknown` message.

use k8s_rs_pb::api;
use k8s_rs_pb::apimachinery::pkg::runtime::Unknown;
use protobuf::Message;
use serde::Serialize;
use serde_json::{Map, Value};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The media type of protobuf bodies.
pub(super) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The 4 bytes every protobuf body starts with.
const MAGIC: &[u8; 4] = b"k8s\0";

/// Why a protobuf body could not be read; the request's answer is 400.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("the protobuf request body could not be decoded: {0}")]
pub(super) struct DecodeError(String);

fn invalid(message: impl Into<String>) -> DecodeError {
    DecodeError(message.into())
}

/// Decodes the typed message of one kind into its JSON form.
pub(super) type Decoder = fn(&[u8]) -> Result<Value, DecodeError>;

/// The decoder of a built-in `group/version` `kind`, or `None` when the type has no protobuf form
/// here (custom resources, CRDs, and kinds the simulated cluster does not serve).
pub(super) fn message(group: &str, version: &str, kind: &str) -> Option<Decoder> {
    use api::{apps::v1 as apps, batch::v1 as batch, core::v1 as core, rbac::v1 as rbac};
    Some(match (group, version, kind) {
        ("", "v1", "Pod") => typed::<core::Pod>,
        ("", "v1", "ConfigMap") => typed::<core::ConfigMap>,
        ("", "v1", "Secret") => typed::<core::Secret>,
        ("", "v1", "ServiceAccount") => typed::<core::ServiceAccount>,
        ("", "v1", "Service") => typed::<core::Service>,
        ("", "v1", "Namespace") => typed::<core::Namespace>,
        ("", "v1", "Node") => typed::<core::Node>,
        ("", "v1", "PersistentVolume") => typed::<core::PersistentVolume>,
        ("", "v1", "ReplicationController") => typed::<core::ReplicationController>,
        ("", "v1", "Event") => typed::<core::Event>,
        ("apps", "v1", "Deployment") => typed::<apps::Deployment>,
        ("apps", "v1", "ReplicaSet") => typed::<apps::ReplicaSet>,
        ("apps", "v1", "StatefulSet") => typed::<apps::StatefulSet>,
        ("apps", "v1", "DaemonSet") => typed::<apps::DaemonSet>,
        ("apps", "v1", "ControllerRevision") => typed::<apps::ControllerRevision>,
        ("batch", "v1", "Job") => typed::<batch::Job>,
        ("batch", "v1", "CronJob") => typed::<batch::CronJob>,
        ("rbac.authorization.k8s.io", "v1", "Role") => typed::<rbac::Role>,
        ("rbac.authorization.k8s.io", "v1", "RoleBinding") => typed::<rbac::RoleBinding>,
        ("rbac.authorization.k8s.io", "v1", "ClusterRole") => typed::<rbac::ClusterRole>,
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding") => typed::<rbac::ClusterRoleBinding>,
        ("coordination.k8s.io", "v1", "Lease") => typed::<api::coordination::v1::Lease>,
        ("events.k8s.io", "v1", "Event") => typed::<api::events::v1::Event>,
        ("authorization.k8s.io", "v1", "SelfSubjectAccessReview") => {
            typed::<api::authorization::v1::SelfSubjectAccessReview>
        }
        ("authorization.k8s.io", "v1", "SelfSubjectRulesReview") => {
            typed::<api::authorization::v1::SelfSubjectRulesReview>
        }
        _ => return None,
    })
}

/// The object a protobuf `body` holds, decoded by `decoder`, as a JSON object whose `apiVersion`
/// and `kind` are those of the envelope's `typeMeta`.
pub(super) fn decode(decoder: Decoder, body: &[u8]) -> Result<Value, DecodeError> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| invalid("the body does not start with the protobuf magic number \"k8s\\x00\""))?;
    let unknown = Unknown::parse_from_bytes(envelope).map_err(|e| invalid(format!("the envelope: {e}")))?;
    if !unknown.contentEncoding().is_empty() {
        return Err(invalid(format!(
            "unsupported content encoding {:?}",
            unknown.contentEncoding()
        )));
    }
    if !matches!(unknown.contentType(), "" | MEDIA_TYPE) {
        return Err(invalid(format!(
            "the envelope holds {:?}, not {MEDIA_TYPE}",
            unknown.contentType()
        )));
    }
    let type_meta = unknown.typeMeta.get_or_default();
    if type_meta.kind().is_empty() {
        return Err(invalid("the envelope names no kind"));
    }
    let mut json = match decoder(unknown.raw())? {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    for (key, value) in [("apiVersion", type_meta.apiVersion()), ("kind", type_meta.kind())] {
        if !value.is_empty() {
            json.insert(key.to_string(), Value::String(value.to_string()));
        }
    }
    Ok(Value::Object(json))
}

/// Parses `raw` as an `M` and prints it as its Kubernetes JSON form.
fn typed<M: Message + Serialize>(raw: &[u8]) -> Result<Value, DecodeError> {
    let object = M::parse_from_bytes(raw).map_err(|e| invalid(format!("{}: {e}", std::any::type_name::<M>())))?;
    // The crate's serializers unwrap a Quantity's string and a time's range: a body holding
    // either is the client's error, not the server's.
    let json = catch_unwind(AssertUnwindSafe(|| serde_json::to_value(&object)))
        .map_err(|_| invalid("a Quantity without its value, or a time out of range"))?
        .map_err(|e| invalid(e.to_string()))?;
    Ok(normalize(json, None).unwrap_or_else(|| Value::Object(Map::new())))
}

/// The zero `metav1.Time` as the crate prints it.
const ZERO_TIME: &str = "1970-01-01T00:00:00Z";

/// `value`, as the crate prints it, in its Kubernetes JSON form; `None` for a value the JSON
/// leaves out. `key` is the field `value` is the value of.
fn normalize(value: Value, key: Option<&str>) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::String(s) if s.is_empty() || (s == ZERO_TIME && is_time_field(key)) => None,
        // `bytes` fields: base64, as Go's JSON prints []byte.
        Value::Array(items) if matches!(key, Some("caBundle")) => Some(base64_of(&items)),
        Value::Array(items) => {
            let items: Vec<Value> = items.into_iter().filter_map(|v| normalize(v, None)).collect();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        Value::Object(map) => {
            // RawExtension and FieldsV1: the JSON their bytes hold.
            if let (1, Some(Value::Array(raw))) = (map.len(), map.get("raw")) {
                return raw_json(raw);
            }
            // MicroTime, which the crate prints as its fields.
            if !map.is_empty() && map.keys().all(|k| k == "seconds" || k == "nanos") {
                return micro_time(&map);
            }
            let byte_map = matches!(key, Some("data" | "binaryData"));
            let mut out = Map::new();
            for (k, v) in map {
                let k = if k == "type_" { "type".to_string() } else { k };
                let v = match v {
                    // Secret `data` and ConfigMap `binaryData` hold bytes by key.
                    Value::Array(items) if byte_map => Some(base64_of(&items)),
                    // Map values keep their empty strings (`data: {a: ""}`).
                    Value::String(s) if byte_map || key == Some("labels") || key == Some("annotations") => {
                        Some(Value::String(s))
                    }
                    v => normalize(v, Some(&k)),
                };
                if let Some(v) = v {
                    out.insert(k, v);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        other => Some(other),
    }
}

/// Whether `key` names a `metav1.Time` field (`creationTimestamp`, `lastTransitionTime`, …).
fn is_time_field(key: Option<&str>) -> bool {
    key.is_some_and(|k| k.ends_with("Timestamp") || k.ends_with("Time"))
}

fn bytes_of(items: &[Value]) -> Option<Vec<u8>> {
    items
        .iter()
        .map(|v| v.as_u64().and_then(|b| u8::try_from(b).ok()))
        .collect()
}

fn base64_of(items: &[Value]) -> Value {
    use base64::Engine;
    match bytes_of(items) {
        Some(bytes) => Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
        None => Value::Array(items.to_vec()),
    }
}

fn raw_json(raw: &[Value]) -> Option<Value> {
    let bytes = bytes_of(raw)?;
    serde_json::from_slice(&bytes).ok()
}

/// `MicroTime` as Go's JSON prints it: RFC 3339 with microseconds.
fn micro_time(fields: &Map<String, Value>) -> Option<Value> {
    let seconds = fields.get("seconds").and_then(Value::as_i64).unwrap_or(0);
    let nanos = fields.get("nanos").and_then(Value::as_i64).unwrap_or(0) / 1000 * 1000;
    let at = jiff::Timestamp::new(seconds, i32::try_from(nanos).ok()?).ok()?;
    Some(Value::String(at.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_rs_pb::api::apps::v1 as apps;
    use k8s_rs_pb::api::core::v1 as core;
    use k8s_rs_pb::apimachinery::pkg::api::resource::Quantity;
    use k8s_rs_pb::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_rs_pb::apimachinery::pkg::runtime::TypeMeta;
    use k8s_rs_pb::apimachinery::pkg::util::intstr::IntOrString;
    use protobuf::MessageField;
    use serde_json::json;

    /// The `raw` of a body's envelope, read by the generated `Unknown`.
    fn unwrapped(body: &[u8]) -> (String, Vec<u8>) {
        let unknown = Unknown::parse_from_bytes(body.strip_prefix(MAGIC).expect("the magic")).expect("an Unknown");
        (unknown.typeMeta.kind().to_string(), unknown.raw().to_vec())
    }

    /// What the server writes in protobuf ([`kube_gc::api::protobuf`], written by hand) is read by
    /// the messages generated from the Kubernetes `.proto` files as the same fields.
    #[test]
    fn the_servers_protobuf_metadata_should_read_as_the_proto_files_define_it() {
        use k8s_rs_pb::apimachinery::pkg::apis::meta::v1::{PartialObjectMetadataList, WatchEvent};
        use kube_gc::api::{protobuf as wire, ObjectMeta, OwnerReference};
        let meta = ObjectMeta {
            name: "child".into(),
            namespace: "a".into(),
            uid: "u-1".into(),
            resource_version: "42".into(),
            creation_timestamp: Some("2026-01-01T00:00:00Z".into()),
            deletion_timestamp: Some("2026-01-01T00:00:05Z".into()),
            deletion_grace_period_seconds: Some(0),
            labels: [("app".to_string(), "web".to_string())].into(),
            owner_references: vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "rs".into(),
                uid: "u-0".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }],
            finalizers: vec!["foregroundDeletion".into()],
            ..ObjectMeta::default()
        };
        let managed = json!([{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {}}}}]);
        let start = wire::ListMeta {
            resource_version: "42".into(),
            continue_token: "next".into(),
            remaining_item_count: Some(3),
        };
        let (kind, raw) = unwrapped(&wire::encode_list([(&meta, Some(&managed))], &start));
        assert_eq!(kind, "PartialObjectMetadataList");
        let list = PartialObjectMetadataList::parse_from_bytes(&raw).expect("the generated message reads it");
        assert_eq!(
            (
                list.metadata.resourceVersion(),
                list.metadata.continue_(),
                list.metadata.remainingItemCount()
            ),
            ("42", "next", 3)
        );
        let read = &list.items[0].metadata;
        assert_eq!(
            (read.name(), read.namespace(), read.uid(), read.resourceVersion()),
            ("child", "a", "u-1", "42")
        );
        assert_eq!(read.creationTimestamp.seconds(), 1_767_225_600);
        assert_eq!(read.deletionTimestamp.seconds(), 1_767_225_605);
        assert_eq!(read.deletionGracePeriodSeconds(), 0);
        assert_eq!(read.labels.get("app").map(String::as_str), Some("web"));
        let owner = &read.ownerReferences[0];
        assert_eq!(
            (
                owner.apiVersion(),
                owner.kind(),
                owner.name(),
                owner.uid(),
                owner.controller(),
                owner.blockOwnerDeletion()
            ),
            ("apps/v1", "ReplicaSet", "rs", "u-0", true, true)
        );
        assert_eq!(read.finalizers, ["foregroundDeletion"]);
        let entry = &read.managedFields[0];
        assert_eq!(
            (entry.manager(), entry.operation(), entry.fieldsType()),
            ("kubectl", "Update", "FieldsV1")
        );
        assert_eq!(entry.fieldsV1.Raw(), br#"{"f:metadata":{"f:labels":{}}}"#);

        let frame = wire::encode_watch_event("DELETED", &wire::encode_object(&meta, None));
        assert_eq!(
            u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize,
            frame.len() - 4
        );
        let (kind, raw) = unwrapped(&frame[4..]);
        assert_eq!(kind, "WatchEvent");
        let event = WatchEvent::parse_from_bytes(&raw).expect("the generated message reads it");
        assert_eq!(event.type_(), "DELETED");
        let (kind, raw) = unwrapped(event.object.raw());
        assert_eq!(kind, "PartialObjectMetadata");
        let object = k8s_rs_pb::apimachinery::pkg::apis::meta::v1::PartialObjectMetadata::parse_from_bytes(&raw)
            .expect("the generated message reads it");
        assert_eq!(object.metadata.name(), "child");
    }

    /// `object` in the API server's envelope, as client-go writes it.
    fn envelope<M: Message>(api_version: &str, kind: &str, object: &M) -> Vec<u8> {
        let mut unknown = Unknown::new();
        let mut type_meta = TypeMeta::new();
        type_meta.set_apiVersion(api_version.to_string());
        type_meta.set_kind(kind.to_string());
        unknown.typeMeta = MessageField::some(type_meta);
        unknown.set_raw(object.write_to_bytes().expect("encodes"));
        unknown.set_contentEncoding(String::new());
        unknown.set_contentType(String::new());
        let mut body = MAGIC.to_vec();
        body.extend(unknown.write_to_bytes().expect("encodes"));
        body
    }

    /// Metadata as Go writes it: every non-pointer field, the zero creation time included.
    fn meta(name: &str, namespace: &str) -> MessageField<ObjectMeta> {
        let mut meta = ObjectMeta::new();
        meta.set_name(name.to_string());
        meta.set_generateName(String::new());
        meta.set_namespace(namespace.to_string());
        meta.set_uid(String::new());
        meta.set_resourceVersion(String::new());
        meta.set_generation(0);
        meta.creationTimestamp = MessageField::some(Time::new());
        MessageField::some(meta)
    }

    fn decoded(group: &str, kind: &str, body: &[u8]) -> Value {
        let decoder = message(group, "v1", kind).expect("a built-in type");
        decode(decoder, body).expect("decodes")
    }

    #[test]
    fn a_namespace_should_decode_to_its_json_form() {
        let mut ns = core::Namespace::new();
        ns.metadata = meta("x", "");
        ns.spec = MessageField::some(core::NamespaceSpec::new());
        ns.status = MessageField::some(core::NamespaceStatus::new());
        let json = decoded("", "Namespace", &envelope("v1", "Namespace", &ns));
        assert_eq!(
            json,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "generation": 0}})
        );
    }

    #[test]
    fn a_configmap_should_decode_with_its_data_and_labels() {
        let mut cm = core::ConfigMap::new();
        cm.metadata = meta("c", "default");
        if let Some(m) = cm.metadata.as_mut() {
            m.labels.insert("app".into(), "web".into());
            let mut created = Time::new();
            created.set_seconds(1_700_000_000);
            created.set_nanos(5);
            m.creationTimestamp = MessageField::some(created);
        }
        cm.data.insert("a".into(), "b".into());
        cm.data.insert("empty".into(), String::new());
        cm.binaryData.insert("bin".into(), vec![0, 1, 2, 255]);
        let json = decoded("", "ConfigMap", &envelope("v1", "ConfigMap", &cm));
        assert_eq!(
            json,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "c", "namespace": "default", "generation": 0, "labels": {"app": "web"},
                                "creationTimestamp": "2023-11-14T22:13:20Z"},
                   "data": {"a": "b", "empty": ""}, "binaryData": {"bin": "AAEC/w=="}})
        );
    }

    #[test]
    fn a_secret_should_decode_its_data_bytes_to_base64() {
        let mut secret = core::Secret::new();
        secret.metadata = meta("s", "default");
        secret.data.insert("a".into(), b"b".to_vec());
        secret.set_type("Opaque".into());
        let json = decoded("", "Secret", &envelope("v1", "Secret", &secret));
        assert_eq!(json["data"], json!({"a": "Yg=="}));
        assert_eq!(json["type"], "Opaque");
        assert_eq!(json["metadata"]["name"], "s");
    }

    #[test]
    fn a_deployment_should_decode_int_or_strings_and_quantities() {
        let int_or_string = |v: Result<i32, &str>| {
            let mut x = IntOrString::new();
            match v {
                // As Go writes a number: all three fields.
                Ok(i) => {
                    x.set_type(0);
                    x.set_intVal(i);
                    x.set_strVal(String::new());
                }
                // A string, without the `intVal` Go would add (see the module's known limit).
                Err(s) => {
                    x.set_type(1);
                    x.set_strVal(s.to_string());
                }
            }
            MessageField::some(x)
        };
        let quantity = |s: &str| {
            let mut q = Quantity::new();
            q.set_string(s.to_string());
            q
        };
        let mut container = core::Container::new();
        container.set_name("nginx".into());
        container.set_image("nginx".into());
        container.set_imagePullPolicy(String::new());
        let mut resources = core::ResourceRequirements::new();
        resources.limits.insert("cpu".into(), quantity("500m"));
        resources.requests.insert("memory".into(), quantity("64Mi"));
        container.resources = MessageField::some(resources);
        let mut pod_spec = core::PodSpec::new();
        pod_spec.containers.push(container);
        pod_spec.set_terminationGracePeriodSeconds(0);
        let mut template = core::PodTemplateSpec::new();
        template.metadata = meta("", "");
        template.spec = MessageField::some(pod_spec);
        let mut rolling = apps::RollingUpdateDeployment::new();
        rolling.maxSurge = int_or_string(Err("25%"));
        rolling.maxUnavailable = int_or_string(Ok(1));
        let mut strategy = apps::DeploymentStrategy::new();
        strategy.set_type("RollingUpdate".into());
        strategy.rollingUpdate = MessageField::some(rolling);
        let mut spec = apps::DeploymentSpec::new();
        spec.set_replicas(0);
        spec.template = MessageField::some(template);
        spec.strategy = MessageField::some(strategy);
        let mut deployment = apps::Deployment::new();
        deployment.metadata = meta("d", "default");
        deployment.spec = MessageField::some(spec);

        let json = decoded("apps", "Deployment", &envelope("apps/v1", "Deployment", &deployment));
        assert_eq!(json["apiVersion"], "apps/v1");
        assert_eq!(json["kind"], "Deployment");
        assert_eq!(json["spec"]["replicas"], 0, "a pointer's zero is kept");
        assert_eq!(
            json["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}})
        );
        assert_eq!(
            json["spec"]["template"]["spec"],
            json!({"containers": [{"name": "nginx", "image": "nginx",
                                   "resources": {"limits": {"cpu": "500m"}, "requests": {"memory": "64Mi"}}}],
                   "terminationGracePeriodSeconds": 0})
        );
        assert_eq!(json["spec"]["template"]["metadata"], json!({"generation": 0}));
        assert!(json["status"].is_null(), "no status was sent: {json}");
    }

    #[test]
    fn a_body_that_is_not_an_envelope_should_be_an_error_never_a_panic() {
        let decoder = message("", "v1", "ConfigMap").expect("a built-in type");
        let mut cm = core::ConfigMap::new();
        cm.metadata = meta("c", "default");
        cm.data.insert("a".into(), "b".repeat(100));
        let body = envelope("v1", "ConfigMap", &cm);
        // Cut anywhere it never panics; cut before the kind, or inside the object, it is an
        // error (protobuf cannot tell a message cut between two fields from a shorter one).
        for len in 0..body.len() {
            let decoded = decode(decoder, &body[..len]);
            if len < 4 + 2 + 2 + "v1".len() + 2 + "ConfigMap".len() || len == body.len() - 60 {
                assert!(decoded.is_err(), "cut at {len} bytes");
            }
        }
        assert!(decode(decoder, b"{\"kind\": \"ConfigMap\"}").is_err());
        assert!(decode(decoder, b"k8s").is_err());
        let mut garbage = MAGIC.to_vec();
        garbage.extend([0x12, 0x05, 0xff, 0xff, 0xff, 0xff, 0xff]);
        assert!(decode(decoder, &garbage).is_err());
        // Every single-byte corruption either decodes or is an error.
        for i in MAGIC.len()..body.len() {
            let mut corrupt = body.clone();
            corrupt[i] ^= 0xa5;
            let _ = decode(decoder, &corrupt);
        }
    }

    #[test]
    fn an_envelope_with_an_encoding_should_be_refused() {
        let decoder = message("", "v1", "Namespace").expect("a built-in type");
        let mut unknown = Unknown::new();
        unknown.set_raw(Vec::new());
        unknown.set_contentEncoding("gzip".into());
        let mut body = MAGIC.to_vec();
        body.extend(unknown.write_to_bytes().expect("encodes"));
        assert!(decode(decoder, &body).is_err());
    }

    #[test]
    fn custom_resources_should_have_no_message() {
        assert!(message("example.com", "v1", "Gadget").is_none());
        assert!(message("apps", "v1", "Gadget").is_none());
        assert!(message("apps", "v1", "Deployment").is_some());
    }

    #[test]
    fn event_times_raw_extensions_and_out_of_range_values_should_decode_or_be_refused() {
        let mut event = k8s_rs_pb::api::events::v1::Event::new();
        event.metadata = meta("e", "default");
        // The crate types `eventTime` (a MicroTime in Go) as a Time: it keeps whole seconds.
        let mut at = Time::new();
        at.set_seconds(1_700_000_000);
        at.set_nanos(123_456_789);
        event.eventTime = MessageField::some(at);
        event.set_reason("Pulled".into());
        let json = decoded("events.k8s.io", "Event", &envelope("events.k8s.io/v1", "Event", &event));
        assert_eq!(json["eventTime"], "2023-11-14T22:13:20Z");
        assert_eq!(json["reason"], "Pulled");

        let mut revision = apps::ControllerRevision::new();
        revision.metadata = meta("r", "default");
        let mut data = k8s_rs_pb::apimachinery::pkg::runtime::RawExtension::new();
        data.set_raw(br#"{"spec": {"replicas": 2}}"#.to_vec());
        revision.data = MessageField::some(data);
        revision.set_revision(3);
        let json = decoded(
            "apps",
            "ControllerRevision",
            &envelope("apps/v1", "ControllerRevision", &revision),
        );
        assert_eq!(json["data"], json!({"spec": {"replicas": 2}}));
        assert_eq!(json["revision"], 3);

        // The crate's serializers panic on these; the body is refused instead.
        let decoder = message("", "v1", "ConfigMap").expect("a built-in type");
        let mut cm = core::ConfigMap::new();
        cm.metadata = meta("c", "default");
        if let Some(m) = cm.metadata.as_mut() {
            let mut far = Time::new();
            far.set_seconds(i64::MAX);
            m.creationTimestamp = MessageField::some(far);
        }
        assert!(decode(decoder, &envelope("v1", "ConfigMap", &cm)).is_err());
        let decoder = message("", "v1", "Pod").expect("a built-in type");
        let mut pod = core::Pod::new();
        let mut container = core::Container::new();
        let mut resources = core::ResourceRequirements::new();
        resources.limits.insert("cpu".into(), Quantity::new());
        container.resources = MessageField::some(resources);
        let mut spec = core::PodSpec::new();
        spec.containers.push(container);
        pod.spec = MessageField::some(spec);
        assert!(decode(decoder, &envelope("v1", "Pod", &pod)).is_err());
    }
}
