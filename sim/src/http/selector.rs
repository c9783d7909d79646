//! Label and field selectors, as lists and watches filter by them.
//!
//! Label selectors take the set-based grammar (`a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`,
//! `a notin (x,y)`), requirements joined by commas and all required. Field selectors take
//! `metadata.name` and `metadata.namespace` with `=`, `==` and `!=`, the fields every type
//! supports; any other field is 400, as the API server answers for a field it does not index.

use kube_gc::api::{ApiError, ObjectMeta, StatusReason};

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

/// A parsed `labelSelector`; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct LabelSelector(Vec<(String, Op)>);

impl LabelSelector {
    pub(super) fn parse(text: &str) -> Result<Self, ApiError> {
        split_top_level(text)
            .into_iter()
            .map(|req| requirement(req).ok_or_else(|| bad(format!("unable to parse requirement: {req:?}"))))
            .collect::<Result<_, _>>()
            .map(LabelSelector)
    }

    pub(super) fn matches(&self, meta: &ObjectMeta) -> bool {
        self.0.iter().all(|(key, op)| {
            let value = meta.labels.get(key);
            match op {
                Op::In(values) => value.is_some_and(|v| values.contains(v)),
                Op::NotIn(values) => value.is_none_or(|v| !values.contains(v)),
                Op::Exists => value.is_some(),
                Op::DoesNotExist => value.is_none(),
            }
        })
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(text[start..].trim());
    parts.retain(|p| !p.is_empty());
    parts
}

fn requirement(req: &str) -> Option<(String, Op)> {
    if let Some(key) = req.strip_prefix('!') {
        return Some((label_key(key)?, Op::DoesNotExist));
    }
    for (sep, negated) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((key, value)) = req.split_once(sep) {
            let values = vec![value.trim().to_string()];
            return Some((
                label_key(key)?,
                if negated { Op::NotIn(values) } else { Op::In(values) },
            ));
        }
    }
    for (word, negated) in [(" notin ", true), (" in ", false)] {
        if let Some((key, set)) = req.split_once(word) {
            let set = set.trim().strip_prefix('(')?.strip_suffix(')')?;
            let values = set
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            return Some((
                label_key(key)?,
                if negated { Op::NotIn(values) } else { Op::In(values) },
            ));
        }
    }
    Some((label_key(req)?, Op::Exists))
}

fn label_key(key: &str) -> Option<String> {
    let key = key.trim();
    let valid = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    valid.then(|| key.to_string())
}

/// A parsed `fieldSelector`; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct FieldSelector(Vec<(Field, bool, String)>);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Name,
    Namespace,
}

impl FieldSelector {
    pub(super) fn parse(text: &str) -> Result<Self, ApiError> {
        split_top_level(text)
            .into_iter()
            .map(|req| {
                let (field, equal, value) = if let Some((f, v)) = req.split_once("!=") {
                    (f, false, v)
                } else if let Some((f, v)) = req.split_once("==").or_else(|| req.split_once('=')) {
                    (f, true, v)
                } else {
                    return Err(bad(format!("invalid selector: {req:?}; can't understand it")));
                };
                let field = match field.trim() {
                    "metadata.name" => Field::Name,
                    "metadata.namespace" => Field::Namespace,
                    other => return Err(bad(format!("field label not supported: {other}"))),
                };
                Ok((field, equal, value.trim().to_string()))
            })
            .collect::<Result<_, _>>()
            .map(FieldSelector)
    }

    pub(super) fn matches(&self, meta: &ObjectMeta) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = match field {
                Field::Name => &meta.name,
                Field::Namespace => &meta.namespace,
            };
            (actual == value) == *equal
        })
    }
}

fn bad(message: String) -> ApiError {
    ApiError::status(StatusReason::BadRequest, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: name.into(),
            namespace: "ns".into(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn label_selector_should_follow_the_set_based_grammar() {
        let m = meta("a", &[("app", "web"), ("tier", "front")]);
        let yes = [
            "",
            "app=web",
            "app==web",
            "app!=db",
            "app",
            "!zone",
            "tier in (front, back)",
            "app notin (db),tier",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(&m), "{s} should match");
        }
        for s in [
            "app=db",
            "!app",
            "zone",
            "tier in (back)",
            "app notin (web)",
            "app=web,zone",
        ] {
            assert!(!LabelSelector::parse(s).unwrap().matches(&m), "{s} should not match");
        }
        assert!(LabelSelector::parse("app in web").is_err());
    }

    #[test]
    fn field_selector_should_know_name_and_namespace_only() {
        let m = meta("a", &[]);
        assert!(FieldSelector::parse("metadata.name=a,metadata.namespace==ns")
            .unwrap()
            .matches(&m));
        assert!(!FieldSelector::parse("metadata.name!=a").unwrap().matches(&m));
        let err = FieldSelector::parse("spec.nodeName=x").unwrap_err();
        assert_eq!(err.reason(), Some(StatusReason::BadRequest));
    }
}
