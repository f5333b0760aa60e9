//! `optgate analyze SAMPLES.csv --baseline NAME`: the statistics alone, on measurements
//! taken elsewhere, through the one report builder (`optgate_runner::report::
//! analyze_samples` → `build_report`). Bad input exits with code 2 and names the rows.

use std::path::{Path, PathBuf};

use anyhow::Result;

use optgate_report::AnalyzeOptions;
use optgate_stats::{Design, EpochWindow};

use crate::cli::Format;
use crate::exit;

pub struct AnalyzeArgs {
    pub samples: PathBuf,
    pub baseline: String,
    pub design: String,
    pub alpha: f64,
    pub min_effect_pct: f64,
    pub steady_epochs: Option<String>,
    pub production_epochs: Option<u32>,
    pub format: Format,
    pub plot: Option<PathBuf>,
}

pub fn analyze(a: AnalyzeArgs) -> Result<i32> {
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
    let report = optgate_runner::report::analyze_samples(&text, &display(&a.samples), &opts)
        .map_err(|e| bad(e.into()))?;
    if let Some(dir) = &a.plot {
        super::report::plots(&report, dir)?;
    }
    print!("{}", super::report::render(&report, a.format)?);
    Ok(exit::OK)
}

fn display(p: &Path) -> String {
    p.display().to_string()
}
