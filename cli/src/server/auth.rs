//! Delegated authentication and authorization: a request to any path but the always-allowed ones is
//! served only for a bearer token the API server vouches for (TokenReview), from a user the API
//! server lets use the path (SubjectAccessReview), as on kube-controller-manager's secure port.
//! The reviews go through kube clients of their own, not the collector's layered client: one of
//! the exceptions the [`kube_gc::api`] docs list.
//!
//! # Model
//!
//! - [`Delegation::protect`] wraps the whole router, unknown paths included, so a route added to
//!   the server later is protected without a change here.
//! - A path of `--authorization-always-allow-paths` ([`AllowPaths`]) is served to anyone, with or
//!   without a token: probes carry none. kube-controller-manager still authenticates such a
//!   request (a bad token there is 401); here the token is not even read.
//! - Any other request needs `Authorization: Bearer TOKEN`: without one it is 401 (there are no
//!   anonymous users); a token the TokenReview does not authenticate is 401; an authenticated user
//!   whose SubjectAccessReview (non-resource attributes: the path, and the method in lower case as
//!   the verb, `get` for a GET) is not allowed is 403; a review that fails (the API server
//!   unreachable) is 401 for a token and 500 for an access, as in the Kubernetes API server's
//!   filters. Failures are not cached, so the next request asks again.
//! - Answers are cached ([`Ttls`]), by token and by (user, verb, path), so a scraper polling every
//!   few seconds costs the API server one review of each kind per TTL. The caches are bounded
//!   ([`MAX_CACHED`]): a full cache first drops what has expired, then everything.
//! - A token is kept no longer than its request: the cache keys it by its SHA-256 digest
//!   ([`TokenKey`]), and it is never logged.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The most answers each cache keeps: far more users and paths than a collector's endpoints see,
/// and a bound on what a flood of made-up tokens can make it hold.
pub const MAX_CACHED: usize = 4096;

/// A review that could not be had.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server did not answer the review.
    #[error("{kind} failed")]
    Review {
        /// `TokenReview` or `SubjectAccessReview`.
        kind: &'static str,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The API server answered a TokenReview without a status.
    #[error("the TokenReview came back without a status")]
    NoStatus,
}

/// The paths served without authentication nor authorization: exact paths, or prefixes ending in
/// `*`, as kube-controller-manager's `--authorization-always-allow-paths`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowPaths(Vec<String>);

impl AllowPaths {
    /// kube-controller-manager's default: the probes.
    pub const DEFAULT: &'static str = "/healthz,/readyz,/livez";

    /// Whether `path` is served to anyone.
    pub fn allows(&self, path: &str) -> bool {
        self.0.iter().any(|allowed| match allowed.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => path == allowed,
        })
    }
}

impl std::str::FromStr for AllowPaths {
    type Err = String;

    /// A comma-separated list; empty for none. Each path starts with `/`, and `*` may only end it.
    fn from_str(s: &str) -> Result<Self, String> {
        let paths: Vec<String> = s
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect();
        for path in &paths {
            if !path.starts_with('/') {
                return Err(format!("{path:?} is not a path: it must start with /"));
            }
            if path.trim_end_matches('*').contains('*') || path.ends_with("**") {
                return Err(format!("{path:?}: * may only end a path, once, as a prefix match"));
            }
        }
        Ok(AllowPaths(paths))
    }
}

/// How long review answers are kept, as kube-controller-manager's flags of the same names.
#[derive(Clone, Copy, Debug)]
pub struct Ttls {
    /// `--authentication-token-webhook-cache-ttl`: a token's answer, either way (10 s).
    pub token: Duration,
    /// `--authorization-webhook-cache-authorized-ttl`: an allowed access (10 s).
    pub authorized: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl`: a denied access (10 s).
    pub unauthorized: Duration,
}

impl Default for Ttls {
    fn default() -> Self {
        Ttls {
            token: Duration::from_secs(10),
            authorized: Duration::from_secs(10),
            unauthorized: Duration::from_secs(10),
        }
    }
}

/// Who a token belongs to, as its TokenReview says.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct User {
    /// The user name.
    pub name: String,
    /// The user's UID, possibly empty.
    pub uid: String,
    /// The user's groups.
    pub groups: Vec<String>,
    /// Further attributes the authenticator gave, passed on to the access review.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What the API server said of an access.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The user may.
    Allowed,
    /// The user may not, with the authorizer's reason (possibly empty).
    Denied(String),
}

/// The SHA-256 digest of a bearer token: what the cache keeps in its place.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct TokenKey([u8; 32]);

impl TokenKey {
    fn of(token: &str) -> TokenKey {
        let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
        let mut key = [0; 32];
        key.copy_from_slice(digest.as_ref());
        TokenKey(key)
    }
}

/// An access asked about: who, which verb, which path.
type Access = (User, String, String);

/// Authentication and authorization delegated to the API servers of two clients (the cluster's own,
/// unless `--authentication-kubeconfig`/`--authorization-kubeconfig` name others).
pub struct Delegation {
    authentication: kube::Client,
    authorization: kube::Client,
    always_allow: AllowPaths,
    ttls: Ttls,
    /// Read and written by [`Delegation::authenticate`] only.
    tokens: Cache<TokenKey, Option<User>>,
    /// Read and written by [`Delegation::authorize`] only.
    accesses: Cache<Access, Decision>,
}

impl Delegation {
    /// Reviews tokens with `authentication` and accesses with `authorization`.
    pub fn new(
        authentication: kube::Client,
        authorization: kube::Client,
        always_allow: AllowPaths,
        ttls: Ttls,
    ) -> Arc<Delegation> {
        Arc::new(Delegation {
            authentication,
            authorization,
            always_allow,
            ttls,
            tokens: Cache::default(),
            accesses: Cache::default(),
        })
    }

    /// `app`, served only to the requests this delegation admits.
    pub fn protect(self: &Arc<Self>, app: Router) -> Router {
        app.layer(axum::middleware::from_fn_with_state(Arc::clone(self), guard))
    }

    /// Whether a request for `path` with `headers`, of `verb`, is served, or the answer if not.
    async fn admit(&self, verb: &str, path: &str, headers: &HeaderMap) -> Result<(), Refusal> {
        if self.always_allow.allows(path) {
            return Ok(());
        }
        let token = bearer_token(headers).ok_or(Refusal::Unauthenticated)?;
        let user = match self.authenticate(token).await {
            Ok(Some(user)) => user,
            Ok(None) => return Err(Refusal::Unauthenticated),
            Err(e) => {
                tracing::warn!(error = %e, source = ?std::error::Error::source(&e), "cannot authenticate a request");
                return Err(Refusal::Unauthenticated);
            }
        };
        match self.authorize(user.clone(), verb, path).await {
            Ok(Decision::Allowed) => Ok(()),
            Ok(Decision::Denied(reason)) => Err(Refusal::Forbidden {
                user: user.name,
                verb: verb.to_string(),
                path: path.to_string(),
                reason,
            }),
            Err(e) => {
                tracing::warn!(error = %e, source = ?std::error::Error::source(&e), "cannot authorize a request");
                Err(Refusal::ReviewFailed)
            }
        }
    }

    /// The user `token` belongs to, `None` if the API server does not know it.
    async fn authenticate(&self, token: &str) -> Result<Option<User>, Error> {
        let key = TokenKey::of(token);
        if let Some(known) = self.tokens.get(&key, Instant::now()) {
            return Ok(known);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let answer = Api::<TokenReview>::all(self.authentication.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| Error::Review {
                kind: "TokenReview",
                source,
            })?;
        let status = answer.status.ok_or(Error::NoStatus)?;
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(info)) => Some(User {
                name: info.username.unwrap_or_default(),
                uid: info.uid.unwrap_or_default(),
                groups: info.groups.unwrap_or_default(),
                extra: info.extra.unwrap_or_default(),
            }),
            _ => None,
        };
        self.tokens.put(key, user.clone(), Instant::now() + self.ttls.token);
        Ok(user)
    }

    /// Whether `user` may `verb` on the non-resource `path`.
    async fn authorize(&self, user: User, verb: &str, path: &str) -> Result<Decision, Error> {
        let access = (user, verb.to_string(), path.to_string());
        if let Some(known) = self.accesses.get(&access, Instant::now()) {
            return Ok(known);
        }
        let (user, _, _) = &access;
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some(verb.to_string()),
                }),
                resource_attributes: None,
            },
            ..SubjectAccessReview::default()
        };
        let answer = Api::<SubjectAccessReview>::all(self.authorization.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| Error::Review {
                kind: "SubjectAccessReview",
                source,
            })?;
        let (decision, ttl) = match answer.status {
            Some(status) if status.allowed => (Decision::Allowed, self.ttls.authorized),
            status => {
                let reason = status.and_then(|s| s.reason).unwrap_or_default();
                (Decision::Denied(reason), self.ttls.unauthorized)
            }
        };
        self.accesses.put(access, decision.clone(), Instant::now() + ttl);
        Ok(decision)
    }
}

/// The middleware of [`Delegation::protect`].
async fn guard(State(delegation): State<Arc<Delegation>>, request: Request, next: Next) -> Response {
    let verb = request.method().as_str().to_ascii_lowercase();
    let admitted = delegation.admit(&verb, request.uri().path(), request.headers()).await;
    match admitted {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
}

/// The token of an `Authorization: Bearer TOKEN` header, if the request has one.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Why a request is not served.
#[derive(Debug)]
enum Refusal {
    /// No token, or one the API server does not know: 401.
    Unauthenticated,
    /// A known user the API server does not let use the path: 403.
    Forbidden {
        user: String,
        verb: String,
        path: String,
        reason: String,
    },
    /// The access review failed: 500.
    ReviewFailed,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Unauthenticated => (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "unauthorized: a bearer token the API server authenticates is required\n",
            )
                .into_response(),
            Refusal::Forbidden {
                user,
                verb,
                path,
                reason,
            } => {
                let reason = if reason.is_empty() {
                    String::new()
                } else {
                    format!(": {reason}")
                };
                let body = format!("forbidden: user {user:?} may not {verb} path {path:?}{reason}\n");
                (StatusCode::FORBIDDEN, body).into_response()
            }
            Refusal::ReviewFailed => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the access review failed; try again\n",
            )
                .into_response(),
        }
    }
}

/// Answers kept until they expire, at most [`MAX_CACHED`] of them.
struct Cache<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K, V> Default for Cache<K, V> {
    fn default() -> Self {
        Cache {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash, V: Clone> Cache<K, V> {
    /// The answer kept for `key`, unless it has expired by `now`.
    fn get<Q>(&self, key: &Q, now: Instant) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        let entries = self.entries.lock();
        entries
            .get(key)
            .filter(|(expires, _)| *expires > now)
            .map(|(_, value)| value.clone())
    }

    /// Keeps `value` for `key` until `expires`.
    fn put(&self, key: K, value: V, expires: Instant) {
        let mut entries = self.entries.lock();
        if entries.len() >= MAX_CACHED && !entries.contains_key(&key) {
            let now = Instant::now();
            entries.retain(|_, (expires, _)| *expires > now);
            if entries.len() >= MAX_CACHED {
                entries.clear();
            }
        }
        entries.insert(key, (expires, value));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().len()
    }
}

/// Compile-time proof that a delegation can be shared by the server's connection tasks.
const _: fn() = || {
    fn shared<T: Send + Sync + 'static>() {}
    shared::<Delegation>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_paths_should_take_exact_paths_and_trailing_star_prefixes() {
        let paths: AllowPaths = "/healthz, /debug/*".parse().expect("valid");
        assert!(paths.allows("/healthz"));
        assert!(!paths.allows("/healthz/ping"), "an exact path is not a prefix");
        assert!(paths.allows("/debug/controllers/garbagecollector/graph"));
        assert!(!paths.allows("/metrics"));
        let default: AllowPaths = AllowPaths::DEFAULT.parse().expect("valid");
        assert!(default.allows("/readyz") && default.allows("/livez") && !default.allows("/explain"));
        let none: AllowPaths = "".parse().expect("valid");
        assert!(!none.allows("/healthz"));
    }

    #[test]
    fn allow_paths_should_refuse_a_relative_path_or_an_inner_star() {
        for bad in ["healthz", "/healthz,metrics", "/de*bug", "/debug/**", "*"] {
            let error = bad.parse::<AllowPaths>().expect_err(bad);
            assert!(
                error.contains("start with /") || error.contains("may only end"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn only_a_bearer_authorization_header_should_carry_a_token() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().expect("a header value"));
            headers
        };
        assert_eq!(bearer_token(&with("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&with("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(&with("Basic YWxpY2U6cHc=")), None);
        assert_eq!(bearer_token(&with("Bearer ")), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cached_answer_should_expire_after_its_ttl() {
        let cache: Cache<String, bool> = Cache::default();
        let now = Instant::now();
        cache.put("token".into(), true, now + Duration::from_secs(10));
        assert_eq!(cache.get("token", now), Some(true));
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(cache.get("token", Instant::now()), Some(true));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(cache.get("token", Instant::now()), None, "expired at its TTL");
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_cache_should_drop_expired_answers_first_then_everything() {
        let cache: Cache<usize, ()> = Cache::default();
        let now = Instant::now();
        for i in 0..MAX_CACHED {
            let ttl = if i % 2 == 0 { 1 } else { 60 };
            cache.put(i, (), now + Duration::from_secs(ttl));
        }
        tokio::time::advance(Duration::from_secs(2)).await;
        cache.put(MAX_CACHED, (), Instant::now() + Duration::from_secs(60));
        assert_eq!(cache.len(), MAX_CACHED / 2 + 1, "the expired half went");
        for i in 0..MAX_CACHED {
            cache.put(MAX_CACHED + 1 + i, (), Instant::now() + Duration::from_secs(60));
        }
        assert!(cache.len() <= MAX_CACHED, "bounded: {}", cache.len());
    }
}
