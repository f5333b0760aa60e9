//! `status` from the database: the newest experiments (a page of the list, or one, with its
//! jobs) with their state, run counts, blocks, looks and latest decisions — indexed reads of
//! the rows shown and their stored counts, whatever the number of runs in the database.

use optgate_policy::decide::LookSchedule;

use super::recurrence::recurrence_status;
use super::unknown;
use crate::protocol::{
    DaemonInfo, DamagedExperiment, ExperimentStatus, JobStatus, Response, StatusReply,
    StatusRequest,
};

/// The status reply from the database alone: what the daemon answers, and what the CLI
/// shows from a stopped daemon's database (read-only).
pub fn answer(
    s: &optgate_store::Store,
    req: StatusRequest,
    daemon: DaemonInfo,
) -> Result<Response, optgate_store::StoreError> {
    if let Some(id) = &req.id
        && let Some(c) = s.campaign(id)?
    {
        return campaign_status(s, id, &c.steps, daemon);
    }
    let (rows, mut damaged, more) = read_rows(s, &req)?;
    // `optgate run` executions: the one `id` names, or the newest page of them (indexed).
    // A damaged history row is listed as damaged; it never hides the others.
    let executions = match &req.id {
        Some(id) => s.execution_each(id)?.into_iter().collect(),
        None => s.newest_executions_of_kind_each(optgate_store::ExecutionKind::Run, req.limit)?,
    };
    let mut run_executions = Vec::new();
    for e in executions {
        match e {
            Ok(e) if e.kind == optgate_store::ExecutionKind::Run => run_executions.push(e),
            Ok(_) => {}
            Err(d) => damaged.push(DamagedExperiment {
                id: d.id,
                name: d.name,
                problem: format!("its row in the history: {}", d.error),
            }),
        }
    }
    if let Some(id) = &req.id
        && rows.is_empty()
        && damaged.is_empty()
        && run_executions.is_empty()
    {
        return Ok(unknown(id));
    }
    // Per experiment shown: its stored counts, its latest look (and with an id its jobs),
    // each an indexed read, so the cost follows the rows shown, not the database.
    let experiments = rows
        .into_iter()
        .map(|row| experiment_status(s, row, req.id.is_some()))
        .collect::<Result<Vec<_>, optgate_store::StoreError>>()?;
    // The recurrences are part of the list of everything, not of one experiment's view.
    let recurrences = match &req.id {
        Some(_) => Vec::new(),
        None => s
            .recurrences(false)?
            .iter()
            .map(recurrence_status)
            .collect(),
    };
    let campaigns = match &req.id {
        None => super::campaign::statuses(s, None)?,
        Some(_) => Vec::new(),
    };
    Ok(Response::Status(StatusReply {
        daemon,
        experiments,
        damaged,
        run_executions,
        recurrences,
        more,
        campaigns,
    }))
}

/// A campaign's status: the campaign with its current stage, and its steps' experiments
/// (each read by key).
fn campaign_status(
    s: &optgate_store::Store,
    id: &str,
    steps: &[String],
    daemon: DaemonInfo,
) -> Result<Response, optgate_store::StoreError> {
    let mut experiments = Vec::new();
    let mut damaged = Vec::new();
    for step in steps {
        for row in s.experiments_each(Some(step))? {
            match row {
                Ok(row) => experiments.push(experiment_status(s, row, false)?),
                Err(d) => damaged.push(DamagedExperiment {
                    id: d.id,
                    name: d.name,
                    problem: d.error.to_string(),
                }),
            }
        }
    }
    Ok(Response::Status(StatusReply {
        daemon,
        experiments,
        damaged,
        run_executions: Vec::new(),
        recurrences: Vec::new(),
        more: 0,
        campaigns: super::campaign::statuses(s, Some(id))?,
    }))
}

/// One experiment's status line (with its jobs when `with_jobs`).
fn experiment_status(
    s: &optgate_store::Store,
    row: optgate_store::ExperimentRow,
    with_jobs: bool,
) -> Result<ExperimentStatus, optgate_store::StoreError> {
    let schedule = LookSchedule::new(row.replicates, Some(row.max_replicates));
    let look = s.latest_look_of(&row.id)?;
    let jobs = match with_jobs {
        true => Some(s.jobs(&row.id)?.iter().map(job_status).collect()),
        false => None,
    };
    Ok(ExperimentStatus {
        runs: s.run_counts_of(&row.id)?.into(),
        blocks: s.block_count_of(&row.id)?,
        max_blocks: schedule.max,
        looks: look.as_ref().map_or(0, |l| l.look),
        planned_looks: schedule.planned_looks(),
        decisions: look
            .map(|l| {
                serde_json::from_str::<Vec<optgate_policy::staged::VariantDecision>>(&l.decisions)
                    .unwrap_or_default()
            })
            .unwrap_or_default(),
        jobs,
        id: row.id,
        name: row.name,
        state: row.state,
        reason: row.state_reason,
        // The store reads the kind as the enum (a damaged one is its typed error).
        scheduler: row.scheduler,
        experiment_file: row.source_path,
        root: row.root,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

fn job_status(j: &optgate_store::JobRow) -> JobStatus {
    JobStatus {
        name: j.name.clone(),
        block: j.block,
        attempt: j.attempt,
        run_ids: j.run_ids.clone(),
        scheduler_job_id: j.scheduler_job_id.clone(),
        state: j.state,
        detail: j.detail.clone(),
        scheduler_state: j.scheduler_state.clone(),
    }
}

type Rows = (
    Vec<optgate_store::ExperimentRow>,
    Vec<DamagedExperiment>,
    u64,
);

/// The experiment rows (the page of the list, newest first, or the one `id` names) that
/// read, the damaged ones apart — one damaged row is listed as damaged, never an error
/// that hides the others — and how many older ones the page left out.
fn read_rows(
    s: &optgate_store::Store,
    req: &StatusRequest,
) -> Result<Rows, optgate_store::StoreError> {
    let (each, more) = match &req.id {
        Some(id) => (s.experiments_each(Some(id))?, 0),
        None => {
            let page = s.experiments_page(req.limit)?;
            let more = page.total.saturating_sub(page.rows.len() as u64);
            (page.rows, more)
        }
    };
    let (mut rows, mut damaged) = (Vec::new(), Vec::new());
    for row in each {
        match row {
            Ok(row) => rows.push(row),
            Err(d) => damaged.push(DamagedExperiment {
                id: d.id,
                name: d.name,
                problem: d.error.to_string(),
            }),
        }
    }
    Ok((rows, damaged, more))
}
