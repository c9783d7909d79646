//! Errors of the collector workers, including upstream's two sentinels (spec §4.1).

use crate::api::ApiError;
use crate::graph::Identity;
use thiserror::Error;

/// Why an attempt on an item did not finish.
#[derive(Debug, Error)]
pub enum CollectError {
    /// Sentinel: the item is gone (404 or a new UID under its name); a virtual delete event was
    /// routed to the builder, which takes it from here. The worker forgets the item.
    #[error("{0} is gone; enqueued a virtual delete event")]
    EnqueuedVirtualDeleteEvent(Box<Identity>),
    /// Sentinel: a cluster-scoped item names a namespaced owner. Retrying cannot help, and the GC
    /// never deletes such an item.
    #[error("cluster-scoped object {item} refers to the namespaced owner kind {owner_kind}")]
    NamespacedOwnerOfClusterScopedObject {
        /// The cluster-scoped item (or the virtual owner being looked up).
        item: Box<Identity>,
        /// The owner's kind.
        owner_kind: String,
    },
    /// The REST mapper does not know the kind; retried with backoff, forever (spec §12.6).
    #[error("unable to map {api_version}/{kind}: {source}")]
    RestMapping {
        /// The apiVersion looked up.
        api_version: String,
        /// The kind looked up.
        kind: String,
        /// The mapper's error.
        #[source]
        source: ApiError,
    },
    /// An API call failed.
    #[error("{verb} {object}: {source}")]
    Api {
        /// `get`, `patch` or `delete`.
        verb: &'static str,
        /// The object the call was about.
        object: Box<Identity>,
        /// The server's error.
        #[source]
        source: ApiError,
    },
    /// Some dependents could not be orphaned; the owner is retried.
    #[error("failed to orphan dependents of owner {owner}, got errors: {errors}")]
    OrphanDependents {
        /// The owner being deleted with the Orphan policy.
        owner: Box<Identity>,
        /// Every failure, joined.
        errors: String,
    },
    /// The decision rests on a view that is not complete yet (see
    /// [`partial_view`](super::partial_view)): the item waits, without counting a failure.
    #[error("waiting before {before}: {}", waiting_on(incomplete))]
    PartialView {
        /// The monitored resources whose view is incomplete; empty when the builders have not
        /// applied the events routed before the decision yet.
        incomplete: Vec<crate::api::Gvr>,
        /// The decision that waits.
        before: &'static str,
    },
    /// removeFinalizer hit a conflict on every attempt.
    #[error("updateMaxRetries({retries}) has reached. The garbage collector will retry later for owner {owner}")]
    UpdateMaxRetries {
        /// Attempts made.
        retries: u32,
        /// The object whose finalizer could not be removed.
        owner: Box<Identity>,
    },
}

impl CollectError {
    /// The API error underneath, if the failure was an API call.
    pub fn api_error(&self) -> Option<&ApiError> {
        match self {
            CollectError::Api { source, .. } => Some(source),
            _ => None,
        }
    }

    /// True when the API answered 404.
    pub fn is_not_found(&self) -> bool {
        self.api_error().is_some_and(ApiError::is_not_found)
    }

    /// True when the API answered 409 Conflict.
    pub fn is_conflict(&self) -> bool {
        self.api_error().is_some_and(ApiError::is_conflict)
    }

    /// True when a write conditioned on a version or UID of the object met another one: 409
    /// Conflict (a precondition or resourceVersion), or 422 Invalid (a patch's UID guard, when the
    /// name now holds a recreated object).
    pub fn is_stale_write(&self) -> bool {
        self.is_conflict() || self.api_error().and_then(ApiError::reason) == Some(crate::api::StatusReason::Invalid)
    }
}

fn waiting_on(incomplete: &[crate::api::Gvr]) -> String {
    if incomplete.is_empty() {
        return "graph events routed earlier are not applied yet".to_string();
    }
    let names: Vec<String> = incomplete.iter().map(ToString::to_string).collect();
    format!(
        "the view of {} is incomplete (not synced, or relisting)",
        names.join(", ")
    )
}

/// The collector's result type.
pub type Result<T, E = CollectError> = std::result::Result<T, E>;
