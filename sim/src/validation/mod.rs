//! Every object the simulated cluster writes passes the API server's metadata rules, or the write
//! is refused as a real server refuses it: 422 Invalid, `<Kind>.<group> "<name>" is invalid:`
//! and every failure, each also a `details.causes` entry (field, type, message).
//!
//! The rules (`ValidateObjectMeta` on create, `ValidateObjectMetaUpdate` on update) are one
//! function each: the type's name rule and a CronJob's length ([`names`]), the namespace, labels,
//! annotations and their total size, finalizers ([`metadata`]), and owner references (the
//! collector's shared [`kube_gc::api::owner_reference_errors`]). [`object_meta`] runs them in
//! upstream's order and is called from one place, the store's check of every write, which create,
//! update, every patch type, apply and dry run all pass through. A name is checked on create only:
//! it cannot change, and upstream does not check it again (an object created under an older, looser
//! rule stays updatable).
//!
//! The limits on sizes (the request body, the stored object) are [`super::limits`]'.

mod formats;
mod metadata;
mod names;
mod spec;

use crate::status::invalid_fields;
use crate::types::TypeDef;
use kube_gc::api::{owner_reference_errors, ApiError, FieldError, ObjectMeta, PartialObjectMeta};

/// Which write the metadata is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Write {
    /// A new object: its name and namespace are checked too.
    Create,
    /// A stored object's new state.
    Update,
}

/// Every failure of `meta` as written by `write`, in upstream's order.
fn failures(def: &TypeDef, meta: &ObjectMeta, write: Write) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if write == Write::Create {
        errors.extend(names::name(def, &meta.name, &meta.generate_name));
        errors.extend(names::namespace(def, &meta.namespace));
    }
    errors.extend(metadata::labels(&meta.labels));
    errors.extend(metadata::annotations(&meta.annotations));
    errors.extend(owner_reference_errors(&meta.owner_references));
    errors.extend(metadata::finalizers(&meta.finalizers));
    if write == Write::Create {
        errors.extend(names::cron_job_name(def, &meta.name));
    }
    errors
}

/// Checks `meta` of an object of type `def` about to be written; the 422 names the object
/// `name` (on a create with `generateName`, the name made from it, as upstream's does).
pub(super) fn object_meta(def: &TypeDef, name: &str, meta: &ObjectMeta, write: Write) -> Result<(), ApiError> {
    let errors = failures(def, meta, write);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(invalid_fields(def, name, &errors))
    }
}

/// Checks the spec of `new`, the new state of `old` (none on a create), for the types whose spec
/// has rules ([`spec`]).
pub(super) fn object_spec(
    def: &TypeDef,
    old: Option<&PartialObjectMeta>,
    new: &PartialObjectMeta,
) -> Result<(), ApiError> {
    let errors = spec::failures(def, old, new);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(invalid_fields(def, &new.metadata.name, &errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_gc::api::{OwnerReference, StatusReason};

    fn deployment() -> TypeDef {
        TypeDef::new("apps", "v1", "Deployment", "deployments", true)
    }

    fn meta(name: &str) -> ObjectMeta {
        ObjectMeta {
            name: name.into(),
            namespace: "default".into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_refusal_should_name_the_qualified_kind_and_carry_every_failure_as_a_cause() {
        let mut bad = meta("Bad_Name");
        bad.labels.insert("app".into(), "-web".into());
        bad.owner_references.push(OwnerReference {
            api_version: "v1".into(),
            kind: "Event".into(),
            name: "e".into(),
            uid: "u".into(),
            ..Default::default()
        });
        let err = object_meta(&deployment(), "Bad_Name", &bad, Write::Create).expect_err("refused");
        assert_eq!(err.reason(), Some(StatusReason::Invalid));
        let ApiError::Status { message, .. } = &err else {
            panic!("{err:?}")
        };
        assert!(
            message.starts_with(
                "Deployment.apps \"Bad_Name\" is invalid: [metadata.name: Invalid value: \"Bad_Name\": a lowercase \
                 RFC 1123 subdomain must consist of"
            ),
            "{message}"
        );
        let causes: Vec<(&str, &str)> = err
            .causes()
            .iter()
            .map(|c| (c.field.as_str(), c.reason.as_str()))
            .collect();
        assert_eq!(
            causes,
            [
                ("metadata.name", "FieldValueInvalid"),
                ("metadata.labels", "FieldValueInvalid"),
                ("metadata.ownerReferences", "FieldValueInvalid"),
            ]
        );
        assert!(err.causes()[0]
            .message
            .starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123"));
    }

    #[test]
    fn an_update_should_not_check_the_name_again() {
        let old_style = meta("Upper");
        assert!(object_meta(&deployment(), "Upper", &old_style, Write::Create).is_err());
        assert_eq!(object_meta(&deployment(), "Upper", &old_style, Write::Update), Ok(()));
    }
}
