//! The consistent hash ring that assigns ranges to the live replicas (`--shards auto`).
//!
//! Each member has [`POINTS`] points on the ring, at a mixed hash of its identity and the
//! point's number; a point owns the hashes from the previous point (inclusive) up to itself
//! (exclusive). So every replica computes the same assignment from the same member set, the
//! ranges of all members tile the hash space, and a member joining or leaving moves only the
//! arcs next to its own points, about 1/N of the space.

use super::ranges::Ranges;
use crate::api::shard::fnv1a64;

/// Points per member: enough that three members' shares stay within a few percent of a third.
pub const POINTS: u32 = 64;

/// The ranges `me` owns among `members` (which should include it); none when it is not one.
pub fn assign(members: &[String], me: &str) -> Ranges {
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
        if i == 0 {
            // The first point also owns the wrap-around arc past the last point.
            let last = points[points.len() - 1].0;
            mine.push((0, u128::from(at)));
            mine.push((last, 1 << 64));
        } else {
            mine.push((points[i - 1].0, u128::from(at)));
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
        let shares: Vec<Ranges> = all.iter().map(|m| assign(&all, m)).collect();
        assert!(Ranges::union(&shares).is_all());
        for (i, a) in shares.iter().enumerate() {
            assert!((0.2..0.47).contains(&a.share()), "share {} of {}", a.share(), all[i]);
            for b in &shares[i + 1..] {
                assert!(!a.intersects(b));
            }
        }
        assert!(assign(&all, "stranger").is_empty());
        assert!(assign(&members(&["solo"]), "solo").is_all());
    }

    #[test]
    fn a_member_joining_should_take_only_from_the_others_and_move_about_its_share() {
        let before = members(&["a", "b", "c"]);
        let after = members(&["a", "b", "c", "d"]);
        let newcomer = assign(&after, "d");
        for m in &before {
            let (old, new) = (assign(&before, m), assign(&after, m));
            // What m keeps is a subset of what it had: nothing moves between the old members.
            assert_eq!(Ranges::union([&old, &new]), old, "{m} gained nothing");
            assert!(!new.intersects(&newcomer));
        }
        assert!((0.1..0.4).contains(&newcomer.share()), "{}", newcomer.share());
    }
}
