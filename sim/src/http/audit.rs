//! The audit log: one JSON line per request the server answered, in the order they were logged,
//! each numbered one higher than the line before.
//!
//! The router's one request path logs each request once its response status is known, which for a
//! watch is when the watch starts, not when it ends. A request is logged after the cluster call
//! that answers it, so of two requests answered one after the other the first is logged first; two
//! that race may be logged in either order: a write committed first may be numbered after one
//! committed later. So a request that wrote also logs `committedResourceVersion`, the cluster's
//! resourceVersion once its last write was applied, taken under the cluster's lock: writes are in
//! commit order by it. Numbering and writing happen under one lock, so the numbers follow the
//! lines. Each line is flushed at once: the log is complete whenever the process
//! stops, and can be followed while the server runs. A failed write is logged as a warning and
//! never fails the request.
//!
//! A line:
//!
//! ```text
//! {"seq":7,"time":"2025-01-02T03:04:05.678901Z","verb":"delete","group":"apps","resource":"replicasets",
//!  "namespace":"default","name":"web-5d8f","code":200,"userAgent":"kube-gc/0.1.0"}
//! ```
//!
//! - `verb`: on a resource path the Kubernetes verb (`get`, `list`, `watch`, `create`, `update`,
//!   `patch`, `delete`, `deletecollection`); a POST of a review ([`super::review`]) is `create`; a
//!   GET of a discovery document, an OpenAPI document or `/version` is `discovery`; anything else
//!   (health checks, unknown paths, a method a path does not take) is the HTTP method in lower
//!   case.
//! - `group`, `resource`, `namespace`, `name`: from a resource path, empty where it has none; a
//!   review has its group and resource (`authentication.k8s.io`, `tokenreviews`).
//! - `time`: when the line was logged, RFC 3339 UTC with microseconds.
//! - `userAgent`: the request's `User-Agent` header verbatim (bytes that are not UTF-8 replaced),
//!   empty when it has none.
//! - `committedResourceVersion`: only on a request that wrote (a failed or dry-run one did not).
//! - `injected`: `true` only on a request an injected fault failed (an error rate or the QPS
//!   ceiling of [`super::faults`]), so that a failure of the server's own stands out.

use super::request::{Call, Target};
use axum::http::{header, HeaderMap, Method, StatusCode};
use kube_gc::api::time::now_rfc3339_micros;
use parking_lot::Mutex;
use serde::Serialize;
use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

/// Where a server logs the requests it answered; see the [module docs](self).
///
/// Cheap to clone: clones share one writer and one sequence.
#[derive(Clone)]
#[must_use]
pub struct AuditLog {
    writer: Arc<Mutex<Writer>>,
}

struct Writer {
    out: BufWriter<File>,
    /// The `seq` of the next line.
    next_seq: u64,
}

/// One line, borrowed from the request.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Line<'a> {
    seq: u64,
    time: String,
    verb: &'a str,
    group: &'a str,
    resource: &'a str,
    namespace: &'a str,
    name: &'a str,
    code: u16,
    user_agent: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    committed_resource_version: Option<u64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    injected: bool,
}

/// How the server answered a request: what its line logs beside the request.
pub(super) struct Answer {
    /// The response's status.
    pub(super) code: StatusCode,
    /// The cluster's resourceVersion once the request's last write was applied, if it wrote.
    pub(super) committed: Option<u64>,
    /// True when an injected fault failed it ([`super::faults`]).
    pub(super) injected: bool,
}

impl AuditLog {
    /// A log written to the file at `path`, which is created or emptied.
    pub fn create(path: &Path) -> io::Result<AuditLog> {
        let writer = Writer {
            out: BufWriter::new(File::create(path)?),
            next_seq: 1,
        };
        Ok(AuditLog {
            writer: Arc::new(Mutex::new(writer)),
        })
    }

    /// Logs the request `call` sent by `user_agent` as answered by `answer`.
    pub(super) fn record(&self, call: &Call, user_agent: &str, answer: &Answer) {
        let verb = verb(call);
        let (group, resource, namespace, name) = match &call.target {
            Target::Resource(path) => (
                path.gvr.group.as_str(),
                path.gvr.resource.as_str(),
                path.namespace.as_deref().unwrap_or_default(),
                path.name.as_deref().unwrap_or_default(),
            ),
            Target::Review(resource) => {
                let group = super::review::group_of(resource).unwrap_or_default();
                (group, resource.as_str(), "", "")
            }
            _ => ("", "", "", ""),
        };
        let mut writer = self.writer.lock();
        let line = Line {
            seq: writer.next_seq,
            time: now_rfc3339_micros(),
            verb: &verb,
            group,
            resource,
            namespace,
            name,
            code: answer.code.as_u16(),
            user_agent,
            committed_resource_version: answer.committed,
            injected: answer.injected,
        };
        writer.next_seq += 1;
        if let Err(e) = writer.write(&line) {
            tracing::warn!(error = %e, "the audit log could not be written");
        }
    }
}

impl Writer {
    fn write(&mut self, line: &Line) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, line)?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}

impl fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditLog")
            .field("next_seq", &self.writer.lock().next_seq)
            .finish_non_exhaustive()
    }
}

/// The `User-Agent` header of a request, verbatim; empty when it has none.
pub(super) fn user_agent(headers: &HeaderMap) -> String {
    headers
        .get(header::USER_AGENT)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default()
}

/// The `verb` of a line; see the [module docs](self).
fn verb(call: &Call) -> Cow<'static, str> {
    match (call.verb, &call.target) {
        (Some(verb), _) => verb.as_str().into(),
        (None, target) if is_discovery(target) && call.method == Method::GET => "discovery".into(),
        (None, Target::Review(_)) if call.method == Method::POST => "create".into(),
        (None, _) => call.method.as_str().to_ascii_lowercase().into(),
    }
}

fn is_discovery(target: &Target) -> bool {
    matches!(
        target,
        Target::Version
            | Target::CoreVersions
            | Target::Groups
            | Target::Group(_)
            | Target::GroupVersion(..)
            | Target::OpenApi(_)
    )
}

/// Compile-time proof that a log can be shared by the server's tasks.
const _: fn() = || {
    fn shared<T: Send + Sync + 'static>() {}
    shared::<AuditLog>();
};
