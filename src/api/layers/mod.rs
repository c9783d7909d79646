//! Request layers: what every request to the API server goes through, each rule written once and
//! composed over any [`ClusterApi`].
//!
//! A [`Layer`] wraps one call of a [`Verb`]; [`Layered`] applies a layer to every method of the
//! [`ClusterApi`] beneath it, so the delegation is written here once and each layer is only its
//! rule. `kube-gc run` stacks them, outermost first, as [`stack`] does:
//!
//! 1. [`Retry`]: a 429, or a 5xx carrying a Retry-After hint, is retried inside the request, as
//!    client-go does, so a throttling storm never fails a work item on its first answer.
//! 2. [`Budgets`]: each attempt waits for a token of its caller's budget (discovery, monitors or
//!    workers), so that a worker backlog never delays discovery or a monitor's list.
//! 3. [`Fence`]: a write is refused once this replica's leadership may have passed to another,
//!    checked after the token's wait, right before the request is sent.
//! 4. [`Count`]: every request sent is counted by verb and outcome, retries included.
//!
//! [`Latency`] and [`Faults`] are not in that stack: `loadgen` puts latency over the in-memory
//! cluster to stand for a network, and tests arm faults over any cluster (the simulated one keeps
//! a [`Faults`] on its trait face).
//!
//! Beneath them, the transport ([`super::KubeApi`]) sends one REST request per call and paces
//! requests while the server cannot be reached at all.

mod budgets;
mod count;
mod faults;
mod fence;
mod latency;
mod retry;

pub use budgets::{Budget, Budgets, Throttle};
pub use count::Count;
pub use faults::{Fault, Faults};
pub use fence::Fence;
pub use latency::Latency;
pub use retry::{Retry, MAX_RETRY_WAIT, MAX_TRIES};

use super::{
    ApiError, CallCount, ClusterApi, DeleteOptions, Discovery, EventRecord, Gvr, ObjectList, PartialObjectMeta, Patch,
    WatchStream,
};
use crate::api::shard::ShardSelector;
use std::future::Future;

/// What a request does, as the layers tell requests apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// A discovery document.
    Discovery,
    /// GET of one object.
    Get,
    /// One page of a LIST.
    List,
    /// Opening a WATCH.
    Watch,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
    /// POST of an Event.
    Create,
    /// PUT of an object's `status`.
    Update,
}

impl Verb {
    /// Every verb, in order.
    pub const ALL: [Verb; 8] = [
        Verb::Discovery,
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Patch,
        Verb::Delete,
        Verb::Create,
        Verb::Update,
    ];

    /// The name requests are counted under.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Discovery => "discovery",
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::Create => "create",
            Verb::Update => "update",
        }
    }

    /// True for the verbs that change the cluster.
    pub fn is_write(self) -> bool {
        matches!(self, Verb::Patch | Verb::Delete | Verb::Create | Verb::Update)
    }
}

/// What a layer knows of a request: its verb, and the resource it is about (none for discovery
/// and events).
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// What the request does.
    pub verb: Verb,
    /// The resource it reads or changes.
    pub gvr: Option<&'a Gvr>,
}

impl<'a> Request<'a> {
    /// A `verb` request about `gvr`.
    pub fn on(verb: Verb, gvr: &'a Gvr) -> Request<'a> {
        Request { verb, gvr: Some(gvr) }
    }
}

impl From<Verb> for Request<'_> {
    /// A `verb` request about no resource.
    fn from(verb: Verb) -> Self {
        Request { verb, gvr: None }
    }
}

/// One rule applied around each call. `call` sends the request through the layers beneath; a
/// layer may call it several times (a retry), once, or not at all (a refusal).
pub trait Layer: Send + Sync + 'static {
    /// Runs `call`, which sends `request`, under this layer's rule.
    fn around<T, F, Fut>(&self, request: Request<'_>, call: F) -> impl Future<Output = Result<T, ApiError>> + Send
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, ApiError>> + Send;

    /// The requests this layer counted, if it counts them.
    fn call_counts(&self) -> Option<Vec<CallCount>> {
        None
    }
}

/// `layer` applied to every call of `inner`.
pub struct Layered<L, C> {
    layer: L,
    inner: C,
}

impl<L, C> Layered<L, C> {
    /// `inner` with `layer` around each of its calls.
    pub fn new(layer: L, inner: C) -> Self {
        Layered { layer, inner }
    }

    /// The layer.
    pub fn layer(&self) -> &L {
        &self.layer
    }

    /// The API beneath the layer.
    pub fn inner(&self) -> &C {
        &self.inner
    }
}

impl<L: Layer, C: ClusterApi> ClusterApi for Layered<L, C> {
    async fn discover(&self) -> Result<Discovery, ApiError> {
        self.layer
            .around(Verb::Discovery.into(), || self.inner.discover())
            .await
    }

    async fn get(&self, gvr: &Gvr, namespace: &str, name: &str) -> Result<PartialObjectMeta, ApiError> {
        self.layer
            .around(Request::on(Verb::Get, gvr), || self.inner.get(gvr, namespace, name))
            .await
    }

    async fn patch(&self, gvr: &Gvr, namespace: &str, name: &str, edit: &Patch) -> Result<PartialObjectMeta, ApiError> {
        let call = || self.inner.patch(gvr, namespace, name, edit);
        self.layer.around(Request::on(Verb::Patch, gvr), call).await
    }

    async fn delete(&self, gvr: &Gvr, namespace: &str, name: &str, options: &DeleteOptions) -> Result<(), ApiError> {
        let call = || self.inner.delete(gvr, namespace, name, options);
        self.layer.around(Request::on(Verb::Delete, gvr), call).await
    }

    async fn list_page(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        continue_token: &str,
        limit: usize,
    ) -> Result<ObjectList, ApiError> {
        let call = || self.inner.list_page(gvr, shard, continue_token, limit);
        self.layer.around(Request::on(Verb::List, gvr), call).await
    }

    async fn watch(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        resource_version: &str,
    ) -> Result<WatchStream, ApiError> {
        let call = || self.inner.watch(gvr, shard, resource_version);
        self.layer.around(Request::on(Verb::Watch, gvr), call).await
    }

    async fn watch_list(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        resource_version: &str,
    ) -> Result<WatchStream, ApiError> {
        let call = || self.inner.watch_list(gvr, shard, resource_version);
        self.layer.around(Request::on(Verb::Watch, gvr), call).await
    }

    fn call_counts(&self) -> Vec<CallCount> {
        self.layer.call_counts().unwrap_or_else(|| self.inner.call_counts())
    }

    async fn create_event(&self, event: &EventRecord) -> Result<(), ApiError> {
        self.layer
            .around(Verb::Create.into(), || self.inner.create_event(event))
            .await
    }

    async fn apply(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        field_manager: &str,
        config: &serde_json::Value,
    ) -> Result<PartialObjectMeta, ApiError> {
        let call = || self.inner.apply(gvr, namespace, name, field_manager, config);
        self.layer.around(Request::on(Verb::Patch, gvr), call).await
    }

    async fn list_whole(&self, gvr: &Gvr) -> Result<ObjectList, ApiError> {
        let call = || self.inner.list_whole(gvr);
        self.layer.around(Request::on(Verb::List, gvr), call).await
    }

    async fn get_whole(&self, gvr: &Gvr, name: &str) -> Result<PartialObjectMeta, ApiError> {
        let call = || self.inner.get_whole(gvr, name);
        self.layer.around(Request::on(Verb::Get, gvr), call).await
    }

    async fn replace_status(&self, gvr: &Gvr, object: &PartialObjectMeta) -> Result<PartialObjectMeta, ApiError> {
        let call = || self.inner.replace_status(gvr, object);
        self.layer.around(Request::on(Verb::Update, gvr), call).await
    }
}

/// The layers `kube-gc run` sends its requests through, over the transport `C`.
pub type Stack<C> = Layered<Retry, Layered<Budgets, Layered<Fence, Layered<Count, C>>>>;

/// Stacks the layers over `transport`, in the order of the [module docs](self).
pub fn stack<C: ClusterApi>(transport: C, budgets: Budgets, fence: Fence) -> Stack<C> {
    let counted = Layered::new(Count::default(), transport);
    let fenced = Layered::new(fence, counted);
    let throttled = Layered::new(budgets, fenced);
    Layered::new(Retry::default(), throttled)
}
