//! The kubeconfig that points clients at a simulated API server: one cluster, one context, and a
//! user without credentials, since the server authenticates no one and speaks plain HTTP.

use std::net::SocketAddr;

/// The name of the cluster, context and user in the written kubeconfig.
const NAME: &str = "kube-gc-sim";

/// A kubeconfig (YAML) whose current context reaches the server at `addr` as namespace `default`.
pub fn kubeconfig(addr: SocketAddr) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {NAME}
  cluster:
    server: http://{addr}
contexts:
- name: {NAME}
  context:
    cluster: {NAME}
    namespace: default
    user: {NAME}
current-context: {NAME}
preferences: {{}}
users:
- name: {NAME}
  user: {{}}
"
    )
}
