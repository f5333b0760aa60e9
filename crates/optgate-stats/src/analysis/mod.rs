//! The analysis of one experiment: per variant the steady-state comparison with the
//! baseline, one-time cost, production impact, stability checks and the decision, in the
//! order docs/STATISTICS.md prescribes. `Analysis` is the stable JSON interface.
//!
//! The parts, each importing only from those below it: `types` (the public result types,
//! the method texts and the constants) at the bottom; `inputs` (the arms checked and
//! prepared, the epoch windows); `stability` (outlier, trend and drift warnings);
//! `pairing` (runs aligned for the design, paired by block or replicate); `comparison`
//! (estimates, tests, intervals and impacts per variant); `decisions` (the rules that turn
//! a comparison into a decision). This file runs them in order.

mod comparison;
mod decisions;
mod inputs;
mod pairing;
mod stability;
mod types;

pub use crate::fmt::{fmt_p, fmt_signed_pct};

pub use inputs::epochs_text;
pub use types::{
    Analysis, Decision, EpochRow, FirstEpoch, MDE_POWER, MIN_REPLICATES, Method, OutputCheck,
    OutputCheckKind, SequentialLook, SpeedUp, TREND_ALPHA, VariantAnalysis, WithoutLoadedBlocks,
};

use crate::error::StatsError;
use crate::holm::holm_in_family;
use crate::model::{AnalysisConfig, ArmData};
use crate::sequential::SequentialPlan;

use comparison::{Partial, compare_arms};
use decisions::finish_variant;
use inputs::{epochs_compared, last_epoch_measured, prepare_arms, validate_config, window_epochs};
use stability::arm_warnings;

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

/// The analysis at a look as the engine makes it: [`analyze_sequential`] at look `look` of
/// `sequential` when the daemon adds replicates, else a single [`analyze`] at α. The one
/// place the report, the decision-cost benchmark and the policy's tests choose between them.
pub fn analyze_at_look(
    baseline: &ArmData,
    variants: &[ArmData],
    cfg: &AnalysisConfig,
    sequential: Option<(&SequentialPlan, u32)>,
) -> Result<Analysis, StatsError> {
    match sequential {
        Some((plan, look)) => analyze_sequential(baseline, variants, cfg, plan, look),
        None => analyze(baseline, variants, cfg),
    }
}
