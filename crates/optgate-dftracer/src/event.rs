//! The few fields of one trace line that aggregation needs, as the line scanner (`scan`)
//! produces them (and the tests' `serde_json` oracle, which checks it), and the shared
//! value conversions.
//!
//! DFTracer generations disagree on types: 2023 writes every value as a string
//! (`"dur":"1361443"`), later ones write numbers; `ph` is `"X"`/`"M"` or `1`/`4`. Keeping
//! one neutral representation here means a parser only locates values and all
//! interpretation happens once.

use std::borrow::Cow;

/// A scalar as it appeared on the line: a JSON number's text, a string's (unescaped)
/// contents, or something else (object, array, bool, null).
#[derive(Debug, Clone, PartialEq)]
pub enum Val<'a> {
    /// A JSON number (integers stay exact).
    Num(Number),
    /// A JSON string's contents, unescaped.
    Str(Cow<'a, str>),
    /// Anything else; only its presence is known.
    Other,
}

/// The event phase, normalised over `"X"`/`1`, `"M"`/`4` and the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No `ph` field at all: treated like a complete event when it has a `dur`.
    Missing,
    /// `"X"` (2023/2024) or `1` (2.x): a complete event with `ts` and `dur`.
    Complete,
    /// `"M"` or `4`: metadata (hashes, thread names, the `CM` time unit).
    Metadata,
    /// Counters, aggregated records, instant events ...: not summed.
    Other,
}

/// The fields of one trace line that aggregation looks at.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RawEvent<'a> {
    pub name: Option<Val<'a>>,
    pub cat: Option<Val<'a>>,
    pub ph: Option<Val<'a>>,
    pub ts: Option<Val<'a>>,
    pub dur: Option<Val<'a>>,
    /// `args.epoch`.
    pub epoch: Option<Val<'a>>,
    /// `args.name` (metadata records carry the key here, e.g. `time_metric`).
    pub arg_name: Option<Val<'a>>,
    /// `args.value` (metadata records carry the value here, e.g. `US`).
    pub arg_value: Option<Val<'a>>,
}

impl<'a> RawEvent<'a> {
    pub(crate) fn phase(&self) -> Phase {
        match &self.ph {
            None => Phase::Missing,
            Some(Val::Str(s)) => match s.as_ref() {
                "X" => Phase::Complete,
                "M" => Phase::Metadata,
                _ => Phase::Other,
            },
            Some(Val::Num(Number::Int(1))) => Phase::Complete,
            Some(Val::Num(Number::Int(4))) => Phase::Metadata,
            Some(Val::Num(_)) => Phase::Other,
            Some(Val::Other) => Phase::Other,
        }
    }
}

/// A number read from a number or from a string holding one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }

    /// Rounded to the nearest integer; timestamps are compared as integers so that
    /// nanosecond timestamps (beyond f64's 2^53) stay exact when they are integers.
    pub fn as_i64(self) -> i64 {
        match self {
            Number::Int(i) => i,
            Number::Float(f) => f.round() as i64,
        }
    }
}

/// Parses decimal text: an integer fast path (the overwhelmingly common case) and a
/// float fallback. Surrounding whitespace inside a string value is tolerated.
pub(crate) fn parse_number(text: &str) -> Option<Number> {
    let t = text.trim();
    let bytes = t.as_bytes();
    let (neg, digits) = match bytes.first() {
        Some(b'-') => (true, &bytes[1..]),
        _ => (false, bytes),
    };
    // 18 digits always fit in i64 without overflow checks.
    if !digits.is_empty() && digits.len() <= 18 && digits.iter().all(u8::is_ascii_digit) {
        let mut v: i64 = 0;
        for &d in digits {
            v = v * 10 + i64::from(d - b'0');
        }
        return Some(Number::Int(if neg { -v } else { v }));
    }
    if let Ok(i) = t.parse::<i64>() {
        return Some(Number::Int(i));
    }
    match t.parse::<f64>() {
        Ok(f) if f.is_finite() => Some(Number::Float(f)),
        _ => None,
    }
}

/// Result of reading a numeric field that may be absent, a number, or a numeric string.
pub(crate) enum NumField {
    Absent,
    Value(Number),
    /// Present but not a number (e.g. `"dur":"abc"` or `"dur":null`).
    Bad,
}

pub(crate) fn num_field(v: &Option<Val<'_>>) -> NumField {
    match v {
        None => NumField::Absent,
        Some(Val::Num(n)) => NumField::Value(*n),
        Some(Val::Str(s)) => parse_number(s).map_or(NumField::Bad, NumField::Value),
        Some(Val::Other) => NumField::Bad,
    }
}

/// A string field's text; a number becomes its decimal text (a category written as `7`
/// is still a category), anything else is `None`.
pub(crate) fn str_field<'v>(v: &'v Option<Val<'_>>) -> Option<Cow<'v, str>> {
    match v {
        Some(Val::Str(s)) => Some(Cow::Borrowed(s.as_ref())),
        Some(Val::Num(Number::Int(i))) => Some(Cow::Owned(i.to_string())),
        Some(Val::Num(Number::Float(f))) => Some(Cow::Owned(f.to_string())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_from_text() {
        assert_eq!(
            parse_number("1698352113761329"),
            Some(Number::Int(1698352113761329))
        );
        assert_eq!(parse_number("-5"), Some(Number::Int(-5)));
        assert_eq!(parse_number(" 42 "), Some(Number::Int(42)));
        // 19 digits: beyond the fast path, still an integer.
        assert_eq!(
            parse_number("1795975471940661000"),
            Some(Number::Int(1795975471940661000))
        );
        assert_eq!(parse_number("2.5"), Some(Number::Float(2.5)));
        assert_eq!(parse_number("1e3"), Some(Number::Float(1000.0)));
        assert_eq!(parse_number("abc"), None);
        assert_eq!(parse_number(""), None);
        assert_eq!(parse_number("-"), None);
        assert_eq!(parse_number("NaN"), None);
    }

    #[test]
    fn phases_of_all_generations() {
        let with = |v: Val<'static>| {
            RawEvent {
                ph: Some(v),
                ..Default::default()
            }
            .phase()
        };
        assert_eq!(with(Val::Str("X".into())), Phase::Complete);
        assert_eq!(with(Val::Num(Number::Int(1))), Phase::Complete);
        assert_eq!(with(Val::Str("M".into())), Phase::Metadata);
        assert_eq!(with(Val::Num(Number::Int(4))), Phase::Metadata);
        assert_eq!(with(Val::Num(Number::Int(2))), Phase::Other);
        assert_eq!(with(Val::Str("C".into())), Phase::Other);
        assert_eq!(RawEvent::default().phase(), Phase::Missing);
    }
}
