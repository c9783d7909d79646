//! How `kube-gc run` serves its [endpoints](kube_gc_cli::server), with kube-controller-manager's flags:
//! HTTPS on `--bind-address`:`--secure-port` (0.0.0.0:10257), where every path but
//! `--authorization-always-allow-paths` needs a bearer token the API server authenticates and
//! authorizes ([`kube_gc_cli::server::auth`]); and, for local use only, plain HTTP without
//! authentication on a loopback `--insecure-bind-address`.
//!
//! The flags are checked as they are parsed (a non-loopback insecure address, a port in
//! `--bind-address`, a bad always-allowed path are refused with the reason), and the certificate
//! is read ([`certificate`]) before the cluster is reached, so that a bad file fails at once and
//! [`start`] only binds and serves.
//!
//! [`certificate`]: ServingArgs::certificate
//! [`start`]: ServingArgs::start

use anyhow::Context;
use kube_gc::api::ClusterApi;
use kube_gc_cli::server::auth::{AllowPaths, Delegation, Ttls};
use kube_gc_cli::server::tls::{CertSource, ServingCert};
use kube_gc_cli::server::Slot;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args)]
pub struct ServingArgs {
    /// Port of HTTPS, with delegated authentication and authorization; 0 serves no HTTPS.
    #[arg(long, default_value_t = 10257)]
    secure_port: u16,
    /// Address the secure port listens on (0.0.0.0 or :: for every interface).
    #[arg(long, default_value = "0.0.0.0", value_parser = bind_address)]
    bind_address: IpAddr,
    /// PEM certificate (chain) of the secure port; default: a self-signed one made at start.
    #[arg(long, requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file.
    #[arg(long, requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// Directory for the self-signed certificate (kube-gc.crt, kube-gc.key): written there at the
    /// first start, read back at the next; default: kept in memory only. Ignored with
    /// --tls-cert-file.
    #[arg(long)]
    cert_dir: Option<PathBuf>,
    /// Plain HTTP without authentication on this loopback ADDRESS:PORT (port 0 picks a free
    /// one), for local use; default: none.
    #[arg(long, value_parser = loopback_address)]
    insecure_bind_address: Option<SocketAddr>,
    /// Kubeconfig of the API server that reviews tokens (TokenReview); default: the cluster's.
    #[arg(long)]
    authentication_kubeconfig: Option<PathBuf>,
    /// Kubeconfig of the API server that reviews accesses (SubjectAccessReview); default: the
    /// cluster's.
    #[arg(long)]
    authorization_kubeconfig: Option<PathBuf>,
    /// Paths served on the secure port without a token, comma-separated: exact, or a prefix
    /// ending in *.
    #[arg(long, default_value = AllowPaths::DEFAULT)]
    authorization_always_allow_paths: AllowPaths,
    /// How long a token's review is kept, authenticated or not.
    #[arg(long, default_value = "10s", value_parser = kube_gc::duration::parse)]
    authentication_token_webhook_cache_ttl: Duration,
    /// How long an allowed access review is kept.
    #[arg(long, default_value = "10s", value_parser = kube_gc::duration::parse)]
    authorization_webhook_cache_authorized_ttl: Duration,
    /// How long a denied access review is kept.
    #[arg(long, default_value = "10s", value_parser = kube_gc::duration::parse)]
    authorization_webhook_cache_unauthorized_ttl: Duration,
}

/// `--bind-address`: an IP address, without a port (that is `--secure-port`).
fn bind_address(text: &str) -> Result<IpAddr, String> {
    text.parse().map_err(|_| match text.parse::<SocketAddr>() {
        Ok(_) => format!(
            "{text:?} has a port: --bind-address is the secure port's address only, its port is \
             --secure-port (plain HTTP on loopback is --insecure-bind-address)"
        ),
        Err(_) => format!("{text:?} is not an IP address (for example 0.0.0.0 or 10.0.0.5)"),
    })
}

/// `--insecure-bind-address`: a loopback address and a port.
fn loopback_address(text: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = text
        .parse()
        .map_err(|_| format!("{text:?} is not ADDRESS:PORT (for example 127.0.0.1:10258)"))?;
    if !addr.ip().is_loopback() {
        return Err(format!(
            "{addr} is not a loopback address: plain HTTP serves without authentication, so only \
             127.0.0.1 or [::1]; other hosts reach the endpoints on the secure port"
        ));
    }
    Ok(addr)
}

impl ServingArgs {
    /// The secure port's certificate, given or self-signed; `None` with `--secure-port 0`.
    pub fn certificate(&self) -> anyhow::Result<Option<ServingCert>> {
        if self.secure_port == 0 {
            return Ok(None);
        }
        let source = match (&self.tls_cert_file, &self.tls_private_key_file) {
            (Some(cert), Some(key)) => CertSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            _ => CertSource::SelfSigned {
                dir: self.cert_dir.clone(),
            },
        };
        let cert = ServingCert::load(&source, self.bind_address).context("the secure port's certificate")?;
        Ok(Some(cert))
    }

    /// Binds the listeners the flags ask for and serves `slot` on them, the secure port with
    /// `cert` (from [`ServingArgs::certificate`]); returns once they are bound and announced on
    /// stderr. Reviews go to `cluster` unless a review kubeconfig is given (connected with
    /// `agent`).
    pub async fn start<C: ClusterApi>(
        &self,
        cert: Option<ServingCert>,
        slot: Arc<Slot<C>>,
        cluster: &kube::Client,
        agent: &str,
    ) -> anyhow::Result<()> {
        if let Some(cert) = cert {
            self.start_secure(cert, Arc::clone(&slot), cluster, agent).await?;
        }
        if let Some(addr) = self.insecure_bind_address {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("listening on --insecure-bind-address {addr}"))?;
            let bound = listener.local_addr().context("reading the bound address")?;
            tokio::spawn(kube_gc_cli::server::serve(listener, slot, std::future::pending()));
            eprintln!(
                "kube-gc run: serving /healthz, /readyz, /metrics and the graph without authentication on http://{bound}"
            );
        }
        if self.secure_port == 0 && self.insecure_bind_address.is_none() {
            eprintln!("kube-gc run: serving no endpoints (--secure-port 0 and no --insecure-bind-address)");
        }
        Ok(())
    }

    async fn start_secure<C: ClusterApi>(
        &self,
        cert: ServingCert,
        slot: Arc<Slot<C>>,
        cluster: &kube::Client,
        agent: &str,
    ) -> anyhow::Result<()> {
        let review_client = async |kubeconfig: &Option<PathBuf>, flag: &str| match kubeconfig {
            Some(path) => connect(path, agent).await.with_context(|| format!("--{flag}")),
            None => Ok(cluster.clone()),
        };
        let authentication = review_client(&self.authentication_kubeconfig, "authentication-kubeconfig").await?;
        let authorization = review_client(&self.authorization_kubeconfig, "authorization-kubeconfig").await?;
        let ttls = Ttls {
            token: self.authentication_token_webhook_cache_ttl,
            authorized: self.authorization_webhook_cache_authorized_ttl,
            unauthorized: self.authorization_webhook_cache_unauthorized_ttl,
        };
        let delegation = Delegation::new(
            authentication,
            authorization,
            self.authorization_always_allow_paths.clone(),
            ttls,
        );
        let addr = SocketAddr::new(self.bind_address, self.secure_port);
        let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| {
            format!(
                "listening on --bind-address {} --secure-port {}",
                self.bind_address, self.secure_port
            )
        })?;
        let bound = listener.local_addr().context("reading the bound address")?;
        let app = delegation.protect(kube_gc_cli::server::router(slot));
        eprintln!("kube-gc run: serving a {}", cert.origin);
        tokio::spawn(
            async move { kube_gc_cli::server::tls::serve(listener, &cert, app, std::future::pending()).await },
        );
        eprintln!(
            "kube-gc run: serving /healthz, /readyz, /metrics and the graph with delegated authentication and authorization on https://{bound}"
        );
        Ok(())
    }
}

async fn connect(path: &Path, agent: &str) -> anyhow::Result<kube::Client> {
    Ok(kube_gc::api::connect(Some(path), agent).await?)
}

#[cfg(test)]
mod tests {
    use crate::command::{Cli, Command};
    use clap::Parser;

    fn serving(args: &[&str]) -> Result<super::ServingArgs, String> {
        let argv = [&["kube-gc", "run"], args].concat();
        match Cli::try_parse_from(argv) {
            Ok(Cli {
                command: Command::Run(run),
            }) => Ok(run.serving),
            Ok(_) => Err("not run".into()),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn the_defaults_should_be_kube_controller_managers() {
        let args = serving(&[]).expect("defaults");
        assert_eq!(args.secure_port, 10257);
        assert_eq!(args.bind_address.to_string(), "0.0.0.0");
        assert_eq!(args.insecure_bind_address, None, "no plain HTTP unless asked");
        assert!(args.authorization_always_allow_paths.allows("/healthz"));
        assert!(!args.authorization_always_allow_paths.allows("/metrics"));
        assert_eq!(args.authentication_token_webhook_cache_ttl.as_secs(), 10);
    }

    #[test]
    fn a_non_loopback_insecure_address_should_be_refused() {
        for bad in ["0.0.0.0:10258", "10.1.2.3:10258", "[::]:10258"] {
            let error = serving(&["--insecure-bind-address", bad]).err().expect(bad);
            assert!(error.contains("not a loopback address"), "{bad}: {error}");
        }
        let error = serving(&["--insecure-bind-address", "localhost"])
            .err()
            .expect("no port");
        assert!(error.contains("is not ADDRESS:PORT"), "{error}");
        for good in ["127.0.0.1:0", "[::1]:10258"] {
            assert!(serving(&["--insecure-bind-address", good]).is_ok(), "{good}");
        }
    }

    #[test]
    fn a_bind_address_with_a_port_should_be_refused_naming_the_flags_to_use() {
        let error = serving(&["--bind-address", "127.0.0.1:0"]).err().expect("a port");
        assert!(
            error.contains("--secure-port") && error.contains("--insecure-bind-address"),
            "{error}"
        );
        let error = serving(&["--bind-address", "here"]).err().expect("not an address");
        assert!(error.contains("is not an IP address"), "{error}");
    }

    #[test]
    fn bad_always_allowed_paths_should_be_refused() {
        for bad in ["healthz", "/healthz,metrics", "/de*bug"] {
            let error = serving(&["--authorization-always-allow-paths", bad]).err().expect(bad);
            assert!(
                error.contains("start with /") || error.contains("may only end"),
                "{bad}: {error}"
            );
        }
        let args = serving(&["--authorization-always-allow-paths", "/healthz,/debug/*"]).expect("valid");
        assert!(args
            .authorization_always_allow_paths
            .allows("/debug/controllers/garbagecollector/graph"));
    }

    #[test]
    fn a_certificate_without_its_key_should_be_refused() {
        let error = serving(&["--tls-cert-file", "tls.crt"]).err().expect("no key");
        assert!(error.contains("--tls-private-key-file"), "{error}");
        let error = serving(&["--tls-private-key-file", "tls.key"]).err().expect("no cert");
        assert!(error.contains("--tls-cert-file"), "{error}");
    }
}
