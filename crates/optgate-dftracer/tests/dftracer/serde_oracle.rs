//! The test oracle for the crate's line scanner: a `serde_json` based line parser
//! (hand-written visitors that borrow strings from the line and ignore every field
//! aggregation does not need, without ever building a `serde_json::Value`), and
//! [`assert_scanner_agrees`], which checks the scanner against it on every line of a trace
//! as the reader cuts it (used by `parsers_agree.rs`, `damaged.rs` and `fixtures.rs`).

use std::borrow::Cow;
use std::fmt;

use optgate_dftracer::__private::{Number, RawEvent, ScanError, Val, scan_into};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

/// What the crate's scanner makes of one line: its event, or why not.
pub fn scan_line(line: &[u8]) -> Result<RawEvent<'_>, ScanError> {
    let mut ev = RawEvent::default();
    scan_into(line, &mut ev)?;
    Ok(ev)
}

/// The lines of `text` as the reader hands them to its parser: cut at `\n`, trimmed, a
/// leading `[` and trailing `]` and `,` of the bracketed generations taken off, empty ones
/// left out; each with whether it is a last line without a newline (where an incomplete
/// object is a torn line, not a line that is not JSON).
pub fn parsed_lines(text: &[u8]) -> Vec<(&[u8], bool)> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (raw, last) = match rest.iter().position(|&b| b == b'\n') {
            Some(end) => {
                let raw = &rest[..end];
                rest = &rest[end + 1..];
                (raw, false)
            }
            None => (std::mem::take(&mut rest), true),
        };
        let mut line = raw.trim_ascii();
        if let Some(inner) = line.strip_prefix(b"[") {
            line = inner.trim_ascii_start();
        }
        while let Some(inner) = line.strip_suffix(b"]").or_else(|| line.strip_suffix(b",")) {
            line = inner.trim_ascii_end();
        }
        if !line.is_empty() {
            out.push((line, last));
        }
    }
    out
}

/// Checks that the scanner reads every line of `text` (a trace's uncompressed text) as
/// this oracle does: the same fields where both accept the line; where both reject it, the
/// same diagnostic (a torn line for an incomplete last line, otherwise not JSON); never
/// one accepting what the other rejects.
#[track_caller]
pub fn assert_scanner_agrees(text: &[u8]) {
    for (line, last) in parsed_lines(text) {
        let shown = String::from_utf8_lossy(line);
        match (scan_line(line), parse_line(line)) {
            (Ok(scanned), Ok(parsed)) => assert!(
                same_fields(&scanned, &parsed),
                "line: {shown}\n scanner: {scanned:?}\n  oracle: {parsed:?}"
            ),
            (Err(scanned), Err(parsed)) => assert_eq!(
                scanned.eof && last,
                parsed.is_eof() && last,
                "torn or not JSON ({scanned:?}, {parsed}): {shown}"
            ),
            (scanned, parsed) => panic!(
                "the scanner says {:?}, the oracle {:?}: {shown}",
                scanned.map(|_| "accepted"),
                parsed.map(|_| "accepted")
            ),
        }
    }
}

/// Whether the scanner's event and the oracle's hold the same fields, a float allowed 1 ulp
/// apart: serde_json's default float parser (without `float_roundtrip`) may miss the
/// correctly rounded value by that much on a long literal, where the scanner uses std's
/// exact parser.
fn same_fields(scanned: &RawEvent<'_>, parsed: &RawEvent<'_>) -> bool {
    let same = |a: &Option<Val<'_>>, b: &Option<Val<'_>>| match (a, b) {
        (Some(Val::Num(Number::Float(x))), Some(Val::Num(Number::Float(y)))) => {
            x.to_bits().abs_diff(y.to_bits()) <= 1
        }
        _ => a == b,
    };
    let (a, b) = (fields(scanned), fields(parsed));
    a.iter().zip(b).all(|(x, y)| same(x, y))
}

/// Every field of `e`, in declaration order.
fn fields<'e, 'a>(e: &'e RawEvent<'a>) -> [&'e Option<Val<'a>>; 8] {
    [
        &e.name,
        &e.cat,
        &e.ph,
        &e.ts,
        &e.dur,
        &e.epoch,
        &e.arg_name,
        &e.arg_value,
    ]
}

/// Parses one line holding a JSON object (surrounding whitespace allowed).
pub fn parse_line(line: &[u8]) -> Result<RawEvent<'_>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(line);
    let ev = de.deserialize_map(EventVisitor)?;
    de.end()?;
    Ok(ev)
}

/// The keys we look at; everything else deserialises as `Other` and is ignored.
enum Key {
    Name,
    Cat,
    Ph,
    Ts,
    Dur,
    Args,
    Epoch,
    Value,
    Other,
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(match v {
            "name" => Key::Name,
            "cat" => Key::Cat,
            "ph" => Key::Ph,
            "ts" => Key::Ts,
            "dur" => Key::Dur,
            "args" => Key::Args,
            "epoch" => Key::Epoch,
            "value" => Key::Value,
            _ => Key::Other,
        })
    }
}

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_identifier(KeyVisitor)
    }
}

/// A scalar we keep: borrowed string, number, or `Other` (nested values are skipped).
struct ValSeed;

impl<'de> DeserializeSeed<'de> for ValSeed {
    type Value = Val<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Val<'de>, D::Error> {
        d.deserialize_any(ValVisitor)
    }
}

struct ValVisitor;

impl<'de> Visitor<'de> for ValVisitor {
    type Value = Val<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Val<'de>, E> {
        Ok(Val::Str(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Val<'de>, E> {
        Ok(Val::Str(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Val<'de>, E> {
        Ok(Val::Str(Cow::Owned(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Val<'de>, E> {
        Ok(Val::Num(Number::Int(v)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Val<'de>, E> {
        // Above i64::MAX only as a float, exactly like the scanner's fallback.
        Ok(Val::Num(
            i64::try_from(v).map_or(Number::Float(v as f64), Number::Int),
        ))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Val<'de>, E> {
        Ok(Val::Num(Number::Float(v)))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Val<'de>, E> {
        Ok(Val::Other)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Val<'de>, E> {
        Ok(Val::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Val<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Val::Other)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Val<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Val::Other)
    }
}

/// The top-level object. Only a map is accepted (a derived struct would also take an
/// array positionally, which is not an event).
struct EventVisitor;

impl<'de> Visitor<'de> for EventVisitor {
    type Value = RawEvent<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawEvent<'de>, A::Error> {
        let mut ev = RawEvent::default();
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Name => ev.name = Some(map.next_value_seed(ValSeed)?),
                Key::Cat => ev.cat = Some(map.next_value_seed(ValSeed)?),
                Key::Ph => ev.ph = Some(map.next_value_seed(ValSeed)?),
                Key::Ts => ev.ts = Some(map.next_value_seed(ValSeed)?),
                Key::Dur => ev.dur = Some(map.next_value_seed(ValSeed)?),
                Key::Args => map.next_value_seed(ArgsSeed(&mut ev))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(ev)
    }
}

/// Reads `args` into the event when it is an object; anything else is skipped.
struct ArgsSeed<'e, 'de>(&'e mut RawEvent<'de>);

impl<'de> DeserializeSeed<'de> for ArgsSeed<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ArgsSeed<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("args")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Epoch => self.0.epoch = Some(map.next_value_seed(ValSeed)?),
                Key::Name => self.0.arg_name = Some(map.next_value_seed(ValSeed)?),
                Key::Value => self.0.arg_value = Some(map.next_value_seed(ValSeed)?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

// The oracle's own behaviour, so that a change to it cannot hide a scanner bug.

#[test]
fn reads_the_same_fields_as_documented() {
    let e = parse_line(
        br#"{"id":"203","name":"TorchFramework.compute","cat":"ai_framework","ts":"1698352113761329","dur":"1361443","ph":"X","args":{"hostname":"ruby165","epoch":2}}"#,
    )
    .unwrap();
    assert_eq!(e.name, Some(Val::Str("TorchFramework.compute".into())));
    assert_eq!(e.dur, Some(Val::Str("1361443".into())));
    assert_eq!(e.epoch, Some(Val::Num(Number::Int(2))));
    // An args value that is not an object is ignored, not an error.
    let e = parse_line(br#"{"name":"x","args":[1,2],"dur":3}"#).unwrap();
    assert_eq!(e.dur, Some(Val::Num(Number::Int(3))));
    assert_eq!(e.epoch, None);
}

#[test]
fn arrays_and_trailing_garbage_are_rejected() {
    assert!(parse_line(br#"["forward","compute"]"#).is_err());
    assert!(parse_line(br#"{"name":"x"} x"#).is_err());
    assert!(parse_line(br#"{"name":"x""#).is_err());
}
