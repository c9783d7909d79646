//! Access reviews: `SelfSubjectAccessReview` and `SelfSubjectRulesReview`, the questions
//! `kubectl auth can-i` and clients ask before they act.
//!
//! The simulated server authorizes every request, so a review answers "allowed" and a rules
//! review lists one rule that allows everything, unless the server was started with access
//! reviews to deny ([`ServerOptions::denied`](super::ServerOptions)): a review about a denied verb
//! and resource answers "not allowed", so a client's fallback can be tried. The denial is only
//! what the reviews say; requests themselves are still served.
//!
//! Reviews are created, never stored: a POST answers 201 with the review and its status, as the
//! API server does, and any other method is 405. Discovery lists both resources under
//! `authorization.k8s.io/v1` with the one verb `create`.

use crate::api::{ApiError, StatusReason};
use serde_json::{json, Value};

/// The group and version the reviews are served under.
pub(super) const GROUP: &str = "authorization.k8s.io";
pub(super) const VERSION: &str = "v1";

/// `(resource, kind)` of each review.
pub(super) const REVIEWS: [(&str, &str); 2] = [
    ("selfsubjectaccessreviews", "SelfSubjectAccessReview"),
    ("selfsubjectrulesreviews", "SelfSubjectRulesReview"),
];

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

/// The kind of the review `resource`, if it is one.
pub(super) fn kind_of(resource: &str) -> Option<&'static str> {
    REVIEWS.iter().find(|(r, _)| *r == resource).map(|(_, kind)| *kind)
}

/// The answer to a POST of `review` to `resource`.
pub(super) fn answer(resource: &str, review: Value, denied: &[Denial]) -> Result<Value, ApiError> {
    let kind = kind_of(resource).ok_or_else(|| ApiError::status(StatusReason::NotFound, "no such review"))?;
    let spec = review.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = if kind == "SelfSubjectAccessReview" {
        access(&spec, denied)?
    } else {
        rules(denied)
    };
    Ok(json!({
        "kind": kind,
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "metadata": {"creationTimestamp": null},
        "spec": spec,
        "status": status,
    }))
}

/// A review of one access: allowed unless a denial covers it.
fn access(spec: &Value, denied: &[Denial]) -> Result<Value, ApiError> {
    let attributes = spec
        .get("resourceAttributes")
        .or_else(|| spec.get("nonResourceAttributes"));
    let Some(attributes) = attributes else {
        return Err(ApiError::status(
            StatusReason::Invalid,
            "SelfSubjectAccessReview is invalid: spec.resourceAttributes: Invalid value: exactly one of \
             nonResourceAttributes or resourceAttributes must be specified",
        ));
    };
    let field = |name: &str| attributes.get(name).and_then(Value::as_str).unwrap_or("");
    let (verb, resource) = (field("verb"), field("resource"));
    Ok(match denied.iter().find(|d| d.covers(verb, resource)) {
        Some(_) => json!({"allowed": false, "denied": true, "reason": "denied by the server's --deny-access-review"}),
        None => json!({"allowed": true, "reason": "the simulated API server allows every request"}),
    })
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

    fn review(verb: &str, resource: &str) -> Value {
        json!({"spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": "default"}}})
    }

    #[test]
    fn an_access_review_should_be_allowed_unless_denied() {
        let deny: Vec<Denial> = vec!["delete/pods".parse().expect("a denial")];
        let allowed = answer("selfsubjectaccessreviews", review("get", "pods"), &deny).expect("answer");
        assert_eq!(allowed["status"]["allowed"], true);
        assert_eq!(allowed["kind"], "SelfSubjectAccessReview");
        assert_eq!(
            allowed["spec"]["resourceAttributes"]["verb"], "get",
            "the spec comes back"
        );
        let denied = answer("selfsubjectaccessreviews", review("delete", "pods"), &deny).expect("answer");
        assert_eq!(denied["status"]["allowed"], false);
        let any: Vec<Denial> = vec!["*/secrets".parse().expect("a denial")];
        let secrets = answer("selfsubjectaccessreviews", review("list", "secrets"), &any).expect("answer");
        assert_eq!(secrets["status"]["allowed"], false);
    }

    #[test]
    fn a_review_without_attributes_should_be_invalid_and_a_bad_denial_refused() {
        let err = answer("selfsubjectaccessreviews", json!({"spec": {}}), &[]).expect_err("invalid");
        assert_eq!(err.reason(), Some(StatusReason::Invalid));
        assert!("pods".parse::<Denial>().is_err());
        assert!("/pods".parse::<Denial>().is_err());
    }

    #[test]
    fn a_rules_review_should_allow_everything() {
        let rules = answer(
            "selfsubjectrulesreviews",
            json!({"spec": {"namespace": "default"}}),
            &[],
        )
        .expect("answer");
        assert_eq!(rules["status"]["resourceRules"][0]["verbs"], json!(["*"]));
        assert_eq!(rules["status"]["incomplete"], false);
    }
}
