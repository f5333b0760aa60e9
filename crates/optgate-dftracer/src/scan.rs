//! A hand-written, allocation-free scanner that walks one JSON object line and picks
//! out only the fields aggregation needs, skipping everything else in place.
//!
//! It checks the JSON structure strictly enough that torn and non-JSON lines are
//! rejected (brackets, strings, escapes, literals and number characters), but it is not
//! a full validator: a number like `01` is accepted, and strings it skips are not
//! checked for valid UTF-8. The crate's tests check that it extracts the same fields as
//! their `serde_json` based oracle (`tests/dftracer/serde_oracle.rs`) on every line that
//! `serde_json` accepts.
//!
//! Speed notes (measured on generated 2.x traces): internal results carry a zero-sized
//! error (`Stop`) with the details parked in the scanner, so every `Result` fits in
//! registers; values are written straight into the caller's event; string bodies are
//! searched eight bytes at a time.

use std::borrow::Cow;

use crate::event::{Number, RawEvent, Val, parse_number};

/// Why a line is not a JSON object; `at` is the byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanError {
    pub at: usize,
    pub what: &'static str,
    /// True when the input ended before the object was complete (a torn line).
    pub eof: bool,
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.what, self.at)
    }
}

/// Nesting limit for skipped values; deeper input is rejected instead of recursing.
const MAX_DEPTH: u32 = 64;

/// Parses one line holding a JSON object (surrounding whitespace allowed) into `ev`, a
/// default event the caller provides: through the fast path (`fast::scan_fast`) when the
/// line has DFTracer's compact shape, else strictly.
pub fn scan_into<'a>(line: &'a [u8], ev: &mut RawEvent<'a>) -> Result<(), ScanError> {
    if crate::fast::scan_fast(line, ev) {
        return Ok(());
    }
    *ev = RawEvent::default();
    scan_strict(line, ev)
}

/// The strict scanner alone: every line it accepts read, every error worded.
pub fn scan_strict<'a>(line: &'a [u8], ev: &mut RawEvent<'a>) -> Result<(), ScanError> {
    let mut s = Scanner {
        b: line,
        i: 0,
        escaped: false,
        err: None,
    };
    match s.object(ev) {
        Ok(()) => Ok(()),
        Err(Stop) => Err(s.err.take().unwrap_or(ScanError {
            at: 0,
            what: "invalid",
            eof: false,
        })),
    }
}

/// "Parsing stopped"; the reason is in `Scanner::err`.
struct Stop;

type R<T> = Result<T, Stop>;

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// High bit set in each byte of `w` (little endian) that ends a run of plain string
/// bytes: `"`, `\` or a control character. Bits above the lowest one may be false
/// positives (borrows), so only `trailing_zeros` of the result is meaningful.
#[inline]
fn string_stops(w: u64) -> u64 {
    let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x;
    let quote = zero_byte(w ^ (ONES * u64::from(b'"')));
    let backslash = zero_byte(w ^ (ONES * u64::from(b'\\')));
    let control = w.wrapping_sub(ONES * 0x20) & !w;
    (quote | backslash | control) & HIGHS
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    /// Whether the string just read held escapes.
    escaped: bool,
    err: Option<ScanError>,
}

impl<'a> Scanner<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\r' | b'\n') = self.peek() {
            self.i += 1;
        }
    }

    #[cold]
    fn fail_at(&mut self, at: usize, what: &'static str) -> Stop {
        let eof = at >= self.b.len();
        self.err = Some(ScanError { at, what, eof });
        Stop
    }

    /// Fails at the current position; an EOF error when the input is used up.
    #[cold]
    fn fail(&mut self, what: &'static str) -> Stop {
        self.fail_at(self.i, what)
    }

    #[inline]
    fn expect(&mut self, c: u8, what: &'static str) -> R<()> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.fail(what))
        }
    }

    /// After a member: `,` (more follow: true) or the closing bracket (false).
    #[inline]
    fn member_end(&mut self, close: u8, what: &'static str) -> R<bool> {
        self.ws();
        match self.peek() {
            Some(b',') => {
                self.i += 1;
                Ok(true)
            }
            Some(c) if c == close => {
                self.i += 1;
                Ok(false)
            }
            _ => Err(self.fail(what)),
        }
    }

    /// Reads a string at the opening quote; returns the end of its body (the closing
    /// quote's offset; the body starts one after the opening quote) and leaves `i`
    /// after the closing quote. Sets `self.escaped`.
    fn string(&mut self) -> R<usize> {
        self.expect(b'"', "expected a string")?;
        self.escaped = false;
        loop {
            // Plain bytes are the hot path: eight at a time, then one by one.
            while let Some(word) = self.b.get(self.i..self.i + 8) {
                let m = string_stops(u64::from_le_bytes(word.try_into().expect("8 bytes")));
                if m != 0 {
                    self.i += (m.trailing_zeros() / 8) as usize;
                    break;
                }
                self.i += 8;
            }
            while let Some(&c) = self.b.get(self.i) {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.i += 1;
            }
            match self.peek() {
                Some(b'"') => {
                    self.i += 1;
                    return Ok(self.i - 1);
                }
                Some(b'\\') => {
                    self.escaped = true;
                    self.i += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.i += 1,
                        Some(b'u') => {
                            self.i += 1;
                            for _ in 0..4 {
                                match self.peek() {
                                    Some(h) if h.is_ascii_hexdigit() => self.i += 1,
                                    _ => return Err(self.fail("bad \\u escape")),
                                }
                            }
                        }
                        _ => return Err(self.fail("bad escape")),
                    }
                }
                Some(_) => return Err(self.fail("control character in string")),
                None => return Err(self.fail("string not closed")),
            }
        }
    }

    /// The text of the string whose opening quote is at `q` and body ends at `end`:
    /// borrowed when plain, unescaped otherwise.
    fn string_text(&mut self, q: usize, end: usize) -> R<Cow<'a, str>> {
        let b: &'a [u8] = self.b;
        if !self.escaped {
            return match std::str::from_utf8(&b[q + 1..end]) {
                Ok(s) => Ok(Cow::Borrowed(s)),
                Err(_) => Err(self.fail_at(q, "invalid UTF-8")),
            };
        }
        // Escapes are rare in traces (paths with quotes, unicode names); serde_json's
        // unescaping handles surrogate pairs correctly, so reuse it on the quoted slice.
        match serde_json::from_slice::<String>(&b[q..=end]) {
            Ok(s) => Ok(Cow::Owned(s)),
            Err(_) => Err(self.fail_at(q, "invalid string escape")),
        }
    }

    /// Reads a key and the `:` after it; returns what `classify` makes of the key's
    /// (unescaped) bytes. A small integer keeps the result in registers, and a `match`
    /// inside `classify` compiles to a length switch instead of comparing every name.
    #[inline]
    fn key(&mut self, classify: impl Fn(&[u8]) -> u8) -> R<u8> {
        self.ws();
        let q = self.i;
        let end = self.string()?;
        let found = if self.escaped {
            // Keys are compared unescaped, as serde_json does; DFTracer never escapes
            // them, so this copy happens only on odd input.
            let key = self.string_text(q, end)?;
            classify(key.as_bytes())
        } else {
            classify(&self.b[q + 1..end])
        };
        self.ws();
        self.expect(b':', "expected ':'")?;
        self.ws();
        Ok(found)
    }

    fn object(&mut self, ev: &mut RawEvent<'a>) -> R<()> {
        self.ws();
        self.expect(b'{', "expected '{'")?;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
        } else {
            loop {
                let key = self.key(|k| match k {
                    b"name" => 0,
                    b"cat" => 1,
                    b"ph" => 2,
                    b"ts" => 3,
                    b"dur" => 4,
                    b"args" => 5,
                    _ => 6,
                })?;
                match key {
                    0 => self.value(&mut ev.name, 0)?,
                    1 => self.value(&mut ev.cat, 0)?,
                    2 => self.value(&mut ev.ph, 0)?,
                    3 => self.value(&mut ev.ts, 0)?,
                    4 => self.value(&mut ev.dur, 0)?,
                    5 if self.peek() == Some(b'{') => self.args(ev)?,
                    _ => self.skip(0)?,
                }
                if !self.member_end(b'}', "expected ',' or '}'")? {
                    break;
                }
            }
        }
        self.ws();
        if self.i != self.b.len() {
            return Err(self.fail("trailing characters after the object"));
        }
        Ok(())
    }

    /// Walks the `args` object, keeping `epoch`, `name` and `value`.
    fn args(&mut self, ev: &mut RawEvent<'a>) -> R<()> {
        self.expect(b'{', "expected '{'")?;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            let key = self.key(|k| match k {
                b"epoch" => 0,
                b"name" => 1,
                b"value" => 2,
                _ => 3,
            })?;
            match key {
                0 => self.value(&mut ev.epoch, 1)?,
                1 => self.value(&mut ev.arg_name, 1)?,
                2 => self.value(&mut ev.arg_value, 1)?,
                _ => self.skip(1)?,
            }
            if !self.member_end(b'}', "expected ',' or '}'")? {
                return Ok(());
            }
        }
    }

    /// Reads a value we want to keep into `slot`: strings and numbers as such, anything
    /// else is skipped and recorded as `Other`.
    fn value(&mut self, slot: &mut Option<Val<'a>>, depth: u32) -> R<()> {
        *slot = Some(match self.peek() {
            Some(b'"') => {
                let q = self.i;
                let end = self.string()?;
                Val::Str(self.string_text(q, end)?)
            }
            Some(b'-' | b'0'..=b'9') => Val::Num(self.number_value()?),
            _ => {
                self.skip(depth)?;
                Val::Other
            }
        });
        Ok(())
    }

    fn number_value(&mut self) -> R<Number> {
        let start = self.i;
        // Fast path: a plain integer of at most 18 digits (every ts, dur, id and epoch
        // DFTracer writes), accumulated while scanning.
        let neg = self.peek() == Some(b'-');
        if neg {
            self.i += 1;
        }
        let digits = self.i;
        let mut v: i64 = 0;
        while let Some(&d) = self.b.get(self.i) {
            if !d.is_ascii_digit() {
                break;
            }
            v = v.wrapping_mul(10).wrapping_add(i64::from(d - b'0'));
            self.i += 1;
        }
        let n = self.i - digits;
        if (1..=18).contains(&n) && !matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return Ok(Number::Int(if neg { -v } else { v }));
        }
        self.i = start;
        self.number()?;
        let text = std::str::from_utf8(&self.b[start..self.i])
            .map_err(|_| self.fail_at(start, "number"))?;
        // Out-of-range floats (1e400) are the only JSON numbers that fail here.
        parse_number(text).ok_or_else(|| {
            self.err = Some(ScanError {
                at: start,
                what: "number out of range",
                eof: false,
            });
            Stop
        })
    }

    /// Skips a JSON number, checking its shape.
    fn number(&mut self) -> R<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        if !self.digits() {
            return Err(self.fail("expected digits"));
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !self.digits() {
                return Err(self.fail("expected digits after '.'"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if !self.digits() {
                return Err(self.fail("expected exponent digits"));
            }
        }
        Ok(())
    }

    /// Skips digits; false when there were none.
    #[inline]
    fn digits(&mut self) -> bool {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        self.i > start
    }

    fn literal(&mut self, word: &'static [u8]) -> R<()> {
        let end = self.i + word.len();
        if self.b.get(self.i..end) == Some(word) {
            self.i = end;
            return Ok(());
        }
        // A literal cut off by the end of the line is a torn line, not garbage.
        let rest = &self.b[self.i..];
        if word.starts_with(rest) {
            self.i = self.b.len();
            return Err(self.fail("literal cut off"));
        }
        Err(self.fail("unexpected character"))
    }

    /// Skips any JSON value, checking its structure.
    fn skip(&mut self, depth: u32) -> R<()> {
        if depth > MAX_DEPTH {
            return Err(self.fail("nested too deeply"));
        }
        match self.peek() {
            Some(b'"') => self.string().map(drop),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'{') => {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.key(|_| 0)?;
                    self.skip(depth + 1)?;
                    if !self.member_end(b'}', "expected ',' or '}'")? {
                        return Ok(());
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.ws();
                    self.skip(depth + 1)?;
                    if !self.member_end(b']', "expected ',' or ']'")? {
                        return Ok(());
                    }
                }
            }
            _ => Err(self.fail("expected a value")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses one line into a fresh event.
    fn scan_line(line: &[u8]) -> Result<RawEvent<'_>, ScanError> {
        let mut ev = RawEvent::default();
        scan_into(line, &mut ev)?;
        Ok(ev)
    }

    fn s(line: &str) -> RawEvent<'_> {
        scan_line(line.as_bytes()).unwrap()
    }

    #[test]
    fn picks_fields_of_each_generation() {
        let e = s(
            r#"{"id":"203","name":"TorchFramework.compute","cat":"ai_framework","pid":"0","tid":"338684","ts":"1698352113761329","dur":"1361443","ph":"X","args":{"hostname":"ruby165","epoch":2}}"#,
        );
        assert_eq!(e.name, Some(Val::Str("TorchFramework.compute".into())));
        assert_eq!(e.cat, Some(Val::Str("ai_framework".into())));
        assert_eq!(e.ts, Some(Val::Str("1698352113761329".into())));
        assert_eq!(e.dur, Some(Val::Str("1361443".into())));
        assert_eq!(e.ph, Some(Val::Str("X".into())));
        assert_eq!(e.epoch, Some(Val::Num(Number::Int(2))));

        let e = s(
            r#"{"id":2,"name":"forward","cat":"compute","type":6,"pid":9643,"tid":9643,"ts":1795975471940661,"dur":2566,"ph":1,"args":{"hhash":"6882804a826580cd","epoch":1,"step":0}}"#,
        );
        assert_eq!(e.ph, Some(Val::Num(Number::Int(1))));
        assert_eq!(e.dur, Some(Val::Num(Number::Int(2566))));
        assert_eq!(e.epoch, Some(Val::Num(Number::Int(1))));

        let e = s(
            r#"{"name":"CM","cat":"dftracer","type":1,"pid":9643,"tid":9643,"ph":4,"args":{"hhash":"6882804a826580cd","name":"time_metric","value":"US"}}"#,
        );
        assert_eq!(e.arg_name, Some(Val::Str("time_metric".into())));
        assert_eq!(e.arg_value, Some(Val::Str("US".into())));
        assert_eq!(e.dur, None);
    }

    #[test]
    fn nested_args_are_skipped_but_checked() {
        let e = s(
            r#"{"name":"end","args":{"cfg":{"a":[1,2,{"b":null}],"t":true},"num_events":13},"dur":0}"#,
        );
        assert_eq!(e.name, Some(Val::Str("end".into())));
        assert_eq!(e.dur, Some(Val::Num(Number::Int(0))));
        assert!(scan_line(br#"{"name":"end","args":{"cfg":{"a":[1,2,{"b":nul}]}}}"#).is_err());
    }

    #[test]
    fn escaped_strings_are_unescaped() {
        let e = s(r#"{"name":"a\"b\u00e9","cat":"x\\y"}"#);
        assert_eq!(e.name, Some(Val::Str("a\"bé".into())));
        assert_eq!(e.cat, Some(Val::Str("x\\y".into())));
    }

    #[test]
    fn torn_lines_are_eof_errors() {
        let full =
            r#"{"name":"forward","cat":"compute","ts":17,"dur":2566,"ph":1,"args":{"epoch":1}}"#;
        assert!(scan_line(full.as_bytes()).is_ok());
        for cut in 1..full.len() {
            let err = scan_line(&full.as_bytes()[..cut]).expect_err("a cut line must not parse");
            assert!(err.eof, "cut at {cut} should be an EOF error, got {err}");
        }
    }

    #[test]
    fn garbage_is_rejected() {
        for bad in [
            "",
            "hello",
            "[",
            "]",
            "{\"a\":1}}",
            "{\"a\" 1}",
            "{\"a\":1,}",
            "{a:1}",
            "{\"a\":tru}",
            "{\"a\":-}",
            "{\"a\":1.}",
            "{\"a\":\"x\ty\"}",
            "{\"a\":\"\\q\"}",
        ] {
            assert!(
                scan_line(bad.as_bytes()).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn deep_nesting_is_rejected_not_overflowed() {
        let deep = format!(
            "{{\"args\":{{\"x\":{}1{}}}}}",
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        assert!(scan_line(deep.as_bytes()).is_err());
    }
}
