//! The resourceVersion a node was last observed at, in 54 bits.
//!
//! Kubernetes calls resourceVersions opaque, but every API server backed by etcd hands out etcd
//! revisions, printed in decimal: those are kept as numbers. Anything else (empty, not decimal, a
//! leading zero that would not print back the same, 2^54 or more) is [`ResourceVersion::UNKNOWN`],
//! and a collector that needs the version of such an object reads it live instead. Invariant: a
//! known version prints back to exactly the string it was parsed from, so a precondition built
//! from it names the version the server sent.
//!
//! 54 bits leave a node's flags, its version and its lock one atomic word (see [`super::node`]);
//! at a million writes per second, etcd needs five hundred years to reach 2^54.

use std::fmt;

/// A resourceVersion, or unknown. `Copy`, 8 bytes, and 0 means unknown (etcd revisions start at 1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ResourceVersion(u64);

impl ResourceVersion {
    /// Number of bits a known version fits in.
    pub const BITS: u32 = 54;

    /// No version known.
    pub const UNKNOWN: ResourceVersion = ResourceVersion(0);

    /// The version `s` names, or [`UNKNOWN`](Self::UNKNOWN) when it is not a canonical decimal
    /// number in `1..2^54`.
    pub fn parse(s: &str) -> ResourceVersion {
        let canonical = !s.is_empty() && !s.starts_with('0') && s.bytes().all(|b| b.is_ascii_digit());
        match s.parse::<u64>() {
            Ok(n) if canonical && n < 1 << Self::BITS => ResourceVersion(n),
            _ => ResourceVersion::UNKNOWN,
        }
    }

    /// The version from its bits, as [`bits`](Self::bits) gave them.
    pub(super) fn from_bits(bits: u64) -> ResourceVersion {
        debug_assert!(bits < 1 << Self::BITS, "a resourceVersion fits in 54 bits");
        ResourceVersion(bits)
    }

    /// The number, 0 when unknown.
    pub(super) fn bits(self) -> u64 {
        self.0
    }

    /// The version as a number, 0 when unknown; [`from_number`](Self::from_number) reads it
    /// back, so an atomic can hold one.
    pub fn number(self) -> u64 {
        self.0
    }

    /// The version `n` names; unknown when it is 0 or does not fit [`Self::BITS`].
    pub fn from_number(n: u64) -> ResourceVersion {
        if n < 1 << Self::BITS {
            ResourceVersion(n)
        } else {
            ResourceVersion::UNKNOWN
        }
    }

    /// True when a version is known.
    pub fn is_known(self) -> bool {
        self.0 != 0
    }

    /// True when both versions are known and this one is older: the watch behind it has not
    /// delivered `other` yet. Unknown versions compare as neither older nor newer.
    pub fn is_older_than(self, other: ResourceVersion) -> bool {
        self.is_known() && other.is_known() && self.0 < other.0
    }
}

/// The decimal string the server sent; empty when unknown.
impl fmt::Display for ResourceVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_known() {
            write!(f, "{}", self.0)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_version_should_keep_canonical_decimals_and_forget_the_rest() {
        for s in ["1", "42", "18014398509481983"] {
            let rv = ResourceVersion::parse(s);
            assert!(rv.is_known(), "{s}");
            assert_eq!(rv.to_string(), s);
        }
        for s in [
            "",
            "0",
            "007",
            "-1",
            "12a",
            "abc",
            "18014398509481984",
            "99999999999999999999",
        ] {
            assert_eq!(ResourceVersion::parse(s), ResourceVersion::UNKNOWN, "{s:?}");
        }
        assert_eq!(ResourceVersion::UNKNOWN.to_string(), "");
    }
}
