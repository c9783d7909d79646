//! The validation of list and watch options, as the API server applies it before serving either,
//! and what a watch's `sendInitialEvents` asks for (watch-list, KEP-3157).
//!
//! - A LIST may not carry `sendInitialEvents`; its `resourceVersionMatch` needs a
//!   `resourceVersion`, no `continue`, and one of the known values (`Exact` not with `"0"`).
//! - A WATCH with `sendInitialEvents` needs `resourceVersionMatch=NotOlderThan` and the
//!   `WatchList` feature gate; a WATCH with `resourceVersionMatch` needs `sendInitialEvents`.
//! - Every broken rule is reported at once, in one 422 Invalid about `ListOptions.meta.k8s.io`,
//!   worded as upstream's field errors are, so clients that parse them (or fall back on them, as
//!   client-go's watch-list does when the gate is off) see what they would see on a cluster.
//!
//! A watch-list ([`Start::InitialEvents`]) streams the objects as they are at the newest
//! resourceVersion as ADDED events (that version is never older than the one asked for), then, if
//! the client allows bookmarks, one BOOKMARK carrying that version and the
//! `k8s.io/initial-events-end: "true"` annotation, then every later change.

use super::request::Params;
use kube_gc::api::{ApiError, StatusReason};

const NOT_OLDER_THAN: &str = "NotOlderThan";
const EXACT: &str = "Exact";

/// Where a watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Start {
    /// The existing objects first, then a bookmark that says so (`sendInitialEvents=true`).
    InitialEvents,
    /// Only the changes after the requested resourceVersion, or after now for `""` and `"0"`
    /// (`sendInitialEvents=false`).
    ChangesOnly,
    /// A watch without `sendInitialEvents`: from `""` or `"0"` the existing objects come first,
    /// with no bookmark to end them, as servers have always done.
    Legacy,
}

/// Checks a LIST's or a WATCH's options; a watch's start on success.
pub(super) fn validate(watch: bool, params: &Params, watch_list_enabled: bool) -> Result<Start, ApiError> {
    let errors = if watch {
        watch_errors(params, watch_list_enabled)
    } else {
        list_errors(params)
    };
    if !errors.is_empty() {
        let detail = match errors.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        return Err(ApiError::status(
            StatusReason::Invalid,
            format!("ListOptions.meta.k8s.io \"\" is invalid: {detail}"),
        ));
    }
    Ok(match params.send_initial_events {
        Some(true) => Start::InitialEvents,
        Some(false) => Start::ChangesOnly,
        None => Start::Legacy,
    })
}

fn forbidden(field: &str, why: &str) -> String {
    format!("{field}: Forbidden: {why}")
}

fn not_supported(field: &str, value: &str, supported: &[&str]) -> String {
    let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    format!(
        "{field}: Unsupported value: {value:?}: supported values: {}",
        supported.join(", ")
    )
}

fn list_errors(params: &Params) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(rv_match) = params.resource_version_match.as_deref().filter(|m| !m.is_empty()) {
        if params.resource_version.is_empty() {
            let why = "resourceVersionMatch is forbidden unless resourceVersion is provided";
            errors.push(forbidden("resourceVersionMatch", why));
        }
        if params.continue_token.is_some() {
            let why = "resourceVersionMatch is forbidden when continue is provided";
            errors.push(forbidden("resourceVersionMatch", why));
        }
        match rv_match {
            EXACT if params.resource_version == "0" => {
                let why = "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"";
                errors.push(forbidden("resourceVersionMatch", why));
            }
            EXACT | NOT_OLDER_THAN => {}
            other => errors.push(not_supported(
                "resourceVersionMatch",
                other,
                &[EXACT, NOT_OLDER_THAN, ""],
            )),
        }
    }
    if params.send_initial_events.is_some() {
        errors.push(forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    errors
}

fn watch_errors(params: &Params, watch_list_enabled: bool) -> Vec<String> {
    let mut errors = Vec::new();
    let rv_match = params.resource_version_match.as_deref().filter(|m| !m.is_empty());
    if params.send_initial_events.is_some() {
        if rv_match != Some(NOT_OLDER_THAN) {
            let why = format!("sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}");
            errors.push(forbidden("resourceVersionMatch", &why));
        }
        if !watch_list_enabled {
            let why = "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled";
            errors.push(forbidden("sendInitialEvents", why));
        }
    }
    if let Some(rv_match) = rv_match {
        if params.send_initial_events.is_none() {
            let why = "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided";
            errors.push(forbidden("resourceVersionMatch", why));
        }
        if rv_match != NOT_OLDER_THAN {
            errors.push(not_supported("resourceVersionMatch", rv_match, &[NOT_OLDER_THAN]));
        }
        if params.continue_token.is_some() {
            let why = "resourceVersionMatch is forbidden when continue is provided";
            errors.push(forbidden("resourceVersionMatch", why));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn params(pairs: &[(&str, &str)]) -> Params {
        let query: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Params::parse(&query).expect("parses")
    }

    fn message(result: Result<Start, ApiError>) -> String {
        let err = result.expect_err("invalid");
        assert_eq!(err.reason(), Some(StatusReason::Invalid));
        err.to_string()
    }

    #[test]
    fn a_watch_list_should_need_not_older_than_and_the_gate() {
        let watch_list = params(&[("sendInitialEvents", "true"), ("resourceVersionMatch", "NotOlderThan")]);
        assert_eq!(validate(true, &watch_list, true).expect("valid"), Start::InitialEvents);
        let gated = message(validate(true, &watch_list, false));
        assert!(
            gated.contains("unless the WatchList feature gate is enabled"),
            "{gated}"
        );
        let no_match = message(validate(true, &params(&[("sendInitialEvents", "true")]), true));
        assert!(
            no_match.contains("sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
            "{no_match}"
        );
        let changes = params(&[("sendInitialEvents", "false"), ("resourceVersionMatch", "NotOlderThan")]);
        assert_eq!(validate(true, &changes, true).expect("valid"), Start::ChangesOnly);
        assert_eq!(validate(true, &params(&[]), true).expect("valid"), Start::Legacy);
    }

    #[test]
    fn a_watch_with_a_match_but_no_send_initial_events_should_be_invalid() {
        let text = message(validate(true, &params(&[("resourceVersionMatch", "Exact")]), true));
        assert!(text.contains("ListOptions.meta.k8s.io \"\" is invalid: ["), "{text}");
        assert!(text.contains("unless sendInitialEvents is provided"), "{text}");
        assert!(
            text.contains("Unsupported value: \"Exact\": supported values: \"NotOlderThan\""),
            "{text}"
        );
    }

    #[test]
    fn a_list_should_refuse_send_initial_events_and_a_bad_match() {
        let text = message(validate(false, &params(&[("sendInitialEvents", "true")]), true));
        assert!(
            text.ends_with("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"),
            "{text}"
        );
        let text = message(validate(
            false,
            &params(&[("resourceVersionMatch", "NotOlderThan")]),
            true,
        ));
        assert!(text.contains("unless resourceVersion is provided"), "{text}");
        let exact_zero = params(&[("resourceVersion", "0"), ("resourceVersionMatch", "Exact")]);
        assert!(message(validate(false, &exact_zero, true)).contains("forbidden for resourceVersion \"0\""));
        let fine = params(&[("resourceVersion", "5"), ("resourceVersionMatch", "NotOlderThan")]);
        assert!(validate(false, &fine, true).is_ok());
    }
}
