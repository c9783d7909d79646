//! Names and UIDs as the API server makes them, for whoever makes them in its stead: the
//! simulated cluster and the cluster generator.

use rand::Rng;

/// The alphabet of apimachinery's `util/rand.String`: no vowels, so no accidental words, and no
/// look-alikes such as `0`/`o` or `1`/`l`.
pub const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `len` random characters of [`SUFFIX_ALPHABET`], one draw each: a `generateName` suffix.
pub fn random_suffix(rng: &mut impl Rng, len: usize) -> String {
    (0..len)
        .map(|_| char::from(SUFFIX_ALPHABET[rng.gen_range(0..SUFFIX_ALPHABET.len())]))
        .collect()
}

/// The canonical lowercase version-4 UUID (RFC 4122) made from 128 random bits.
pub fn uid_v4(random: u128) -> String {
    uuid::Builder::from_random_bytes(random.to_be_bytes())
        .into_uuid()
        .hyphenated()
        .to_string()
}
