//! The string formats of apimachinery's `util/validation` (DNS labels and subdomains, qualified
//! names, label values) and of its path-segment names, each returning every message a failing
//! value earns, worded as upstream words them (`must be no more than 63 characters`, or the
//! format's description followed by examples and the regular expression it stands for). An empty
//! list means the value is well formed.
//!
//! The regular expressions appear only in messages; the checks are written out by hand.

/// The longest DNS (RFC 1123 or RFC 1035) label, and the longest name part of a qualified name.
pub(super) const LABEL_LENGTH: usize = 63;
/// The longest DNS (RFC 1123) subdomain, and the longest qualified name's prefix.
pub(super) const SUBDOMAIN_LENGTH: usize = 253;

const DNS1123_LABEL: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_WORDS: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters \
                                   or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_WORDS: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
                                       characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_WORDS: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', \
                                   start with an alphabetic character, and end with an alphanumeric character";
const QUALIFIED_NAME: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_WORDS: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and \
                                    end with an alphanumeric character";
const LABEL_VALUE: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_WORDS: &str = "a valid label must be an empty string or consist of alphanumeric characters, \
                                 '-', '_' or '.', and must start and end with an alphanumeric character";

/// Upstream's message for a value longer than `max`.
fn too_long(max: usize) -> String {
    format!("must be no more than {max} characters")
}

/// Upstream's message for a value that does not match `regex`: the `words`, then the examples and
/// the expression (upstream joins the examples with `', ` and ` or `, hence the double space).
fn mismatch(words: &str, regex: &str, examples: &[&str]) -> String {
    let examples: String = examples
        .iter()
        .enumerate()
        .map(|(i, e)| format!("{}'{e}', ", if i > 0 { " or " } else { "" }))
        .collect();
    format!("{words} (e.g. {examples}regex used for validation is '{regex}')")
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, with the first character also allowed by `first`.
fn is_label_shaped(value: &str, first: impl Fn(u8) -> bool) -> bool {
    let lower_alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = value.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&a), Some(&z)) => first(a) && lower_alnum(z) && bytes.iter().all(|&b| lower_alnum(b) || b == b'-'),
        _ => false,
    }
}

fn is_dns1123_label(value: &str) -> bool {
    is_label_shaped(value, |b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

fn is_dns1123_subdomain(value: &str) -> bool {
    value.split('.').all(is_dns1123_label)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_qualified_name_part(value: &str) -> bool {
    let bytes = value.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(a), Some(z)) => {
            a.is_ascii_alphanumeric()
                && z.is_ascii_alphanumeric()
                && bytes.iter().all(|&b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        }
        _ => false,
    }
}

/// `IsDNS1123Label`: at most 63 lower-case alphanumerics and `-`, alphanumeric at both ends.
pub(super) fn dns1123_label(value: &str) -> Vec<String> {
    let mut messages = Vec::new();
    if value.len() > LABEL_LENGTH {
        messages.push(too_long(LABEL_LENGTH));
    }
    if !is_dns1123_label(value) {
        messages.push(if is_dns1123_subdomain(value) {
            // Long enough was checked above: what keeps a subdomain from being a label is its dots.
            "must not contain dots".to_string()
        } else {
            mismatch(DNS1123_LABEL_WORDS, DNS1123_LABEL, &["my-name", "123-abc"])
        });
    }
    messages
}

/// `IsDNS1123Subdomain`: at most 253 characters of dot-separated RFC 1123 labels.
pub(super) fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut messages = Vec::new();
    if value.len() > SUBDOMAIN_LENGTH {
        messages.push(too_long(SUBDOMAIN_LENGTH));
    }
    if !is_dns1123_subdomain(value) {
        messages.push(mismatch(DNS1123_SUBDOMAIN_WORDS, DNS1123_SUBDOMAIN, &["example.com"]));
    }
    messages
}

/// `IsDNS1035Label`: an RFC 1123 label that starts with a letter.
pub(super) fn dns1035_label(value: &str) -> Vec<String> {
    let mut messages = Vec::new();
    if value.len() > LABEL_LENGTH {
        messages.push(too_long(LABEL_LENGTH));
    }
    if !is_label_shaped(value, |b| b.is_ascii_lowercase()) {
        messages.push(mismatch(DNS1035_LABEL_WORDS, DNS1035_LABEL, &["my-name", "abc-123"]));
    }
    messages
}

/// `IsQualifiedName`, the form of label and annotation keys: a name part of at most 63
/// alphanumerics, `-`, `_` and `.`, alphanumeric at both ends, after an optional DNS subdomain
/// prefix and `/`.
pub(super) fn qualified_name(value: &str) -> Vec<String> {
    let examples = ["MyName", "my.name", "123-abc"];
    let parts: Vec<&str> = value.split('/').collect();
    let (prefix, name) = match parts[..] {
        [name] => (None, name),
        [prefix, name] => (Some(prefix), name),
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                mismatch(QUALIFIED_NAME_WORDS, QUALIFIED_NAME, &examples)
            )]
        }
    };
    let mut messages = Vec::new();
    match prefix {
        Some("") => messages.push("prefix part must be non-empty".to_string()),
        Some(prefix) => messages.extend(
            dns1123_subdomain(prefix)
                .into_iter()
                .map(|m| format!("prefix part {m}")),
        ),
        None => {}
    }
    if name.is_empty() {
        messages.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_LENGTH {
        messages.push(format!("name part {}", too_long(LABEL_LENGTH)));
    }
    if !is_qualified_name_part(name) {
        messages.push(format!(
            "name part {}",
            mismatch(QUALIFIED_NAME_WORDS, QUALIFIED_NAME, &examples)
        ));
    }
    messages
}

/// `IsValidLabelValue`: empty, or at most 63 characters shaped as a qualified name's name part.
pub(super) fn label_value(value: &str) -> Vec<String> {
    let mut messages = Vec::new();
    if value.len() > LABEL_LENGTH {
        messages.push(too_long(LABEL_LENGTH));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        messages.push(mismatch(
            LABEL_VALUE_WORDS,
            LABEL_VALUE,
            &["MyValue", "my_value", "12345"],
        ));
    }
    messages
}

/// `ValidatePathSegmentName`: what any name must be to sit in a URL path, not `.` or `..` and
/// without `/` or `%`; a `prefix` (a `generateName`) is only checked for the characters.
pub(super) fn path_segment_name(value: &str, prefix: bool) -> Vec<String> {
    if !prefix {
        if let Some(whole) = [".", ".."].into_iter().find(|&n| n == value) {
            return vec![format!("may not be '{whole}'")];
        }
    }
    ["/", "%"]
        .into_iter()
        .filter(|part| value.contains(part))
        .map(|part| format!("may not contain '{part}'"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subdomain_should_be_lower_case_dotted_labels_of_at_most_253() {
        for fine in ["a", "example.com", "a-b.c-d", "0", &"a".repeat(253)] {
            assert_eq!(dns1123_subdomain(fine), Vec::<String>::new(), "{fine}");
        }
        let words = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or \
                     '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used \
                     for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        for bad in ["Bad_Name", "", "-a", "a-", "a..b", ".a", "a/b", "é"] {
            assert_eq!(dns1123_subdomain(bad), [words], "{bad}");
        }
        assert_eq!(
            dns1123_subdomain(&"a".repeat(254)),
            ["must be no more than 253 characters"]
        );
    }

    #[test]
    fn a_label_should_name_its_dots_apart_from_other_faults() {
        assert!(dns1123_label("my-name").is_empty());
        assert_eq!(dns1123_label("a.b"), ["must not contain dots"]);
        assert_eq!(
            dns1123_label("A"),
            [
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must \
              start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for \
              validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert_eq!(dns1123_label(&"a".repeat(64)), ["must be no more than 63 characters"]);
        assert!(dns1035_label("abc-123").is_empty());
        assert_eq!(dns1035_label("1abc").len(), 1);
        assert!(dns1035_label("1abc")[0].starts_with("a DNS-1035 label must consist"));
    }

    #[test]
    fn a_qualified_name_should_check_its_prefix_and_name_parts() {
        for fine in [
            "app",
            "MyName",
            "example.com/my.name",
            "a_b",
            "kubernetes.io/created-by",
        ] {
            assert!(qualified_name(fine).is_empty(), "{fine}");
        }
        assert_eq!(
            qualified_name("x/"),
            ["name part must be non-empty", &name_part_mismatch()]
        );
        assert_eq!(qualified_name("/x"), ["prefix part must be non-empty"]);
        assert!(qualified_name("Example.com/x")[0].starts_with("prefix part a lowercase RFC 1123 subdomain"));
        assert_eq!(
            qualified_name(&"n".repeat(64)),
            ["name part must be no more than 63 characters"]
        );
        assert!(qualified_name("a/b/c")[0].starts_with("a qualified name must consist of alphanumeric"));
        assert!(qualified_name("a/b/c")[0]
            .ends_with("with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"));
    }

    fn name_part_mismatch() -> String {
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an \
         alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is \
         '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            .to_string()
    }

    #[test]
    fn a_label_value_may_be_empty_but_not_long_or_ragged() {
        assert!(label_value("").is_empty());
        assert!(label_value(&"v".repeat(63)).is_empty());
        assert_eq!(label_value(&"v".repeat(64)), ["must be no more than 63 characters"]);
        assert_eq!(label_value("-v").len(), 1);
        assert!(label_value("-v")[0].starts_with("a valid label must be an empty string"));
    }

    #[test]
    fn a_path_segment_should_refuse_dots_slashes_and_percents() {
        assert_eq!(path_segment_name("..", false), ["may not be '..'"]);
        assert_eq!(path_segment_name(".", false), ["may not be '.'"]);
        assert!(path_segment_name("..", true).is_empty());
        assert_eq!(
            path_segment_name("a/b%c", false),
            ["may not contain '/'", "may not contain '%'"]
        );
        assert!(path_segment_name("Upper_Case.ok", false).is_empty());
    }
}
