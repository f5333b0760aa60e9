//! An experiment as the engine works on it: the validated experiment re-read from the text
//! stored at submission, its run-directory layout, its plan as recorded in the database,
//! and the job specs of its blocks (rendered by `optgate_runner::jobs`).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use optgate_experiment::{Experiment, Plan, PlannedBlock};
use optgate_runner::Layout;
use optgate_runner::jobs::block_jobs;
use optgate_sched::{JobSpec, Scheduler};
use optgate_stats::{SequentialPlan, StagedPlan};
use optgate_store::{BlockRow, ExperimentRow, JobRow, NewRun};

use optgate_policy::decide::LookSchedule;

/// The rows to record for the plan's blocks after the first `after` (0: all of them) and
/// their runs, leaving out the runs of the arms `skip` names (not applicable here).
pub fn plan_rows(
    plan: &Plan,
    after: u32,
    skip: impl Fn(&str) -> bool,
) -> (Vec<BlockRow>, Vec<NewRun>) {
    let blocks = plan
        .blocks
        .iter()
        .filter(|b| b.index > after)
        .map(|b| BlockRow {
            index: b.index,
            order: b.order.clone(),
        })
        .collect();
    let runs = plan
        .runs()
        .into_iter()
        .filter(|r| r.block > after && !skip(&r.arm))
        .map(|r| NewRun {
            run_id: r.id,
            block: r.block,
            arm: r.arm,
            position: r.position,
        })
        .collect();
    (blocks, runs)
}

/// Why the engine cannot work on an experiment (its own error: the experiment ends
/// `failed` with it).
#[derive(Debug, thiserror::Error)]
pub enum WorkError {
    #[error("the stored experiment file no longer validates: {0}")]
    NoLongerValid(#[source] optgate_experiment::LoadError),
    #[error("no sequential plan for its looks: {0}")]
    NoSequentialPlan(String),
    #[error("no staged plan for its looks: {0}")]
    NoStagedPlan(String),
    #[error("block {block} has no job holding {runs:?}")]
    NoSuchJob { block: u32, runs: Vec<String> },
}

/// A loaded experiment. Cached by the engine for as long as the experiment is active.
pub struct Work {
    pub id: String,
    pub exp: Experiment,
    pub layout: Layout,
    pub backend: Arc<dyn Scheduler>,
    pub schedule: LookSchedule,
    /// The spending plan over the looks (`None`: a single look), made once: it costs a
    /// numerical integration.
    pub sequential: Option<SequentialPlan>,
    /// The staged rule's plan when the experiment asks for it (`compare.sequential:
    /// staged`); then it, not `sequential`, decides at each look.
    pub staged: Option<StagedPlan>,
}

impl Work {
    /// Re-validates the stored text (as the file was at submission).
    pub fn load(
        row: &ExperimentRow,
        source_text: &str,
        backend: Arc<dyn Scheduler>,
    ) -> Result<Work, WorkError> {
        let loaded = optgate_experiment::load_str(source_text, Path::new(&row.source_path))
            .map_err(WorkError::NoLongerValid)?;
        let exp = loaded.experiment;
        let schedule = LookSchedule::new(exp.replicates, Some(exp.max_replicates));
        let sequential = schedule
            .sequential_plan(exp.alpha)
            .map_err(|e| WorkError::NoSequentialPlan(e.to_string()))?;
        let staged = optgate_policy::decide::staged_plan(&exp)
            .map_err(|e| WorkError::NoStagedPlan(e.to_string()))?;
        Ok(Work {
            sequential,
            staged,
            id: row.id.clone(),
            layout: Layout::new(&row.root),
            exp,
            backend,
            schedule,
        })
    }

    /// The look taken when `blocks` blocks are complete, under the experiment's rule.
    pub fn look_at(&self, blocks: u32) -> Option<u32> {
        match &self.staged {
            Some(plan) => plan.look_at(blocks),
            None => self.schedule.look_at(blocks),
        }
    }

    /// The plan with the blocks recorded so far.
    pub fn plan(&self, blocks: &[BlockRow]) -> Plan {
        Plan {
            experiment: self.exp.name().to_string(),
            seed: self.exp.seed,
            design: self.exp.design,
            arms: self.exp.arm_names(),
            blocks: blocks
                .iter()
                .map(|b| PlannedBlock {
                    index: b.index,
                    order: b.order.clone(),
                })
                .collect(),
        }
    }

    /// The jobs of `block` as first planned (all its runs). Pure: the files of the runs a
    /// job holds are written when it is submitted.
    pub fn block_jobs(&self, block: &BlockRow, optgate_bin: &Path) -> Vec<JobSpec> {
        let planned = PlannedBlock {
            index: block.index,
            order: block.order.clone(),
        };
        block_jobs(&self.exp, &planned, &self.layout, &self.id, optgate_bin)
    }

    /// The spec of a recorded job: the block's original job holding its runs, reduced to
    /// the recorded runs, under the recorded name (a retry has its own name and directory).
    pub fn spec_for(
        &self,
        job: &JobRow,
        block: &BlockRow,
        optgate_bin: &Path,
    ) -> Result<JobSpec, WorkError> {
        let wanted: BTreeSet<&str> = job.run_ids.iter().map(String::as_str).collect();
        let original = self
            .block_jobs(block, optgate_bin)
            .into_iter()
            .find(|s| s.runs.iter().any(|r| wanted.contains(r.run_id.as_str())))
            .ok_or_else(|| WorkError::NoSuchJob {
                block: block.index,
                runs: job.run_ids.clone(),
            })?;
        let mut spec = original;
        spec.runs.retain(|r| wanted.contains(r.run_id.as_str()));
        spec.attempt = job.attempt;
        if spec.name != job.name {
            spec.dir = self.layout.job_dir(&job.name);
            spec.name = job.name.clone();
        }
        Ok(spec)
    }

    /// The name of attempt `attempt` of an original job: the first attempt keeps the
    /// original name, attempt N ≥ 2 is `<original>+r<N>` (so the first retry is `+r2`).
    pub fn attempt_name(original: &str, attempt: u32) -> String {
        if attempt <= 1 {
            original.to_string()
        } else {
            retry_name(original, attempt)
        }
    }
}

/// The name of the `attempt`-th attempt of a resubmitted job. `+` cannot occur in
/// optgate's own names (experiment and arm names are letters, digits, `_`, `-`, `.`), so a
/// retry can never take the name of another block's or run's job, and `find_by_name` after
/// a crash finds exactly this attempt.
fn retry_name(original: &str, attempt: u32) -> String {
    format!("{original}+r{attempt}")
}

#[cfg(test)]
mod tests {
    use super::Work;

    #[test]
    fn the_first_attempt_keeps_its_name_and_a_retry_is_named_for_its_attempt() {
        assert_eq!(Work::attempt_name("og-e1-b003", 0), "og-e1-b003");
        assert_eq!(Work::attempt_name("og-e1-b003", 1), "og-e1-b003");
        assert_eq!(Work::attempt_name("og-e1-b003", 2), "og-e1-b003+r2");
        assert_eq!(Work::attempt_name("og-e1-b003", 3), "og-e1-b003+r3");
        // No attempt's name is another's, nor another block's job's.
        let names: std::collections::BTreeSet<String> = (1..=4)
            .flat_map(|a| ["og-e1-b003", "og-e1-b004"].map(|n| Work::attempt_name(n, a)))
            .collect();
        assert_eq!(names.len(), 8, "{names:?}");
    }
}
