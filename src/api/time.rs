//! Timestamps as the API writes them: `metav1.Time` at whole seconds and `metav1.MicroTime` at
//! microseconds, both RFC 3339 in UTC.

use k8s_openapi::jiff::Timestamp;

/// The current time as `metav1.Time` writes it: `YYYY-MM-DDTHH:MM:SSZ`.
pub fn now_rfc3339() -> String {
    rfc3339(Timestamp::now())
}

/// The current time as `metav1.MicroTime` writes it: `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
pub fn now_rfc3339_micros() -> String {
    rfc3339_micros(Timestamp::now())
}

/// The instant an RFC 3339 timestamp names (either form above, or any offset); none when `text`
/// is not one.
pub fn parse_rfc3339(text: &str) -> Option<std::time::SystemTime> {
    text.parse::<Timestamp>().ok().map(std::time::SystemTime::from)
}

/// Whole seconds since the Unix epoch of an RFC 3339 timestamp (as protobuf's `Time` keeps it);
/// none when `text` is not one.
pub fn seconds_of_rfc3339(text: &str) -> Option<i64> {
    text.parse::<Timestamp>().ok().map(|t| t.as_second())
}

/// `seconds` since the Unix epoch as `metav1.Time` writes it; none out of the range of years
/// RFC 3339 can write.
pub fn rfc3339_of_seconds(seconds: i64) -> Option<String> {
    Timestamp::from_second(seconds).ok().map(rfc3339)
}

fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn rfc3339_micros(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64, micros: i32) -> Timestamp {
        Timestamp::new(seconds, micros * 1_000).unwrap()
    }

    #[test]
    fn rfc3339_should_format_epoch_leap_day_and_a_recent_instant() {
        assert_eq!(rfc3339(at(0, 0)), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(at(951_782_400, 0)), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(at(1_700_000_000, 999_999)), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn parse_rfc3339_should_read_what_rfc3339_writes_and_refuse_the_rest() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        assert_eq!(parse_rfc3339("2023-11-14T22:13:20Z"), Some(t));
        assert_eq!(parse_rfc3339("yesterday"), None);
    }

    #[test]
    fn seconds_should_go_to_rfc3339_and_back() {
        assert_eq!(
            rfc3339_of_seconds(1_700_000_000).as_deref(),
            Some("2023-11-14T22:13:20Z")
        );
        assert_eq!(seconds_of_rfc3339("2023-11-14T22:13:20Z"), Some(1_700_000_000));
        assert_eq!(seconds_of_rfc3339("2023-11-14T22:13:20.5+01:00"), Some(1_699_996_400));
        assert_eq!(rfc3339_of_seconds(i64::MAX), None);
        assert_eq!(seconds_of_rfc3339("soon"), None);
    }

    #[test]
    fn rfc3339_micros_should_pad_the_fraction_to_six_digits() {
        assert_eq!(rfc3339_micros(at(1_700_000_000, 42)), "2023-11-14T22:13:20.000042Z");
        assert_eq!(rfc3339_micros(at(1_700_000_000, 0)), "2023-11-14T22:13:20.000000Z");
    }
}
