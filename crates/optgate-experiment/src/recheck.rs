//! Recurring re-checks: the strict interval syntax of `recheck.every` and `optgate submit
//! --every` (a whole number and one unit, within [`MIN_RECHECK_INTERVAL`] and
//! [`MAX_RECHECK_INTERVAL`]), its display, and the resolved `recheck:` key. Pure.

use std::time::Duration;

use serde::Serialize;

use crate::limits::{MAX_RECHECK_INTERVAL, MIN_RECHECK_INTERVAL};

/// The resolved `recheck:` key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recheck {
    /// How often the daemon submits the experiment again.
    pub every: Duration,
    /// The command run when a decision flips (empty: none).
    pub notify: Vec<String>,
}

/// Why an interval was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntervalError {
    #[error(
        "`{quoted}` is not an interval: expected a whole number and one unit, `s`, `m`, `h` or `d` (e.g. `7d`, `12h`, `30m`)"
    )]
    Syntax { quoted: String },
    #[error(
        "`{quoted}` is shorter than {}, the shortest re-check interval",
        format_interval(MIN_RECHECK_INTERVAL)
    )]
    TooShort { quoted: String },
    #[error(
        "`{quoted}` is longer than {}, the longest re-check interval",
        format_interval(MAX_RECHECK_INTERVAL)
    )]
    TooLong { quoted: String },
}

/// The longest number of digits read: past it the interval is too long whatever its unit
/// (and the product never overflows).
const MAX_DIGITS: usize = 12;

/// Parses `7d`, `12h`, `30m`, `90s`: digits, then exactly one unit letter, nothing else (no
/// spaces, signs, fractions or compound forms), within the limits.
pub fn parse_interval(s: &str) -> Result<Duration, IntervalError> {
    let quoted = crate::limits::quote_prefix(s);
    let syntax = || IntervalError::Syntax {
        quoted: quoted.clone(),
    };
    let last = s.chars().last().map_or(0, char::len_utf8);
    let (digits, unit) = s.split_at(s.len() - last);
    let scale: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(syntax()),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(syntax());
    }
    let too_long = || IntervalError::TooLong {
        quoted: quoted.clone(),
    };
    if digits.trim_start_matches('0').len() > MAX_DIGITS {
        return Err(too_long());
    }
    let n: u64 = digits.parse().map_err(|_| syntax())?;
    let secs = n.checked_mul(scale).ok_or_else(too_long)?;
    let d = Duration::from_secs(secs);
    if d < MIN_RECHECK_INTERVAL {
        return Err(IntervalError::TooShort { quoted });
    }
    if d > MAX_RECHECK_INTERVAL {
        return Err(too_long());
    }
    Ok(d)
}

/// An interval in the largest unit that divides it: `7d`, `36h`, `90s`.
pub fn format_interval(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        _ if s >= 86_400 && s.is_multiple_of(86_400) => format!("{}d", s / 86_400),
        _ if s >= 3600 && s.is_multiple_of(3600) => format!("{}h", s / 3600),
        _ if s >= 60 && s.is_multiple_of(60) => format!("{}m", s / 60),
        _ => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_unit_and_the_limits_themselves_parse() {
        assert_eq!(parse_interval("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_interval("12h"), Ok(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_interval("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_interval("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_interval("1s"), Ok(MIN_RECHECK_INTERVAL));
        assert_eq!(parse_interval("366d"), Ok(MAX_RECHECK_INTERVAL));
        assert_eq!(parse_interval("007m"), Ok(Duration::from_secs(420)));
    }

    /// Anything but digits and one unit is refused: the loose forms a general duration
    /// parser would accept (spaces, compounds, fractions, other units, a bare number).
    #[test]
    fn loose_forms_are_refused() {
        for bad in [
            "", "d", "7", "7 d", " 7d", "7d ", "7D", "1d12h", "1.5h", "-1d", "+1d", "7w", "7days",
            "7dd", "0x10s", "１d", "7ü", "ü",
        ] {
            assert!(
                matches!(parse_interval(bad), Err(IntervalError::Syntax { .. })),
                "{bad:?}: {:?}",
                parse_interval(bad)
            );
        }
    }

    /// Just outside each limit is refused with the limit named; a number that overflows any
    /// product is too long, never wrapped to a short interval.
    #[test]
    fn just_outside_the_limits_is_refused() {
        for short in ["0s", "0d", "0000m"] {
            let e = parse_interval(short).unwrap_err();
            assert!(matches!(e, IntervalError::TooShort { .. }), "{short}");
            assert!(e.to_string().contains("shorter than 1s"), "{e}");
        }
        for long in [
            "367d",
            "8785h",
            "31622401s",
            "18446744073709551615d",
            "99999999999999999999999s",
        ] {
            let e = parse_interval(long).unwrap_err();
            assert!(matches!(e, IntervalError::TooLong { .. }), "{long}");
            assert!(e.to_string().contains("longer than 366d"), "{e}");
        }
        assert_eq!(parse_interval("8784h"), Ok(MAX_RECHECK_INTERVAL));
    }

    #[test]
    fn intervals_show_in_their_largest_unit() {
        assert_eq!(format_interval(Duration::from_secs(7 * 86_400)), "7d");
        assert_eq!(format_interval(Duration::from_secs(36 * 3600)), "36h");
        assert_eq!(format_interval(Duration::from_secs(90)), "90s");
        assert_eq!(format_interval(Duration::from_secs(120)), "2m");
        for s in ["7d", "36h", "5m", "61s"] {
            assert_eq!(format_interval(parse_interval(s).unwrap()), s);
        }
    }
}
