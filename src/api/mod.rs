//! The API layer: the one door through which kube-gc talks to a cluster.
//!
//! [`ClusterApi`] is metadata-only, like the client upstream's collector uses: objects come back as
//! [`PartialObjectMeta`], deletes carry [`DeleteOptions`], and patches are raw JSON bodies with a
//! [`PatchType`]. Two implementations stand behind it: the in-memory simulated cluster
//! (`kube_gc_sim::SimCluster`, in its own crate) used by tests, benches, `loadgen` and the demo,
//! and a kube-rs client for real clusters. Nothing in this module decides anything about garbage.
//!
//! # The door and its exceptions
//!
//! Every request of the collector (discovery, monitors, workers, audit, Events) goes through a
//! [`ClusterApi`] wrapped in [`layers::stack`]: retried, held to its verb's budget, fenced by the
//! leader's tenure, and counted. Four callers talk to the API server through a kube client of
//! their own instead, each for a reason the layered client cannot serve:
//!
//! | caller | what it sends | why not through the layers |
//! |---|---|---|
//! | [`crate::leader::KubeLeases`] | GET, CREATE, REPLACE, DELETE of `coordination.k8s.io` Leases | whole objects, not metadata; a renewal queued behind the collector's budgets, or fenced by the tenure it renews, would lose the tenure it keeps |
//! | [`crate::shard::membership`] | LIST of Namespaces (metadata), every few rounds on the planner | it runs before any collector does and bounds each read to half the renew deadline, so a slow list fails a round instead of waiting behind the workers' budget |
//! | the collector's secure port (`kube-gc-cli`, `server::auth`) | CREATE of TokenReviews and SubjectAccessReviews | whole objects; a scrape must be answered while the collector is throttled or fenced |
//! | `kube-gc tree` (`kube-gc-cli`, `tree::fetch`) | discovery, GET and LIST of metadata in one namespace | a one-shot command, not a collector: it needs each resource's singular and short names, which [`Discovery`] drops, and namespaced lists, which [`ClusterApi::list_page`] (all namespaces) does not make; it builds its requests with this layer's paths and `Accept` headers ([`rest_path()`], [`ACCEPT_METADATA`]) |
//!
//! None of them writes an object the collector collects.

mod connect;
mod error;
pub mod field;
mod kube_client;
pub mod layers;
mod mapper;
pub mod names;
mod outage;
pub mod protobuf;
mod rest_path;
pub mod shard;
pub mod time;
mod types;
mod validation;
pub(crate) mod watch_wire;

pub use connect::{connect, ConnectError};
pub use error::{one_line, ApiError, StatusCause, StatusDetails, StatusObject, StatusReason, TransportError};
pub use field::FieldError;
pub use kube_client::{KubeApi, Wire};
/// The REST paths and metadata `Accept` headers of the kube-rs transport, for the other metadata
/// readers of the crate (`kube-gc tree`).
pub use kube_client::{ACCEPT_METADATA, ACCEPT_METADATA_LIST};
pub use mapper::{RestMapper, SharedRestMapper};
pub use rest_path::{path as rest_path, with_query};
pub use types::*;
pub use validation::{owner_reference_errors, validate_owner_references, InvalidOwnerReference};

use futures::stream::BoxStream;
use shard::ShardSelector;
use std::collections::BTreeMap;
use std::future::Future;

/// A discovery document: every served resource, plus the group-versions that failed to answer.
#[derive(Clone, Debug, Default)]
pub struct Discovery {
    /// Served resources, every version, each marked preferred or not.
    pub resources: Vec<ApiResource>,
    /// Group-versions (`apps/v1`) whose discovery failed, with the reason.
    pub failed: BTreeMap<String, String>,
}

/// A stream of watch events; it ends when the server closes the watch.
pub type WatchStream = BoxStream<'static, Result<WatchEvent, ApiError>>;

/// How many requests of one verb ended with one HTTP code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallCount {
    /// `get`, `list`, `watch`, `patch`, `delete`, `create` or `discovery`.
    pub verb: &'static str,
    /// The HTTP code; 200 for every success.
    pub code: u16,
    /// Requests so far.
    pub count: u64,
}

/// Metadata-only access to a cluster. Namespace is `""` for cluster-scoped resources and, on
/// `list`/`watch`, means "all namespaces".
pub trait ClusterApi: Send + Sync + 'static {
    /// The discovery document.
    fn discover(&self) -> impl Future<Output = Result<Discovery, ApiError>> + Send;

    /// GET one object's metadata.
    fn get(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<PartialObjectMeta, ApiError>> + Send;

    /// PATCH an object; returns the object after the patch.
    fn patch(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        edit: &Patch,
    ) -> impl Future<Output = Result<PartialObjectMeta, ApiError>> + Send;

    /// DELETE an object.
    fn delete(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// LIST one page of a resource's objects, in all namespaces (in the shards `shard` selects,
    /// when given): at most `limit` of them (0: no limit), from where `continue_token` says
    /// (`""`: the first page). A server that applied `shard` echoes it
    /// ([`ObjectList::shard_selector`]); one that ignores it lists every object. Every page of one list
    /// shows the collection at the first page's resourceVersion, and the last page has no
    /// continue token. A token the server can no longer resume is answered with 410 Expired, and
    /// the list starts again from its first page.
    ///
    /// The monitor ([`crate::monitor`]) is the one caller that goes through the pages.
    fn list_page(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        continue_token: &str,
        limit: usize,
    ) -> impl Future<Output = Result<ObjectList, ApiError>> + Send;

    /// WATCH a resource in all namespaces (in the shards `shard` selects, when given, and the
    /// server applies it) from `resource_version` (exclusive).
    fn watch(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        resource_version: &str,
    ) -> impl Future<Output = Result<WatchStream, ApiError>> + Send;

    /// A watch-list of a resource in all namespaces (`sendInitialEvents=true`,
    /// `resourceVersionMatch=NotOlderThan`): every object as it is at a resourceVersion not older
    /// than `resource_version` (`""`: the newest), as ADDED events, then the bookmark that says
    /// so ([`WatchEvent::is_initial_events_end`]) carrying that version, then every later change,
    /// as a watch from it would. A server without the feature answers 422 Invalid (or 400).
    ///
    /// The monitor ([`crate::monitor`]) syncs with it unless told not to.
    fn watch_list(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        resource_version: &str,
    ) -> impl Future<Output = Result<WatchStream, ApiError>> + Send;

    /// The requests made so far, by verb and code, for `/metrics`; empty for an implementation
    /// that does not count them.
    fn call_counts(&self) -> Vec<CallCount> {
        Vec::new()
    }

    /// Records a core/v1 Event.
    fn create_event(&self, event: &EventRecord) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// Server-side apply (`application/apply-patch+yaml`, not forced) of `config` to one object, as
    /// `field_manager`; returns the object's metadata after it.
    ///
    /// The storage version migrator ([`crate::migrator`]) is the one caller. An implementation
    /// that does not serve it answers 405.
    fn apply(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        field_manager: &str,
        config: &serde_json::Value,
    ) -> impl Future<Output = Result<PartialObjectMeta, ApiError>> + Send {
        let _ = (gvr, namespace, name, field_manager, config);
        async { Err(not_served("server-side apply")) }
    }

    /// LIST every object of a cluster-scoped resource whole (spec and status, not metadata only),
    /// in one request, for the few objects kube-gc reads in full: StorageVersionMigrations.
    fn list_whole(&self, gvr: &Gvr) -> impl Future<Output = Result<ObjectList, ApiError>> + Send {
        let _ = gvr;
        async { Err(not_served("a whole-object list")) }
    }

    /// GET one cluster-scoped object whole (spec and status, not metadata only), for the few
    /// objects kube-gc reads in full: the CRD of a resource being migrated.
    fn get_whole(&self, gvr: &Gvr, name: &str) -> impl Future<Output = Result<PartialObjectMeta, ApiError>> + Send {
        let _ = (gvr, name);
        async { Err(not_served("a whole-object get")) }
    }

    /// PUT the `status` of the cluster-scoped `object`, its resourceVersion the precondition (409
    /// Conflict when it changed); returns the object as stored.
    fn replace_status(
        &self,
        gvr: &Gvr,
        object: &PartialObjectMeta,
    ) -> impl Future<Output = Result<PartialObjectMeta, ApiError>> + Send {
        let _ = (gvr, object);
        async { Err(not_served("a status update")) }
    }
}

/// A shared client is a client: every call goes to the one behind the `Arc`, so that layers can
/// be stacked over a client others hold too.
impl<C: ClusterApi> ClusterApi for std::sync::Arc<C> {
    fn discover(&self) -> impl Future<Output = Result<Discovery, ApiError>> + Send {
        (**self).discover()
    }

    fn get(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<PartialObjectMeta, ApiError>> + Send {
        (**self).get(gvr, namespace, name)
    }

    fn patch(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        edit: &Patch,
    ) -> impl Future<Output = Result<PartialObjectMeta, ApiError>> + Send {
        (**self).patch(gvr, namespace, name, edit)
    }

    fn delete(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        (**self).delete(gvr, namespace, name, options)
    }

    fn list_page(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        continue_token: &str,
        limit: usize,
    ) -> impl Future<Output = Result<ObjectList, ApiError>> + Send {
        (**self).list_page(gvr, shard, continue_token, limit)
    }

    fn watch(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        resource_version: &str,
    ) -> impl Future<Output = Result<WatchStream, ApiError>> + Send {
        (**self).watch(gvr, shard, resource_version)
    }

    fn watch_list(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        resource_version: &str,
    ) -> impl Future<Output = Result<WatchStream, ApiError>> + Send {
        (**self).watch_list(gvr, shard, resource_version)
    }

    fn call_counts(&self) -> Vec<CallCount> {
        (**self).call_counts()
    }

    fn create_event(&self, event: &EventRecord) -> impl Future<Output = Result<(), ApiError>> + Send {
        (**self).create_event(event)
    }

    fn apply(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        field_manager: &str,
        config: &serde_json::Value,
    ) -> impl Future<Output = Result<PartialObjectMeta, ApiError>> + Send {
        (**self).apply(gvr, namespace, name, field_manager, config)
    }

    fn list_whole(&self, gvr: &Gvr) -> impl Future<Output = Result<ObjectList, ApiError>> + Send {
        (**self).list_whole(gvr)
    }

    fn get_whole(&self, gvr: &Gvr, name: &str) -> impl Future<Output = Result<PartialObjectMeta, ApiError>> + Send {
        (**self).get_whole(gvr, name)
    }

    fn replace_status(
        &self,
        gvr: &Gvr,
        object: &PartialObjectMeta,
    ) -> impl Future<Output = Result<PartialObjectMeta, ApiError>> + Send {
        (**self).replace_status(gvr, object)
    }
}

/// The answer of an implementation to a request it does not serve.
fn not_served(what: &str) -> ApiError {
    ApiError::status(
        StatusReason::MethodNotAllowed,
        format!("{what} is not served by this client"),
    )
}
