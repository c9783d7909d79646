//! The consistent hash ring that assigns ranges to the live replicas (`--shards auto`).
//!
//! Each member has [`POINTS`] points on the ring, at a mixed hash of its identity and the
//! point's number; a point owns the ring from the previous point (inclusive) up to itself
//! (exclusive). So every replica computes the same assignment from the same member set and
//! [`Scale`], the ranges of all members tile the hash space, and a member joining or leaving
//! moves only the arcs next to its own points, about 1/N of the ring.
//!
//! # The scale
//!
//! The server hashes namespaces with FNV-1a, whose high bits barely change between names that
//! differ in their last characters (`team-0001`, `team-0002`): a thousand such namespaces fall in
//! a few sixteenths of the hash space, so equal arcs of the hash space hold very unequal shares
//! of them. The ring is therefore laid on the namespaces' *quantiles*: a [`Scale`] of [`KNOTS`]
//! hash values, read off the sorted namespace hashes, maps a ring position to a hash by linear
//! interpolation between them, so that equal arcs of the ring hold about equal numbers of
//! namespaces. The map is monotone and onto, so the ranges still tile the hash space. One
//! replica computes the scale and publishes it ([`super::membership`]).

use super::ranges::Ranges;
use crate::api::shard::fnv1a64;

/// Points per member: enough that three members' shares stay within a few percent of a third.
pub const POINTS: u32 = 64;

/// Knots of a [`Scale`]: 256, so that one knot is 2^56 of the ring.
pub const KNOTS: usize = 256;

/// How ring positions map to hashes; see the [module docs](self). Empty: the identity.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Scale(Vec<u64>);

impl Scale {
    /// The scale that spreads the namespaces of `hashes` evenly over the ring: knot k sits
    /// between the namespaces of rank k·n/KNOTS − 1 and k·n/KNOTS. Identity for no namespace.
    pub fn of(hashes: &mut [u64]) -> Scale {
        hashes.sort_unstable();
        let n = hashes.len();
        if n == 0 {
            return Scale::default();
        }
        let mut knots = Vec::with_capacity(KNOTS - 1);
        let mut last = 0;
        for k in 1..KNOTS {
            let rank = k * n / KNOTS;
            let knot = match rank {
                0 => hashes[0] / 2,
                r if r >= n => hashes[n - 1],
                r => hashes[r - 1] / 2 + hashes[r] / 2,
            };
            last = knot.max(last);
            knots.push(last);
        }
        Scale(knots)
    }

    /// The hash at ring position `t` (2^64: the end of the space).
    fn map(&self, t: u128) -> u128 {
        if self.0.is_empty() || t >= 1 << 64 {
            return t;
        }
        let knot = |i: usize| -> u128 {
            match i {
                0 => 0,
                i if i >= KNOTS => 1 << 64,
                i => u128::from(self.0[i - 1]),
            }
        };
        let i = (t >> 56) as usize;
        let frac = t & ((1 << 56) - 1);
        let (lo, hi) = (knot(i), knot(i + 1));
        lo + (((hi - lo) * frac) >> 56)
    }
}

/// The ranges `me` owns among `members` (which should include it) on `scale`; none when it is
/// not one.
pub fn assign(members: &[String], me: &str, scale: &Scale) -> Ranges {
    if !members.iter().any(|m| m == me) {
        return Ranges::default();
    }
    let mut points: Vec<(u64, &str)> = members
        .iter()
        .flat_map(|m| (0..POINTS).map(move |i| (point(m, i), m.as_str())))
        .collect();
    points.sort_unstable();
    points.dedup_by_key(|p| p.0);
    let mut mine = Vec::new();
    for (i, &(at, owner)) in points.iter().enumerate() {
        if owner != me {
            continue;
        }
        let mut arc = |from: u128, to: u128| {
            let (start, end) = (scale.map(from), scale.map(to));
            mine.push((u64::try_from(start).unwrap_or(u64::MAX), end));
        };
        if i == 0 {
            // The first point also owns the wrap-around arc past the last point.
            arc(0, u128::from(at));
            arc(u128::from(points[points.len() - 1].0), 1 << 64);
        } else {
            arc(u128::from(points[i - 1].0), u128::from(at));
        }
    }
    Ranges::from(mine)
}

/// Where a member's `i`-th point sits: FNV-1a of `identity#i`, mixed (splitmix64's finalizer),
/// since FNV-1a alone barely moves the high bits for inputs that differ in their last byte.
fn point(identity: &str, i: u32) -> u64 {
    let mut z = fnv1a64(format!("{identity}#{i}").as_bytes());
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn the_members_ranges_should_tile_the_space_in_near_equal_shares() {
        let all = members(&["kube-gc-0", "kube-gc-1", "kube-gc-2"]);
        let shares: Vec<Ranges> = all.iter().map(|m| assign(&all, m, &Scale::default())).collect();
        assert!(Ranges::union(&shares).is_all());
        for (i, a) in shares.iter().enumerate() {
            assert!((0.2..0.47).contains(&a.share()), "share {} of {}", a.share(), all[i]);
            for b in &shares[i + 1..] {
                assert!(!a.intersects(b));
            }
        }
        assert!(assign(&all, "stranger", &Scale::default()).is_empty());
        assert!(assign(&members(&["solo"]), "solo", &Scale::default()).is_all());
    }

    #[test]
    fn a_member_joining_should_take_only_from_the_others_and_move_about_its_share() {
        let before = members(&["a", "b", "c"]);
        let after = members(&["a", "b", "c", "d"]);
        let newcomer = assign(&after, "d", &Scale::default());
        for m in &before {
            let (old, new) = (
                assign(&before, m, &Scale::default()),
                assign(&after, m, &Scale::default()),
            );
            // What m keeps is a subset of what it had: nothing moves between the old members.
            assert_eq!(Ranges::union([&old, &new]), old, "{m} gained nothing");
            assert!(!new.intersects(&newcomer));
        }
        assert!((0.1..0.4).contains(&newcomer.share()), "{}", newcomer.share());
    }

    #[test]
    fn on_the_namespaces_scale_each_member_should_get_about_its_share_of_similar_names() {
        let names: Vec<String> = (0..1000).map(|i| format!("team-{i:04}")).collect();
        let mut hashes: Vec<u64> = names.iter().map(|n| fnv1a64(n.as_bytes())).collect();
        let all = members(&["kube-gc-0", "kube-gc-1", "kube-gc-2"]);
        let count = |scale: &Scale, m: &str| {
            let mine = assign(&all, m, scale);
            names.iter().filter(|n| mine.contains(fnv1a64(n.as_bytes()))).count()
        };
        let uniform: Vec<usize> = all.iter().map(|m| count(&Scale::default(), m)).collect();
        let scale = Scale::of(&mut hashes);
        let scaled: Vec<usize> = all.iter().map(|m| count(&scale, m)).collect();
        assert_eq!(
            scaled.iter().sum::<usize>(),
            1000,
            "every namespace has one owner: {scaled:?}"
        );
        assert!(
            scaled.iter().all(|&c| (250..420).contains(&c)),
            "balanced on the scale: {scaled:?}"
        );
        assert!(
            uniform.iter().any(|&c| !(250..420).contains(&c)),
            "FNV-1a alone is not: {uniform:?}"
        );
        let shares: Vec<Ranges> = all.iter().map(|m| assign(&all, m, &scale)).collect();
        assert!(
            Ranges::union(&shares).is_all(),
            "the scaled ranges still tile the space"
        );
    }
}
