//! The report of an execution: the analysis of the collected runs plus what the experiment
//! declared (variants, checklist), the A/A noise floor, the traced time per category beside
//! the wall time, and the provenance of every run, as an
//! `optgate_report::Report`. One function for `optgate run` and the daemon, so their
//! reports are the same object.

use std::collections::BTreeMap;

use serde_json::json;

use optgate_experiment::{AA_CONTROL, Experiment, MetricSource, Plan, Verdict as FileVerdict};
use optgate_probe::Probe;
use optgate_report::{
    ArmBreakdown, DeclaredVerdict, ExperimentMeta, NoiseFloor, Report, VariantMeta, Verdict,
};
use optgate_stats::{Analysis, AnalysisConfig, ArmData, SequentialPlan, StatsError};

use crate::{Collected, Layout, RunStatus};

/// The report of an execution: the analysis of `collected` (at look `look` of
/// `sequential` when the daemon adds replicates, else a single analysis), what the
/// experiment declared, and the provenance of every run. `node` is the probe of the
/// machine that builds the report. `optgate run` and the daemon both call this.
pub fn build_report(
    exp: &Experiment,
    plan: &Plan,
    layout: &Layout,
    collected: &Collected,
    not_applicable: &BTreeMap<String, String>,
    sequential: Option<(&SequentialPlan, u32)>,
    node: &Probe,
) -> Result<Report, StatsError> {
    let analyse = |base: &ArmData, others: &[ArmData], cfg: &AnalysisConfig| match sequential {
        Some((seq, look)) => optgate_stats::analyze_sequential(base, others, cfg, seq, look),
        None => optgate_stats::analyze(base, others, cfg),
    };
    build_report_with(exp, plan, layout, collected, not_applicable, node, analyse)
}

/// [`build_report`] with the analysis of the proposals made by `analyse` (baseline, the
/// variants without the A/A control, the experiment's settings): the daemon's staged rule
/// analyses only the variants still in the block plan and adds the decided ones itself.
pub fn build_report_with(
    exp: &Experiment,
    plan: &Plan,
    layout: &Layout,
    collected: &Collected,
    not_applicable: &BTreeMap<String, String>,
    node: &Probe,
    analyse: impl FnOnce(&ArmData, &[ArmData], &AnalysisConfig) -> Result<Analysis, StatsError>,
) -> Result<Report, StatsError> {
    let (base, mut others) = crate::analysis::arm_data(exp, collected, not_applicable);
    let cfg = crate::analysis::analysis_config(exp);
    // The A/A control is not a proposal: it is analysed on its own (so it neither joins
    // Holm's family nor gets a decision) and reported as the noise floor.
    let aa = others
        .iter()
        .position(|a| a.name == AA_CONTROL)
        .map(|i| others.remove(i));
    let analysis = analyse(&base, &others, &cfg)?;
    let mut report = Report::new(analysis, &base, &others);
    if let Some(aa) = aa {
        report.noise_floor = Some(noise_floor(&base, &aa, &cfg)?);
    }
    report.breakdown = breakdown(exp, collected);
    report.interference = crate::collect::interference(collected);
    report.system_resource = crate::analysis::system_resource(exp, collected);
    report.isolation = Some(isolation(exp));
    report.experiment = Some(experiment_meta(exp));
    report.checklist = Some(checklist(exp, &report.analysis));
    report.provenance = Some(provenance(
        exp,
        plan,
        layout,
        collected,
        not_applicable,
        node,
    ));
    Ok(report)
}

/// The A/A control analysed on its own against the baseline: the noise floor.
fn noise_floor(
    base: &ArmData,
    aa: &ArmData,
    cfg: &AnalysisConfig,
) -> Result<NoiseFloor, StatsError> {
    let a = optgate_stats::analyze(base, std::slice::from_ref(aa), cfg)?;
    let v = &a.variants[0];
    Ok(NoiseFloor {
        arm: aa.name.clone(),
        speedup: v.speedup,
        apparent_effect_pct: v.speedup.estimate.map(|e| 100.0 * (e - 1.0)),
        min_effect_pct: cfg.min_effect_pct,
    })
}

/// How each arm's runs were isolated (caches, page cache) and how many inputs were declared.
fn isolation(exp: &Experiment) -> optgate_report::Isolation {
    optgate_report::Isolation {
        arms: exp
            .arms
            .iter()
            .map(|a| optgate_report::ArmIsolation {
                arm: a.name.clone(),
                caches: a.caches,
                page_cache: a.page_cache,
            })
            .collect(),
        inputs: exp.inputs.len(),
    }
}

/// The experiment's name, description, metric and variants as the report shows them.
fn experiment_meta(exp: &Experiment) -> ExperimentMeta {
    ExperimentMeta {
        name: exp.name().to_string(),
        description: exp.description.clone(),
        metric: Some(metric_words(exp)),
        variants: exp
            .arms
            .iter()
            .map(|a| VariantMeta {
                name: a.name.clone(),
                dimension: a.dimension.clone(),
                description: a.description.clone(),
            })
            .collect(),
    }
}

/// The checklist of the 10 dimensions: measured by the analysis, or declared in the file.
fn checklist(exp: &Experiment, analysis: &Analysis) -> Vec<optgate_report::ChecklistRow> {
    let dimensions: BTreeMap<String, String> = exp
        .arms
        .iter()
        .filter_map(|a| Some((a.name.clone(), a.dimension.clone()?)))
        .collect();
    let declared: BTreeMap<String, DeclaredVerdict> = exp
        .checklist
        .iter()
        .map(|(k, v)| {
            let verdict = match v.verdict {
                FileVerdict::ApplicableNotMeasured => Verdict::ApplicableNotMeasured,
                FileVerdict::NotApplicable => Verdict::NotApplicable,
            };
            (
                k.clone(),
                DeclaredVerdict {
                    verdict,
                    reason: v.reason.clone(),
                },
            )
        })
        .collect();
    optgate_report::build_checklist(analysis, &dimensions, &declared)
}

/// Everything needed to tell later how the numbers were made.
fn provenance(
    exp: &Experiment,
    plan: &Plan,
    layout: &Layout,
    collected: &Collected,
    not_applicable: &BTreeMap<String, String>,
    probe: &Probe,
) -> serde_json::Value {
    let arms = arms_provenance(exp, not_applicable);
    let runs = runs_provenance(layout, collected);
    let correctness = match &collected.correctness {
        None => json!("not checked: the experiment declares no correctness files or values"),
        Some(c) => json!(c),
    };
    json!({
        "optgate_version": env!("CARGO_PKG_VERSION"),
        "experiment_file": exp.source.display().to_string(),
        "experiment_sha256": exp.source_sha256,
        "run_root": layout.root.display().to_string(),
        "scheduler": exp.kind.to_string(),
        "design": exp.design,
        "seed": plan.seed,
        "recorded_order": plan.blocks,
        "node": {
            "hostname": probe.hostname,
            "cpu_model": probe.cpu_model,
            "physical_cores": probe.physical_cores,
            "hardware_threads": probe.hardware_threads,
            "numa_nodes": probe.numa_nodes,
            "isa": probe.isa,
            "governors": probe.cpufreq.governors,
            "kernel": probe.kernel,
        },
        "arms": arms,
        "correctness": correctness,
        "runs": runs,
        "failed_runs": collected.runs.iter().filter(|r| matches!(r.status, RunStatus::Failed { .. })).count(),
    })
}

/// Each arm as it ran: its variables, resources, command line, build, governor, and why
/// it was not applicable.
fn arms_provenance(
    exp: &Experiment,
    not_applicable: &BTreeMap<String, String>,
) -> Vec<serde_json::Value> {
    exp.arms
        .iter()
        .map(|a| {
            let build = a.build.map(|i| &exp.builds[i]);
            json!({
                "name": a.name,
                "env": a.env,
                "unset": a.unset,
                "resources": a.resources,
                "args": a.args,
                "command": optgate_sched::script::app_command_line(&exp.app_command, &a.args),
                "build": build.map(|b| json!({
                    "id": b.id,
                    "command": optgate_sched::script::app_command_line(b.command(), &[]),
                })),
                "governor": a.governor,
                "requires": a.requires,
                "not_applicable": not_applicable.get(&a.name),
            })
        })
        .collect()
}

/// Each collected run with its manifest's times, exit code and job id, and the governor
/// changes it recorded.
fn runs_provenance(layout: &Layout, collected: &Collected) -> Vec<serde_json::Value> {
    collected
        .runs
        .iter()
        .map(|r| {
            let manifest = optgate_wrapper::manifest::RunManifest::read(&layout.run_dir(&r.id))
                .ok()
                .flatten();
            let governor = std::fs::read_to_string(layout.run_dir(&r.id).join("governor.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
            json!({
                "id": r.id,
                "arm": r.arm,
                "block": r.block,
                "status": r.status,
                "host": r.host,
                "elapsed_s": r.elapsed_s,
                "started_at": manifest.as_ref().map(|m| m.started_at.clone()),
                "ended_at": manifest.as_ref().map(|m| m.ended_at.clone()),
                "exit_code": manifest.as_ref().and_then(|m| m.exit_code),
                "scheduler_job_id": manifest.as_ref().and_then(|m| m.scheduler_job_id.clone()),
                "governor_changes": governor,
            })
        })
        .collect()
}

/// What the per-epoch values are, for the report's header.
fn metric_words(exp: &Experiment) -> String {
    let m = &exp.metric;
    let what = match m.source {
        MetricSource::Stdout => format!(
            "seconds per epoch from stdout, pattern `{}`",
            m.pattern.as_deref().unwrap_or_default()
        ),
        MetricSource::File => format!(
            "seconds per epoch from `{}`, pattern `{}`",
            m.file.as_deref().unwrap_or_default(),
            m.pattern.as_deref().unwrap_or_default()
        ),
        MetricSource::Dftracer => format!(
            "summed duration per epoch of DFTracer events in `{}`, {} (traced time, not the job's wall time)",
            m.dir.as_deref().unwrap_or("."),
            m.category
                .as_deref()
                .map_or("all categories".to_string(), |c| format!("category `{c}`"))
        ),
    };
    match m.better {
        optgate_experiment::Better::Lower => format!("{what}; lower is better"),
        optgate_experiment::Better::Higher => {
            format!("{what}; higher is better (analysed as reciprocals)")
        }
    }
}

/// Per arm, the median over complete runs of the wall time and of each traced category
/// (DFTracer metrics only).
fn breakdown(exp: &Experiment, collected: &Collected) -> Option<Vec<ArmBreakdown>> {
    if exp.metric.source != MetricSource::Dftracer {
        return None;
    }
    let median = |mut v: Vec<f64>| -> Option<f64> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        Some(if n % 2 == 1 {
            v[n / 2]
        } else {
            0.5 * (v[n / 2 - 1] + v[n / 2])
        })
    };
    let mut rows: Vec<ArmBreakdown> = exp
        .arms
        .iter()
        .map(|arm| {
            let runs: Vec<_> = collected.complete_runs(&arm.name).collect();
            let mut per_cat: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            for r in &runs {
                for (c, secs) in r.trace_categories.iter().flatten() {
                    per_cat.entry(c.clone()).or_default().push(*secs);
                }
            }
            ArmBreakdown {
                arm: arm.name.clone(),
                runs: runs.len(),
                wall_s: median(runs.iter().filter_map(|r| r.elapsed_s).collect()),
                categories: per_cat
                    .into_iter()
                    .filter_map(|(c, v)| Some((c, median(v)?)))
                    .collect(),
            }
        })
        .collect();
    // Categories that are zero everywhere (DFTracer's own metadata records) say nothing.
    let all_zero: Vec<String> = rows
        .iter()
        .flat_map(|r| r.categories.keys().cloned())
        .filter(|c| {
            rows.iter()
                .all(|r| r.categories.get(c).is_none_or(|v| *v == 0.0))
        })
        .collect();
    for r in &mut rows {
        r.categories.retain(|c, _| !all_zero.contains(c));
    }
    Some(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 8 blocks of 3 epochs, each run `factor` times the baseline's time.
    fn arm(name: &str, factor: f64) -> ArmData {
        optgate_stats::fixtures::blocked_arm(name, 8, |b| (1.0 + 0.01 * b as f64) * factor)
    }

    /// The noise floor names the A/A arm, reports its apparent effect as the speed-up's
    /// estimate in percent (an A/A arm 4 % slower reads about −3.8 %, never +4 %), and
    /// carries the experiment's worthwhile effect for comparison.
    #[test]
    fn the_noise_floor_is_the_aa_arms_apparent_effect_in_percent() {
        let cfg = AnalysisConfig {
            min_effect_pct: 2.5,
            ..AnalysisConfig::default()
        };
        let nf = noise_floor(&arm("baseline", 1.0), &arm(AA_CONTROL, 1.04), &cfg).unwrap();
        assert_eq!(nf.arm, AA_CONTROL);
        let est = nf.speedup.estimate.unwrap();
        assert!((est - 1.0 / 1.04).abs() < 1e-9, "{est}");
        let pct = nf.apparent_effect_pct.unwrap();
        assert!((pct - 100.0 * (1.0 / 1.04 - 1.0)).abs() < 1e-6, "{pct}");
        assert_eq!(nf.min_effect_pct, 2.5);
    }
}
