//! Jobs and run outcomes, decided from the recorded state and the run manifests (pure but
//! for reading manifests): which jobs to submit for the pending runs, and what a polled
//! job's runs say.

use std::collections::{BTreeSet, HashMap};

use optgate_experiment::PlannedRun;
use optgate_runner::RunStatus;
use optgate_runner::collect::collect_run;
use optgate_sched::{JobSpec, JobState};
use optgate_store::{BlockRow, JobRow, NewJob, RunRow, RunState, RunUpdate};
use optgate_wrapper::manifest::RunManifest;

use crate::work::Work;

/// What a job's runs say: for a job that ended, every queued run's outcome (a run with no
/// final manifest goes back to pending for another attempt, or fails once attempts are
/// spent); for a running job, only runs that already finished. Blocking (reads files).
pub(crate) fn outcomes(
    work: &Work,
    job: &JobRow,
    state: &JobState,
    runs: &HashMap<String, RunRow>,
) -> Vec<RunUpdate> {
    let attempts = work.exp.file.scheduler.max_resubmits + 1;
    let mut out = Vec::new();
    for run_id in &job.run_ids {
        let Some(run) = runs.get(run_id).filter(|r| r.state == RunState::Queued) else {
            continue;
        };
        let dir = work.layout.run_dir(run_id);
        let manifest = RunManifest::read(&dir);
        let finished = match &manifest {
            Ok(Some(m)) => m.outcome.is_final(),
            Ok(None) => false,
            Err(_) => true,
        };
        if finished {
            out.push(final_outcome(work, run, &dir));
        } else if state.is_finished() {
            // A run its wrapper could not record for lack of space is not the app's
            // failure: it runs again (up to `MAX_NO_SPACE_RETRIES` more attempts).
            let no_space = optgate_wrapper::manifest::hit_by_no_space(&dir);
            let why = match no_space {
                true => format!(
                    "hit by ENOSPC: its wrapper could not write its output or manifest (no \
                     space left on the run directory's file system; job {} ended {})",
                    job.name,
                    describe(state)
                ),
                false => format!(
                    "job {} ended ({}) before this run finished",
                    job.name,
                    describe(state)
                ),
            };
            let allowed = match no_space {
                true => attempts + crate::space::MAX_NO_SPACE_RETRIES,
                false => attempts,
            };
            // A request the scheduler cannot grant is not retried: the next attempt would
            // ask for the same thing.
            let retry = job.attempt < allowed && !matches!(state, JobState::Refused(_));
            out.push(if retry {
                RunUpdate {
                    run_id: run_id.clone(),
                    state: RunState::Pending,
                    detail: Some(format!("{why}; it will run again")),
                }
            } else {
                RunUpdate {
                    run_id: run_id.clone(),
                    state: RunState::Failed,
                    detail: Some(match state {
                        JobState::Refused(_) => format!("{why}; not resubmitted"),
                        _ => format!("{why}, after {} attempt(s); giving up", job.attempt),
                    }),
                }
            });
        }
    }
    out
}

/// A finished run's outcome as `collect` will count it (metric extracted, epochs present).
pub(crate) fn final_outcome(work: &Work, run: &RunRow, dir: &std::path::Path) -> RunUpdate {
    let planned = PlannedRun {
        id: run.run_id.clone(),
        block: run.block,
        replicate: run.block,
        arm: run.arm.clone(),
        position: run.position,
    };
    match collect_run(&work.exp, &planned, dir).status {
        RunStatus::Complete => RunUpdate {
            run_id: run.run_id.clone(),
            state: RunState::Completed,
            detail: None,
        },
        RunStatus::Failed { reason } => RunUpdate {
            run_id: run.run_id.clone(),
            state: RunState::Failed,
            detail: Some(reason),
        },
        RunStatus::NotRun | RunStatus::NotApplicable { .. } => RunUpdate {
            run_id: run.run_id.clone(),
            state: RunState::Failed,
            detail: Some("no outcome".into()),
        },
    }
}

pub(crate) fn describe(state: &JobState) -> String {
    match state {
        JobState::Pending => "pending".into(),
        JobState::Running => "running".into(),
        JobState::Completed => "completed".into(),
        JobState::Failed(d) => format!("failed: {d}"),
        JobState::Cancelled => "cancelled".into(),
        JobState::Timeout => "time limit reached".into(),
        JobState::Lost(d) => format!("lost: {d}"),
        JobState::Refused(d) => format!("refused by the scheduler: {d}"),
        JobState::Unknown => "unknown to the scheduler".into(),
    }
}

pub(crate) type PlannedJobs = (Vec<NewJob>, Vec<JobSpec>, Vec<RunUpdate>);

/// The jobs for the pending runs, block by block: each block's original job reduced to
/// its pending runs, named for its attempt. A pending run whose manifest already says it
/// finished (a job given up for lost ran it after all) is recorded, not run again.
pub(crate) fn plan_jobs(
    work: &Work,
    blocks: &[BlockRow],
    jobs: &[JobRow],
    pending: &BTreeSet<String>,
    optgate_bin: &std::path::Path,
) -> PlannedJobs {
    let mut new_jobs = Vec::new();
    let mut specs = Vec::new();
    let mut already = Vec::new();
    for block in blocks {
        let prefix = format!("b{:03}-", block.index);
        if !pending.iter().any(|r| r.starts_with(&prefix)) {
            continue;
        }
        for mut spec in work.block_jobs(block, optgate_bin) {
            let all: BTreeSet<String> = spec.runs.iter().map(|r| r.run_id.clone()).collect();
            let mut to_run = Vec::new();
            for r in spec.runs.iter().filter(|r| pending.contains(&r.run_id)) {
                match RunManifest::read(&r.run_dir) {
                    Ok(Some(m)) if m.outcome.is_final() => {
                        let row = RunRow {
                            run_id: r.run_id.clone(),
                            block: r.block,
                            arm: r.arm.clone(),
                            position: 0,
                            state: RunState::Pending,
                            detail: None,
                        };
                        already.push(final_outcome(work, &row, &r.run_dir));
                    }
                    _ => to_run.push(r.run_id.clone()),
                }
            }
            if to_run.is_empty() {
                continue;
            }
            let attempt = 1 + jobs
                .iter()
                .filter(|j| j.run_ids.iter().any(|r| all.contains(r)))
                .map(|j| j.attempt)
                .max()
                .unwrap_or(0);
            let name = Work::attempt_name(&spec.name, attempt);
            if name != spec.name {
                spec.dir = work.layout.job_dir(&name);
                spec.name = name.clone();
            }
            spec.runs.retain(|r| to_run.contains(&r.run_id));
            spec.attempt = attempt;
            new_jobs.push(NewJob {
                block: block.index,
                name,
                attempt,
                run_ids: to_run,
            });
            specs.push(spec);
        }
    }
    (new_jobs, specs, already)
}
