//! Ownership rules, table-driven on field sets: what an update or an apply leaves each manager.

use super::fieldset::{Comparison, FieldSet};
use super::{Author, Managers};
use crate::patch::lists::Shape;
use serde_json::{json, Value};

fn author(manager: &str) -> Author {
    Author {
        manager: manager.to_string(),
        api_version: "v1".to_string(),
    }
}

fn shape() -> Shape<'static> {
    Shape::root("ConfigMap", false, None)
}

fn set(object: Value) -> FieldSet {
    FieldSet::of_object(&object, shape())
}

/// `(manager, operation, fieldsV1)` of each entry.
fn entries(managers: &Managers) -> Vec<(String, String, Value)> {
    let list = managers.clone().encode();
    let entries = list.as_deref().and_then(Value::as_array).cloned().unwrap_or_default();
    entries
        .iter()
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (text("manager"), text("operation"), e["fieldsV1"].clone())
        })
        .collect()
}

fn entry(manager: &str, operation: &str, fields: Value) -> (String, String, Value) {
    (manager.to_string(), operation.to_string(), fields)
}

#[test]
fn updates_should_take_what_they_change_and_everyone_lose_what_is_removed() {
    struct Case {
        name: &'static str,
        before: Value,
        after: Value,
        author: Option<&'static str>,
        expected: Vec<(String, String, Value)>,
    }
    let start = json!({"data": {"a": "1", "b": "2"}});
    let cases = [
        Case {
            name: "an update takes the field it changes",
            before: start.clone(),
            after: json!({"data": {"a": "9", "b": "2"}}),
            author: Some("edit"),
            expected: vec![
                entry("apply", "Apply", json!({"f:data": {"f:b": {}}})),
                entry("edit", "Update", json!({"f:data": {"f:a": {}}})),
            ],
        },
        Case {
            name: "an update that changes nothing takes nothing",
            before: start.clone(),
            after: start.clone(),
            author: Some("edit"),
            expected: vec![entry("apply", "Apply", json!({"f:data": {"f:a": {}, "f:b": {}}}))],
        },
        Case {
            name: "a removal by no one drops the field from its owner",
            before: start.clone(),
            after: json!({"data": {"b": "2"}}),
            author: None,
            expected: vec![entry("apply", "Apply", json!({"f:data": {"f:b": {}}}))],
        },
        Case {
            name: "a change by no one takes nothing from the owner",
            before: start.clone(),
            after: json!({"data": {"a": "9", "b": "2"}}),
            author: None,
            expected: vec![entry("apply", "Apply", json!({"f:data": {"f:a": {}, "f:b": {}}}))],
        },
    ];
    for case in cases {
        let mut managers = Managers::default();
        let created = Comparison::of(None, &case.before, shape());
        managers
            .record_apply(&author("apply"), set(case.before.clone()), &created, false)
            .expect("no one to conflict with");
        let change = Comparison::of(Some(&case.before), &case.after, shape());
        managers.record_update(case.author.map(author).as_ref(), &change);
        assert_eq!(entries(&managers), case.expected, "{}", case.name);
    }
}

#[test]
fn applies_should_conflict_on_changed_fields_only_and_force_should_take_them() {
    let before = json!({"data": {"a": "1"}});
    let mut managers = Managers::default();
    managers.record_update(Some(&author("edit")), &Comparison::of(None, &before, shape()));

    let same = json!({"data": {"a": "1"}});
    let mut shared = managers.clone();
    shared
        .record_apply(
            &author("apply"),
            set(same.clone()),
            &Comparison::of(Some(&before), &same, shape()),
            false,
        )
        .expect("the same value is no conflict");
    assert_eq!(entries(&shared).len(), 2, "both own data.a: {:?}", entries(&shared));

    let changed = json!({"data": {"a": "2"}});
    let change = Comparison::of(Some(&before), &changed, shape());
    let err = managers
        .clone()
        .record_apply(&author("apply"), set(changed.clone()), &change, false)
        .expect_err("a changed field owned by another is a conflict");
    assert_eq!(err.causes()[0].field, ".data.a");
    assert!(
        err.to_string().contains("conflict with \"edit\" using v1: .data.a"),
        "{err}"
    );

    managers
        .record_apply(&author("apply"), set(changed), &change, true)
        .expect("forced");
    assert_eq!(
        entries(&managers),
        [entry("apply", "Apply", json!({"f:data": {"f:a": {}}}))]
    );
}

#[test]
fn entries_should_sort_appliers_first_and_drop_empty_ones() {
    let mut managers = Managers::default();
    let object = json!({"data": {"a": "1"}});
    managers.record_update(Some(&author("zed")), &Comparison::of(None, &object, shape()));
    let second = json!({"data": {"a": "1", "b": "2"}});
    managers
        .record_apply(
            &author("apply"),
            set(json!({"data": {"b": "2"}})),
            &Comparison::of(Some(&object), &second, shape()),
            false,
        )
        .expect("applies");
    let names: Vec<String> = entries(&managers).into_iter().map(|(m, _, _)| m).collect();
    assert_eq!(names, ["apply", "zed"]);
    let emptied = Comparison::of(Some(&second), &json!({}), shape());
    managers.record_update(None, &emptied);
    assert!(managers.encode().is_none(), "no entry owns anything any more");
}
