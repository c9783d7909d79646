//! Reviews: the questions clients ask the API server rather than act, answered here, never stored.
//!
//! - `SelfSubjectAccessReview` and `SelfSubjectRulesReview`, which `kubectl auth can-i` and
//!   clients ask before they act. The simulated server authorizes every request, so a review
//!   answers "allowed" and a rules review lists one rule that allows everything, unless the server
//!   was started with access reviews to deny ([`ServerOptions::denied`](super::ServerOptions)): a
//!   review about a denied verb and resource answers "not allowed", so a client's fallback can be
//!   tried. The denial is only what the reviews say; requests themselves are still served.
//! - `TokenReview` and `SubjectAccessReview`, which a server that delegates its authentication and
//!   authorization to the API server asks (`kube-gc run`'s secure port, as
//!   kube-controller-manager's). A token review authenticates the tokens of
//!   [`ServerOptions::tokens`](super::ServerOptions) ([`TokenUser`]), each as its user in the group
//!   `system:authenticated`, and no other. A subject access review about a non-resource path is
//!   allowed only for `get` of a path one of [`ServerOptions::grants`](super::ServerOptions)
//!   ([`PathGrant`]) gives the user or one of its groups; one about a resource answers as a
//!   self-subject access review does. These answers too are only what the reviews say: the
//!   simulated server itself still serves every request, with or without a token.
//!
//! A POST answers 201 with the review and its status, as the API server does, and any other
//! method is 405. Discovery lists the token review under `authentication.k8s.io/v1` and the
//! others under `authorization.k8s.io/v1`, each with the one verb `create`.

use kube_gc::api::{ApiError, StatusReason};
use serde_json::{json, Value};

/// The group of the access reviews.
pub(super) const AUTHORIZATION: &str = "authorization.k8s.io";
/// The group of the token review.
pub(super) const AUTHENTICATION: &str = "authentication.k8s.io";
/// The version every review is served in.
pub(super) const VERSION: &str = "v1";

/// `(group, resource, kind)` of each review.
pub(super) const REVIEWS: [(&str, &str, &str); 4] = [
    (AUTHORIZATION, "selfsubjectaccessreviews", "SelfSubjectAccessReview"),
    (AUTHORIZATION, "selfsubjectrulesreviews", "SelfSubjectRulesReview"),
    (AUTHORIZATION, "subjectaccessreviews", "SubjectAccessReview"),
    (AUTHENTICATION, "tokenreviews", "TokenReview"),
];

/// The group every authenticated user is in.
const AUTHENTICATED: &str = "system:authenticated";

/// A bearer token the token review authenticates, and its user: `USER=TOKEN`.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenUser {
    /// The user name (`alice`, `system:serviceaccount:monitoring:prometheus`).
    pub user: String,
    /// The token.
    pub token: String,
}

/// Shows the user, never the token.
impl std::fmt::Debug for TokenUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenUser({:?}, token hidden)", self.user)
    }
}

impl std::str::FromStr for TokenUser {
    type Err = String;

    /// `USER=TOKEN`, split at the first `=`: a user name has none, a token may.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once('=') {
            Some((user, token)) if !user.is_empty() && !token.is_empty() => Ok(TokenUser {
                user: user.to_string(),
                token: token.to_string(),
            }),
            _ => Err("expected USER=TOKEN, both non-empty (for example alice=s3cret)".to_string()),
        }
    }
}

/// A non-resource path a user or group may `get`: `SUBJECT=PATH`, the path exact or a prefix
/// ending in `*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathGrant {
    /// A user name, or a group (`system:authenticated` for every authenticated user).
    pub subject: String,
    /// The path (`/metrics`), or a prefix ending in `*` (`/debug/*`, `*` for all).
    pub path: String,
}

impl std::str::FromStr for PathGrant {
    type Err = String;

    /// `SUBJECT=PATH`, split at the last `=`.
    fn from_str(s: &str) -> Result<Self, String> {
        let Some((subject, path)) = s.rsplit_once('=').filter(|(subject, _)| !subject.is_empty()) else {
            return Err(format!("{s:?} is not SUBJECT=PATH (for example alice=/metrics)"));
        };
        let prefix = path.strip_suffix('*').unwrap_or(path);
        if !(path == "*" || prefix.starts_with('/')) || prefix.contains('*') {
            return Err(format!(
                "{path:?} is not a path: it starts with /, and * may only end it (or be all of it)"
            ));
        }
        Ok(PathGrant {
            subject: subject.to_string(),
            path: path.to_string(),
        })
    }
}

impl PathGrant {
    fn covers(&self, user: &str, groups: &[&str], path: &str) -> bool {
        let subject = self.subject == user || groups.contains(&self.subject.as_str());
        let path = match self.path.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => path == self.path,
        };
        subject && path
    }
}

/// What the reviews answer from: the options of the server they are asked of.
pub(super) struct Policy<'a> {
    pub(super) denied: &'a [Denial],
    pub(super) tokens: &'a [TokenUser],
    pub(super) grants: &'a [PathGrant],
}

/// One verb on one resource whose access reviews answer "not allowed": `verb/resource`, either
/// part `*` for any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// The verb (`delete`), or `*`.
    pub verb: String,
    /// The resource (`pods`), or `*`.
    pub resource: String,
}

impl std::str::FromStr for Denial {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once('/') {
            Some((verb, resource)) if !verb.is_empty() && !resource.is_empty() => Ok(Denial {
                verb: verb.to_string(),
                resource: resource.to_string(),
            }),
            _ => Err(format!(
                "{s:?} is not VERB/RESOURCE (for example delete/pods or */secrets)"
            )),
        }
    }
}

impl Denial {
    fn covers(&self, verb: &str, resource: &str) -> bool {
        (self.verb == "*" || self.verb == verb) && (self.resource == "*" || self.resource == resource)
    }
}

/// The kind of the review `resource` of `group`, if it is one.
pub(super) fn kind_of(group: &str, resource: &str) -> Option<&'static str> {
    REVIEWS
        .iter()
        .find(|(g, r, _)| *g == group && *r == resource)
        .map(|(_, _, kind)| *kind)
}

/// The group of the review `resource`, if it is one (no two reviews share a resource name).
pub(super) fn group_of(resource: &str) -> Option<&'static str> {
    REVIEWS.iter().find(|(_, r, _)| *r == resource).map(|(g, _, _)| *g)
}

/// The answer to a POST of `review` to `resource`.
pub(super) fn answer(resource: &str, review: Value, policy: &Policy<'_>) -> Result<Value, ApiError> {
    let no_such = || ApiError::status(StatusReason::NotFound, "no such review");
    let group = group_of(resource).ok_or_else(no_such)?;
    let kind = kind_of(group, resource).ok_or_else(no_such)?;
    let spec = review.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = match kind {
        "SelfSubjectAccessReview" => access(kind, &spec, policy.denied)?,
        "SubjectAccessReview" => subject_access(&spec, policy)?,
        "TokenReview" => token(&spec, policy.tokens),
        _ => rules(policy.denied),
    };
    Ok(json!({
        "kind": kind,
        "apiVersion": format!("{group}/{VERSION}"),
        "metadata": {"creationTimestamp": null},
        "spec": spec,
        "status": status,
    }))
}

/// The 422 of an access review of `kind` that names neither kind of attributes.
fn no_attributes(kind: &str) -> ApiError {
    ApiError::status(
        StatusReason::Invalid,
        format!(
            "{kind} is invalid: spec.resourceAttributes: Invalid value: exactly one of \
             nonResourceAttributes or resourceAttributes must be specified"
        ),
    )
}

/// A review of one access: allowed unless a denial covers it.
fn access(kind: &str, spec: &Value, denied: &[Denial]) -> Result<Value, ApiError> {
    let attributes = spec
        .get("resourceAttributes")
        .or_else(|| spec.get("nonResourceAttributes"));
    let Some(attributes) = attributes else {
        return Err(no_attributes(kind));
    };
    let field = |name: &str| attributes.get(name).and_then(Value::as_str).unwrap_or("");
    let (verb, resource) = (field("verb"), field("resource"));
    Ok(match denied.iter().find(|d| d.covers(verb, resource)) {
        Some(_) => json!({"allowed": false, "denied": true, "reason": "denied by the server's --deny-access-review"}),
        None => json!({"allowed": true, "reason": "the simulated API server allows every request"}),
    })
}

/// A review of another user's access: to a resource, as [`access`]; to a non-resource path,
/// allowed only for `get` of a path a grant gives the user or one of its groups.
fn subject_access(spec: &Value, policy: &Policy<'_>) -> Result<Value, ApiError> {
    let Some(attributes) = spec.get("nonResourceAttributes") else {
        return access("SubjectAccessReview", spec, policy.denied);
    };
    let text = |value: Option<&Value>| value.and_then(Value::as_str).unwrap_or("").to_string();
    let (verb, path) = (text(attributes.get("verb")), text(attributes.get("path")));
    let user = text(spec.get("user"));
    let groups: Vec<&str> = spec
        .get("groups")
        .and_then(Value::as_array)
        .map(|groups| groups.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if user.is_empty() && groups.is_empty() {
        return Err(ApiError::status(
            StatusReason::Invalid,
            "SubjectAccessReview is invalid: spec.user: Invalid value: at least one of user or group must be specified",
        ));
    }
    let granted = verb == "get" && policy.grants.iter().any(|g| g.covers(&user, &groups, &path));
    Ok(if granted {
        json!({"allowed": true, "reason": "granted by the server's --allow"})
    } else {
        json!({"allowed": false, "reason": format!("no --allow gives {user:?} {verb} on {path:?}")})
    })
}

/// A review of a bearer token: its user if it is one of `tokens`.
fn token(spec: &Value, tokens: &[TokenUser]) -> Value {
    let token = spec.get("token").and_then(Value::as_str).unwrap_or("");
    match tokens.iter().find(|t| !token.is_empty() && t.token == token) {
        Some(known) => json!({
            "authenticated": true,
            "user": {"username": known.user, "groups": [AUTHENTICATED]},
            "audiences": spec.get("audiences").cloned().unwrap_or_else(|| json!([])),
        }),
        None => json!({"authenticated": false, "error": "invalid bearer token"}),
    }
}

/// The rules of the requesting user: everything, less what is denied (which a rules review can
/// only say by leaving it out, so a denial makes the list incomplete).
fn rules(denied: &[Denial]) -> Value {
    json!({
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        "incomplete": !denied.is_empty(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denying(denied: &[Denial]) -> Policy<'_> {
        Policy {
            denied,
            tokens: &[],
            grants: &[],
        }
    }

    fn review(verb: &str, resource: &str) -> Value {
        json!({"spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": "default"}}})
    }

    #[test]
    fn an_access_review_should_be_allowed_unless_denied() {
        let deny: Vec<Denial> = vec!["delete/pods".parse().expect("a denial")];
        let allowed = answer("selfsubjectaccessreviews", review("get", "pods"), &denying(&deny)).expect("answer");
        assert_eq!(allowed["status"]["allowed"], true);
        assert_eq!(allowed["kind"], "SelfSubjectAccessReview");
        assert_eq!(
            allowed["spec"]["resourceAttributes"]["verb"], "get",
            "the spec comes back"
        );
        let denied = answer("selfsubjectaccessreviews", review("delete", "pods"), &denying(&deny)).expect("answer");
        assert_eq!(denied["status"]["allowed"], false);
        let any: Vec<Denial> = vec!["*/secrets".parse().expect("a denial")];
        let secrets = answer("selfsubjectaccessreviews", review("list", "secrets"), &denying(&any)).expect("answer");
        assert_eq!(secrets["status"]["allowed"], false);
    }

    #[test]
    fn a_review_without_attributes_should_be_invalid_and_a_bad_denial_refused() {
        let err = answer("selfsubjectaccessreviews", json!({"spec": {}}), &denying(&[])).expect_err("invalid");
        assert_eq!(err.reason(), Some(StatusReason::Invalid));
        assert!("pods".parse::<Denial>().is_err());
        assert!("/pods".parse::<Denial>().is_err());
    }

    #[test]
    fn a_rules_review_should_allow_everything() {
        let rules = answer(
            "selfsubjectrulesreviews",
            json!({"spec": {"namespace": "default"}}),
            &denying(&[]),
        )
        .expect("answer");
        assert_eq!(rules["status"]["resourceRules"][0]["verbs"], json!(["*"]));
        assert_eq!(rules["status"]["incomplete"], false);
    }

    #[test]
    fn a_token_review_should_authenticate_only_a_known_token() {
        let tokens: Vec<TokenUser> = vec!["alice=s3cret=x".parse().expect("a token")];
        assert_eq!(tokens[0].user, "alice", "the user ends at the first =");
        let policy = Policy {
            denied: &[],
            tokens: &tokens,
            grants: &[],
        };
        let review = |token: &str| json!({"spec": {"token": token}});
        let known = answer("tokenreviews", review("s3cret=x"), &policy).expect("answer");
        assert_eq!(known["apiVersion"], "authentication.k8s.io/v1");
        assert_eq!(known["status"]["authenticated"], true);
        assert_eq!(known["status"]["user"]["username"], "alice");
        assert_eq!(known["status"]["user"]["groups"], json!(["system:authenticated"]));
        for unknown in ["nope", ""] {
            let refused = answer("tokenreviews", review(unknown), &policy).expect("answer");
            assert_eq!(refused["status"]["authenticated"], false, "{unknown:?}");
        }
        assert!("alice".parse::<TokenUser>().is_err() && "=t".parse::<TokenUser>().is_err());
        assert!(
            !format!("{:?}", tokens[0]).contains("s3cret"),
            "the token stays out of logs"
        );
    }

    #[test]
    fn a_subject_access_review_should_allow_only_a_granted_get_of_a_path() {
        let grants: Vec<PathGrant> = ["alice=/metrics", "system:authenticated=/healthz", "bob=/debug/*"]
            .iter()
            .map(|g| g.parse().expect("a grant"))
            .collect();
        let policy = Policy {
            denied: &[],
            tokens: &[],
            grants: &grants,
        };
        let allowed = |user: &str, verb: &str, path: &str| {
            let spec = json!({"spec": {"user": user, "groups": ["system:authenticated"],
                "nonResourceAttributes": {"path": path, "verb": verb}}});
            let answer = answer("subjectaccessreviews", spec, &policy).expect("answer");
            answer["status"]["allowed"] == true
        };
        assert!(allowed("alice", "get", "/metrics"));
        assert!(!allowed("alice", "post", "/metrics"), "only get is granted");
        assert!(!allowed("carol", "get", "/metrics"));
        assert!(allowed("carol", "get", "/healthz"), "granted to a group");
        assert!(allowed("bob", "get", "/debug/controllers/garbagecollector/graph"));
        assert!(!allowed("bob", "get", "/explain"));
        let nobody = json!({"spec": {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}});
        let err = answer("subjectaccessreviews", nobody, &policy).expect_err("invalid");
        assert_eq!(err.reason(), Some(StatusReason::Invalid));
        let resource = answer("subjectaccessreviews", review("get", "pods"), &policy).expect("answer");
        assert_eq!(resource["status"]["allowed"], true, "resources answer as a self review");
        for bad in ["alice", "=/metrics", "alice=metrics", "alice=/de*bug"] {
            assert!(bad.parse::<PathGrant>().is_err(), "{bad} refused");
        }
    }
}
