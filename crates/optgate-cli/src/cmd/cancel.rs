//! `optgate cancel ID`: no new work for the experiment, its live jobs cancelled; `optgate
//! cancel R<n>`: the recurrence submits no more executions.

use std::time::{Duration, Instant};

use anyhow::Result;

use optgate_client::client;
use optgate_client::protocol::{CancelRequest, JobStatus, Request, Response};

use super::daemon_client::{client_error, state_paths};
use crate::exit;

pub fn cancel(id: &str) -> Result<i32> {
    let paths = state_paths()?;
    let request = Request::Cancel(CancelRequest { id: id.to_string() });
    match client::call(&paths, &request).map_err(client_error)? {
        Response::Cancelled(r) if r.previous_state == r.state => {
            errln!(
                "optgate: experiment {} already ended ({}); nothing to cancel",
                r.id,
                r.state
            );
            Ok(exit::OK)
        }
        Response::RecurrenceCancelled(r) if r.previous_state == r.state => {
            errln!("optgate: recurrence {} was already cancelled", r.id);
            Ok(exit::OK)
        }
        Response::RecurrenceCancelled(r) => {
            errln!(
                "optgate: recurrence {} cancelled: no more re-submissions (an execution still \
                 running goes on; cancel it by its id to stop it)",
                r.id
            );
            Ok(exit::OK)
        }
        Response::Cancelled(r) => {
            errln!(
                "optgate: experiment {} cancelled (was {}); stopping its live jobs",
                r.id,
                r.previous_state
            );
            let live = wait_for_jobs_stopped(&r.id)?;
            errln!("optgate: {}", jobs_left(&live));
            Ok(exit::OK)
        }
        other => Err(anyhow::anyhow!(
            "the daemon answered {other:?} to a cancellation"
        )),
    }
}

/// How long `optgate cancel` waits for the engine to stop the experiment's live jobs
/// (the scheduler told to cancel each): 15 s, checked every [`CANCEL_POLL`]. Past it, it
/// names the jobs still live and ends; the engine goes on stopping them.
pub const CANCEL_WAIT: Duration = Duration::from_secs(15);

/// How often `optgate cancel` asks for the experiment's jobs while it waits.
pub const CANCEL_POLL: Duration = Duration::from_millis(200);

/// The experiment's jobs still live (not yet stopped through its scheduler) once none is,
/// or when [`CANCEL_WAIT`] has passed.
fn wait_for_jobs_stopped(id: &str) -> Result<Vec<JobStatus>> {
    let give_up = Instant::now() + CANCEL_WAIT;
    loop {
        let reply = super::status::fetch(Some(id), None)?;
        let live: Vec<JobStatus> = reply
            .experiments
            .into_iter()
            .flat_map(|e| e.jobs.unwrap_or_default())
            .filter(|j| j.state.is_live())
            .collect();
        if live.is_empty() || Instant::now() >= give_up {
            return Ok(live);
        }
        std::thread::sleep(CANCEL_POLL);
    }
}

/// What `optgate cancel` says of the jobs left live after its wait. Pure.
fn jobs_left(live: &[JobStatus]) -> String {
    if live.is_empty() {
        return "every job of it is stopped (its scheduler told to cancel each)".to_string();
    }
    let names: Vec<String> = live
        .iter()
        .map(|j| match &j.scheduler_job_id {
            Some(sid) => format!("{} (scheduler id {sid})", j.name),
            None => j.name.clone(),
        })
        .collect();
    format!(
        "still live after {} s: {}; the daemon goes on stopping them (`optgate status ID` \
         shows when they end)",
        CANCEL_WAIT.as_secs(),
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use optgate_store::JobRecordState;

    /// The jobs left are named with their scheduler ids; none left says every job is
    /// stopped. Catches a wait that claims "stopped" while jobs are live.
    #[test]
    fn the_jobs_still_live_are_named() {
        let job = |name: &str, sid: Option<&str>| JobStatus {
            name: name.into(),
            block: 1,
            attempt: 1,
            run_ids: vec![],
            scheduler_job_id: sid.map(str::to_string),
            state: JobRecordState::Submitted,
            detail: None,
            scheduler_state: None,
        };
        assert!(jobs_left(&[]).starts_with("every job of it is stopped"));
        let said = jobs_left(&[job("og-x-b001", Some("42")), job("og-x-b002", None)]);
        assert!(
            said.starts_with("still live after 15 s: og-x-b001 (scheduler id 42), og-x-b002;"),
            "{said}"
        );
    }
}
