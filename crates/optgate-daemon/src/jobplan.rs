//! Jobs and run outcomes, decided from the recorded state and the run manifests (pure but
//! for reading manifests): which jobs to submit for the pending runs, and what a polled
//! job's runs say.

use std::collections::{BTreeSet, HashMap};

use optgate_evidence::RunStatus;
use optgate_evidence::collect::collect_run;
use optgate_experiment::PlannedRun;
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
    let attempts = work.exp.max_resubmits + 1;
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

/// The jobs to record, their specs (in the same order), and the outcomes of pending runs
/// found already finished.
pub type PlannedJobs = (Vec<NewJob>, Vec<JobSpec>, Vec<RunUpdate>);

/// The jobs for the pending runs, block by block: each block's original job reduced to
/// its pending runs, named for its attempt. A pending run whose manifest already says it
/// finished (a job given up for lost ran it after all) is recorded, not run again. The
/// engine's one way to jobs; the backend tests against a real scheduler make theirs here too.
pub fn plan_jobs(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::work::tests::{block, job, work, work_with};
    use optgate_wrapper::manifest::{Outcome, fixture_manifest};

    fn run(run_id: &str, state: RunState) -> (String, RunRow) {
        let row = RunRow {
            run_id: run_id.into(),
            block: 1,
            arm: run_id.trim_start_matches("b001-").into(),
            position: 0,
            state,
            detail: None,
        };
        (run_id.to_string(), row)
    }

    /// Each update as (run, state, detail).
    fn said(updates: &[RunUpdate]) -> Vec<(String, RunState, String)> {
        updates
            .iter()
            .map(|u| {
                (
                    u.run_id.clone(),
                    u.state,
                    u.detail.clone().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// A job that ended before its queued runs wrote a final manifest: with
    /// `max_resubmits: 1` its runs go back to pending after attempt 1 and fail after
    /// attempt 2; a refused job's runs fail at once (the scheduler would refuse the same
    /// request again); a run that is not queued is left alone; a running job changes
    /// nothing yet. Catches the attempts miscounted (`+ 1` → `* 1`, `<` → `<=`), a refused
    /// job resubmitted, the refusal's wording lost, and the job's state left unsaid.
    #[test]
    fn runs_of_a_job_that_ended_early_are_retried_within_the_attempts() {
        let w = work_with("{ kind: slurm, max_resubmits: 1 }", "");
        let runs: HashMap<String, RunRow> = [
            run("b001-baseline", RunState::Queued),
            run("b001-v1", RunState::Queued),
            run("b001-v2", RunState::Completed),
        ]
        .into_iter()
        .collect();
        let ids = ["b001-baseline", "b001-v1", "b001-v2"];
        let lost = JobState::Lost("node n7 failed".into());
        let first = outcomes(&w, &job("og-e1-b001", 1, &ids), &lost, &runs);
        let why = "job og-e1-b001 ended (lost: node n7 failed) before this run finished";
        let again = format!("{why}; it will run again");
        assert_eq!(
            said(&first),
            [
                ("b001-baseline".into(), RunState::Pending, again.clone()),
                ("b001-v1".into(), RunState::Pending, again),
            ]
        );
        let last = outcomes(&w, &job("og-e1-b001+r2", 2, &ids[..1]), &lost, &runs);
        assert_eq!(
            said(&last),
            [(
                "b001-baseline".into(),
                RunState::Failed,
                "job og-e1-b001+r2 ended (lost: node n7 failed) before this run finished, \
                 after 2 attempt(s); giving up"
                    .into()
            )]
        );
        let refused = JobState::Refused("invalid partition".into());
        let no = outcomes(&w, &job("og-e1-b001", 1, &ids[..1]), &refused, &runs);
        assert_eq!(
            said(&no),
            [(
                "b001-baseline".into(),
                RunState::Failed,
                "job og-e1-b001 ended (refused by the scheduler: invalid partition) before \
                 this run finished; not resubmitted"
                    .into()
            )]
        );
        let running = outcomes(&w, &job("og-e1-b001", 1, &ids), &JobState::Running, &runs);
        assert!(running.is_empty(), "{running:?}");
    }

    /// What a job's state is called in the runs' details and the log.
    #[test]
    fn every_job_state_is_described() {
        let cases = [
            (JobState::Pending, "pending"),
            (JobState::Running, "running"),
            (JobState::Completed, "completed"),
            (JobState::Failed("exit 1".into()), "failed: exit 1"),
            (JobState::Cancelled, "cancelled"),
            (JobState::Timeout, "time limit reached"),
            (JobState::Lost("node down".into()), "lost: node down"),
            (
                JobState::Refused("no".into()),
                "refused by the scheduler: no",
            ),
            (JobState::Unknown, "unknown to the scheduler"),
        ];
        for (state, words) in cases {
            assert_eq!(describe(&state), words);
        }
    }

    /// What `exec-run` leaves for a run that ended with `outcome` (stdout of three epochs
    /// and the manifest).
    fn leave(dir: &std::path::Path, run_id: &str, outcome: Outcome) {
        std::fs::create_dir_all(dir).unwrap();
        let stdout: String = (1..=3).map(|e| format!("epoch {e} took 1.0 s\n")).collect();
        std::fs::write(dir.join("stdout"), stdout).unwrap();
        RunManifest {
            experiment: "w".into(),
            run_id: run_id.into(),
            arm: run_id.trim_start_matches("b001-").into(),
            exit_code: (outcome == Outcome::Completed).then_some(0),
            script: dir.join("run.sh"),
            optgate_version: "test".into(),
            ..fixture_manifest(outcome)
        }
        .write(dir)
        .unwrap();
    }

    /// A block every run of which is pending, with no job yet, is submitted as its jobs were
    /// first planned (`Work::block_jobs`: the whole block in the blocked design, one job
    /// per run in the independent one), attempt 1 under the original names, nothing
    /// recorded as finished already: what the backend tests against a real scheduler
    /// submit. Catches a first attempt named as a retry, a run left out or reordered, and
    /// a block with nothing pending given a job.
    #[test]
    fn a_block_that_never_ran_is_submitted_as_first_planned() {
        for design in ["", "design: independent\n"] {
            let dir = tempfile::tempdir().unwrap();
            let mut w = work(design);
            w.layout = optgate_evidence::Layout::new(dir.path());
            let bin = std::path::Path::new("/opt/optgate");
            let pending: BTreeSet<String> = ["b001-v2", "b001-baseline", "b001-v1"]
                .map(String::from)
                .into();
            let (new_jobs, specs, already) =
                plan_jobs(&w, &[block(1), block(2)], &[], &pending, bin);
            assert_eq!(specs, w.block_jobs(&block(1), bin), "{design:?}");
            assert!(already.is_empty(), "{already:?}");
            assert_eq!(new_jobs.len(), specs.len(), "{design:?}");
            for (job, spec) in new_jobs.iter().zip(&specs) {
                let runs: Vec<String> = spec.runs.iter().map(|r| r.run_id.clone()).collect();
                assert_eq!(
                    (job.block, job.name.as_str(), job.attempt, &job.run_ids),
                    (1, spec.name.as_str(), 1, &runs)
                );
            }
        }
    }

    /// The pending runs of a block become one job, its original reduced to them and named
    /// for the next attempt, in its own directory; a pending run whose manifest already
    /// says it finished (a job given up for lost ran it after all) is recorded from its
    /// manifest instead, and one that was interrupted runs again; a block with nothing
    /// pending gets no job. Catches a finished run run again and the attempt miscounted.
    #[test]
    fn pending_runs_become_the_next_attempt_unless_they_finished_after_all() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = work("");
        w.layout = optgate_evidence::Layout::new(dir.path());
        leave(&w.layout.run_dir("b001-v1"), "b001-v1", Outcome::Completed);
        let interrupted = "b001-baseline";
        leave(
            &w.layout.run_dir(interrupted),
            interrupted,
            Outcome::Interrupted,
        );
        let bin = std::path::Path::new("/opt/optgate");
        let original = w.block_jobs(&block(1), bin).remove(0).name;
        let jobs = [job(&original, 1, &["b001-v2", "b001-baseline", "b001-v1"])];
        let pending: BTreeSet<String> = ["b001-baseline", "b001-v1", "b001-v2"]
            .map(String::from)
            .into();
        let (new_jobs, specs, already) = plan_jobs(&w, &[block(1), block(2)], &jobs, &pending, bin);
        let retry = format!("{original}+r2");
        assert_eq!(new_jobs.len(), 1, "{new_jobs:?}");
        assert_eq!(
            (
                new_jobs[0].block,
                new_jobs[0].name.as_str(),
                new_jobs[0].attempt
            ),
            (1, retry.as_str(), 2)
        );
        assert_eq!(new_jobs[0].run_ids, ["b001-v2", "b001-baseline"]);
        assert_eq!(
            (specs[0].name.as_str(), specs[0].attempt),
            (retry.as_str(), 2)
        );
        assert_eq!(specs[0].dir, w.layout.job_dir(&retry));
        let ids: Vec<&str> = specs[0].runs.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(ids, ["b001-v2", "b001-baseline"]);
        assert_eq!(
            said(&already),
            [("b001-v1".into(), RunState::Completed, String::new())]
        );
    }
}
