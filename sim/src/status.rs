//! The failures the simulated cluster answers with, worded as the API server words them, so that a
//! log line from a test reads like one from a real cluster. Callers classify them by reason only.

use super::types::TypeDef;
use kube_gc::api::field::aggregate;
use kube_gc::api::{ApiError, FieldError, Gvr, StatusCause, StatusObject, StatusReason};

/// The registry's optimistic-concurrency message (`OptimisticLockErrorMsg`).
pub(super) const OPTIMISTIC_LOCK: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// 404 for a group, version or resource that is not served.
pub(super) fn resource_not_found(gvr: &Gvr) -> ApiError {
    ApiError::status(
        StatusReason::NotFound,
        format!("the server could not find the requested resource ({gvr})"),
    )
}

/// 404 for a missing object.
pub(super) fn not_found(def: &TypeDef, name: &str) -> ApiError {
    ApiError::status(
        StatusReason::NotFound,
        format!("{} {name:?} not found", def.qualified_resource()),
    )
}

/// 409 AlreadyExists from create.
pub(super) fn already_exists(def: &TypeDef, name: &str) -> ApiError {
    ApiError::status(
        StatusReason::AlreadyExists,
        format!("{} {name:?} already exists", def.qualified_resource()),
    )
}

/// 409 Conflict: a precondition or the resourceVersion did not match.
pub(super) fn conflict(def: &TypeDef, name: &str, detail: &str) -> ApiError {
    ApiError::status(
        StatusReason::Conflict,
        format!(
            "Operation cannot be fulfilled on {} {name:?}: {detail}",
            def.qualified_resource()
        ),
    )
}

/// 422 Invalid: the write would produce an object validation rejects.
pub(super) fn invalid(def: &TypeDef, name: &str, detail: impl std::fmt::Display) -> ApiError {
    ApiError::status(
        StatusReason::Invalid,
        format!("{} {name:?} is invalid: {detail}", qualified_kind(def)),
    )
}

/// 422 Invalid for the failures of `errors`, each also a cause, about the object `name` of type
/// `def`, as `NewInvalid` makes it.
pub(super) fn invalid_fields(def: &TypeDef, name: &str, errors: &[FieldError]) -> ApiError {
    let causes = errors
        .iter()
        .map(|e| StatusCause {
            reason: e.cause_type().to_string(),
            message: e.body(),
            field: e.field.clone(),
        })
        .collect();
    let object = StatusObject {
        name: name.to_string(),
        group: def.group.clone(),
        kind: def.kind.clone(),
    };
    invalid(def, name, aggregate(errors))
        .with_causes(causes)
        .with_object(object)
}

/// The kind as a 422 names it: `Pod`, `Deployment.apps`.
fn qualified_kind(def: &TypeDef) -> String {
    if def.group.is_empty() {
        def.kind.clone()
    } else {
        format!("{}.{}", def.kind, def.group)
    }
}

/// 400 BadRequest.
pub(super) fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError::status(StatusReason::BadRequest, message)
}
