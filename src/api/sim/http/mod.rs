//! The simulated cluster over HTTP: the Kubernetes REST API, served from the same in-memory
//! [`SimCluster`] the tests use, so that real clients (kube-rs, kubectl) use it as a cluster.
//!
//! # Model
//!
//! - Every request is parsed ([`request`]) into a discovery document or a resource path plus a
//!   verb, passes [admission](faults) (injected latency, QPS ceiling, error rates), and is then
//!   answered by [`discovery`] or by one call on the cluster's user face ([`resources`]). No
//!   semantics live here: creates, updates, patches, deletes and watches behave exactly as they do
//!   in memory, and the cluster's lock is never held across an `.await`.
//! - Responses are JSON in the representation the `Accept` header asks for: full objects,
//!   `PartialObjectMetadata`, or a `Table` ([`represent`]). Every error is a `metav1.Status` with
//!   the code and reason of the cluster's [`ApiError`].
//! - Lists page through consistent snapshots ([`super::pages`]); watches stream one JSON event per line
//!   ([`watch`]).
//! - A bad request gets a `Status` and affects nothing else: no input can panic a handler, and a
//!   handler's failure is the response of that request only.
//!
//! # Not served
//!
//! Protobuf, server-side apply, subresources (`status`, `scale`), `dryRun`, authentication and
//! authorization (every request is allowed), admission webhooks, and OpenAPI documents.

mod discovery;
mod faults;
mod kubeconfig;
mod represent;
mod request;
mod resources;
mod selector;
mod watch;

pub use faults::{parse_duration, ErrorRate, HttpFaults, InjectedError, Latency};
pub use kubeconfig::kubeconfig;
pub use request::HttpVerb;

use super::SimCluster;
use crate::api::{ApiError, StatusReason};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use represent::{error_response, json_response};
use request::Target;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The largest request body accepted, as the API server's default (3 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// How the server behaves beyond the cluster's semantics.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Injected trouble; none by default.
    pub faults: HttpFaults,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// The largest request body; larger ones get 413.
    pub max_body_bytes: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            faults: HttpFaults::default(),
            bookmark_interval: Duration::from_secs(60),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }
}

/// What every request handler shares.
struct Server {
    cluster: Arc<SimCluster>,
    pages: super::pages::Pages,
    admission: faults::Admission,
    options: ServerOptions,
}

/// The HTTP application serving `cluster`.
pub fn router(cluster: Arc<SimCluster>, options: ServerOptions) -> Router {
    let server = Server {
        cluster,
        pages: super::pages::Pages::default(),
        admission: faults::Admission::new(options.faults.clone()),
        options,
    };
    Router::new().fallback(handle).with_state(Arc::new(server))
}

/// Serves `cluster` on `listener` until `shutdown` completes.
///
/// Open watches do not hold the shutdown up: the server stops accepting, and the caller drops the
/// runtime or the task once `shutdown` has fired.
pub async fn serve(
    listener: tokio::net::TcpListener,
    cluster: Arc<SimCluster>,
    options: ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    tokio::select! {
        served = axum::serve(listener, router(cluster, options)) => served,
        () = shutdown => Ok(()),
    }
}

async fn handle(State(server): State<Arc<Server>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    match server.serve(parts, body).await {
        Ok(response) => response,
        Err(e) => error_response(&e),
    }
}

impl Server {
    async fn serve(&self, parts: Parts, body: Body) -> Result<Response, ApiError> {
        let target = request::parse_path(parts.uri.path());
        if let Target::Resource(path) = target {
            return self.resource(parts, body, path).await;
        }
        if parts.method != Method::GET {
            return Err(resources::method_not_allowed());
        }
        if target == Target::Health {
            return Ok((StatusCode::OK, "ok").into_response());
        }
        self.admission.admit(None).await?;
        let document = match target {
            Target::Version => Some(discovery::version()),
            Target::CoreVersions => Some(discovery::core_versions()),
            Target::Groups => Some(discovery::group_list(&self.cluster)),
            Target::Group(group) => discovery::group(&self.cluster, &group),
            Target::GroupVersion(group, version) => discovery::resource_list(&self.cluster, &group, &version)?,
            Target::Health | Target::Resource(_) | Target::Unknown => None,
        };
        document.map(|doc| json_response(StatusCode::OK, &doc)).ok_or_else(|| {
            ApiError::status(
                StatusReason::NotFound,
                "the server could not find the requested resource",
            )
        })
    }
}
