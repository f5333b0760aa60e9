//! An experiment as the engine works on it: the validated experiment re-read from the text
//! stored at submission, its run-directory layout, its plan as recorded in the database,
//! and the job specs of its blocks (rendered by `optgate_evidence::jobs`).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use optgate_evidence::Layout;
use optgate_evidence::jobs::block_jobs;
use optgate_experiment::{Experiment, Plan, PlannedBlock};
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

/// Test helpers shared with the other modules' tests (`jobplan`).
#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use optgate_store::JobRecordState;

    /// A Slurm experiment of 2 variants and 6 blocks, with `extra` top-level keys.
    pub(crate) fn work(extra: &str) -> Work {
        work_with("{ kind: slurm }", extra)
    }

    /// The same experiment with `scheduler` as its `scheduler:` value.
    pub(crate) fn work_with(scheduler: &str, extra: &str) -> Work {
        let text = format!(
            "name: w\napp: {{ command: [./app] }}\n\
             metric: {{ pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s' }}\n\
             scheduler: {scheduler}\nreplicates: 6\n{extra}variants:\n\
             \x20 - {{ name: v1, dimension: l2_threading_model, env: {{ X: '1' }} }}\n\
             \x20 - {{ name: v2, dimension: l2_threading_model, env: {{ X: '2' }} }}\n"
        );
        let exp = optgate_experiment::load_str(&text, Path::new("/exp/w.yaml"))
            .unwrap()
            .experiment;
        let schedule = LookSchedule::new(exp.replicates, Some(exp.max_replicates));
        Work {
            id: "e1".into(),
            sequential: schedule.sequential_plan(exp.alpha).unwrap(),
            staged: optgate_policy::decide::staged_plan(&exp).unwrap(),
            layout: Layout::new("/runs/e1"),
            backend: Arc::new(optgate_sched::slurm::SlurmBackend::new()),
            schedule,
            exp,
        }
    }

    pub(crate) fn block(index: u32) -> BlockRow {
        BlockRow {
            index,
            order: ["v2", "baseline", "v1"].map(String::from).to_vec(),
        }
    }

    /// Rows for the blocks after `after` only, their runs in block order with their
    /// positions, an arm `skip` names left out. Catches `>` → `>=` (block `after` recorded
    /// twice when blocks are added) and a skip ignored or inverted.
    #[test]
    fn plan_rows_are_the_blocks_after_the_ones_recorded_without_skipped_arms() {
        let w = work("");
        let plan = w.plan(&[block(1), block(2), block(3)]);
        let (blocks, runs) = plan_rows(&plan, 1, |arm| arm == "v1");
        assert_eq!(
            blocks.iter().map(|b| b.index).collect::<Vec<_>>(),
            [2, 3],
            "{blocks:?}"
        );
        assert_eq!(blocks[0].order, block(2).order);
        let got: Vec<(&str, u32, &str, u32)> = runs
            .iter()
            .map(|r| (r.run_id.as_str(), r.block, r.arm.as_str(), r.position))
            .collect();
        assert_eq!(
            got,
            [
                ("b002-v2", 2, "v2", 0),
                ("b002-baseline", 2, "baseline", 1),
                ("b003-v2", 3, "v2", 0),
                ("b003-baseline", 3, "baseline", 1),
            ]
        );
        let (all_blocks, all_runs) = plan_rows(&plan, 0, |_| false);
        assert_eq!((all_blocks.len(), all_runs.len()), (3, 9));
    }

    /// The plan holds the experiment's name, seed, design and arms with the recorded
    /// blocks (not a default plan).
    #[test]
    fn the_plan_is_the_experiment_s_with_the_recorded_blocks() {
        let w = work("seed: 42\n");
        let plan = w.plan(&[block(1), block(2)]);
        assert_eq!(plan.experiment, "w");
        assert_eq!(plan.seed, 42);
        assert_eq!(plan.design, w.exp.design);
        assert_eq!(plan.arms, ["baseline", "v1", "v2"]);
        assert_eq!(plan.blocks.len(), 2);
        assert_eq!(plan.blocks[1].index, 2);
        assert_eq!(plan.blocks[1].order, block(2).order);
    }

    /// Looks follow the experiment's rule: one after each block from `replicates` to
    /// `max_replicates` under the spending rule; under the staged rule only where its plan
    /// puts them (not after every block).
    #[test]
    fn looks_are_taken_where_the_experiment_s_rule_plans_them() {
        let w = work("max_replicates: 9\ncompare: { sequential: obrien_fleming }\n");
        let looks: Vec<Option<u32>> = (5..=10).map(|b| w.look_at(b)).collect();
        assert_eq!(looks, [None, Some(1), Some(2), Some(3), Some(4), None]);
        let staged = work("max_replicates: 20\ncompare: { sequential: staged }\n");
        let plan = staged.staged.as_ref().expect("a staged plan");
        for b in 1..=21 {
            assert_eq!(staged.look_at(b), plan.look_at(b), "at {b} blocks");
        }
        let first = plan.next_look_after(0).unwrap();
        assert_eq!(staged.look_at(first), Some(1));
        // The block after the first look is a look of the spending rule, not of this plan.
        assert_eq!(staged.look_at(first + 1), None);
        assert!(staged.schedule.look_at(first + 1).is_some());
    }

    pub(crate) fn job(name: &str, attempt: u32, runs: &[&str]) -> JobRow {
        JobRow {
            id: 1,
            experiment_id: "e1".into(),
            block: 1,
            name: name.into(),
            attempt,
            run_ids: runs.iter().map(|r| r.to_string()).collect(),
            scheduler_job_id: None,
            state: JobRecordState::Submitting,
            detail: None,
            created_at: String::new(),
            updated_at: String::new(),
            scheduler_state: None,
        }
    }

    /// A recorded job's spec is its block's job reduced to the recorded runs, under the
    /// recorded name and attempt, in its own directory when it is a retry; runs no block
    /// job holds are refused. Catches the retry left in the first attempt's directory and
    /// the runs not reduced.
    #[test]
    fn a_recorded_job_s_spec_is_its_block_job_reduced_under_its_own_name() {
        let w = work("");
        let bin = Path::new("/opt/optgate");
        let original = w.block_jobs(&block(1), bin);
        assert_eq!(
            original.len(),
            1,
            "a blocked design runs a block as one job"
        );
        let first = &original[0];
        assert_eq!(first.runs.len(), 3);
        let same = w
            .spec_for(&job(&first.name, 1, &["b001-v1"]), &block(1), bin)
            .unwrap();
        assert_eq!(
            (same.name.as_str(), &same.dir),
            (first.name.as_str(), &first.dir)
        );
        let name = Work::attempt_name(&first.name, 2);
        let retry = w
            .spec_for(&job(&name, 2, &["b001-v1"]), &block(1), bin)
            .unwrap();
        assert_eq!(retry.name, name);
        assert_eq!(retry.dir, w.layout.job_dir(&name));
        assert_ne!(retry.dir, first.dir);
        assert_eq!(retry.attempt, 2);
        let ids: Vec<&str> = retry.runs.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(ids, ["b001-v1"]);
        let none = w.spec_for(&job(&name, 2, &["b009-v1"]), &block(1), bin);
        assert!(matches!(none, Err(WorkError::NoSuchJob { block: 1, .. })));
    }

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
