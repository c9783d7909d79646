//! Server-assigned metadata: UIDs are fresh random v4 UUIDs, generated names use the API server's
//! alphabet, and timestamps are RFC 3339 UTC at whole seconds, as `metav1.Time` serialises them
//! (or at microseconds, as `metav1.MicroTime` does, for the audit log).

use rand::Rng;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The alphabet of apimachinery's `util/rand.String`: no vowels, so no accidental words, and no
/// look-alikes such as `0`/`o` or `1`/`l`.
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// The API server's `generateName` suffix length.
const GENERATED_SUFFIX_LEN: usize = 5;

/// A random RFC 4122 version 4 UUID, lowercase and hyphenated.
pub(super) fn new_uid() -> String {
    crate::graph::Uid::new_v4(rand::thread_rng().gen()).to_string()
}

/// `prefix` plus five random characters, as `generateName` produces.
pub(super) fn generated_name(prefix: &str) -> String {
    let mut rng = rand::thread_rng();
    let suffix: String = (0..GENERATED_SUFFIX_LEN)
        .map(|_| char::from(NAME_ALPHABET[rng.gen_range(0..NAME_ALPHABET.len())]))
        .collect();
    format!("{prefix}{suffix}")
}

/// The current time as `metav1.Time` writes it.
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// The current time as `metav1.MicroTime` writes it.
pub(super) fn now_rfc3339_micros() -> String {
    rfc3339_micros(SystemTime::now())
}

/// Formats `t` as `YYYY-MM-DDTHH:MM:SSZ`; a clock set before 1970 reads as the epoch.
fn rfc3339(t: SystemTime) -> String {
    format!("{}Z", date_time(since_epoch(t).as_secs()))
}

/// Formats `t` as `YYYY-MM-DDTHH:MM:SS.ffffffZ`; a clock set before 1970 reads as the epoch.
fn rfc3339_micros(t: SystemTime) -> String {
    let since = since_epoch(t);
    format!("{}.{:06}Z", date_time(since.as_secs()), since.subsec_micros())
}

fn since_epoch(t: SystemTime) -> Duration {
    t.duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// `YYYY-MM-DDTHH:MM:SS` for `secs` seconds after the epoch, in UTC.
fn date_time(secs: u64) -> String {
    let (year, month, day) = civil_from_days(secs / 86_400);
    let rem = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date, after Howard Hinnant's `civil_from_days`
/// (eras of 400 years starting on March 1st, so the leap day is the last day of a year).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_should_format_epoch_leap_day_and_a_recent_instant() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
            "2023-11-14T22:13:20Z"
        );
    }

    #[test]
    fn rfc3339_micros_should_pad_the_fraction_to_six_digits() {
        assert_eq!(
            rfc3339_micros(UNIX_EPOCH + Duration::from_micros(1_700_000_000_000_042)),
            "2023-11-14T22:13:20.000042Z"
        );
    }

    #[test]
    fn new_uid_should_be_a_lowercase_v4_uuid() {
        let uid = new_uid();
        let parts: Vec<&str> = uid.split('-').collect();
        assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12]);
        assert!(parts[2].starts_with('4'));
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"));
        assert!(uid
            .chars()
            .all(|c| c == '-' || c.is_ascii_digit() || c.is_ascii_lowercase()));
        assert_ne!(uid, new_uid());
    }

    #[test]
    fn generated_name_should_append_five_lowercase_alphanumerics() {
        let name = generated_name("web-");
        assert_eq!(name.len(), 9);
        assert!(name[4..].bytes().all(|b| NAME_ALPHABET.contains(&b)));
    }
}
