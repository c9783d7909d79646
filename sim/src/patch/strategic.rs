//! Strategic merge patch: maps merge recursively as in a JSON merge patch, and lists follow the
//! patch strategy their Go types declare, as the one table of list keys ([`super::lists`]) gives
//! it: keyed lists merge item by item, sets as sets, and every other list is replaced. That is what
//! `kubectl apply` needs to re-apply a changed manifest without dropping the fields it did not name.
//!
//! Directives: `{"$patch": "delete", "uid": X}` in `ownerReferences` deletes the element with UID X
//! (deleting an absent one is not an error), a `{"$patch": "replace"}` element makes the other
//! elements the whole list, `$deleteFromPrimitiveList/<field>` removes entries from a primitive
//! list, and `$patch: delete | replace` on a nested map deletes or replaces it. `$retainKeys` and
//! `$setElementOrder/<field>` are accepted and ignored: merged elements keep their place and new ones
//! are appended, which is the order `$setElementOrder` asks for whenever a patch only adds.

use super::lists::{list_rule, Level, ListRule};
use super::PatchError;
use serde_json::{Map, Value};

/// The directive key.
const PATCH: &str = "$patch";
/// Prefix of the "delete these entries from a primitive list" directive.
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
/// Prefix of the element-order directive kubectl sends.
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
/// The retain-keys directive.
const RETAIN_KEYS: &str = "$retainKeys";

/// Applies strategic merge patch `patch` to the object `doc` in place.
pub(super) fn strategic_merge(doc: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::Malformed(
            "strategic merge patch must be a JSON object".into(),
        ));
    };
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let service = doc.get("kind").and_then(Value::as_str) == Some("Service");
    match doc {
        Value::Object(target) => merge_map(target, patch, Level::Root, service),
        _ => Ok(()),
    }
}

fn merge_map(
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    level: Level,
    service: bool,
) -> Result<(), PatchError> {
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            delete_from_list(target, field, value)?;
        }
    }
    for (key, value) in patch {
        if key.starts_with('$') {
            check_directive(key, value)?;
        } else {
            merge_field(target, key, value, level, service)?;
        }
    }
    Ok(())
}

/// Accepts the directives this module knows; anything else is a malformed patch.
fn check_directive(key: &str, value: &Value) -> Result<(), PatchError> {
    let known = key == RETAIN_KEYS || key.starts_with(SET_ELEMENT_ORDER) || key.starts_with(DELETE_FROM_PRIMITIVE_LIST);
    match (key, value.as_str()) {
        (PATCH, Some("merge" | "replace" | "delete")) => Ok(()),
        (PATCH, _) => Err(PatchError::Malformed(format!("unknown patch type: {value}"))),
        _ if known => Ok(()),
        _ => Err(PatchError::Malformed(format!("unknown directive: {key}"))),
    }
}

fn merge_field(
    target: &mut Map<String, Value>,
    key: &str,
    value: &Value,
    level: Level,
    service: bool,
) -> Result<(), PatchError> {
    match value {
        Value::Null => {
            target.remove(key);
        }
        Value::Array(items) => {
            let merged = match list_rule(level, key) {
                ListRule::Keyed(merge_key, elements) => {
                    merge_keyed(target.get(key), items, merge_key, elements, service)?
                }
                ListRule::Set => merge_set(target.get(key), items),
                ListRule::Atomic => items.clone(),
            };
            target.insert(key.to_string(), Value::Array(merged));
        }
        Value::Object(fields) => match fields.get(PATCH).and_then(Value::as_str) {
            Some("delete") => {
                target.remove(key);
            }
            Some("replace") => {
                target.insert(key.to_string(), Value::Object(without_directives(fields)));
            }
            _ => {
                let child = target.entry(key.to_string()).or_insert(Value::Null);
                if !child.is_object() {
                    *child = Value::Object(Map::new());
                }
                if let Value::Object(child) = child {
                    merge_map(child, fields, level.child(key, service), service)?;
                }
            }
        },
        scalar => {
            target.insert(key.to_string(), scalar.clone());
        }
    }
    Ok(())
}

/// Merges a list of maps by `merge_key` (`mergeSlice` for maps): deletes first-class, matches merged
/// in place, new elements appended in patch order.
fn merge_keyed(
    original: Option<&Value>,
    items: &[Value],
    merge_key: &str,
    elements: Level,
    service: bool,
) -> Result<Vec<Value>, PatchError> {
    let is_replace_marker = |v: &Value| v.get(PATCH).and_then(Value::as_str) == Some("replace");
    if items.iter().any(is_replace_marker) {
        let rest = items.iter().filter(|v| !is_replace_marker(v));
        return Ok(rest.map(strip_directives).collect());
    }
    let mut merged = match original {
        Some(Value::Array(existing)) => existing.clone(),
        _ => Vec::new(),
    };
    for item in items {
        let Value::Object(fields) = item else {
            return Err(PatchError::Malformed(format!(
                "{item} is not a map: expected a merge by {merge_key}"
            )));
        };
        let Some(id) = fields.get(merge_key) else {
            return Err(PatchError::Malformed(format!(
                "map: {item} does not contain declared merge key: {merge_key}"
            )));
        };
        match fields.get(PATCH) {
            Some(Value::String(d)) if d == "delete" => merged.retain(|e| e.get(merge_key) != Some(id)),
            Some(other) if other.as_str() != Some("merge") => {
                return Err(PatchError::Malformed(format!("unknown patch type: {other}")));
            }
            _ => match merged.iter_mut().find(|e| e.get(merge_key) == Some(id)) {
                Some(Value::Object(existing)) => merge_map(existing, fields, elements, service)?,
                Some(existing) => *existing = Value::Object(without_directives(fields)),
                None => merged.push(Value::Object(without_directives(fields))),
            },
        }
    }
    Ok(merged)
}

/// Merges a primitive list as a set: the original then the patch, first occurrences kept.
fn merge_set(original: Option<&Value>, items: &[Value]) -> Vec<Value> {
    let existing = match original {
        Some(Value::Array(existing)) => existing.as_slice(),
        _ => &[],
    };
    let mut merged: Vec<Value> = Vec::with_capacity(existing.len() + items.len());
    for item in existing.iter().chain(items) {
        if !merged.contains(item) {
            merged.push(item.clone());
        }
    }
    merged
}

/// `$deleteFromPrimitiveList/<field>`: removes the listed entries from `target[field]`.
fn delete_from_list(target: &mut Map<String, Value>, field: &str, value: &Value) -> Result<(), PatchError> {
    let Value::Array(doomed) = value else {
        return Err(PatchError::Malformed(format!(
            "{DELETE_FROM_PRIMITIVE_LIST}{field} must be a list, got {value}"
        )));
    };
    if let Some(Value::Array(list)) = target.get_mut(field) {
        list.retain(|entry| !doomed.contains(entry));
    }
    Ok(())
}

fn without_directives(fields: &Map<String, Value>) -> Map<String, Value> {
    fields
        .iter()
        .filter(|(k, _)| !k.starts_with('$'))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn strip_directives(value: &Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(without_directives(fields)),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(mut doc: Value, patch: Value) -> Result<Value, PatchError> {
        strategic_merge(&mut doc, &patch).map(|()| doc)
    }

    fn refs(uids: &[&str]) -> Value {
        uids.iter().map(|u| json!({"uid": u, "name": u})).collect()
    }

    #[test]
    fn owner_references_should_merge_by_uid_and_delete_by_directive() {
        let doc = json!({"metadata": {"ownerReferences": refs(&["1", "2", "3"])}});
        let patch = json!({"metadata": {"ownerReferences": [
            {"$patch": "delete", "uid": "2"},
            {"$patch": "delete", "uid": "absent"},
            {"uid": "3", "blockOwnerDeletion": false},
            {"uid": "4", "name": "4"},
        ]}});
        let out = smp(doc, patch).expect("valid patch");
        assert_eq!(
            out["metadata"]["ownerReferences"],
            json!([
                {"uid": "1", "name": "1"},
                {"uid": "3", "name": "3", "blockOwnerDeletion": false},
                {"uid": "4", "name": "4"},
            ])
        );
    }

    #[test]
    fn finalizers_should_merge_as_a_set_and_honour_delete_from_primitive_list() {
        let doc = json!({"metadata": {"finalizers": ["a", "b"]}});
        let patch = json!({"metadata": {
            "finalizers": ["b", "c"],
            "$deleteFromPrimitiveList/finalizers": ["a"],
        }});
        let out = smp(doc, patch).expect("valid patch");
        assert_eq!(out["metadata"]["finalizers"], json!(["b", "c"]));
    }

    #[test]
    fn other_lists_should_be_replaced_and_maps_merged() {
        let doc = json!({"spec": {"items": [1, 2], "keep": true, "drop": 1}, "metadata": {"labels": {"a": "1"}}});
        let patch = json!({"spec": {"items": [3], "drop": null}, "metadata": {"labels": {"b": "2"}}});
        let out = smp(doc, patch).expect("valid patch");
        assert_eq!(out["spec"], json!({"items": [3], "keep": true}));
        assert_eq!(out["metadata"]["labels"], json!({"a": "1", "b": "2"}));
    }

    #[test]
    fn replace_marker_and_map_directives_should_apply() {
        let doc = json!({"metadata": {"ownerReferences": refs(&["1"])}, "spec": {"a": {"x": 1}, "b": {"y": 1}}});
        let patch = json!({
            "metadata": {"ownerReferences": [{"$patch": "replace"}, {"uid": "9", "name": "9"}]},
            "spec": {"a": {"$patch": "delete"}, "b": {"$patch": "replace", "z": 2}},
        });
        let out = smp(doc, patch).expect("valid patch");
        assert_eq!(out["metadata"]["ownerReferences"], refs(&["9"]));
        assert_eq!(out["spec"], json!({"b": {"z": 2}}));
    }

    #[test]
    fn malformed_bodies_should_be_rejected_without_panicking() {
        let doc = json!({"metadata": {"ownerReferences": refs(&["1"])}});
        for patch in [
            json!("not an object"),
            json!({"metadata": {"ownerReferences": ["not a map"]}}),
            json!({"metadata": {"ownerReferences": [{"$patch": "delete"}]}}),
            json!({"metadata": {"ownerReferences": [{"$patch": "explode", "uid": "1"}]}}),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}),
            json!({"metadata": {"$bogus": 1}}),
        ] {
            assert!(
                matches!(smp(doc.clone(), patch.clone()), Err(PatchError::Malformed(_))),
                "{patch}"
            );
        }
    }

    #[test]
    fn pod_template_lists_should_merge_by_their_keys_as_kubectl_apply_expects() {
        let deployment = json!({"kind": "Deployment", "spec": {"template": {"spec": {
            "containers": [
                {"name": "main", "image": "nginx:1", "ports": [{"containerPort": 80}],
                 "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                {"name": "sidecar", "image": "busybox"},
            ],
            "volumes": [{"name": "data", "emptyDir": {}}],
        }}}});
        // What `kubectl apply` sends when only the main image and one variable changed.
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "main"}, {"name": "sidecar"}],
            "containers": [{"name": "main", "image": "nginx:2", "env": [{"name": "B", "value": "3"}]}],
        }}}});
        let merged = smp(deployment, patch).expect("applies");
        let containers = &merged["spec"]["template"]["spec"]["containers"];
        assert_eq!(containers[0]["image"], "nginx:2");
        assert_eq!(
            containers[0]["ports"],
            json!([{"containerPort": 80}]),
            "untouched fields stay"
        );
        assert_eq!(
            containers[0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "3"}])
        );
        assert_eq!(
            containers[1],
            json!({"name": "sidecar", "image": "busybox"}),
            "the other container stays"
        );
        assert_eq!(
            merged["spec"]["template"]["spec"]["volumes"],
            json!([{"name": "data", "emptyDir": {}}])
        );
        let removed =
            json!({"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}}});
        let merged = smp(merged, removed).expect("applies");
        assert_eq!(
            merged["spec"]["template"]["spec"]["containers"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );
    }

    #[test]
    fn service_ports_should_merge_by_port_and_other_lists_be_replaced() {
        let service = json!({"kind": "Service", "spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443}],
                                                          "externalIPs": ["1.2.3.4"]}});
        let patch = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}], "externalIPs": ["5.6.7.8"]}});
        let merged = smp(service, patch).expect("applies");
        assert_eq!(
            merged["spec"]["ports"],
            json!([{"port": 80, "name": "http", "targetPort": 8080}, {"port": 443}])
        );
        assert_eq!(merged["spec"]["externalIPs"], json!(["5.6.7.8"]));
        let nameless = smp(json!({"spec": {}}), json!({"spec": {"containers": [{"image": "x"}]}}));
        assert!(nameless.is_err(), "a container without its merge key is malformed");
    }
}
