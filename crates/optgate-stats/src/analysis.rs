//! The analysis of one experiment: per variant the steady-state comparison with the
//! baseline, one-time cost, production impact, stability checks and the decision, in the
//! order docs/STATISTICS.md prescribes. `Analysis` is the stable JSON interface.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

pub use crate::fmt::{fmt_p, fmt_signed_pct};

use serde::{Deserialize, Serialize};

use crate::error::StatsError;
use crate::guardrail::{GuardrailResult, compare_guardrail, oriented_change, veto_reason};
use crate::holm::holm_in_family;
use crate::htest::{Alternative, PMethod, RankTest, ShiftEstimate};
use crate::mann_whitney::{hodges_lehmann_shift, mann_whitney_u, min_p_unpaired};
use crate::model::{AnalysisConfig, ArmData, Better, Design, EpochWindow, RunSamples};
use crate::normal;
use crate::sequential::SequentialPlan;
use crate::signed_rank::{hodges_lehmann_paired, min_p_paired, wilcoxon_signed_rank};
use crate::trend::{
    OUTLIER_Z, mann_kendall, mann_kendall_suffixes, median, modified_z_scores, sen_slope,
};

/// Replicates per arm below which no decision other than inconclusive is made.
pub const MIN_REPLICATES: usize = 5;
/// Level of the Mann–Kendall stability check (fixed: it is a diagnostic, not the gate).
pub const TREND_ALPHA: f64 = 0.05;
/// Power the minimum detectable effect and the replicate estimate are computed for.
pub const MDE_POWER: f64 = 0.8;
/// Largest replicate count worth suggesting; above it the answer is "no realistic n".
const MAX_SUGGESTED_REPLICATES: f64 = 10_000.0;

/// The verdict on one variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Accept,
    Reject,
    Inconclusive,
    NotApplicable,
    /// The variant's app failed in every run: nothing to compare, and more runs would fail
    /// the same way.
    Failed,
}

impl Decision {
    pub fn as_str(&self) -> &'static str {
        match self {
            Decision::Accept => "accept",
            Decision::Reject => "reject",
            Decision::Inconclusive => "inconclusive",
            Decision::NotApplicable => "not_applicable",
            Decision::Failed => "failed",
        }
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A speed-up ratio (> 1: the variant is faster) with its interval at `1 − 2α`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct SpeedUp {
    pub estimate: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
}

/// The first-epoch (one-time cost) effect, a secondary endpoint: reported, not gated on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct FirstEpoch {
    /// Median epoch-1 value of the baseline (seconds for `better: lower`).
    pub baseline_s: Option<f64>,
    pub variant_s: Option<f64>,
    /// Estimated change of the epoch-1 time in percent, positive = the variant is
    /// slower (a one-time cost): `100·(exp(−HL) − 1)` with HL the log speed-up.
    pub change_pct: Option<f64>,
    /// Interval of `change_pct` at `1 − 2α`.
    pub change_ci_low_pct: Option<f64>,
    pub change_ci_high_pct: Option<f64>,
}

/// Epoch N of both arms side by side.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EpochRow {
    pub epoch: u32,
    /// Median over the runs that have this epoch, in the metric's own units.
    pub baseline_median_s: Option<f64>,
    pub variant_median_s: Option<f64>,
    /// Improvement ratio of the medians, > 1 = the variant is better
    /// (`baseline/variant` for times, `variant/baseline` for `better: higher`).
    pub ratio: Option<f64>,
}

/// Everything decided and measured about one variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantAnalysis {
    pub name: String,
    pub decision: Decision,
    pub reason: String,
    /// Complete runs of the baseline used in this comparison (paired: the pairs).
    pub n_baseline: usize,
    pub n_variant: usize,
    /// The epoch numbers of the steady window actually used (matched in both arms);
    /// empty when there is no steady window.
    pub steady_epochs: Vec<u32>,
    pub speedup: SpeedUp,
    pub p_improvement: Option<f64>,
    pub p_improvement_adjusted: Option<f64>,
    pub p_no_worthwhile: Option<f64>,
    pub p_no_worthwhile_adjusted: Option<f64>,
    /// Which test and null distribution produced the p-values of this variant.
    pub p_method: Option<String>,
    /// Smallest one-sided p-value the exact test can reach with this n.
    pub min_achievable_p: Option<f64>,
    /// The same after Holm's adjustment over the family (`m · min_achievable_p`).
    pub min_achievable_p_adjusted: Option<f64>,
    /// Minimum detectable steady speed-up in percent (see `Method::mde`).
    pub mde_pct: Option<f64>,
    /// The spread the planning figures use: the sample SD of the per-block log ratios
    /// (paired) or the pooled SD of the log values (independent). The report's operating
    /// characteristics are read at it.
    #[serde(default)]
    pub log_sd: Option<f64>,
    /// Replicates per arm that would likely decide an inconclusive result.
    pub replicates_to_decide: Option<u32>,
    pub first_epoch: FirstEpoch,
    /// Projected change of the production job's time, positive = faster.
    pub app_impact_pct: Option<f64>,
    /// Interval of `app_impact_pct` from the ends of the steady speed-up's interval (see
    /// `Method::app_impact`); null where that end is unbounded or there is no App Impact.
    #[serde(default)]
    pub app_impact_ci_low: Option<f64>,
    #[serde(default)]
    pub app_impact_ci_high: Option<f64>,
    /// Rule 5′'s bound, the best App Impact the intervals allow:
    /// `100·(1 − (f̃b·e^(−u_f) + (E−1)·s̃b·e^(−u_s)) / (f̃b + (E−1)·s̃b))` with f̃b, s̃b the
    /// baseline's median epoch-1 and steady values and u_s, u_f the upper ends of the steady
    /// and epoch-1 log speed-up intervals (`E·s̃b` terms only without epoch 1); ≤ 0 means
    /// acceptance is impossible. Null where either end is unbounded.
    #[serde(default)]
    pub app_impact_best: Option<f64>,
    /// Change of the system metric (resources per run: core-seconds, energy, or the
    /// user's `system_metric`), positive = better; null when not measured for every run.
    /// The same estimator as the speed-up (Hodges–Lehmann on log ratios, paired by block
    /// or unpaired), turned into percent.
    pub system_impact_pct: Option<f64>,
    /// Its interval at `1 − 2α`, from the log-ratio interval's ends; null where an end is
    /// unbounded at this n.
    #[serde(default)]
    pub system_impact_ci_low: Option<f64>,
    #[serde(default)]
    pub system_impact_ci_high: Option<f64>,
    /// 0.5·App Impact + 0.5·System Impact (System Impact 0 when not measured).
    pub weighted_score: Option<f64>,
    /// First epoch from which the variant's cumulative time stays at or below the
    /// baseline's (1 = never behind); null = never.
    pub breakeven_epoch: Option<u32>,
    /// First differing output, when the correctness check failed.
    pub correctness_mismatch: Option<String>,
    pub per_epoch: Vec<EpochRow>,
    pub warnings: Vec<String>,
    /// The guardrail metrics' changes (`AnalysisConfig::guardrails`, in that order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guardrails: Vec<GuardrailResult>,
    /// What the output check compared for this variant; null when the experiment declares
    /// no correctness check (or for a samples file). The statistics leave it null: the
    /// report builder, which knows the experiment and its runs' evidence, fills it in.
    #[serde(default)]
    pub output_check: Option<OutputCheck>,
    /// Accepted, of a dimension whose safety rests on unchanged output, with no output
    /// check declared: the proposal table shows `accept [output not checked]`. The decision
    /// itself is not changed by it. Set by the report builder, as `output_check` is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub output_not_checked: bool,
    /// The same variant analysed again on the blocks in which no run was measured under
    /// load; null when no block was loaded or too few blocks remain. Set by the report
    /// builder, which knows the runs' loads.
    #[serde(default)]
    pub without_loaded_blocks: Option<WithoutLoadedBlocks>,
    /// How many of the variant's paired blocks had a run measured under load (the
    /// proposal table marks the decision `[N loaded blocks]`). Set by the report builder.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub loaded_blocks: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A decision checked without the blocks measured under load: how many blocks remain, and
/// what the single-look analysis of them at the experiment's α decides and estimates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WithoutLoadedBlocks {
    pub blocks: u32,
    pub decision: Decision,
    /// The speed-up's point estimate on those blocks (baseline time / variant time).
    pub speedup: f64,
}

/// One kind of output check an experiment declares (`correctness.files`, `.values`,
/// `.expect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputCheckKind {
    Files,
    Values,
    Expect,
}

/// What a variant's output check compared: the kinds of check, how many of its runs had
/// their outputs compared with their block's baseline, out of its complete runs, and the
/// sentence the decision's reason ends with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputCheck {
    pub checked: Vec<OutputCheckKind>,
    /// The variant's runs whose outputs were compared with their block's baseline.
    pub runs: u32,
    /// The variant's complete runs.
    pub complete_runs: u32,
    /// In words, e.g. "output: the values matched by `E = (?P<value>…)` equal within rel
    /// 1e-06 in 19/19 runs".
    pub summary: String,
}

/// How the numbers were computed, written into every analysis so a report documents
/// its own method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Method {
    pub unit: String,
    pub estimate: String,
    pub interval: String,
    pub test: String,
    pub exact: String,
    pub approximation: String,
    pub multiplicity: String,
    pub sample_size: String,
    pub mde: String,
    pub first_epoch: String,
    pub app_impact: String,
    pub breakeven: String,
    pub trend: String,
    pub outliers: String,
}

impl Method {
    fn new(design: Design) -> Self {
        let (estimate, interval, test, exact, approximation, sample_size) =
            Method::design_texts(design);
        Method {
            unit: "the replicate: s[a,r] = mean of t[a,r,e] over the steady window (matched \
                   epoch numbers in both arms), compared on the log scale; epochs are never \
                   pooled as samples"
                .into(),
            estimate: estimate.into(),
            interval: interval.into(),
            test: test.into(),
            exact: exact.into(),
            approximation: approximation.into(),
            multiplicity: "Holm step-down over the variants that have p-values, separately for \
                           p_improvement and p_no_worthwhile"
                .into(),
            sample_size: format!(
                "{sample_size}; if even that, Holm-adjusted over the family, cannot reach α \
                 the result is inconclusive; fewer than {MIN_REPLICATES} replicates per arm \
                 is inconclusive"
            ),
            mde: format!(
                "normal theory: the true steady speed-up detected with {:.0}% power, \
                 exp(δ + (z_(1−α/m) + z_({MDE_POWER})) · SE · √(π/3)) − 1 with SE from the \
                 observed sample SD of d (paired) or the pooled SD of the log steady values \
                 (independent), m the Holm family size (Bonferroni, Holm's first step) and \
                 √(π/3) the rank test's efficiency loss under normality",
                MDE_POWER * 100.0
            ),
            first_epoch: "the same estimator and interval on f[a,r] = t[a,r,1]; change_pct = \
                          100·(exp(−HL) − 1), positive = slower (a one-time cost); not gated on"
                .into(),
            app_impact: "T[a,r] = f[a,r] + (E − 1)·s[a,r], E = production_epochs; App Impact = \
                         100·(1 − median_r T[var,r] / median_r T[base,r]), positive = faster; its \
                         interval: the same projection with the variant's steady values moved \
                         to each end of the steady speed-up's interval, \
                         s[var,r]·exp(HL − bound), epoch 1 as measured"
                .into(),
            breakeven: "from the medians of f and s: the first epoch N with \
                        f_var + (N−1)·s_var ≤ f_base + (N−1)·s_base that stays so"
                .into(),
            trend: format!(
                "Mann–Kendall on the per-epoch medians of each arm in the steady window \
                 (≥ 4 epochs, two-sided p < {TREND_ALPHA}); Sen's slope gives the drift; a \
                 drift across the window of at least min_effect_pct makes the result \
                 inconclusive"
            ),
            outliers: format!(
                "modified z-score 0.6745·(x − median)/MAD > {OUTLIER_Z} on each arm's steady \
                 and epoch-1 values; flagged, never removed"
            ),
        }
    }

    /// The texts of a figure of merit (one value per run): no epochs, App Impact the
    /// relative change of the value.
    fn per_run(mut self) -> Self {
        self.unit = "the replicate: one value per run v[a,r] (a figure of merit), \
                     compared on the log scale"
            .into();
        self.first_epoch = "one value per run: no first epoch".into();
        self.app_impact = "one value per run: App Impact = the relative change of the value, \
                           oriented by `better`, from the Hodges–Lehmann estimate: \
                           100·(exp(HL) − 1) for higher-is-better (a 20% higher rate is \
                           +20%), 100·(1 − exp(−HL)) for lower-is-better; its interval from \
                           the interval's ends"
            .into();
        self.breakeven = "one value per run: no break-even".into();
        self.trend = "one value per run: no per-epoch trend; replicate drift and outliers \
                      are checked on the values"
            .into();
        self
    }

    /// The estimator, interval, test, exact method, approximation and sample-size texts
    /// of `design`'s comparison.
    #[allow(clippy::type_complexity)]
    fn design_texts(
        design: Design,
    ) -> (
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
    ) {
        match design {
            Design::Paired => (
                "Hodges–Lehmann: median of the Walsh averages (d_i + d_j)/2, i ≤ j, of \
                 d_b = ln s[base,b] − ln s[var,b]; speed-up = exp(HL)",
                "distribution-free, level 1 − 2α: Walsh averages A_(k) and A_(M+1−k), \
                 M = n(n+1)/2, k − 1 = largest c with P(W+ ≤ c) ≤ α under the exact \
                 Wilcoxon signed-rank null distribution for n pairs",
                "one-sided Wilcoxon signed-rank on d − δ, δ = ln(1 + min_effect_pct/100): \
                 p_improvement for H1 median(d) > δ, p_no_worthwhile for H1 median(d) < δ",
                "exact Wilcoxon signed-rank null distribution (dynamic programming over rank \
                 sums) when there are no ties and no zeros; zeros are dropped (Wilcox); \
                 SciPy: wilcoxon(d - δ, method='exact')",
                "normal approximation with tie and continuity correction when ties or zeros \
                 occur; SciPy: wilcoxon(d - δ, method='asymptotic', correction=True)",
                "smallest reachable one-sided p-value 2^-n for n pairs",
            ),
            Design::Independent => (
                "Hodges–Lehmann shift: median of all x_i − y_j with x = ln s[base,·], \
                 y = ln s[var,·]; speed-up = exp(HL)",
                "distribution-free, level 1 − 2α: differences D_(k) and D_(M+1−k), M = m·n, \
                 k − 1 = largest c with P(U ≤ c) ≤ α under the exact Mann–Whitney null \
                 distribution",
                "one-sided Mann–Whitney U of x against y + δ, δ = ln(1 + min_effect_pct/100): \
                 p_improvement for H1 x > y + δ, p_no_worthwhile for H1 x < y + δ",
                "exact Mann–Whitney U null distribution when there are no ties (m + n ≤ 125); \
                 SciPy: mannwhitneyu(x, y + δ, method='exact')",
                "normal approximation with tie and continuity correction when ties occur; \
                 SciPy: mannwhitneyu(x, y + δ, method='asymptotic', use_continuity=True)",
                "smallest reachable one-sided p-value 1/C(m+n, m)",
            ),
        }
    }
}

/// The look of a sequential design this analysis was made at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequentialLook {
    pub look: u32,
    pub planned_looks: u32,
    /// Overall false-accept rate over all looks.
    pub overall_alpha: f64,
    /// Nominal one-sided level used at this look (= `Analysis::alpha`).
    pub nominal_alpha: f64,
    pub rule: String,
}

/// The result of [`analyze`]: the stable JSON interface of optgate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    pub baseline: String,
    pub design: Design,
    /// One-sided level the decisions used.
    pub alpha: f64,
    pub min_effect_pct: f64,
    /// E of the production projection (default: the number of epochs measured).
    pub production_epochs: u32,
    /// Highest epoch number measured.
    pub epochs_measured: u32,
    /// Steady window as configured, e.g. "2..".
    pub steady_window: String,
    pub better: Better,
    /// The primary metric is one value per run (`AnalysisConfig::per_run`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_run: bool,
    /// The primary metric's unit (`AnalysisConfig::unit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    pub method: Method,
    pub sequential: Option<SequentialLook>,
    /// Findings about the baseline arm and the experiment as a whole.
    pub warnings: Vec<String>,
    pub variants: Vec<VariantAnalysis>,
}

/// A run's values transformed so that lower is better ("time per unit").
struct Run<'a> {
    replicate: u32,
    block: Option<u32>,
    raw: &'a BTreeMap<u32, f64>,
    t: BTreeMap<u32, f64>,
    /// The load per CPU the run was measured at (`ArmData::load`), when known.
    load: Option<f64>,
}

struct Arm<'a> {
    data: &'a ArmData,
    runs: Vec<Run<'a>>,
}

impl Arm<'_> {
    fn name(&self) -> &str {
        &self.data.name
    }
}

/// Analyse `variants` against `baseline` (see docs/STATISTICS.md).
pub fn analyze(
    baseline: &ArmData,
    variants: &[ArmData],
    cfg: &AnalysisConfig,
) -> Result<Analysis, StatsError> {
    analyze_in_family(baseline, variants, cfg, 0)
}

/// [`analyze`] with `retired` more members in the Holm family than `variants` has: variants
/// that left a staged sequential design without an acceptance (rejected for futility, or
/// stopped because the budget could not decide them). Their hypotheses were not rejected,
/// so Holm keeps counting them (`optgate_stats::stopping`); accepted variants are not
/// counted (Holm's step-down removes a rejected hypothesis).
pub fn analyze_in_family(
    baseline: &ArmData,
    variants: &[ArmData],
    cfg: &AnalysisConfig,
    retired: usize,
) -> Result<Analysis, StatsError> {
    validate_config(cfg)?;
    let (base, vars) = prepare_arms(baseline, variants, cfg)?;
    let epochs_measured = last_epoch_measured(&base, &vars);
    let (production_epochs, window) = epochs_compared(cfg, epochs_measured);
    let delta = (1.0 + cfg.min_effect_pct / 100.0).ln();

    let mut top_warnings = Vec::new();
    // Baseline findings are reported once, at the top, over the baseline's own window.
    let base_window = window_epochs(&[&base], &window);
    let base_trend = arm_warnings(&base, &base_window, cfg, &mut top_warnings);
    let base_trend = (base_window, base_trend);

    let mut partial: Vec<Partial> = Vec::with_capacity(vars.len());
    for var in &vars {
        partial.push(compare_arms(
            &base,
            var,
            cfg,
            &window,
            &base_trend,
            delta,
            production_epochs,
        )?);
    }

    // Holm over the family of variants that have p-values.
    let p_imp: Vec<Option<f64>> = partial.iter().map(|p| p.p_improvement()).collect();
    let p_nw: Vec<Option<f64>> = partial.iter().map(|p| p.p_no_worthwhile()).collect();
    let adj_imp = holm_in_family(&p_imp, retired);
    let adj_nw = holm_in_family(&p_nw, retired);
    let family = (p_imp.iter().filter(|p| p.is_some()).count() + retired).max(1);

    let variants_out = partial
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            finish_variant(
                p,
                adj_imp[i],
                adj_nw[i],
                family,
                cfg,
                delta,
                production_epochs,
            )
        })
        .collect();

    Ok(Analysis {
        baseline: baseline.name.clone(),
        design: cfg.design,
        alpha: cfg.alpha,
        min_effect_pct: cfg.min_effect_pct,
        production_epochs,
        epochs_measured,
        steady_window: window.to_string(),
        better: cfg.better,
        per_run: cfg.per_run,
        unit: cfg.unit.clone(),
        method: if cfg.per_run {
            Method::new(cfg.design).per_run()
        } else {
            Method::new(cfg.design)
        },
        sequential: None,
        warnings: top_warnings,
        variants: variants_out,
    })
}

/// The production epochs and the matched window: one value per run is held as epoch 1,
/// that one "epoch" the whole comparison; otherwise as configured, the production epochs
/// defaulting to the epochs measured.
fn epochs_compared(cfg: &AnalysisConfig, epochs_measured: u32) -> (u32, EpochWindow) {
    if cfg.per_run {
        (1, EpochWindow::PER_RUN)
    } else {
        (
            cfg.production_epochs.unwrap_or(epochs_measured.max(1)),
            cfg.steady_epochs.unwrap_or_default(),
        )
    }
}

/// The arms prepared for analysis; arm names must be distinct.
fn prepare_arms<'a>(
    baseline: &'a ArmData,
    variants: &'a [ArmData],
    cfg: &AnalysisConfig,
) -> Result<(Arm<'a>, Vec<Arm<'a>>), StatsError> {
    let mut names = BTreeSet::new();
    for arm in std::iter::once(baseline).chain(variants) {
        if !names.insert(arm.name.as_str()) {
            return Err(StatsError::DuplicateArm(arm.name.clone()));
        }
    }
    let base = prepare(baseline, cfg.better)?;
    let vars: Vec<Arm> = variants
        .iter()
        .map(|v| prepare(v, cfg.better))
        .collect::<Result<_, _>>()?;
    Ok((base, vars))
}

/// The last epoch any run measured (0 with no epochs).
fn last_epoch_measured(base: &Arm, vars: &[Arm]) -> u32 {
    std::iter::once(base)
        .chain(vars)
        .flat_map(|a| a.runs.iter())
        .filter_map(|r| r.t.keys().next_back().copied())
        .max()
        .unwrap_or(0)
}

/// [`analyze`] at look `look` (1-based) of a sequential plan: decisions use the plan's
/// nominal level for that look, and the analysis records the plan.
pub fn analyze_sequential(
    baseline: &ArmData,
    variants: &[ArmData],
    cfg: &AnalysisConfig,
    plan: &SequentialPlan,
    look: u32,
) -> Result<Analysis, StatsError> {
    let planned_looks = plan.fractions.len() as u32;
    if look == 0 || look > planned_looks {
        return Err(StatsError::InvalidConfig(format!(
            "look {look} is outside the plan of {planned_looks} looks"
        )));
    }
    let nominal = plan.nominal(look);
    if nominal <= 0.0 {
        return Err(StatsError::InvalidConfig(format!(
            "look {look} of {planned_looks} spends no alpha"
        )));
    }
    let mut at_look = cfg.clone();
    at_look.alpha = nominal;
    let mut analysis = analyze(baseline, variants, &at_look)?;
    analysis.sequential = Some(SequentialLook {
        look,
        planned_looks,
        overall_alpha: plan.alpha,
        nominal_alpha: nominal,
        rule: plan.rule.clone(),
    });
    Ok(analysis)
}

fn validate_config(cfg: &AnalysisConfig) -> Result<(), StatsError> {
    if !(cfg.alpha > 0.0 && cfg.alpha < 0.5) {
        return Err(StatsError::InvalidConfig(format!(
            "alpha {} must be between 0 and 0.5 (it is one-sided)",
            cfg.alpha
        )));
    }
    if !cfg.min_effect_pct.is_finite() || cfg.min_effect_pct <= -100.0 {
        return Err(StatsError::InvalidConfig(format!(
            "min_effect_pct {} must be a finite number above -100",
            cfg.min_effect_pct
        )));
    }
    if cfg.production_epochs == Some(0) {
        return Err(StatsError::InvalidConfig(
            "production_epochs must be at least 1".into(),
        ));
    }
    if let Some(w) = cfg.steady_epochs {
        if w.start == 0 {
            return Err(StatsError::InvalidConfig(
                "steady window: epochs are 1-based".into(),
            ));
        }
        if w.end.is_some_and(|e| e < w.start) {
            return Err(StatsError::InvalidConfig(format!(
                "steady window {w}: the end is before the start"
            )));
        }
    }
    Ok(())
}

fn prepare(arm: &ArmData, better: Better) -> Result<Arm<'_>, StatsError> {
    let mut runs = Vec::with_capacity(arm.runs.len());
    let loads_known = arm.load.len() == arm.runs.len();
    for (i, run) in arm.runs.iter().enumerate() {
        let mut prepared = prepare_run(&arm.name, run, better)?;
        prepared.load = loads_known.then(|| arm.load[i]);
        runs.push(prepared);
    }
    for &v in &arm.system_metric {
        if !(v.is_finite() && v > 0.0) {
            return Err(StatsError::InvalidSystemMetric {
                arm: arm.name.clone(),
                value: v,
            });
        }
    }
    Ok(Arm { data: arm, runs })
}

fn prepare_run<'a>(arm: &str, run: &'a RunSamples, better: Better) -> Result<Run<'a>, StatsError> {
    if run.epochs.is_empty() {
        return Err(StatsError::EmptyRun {
            arm: arm.to_string(),
            replicate: run.replicate,
        });
    }
    let mut t = BTreeMap::new();
    for (&e, &v) in &run.epochs {
        if e == 0 {
            return Err(StatsError::EpochZero {
                arm: arm.to_string(),
                replicate: run.replicate,
            });
        }
        if !(v.is_finite() && v > 0.0) {
            return Err(StatsError::InvalidValue {
                arm: arm.to_string(),
                replicate: run.replicate,
                epoch: e,
                value: v,
            });
        }
        // For rates, analyse reciprocals so that everything below is "lower is better".
        let tv = match better {
            Better::Lower => v,
            Better::Higher => 1.0 / v,
        };
        t.insert(e, tv);
    }
    Ok(Run {
        replicate: run.replicate,
        block: run.block,
        raw: &run.epochs,
        t,
        load: None,
    })
}

/// Epochs in `window` that every run of every given arm has.
fn window_epochs(arms: &[&Arm], window: &EpochWindow) -> Vec<u32> {
    let mut runs = arms.iter().flat_map(|a| a.runs.iter());
    let Some(first) = runs.next() else {
        return Vec::new();
    };
    let mut common: Vec<u32> = first
        .t
        .keys()
        .copied()
        .filter(|e| window.contains(*e))
        .collect();
    for run in runs {
        common.retain(|e| run.t.contains_key(e));
    }
    common
}

/// Compact text of an epoch list: "2..5,7".
pub fn epochs_text(epochs: &[u32]) -> Option<String> {
    if epochs.is_empty() {
        return None;
    }
    let mut out = String::new();
    let mut i = 0;
    while i < epochs.len() {
        let mut j = i;
        while j + 1 < epochs.len() && epochs[j + 1] == epochs[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if j == i {
            let _ = write!(out, "{}", epochs[i]);
        } else {
            let _ = write!(out, "{}..{}", epochs[i], epochs[j]);
        }
        i = j + 1;
    }
    Some(out)
}

fn steady_value(run: &Run, epochs: &[u32]) -> f64 {
    epochs.iter().map(|e| run.t[e]).sum::<f64>() / epochs.len() as f64
}

/// A trend finding for one arm over a window.
#[derive(Clone)]
struct TrendFinding {
    message: String,
    material: bool,
}

fn trend_finding(arm: &Arm, epochs: &[u32], cfg: &AnalysisConfig) -> Option<TrendFinding> {
    let series: Vec<f64> = epochs
        .iter()
        .map(|e| median(&arm.runs.iter().map(|r| r.t[e]).collect::<Vec<_>>()))
        .collect();
    // The whole window's test and every later start's, in one O(n log n) pass.
    let suffixes = mann_kendall_suffixes(&series);
    let mk = suffixes.first().copied().flatten()?;
    if mk.p_value >= TREND_ALPHA {
        return None;
    }
    let level = median(&series);
    let slope = sen_slope(&series).unwrap_or(0.0);
    let drift_pct = 100.0 * slope.abs() * (series.len() - 1) as f64 / level;
    let direction = match (slope > 0.0, cfg.better) {
        (true, Better::Lower) | (false, Better::Higher) => "upward (slowing down)",
        _ => "downward (speeding up)",
    };
    let material = drift_pct >= cfg.min_effect_pct.max(0.0);
    // Suggest the earliest later start from which the rest of the window is trend-free.
    let suggestion = (1..series.len().saturating_sub(3))
        .find(|&i| suffixes[i].is_some_and(|t| t.p_value >= TREND_ALPHA))
        .map(|i| {
            let end = arm_window_end(epochs);
            format!("try --steady-epochs {}..{end}", epochs[i])
        })
        .unwrap_or_else(|| "measure more epochs and start the window later".to_string());
    let window = epochs_text(epochs).unwrap_or_default();
    Some(TrendFinding {
        message: format!(
            "{}: the steady window {window} is not steady yet: per-epoch medians trend {direction} \
             (Mann–Kendall p = {}, drift ≈ {drift_pct:.1}% across the window); {suggestion}",
            arm.name(),
            fmt_p(mk.p_value),
        ),
        material,
    })
}

fn arm_window_end(epochs: &[u32]) -> String {
    epochs.last().map(|e| e.to_string()).unwrap_or_default()
}

/// Outlier and trend warnings about one arm; returns the trend finding, if any.
/// The unit a warning quotes a raw value in: the metric's, seconds for a per-epoch time,
/// none otherwise.
fn value_unit(cfg: &AnalysisConfig) -> String {
    match (cfg.unit.as_deref(), cfg.better) {
        (Some(u), _) => format!(" {u}"),
        (None, _) if cfg.per_run => String::new(),
        (None, Better::Lower) => "s".to_string(),
        (None, Better::Higher) => String::new(),
    }
}

fn arm_warnings(
    arm: &Arm,
    epochs: &[u32],
    cfg: &AnalysisConfig,
    out: &mut Vec<String>,
) -> Option<TrendFinding> {
    if arm.runs.is_empty() {
        return None;
    }
    let trend = trend_finding(arm, epochs, cfg);
    if let Some(t) = &trend {
        out.push(t.message.clone());
    }
    let first_replicate = arm.runs.iter().map(|r| r.replicate).min();
    let unit = value_unit(cfg);
    let mut check = |label: &str, values: Vec<(u32, f64, f64)>| {
        let t: Vec<f64> = values.iter().map(|v| v.2).collect();
        let z = modified_z_scores(&t);
        for ((replicate, raw, _), z) in values.iter().zip(z) {
            if z.abs() <= OUTLIER_Z {
                continue;
            }
            let slow = z > 0.0;
            let what = if slow { "slower" } else { "faster" };
            let first = if slow && Some(*replicate) == first_replicate {
                " — the first replicate is slow (a cold first run: caches, page cache, JIT?)"
            } else {
                ""
            };
            out.push(format!(
                "{}: replicate {replicate} {label} {raw:.4}{unit} is an outlier, {what} than \
                 the rest (modified z = {z:.1}){first}; kept in the analysis",
                arm.name()
            ));
        }
    };
    if !epochs.is_empty() {
        check(
            if cfg.per_run { "value" } else { "steady mean" },
            arm.runs
                .iter()
                .map(|r| {
                    let raw = epochs.iter().map(|e| r.raw[e]).sum::<f64>() / epochs.len() as f64;
                    (r.replicate, raw, steady_value(r, epochs))
                })
                .collect(),
        );
    }
    // A figure of merit's one value is epoch 1: checked once, as the value, above.
    if !cfg.per_run && arm.runs.iter().all(|r| r.t.contains_key(&1)) {
        check(
            "epoch 1",
            arm.runs
                .iter()
                .map(|r| (r.replicate, r.raw[&1], r.t[&1]))
                .collect(),
        );
    }
    if !cfg.per_run {
        replicate_drift(arm, "epoch 1", |r| r.t.get(&1).copied(), cfg, out);
    }
    if !epochs.is_empty() {
        replicate_drift(
            arm,
            if cfg.per_run {
                "the value"
            } else {
                "the steady mean"
            },
            |r| Some(steady_value(r, epochs)),
            cfg,
            out,
        );
    }
    trend
}

/// Flags an arm whose replicates drift in recorded order (blocks run one after another,
/// so block order is the order they ran): Mann–Kendall on one value per replicate, shown
/// when two-sided p < [`TREND_ALPHA`] and the drift across the replicates (Sen's slope)
/// is at least the smallest effect worth having. Replicates are assumed exchangeable; a
/// drift names its likely cause instead.
fn replicate_drift(
    arm: &Arm,
    label: &str,
    value: impl Fn(&Run) -> Option<f64>,
    cfg: &AnalysisConfig,
    out: &mut Vec<String>,
) {
    let mut runs: Vec<&Run> = arm.runs.iter().collect();
    runs.sort_by_key(|r| (r.block.unwrap_or(r.replicate), r.replicate));
    let Some(series) = runs.iter().map(|r| value(r)).collect::<Option<Vec<f64>>>() else {
        return;
    };
    let Some(mk) = mann_kendall(&series) else {
        return;
    };
    if mk.p_value >= TREND_ALPHA {
        return;
    }
    let slope = sen_slope(&series).unwrap_or(0.0);
    let drift_pct = 100.0 * slope.abs() * (series.len() - 1) as f64 / median(&series);
    if drift_pct < cfg.min_effect_pct.max(0.0) || slope == 0.0 {
        return;
    }
    // Values here are "lower is better": a falling series is a speeding-up one.
    let direction = if slope < 0.0 { "faster" } else { "slower" };
    let cause = match load_follows(&runs, slope) {
        Some((from, to)) => format!(
            "the machine's measured load per CPU moved the same way over the same runs \
             ({from:.2} → {to:.2}; see the interference summary): other work on the machine, \
             not the app, is the likely cause"
        ),
        None if slope < 0.0 => "something that outlives a run is warming the later ones — \
             a compile cache (see `caches:`), the page cache of the inputs (see \
             `page_cache:`), a JIT or file cache"
            .to_string(),
        None => "something accumulates from run to run — heat (thermal throttling), a \
             filling disk or scratch space, state the app keeps between runs"
            .to_string(),
    };
    out.push(format!(
        "{}: {label} gets {direction} from replicate to replicate in the order they ran \
         (Mann–Kendall p = {}, ≈ {drift_pct:.1}% across {} replicates): {cause}",
        arm.name(),
        fmt_p(mk.p_value),
        series.len(),
    ));
}

/// When the runs' load per CPU (in the order they ran) trends the way the drift goes —
/// falling while the app gets faster, rising while it gets slower — at Mann–Kendall p <
/// [`TREND_ALPHA`]: the median load of the first and of the last third of the runs.
fn load_follows(runs: &[&Run], drift_slope: f64) -> Option<(f64, f64)> {
    let loads = runs.iter().map(|r| r.load).collect::<Option<Vec<f64>>>()?;
    let mk = mann_kendall(&loads)?;
    let load_slope = sen_slope(&loads).unwrap_or(0.0);
    if mk.p_value >= TREND_ALPHA || load_slope * drift_slope <= 0.0 {
        return None;
    }
    let third = (loads.len() / 3).max(1);
    let from = median(&loads[..third]);
    let to = median(&loads[loads.len() - third..]);
    Some((from, to))
}

/// Results of the comparison before Holm's adjustment and the decision.
struct Partial {
    name: String,
    not_applicable: Option<String>,
    failed: Option<String>,
    correctness_mismatch: Option<String>,
    n_baseline: usize,
    n_variant: usize,
    steady: Vec<u32>,
    steady_est: Option<ShiftEstimate>,
    p_imp: Option<RankTest>,
    p_nw: Option<RankTest>,
    sd: Option<f64>,
    min_p: Option<f64>,
    first: FirstEpoch,
    first_log: Option<ShiftEstimate>,
    app_impact_pct: Option<f64>,
    app_impact_ci: (Option<f64>, Option<f64>),
    /// Rule 5′'s bound (see `VariantAnalysis::app_impact_best`).
    app_impact_best: Option<f64>,
    system_impact_pct: Option<f64>,
    system_impact_ci: (Option<f64>, Option<f64>),
    breakeven: Option<u32>,
    per_epoch: Vec<EpochRow>,
    warnings: Vec<String>,
    trend_blocks: Vec<String>,
    guardrails: Vec<GuardrailResult>,
}

impl Partial {
    fn p_improvement(&self) -> Option<f64> {
        self.p_imp.map(|t| t.p_value)
    }
    fn p_no_worthwhile(&self) -> Option<f64> {
        self.p_nw.map(|t| t.p_value)
    }
}

/// Steady or first-epoch values of the two arms, aligned for the design.
struct Samples {
    base: Vec<f64>,
    var: Vec<f64>,
}

/// Index pairs (baseline run, variant run), and what was left out.
type PairedRuns = (Vec<(usize, usize)>, Option<String>);

/// How many left-out pairs a warning names; the rest are counted.
const MAX_DROPPED_LISTED: usize = 10;

/// Pairs runs of two arms for the paired design: by block when every run has one, else
/// by replicate number. Returns index pairs (baseline run, variant run) in key order, and
/// a warning naming the blocks left out because one arm has no complete run there.
fn pair_runs(base: &Arm, var: &Arm) -> Result<PairedRuns, StatsError> {
    let uses_blocks = |arm: &Arm| -> Result<bool, StatsError> {
        let with = arm.runs.iter().filter(|r| r.block.is_some()).count();
        if with != 0 && with != arm.runs.len() {
            let r = arm
                .runs
                .iter()
                .find(|r| r.block.is_none())
                .map_or(0, |r| r.replicate);
            return Err(StatsError::MixedBlocks {
                arm: arm.name().to_string(),
                replicate: r,
            });
        }
        Ok(with > 0)
    };
    let blocks = uses_blocks(base)? && uses_blocks(var)?;
    let key = |r: &Run| -> (u32, &'static str) {
        match (blocks, r.block) {
            (true, Some(b)) => (b, "block"),
            _ => (r.replicate, "replicate"),
        }
    };
    let index = |arm: &Arm| -> Result<BTreeMap<u32, usize>, StatsError> {
        let mut m = BTreeMap::new();
        for (i, r) in arm.runs.iter().enumerate() {
            let (k, kind) = key(r);
            if m.insert(k, i).is_some() {
                return Err(StatsError::DuplicatePairKey {
                    arm: arm.name().to_string(),
                    key: format!("{kind} {k}"),
                });
            }
        }
        Ok(m)
    };
    let bi = index(base)?;
    let vi = index(var)?;
    let kind = if blocks { "block" } else { "replicate" };
    // A key one arm lacks (its run failed, timed out or was never run) leaves the other's
    // run without a partner: that pair is dropped and said, not an error, so that one
    // failed run never stops the analysis of the others.
    let mut dropped = Vec::new();
    for (own, theirs, missing) in [(&bi, &vi, var), (&vi, &bi, base)] {
        for k in own.keys().filter(|k| !theirs.contains_key(k)) {
            dropped.push((*k, missing.name().to_string()));
        }
    }
    dropped.sort();
    let pairs = bi
        .iter()
        .filter_map(|(k, &b)| vi.get(k).map(|&v| (b, v)))
        .collect();
    let note = (!dropped.is_empty()).then(|| {
        let listed: Vec<String> = dropped
            .iter()
            .take(MAX_DROPPED_LISTED)
            .map(|(k, arm)| format!("{kind} {k} (no complete run of '{arm}')"))
            .collect();
        let more = dropped.len().saturating_sub(MAX_DROPPED_LISTED);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        format!(
            "paired design: {} {kind}(s) left out for lack of a complete pair: {}{more}",
            dropped.len(),
            listed.join(", ")
        )
    });
    Ok((pairs, note))
}

struct Compared {
    est: Option<ShiftEstimate>,
    p_imp: Option<RankTest>,
    p_nw: Option<RankTest>,
    sd: Option<f64>,
    min_p: Option<f64>,
}

/// The primary (or first-epoch) comparison on values that are "lower is better".
fn compare(design: Design, s: &Samples, delta: f64, alpha: f64, with_tests: bool) -> Compared {
    match design {
        Design::Paired => {
            let d: Vec<f64> = s
                .base
                .iter()
                .zip(&s.var)
                .map(|(b, v)| b.ln() - v.ln())
                .collect();
            let shifted: Vec<f64> = d.iter().map(|v| v - delta).collect();
            let n = d.len();
            Compared {
                est: hodges_lehmann_paired(&d, alpha),
                p_imp: (with_tests && n > 0)
                    .then(|| wilcoxon_signed_rank(&shifted, Alternative::Greater)),
                p_nw: (with_tests && n > 0)
                    .then(|| wilcoxon_signed_rank(&shifted, Alternative::Less)),
                sd: sample_sd(&d),
                min_p: (n > 0).then(|| min_p_paired(n)),
            }
        }
        Design::Independent => {
            let x: Vec<f64> = s.base.iter().map(|v| v.ln()).collect();
            let y: Vec<f64> = s.var.iter().map(|v| v.ln()).collect();
            let y_shift: Vec<f64> = y.iter().map(|v| v + delta).collect();
            let ok = with_tests && !x.is_empty() && !y.is_empty();
            Compared {
                est: hodges_lehmann_shift(&x, &y, alpha),
                p_imp: ok.then(|| mann_whitney_u(&x, &y_shift, Alternative::Greater)),
                p_nw: ok.then(|| mann_whitney_u(&x, &y_shift, Alternative::Less)),
                sd: pooled_sd(&x, &y),
                min_p: (!x.is_empty() && !y.is_empty()).then(|| min_p_unpaired(x.len(), y.len())),
            }
        }
    }
}

fn sample_sd(x: &[f64]) -> Option<f64> {
    if x.len() < 2 {
        return None;
    }
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let ss: f64 = x.iter().map(|v| (v - mean).powi(2)).sum();
    Some((ss / (n - 1.0)).sqrt())
}

fn pooled_sd(x: &[f64], y: &[f64]) -> Option<f64> {
    let (m, n) = (x.len(), y.len());
    if m + n < 3 || m == 0 || n == 0 {
        return None;
    }
    let ss = |v: &[f64]| {
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        v.iter().map(|a| (a - mean).powi(2)).sum::<f64>()
    };
    Some(((ss(x) + ss(y)) / (m + n - 2) as f64).sqrt())
}

fn compare_arms(
    base: &Arm,
    var: &Arm,
    cfg: &AnalysisConfig,
    window: &EpochWindow,
    base_trend: &(Vec<u32>, Option<TrendFinding>),
    delta: f64,
    production_epochs: u32,
) -> Result<Partial, StatsError> {
    let mut warnings = Vec::new();
    let mut partial = Partial::unanalysed(base, var, cfg);
    // Not applicable: no p-values, nothing else to compute.
    if partial.not_applicable.is_some() || var.runs.is_empty() || base.runs.is_empty() {
        return Ok(partial);
    }
    let runs = AlignedRuns::of(base, var, cfg.design, window, &mut warnings)?;
    partial.n_baseline = runs.base_idx.len();
    partial.n_variant = runs.var_idx.len();
    if !runs.steady.is_empty() {
        let c = compare(cfg.design, &runs.steady_samples(), delta, cfg.alpha, true);
        partial.steady_est = c.est;
        partial.p_imp = c.p_imp;
        partial.p_nw = c.p_nw;
        partial.sd = c.sd;
        partial.min_p = c.min_p;
    }
    partial.steady = runs.steady.clone();
    if cfg.per_run {
        // One value per run: no epoch 1 apart from it, no projection over epochs.
        per_run_impact(&mut partial, cfg.better);
    } else {
        if runs.has_first {
            runs.compare_first_epoch(cfg, &mut partial);
        } else {
            warnings.push("epoch 1 is missing in some runs: no first-epoch effect".to_string());
        }
        if !runs.steady.is_empty() {
            runs.project_production(production_epochs, &mut partial);
        }
    }
    compare_system_metric(&runs, cfg, &mut partial, &mut warnings);
    partial.guardrails = compare_guardrails(&runs, cfg, &mut warnings);
    // Stability: the variant's own findings, and trends of either arm that gate.
    let var_trend = arm_warnings(var, &runs.steady, cfg, &mut warnings);
    // The baseline's finding over its own window is reused when the windows agree.
    let base_finding = if base_trend.0 == runs.steady {
        base_trend.1.clone()
    } else {
        trend_finding(base, &runs.steady, cfg)
    };
    for t in [base_finding, var_trend].into_iter().flatten() {
        if t.material {
            partial.trend_blocks.push(t.message);
        }
    }
    partial.warnings = warnings;
    Ok(partial)
}

impl Partial {
    /// The variant before any comparison: its name, states and per-epoch table.
    fn unanalysed(base: &Arm, var: &Arm, cfg: &AnalysisConfig) -> Partial {
        Partial {
            name: var.name().to_string(),
            not_applicable: var.data.not_applicable.clone(),
            failed: var.data.failed.clone(),
            correctness_mismatch: var.data.correctness_mismatch.clone(),
            n_baseline: base.runs.len(),
            n_variant: var.runs.len(),
            steady: Vec::new(),
            steady_est: None,
            p_imp: None,
            p_nw: None,
            sd: None,
            min_p: None,
            first: FirstEpoch::default(),
            first_log: None,
            app_impact_pct: None,
            app_impact_ci: (None, None),
            app_impact_best: None,
            system_impact_pct: None,
            system_impact_ci: (None, None),
            breakeven: None,
            per_epoch: if cfg.per_run {
                Vec::new()
            } else {
                per_epoch_rows(base, var, cfg.better)
            },
            warnings: Vec::new(),
            trend_blocks: Vec::new(),
            guardrails: Vec::new(),
        }
    }
}

/// The runs of both arms that are compared, aligned for the design, and the epochs they
/// share.
struct AlignedRuns<'a> {
    base: &'a Arm<'a>,
    var: &'a Arm<'a>,
    base_idx: Vec<usize>,
    var_idx: Vec<usize>,
    /// The steady-window epochs every run has.
    steady: Vec<u32>,
    /// Whether every run has epoch 1.
    has_first: bool,
}

impl<'a> AlignedRuns<'a> {
    /// Pairs the runs (paired design; unpaired runs dropped with a warning) and finds the
    /// steady epochs (those missing in some run left out with a warning).
    fn of(
        base: &'a Arm<'a>,
        var: &'a Arm<'a>,
        design: Design,
        window: &EpochWindow,
        warnings: &mut Vec<String>,
    ) -> Result<AlignedRuns<'a>, StatsError> {
        let (base_idx, var_idx): (Vec<usize>, Vec<usize>) = match design {
            Design::Paired => {
                let (pairs, dropped) = pair_runs(base, var)?;
                warnings.extend(dropped);
                pairs.into_iter().unzip()
            }
            Design::Independent => (
                (0..base.runs.len()).collect(),
                (0..var.runs.len()).collect(),
            ),
        };
        let steady = window_epochs(&[base, var], window);
        let wanted: BTreeSet<u32> = base
            .runs
            .iter()
            .chain(&var.runs)
            .flat_map(|r| r.t.keys().copied())
            .filter(|e| window.contains(*e))
            .collect();
        // `steady` is sorted (a run's epochs in order, filtered): a binary search, not a scan.
        let left_out: Vec<u32> = wanted
            .into_iter()
            .filter(|e| steady.binary_search(e).is_err())
            .collect();
        if !left_out.is_empty() {
            warnings.push(format!(
                "epochs {} of the steady window are missing in some runs and were left out",
                epochs_text(&left_out).unwrap_or_default()
            ));
        }
        let has_first = base
            .runs
            .iter()
            .chain(&var.runs)
            .all(|r| r.t.contains_key(&1));
        Ok(AlignedRuns {
            base,
            var,
            base_idx,
            var_idx,
            steady,
            has_first,
        })
    }

    /// Epoch 1 of the aligned runs of `arm`.
    fn first(&self, arm: &Arm, idx: &[usize]) -> Vec<f64> {
        idx.iter().map(|&i| arm.runs[i].t[&1]).collect()
    }

    /// The steady value of the aligned runs of `arm`.
    fn steady_of(&self, arm: &Arm, idx: &[usize]) -> Vec<f64> {
        idx.iter()
            .map(|&i| steady_value(&arm.runs[i], &self.steady))
            .collect()
    }

    fn steady_samples(&self) -> Samples {
        Samples {
            base: self.steady_of(self.base, &self.base_idx),
            var: self.steady_of(self.var, &self.var_idx),
        }
    }

    /// The first-epoch effect: medians in seconds and the change with its interval.
    fn compare_first_epoch(&self, cfg: &AnalysisConfig, partial: &mut Partial) {
        let (base, var) = (self.base, self.var);
        let f = Samples {
            base: self.first(base, &self.base_idx),
            var: self.first(var, &self.var_idx),
        };
        let c = compare(cfg.design, &f, 0.0, cfg.alpha, false);
        let raw_median = |arm: &Arm, idx: &[usize]| {
            median(&idx.iter().map(|&i| arm.runs[i].raw[&1]).collect::<Vec<_>>())
        };
        let change = |log_speedup: f64| 100.0 * ((-log_speedup).exp() - 1.0);
        partial.first = FirstEpoch {
            baseline_s: Some(raw_median(base, &self.base_idx)),
            variant_s: Some(raw_median(var, &self.var_idx)),
            change_pct: c.est.map(|e| change(e.estimate)),
            change_ci_low_pct: c.est.and_then(|e| e.ci_high).map(change),
            change_ci_high_pct: c.est.and_then(|e| e.ci_low).map(change),
        };
        partial.first_log = c.est;
    }

    /// Production projection T = f + (E − 1)·s per replicate (E·s without epoch 1): the
    /// application impact, its interval, rule 5′'s bound and the break-even epoch.
    fn project_production(&self, production_epochs: u32, partial: &mut Partial) {
        let (base, var, has_first) = (self.base, self.var, self.has_first);
        let (base_idx, var_idx) = (&self.base_idx, &self.var_idx);
        let e = production_epochs as f64;
        // `scale` multiplies the steady values (1 for the point estimate).
        let t = |arm: &Arm, idx: &[usize], scale: f64| -> Vec<f64> {
            idx.iter()
                .map(|&i| {
                    let r = &arm.runs[i];
                    let s = steady_value(r, &self.steady) * scale;
                    match r.t.get(&1) {
                        Some(f) if has_first => f + (e - 1.0) * s,
                        _ => e * s,
                    }
                })
                .collect()
        };
        let tb = median(&t(base, base_idx, 1.0));
        let app = |scale: f64| 100.0 * (1.0 - median(&t(var, var_idx, scale)) / tb);
        partial.app_impact_pct = Some(app(1.0));
        // The interval: the variant's steady values as if its speed-up were each end of
        // the steady interval (HL and its bounds are log speed-ups).
        if let Some(est) = partial.steady_est {
            let at = |bound: Option<f64>| bound.map(|b| app((est.estimate - b).exp()));
            partial.app_impact_ci = (at(est.ci_low), at(est.ci_high));
            partial.app_impact_best = self.best_app_impact(e, est, partial.first_log);
        }
        if has_first {
            let fb = median(&self.first(base, base_idx));
            let fv = median(&self.first(var, var_idx));
            let sb = median(&self.steady_of(base, base_idx));
            let sv = median(&self.steady_of(var, var_idx));
            partial.breakeven = breakeven(fv - fb, sb - sv);
        }
    }

    /// Rule 5′'s bound: the projection of the baseline's medians with the variant at the
    /// favourable ends of the paired intervals — the steady speed-up's and (when measured)
    /// the epoch-1 speed-up's — so that it moves with the paired comparisons only, not
    /// with the arms' unpaired medians. Unbounded when either end is.
    fn best_app_impact(
        &self,
        e: f64,
        est: ShiftEstimate,
        first_log: Option<ShiftEstimate>,
    ) -> Option<f64> {
        let has_first = self.has_first;
        let sb = median(&self.steady_of(self.base, &self.base_idx));
        let (fb, first_high) = if has_first {
            (
                median(&self.first(self.base, &self.base_idx)),
                first_log.and_then(|f| f.ci_high),
            )
        } else {
            (0.0, Some(0.0))
        };
        let weight_f = if has_first { 1.0 } else { 0.0 };
        let steady_epochs = if has_first { e - 1.0 } else { e };
        est.ci_high.zip(first_high).map(|(hs, hf)| {
            let tb = weight_f * fb + steady_epochs * sb;
            let tv = weight_f * fb * (-hf).exp() + steady_epochs * sb * (-hs).exp();
            100.0 * (1.0 - tv / tb)
        })
    }
}

/// System metric: one value per run, compared as the speed-up is (same pairs).
fn compare_system_metric(
    runs: &AlignedRuns,
    cfg: &AnalysisConfig,
    partial: &mut Partial,
    warnings: &mut Vec<String>,
) {
    let (base, var) = (runs.base, runs.var);
    match system_samples(base, var, &runs.base_idx, &runs.var_idx) {
        Some(samples) => {
            let c = compare(cfg.design, &samples, 0.0, cfg.alpha, false);
            let (pct, ci) = system_impact(c.est, cfg.system_better);
            partial.system_impact_pct = pct;
            partial.system_impact_ci = ci;
        }
        None if !base.data.system_metric.is_empty() || !var.data.system_metric.is_empty() => {
            warnings.push(
                "the system metric was not measured for every run of both arms: no System Impact"
                    .to_string(),
            );
        }
        None => {}
    }
}

/// A figure of merit's App Impact: the relative change of the value, oriented by `better`,
/// from the steady (= the value's) estimate; its interval from the interval's ends; rule
/// 5′'s bound the interval's favourable end.
fn per_run_impact(partial: &mut Partial, better: Better) {
    let Some(est) = partial.steady_est else {
        return;
    };
    let (pct, ci) = oriented_change(&est, better);
    partial.app_impact_pct = Some(pct);
    partial.app_impact_ci = ci;
    partial.app_impact_best = ci.1;
}

/// Each guardrail on the aligned runs (the primary comparison's pairs), at the analysis'
/// level; a warning for one not measured in every run of both arms.
fn compare_guardrails(
    runs: &AlignedRuns,
    cfg: &AnalysisConfig,
    warnings: &mut Vec<String>,
) -> Vec<GuardrailResult> {
    let per_run = |arm: &Arm, idx: &[usize], name: &str| -> Option<Vec<f64>> {
        let values = arm.data.guardrails.get(name)?;
        (values.len() == arm.runs.len() && !idx.is_empty())
            .then(|| idx.iter().map(|&i| values[i]).collect())
    };
    cfg.guardrails
        .iter()
        .map(|g| {
            let base = per_run(runs.base, &runs.base_idx, &g.name);
            let var = per_run(runs.var, &runs.var_idx, &g.name);
            let values = base.zip(var);
            if values.is_none() {
                warnings.push(format!(
                    "guardrail {}: not measured for every run of both arms: no estimate",
                    g.name
                ));
            }
            let values = values.as_ref().map(|(b, v)| (b.as_slice(), v.as_slice()));
            compare_guardrail(g, cfg.design, values, cfg.alpha)
        })
        .collect()
}

/// First epoch N ≥ 1 with `(N − 1)·saving ≥ extra` that holds for every later N too.
/// The system metric's values of the aligned runs, when both arms have one per run.
fn system_samples(base: &Arm, var: &Arm, base_idx: &[usize], var_idx: &[usize]) -> Option<Samples> {
    let per_run = |arm: &Arm, idx: &[usize]| -> Option<Vec<f64>> {
        let values = &arm.data.system_metric;
        (!values.is_empty() && values.len() == arm.runs.len())
            .then(|| idx.iter().map(|&i| values[i]).collect())
    };
    let samples = Samples {
        base: per_run(base, base_idx)?,
        var: per_run(var, var_idx)?,
    };
    (!samples.base.is_empty() && !samples.var.is_empty()).then_some(samples)
}

/// System Impact in percent, positive = better, and its interval, from the estimate of
/// `g = ln(baseline) − ln(variant)`: for a resource (lower is better) `100·(1 − e^(−g))`,
/// the share of the baseline's use saved; for a rate (higher is better) `100·(e^(−g) − 1)`,
/// the gain. Both are monotone in `g`, so the interval's ends map to the ends.
fn system_impact(
    est: Option<ShiftEstimate>,
    better: Better,
) -> (Option<f64>, (Option<f64>, Option<f64>)) {
    let Some(est) = est else {
        return (None, (None, None));
    };
    let pct = |g: f64| match better {
        Better::Lower => 100.0 * (1.0 - (-g).exp()),
        Better::Higher => 100.0 * ((-g).exp() - 1.0),
    };
    let (lo, hi) = (est.ci_low.map(pct), est.ci_high.map(pct));
    let ci = match better {
        Better::Lower => (lo, hi),
        Better::Higher => (hi, lo),
    };
    (Some(pct(est.estimate)), ci)
}

fn breakeven(extra: f64, saving: f64) -> Option<u32> {
    if extra <= 0.0 && saving >= 0.0 {
        return Some(1);
    }
    if extra > 0.0 && saving > 0.0 {
        let n = 1.0 + (extra / saving).ceil();
        return (n <= u32::MAX as f64).then_some(n as u32);
    }
    None
}

fn per_epoch_rows(base: &Arm, var: &Arm, better: Better) -> Vec<EpochRow> {
    let epochs: BTreeSet<u32> = base
        .runs
        .iter()
        .chain(&var.runs)
        .flat_map(|r| r.raw.keys().copied())
        .collect();
    let med = |arm: &Arm, e: u32| -> Option<f64> {
        let v: Vec<f64> = arm
            .runs
            .iter()
            .filter_map(|r| r.raw.get(&e).copied())
            .collect();
        (!v.is_empty()).then(|| median(&v))
    };
    epochs
        .into_iter()
        .map(|e| {
            let (b, v) = (med(base, e), med(var, e));
            let ratio = match (b, v) {
                (Some(b), Some(v)) => Some(match better {
                    Better::Lower => b / v,
                    Better::Higher => v / b,
                }),
                _ => None,
            };
            EpochRow {
                epoch: e,
                baseline_median_s: b,
                variant_median_s: v,
                ratio,
            }
        })
        .collect()
}

/// Holm-adjusted p-values in, decision out.
fn finish_variant(
    p: Partial,
    adj_imp: Option<f64>,
    adj_nw: Option<f64>,
    family: usize,
    cfg: &AnalysisConfig,
    delta: f64,
    production_epochs: u32,
) -> VariantAnalysis {
    let speedup = SpeedUp {
        estimate: p.steady_est.map(|e| e.estimate.exp()),
        ci_low: p.steady_est.and_then(|e| e.ci_low).map(f64::exp),
        ci_high: p.steady_est.and_then(|e| e.ci_high).map(f64::exp),
    };
    let min_p_adj = p.min_p.map(|m| (m * family as f64).min(1.0));

    let (mde_pct, replicates_to_decide) = planning_figures(&p, cfg, family, delta);
    let app = p.app_impact_pct;
    let weighted_score = app.map(|a| 0.5 * a + 0.5 * p.system_impact_pct.unwrap_or(0.0));

    let (decision, reason) = decide(&DecisionInput {
        p: &p,
        adj_imp,
        adj_nw,
        family,
        min_p_adj,
        replicates_to_decide,
        mde_pct,
        speedup: &speedup,
        cfg,
        production_epochs,
    });
    let (decision, reason) = guardrail_veto(decision, reason, &p.guardrails, cfg);
    let not_applicable = matches!(decision, Decision::NotApplicable | Decision::Failed);
    let p_method = (!not_applicable)
        .then(|| p.p_imp.map(|t| p_method_text(cfg.design, t.method)))
        .flatten();

    VariantAnalysis {
        name: p.name,
        decision,
        reason,
        n_baseline: p.n_baseline,
        n_variant: p.n_variant,
        steady_epochs: p.steady.clone(),
        speedup,
        p_improvement: p.p_imp.map(|t| t.p_value),
        p_improvement_adjusted: adj_imp,
        p_no_worthwhile: p.p_nw.map(|t| t.p_value),
        p_no_worthwhile_adjusted: adj_nw,
        p_method,
        min_achievable_p: p.min_p,
        min_achievable_p_adjusted: min_p_adj,
        mde_pct,
        log_sd: p.sd,
        replicates_to_decide,
        first_epoch: p.first,
        app_impact_pct: app,
        app_impact_ci_low: p.app_impact_ci.0,
        app_impact_ci_high: p.app_impact_ci.1,
        app_impact_best: p.app_impact_best,
        system_impact_pct: p.system_impact_pct,
        system_impact_ci_low: p.system_impact_ci.0,
        system_impact_ci_high: p.system_impact_ci.1,
        weighted_score,
        breakeven_epoch: p.breakeven,
        correctness_mismatch: p.correctness_mismatch,
        per_epoch: p.per_epoch,
        warnings: p.warnings,
        guardrails: p.guardrails,
        output_check: None,
        output_not_checked: false,
        without_loaded_blocks: None,
        loaded_blocks: 0,
    }
}

/// The guardrail veto: the one place an acceptance meets the guardrails (every look of
/// every rule is made by this analysis). It only turns an accept into a reject.
fn guardrail_veto(
    decision: Decision,
    reason: String,
    guardrails: &[GuardrailResult],
    cfg: &AnalysisConfig,
) -> (Decision, String) {
    if decision == Decision::Accept
        && let Some(why) = veto_reason(guardrails, 100.0 * (1.0 - 2.0 * cfg.alpha))
    {
        return (
            Decision::Reject,
            format!("{why}; the primary metric alone: {reason}"),
        );
    }
    (decision, reason)
}

/// Normal-theory planning figures: the minimum detectable effect now (percent speed-up)
/// and the replicates per arm that would likely decide, when realistic.
fn planning_figures(
    p: &Partial,
    cfg: &AnalysisConfig,
    family: usize,
    delta: f64,
) -> (Option<f64>, Option<u32>) {
    let alpha = cfg.alpha;
    let n = p.n_baseline.min(p.n_variant);
    let z = normal::quantile(1.0 - alpha / family as f64) + normal::quantile(MDE_POWER);
    let are = std::f64::consts::PI / 3.0;
    let se_unit = match cfg.design {
        Design::Paired => p.sd.map(|sd| sd / (n.max(1) as f64).sqrt()),
        Design::Independent => p.sd.map(|sd| {
            sd * (1.0 / p.n_baseline.max(1) as f64 + 1.0 / p.n_variant.max(1) as f64).sqrt()
        }),
    };
    let mde_pct = se_unit.map(|se| 100.0 * ((delta + z * se * are.sqrt()).exp() - 1.0));
    let replicates_to_decide = match (p.sd, p.steady_est) {
        (Some(sd), Some(est)) => {
            let gap = (est.estimate - delta).abs();
            let factor = match cfg.design {
                Design::Paired => 1.0,
                Design::Independent => 2.0,
            };
            let needed = if gap > 0.0 {
                (are * factor * (z * sd / gap).powi(2)).ceil()
            } else {
                f64::INFINITY
            };
            let floor = min_n_for_alpha(cfg.design, alpha / family as f64) as f64;
            let needed = needed
                .max(floor)
                .max(MIN_REPLICATES as f64)
                .max(n as f64 + 1.0);
            (needed <= MAX_SUGGESTED_REPLICATES).then_some(needed as u32)
        }
        _ => None,
    };
    (mde_pct, replicates_to_decide)
}

/// Smallest n (pairs, or per arm) whose exact test can reach `level`.
fn min_n_for_alpha(design: Design, level: f64) -> usize {
    (1..=200)
        .find(|&n| match design {
            Design::Paired => min_p_paired(n) < level,
            Design::Independent => min_p_unpaired(n, n) < level,
        })
        .unwrap_or(200)
}

fn p_method_text(design: Design, m: PMethod) -> String {
    match (design, m) {
        (Design::Paired, PMethod::Exact) => "exact Wilcoxon signed-rank".into(),
        (Design::Paired, PMethod::Normal) => {
            "Wilcoxon signed-rank, normal approximation with tie+continuity correction (ties or zeros)".into()
        }
        (Design::Independent, PMethod::Exact) => "exact Mann–Whitney U".into(),
        (Design::Independent, PMethod::Normal) => {
            "Mann–Whitney U, normal approximation with tie+continuity correction".into()
        }
        (_, PMethod::Degenerate) => "no non-zero differences: p = 1".into(),
    }
}

/// Decision rules 1–6 of docs/STATISTICS.md, in order.
#[allow(clippy::too_many_arguments)]
/// What one variant's decision is made from.
struct DecisionInput<'a> {
    p: &'a Partial,
    /// Holm-adjusted p-values of the improvement and no-worthwhile-effect tests.
    adj_imp: Option<f64>,
    adj_nw: Option<f64>,
    /// Variants in the Holm family.
    family: usize,
    /// The smallest reachable p-value after Holm.
    min_p_adj: Option<f64>,
    replicates_to_decide: Option<u32>,
    mde_pct: Option<f64>,
    speedup: &'a SpeedUp,
    cfg: &'a AnalysisConfig,
    production_epochs: u32,
}

fn decide(input: &DecisionInput) -> (Decision, String) {
    let (p, cfg, alpha) = (input.p, input.cfg, input.cfg.alpha);
    if let Some(d) = decide_before_tests(input) {
        return d;
    }
    let est = describe_speedup(input.speedup, alpha);
    let one_time = one_time_text(p, cfg.min_effect_pct);
    if let Some(mp) = input.min_p_adj
        && mp >= alpha
    {
        return futile(input, &est, &one_time).unwrap_or_else(|| unreachable_alpha(input, mp));
    }
    // 4. Improvement.
    if let Some(pi) = input.adj_imp
        && pi < alpha
    {
        return improvement(input, pi, &est, one_time);
    }
    // 5. Cannot reach the minimum worthwhile effect.
    if let Some(pn) = input.adj_nw
        && pn < alpha
    {
        let regression = input.speedup.ci_high.is_some_and(|h| h < 1.0);
        let mut reason = format!(
            "steady-state speed-up {est} cannot reach the {}% worth having (p_adj = {} < {})",
            cfg.min_effect_pct,
            fmt_p(pn),
            fmt_p(alpha)
        );
        if regression {
            reason.push_str("; a regression: the whole interval is below 1");
        }
        if let Some(t) = one_time {
            let _ = write!(reason, "; {t}, {}", breakeven_text(p.breakeven));
        }
        return (Decision::Reject, reason);
    }
    if let Some(d) = futile(input, &est, &one_time) {
        return d;
    }
    inconclusive(input, &est, one_time)
}

/// Rules 1–3: correctness, not applicable, failed, too few replicates, no steady window,
/// a trend that gates. None when the tests decide.
fn decide_before_tests(input: &DecisionInput) -> Option<(Decision, String)> {
    let p = input.p;
    // 1. Correctness.
    if let Some(diff) = &p.correctness_mismatch {
        return Some((
            Decision::Reject,
            format!(
                "outputs differ from the baseline ({diff}): the variant changes the computation"
            ),
        ));
    }
    // 2. Not applicable.
    if let Some(why) = &p.not_applicable {
        return Some((Decision::NotApplicable, why.clone()));
    }
    // 2′. The variant's app failed in every run (and none completed).
    if let Some(why) = &p.failed
        && p.n_variant == 0
    {
        return Some((
            Decision::Failed,
            format!("every run of the variant failed: {why}"),
        ));
    }
    // 3. Not enough data, or no steady window.
    let n = p.n_baseline.min(p.n_variant);
    if n < MIN_REPLICATES {
        return Some((
            Decision::Inconclusive,
            format!(
                "only {n} complete replicate{} per arm (baseline {}, {} {}); at least \
                 {MIN_REPLICATES} are needed",
                if n == 1 { "" } else { "s" },
                p.n_baseline,
                p.name,
                p.n_variant
            ),
        ));
    }
    if p.steady.is_empty() {
        return Some((
            Decision::Inconclusive,
            format!(
                "no steady window: no epoch of {} was measured in every run (with one epoch \
                 per run, set the steady window explicitly, e.g. --steady-epochs 1)",
                input.cfg.steady_epochs.unwrap_or_default()
            ),
        ));
    }
    p.trend_blocks
        .first()
        .map(|msg| (Decision::Inconclusive, msg.clone()))
}

/// Rule 5′: acceptance is impossible: even with the steady speed-up at the upper end of its
/// interval and epoch 1 at the favourable end of its own, the projected App Impact is
/// not positive, so rule 4 cannot accept. Applies where the result would otherwise be
/// inconclusive (3d, 6); it only turns "inconclusive" into "reject", so it cannot raise
/// the false-accept rate.
fn futile(
    input: &DecisionInput,
    est: &str,
    one_time: &Option<String>,
) -> Option<(Decision, String)> {
    let p = input.p;
    let best = p.app_impact_best?;
    if best > 0.0 {
        return None;
    }
    Some((
        Decision::Reject,
        format!(
            "acceptance is impossible: App Impact {} over {} epochs \
             (interval {} to {}) stays ≤ 0 even with the steady speed-up at the upper \
             end of {est} and epoch 1 at the favourable end of its interval ({}){}",
            p.app_impact_pct.map_or("n/a".to_string(), fmt_signed_pct),
            input.production_epochs,
            p.app_impact_ci.0.map_or("n/a".to_string(), fmt_signed_pct),
            p.app_impact_ci.1.map_or("n/a".to_string(), fmt_signed_pct),
            fmt_signed_pct(best),
            one_time
                .as_ref()
                .map(|t| format!("; {t}, {}", breakeven_text(p.breakeven)))
                .unwrap_or_default()
        ),
    ))
}

/// Rule 3d: no test can decide: the smallest reachable p-value (`mp` after Holm) is not
/// below α.
fn unreachable_alpha(input: &DecisionInput, mp: f64) -> (Decision, String) {
    let (p, family) = (input.p, input.family);
    let n = p.n_baseline.min(p.n_variant);
    let more = input
        .replicates_to_decide
        .map(|r| format!("; about {r} replicates per arm would be needed to decide"))
        .unwrap_or_default();
    (
        Decision::Inconclusive,
        format!(
            "with n = {n} the smallest reachable p-value is {}{} — not below α = {}, so \
             no test can decide{more}",
            fmt_p(p.min_p.unwrap_or(1.0)),
            if family > 1 {
                format!(" ({} after Holm over {family} variants)", fmt_p(mp))
            } else {
                String::new()
            },
            fmt_p(input.cfg.alpha)
        ),
    )
}

/// Rule 4: the improvement test is significant (`pi` adjusted): accept, unless the one-time
/// cost is not repaid within the production epochs.
fn improvement(
    input: &DecisionInput,
    pi: f64,
    est: &str,
    one_time: Option<String>,
) -> (Decision, String) {
    let (p, production_epochs) = (input.p, input.production_epochs);
    match p.app_impact_pct {
        Some(app) if app <= 0.0 => (
            Decision::Reject,
            format!(
                "the steady-state gain is real ({est}, p_adj = {}) but the one-time cost is \
                 not repaid within {production_epochs} production epochs: App Impact \
                 {}{}; {}",
                fmt_p(pi),
                fmt_signed_pct(app),
                one_time.map(|t| format!(", {t}")).unwrap_or_default(),
                breakeven_text(p.breakeven)
            ),
        ),
        app => (
            Decision::Accept,
            format!(
                "steady-state speed-up {est} beats the {}% worth having (p_adj = {} < {}){}",
                input.cfg.min_effect_pct,
                fmt_p(pi),
                fmt_p(input.cfg.alpha),
                app.map(|a| if input.cfg.per_run {
                    format!("; App Impact {}", fmt_signed_pct(a))
                } else {
                    format!(
                        "; App Impact {} over {production_epochs} epochs",
                        fmt_signed_pct(a)
                    )
                })
                .unwrap_or_default()
            ),
        ),
    }
}

/// Rule 6, inconclusive: neither test is significant; how many replicates would decide.
fn inconclusive(input: &DecisionInput, est: &str, one_time: Option<String>) -> (Decision, String) {
    let (p, production_epochs) = (input.p, input.production_epochs);
    let n = p.n_baseline.min(p.n_variant);
    let more = match input.replicates_to_decide {
        // Worded as the simulation found it calibrated (docs/STATISTICS.md §8): right for
        // clear effects, optimistic near min_effect_pct.
        Some(r) => format!(
            "about {r} replicates per arm would decide it with 80% probability if the true effect is today's estimate (now {n}; a planning figure, calibrated for clear effects only)"
        ),
        None => "no realistic number of replicates would decide it".to_string(),
    };
    (
        Decision::Inconclusive,
        format!(
            "neither test is significant at α = {} ({est}; p_improvement_adj = {}, \
             p_no_worthwhile_adj = {}); {more}{}",
            fmt_p(input.cfg.alpha),
            input.adj_imp.map_or("n/a".into(), fmt_p),
            input.adj_nw.map_or("n/a".into(), fmt_p),
            input
                .mde_pct
                .map(|m| format!("; detectable now: ≈ {m:.1}% speed-up"))
                .unwrap_or_default()
        ) + &one_time
            // Undecided on the steady state, but the one-time cost is known: say it, so a
            // large first-epoch cost is never hidden behind "inconclusive".
            .map(|t| {
                format!(
                    "; meanwhile {t}, {} (App Impact {} over {production_epochs} epochs)",
                    breakeven_text(p.breakeven),
                    p.app_impact_pct.map_or("n/a".to_string(), fmt_signed_pct)
                )
            })
            .unwrap_or_default(),
    )
}

fn describe_speedup(s: &SpeedUp, alpha: f64) -> String {
    let level = 100.0 * (1.0 - 2.0 * alpha);
    match (s.estimate, s.ci_low, s.ci_high) {
        (Some(e), Some(l), Some(h)) => {
            format!("{e:.3}× ({level:.0}% CI {l:.3}–{h:.3})")
        }
        (Some(e), _, _) => format!("{e:.3}× (no finite {level:.0}% CI at this n)"),
        _ => "no estimate".to_string(),
    }
}

/// "one-time epoch-1 cost +1200.0% (+12.000 s)" when the first epoch got materially slower.
fn one_time_text(p: &Partial, min_effect_pct: f64) -> Option<String> {
    let change = p.first.change_pct?;
    if change <= min_effect_pct.max(0.0) {
        return None;
    }
    let secs = match (p.first.baseline_s, p.first.variant_s) {
        (Some(b), Some(v)) => format!(" ({:+.3} s by medians)", v - b),
        _ => String::new(),
    };
    Some(format!(
        "one-time epoch-1 cost {}{secs}",
        fmt_signed_pct(change)
    ))
}

fn breakeven_text(b: Option<u32>) -> String {
    match b {
        Some(1) => "never behind the baseline (break-even at epoch 1)".to_string(),
        Some(n) => format!("break-even at epoch {n}"),
        None => "never breaks even (no steady-state saving repays the one-time cost)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::breakeven;

    #[test]
    fn breakeven_edges() {
        // Never behind: no extra cost and no steady loss, at every boundary.
        assert_eq!(breakeven(-1.0, 1.0), Some(1));
        assert_eq!(breakeven(0.0, 1.0), Some(1));
        assert_eq!(breakeven(-1.0, 0.0), Some(1));
        assert_eq!(breakeven(0.0, 0.0), Some(1));
        // (N − 1)·saving ≥ extra: equality counts, one epoch later otherwise.
        assert_eq!(breakeven(10.0, 1.0), Some(11));
        assert_eq!(breakeven(10.5, 1.0), Some(12));
        assert_eq!(breakeven(9.5, 1.0), Some(11));
        assert_eq!(breakeven(1.0, 4.0), Some(2));
        // A cost that nothing repays, or a lead that a steady loss eats up.
        assert_eq!(breakeven(1.0, 0.0), None);
        assert_eq!(breakeven(1.0, -1.0), None);
        assert_eq!(breakeven(-1.0, -1.0), None);
        assert_eq!(breakeven(1.0, 1e-12), None);
    }
}
