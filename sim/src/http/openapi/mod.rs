//! OpenAPI documents, which clients read to validate objects and explain their fields:
//! `/openapi/v2` (one Swagger 2.0 document, in JSON or in gnostic's protobuf) and `/openapi/v3`
//! (an index of the group-versions, each with an OpenAPI 3.0 document of its own).
//!
//! # Invariants
//!
//! - Every served kind has a schema, named as upstream names it (`io.k8s.api.apps.v1.Deployment`)
//!   and carrying its `x-kubernetes-group-version-kind`; every `$ref` of a document resolves inside
//!   that same document.
//! - Built-in kinds' schemas are generated from their k8s-openapi types ([`schemas`]), never
//!   written by hand. Those documents never change, so each is built once per process and cached.
//! - Custom kinds' schemas come from their stored CRD objects at each request, so a document
//!   follows its CRDs as discovery does; the index's hash of a group-version changes with it.
//! - `paths` hold one read operation per kind, without `fieldValidation`: clients then validate
//!   fields themselves against these schemas (the server does no field validation).

mod proto;
mod schemas;

use super::request::OpenApiPath;
use crate::{SimCluster, TypeDef};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use kube_gc::api::{join_api_version, ApiError, Gvr, PartialObjectMeta, StatusReason};
use parking_lot::Mutex;
use schemas::{Dialect, Served};
use serde_json::{json, Map, Value};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock};

/// The protobuf media type of the v2 document, as clients ask for it.
const PROTOBUF_V2: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The same, as the response names it: Go's media type parser, which client-go runs on every
/// response, refuses the `@`, so the API server answers with this spelling.
const PROTOBUF_V2_CONTENT_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// A document in the forms it is served in.
struct Document {
    json: Vec<u8>,
    /// The v2 document's protobuf form; empty for a v3 document.
    protobuf: Vec<u8>,
    /// A hash of `json`, for the v3 index's `?hash=` URLs.
    hash: String,
}

impl Document {
    fn new(doc: &Value, with_protobuf: bool) -> Document {
        let json = doc.to_string().into_bytes();
        let mut hasher = DefaultHasher::new();
        json.hash(&mut hasher);
        Document {
            protobuf: if with_protobuf {
                proto::document(doc)
            } else {
                Vec::new()
            },
            hash: format!("{:016X}", hasher.finish()),
            json,
        }
    }
}

/// Documents of built-in kinds only, by what they describe (see [`cache_key`]).
static CACHE: LazyLock<Mutex<HashMap<String, Arc<Document>>>> = LazyLock::new(Default::default);

/// The cache key of a document of `served` kinds, or `None` when one of them is custom (and the
/// document must follow its CRD).
fn cache_key(label: &str, served: &[Served]) -> Option<String> {
    let mut key = label.to_string();
    for kind in served {
        if !schemas::is_builtin(&kind.def, &kind.version) {
            return None;
        }
        key.push_str(&format!(" {}/{}/{}", kind.def.group, kind.version, kind.def.kind));
    }
    Some(key)
}

/// The document of `served`, from the cache when it holds only built-in kinds.
fn cached(label: &str, served: &[Served], build: impl FnOnce() -> Document) -> Arc<Document> {
    let Some(key) = cache_key(label, served) else {
        return Arc::new(build());
    };
    if let Some(doc) = CACHE.lock().get(&key) {
        return Arc::clone(doc);
    }
    // Built outside the lock: two first requests may both build it, which is harmless.
    let doc = Arc::new(build());
    CACHE.lock().insert(key, Arc::clone(&doc));
    doc
}

/// Answers `path`: the document in the form `headers` accept.
pub(super) fn serve(cluster: &SimCluster, path: &OpenApiPath, headers: &HeaderMap) -> Result<Response, ApiError> {
    let (defs, _) = cluster.served_types();
    match path {
        OpenApiPath::V2 => {
            let form = v2_form(headers)?;
            let served = served(&defs, |_, _| true);
            let doc = cached("v2", &served, || Document::new(&v2(&served, &crds(cluster)), true));
            Ok(match form {
                Form::Json => body("application/json", doc.json.clone()),
                Form::Protobuf => body(PROTOBUF_V2_CONTENT_TYPE, doc.protobuf.clone()),
            })
        }
        OpenApiPath::V3Index => {
            accepts_json(headers)?;
            Ok(body("application/json", index(cluster, &defs).to_string().into_bytes()))
        }
        OpenApiPath::V3(group, version) => {
            accepts_json(headers)?;
            let doc = v3_document(cluster, &defs, group, version).ok_or_else(not_found)?;
            Ok(body("application/json", doc.json.clone()))
        }
    }
}

fn body(content_type: &'static str, bytes: Vec<u8>) -> Response {
    let mut response = (StatusCode::OK, bytes).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn not_found() -> ApiError {
    ApiError::status(
        StatusReason::NotFound,
        "the server could not find the requested resource",
    )
}

fn not_acceptable(accept: &str) -> ApiError {
    ApiError::status(
        StatusReason::NotAcceptable,
        format!("only application/json (and, for /openapi/v2, {PROTOBUF_V2}) is served, not {accept:?}"),
    )
}

/// The forms of the v2 document.
#[derive(Debug, PartialEq, Eq)]
enum Form {
    Json,
    Protobuf,
}

/// The media types `headers` accept, in the order given (weights are not read); `*/*` when none.
fn accepted(headers: &HeaderMap) -> Vec<String> {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.trim().is_empty())
        .unwrap_or("*/*");
    accept
        .split(',')
        .map(|m| m.split(';').next().unwrap_or_default().trim().to_ascii_lowercase())
        .collect()
}

fn is_json(media: &str) -> bool {
    matches!(media, "application/json" | "application/*" | "*/*")
}

/// The first form of the v2 document the request accepts.
fn v2_form(headers: &HeaderMap) -> Result<Form, ApiError> {
    let accepted = accepted(headers);
    accepted
        .iter()
        .find_map(|media| match media.as_str() {
            PROTOBUF_V2 | PROTOBUF_V2_CONTENT_TYPE => Some(Form::Protobuf),
            m if is_json(m) => Some(Form::Json),
            _ => None,
        })
        .ok_or_else(|| not_acceptable(&accepted.join(", ")))
}

/// The v3 documents are served in JSON only.
fn accepts_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let accepted = accepted(headers);
    match accepted.iter().any(|m| is_json(m)) {
        true => Ok(()),
        false => Err(not_acceptable(&accepted.join(", "))),
    }
}

/// The stored CRD objects, whose schemas custom kinds take.
fn crds(cluster: &SimCluster) -> Vec<PartialObjectMeta> {
    cluster.list_objects(&Gvr::new("apiextensions.k8s.io", "v1", "customresourcedefinitions"))
}

/// Each served (kind, version) that `keep` keeps, in catalogue order.
fn served(defs: &[TypeDef], keep: impl Fn(&TypeDef, &str) -> bool) -> Vec<Served> {
    defs.iter()
        .flat_map(|def| def.versions.iter().map(move |v| (def, v)))
        .filter(|(def, version)| keep(def, version))
        .map(|(def, version)| Served {
            def: def.clone(),
            version: version.clone(),
        })
        .collect()
}

fn info() -> Value {
    json!({"title": "Kubernetes", "version": format!("v1.{}.0", super::discovery::KUBE_MINOR)})
}

/// The Swagger 2.0 document of every served kind.
fn v2(served: &[Served], crds: &[PartialObjectMeta]) -> Value {
    json!({
        "swagger": "2.0",
        "info": info(),
        "paths": {},
        "definitions": schemas::definitions(served, crds, Dialect::V2),
    })
}

/// Every served group-version, as the v3 index names it (`api/v1`, `apis/apps/v1`).
fn group_versions(defs: &[TypeDef]) -> Vec<(String, String)> {
    let mut gvs: Vec<(String, String)> = Vec::new();
    for def in defs {
        for version in &def.versions {
            let gv = (def.group.clone(), version.clone());
            if !gvs.contains(&gv) {
                gvs.push(gv);
            }
        }
    }
    gvs
}

fn v3_path(group: &str, version: &str) -> String {
    match group {
        "" => format!("api/{version}"),
        _ => format!("apis/{group}/{version}"),
    }
}

/// `/openapi/v3`: each group-version's document, by a URL naming its current hash.
fn index(cluster: &SimCluster, defs: &[TypeDef]) -> Value {
    let mut paths = Map::new();
    for (group, version) in group_versions(defs) {
        if let Some(doc) = v3_document(cluster, defs, &group, &version) {
            let path = v3_path(&group, &version);
            let url = format!("/openapi/v3/{path}?hash={}", doc.hash);
            paths.insert(path, json!({"serverRelativeURL": url}));
        }
    }
    json!({"paths": paths})
}

/// The v3 document of `group`/`version`, or `None` when nothing is served there.
fn v3_document(cluster: &SimCluster, defs: &[TypeDef], group: &str, version: &str) -> Option<Arc<Document>> {
    let served = served(defs, |def, v| def.group == group && v == version);
    if served.is_empty() {
        return None;
    }
    let label = format!("v3 {}", join_api_version(group, version));
    Some(cached(&label, &served, || {
        let definitions = schemas::definitions(&served, &crds(cluster), Dialect::V3);
        Document::new(&v3(&served, definitions), false)
    }))
}

fn v3(served: &[Served], definitions: Map<String, Value>) -> Value {
    json!({
        "openapi": "3.0.0",
        "info": info(),
        "paths": paths(served),
        "components": {"schemas": definitions},
    })
}

/// One read operation per kind: what lets a client tell which path serves which kind.
fn paths(served: &[Served]) -> Value {
    let mut paths = Map::new();
    for kind in served {
        let def = &kind.def;
        let base = format!("/{}", v3_path(&def.group, &kind.version));
        let path = match def.namespaced {
            true => format!("{base}/namespaces/{{namespace}}/{}/{{name}}", def.resource),
            false => format!("{base}/{}/{{name}}", def.resource),
        };
        let schema = json!({"$ref": Dialect::V3.reference(&kind.name())});
        let get = json!({
            "operationId": format!("read{}{}", def.kind, if def.namespaced { "Namespaced" } else { "" }),
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": schema}}}},
            "x-kubernetes-action": "get",
            "x-kubernetes-group-version-kind": {"group": def.group, "version": kind.version, "kind": def.kind},
        });
        paths.insert(path, json!({"get": get}));
    }
    Value::Object(paths)
}

#[cfg(test)]
mod tests;
