//! RFC 6902 JSON patch: the operations run in order on one document, and any failure leaves the
//! caller's copy to be discarded, so a patch applies entirely or not at all.
//!
//! As in the API server (which uses `evanphx/json-patch`), a body that is not a list of objects is
//! malformed (400), while an unknown operation, a missing field, a bad path or a failed `test` is an
//! operation that does not apply (422).

use super::PatchError;
use serde_json::{Map, Value};

/// Applies the JSON patch `body` to `doc`.
pub(super) fn apply(doc: &mut Value, body: &Value) -> Result<(), PatchError> {
    let Value::Array(ops) = body else {
        return Err(PatchError::Malformed("JSON patch must be a list of operations".into()));
    };
    let ops: Vec<&Map<String, Value>> = ops
        .iter()
        .map(|op| {
            op.as_object()
                .ok_or_else(|| PatchError::Malformed(format!("JSON patch operation {op} is not an object")))
        })
        .collect::<Result<_, _>>()?;
    for op in ops {
        apply_op(doc, op)?;
    }
    Ok(())
}

fn apply_op(doc: &mut Value, op: &Map<String, Value>) -> Result<(), PatchError> {
    let field = |name: &str| {
        op.get(name).ok_or_else(|| {
            PatchError::NotApplicable(format!("operation {name:?} missing in {}", Value::from(op.clone())))
        })
    };
    let text = |name: &str| {
        field(name)?
            .as_str()
            .ok_or_else(|| PatchError::NotApplicable(format!("operation field {name:?} must be a string")))
    };
    let path = text("path")?;
    match text("op")? {
        "add" => add(doc, path, field("value")?.clone()),
        "remove" => remove(doc, path).map(drop),
        "replace" => {
            *resolve_mut(doc, &tokens(path)?, path)? = field("value")?.clone();
            Ok(())
        }
        "move" => {
            let from = text("from")?;
            if path.starts_with(from) && path[from.len()..].starts_with('/') {
                return Err(PatchError::NotApplicable(format!(
                    "cannot move {from} into its own child {path}"
                )));
            }
            let value = remove(doc, from)?;
            add(doc, path, value)
        }
        "copy" => {
            let from = text("from")?;
            let value = resolve_mut(doc, &tokens(from)?, from)?.clone();
            add(doc, path, value)
        }
        "test" => {
            let expected = field("value")?;
            if resolve_mut(doc, &tokens(path)?, path)? == expected {
                Ok(())
            } else {
                Err(PatchError::NotApplicable(format!("testing value {path} failed")))
            }
        }
        other => Err(PatchError::NotApplicable(format!("unexpected kind: {other}"))),
    }
}

/// Splits an RFC 6901 pointer into unescaped reference tokens.
fn tokens(pointer: &str) -> Result<Vec<String>, PatchError> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(PatchError::NotApplicable(format!("invalid JSON pointer {pointer:?}")));
    };
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

/// An array index token: digits without a leading zero, below `len` (or equal when `inclusive`).
fn index(token: &str, len: usize, inclusive: bool) -> Option<usize> {
    let digits = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
    if !digits || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok().filter(|&i| i < len || (inclusive && i == len))
}

fn resolve_mut<'a>(doc: &'a mut Value, tokens: &[String], pointer: &str) -> Result<&'a mut Value, PatchError> {
    let missing = || PatchError::NotApplicable(format!("doc is missing path: {pointer:?}"));
    let mut at = doc;
    for token in tokens {
        at = match at {
            Value::Object(map) => map.get_mut(token).ok_or_else(missing)?,
            Value::Array(items) => {
                let i = index(token, items.len(), false).ok_or_else(missing)?;
                &mut items[i]
            }
            _ => return Err(missing()),
        };
    }
    Ok(at)
}

fn add(doc: &mut Value, pointer: &str, value: Value) -> Result<(), PatchError> {
    let tokens = tokens(pointer)?;
    let Some((last, parent)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    match resolve_mut(doc, parent, pointer)? {
        Value::Object(map) => {
            map.insert(last.clone(), value);
        }
        Value::Array(items) => {
            let i = if last == "-" {
                items.len()
            } else {
                index(last, items.len(), true)
                    .ok_or_else(|| PatchError::NotApplicable(format!("add: index out of range in {pointer:?}")))?
            };
            items.insert(i, value);
        }
        _ => {
            return Err(PatchError::NotApplicable(format!(
                "add: parent of {pointer:?} is not a container"
            )))
        }
    }
    Ok(())
}

fn remove(doc: &mut Value, pointer: &str) -> Result<Value, PatchError> {
    let missing = || PatchError::NotApplicable(format!("remove: doc is missing path: {pointer:?}"));
    let tokens = tokens(pointer)?;
    let (last, parent) = tokens.split_last().ok_or_else(missing)?;
    match resolve_mut(doc, parent, pointer)? {
        Value::Object(map) => map.remove(last).ok_or_else(missing),
        Value::Array(items) => {
            let i = index(last, items.len(), false).ok_or_else(missing)?;
            Ok(items.remove(i))
        }
        _ => Err(missing()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(mut doc: Value, patch: Value) -> Result<Value, PatchError> {
        apply(&mut doc, &patch).map(|()| doc)
    }

    #[test]
    fn json_patch_should_apply_every_operation_in_order() {
        let doc = json!({"metadata": {"finalizers": ["a", "b"], "labels": {"x/y": "1"}}});
        let patch = json!([
            {"op": "test", "path": "/metadata/finalizers/0", "value": "a"},
            {"op": "remove", "path": "/metadata/finalizers/0"},
            {"op": "add", "path": "/metadata/finalizers/-", "value": "c"},
            {"op": "replace", "path": "/metadata/labels/x~1y", "value": "2"},
            {"op": "copy", "from": "/metadata/labels", "path": "/metadata/annotations"},
            {"op": "move", "from": "/metadata/annotations/x~1y", "path": "/metadata/annotations/z"},
        ]);
        let out = run(doc, patch).expect("applies");
        assert_eq!(
            out,
            json!({"metadata": {"finalizers": ["b", "c"], "labels": {"x/y": "2"}, "annotations": {"z": "2"}}})
        );
    }

    #[test]
    fn json_patch_should_sort_failures_into_malformed_and_not_applicable() {
        let doc = json!({"a": [1]});
        assert!(matches!(
            run(doc.clone(), json!({"op": "add"})),
            Err(PatchError::Malformed(_))
        ));
        assert!(matches!(run(doc.clone(), json!([1])), Err(PatchError::Malformed(_))));
        for op in [
            json!({"op": "test", "path": "/a/0", "value": 2}),
            json!({"op": "remove", "path": "/missing"}),
            json!({"op": "add", "path": "/a/5", "value": 0}),
            json!({"op": "replace", "path": "/a/01", "value": 0}),
            json!({"op": "launch", "path": "/a"}),
            json!({"op": "add", "path": "a", "value": 0}),
            json!({"op": "move", "from": "/a", "path": "/a/0"}),
        ] {
            assert!(
                matches!(run(doc.clone(), json!([op.clone()])), Err(PatchError::NotApplicable(_))),
                "{op}"
            );
        }
    }
}
