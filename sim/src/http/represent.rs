//! Response bodies: objects, lists, tables and `Status`es in the JSON shapes clients decode.
//!
//! Objects come from the store in stored form and are stamped with the `apiVersion` and `kind` of
//! the version the request went through. A metadata request gets `PartialObjectMetadata`, whose
//! own `apiVersion` and `kind` are `meta.k8s.io/v1` and `PartialObjectMetadata`, as a real server
//! answers; a table request gets the columns the type's [printer](super::printers) prints.
//!
//! Every object that field managers wrote is presented with its `metadata.managedFields`, which the
//! simulator keeps beside it ([`crate::FieldsTable`]): as of the moment it is presented, so a
//! watch event replayed for an object changed since shows the newer managers, and a DELETED event
//! shows none.

use super::printers::Printer;
use super::request::{IncludeObject, Representation};
use crate::{FieldsTable, Written};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use k8s_openapi::jiff::Timestamp;
use kube_gc::api::{ApiError, PartialObjectMeta, StatusReason};
use serde_json::{json, Value};
use std::sync::Arc;

/// `apiVersion` of the meta.k8s.io representations.
const META_V1: &str = "meta.k8s.io/v1";

/// How a collection's objects are presented: the representation, what table rows carry, and
/// where their managed fields are.
#[derive(Clone)]
pub(super) struct Presentation {
    pub(super) representation: Representation,
    pub(super) include_object: IncludeObject,
    pub(super) fields: Arc<FieldsTable>,
    /// The columns of a table ([`super::printers`]).
    pub(super) printer: Printer,
}

/// The list metadata of a response.
#[derive(Clone, Debug, Default)]
pub(super) struct ListMeta {
    pub(super) resource_version: u64,
    pub(super) continue_token: Option<String>,
    pub(super) remaining: Option<usize>,
    /// The `shardSelector` the list applied, as the request gave it.
    pub(super) shard_selector: Option<String>,
}

impl ListMeta {
    fn to_json(&self) -> Value {
        let mut meta = json!({ "resourceVersion": self.resource_version.to_string() });
        if let Some(token) = &self.continue_token {
            meta["continue"] = json!(token);
        }
        if let Some(remaining) = self.remaining.filter(|&r| r > 0) {
            meta["remainingItemCount"] = json!(remaining);
        }
        if let Some(selector) = &self.shard_selector {
            meta["shardInfo"] = json!({ "selector": selector });
        }
        meta
    }
}

impl Presentation {
    /// One object, as a GET or a watch event presents it.
    pub(super) fn object(&self, obj: &PartialObjectMeta) -> Value {
        self.with_fields(obj, self.managed_fields(obj).as_deref())
    }

    /// An object as a create, update or patch left it.
    pub(super) fn written(&self, written: &Written) -> Value {
        self.with_fields(&written.object, written.managed_fields.as_deref())
    }

    fn with_fields(&self, obj: &PartialObjectMeta, managed_fields: Option<&Value>) -> Value {
        match self.representation {
            Representation::Full => full(obj, managed_fields),
            Representation::Metadata => metadata(obj, managed_fields),
            Representation::Table => self.table(std::slice::from_ref(obj), &ListMeta::default()),
        }
    }

    fn managed_fields(&self, obj: &PartialObjectMeta) -> Option<crate::ManagedFieldsList> {
        self.fields.get(&obj.metadata.uid)
    }

    /// A page of a collection. `kind` is the type's kind; a full list is `{kind}List`.
    pub(super) fn list(&self, items: &[PartialObjectMeta], api_version: &str, kind: &str, meta: &ListMeta) -> Value {
        match self.representation {
            Representation::Full => json!({
                "kind": format!("{kind}List"),
                "apiVersion": api_version,
                "metadata": meta.to_json(),
                "items": items.iter().map(|o| full(o, self.managed_fields(o).as_deref())).collect::<Vec<_>>(),
            }),
            Representation::Metadata => json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": META_V1,
                "metadata": meta.to_json(),
                "items": items.iter().map(|o| metadata(o, self.managed_fields(o).as_deref())).collect::<Vec<_>>(),
            }),
            Representation::Table => self.table(items, meta),
        }
    }

    /// The object of a BOOKMARK event: only its resourceVersion means anything.
    pub(super) fn bookmark(&self, api_version: &str, kind: &str, resource_version: u64) -> Value {
        let (api_version, kind) = match self.representation {
            Representation::Full => (api_version, kind),
            Representation::Metadata => (META_V1, "PartialObjectMetadata"),
            Representation::Table => (META_V1, "Table"),
        };
        json!({"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": resource_version.to_string()}})
    }

    fn table(&self, items: &[PartialObjectMeta], meta: &ListMeta) -> Value {
        let now = Timestamp::now();
        let rows: Vec<Value> = items
            .iter()
            .map(|obj| {
                let mut row = json!({"cells": self.printer.cells(obj, now)});
                match self.include_object {
                    IncludeObject::None => {}
                    IncludeObject::Metadata => row["object"] = metadata(obj, self.managed_fields(obj).as_deref()),
                    IncludeObject::Object => row["object"] = full(obj, self.managed_fields(obj).as_deref()),
                }
                row
            })
            .collect();
        json!({
            "kind": "Table",
            "apiVersion": META_V1,
            "metadata": meta.to_json(),
            "columnDefinitions": self.printer.column_definitions(),
            "rows": rows,
        })
    }
}

fn full(obj: &PartialObjectMeta, managed_fields: Option<&Value>) -> Value {
    let mut out = serde_json::to_value(obj).unwrap_or(Value::Null);
    with_managed_fields(&mut out, managed_fields);
    out
}

fn metadata(obj: &PartialObjectMeta, managed_fields: Option<&Value>) -> Value {
    let mut out = json!({"kind": "PartialObjectMetadata", "apiVersion": META_V1, "metadata": obj.metadata});
    with_managed_fields(&mut out, managed_fields);
    out
}

/// Adds `metadata.managedFields` to a presented object, when it has any.
fn with_managed_fields(presented: &mut Value, managed_fields: Option<&Value>) {
    if let (Some(Value::Object(meta)), Some(list)) = (presented.get_mut("metadata"), managed_fields) {
        meta.insert("managedFields".to_string(), list.clone());
    }
}

/// A `metav1.Status` failure for `err`.
pub(super) fn failure(err: &ApiError) -> Value {
    let (reason, message) = match err {
        ApiError::Status { reason, message, .. } => (*reason, message.clone()),
        other => (StatusReason::InternalError, other.to_string()),
    };
    let mut status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "code": reason.code(),
    });
    // An empty reason is left out, as upstream's `omitempty` leaves it.
    if !reason.as_str().is_empty() {
        status["reason"] = json!(reason.as_str());
    }
    if reason == StatusReason::TooManyRequests {
        status["details"] = json!({"retryAfterSeconds": RETRY_AFTER_SECONDS});
    }
    let causes: Vec<Value> = err
        .causes()
        .iter()
        .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
        .collect();
    if !causes.is_empty() {
        status["details"] = json!({ "causes": causes });
    }
    if let Some(object) = err.object() {
        let details = &mut status["details"];
        details["name"] = json!(object.name);
        details["kind"] = json!(object.kind);
        // Upstream leaves out an empty group (the core one).
        if !object.group.is_empty() {
            details["group"] = json!(object.group);
        }
    }
    status
}

/// What a throttled client is told to wait, in seconds.
pub(super) const RETRY_AFTER_SECONDS: u64 = 1;

/// A `metav1.Status` success, as a DELETE of an object that is gone answers.
pub(super) fn success(details: Value) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

/// A JSON response.
pub(super) fn json_response(code: StatusCode, body: &Value) -> Response {
    let mut response = (code, body.to_string()).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// The error response for `err`, with `Retry-After` when the client is throttled.
pub(super) fn error_response(err: &ApiError) -> Response {
    let code = err.reason().map_or(500, StatusReason::code);
    let mut response = json_response(
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &failure(err),
    );
    if err.reason() == Some(StatusReason::TooManyRequests) {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    }
    response
}
