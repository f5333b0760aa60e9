//! All repair of in-flight work lives here, in [`reconcile`]. It runs before the engine's
//! first pass after a start (and after a pass that left a submission in doubt) and makes
//! the database agree with the backends and the run manifests again:
//!
//! * An experiment `building` with no build running in this process was interrupted: the
//!   processes of its builds that outlived the daemon are stopped ([`crate::orphans`]),
//!   then it goes back to `planned` and its builds run again (a build whose `build.json`
//!   says it succeeded is kept).
//! * A job `submitting` may or may not have reached the scheduler: it is looked up by its
//!   unique name (`find_by_name`, one batched query per backend). Found → recorded as
//!   `submitted` with its id (never submitted twice). Not found → submitted now, under the
//!   same record and name, unless its experiment has ended (then it is closed as
//!   cancelled).
//!
//! What needs no repair, by construction: a job `submitted` is polled by the next pass
//! like any other; its runs' outcomes come from their manifests when it ends, recorded
//! with the job's end in one transaction, so no run is counted twice; a run with an
//! `interrupted` manifest or none goes back to pending and runs again (`exec-run` refuses
//! to re-run a finished one); a pending run that already has a final manifest is recorded,
//! not run; an experiment `analysing` is analysed again (a look is recorded with its
//! consequence in one transaction, so it is never taken twice); live jobs of an ended
//! experiment are cancelled by the next pass.

use std::collections::BTreeMap;
use std::fmt;

use optgate_experiment::SchedulerKind;
use optgate_store::{ExperimentState, JobRecordState};

use crate::context::kind_of;
use crate::engine::{Engine, unreachable_reason};
use crate::error::DaemonError;

/// What one reconciliation did, for the log.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Repairs {
    pub builds_restarted: usize,
    pub jobs_found: usize,
    pub jobs_resubmitted: usize,
    pub jobs_closed: usize,
}

impl fmt::Display for Repairs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} interrupted build phase(s) restarted, {} in-doubt job(s) found at the scheduler, {} submitted again, {} closed",
            self.builds_restarted, self.jobs_found, self.jobs_resubmitted, self.jobs_closed
        )
    }
}

/// See the module docs.
pub async fn reconcile(engine: &mut Engine) -> Result<Repairs, DaemonError> {
    let ctx = engine.ctx.clone();
    let mut repairs = Repairs::default();

    let building: Vec<optgate_store::ExperimentRow> = ctx
        .db
        .call(|s| {
            Ok(s.active_experiments()?
                .into_iter()
                .filter(|e| e.state == ExperimentState::Building)
                .collect())
        })
        .await?;
    for row in building {
        let id = row.id.clone();
        if engine.build_in_flight(&id) {
            continue;
        }
        if let Ok(work) = engine.work(&row).await {
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
        let i = id.clone();
        let moved = ctx
            .db
            .call(move |s| {
                s.transition(
                    &i,
                    ExperimentState::Building,
                    ExperimentState::Planned,
                    None,
                )
            })
            .await?;
        if moved {
            tracing::info!("experiment {id}: its build phase was interrupted; building again");
            repairs.builds_restarted += 1;
        }
    }

    let in_doubt: Vec<_> = ctx
        .db
        .call(|s| {
            Ok(s.live_jobs()?
                .into_iter()
                .filter(|j| j.state == JobRecordState::Submitting)
                .collect::<Vec<_>>())
        })
        .await?;
    if in_doubt.is_empty() {
        return Ok(repairs);
    }
    // Each job with its experiment, grouped by backend for one lookup per backend.
    let mut by_kind: BTreeMap<String, Vec<(optgate_store::JobRow, optgate_store::ExperimentRow)>> =
        BTreeMap::new();
    for job in in_doubt {
        let id = job.experiment_id.clone();
        if let Some(row) = ctx.db.call(move |s| s.experiment(&id)).await? {
            by_kind
                .entry(row.scheduler.clone())
                .or_default()
                .push((job, row));
        }
    }
    for (kind, jobs) in by_kind {
        let backend = ctx.backend(kind_of(&kind).unwrap_or(SchedulerKind::Local));
        let names: Vec<String> = jobs.iter().map(|(j, _)| j.name.clone()).collect();
        let found = tokio::task::spawn_blocking(move || backend.find_by_name(&names))
            .await
            .map_err(crate::error::join_error)?;
        let found = match found {
            // Nothing can be looked up or submitted now: the jobs stay in doubt, with the
            // reason shown, and the next pass (at the longest interval) asks again.
            Err(e) if e.is_unreachable() => {
                let reason = unreachable_reason(&kind, &e);
                tracing::warn!("reconciliation: {reason}");
                engine.in_doubt = true;
                engine.unreachable = true;
                for (job, row) in &jobs {
                    let (jid, msg) = (job.id, reason.clone());
                    ctx.db.call(move |s| s.job_note(jid, &msg)).await?;
                    engine.show_unreachable(&row.id, &reason).await?;
                }
                continue;
            }
            found => found?,
        };
        for (job, row) in jobs {
            if let Some(sid) = found.get(&job.name) {
                tracing::info!(
                    "job {} was submitted before the crash as {sid}; recorded",
                    job.name
                );
                let (jid, sid) = (job.id, sid.0.clone());
                ctx.db.call(move |s| s.job_submitted(jid, &sid)).await?;
                repairs.jobs_found += 1;
            } else if row.state.is_terminal() {
                engine.cancel_job_runs(&job, &row, None).await?;
                repairs.jobs_closed += 1;
            } else {
                let work = engine.work(&row).await?;
                let id = row.id.clone();
                let block = ctx
                    .db
                    .call(move |s| s.blocks(&id))
                    .await?
                    .into_iter()
                    .find(|b| b.index == job.block);
                let Some(block) = block else {
                    continue;
                };
                let spec = work
                    .spec_for(&job, &block, &ctx.optgate_bin)
                    .map_err(|message| DaemonError::Experiment {
                        id: row.id.clone(),
                        message,
                    })?;
                tracing::info!(
                    "job {} never reached the scheduler; submitting it now",
                    job.name
                );
                engine.submit_one(&work, &job, spec).await?;
                repairs.jobs_resubmitted += 1;
            }
        }
    }
    Ok(repairs)
}
