//! Building the report of an execution (analysis + what was run) and rendering it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use optgate_experiment::{Experiment, Plan};
use optgate_runner::{Collected, Layout};
use optgate_stats::Analysis;

use crate::cli::Format;

#[derive(Debug, Serialize)]
pub struct RunReport {
    #[serde(flatten)]
    pub analysis: Analysis,
    pub experiment: String,
    pub root: String,
    pub failures: Vec<(String, String)>,
}

pub fn build_run_report(
    exp: &Experiment,
    _plan: &Plan,
    layout: &Layout,
    collected: &Collected,
    not_applicable: &BTreeMap<String, String>,
) -> Result<RunReport> {
    let (base, others) = optgate_runner::analysis::arm_data(exp, collected, not_applicable);
    let cfg = optgate_runner::analysis::analysis_config(exp);
    let analysis = optgate_stats::analyze(&base, &others, &cfg).context("analysis failed")?;
    Ok(RunReport {
        analysis,
        experiment: exp.name().to_string(),
        root: layout.root.display().to_string(),
        failures: optgate_runner::analysis::failures(collected),
    })
}

pub fn render(report: &RunReport, format: Format) -> Result<String> {
    Ok(match format {
        Format::Json => serde_json::to_string_pretty(report)? + "\n",
        _ => {
            let mut s = String::new();
            for v in &report.analysis.variants {
                s.push_str(&format!("{}: {:?} — {}\n", v.name, v.decision, v.reason));
            }
            s
        }
    })
}

pub fn plots(_report: &RunReport, _dir: &Path) -> Result<()> {
    anyhow::bail!("--plot is not available yet")
}
