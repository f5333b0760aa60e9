//! A hand-written, allocation-free scanner that walks one JSON object line and picks
//! out only the fields aggregation needs, skipping everything else in place.
//!
//! It checks the JSON structure strictly enough that torn and non-JSON lines are
//! rejected (brackets, strings, escapes, literals and number characters), but it is not
//! a full validator: a number like `01` is accepted. `tests/parsers_agree.rs` checks
//! that it extracts the same fields as the `serde_json` based parser on every line that
//! `serde_json` accepts.

use std::borrow::Cow;

use crate::event::{RawEvent, Val, parse_number};

/// Why a line is not a JSON object; `at` is the byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScanError {
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

/// Parses one line holding a JSON object (surrounding whitespace allowed).
pub(crate) fn scan_line(line: &[u8]) -> Result<RawEvent<'_>, ScanError> {
    let mut s = Scanner { b: line, i: 0 };
    let mut ev = RawEvent::default();
    s.ws();
    s.expect(b'{', "expected '{'")?;
    s.ws();
    if s.peek() == Some(b'}') {
        s.i += 1;
    } else {
        loop {
            s.ws();
            let key = s.string_raw()?;
            // Keys are compared unescaped (as serde_json does); DFTracer never escapes
            // them, so the copy happens only on odd input.
            let unescaped;
            let key: &[u8] = if key.escaped {
                unescaped = s.string_val(key)?;
                unescaped.as_bytes()
            } else {
                key.raw
            };
            s.ws();
            s.expect(b':', "expected ':'")?;
            s.ws();
            match key {
                b"name" => ev.name = Some(s.value(0)?),
                b"cat" => ev.cat = Some(s.value(0)?),
                b"ph" => ev.ph = Some(s.value(0)?),
                b"ts" => ev.ts = Some(s.value(0)?),
                b"dur" => ev.dur = Some(s.value(0)?),
                b"args" if s.peek() == Some(b'{') => s.args(&mut ev)?,
                _ => s.skip(0)?,
            }
            s.ws();
            match s.next() {
                Some(b',') => continue,
                Some(b'}') => break,
                Some(_) => return Err(s.err_before("expected ',' or '}'")),
                None => return Err(s.eof("object not closed")),
            }
        }
    }
    s.ws();
    if s.i != s.b.len() {
        return Err(s.err("trailing characters after the object"));
    }
    Ok(ev)
}

/// A string's raw bytes between the quotes, and whether it holds escapes.
struct RawStr<'a> {
    raw: &'a [u8],
    /// Byte offset of the opening quote, to re-read escaped strings with serde_json.
    start: usize,
    escaped: bool,
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\r' | b'\n') = self.peek() {
            self.i += 1;
        }
    }

    fn err(&self, what: &'static str) -> ScanError {
        ScanError {
            at: self.i,
            what,
            eof: false,
        }
    }

    fn err_before(&self, what: &'static str) -> ScanError {
        ScanError {
            at: self.i.saturating_sub(1),
            what,
            eof: false,
        }
    }

    fn eof(&self, what: &'static str) -> ScanError {
        ScanError {
            at: self.i,
            what,
            eof: true,
        }
    }

    #[inline]
    fn expect(&mut self, c: u8, what: &'static str) -> Result<(), ScanError> {
        match self.peek() {
            Some(x) if x == c => {
                self.i += 1;
                Ok(())
            }
            Some(_) => Err(self.err(what)),
            None => Err(self.eof(what)),
        }
    }

    /// Reads a string starting at the opening quote; leaves `i` after the closing one.
    fn string_raw(&mut self) -> Result<RawStr<'a>, ScanError> {
        let start = self.i;
        self.expect(b'"', "expected a string")?;
        let body = self.i;
        let mut escaped = false;
        loop {
            // Plain bytes are the hot path: walk them without further checks.
            while let Some(&c) = self.b.get(self.i) {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.i += 1;
            }
            match self.peek() {
                Some(b'"') => {
                    let raw = &self.b[body..self.i];
                    self.i += 1;
                    return Ok(RawStr {
                        raw,
                        start,
                        escaped,
                    });
                }
                Some(b'\\') => {
                    escaped = true;
                    self.i += 1;
                    match self.next() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {}
                        Some(b'u') => {
                            for _ in 0..4 {
                                match self.next() {
                                    Some(h) if h.is_ascii_hexdigit() => {}
                                    Some(_) => return Err(self.err_before("bad \\u escape")),
                                    None => return Err(self.eof("string not closed")),
                                }
                            }
                        }
                        Some(_) => return Err(self.err_before("bad escape")),
                        None => return Err(self.eof("string not closed")),
                    }
                }
                Some(_) => return Err(self.err("control character in string")),
                None => return Err(self.eof("string not closed")),
            }
        }
    }

    /// Turns a scanned string into text: borrowed when plain, unescaped otherwise.
    fn string_val(&self, s: RawStr<'a>) -> Result<Cow<'a, str>, ScanError> {
        if !s.escaped {
            return std::str::from_utf8(s.raw)
                .map(Cow::Borrowed)
                .map_err(|_| ScanError {
                    at: s.start,
                    what: "invalid UTF-8",
                    eof: false,
                });
        }
        // Escapes are rare in traces (paths with quotes, unicode names); serde_json's
        // unescaping handles surrogate pairs correctly, so reuse it on the quoted slice.
        let quoted = &self.b[s.start..s.start + s.raw.len() + 2];
        serde_json::from_slice::<String>(quoted)
            .map(Cow::Owned)
            .map_err(|_| ScanError {
                at: s.start,
                what: "invalid string escape",
                eof: false,
            })
    }

    /// Reads a value we want to keep: strings and numbers as such, others skipped.
    fn value(&mut self, depth: u32) -> Result<Val<'a>, ScanError> {
        match self.peek() {
            Some(b'"') => {
                let s = self.string_raw()?;
                Ok(Val::Str(self.string_val(s)?))
            }
            Some(b'-' | b'0'..=b'9') => {
                let start = self.i;
                let text = self.number()?;
                // Out-of-range floats (1e400) are the only JSON numbers that fail here.
                parse_number(text).map(Val::Num).ok_or(ScanError {
                    at: start,
                    what: "number out of range",
                    eof: false,
                })
            }
            _ => {
                self.skip(depth)?;
                Ok(Val::Other)
            }
        }
    }

    fn number(&mut self) -> Result<&'a str, ScanError> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let int_start = self.i;
        self.digits();
        if self.i == int_start {
            return Err(self.eof_or_err("expected digits"));
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            let frac = self.i;
            self.digits();
            if self.i == frac {
                return Err(self.eof_or_err("expected digits after '.'"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            let exp = self.i;
            self.digits();
            if self.i == exp {
                return Err(self.eof_or_err("expected exponent digits"));
            }
        }
        // Only ASCII was consumed, so this cannot fail; avoid unsafe anyway.
        std::str::from_utf8(&self.b[start..self.i]).map_err(|_| self.err("number"))
    }

    fn eof_or_err(&self, what: &'static str) -> ScanError {
        if self.i >= self.b.len() {
            self.eof(what)
        } else {
            self.err(what)
        }
    }

    #[inline]
    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<(), ScanError> {
        let end = self.i + word.len();
        if end <= self.b.len() && &self.b[self.i..end] == word {
            self.i = end;
            Ok(())
        } else if end > self.b.len() && word.starts_with(&self.b[self.i..]) {
            Err(self.eof("literal cut off"))
        } else {
            Err(self.err("unexpected character"))
        }
    }

    /// Skips any JSON value, checking its structure.
    fn skip(&mut self, depth: u32) -> Result<(), ScanError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deeply"));
        }
        match self.peek() {
            Some(b'"') => self.string_raw().map(drop),
            Some(b'-' | b'0'..=b'9') => self.number().map(drop),
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
                    self.ws();
                    self.string_raw()?;
                    self.ws();
                    self.expect(b':', "expected ':'")?;
                    self.ws();
                    self.skip(depth + 1)?;
                    self.ws();
                    match self.next() {
                        Some(b',') => continue,
                        Some(b'}') => return Ok(()),
                        Some(_) => return Err(self.err_before("expected ',' or '}'")),
                        None => return Err(self.eof("object not closed")),
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
                    self.ws();
                    match self.next() {
                        Some(b',') => continue,
                        Some(b']') => return Ok(()),
                        Some(_) => return Err(self.err_before("expected ',' or ']'")),
                        None => return Err(self.eof("array not closed")),
                    }
                }
            }
            Some(_) => Err(self.err("unexpected character")),
            None => Err(self.eof("value missing")),
        }
    }

    /// Walks the `args` object, keeping `epoch`, `name` and `value`.
    fn args(&mut self, ev: &mut RawEvent<'a>) -> Result<(), ScanError> {
        self.expect(b'{', "expected '{'")?;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.ws();
            let key = self.string_raw()?;
            let unescaped;
            let key: &[u8] = if key.escaped {
                unescaped = self.string_val(key)?;
                unescaped.as_bytes()
            } else {
                key.raw
            };
            self.ws();
            self.expect(b':', "expected ':'")?;
            self.ws();
            match key {
                b"epoch" => ev.epoch = Some(self.value(1)?),
                b"name" => ev.arg_name = Some(self.value(1)?),
                b"value" => ev.arg_value = Some(self.value(1)?),
                _ => self.skip(1)?,
            }
            self.ws();
            match self.next() {
                Some(b',') => continue,
                Some(b'}') => return Ok(()),
                Some(_) => return Err(self.err_before("expected ',' or '}'")),
                None => return Err(self.eof("args not closed")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Number;

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
