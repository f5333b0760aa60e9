//! The look's inputs: the configuration checked, the arms' runs validated and turned
//! "lower is better", the production epochs and the epochs of the steady window.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::error::StatsError;
use crate::model::{AnalysisConfig, ArmData, Better, EpochWindow, RunSamples};

/// A run's values transformed so that lower is better ("time per unit").
pub(super) struct Run<'a> {
    pub(super) replicate: u32,
    pub(super) block: Option<u32>,
    pub(super) raw: &'a BTreeMap<u32, f64>,
    pub(super) t: BTreeMap<u32, f64>,
    /// The load per CPU the run was measured at (`ArmData::load`), when known.
    pub(super) load: Option<f64>,
}

/// An arm prepared for analysis: its data and its runs.
pub(super) struct Arm<'a> {
    pub(super) data: &'a ArmData,
    pub(super) runs: Vec<Run<'a>>,
}

impl Arm<'_> {
    pub(super) fn name(&self) -> &str {
        &self.data.name
    }
}

/// The production epochs and the matched window: one value per run is held as epoch 1,
/// that one "epoch" the whole comparison; otherwise as configured, the production epochs
/// defaulting to the epochs measured.
pub(super) fn epochs_compared(cfg: &AnalysisConfig, epochs_measured: u32) -> (u32, EpochWindow) {
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
pub(super) fn prepare_arms<'a>(
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
pub(super) fn last_epoch_measured(base: &Arm, vars: &[Arm]) -> u32 {
    std::iter::once(base)
        .chain(vars)
        .flat_map(|a| a.runs.iter())
        .filter_map(|r| r.t.keys().next_back().copied())
        .max()
        .unwrap_or(0)
}

/// The configuration's own limits, checked before any data is read.
pub(super) fn validate_config(cfg: &AnalysisConfig) -> Result<(), StatsError> {
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
pub(super) fn window_epochs(arms: &[&Arm], window: &EpochWindow) -> Vec<u32> {
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

/// The mean of a run's "lower is better" values over `epochs`.
pub(super) fn steady_value(run: &Run, epochs: &[u32]) -> f64 {
    epochs.iter().map(|e| run.t[e]).sum::<f64>() / epochs.len() as f64
}
