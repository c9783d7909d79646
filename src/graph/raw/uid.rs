//! Object UIDs in 16 bytes.
//!
//! Kubernetes generates UIDs as RFC 4122 UUIDs (version 1 or 4) and prints them as lowercase
//! hyphenated strings; those are packed into 128 bits, and a `Uid` of one is a plain copy of them.
//! Any other string is free text to the API server: an owner reference may carry whatever uid a
//! tenant writes. Such a `Uid` holds its own copy of the string, a shared [`Name`], tagged with
//! variant bits `11` that no packed UUID has (packed UUIDs have variant bits `10`), beside a keyed
//! 62-bit hash of it. So what a `Uid` costs goes with its last holder, and memory for text UIDs is
//! bounded by the ones still held: nothing is kept in a process-wide table.
//!
//! Invariants:
//! - `hi` holds a `Name` exactly when `lo` carries the text tag and a non-zero hash
//!   ([`Uid::has_text`]); otherwise it holds plain bits. The empty string is the text tag with
//!   hash 0 and no `Name`: [`Uid::EMPTY`].
//! - Two `Uid`s are equal exactly when their strings are: a packed UUID has one encoding, and two
//!   text UIDs are equal when their hashes and then their strings are. The hash is keyed per
//!   process, so a tenant cannot pick uids that collide in the graph's table; a collision would
//!   only cost a string comparison, never a false equality.
//! - `Uid::parse(s).to_string() == s` for every `s`.

use super::name::Name;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::mem::ManuallyDrop;
use std::sync::LazyLock;

/// A UID; see the [module docs](self). The high and low halves of a packed UUID's 128 bits,
/// big-endian, so that the order of two packed UUIDs is the order of their strings.
pub struct Uid {
    hi: Hi,
    lo: u64,
}

/// The high half: a packed UUID's bits, or a text UID's string (see the module's invariants).
union Hi {
    bits: u64,
    text: ManuallyDrop<Name>,
}

/// The two variant bits of a UUID (the top bits of its low half).
const VARIANT_MASK: u64 = 0b11 << 62;
/// RFC 4122 variant: the only one packed.
const VARIANT_RFC4122: u64 = 0b10 << 62;
/// Marks a text UID; no packed UUID carries it.
const TEXT_TAG: u64 = 0b11 << 62;

/// The key of text UIDs' hashes, drawn once per process.
static TEXT_HASH_KEY: LazyLock<std::hash::RandomState> = LazyLock::new(std::hash::RandomState::new);

impl Uid {
    /// The empty UID, which no real object has.
    pub const EMPTY: Uid = Uid {
        hi: Hi { bits: 0 },
        lo: TEXT_TAG,
    };

    /// Parses a UID string; never fails.
    pub fn parse(s: &str) -> Uid {
        match parse_canonical_uuid(s) {
            Some(v) if (v as u64) & VARIANT_MASK == VARIANT_RFC4122 => Uid::from_bits(v),
            _ if s.is_empty() => Uid::EMPTY,
            _ => {
                // Hash 0 is the empty UID's; a text that hashes to it takes 1.
                let hash = (TEXT_HASH_KEY.hash_one(s) & !VARIANT_MASK).max(1);
                Uid {
                    hi: Hi {
                        text: ManuallyDrop::new(Name::new(s)),
                    },
                    lo: TEXT_TAG | hash,
                }
            }
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
            hi: Hi { bits: (v >> 64) as u64 },
            lo: v as u64,
        }
    }

    /// True for a text UID other than the empty one: `hi` holds its `Name`.
    fn has_text(&self) -> bool {
        self.lo & VARIANT_MASK == TEXT_TAG && self.lo != TEXT_TAG
    }

    /// The string of a text UID; `None` for a packed UUID. The empty UID's is `""`.
    fn text(&self) -> Option<&str> {
        if self.has_text() {
            // SAFETY: `has_text` says `hi` holds a `Name` (the module's first invariant), which
            // lives as long as `self`.
            Some(unsafe { self.hi.text.as_str() })
        } else {
            (self.lo & VARIANT_MASK == TEXT_TAG).then_some("")
        }
    }

    /// A packed UUID's high bits; 0 for a text UID.
    fn bits(&self) -> u64 {
        if self.has_text() {
            0
        } else {
            // SAFETY: without text, `hi` holds plain bits (the module's first invariant).
            unsafe { self.hi.bits }
        }
    }

    /// A well-mixed 64-bit hash, stable for the life of the process and the same on every thread.
    /// The graph shards by it, and the router partitions cluster-scoped objects by it.
    pub fn hash64(&self) -> u64 {
        // Packed UUIDs are already random (v4) or time-ordered (v1), and a text UID's low half is
        // a keyed hash of it; one multiply-fold spreads either.
        let folded = u128::from(self.bits() ^ self.lo) * 0x9e37_79b9_7f4a_7c15;
        (folded as u64) ^ ((folded >> 64) as u64)
    }

    /// True for the empty UID.
    pub fn is_empty(&self) -> bool {
        self.lo == TEXT_TAG
    }
}

impl Clone for Uid {
    fn clone(&self) -> Self {
        let hi = if self.has_text() {
            // SAFETY: `has_text` says `hi` holds a `Name`; the clone takes a count of its own.
            Hi {
                text: unsafe { self.hi.text.clone() },
            }
        } else {
            Hi { bits: self.bits() }
        };
        Uid { hi, lo: self.lo }
    }
}

impl Drop for Uid {
    fn drop(&mut self) {
        if self.has_text() {
            // SAFETY: `has_text` says `hi` holds a `Name`, dropped once, here.
            unsafe { ManuallyDrop::drop(&mut self.hi.text) }
        }
    }
}

impl PartialEq for Uid {
    fn eq(&self, other: &Self) -> bool {
        // Equal low halves are of one kind: both packed (then the high bits decide) or both text
        // with one hash (then the strings do).
        self.lo == other.lo
            && if self.has_text() {
                self.text() == other.text()
            } else {
                self.bits() == other.bits()
            }
    }
}

impl Eq for Uid {}

/// By the low half and the high bits: equal UIDs have both equal, and a text UID's low half is
/// already a hash of its string.
impl Hash for Uid {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.lo);
        state.write_u64(self.bits());
    }
}

const HYPHENS: [usize; 4] = [8, 13, 18, 23];

fn parse_canonical_uuid(s: &str) -> Option<u128> {
    let bytes: &[u8; 36] = s.as_bytes().try_into().ok()?;
    if HYPHENS.iter().any(|&i| bytes[i] != b'-') {
        return None;
    }
    // Every digit through the table, without a branch: a syncing collector parses a UID per
    // object and per owner reference, and a loop that tested each byte was a tenth of its time.
    let mut value: u128 = 0;
    let mut invalid = 0;
    for &i in &DIGITS_AT {
        let digit = HEX[usize::from(bytes[i])];
        invalid |= digit;
        value = (value << 4) | u128::from(digit & 0xf);
    }
    (invalid & 0xf0 == 0).then_some(value)
}

/// Where the 32 hex digits of a canonical UUID are.
const DIGITS_AT: [usize; 32] = {
    let mut at = [0; 32];
    let (mut i, mut n) = (0, 0);
    while i < 36 {
        if !matches!(i, 8 | 13 | 18 | 23) {
            at[n] = i;
            n += 1;
        }
        i += 1;
    }
    at
};

/// Each byte's value as a lowercase hex digit, or `0xff` (uppercase would not round-trip).
const HEX: [u8; 256] = {
    let mut table = [0xff; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(text) = self.text() {
            return f.write_str(text);
        }
        // By hand rather than through `{:032x}`: every UID a plan or a dump prints comes here.
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let v = (u128::from(self.bits()) << 64) | u128::from(self.lo);
        let mut out = [b'-'; 36];
        let mut digit = 0;
        for (i, slot) in out.iter_mut().enumerate() {
            if matches!(i, 8 | 13 | 18 | 23) {
                continue;
            }
            *slot = DIGITS[((v >> (124 - 4 * digit)) & 0xf) as usize];
            digit += 1;
        }
        f.write_str(std::str::from_utf8(&out).expect("hex digits and dashes"))
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
        match (self.text(), other.text()) {
            (None, None) => (self.bits(), self.lo).cmp(&(other.bits(), other.lo)),
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
        assert!(Uid::parse("0a1b2c3d-0000-4000-8000-00000000ffff").text().is_none());
        assert!(Uid::parse("0a1b2c3d-0000-4000-c000-00000000ffff").text().is_some());
        assert!(Uid::parse("0A1B2C3D-0000-4000-8000-00000000FFFF").text().is_some());
        assert!(Uid::parse("").is_empty());
        // What the canonical parser takes is exactly lowercase hex with its four hyphens.
        let canonical = "0a1b2c3d-4e5f-4000-8000-00000000ffff";
        assert_eq!(
            parse_canonical_uuid(canonical),
            Some(uuid::Uuid::parse_str(canonical).unwrap().as_u128())
        );
        for (i, c) in canonical.char_indices() {
            for other in ['g', 'A', '-', '0', '/', ':', '`', '\u{7f}'] {
                let mut changed = canonical.to_string();
                changed.replace_range(i..=i, &other.to_string());
                let expected = (c == '-') == (other == '-') && !other.is_ascii_uppercase() && other.is_ascii_hexdigit()
                    || c == '-' && other == '-';
                assert_eq!(parse_canonical_uuid(&changed).is_some(), expected, "{changed}");
            }
        }
        assert_eq!(std::mem::size_of::<Uid>(), 16);
    }

    #[test]
    fn new_v4_should_make_a_packed_version_4_uuid() {
        let uid = Uid::new_v4(u128::MAX);
        let s = uid.to_string();
        assert_eq!(&s[14..15], "4");
        assert!(matches!(&s[19..20], "8" | "9" | "a" | "b"));
        assert_eq!(Uid::parse(&s), uid);
        assert!(uid.text().is_none());
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

    #[test]
    fn a_text_uid_should_hold_its_own_string_and_equal_every_copy_of_it() {
        let text = "x".repeat(300);
        let (a, b) = (Uid::parse(&text), Uid::parse(&text));
        assert_eq!(a, b, "equal by string, though each holds its own copy");
        assert_eq!(a.hash64(), b.hash64());
        let set: std::collections::HashSet<Uid> = [a.clone()].into();
        assert!(set.contains(&b));
        let kept = a.clone();
        drop(a);
        assert_eq!(kept.to_string(), text);
        assert_ne!(Uid::parse("x"), Uid::parse("y"));
        assert_ne!(Uid::parse("x"), Uid::EMPTY);
        assert_eq!(Uid::EMPTY.clone(), Uid::parse(""));
    }

    #[test]
    fn clones_dropped_on_other_threads_should_keep_the_text_until_the_last() {
        let uid = Uid::parse("held-by-threads");
        std::thread::scope(|scope| {
            for _ in 0..4 {
                let held: Vec<Uid> = (0..20).map(|_| uid.clone()).collect();
                scope.spawn(move || assert!(held.iter().all(|u| u.to_string() == "held-by-threads")));
            }
        });
        assert_eq!(uid.to_string(), "held-by-threads");
    }
}
