//! The exact bodies the collector sends (spec §6). Each is a pure function of its inputs, so the
//! wire format is tested here, apart from any worker logic.

use crate::api::OwnerReference;
use crate::graph::{OwnerRef, Uid};
use serde_json::{json, Value};

/// §6.1: strategic merge patch deleting the refs to `owner_uids` from the dependent with
/// `dependent_uid`. The uid makes the server reject the patch (422) if the name now belongs to a
/// recreated object. Deleting a ref that is not there is not an error.
pub fn delete_owner_refs_smp(dependent_uid: &Uid, owner_uids: &[Uid]) -> Value {
    let refs: Vec<Value> = owner_uids
        .iter()
        .map(|u| json!({"$patch": "delete", "uid": u.to_string()}))
        .collect();
    json!({"metadata": {"uid": dependent_uid.to_string(), "ownerReferences": refs}})
}

/// §6.2: the JSON-merge fallback of [`delete_owner_refs_smp`], for resources that answer 415.
/// `refs` and `resource_version` come from one reading of the object (a GET, or the graph's last
/// observation); the resourceVersion makes it an optimistic-concurrency write.
pub fn delete_owner_refs_merge(resource_version: &str, refs: &[OwnerRef], owner_uids: &[Uid]) -> Value {
    let remaining: Vec<OwnerReference> = refs
        .iter()
        .filter(|r| !owner_uids.contains(&r.uid))
        .map(OwnerRef::to_wire)
        .collect();
    json!({"metadata": {"resourceVersion": resource_version, "ownerReferences": null_if_empty(&remaining)}})
}

/// §6.3: strategic merge patch setting `blockOwnerDeletion: false` on every ref of the graph node
/// that blocks its owner.
pub fn unblock_owner_refs_smp(uid: &Uid, owners: &[OwnerRef]) -> Value {
    let refs: Vec<OwnerReference> = owners
        .iter()
        .filter(|r| r.blocks_owner_deletion())
        .map(unblocked)
        .collect();
    let mut metadata = json!({"uid": uid.to_string()});
    if !refs.is_empty() {
        metadata["ownerReferences"] = json!(refs);
    }
    json!({"metadata": metadata})
}

/// §6.4: the JSON-merge fallback of [`unblock_owner_refs_smp`]: every graph owner, each unblocked.
pub fn unblock_owner_refs_merge(resource_version: &str, owners: &[OwnerRef]) -> Value {
    let refs: Vec<OwnerReference> = owners.iter().map(unblocked).collect();
    json!({"metadata": {"resourceVersion": resource_version, "ownerReferences": null_if_empty(&refs)}})
}

/// §6.5: JSON merge patch leaving `remaining` as the finalizers, at `resource_version`.
pub fn remove_finalizer_merge(resource_version: &str, remaining: &[String]) -> Value {
    json!({"metadata": {"resourceVersion": resource_version, "finalizers": null_if_empty(remaining)}})
}

/// `patch` conditioned on `resource_version`, when it is known: the server refuses it (409) once
/// the object has changed since that version, whatever the patch's type.
pub fn at_resource_version(mut patch: Value, resource_version: &str) -> Value {
    if !resource_version.is_empty() {
        patch["metadata"]["resourceVersion"] = json!(resource_version);
    }
    patch
}

fn unblocked(r: &OwnerRef) -> OwnerReference {
    OwnerReference {
        block_owner_deletion: Some(false),
        ..r.to_wire()
    }
}

/// An empty list is sent as `null`, as Go marshals a nil slice; a merge patch then clears the
/// field.
fn null_if_empty<T: serde::Serialize>(items: &[T]) -> Value {
    if items.is_empty() {
        Value::Null
    } else {
        json!(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Name, Sym, TypeMeta};

    fn owner(uid: &str, block: Option<bool>) -> OwnerRef {
        OwnerRef::new(
            TypeMeta::new(Sym::new("v1"), Sym::new("ReplicationController")),
            Name::new(&format!("rc-{uid}")),
            Uid::parse(uid),
            None,
            block,
        )
    }

    #[test]
    fn delete_owner_ref_patch_should_remove_only_the_named_uids() {
        let body = delete_owner_refs_smp(&Uid::parse("100"), &[Uid::parse("2"), Uid::parse("3")]);
        assert_eq!(
            body,
            json!({"metadata": {"uid": "100", "ownerReferences": [
                {"$patch": "delete", "uid": "2"}, {"$patch": "delete", "uid": "3"}]}})
        );
        let refs: Vec<OwnerRef> = ["1", "2", "3"].iter().map(|u| owner(u, None)).collect();
        let merge = delete_owner_refs_merge("7", &refs, &[Uid::parse("2"), Uid::parse("3")]);
        assert_eq!(
            merge,
            json!({"metadata": {"resourceVersion": "7", "ownerReferences": [refs[0].to_wire()]}})
        );
        let all_gone = delete_owner_refs_merge("7", &refs[..1], &[Uid::parse("1")]);
        assert_eq!(
            all_gone,
            json!({"metadata": {"resourceVersion": "7", "ownerReferences": null}})
        );
    }

    #[test]
    fn unblock_owner_reference_patch_should_set_block_owner_deletion_false_on_blocking_refs_only() {
        let owners = [owner("1", Some(true)), owner("2", Some(false)), owner("3", None)];
        let body = unblock_owner_refs_smp(&Uid::parse("100"), &owners);
        let expected_ref = OwnerReference {
            block_owner_deletion: Some(false),
            ..owners[0].to_wire()
        };
        assert_eq!(
            body,
            json!({"metadata": {"uid": "100", "ownerReferences": [expected_ref]}})
        );
        let merge = unblock_owner_refs_merge("9", &owners);
        let refs = merge["metadata"]["ownerReferences"]
            .as_array()
            .expect("a list of refs")
            .clone();
        assert_eq!(refs.len(), 3);
        assert!(refs.iter().all(|r| r["blockOwnerDeletion"] == json!(false)));
        assert_eq!(merge["metadata"]["resourceVersion"], json!("9"));
    }

    #[test]
    fn remove_finalizer_body_should_send_null_when_no_finalizer_remains() {
        assert_eq!(
            remove_finalizer_merge("5", &["x/y".to_string()]),
            json!({"metadata": {"resourceVersion": "5", "finalizers": ["x/y"]}})
        );
        assert_eq!(
            remove_finalizer_merge("5", &[]),
            json!({"metadata": {"resourceVersion": "5", "finalizers": null}})
        );
    }

    #[test]
    fn a_patch_at_a_resource_version_should_carry_it_beside_its_uid_and_only_when_known() {
        let smp = delete_owner_refs_smp(&Uid::parse("d"), &[Uid::parse("o")]);
        let at = at_resource_version(smp.clone(), "42");
        assert_eq!(at["metadata"]["resourceVersion"], json!("42"));
        assert_eq!(at["metadata"]["uid"], smp["metadata"]["uid"]);
        assert_eq!(at["metadata"]["ownerReferences"], smp["metadata"]["ownerReferences"]);
        assert_eq!(
            at_resource_version(smp.clone(), ""),
            smp,
            "an unknown version adds nothing"
        );
    }
}
