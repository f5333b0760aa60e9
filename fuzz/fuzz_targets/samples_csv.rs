//! The samples CSV of `optgate analyze`: `optgate_evidence::report::analyze_samples` (parse,
//! validate, then the one report builder) and the renderings `analyze` prints, on any text. Bad input must come back as a
//! `SamplesError` (exit 2 in the CLI), never a panic.
//!
//! The baseline name and the design come from an optional first comment line (comments are
//! skipped by the parser, so every seed is also a valid `optgate analyze` input):
//! `# baseline=NAME design=paired|blocked|independent` (defaults: `baseline`, paired).
#![no_main]

use libfuzzer_sys::fuzz_target;
use optgate_report::{AnalyzeOptions, render_csv, render_json, render_markdown, render_table};
use optgate_evidence::report::analyze_samples;
use optgate_stats::Design;

fuzz_target!(|data: &[u8]| {
    // `read_samples_file` refuses anything that is not UTF-8 before parsing.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut baseline = "baseline";
    let mut design = Design::Paired;
    if let Some(first) = text.lines().next().and_then(|l| l.strip_prefix('#')) {
        for word in first.split_whitespace() {
            if let Some(b) = word.strip_prefix("baseline=") {
                baseline = b;
            } else if let Some(d) = word.strip_prefix("design=") {
                design = d.parse().unwrap_or(Design::Paired);
            }
        }
    }
    let mut opts = AnalyzeOptions::new(baseline);
    opts.design = design;
    match analyze_samples(text, "/fuzz/samples.csv", &opts) {
        Ok(report) => {
            let _ = render_table(&report);
            let _ = render_markdown(&report);
            let _ = render_json(&report);
            let _ = render_csv(&report);
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
