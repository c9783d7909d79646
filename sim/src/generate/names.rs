//! UIDs and names shaped like the ones a cluster makes, drawn from the generator's seeded RNG.
//!
//! The draws are part of the streams' contract: a UID is one `u128` draw and a suffix one draw per
//! character, so that a seed names the same objects in every release.

use kube_gc::api::names::{random_suffix, uid_v4};
use rand::Rng;
use std::collections::HashSet;

/// A canonical lowercase version-4 UUID from one `u128` draw.
pub fn uid(rng: &mut impl Rng) -> String {
    uid_v4(rng.gen())
}

/// `<prefix>-<len random characters>`, different from every name in `taken` (which it joins), as
/// controllers retry a generated name that collides.
pub fn unique_child(rng: &mut impl Rng, prefix: &str, len: usize, taken: &mut HashSet<String>) -> String {
    loop {
        let name = format!("{prefix}-{}", random_suffix(rng, len));
        if taken.insert(name.clone()) {
            return name;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn uid_should_be_a_canonical_v4_uuid() {
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..100 {
            let u = uid(&mut rng);
            assert_eq!(u.len(), 36);
            assert_eq!(&u[14..15], "4", "{u}");
            assert!("89ab".contains(&u[19..20]), "{u}");
            assert_eq!(u, u.to_lowercase());
            assert_eq!(kube_gc::graph::Uid::parse(&u).to_string(), u);
        }
    }

    #[test]
    fn uid_should_be_the_graphs_v4_packing_of_the_same_draw() {
        let (mut a, mut b) = (SmallRng::seed_from_u64(9), SmallRng::seed_from_u64(9));
        for _ in 0..100 {
            assert_eq!(uid(&mut a), kube_gc::graph::Uid::new_v4(b.gen()).to_string());
        }
    }

    #[test]
    fn unique_child_should_never_repeat_a_taken_name() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut taken = HashSet::new();
        // One character of a 27-letter alphabet: every name is taken after 27 draws.
        let names: HashSet<String> = (0..27).map(|_| unique_child(&mut rng, "rs", 1, &mut taken)).collect();
        assert_eq!(names.len(), 27);
    }
}
