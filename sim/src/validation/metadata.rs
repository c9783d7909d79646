//! The rules for what any object's metadata carries besides its name: label keys and values,
//! annotation keys and their total size, and finalizer names.

use super::formats;
use crate::limits::TOTAL_ANNOTATION_SIZE;
use kube_gc::api::FieldError;
use std::collections::BTreeMap;

/// `ValidateLabels`: every key a qualified name, every value a label value; failures name the
/// whole map (`metadata.labels`), as upstream's do.
pub(super) fn labels(labels: &BTreeMap<String, String>) -> Vec<FieldError> {
    let field = "metadata.labels";
    let mut errors = Vec::new();
    for (key, value) in labels {
        errors.extend(
            formats::qualified_name(key)
                .into_iter()
                .map(|m| FieldError::invalid(field, key, m)),
        );
        errors.extend(
            formats::label_value(value)
                .into_iter()
                .map(|m| FieldError::invalid(field, value, m)),
        );
    }
    errors
}

/// `ValidateAnnotations`: every key a qualified name, in any case, and keys and values together
/// at most [`TOTAL_ANNOTATION_SIZE`] bytes.
pub(super) fn annotations(annotations: &BTreeMap<String, String>) -> Vec<FieldError> {
    let field = "metadata.annotations";
    let mut errors: Vec<FieldError> = annotations
        .keys()
        .flat_map(|key| {
            let messages = formats::qualified_name(&key.to_ascii_lowercase());
            messages.into_iter().map(move |m| FieldError::invalid(field, key, m))
        })
        .collect();
    let total: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > TOTAL_ANNOTATION_SIZE {
        errors.push(FieldError::too_long(field, TOTAL_ANNOTATION_SIZE));
    }
    errors
}

/// `ValidateFinalizers`: every finalizer a qualified name, and never both `orphan` and
/// `foregroundDeletion`, which ask for opposite cascades.
pub(super) fn finalizers(finalizers: &[String]) -> Vec<FieldError> {
    use kube_gc::api::{FINALIZER_FOREGROUND, FINALIZER_ORPHAN};
    let field = "metadata.finalizers";
    let mut errors: Vec<FieldError> = finalizers
        .iter()
        .flat_map(|f| {
            formats::qualified_name(f)
                .into_iter()
                .map(move |m| FieldError::invalid(field, f, m))
        })
        .collect();
    let has = |wanted: &str| finalizers.iter().any(|f| f == wanted);
    if has(FINALIZER_ORPHAN) && has(FINALIZER_FOREGROUND) {
        // Upstream prints the list with Go's `%#v`.
        let shown: Vec<String> = finalizers.iter().map(|f| format!("{f:?}")).collect();
        errors.push(FieldError::invalid_shown(
            field,
            format!("[]string{{{}}}", shown.join(", ")),
            format!("finalizer {FINALIZER_ORPHAN} and {FINALIZER_FOREGROUND} cannot be both set"),
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn messages(errors: Vec<FieldError>) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn labels_should_refuse_bad_keys_and_values_naming_the_map() {
        assert!(labels(&map(&[
            ("app", "web"),
            ("example.com/tier", ""),
            ("a", &"v".repeat(63))
        ]))
        .is_empty());
        assert_eq!(
            messages(labels(&map(&[("a", &"v".repeat(64))]))),
            [format!(
                "metadata.labels: Invalid value: {:?}: must be no more than 63 characters",
                "v".repeat(64)
            )]
        );
        let bad_key = messages(labels(&map(&[("x/", "v")])));
        assert_eq!(bad_key.len(), 2, "{bad_key:?}");
        assert!(bad_key[0].starts_with("metadata.labels: Invalid value: \"x/\": name part must be non-empty"));
        assert!(messages(labels(&map(&[("a", "-v")])))[0]
            .starts_with("metadata.labels: Invalid value: \"-v\": a valid label must be an empty string"));
    }

    #[test]
    fn annotations_should_hold_256_kib_in_all_and_take_keys_in_any_case() {
        let at = |bytes: usize| map(&[("k", &"x".repeat(bytes - 1))]);
        assert!(annotations(&at(TOTAL_ANNOTATION_SIZE)).is_empty());
        let over = annotations(&at(TOTAL_ANNOTATION_SIZE + 1));
        assert_eq!(
            messages(over.clone()),
            ["metadata.annotations: Too long: must have at most 262144 bytes"]
        );
        assert_eq!(over[0].cause_type(), "FieldValueTooLong");
        assert!(annotations(&map(&[("Example.COM/Note", "x")])).is_empty());
        assert!(messages(annotations(&map(&[("bad key", "x")])))[0]
            .starts_with("metadata.annotations: Invalid value: \"bad key\": name part must consist of"));
    }

    #[test]
    fn finalizers_should_be_qualified_names_and_not_both_cascades() {
        let list = |names: &[&str]| names.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert!(finalizers(&list(&["orphan", "example.com/hold"])).is_empty());
        assert_eq!(
            messages(finalizers(&list(&["orphan", "foregroundDeletion"]))),
            [
                "metadata.finalizers: Invalid value: []string{\"orphan\", \"foregroundDeletion\"}: finalizer orphan \
              and foregroundDeletion cannot be both set"
            ]
        );
        assert_eq!(finalizers(&list(&["a/b/c"])).len(), 1);
    }
}
