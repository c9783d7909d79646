//! [`Latent`]: the in-memory cluster behind a fixed round-trip time, so that a full replay shows
//! what the collector's API calls cost when each one waits on the network, as against a real API
//! server (`--api-latency`).
//!
//! Each [`ClusterApi`] call waits `delay` on the runtime's clock before it reaches the cluster, so
//! a worker's calls queue one after another while other tasks run. Watch streams pay the delay
//! once, when opened; their events then flow as the cluster sends them. A zero delay adds nothing.

use kube_gc::api::{
    ApiError, ClusterApi, DeleteOptions, Discovery, EventRecord, Gvr, ObjectList, PartialObjectMeta, PatchType,
    WatchStream,
};
use std::sync::Arc;
use std::time::Duration;

/// `inner`, answering every call after `delay`.
pub struct Latent<C> {
    inner: Arc<C>,
    delay: Duration,
}

impl<C> Latent<C> {
    /// `inner` behind `delay` per call.
    pub fn new(inner: Arc<C>, delay: Duration) -> Self {
        Latent { inner, delay }
    }

    async fn wait(&self) {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
    }
}

impl<C: ClusterApi> ClusterApi for Latent<C> {
    async fn discover(&self) -> Result<Discovery, ApiError> {
        self.wait().await;
        self.inner.discover().await
    }

    async fn get(&self, gvr: &Gvr, namespace: &str, name: &str) -> Result<PartialObjectMeta, ApiError> {
        self.wait().await;
        self.inner.get(gvr, namespace, name).await
    }

    async fn patch(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        body: &serde_json::Value,
    ) -> Result<PartialObjectMeta, ApiError> {
        self.wait().await;
        self.inner.patch(gvr, namespace, name, patch_type, body).await
    }

    async fn delete(&self, gvr: &Gvr, namespace: &str, name: &str, options: &DeleteOptions) -> Result<(), ApiError> {
        self.wait().await;
        self.inner.delete(gvr, namespace, name, options).await
    }

    async fn list_page(&self, gvr: &Gvr, continue_token: &str, limit: usize) -> Result<ObjectList, ApiError> {
        self.wait().await;
        self.inner.list_page(gvr, continue_token, limit).await
    }

    async fn watch(&self, gvr: &Gvr, resource_version: &str) -> Result<WatchStream, ApiError> {
        self.wait().await;
        self.inner.watch(gvr, resource_version).await
    }

    async fn create_event(&self, event: &EventRecord) -> Result<(), ApiError> {
        self.wait().await;
        self.inner.create_event(event).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_gc::sim::SimCluster;

    #[tokio::test(start_paused = true)]
    async fn latent_cluster_should_answer_each_call_after_the_delay() {
        let cluster = Arc::new(SimCluster::new());
        let latent = Latent::new(cluster.clone(), Duration::from_millis(2));
        let began = tokio::time::Instant::now();
        latent.discover().await.expect("discovery");
        let err = latent.get(&Gvr::new("", "v1", "pods"), "ns", "absent").await;
        assert!(err.is_err_and(|e| e.is_not_found()));
        assert_eq!(began.elapsed(), Duration::from_millis(4));
        assert_eq!(cluster.api_calls().get, 1, "the call reached the cluster");
    }
}
