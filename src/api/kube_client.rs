//! [`ClusterApi`] over kube-rs: a real cluster, or the simulated API server over HTTP.
//!
//! Every call is one REST request made with the client's configured
//! credentials and TLS. Objects travel as `PartialObjectMetadata`, which the request asks for in its
//! `Accept` header, so the collector never downloads a spec: in [protobuf](super::protobuf) first
//! and JSON as the fallback, as client-go's metadata client asks ([`Wire::Protobuf`], the
//! default), or in JSON alone ([`Wire::Json`]). Each answer is read by its `Content-Type`, so a
//! server that offers no protobuf (or a sharded LIST, whose `shardInfo` protobuf has no field
//! for) is read as JSON whatever was asked. The objects that come back are stamped
//! with the `apiVersion` of the request and the kind discovery reported for the resource, as the
//! in-memory cluster stamps them. A server's `Status` failure keeps its reason; a failure to get
//! an answer at all is [`ApiError::Transport`], which keeps kube-rs's error as its source and which
//! callers classify and retry as [`StatusReason::ServiceUnavailable`].
//!
//! Discovery reads each group-version on its own, so one broken aggregated API only lands in
//! [`Discovery::failed`] and never hides the rest.
//!
//! While the server cannot be reached at all, requests wait out a doubling backoff first
//! ([`Outage`]), so that workers keep their items until it is back instead of failing the whole
//! work queue in a moment.
//!
//! This is the transport only: one request per call. Rate limits, retries of throttled requests,
//! the leader's write fence and the request counts are the [layers](super::layers) stacked over
//! it. The kube-rs client's own retry must be off (`kube::Config::default_retry = false`, as
//! `kube-gc run` builds it), or throttled requests would be retried beneath the layers: unseen by
//! the counts and without waiting for a token of the budget.

use super::outage::Outage;
use super::rest_path::{path, with_query};
use super::shard::ShardSelector;
use super::{
    ApiError, ApiResource, ClusterApi, DeleteOptions, Discovery, EventRecord, Gvr, ObjectList, PartialObjectMeta,
    Patch, StatusReason, TransportError, WatchStream,
};
use futures::TryStreamExt;
use http::{header, Method, Request};
use http_body_util::BodyExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::client::Body;
use parking_lot::RwLock;
use serde::Deserialize;
use std::collections::HashMap;

/// What a metadata GET, PATCH or watch asks for in JSON; JSON objects as a fallback.
pub const ACCEPT_METADATA: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
/// What a metadata LIST asks for in JSON.
pub const ACCEPT_METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
/// [`ACCEPT_METADATA`] with protobuf first.
const ACCEPT_METADATA_PROTOBUF: &str =
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,\
     application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
/// [`ACCEPT_METADATA_LIST`] with protobuf first.
const ACCEPT_METADATA_LIST_PROTOBUF: &str =
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,\
     application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

/// The encoding metadata requests ask for first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Wire {
    /// Protobuf, JSON as the fallback: what client-go's metadata client asks for.
    #[default]
    Protobuf,
    /// JSON alone.
    Json,
}

impl Wire {
    fn accept_object(self) -> &'static str {
        match self {
            Wire::Protobuf => ACCEPT_METADATA_PROTOBUF,
            Wire::Json => ACCEPT_METADATA,
        }
    }

    fn accept_list(self) -> &'static str {
        match self {
            Wire::Protobuf => ACCEPT_METADATA_LIST_PROTOBUF,
            Wire::Json => ACCEPT_METADATA_LIST,
        }
    }
}
/// How long the server keeps a watch open before the monitor resumes it (kube-rs' default).
const WATCH_TIMEOUT_SECONDS: u32 = 290;

/// [`ClusterApi`] over a kube-rs client; see the [module docs](self).
pub struct KubeApi {
    client: ::kube::Client,
    /// Kind of each discovered resource, to stamp objects read through it.
    kinds: RwLock<HashMap<Gvr, String>>,
    /// Paces requests while the server cannot be reached.
    outage: Outage,
    /// What metadata requests ask for first.
    wire: Wire,
}

impl KubeApi {
    /// Wraps a client; metadata is asked for in protobuf first.
    pub fn new(client: ::kube::Client) -> Self {
        Self::with_wire(client, Wire::default())
    }

    /// Wraps a client whose metadata requests ask for `wire` first.
    pub fn with_wire(client: ::kube::Client, wire: Wire) -> Self {
        KubeApi {
            client,
            kinds: RwLock::new(HashMap::new()),
            outage: Outage::default(),
            wire,
        }
    }

    /// Every request goes through here: the wait of an [outage](Outage), the request, and the
    /// error mapped. `request` is lazy, so nothing is sent before the wait is over.
    async fn call<T>(
        &self,
        request: impl std::future::Future<Output = Result<T, ::kube::Error>>,
    ) -> Result<T, ApiError> {
        self.outage.wait().await;
        let result = request.await;
        match &result {
            Err(e) if unreachable(e) => self.outage.unreachable(),
            _ => self.outage.answered(),
        }
        result.map_err(api_error)
    }

    async fn send<T: serde::de::DeserializeOwned>(&self, request: Request<Vec<u8>>) -> Result<T, ApiError> {
        self.call(self.client.request(request)).await
    }

    /// A successful answer's body and whether it is protobuf; a failure's `Status`, in either
    /// encoding, is the error.
    async fn fetch(&self, request: Request<Vec<u8>>) -> Result<Answer, ApiError> {
        self.call(async {
            let response = answered(self.client.send(request.map(Body::from)).await?).await?;
            let protobuf = is_protobuf(&response);
            let body = response.into_body().collect_bytes().await?;
            Ok(Answer { body, protobuf })
        })
        .await
    }

    /// The metadata of one object, as a GET, PATCH or apply answers it.
    async fn object(&self, gvr: &Gvr, request: Request<Vec<u8>>) -> Result<PartialObjectMeta, ApiError> {
        let object = self.fetch(request).await?.object()?;
        Ok(self.stamp(gvr, object))
    }

    /// A list page as read through `gvr`.
    fn object_list(&self, gvr: &Gvr, page: MetadataList) -> ObjectList {
        ObjectList {
            items: page.items.into_iter().map(|o| self.stamp(gvr, o)).collect(),
            resource_version: page.metadata.resource_version,
            continue_token: page.metadata.continue_token,
            shard_selector: page.metadata.shard_info.map(|info| info.selector),
        }
    }

    /// `obj` as read through `gvr`.
    fn stamp(&self, gvr: &Gvr, mut obj: PartialObjectMeta) -> PartialObjectMeta {
        obj.api_version = gvr.api_version();
        if let Some(kind) = self.kinds.read().get(gvr) {
            obj.kind.clone_from(kind);
        }
        obj
    }

    /// The resources of one group-version, as discovery entries.
    async fn group_version(&self, group: &str, version: &str, preferred: bool) -> Result<Vec<ApiResource>, ApiError> {
        let list: APIResourceList = if group.is_empty() {
            self.call(self.client.list_core_api_resources(version)).await
        } else {
            let group_version = format!("{group}/{version}");
            self.call(self.client.list_api_group_resources(&group_version)).await
        }?;
        Ok(list
            .resources
            .into_iter()
            .filter(|r| !r.name.contains('/'))
            .map(|r| ApiResource {
                gvr: Gvr::new(group, version, &r.name),
                kind: r.kind,
                namespaced: r.namespaced,
                verbs: r.verbs,
                preferred,
            })
            .collect())
    }

    /// Opens a watch of `gvr` in all namespaces, with bookmarks, the client's timeout and `start`
    /// (where it starts) on its query.
    async fn open_watch(&self, gvr: &Gvr, start: &[(&str, &str)]) -> Result<WatchStream, ApiError> {
        let timeout = WATCH_TIMEOUT_SECONDS.to_string();
        let mut query = vec![
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", timeout.as_str()),
        ];
        query.extend_from_slice(start);
        let uri = with_query(&path(gvr, "", None)?, &query);
        let mut req = request(Method::GET, &uri, self.wire.accept_object(), None)?;
        // As kube-rs asks for its watches: an event stream is read as it comes, uncompressed.
        req.headers_mut()
            .insert(header::ACCEPT_ENCODING, http::HeaderValue::from_static("identity"));
        let response = self
            .call(async { answered(self.client.send(req.map(Body::from)).await?).await })
            .await?;
        let protobuf = is_protobuf(&response);
        let body = response
            .into_body()
            .into_data_stream()
            .map_err(std::io::Error::other)
            .into_async_read();
        let kind = self.kinds.read().get(gvr).cloned().unwrap_or_default();
        Ok(if protobuf {
            super::watch_wire::frames(body, gvr.api_version(), kind)
        } else {
            super::watch_wire::events(body, gvr.api_version(), kind)
        })
    }
}

fn request(
    method: Method,
    uri: &str,
    accept: &str,
    body: Option<(&str, Vec<u8>)>,
) -> Result<Request<Vec<u8>>, ApiError> {
    let builder = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::ACCEPT, accept);
    let result = match body {
        Some((content_type, body)) => builder.header(header::CONTENT_TYPE, content_type).body(body),
        None => builder.body(Vec::new()),
    };
    result.map_err(|e| ApiError::status(StatusReason::BadRequest, format!("building a request for {uri}: {e}")))
}

/// A body as it came, and whether its `Content-Type` is protobuf.
struct Answer {
    body: bytes::Bytes,
    protobuf: bool,
}

impl Answer {
    /// The one object the body holds, in its encoding.
    fn object(&self) -> Result<PartialObjectMeta, ApiError> {
        if self.protobuf {
            super::protobuf::decode_object(&self.body).map_err(transport)
        } else {
            serde_json::from_slice(&self.body).map_err(transport)
        }
    }

    /// The list page the body holds, in its encoding.
    fn page(&self) -> Result<MetadataList, ApiError> {
        if !self.protobuf {
            return serde_json::from_slice(&self.body).map_err(transport);
        }
        let (items, meta) = super::protobuf::decode_list(&self.body).map_err(transport)?;
        Ok(MetadataList {
            metadata: ListMeta {
                resource_version: meta.resource_version,
                continue_token: meta.continue_token,
                shard_info: None,
            },
            items,
        })
    }
}

fn is_protobuf(response: &http::Response<Body>) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(super::protobuf::MEDIA_TYPE))
}

/// `response` when it is a success; its `Status` as the error otherwise, read as protobuf or
/// JSON by its `Content-Type`, or made from its text when it is neither (a proxy's page), as
/// kube-rs makes it.
async fn answered(response: http::Response<Body>) -> Result<http::Response<Body>, ::kube::Error> {
    let code = response.status();
    if !(code.is_client_error() || code.is_server_error()) {
        return Ok(response);
    }
    let protobuf = is_protobuf(&response);
    let body = response.into_body().collect_bytes().await?;
    let status = if protobuf {
        super::protobuf::decode_status(&body).ok()
    } else {
        serde_json::from_slice::<::kube::core::Status>(&body).ok()
    };
    let status = status.unwrap_or_else(|| {
        let text = String::from_utf8_lossy(&body);
        ::kube::core::Status::failure(text.trim(), "Failed to parse error data").with_code(code.as_u16())
    });
    Err(::kube::Error::Api(status.boxed()))
}

fn transport(error: impl std::error::Error + Send + Sync + 'static) -> ApiError {
    ApiError::Transport {
        source: TransportError::new(error),
    }
}

/// Whether `err` means the request never got an answer from the server: no connection, or one
/// that broke before a response.
fn unreachable(err: &::kube::Error) -> bool {
    matches!(err, ::kube::Error::HyperError(_) | ::kube::Error::Service(_))
}

/// A `Status` answer keeps its reason and the wait it asked for (`details.retryAfterSeconds`,
/// which the API server writes whenever it sends a Retry-After header).
pub(super) fn api_error(err: ::kube::Error) -> ApiError {
    match err {
        ::kube::Error::Api(status) => {
            let error = ApiError::status(StatusReason::from_status(&status.reason, status.code), status.message);
            match status.details.map(|d| d.retry_after_seconds) {
                Some(secs) if secs > 0 => error.with_retry_after(std::time::Duration::from_secs(secs.into())),
                _ => error,
            }
        }
        other => ApiError::Transport {
            source: TransportError::new(other),
        },
    }
}

/// One page of a metadata list.
#[derive(Deserialize)]
struct MetadataList {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default)]
    items: Vec<PartialObjectMeta>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    #[serde(default)]
    resource_version: String,
    #[serde(default, rename = "continue")]
    continue_token: String,
    #[serde(default)]
    shard_info: Option<ShardInfo>,
}

/// `ListMeta.shardInfo`: the shard selector the server applied.
#[derive(Default, Deserialize)]
struct ShardInfo {
    #[serde(default)]
    selector: String,
}

impl ClusterApi for KubeApi {
    async fn discover(&self) -> Result<Discovery, ApiError> {
        let mut discovery = Discovery::default();
        let mut group_versions: Vec<(String, String, bool)> = Vec::new();
        let core = self.call(self.client.list_core_api_versions()).await?;
        for version in core.versions {
            let preferred = version == "v1";
            group_versions.push((String::new(), version, preferred));
        }
        let groups = self.call(self.client.list_api_groups()).await?;
        for group in groups.groups {
            let preferred = group.preferred_version.map(|p| p.version).unwrap_or_default();
            for v in group.versions {
                let is_preferred = v.version == preferred;
                group_versions.push((group.name.clone(), v.version, is_preferred));
            }
        }
        for (group, version, preferred) in group_versions {
            match self.group_version(&group, &version, preferred).await {
                Ok(resources) => discovery.resources.extend(resources),
                Err(e) => {
                    discovery
                        .failed
                        .insert(super::join_api_version(&group, &version), e.to_string());
                }
            }
        }
        let mut kinds = self.kinds.write();
        for r in &discovery.resources {
            kinds.insert(r.gvr.clone(), r.kind.clone());
        }
        Ok(discovery)
    }

    async fn get(&self, gvr: &Gvr, namespace: &str, name: &str) -> Result<PartialObjectMeta, ApiError> {
        let req = request(
            Method::GET,
            &path(gvr, namespace, Some(name))?,
            self.wire.accept_object(),
            None,
        )?;
        self.object(gvr, req).await
    }

    async fn patch(&self, gvr: &Gvr, namespace: &str, name: &str, edit: &Patch) -> Result<PartialObjectMeta, ApiError> {
        let body = Some((edit.patch_type.content_type(), edit.body.to_string().into_bytes()));
        let req = request(
            Method::PATCH,
            &path(gvr, namespace, Some(name))?,
            self.wire.accept_object(),
            body,
        )?;
        self.object(gvr, req).await
    }

    async fn delete(&self, gvr: &Gvr, namespace: &str, name: &str, options: &DeleteOptions) -> Result<(), ApiError> {
        let body = serde_json::to_vec(options).unwrap_or_default();
        let req = request(
            Method::DELETE,
            &path(gvr, namespace, Some(name))?,
            self.wire.accept_object(),
            Some(("application/json", body)),
        )?;
        self.fetch(req).await?;
        Ok(())
    }

    async fn list_page(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        continue_token: &str,
        limit: usize,
    ) -> Result<ObjectList, ApiError> {
        let limit = limit.to_string();
        let shard = shard.map(ShardSelector::to_string);
        let mut query = vec![("limit", limit.as_str())];
        if !continue_token.is_empty() {
            query.push(("continue", continue_token));
        }
        if let Some(selector) = &shard {
            query.push(("shardSelector", selector));
        }
        let uri = with_query(&path(gvr, "", None)?, &query);
        // The one field a sharded page must be read for, `shardInfo`, has no protobuf number.
        let accept = match shard {
            Some(_) => ACCEPT_METADATA_LIST,
            None => self.wire.accept_list(),
        };
        let page = self.fetch(request(Method::GET, &uri, accept, None)?).await?.page()?;
        Ok(self.object_list(gvr, page))
    }

    async fn watch(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        resource_version: &str,
    ) -> Result<WatchStream, ApiError> {
        let shard = shard.map(ShardSelector::to_string);
        let mut query = vec![("resourceVersion", resource_version)];
        query.extend(shard.as_deref().map(|s| ("shardSelector", s)));
        self.open_watch(gvr, &query).await
    }

    async fn watch_list(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        resource_version: &str,
    ) -> Result<WatchStream, ApiError> {
        let shard = shard.map(ShardSelector::to_string);
        let mut query = vec![
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("resourceVersion", resource_version),
        ];
        query.extend(shard.as_deref().map(|s| ("shardSelector", s)));
        self.open_watch(gvr, &query).await
    }

    async fn apply(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        field_manager: &str,
        config: &serde_json::Value,
    ) -> Result<PartialObjectMeta, ApiError> {
        let uri = with_query(&path(gvr, namespace, Some(name))?, &[("fieldManager", field_manager)]);
        let body = Some(("application/apply-patch+yaml", config.to_string().into_bytes()));
        let req = request(Method::PATCH, &uri, self.wire.accept_object(), body)?;
        self.object(gvr, req).await
    }

    async fn list_whole(&self, gvr: &Gvr) -> Result<ObjectList, ApiError> {
        let req = request(Method::GET, &path(gvr, "", None)?, "application/json", None)?;
        let list: MetadataList = self.send(req).await?;
        Ok(self.object_list(gvr, list))
    }

    async fn get_whole(&self, gvr: &Gvr, name: &str) -> Result<PartialObjectMeta, ApiError> {
        let req = request(Method::GET, &path(gvr, "", Some(name))?, "application/json", None)?;
        Ok(self.stamp(gvr, self.send(req).await?))
    }

    async fn replace_status(&self, gvr: &Gvr, object: &PartialObjectMeta) -> Result<PartialObjectMeta, ApiError> {
        let uri = format!("{}/status", path(gvr, "", Some(&object.metadata.name))?);
        let body = serde_json::to_vec(object).unwrap_or_default();
        let req = request(Method::PUT, &uri, "application/json", Some(("application/json", body)))?;
        Ok(self.stamp(gvr, self.send(req).await?))
    }

    async fn create_event(&self, event: &EventRecord) -> Result<(), ApiError> {
        let now = super::time::now_rfc3339();
        let body = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "generateName": format!("{}.", event.involved_object.name),
                "namespace": event.namespace(),
            },
            "involvedObject": event.involved_object,
            "type": event.event_type,
            "reason": event.reason,
            "message": event.message,
            "source": {"component": event.source_component},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        });
        let gvr = Gvr::new("", "v1", "events");
        let body = Some(("application/json", body.to_string().into_bytes()));
        let req = request(
            Method::POST,
            &path(&gvr, event.namespace(), None)?,
            "application/json",
            body,
        )?;
        self.call(self.client.request_text(req)).await?;
        Ok(())
    }
}
