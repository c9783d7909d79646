//! Server-assigned metadata: UIDs are fresh random v4 UUIDs, and generated names use the API
//! server's alphabet. (Timestamps are [`kube_gc::api::time`]'s.)

use kube_gc::api::names::random_suffix;

/// The API server's `generateName` suffix length.
const GENERATED_SUFFIX_LEN: usize = 5;

/// A random RFC 4122 version 4 UUID, lowercase and hyphenated.
pub(super) fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// `prefix` plus five random characters, as `generateName` produces.
pub(super) fn generated_name(prefix: &str) -> String {
    format!(
        "{prefix}{}",
        random_suffix(&mut rand::thread_rng(), GENERATED_SUFFIX_LEN)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_gc::api::names::SUFFIX_ALPHABET;

    #[test]
    fn new_uid_should_be_a_lowercase_v4_uuid() {
        let uid = new_uid();
        let parts: Vec<&str> = uid.split('-').collect();
        assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12]);
        assert!(parts[2].starts_with('4'));
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"));
        assert!(uid
            .chars()
            .all(|c| c == '-' || c.is_ascii_digit() || c.is_ascii_lowercase()));
        assert_ne!(uid, new_uid());
    }

    #[test]
    fn generated_name_should_append_five_lowercase_alphanumerics() {
        let name = generated_name("web-");
        assert_eq!(name.len(), 9);
        assert!(name[4..].bytes().all(|b| SUFFIX_ALPHABET.contains(&b)));
    }
}
