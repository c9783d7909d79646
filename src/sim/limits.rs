//! The limits the API server puts on an object's metadata (`ValidateObjectMeta`), with its 422
//! messages, and the one its storage puts on a whole object: what a real server refuses, the
//! simulated one refuses too, so that a client that grows an annotation without bound (a
//! replica's shard report, say) fails here as it would on a cluster. The request body's own limit
//! (413 past 3 MiB) is the HTTP face's (`super::http::DEFAULT_MAX_BODY_BYTES`).

use crate::api::{ObjectMeta, PartialObjectMeta};

/// The most bytes all of an object's annotations may hold, keys and values together.
pub const TOTAL_ANNOTATION_SIZE: usize = 256 * 1024;
/// The longest label value, and the longest name part of a label key.
pub const LABEL_VALUE_LENGTH: usize = 63;
/// The longest name of most resources (a DNS subdomain), and of a label key's prefix.
pub const NAME_LENGTH: usize = 253;

/// The most bytes etcd takes in one request (its `--max-request-bytes` default, 1.5 MiB).
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

/// What kube-apiserver answers (500, in etcd's words) when its storage refuses an object as too
/// large.
pub const OBJECT_TOO_LARGE: &str = "etcdserver: request is too large";

/// Metadata-only objects with at most this many labels, finalizers and owner references in all
/// are never measured: within the other limits (a label under 400 bytes, a reference or a
/// finalizer under 1 KiB, annotations under 256 KiB) they stay below 600 KiB.
const UNMEASURED_ENTRIES: usize = 256;

/// True when `obj`, stored, would pass [`MAX_OBJECT_BYTES`]. Its JSON form is measured, a little
/// larger than the protobuf etcd is sent, so the bound errs towards refusing; a small
/// metadata-only object, as most the collector writes are, is not measured at all.
pub fn too_large(obj: &PartialObjectMeta) -> bool {
    let meta = &obj.metadata;
    let entries = meta.labels.len() + meta.finalizers.len() + meta.owner_references.len();
    if obj.rest.is_empty() && entries <= UNMEASURED_ENTRIES {
        return false;
    }
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter fails only if serialising does, which a stored object never does.
    serde_json::to_writer(&mut count, obj).is_ok() && count.0 > MAX_OBJECT_BYTES
}

/// The first limit `meta` breaks, as the detail of the API server's 422.
pub fn check(meta: &ObjectMeta) -> Result<(), String> {
    if meta.name.len() > NAME_LENGTH {
        return Err(format!(
            "metadata.name: Invalid value: {:?}: must be no more than {NAME_LENGTH} characters",
            meta.name
        ));
    }
    let annotations: usize = meta.annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if annotations > TOTAL_ANNOTATION_SIZE {
        return Err(format!(
            "metadata.annotations: Too long: must have at most {TOTAL_ANNOTATION_SIZE} bytes"
        ));
    }
    for (key, value) in &meta.labels {
        let (prefix, name) = key.rsplit_once('/').unwrap_or(("", key));
        if name.is_empty() || name.len() > LABEL_VALUE_LENGTH || prefix.len() > NAME_LENGTH {
            return Err(format!(
                "metadata.labels: Invalid value: {key:?}: name part must be non-empty and no more than \
                 {LABEL_VALUE_LENGTH} characters, prefix no more than {NAME_LENGTH}"
            ));
        }
        if value.len() > LABEL_VALUE_LENGTH {
            return Err(format!(
                "metadata.labels: Invalid value: {value:?}: must be no more than {LABEL_VALUE_LENGTH} characters"
            ));
        }
        if !is_label_value(value) {
            return Err(format!(
                "metadata.labels: Invalid value: {value:?}: a valid label must be an empty string or consist of \
                 alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
            ));
        }
    }
    Ok(())
}

/// Empty, or alphanumerics, `-`, `_` and `.` between two alphanumerics.
fn is_label_value(value: &str) -> bool {
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    value.is_empty()
        || (ends(value.chars().next())
            && ends(value.chars().last())
            && value.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_should_be_refused_past_etcds_request_size() {
        let with_data = |bytes: usize| -> PartialObjectMeta {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "cm", "namespace": "default"},
                "data": {"blob": "x".repeat(bytes)},
            }))
            .expect("an object")
        };
        assert!(!too_large(&with_data(MAX_OBJECT_BYTES - 1024)));
        assert!(too_large(&with_data(MAX_OBJECT_BYTES)));
    }

    fn meta(f: impl FnOnce(&mut ObjectMeta)) -> ObjectMeta {
        let mut meta = ObjectMeta {
            name: "lease".into(),
            ..Default::default()
        };
        f(&mut meta);
        meta
    }

    #[test]
    fn annotations_should_hold_256_kib_in_all() {
        let at = |bytes: usize| meta(|m| drop(m.annotations.insert("k".into(), "x".repeat(bytes - 1))));
        assert_eq!(check(&at(TOTAL_ANNOTATION_SIZE)), Ok(()));
        assert_eq!(
            check(&at(TOTAL_ANNOTATION_SIZE + 1)),
            Err("metadata.annotations: Too long: must have at most 262144 bytes".into())
        );
    }

    #[test]
    fn labels_and_names_should_keep_their_lengths_and_characters() {
        assert!(check(&meta(|m| drop(m.labels.insert("a".into(), "v".repeat(63))))).is_ok());
        let long = check(&meta(|m| drop(m.labels.insert("a".into(), "v".repeat(64)))));
        assert!(long.is_err_and(|e| e.contains("must be no more than 63 characters")));
        assert!(check(&meta(|m| drop(m.labels.insert("a".into(), "-v".into())))).is_err());
        assert!(check(&meta(|m| drop(m.labels.insert("x/".into(), "v".into())))).is_err());
        assert!(check(&meta(|m| m.name = "n".repeat(254))).is_err());
        assert!(check(&meta(|m| m.name = "n".repeat(253))).is_ok());
    }
}
