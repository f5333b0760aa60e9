//! The experiment after validation: arms with their effective environment, launcher
//! resources and build, ready for planning and rendering. Built only by `load`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use optgate_stats::EpochWindow;
use serde::Serialize;

use crate::model::{BuildSpec, CacheMode, CommandSpec, ExperimentFile, PageCacheMode};

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
    /// The file's regular expressions, compiled once (a look reads every run with them).
    #[serde(skip)]
    pub patterns: Patterns,
}

/// The experiment's regular expressions, compiled once when it is loaded (each was
/// checked by validation, so every one that is declared is here).
#[derive(Debug, Clone, Default)]
pub struct Patterns {
    /// `metric.pattern` (stdout and file metrics).
    pub metric: Option<regex::Regex>,
    /// `system_metric.pattern`.
    pub system_metric: Option<regex::Regex>,
    /// `correctness.values.pattern`.
    pub correctness_values: Option<regex::Regex>,
}

impl Patterns {
    /// Compiles the file's patterns; one that does not compile is left out (validation
    /// refused it already, with its place in the file).
    pub fn compile(file: &ExperimentFile) -> Patterns {
        let re = |p: &str| regex::Regex::new(p).ok();
        Patterns {
            metric: file.metric.pattern.as_deref().and_then(re),
            system_metric: file.system_metric.as_ref().and_then(|m| re(&m.pattern)),
            correctness_values: file
                .correctness
                .as_ref()
                .and_then(|c| c.values.as_ref())
                .and_then(|v| re(&v.pattern)),
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
