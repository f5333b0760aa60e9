//! The report model: everything a report shows ([`Report`]: the analysis with the
//! experiment's metadata, checklist, provenance, per-arm epoch summaries, isolation,
//! resources, interference, noise floor and traced time), and the options of a samples
//! file's analysis. Built by `optgate_evidence::report::build_report`; rendered by the
//! sibling modules.

use optgate_stats::{Analysis, AnalysisConfig, ArmData, Better, Design, EpochWindow};
use serde::{Deserialize, Serialize};

use crate::checklist::ChecklistRow;
use crate::load::LoadSummary;
use crate::utilisation::*;

/// What the experiment declared about itself (the daemon fills this in; a samples file
/// has none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ExperimentMeta {
    pub name: String,
    pub description: Option<String>,
    /// What the per-epoch numbers are, in words (e.g. "DFTracer traces in `traces`,
    /// category `compute`"): App Impact is a change of this quantity.
    #[serde(default)]
    pub metric: Option<String>,
    pub variants: Vec<VariantMeta>,
}

/// A variant as declared: its checklist dimension and description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct VariantMeta {
    pub name: String,
    pub dimension: Option<String>,
    pub description: Option<String>,
}

/// Spread of one epoch of one arm, in the metric's own units.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EpochSummary {
    pub epoch: u32,
    /// Runs that have this epoch.
    pub n: usize,
    pub median: f64,
    /// Quartiles by linear interpolation between order statistics (NumPy's default).
    pub q1: f64,
    pub q3: f64,
    pub min: f64,
    pub max: f64,
}

/// Per-epoch summary of one arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmSummary {
    pub name: String,
    pub runs: usize,
    pub epochs: Vec<EpochSummary>,
}

impl ArmSummary {
    /// Summarises every epoch of `arm`.
    pub fn of(arm: &ArmData) -> Self {
        let mut by_epoch: std::collections::BTreeMap<u32, Vec<f64>> = Default::default();
        for run in &arm.runs {
            for (&e, &v) in &run.epochs {
                by_epoch.entry(e).or_default().push(v);
            }
        }
        let epochs = by_epoch
            .into_iter()
            .map(|(epoch, mut v)| {
                v.sort_by(f64::total_cmp);
                EpochSummary {
                    epoch,
                    n: v.len(),
                    median: quantile(&v, 0.5),
                    q1: quantile(&v, 0.25),
                    q3: quantile(&v, 0.75),
                    min: v[0],
                    max: v[v.len() - 1],
                }
            })
            .collect();
        ArmSummary {
            name: arm.name.clone(),
            runs: arm.runs.len(),
            epochs,
        }
    }
}

/// Quantile of sorted, non-empty data, linear interpolation (type 7).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// Everything a report shows. Serialises as the `Analysis` object (flattened) plus
/// metadata, checklist, provenance and the per-arm epoch summaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    #[serde(flatten)]
    pub analysis: Analysis,
    pub experiment: Option<ExperimentMeta>,
    /// `None` for a samples file: the checklist needs the experiment's declarations.
    pub checklist: Option<Vec<ChecklistRow>>,
    /// Hosts, CPU, governor, job ids, environments, build commands, versions: whatever the
    /// caller recorded, shown as it is.
    pub provenance: Option<serde_json::Value>,
    /// Baseline first, then the variants in analysis order.
    pub arms: Vec<ArmSummary>,
    /// The epochs' labels as the runs printed them (a step counter `100, 200`, a simulated
    /// time `0.005`), by position: `epoch_labels[0]` is epoch 1's. Absent when the labels
    /// are the positions themselves (`1, 2, …`), for traces, figures of merit and a
    /// samples file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub epoch_labels: Vec<String>,
    /// The A/A control's measured "speed-up": the noise floor, shown next to
    /// `min_effect_pct` (experiments with `aa_control: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_floor: Option<NoiseFloor>,
    /// Traced time per category beside the wall time, per arm (DFTracer metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breakdown: Option<Vec<ArmBreakdown>>,
    /// Runs measured while something else competed for the node (load, CPU steal, another
    /// run of the experiment at the same time on the same host). Always written, empty
    /// when none was found, so that a report's keys never depend on the node's load.
    #[serde(default)]
    pub interference: Vec<InterferenceFlag>,
    /// The runs measured at a load above their node's CPUs, summarised once (null: none
    /// was). The per-run list stays in `interference`.
    #[serde(default)]
    pub load: Option<LoadSummary>,
    /// What System Impact compares (null: not measured for every run).
    #[serde(default)]
    pub system_resource: Option<SystemResource>,
    /// How each arm's replicates were kept apart (compile caches, page cache); null for a
    /// samples file, where optgate ran nothing.
    #[serde(default)]
    pub isolation: Option<Isolation>,
    /// Per arm, cores allotted and used per task and threads seen (from the tasks'
    /// records of `optgate step`, or the `core_use` the run wrapper records for a local
    /// run). Absent when no arm has either (a samples file, older manifests); an arm
    /// without them has no entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilisation: Option<Vec<ArmUtilisation>>,
    /// The staged design's power and expected blocks at the observed noise, from the
    /// simulation of `benches/decision-cost` (`optgate_stats::operating`). Absent for a
    /// design that was not simulated, a samples file, or an unknown noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operating_characteristics: Option<optgate_stats::OperatingCharacteristics>,
}

/// How replicates were kept from helping each other, per arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Isolation {
    pub arms: Vec<ArmIsolation>,
    /// How many `inputs` the page-cache handling covers.
    pub inputs: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmIsolation {
    pub arm: String,
    pub caches: optgate_experiment::CacheMode,
    pub page_cache: optgate_experiment::PageCacheMode,
}

impl Isolation {
    /// One sentence: which arms had cold or warm compile caches, and what happened to the
    /// page cache of the inputs.
    pub fn describe(&self) -> String {
        use optgate_experiment::{CacheMode, PageCacheMode};
        let names = |f: &dyn Fn(&ArmIsolation) -> bool| -> Vec<&str> {
            self.arms
                .iter()
                .filter(|a| f(a))
                .map(|a| a.arm.as_str())
                .collect()
        };
        let mut parts = Vec::new();
        for (mode, words) in [
            (
                CacheMode::Cold,
                "cold (one per run: every replicate pays the compile)",
            ),
            (
                CacheMode::Warm,
                "warm (one per arm, filled by an untimed warm-up run)",
            ),
        ] {
            let arms = names(&|a| a.caches == mode);
            if !arms.is_empty() {
                parts.push(format!("compile caches {words} for {}", arms.join(", ")));
            }
        }
        for (mode, words) in [
            (PageCacheMode::Leave, "left alone"),
            (PageCacheMode::Cold, "evicted before each run"),
            (PageCacheMode::Warm, "read in before each run"),
            (PageCacheMode::Drop, "dropped before each run"),
        ] {
            let arms = names(&|a| a.page_cache == mode);
            if arms.is_empty() {
                continue;
            }
            let what = if self.inputs == 0 {
                "page cache left alone (no `inputs:` declared)".to_string()
            } else {
                format!("page cache of the {} input(s) {words}", self.inputs)
            };
            if arms.len() == self.arms.len() {
                parts.push(what);
            } else {
                parts.push(format!("{what} for {}", arms.join(", ")));
            }
        }
        format!("Isolation: {}.", parts.join("; "))
    }
}

/// The resource System Impact compares, per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SystemResource {
    /// The user's `system_metric` (its direction from the file).
    Metric,
    /// CPU user + system seconds of the run's process tree: the cores it kept busy.
    CoreSeconds,
    /// Joules from the node's energy counters (RAPL packages), measured for every run.
    Energy,
}

impl SystemResource {
    /// How the report names it.
    pub fn describe(self) -> &'static str {
        match self {
            SystemResource::Metric => "the experiment's system_metric",
            SystemResource::CoreSeconds => {
                "core-seconds per run (CPU user + system time of the run's process tree)"
            }
            SystemResource::Energy => "energy per run (J, RAPL package counters)",
        }
    }
}

/// One run measured under interference, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterferenceFlag {
    pub run_id: String,
    pub arm: String,
    pub reason: String,
}

/// The A/A control arm against the baseline: identical arms, so any "effect" is noise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoiseFloor {
    pub arm: String,
    pub speedup: optgate_stats::SpeedUp,
    /// 100 · (estimate − 1): the apparent effect of changing nothing.
    pub apparent_effect_pct: Option<f64>,
    pub min_effect_pct: f64,
}

/// One arm's median time per run: wall clock and each traced category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmBreakdown {
    pub arm: String,
    pub runs: usize,
    pub wall_s: Option<f64>,
    pub categories: std::collections::BTreeMap<String, f64>,
}

impl Report {
    /// A report of `analysis` over the given arms (for the per-epoch tables and plots).
    pub fn new(analysis: Analysis, baseline: &ArmData, variants: &[ArmData]) -> Self {
        let arms = std::iter::once(baseline)
            .chain(variants)
            .map(ArmSummary::of)
            .collect();
        Report {
            analysis,
            experiment: None,
            checklist: None,
            provenance: None,
            arms,
            epoch_labels: Vec::new(),
            noise_floor: None,
            breakdown: None,
            interference: Vec::new(),
            load: None,
            system_resource: None,
            isolation: None,
            utilisation: None,
            operating_characteristics: None,
        }
    }

    /// What arm `arm`'s utilisation found (None: nothing, or no task records).
    pub fn utilisation_finding(&self, arm: &str) -> Option<UtilisationFinding> {
        self.utilisation
            .as_ref()?
            .iter()
            .find(|u| u.arm == arm)?
            .finding
    }

    /// Strategy and description of a variant for the proposal table.
    pub fn variant_meta(&self, name: &str) -> Option<&VariantMeta> {
        self.experiment
            .as_ref()?
            .variants
            .iter()
            .find(|v| v.name == name)
    }
}

/// Options of `optgate analyze`; [`AnalyzeOptions::new`] gives its defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalyzeOptions {
    pub baseline: String,
    pub design: Design,
    pub alpha: f64,
    pub min_effect_pct: f64,
    /// `None`: every epoch but the first.
    pub steady_epochs: Option<EpochWindow>,
    /// `None`: the number of epochs measured.
    pub production_epochs: Option<u32>,
    pub better: Better,
}

impl AnalyzeOptions {
    /// Defaults: paired design, α = 0.05, min effect 1 %, steady window `2..`,
    /// production epochs = epochs measured, lower is better.
    pub fn new(baseline: impl Into<String>) -> Self {
        AnalyzeOptions {
            baseline: baseline.into(),
            design: Design::Paired,
            alpha: 0.05,
            min_effect_pct: 1.0,
            steady_epochs: None,
            production_epochs: None,
            better: Better::Lower,
        }
    }

    pub fn config(&self) -> AnalysisConfig {
        AnalysisConfig {
            design: self.design,
            alpha: self.alpha,
            min_effect_pct: self.min_effect_pct,
            steady_epochs: self.steady_epochs,
            production_epochs: self.production_epochs,
            better: self.better,
            ..AnalysisConfig::default()
        }
    }
}

#[cfg(test)]
mod isolation_tests {
    use super::*;
    use optgate_experiment::{CacheMode, PageCacheMode};

    fn arm(name: &str, caches: CacheMode, page_cache: PageCacheMode) -> ArmIsolation {
        ArmIsolation {
            arm: name.into(),
            caches,
            page_cache,
        }
    }

    #[test]
    fn the_sentence_names_each_mode_and_its_arms() {
        let i = Isolation {
            arms: vec![
                arm("baseline", CacheMode::Cold, PageCacheMode::Cold),
                arm("compiled", CacheMode::Warm, PageCacheMode::Cold),
            ],
            inputs: 2,
        };
        assert_eq!(
            i.describe(),
            "Isolation: compile caches cold (one per run: every replicate pays the compile) \
             for baseline; compile caches warm (one per arm, filled by an untimed warm-up run) \
             for compiled; page cache of the 2 input(s) evicted before each run."
        );
        let none = Isolation {
            arms: vec![arm("baseline", CacheMode::Cold, PageCacheMode::Leave)],
            inputs: 0,
        };
        assert!(
            none.describe()
                .ends_with("page cache left alone (no `inputs:` declared).")
        );
    }
}
