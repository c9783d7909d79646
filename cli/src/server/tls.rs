//! HTTPS for the endpoints: one certificate per process, given or made at start, and a connection
//! loop that never lets one client hold up another.
//!
//! # Model
//!
//! - The certificate is fixed once [`ServingCert::load`] returns: the files of
//!   `--tls-cert-file`/`--tls-private-key-file`, read once (a renewed certificate takes a
//!   restart), or else a self-signed one made at start, valid for a year, for `localhost`, the
//!   host's name, the loopback addresses and the bound address when it names one. A self-signed
//!   certificate lives in memory only, unless a `--cert-dir` is given: then it is written there,
//!   and read back from there at the next start, as kube-controller-manager does.
//! - [`serve`] accepts connections in one loop and hands each to a task of its own, which does the
//!   TLS handshake (bounded by [`HANDSHAKE_TIMEOUT`]) and then serves HTTP/1.1 over it. A client
//!   that stalls its handshake ties up only its own task.
//! - Only rustls' `ring` provider is used, the one kube's client already links, so the choice
//!   never depends on which providers other crates enable.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// How long a client has to finish its TLS handshake, and then to send a request's head.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a self-signed certificate is valid: a year, as kube-controller-manager's.
const SELF_SIGNED_VALIDITY: time::Duration = time::Duration::days(365);

/// The file names of a self-signed certificate and its key under `--cert-dir`.
pub const SELF_SIGNED_FILES: (&str, &str) = ("kube-gc.crt", "kube-gc.key");

/// Why no serving certificate could be had.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A PEM file could not be read, or held nothing of the kind looked for.
    #[error("reading {what} from {}", path.display())]
    Read {
        /// `certificates` or `a private key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The certificate file held no certificate.
    #[error("{} holds no CERTIFICATE block", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The self-signed certificate could not be made.
    #[error("making a self-signed certificate")]
    Generate(#[source] rcgen::Error),
    /// A self-signed certificate could not be written to `--cert-dir`.
    #[error("writing the self-signed certificate to {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// rustls refused the certificate and key (a key that does not match, an unknown algorithm).
    #[error("the certificate and key cannot serve TLS")]
    Config(#[source] rustls::Error),
}

/// Where the certificate comes from, as the flags say.
#[derive(Clone, Debug)]
pub enum CertSource {
    /// `--tls-cert-file` and `--tls-private-key-file`.
    Files {
        /// The PEM certificate chain, the serving certificate first.
        cert: PathBuf,
        /// The PEM private key.
        key: PathBuf,
    },
    /// A self-signed certificate, kept in `dir` if one is given.
    SelfSigned {
        /// `--cert-dir`.
        dir: Option<PathBuf>,
    },
}

/// The certificate the endpoints serve, ready for rustls.
pub struct ServingCert {
    config: Arc<rustls::ServerConfig>,
    /// Where it came from, for the log.
    pub origin: String,
}

impl ServingCert {
    /// The certificate `source` names; a self-signed one names `bind` among its addresses when
    /// `bind` is a specific address.
    pub fn load(source: &CertSource, bind: IpAddr) -> Result<ServingCert, Error> {
        let (chain, key, origin) = match source {
            CertSource::Files { cert, key } => {
                let (chain, key) = read_pair(cert, key)?;
                (chain, key, format!("certificate from {}", cert.display()))
            }
            CertSource::SelfSigned { dir: Some(dir) } => {
                let (cert, key) = (dir.join(SELF_SIGNED_FILES.0), dir.join(SELF_SIGNED_FILES.1));
                if cert.exists() && key.exists() {
                    let (chain, key) = read_pair(&cert, &key)?;
                    (chain, key, format!("self-signed certificate from {}", cert.display()))
                } else {
                    let made = SelfSigned::make(bind)?;
                    write(&cert, made.cert_pem.as_bytes())?;
                    write(&key, made.key_pem.as_bytes())?;
                    let origin = format!(
                        "self-signed certificate for {}, written to {}",
                        made.names(),
                        cert.display()
                    );
                    (vec![made.cert_der], made.key_der, origin)
                }
            }
            CertSource::SelfSigned { dir: None } => {
                let made = SelfSigned::make(bind)?;
                let origin = format!("self-signed certificate for {}, in memory only", made.names());
                (vec![made.cert_der], made.key_der, origin)
            }
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(Error::Config)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(Error::Config)?;
        // Only HTTP/1.1 is served (axum is built without http2).
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ServingCert {
            config: Arc::new(config),
            origin,
        })
    }
}

/// The PEM certificate chain at `cert` and the private key at `key`.
fn read_pair(cert: &Path, key: &Path) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), Error> {
    fn read<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(rustls::pki_types::pem::Error) -> Error + 'a {
        move |source| Error::Read {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(read("certificates", cert))?;
    if chain.is_empty() {
        return Err(Error::NoCertificate {
            path: cert.to_path_buf(),
        });
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(read("a private key", key))?;
    Ok((chain, key))
}

fn write(path: &Path, contents: &[u8]) -> Result<(), Error> {
    std::fs::write(path, contents).map_err(|source| Error::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// A certificate signed by its own key.
struct SelfSigned {
    /// Its subject alternative names, DNS names then addresses.
    names: Vec<String>,
    cert_pem: String,
    key_pem: String,
    cert_der: CertificateDer<'static>,
    key_der: PrivateKeyDer<'static>,
}

impl SelfSigned {
    fn make(bind: IpAddr) -> Result<SelfSigned, Error> {
        let names = alternative_names(bind, host_name());
        let mut params = rcgen::CertificateParams::new(names.clone()).map_err(Error::Generate)?;
        let now = time::OffsetDateTime::now_utc();
        // An hour back, so that a client whose clock is a little behind accepts it at once.
        params.not_before = now - time::Duration::HOUR;
        params.not_after = now + SELF_SIGNED_VALIDITY;
        let started = now.unix_timestamp();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("kube-gc@{started}"));
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let key = rcgen::KeyPair::generate().map_err(Error::Generate)?;
        let cert = params.self_signed(&key).map_err(Error::Generate)?;
        Ok(SelfSigned {
            names,
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
            key_der: PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        })
    }

    fn names(&self) -> String {
        self.names.join(", ")
    }
}

/// The names a self-signed certificate is made for: `localhost`, the host's name when it is a
/// usable DNS name (a pod's name), the loopback addresses, and `bind` unless it is unspecified.
fn alternative_names(bind: IpAddr, host: Option<String>) -> Vec<String> {
    let mut names = vec!["localhost".to_string()];
    names.extend(host.filter(|h| is_dns_name(h) && h != "localhost"));
    names.push("127.0.0.1".to_string());
    names.push("::1".to_string());
    if !bind.is_unspecified() && !bind.is_loopback() {
        names.push(bind.to_string());
    }
    names
}

/// The host's name, as the kernel has it (a pod's name inside a cluster).
fn host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())?;
    Some(name.trim().to_ascii_lowercase()).filter(|n| !n.is_empty())
}

/// Whether `name` is a DNS name a certificate may carry: dot-separated labels of letters,
/// digits and inner hyphens, at most 253 characters.
fn is_dns_name(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// Serves `app` over TLS with `cert` on `listener` until `shutdown` completes; connections open
/// then are left to finish on their own.
pub async fn serve(
    listener: tokio::net::TcpListener,
    cert: &ServingCert,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let acceptor = tokio_rustls::TlsAcceptor::from(cert.config.clone());
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => return Ok(()),
        };
        match accepted {
            Ok((stream, _)) => {
                tokio::spawn(connection(acceptor.clone(), stream, app.clone()));
            }
            // Out of file descriptors, or a connection reset before it was accepted: what
            // axum::serve does too, wait a moment rather than spin, and go on.
            Err(e) => {
                tracing::warn!(error = %e, "accepting an HTTPS connection failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// One client: its handshake, then its requests, until it closes.
async fn connection(acceptor: tokio_rustls::TlsAcceptor, stream: tokio::net::TcpStream, app: Router) {
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!("TLS handshake timed out");
            return;
        }
    };
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HANDSHAKE_TIMEOUT)
        .serve_connection(TokioIo::new(tls), TowerToHyperService::new(app))
        .await;
    if let Err(e) = served {
        tracing::debug!(error = %e, "HTTPS connection ended with an error");
    }
}

/// Compile-time proof that a certificate can be moved into the serving task.
const _: fn() = || {
    fn shared<T: Send + Sync + 'static>() {}
    shared::<ServingCert>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_should_name_localhost_the_host_and_a_specific_bind_address() {
        let any = alternative_names("0.0.0.0".parse().expect("an address"), Some("kube-gc-7d9f".into()));
        assert_eq!(any, ["localhost", "kube-gc-7d9f", "127.0.0.1", "::1"]);
        let pod = alternative_names("10.1.2.3".parse().expect("an address"), Some("Bad_Name".into()));
        assert_eq!(pod, ["localhost", "127.0.0.1", "::1", "10.1.2.3"]);
    }

    #[test]
    fn a_self_signed_certificate_should_be_written_to_the_cert_dir_and_read_back() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let source = CertSource::SelfSigned {
            dir: Some(dir.path().to_path_buf()),
        };
        let first = ServingCert::load(&source, "127.0.0.1".parse().expect("an address")).expect("made");
        assert!(first.origin.contains("written to"), "{}", first.origin);
        let pem = std::fs::read_to_string(dir.path().join(SELF_SIGNED_FILES.0)).expect("the certificate");
        let second = ServingCert::load(&source, "127.0.0.1".parse().expect("an address")).expect("read");
        assert!(second.origin.contains("from"), "{}", second.origin);
        let again = std::fs::read_to_string(dir.path().join(SELF_SIGNED_FILES.0)).expect("the certificate");
        assert_eq!(pem, again, "the second start reuses the first certificate");
    }

    #[test]
    fn a_missing_or_empty_certificate_file_should_be_a_clear_error() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let missing = CertSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        };
        let error = ServingCert::load(&missing, "0.0.0.0".parse().expect("an address"))
            .err()
            .expect("refused");
        assert!(error.to_string().contains("tls.crt"), "{error}");
        std::fs::write(&cert, "not PEM\n").expect("write");
        let error = ServingCert::load(&missing, "0.0.0.0".parse().expect("an address"))
            .err()
            .expect("refused");
        assert!(matches!(error, Error::NoCertificate { .. }), "{error}");
    }
}
