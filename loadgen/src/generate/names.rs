//! UIDs and names shaped like the ones a cluster makes, drawn from the generator's seeded RNG.

use rand::Rng;
use std::collections::HashSet;

/// The alphabet of generated name suffixes (apimachinery's `rand.String`, which leaves out vowels
/// and look-alike characters so that suffixes never spell words).
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A canonical lowercase version-4 UUID.
pub fn uid(rng: &mut impl Rng) -> String {
    kube_gc::graph::Uid::new_v4(rng.gen()).to_string()
}

/// `len` random characters of [`ALPHABET`].
pub fn suffix(rng: &mut impl Rng, len: usize) -> String {
    (0..len)
        .map(|_| char::from(ALPHABET[rng.gen_range(0..ALPHABET.len())]))
        .collect()
}

/// `<prefix>-<len random characters>`, different from every name in `taken` (which it joins), as
/// controllers retry a generated name that collides.
pub fn unique_child(rng: &mut impl Rng, prefix: &str, len: usize, taken: &mut HashSet<String>) -> String {
    loop {
        let name = format!("{prefix}-{}", suffix(rng, len));
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
    fn unique_child_should_never_repeat_a_taken_name() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut taken = HashSet::new();
        // One character of a 27-letter alphabet: every name is taken after 27 draws.
        let names: HashSet<String> = (0..27).map(|_| unique_child(&mut rng, "rs", 1, &mut taken)).collect();
        assert_eq!(names.len(), 27);
    }
}
