//! A governor variant inside a launcher's step where the launcher cannot set it (Flux has
//! no `srun --cpu-freq`): once per node, the step wrapper applies the arm's governor through
//! the experiment's `governor_helper` (or direct sysfs writes where they are allowed),
//! verifies it on the step's CPUs, runs the app, and restores it; the node's
//! [`StepGovernorRecord`] (`RUN_DIR/governor-step.attempt-N.<host>.json`) says applied / verified /
//! restored, or why not.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use optgate_probe::governor::{
    CpuSelection, GovernorGuard, Tunability, TuneVia, governor_in_force, restore_from_file,
    tunability,
};
use serde::{Deserialize, Serialize};

use crate::tasks::{StepScheduler, TaskIdentity};

/// Files `governor-step.attempt-N.<host>.json` in a run directory: what the step wrapper
/// of job attempt N did with the arm's governor on that node (per attempt, so an
/// interrupted attempt's record never passes for a later one's).
pub const STEP_GOVERNOR_RECORD_PREFIX: &str = "governor-step.";

/// What the wrapper of one task does with the arm's governor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepGovernorPlan {
    /// Nothing: no governor asked for, or another task of this node does it (local rank ≠ 0).
    Nothing,
    /// The launcher applied it (`srun --cpu-freq`); the step only reads it back.
    ByLauncher,
    /// Apply `target` this way around the app.
    Apply { target: String, via: TuneVia },
    /// Cannot be applied here: no helper, no cpufreq, no write access — the reason says.
    NotApplicable { target: String, reason: String },
}

/// Decides what this task's wrapper does with `target` (the arm's governor). Pure but for
/// `tunability`, asked only when the wrapper would apply the governor itself.
pub fn plan(
    scheduler: Option<StepScheduler>,
    first_on_node: bool,
    target: Option<&str>,
    tunability: impl FnOnce() -> Tunability,
) -> StepGovernorPlan {
    let Some(target) = target.filter(|_| first_on_node) else {
        return StepGovernorPlan::Nothing;
    };
    if scheduler == Some(StepScheduler::Slurm) {
        return StepGovernorPlan::ByLauncher;
    }
    match tunability() {
        Tunability::Tunable { via } => StepGovernorPlan::Apply {
            target: target.to_string(),
            via,
        },
        Tunability::NotTunable { reason } => StepGovernorPlan::NotApplicable {
            target: target.to_string(),
            reason,
        },
    }
}

/// What the step wrapper did with the arm's governor on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepGovernorRecord {
    pub host: String,
    /// The governor the arm asked for.
    pub target: String,
    /// The helper's command (argv, the CPU and governor appended) or `sysfs`.
    pub via: Option<TuneVia>,
    /// The change was made (every cpufreq policy of the node).
    pub applied: bool,
    /// Read back on the step's CPUs after the change: the target was in force.
    pub verified: bool,
    /// The previous governors were put back after the app ended.
    pub restored: bool,
    /// What `scaling_governor` said on the step's CPUs after the change (or without it).
    pub in_force: String,
    /// Why not applied, verified or restored; None when all three held.
    pub reason: Option<String>,
}

/// A governor applied around the app, restored by [`AppliedGovernor::finish`] (or when
/// dropped: the guard restores).
pub struct AppliedGovernor {
    guard: Option<GovernorGuard>,
    record: StepGovernorRecord,
}

/// Applies the plan's governor on every online CPU of the node under `root` (`/` on a
/// real node), verifying it on `cpus` (the step's); None when the plan applies nothing.
pub fn begin(
    root: &Path,
    plan: &StepGovernorPlan,
    cpus: &BTreeSet<u32>,
    restore_file: &Path,
) -> Option<AppliedGovernor> {
    let host = crate::run::hostname();
    let (target, via) = match plan {
        StepGovernorPlan::Nothing | StepGovernorPlan::ByLauncher => return None,
        StepGovernorPlan::NotApplicable { target, reason } => {
            return Some(AppliedGovernor {
                guard: None,
                record: StepGovernorRecord {
                    host,
                    target: target.clone(),
                    via: None,
                    applied: false,
                    verified: false,
                    restored: false,
                    in_force: governor_in_force(root, cpus),
                    reason: Some(format!("not applicable: {reason}")),
                },
            });
        }
        StepGovernorPlan::Apply { target, via } => (target, via),
    };
    // A wrapper of an earlier attempt killed outright left the node changed: put it back
    // first (refused while that wrapper still runs; `set_via` then refuses too, and says so).
    let _ = restore_from_file(restore_file);
    let set = GovernorGuard::set_via(root, target, &CpuSelection::AllOnline, restore_file, via);
    let in_force = governor_in_force(root, cpus);
    let (guard, reason) = match set {
        Ok(g) => (Some(g), None),
        Err(e) => (
            None,
            Some(format!("not applicable: the helper was refused: {e}")),
        ),
    };
    let verified = guard.is_some() && in_force == *target;
    let reason = reason.or_else(|| {
        (!verified).then(|| format!("applied, but the step's CPUs read back {in_force}"))
    });
    Some(AppliedGovernor {
        record: StepGovernorRecord {
            host,
            target: target.clone(),
            via: Some(via.clone()),
            applied: guard.is_some(),
            verified,
            restored: false,
            in_force,
            reason,
        },
        guard,
    })
}

impl AppliedGovernor {
    /// Restores the previous governors (when applied) and returns the node's record.
    pub fn finish(mut self) -> StepGovernorRecord {
        if let Some(mut guard) = self.guard.take() {
            match guard.restore() {
                Ok(()) => self.record.restored = true,
                Err(e) => {
                    let was = self.record.reason.take();
                    let why = format!("not restored: {e}");
                    self.record.reason = Some(match was {
                        Some(w) => format!("{w}; {why}"),
                        None => why,
                    });
                }
            }
        }
        self.record
    }
}

/// The plan for this task from its run directory's `run.json` (the arm's governor and the
/// experiment's helper) and the launcher's variables.
pub fn plan_for_run(run_dir: &Path, identity: &TaskIdentity, root: &Path) -> StepGovernorPlan {
    // Read as untrusted: a pipe or a link planted as `run.json` never blocks the step.
    let record: Option<crate::run::RunRecord> = crate::untrusted::read_bytes(
        run_dir,
        Path::new(crate::run::RUN_RECORD),
        crate::untrusted::MAX_RECORD_BYTES,
    )
    .ok()
    .and_then(|b| serde_json::from_slice(&b).ok());
    let Some(record) = record else {
        return StepGovernorPlan::Nothing;
    };
    plan(
        identity.scheduler,
        identity.first_on_node(),
        record.governor.as_deref(),
        || tunability(root, record.governor_helper.as_deref()),
    )
}

/// Where a node's record goes: `RUN_DIR/governor-step.attempt-N.<host>.json`.
pub fn record_path(run_dir: &Path, attempt: u32, host: &str) -> PathBuf {
    run_dir.join(format!(
        "{STEP_GOVERNOR_RECORD_PREFIX}attempt-{attempt}.{host}.json"
    ))
}

/// Where the node's previous governors are kept while the app runs (for
/// `restore_from_file` after a kill): `RUN_DIR/governor-step-restore.<host>.json`.
pub fn restore_path(run_dir: &Path, host: &str) -> PathBuf {
    run_dir.join(format!("governor-step-restore.{host}.json"))
}

/// Writes the node's record, whole or not at all.
pub fn write_record(
    run_dir: &Path,
    attempt: u32,
    record: &StepGovernorRecord,
) -> std::io::Result<PathBuf> {
    let path = record_path(run_dir, attempt, &record.host);
    let json = serde_json::to_vec_pretty(record).expect("governor record serialises");
    crate::manifest::write_atomic(&path, &json)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tunable() -> Tunability {
        Tunability::Tunable {
            via: TuneVia::Helper(vec!["sudo".into(), "-n".into(), "set-gov".into()]),
        }
    }

    #[test]
    fn only_the_first_task_of_a_node_outside_slurm_applies_it() {
        // Catches: applying on every task (races), or under Slurm (srun --cpu-freq did).
        let flux = Some(StepScheduler::Flux);
        assert!(matches!(
            plan(flux, true, Some("performance"), tunable),
            StepGovernorPlan::Apply { ref target, via: TuneVia::Helper(_) } if target == "performance"
        ));
        let asked = std::cell::Cell::new(false);
        let spy = || {
            asked.set(true);
            tunable()
        };
        assert_eq!(
            plan(flux, false, Some("performance"), spy),
            StepGovernorPlan::Nothing
        );
        assert_eq!(plan(flux, true, None, tunable), StepGovernorPlan::Nothing);
        assert_eq!(
            plan(
                Some(StepScheduler::Slurm),
                true,
                Some("performance"),
                tunable
            ),
            StepGovernorPlan::ByLauncher
        );
        assert!(
            !asked.get(),
            "tunability asked for a task that applies nothing"
        );
    }

    #[test]
    fn no_helper_is_not_applicable_with_the_reason() {
        // Catches: a missing helper treated as applied, or its reason dropped.
        let why = "admin-only: no write access to cpufreq on n1, and the governor helper `x` was not found";
        let not = || Tunability::NotTunable { reason: why.into() };
        assert_eq!(
            plan(Some(StepScheduler::Flux), true, Some("powersave"), not),
            StepGovernorPlan::NotApplicable {
                target: "powersave".into(),
                reason: why.into()
            }
        );
    }
}
