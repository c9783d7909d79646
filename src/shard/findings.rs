//! What a replica found for the cluster-scoped owners being deleted with a finalizer, and the
//! compact form in which its Lease carries the findings to its peers.
//!
//! # Invariants
//!
//! - A finding speaks for one deletion: the owner's UID *and* the finalizer that holds it
//!   ([`Hold`]). An owner deleted in the Foreground way, then again with the Orphan policy (the
//!   API server swaps `foregroundDeletion` for `orphan`), is a new deletion: a "clear" for the
//!   first says nothing of the second, since Foreground only waits for *blocking* dependents
//!   while Orphan needs *every* dependent orphaned.
//! - Each report is taken after the findings are checked against the graph
//!   ([`Findings::retain`]): one whose owner changed its finalizer or left the graph since it was
//!   judged is dropped, and comes back only when a worker judges the owner again.
//! - A report is bounded ([`MAX_CLEARED`]): the "clear" sets carry 8 bytes an owner (a 64-bit
//!   key, base64), and beyond the bound the owners of the lowest keys go first. Every replica
//!   orders by the same key, so an owner clear in every shard is published by all of them once
//!   the owners before it are let go. Two owners share a key with a chance of about
//!   n / 2^64 for n owners in deletion (10^-15 for 10 000): that is the only way a key can
//!   speak for an owner it was not computed for.

use crate::api::shard::fnv1a64;
use crate::graph::Uid;
use base64::Engine;
use std::collections::BTreeMap;

/// The most "clear" findings one report carries: 12 288 keys, 128 KiB of base64, which with the
/// owners orphaned lately ([`super::orphaned::MAX_PUBLISHED`]) and the ring's scale keeps a
/// report well within the API server's 256 KiB bound on an object's annotations.
pub const MAX_CLEARED: usize = 12 * 1024;

/// The finalizer that holds a cluster-scoped owner while its dependents are handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hold {
    /// `foregroundDeletion`: the owner waits until no blocking dependent is left.
    Foreground,
    /// `orphan`: the owner waits until every dependent is orphaned.
    Orphan,
}

impl Hold {
    /// True when `finalizers` still hold the owner this way: the deletion is not over.
    pub fn held_by(self, finalizers: &crate::graph::ObservedFinalizers) -> bool {
        match self {
            Hold::Foreground => finalizers.foreground,
            Hold::Orphan => finalizers.orphan,
        }
    }
}

/// What this replica found for one deletion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finding {
    /// Dependents in this replica's ranges still hold the owner (block it, or still refer to it).
    Pending,
    /// No dependent in this replica's ranges holds the owner any more.
    Clear,
}

/// The key under which a report names an owner's deletion: a 64-bit mix of the UID.
pub fn key(uid: &Uid) -> u64 {
    splitmix64(fnv1a64(uid.to_string().as_bytes()))
}

/// SplitMix64's finalizer: spreads FNV-1a's output, whose high bits barely change between UIDs
/// that differ in their last characters, over all 64 bits.
fn splitmix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A replica's findings, by deletion.
#[derive(Debug, Default)]
pub struct Findings(BTreeMap<(Uid, Hold), Finding>);

impl Findings {
    /// Records the finding for the owner `uid` held by `hold`; one for another hold of the same
    /// owner is another deletion's, and goes.
    pub fn record(&mut self, uid: Uid, hold: Hold, finding: Finding) {
        let other = match hold {
            Hold::Foreground => Hold::Orphan,
            Hold::Orphan => Hold::Foreground,
        };
        self.0.remove(&(uid.clone(), other));
        self.0.insert((uid, hold), finding);
    }

    /// Keeps the findings `stands` still vouches for; see the [module docs](self).
    pub fn retain(&mut self, stands: impl Fn(&Uid, Hold, Finding) -> bool) {
        self.0.retain(|(uid, hold), finding| stands(uid, *hold, *finding));
    }

    /// The findings as a report carries them: the "clear" ones by hold, within [`MAX_CLEARED`];
    /// and how many are pending.
    pub fn published(&self) -> (OwnerSet, OwnerSet, usize) {
        let mut clear: Vec<(u64, Hold)> = Vec::new();
        let mut pending = 0;
        for ((uid, hold), finding) in &self.0 {
            match finding {
                Finding::Clear => clear.push((key(uid), *hold)),
                Finding::Pending => pending += 1,
            }
        }
        if clear.len() > MAX_CLEARED {
            clear.select_nth_unstable(MAX_CLEARED);
            clear.truncate(MAX_CLEARED);
        }
        let of = |wanted: Hold| OwnerSet::new(clear.iter().filter(|(_, h)| *h == wanted).map(|(k, _)| *k).collect());
        (of(Hold::Foreground), of(Hold::Orphan), pending)
    }
}

/// A set of owners' keys ([`key`]), sorted; on the wire, one base64 string of 8 bytes a key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnerSet(Vec<u64>);

impl OwnerSet {
    /// The set of `keys`.
    pub fn new(mut keys: Vec<u64>) -> OwnerSet {
        keys.sort_unstable();
        keys.dedup();
        OwnerSet(keys)
    }

    /// True when the set names the owner `uid`.
    pub fn contains(&self, uid: &Uid) -> bool {
        self.0.binary_search(&key(uid)).is_ok()
    }

    /// The keys.
    pub fn keys(&self) -> &[u64] {
        &self.0
    }

    /// How many owners the set names.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when the set names none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl serde::Serialize for OwnerSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = self.0.iter().flat_map(|k| k.to_be_bytes()).collect();
        s.serialize_str(&base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes))
    }
}

impl<'de> serde::Deserialize<'de> for OwnerSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<OwnerSet, D::Error> {
        use serde::de::Error;
        let text = String::deserialize(d)?;
        let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(text)
            .map_err(D::Error::custom)?;
        if bytes.len() % 8 != 0 {
            return Err(D::Error::custom("a set of owners' keys is 8 bytes a key"));
        }
        let keys = bytes
            .chunks_exact(8)
            .map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes")))
            .collect();
        Ok(OwnerSet::new(keys))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uid(i: u128) -> Uid {
        Uid::new_v4(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c834))
    }

    #[test]
    fn a_finding_should_speak_for_its_hold_only() {
        let mut findings = Findings::default();
        findings.record(uid(1), Hold::Foreground, Finding::Clear);
        let (foreground, orphan, _) = findings.published();
        assert!(foreground.contains(&uid(1)) && !orphan.contains(&uid(1)));
        findings.record(uid(1), Hold::Orphan, Finding::Pending);
        let (foreground, orphan, pending) = findings.published();
        assert!(!foreground.contains(&uid(1)) && !orphan.contains(&uid(1)));
        assert_eq!(pending, 1, "the Foreground finding went with the new deletion");
    }

    #[test]
    fn a_report_should_stay_bounded_and_keep_the_lowest_keys() {
        let mut findings = Findings::default();
        for i in 0..(MAX_CLEARED as u128 + 1000) {
            findings.record(uid(i), Hold::Foreground, Finding::Clear);
        }
        let (foreground, orphan, _) = findings.published();
        assert_eq!(foreground.len() + orphan.len(), MAX_CLEARED);
        let json = serde_json::to_string(&foreground).expect("serializes");
        assert!(json.len() <= 128 * 1024 + 2, "{} bytes", json.len());
        let highest = (0..(MAX_CLEARED as u128 + 1000))
            .map(|i| key(&uid(i)))
            .max()
            .expect("keys");
        assert!(!foreground.0.contains(&highest));
        let back: OwnerSet = serde_json::from_str(&json).expect("reads back");
        assert_eq!(back, foreground);
    }

    #[test]
    fn ten_thousand_owners_should_cost_under_110_kib() {
        let mut findings = Findings::default();
        for i in 0..10_000 {
            findings.record(uid(i), Hold::Orphan, Finding::Clear);
        }
        let (_, orphan, _) = findings.published();
        let bytes = serde_json::to_string(&orphan).expect("serializes").len();
        assert!(bytes < 110 * 1024, "{bytes} bytes for 10 000 owners");
        assert!((0..10_000).all(|i| orphan.contains(&uid(i))));
    }

    #[test]
    fn a_malformed_set_should_not_read() {
        assert!(serde_json::from_str::<OwnerSet>("\"AAAA\"").is_err());
        assert!(serde_json::from_str::<OwnerSet>("\"not base64!\"").is_err());
        assert_eq!(
            serde_json::from_str::<OwnerSet>("\"\"").expect("empty"),
            OwnerSet::default()
        );
    }
}
