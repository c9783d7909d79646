//! Sets of field paths, as `managedFields` record them (the `FieldsV1` trie), and the walks that
//! relate them to objects: the set of fields an object sets, what changed between two objects,
//! and the removal of a set of fields from an object.
//!
//! A path is a list of steps written as `FieldsV1` writes them: `f:<name>` for the field of a map,
//! `k:<json>` for the item of an associative list with those key fields, `v:<json>` for the item
//! of a set. A node of the trie is a *member* when the path to it is in the set; its children are
//! the longer paths. Only members have meaning, so a node with no member at or below it is never
//! kept.
//!
//! Which paths an object sets follows the structured-merge-diff rules, with the object's
//! [`Shape`] telling lists apart: a scalar, a null, an empty map and an atomic list are members;
//! a non-empty map is not (its fields are); every item of a keyed list or a set is a member, and
//! a keyed item's fields are members below it. Map fields are not told from map entries (Go
//! structs from `map[string]…`), so a non-empty object-valued entry is not a member itself, where
//! upstream would make it one.

use crate::patch::lists::{ListKind, Shape};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// What `FieldsV1` writes for "the path to this node is a member" when the node has children.
const SELF: &str = ".";

/// Fields the server sets or that name the object: never owned by anyone, as upstream strips
/// them before it tracks ownership.
const UNOWNED_METADATA: [&str; 10] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "selfLink",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// A set of field paths; see the [module docs](self).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldSet {
    member: bool,
    children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    /// True when the set holds no path.
    pub(crate) fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    /// Adds `path`.
    pub(crate) fn insert(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.member = true,
            Some((step, rest)) => self.children.entry(step.clone()).or_default().insert(rest),
        }
    }

    /// The node at `path`: present when `path` or a path below it is in the set.
    pub(crate) fn at(&self, path: &[String]) -> Option<&FieldSet> {
        match path.split_first() {
            None => Some(self),
            Some((step, rest)) => self.children.get(step)?.at(rest),
        }
    }

    /// Adds every path of `other`.
    pub(crate) fn union(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (step, theirs) in &other.children {
            self.children.entry(step.clone()).or_default().union(theirs);
        }
    }

    /// The paths of `self` that are not in `other`.
    pub(crate) fn difference(&self, other: &FieldSet) -> FieldSet {
        self.combine(other, |mine, theirs| mine && !theirs, false)
    }

    /// The paths in both sets.
    pub(crate) fn intersection(&self, other: &FieldSet) -> FieldSet {
        self.combine(other, |mine, theirs| mine && theirs, true)
    }

    /// Walks both tries together, keeping the nodes whose membership `keep` decides; `both` says
    /// whether a step of `self` that `other` lacks is dropped (intersection) or kept (difference).
    fn combine(&self, other: &FieldSet, keep: fn(bool, bool) -> bool, both: bool) -> FieldSet {
        let empty = FieldSet::default();
        let mut out = FieldSet {
            member: keep(self.member, other.member),
            children: BTreeMap::new(),
        };
        for (step, mine) in &self.children {
            let theirs = match other.children.get(step) {
                Some(theirs) => theirs,
                None if both => continue,
                None => &empty,
            };
            let child = mine.combine(theirs, keep, both);
            if !child.is_empty() {
                out.children.insert(step.clone(), child);
            }
        }
        out
    }

    /// Every path in the set, in order.
    pub(crate) fn paths(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (step, child) in &self.children {
            prefix.push(step.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The set as `fieldsV1` JSON.
    pub(crate) fn to_fields_v1(&self) -> Value {
        let mut out = Map::new();
        if self.member && !self.children.is_empty() {
            out.insert(SELF.to_string(), Value::Object(Map::new()));
        }
        for (step, child) in &self.children {
            out.insert(step.clone(), child.to_fields_v1());
        }
        Value::Object(out)
    }

    /// The set `fieldsV1` JSON describes; what is not a map of steps is no path.
    pub(crate) fn from_fields_v1(fields: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        let Value::Object(map) = fields else {
            return set;
        };
        for (step, child) in map {
            if step == SELF {
                set.member = true;
                continue;
            }
            let mut node = FieldSet::from_fields_v1(child);
            if node.children.is_empty() {
                node.member = true;
            }
            set.children.insert(step.clone(), node);
        }
        set
    }

    /// The set of fields `object` sets, with the fields no one owns left out.
    pub(crate) fn of_object(object: &Value, shape: Shape<'_>) -> FieldSet {
        let mut set = FieldSet::default();
        if let Value::Object(map) = object {
            collect_map(map, shape, &mut set);
        }
        for top in ["apiVersion", "kind"] {
            set.children.remove(&field_step(top));
        }
        if let Some(metadata) = set.children.get_mut(&field_step("metadata")) {
            for field in UNOWNED_METADATA {
                metadata.children.remove(&field_step(field));
            }
        }
        set.prune();
        set
    }

    /// Drops the nodes with no member at or below them.
    fn prune(&mut self) {
        for child in self.children.values_mut() {
            child.prune();
        }
        self.children.retain(|_, child| !child.is_empty());
    }
}

/// The step to the field `name` of a map.
fn field_step(name: &str) -> String {
    format!("f:{name}")
}

/// The step to a set's item `value`.
fn value_step(value: &Value) -> String {
    format!("v:{value}")
}

/// The step to an associative list's `item`, which must be a map holding every one of `keys`.
pub(crate) fn key_step(item: &Value, keys: &[String]) -> Result<String, String> {
    let Value::Object(fields) = item else {
        return Err(format!("element {item} is not a map, in an associative list"));
    };
    let mut key = Map::new();
    for name in keys {
        match fields.get(name) {
            Some(value) if !value.is_null() => {
                key.insert(name.clone(), value.clone());
            }
            _ => {
                return Err(format!(
                    "associative list with keys has an element that omits key field {name:?}"
                ))
            }
        }
    }
    Ok(format!("k:{}", Value::Object(key)))
}

/// The steps of a keyed list's items, or why they cannot be told apart.
pub(crate) fn item_steps(items: &[Value], keys: &[String]) -> Result<Vec<String>, String> {
    let mut steps: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let step = key_step(item, keys)?;
        if steps.contains(&step) {
            return Err(format!("duplicate entries for key {}", &step[2..]));
        }
        steps.push(step);
    }
    Ok(steps)
}

fn collect_map(map: &Map<String, Value>, shape: Shape<'_>, set: &mut FieldSet) {
    for (key, value) in map {
        let node = set.children.entry(field_step(key)).or_default();
        collect_field(key, value, shape, node);
    }
}

/// The paths below the field `key` (of a map at `shape`) holding `value`, into `node`.
fn collect_field(key: &str, value: &Value, shape: Shape<'_>, node: &mut FieldSet) {
    match value {
        Value::Object(map) if !map.is_empty() => collect_map(map, shape.field(key), node),
        Value::Array(items) => match shape.list(key) {
            ListKind::Atomic => node.member = true,
            ListKind::Set => {
                for item in items {
                    node.children.entry(value_step(item)).or_default().member = true;
                }
            }
            // An associative list whose items cannot be told apart is owned whole.
            ListKind::Map(keys) => match item_steps(items, &keys) {
                Err(_) => node.member = true,
                Ok(steps) => {
                    for (step, item) in steps.into_iter().zip(items) {
                        let child = node.children.entry(step).or_default();
                        child.member = true;
                        if let Value::Object(fields) = item {
                            collect_map(fields, shape.item(key), child);
                        }
                    }
                }
            },
        },
        _ => node.member = true,
    }
}

/// The value at `path` in `object`, if it has one.
fn value_at<'v>(object: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(object, |value, step| child_value(value, step))
}

fn child_value<'v>(value: &'v Value, step: &str) -> Option<&'v Value> {
    match (value, step.split_at_checked(2)?) {
        (Value::Object(map), ("f:", name)) => map.get(name),
        (Value::Array(items), ("k:", _) | ("v:", _)) => items.iter().find(|item| item_matches(item, step)),
        _ => None,
    }
}

/// Whether a list's `item` is the one `step` names.
fn item_matches(item: &Value, step: &str) -> bool {
    match step.split_at_checked(2) {
        Some(("v:", _)) => value_step(item) == step,
        Some(("k:", key)) => match serde_json::from_str::<Map<String, Value>>(key) {
            Ok(key) => key.iter().all(|(name, value)| item.get(name) == Some(value)),
            Err(_) => false,
        },
        _ => false,
    }
}

/// What changed from one object to the next, in paths (structured-merge-diff's comparison).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Comparison {
    /// Paths the new object sets and the old one did not.
    pub(crate) added: FieldSet,
    /// Paths both set, to different values.
    pub(crate) modified: FieldSet,
    /// Paths the old object set and the new one does not.
    pub(crate) removed: FieldSet,
}

impl Comparison {
    /// Compares `old` (`None`: nothing) with `new`, both of the shape `shape`.
    pub(crate) fn of(old: Option<&Value>, new: &Value, shape: Shape<'_>) -> Comparison {
        let before = old.map_or_else(FieldSet::default, |old| FieldSet::of_object(old, shape));
        let after = FieldSet::of_object(new, shape);
        let mut modified = FieldSet::default();
        if let Some(old) = old {
            for path in before.intersection(&after).paths() {
                let leaf = |set: &FieldSet| set.at(&path).is_some_and(|node| node.children.is_empty());
                if leaf(&before) && leaf(&after) && value_at(old, &path) != value_at(new, &path) {
                    modified.insert(&path);
                }
            }
        }
        Comparison {
            added: after.difference(&before),
            removed: before.difference(&after),
            modified,
        }
    }

    /// The paths whose value the change set: added or modified.
    pub(crate) fn changed(&self) -> FieldSet {
        let mut changed = self.added.clone();
        changed.union(&self.modified);
        changed
    }

    /// True when nothing changed.
    pub(crate) fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }
}

/// Removes every path of `doomed` from `value`: a field from its map, an item from its list. A map
/// or list this empties is removed in turn, as the fields of a Go struct that is left empty are.
pub(crate) fn remove_paths(value: &mut Value, doomed: &FieldSet) {
    for (step, node) in &doomed.children {
        match value {
            Value::Object(map) => {
                let Some(name) = step.strip_prefix("f:") else {
                    continue;
                };
                if node.member {
                    map.remove(name);
                } else if let Some(child) = map.get_mut(name) {
                    remove_paths(child, node);
                    if is_emptied(child) {
                        map.remove(name);
                    }
                }
            }
            Value::Array(items) => {
                let Some(index) = items.iter().position(|item| item_matches(item, step)) else {
                    continue;
                };
                if node.member {
                    items.remove(index);
                } else {
                    remove_paths(&mut items[index], node);
                }
            }
            _ => {}
        }
    }
}

fn is_emptied(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

/// `path` as upstream prints it in a conflict: `.spec.replicas`,
/// `.spec.template.spec.containers[name="app"].image`, `.metadata.finalizers[="x"]`.
pub(crate) fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for step in path {
        match step.split_at_checked(2) {
            Some(("f:", name)) => {
                out.push('.');
                out.push_str(name);
            }
            Some(("k:", key)) => {
                let fields: Vec<String> = match serde_json::from_str::<Map<String, Value>>(key) {
                    Ok(key) => key.iter().map(|(name, value)| format!("{name}={value}")).collect(),
                    Err(_) => vec![key.to_string()],
                };
                out.push_str(&format!("[{}]", fields.join(",")));
            }
            Some(("v:", value)) => out.push_str(&format!("[={value}]")),
            _ => out.push_str(&format!("[{step}]")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Shape<'static> {
        Shape::root("Deployment", false, None)
    }

    fn path(steps: &[&str]) -> Vec<String> {
        steps.iter().map(|s| s.to_string()).collect()
    }

    fn contains(set: &FieldSet, path: &[String]) -> bool {
        set.at(path).is_some_and(|node| node.member)
    }

    #[test]
    fn the_fields_of_an_object_should_follow_the_fields_v1_rules() {
        let object = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns", "uid": "u", "labels": {"app": "web"},
                         "finalizers": ["a"]},
            "spec": {"replicas": 2, "selector": {}, "template": {"spec": {
                "containers": [{"name": "app", "image": "nginx", "args": ["-v"]}]}}},
        });
        let fields = FieldSet::of_object(&object, deployment()).to_fields_v1();
        assert_eq!(
            fields,
            json!({
                "f:metadata": {"f:labels": {"f:app": {}}, "f:finalizers": {"v:\"a\"": {}}},
                "f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"app\"}": {".": {}, "f:args": {}, "f:image": {}, "f:name": {}}}}}},
            })
        );
        let back = FieldSet::from_fields_v1(&fields);
        assert_eq!(back, FieldSet::of_object(&object, deployment()), "FieldsV1 round-trips");
    }

    #[test]
    fn set_operations_should_keep_only_nodes_with_members() {
        let mut a = FieldSet::default();
        a.insert(&path(&["f:spec", "f:replicas"]));
        a.insert(&path(&["f:spec", "f:paused"]));
        let mut b = FieldSet::default();
        b.insert(&path(&["f:spec", "f:replicas"]));
        let only_a = a.difference(&b);
        assert_eq!(only_a.paths(), vec![path(&["f:spec", "f:paused"])]);
        assert_eq!(a.intersection(&b), b);
        assert!(b.difference(&a).is_empty());
        assert!(a.at(&path(&["f:spec"])).is_some() && !contains(&a, &path(&["f:spec"])));
    }

    #[test]
    fn comparisons_should_tell_added_modified_and_removed_leaves() {
        let old = json!({"spec": {"replicas": 1, "paused": true, "template": {"spec": {"containers": [
            {"name": "a", "image": "x"}]}}}});
        let new = json!({"spec": {"replicas": 2, "minReadySeconds": 5, "template": {"spec": {"containers": [
            {"name": "a", "image": "y"}, {"name": "b", "image": "z"}]}}}});
        let cmp = Comparison::of(Some(&old), &new, deployment());
        let shown = |set: &FieldSet| set.paths().iter().map(|p| display_path(p)).collect::<Vec<_>>();
        assert_eq!(
            shown(&cmp.modified),
            [".spec.replicas", ".spec.template.spec.containers[name=\"a\"].image"]
        );
        assert_eq!(shown(&cmp.removed), [".spec.paused"]);
        assert_eq!(
            shown(&cmp.added),
            [
                ".spec.minReadySeconds",
                ".spec.template.spec.containers[name=\"b\"]",
                ".spec.template.spec.containers[name=\"b\"].image",
                ".spec.template.spec.containers[name=\"b\"].name",
            ]
        );
        assert!(Comparison::of(Some(&new), &new, deployment()).is_same());
    }

    #[test]
    fn removing_paths_should_drop_fields_items_and_the_maps_they_empty() {
        let mut object = json!({"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1"}},
            "spec": {"strategy": {"type": "Recreate"}, "template": {"spec": {"containers": [
                {"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}}});
        let mut doomed = FieldSet::default();
        doomed.insert(&path(&["f:metadata", "f:finalizers", "v:\"a\""]));
        doomed.insert(&path(&["f:metadata", "f:labels", "f:x"]));
        doomed.insert(&path(&["f:spec", "f:strategy", "f:type"]));
        doomed.insert(&path(&[
            "f:spec",
            "f:template",
            "f:spec",
            "f:containers",
            "k:{\"name\":\"b\"}",
        ]));
        doomed.insert(&path(&["f:spec", "f:absent"]));
        remove_paths(&mut object, &doomed);
        assert_eq!(
            object,
            json!({"metadata": {"finalizers": ["b"]},
                   "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}})
        );
    }

    #[test]
    fn keyed_items_should_need_their_keys_and_differ_in_them() {
        let keys = vec!["name".to_string()];
        assert_eq!(
            item_steps(&[json!({"name": "a"})], &keys).unwrap(),
            ["k:{\"name\":\"a\"}"]
        );
        assert!(item_steps(&[json!({"image": "a"})], &keys)
            .unwrap_err()
            .contains("omits key field \"name\""));
        assert!(item_steps(&[json!({"name": "a"}), json!({"name": "a"})], &keys)
            .unwrap_err()
            .contains("duplicate entries"));
        assert!(item_steps(&[json!("a")], &keys).is_err());
        let lenient = FieldSet::of_object(&json!({"spec": {"containers": [{"image": "a"}]}}), deployment());
        assert!(
            contains(&lenient, &path(&["f:spec", "f:containers"])),
            "owned whole when keys are missing"
        );
    }

    #[test]
    fn display_path_should_print_as_upstream_does() {
        let p = path(&["f:spec", "f:ports", "k:{\"port\":80,\"protocol\":\"TCP\"}", "f:name"]);
        assert_eq!(display_path(&p), ".spec.ports[port=80,protocol=\"TCP\"].name");
        assert_eq!(
            display_path(&path(&["f:metadata", "f:finalizers", "v:\"x\""])),
            ".metadata.finalizers[=\"x\"]"
        );
    }
}
