//! The DFTracer reader and aggregator (`optgate trace summary`, `source: dftracer` metrics)
//! on any bytes: `summarize_reader` detects gzip by its magic bytes, splits lines, scans
//! them and aggregates per category, name and epoch; then the table, the JSON and the
//! per-epoch metric are built. Damage must become diagnostics, never a panic.
//!
//! Each input is read as it is (plain text, or a possibly damaged gzip stream), and, when
//! it is not gzip already, also gzip-compressed (one member, or two members split in the
//! middle: DFTracer appends members), which must give the same summary as the plain text.
//! The options (epoch marker, category filter) come from a hash of the input.
#![no_main]

use std::io::Write;
use std::path::Path;

use flate2::Compression;
use flate2::write::GzEncoder;
use libfuzzer_sys::fuzz_target;
use optgate_dftracer::{
    AggregateOptions, TraceSummary, epoch_seconds, render_table, summarize_reader,
};

fn gzip(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in parts {
        let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(part).unwrap();
        out.extend(enc.finish().unwrap());
    }
    out
}

fn exercise(summary: &TraceSummary, opts: &AggregateOptions) {
    let _ = render_table(summary);
    let _ = serde_json::to_string_pretty(summary).unwrap();
    let _ = epoch_seconds(summary, opts.category.as_deref());
    let _ = epoch_seconds(summary, None);
    for d in &summary.diagnostics {
        let _ = format!("{}:{}: {}", d.file.display(), d.line, d.message);
    }
}

/// What must not depend on how the text was stored.
fn content(summary: &TraceSummary) -> String {
    let f = &summary.files[0];
    let mut f = f.clone();
    f.file_bytes = 0;
    serde_json::to_string(&f).unwrap()
}

fn summarize(bytes: &[u8], opts: &AggregateOptions) -> TraceSummary {
    let s = summarize_reader(Path::new("/fuzz/trace.pfw"), bytes, opts);
    exercise(&s, opts);
    s
}

fuzz_target!(|data: &[u8]| {
    let h = data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let opts = AggregateOptions {
        epoch_marker: (h & 1 == 1).then(|| "epoch".to_string()),
        category: (h & 2 == 2)
            .then(|| ["compute", "POSIX", "STDIO", ""][(h >> 8) as usize % 4].to_string()),
    };
    let plain = summarize(data, &opts);
    if data.starts_with(&[0x1f, 0x8b]) {
        return;
    }
    let one = summarize(&gzip(&[data]), &opts);
    assert_eq!(
        content(&plain),
        content(&one),
        "plain and gzip summaries differ"
    );
    let mid = data.len() / 2;
    let two = summarize(&gzip(&[&data[..mid], &data[mid..]]), &opts);
    assert_eq!(
        content(&plain),
        content(&two),
        "plain and two-member gzip summaries differ"
    );
});
