//! The simulated server's reading of a request, reached without a socket by the fuzz target
//! `sim_request` (see [`kube_gc::fuzzing`]): the method and path, the query (list options, label,
//! field and shard selectors, continue tokens, resourceVersion), the `Accept`, `Content-Type` and
//! `User-Agent` headers.
//!
//! Invariants checked: reading any request never panics (the [module](super)'s promise that no
//! input can panic a handler); a resource path prints back to a path that reads as the same
//! target; a field manager taken from a User-Agent is at most 128 bytes and has no control
//! character; a page resumed from a continue token lies inside its listing.

use super::list_options;
use super::request::{self, Call, Params, ResourcePath, Target};
use super::resources;
use crate::pages::{Listing, Pages};
use axum::http::{header, HeaderValue, Method, Request, Uri};
use kube_gc::api::{Gvr, ObjectMeta, PartialObjectMeta};
use std::sync::Arc;

/// Reads one request: `METHOD\nURI\nCONTENT-TYPE\nACCEPT\nUSER-AGENT`, fields that do not make a
/// valid request line or header being left out as an HTTP parser would refuse them.
pub fn request(data: &[u8]) {
    let mut fields = data.split(|&b| b == b'\n');
    let mut next = || fields.next().unwrap_or_default();
    let (Ok(method), Ok(uri)) = (Method::from_bytes(next()), Uri::try_from(next())) else {
        return;
    };
    let mut builder = Request::builder().method(method).uri(uri);
    for name in [header::CONTENT_TYPE, header::ACCEPT, header::USER_AGENT] {
        if let Ok(value) = HeaderValue::from_bytes(next()) {
            builder = builder.header(name, value);
        }
    }
    let Ok(request) = builder.body(()) else {
        return;
    };
    let (parts, ()) = request.into_parts();
    let call = Call::read(&parts);
    if let Target::Resource(path) = &call.target {
        let printed = print(path);
        assert_eq!(request::parse_path(&printed), call.target, "{printed:?}");
    }
    let header = |name| parts.headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
    let _ = request::negotiate(header(header::ACCEPT), true);
    let _ = resources::patch_kind(&parts);
    if let Some(manager) = header(header::USER_AGENT).and_then(request::manager_from_user_agent) {
        assert!(
            manager.len() <= 128 && !manager.chars().any(char::is_control),
            "{manager:?}"
        );
    }
    if let Ok(Ok(params)) = call.query.as_ref().map(Params::parse) {
        read_options(&params);
    }
}

/// Everything a list or a watch does with its query before it reads the cluster.
fn read_options(params: &Params) {
    for (watch, watch_list_enabled) in [(false, false), (true, false), (true, true)] {
        let _ = list_options::validate(watch, params, watch_list_enabled);
    }
    let mut meta = ObjectMeta {
        name: "web-0".into(),
        namespace: "team-a".into(),
        uid: "0a1b2c3d-0000-4000-8000-00000000ffff".into(),
        ..ObjectMeta::default()
    };
    meta.labels.insert("app".into(), "web".into());
    let _ = (
        params.labels.matches(&meta),
        params.fields.matches(&meta),
        params.shards.matches(&meta),
    );
    if let Some(token) = &params.continue_token {
        resume(token, params.limit);
    }
}

/// Resumes a list of three objects from `token`, where a leading `@` stands for the
/// `{epoch}-{id}-` of a token the same pages just issued, so that offsets reach past the epoch.
fn resume(token: &str, limit: Option<usize>) {
    let pages = Pages::default();
    let collection = "v1/pods";
    let listing = || {
        let items = (0..3).map(|_| Arc::new(PartialObjectMeta::default())).collect();
        Ok(Listing {
            items,
            resource_version: 7,
        })
    };
    let first = pages.page(collection, None, Some(1), listing).expect("a first page");
    let issued = first.continue_token.expect("a token for the pages left");
    let prefix = issued.rsplit_once('-').map_or("", |(prefix, _)| prefix);
    let token = match token.strip_prefix('@') {
        Some(offset) => format!("{prefix}-{offset}"),
        None => token.to_string(),
    };
    if let Ok(page) = pages.page(collection, Some(&token), limit, listing) {
        assert!(page.items().len() + page.remaining <= 3, "{token:?}");
    }
}

/// The path of `path`, as a client writes it.
fn print(path: &ResourcePath) -> String {
    let Gvr {
        group,
        version,
        resource,
    } = &path.gvr;
    let mut printed = match group.as_str() {
        "" => format!("/api/{version}"),
        group => format!("/apis/{group}/{version}"),
    };
    if let Some(namespace) = &path.namespace {
        printed.push_str(&format!("/namespaces/{namespace}"));
    }
    printed.push_str(&format!("/{resource}"));
    for segment in [&path.name, &path.subresource].into_iter().flatten() {
        printed.push_str(&format!("/{segment}"));
    }
    printed
}
