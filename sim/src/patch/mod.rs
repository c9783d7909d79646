//! PATCH: a patch is applied to the object's JSON form as read through the request's version, and
//! the result goes through exactly the same write path as an update.
//!
//! Server-side apply ([`apply`]) merges a configuration by field ownership rather than applying a
//! patch, and goes through the same write path.
//!
//! Three patch bodies are understood: JSON merge patch ([`merge`], RFC 7386), strategic merge patch
//! ([`strategic`], with the metadata list rules the GC relies on) and JSON patch ([`json`],
//! RFC 6902). Errors are sorted as the API server's patch handler sorts them: a body that is not a
//! patch of its type is 400 BadRequest; a JSON patch operation that cannot be applied, or a result
//! that is not an object, is 422 Invalid; a strategic merge patch of a custom type is 415.

mod apply;
mod json;
pub(super) mod lists;
mod merge;
mod strategic;

use super::status::{bad_request, invalid};
use super::store::{present, State};
use super::types::TypeDef;
use kube_gc::api::{ApiError, Gvr, PartialObjectMeta, PatchType, StatusReason};
use serde_json::Value;
use thiserror::Error;

/// Why a patch body could not be applied.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub(crate) enum PatchError {
    /// The body is not a patch of its declared type (400).
    #[error("{0}")]
    Malformed(String),
    /// A well-formed operation does not apply to this object (422).
    #[error("{0}")]
    NotApplicable(String),
}

/// What the API server answers for a strategic merge patch of a type without a Go schema.
const SMP_UNSUPPORTED: &str = "the body of the request was in an unknown format - accepted media types include: \
     application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

impl State {
    /// Patches an object; see [`super::SimCluster::patch_object`].
    pub(super) fn patch(
        &mut self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        body: &Value,
    ) -> Result<PartialObjectMeta, ApiError> {
        let mut w = self.writer(gvr)?;
        // The content type is checked before the object is looked up, as the handler does.
        if patch_type == PatchType::StrategicMerge && w.ty.def.custom {
            return Err(ApiError::status(StatusReason::UnsupportedMediaType, SMP_UNSUPPORTED));
        }
        let old = w.existing(namespace, name)?;
        let current = present(&old, gvr, &w.ty.def);
        let patched = apply(patch_type, &current, body).map_err(|e| match e {
            PatchError::Malformed(m) => bad_request(m),
            PatchError::NotApplicable(m) => invalid(&w.ty.def, name, m),
        })?;
        let new = decode_patched(&w.ty.def, &current, patched)?;
        let out = w.replace(&old, new)?;
        let out = present(&out, gvr, &w.ty.def);
        self.after_write(gvr);
        Ok(out)
    }
}

/// Applies `body` to `current`'s JSON form.
pub(crate) fn apply(patch_type: PatchType, current: &PartialObjectMeta, body: &Value) -> Result<Value, PatchError> {
    let mut doc = serde_json::to_value(current).map_err(|e| PatchError::NotApplicable(e.to_string()))?;
    match patch_type {
        PatchType::Merge => {
            if !body.is_object() {
                return Err(PatchError::Malformed("invalid JSON merge patch: not an object".into()));
            }
            merge::merge_patch(&mut doc, body);
        }
        PatchType::StrategicMerge => strategic::strategic_merge(&mut doc, body)?,
        PatchType::Json => json::apply(&mut doc, body)?,
    }
    Ok(doc)
}

/// Reads the patched document back, restoring the namespace a patch may not change (as
/// `EnsureObjectNamespaceMatchesRequestNamespace` and `checkName` do).
fn decode_patched(def: &TypeDef, current: &PartialObjectMeta, patched: Value) -> Result<PartialObjectMeta, ApiError> {
    let name = current.metadata.name.as_str();
    let mut new: PartialObjectMeta = serde_json::from_value(patched)
        .map_err(|e| invalid(def, name, format!("patch: Invalid value: the patched object: {e}")))?;
    if new.metadata.name != name {
        return Err(bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            new.metadata.name
        )));
    }
    let namespace = &current.metadata.namespace;
    if !def.namespaced || new.metadata.namespace.is_empty() {
        new.metadata.namespace.clone_from(namespace);
    } else if new.metadata.namespace != *namespace {
        return Err(bad_request(format!(
            "the namespace of the object ({}) does not match the namespace on the request ({namespace})",
            new.metadata.namespace
        )));
    }
    Ok(new)
}
