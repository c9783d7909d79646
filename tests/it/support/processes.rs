//! `kube-gc sim-apiserver` and `kube-gc run` as processes of their own on loopback, for the tests
//! that act as a user and an operator would: through the written kubeconfig, kube-rs and kubectl,
//! and the collector's endpoints. Every wait is bounded by [`PATIENCE`] and names what it waited
//! for; a process still running when its test ends is killed when its [`Child`] drops.

use super::process::Child;
use super::{http_get, within_real_time};
use kube::api::Api;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a step may take between processes on a loaded machine.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A running `kube-gc sim-apiserver` and a client of it.
pub struct Server {
    pub process: Child,
    pub addr: SocketAddr,
    pub kubeconfig: PathBuf,
    pub client: kube::Client,
}

impl Server {
    /// Starts a server on a free loopback port with `flags`, logging to `dir`.
    pub async fn start(dir: &Path, flags: &[&str]) -> Server {
        Server::start_on("127.0.0.1:0", dir, flags).await
    }

    pub async fn start_on(listen: &str, dir: &Path, flags: &[&str]) -> Server {
        let kubeconfig = dir.join("kubeconfig");
        let kubeconfig_arg = kubeconfig.to_str().expect("a UTF-8 path");
        let mut args = vec![
            "sim-apiserver",
            "--listen",
            listen,
            "--write-kubeconfig",
            kubeconfig_arg,
        ];
        args.extend_from_slice(flags);
        let mut process = Child::kube_gc(&args, &dir.join("sim-apiserver.log"));
        let addr = Child::address_in(&process.wait_for_line("serving"));
        let config = kube::config::Kubeconfig::read_from(&kubeconfig).expect("the written kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
            .await
            .expect("a client config");
        let client = kube::Client::try_from(config).expect("a client");
        Server {
            process,
            addr,
            kubeconfig,
            client,
        }
    }

    pub fn api<K>(&self, namespace: &str) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), namespace)
    }
}

/// A running `kube-gc run`.
pub struct CollectorProcess {
    pub process: Child,
    /// Its endpoints.
    pub addr: SocketAddr,
}

impl CollectorProcess {
    /// Starts the collector against `server` with `flags`, logging to `dir/{name}.log`, and waits
    /// until its endpoints answer.
    pub fn start(server: &Server, dir: &Path, name: &str, flags: &[&str]) -> CollectorProcess {
        let kubeconfig = server.kubeconfig.to_str().expect("a UTF-8 path");
        let mut args = vec![
            "run",
            "--kubeconfig",
            kubeconfig,
            "--secure-port",
            "0",
            "--insecure-bind-address",
            "127.0.0.1:0",
            "--resource-sync-period",
            "1s",
        ];
        args.extend_from_slice(flags);
        let mut process = Child::kube_gc(&args, &dir.join(format!("{name}.log")));
        let addr = Child::address_in(&process.wait_for_line("serving /healthz"));
        CollectorProcess { process, addr }
    }

    /// Starts the collector and waits until it is ready (its monitors synced).
    pub async fn ready(server: &Server, dir: &Path, flags: &[&str]) -> CollectorProcess {
        let collector = CollectorProcess::start(server, dir, "kube-gc-run", flags);
        within_real_time("the collector ready", PATIENCE, async || {
            http_get(collector.addr, "/readyz").await.0 == 200
        })
        .await;
        collector
    }

    /// `/explain` of `uid`, as JSON.
    pub async fn explain(&self, uid: &str) -> Value {
        let (code, body) = http_get(self.addr, &format!("/explain?uid={uid}")).await;
        assert_eq!(code, 200, "/explain?uid={uid}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("/explain is not JSON ({e}): {body}"))
    }

    /// Waits until the collector has observed every object of `uids` itself, not only as an
    /// owner its dependents name.
    pub async fn observe(&self, uids: &[&str]) {
        for uid in uids {
            within_real_time(&format!("{uid} in the graph"), PATIENCE, async || {
                let explained = self.explain(uid).await;
                explained["inGraph"] == true && explained["virtual"] == false
            })
            .await;
        }
    }

    pub async fn metrics(&self) -> String {
        let (code, body) = http_get(self.addr, "/metrics").await;
        assert_eq!(code, 200, "/metrics: {body}");
        body
    }
}
