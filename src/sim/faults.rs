//! Fault injection: a call through [`ClusterApi`](crate::api::ClusterApi) that matches an armed
//! [`Fault`] fails with the fault's error instead of reaching the store, and nothing else changes.
//!
//! Faults model the failures the GC must survive: a CRD whose conversion webhook breaks every
//! LIST, a flaky aggregated API, a 409 on a patch, a discovery outage. They apply to the trait face
//! only; the user methods ([`SimCluster::create`](super::SimCluster::create) and the rest) never
//! fail because of a fault, so a test can arrange the cluster while the GC is being starved.
//!
//! # Matching
//!
//! A call matches a fault when the verbs are equal and either the fault names no resource or it
//! names the call's group and resource (any version). Discovery and event creation are about no
//! resource, so only a fault without one matches them. The faults are tried in the order they
//! were injected and the first match answers; a fault with `times: Some(n)` answers `n` calls and
//! then disarms itself, one with `times: None` answers until [`clear`](FaultTable::clear).
//!
//! The table has its own lock, taken once per call and never together with the state lock, so a
//! check costs one uncontended lock when no fault is armed.

use crate::api::layers::Verb;
use crate::api::{ApiError, Gvr};
use parking_lot::Mutex;

/// One injected failure; see the [module docs](self) for how calls are matched.
///
/// ```
/// use kube_gc::api::layers::Verb;
/// use kube_gc::sim::{Fault, SimCluster};
/// use kube_gc::api::{ApiError, StatusReason};
///
/// let cluster = SimCluster::new();
/// // Every LIST of widgets.example.com fails, as behind a broken conversion webhook.
/// cluster.inject_fault(Fault {
///     verb: Verb::List,
///     resource: Some(("example.com".into(), "widgets".into())),
///     error: ApiError::status(StatusReason::InternalError, "conversion webhook unavailable"),
///     times: None,
/// });
/// cluster.clear_faults();
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
    fn matches(&self, verb: Verb, gvr: Option<&Gvr>) -> bool {
        self.verb == verb
            && match (&self.resource, gvr) {
                (None, _) => true,
                (Some((group, resource)), Some(gvr)) => *group == gvr.group && *resource == gvr.resource,
                (Some(_), None) => false,
            }
    }
}

/// The armed faults, in injection order.
#[derive(Default)]
pub(super) struct FaultTable {
    armed: Mutex<Vec<Fault>>,
}

impl FaultTable {
    /// Arms `fault` behind the ones already armed. A fault that may answer no call is dropped.
    pub(super) fn inject(&self, fault: Fault) {
        if fault.times != Some(0) {
            self.armed.lock().push(fault);
        }
    }

    /// Disarms every fault.
    pub(super) fn clear(&self) {
        self.armed.lock().clear();
    }

    /// The error of the first fault matching a `verb` call about `gvr`, using up one of its
    /// answers; `Ok` when none matches.
    pub(super) fn check(&self, verb: Verb, gvr: Option<&Gvr>) -> Result<(), ApiError> {
        let mut armed = self.armed.lock();
        let Some(index) = armed.iter().position(|f| f.matches(verb, gvr)) else {
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
