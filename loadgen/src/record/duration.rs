//! [`parse_duration`]: how long `--duration` records, written as `30s`, `5m`, `1h` or `1h30m`.

use std::time::Duration;

/// Units a duration may use, with their length in milliseconds.
const UNITS: [(&str, u64); 4] = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000)];

/// Parses one or more number-and-unit pairs (`ms`, `s`, `m`, `h`) into their sum, which must be
/// more than zero. The error says what is wrong, for clap to print after the flag's name.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let mut rest = text;
    let mut millis: u64 = 0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let unit_len = rest[digits..]
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len() - digits);
        let (number, unit) = (&rest[..digits], &rest[digits..digits + unit_len]);
        if number.is_empty() {
            return Err(format!("expected a number before `{unit}` (for example 30s, 5m, 1h)"));
        }
        let Some((_, unit_millis)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            let problem = match unit {
                "" => format!("`{number}` has no unit"),
                _ => format!("unknown unit `{unit}`"),
            };
            return Err(format!("{problem}: use ms, s, m or h (for example 30s, 5m, 1h)"));
        };
        millis = number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(*unit_millis))
            .and_then(|n| n.checked_add(millis))
            .ok_or_else(|| format!("`{text}` is too long"))?;
        rest = &rest[digits + unit_len..];
    }
    if millis == 0 {
        return Err("a duration must be longer than zero (for example 30s, 5m, 1h)".into());
    }
    Ok(Duration::from_millis(millis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_should_parse_in_every_unit_and_add_up() {
        let cases = [
            ("30s", 30_000),
            ("5m", 300_000),
            ("1h", 3_600_000),
            ("250ms", 250),
            ("1h30m", 5_400_000),
            ("2m5s", 125_000),
        ];
        for (text, millis) in cases {
            assert_eq!(parse_duration(text), Ok(Duration::from_millis(millis)), "{text}");
        }
    }

    #[test]
    fn bad_durations_should_be_rejected_with_the_reason() {
        let cases = [
            ("", "longer than zero"),
            ("0s", "longer than zero"),
            ("30", "`30` has no unit"),
            ("5d", "unknown unit `d`"),
            ("1 h", "unknown unit ` h`"),
            ("s", "expected a number before `s`"),
            ("-5s", "expected a number before `-`"),
            ("99999999999999999999s", "too long"),
            ("6000000000000h", "too long"),
        ];
        for (text, reason) in cases {
            let error = parse_duration(text).expect_err(text);
            assert!(error.contains(reason), "{text}: {error}");
        }
    }
}
