//! Durations as people write them in flags: Go's `time.ParseDuration` without a sign, so
//! `250us`, `1.5s`, `5m` and `1h30m` mean what they mean to `kubectl` and kube-controller-manager.
//! One parser serves `kube-gc`'s flags, the simulated API server's fault settings and `loadgen`.

use std::time::Duration;

/// Units, with their length in nanoseconds.
const UNITS: [(&str, f64); 7] = [
    ("ns", 1.0),
    ("us", 1e3),
    ("µs", 1e3),
    ("ms", 1e6),
    ("s", 1e9),
    ("m", 60e9),
    ("h", 3600e9),
];

/// What a good duration looks like, for error messages.
const EXAMPLES: &str = "for example 250ms, 30s, 5m, 1h30m";

/// Parses one or more number-and-unit pairs (the number may have a fraction) into their sum;
/// `0` alone is zero. The error says what is wrong, for clap to print after the flag's name.
pub fn parse(text: &str) -> Result<Duration, String> {
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return Err(format!("expected a duration ({EXAMPLES})"));
    }
    let mut rest = text;
    let mut nanos = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let unit_len = rest[digits..]
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len() - digits);
        let (number, unit) = (&rest[..digits], &rest[digits..digits + unit_len]);
        let Ok(value) = number.parse::<f64>() else {
            return Err(format!("expected a number before `{unit}` ({EXAMPLES})"));
        };
        let Some((_, unit_nanos)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            let problem = match unit {
                "" => format!("`{number}` has no unit"),
                _ => format!("unknown unit `{unit}`"),
            };
            return Err(format!("{problem}: use ns, us, ms, s, m or h ({EXAMPLES})"));
        };
        nanos += value * unit_nanos;
        rest = &rest[digits + unit_len..];
    }
    Duration::try_from_secs_f64(nanos / 1e9)
        .ok()
        .filter(|d| d.as_secs() < u64::from(u32::MAX))
        .ok_or_else(|| format!("`{text}` is too long"))
}

/// [`parse`], refusing zero: for periods and timeouts, where zero would spin or never wait.
pub fn parse_positive(text: &str) -> Result<Duration, String> {
    match parse(text)? {
        d if d.is_zero() => Err(format!("a duration must be longer than zero ({EXAMPLES})")),
        d => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_should_parse_in_every_unit_with_fractions_and_add_up() {
        let cases = [
            ("0", 0),
            ("250us", 250_000),
            ("250µs", 250_000),
            ("2ms", 2_000_000),
            ("1.5s", 1_500_000_000),
            ("30s", 30_000_000_000),
            ("5m", 300_000_000_000),
            ("1h", 3_600_000_000_000),
            ("1h30m", 5_400_000_000_000),
            ("2m5s", 125_000_000_000),
            ("100ns", 100),
        ];
        for (text, nanos) in cases {
            assert_eq!(parse(text), Ok(Duration::from_nanos(nanos)), "{text}");
        }
    }

    #[test]
    fn bad_durations_should_be_rejected_with_the_reason() {
        let cases = [
            ("", "expected a duration"),
            ("30", "`30` has no unit"),
            ("5d", "unknown unit `d`"),
            ("1 h", "unknown unit ` h`"),
            ("s", "expected a number before `s`"),
            ("-5s", "expected a number before `-`"),
            ("1..5s", "expected a number before `s`"),
            ("99999999999999999999s", "too long"),
            ("6000000000000h", "too long"),
        ];
        for (text, reason) in cases {
            let error = parse(text).expect_err(text);
            assert!(error.contains(reason), "{text}: {error}");
        }
    }

    #[test]
    fn parse_positive_should_refuse_zero_only() {
        for zero in ["0", "0s", "0.0ms"] {
            assert!(parse_positive(zero).unwrap_err().contains("longer than zero"), "{zero}");
        }
        assert_eq!(parse_positive("1ns"), Ok(Duration::from_nanos(1)));
    }
}
