//! The public result types of an analysis (`Analysis`, `VariantAnalysis`, `Decision`,
//! `Method` and their parts: the stable JSON interface) and the fixed constants of the rules.

use serde::{Deserialize, Serialize};

use crate::guardrail::GuardrailResult;
use crate::model::{Better, Design};
use crate::trend::OUTLIER_Z;

/// Replicates per arm below which no decision other than inconclusive is made.
pub const MIN_REPLICATES: usize = 5;
/// Level of the Mann–Kendall stability check (fixed: it is a diagnostic, not the gate).
pub const TREND_ALPHA: f64 = 0.05;
/// Power the minimum detectable effect and the replicate estimate are computed for.
pub const MDE_POWER: f64 = 0.8;

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
    pub(super) fn new(design: Design) -> Self {
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
    pub(super) fn per_run(mut self) -> Self {
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

/// The result of [`analyze`](super::analyze): the stable JSON interface of optgate.
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
