//! The limits on sizes: the one the API server puts on an object's annotations (checked, with
//! the other metadata rules, by `super::validation`) and the one its storage puts on a whole
//! object: what a real server refuses, the simulated one refuses too, so that a client that grows
//! an annotation without bound (a replica's shard report, say) fails here as it would on a
//! cluster. The request body's own limit (413 past 3 MiB) is the HTTP face's
//! (`super::http::DEFAULT_MAX_BODY_BYTES`).

use kube_gc::api::PartialObjectMeta;

/// The most bytes all of an object's annotations may hold, keys and values together.
pub const TOTAL_ANNOTATION_SIZE: usize = 256 * 1024;

/// The most bytes etcd takes in one request (its `--max-request-bytes` default, 1.5 MiB).
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

/// What kube-apiserver answers when its storage refuses an object as too large: etcd's words, as
/// a 500 with no reason, the answer to any error that is not a `Status`.
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
}
