//! The runs of two arms aligned for the design: paired by block (or replicate) with the
//! unpaired ones left out and said, and the steady epochs every compared run has.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::StatsError;
use crate::model::{Design, EpochWindow};

use super::inputs::{Arm, Run, epochs_text, steady_value, window_epochs};

/// Steady or first-epoch values of the two arms, aligned for the design.
pub(super) struct Samples {
    pub(super) base: Vec<f64>,
    pub(super) var: Vec<f64>,
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

/// The runs of both arms that are compared, aligned for the design, and the epochs they
/// share.
pub(super) struct AlignedRuns<'a> {
    pub(super) base: &'a Arm<'a>,
    pub(super) var: &'a Arm<'a>,
    pub(super) base_idx: Vec<usize>,
    pub(super) var_idx: Vec<usize>,
    /// The steady-window epochs every run has.
    pub(super) steady: Vec<u32>,
    /// Whether every run has epoch 1.
    pub(super) has_first: bool,
}

impl<'a> AlignedRuns<'a> {
    /// Pairs the runs (paired design; unpaired runs dropped with a warning) and finds the
    /// steady epochs (those missing in some run left out with a warning).
    pub(super) fn of(
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
    pub(super) fn first(&self, arm: &Arm, idx: &[usize]) -> Vec<f64> {
        idx.iter().map(|&i| arm.runs[i].t[&1]).collect()
    }

    /// The steady value of the aligned runs of `arm`.
    pub(super) fn steady_of(&self, arm: &Arm, idx: &[usize]) -> Vec<f64> {
        idx.iter()
            .map(|&i| steady_value(&arm.runs[i], &self.steady))
            .collect()
    }

    /// The steady values of the aligned runs of both arms.
    pub(super) fn steady_samples(&self) -> Samples {
        Samples {
            base: self.steady_of(self.base, &self.base_idx),
            var: self.steady_of(self.var, &self.var_idx),
        }
    }
}
