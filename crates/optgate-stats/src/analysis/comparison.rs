//! The comparison of a variant with the baseline before Holm's adjustment: estimates,
//! one-sided tests and intervals on the log scale, the first-epoch effect, App and System
//! Impact, break-even, guardrails and the stability findings that gate.

use std::collections::BTreeSet;

use crate::error::StatsError;
use crate::guardrail::{GuardrailResult, compare_guardrail, oriented_change};
use crate::htest::{Alternative, RankTest, ShiftEstimate};
use crate::mann_whitney::{hodges_lehmann_shift, mann_whitney_u, min_p_unpaired};
use crate::model::{AnalysisConfig, Better, Design, EpochWindow};
use crate::signed_rank::{hodges_lehmann_paired, min_p_paired, wilcoxon_signed_rank};
use crate::trend::median;

use super::inputs::{Arm, steady_value};
use super::pairing::{AlignedRuns, Samples};
use super::stability::{TrendFinding, arm_warnings, trend_finding};
use super::types::{EpochRow, FirstEpoch};

/// Results of the comparison before Holm's adjustment and the decision.
pub(super) struct Partial {
    pub(super) name: String,
    pub(super) not_applicable: Option<String>,
    pub(super) failed: Option<String>,
    pub(super) correctness_mismatch: Option<String>,
    pub(super) n_baseline: usize,
    pub(super) n_variant: usize,
    pub(super) steady: Vec<u32>,
    pub(super) steady_est: Option<ShiftEstimate>,
    pub(super) p_imp: Option<RankTest>,
    pub(super) p_nw: Option<RankTest>,
    pub(super) sd: Option<f64>,
    pub(super) min_p: Option<f64>,
    pub(super) first: FirstEpoch,
    pub(super) first_log: Option<ShiftEstimate>,
    pub(super) app_impact_pct: Option<f64>,
    pub(super) app_impact_ci: (Option<f64>, Option<f64>),
    /// Rule 5′'s bound (see `VariantAnalysis::app_impact_best`).
    pub(super) app_impact_best: Option<f64>,
    pub(super) system_impact_pct: Option<f64>,
    pub(super) system_impact_ci: (Option<f64>, Option<f64>),
    pub(super) breakeven: Option<u32>,
    pub(super) per_epoch: Vec<EpochRow>,
    pub(super) warnings: Vec<String>,
    pub(super) trend_blocks: Vec<String>,
    pub(super) guardrails: Vec<GuardrailResult>,
}

impl Partial {
    pub(super) fn p_improvement(&self) -> Option<f64> {
        self.p_imp.map(|t| t.p_value)
    }
    pub(super) fn p_no_worthwhile(&self) -> Option<f64> {
        self.p_nw.map(|t| t.p_value)
    }
}

/// Estimate, tests, spread and smallest reachable p-value of one comparison.
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

/// One variant against the baseline: everything but Holm's adjustment and the decision.
pub(super) fn compare_arms(
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

// The comparisons made on the aligned runs (their alignment is `pairing`'s).
impl AlignedRuns<'_> {
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

/// First epoch N ≥ 1 with `(N − 1)·saving ≥ extra` that holds for every later N too.
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

/// The per-epoch table: both arms' medians of the measured values and their ratio.
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
