//! [`LeaseStore`]: where the election's Lease lives, reduced to the three requests the election
//! makes, so the elector is written once over any store: [`KubeLeases`] for a cluster, an
//! in-memory store for the election's own tests.
//!
//! [`KubeLeases`] talks to the API server through a kube client of its own, not the layered
//! [`ClusterApi`](crate::api::ClusterApi): one of the exceptions the [`crate::api`] docs list.
//!
//! Invariant: `replace` carries the resourceVersion of the Lease it was read as, so of two
//! replicas writing the same Lease exactly one succeeds and the other sees a conflict.

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use std::future::Future;

/// Why a request about the lease failed (a lost race is not a failure: see [`LeaseStore`]).
#[derive(Debug, thiserror::Error)]
#[error("{action} the lease")]
pub struct LeaseError {
    /// `reading`, `listing`, `creating`, `writing` or `deleting`.
    pub action: &'static str,
    /// What the client reported.
    #[source]
    pub source: kube::Error,
}

/// One named Lease.
pub trait LeaseStore: Send + Sync + 'static {
    /// The Lease, if it exists.
    fn get(&self) -> impl Future<Output = Result<Option<Lease>, LeaseError>> + Send;

    /// Creates the Lease; false when it exists already (another replica created it first).
    fn create(&self, lease: &Lease) -> impl Future<Output = Result<bool, LeaseError>> + Send;

    /// Replaces the Lease as it was read (its resourceVersion is the precondition); false when it
    /// changed since (another replica wrote it first).
    fn replace(&self, lease: &Lease) -> impl Future<Output = Result<bool, LeaseError>> + Send;
}

/// A Lease of a cluster, through kube-rs.
pub struct KubeLeases {
    leases: Api<Lease>,
    name: String,
}

impl KubeLeases {
    /// The Lease `namespace`/`name` of `client`'s cluster.
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        KubeLeases {
            leases: Api::namespaced(client, namespace),
            name: name.to_string(),
        }
    }
}

impl KubeLeases {
    /// Every Lease of the namespace with the label `key=value`.
    pub async fn list_labelled(&self, key: &str, value: &str) -> Result<Vec<Lease>, LeaseError> {
        let params = kube::api::ListParams::default().labels(&format!("{key}={value}"));
        match self.leases.list(&params).await {
            Ok(list) => Ok(list.items),
            Err(source) => Err(LeaseError {
                action: "listing",
                source,
            }),
        }
    }
}

impl KubeLeases {
    /// Deletes `lease` of the same namespace, unless it changed since it was read (its UID and
    /// resourceVersion are the preconditions); a Lease already gone or changed is not an error.
    pub async fn delete_unchanged(&self, lease: &Lease) -> Result<(), LeaseError> {
        let name = lease.metadata.name.as_deref().unwrap_or_default();
        let params = kube::api::DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: lease.metadata.uid.clone(),
                resource_version: lease.metadata.resource_version.clone(),
            }),
            ..Default::default()
        };
        match self.leases.delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
            Err(source) => Err(LeaseError {
                action: "deleting",
                source,
            }),
        }
    }
}

/// `Ok(false)` for a 409: the race was lost, which the election expects.
fn won(result: Result<Lease, kube::Error>, action: &'static str) -> Result<bool, LeaseError> {
    match result {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(source) => Err(LeaseError { action, source }),
    }
}

impl LeaseStore for KubeLeases {
    async fn get(&self) -> Result<Option<Lease>, LeaseError> {
        self.leases.get_opt(&self.name).await.map_err(|source| LeaseError {
            action: "reading",
            source,
        })
    }

    async fn create(&self, lease: &Lease) -> Result<bool, LeaseError> {
        won(self.leases.create(&PostParams::default(), lease).await, "creating")
    }

    async fn replace(&self, lease: &Lease) -> Result<bool, LeaseError> {
        won(
            self.leases.replace(&self.name, &PostParams::default(), lease).await,
            "writing",
        )
    }
}
