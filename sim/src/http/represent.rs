//! Response bodies: objects, lists, tables and `Status`es in the JSON shapes clients decode, and
//! metadata in protobuf ([`kube_gc::api::protobuf`]) for a client that asks for it first.
//!
//! Objects come from the store in stored form and are stamped with the `apiVersion` and `kind` of
//! the version the request went through. A metadata request gets `PartialObjectMetadata`, whose
//! own `apiVersion` and `kind` are `meta.k8s.io/v1` and `PartialObjectMetadata`, as a real server
//! answers; a table request gets the columns the type's [printer](super::printers) prints.
//!
//! Protobuf is offered for `PartialObjectMetadata` and its list alone, of every type (custom
//! resources too), as a real server offers it; full objects and tables stay JSON
//! ([`super::request::negotiate`]). Errors follow the request's encoding: a `Status` in protobuf
//! when the client asked for protobuf first.
//!
//! Every object that field managers wrote is presented with its `metadata.managedFields`, which the
//! simulator keeps beside it ([`crate::FieldsTable`]): as of the moment it is presented, so a
//! watch event replayed for an object changed since shows the newer managers, and a DELETED event
//! shows none.

use super::printers::Printer;
use super::request::{Encoding, IncludeObject, Representation};
use crate::{FieldsTable, Stamp, Written};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use k8s_openapi::jiff::Timestamp;
use kube_gc::api::protobuf;
use kube_gc::api::{ApiError, PartialObjectMeta, StatusReason, WatchEventType, INITIAL_EVENTS_END};
use serde_json::{json, Value};
use std::sync::Arc;

/// `apiVersion` of the meta.k8s.io representations.
const META_V1: &str = "meta.k8s.io/v1";

/// How a collection's objects are presented: the representation, what table rows carry, and
/// where their managed fields are.
#[derive(Clone)]
pub(super) struct Presentation {
    pub(super) representation: Representation,
    /// JSON, or protobuf (for [`Representation::Metadata`] only).
    pub(super) encoding: Encoding,
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
    /// The answer of a GET, or of a write with no managed fields of its own to show.
    pub(super) fn respond(&self, code: StatusCode, obj: &PartialObjectMeta) -> Response {
        let managed_fields = self.managed_fields(obj);
        self.respond_with(code, obj, managed_fields.as_deref())
    }

    /// The answer of a create, update or patch.
    pub(super) fn respond_written(&self, code: StatusCode, written: &Written) -> Response {
        self.respond_with(code, &written.object, written.managed_fields.as_deref())
    }

    fn respond_with(&self, code: StatusCode, obj: &PartialObjectMeta, managed_fields: Option<&Value>) -> Response {
        match self.encoding {
            Encoding::Json => json_response(code, &self.with_fields(obj, managed_fields)),
            Encoding::Protobuf => protobuf_response(code, protobuf::encode_object(&obj.metadata, managed_fields)),
        }
    }

    /// The answer of a LIST (or a DELETE of a collection): a page of `kind`'s objects.
    pub(super) fn respond_list(
        &self,
        items: &[PartialObjectMeta],
        api_version: &str,
        kind: &str,
        meta: &ListMeta,
    ) -> Response {
        match self.encoding {
            Encoding::Json => json_response(StatusCode::OK, &self.list(items, api_version, kind, meta)),
            Encoding::Protobuf => {
                let managed: Vec<_> = items.iter().map(|o| self.managed_fields(o)).collect();
                let start = protobuf::ListMeta {
                    resource_version: meta.resource_version.to_string(),
                    continue_token: meta.continue_token.clone().unwrap_or_default(),
                    remaining_item_count: meta.remaining.filter(|&r| r > 0).map(|r| r as i64),
                };
                let items = items.iter().zip(&managed).map(|(o, m)| (&o.metadata, m.as_deref()));
                protobuf_response(StatusCode::OK, protobuf::encode_list(items, &start))
            }
        }
    }

    /// The `Content-Type` of a watch response.
    pub(super) fn watch_content_type(&self) -> &'static str {
        match self.encoding {
            Encoding::Json => "application/json",
            Encoding::Protobuf => protobuf::STREAM_MEDIA_TYPE,
        }
    }

    /// A watch event of `obj`, a stored object, which keeps no apiVersion and kind: a JSON line,
    /// whose object is stamped with `stamp`, or a protobuf frame, which names
    /// `PartialObjectMetadata` instead.
    pub(super) fn event(&self, event_type: WatchEventType, obj: &PartialObjectMeta, stamp: &Stamp) -> Vec<u8> {
        match self.encoding {
            Encoding::Json => {
                let mut stamped = obj.clone();
                stamp.on(&mut stamped);
                line(&json!({"type": event_type, "object": self.object(&stamped)}))
            }
            Encoding::Protobuf => {
                let managed_fields = self.managed_fields(obj);
                let object = protobuf::encode_object(&obj.metadata, managed_fields.as_deref());
                protobuf::encode_watch_event(event_type_name(event_type), &object)
            }
        }
    }

    /// A BOOKMARK event at `resource_version`; the one that ends a watch-list's initial events
    /// carries [`INITIAL_EVENTS_END`].
    pub(super) fn bookmark_event(&self, stamp: &Stamp, resource_version: u64, ends_initial: bool) -> Vec<u8> {
        match self.encoding {
            Encoding::Json => {
                let mut object = self.bookmark(&stamp.api_version, &stamp.kind, resource_version);
                if ends_initial {
                    object["metadata"]["annotations"] = json!({ INITIAL_EVENTS_END: "true" });
                }
                line(&json!({"type": "BOOKMARK", "object": object}))
            }
            Encoding::Protobuf => {
                let mut meta = kube_gc::api::ObjectMeta {
                    resource_version: resource_version.to_string(),
                    ..Default::default()
                };
                if ends_initial {
                    meta.annotations
                        .insert(INITIAL_EVENTS_END.to_string(), "true".to_string());
                }
                protobuf::encode_watch_event("BOOKMARK", &protobuf::encode_object(&meta, None))
            }
        }
    }

    /// An ERROR event carrying `err`'s `Status`.
    pub(super) fn error_event(&self, err: &ApiError) -> Vec<u8> {
        match self.encoding {
            Encoding::Json => line(&json!({"type": "ERROR", "object": failure(err)})),
            Encoding::Protobuf => protobuf::encode_watch_event("ERROR", &status_protobuf(err)),
        }
    }

    /// One object, as a GET or a watch event presents it.
    fn object(&self, obj: &PartialObjectMeta) -> Value {
        self.with_fields(obj, self.managed_fields(obj).as_deref())
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
    fn bookmark(&self, api_version: &str, kind: &str, resource_version: u64) -> Value {
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

fn event_type_name(event_type: WatchEventType) -> &'static str {
    match event_type {
        WatchEventType::Added => "ADDED",
        WatchEventType::Modified => "MODIFIED",
        WatchEventType::Deleted => "DELETED",
        WatchEventType::Bookmark => "BOOKMARK",
    }
}

fn line(value: &Value) -> Vec<u8> {
    let mut text = value.to_string().into_bytes();
    text.push(b'\n');
    text
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

/// A protobuf response.
fn protobuf_response(code: StatusCode, body: Vec<u8>) -> Response {
    let mut response = (code, body).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(protobuf::MEDIA_TYPE));
    response
}

/// [`failure`] in protobuf.
fn status_protobuf(err: &ApiError) -> Vec<u8> {
    let status: kube::core::Status = serde_json::from_value(failure(err)).unwrap_or_default();
    protobuf::encode_status(&status)
}

/// The error response for `err` in `encoding`, with `Retry-After` when the client is throttled.
pub(super) fn error_response(err: &ApiError, encoding: Encoding) -> Response {
    let code = err.reason().map_or(500, StatusReason::code);
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = match encoding {
        Encoding::Json => json_response(code, &failure(err)),
        Encoding::Protobuf => protobuf_response(code, status_protobuf(err)),
    };
    if err.reason() == Some(StatusReason::TooManyRequests) {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    }
    response
}
