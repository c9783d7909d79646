//! [`connect`]: the one way kube-gc's programs build a kube-rs client, from a kubeconfig file or,
//! without one, from what kube-rs infers (`$KUBECONFIG`, `~/.kube/config`, then the in-cluster
//! service account).
//!
//! The client names itself with the caller's `User-Agent`, so that audit logs tell programs and
//! replicas apart, and kube-rs's own retry of throttled requests is off: kube-gc retries in its
//! [`Retry`](super::layers::Retry) layer, which takes a token of the budget for each try and
//! counts it, and `loadgen record`'s watchers back off by themselves.

use kube::config::{InferConfigError, KubeConfigOptions, Kubeconfig, KubeconfigError};
use std::path::{Path, PathBuf};

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The kubeconfig could not be read or parsed.
    #[error("reading the kubeconfig {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What kube-rs said.
        #[source]
        source: KubeconfigError,
    },
    /// The kubeconfig was read but does not describe a usable context.
    #[error("loading the kubeconfig {}", path.display())]
    Load {
        /// The file.
        path: PathBuf,
        /// What kube-rs said.
        #[source]
        source: KubeconfigError,
    },
    /// No kubeconfig was given and none could be inferred.
    #[error("finding a kubeconfig or an in-cluster config")]
    Infer(#[source] InferConfigError),
    /// The user agent cannot be sent as a header.
    #[error("{0:?} is not a valid User-Agent header")]
    UserAgent(String),
    /// kube-rs refused the configuration.
    #[error("making a client for {url}")]
    Client {
        /// The cluster's URL.
        url: String,
        /// What kube-rs said.
        #[source]
        source: kube::Error,
    },
}

/// A client for the cluster of `kubeconfig`'s current context, or of the inferred configuration
/// when `kubeconfig` is `None`, sending `user_agent`.
pub async fn connect(kubeconfig: Option<&Path>, user_agent: &str) -> Result<kube::Client, ConnectError> {
    let mut config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path).map_err(|source| ConnectError::Read {
                path: path.to_owned(),
                source,
            })?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|source| ConnectError::Load {
                    path: path.to_owned(),
                    source,
                })?
        }
        None => kube::Config::infer().await.map_err(ConnectError::Infer)?,
    };
    let agent = http::HeaderValue::from_str(user_agent).map_err(|_| ConnectError::UserAgent(user_agent.to_string()))?;
    config.headers.push((http::header::USER_AGENT, agent));
    config.default_retry = false;
    let url = config.cluster_url.to_string();
    kube::Client::try_from(config).map_err(|source| ConnectError::Client { url, source })
}
