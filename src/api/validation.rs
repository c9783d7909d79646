//! The API server's validation of `metadata.ownerReferences` (`ValidateOwnerReferences`), shared
//! by the simulated cluster (which answers 422 Invalid) and by every event source (which drops an
//! unreadable object), so a malformed reference is judged by one rule wherever it comes from.
//!
//! Upstream names the list (`metadata.ownerReferences`), never an index, in every failure, and
//! reports every failure of every reference: an empty apiVersion version, kind, name or uid; an
//! owner of a banned kind (a core v1 Event); a second reference with `controller: true`.

use super::field::{aggregate, FieldError};
use super::OwnerReference;
use std::fmt;

/// The path of the list in every failure.
const FIELD: &str = "metadata.ownerReferences";

/// The owners upstream refuses (`BannedOwners`), as group, version and kind: a core Event, which
/// is never worth keeping anything alive for.
const BANNED_OWNERS: [(&str, &str, &str); 1] = [("", "v1", "Event")];

/// Why an ownerReferences list is invalid: every failure, in upstream's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidOwnerReference {
    /// The failures; never empty.
    pub errors: Vec<FieldError>,
}

impl fmt::Display for InvalidOwnerReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&aggregate(&self.errors))
    }
}

impl std::error::Error for InvalidOwnerReference {}

/// Checks every ref the way the API server does on create and update.
pub fn validate_owner_references(refs: &[OwnerReference]) -> Result<(), InvalidOwnerReference> {
    let errors = owner_reference_errors(refs);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(InvalidOwnerReference { errors })
    }
}

/// Every failure of `refs`, for a caller that reports them with others.
pub fn owner_reference_errors(refs: &[OwnerReference]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    // Every valid object's refs pass through here, so the message's text is formatted only for
    // an invalid one.
    let mut first_controller: Option<&OwnerReference> = None;
    for r in refs {
        errors.extend(reference_errors(r));
        if r.controller == Some(true) {
            match first_controller {
                Some(first) => errors.push(FieldError::invalid_shown(
                    FIELD,
                    go_syntax_list(refs),
                    format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {}/{} and {}/{}",
                        first.kind, first.name, r.kind, r.name
                    ),
                )),
                None => first_controller = Some(r),
            }
        }
    }
    errors
}

/// The failures of one reference on its own.
fn reference_errors(r: &OwnerReference) -> Vec<FieldError> {
    let (group, version) = group_version(&r.api_version);
    let mut errors = Vec::new();
    let child = |name: &str| format!("{FIELD}.{name}");
    if version.is_empty() {
        errors.push(FieldError::invalid(
            child("apiVersion"),
            &r.api_version,
            "version must not be empty",
        ));
    }
    for (name, value) in [("kind", &r.kind), ("name", &r.name), ("uid", &r.uid)] {
        if value.is_empty() {
            errors.push(FieldError::invalid(
                child(name),
                value,
                format!("{name} must not be empty"),
            ));
        }
    }
    if BANNED_OWNERS.contains(&(group, version, r.kind.as_str())) {
        errors.push(FieldError::invalid_shown(
            FIELD,
            go_syntax(r),
            format!("{group}/{version}, Kind={} is disallowed from being an owner", r.kind),
        ));
    }
    errors
}

/// The group and version of `api_version` as upstream parses a group-version: both empty when it
/// is not one (more than one `/`).
fn group_version(api_version: &str) -> (&str, &str) {
    match api_version.matches('/').count() {
        0 | 1 if api_version == "/" => ("", ""),
        0 | 1 => super::split_api_version(api_version),
        _ => ("", ""),
    }
}

/// A reference as the API server prints a struct it cannot print otherwise (Go's `%#v`). A set
/// pointer prints as an address there; a fixed one stands in for it.
fn go_syntax(r: &OwnerReference) -> String {
    let flag = |value: Option<bool>| match value {
        Some(_) => "(*bool)(0xc000000000)",
        None => "(*bool)(nil)",
    };
    format!(
        "v1.OwnerReference{{APIVersion:{:?}, Kind:{:?}, Name:{:?}, UID:{:?}, Controller:{}, BlockOwnerDeletion:{}}}",
        r.api_version,
        r.kind,
        r.name,
        r.uid,
        flag(r.controller),
        flag(r.block_owner_deletion)
    )
}

/// The list as Go's `%#v` prints it.
fn go_syntax_list(refs: &[OwnerReference]) -> String {
    let items: Vec<String> = refs.iter().map(go_syntax).collect();
    format!("[]v1.OwnerReference{{{}}}", items.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "p".into(),
            uid: "u".into(),
            ..Default::default()
        }
    }

    fn messages(refs: &[OwnerReference]) -> Vec<String> {
        owner_reference_errors(refs).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn each_empty_field_should_be_named_with_upstreams_words() {
        let bare = OwnerReference::default();
        assert_eq!(
            messages(&[bare]),
            [
                "metadata.ownerReferences.apiVersion: Invalid value: \"\": version must not be empty",
                "metadata.ownerReferences.kind: Invalid value: \"\": kind must not be empty",
                "metadata.ownerReferences.name: Invalid value: \"\": name must not be empty",
                "metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty",
            ]
        );
        let err = validate_owner_references(&[
            good(),
            OwnerReference {
                uid: String::new(),
                ..good()
            },
        ]);
        assert_eq!(
            err.map_err(|e| e.to_string()),
            Err("metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty".into())
        );
    }

    #[test]
    fn an_api_version_that_is_not_a_group_version_should_have_no_version() {
        for bad in ["apps/", "apps/v1/extra", "a//b", "/"] {
            let r = OwnerReference {
                api_version: bad.into(),
                ..good()
            };
            assert_eq!(
                messages(&[r]),
                [format!(
                    "metadata.ownerReferences.apiVersion: Invalid value: {bad:?}: version must not be empty"
                )],
                "{bad}"
            );
        }
        for fine in ["v1", "apps/v1", "example.com/v1beta1"] {
            let r = OwnerReference {
                api_version: fine.into(),
                ..good()
            };
            assert_eq!(validate_owner_references(&[r]), Ok(()), "{fine}");
        }
    }

    #[test]
    fn a_core_event_should_be_banned_as_an_owner_but_not_a_new_api_event() {
        let event = OwnerReference {
            kind: "Event".into(),
            name: "e".into(),
            ..good()
        };
        assert_eq!(
            messages(std::slice::from_ref(&event)),
            [
                "metadata.ownerReferences: Invalid value: v1.OwnerReference{APIVersion:\"v1\", Kind:\"Event\", \
              Name:\"e\", UID:\"u\", Controller:(*bool)(nil), BlockOwnerDeletion:(*bool)(nil)}: \
              /v1, Kind=Event is disallowed from being an owner"
            ]
        );
        let new_api = OwnerReference {
            api_version: "events.k8s.io/v1".into(),
            ..event
        };
        assert_eq!(validate_owner_references(&[new_api]), Ok(()));
    }

    #[test]
    fn a_second_controller_should_be_refused_naming_both_but_duplicates_accepted() {
        let controller = |name: &str| OwnerReference {
            name: name.into(),
            controller: Some(true),
            ..good()
        };
        let refused = messages(&[controller("a"), good(), controller("b")]);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].starts_with("metadata.ownerReferences: Invalid value: []v1.OwnerReference{"));
        assert!(refused[0].ends_with(
            ": Only one reference can have Controller set to true. Found \"true\" in references for Pod/a and Pod/b"
        ));
        assert!(validate_owner_references(&[good(), good()]).is_ok());
    }
}
