//! From collected runs to the statistics crate's input: complete runs per arm, the
//! not-applicable reasons, correctness mismatches, and the comparison settings of the
//! experiment file.

use std::collections::BTreeMap;

use optgate_experiment::{BASELINE, Better, Experiment};
use optgate_stats::{AnalysisConfig, ArmData, GuardrailSpec, RunSamples};

use optgate_report::SystemResource;

use crate::collect::{Collected, RunResult, RunStatus};

/// The analysis settings an experiment file asks for.
pub fn analysis_config(exp: &Experiment) -> AnalysisConfig {
    let better = |b: Better| match b {
        Better::Lower => optgate_stats::Better::Lower,
        Better::Higher => optgate_stats::Better::Higher,
    };
    AnalysisConfig {
        design: exp.design.stats(),
        alpha: exp.alpha,
        min_effect_pct: exp.min_effect_pct,
        steady_epochs: exp.steady_epochs,
        production_epochs: exp.production_epochs,
        better: better(exp.metric.better),
        // Without the user's metric, System Impact compares resources used: lower is better.
        system_better: exp
            .system_metric
            .as_ref()
            .map(|s| better(s.better))
            .unwrap_or(optgate_stats::Better::Lower),
        per_run: exp.per_run,
        unit: exp.metric.unit.clone(),
        guardrails: exp
            .guardrails
            .iter()
            .map(|g| GuardrailSpec {
                name: g.name.clone(),
                better: better(g.spec.better),
                unit: g.spec.unit.clone(),
                max_regression_pct: g.max_regression_pct,
            })
            .collect(),
    }
}

/// What System Impact compares in an execution: the user's `system_metric` when declared;
/// else energy when every complete run has an energy figure; else the core-seconds (CPU
/// user + system time) of every run; None when even those are missing for some run (runs
/// recorded by an older optgate).
pub fn system_resource(exp: &Experiment, collected: &Collected) -> Option<SystemResource> {
    if exp.system_metric.is_some() {
        return Some(SystemResource::Metric);
    }
    let mut complete = collected
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Complete)
        .peekable();
    complete.peek()?;
    let all = |f: &dyn Fn(&optgate_wrapper::manifest::Resources) -> bool| {
        collected
            .runs
            .iter()
            .filter(|r| r.status == RunStatus::Complete)
            .all(|r| r.resources.as_ref().is_some_and(f))
    };
    if all(&|r| r.energy_j.is_some_and(|e| e > 0.0)) {
        Some(SystemResource::Energy)
    } else if all(&|r| r.cpu_s() > 0.0) {
        Some(SystemResource::CoreSeconds)
    } else {
        None
    }
}

/// One run's value of the resource System Impact compares.
fn system_value(r: &RunResult, resource: Option<SystemResource>) -> Option<f64> {
    match resource? {
        SystemResource::Metric => r.system_value,
        SystemResource::Energy => r.resources?.energy_j,
        SystemResource::CoreSeconds => r.resources.map(|u| u.cpu_s()),
    }
}

/// The baseline's and every other arm's data, in experiment order.
pub fn arm_data(
    exp: &Experiment,
    collected: &Collected,
    not_applicable: &BTreeMap<String, String>,
) -> (ArmData, Vec<ArmData>) {
    let resource = system_resource(exp, collected);
    let one = |name: &str| {
        let runs: Vec<_> = collected.complete_runs(name).collect();
        ArmData {
            name: name.to_string(),
            runs: runs
                .iter()
                .map(|r| RunSamples {
                    replicate: r.replicate,
                    block: Some(r.block),
                    epochs: r.epochs.clone(),
                })
                .collect(),
            not_applicable: not_applicable.get(name).cloned(),
            failed: all_failed(collected, name),
            correctness_mismatch: collected
                .correctness
                .as_ref()
                .and_then(|c| c.get(name))
                .and_then(|c| c.mismatch.clone()),
            // One value per run or none: the statistics pair them with the runs.
            system_metric: runs
                .iter()
                .map(|r| system_value(r, resource))
                .collect::<Option<Vec<f64>>>()
                .unwrap_or_default(),
            // Per guardrail, one value per run (a complete run has every one).
            guardrails: exp
                .guardrails
                .iter()
                .filter_map(|g| {
                    let values = runs
                        .iter()
                        .map(|r| r.guardrails.get(&g.name).copied())
                        .collect::<Option<Vec<f64>>>()?;
                    Some((g.name.clone(), values))
                })
                .collect(),
            load: runs
                .iter()
                .map(|r| crate::loaded::load_per_cpu(r))
                .collect::<Option<Vec<f64>>>()
                .unwrap_or_default(),
        }
    };
    let baseline = one(BASELINE);
    let others = exp
        .arms
        .iter()
        .filter(|a| a.name != BASELINE)
        .map(|a| one(&a.name))
        .collect();
    (baseline, others)
}

/// When no run of `arm` completed and at least one failed: how (the first failed run's
/// reason, its stderr tail, and how many failed), for the variant's `failed` decision.
pub fn all_failed(collected: &Collected, arm: &str) -> Option<String> {
    let runs: Vec<_> = collected.runs.iter().filter(|r| r.arm == arm).collect();
    if runs.iter().any(|r| r.status == RunStatus::Complete) {
        return None;
    }
    let failed: Vec<_> = runs
        .iter()
        .filter_map(|r| match &r.status {
            RunStatus::Failed { reason } => Some((r, reason)),
            _ => None,
        })
        .collect();
    let (first, reason) = failed.first()?;
    let tail = first
        .stderr_tail
        .as_ref()
        .map(|t| format!("; its stderr ends: {t}"))
        .unwrap_or_default();
    let not_run = runs
        .iter()
        .filter(|r| r.status == RunStatus::NotRun)
        .count();
    let rest = if not_run > 0 {
        format!(" ({not_run} not run: stopped after the first failures)")
    } else {
        String::new()
    };
    Some(format!(
        "{} of {} run(s) failed{rest} — run {}: {reason}{tail}",
        failed.len(),
        runs.len(),
        first.id
    ))
}

/// Failed runs, for the report's failure list.
pub fn failures(collected: &Collected) -> Vec<(String, String)> {
    collected
        .runs
        .iter()
        .filter_map(|r| match &r.status {
            RunStatus::Failed { reason } => Some((r.id.clone(), reason.clone())),
            _ => None,
        })
        .collect()
}

/// The complete runs as a samples CSV, the input format of `optgate analyze`, so any
/// execution can be re-analysed with other settings: the columns of
/// `optgate_report::samples_csv::COLUMNS` in that order (`variant,replicate,block,epoch,seconds`)
/// and, per run (repeated on its rows, empty where not measured), the resources it used:
/// `cpu_s` (user + system), `max_rss_kib`, `energy_j`.
pub fn samples_csv(collected: &Collected) -> String {
    use optgate_report::samples_csv::{SampleRow, write_samples};
    let rows = collected
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Complete)
        .flat_map(|r| {
            let u = r.resources;
            r.epochs.iter().map(move |(&epoch, &seconds)| SampleRow {
                variant: &r.arm,
                replicate: r.replicate,
                epoch,
                seconds,
                block: Some(r.block),
                cpu_s: u.map(|u| u.cpu_s()),
                max_rss_kib: u.map(|u| u.max_rss_kib),
                energy_j: u.and_then(|u| u.energy_j),
            })
        });
    write_samples(rows)
}
