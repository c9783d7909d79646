//! The simulated cluster over HTTP: the Kubernetes REST API, served from the same in-memory
//! [`SimCluster`] the tests use, so that real clients (kube-rs, kubectl) use it as a cluster.
//!
//! # Model
//!
//! - Every request is parsed ([`request`]) into a discovery document or a resource path plus a
//!   verb, passes [admission](faults) (injected latency, QPS ceiling, error rates), and is then
//!   answered by [`discovery`], by [`openapi`] or by one call on the cluster's user face ([`resources`]). No
//!   semantics live here: creates, updates, patches, deletes and watches behave exactly as they do
//!   in memory, and the cluster's lock is never held across an `.await`.
//! - Request bodies are JSON; create and update bodies of built-in types may also be protobuf
//!   ([`protobuf`]), read into the same JSON object; a server-side apply's body is YAML.
//! - Creates, updates and patches are recorded as the request's field manager (`fieldManager`, or
//!   the User-Agent's product), and answers show each object's `managedFields`
//!   ([`represent`]).
//! - Responses are JSON in the representation the `Accept` header asks for: full objects,
//!   `PartialObjectMetadata`, or a `Table` with the type's columns ([`represent`], [`printers`]);
//!   `PartialObjectMetadata` and its list are also served in protobuf to a client that asks for
//!   it first, for every type ([`ServerOptions::protobuf`]). Every error is a `metav1.Status` with
//!   the code and reason of the cluster's [`ApiError`], in the request's encoding.
//! - Lists page through consistent snapshots ([`super::pages`]); watches stream one JSON event per
//!   line, or length-prefixed protobuf frames ([`watch`]), asked for with `?watch=true` or on a legacy `/watch/` path ([`request`]).
//! - A bad request gets a `Status` and affects nothing else: no input can panic a handler, and a
//!   handler's failure is the response of that request only.
//! - Every answered request can be logged, one JSON line each ([`audit`]), from the one request
//!   path every request takes.
//! - `/sim/storage/…/{resource}` is the simulator's own: GET shows how many of the resource's
//!   objects are stored at each storage generation, POST moves the resource to the next one first
//!   ([`crate::storage_version`]), so a test can prove that a migration rewrote every object.
//! - Stopping is graceful and bounded ([`serve`]): open watches end at once, requests in flight get
//!   a moment to finish, and once `serve` returns the server changes the cluster no more.
//!
//! # Not served
//!
//! Protobuf responses of full objects and tables (the metadata representations and the OpenAPI v2
//! document, see [`openapi`], are served; a client that accepts only such protobuf gets 406) and protobuf bodies of custom resources (415; create and update bodies
//! of built-in types are accepted in protobuf, see [`protobuf`]), subresources other than `status`
//! and `scale` ([`subresource`]), server-side field validation (`fieldValidation` is
//! ignored; the OpenAPI documents do not advertise it, so kubectl validates on its side),
//! authentication and authorization (every request is allowed; [`review`] only answers the
//! questions of servers that delegate theirs), admission webhooks, and
//! aggregated discovery.

pub mod audit;
mod discovery;
mod faults;
#[doc(hidden)]
pub mod fuzzing;
mod kubeconfig;
mod list_options;
mod openapi;
mod printers;
#[cfg(feature = "protobuf")]
mod protobuf;
/// Built without the `protobuf` feature, no type has a protobuf form: such bodies get 415.
#[cfg(not(feature = "protobuf"))]
mod protobuf {
    pub(super) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
    pub(super) type Decoder = std::convert::Infallible;
    pub(super) fn message(_: &str, _: &str, _: &str) -> Option<Decoder> {
        None
    }
    pub(super) fn decode(decoder: Decoder, _: &[u8]) -> Result<serde_json::Value, kube_gc::api::ApiError> {
        match decoder {}
    }
}
mod represent;
mod request;
mod resources;
mod review;
mod selector;
mod subresource;
mod watch;

pub use audit::AuditLog;
pub use faults::{ErrorRate, HttpFaults, InjectedError, Latency};
pub use kubeconfig::kubeconfig;
pub use request::HttpVerb;
pub use review::{Denial, PathGrant, TokenUser};

use super::store::COMMITTED;
use super::SimCluster;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use kube_gc::api::{ApiError, Gvr, StatusReason};
use represent::{error_response, json_response};
use request::{Call, Target};
use std::future::{Future, IntoFuture};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The largest request body accepted, as the API server's default (3 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// How long a stopping server waits for the requests in flight before it returns anyway. Watches
/// end as soon as it stops, so this bounds only ordinary requests held up by an injected latency
/// or timeout, or answers a client is slow to read; a second is far more than a local request
/// needs.
pub const DRAIN: Duration = Duration::from_secs(1);

/// How the server behaves beyond the cluster's semantics.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Injected trouble; none by default.
    pub faults: HttpFaults,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// The largest request body; larger ones get 413.
    pub max_body_bytes: usize,
    /// Verbs and resources whose access reviews answer "not allowed" ([`review`]); none by
    /// default.
    pub denied: Vec<Denial>,
    /// The bearer tokens a TokenReview authenticates, each as its user ([`review`]); none by
    /// default. The server itself never asks for a token.
    pub tokens: Vec<TokenUser>,
    /// The non-resource paths a SubjectAccessReview lets each user or group `get`
    /// ([`review`]); none by default.
    pub grants: Vec<PathGrant>,
    /// The `WatchList` feature gate: whether a watch may ask for `sendInitialEvents`
    /// ([`list_options`]); on by default, as since Kubernetes 1.32.
    pub watch_list: bool,
    /// The `ShardedListAndWatch` feature gate: whether LIST and WATCH apply `shardSelector`
    /// and a list echoes it (`metadata.shardInfo`); on by default. Off, the parameter is
    /// ignored, as a server older than Kubernetes 1.36 ignores it.
    pub sharded_list_and_watch: bool,
    /// Where to log every answered request; nowhere by default.
    pub audit: Option<AuditLog>,
    /// Whether `PartialObjectMetadata` and its list are served in protobuf to a client that asks
    /// for it ([`represent`]); on by default. Off, such a client gets the JSON it names next, as
    /// from a server (or an aggregated API) that offers no protobuf.
    pub protobuf: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            faults: HttpFaults::default(),
            bookmark_interval: Duration::from_secs(60),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            denied: Vec::new(),
            tokens: Vec::new(),
            grants: Vec::new(),
            watch_list: true,
            sharded_list_and_watch: true,
            audit: None,
            protobuf: true,
        }
    }
}

/// What every request handler shares.
struct Server {
    cluster: Arc<SimCluster>,
    pages: super::pages::Pages,
    admission: faults::Admission,
    options: ServerOptions,
    /// Cancelled when the server stops; ends every open watch.
    stopping: CancellationToken,
}

/// The HTTP application serving `cluster`. Its watches end only by themselves; [`serve`] also
/// ends them when it stops.
pub fn router(cluster: Arc<SimCluster>, options: ServerOptions) -> Router {
    app(cluster, options, CancellationToken::new())
}

fn app(cluster: Arc<SimCluster>, options: ServerOptions, stopping: CancellationToken) -> Router {
    let server = Server {
        cluster,
        pages: super::pages::Pages::default(),
        admission: faults::Admission::new(options.faults.clone()),
        options,
        stopping,
    };
    Router::new().fallback(handle).with_state(Arc::new(server))
}

/// Serves `cluster` on `listener` until `shutdown` completes, then stops gracefully and in bounded
/// time: it takes no new connection or request, ends every open watch, and gives the requests in
/// flight up to [`DRAIN`] to finish.
///
/// Once it returns, the server changes the cluster no more: a request that outlived the drain
/// goes on until the runtime is dropped, but the cluster is [sealed](SimCluster::seal) and its
/// write refused (503), so a state saved afterwards holds every write a client was told was made.
pub async fn serve(
    listener: tokio::net::TcpListener,
    cluster: Arc<SimCluster>,
    options: ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let stopping = CancellationToken::new();
    let signal = {
        let stopping = stopping.clone();
        async move {
            shutdown.await;
            stopping.cancel();
        }
    };
    let served = axum::serve(listener, app(Arc::clone(&cluster), options, stopping.clone()))
        .with_graceful_shutdown(signal)
        .into_future();
    tokio::pin!(served);
    let result = tokio::select! {
        served = &mut served => served,
        () = stopping.cancelled() => tokio::time::timeout(DRAIN, served).await.unwrap_or(Ok(())),
    };
    cluster.seal();
    result
}

/// The one path of every request: read it, serve it, log it.
async fn handle(State(server): State<Arc<Server>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let call = Call::read(&parts);
    let accept = parts
        .headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let errors = request::error_encoding(accept, server.options.protobuf);
    let user_agent = server
        .options
        .audit
        .is_some()
        .then(|| audit::user_agent(&parts.headers));
    let served = async {
        let response = match server.serve(&call, parts, body).await {
            Ok(response) => response,
            Err(e) => error_response(&e, errors),
        };
        let answer = audit::Answer {
            code: response.status(),
            committed: COMMITTED.with(std::cell::Cell::get),
            injected: faults::INJECTED.with(std::cell::Cell::get),
        };
        (response, answer)
    };
    let served = faults::INJECTED.scope(std::cell::Cell::new(false), served);
    let (response, answer) = COMMITTED.scope(std::cell::Cell::new(None), served).await;
    if let (Some(audit), Some(user_agent)) = (&server.options.audit, user_agent) {
        audit.record(&call, &user_agent, &answer);
    }
    response
}

impl Server {
    /// A GET of a resource's storage report, or a POST that rotates its storage first
    /// ([`crate::storage_version`]).
    fn storage(&self, gvr: &Gvr, method: &Method) -> Result<Response, ApiError> {
        if method == Method::POST {
            self.cluster.rotate_storage(gvr)?;
        } else if method != Method::GET {
            return Err(resources::method_not_allowed());
        }
        let report = serde_json::to_value(self.cluster.storage_report(gvr)?).unwrap_or_default();
        Ok(json_response(StatusCode::OK, &report))
    }

    /// A POST of an access review ([`review`]): answered, never stored.
    async fn review(&self, resource: &str, method: &Method, parts: &Parts, body: Body) -> Result<Response, ApiError> {
        if method != Method::POST {
            return Err(resources::method_not_allowed());
        }
        let group = review::group_of(resource).unwrap_or_default();
        let kind = review::kind_of(group, resource);
        let review = self.body_value(parts, body, group, review::VERSION, kind).await?;
        let policy = review::Policy {
            denied: &self.options.denied,
            tokens: &self.options.tokens,
            grants: &self.options.grants,
        };
        let answer = review::answer(resource, review, &policy)?;
        Ok(json_response(StatusCode::CREATED, &answer))
    }

    async fn serve(&self, call: &Call, parts: Parts, body: Body) -> Result<Response, ApiError> {
        if let Target::Resource(path) = &call.target {
            return self.resource(path, call.verb, &call.query, parts, body).await;
        }
        if let Target::Review(resource) = &call.target {
            return self.review(resource, &call.method, &parts, body).await;
        }
        if let Target::Storage(gvr) = &call.target {
            return self.storage(gvr, &call.method);
        }
        if call.method != Method::GET {
            return Err(resources::method_not_allowed());
        }
        if call.target == Target::Health {
            return Ok((StatusCode::OK, "ok").into_response());
        }
        if self.admission.targets(&parts.headers) {
            self.admission.admit(None).await?;
        }
        if let Target::OpenApi(path) = &call.target {
            return openapi::serve(&self.cluster, path, &parts.headers);
        }
        let document = match &call.target {
            Target::Version => Some(discovery::version()),
            Target::CoreVersions => Some(discovery::core_versions()),
            Target::Groups => Some(discovery::group_list(&self.cluster)),
            Target::Group(group) => discovery::group(&self.cluster, group),
            Target::GroupVersion(group, version) => discovery::resource_list(&self.cluster, group, version)?,
            Target::Health
            | Target::Resource(_)
            | Target::Review(_)
            | Target::Storage(_)
            | Target::OpenApi(_)
            | Target::Unknown => None,
        };
        document.map(|doc| json_response(StatusCode::OK, &doc)).ok_or_else(|| {
            ApiError::status(
                StatusReason::NotFound,
                "the server could not find the requested resource",
            )
        })
    }
}
