//! The `status` and `scale` subresources of the built-in types that have them
//! ([`strategy::has_status`], [`strategy::has_scale`]).
//!
//! - `status`: GET reads the object; PUT and PATCH (a patch or an apply) write its `.status` and
//!   nothing else ([`Part::Status`]), through the same write path as the object's own writes.
//! - `scale`: the object seen as an `autoscaling/v1` `Scale` (`spec.replicas`, `status.replicas`,
//!   `status.selector` as a selector string). GET reads it; PUT writes the Scale's `spec.replicas`
//!   into the object, with the Scale's resourceVersion as the precondition; PATCH patches the
//!   Scale and writes the result the same way, retrying a few times when the object changed in
//!   between, as the registry retries a patch. Server-side apply of a Scale is not served (415).
//!
//! Every other subresource, and a subresource of a type without it, is 404; a verb neither
//! subresource takes (DELETE) is 405.

use super::represent::{json_response, Presentation};
use super::request::{HttpVerb, Params, ResourcePath};
use super::resources::{bad_request, method_not_allowed, patch_kind, PatchKind};
use super::Server;
use crate::patch::PatchError;
use crate::strategy::{has_scale, has_status};
use crate::{Part, TypeDef};
use axum::body::Body;
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::Response;
use kube_gc::api::{ApiError, PartialObjectMeta, PatchType, StatusReason};
use serde_json::{json, Map, Value};

/// How often a Scale PATCH is retried when the object changed between its read and its write.
const SCALE_PATCH_ATTEMPTS: usize = 5;

/// A subresource request, as [`Server::resource`] hands it over.
pub(super) struct SubresourceCall<'a> {
    pub(super) def: &'a TypeDef,
    pub(super) path: &'a ResourcePath,
    pub(super) verb: HttpVerb,
    pub(super) params: &'a Params,
    pub(super) dry_run: bool,
    pub(super) presentation: &'a Presentation,
}

impl Server {
    /// Serves `call` on the subresource its path names.
    pub(super) async fn subresource(
        &self,
        call: SubresourceCall<'_>,
        parts: Parts,
        body: Body,
    ) -> Result<Response, ApiError> {
        let subresource = call.path.subresource.as_deref().unwrap_or_default();
        let served = match subresource {
            "status" => has_status(call.def),
            "scale" => has_scale(call.def),
            _ => false,
        };
        if !served || call.path.name.is_none() {
            return Err(ApiError::status(
                StatusReason::NotFound,
                "the server could not find the requested resource",
            ));
        }
        if !matches!(call.verb, HttpVerb::Get | HttpVerb::Update | HttpVerb::Patch) {
            return Err(method_not_allowed());
        }
        if subresource == "status" {
            self.status(&call, parts, body).await
        } else {
            self.scale(&call, parts, body).await
        }
    }

    async fn status(&self, call: &SubresourceCall<'_>, parts: Parts, body: Body) -> Result<Response, ApiError> {
        let (namespace, name) = names(call.path);
        let gvr = &call.path.gvr;
        let written = match call.verb {
            HttpVerb::Get => {
                let obj = self.cluster.get_object(gvr, namespace, name)?;
                return Ok(call.presentation.respond(StatusCode::OK, &obj));
            }
            HttpVerb::Update => {
                let obj = self.object_body(&parts, body, call.def, call.path).await?;
                let writes = self.updates(&parts, call.params, call.dry_run).to(Part::Status);
                writes.update(gvr, obj)?
            }
            _ => {
                self.patch(call.path, call.params, call.dry_run, Part::Status, parts, body)
                    .await?
            }
        };
        Ok(call.presentation.respond_written(StatusCode::OK, &written))
    }

    async fn scale(&self, call: &SubresourceCall<'_>, parts: Parts, body: Body) -> Result<Response, ApiError> {
        let (namespace, name) = names(call.path);
        let gvr = &call.path.gvr;
        let object = self.cluster.get_object(gvr, namespace, name)?;
        let scaled = match call.verb {
            HttpVerb::Get => object,
            HttpVerb::Update => {
                let scale = self.json_body(&parts, body).await?;
                let scale = decode_scale(&scale, name)?;
                let writes = self.updates(&parts, call.params, call.dry_run);
                writes.update(gvr, with_replicas(object, &scale)?)?.object
            }
            _ => {
                let patch_type = match patch_kind(&parts)? {
                    PatchKind::Patch(patch_type) => patch_type,
                    PatchKind::Apply => {
                        return Err(ApiError::status(
                            StatusReason::UnsupportedMediaType,
                            "server-side apply of a Scale is not served",
                        ))
                    }
                };
                let patch = self.json_body(&parts, body).await?;
                self.patch_scale(call, object, patch_type, &patch, &parts)?
            }
        };
        Ok(json_response(StatusCode::OK, &scale_of(call.def, &scaled)))
    }

    /// Patches the Scale of `object` and writes its replicas, from a fresh read of the object
    /// each time the write finds it changed.
    fn patch_scale(
        &self,
        call: &SubresourceCall<'_>,
        mut object: PartialObjectMeta,
        patch_type: PatchType,
        patch: &Value,
        parts: &Parts,
    ) -> Result<PartialObjectMeta, ApiError> {
        let (namespace, name) = names(call.path);
        let gvr = &call.path.gvr;
        for _ in 1..SCALE_PATCH_ATTEMPTS {
            match self.write_patched_scale(call, object, patch_type, patch, parts) {
                Err(e) if e.is_conflict() => object = self.cluster.get_object(gvr, namespace, name)?,
                answer => return answer,
            }
        }
        self.write_patched_scale(call, object, patch_type, patch, parts)
    }

    fn write_patched_scale(
        &self,
        call: &SubresourceCall<'_>,
        object: PartialObjectMeta,
        patch_type: PatchType,
        patch: &Value,
        parts: &Parts,
    ) -> Result<PartialObjectMeta, ApiError> {
        let (_, name) = names(call.path);
        let scale: PartialObjectMeta = serde_json::from_value(scale_of(call.def, &object)).unwrap_or_default();
        let patched = crate::patch::apply(patch_type, &scale, patch).map_err(|e| match e {
            PatchError::Malformed(m) => bad_request(m),
            PatchError::NotApplicable(m) => scale_invalid(name, &m),
        })?;
        let mut scale = decode_scale(&patched, name)?;
        // The write is made on the object as read: a change since is a conflict, and a retry.
        scale
            .metadata
            .resource_version
            .clone_from(&object.metadata.resource_version);
        let writes = self.updates(parts, call.params, call.dry_run);
        Ok(writes.update(&call.path.gvr, with_replicas(object, &scale)?)?.object)
    }
}

fn names(path: &ResourcePath) -> (&str, &str) {
    (
        path.namespace.as_deref().unwrap_or_default(),
        path.name.as_deref().unwrap_or_default(),
    )
}

fn scale_invalid(name: &str, detail: &str) -> ApiError {
    ApiError::status(
        StatusReason::Invalid,
        format!("Scale.autoscaling {name:?} is invalid: {detail}"),
    )
}

/// A Scale body, whose name must be the URL's.
fn decode_scale(value: &Value, name: &str) -> Result<PartialObjectMeta, ApiError> {
    let scale: PartialObjectMeta = serde_json::from_value(value.clone())
        .map_err(|e| bad_request(format!("the Scale could not be decoded: {e}")))?;
    if scale.metadata.name != name {
        return Err(bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            scale.metadata.name
        )));
    }
    Ok(scale)
}

/// `object` with the replicas `scale` asks for, under the Scale's resourceVersion as precondition.
fn with_replicas(mut object: PartialObjectMeta, scale: &PartialObjectMeta) -> Result<PartialObjectMeta, ApiError> {
    let replicas = scale
        .rest
        .get("spec")
        .and_then(|s| s.get("replicas"))
        .unwrap_or(&Value::Null);
    let replicas = match replicas {
        Value::Null => 0,
        Value::Number(n) if n.as_i64().is_some_and(|n| (0..=i64::from(i32::MAX)).contains(&n)) => {
            n.as_i64().unwrap_or_default()
        }
        other => {
            return Err(scale_invalid(
                &scale.metadata.name,
                &format!("spec.replicas: Invalid value: {other}: must be greater than or equal to 0"),
            ))
        }
    };
    let spec = object.rest.entry("spec").or_insert_with(|| json!({}));
    if let Some(spec) = spec.as_object_mut() {
        spec.insert("replicas".into(), json!(replicas));
    }
    object
        .metadata
        .resource_version
        .clone_from(&scale.metadata.resource_version);
    Ok(object)
}

/// The `autoscaling/v1` Scale of `object`.
pub(super) fn scale_of(def: &TypeDef, object: &PartialObjectMeta) -> Value {
    let field = |part: &str, key: &str| object.rest.get(part).and_then(|p| p.get(key)).cloned();
    let meta = &object.metadata;
    let selector = match (def.group.as_str(), field("spec", "selector")) {
        // A ReplicationController's selector is a plain map of labels.
        ("", Some(Value::Object(labels))) => match_labels(&labels).join(","),
        (_, Some(selector)) => label_selector(&selector),
        (_, None) => String::new(),
    };
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta.name,
            "namespace": meta.namespace,
            "uid": meta.uid,
            "resourceVersion": meta.resource_version,
            "creationTimestamp": meta.creation_timestamp,
        },
        "spec": {"replicas": field("spec", "replicas").unwrap_or(json!(0))},
        "status": {"replicas": field("status", "replicas").unwrap_or(json!(0)), "selector": selector},
    })
}

fn match_labels(labels: &Map<String, Value>) -> Vec<String> {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect()
}

/// A `metav1.LabelSelector` in the selector syntax (`a=b,c in (d,e),!f`).
pub(super) fn label_selector(selector: &Value) -> String {
    let mut terms = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(match_labels)
        .unwrap_or_default();
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    for expression in expressions.into_iter().flatten() {
        let text = |k: &str| expression.get(k).and_then(Value::as_str).unwrap_or_default();
        let values: Vec<&str> = expression
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let key = text("key");
        terms.push(match text("operator") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        });
    }
    terms.join(",")
}

/// The discovery entries of `def`'s subresources.
pub(super) fn discovery_entries(def: &TypeDef) -> Vec<Value> {
    let verbs = ["get", "patch", "update"];
    let mut entries = Vec::new();
    if has_status(def) {
        entries.push(json!({"name": format!("{}/status", def.resource), "singularName": "",
            "namespaced": def.namespaced, "kind": def.kind, "verbs": verbs}));
    }
    if has_scale(def) {
        entries.push(json!({"name": format!("{}/scale", def.resource), "singularName": "",
            "namespaced": def.namespaced, "group": "autoscaling", "version": "v1", "kind": "Scale",
            "verbs": verbs}));
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_selector_should_print_in_the_selector_syntax() {
        let cases = [
            (json!({"matchLabels": {"app": "a"}}), "app=a"),
            (
                json!({"matchLabels": {"a": "1", "b": "2"},
                    "matchExpressions": [{"key": "c", "operator": "In", "values": ["x", "y"]},
                                         {"key": "d", "operator": "NotIn", "values": ["z"]},
                                         {"key": "e", "operator": "Exists"},
                                         {"key": "f", "operator": "DoesNotExist"}]}),
                "a=1,b=2,c in (x,y),d notin (z),e,!f",
            ),
            (json!({}), ""),
        ];
        for (selector, expected) in cases {
            assert_eq!(label_selector(&selector), expected, "{selector}");
        }
    }

    #[test]
    fn a_scale_should_carry_the_replicas_and_the_selector() {
        let deployments = TypeDef::new("apps", "v1", "Deployment", "deployments", true);
        let object: PartialObjectMeta = serde_json::from_value(json!({
            "metadata": {"name": "d", "namespace": "ns", "resourceVersion": "7"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "d"}}},
            "status": {"replicas": 2},
        }))
        .expect("object");
        let scale = scale_of(&deployments, &object);
        assert_eq!(scale["spec"]["replicas"], 3);
        assert_eq!(scale["status"], json!({"replicas": 2, "selector": "app=d"}));
        assert_eq!(scale["metadata"]["resourceVersion"], "7");
        let rcs = TypeDef::new("", "v1", "ReplicationController", "replicationcontrollers", true);
        let rc: PartialObjectMeta =
            serde_json::from_value(json!({"metadata": {"name": "r"}, "spec": {"selector": {"app": "r"}}})).expect("rc");
        assert_eq!(scale_of(&rcs, &rc)["status"]["selector"], "app=r");
    }

    #[test]
    fn with_replicas_should_refuse_a_negative_count() {
        let scale = |replicas: Value| -> PartialObjectMeta {
            serde_json::from_value(json!({"metadata": {"name": "d", "resourceVersion": "3"},
                "spec": {"replicas": replicas}}))
            .expect("scale")
        };
        let object = PartialObjectMeta::default();
        let scaled = with_replicas(object.clone(), &scale(json!(4))).expect("scaled");
        assert_eq!(scaled.rest["spec"]["replicas"], 4);
        assert_eq!(scaled.metadata.resource_version, "3");
        let err = with_replicas(object, &scale(json!(-1))).expect_err("negative");
        assert_eq!(err.reason(), Some(StatusReason::Invalid));
    }
}
