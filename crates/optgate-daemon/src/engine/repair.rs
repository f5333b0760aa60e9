//! Applying crash repair: the engine asks the store and the backends what is in doubt, the
//! pure functions of [`crate::reconcile`] decide what to do, and this applies it.

use std::collections::BTreeMap;

use optgate_experiment::SchedulerKind;
use optgate_store::{ExperimentRow, ExperimentState, JobRecordState, JobRow};

use super::{Engine, unreachable_reason};
use crate::error::DaemonError;
use crate::reconcile::{Repair, Repairs, repairs_for, restart_builds};

impl Engine {
    /// Makes the database agree with the backends and the run manifests again (see
    /// [`crate::reconcile`]).
    pub(crate) async fn reconcile(&mut self) -> Result<Repairs, DaemonError> {
        let mut repairs = Repairs::default();
        self.close_unreadable_kinds().await?;
        let active = self.ctx.db.call(|s| s.active_experiments()).await?;
        for row in restart_builds(&active, |id| self.build_in_flight(id)) {
            if self.restart_build(&row).await? {
                repairs.builds_restarted += 1;
            }
        }
        let in_doubt: Vec<JobRow> = self
            .ctx
            .db
            .call(|s| {
                Ok(s.live_jobs()?
                    .into_iter()
                    .filter(|j| j.state == JobRecordState::Submitting)
                    .collect())
            })
            .await?;
        // Each job with its experiment, grouped by backend for one lookup per backend.
        let mut by_kind: BTreeMap<SchedulerKind, Vec<(JobRow, ExperimentRow)>> = BTreeMap::new();
        for job in in_doubt {
            let id = job.experiment_id.clone();
            if let Some(row) = self.ctx.db.call(move |s| s.experiment(&id)).await? {
                by_kind.entry(row.scheduler).or_default().push((job, row));
            }
        }
        for (kind, jobs) in by_kind {
            let backend = self.ctx.backend(kind);
            let names: Vec<String> = jobs.iter().map(|(j, _)| j.name.clone()).collect();
            let found = tokio::task::spawn_blocking(move || backend.find_by_name(&names))
                .await
                .map_err(crate::error::join_error)?;
            let found = match found {
                // Nothing can be looked up or submitted now: the jobs stay in doubt, with
                // the reason shown, and the next pass (at the longest interval) asks again.
                Err(e) if e.is_unreachable() => {
                    let reason = unreachable_reason(kind, &e);
                    tracing::warn!("reconciliation: {reason}");
                    self.in_doubt = true;
                    self.unreachable = true;
                    for (job, row) in &jobs {
                        let (jid, msg) = (job.id, reason.clone());
                        self.ctx.db.call(move |s| s.job_note(jid, &msg)).await?;
                        self.show_unreachable(&row.id, &reason).await?;
                    }
                    continue;
                }
                found => found?,
            };
            for repair in repairs_for(jobs, &found) {
                self.apply(repair, &mut repairs).await?;
            }
        }
        Ok(repairs)
    }

    /// An interrupted build phase: its leftover processes stopped, back to `planned`.
    /// Returns whether the experiment moved.
    async fn restart_build(&mut self, row: &ExperimentRow) -> Result<bool, DaemonError> {
        if let Ok(work) = self.work(row).await {
            let dirs: Vec<_> = work
                .exp
                .builds
                .iter()
                .map(|b| work.layout.build_dir(&b.id))
                .collect();
            tokio::task::spawn_blocking(move || {
                for d in dirs {
                    crate::orphans::stop_orphan_builds(&d);
                }
            })
            .await
            .map_err(crate::error::join_error)?;
        }
        let id = row.id.clone();
        let moved = self
            .ctx
            .db
            .call(move |s| {
                s.transition(
                    &id,
                    ExperimentState::Building,
                    ExperimentState::Planned,
                    None,
                )
            })
            .await?;
        if moved {
            tracing::info!(
                "experiment {}: its build phase was interrupted; building again",
                row.id
            );
        }
        Ok(moved)
    }

    async fn apply(&mut self, repair: Repair, repairs: &mut Repairs) -> Result<(), DaemonError> {
        match repair {
            Repair::Record { job, scheduler_id } => {
                tracing::info!(
                    "job {} was submitted before the crash as {scheduler_id}; recorded",
                    job.name
                );
                let (jid, sid) = (job.id, scheduler_id.0);
                self.ctx
                    .db
                    .call(move |s| s.job_submitted(jid, &sid))
                    .await?;
                repairs.jobs_found += 1;
            }
            Repair::Close { job, row } => {
                self.cancel_job_runs(&job, &row, None).await?;
                repairs.jobs_closed += 1;
            }
            Repair::Submit { job, row } => {
                let work = self.work(&row).await?;
                let id = row.id.clone();
                let block = self
                    .ctx
                    .db
                    .call(move |s| s.blocks(&id))
                    .await?
                    .into_iter()
                    .find(|b| b.index == job.block);
                let Some(block) = block else {
                    return Ok(());
                };
                let spec = work
                    .spec_for(&job, &block, &self.ctx.optgate_bin)
                    .map_err(|e| DaemonError::Experiment {
                        id: row.id.clone(),
                        message: e.to_string(),
                    })?;
                tracing::info!(
                    "job {} never reached the scheduler; submitting it now",
                    job.name
                );
                self.submit_one(&work, &job, spec).await?;
                repairs.jobs_resubmitted += 1;
            }
        }
        Ok(())
    }
}
