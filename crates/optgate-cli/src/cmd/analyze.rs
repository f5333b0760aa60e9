//! `optgate analyze SAMPLES.csv --baseline NAME`: the statistics alone, on measurements
//! taken elsewhere, through the one report builder (`optgate_evidence::report::
//! analyze_samples` → `build_report`). Bad input exits with code 2 and names the rows.

use std::path::Path;

use anyhow::Result;

use optgate_report::AnalyzeOptions;
use optgate_stats::{Design, EpochWindow};

use crate::exit;

pub fn analyze(a: crate::args::AnalyzeArgs) -> Result<i32> {
    let bad = |e: anyhow::Error| exit::with_code(exit::INVALID_INPUT, e);
    // A regular file of bounded size (optgate_report::samples_csv::MAX_FILE_BYTES).
    let text = optgate_report::read_samples_file(&a.samples).map_err(|e| bad(e.into()))?;
    let mut opts = AnalyzeOptions::new(&a.baseline);
    opts.design = a.design.parse::<Design>().map_err(|e| bad(e.into()))?;
    opts.alpha = a.alpha;
    opts.min_effect_pct = a.min_effect_pct;
    opts.production_epochs = a.production_epochs;
    opts.steady_epochs = match &a.steady_epochs {
        Some(s) => Some(s.parse::<EpochWindow>().map_err(|e| bad(e.into()))?),
        None => None,
    };
    let report = optgate_evidence::report::analyze_samples(&text, &display(&a.samples), &opts)
        .map_err(|e| bad(e.into()))?;
    if let Some(dir) = &a.output.plot {
        super::report::plots(&report, dir)?;
    }
    out!("{}", super::report::render(&report, a.output.format())?);
    Ok(exit::OK)
}

fn display(p: &Path) -> String {
    p.display().to_string()
}
