//! The hash ranges a replica collects, and what falls in them.
//!
//! Invariant: a [`Ranges`] is sorted, disjoint, without empty or touching ranges, so two sets
//! compare equal exactly when they cover the same hashes.

use crate::api::shard::{fnv1a64, ShardField, ShardRange, ShardSelector};
use crate::graph::{Identity, Uid};

/// 2^64: one past the last hash.
const HASH_SPACE: u128 = 1 << 64;

/// A set of half-open ranges of the 64-bit hash space.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(from = "Vec<(u64, u128)>", into = "Vec<(u64, u128)>")]
pub struct Ranges(Vec<ShardRange>);

impl Ranges {
    /// The whole hash space: an unsharded collector's.
    pub fn all() -> Ranges {
        Ranges(vec![ShardRange {
            start: 0,
            end: HASH_SPACE,
        }])
    }

    /// The `index`-th of `count` equal slices of the hash space (`--shards INDEX/COUNT`).
    pub fn slice(index: u64, count: u64) -> Ranges {
        let width = HASH_SPACE / u128::from(count.max(1));
        let start = width * u128::from(index);
        let end = if index + 1 >= count { HASH_SPACE } else { start + width };
        Ranges::from(vec![(start as u64, end)])
    }

    /// True when `hash` is in the set.
    pub fn contains(&self, hash: u64) -> bool {
        let at = self.0.partition_point(|r| r.end <= u128::from(hash));
        self.0.get(at).is_some_and(|r| r.contains(hash))
    }

    /// True when the set has no hash.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True when the set is the whole hash space.
    pub fn is_all(&self) -> bool {
        *self == Ranges::all()
    }

    /// True when the two sets share a hash.
    pub fn intersects(&self, other: &Ranges) -> bool {
        self.0.iter().any(|a| {
            other
                .0
                .iter()
                .any(|b| u128::from(a.start) < b.end && u128::from(b.start) < a.end)
        })
    }

    /// The union of `sets`.
    pub fn union<'a>(sets: impl IntoIterator<Item = &'a Ranges>) -> Ranges {
        let pairs = sets.into_iter().flat_map(|s| s.0.iter().map(|r| (r.start, r.end)));
        Ranges::from(pairs.collect::<Vec<_>>())
    }

    /// The fraction of the hash space the set covers.
    pub fn share(&self) -> f64 {
        let covered: u128 = self.0.iter().map(|r| r.end - u128::from(r.start)).sum();
        covered as f64 / HASH_SPACE as f64
    }

    /// True when an object of `namespace` (`""`: cluster-scoped) and `uid` is in the set: a
    /// namespaced object by its namespace's hash, so that a namespace stays whole in one shard;
    /// a cluster-scoped one by its UID's.
    pub fn owns(&self, namespace: &str, uid: &Uid) -> bool {
        if namespace.is_empty() {
            self.contains(fnv1a64(uid.to_string().as_bytes()))
        } else {
            self.holds_namespace(namespace)
        }
    }

    /// True when the objects of `namespace` are in the set.
    pub fn holds_namespace(&self, namespace: &str) -> bool {
        self.contains(fnv1a64(namespace.as_bytes()))
    }

    /// [`Ranges::owns`] for a graph identity.
    pub fn owns_identity(&self, identity: &Identity) -> bool {
        self.is_all() || self.owns(identity.namespace(), &identity.uid)
    }

    /// The `shardSelector` that lists the namespaced objects in the set; `None` for the whole
    /// space, which needs no selector.
    pub fn namespace_selector(&self) -> Option<ShardSelector> {
        (!self.is_all()).then(|| ShardSelector {
            field: ShardField::Namespace,
            ranges: self.0.clone(),
        })
    }
}

impl From<Vec<(u64, u128)>> for Ranges {
    /// Sorts and merges `pairs`, dropping empty ones and clamping ends to 2^64.
    fn from(mut pairs: Vec<(u64, u128)>) -> Ranges {
        pairs.retain(|&(start, end)| u128::from(start) < end.min(HASH_SPACE));
        pairs.sort_unstable();
        let mut merged: Vec<ShardRange> = Vec::with_capacity(pairs.len());
        for (start, end) in pairs {
            let end = end.min(HASH_SPACE);
            match merged.last_mut() {
                Some(last) if u128::from(start) <= last.end => last.end = last.end.max(end),
                _ => merged.push(ShardRange { start, end }),
            }
        }
        Ranges(merged)
    }
}

impl From<Ranges> for Vec<(u64, u128)> {
    fn from(ranges: Ranges) -> Self {
        ranges.0.iter().map(|r| (r.start, r.end)).collect()
    }
}

impl std::fmt::Display for Ranges {
    /// `none`, `all`, or `0x…-0x…` ranges joined by commas, with the share of the space.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        if self.is_all() {
            return f.write_str("all");
        }
        write!(f, "{:.1}% in {} ranges", self.share() * 100.0, self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_should_merge_touching_pairs_and_answer_membership_at_the_bounds() {
        let r = Ranges::from(vec![(10, 20), (0, 5), (20, 30), (40, 40)]);
        assert_eq!(Vec::<(u64, u128)>::from(r.clone()), vec![(0, 5), (10, 30)]);
        assert!(r.contains(0) && r.contains(4) && !r.contains(5) && r.contains(10) && r.contains(29));
        assert!(!r.contains(30) && !r.contains(u64::MAX));
        assert!(Ranges::all().contains(u64::MAX));
    }

    #[test]
    fn slices_should_tile_the_hash_space() {
        for count in [1, 2, 3, 4, 7] {
            let slices: Vec<Ranges> = (0..count).map(|i| Ranges::slice(i, count)).collect();
            assert!(Ranges::union(&slices).is_all(), "{count} slices cover everything");
            for (i, a) in slices.iter().enumerate() {
                for b in &slices[i + 1..] {
                    assert!(!a.intersects(b), "{count} slices are disjoint");
                }
            }
        }
    }

    #[test]
    fn a_namespace_selector_should_select_exactly_the_namespaces_the_ranges_own() {
        let half = Ranges::slice(1, 2);
        let selector = half.namespace_selector().expect("a part of the space needs a selector");
        let uid = Uid::parse("6f1f5f3e-0000-4000-8000-000000000001");
        for ns in ["default", "kube-system", "team-a", "team-b", "prod", "staging"] {
            assert_eq!(selector.matches(ns, "x"), half.owns(ns, &uid), "{ns}");
        }
        assert_eq!(Ranges::all().namespace_selector(), None);
        let reparsed = ShardSelector::parse(&selector.to_string()).expect("parses back");
        assert_eq!(reparsed, selector);
    }
}
