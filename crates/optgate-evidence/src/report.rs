//! The one function that builds a report: [`build_report`], for an execution's runs
//! (`optgate run` and the daemon's looks: the analysis of the collected runs plus what the
//! experiment declared — variants, checklist —, the A/A noise floor, the traced time per
//! category beside the wall time, and the provenance of every run) and for a samples file
//! measured elsewhere (`optgate analyze`: the analysis and where the numbers came from), as
//! an `optgate_report::Report`. So every report is the same object, made the same way.

use std::collections::BTreeMap;

use optgate_experiment::{AA_CONTROL, Experiment, MetricSource, Plan, Verdict as FileVerdict};
use optgate_probe::Probe;
use optgate_report::{
    AnalyzeOptions, ArmBreakdown, DeclaredVerdict, ExperimentMeta, NoiseFloor, Report, Samples,
    SamplesError, SamplesProvenance, VariantMeta, Verdict,
};
use optgate_stats::{Analysis, AnalysisConfig, ArmData, SequentialPlan, StatsError};

use crate::{Collected, Layout};

/// An execution's runs, as a look sees them.
pub struct Execution<'a> {
    pub exp: &'a Experiment,
    pub plan: &'a Plan,
    pub layout: &'a Layout,
    pub collected: &'a Collected,
    pub not_applicable: &'a BTreeMap<String, String>,
    /// The probe of the machine that builds the report.
    pub node: &'a Probe,
}

/// Measurements taken elsewhere: a samples CSV, parsed, with the settings given for it.
pub struct SamplesFile<'a> {
    /// The file as the user named it (in the provenance).
    pub origin: &'a str,
    pub samples: &'a Samples,
    pub config: AnalysisConfig,
}

/// What a report is built from.
pub enum Source<'a> {
    Execution(Execution<'a>),
    SamplesFile(SamplesFile<'a>),
}

/// The report of `source`: its analysis (at look `look` of `sequential` when the daemon
/// adds replicates, else a single analysis) and what the source tells about itself.
/// `optgate run`, the daemon and `optgate analyze` all call this.
pub fn build_report(
    source: &Source,
    sequential: Option<(&SequentialPlan, u32)>,
) -> Result<Report, StatsError> {
    build_report_with(source, |base, others, cfg| {
        optgate_stats::analyze_at_look(base, others, cfg, sequential)
    })
}

/// [`build_report`] with the analysis of the proposals made by `analyse` (baseline, the
/// variants without the A/A control, the settings): the daemon's staged rule analyses only
/// the variants still in the block plan and adds the decided ones itself.
pub fn build_report_with(
    source: &Source,
    analyse: impl FnOnce(&ArmData, &[ArmData], &AnalysisConfig) -> Result<Analysis, StatsError>,
) -> Result<Report, StatsError> {
    match source {
        Source::Execution(x) => execution_report(x, analyse),
        Source::SamplesFile(f) => {
            let mut cfg = f.config.clone();
            if f.samples.system_resource.is_some() {
                // Resources used: lower is better.
                cfg.system_better = optgate_stats::Better::Lower;
            }
            let analysis = analyse(&f.samples.baseline, &f.samples.variants, &cfg)?;
            let mut report = Report::new(analysis, &f.samples.baseline, &f.samples.variants);
            report.system_resource = f.samples.system_resource;
            report.set_samples_provenance(&SamplesProvenance {
                samples_file: f.origin.to_string(),
                optgate_version: env!("CARGO_PKG_VERSION").to_string(),
            });
            Ok(report)
        }
    }
}

/// `optgate analyze` in one call: parse the samples text (`origin` names it in errors and
/// in the provenance), then [`build_report`] of it with `opts`' settings. Every error is
/// bad input (exit code 2).
pub fn analyze_samples(
    csv_text: &str,
    origin: &str,
    opts: &AnalyzeOptions,
) -> Result<Report, SamplesError> {
    let samples = optgate_report::parse_samples(csv_text, origin, &opts.baseline, opts.design)?;
    let source = Source::SamplesFile(SamplesFile {
        origin,
        samples: &samples,
        config: opts.config(),
    });
    build_report(&source, None).map_err(|error| SamplesError::Stats {
        origin: origin.to_string(),
        error,
    })
}

/// An execution's report: the analysis of its collected runs, what the experiment
/// declared, the A/A noise floor, and the provenance of every run.
fn execution_report(
    x: &Execution,
    analyse: impl FnOnce(&ArmData, &[ArmData], &AnalysisConfig) -> Result<Analysis, StatsError>,
) -> Result<Report, StatsError> {
    let (exp, collected) = (x.exp, x.collected);
    let (base, mut others) = crate::analysis::arm_data(exp, collected, x.not_applicable);
    let cfg = crate::analysis::analysis_config(exp);
    // The A/A control is not a proposal: it is analysed on its own (so it neither joins
    // Holm's family nor gets a decision) and reported as the noise floor.
    let aa = others
        .iter()
        .position(|a| a.name == AA_CONTROL)
        .map(|i| others.remove(i));
    let mut analysis = analyse(&base, &others, &cfg)?;
    crate::output_check::annotate(exp, collected, &mut analysis);
    let loaded = crate::loaded::loaded_blocks(collected);
    crate::loaded::check_without_loaded_blocks(&base, &others, &cfg, &loaded, &mut analysis);
    let mut report = Report::new(analysis, &base, &others);
    if let Some(aa) = aa {
        report.noise_floor = Some(noise_floor(&base, &aa, &cfg)?);
    }
    report.breakdown = breakdown(exp, collected);
    report.interference = crate::collect::interference(collected);
    report.epoch_labels = crate::epoch_labels::report_labels(&collected.runs);
    report.load = crate::loaded::load_summary(collected);
    report.system_resource = crate::analysis::system_resource(exp, collected);
    report.isolation = Some(isolation(exp));
    report.utilisation = utilisation(exp, collected);
    report.experiment = Some(experiment_meta(exp));
    report.checklist = Some(checklist(exp, &report.analysis));
    report.operating_characteristics = operating_characteristics(exp, &report.analysis, &cfg);
    let provenance = crate::provenance::execution_provenance(
        exp,
        x.plan,
        x.layout,
        collected,
        x.not_applicable,
        x.node,
    );
    report.provenance = Some(serde_json::to_value(&provenance).expect("the provenance serialises"));
    Ok(report)
}

/// The staged design's simulated power and expected blocks at this experiment's noise
/// (the RMS over the variants of the per-block log-ratio SD); None under another rule, the
/// independent design, or a design the simulation did not cover.
fn operating_characteristics(
    exp: &Experiment,
    analysis: &Analysis,
    cfg: &AnalysisConfig,
) -> Option<optgate_stats::OperatingCharacteristics> {
    if exp.sequential != optgate_experiment::SequentialRule::Staged
        || cfg.design != optgate_stats::Design::Paired
    {
        return None;
    }
    let sds: Vec<f64> = analysis.variants.iter().filter_map(|v| v.log_sd).collect();
    if sds.is_empty() {
        return None;
    }
    let rms = (sds.iter().map(|s| s * s).sum::<f64>() / sds.len() as f64).sqrt();
    optgate_stats::operating::characteristics(
        exp.replicates,
        exp.max_replicates,
        analysis.variants.len(),
        cfg.min_effect_pct,
        rms,
    )
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

/// Per arm, the utilisation of the tasks of its complete runs (a local run, without
/// tasks, counts as one task through its `core_use`); None when no arm has either, and no
/// entry for an arm without them.
fn utilisation(
    exp: &Experiment,
    collected: &Collected,
) -> Option<Vec<optgate_report::ArmUtilisation>> {
    let entries: Vec<_> = exp
        .arms
        .iter()
        .filter_map(|arm| {
            let runs: Vec<&crate::RunResult> = collected.complete_runs(&arm.name).collect();
            let tasks: Vec<optgate_report::TaskUse> =
                runs.iter().flat_map(|r| run_core_uses(r)).collect();
            let of = if runs.iter().any(|r| !r.tasks.is_empty()) {
                optgate_report::UseOf::Tasks
            } else {
                optgate_report::UseOf::Runs
            };
            optgate_report::utilisation::arm_utilisation(&arm.name, of, &tasks)
        })
        .collect();
    (!entries.is_empty()).then_some(entries)
}

/// What run `r` says of its use of cores: one entry per launched task, or the run's own
/// `core_use` when it ran without a launcher.
fn run_core_uses(r: &crate::RunResult) -> Vec<optgate_report::TaskUse> {
    let loaded = crate::loaded::run_load(r).is_some();
    if !r.tasks.is_empty() {
        return r
            .tasks
            .iter()
            .map(|t| optgate_report::TaskUse {
                cpus_allowed: t.cpus_allowed,
                cpu_s: t.cpu_s,
                wall_s: t.wall_s,
                threads_max: t.threads_max,
                runnable_threads: None,
                loaded,
            })
            .collect();
    }
    r.core_use
        .iter()
        .map(|u| optgate_report::TaskUse {
            cpus_allowed: u.cpus_allowed,
            cpu_s: u.cpu_s,
            wall_s: u.wall_s,
            threads_max: u.threads_max,
            runnable_threads: u.runnable_threads,
            loaded,
        })
        .collect()
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

/// What the per-epoch values (or the one value per run) are, for the report's header;
/// with `metrics:`, the primary's name first and the guardrails after.
fn metric_words(exp: &Experiment) -> String {
    let m = &exp.metric;
    let named = |what: String| match &exp.metric_name {
        Some(n) => format!("`{n}`: {what}"),
        None => what,
    };
    let mut words = named(one_metric_words(m, exp.per_run));
    if !exp.guardrails.is_empty() {
        let guardrails: Vec<String> = exp
            .guardrails
            .iter()
            .map(|g| {
                let limit = g
                    .max_regression_pct
                    .map_or("reported only".to_string(), |x| {
                        format!("at most {x}% worse")
                    });
                format!(
                    "`{}` ({}; {limit})",
                    g.name,
                    one_metric_words(&g.spec, true)
                )
            })
            .collect();
        words.push_str(&format!("; guardrails: {}", guardrails.join(", ")));
    }
    words
}

/// One metric in words: what is read where, and which way is better.
fn one_metric_words(m: &optgate_experiment::MetricSpec, per_run: bool) -> String {
    let pattern = m.pattern.as_deref().unwrap_or_default();
    let quantity = match (per_run, &m.unit) {
        (true, Some(u)) => format!("one value per run in {u}"),
        (true, None) => "one value per run".to_string(),
        (false, Some(u)) => format!("{u} per epoch"),
        (false, None) => "seconds per epoch".to_string(),
    };
    let what = match m.source {
        MetricSource::Stdout => format!("{quantity} from stdout, pattern `{pattern}`"),
        MetricSource::File => format!(
            "{quantity} from `{}`, pattern `{pattern}`",
            m.file.as_deref().unwrap_or_default(),
        ),
        MetricSource::Dftracer => format!(
            "summed duration per epoch of DFTracer events in `{}`, {} (traced time, not the job's wall time)",
            m.dir.as_deref().unwrap_or("."),
            m.category
                .as_deref()
                .map_or("all categories".to_string(), |c| format!("category `{c}`"))
        ),
    };
    match (m.better, per_run) {
        (optgate_experiment::Better::Lower, _) => format!("{what}; lower is better"),
        (optgate_experiment::Better::Higher, true) => format!("{what}; higher is better"),
        (optgate_experiment::Better::Higher, false) => {
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

    /// A task record of `cpus` cores, `cpu_s` CPU seconds in 1 s of wall time, 1 thread.
    fn task(cpus: u32, cpu_s: f64) -> optgate_wrapper::tasks::TaskRecord {
        optgate_wrapper::tasks::TaskRecord {
            scheduler: None,
            rank: Some(0),
            local_rank: Some(0),
            node: None,
            host: "n1".into(),
            step_size: Some(1),
            cpus_allowed: cpus,
            cpus_allowed_list: "0-1".into(),
            threads_max: Some(1),
            cpu_user_s: cpu_s,
            cpu_system_s: 0.0,
            cpu_s,
            max_rss_kib: 1,
            wall_s: 1.0,
            end: optgate_wrapper::tasks::TaskEnd::Exited,
            exit_code: Some(0),
            signal: None,
            forwarded_signal: None,
        }
    }

    /// An experiment of a baseline and one variant `v`, and its plan's runs all complete
    /// with nothing recorded beyond that.
    fn baseline_and_v_all_complete() -> (Experiment, Collected) {
        let yaml = "name: t\napp: { command: [app] }\nmetric: { pattern: '(?P<epoch>\\d) (?P<seconds>\\d)' }\n\
                    variants:\n  - name: v\n    env: { X: '1' }\n";
        let exp = optgate_experiment::load_str(yaml, std::path::Path::new("/tmp/t.yaml"))
            .unwrap()
            .experiment;
        let plan = Plan::for_experiment(&exp);
        let collected = Collected {
            runs: plan
                .runs()
                .iter()
                .map(|r| crate::RunResult::empty(r, crate::RunStatus::Complete))
                .collect(),
            correctness: None,
        };
        (exp, collected)
    }

    /// Local runs (no task records) give no `utilisation` at all; once one arm's complete
    /// runs have records, that arm alone gets an entry, and a failed run's tasks are not
    /// counted. Planted bugs caught: an empty list instead of None, an entry for an arm
    /// without records, tasks of failed runs read.
    #[test]
    fn utilisation_only_for_arms_whose_runs_left_task_records() {
        let (exp, mut collected) = baseline_and_v_all_complete();
        assert_eq!(utilisation(&exp, &collected), None);
        for r in collected.runs.iter_mut().filter(|r| r.arm == "baseline") {
            r.tasks = vec![task(2, 1.0)];
        }
        let first_v = collected.runs.iter_mut().find(|r| r.arm == "v").unwrap();
        first_v.tasks = vec![task(2, 1.0)];
        first_v.status = crate::RunStatus::Failed {
            reason: "exit 1".into(),
        };
        let u = utilisation(&exp, &collected).unwrap();
        assert_eq!(u.len(), 1, "{u:?}");
        assert_eq!(u[0].arm, "baseline");
        assert_eq!(
            u[0].finding,
            Some(optgate_report::UtilisationFinding::IdleCores)
        );
    }

    /// Local runs count through their `core_use`: the baseline's one runnable thread of 2
    /// cores is idle, the variant's two — under a load that left them 0.8 cores — are not,
    /// and the load reaches the entry from the runs' conditions. Planted bugs caught:
    /// `core_use` not read (no entry), the load not carried (`under_load` false), the
    /// entry said to be of tasks.
    #[test]
    fn local_runs_are_judged_on_their_core_use() {
        let (exp, mut collected) = baseline_and_v_all_complete();
        let loaded = optgate_wrapper::manifest::NodeConditions {
            online_cpus: Some(2),
            load_avg_start: Some(3.5),
            load_avg_end: Some(2.5),
            steal_pct: None,
        };
        for r in &mut collected.runs {
            let (cpu_s, runnable) = if r.arm == "baseline" {
                (1.0, 1.0)
            } else {
                (0.8, 2.0)
            };
            r.conditions = Some(loaded);
            r.core_use = Some(optgate_wrapper::manifest::CoreUse {
                cpus_allowed: 2,
                cpus_allowed_list: "0-1".into(),
                threads_max: Some(1),
                runnable_threads: Some(runnable),
                cpu_s,
                wall_s: 1.0,
            });
        }
        let u = utilisation(&exp, &collected).unwrap();
        let got: Vec<_> = u
            .iter()
            .map(|a| (a.arm.as_str(), a.of, a.under_load, a.finding))
            .collect();
        use optgate_report::{UseOf, UtilisationFinding};
        assert_eq!(
            got,
            [
                (
                    "baseline",
                    UseOf::Runs,
                    true,
                    Some(UtilisationFinding::IdleCores)
                ),
                ("v", UseOf::Runs, true, None),
            ]
        );
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
