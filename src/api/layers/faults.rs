//! [`Faults`]: a request that matches an armed [`Fault`] fails with the fault's error instead of
//! going on, and nothing else changes.
//!
//! Faults model the failures the GC must survive: a CRD whose conversion webhook breaks every
//! LIST, a flaky aggregated API, a 409 on a patch, a discovery outage. The layer goes over any
//! [`ClusterApi`](crate::api::ClusterApi); the simulated cluster puts one on its trait face
//! (`kube_gc_sim::SimCluster::inject_fault`) and none on its user
//! methods, so a test can arrange the cluster while the GC is being starved.
//!
//! # Matching
//!
//! A call matches a fault when the verbs are equal and either the fault names no resource or it
//! names the call's group and resource (any version). Discovery and event creation are about no
//! resource, so only a fault without one matches them. The faults are tried in the order they
//! were injected and the first match answers; a fault with `times: Some(n)` answers `n` calls and
//! then disarms itself, one with `times: None` answers until [`clear`](Faults::clear).
//!
//! The armed faults have their own lock, taken once per request and never while the request
//! runs, so a check costs one uncontended lock when no fault is armed.

use super::{Layer, Request, Verb};
use crate::api::ApiError;
use parking_lot::Mutex;
use std::future::Future;
use std::sync::Arc;

/// One injected failure; see the [module docs](self) for how calls are matched.
///
/// ```
/// use kube_gc::api::layers::{Fault, Faults, Verb};
/// use kube_gc::api::{ApiError, StatusReason};
///
/// let faults = Faults::default();
/// // Every LIST of widgets.example.com fails, as behind a broken conversion webhook.
/// faults.inject(Fault {
///     verb: Verb::List,
///     resource: Some(("example.com".into(), "widgets".into())),
///     error: ApiError::status(StatusReason::InternalError, "conversion webhook unavailable"),
///     times: None,
/// });
/// faults.clear();
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The verb that fails.
    pub verb: Verb,
    /// `(group, resource)` of the calls that fail, any version; `None` for every call of the verb.
    pub resource: Option<(String, String)>,
    /// What the failing calls answer.
    pub error: ApiError,
    /// How many calls fail before the fault disarms itself; `None` until cleared.
    pub times: Option<usize>,
}

impl Fault {
    fn matches(&self, request: Request<'_>) -> bool {
        self.verb == request.verb
            && match (&self.resource, request.gvr) {
                (None, _) => true,
                (Some((group, resource)), Some(gvr)) => *group == gvr.group && *resource == gvr.resource,
                (Some(_), None) => false,
            }
    }
}

/// The fault-injection layer: the armed faults, in injection order. Clones share them, so a test
/// keeps one to arm faults while the layer it composed answers requests.
#[derive(Clone, Default)]
pub struct Faults {
    armed: Arc<Mutex<Vec<Fault>>>,
}

impl Faults {
    /// Arms `fault` behind the ones already armed. A fault that may answer no call is dropped.
    pub fn inject(&self, fault: Fault) {
        if fault.times != Some(0) {
            self.armed.lock().push(fault);
        }
    }

    /// Disarms every fault.
    pub fn clear(&self) {
        self.armed.lock().clear();
    }

    /// The error of the first fault matching `request`, using up one of its answers; `Ok` when
    /// none matches.
    pub fn check(&self, request: Request<'_>) -> Result<(), ApiError> {
        let mut armed = self.armed.lock();
        let Some(index) = armed.iter().position(|f| f.matches(request)) else {
            return Ok(());
        };
        let fault = &mut armed[index];
        let error = fault.error.clone();
        if let Some(left) = &mut fault.times {
            *left -= 1;
            if *left == 0 {
                armed.remove(index);
            }
        }
        Err(error)
    }
}

impl Layer for Faults {
    async fn around<T, F, Fut>(&self, request: Request<'_>, mut call: F) -> Result<T, ApiError>
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, ApiError>> + Send,
    {
        self.check(request)?;
        call().await
    }
}
