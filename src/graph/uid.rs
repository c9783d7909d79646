//! Object UIDs in their compact form.
//!
//! Kubernetes UIDs are almost always lowercase RFC 4122 strings; those are kept as one `u128`
//! (16 bytes instead of a 36-byte heap string). Anything else is kept verbatim, so no UID is ever
//! altered: `Uid::parse(s).to_string() == s` for every `s`.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// A UID, compact when it is a canonical UUID.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Uid {
    /// A lowercase, hyphenated UUID packed into 128 bits.
    Uuid(u128),
    /// Any other string, kept exactly.
    Text(Arc<str>),
}

impl Uid {
    /// Parses a UID string; never fails.
    pub fn parse(s: &str) -> Uid {
        parse_canonical_uuid(s).map_or_else(|| Uid::Text(Arc::from(s)), Uid::Uuid)
    }

    /// A well-mixed 64-bit hash, stable across runs and threads. The router partitions by it and
    /// the graph shards by it, so one builder's UIDs land in the shards that builder writes.
    pub fn hash64(&self) -> u64 {
        // Packed UUIDs are already random (v4) or time-ordered (v1); one multiply-fold spreads
        // either kind. Other strings get FNV-1a, then the same fold.
        let raw = match self {
            Uid::Uuid(v) => (*v as u64) ^ ((*v >> 64) as u64),
            Uid::Text(s) => s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            }),
        };
        let folded = u128::from(raw) * 0x9e37_79b9_7f4a_7c15;
        (folded as u64) ^ ((folded >> 64) as u64)
    }

    /// True for the empty UID, which no real object has.
    pub fn is_empty(&self) -> bool {
        matches!(self, Uid::Text(s) if s.is_empty())
    }
}

const HYPHENS: [usize; 4] = [8, 13, 18, 23];

fn parse_canonical_uuid(s: &str) -> Option<u128> {
    let bytes = s.as_bytes();
    if bytes.len() != 36 {
        return None;
    }
    let mut value: u128 = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if HYPHENS.contains(&i) {
            if b != b'-' {
                return None;
            }
            continue;
        }
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => return None, // uppercase would not round-trip
        };
        value = (value << 4) | u128::from(digit);
    }
    Some(value)
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Uid::Text(s) => f.write_str(s),
            Uid::Uuid(v) => {
                let hex = format!("{v:032x}");
                write!(
                    f,
                    "{}-{}-{}-{}-{}",
                    &hex[0..8],
                    &hex[8..12],
                    &hex[12..16],
                    &hex[16..20],
                    &hex[20..32]
                )
            }
        }
    }
}

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// Orders as the UID strings do (the DOT dump sorts by UID). Two packed UUIDs compare as their
/// strings would because fixed-width lowercase hex sorts like the number it spells.
impl Ord for Uid {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Uid::Uuid(a), Uid::Uuid(b)) => a.cmp(b),
            (Uid::Text(a), Uid::Text(b)) => a.cmp(b),
            _ => self.to_string().cmp(&other.to_string()),
        }
    }
}

impl PartialOrd for Uid {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl From<&str> for Uid {
    fn from(s: &str) -> Self {
        Uid::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_should_round_trip_uuids_and_other_strings() {
        for s in [
            "0a1b2c3d-0000-4000-8000-00000000ffff",
            "pod-uid-1",
            "",
            "0A1B2C3D-0000-4000-8000-00000000FFFF",
        ] {
            assert_eq!(Uid::parse(s).to_string(), s);
        }
        assert!(matches!(
            Uid::parse("0a1b2c3d-0000-4000-8000-00000000ffff"),
            Uid::Uuid(_)
        ));
        assert!(matches!(
            Uid::parse("0A1B2C3D-0000-4000-8000-00000000FFFF"),
            Uid::Text(_)
        ));
    }

    #[test]
    fn uid_order_should_match_string_order() {
        let mut uids: Vec<Uid> = [
            "b",
            "0a1b2c3d-0000-4000-8000-00000000ffff",
            "1",
            "ffffffff-0000-4000-8000-000000000000",
        ]
        .into_iter()
        .map(Uid::parse)
        .collect();
        uids.sort();
        let strings: Vec<String> = uids.iter().map(ToString::to_string).collect();
        let mut sorted = strings.clone();
        sorted.sort();
        assert_eq!(strings, sorted);
    }
}
