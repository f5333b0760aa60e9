//! Stability checks of one arm: outliers, a trend over the steady window, and drift from
//! replicate to replicate with its likely cause. Warnings, and the trends that gate.

use crate::fmt::fmt_p;
use crate::model::{AnalysisConfig, Better};
use crate::trend::{
    OUTLIER_Z, mann_kendall, mann_kendall_suffixes, median, modified_z_scores, sen_slope,
};

use super::inputs::{Arm, Run, epochs_text, steady_value};
use super::types::TREND_ALPHA;

/// A trend finding for one arm over a window.
#[derive(Clone)]
pub(super) struct TrendFinding {
    pub(super) message: String,
    /// The drift across the window is at least the smallest effect worth having: it gates.
    pub(super) material: bool,
}

/// Mann–Kendall on the per-epoch medians of `arm` over `epochs`, with a later start to try.
pub(super) fn trend_finding(
    arm: &Arm,
    epochs: &[u32],
    cfg: &AnalysisConfig,
) -> Option<TrendFinding> {
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

/// Outlier and trend warnings about one arm; returns the trend finding, if any.
pub(super) fn arm_warnings(
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
