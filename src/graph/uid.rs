//! Object UIDs in 16 bytes.
//!
//! Kubernetes generates UIDs as RFC 4122 UUIDs (version 1 or 4) and prints them as lowercase
//! hyphenated strings; those are packed into 128 bits. Any other string (tests, hand-made objects,
//! a UUID of another variant) goes to a process-wide table and the UID holds its index, tagged with
//! variant bits `11` that no packed UUID has: packed UUIDs have variant bits `10`. So a `Uid` is
//! `Copy`, never allocates for a real cluster's UIDs, and is exact: `Uid::parse(s).to_string() == s`
//! for every `s`.
//!
//! Invariant: two `Uid`s are equal exactly when their strings are, because each string has one
//! encoding: packed when it is a canonical variant-`10` UUID, otherwise its single table index.
//! The table only grows; it holds strings that are not Kubernetes-generated UIDs, which a real
//! cluster does not have.

use parking_lot::Mutex;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::sync::LazyLock;

/// A UID. The high and low halves of the UUID's 128 bits, big-endian, so that the derived order
/// of two packed UUIDs is the order of their strings.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Uid {
    hi: u64,
    lo: u64,
}

/// The two variant bits of a UUID (the top bits of its low half).
const VARIANT_MASK: u64 = 0b11 << 62;
/// RFC 4122 variant: the only one packed.
const VARIANT_RFC4122: u64 = 0b10 << 62;
/// Marks a table index; no packed UUID carries it.
const TEXT_TAG: u64 = 0b11 << 62;

impl Uid {
    /// The empty UID, which no real object has. Index 0 of the text table.
    pub const EMPTY: Uid = Uid { hi: 0, lo: TEXT_TAG };

    /// Parses a UID string; never fails.
    pub fn parse(s: &str) -> Uid {
        match parse_canonical_uuid(s) {
            Some(v) if (v as u64) & VARIANT_MASK == VARIANT_RFC4122 => Uid::from_bits(v),
            _ => Uid {
                hi: 0,
                lo: TEXT_TAG | TEXTS.index_of(s),
            },
        }
    }

    /// A random version-4 UUID made from 128 random bits (the version and variant bits are set).
    pub fn new_v4(random: u128) -> Uid {
        Uid::from_bits(
            uuid::Builder::from_random_bytes(random.to_be_bytes())
                .into_uuid()
                .as_u128(),
        )
    }

    fn from_bits(v: u128) -> Uid {
        Uid {
            hi: (v >> 64) as u64,
            lo: v as u64,
        }
    }

    fn text_index(&self) -> Option<usize> {
        (self.lo & VARIANT_MASK == TEXT_TAG).then_some((self.lo & !TEXT_TAG) as usize)
    }

    /// A well-mixed 64-bit hash, stable for the life of the process and the same on every thread.
    /// The graph shards by it, and the router partitions cluster-scoped objects by it.
    pub fn hash64(&self) -> u64 {
        // Packed UUIDs are already random (v4) or time-ordered (v1); one multiply-fold spreads
        // either kind, and table indexes too.
        let folded = u128::from(self.hi ^ self.lo) * 0x9e37_79b9_7f4a_7c15;
        (folded as u64) ^ ((folded >> 64) as u64)
    }

    /// True for the empty UID.
    pub fn is_empty(&self) -> bool {
        *self == Uid::EMPTY
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

/// The strings of UIDs that are not packed UUIDs, by index, and the index of each.
struct Texts(Mutex<(Vec<&'static str>, HashMap<&'static str, u64>)>);

static TEXTS: LazyLock<Texts> = LazyLock::new(|| {
    let texts = Texts(Mutex::default());
    texts.index_of(""); // index 0: Uid::EMPTY
    texts
});

impl Texts {
    fn index_of(&self, s: &str) -> u64 {
        let mut guard = self.0.lock();
        let (strings, index) = &mut *guard;
        if let Some(&i) = index.get(s) {
            return i;
        }
        // Leaked on purpose: the table lives as long as the process and never shrinks.
        let leaked: &'static str = Box::leak(s.into());
        let i = strings.len() as u64;
        strings.push(leaked);
        index.insert(leaked, i);
        i
    }

    fn get(&self, i: usize) -> &'static str {
        self.0.lock().0[i]
    }
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(i) = self.text_index() {
            return f.write_str(TEXTS.get(i));
        }
        let v = (u128::from(self.hi) << 64) | u128::from(self.lo);
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

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// Orders as the UID strings do (the DOT dump sorts by UID). Two packed UUIDs compare as their
/// strings would because fixed-width lowercase hex sorts like the number it spells.
impl Ord for Uid {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.text_index(), other.text_index()) {
            (None, None) => (self.hi, self.lo).cmp(&(other.hi, other.lo)),
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
            "0a1b2c3d-0000-1000-b000-00000000ffff",
            "0a1b2c3d-0000-4000-c000-00000000ffff",
            "00000000-0000-0000-0000-000000000000",
            "pod-uid-1",
            "",
            "0A1B2C3D-0000-4000-8000-00000000FFFF",
        ] {
            assert_eq!(Uid::parse(s).to_string(), s);
            assert_eq!(Uid::parse(s), Uid::parse(s));
        }
        assert!(Uid::parse("0a1b2c3d-0000-4000-8000-00000000ffff")
            .text_index()
            .is_none());
        assert!(Uid::parse("0a1b2c3d-0000-4000-c000-00000000ffff")
            .text_index()
            .is_some());
        assert!(Uid::parse("0A1B2C3D-0000-4000-8000-00000000FFFF")
            .text_index()
            .is_some());
        assert!(Uid::parse("").is_empty());
        assert_eq!(std::mem::size_of::<Uid>(), 16);
    }

    #[test]
    fn new_v4_should_make_a_packed_version_4_uuid() {
        let uid = Uid::new_v4(u128::MAX);
        let s = uid.to_string();
        assert_eq!(&s[14..15], "4");
        assert!(matches!(&s[19..20], "8" | "9" | "a" | "b"));
        assert_eq!(Uid::parse(&s), uid);
        assert!(uid.text_index().is_none());
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
