//! The scanner's fast path (`fast.rs`) against its strict scanner: on every committed
//! trace line (fixtures and fuzz seeds), on every cut of a sample of them and on every
//! single-byte change of that sample, whenever the fast path takes a line the strict
//! scanner accepts it too and reads the same fields. Also checks the fast path takes the
//! lines DFTracer writes (so the agreement is not vacuous).

use std::io::Read;
use std::path::{Path, PathBuf};

use optgate_dftracer::__private::{RawEvent, scan_fast, scan_fast_as, scan_strict};

use crate::serde_oracle::parsed_lines;

/// Bytes a change puts in: the JSON grammar's own, whitespace, a control and a
/// non-ASCII byte.
const CHANGES: &[u8] = b"{}[]:,\"\\ 0-9.eEtfnu\x01\x80";

/// Every compiled variant of the fast path; those this CPU lacks are skipped.
const VARIANTS: [&str; 4] = ["avx512", "avx2", "sse2", "bytes"];

/// Whether the fast path takes `line`; panics if it reads it otherwise than the strict
/// scanner does, or if its compiled variants (each instruction set this CPU has, and the
/// byte-by-byte one) disagree.
#[track_caller]
fn agrees(line: &[u8]) -> bool {
    let shown = String::from_utf8_lossy(line);
    let mut fast = RawEvent::default();
    let taken = scan_fast(line, &mut fast);
    for variant in VARIANTS {
        let mut other = RawEvent::default();
        if let Some(took) = scan_fast_as(variant, line, &mut other) {
            assert_eq!(took, taken, "{variant} takes it or not otherwise: {shown}");
            if took {
                assert_eq!(other, fast, "{variant} reads otherwise: {shown}");
            }
        }
    }
    if !taken {
        return false;
    }
    let mut strict = RawEvent::default();
    assert!(
        scan_strict(line, &mut strict).is_ok(),
        "the fast path takes a line the strict scanner rejects: {shown}"
    );
    assert_eq!(fast, strict, "line: {shown}");
    true
}

/// Every committed trace: the fixtures of the three generations and the fuzz seeds.
fn traces() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out = Vec::new();
    for dir in [
        "tests/fixtures/dftracer-traces/dlio-2023",
        "tests/fixtures/dftracer-traces/cm1-2024",
        "tests/fixtures/dftracer-traces/pydftracer-2.2",
        "fuzz/seeds/trace_summary",
        "fuzz/regressions/trace_summary",
    ] {
        let entries = std::fs::read_dir(root.join(dir)).expect("committed trace folder");
        for e in entries {
            out.push(e.expect("folder entry").path());
        }
    }
    out.sort();
    assert!(out.len() >= 10, "committed traces missing: {out:?}");
    out
}

/// A trace's text, inflated when it is gzip (a damaged one as far as it goes).
fn text(path: &Path) -> Vec<u8> {
    let raw = std::fs::read(path).expect("read trace");
    if !raw.starts_with(&[0x1f, 0x8b]) {
        return raw;
    }
    let mut out = Vec::new();
    let _ = flate2::read::MultiGzDecoder::new(&raw[..]).read_to_end(&mut out);
    out
}

#[test]
fn fast_path_reads_every_committed_line_as_the_strict_scanner() {
    let (mut lines, mut taken) = (0usize, 0usize);
    for path in traces() {
        for (line, _) in parsed_lines(&text(&path)) {
            lines += 1;
            taken += usize::from(agrees(line));
        }
    }
    // Every line of the 2.x and 2024 fixtures and of the 2023 ones has the plain shape
    // but the odd one with whitespace or a long path: most lines take the fast path.
    assert!(
        taken * 10 >= lines * 9,
        "the fast path took only {taken} of {lines} lines"
    );
}

#[test]
fn fast_path_agrees_on_cuts_and_changes_of_committed_lines() {
    for path in traces() {
        let text = text(&path);
        let lines = parsed_lines(&text);
        // A sample spread over the file: its first lines and every n-th after.
        let step = (lines.len() / 6).max(1);
        for (line, _) in lines.iter().step_by(step).take(8) {
            for cut in 0..line.len() {
                agrees(&line[..cut]);
            }
            let mut changed = line.to_vec();
            for i in 0..line.len() {
                for &b in CHANGES {
                    changed[i] = b;
                    agrees(&changed);
                }
                changed[i] = line[i];
            }
        }
    }
}

#[test]
fn fast_path_declines_what_it_does_not_take_and_reads_the_rest() {
    let plain = br#"{"id":2,"name":"forward","cat":"compute","ts":17,"dur":-2566,"ph":1,"args":{"hhash":"68","epoch":1,"name":"x","value":"y"}}"#;
    assert!(agrees(plain), "the plain shape takes the fast path");
    for declined in [
        &br#"{"name":"a", "dur":1}"#[..],
        br#"{"name":"a\"b","dur":1}"#,
        br#"{"name":"a","dur":1.5}"#,
        br#"{"name":"a","dur":1e3}"#,
        br#"{"name":"a","args":[1,2]}"#,
        br#"{"name":"a","args":{}}"#,
        br#"{"name":"a","ok":true}"#,
        br#"{"name":"a","x":null}"#,
        "{\"name\":\"é\",\"dur\":1}".as_bytes(),
        br#"{"name":"a","args":{"x":{"y":1}}}"#,
        br#"{"name":"a","dur":1234567890123456789}"#,
        br#"{"name":"a","dur":1}{"b":1}"#,
        br#"{"name":"a","dur":1},"#,
        br#"{"name":"a","dur":"1}"#,
        b"",
        b"{",
    ] {
        let mut ev = RawEvent::default();
        assert!(
            !scan_fast(declined, &mut ev),
            "{} should go to the strict scanner",
            String::from_utf8_lossy(declined)
        );
    }
    let long = format!(
        r#"{{"name":"{}","dur":1}}"#,
        "x".repeat(optgate_dftracer::__private::MAX_FAST_LINE)
    );
    assert!(
        !agrees(long.as_bytes()),
        "a line past MAX_FAST_LINE is declined"
    );
}

#[test]
fn fast_path_reads_numbers_of_every_length_and_nested_args() {
    for digits in 1..=18 {
        let n: String = "9876543210"
            .chars()
            .cycle()
            .skip(digits % 7)
            .take(digits)
            .collect();
        for line in [
            format!(r#"{{"ts":{n},"dur":-{n}}}"#),
            format!(
                r#"{{"id":1,"name":"n","cat":"c","ts":{n},"dur":{n},"ph":1,"args":{{"epoch":{n}}}}}"#
            ),
            format!(
                r#"{{"a":{{"epoch":1,"name":"no"}},"args":{{"epoch":{n},"value":"v"}},"b":{{"epoch":2}}}}"#
            ),
        ] {
            assert!(agrees(line.as_bytes()), "{line}");
        }
    }
    // Repeated keys: the last one counts, for the event and for its args.
    assert!(agrees(
        br#"{"name":"a","args":{"epoch":1},"name":"b","args":{"name":"x"}}"#
    ));
    // `args` that is no object, then an object under another key; an object `args` then
    // a scalar one; nested objects that span 64-byte words, keys before and after them.
    for line in [
        &br#"{"args":5,"x":{"epoch":1,"name":"no"},"name":"a"}"#[..],
        br#"{"args":{"epoch":3},"args":"s","y":{"value":"no"},"dur":4}"#,
    ] {
        assert!(agrees(line), "{}", String::from_utf8_lossy(line));
    }
    for pad in [0usize, 5, 30, 59, 60, 61, 62, 63, 64, 65, 100, 127, 128] {
        let p = "p".repeat(pad);
        for line in [
            format!(
                r#"{{"{p}":1,"a":{{"epoch":1,"{p}":2}},"args":{{"{p}":"q","epoch":9}},"ts":3}}"#
            ),
            format!(r#"{{"args":{{"epoch":7,"{p}":1}},"{p}x":{{"name":"no"}}}}"#),
            format!(
                r#"{{"x":{{"{p}":"{p}","name":"no"}},"{p}":{{"value":"no"}},"args":{{"name":"{p}"}}}}"#
            ),
        ] {
            assert!(agrees(line.as_bytes()), "{line}");
        }
    }
}
