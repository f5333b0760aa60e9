//! Reading finished runs back: manifest first (it decides whether a run completed), then the
//! metric, the system metric and the correctness evidence from the run's outputs. Output
//! never depends on a scheduler's memory, only on what the run left on disk.

use std::collections::BTreeMap;
use std::path::Path;

use regex::Regex;
use serde::Serialize;
use sha2::{Digest, Sha256};

use optgate_experiment::{BASELINE, Experiment, MetricSource, Plan, PlannedRun};
use optgate_metrics::{EpochSeconds, extract_epochs, extract_values, within_tolerance};
use optgate_sched::local::STDOUT_FILE;
use optgate_sched::{Outcome, RunManifest};

use crate::layout::Layout;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RunStatus {
    Complete,
    Failed { reason: String },
    NotRun,
    NotApplicable { reason: String },
}

/// What one run produced.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub id: String,
    pub arm: String,
    pub block: u32,
    pub replicate: u32,
    pub status: RunStatus,
    pub epochs: EpochSeconds,
    pub system_value: Option<f64>,
    pub host: Option<String>,
    pub elapsed_s: Option<f64>,
    /// DFTracer metrics only: the run's traced seconds per category.
    pub trace_categories: Option<BTreeMap<String, f64>>,
    #[serde(skip)]
    pub evidence: Option<Evidence>,
}

/// What a run's outputs were, for the correctness comparison with the baseline.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence {
    /// Declared file → SHA-256, or None when the run did not write it.
    pub files: BTreeMap<String, Option<String>>,
    pub values: Option<Result<Vec<f64>, String>>,
}

/// The correctness verdict of one arm over all its blocks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmCorrectness {
    /// Blocks in which the arm's outputs were compared with the baseline's.
    pub blocks_compared: u32,
    /// The first difference found, naming the block and the file or value.
    pub mismatch: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Collected {
    pub runs: Vec<RunResult>,
    /// None when the experiment declares no correctness checks.
    pub correctness: Option<BTreeMap<String, ArmCorrectness>>,
}

impl Collected {
    pub fn complete_runs<'a>(&'a self, arm: &'a str) -> impl Iterator<Item = &'a RunResult> + 'a {
        self.runs
            .iter()
            .filter(move |r| r.arm == arm && r.status == RunStatus::Complete)
    }
}

/// Reads the outcome of every planned run. `not_applicable` maps arms that were not run
/// to the reason.
pub fn collect(
    exp: &Experiment,
    plan: &Plan,
    layout: &Layout,
    not_applicable: &BTreeMap<String, String>,
) -> Collected {
    let mut runs: Vec<RunResult> = plan
        .runs()
        .iter()
        .map(|r| match not_applicable.get(&r.arm) {
            Some(reason) => empty(
                r,
                RunStatus::NotApplicable {
                    reason: reason.clone(),
                },
            ),
            None => collect_run(exp, r, &layout.run_dir(&r.id)),
        })
        .collect();
    check_epoch_counts(&mut runs);
    let correctness = exp
        .file
        .correctness
        .as_ref()
        .filter(|c| !c.files.is_empty() || c.values.is_some())
        .map(|_| compare_with_baseline(exp, &runs));
    Collected { runs, correctness }
}

fn empty(r: &PlannedRun, status: RunStatus) -> RunResult {
    RunResult {
        id: r.id.clone(),
        arm: r.arm.clone(),
        block: r.block,
        replicate: r.replicate,
        status,
        epochs: EpochSeconds::new(),
        system_value: None,
        host: None,
        elapsed_s: None,
        trace_categories: None,
        evidence: None,
    }
}

fn read_source(
    run_dir: &Path,
    source: MetricSource,
    file: Option<&str>,
) -> Result<(String, String), String> {
    let rel = match source {
        MetricSource::File => file.unwrap_or(STDOUT_FILE),
        _ => STDOUT_FILE,
    };
    let path = run_dir.join(rel);
    let text = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok((
        String::from_utf8_lossy(&text).into_owned(),
        path.display().to_string(),
    ))
}

/// Reads one run. Public so a backend can check a run as soon as it ends.
pub fn collect_run(exp: &Experiment, r: &PlannedRun, run_dir: &Path) -> RunResult {
    let manifest = match RunManifest::read(run_dir) {
        Ok(Some(m)) => m,
        Ok(None) => return empty(r, RunStatus::NotRun),
        Err(e) => {
            return empty(
                r,
                RunStatus::Failed {
                    reason: e.to_string(),
                },
            );
        }
    };
    let mut result = empty(r, RunStatus::Complete);
    result.host = Some(manifest.host.clone());
    result.elapsed_s = Some(manifest.elapsed_s);
    let failure = match manifest.outcome {
        Outcome::Completed => None,
        Outcome::Failed => Some(match (manifest.exit_code, manifest.signal) {
            (Some(c), _) => format!(
                "the app exited with status {c} (see {}/stderr)",
                run_dir.display()
            ),
            (_, Some(s)) => format!("the app was killed by signal {s}"),
            _ => "the app failed".to_string(),
        }),
        Outcome::TimedOut => Some("the run exceeded its time limit and was killed".to_string()),
        Outcome::Interrupted => Some("the run was interrupted before it finished".to_string()),
    };
    if let Some(reason) = failure {
        result.status = RunStatus::Failed { reason };
        return result;
    }
    match run_metric(exp, run_dir) {
        Ok(m) => {
            result.epochs = m.epochs;
            result.trace_categories = m.trace_categories;
        }
        Err(reason) => {
            result.status = RunStatus::Failed { reason };
            return result;
        }
    }
    if let Some(sm) = &exp.file.system_metric {
        let re = Regex::new(&sm.pattern).expect("validated");
        match read_source(run_dir, sm.source, sm.file.as_deref())
            .and_then(|(text, name)| extract_values(&re, &text, &name).map_err(|e| e.to_string()))
        {
            // The last report wins: apps print running figures and a final one.
            Ok(v) => result.system_value = v.last().copied(),
            Err(reason) => {
                result.status = RunStatus::Failed { reason };
                return result;
            }
        }
    }
    if let Some(c) = &exp.file.correctness {
        let mut ev = Evidence::default();
        for f in &c.files {
            let hash = std::fs::read(run_dir.join(f)).ok().map(|b| {
                Sha256::digest(&b)
                    .iter()
                    .map(|x| format!("{x:02x}"))
                    .collect::<String>()
            });
            ev.files.insert(f.clone(), hash);
        }
        if let Some(v) = &c.values {
            let re = Regex::new(&v.pattern).expect("validated");
            ev.values = Some(read_source(run_dir, v.source, v.file.as_deref()).and_then(
                |(text, name)| extract_values(&re, &text, &name).map_err(|e| e.to_string()),
            ));
        }
        result.evidence = Some(ev);
    }
    result
}

/// What the metric source yields for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunMetric {
    pub epochs: EpochSeconds,
    /// For DFTracer metrics: the whole run's traced seconds per category.
    pub trace_categories: Option<BTreeMap<String, f64>>,
}

/// The per-epoch metric of one finished run (and, from traces, the time per category).
pub fn run_metric(exp: &Experiment, run_dir: &Path) -> Result<RunMetric, String> {
    let m = &exp.file.metric;
    match m.source {
        MetricSource::Stdout | MetricSource::File => {
            let re = Regex::new(m.pattern.as_deref().unwrap_or_default()).expect("validated");
            let (text, name) = read_source(run_dir, m.source, m.file.as_deref())?;
            let epochs = extract_epochs(&re, &text, &name).map_err(|e| e.to_string())?;
            Ok(RunMetric {
                epochs,
                trace_categories: None,
            })
        }
        MetricSource::Dftracer => {
            let dir = run_dir.join(m.dir.as_deref().unwrap_or("."));
            let summary = trace_summary(exp, &dir)?;
            let epochs = optgate_dftracer::epoch_seconds(&summary, m.category.as_deref());
            if epochs.is_empty() {
                return Err(format!(
                    "{}: the traces hold no per-epoch {} events (events need `args.epoch` — run with DFTRACER_INC_METADATA=1 — or set `metric.epoch_marker`)",
                    dir.display(),
                    m.category
                        .as_deref()
                        .map(|c| format!("`{c}`"))
                        .unwrap_or_else(|| "traced".into())
                ));
            }
            optgate_metrics::check_contiguous(&epochs, &dir.display().to_string())
                .map_err(|e| e.to_string())?;
            let categories = summary
                .total
                .by_category
                .iter()
                .map(|(c, st)| (c.clone(), st.dur_s))
                .collect();
            Ok(RunMetric {
                epochs,
                trace_categories: Some(categories),
            })
        }
    }
}

/// The DFTracer summary of one run's trace folder, aggregated the way the metric asks.
pub fn trace_summary(
    exp: &Experiment,
    dir: &Path,
) -> Result<optgate_dftracer::TraceSummary, String> {
    let m = &exp.file.metric;
    let opts = optgate_dftracer::AggregateOptions {
        epoch_marker: m.epoch_marker.clone(),
        ..Default::default()
    };
    let summary = optgate_dftracer::summarize_paths(&[dir.to_path_buf()], &opts)
        .map_err(|e| e.to_string())?;
    for d in &summary.diagnostics {
        tracing::warn!("{}:{}: {}", d.file.display(), d.line, d.message);
    }
    Ok(summary)
}

/// Every complete run must have the same epochs as the others: a run that stopped early
/// cannot be matched epoch for epoch.
fn check_epoch_counts(runs: &mut [RunResult]) {
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.status == RunStatus::Complete) {
        *counts.entry(r.epochs.len()).or_default() += 1;
    }
    let Some((&expected, _)) = counts.iter().max_by_key(|(n, c)| (**c, **n)) else {
        return;
    };
    for r in runs.iter_mut().filter(|r| r.status == RunStatus::Complete) {
        if r.epochs.len() != expected {
            r.status = RunStatus::Failed {
                reason: format!(
                    "yielded {} epochs where the other runs yielded {expected}",
                    r.epochs.len()
                ),
            };
        }
    }
}

fn compare_with_baseline(exp: &Experiment, runs: &[RunResult]) -> BTreeMap<String, ArmCorrectness> {
    let spec = exp.file.correctness.as_ref().expect("caller checked");
    let (rel_tol, abs_tol) = spec
        .values
        .as_ref()
        .map(|v| (v.rel_tol, v.abs_tol))
        .unwrap_or((None, None));
    let baselines: BTreeMap<u32, &RunResult> = runs
        .iter()
        .filter(|r| r.arm == BASELINE && r.status == RunStatus::Complete)
        .map(|r| (r.block, r))
        .collect();
    let mut out: BTreeMap<String, ArmCorrectness> = BTreeMap::new();
    for arm in exp.arms.iter().filter(|a| a.name != BASELINE) {
        let mut verdict = ArmCorrectness {
            blocks_compared: 0,
            mismatch: None,
        };
        let mut arm_runs: Vec<&RunResult> = runs
            .iter()
            .filter(|r| r.arm == arm.name && r.status == RunStatus::Complete)
            .collect();
        arm_runs.sort_by_key(|r| r.block);
        for run in arm_runs {
            let Some(base) = baselines.get(&run.block) else {
                continue;
            };
            let (Some(be), Some(ve)) = (&base.evidence, &run.evidence) else {
                continue;
            };
            verdict.blocks_compared += 1;
            if verdict.mismatch.is_none() {
                verdict.mismatch = first_difference(be, ve, rel_tol, abs_tol)
                    .map(|d| format!("block {}: {d}", run.block));
            }
        }
        out.insert(arm.name.clone(), verdict);
    }
    out
}

fn first_difference(
    base: &Evidence,
    var: &Evidence,
    rel_tol: Option<f64>,
    abs_tol: Option<f64>,
) -> Option<String> {
    for (file, bh) in &base.files {
        let vh = var.files.get(file).cloned().flatten();
        match (bh, vh) {
            (None, None) => return Some(format!("`{file}` was written by neither run")),
            (Some(_), None) => return Some(format!("`{file}` is missing from the variant's run")),
            (None, Some(_)) => return Some(format!("`{file}` is missing from the baseline's run")),
            (Some(a), Some(b)) if *a != b => {
                return Some(format!(
                    "`{file}` differs from the baseline's (sha256 {}… vs {}…)",
                    &a[..12],
                    &b[..12]
                ));
            }
            _ => {}
        }
    }
    match (&base.values, &var.values) {
        (Some(Ok(bv)), Some(Ok(vv))) => {
            if bv.len() != vv.len() {
                return Some(format!(
                    "the baseline printed {} checked values, the variant {}",
                    bv.len(),
                    vv.len()
                ));
            }
            for (i, (b, v)) in bv.iter().zip(vv).enumerate() {
                if !within_tolerance(*b, *v, rel_tol, abs_tol) {
                    return Some(format!(
                        "checked value #{} is {v} where the baseline has {b} (relative difference {:.3e})",
                        i + 1,
                        ((v - b) / b.abs().max(f64::MIN_POSITIVE)).abs()
                    ));
                }
            }
            None
        }
        (Some(Err(e)), _) => Some(format!("baseline's checked value: {e}")),
        (_, Some(Err(e))) => Some(format!("variant's checked value: {e}")),
        _ => None,
    }
}
