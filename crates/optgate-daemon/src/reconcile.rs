//! All repair of in-flight work is decided here, by pure functions ([`restart_builds`],
//! [`repairs_for`]); the engine applies what they return (`engine/repair.rs`) before its
//! first pass after a start (and after a pass that left a submission in doubt), so that
//! the database agrees with the backends and the run manifests again:
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

use optgate_sched::JobId;
use optgate_store::{ExperimentRow, ExperimentState, JobRow};

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

/// What to do with one job left `submitting`.
#[derive(Debug, Clone, PartialEq)]
pub enum Repair {
    /// The scheduler has it: record it `submitted` with this id (never submit it again).
    Record { job: JobRow, scheduler_id: JobId },
    /// Not at the scheduler, and its experiment ended: close it, its runs cancelled.
    Close { job: JobRow, row: ExperimentRow },
    /// Not at the scheduler, its experiment still running: submit it now, under the same
    /// record and name.
    Submit { job: JobRow, row: ExperimentRow },
}

/// The experiments `building` whose build phase was interrupted (no build of theirs runs
/// in this process): their leftover build processes are stopped and they go back to
/// `planned`.
pub fn restart_builds(
    active: &[ExperimentRow],
    build_in_flight: impl Fn(&str) -> bool,
) -> Vec<ExperimentRow> {
    active
        .iter()
        .filter(|e| e.state == ExperimentState::Building && !build_in_flight(&e.id))
        .cloned()
        .collect()
}

/// What to do with each job in doubt, given the jobs of those names the scheduler has.
pub fn repairs_for(
    in_doubt: Vec<(JobRow, ExperimentRow)>,
    found: &BTreeMap<String, JobId>,
) -> Vec<Repair> {
    in_doubt
        .into_iter()
        .map(|(job, row)| match found.get(&job.name) {
            Some(id) => Repair::Record {
                scheduler_id: id.clone(),
                job,
            },
            None if row.state.is_terminal() => Repair::Close { job, row },
            None => Repair::Submit { job, row },
        })
        .collect()
}
