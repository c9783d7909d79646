//! [`Latency`]: every request waits a fixed round trip before it goes on.
//!
//! `loadgen replay --api-latency` puts the in-memory cluster behind one, so that a replay shows
//! what the collector's calls cost when each waits on a network, as against a real API server.
//! The wait is on the runtime's clock, so a worker's calls queue one after another while other
//! tasks run; a watch pays it once, when it is opened, and its events then flow as the cluster
//! sends them. A zero delay adds nothing.

use super::{Layer, Request};
use crate::api::ApiError;
use std::future::Future;
use std::time::Duration;

/// The latency layer; see the [module docs](self).
#[derive(Clone, Copy, Debug)]
pub struct Latency(pub Duration);

impl Layer for Latency {
    async fn around<T, F, Fut>(&self, _: Request<'_>, mut call: F) -> Result<T, ApiError>
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, ApiError>> + Send,
    {
        if !self.0.is_zero() {
            tokio::time::sleep(self.0).await;
        }
        call().await
    }
}
