//! running: the ends of jobs and the outcomes of their runs, fail fast, and the submission
//! of what is pending (intent recorded first).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use optgate_experiment::SchedulerKind;
use optgate_sched::{JobSpec, JobState};
use optgate_store::{
    ExperimentRow, ExperimentState, JobRecordState, JobRow, RunRow, RunState, RunUpdate,
};

use crate::error::DaemonError;
use crate::work::Work;

use super::{Engine, MAX_SUBMIT_ATTEMPTS, unreachable_reason};
use crate::jobplan::{describe, outcomes, plan_jobs};

impl Engine {
    /// Records what the polled jobs of `row` say: the outcomes of their finished runs, and
    /// the ends of the jobs that ended. Returns whether anything changed and the last block
    /// whose job ended.
    async fn record_jobs(
        &mut self,
        row: &ExperimentRow,
        work: &Arc<Work>,
        live: &[JobRow],
        states: &HashMap<i64, JobState>,
    ) -> Result<(bool, Option<u32>), DaemonError> {
        let mut changed = false;
        let mut finished_block = None;
        let mine: Vec<&JobRow> = live
            .iter()
            .filter(|j| j.experiment_id == row.id && j.state == JobRecordState::Submitted)
            .collect();
        if mine.is_empty() {
            return Ok((false, None));
        }
        let id = row.id.clone();
        let runs = self.ctx.db.call(move |s| s.runs(&id)).await?;
        let runs: Arc<HashMap<String, RunRow>> =
            Arc::new(runs.into_iter().map(|r| (r.run_id.clone(), r)).collect());
        for job in mine {
            let Some(state) = states.get(&job.id) else {
                continue;
            };
            let (w, job2, st, rs) = (work.clone(), job.clone(), state.clone(), runs.clone());
            let updates =
                super::read_run_files(&row.id, "the outcomes of a job's runs", move || {
                    outcomes(&w, &job2, &st, &rs)
                })
                .await?;
            if state.is_finished() {
                tracing::info!(
                    "experiment {}: job {} ended ({})",
                    row.id,
                    job.name,
                    describe(state)
                );
                finished_block = finished_block.max(Some(job.block));
                let (job, detail) = (job.clone(), describe(state));
                self.ctx
                    .db
                    .call(move |s| {
                        s.finish_job(&job, JobRecordState::Finished, Some(&detail), &updates)
                    })
                    .await?;
                crate::failpoint::hit(&self.ctx.failpoints, "after-job-end");
                changed = true;
            } else if !updates.is_empty() {
                let id = row.id.clone();
                self.ctx
                    .db
                    .call(move |s| s.update_runs(&id, &updates))
                    .await?;
                changed = true;
            }
        }
        Ok((changed, finished_block))
    }

    /// running: collect ended jobs, record progress of running ones, submit what is
    /// pending, and analyse once every planned run is done.
    pub(crate) async fn advance(
        &mut self,
        row: &ExperimentRow,
        work: Arc<Work>,
        live: &[JobRow],
        states: &HashMap<i64, JobState>,
    ) -> Result<bool, DaemonError> {
        let (mut changed, finished_block) = self.record_jobs(row, &work, live, states).await?;
        // Fail fast: a block's job ended; if the runs so far show that the metric
        // pattern matches nothing (or the baseline fails every run), stop the experiment
        // now, with the reason, instead of running every block first. Its live jobs are
        // then cancelled like a cancelled experiment's.
        if let Some(block) = finished_block {
            let verdict = self.fail_fast(row, &work, block).await?;
            if let Some(reason) = verdict.stop_experiment {
                tracing::warn!("experiment {}: {reason}", row.id);
                let id = row.id.clone();
                self.ctx
                    .db
                    .call(move |s| s.set_state(&id, ExperimentState::Failed, Some(&reason)))
                    .await?;
                return Ok(true);
            }
            changed |= self.stop_arms(row, verdict.stop_arms).await?;
        }
        changed |= self.submit_pending(row, &work).await?;
        let id = row.id.clone();
        let (counts, live_jobs) = self
            .ctx
            .db
            .call(move |s| {
                let live = s.jobs(&id)?.iter().filter(|j| j.state.is_live()).count();
                Ok((s.run_counts_of(&id)?, live))
            })
            .await?;
        // Every run has its outcome and every job has ended (a job whose last run is done
        // may still be writing its exit status): the blocks are complete.
        if counts.pending + counts.queued == 0 && live_jobs == 0 {
            let id = row.id.clone();
            let moved = self
                .ctx
                .db
                .call(move |s| {
                    s.transition(
                        &id,
                        ExperimentState::Running,
                        ExperimentState::Analysing,
                        None,
                    )
                })
                .await?;
            if moved {
                self.analyse(row, work).await?;
            }
            changed = true;
        }
        Ok(changed)
    }

    /// Arms every run of which failed so far (fail fast): their runs not yet submitted are
    /// not run (recorded `cancelled` with the reason); the look decides them `failed` with
    /// the first failure quoted. Returns whether a run changed.
    pub(crate) async fn stop_arms(
        &mut self,
        row: &ExperimentRow,
        arms: BTreeMap<String, String>,
    ) -> Result<bool, DaemonError> {
        if arms.is_empty() {
            return Ok(false);
        }
        let id = row.id.clone();
        self.ctx
            .db
            .call(move |s| {
                let updates: Vec<RunUpdate> = s
                    .runs(&id)?
                    .into_iter()
                    .filter(|r| r.state == RunState::Pending)
                    .filter_map(|r| {
                        let why = arms.get(&r.arm)?;
                        tracing::warn!("experiment {id}: run {} not run: {why}", r.run_id);
                        Some(RunUpdate {
                            run_id: r.run_id,
                            state: RunState::Cancelled,
                            detail: Some(why.clone()),
                        })
                    })
                    .collect();
                let any = !updates.is_empty();
                s.update_runs(&id, &updates)?;
                Ok(any)
            })
            .await
    }

    /// The fail-fast verdict on every finished run of the experiment after block `block`'s
    /// job ended: whether to stop the whole experiment or some arms. Only runs the engine
    /// settled (completed or failed) count: an interrupted run (a lost job's) is pending
    /// again, not a failure.
    pub(crate) async fn fail_fast(
        &mut self,
        row: &ExperimentRow,
        work: &Arc<Work>,
        block: u32,
    ) -> Result<optgate_evidence::failfast::FailFast, DaemonError> {
        let id = row.id.clone();
        let (blocks, na, runs) = self
            .ctx
            .db
            .call(move |s| Ok((s.blocks(&id)?, s.not_applicable(&id)?, s.runs(&id)?)))
            .await?;
        let settled: BTreeSet<String> = runs
            .into_iter()
            .filter(|r| matches!(r.state, RunState::Completed | RunState::Failed))
            .map(|r| r.run_id)
            .collect();
        let w = work.clone();
        let verdict = super::read_run_files(&row.id, "fail fast's collection", move || {
            let plan = w.plan(&blocks);
            let done: Vec<optgate_evidence::RunResult> = plan
                .runs()
                .iter()
                .filter(|r| !na.contains_key(&r.arm) && settled.contains(&r.id))
                .map(|r| {
                    optgate_evidence::collect::collect_run(&w.exp, r, &w.layout.run_dir(&r.id))
                })
                .filter(|r| r.status != optgate_evidence::RunStatus::NotRun)
                .collect();
            optgate_evidence::failfast::judge(&w.exp, &w.layout, block, &done)
        })
        .await?;
        Ok(verdict)
    }

    /// Records jobs for pending runs (intent first), then submits them.
    pub(crate) async fn submit_pending(
        &mut self,
        row: &ExperimentRow,
        work: &Arc<Work>,
    ) -> Result<bool, DaemonError> {
        let id = row.id.clone();
        // Most passes have nothing to submit: one grouped count instead of every row.
        let found = self
            .ctx
            .db
            .call(move |s| {
                if s.run_counts_of(&id)?.pending == 0 {
                    return Ok(None);
                }
                Ok(Some((s.runs(&id)?, s.blocks(&id)?, s.jobs(&id)?)))
            })
            .await?;
        let Some((runs, blocks, jobs)) = found else {
            return Ok(false);
        };
        let mut pending: BTreeSet<String> = runs
            .iter()
            .filter(|r| r.state == RunState::Pending)
            .map(|r| r.run_id.clone())
            .collect();
        if work.backend.kind() == SchedulerKind::Local {
            // Local jobs run one at a time anyway (the machine-wide lock): submit the next
            // block's only when the last one ended, so fail fast can still leave out the
            // runs of an arm that keeps failing, and a cancel has one job to stop.
            if jobs.iter().any(|j| j.state.is_live()) {
                return Ok(false);
            }
            let first = runs
                .iter()
                .filter(|r| r.state == RunState::Pending)
                .map(|r| r.block)
                .min();
            let first_block = |r: &RunRow| Some(r.block) == first;
            let of_first: BTreeSet<&str> = runs
                .iter()
                .filter(|r| first_block(r))
                .map(|r| r.run_id.as_str())
                .collect();
            pending.retain(|r| of_first.contains(r.as_str()));
        }
        if pending.is_empty() {
            return Ok(false);
        }
        let w = work.clone();
        let bin = self.ctx.optgate_bin.clone();
        let planned = super::read_run_files(&row.id, "the plan of its next jobs", move || {
            plan_jobs(&w, &blocks, &jobs, &pending, &bin)
        })
        .await?;
        let id = row.id.clone();
        let (new_jobs, specs, already) = planned;
        let created = self
            .ctx
            .db
            .call(move |s| {
                if !already.is_empty() {
                    s.update_runs(&id, &already)?;
                }
                s.create_jobs(&id, &new_jobs)
            })
            .await?;
        let changed = !created.is_empty();
        for (job, spec) in created.iter().zip(specs) {
            self.submit_one(work, job, spec).await?;
        }
        Ok(changed)
    }

    /// Submits a recorded job and records its id. A transient failure leaves the job
    /// `submitting` for reconciliation (it may have gone through); a refusal fails the
    /// experiment with the scheduler's message.
    pub(crate) async fn submit_one(
        &mut self,
        work: &Arc<Work>,
        job: &JobRow,
        spec: JobSpec,
    ) -> Result<(), DaemonError> {
        let backend = work.backend.clone();
        crate::failpoint::hit(&self.ctx.failpoints, "before-submit");
        let w = work.clone();
        // The runs' files, written once (atomically) just before the job that runs them.
        let submitted = tokio::task::spawn_blocking(move || {
            optgate_evidence::jobs::write_job_files(&w.exp, &w.layout, &spec).map_err(|e| {
                // A full disk stays one (the engine waits for space instead of failing).
                let kind = match crate::space::chain_is_no_space(&e) {
                    true => std::io::ErrorKind::StorageFull,
                    false => std::io::ErrorKind::Other,
                };
                optgate_sched::SchedError::Io {
                    op: "write the run files of",
                    path: spec.dir.clone(),
                    source: std::io::Error::new(kind, e.to_string()),
                }
            })?;
            backend.submit(&spec)
        })
        .await
        .map_err(crate::error::join_error)?;
        match submitted {
            Ok(sid) => {
                crate::failpoint::hit(&self.ctx.failpoints, "after-submit");
                self.submit_failures.remove(&job.id);
                tracing::info!(
                    "experiment {}: submitted {} as {sid}",
                    job.experiment_id,
                    job.name
                );
                let jid = job.id;
                self.ctx
                    .db
                    .call(move |s| s.job_submitted(jid, &sid.0))
                    .await?;
                self.clear_unreachable(&job.experiment_id).await
            }
            Err(e) => self.submit_failed(work, job, e).await,
        }
    }

    /// A submission that failed, by its class: unreachable (shown, looked for and
    /// submitted again once the scheduler answers), transient (looked for by name and
    /// retried, at most [`MAX_SUBMIT_ATTEMPTS`] times), or rejected (the experiment fails
    /// with the scheduler's words).
    async fn submit_failed(
        &mut self,
        work: &Arc<Work>,
        job: &JobRow,
        e: optgate_sched::SchedError,
    ) -> Result<(), DaemonError> {
        use optgate_sched::FailureClass;
        if crate::space::chain_is_no_space(&e) {
            // Nothing was submitted, and the disk is not the job's fault: it stays
            // `submitting`, so a later pass's reconciliation submits it once space is back;
            // meanwhile the engine pauses with the reason (`pause_for_space`).
            tracing::debug!("cannot submit {}: {e}", job.name);
            self.in_doubt = true;
            return Err(DaemonError::Sched(e));
        }
        match e.class() {
            FailureClass::Unreachable => {
                // Nothing reached the scheduler. The job stays `submitting`, so the next
                // pass's reconciliation looks for it and submits it when the scheduler
                // answers again; until then the reason is on the job and the experiment.
                let reason = unreachable_reason(work.backend.kind(), &e);
                tracing::warn!("cannot submit {}: {reason}", job.name);
                self.in_doubt = true;
                self.unreachable = true;
                let (jid, msg) = (job.id, reason.clone());
                self.ctx.db.call(move |s| s.job_note(jid, &msg)).await?;
                self.show_unreachable(&job.experiment_id, &reason).await
            }
            FailureClass::Transient | FailureClass::Stopped
                if !self.submit_attempts_spent(job, &e) =>
            {
                tracing::warn!("submitting {} failed, will check and retry: {e}", job.name);
                let (jid, msg) = (job.id, e.to_string());
                self.in_doubt = true;
                self.ctx.db.call(move |s| s.job_note(jid, &msg)).await
            }
            FailureClass::Transient | FailureClass::Stopped => {
                let msg = format!(
                    "gave up on job {} after {MAX_SUBMIT_ATTEMPTS} submissions to the {} scheduler \
                     failed; the last error: {e}",
                    job.name,
                    work.backend.kind()
                );
                self.fail_job(job, msg).await
            }
            FailureClass::Rejected => {
                let msg = format!(
                    "the {} scheduler refused job {}: {e}",
                    work.backend.kind(),
                    job.name
                );
                self.fail_job(job, msg).await
            }
        }
    }

    /// Counts a failed submission of `job` (not one stopped at shutdown); whether the
    /// attempts are spent ([`MAX_SUBMIT_ATTEMPTS`]).
    pub(crate) fn submit_attempts_spent(
        &mut self,
        job: &JobRow,
        e: &optgate_sched::SchedError,
    ) -> bool {
        if e.is_stopped() {
            return false;
        }
        let n = self.submit_failures.entry(job.id).or_insert(0);
        *n += 1;
        *n >= MAX_SUBMIT_ATTEMPTS
    }

    /// A job that cannot be submitted: its runs fail and the experiment ends `failed` with
    /// `msg` (the scheduler's words).
    pub(crate) async fn fail_job(&mut self, job: &JobRow, msg: String) -> Result<(), DaemonError> {
        tracing::error!("experiment {}: {msg}", job.experiment_id);
        self.submit_failures.remove(&job.id);
        let job = job.clone();
        let updates: Vec<RunUpdate> = job
            .run_ids
            .iter()
            .map(|r| RunUpdate {
                run_id: r.clone(),
                state: RunState::Failed,
                detail: Some(msg.clone()),
            })
            .collect();
        self.ctx
            .db
            .call(move |s| {
                s.finish_job(&job, JobRecordState::Finished, Some(&msg), &updates)?;
                s.set_state(&job.experiment_id, ExperimentState::Failed, Some(&msg))
            })
            .await
    }
}
