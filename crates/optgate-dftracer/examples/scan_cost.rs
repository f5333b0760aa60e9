//! Splits the cost of a summary into its stages on one trace already inflated into
//! memory: line splitting alone, splitting + the line scanner, and the whole fold
//! (`summarize_reader` over the text), and the fast path compiled for each instruction
//! set this CPU has, for `benches/dftracer/RESULTS.md`.
//!
//! Usage: scan_cost FILE[.gz] [REPEAT]   (prints one line per stage, best of REPEAT)
//!
//! Times are this thread's CPU time (`/proc/thread-self/schedstat`), not wall time.

use std::io::Read;
use std::path::Path;

use optgate_dftracer::__private::{RawEvent, scan_fast, scan_fast_as, scan_into, scan_strict};
use optgate_dftracer::{AggregateOptions, summarize_reader};

mod cpu_time;
use cpu_time::best_of;

/// Every line of `text` (without its newline), cut with memchr as the reader does.
fn lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let i = memchr::memchr(b'\n', rest)?;
        let line = &rest[..i];
        rest = &rest[i + 1..];
        Some(line)
    })
}

/// The file's text, inflated when it is gzip.
fn read_text(path: &str) -> Vec<u8> {
    let raw = std::fs::read(path).expect("read the file");
    if !raw.starts_with(&[0x1f, 0x8b]) {
        return raw;
    }
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(&raw[..])
        .read_to_end(&mut text)
        .expect("inflate");
    text
}

/// How many lines the fast path takes, and how many of those the strict scanner reads
/// otherwise (printing the first three).
fn fast_path_agreement(text: &[u8]) -> (u64, u64) {
    let (mut fast, mut differ) = (0u64, 0u64);
    for l in lines(text) {
        let (mut a, mut b) = (RawEvent::default(), RawEvent::default());
        if scan_fast(l, &mut a) {
            fast += 1;
            if scan_strict(l, &mut b).is_err() || a != b {
                differ += 1;
                if differ <= 3 {
                    eprintln!(
                        "fast {a:?}\nstrict {b:?}\nline {}",
                        String::from_utf8_lossy(l)
                    );
                }
            }
        }
    }
    (fast, differ)
}

/// The fast path's cost per line for each instruction set this CPU can run.
fn print_variant_costs(text: &[u8], repeat: usize, lines_n: u64) {
    for variant in ["avx512", "avx2", "sse2", "bytes"] {
        let mut ev = RawEvent::default();
        if scan_fast_as(variant, b"{}", &mut ev).is_none() {
            continue;
        }
        let (secs, _) = best_of(repeat, || {
            let mut ok = 0u64;
            for l in lines(text) {
                let mut ev = RawEvent::default();
                ok += u64::from(scan_fast_as(variant, l, &mut ev) == Some(true));
            }
            ok
        });
        println!(
            "split + fast path compiled for {variant}: {secs:.3} s, {:.0} ns/line",
            secs * 1e9 / lines_n as f64
        );
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: scan_cost FILE[.gz] [REPEAT]");
    let repeat: usize = args.next().map_or(3, |r| r.parse().expect("REPEAT"));
    let text = read_text(&path);
    let mb = text.len() as f64 / 1e6;
    let split = best_of(repeat, || {
        let mut n = 0u64;
        let mut rest = &text[..];
        while let Some(i) = memchr::memchr(b'\n', rest) {
            n += 1;
            rest = &rest[i + 1..];
        }
        n
    });
    let scan = best_of(repeat, || {
        let mut ok = 0u64;
        for l in lines(&text) {
            let mut ev = RawEvent::default();
            ok += u64::from(scan_into(l, &mut ev).is_ok());
        }
        ok
    });
    if std::env::var_os("SCAN_ONLY").is_some() {
        // For profiling the scanner alone: only the scan stage, printed.
        println!("split + scan: {:?}", scan);
        return;
    }
    let (fast, differ) = fast_path_agreement(&text);
    println!(
        "fast path takes {fast} of {} lines; {differ} read otherwise by the strict scanner",
        split.1
    );
    print_variant_costs(&text, repeat, split.1);
    let opts = AggregateOptions::default();
    let full = best_of(repeat, || {
        summarize_reader(Path::new(&path), &text[..], &opts)
            .total
            .events
    });
    for (label, (secs, n)) in [
        ("split lines (memchr)", split),
        ("split + scan", scan),
        ("whole fold (split + scan + aggregate)", full),
    ] {
        println!(
            "{label}: {n} in {secs:.3} s = {:.0} MB/s, {:.0} ns/line",
            mb / secs,
            secs * 1e9 / split.1 as f64
        );
    }
}
