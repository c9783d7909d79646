//! The verbs on collections and objects. Each handler decodes the request, makes one call on the
//! shared in-memory cluster (the user face, so the semantics are exactly the in-memory ones), and
//! presents the answer; an error from the cluster becomes its `Status` unchanged.
//!
//! Checks done here, before the cluster is touched: the path's scope matches the type's (a
//! namespaced object needs a namespace, a cluster-scoped one has none, and a namespaced type's
//! all-namespaces path takes no create), subresources go to [`super::subresource`], bodies are JSON (or, for
//! built-in types, [protobuf](super::protobuf)) of at most the server's limit, and the body's apiVersion, kind, namespace and name agree with the URL.
//! A `dryRun` other than `All` is refused rather than ignored, so that a dry run never writes.
//! A PATCH is a patch or, with `application/apply-patch+yaml`, a server-side apply of a YAML
//! configuration; `force` is refused on any other patch (422).

use super::list_options::{self, Start};
use super::printers::Printer;
use super::protobuf;
use super::represent::{json_response, success, ListMeta, Presentation};
use super::request::{manager_from_user_agent, negotiate, HttpVerb, Params, ResourcePath};
use super::subresource::SubresourceCall;
use super::watch::{self, WatchLimits};
use super::Server;
use crate::pages::{self, Listing};
use crate::{Deletion, Part, TypeDef, Writes, Written};
use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use kube_gc::api::{ApiError, DeleteOptions, PartialObjectMeta, PatchType, StatusReason};
use serde_json::{json, Value};
use std::collections::BTreeMap;

impl Server {
    /// Serves a request on a resource path, with the verb and query its
    /// [`Call`](super::request::Call) read.
    pub(super) async fn resource(
        &self,
        path: &ResourcePath,
        verb: Option<HttpVerb>,
        query: &Result<BTreeMap<String, String>, String>,
        parts: Parts,
        body: Body,
    ) -> Result<Response, ApiError> {
        let query = query.as_ref().map_err(|e| bad_request(format!("invalid query: {e}")))?;
        let params = if self.options.sharded_list_and_watch {
            Params::parse(query)?
        } else {
            // A server without the gate does not know the parameter, malformed or not.
            let mut known = query.clone();
            known.remove("shardSelector");
            Params::parse(&known)?
        };
        let verb = verb.ok_or_else(method_not_allowed)?;
        let targeted = self.admission.targets(&parts.headers);
        if targeted {
            self.admission.admit(Some(verb)).await?;
        }
        let def = self.cluster.type_def(&path.gvr)?;
        check_scope(&def, path, verb)?;
        let dry_run = dry_run(query.get("dryRun").map(String::as_str))?;
        let accept = parts.headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
        let (representation, encoding) = negotiate(accept, self.options.protobuf)?;
        let presentation = Presentation {
            representation,
            encoding,
            include_object: params.include_object,
            fields: self.cluster.fields_table(),
            printer: Printer::of(&def.group, &def.resource),
        };
        if path.subresource.is_some() {
            let call = SubresourceCall {
                def: &def,
                path,
                verb,
                params: &params,
                dry_run,
                presentation: &presentation,
            };
            return self.subresource(call, parts, body).await;
        }
        let namespace = path.namespace.clone().unwrap_or_default();
        let name = path.name.clone().unwrap_or_default();
        let gvr = &path.gvr;
        let ok = |code: StatusCode, obj: &PartialObjectMeta| presentation.respond(code, obj);
        let ok_written = |code: StatusCode, written: Written| presentation.respond_written(code, &written);
        Ok(match verb {
            HttpVerb::Get => ok(StatusCode::OK, &self.cluster.get_object(gvr, &namespace, &name)?),
            HttpVerb::List => {
                list_options::validate(false, &params, self.options.watch_list)?;
                self.list(path, &params, &presentation)?
            }
            HttpVerb::Watch => {
                let start = list_options::validate(true, &params, self.options.watch_list)?;
                self.watch(path.clone(), params, presentation.clone(), start, targeted)?
            }
            HttpVerb::Create => {
                let obj = self.object_body(&parts, body, &def, path).await?;
                let writes = self.updates(&parts, &params, dry_run);
                ok_written(StatusCode::CREATED, writes.create(gvr, obj)?)
            }
            HttpVerb::Update => {
                let obj = self.object_body(&parts, body, &def, path).await?;
                let writes = self.updates(&parts, &params, dry_run);
                ok_written(StatusCode::OK, writes.update(gvr, obj)?)
            }
            HttpVerb::Patch => {
                let answer = self.patch(path, &params, dry_run, Part::Main, parts, body).await?;
                let code = if answer.created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                ok_written(code, answer)
            }
            HttpVerb::Delete => {
                let options = self.delete_options(&parts, body, &params).await?;
                let dry_run = dry_run || options.dry_run.iter().any(|v| v == DRY_RUN_ALL);
                let deletion = self
                    .cluster
                    .writes(dry_run)
                    .delete_object(gvr, &namespace, &name, &options)?;
                // 202 only for the legacy cascade request, as the handler answers (a status the
                // clients of the time relied on); 200 otherwise.
                let code = if !deletion.is_removed() && options.orphan_dependents == Some(false) {
                    StatusCode::ACCEPTED
                } else {
                    StatusCode::OK
                };
                match deletion {
                    Deletion::Removed(gone_object) if !def.returns_deleted_object() => gone(&def, &gone_object),
                    deletion => ok(code, deletion.object()),
                }
            }
            HttpVerb::DeleteCollection => {
                let options = self.delete_options(&parts, body, &params).await?;
                self.delete_collection(path, &params, &options, &presentation)?
            }
        })
    }

    /// A PATCH of `part` of the object: a patch, or with `application/apply-patch+yaml` a
    /// server-side apply.
    pub(super) async fn patch(
        &self,
        path: &ResourcePath,
        params: &Params,
        dry_run: bool,
        part: Part,
        parts: Parts,
        body: Body,
    ) -> Result<Written, ApiError> {
        let namespace = path.namespace.as_deref().unwrap_or_default();
        let name = path.name.as_deref().unwrap_or_default();
        match patch_kind(&parts)? {
            PatchKind::Apply => {
                let config = self.yaml_body(&parts, body).await?;
                let mut writes = self.cluster.writes(dry_run).to(part);
                if let Some(manager) = &params.field_manager {
                    writes = writes.by(manager.clone());
                }
                let force = params.force.unwrap_or(false);
                writes.apply(&path.gvr, namespace, name, &config, force)
            }
            PatchKind::Patch(patch_type) => {
                if params.force.is_some() {
                    return Err(ApiError::status(
                        StatusReason::Invalid,
                        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for \
                         non-apply patch",
                    ));
                }
                let patch = self.json_body(&parts, body).await?;
                let writes = self.updates(&parts, params, dry_run).to(part);
                writes.patch_object(&path.gvr, namespace, name, patch_type, &patch)
            }
        }
    }

    fn list(&self, path: &ResourcePath, params: &Params, presentation: &Presentation) -> Result<Response, ApiError> {
        let collection = pages::collection(&path.gvr, path.namespace.as_deref());
        let page = self
            .pages
            .page(&collection, params.continue_token.as_deref(), params.limit, || {
                self.listing(path, params)
            })?;
        let api_version = path.gvr.api_version();
        let kind = self.cluster.type_def(&path.gvr)?.kind;
        let items: Vec<PartialObjectMeta> = page.items().iter().map(|o| stamped(o, &api_version, &kind)).collect();
        let meta = ListMeta {
            resource_version: page.listing.resource_version,
            continue_token: page.continue_token,
            remaining: Some(page.remaining),
            shard_selector: params.shards.given().map(str::to_string),
        };
        Ok(presentation.respond_list(&items, &api_version, &kind, &meta))
    }

    /// The objects of a collection request, filtered by its selectors.
    fn listing(&self, path: &ResourcePath, params: &Params) -> Result<Listing, ApiError> {
        let mut snapshot = self.cluster.snapshot(&path.gvr, path.namespace.as_deref())?;
        snapshot.items.retain(|o| {
            let meta = &o.metadata;
            params.labels.matches(meta) && params.fields.matches(meta) && params.shards.matches(meta)
        });
        Ok(Listing {
            items: snapshot.items,
            resource_version: snapshot.resource_version,
        })
    }

    /// A watch; the injected drops apply when the request is `targeted` by the faults.
    fn watch(
        &self,
        path: ResourcePath,
        params: Params,
        presentation: Presentation,
        start: Start,
        targeted: bool,
    ) -> Result<Response, ApiError> {
        let faults = self.admission.faults();
        let drop_after = faults.watch_drop_after.filter(|_| targeted);
        let deadline = [params.timeout, drop_after].into_iter().flatten().min();
        let limits = WatchLimits {
            deadline,
            max_events: faults.watch_drop_events.filter(|_| targeted),
            bookmark_every: Some(self.options.bookmark_interval),
            initial_events_end: !(faults.withhold_initial_events_end && targeted),
            stopping: self.stopping.clone(),
        };
        let content_type = presentation.watch_content_type();
        let body = watch::open(&self.cluster, path, params, presentation, start, limits)?;
        Ok(([(header::CONTENT_TYPE, content_type)], body).into_response())
    }

    /// Deletes the objects a collection request selects and answers with them as they were
    /// listed, as the registry's `Store.DeleteCollection` answers (clients decode a list there).
    fn delete_collection(
        &self,
        path: &ResourcePath,
        params: &Params,
        options: &DeleteOptions,
        presentation: &Presentation,
    ) -> Result<Response, ApiError> {
        let listing = self.listing(path, params)?;
        for obj in &listing.items {
            match self
                .cluster
                .delete_object(&path.gvr, &obj.metadata.namespace, &obj.metadata.name, options)
            {
                Ok(_) => {}
                // Gone meanwhile, for example with its namespace: nothing left to do.
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        let api_version = path.gvr.api_version();
        let kind = self.cluster.type_def(&path.gvr)?.kind;
        let items: Vec<PartialObjectMeta> = listing.items.iter().map(|o| stamped(o, &api_version, &kind)).collect();
        let meta = ListMeta {
            resource_version: listing.resource_version,
            ..ListMeta::default()
        };
        Ok(presentation.respond_list(&items, &api_version, &kind, &meta))
    }

    /// The user's writes for a create, update or non-apply patch: recorded as made by the
    /// request's `fieldManager`, or else by the manager its User-Agent names.
    pub(super) fn updates(&self, parts: &Parts, params: &Params, dry_run: bool) -> Writes<'_> {
        let writes = self.cluster.writes(dry_run);
        let manager = params.field_manager.clone().or_else(|| {
            let user_agent = parts.headers.get(header::USER_AGENT)?.to_str().ok()?;
            manager_from_user_agent(user_agent)
        });
        match manager {
            Some(manager) => writes.by(manager),
            None => writes,
        }
    }

    /// An apply body: YAML (of which JSON is a part), refused when too large (413) or not YAML
    /// (400).
    async fn yaml_body(&self, parts: &Parts, body: Body) -> Result<Value, ApiError> {
        let bytes = self.body_bytes(parts, body).await?;
        serde_yaml_ng::from_slice(&bytes).map_err(|e| bad_request(format!("error decoding YAML: {e}")))
    }

    /// The body as JSON, refused when too large (413), not JSON (415) or malformed or cut short
    /// (400).
    pub(super) async fn json_body(&self, parts: &Parts, body: Body) -> Result<Value, ApiError> {
        let bytes = self.body_bytes(parts, body).await?;
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&bytes).map_err(|e| bad_request(format!("the request body is not valid JSON: {e}")))
    }

    /// The bytes of the body, refused when larger than the server's limit (413).
    async fn body_bytes(&self, parts: &Parts, body: Body) -> Result<Vec<u8>, ApiError> {
        let limit = self.options.max_body_bytes;
        let declared = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
        if declared.is_some_and(|n| n > limit) {
            return Err(too_large(limit));
        }
        read_body(body, limit).await
    }

    /// A request body as JSON: a JSON body (one without a Content-Type is read as JSON, the
    /// server's first media type), or a protobuf one of the built-in `kind` of `group`/`version`
    /// (custom resources, `None`, have no protobuf form); anything else is 415.
    pub(super) async fn body_value(
        &self,
        parts: &Parts,
        body: Body,
        group: &str,
        version: &str,
        kind: Option<&str>,
    ) -> Result<Value, ApiError> {
        let media = content_type(parts);
        let message = kind.and_then(|kind| protobuf::message(group, version, kind));
        match (media.as_str(), message) {
            ("" | "application/json", _) => self.json_body(parts, body).await,
            (protobuf::MEDIA_TYPE, Some(message)) => {
                let bytes = self.body_bytes(parts, body).await?;
                protobuf::decode(message, &bytes).map_err(|e| bad_request(e.to_string()))
            }
            (_, Some(_)) => Err(unsupported_media_type(
                &media,
                &format!("application/json, {}", protobuf::MEDIA_TYPE),
            )),
            (_, None) => Err(unsupported_media_type(&media, "application/json")),
        }
    }

    /// A create or update body: a JSON object (or a protobuf one of a built-in type) whose apiVersion, kind, namespace and name agree
    /// with the URL.
    pub(super) async fn object_body(
        &self,
        parts: &Parts,
        body: Body,
        def: &TypeDef,
        path: &ResourcePath,
    ) -> Result<PartialObjectMeta, ApiError> {
        let kind = (!def.custom).then_some(def.kind.as_str());
        let value = self
            .body_value(parts, body, &def.group, &path.gvr.version, kind)
            .await?;
        if !value.is_object() {
            return Err(bad_request("the request body must be a JSON object".to_string()));
        }
        let mut obj: PartialObjectMeta =
            serde_json::from_value(value).map_err(|e| bad_request(format!("the object could not be decoded: {e}")))?;
        let api_version = path.gvr.api_version();
        if !obj.api_version.is_empty() && obj.api_version != api_version {
            return Err(bad_request(format!(
                "the API version in the data ({}) does not match the expected API version ({api_version})",
                obj.api_version
            )));
        }
        if !obj.kind.is_empty() && obj.kind != def.kind {
            return Err(bad_request(format!(
                "the kind in the data ({}) does not match the expected kind ({})",
                obj.kind, def.kind
            )));
        }
        let meta = &mut obj.metadata;
        if let Some(namespace) = &path.namespace {
            if meta.namespace.is_empty() {
                meta.namespace.clone_from(namespace);
            } else if meta.namespace != *namespace {
                return Err(bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request".into(),
                ));
            }
        }
        if let Some(name) = &path.name {
            if meta.name != *name {
                return Err(bad_request(format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    meta.name
                )));
            }
        }
        Ok(obj)
    }

    /// DeleteOptions from the body, completed by the query's `propagationPolicy` and
    /// `orphanDependents` when the body sets neither.
    async fn delete_options(&self, parts: &Parts, body: Body, params: &Params) -> Result<DeleteOptions, ApiError> {
        let mut options: DeleteOptions = match self.json_body(parts, body).await? {
            Value::Null => DeleteOptions::default(),
            value => serde_json::from_value(value)
                .map_err(|e| bad_request(format!("the DeleteOptions could not be decoded: {e}")))?,
        };
        if options.propagation_policy.is_none() && options.orphan_dependents.is_none() {
            options.propagation_policy = params.propagation_policy;
            options.orphan_dependents = params.orphan_dependents;
        }
        Ok(options)
    }
}

/// The bytes of `body`: 413 once they pass `limit`, 400 when the body cannot be read to its end
/// (the client went away mid-body), which is the client's failure and says nothing about size.
async fn read_body(body: Body, limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut frames = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(frame) = frames.next().await {
        let frame = frame.map_err(|e| bad_request(format!("the request body could not be read: {e}")))?;
        if bytes.len() + frame.len() > limit {
            return Err(too_large(limit));
        }
        bytes.extend_from_slice(&frame);
    }
    Ok(bytes)
}

fn too_large(limit: usize) -> ApiError {
    ApiError::status(
        StatusReason::RequestEntityTooLarge,
        format!("Request entity too large: limit is {limit}"),
    )
}

/// A namespaced object needs a namespace and a cluster-scoped type has none; each mismatch is the 404 of a path that does not exist. A namespaced type's
/// all-namespaces path exists but only reads (and, here, deletes collections): a create there is
/// 405, as the API server answers a POST to it.
fn check_scope(def: &TypeDef, path: &ResourcePath, verb: HttpVerb) -> Result<(), ApiError> {
    let not_found = || {
        ApiError::status(
            StatusReason::NotFound,
            "the server could not find the requested resource",
        )
    };
    match (&path.namespace, def.namespaced, verb) {
        (Some(_), false, _) => Err(not_found()),
        (None, true, HttpVerb::List | HttpVerb::Watch | HttpVerb::DeleteCollection) => Ok(()),
        (None, true, HttpVerb::Create) => Err(method_not_allowed()),
        (None, true, _) => Err(not_found()),
        _ => Ok(()),
    }
}

/// 405: the path exists, but not for this method.
pub(super) fn method_not_allowed() -> ApiError {
    ApiError::status(
        StatusReason::MethodNotAllowed,
        "the server does not allow this method on the requested resource",
    )
}

/// The one `dryRun` value there is.
const DRY_RUN_ALL: &str = "All";

/// Whether the query asks for a dry run; any value but `All` is 400, as the API server answers.
fn dry_run(value: Option<&str>) -> Result<bool, ApiError> {
    match value {
        None | Some("") => Ok(false),
        Some(DRY_RUN_ALL) => Ok(true),
        Some(other) => Err(bad_request(format!(
            "dryRun: Unsupported value: {other:?}: supported values: {DRY_RUN_ALL:?}"
        ))),
    }
}

fn content_type(parts: &Parts) -> String {
    parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// The content type of a server-side apply.
const APPLY_YAML: &str = "application/apply-patch+yaml";

/// What a PATCH body is.
pub(super) enum PatchKind {
    /// A patch of one of the types the collector's client also sends.
    Patch(PatchType),
    /// A server-side apply configuration.
    Apply,
}

pub(super) fn patch_kind(parts: &Parts) -> Result<PatchKind, ApiError> {
    let media = content_type(parts);
    if media == APPLY_YAML {
        return Ok(PatchKind::Apply);
    }
    [PatchType::Merge, PatchType::StrategicMerge, PatchType::Json]
        .into_iter()
        .find(|t| t.content_type() == media)
        .map(PatchKind::Patch)
        .ok_or_else(|| {
            unsupported_media_type(
                &media,
                "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, \
                 application/apply-patch+yaml",
            )
        })
}

fn unsupported_media_type(media: &str, accepted: &str) -> ApiError {
    ApiError::status(
        StatusReason::UnsupportedMediaType,
        format!(
            "the body of the request was in an unknown format ({media:?}) - accepted media types include: {accepted}"
        ),
    )
}

pub(super) fn bad_request(message: String) -> ApiError {
    ApiError::status(StatusReason::BadRequest, message)
}

/// `obj` as read through a version: its `apiVersion` and `kind` set.
fn stamped(obj: &PartialObjectMeta, api_version: &str, kind: &str) -> PartialObjectMeta {
    let mut out = obj.clone();
    out.api_version = api_version.to_string();
    out.kind = kind.to_string();
    out
}

/// The answer to a DELETE whose object is gone.
/// The Success Status a removal answers with when its type does not return the object: the
/// details name the resource (in `kind`, as the registry fills it) and the UID that went.
fn gone(def: &TypeDef, object: &PartialObjectMeta) -> Response {
    let meta = &object.metadata;
    let details = json!({"name": meta.name, "group": def.group, "kind": def.resource, "uid": meta.uid});
    json_response(StatusCode::OK, &success(details))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_gc::api::Gvr;

    fn path(namespace: Option<&str>, name: Option<&str>) -> ResourcePath {
        ResourcePath {
            gvr: Gvr::new("", "v1", "configmaps"),
            namespace: namespace.map(String::from),
            name: name.map(String::from),
            subresource: None,
        }
    }

    #[tokio::test]
    async fn read_body_should_tell_a_body_cut_short_from_one_too_large() {
        let chunks = |n: usize| futures::stream::iter((0..n).map(|_| Ok::<_, std::io::Error>(vec![b'x'; 10])));
        assert_eq!(read_body(Body::from_stream(chunks(3)), 30).await.unwrap().len(), 30);
        let err = read_body(Body::from_stream(chunks(4)), 30).await.unwrap_err();
        assert_eq!(err.reason(), Some(StatusReason::RequestEntityTooLarge));
        let cut = chunks(1).chain(futures::stream::iter([Err(std::io::Error::from(
            std::io::ErrorKind::UnexpectedEof,
        ))]));
        let err = read_body(Body::from_stream(cut), 30).await.unwrap_err();
        assert_eq!(err.reason(), Some(StatusReason::BadRequest));
    }

    #[test]
    fn check_scope_should_refuse_a_create_on_the_all_namespaces_path_with_405() {
        let namespaced = TypeDef::new("", "v1", "ConfigMap", "configmaps", true);
        let reason = |p: &ResourcePath, verb| check_scope(&namespaced, p, verb).err().and_then(|e| e.reason());
        for verb in [HttpVerb::List, HttpVerb::Watch, HttpVerb::DeleteCollection] {
            assert_eq!(reason(&path(None, None), verb), None, "{verb:?} across namespaces");
        }
        assert_eq!(
            reason(&path(None, None), HttpVerb::Create),
            Some(StatusReason::MethodNotAllowed)
        );
        assert_eq!(reason(&path(Some("ns"), None), HttpVerb::Create), None);
        assert_eq!(
            reason(&path(None, Some("x")), HttpVerb::Get),
            Some(StatusReason::NotFound)
        );
        let cluster_scoped = TypeDef::new("", "v1", "Namespace", "namespaces", false);
        let err = check_scope(&cluster_scoped, &path(Some("ns"), None), HttpVerb::Create).unwrap_err();
        assert_eq!(err.reason(), Some(StatusReason::NotFound));
    }
}
