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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::layers::Layered;
    use crate::api::{ClusterApi, Gvr};
    use crate::sim::SimCluster;

    #[tokio::test(start_paused = true)]
    async fn each_call_should_reach_the_cluster_after_the_delay() {
        let api = Layered::new(Latency(Duration::from_millis(2)), SimCluster::new());
        let began = tokio::time::Instant::now();
        api.discover().await.expect("discovery");
        let err = api.get(&Gvr::new("", "v1", "pods"), "ns", "absent").await;
        assert!(err.is_err_and(|e| e.is_not_found()));
        assert_eq!(began.elapsed(), Duration::from_millis(4));
        assert_eq!(api.inner().api_calls().get, 1, "the call reached the cluster");
    }
}
