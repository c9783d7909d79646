//! [`Fence`]: writes only while this replica may write.
//!
//! Invariant: a PATCH, DELETE or Event create passes only if the fence's check holds when the
//! request is about to be sent (after the budget's wait, which can be long); reads always pass.
//! `kube-gc run --leader-elect` checks the leader's tenure ([`crate::leader`]), so a
//! replica that lost the lease, or froze long enough for another to take it, never writes in its
//! stead. The check is a closure, so the API layer knows nothing of leader election.
//! `kube-gc run --dry-run` closes the fence for good, a backstop behind the workers, which in
//! shadow mode record their writes instead of sending them.

use super::{Layer, Request};
use crate::api::{ApiError, StatusReason};
use std::future::Future;
use std::sync::Arc;

/// The fence layer; see the [module docs](self).
#[derive(Clone)]
pub struct Fence {
    may_write: Option<Arc<dyn Fn() -> bool + Send + Sync>>,
}

impl Fence {
    /// Writes pass while `may_write` answers true.
    pub fn new(may_write: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Fence {
            may_write: Some(Arc::new(may_write)),
        }
    }

    /// Every write passes.
    pub fn open() -> Self {
        Fence { may_write: None }
    }

    /// No write passes.
    pub fn closed() -> Self {
        Fence::new(|| false)
    }
}

impl Layer for Fence {
    async fn around<T, F, Fut>(&self, request: Request<'_>, mut call: F) -> Result<T, ApiError>
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, ApiError>> + Send,
    {
        if request.verb.is_write() && self.may_write.as_ref().is_some_and(|may| !may()) {
            return Err(ApiError::status(
                StatusReason::ServiceUnavailable,
                "not sent: this replica may not write (its leader tenure has ended, or it runs in shadow mode)",
            ));
        }
        call().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::layers::Verb;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test]
    async fn a_closed_fence_should_refuse_writes_and_pass_reads() {
        let open = Arc::new(AtomicBool::new(true));
        let fence = Fence::new({
            let open = open.clone();
            move || open.load(Ordering::Acquire)
        });
        let ok = || async { Ok::<_, ApiError>(()) };
        assert!(fence.around(Verb::Delete.into(), ok).await.is_ok());
        open.store(false, Ordering::Release);
        for write in [Verb::Patch, Verb::Delete, Verb::Create, Verb::Update] {
            assert!(fence.around(write.into(), ok).await.is_err(), "{write:?} refused");
        }
        for read in [Verb::Get, Verb::List, Verb::Watch, Verb::Discovery] {
            assert!(fence.around(read.into(), ok).await.is_ok(), "{read:?} passes");
        }
    }
}
