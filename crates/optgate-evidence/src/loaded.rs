//! Which runs were measured under load (a node busier than its CPUs), pure over what their
//! manifests recorded: the load a run met, the blocks that had a loaded run, and the
//! report's one-line summary of them. Utilisation and the decisions without the loaded
//! blocks are judged on the same facts as the report's interference list.

use std::collections::BTreeSet;

use optgate_stats::{Analysis, AnalysisConfig, ArmData, WithoutLoadedBlocks};

use crate::node_checks::LOAD_FLAG_RATIO;
use crate::{Collected, RunResult, RunStatus};

/// The load a run was measured at, when it was above [`LOAD_FLAG_RATIO`] × the CPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunLoad {
    /// The higher of the 1-minute load averages before and after the run (or, for a
    /// launched step, of its nodes' before the step, relative to their cores).
    pub load: f64,
    pub cpus: u32,
}

/// The load run `r` was measured at, when it was a load above its node's CPUs: the run's
/// own machine (before and after), or any node of its step (before the step).
pub fn run_load(r: &RunResult) -> Option<RunLoad> {
    let own = r.conditions.and_then(|c| {
        Some(RunLoad {
            load: c.load_avg_max()?,
            cpus: c.online_cpus?,
        })
    });
    let nodes = r.nodes.iter().filter_map(|n| {
        Some(RunLoad {
            load: n.load_avg?,
            cpus: n.cores?,
        })
    });
    own.into_iter()
        .chain(nodes)
        .filter(|l| l.load > LOAD_FLAG_RATIO * f64::from(l.cpus))
        .max_by(|a, b| (a.load / f64::from(a.cpus)).total_cmp(&(b.load / f64::from(b.cpus))))
}

/// The load per CPU of run `r`'s own machine (the higher of the 1-minute load averages
/// before and after it, over the online CPUs), whether or not it was a load to flag; None
/// when not recorded.
pub fn load_per_cpu(r: &RunResult) -> Option<f64> {
    let c = r.conditions?;
    let load = c.load_avg_max()?;
    let cpus = c.online_cpus.filter(|&n| n > 0)?;
    Some(load / f64::from(cpus))
}

/// The complete runs, with their load when they were measured under load.
fn complete_runs(collected: &Collected) -> impl Iterator<Item = (&RunResult, Option<RunLoad>)> {
    collected
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Complete)
        .map(|r| (r, run_load(r)))
}

/// The blocks in which at least one complete run was measured under load.
pub fn loaded_blocks(collected: &Collected) -> BTreeSet<u32> {
    complete_runs(collected)
        .filter(|(_, l)| l.is_some())
        .map(|(r, _)| r.block)
        .collect()
}

/// How many of the complete runs were measured under load, and at what loads; None when
/// none was.
pub fn load_summary(collected: &Collected) -> Option<optgate_report::LoadSummary> {
    let runs: Vec<_> = complete_runs(collected).collect();
    let loads: Vec<RunLoad> = runs.iter().filter_map(|(_, l)| *l).collect();
    let first = loads.first()?;
    let cpus = loads
        .iter()
        .all(|l| l.cpus == first.cpus)
        .then_some(first.cpus);
    Some(optgate_report::LoadSummary {
        loaded_runs: loads.len(),
        runs: runs.len(),
        cpus,
        load_min: loads.iter().map(|l| l.load).fold(f64::INFINITY, f64::min),
        load_max: loads
            .iter()
            .map(|l| l.load)
            .fold(f64::NEG_INFINITY, f64::max),
        loaded_blocks: loaded_blocks(collected).into_iter().collect(),
    })
}

/// Fewer paired blocks than this left without the loaded ones: no check (`null`); the
/// analysis needs [`optgate_stats::MIN_REPLICATES`] pairs for a test that can decide.
pub const MIN_BLOCKS_WITHOUT_LOAD: usize = optgate_stats::MIN_REPLICATES;

/// Checks every variant's decision without the blocks in `loaded`: each variant on its
/// own blocks without the loaded ones, against the baseline of the same blocks, by the
/// single-look analysis at the experiment's α in a Holm family of all the proposals (so no
/// less strict than the decision it checks). Sets `loaded_blocks`, `without_loaded_blocks`
/// and, when the decision would differ, says so at the end of the reason. The decisions
/// are not changed.
pub fn check_without_loaded_blocks(
    base: &ArmData,
    others: &[ArmData],
    cfg: &AnalysisConfig,
    loaded: &BTreeSet<u32>,
    analysis: &mut Analysis,
) {
    if loaded.is_empty() {
        return;
    }
    let family = others.len().saturating_sub(1);
    for v in &mut analysis.variants {
        let Some(arm) = others.iter().find(|o| o.name == v.name) else {
            continue;
        };
        let own: BTreeSet<u32> = arm.runs.iter().filter_map(|r| r.block).collect();
        let paired: BTreeSet<u32> = base
            .runs
            .iter()
            .filter_map(|r| r.block)
            .filter(|b| own.contains(b))
            .collect();
        v.loaded_blocks = paired.intersection(loaded).count() as u32;
        if v.loaded_blocks == 0 {
            continue;
        }
        let kept = |b: u32| paired.contains(&b) && !loaded.contains(&b);
        let (b, a) = (base.in_blocks(kept), arm.in_blocks(kept));
        let blocks = b.runs.len().min(a.runs.len());
        if blocks < MIN_BLOCKS_WITHOUT_LOAD {
            v.reason = format!(
                "{}; {} of its {} blocks were measured under load, too many to check the \
                 decision without them ({blocks} left, fewer than {MIN_BLOCKS_WITHOUT_LOAD})",
                v.reason,
                v.loaded_blocks,
                paired.len()
            );
            continue;
        }
        let Ok(mut again) = optgate_stats::analyze_in_family(&b, &[a], cfg, family) else {
            continue;
        };
        let va = again.variants.remove(0);
        let Some(speedup) = va.speedup.estimate else {
            continue;
        };
        let check = WithoutLoadedBlocks {
            blocks: blocks as u32,
            decision: va.decision,
            speedup,
        };
        v.reason = format!(
            "{}; {}",
            v.reason,
            without_load_words(v.decision, &check, v.loaded_blocks)
        );
        v.without_loaded_blocks = Some(check);
    }
}

/// The reason's last words on the check: the same decision, or the one it would be.
fn without_load_words(
    decision: optgate_stats::Decision,
    c: &WithoutLoadedBlocks,
    loaded: u32,
) -> String {
    let plural = if loaded == 1 { "" } else { "s" };
    if c.decision == decision {
        format!(
            "without its {loaded} loaded block{plural} ({} left) still {} at {:.2}×",
            c.blocks, c.decision, c.speedup
        )
    } else {
        format!(
            "without its {loaded} loaded block{plural} ({} left) it would be {} ({:.2}×): \
             the load may have decided it",
            c.blocks, c.decision, c.speedup
        )
    }
}

#[cfg(test)]
mod tests {
    use optgate_stats::{Decision, analyze, fixtures::blocked_arm};

    use super::*;

    /// A variant 25 % faster in its quiet blocks and slower in its two loaded ones: the
    /// check drops exactly those, re-analyses the six left, and says what it would decide.
    /// Planted bugs caught: loaded blocks kept, the baseline's other blocks kept (unpaired),
    /// the count of loaded blocks taken from all blocks, no words when the decision differs.
    #[test]
    fn a_decision_is_checked_without_its_loaded_blocks() {
        let cfg = AnalysisConfig::default();
        let base = blocked_arm("baseline", 8, |_| 10.0);
        let v = blocked_arm("v", 8, |b| {
            if b <= 2 {
                14.0
            } else {
                8.0 + 0.01 * f64::from(b)
            }
        });
        let mut a = analyze(&base, std::slice::from_ref(&v), &cfg).unwrap();
        let before = a.variants[0].decision;
        assert_ne!(before, Decision::Accept, "the loaded blocks hold it back");
        check_without_loaded_blocks(
            &base,
            std::slice::from_ref(&v),
            &cfg,
            &BTreeSet::from([1, 2]),
            &mut a,
        );
        let va = &a.variants[0];
        assert_eq!(va.decision, before, "the decision itself is not changed");
        assert_eq!(va.loaded_blocks, 2);
        let w = va.without_loaded_blocks.unwrap();
        assert_eq!((w.blocks, w.decision), (6, Decision::Accept));
        assert!((w.speedup - 10.0 / 8.045).abs() < 0.01, "{}", w.speedup);
        assert!(
            va.reason
                .contains("without its 2 loaded blocks (6 left) it would be accept"),
            "{}",
            va.reason
        );
    }

    /// No loaded block, or too few left: nothing is set. A loaded block outside the
    /// variant's own blocks does not count.
    #[test]
    fn too_few_blocks_left_or_none_loaded_leave_no_check() {
        let cfg = AnalysisConfig::default();
        let base = blocked_arm("baseline", 6, |_| 10.0);
        let v = blocked_arm("v", 6, |_| 8.0);
        let fresh = || analyze(&base, std::slice::from_ref(&v), &cfg).unwrap();
        let mut a = fresh();
        check_without_loaded_blocks(
            &base,
            std::slice::from_ref(&v),
            &cfg,
            &BTreeSet::new(),
            &mut a,
        );
        assert_eq!(a, fresh());
        let mut a = fresh();
        check_without_loaded_blocks(
            &base,
            std::slice::from_ref(&v),
            &cfg,
            &BTreeSet::from([1, 2]),
            &mut a,
        );
        assert_eq!(a.variants[0].loaded_blocks, 2);
        assert!(
            a.variants[0].without_loaded_blocks.is_none(),
            "4 blocks are fewer than 5"
        );
        let mut a = fresh();
        check_without_loaded_blocks(
            &base,
            std::slice::from_ref(&v),
            &cfg,
            &BTreeSet::from([9]),
            &mut a,
        );
        assert_eq!(a.variants[0].loaded_blocks, 0);
    }
}
