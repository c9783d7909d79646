//! DELETE: an object with finalizers left after the delete stays, marked with a deletionTimestamp;
//! one without goes at once.
//!
//! This is the registry's `Store.Delete` for a resource without graceful deletion: check the
//! preconditions, rewrite the GC finalizers as `deletionFinalizersForGarbageCollection` does, then
//! either mark the object as deleting (with `deletionGracePeriodSeconds: 0`) or remove it. A
//! second DELETE of an object already being deleted takes the same path, so it can add
//! `foregroundDeletion` or `orphan` again. Namespaces and CRDs wait for their contents
//! ([`super::lifecycle`]).

use super::lifecycle::{self, Container};
use super::status::conflict;
use super::store::{present, State, Writer};
use kube_gc::api::{
    ApiError, DeleteOptions, Gvr, PartialObjectMeta, Preconditions, PropagationPolicy, StatusReason, WatchEventType,
    FINALIZER_FOREGROUND, FINALIZER_ORPHAN,
};
use std::collections::BTreeSet;
use std::sync::Arc;

/// What a DELETE did.
#[derive(Clone, Debug, PartialEq)]
pub enum Deletion {
    /// The object stays, marked as deleting (finalizers hold it): as it is stored now.
    Marked(PartialObjectMeta),
    /// The object is gone: as it was last stored.
    Removed(PartialObjectMeta),
}

impl Deletion {
    /// The object, marked or as it was.
    pub fn object(&self) -> &PartialObjectMeta {
        match self {
            Deletion::Marked(o) | Deletion::Removed(o) => o,
        }
    }

    /// True when the object is gone.
    pub fn is_removed(&self) -> bool {
        matches!(self, Deletion::Removed(_))
    }
}

/// What a DELETE did, in stored form: the trait face, which answers with nothing, never pays for
/// a presented copy.
pub(super) enum Deleted {
    /// The object stays, marked as deleting: as it is stored now.
    Marked(Arc<PartialObjectMeta>),
    /// The object is gone: as it was last stored.
    Removed(Arc<PartialObjectMeta>),
}

impl State {
    /// Deletes an object; see [`super::SimCluster::delete_object`].
    pub(super) fn delete(
        &mut self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deletion, ApiError> {
        let deleted = self.delete_stored(gvr, namespace, name, opts)?;
        let def = &self.type_of(gvr)?.def;
        Ok(match deleted {
            Deleted::Marked(o) => Deletion::Marked(present(&o, gvr, def)),
            Deleted::Removed(o) => Deletion::Removed(present(&o, gvr, def)),
        })
    }

    /// [`delete`](Self::delete), answering with the stored object.
    pub(super) fn delete_stored(
        &mut self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let mut w = self.writer(gvr)?;
        validate_options(opts)?;
        let old = w.existing(namespace, name)?;
        if let Some(preconditions) = &opts.preconditions {
            check_preconditions(preconditions, &old)
                .map_err(|detail| conflict(&w.ty.def, name, &format!("Precondition failed: {detail}")))?;
        }
        let finalizers = deletion_finalizers(&old.metadata.finalizers, opts, w.ty.def.default_policy);
        let (out, container) = if finalizers.is_empty() && !lifecycle::is_container_type(gvr) {
            // The common case, with no copy of the object: nothing holds it, so it goes as it is.
            w.remove(namespace, name);
            (Deleted::Removed(old), None)
        } else {
            mark(&mut w, gvr, old, finalizers)
        };
        if let Some(container) = container {
            self.begin_termination(container);
        }
        self.after_write(gvr);
        Ok(out)
    }
}

/// Deletes `old`, which its `finalizers` (what the DELETE leaves of them) or its container rules
/// may hold: marked as deleting if anything holds it, removed if not. Also returns the container
/// whose termination the DELETE begins, if any.
fn mark(
    w: &mut Writer<'_>,
    gvr: &Gvr,
    old: Arc<PartialObjectMeta>,
    finalizers: Vec<String>,
) -> (Deleted, Option<Container>) {
    let mut marked = PartialObjectMeta::clone(&old);
    marked.metadata.finalizers = finalizers;
    let container = lifecycle::mark_for_deletion(gvr, &mut marked);
    let held = lifecycle::held_by_spec(&gvr.group, &gvr.resource, &marked);
    if marked.metadata.finalizers.is_empty() && !held {
        w.remove(&old.metadata.namespace, &old.metadata.name);
        return (Deleted::Removed(old), container);
    }
    let meta = &mut marked.metadata;
    meta.deletion_timestamp
        .get_or_insert_with(kube_gc::api::time::now_rfc3339);
    // Held by finalizers alone, an object is given no grace period.
    meta.deletion_grace_period_seconds.get_or_insert(0);
    // Nothing to write when the object was already marked the same way: etcd skips no-op
    // updates.
    let stored = if marked == *old {
        old
    } else {
        w.store(marked, WatchEventType::Modified)
    };
    (Deleted::Marked(stored), container)
}

/// `ValidateDeleteOptions`: the legacy flag and the policy are mutually exclusive.
fn validate_options(opts: &DeleteOptions) -> Result<(), ApiError> {
    match (opts.orphan_dependents, opts.propagation_policy) {
        (Some(_), Some(policy)) => Err(ApiError::status(
            StatusReason::Invalid,
            format!(
                "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: {:?}: \
                 orphanDependents and deletionPropagation cannot be both set",
                policy.as_str()
            ),
        )),
        _ => Ok(()),
    }
}

/// `Preconditions.Check`: UID first, then resourceVersion. Returns the failure's detail.
fn check_preconditions(preconditions: &Preconditions, obj: &PartialObjectMeta) -> Result<(), String> {
    if let Some(uid) = &preconditions.uid {
        if *uid != obj.metadata.uid {
            return Err(format!(
                "UID in precondition: {uid}, UID in object meta: {}",
                obj.metadata.uid
            ));
        }
    }
    if let Some(rv) = &preconditions.resource_version {
        if *rv != obj.metadata.resource_version {
            return Err(format!(
                "ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                obj.metadata.resource_version
            ));
        }
    }
    Ok(())
}

/// The finalizers an object has once deleted with `opts` (`deletionFinalizersForGarbageCollection`):
/// the GC finalizers are dropped and re-added as the options decide. When the result holds the same
/// set as before, the existing list is kept as it was, order included.
pub(super) fn deletion_finalizers(
    existing: &[String],
    opts: &DeleteOptions,
    default_policy: PropagationPolicy,
) -> Vec<String> {
    let mut next: Vec<String> = existing
        .iter()
        .filter(|f| *f != FINALIZER_ORPHAN && *f != FINALIZER_FOREGROUND)
        .cloned()
        .collect();
    if should_orphan(existing, opts, default_policy) {
        next.push(FINALIZER_ORPHAN.to_string());
    }
    if should_foreground(existing, opts) {
        next.push(FINALIZER_FOREGROUND.to_string());
    }
    let old_set: BTreeSet<&String> = existing.iter().collect();
    let new_set: BTreeSet<&String> = next.iter().collect();
    if old_set == new_set {
        existing.to_vec()
    } else {
        next
    }
}

/// `shouldOrphanDependents`: the legacy flag, then the policy, then the first GC finalizer on the
/// object, then the type's default.
fn should_orphan(existing: &[String], opts: &DeleteOptions, default_policy: PropagationPolicy) -> bool {
    if let Some(orphan) = opts.orphan_dependents {
        return orphan;
    }
    if let Some(policy) = opts.propagation_policy {
        return policy == PropagationPolicy::Orphan;
    }
    let decided = existing.iter().find_map(|f| match f.as_str() {
        FINALIZER_ORPHAN => Some(true),
        FINALIZER_FOREGROUND => Some(false),
        _ => None,
    });
    decided.unwrap_or(default_policy == PropagationPolicy::Orphan)
}

/// `shouldDeleteDependents`: any legacy flag means no, then the policy, then the object's own
/// `foregroundDeletion` finalizer. The type's default never asks for foreground.
fn should_foreground(existing: &[String], opts: &DeleteOptions) -> bool {
    if opts.orphan_dependents.is_some() {
        return false;
    }
    match opts.propagation_policy {
        Some(policy) => policy == PropagationPolicy::Foreground,
        None => existing.iter().any(|f| f == FINALIZER_FOREGROUND),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fins(list: &[&str]) -> Vec<String> {
        list.iter().map(|f| f.to_string()).collect()
    }

    fn policy(p: PropagationPolicy) -> DeleteOptions {
        DeleteOptions {
            propagation_policy: Some(p),
            ..Default::default()
        }
    }

    #[test]
    fn deletion_finalizers_should_follow_flag_then_policy_then_finalizers_then_default() {
        use PropagationPolicy::*;
        let none = DeleteOptions::default();
        let legacy = |b| DeleteOptions {
            orphan_dependents: Some(b),
            ..Default::default()
        };
        assert_eq!(deletion_finalizers(&[], &none, Background), fins(&[]));
        assert_eq!(deletion_finalizers(&[], &none, Orphan), fins(&["orphan"]));
        assert_eq!(
            deletion_finalizers(&[], &policy(Foreground), Orphan),
            fins(&["foregroundDeletion"])
        );
        assert_eq!(
            deletion_finalizers(&fins(&["orphan"]), &legacy(false), Orphan),
            fins(&[])
        );
        assert_eq!(deletion_finalizers(&[], &legacy(true), Background), fins(&["orphan"]));
        assert_eq!(
            deletion_finalizers(&fins(&["foregroundDeletion"]), &none, Orphan),
            fins(&["foregroundDeletion"])
        );
        assert_eq!(
            deletion_finalizers(&fins(&["x/y", "orphan"]), &policy(Foreground), Background),
            fins(&["x/y", "foregroundDeletion"])
        );
    }

    #[test]
    fn deletion_finalizers_should_keep_the_existing_order_when_the_set_is_unchanged() {
        let existing = fins(&["foregroundDeletion", "x/y"]);
        let out = deletion_finalizers(
            &existing,
            &policy(PropagationPolicy::Foreground),
            PropagationPolicy::Background,
        );
        assert_eq!(out, existing);
    }
}
