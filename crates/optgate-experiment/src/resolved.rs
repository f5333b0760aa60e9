//! The experiment after validation: arms with their effective environment, launcher
//! resources and build, ready for planning and rendering. Built only by `load`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use optgate_stats::EpochWindow;
use serde::Serialize;

use crate::model::{
    BuildSpec, CacheMode, ChecklistEntry, CommandSpec, CorrectnessSpec, Design, ExperimentFile,
    MetricSpec, PageCacheMode, SchedulerSpec, SystemMetricSpec,
};

/// The name of the baseline arm and of the optional A/A control arm.
pub const BASELINE: &str = "baseline";
pub const AA_CONTROL: &str = "aa-control";

#[derive(Debug, Clone, Serialize)]
pub struct Experiment {
    /// Absolute path of the experiment file.
    pub source: PathBuf,
    /// SHA-256 of the file's bytes, for provenance.
    pub source_sha256: String,
    /// The file's text, kept so a run directory can hold an exact copy.
    #[serde(skip)]
    pub source_text: String,
    pub file: ExperimentFile,
    /// Where the runs go (`scheduler.kind`).
    pub kind: crate::model::SchedulerKind,
    /// Blocked (paired) or independent (`design`).
    pub design: crate::model::Design,
    /// Blocks before the first look (`replicates`).
    pub replicates: u32,
    /// The most blocks the looks may add up to: `max_replicates`, never below
    /// `replicates` (equal: a single look).
    pub max_replicates: u32,
    /// The plan's seed (`seed`).
    pub seed: u64,
    /// The false-accept rate over all looks (`compare.alpha`).
    pub alpha: f64,
    /// How the looks are analysed (`compare.sequential`).
    pub sequential: crate::model::SequentialRule,
    /// Absolute working directory of the runs.
    pub workdir: PathBuf,
    /// Baseline first, then the A/A control if asked for, then variants in file order.
    pub arms: Vec<Arm>,
    /// Distinct builds; arms point into this list.
    pub builds: Vec<Build>,
    pub run_time_limit: Option<Duration>,
    pub allocation_time_limit: Option<Duration>,
    /// The matched steady window (`compare.steady_epochs`), parsed by the statistics crate.
    pub steady_epochs: Option<EpochWindow>,
    /// Absolute paths of the declared `inputs` (page-cache handling).
    pub inputs: Vec<PathBuf>,
    /// The user's privileged helper that sets governors (`preflight.governor_helper`).
    pub governor_helper: Option<Vec<String>>,
    /// Over-subscription findings are warnings, not errors
    /// (`preflight.allow_oversubscription`).
    pub allow_oversubscription: bool,
    /// What the experiment is for (`description`).
    pub description: Option<String>,
    /// The application's command line, before an arm's `args` (`app.command`).
    pub app_command: CommandSpec,
    /// What is measured in each run and where it is read: `metric`, or the primary of
    /// `metrics`.
    pub metric: MetricSpec,
    /// The primary metric's name when it comes from `metrics` (none for `metric`).
    pub metric_name: Option<String>,
    /// The primary metric is one value per run (a figure of merit: a pattern with a
    /// group `value`), not one per epoch.
    pub per_run: bool,
    /// The other entries of `metrics`, in file order: reported, and each with a
    /// `max_regression_pct` a veto of an acceptance.
    pub guardrails: Vec<Guardrail>,
    /// The user's own measure of System Impact (`system_metric`).
    pub system_metric: Option<SystemMetricSpec>,
    /// What each variant's output must match the baseline's in (`correctness`).
    pub correctness: Option<CorrectnessSpec>,
    /// Where the file's `correctness` key is, for an error of the experiment that it
    /// declares (a baseline run that fails its own check).
    #[serde(skip)]
    pub correctness_at: Option<crate::yaml::Location>,
    /// The smallest speed-up worth having, in percent (`compare.min_effect_pct`).
    pub min_effect_pct: f64,
    /// The production run's epochs, for the break-even projection
    /// (`compare.production_epochs`).
    pub production_epochs: Option<u32>,
    /// What each job asks the scheduler for besides its shape (`scheduler.*`).
    pub allocation: Allocation,
    /// How often a job the scheduler lost is submitted again (`scheduler.max_resubmits`).
    pub max_resubmits: u32,
    /// The verdicts the file declares for checklist dimensions it does not measure
    /// (`checklist`).
    pub checklist: BTreeMap<String, ChecklistEntry>,
    /// How often the daemon submits it again, and what runs when a decision flips
    /// (`recheck`).
    pub recheck: Option<crate::recheck::Recheck>,
    /// The file's regular expressions, compiled once (a look reads every run with them).
    #[serde(skip)]
    pub patterns: Patterns,
}

/// A guardrail metric: one value per run, its estimate and interval reported beside the
/// primary's, an acceptance vetoed when it regressed beyond `max_regression_pct`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Guardrail {
    pub name: String,
    pub spec: MetricSpec,
    pub max_regression_pct: Option<f64>,
}

/// The primary metric (`metric`, else the entry of `metrics` marked `primary: true`, else
/// its first), its name when it has one, and the guardrails (the other entries, in order).
/// With neither key, an empty metric (validation refuses such a file).
pub fn split_metrics(file: &ExperimentFile) -> (MetricSpec, Option<String>, Vec<Guardrail>) {
    if let Some(m) = &file.metric {
        return (m.clone(), None, Vec::new());
    }
    let Some(first) = file.metrics.first() else {
        return (MetricSpec::default(), None, Vec::new());
    };
    let primary = file.metrics.iter().position(|m| m.primary).unwrap_or(0);
    let guardrails = file
        .metrics
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != primary)
        .map(|(_, m)| Guardrail {
            name: m.name.clone(),
            spec: m.spec(),
            max_regression_pct: m.max_regression_pct,
        })
        .collect();
    let p = file.metrics.get(primary).unwrap_or(first);
    (p.spec(), Some(p.name.clone()), guardrails)
}

/// The experiment's regular expressions, compiled once when it is loaded (each was
/// checked by validation, so every one that is declared is here).
#[derive(Debug, Clone, Default)]
pub struct Patterns {
    /// `metric.pattern` (stdout and file metrics), or the primary's of `metrics`.
    pub metric: Option<regex::Regex>,
    /// Each guardrail's pattern, in the order of `Experiment::guardrails`.
    pub guardrails: Vec<Option<regex::Regex>>,
    /// `system_metric.pattern`.
    pub system_metric: Option<regex::Regex>,
    /// `correctness.values.pattern`.
    pub correctness_values: Option<regex::Regex>,
    /// `correctness.expect`, with its own pattern when it has one.
    pub expect: Option<crate::expect::ExpectCheck>,
}

impl Patterns {
    /// Compiles the file's patterns; one that does not compile is left out (validation
    /// refused it already, with its place in the file).
    pub fn compile(file: &ExperimentFile) -> Patterns {
        let re = |p: &str| regex::Regex::new(p).ok();
        let (metric, _, guardrails) = split_metrics(file);
        Patterns {
            metric: metric.pattern.as_deref().and_then(re),
            guardrails: guardrails
                .iter()
                .map(|g| g.spec.pattern.as_deref().and_then(re))
                .collect(),
            system_metric: file.system_metric.as_ref().and_then(|m| re(&m.pattern)),
            correctness_values: file
                .correctness
                .as_ref()
                .and_then(|c| c.values.as_ref())
                .and_then(|v| re(&v.pattern)),
            expect: file
                .correctness
                .as_ref()
                .and_then(crate::expect::ExpectCheck::resolve),
        }
    }
}

/// The allocation settings of every job, resolved: `exclusive` is the file's
/// `scheduler.exclusive` when given, else yes for the blocked design — one block at a
/// time per node, so blocks never disturb each other's timings — and no for the
/// independent design.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Allocation {
    pub queue: Option<String>,
    pub account: Option<String>,
    pub exclusive: bool,
    pub extra_directives: Vec<String>,
}

impl Allocation {
    /// The allocation `scheduler` asks for under `design`.
    pub fn resolve(scheduler: &SchedulerSpec, design: Design) -> Allocation {
        Allocation {
            queue: scheduler.queue.clone(),
            account: scheduler.account.clone(),
            exclusive: scheduler.exclusive.unwrap_or(design == Design::Blocked),
            extra_directives: scheduler.extra_directives.clone(),
        }
    }
}

impl Experiment {
    pub fn name(&self) -> &str {
        &self.file.name
    }

    pub fn arm(&self, name: &str) -> Option<&Arm> {
        self.arms.iter().find(|a| a.name == name)
    }

    pub fn arm_names(&self) -> Vec<String> {
        self.arms.iter().map(|a| a.name.clone()).collect()
    }

    /// `FILE:LINE` of the experiment file's `correctness` key (the file alone when it has
    /// none), for an error of the experiment that names what it declares.
    pub fn correctness_key_place(&self) -> String {
        match self.correctness_at {
            Some(at) => format!("{}:{}", self.source.display(), at.line),
            None => self.source.display().to_string(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArmRole {
    Baseline,
    AaControl,
    Variant,
}

/// Resources of one arm's launch line (`srun -N -n -c`, `flux run -N -n -c -g`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resources {
    pub nodes: u32,
    pub tasks_per_node: u32,
    pub cpus_per_task: u32,
    pub gpus_per_task: u32,
    pub extra_args: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Arm {
    pub name: String,
    pub role: ArmRole,
    pub description: Option<String>,
    pub dimension: Option<String>,
    /// Effective variables set for the run: `app.env`, then the arm's own.
    pub env: BTreeMap<String, String>,
    pub unset: Vec<String>,
    pub resources: Resources,
    /// Effective extra arguments appended to the app command.
    pub args: Vec<String>,
    /// Index into `Experiment::builds`, when the experiment builds anything.
    pub build: Option<usize>,
    pub governor: Option<String>,
    pub requires: Vec<String>,
    /// The arm's compile caches (its own `caches`, else the experiment's, else cold).
    pub caches: CacheMode,
    /// The arm's page-cache handling of `Experiment::inputs`.
    pub page_cache: PageCacheMode,
}

#[derive(Debug, Clone, Serialize)]
pub struct Build {
    /// Stable id derived from the build's content (`build-<8 hex>`), used as directory name.
    pub id: String,
    pub spec: BuildSpec,
}

impl Build {
    pub fn command(&self) -> &CommandSpec {
        &self.spec.command
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn load(extra: &str) -> Experiment {
        let text = format!(
            "name: t\ndescription: why\napp: {{ command: [./app, -q] }}\n\
             metric: {{ pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s', better: higher }}\n\
             replicates: 6\n{extra}\
             variants:\n  - {{ name: v, dimension: l2_threading_model, env: {{ W: '1' }} }}\n"
        );
        match crate::load_str(&text, Path::new("/exp/t.yaml")) {
            Ok(l) => l.experiment,
            Err(e) => panic!("{text}\n---\n{e}"),
        }
    }

    /// Each resolved field is the file's value, not a default: a loader that left one at
    /// its default (or read the wrong key) fails here.
    #[test]
    fn the_resolved_fields_are_what_the_file_says() {
        let e = load(
            "compare: { min_effect_pct: 7.5, production_epochs: 90 }\n\
             preflight: { allow_oversubscription: true }\n\
             correctness: { files: [out.txt] }\n\
             system_metric: { pattern: 'energy (?P<value>[0-9.]+)' }\n\
             scheduler: { kind: slurm, queue: q1, account: a1, extra_directives: [--x=1], max_resubmits: 4 }\n\
             checklist: { l2_autotuning: { verdict: applicable_not_measured } }\n",
        );
        assert_eq!(e.description.as_deref(), Some("why"));
        assert_eq!(e.app_command, e.file.app.command);
        assert_eq!(e.metric.better, crate::model::Better::Higher);
        assert_eq!(e.min_effect_pct, 7.5);
        assert_eq!(e.production_epochs, Some(90));
        assert!(e.allow_oversubscription);
        assert_eq!(e.correctness.unwrap().files, ["out.txt"]);
        assert!(e.system_metric.is_some());
        assert_eq!(e.max_resubmits, 4);
        assert_eq!(
            e.checklist.keys().collect::<Vec<_>>(),
            ["l2_autotuning"],
            "{:?}",
            e.checklist
        );
        assert_eq!(
            e.allocation,
            Allocation {
                queue: Some("q1".into()),
                account: Some("a1".into()),
                exclusive: true,
                extra_directives: vec!["--x=1".into()],
            }
        );
        let plain = load("");
        assert!(!plain.allow_oversubscription && plain.correctness.is_none());
        assert!(plain.system_metric.is_none() && plain.checklist.is_empty());
        assert_eq!(plain.max_resubmits, plain.file.scheduler.max_resubmits);
    }

    /// Whole nodes: the file's `scheduler.exclusive` when given, else yes for the blocked
    /// design and no for the independent one (a default that ignored the design, or an
    /// explicit value that lost to it, fails here).
    #[test]
    fn jobs_ask_for_whole_nodes_as_the_file_or_else_the_design_says() {
        let exclusive = |extra: &str| load(extra).allocation.exclusive;
        assert!(exclusive(""));
        assert!(!exclusive("design: independent\n"));
        assert!(!exclusive("scheduler: { kind: slurm, exclusive: false }\n"));
        assert!(exclusive(
            "design: independent\nscheduler: { kind: slurm, exclusive: true }\n"
        ));
    }
}
