//! Shard selectors of server-side sharded list and watch (Kubernetes 1.36, alpha): the
//! `shardSelector` parameter of LIST and WATCH.
//!
//! A selector is one or more `shardRange(FIELD, 'START', 'END')` terms joined by `||`, all on
//! the same field: `object.metadata.namespace` or `object.metadata.uid`. An object is selected
//! when the 64-bit FNV-1a hash of that field's bytes falls in one of the half-open ranges
//! `[START, END)`; START and END are `0x`-prefixed hexadecimal, END at most `0x10000000000000000`
//! (2^64), so that one range can reach the top of the hash space.
//!
//! Invariant: a parsed selector's ranges are non-empty and within the hash space, and its
//! [`Display`](std::fmt::Display) form parses back to the same selector, which is what a server
//! echoes and what a client compares with what it asked for.

use std::fmt;
use std::hash::Hasher;

/// The field a selector hashes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShardField {
    /// `object.metadata.namespace`: keeps a namespace's objects in one shard.
    Namespace,
    /// `object.metadata.uid`.
    Uid,
}

impl ShardField {
    fn path(self) -> &'static str {
        match self {
            ShardField::Namespace => "object.metadata.namespace",
            ShardField::Uid => "object.metadata.uid",
        }
    }
}

/// One half-open range of the hash space; `end` may be 2^64.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShardRange {
    /// First hash in the range.
    pub start: u64,
    /// First hash past the range, up to 2^64.
    pub end: u128,
}

impl ShardRange {
    /// True when `hash` is in the range.
    pub fn contains(&self, hash: u64) -> bool {
        self.start <= hash && u128::from(hash) < self.end
    }
}

/// A parsed `shardSelector`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShardSelector {
    /// The field every range hashes.
    pub field: ShardField,
    /// The ranges, in the order written; an object in any of them is selected.
    pub ranges: Vec<ShardRange>,
}

/// Why a selector does not parse: the message a server answers 400 Bad Request with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid shard selector {selector:?}: {reason}")]
pub struct ShardSelectorError {
    /// The selector as given.
    pub selector: String,
    /// What is wrong with it.
    pub reason: String,
}

/// 2^64, the largest END.
const HASH_SPACE: u128 = 1 << 64;

impl ShardSelector {
    /// Parses `text`.
    ///
    /// # Errors
    ///
    /// When `text` is not one or more `shardRange` terms on one supported field, with ranges that
    /// are non-empty and within the hash space.
    pub fn parse(text: &str) -> Result<ShardSelector, ShardSelectorError> {
        let fail = |reason: String| ShardSelectorError {
            selector: text.to_string(),
            reason,
        };
        let mut field = None;
        let mut ranges = Vec::new();
        for term in text.split("||") {
            let (f, range) = parse_term(term.trim()).map_err(fail)?;
            if field.is_some_and(|seen| seen != f) {
                return Err(fail("every shardRange must hash the same field".to_string()));
            }
            field = Some(f);
            ranges.push(range);
        }
        let field = field.ok_or_else(|| fail("no shardRange".to_string()))?;
        Ok(ShardSelector { field, ranges })
    }

    /// True when an object with `namespace` and `uid` is selected.
    pub fn matches(&self, namespace: &str, uid: &str) -> bool {
        let value = match self.field {
            ShardField::Namespace => namespace,
            ShardField::Uid => uid,
        };
        let hash = fnv1a64(value.as_bytes());
        self.ranges.iter().any(|r| r.contains(hash))
    }
}

impl fmt::Display for ShardSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(
                f,
                "shardRange({}, '{:#018x}', '{:#018x}')",
                self.field.path(),
                r.start,
                r.end
            )?;
        }
        Ok(())
    }
}

/// One `shardRange(FIELD, 'START', 'END')`.
fn parse_term(term: &str) -> Result<(ShardField, ShardRange), String> {
    let args = term
        .strip_prefix("shardRange(")
        .and_then(|rest| rest.strip_suffix(')'))
        .ok_or_else(|| format!("{term:?} is not shardRange(field, 'start', 'end')"))?;
    let parts: Vec<&str> = args.split(',').map(str::trim).collect();
    let [path, start, end] = parts[..] else {
        return Err(format!("shardRange takes 3 arguments, {term:?} has {}", parts.len()));
    };
    let field = match path {
        "object.metadata.namespace" => ShardField::Namespace,
        "object.metadata.uid" => ShardField::Uid,
        other => {
            return Err(format!(
                "unsupported field {other:?}: object.metadata.namespace or object.metadata.uid"
            ))
        }
    };
    let (start, end) = (hex_bound(start)?, hex_bound(end)?);
    if start >= end || end > HASH_SPACE {
        return Err(format!("{term:?} is empty or beyond 0x10000000000000000"));
    }
    let start = u64::try_from(start).map_err(|_| format!("start of {term:?} is beyond the hash space"))?;
    Ok((field, ShardRange { start, end }))
}

/// A quoted `'0x…'` bound.
fn hex_bound(quoted: &str) -> Result<u128, String> {
    let digits = quoted
        .strip_prefix('\'')
        .and_then(|q| q.strip_suffix('\''))
        .and_then(|q| q.strip_prefix("0x"))
        .ok_or_else(|| format!("{quoted:?} is not a quoted 0x-prefixed hex number"))?;
    if digits.is_empty() || digits.len() > 17 {
        return Err(format!("{quoted:?} has no digits or too many"));
    }
    u128::from_str_radix(digits, 16).map_err(|_| format!("{quoted:?} is not hexadecimal"))
}

/// The 64-bit FNV-1a hash of `bytes`, the hash the server's ranges are over.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_should_match_the_published_test_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn a_selector_should_parse_match_half_open_ranges_and_print_back() {
        let text = "shardRange(object.metadata.namespace, '0x0', '0x8000000000000000') || \
                    shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')";
        let s = ShardSelector::parse(text).unwrap();
        assert_eq!(s.field, ShardField::Namespace);
        assert_eq!(s.ranges.len(), 2);
        let (low, high) = (s.ranges[0], s.ranges[1]);
        assert!(low.contains(0) && low.contains(0x7fff_ffff_ffff_ffff) && !low.contains(1 << 63));
        assert!(high.contains(u64::MAX) && !high.contains(0xbfff_ffff_ffff_ffff));
        let ns = "team-0000";
        assert_eq!(
            s.matches(ns, "ignored"),
            !(0x8000_0000_0000_0000..0xc000_0000_0000_0000).contains(&fnv1a64(ns.as_bytes()))
        );
        assert_eq!(ShardSelector::parse(&s.to_string()).unwrap(), s, "{s}");
    }

    #[test]
    fn malformed_selectors_should_be_refused_with_a_reason() {
        for bad in [
            "",
            "shardRange(object.metadata.uid, '0x0')",
            "shardRange(object.metadata.name, '0x0', '0x10')",
            "shardRange(object.metadata.uid, '0x10', '0x10')",
            "shardRange(object.metadata.uid, '0x0', '0x10000000000000001')",
            "shardRange(object.metadata.uid, 0x0, '0x10')",
            "shardRange(object.metadata.uid, '0xg', '0x10')",
            "shardRange(object.metadata.uid, '0x0', '0x10') || shardRange(object.metadata.namespace, '0x0', '0x10')",
            "labels(object.metadata.uid, '0x0', '0x10')",
        ] {
            let err = ShardSelector::parse(bad).expect_err(bad);
            assert!(
                !err.reason.is_empty() && err.to_string().contains("invalid shard selector"),
                "{err}"
            );
        }
    }
}
