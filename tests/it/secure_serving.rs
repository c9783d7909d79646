//! The secure port end to end: `kube-gc sim-apiserver` knows two tokens and lets one user `get`
//! /metrics and the debug paths; `kube-gc run` serves HTTPS on loopback and has the simulated API
//! server review every caller, as it would have a real one on a cluster.
//!
//! The client verifies the server's certificate: the self-signed one `kube-gc run` wrote to its
//! `--cert-dir`, or the one the test made and passed with `--tls-cert-file`, so a 200 here also
//! proves which certificate was served. Both processes run on loopback and are killed when the
//! test ends; every wait is bounded. The server's audit log shows how many reviews the collector
//! asked for, and so that its answers were cached.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use support::process::Child;
use support::{within_real_time, HTTP_PATIENCE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};

/// The tokens the simulated API server authenticates: alice may read /metrics and the debug
/// paths, bob nothing.
const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";

/// How long the collector may take to become ready on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);

/// A running `kube-gc sim-apiserver` with the two users, and a `kube-gc run` against it serving
/// HTTPS with `serving_flags`.
struct Rig {
    _server: Child,
    collector: Child,
    addr: SocketAddr,
    /// The server's audit log.
    audit: std::path::PathBuf,
}

impl Rig {
    /// How many reviews of `resource` (`tokenreviews`, `subjectaccessreviews`) the server answered.
    fn reviews(&self, resource: &str) -> usize {
        let log = std::fs::read_to_string(&self.audit).expect("the audit log");
        log.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("an audit line"))
            .filter(|line| line["verb"] == "create" && line["resource"] == resource)
            .count()
    }
}

impl Rig {
    fn start(dir: &Path, serving_flags: &[&str]) -> Rig {
        let kubeconfig = dir.join("kubeconfig");
        let kubeconfig = kubeconfig.to_str().expect("a UTF-8 path");
        let alice = format!("alice={ALICE}");
        let bob = format!("bob={BOB}");
        let audit = dir.join("audit.jsonl");
        let server_args = [
            "sim-apiserver",
            "--listen",
            "127.0.0.1:0",
            "--write-kubeconfig",
            kubeconfig,
            "--token",
            &alice,
            "--token",
            &bob,
            "--allow",
            "alice=/metrics",
            "--allow",
            "alice=/debug/*",
            "--audit-log",
            audit.to_str().expect("a UTF-8 path"),
        ];
        let mut server = Child::kube_gc(&server_args, &dir.join("sim-apiserver.log"));
        server.wait_for_line("serving");
        // KCM's --secure-port 0 turns HTTPS off, so the test picks a free port itself: one the
        // kernel just handed out and took back, which nothing else on loopback asks for by number.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port()
            .to_string();
        let mut args = vec![
            "run",
            "--kubeconfig",
            kubeconfig,
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            &port,
            "--resource-sync-period",
            "1s",
        ];
        args.extend_from_slice(serving_flags);
        let mut collector = Child::kube_gc(&args, &dir.join("kube-gc-run.log"));
        let addr = Child::address_in(&collector.wait_for_line("on https://"));
        Rig {
            _server: server,
            collector,
            addr,
            audit,
        }
    }
}

/// A client that trusts only the PEM certificate at `cert`.
fn client_trusting(cert: &Path) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(cert).expect("the certificate file") {
        roots.add(cert.expect("a PEM certificate")).expect("a usable root");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// A GET of `path` over TLS to `addr`, verifying the certificate for `name`, with `token` as the
/// bearer token if any: the status code and the body.
async fn https_get(
    client: &Arc<rustls::ClientConfig>,
    addr: SocketAddr,
    name: &str,
    path: &str,
    token: Option<&str>,
) -> (u16, String) {
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let name = ServerName::try_from(name.to_string()).expect("a server name");
        let connector = tokio_rustls::TlsConnector::from(Arc::clone(client));
        let mut tls = connector.connect(name, tcp).await.expect("a verified TLS handshake");
        let authorization = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{authorization}Connection: close\r\n\r\n");
        tls.write_all(request.as_bytes()).await.expect("send");
        let mut response = Vec::new();
        // The server may close without a TLS close_notify once it has answered; what was read
        // before then is the whole response (Connection: close).
        if let Err(e) = tls.read_to_end(&mut response).await {
            assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "receive: {e}");
        }
        String::from_utf8(response).expect("a UTF-8 response")
    };
    let response = tokio::time::timeout(HTTP_PATIENCE, exchange)
        .await
        .expect("an answer in time");
    support::status_and_body(&response)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secure_port_should_serve_only_tokens_the_api_server_authenticates_and_authorizes() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs).expect("the cert dir");
    // Answers kept for the whole test, whatever the machine's load, so that the review counts
    // below are exact.
    let rig = Rig::start(
        dir.path(),
        &[
            "--cert-dir",
            certs.to_str().expect("a UTF-8 path"),
            "--authentication-token-webhook-cache-ttl",
            "10m",
            "--authorization-webhook-cache-authorized-ttl",
            "10m",
            "--authorization-webhook-cache-unauthorized-ttl",
            "10m",
        ],
    );
    let client = client_trusting(&certs.join("kube-gc.crt"));
    let get = async |path: &str, token: Option<&str>| https_get(&client, rig.addr, "localhost", path, token).await;

    within_real_time(
        "the collector ready, /readyz open without a token",
        PATIENCE,
        async || get("/readyz", None).await.0 == 200,
    )
    .await;
    assert_eq!(
        get("/healthz", None).await,
        (200, "ok".to_string()),
        "open without a token"
    );

    let (code, metrics) = get("/metrics", Some(ALICE)).await;
    assert_eq!(code, 200, "alice may get /metrics: {metrics}");
    assert!(metrics.contains("kube_gc_graph_nodes"), "{metrics}");
    let (code, graph) = get("/debug/controllers/garbagecollector/graph", Some(ALICE)).await;
    assert_eq!(code, 200, "alice may get the graph: {graph}");
    assert!(graph.contains("digraph"), "{graph}");

    let (code, body) = get("/metrics", None).await;
    assert_eq!(code, 401, "no token: {body}");
    let (code, body) = get("/metrics", Some("made-up-token")).await;
    assert_eq!(code, 401, "a token the TokenReview refuses: {body}");
    let (code, body) = get("/metrics", Some(BOB)).await;
    assert_eq!(
        code, 403,
        "bob is authenticated, but the SubjectAccessReview denies him: {body}"
    );
    assert!(body.contains("\"bob\"") && body.contains("/metrics"), "{body}");
    let (code, body) = get("/explain?uid=x", Some(ALICE)).await;
    assert_eq!(code, 403, "alice may not get /explain: {body}");
    let (code, body) = get("/no-such-path", None).await;
    assert_eq!(code, 401, "unknown paths are protected too: {body}");

    // Three tokens (alice's, bob's, a made-up one), four accesses (alice to /metrics, the graph
    // and /explain; bob to /metrics); asked again, each is answered from the cache.
    assert_eq!(
        (rig.reviews("tokenreviews"), rig.reviews("subjectaccessreviews")),
        (3, 4)
    );
    for (token, code) in [(ALICE, 200), (BOB, 403), ("made-up-token", 401), (ALICE, 200)] {
        assert_eq!(get("/metrics", Some(token)).await.0, code, "again, from the cache");
    }
    assert_eq!(
        (rig.reviews("tokenreviews"), rig.reviews("subjectaccessreviews")),
        (3, 4)
    );

    let log = rig.collector.log();
    assert!(
        log.contains("self-signed certificate for localhost") && log.contains("written to"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secure_port_should_serve_a_given_certificate() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut params = rcgen::CertificateParams::new(vec!["kube-gc.test".to_string()]).expect("parameters");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kube-gc.test");
    let key = rcgen::KeyPair::generate().expect("a key");
    let cert = params.self_signed(&key).expect("a certificate");
    let (cert_file, key_file) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert_file, cert.pem()).expect("write the certificate");
    std::fs::write(&key_file, key.serialize_pem()).expect("write the key");

    let rig = Rig::start(
        dir.path(),
        &[
            "--tls-cert-file",
            cert_file.to_str().expect("a UTF-8 path"),
            "--tls-private-key-file",
            key_file.to_str().expect("a UTF-8 path"),
        ],
    );
    // Only the given certificate is valid for this name, and only it is trusted.
    let client = client_trusting(&cert_file);
    let (code, body) = https_get(&client, rig.addr, "kube-gc.test", "/healthz", None).await;
    assert_eq!((code, body.as_str()), (200, "ok"));
    let (code, _) = https_get(&client, rig.addr, "kube-gc.test", "/metrics", Some(BOB)).await;
    assert_eq!(code, 403, "the given certificate changes nothing of who is served");
    let log = rig.collector.log();
    assert!(
        log.contains(&format!("certificate from {}", cert_file.display())),
        "{log}"
    );
}
