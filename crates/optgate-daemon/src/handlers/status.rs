//! `status`: every experiment (or one, with its jobs) with its state, run counts, blocks,
//! looks and latest decisions — a handful of grouped queries whatever the number of runs.

use super::{HandlerResult, unknown};
use crate::context::Daemon;
use crate::protocol::{
    DamagedExperiment, ExperimentStatus, JobStatus, Response, StatusReply, StatusRequest,
};
use optgate_policy::decide::LookSchedule;

pub async fn status(ctx: &Daemon, req: StatusRequest) -> HandlerResult {
    let info = ctx.info();
    let mut reply = ctx.db.call(move |s| answer(s, req, info)).await?;
    // A full state directory pauses every active experiment; the database may not hold
    // the reason (it cannot be written), the engine's watch does. (A full workdir's
    // reason is on its experiment in the database.)
    if let (Some((_, lack)), Response::Status(r)) = (ctx.space.now(), &mut reply)
        && lack.place == crate::space::Place::StateDir
    {
        for e in r.experiments.iter_mut().filter(|e| !e.state.is_terminal()) {
            e.reason = Some(lack.paused());
        }
    }
    Ok(reply)
}

/// The status reply from the database alone: what the daemon answers, and what the CLI
/// shows from a stopped daemon's database (read-only).
pub fn answer(
    s: &optgate_store::Store,
    req: StatusRequest,
    daemon: crate::protocol::DaemonInfo,
) -> Result<Response, optgate_store::StoreError> {
    if let Some(id) = &req.id
        && let Some(c) = s.campaign(id)?
    {
        // A campaign: it and its steps' experiments.
        let Response::Status(mut all) = answer(s, StatusRequest { id: None }, daemon)? else {
            return Ok(unknown(id));
        };
        all.experiments.retain(|e| c.steps.contains(&e.id));
        all.campaigns = super::campaign::statuses(s, Some(id))?;
        return Ok(Response::Status(all));
    }
    let one = req.id.clone();
    let (rows, damaged) = read_rows(s, one.as_deref())?;
    // Grouped queries: the cost does not grow with the number of experiments.
    let blocks = s.block_counts()?;
    let jobs = match &one {
        Some(id) => Some(s.jobs(id)?),
        None => None,
    };
    let (mut counts, mut looks) = (s.run_counts()?, s.latest_looks()?);
    if let Some(id) = &req.id
        && rows.is_empty()
        && damaged.is_empty()
    {
        return Ok(unknown(id));
    }
    let experiments = rows
        .into_iter()
        .map(|row| {
            // The store reads the kind as the enum (a damaged one is its typed error).
            let scheduler = row.scheduler;
            let schedule = LookSchedule::new(row.replicates, Some(row.max_replicates));
            let look = looks.remove(&row.id);
            Ok(ExperimentStatus {
                runs: counts.remove(&row.id).unwrap_or_default().into(),
                blocks: blocks.get(&row.id).copied().unwrap_or(0),
                max_blocks: schedule.max,
                looks: look.as_ref().map_or(0, |l| l.look),
                planned_looks: schedule.planned_looks(),
                decisions: look
                    .map(|l| {
                        serde_json::from_str::<Vec<optgate_policy::staged::VariantDecision>>(
                            &l.decisions,
                        )
                        .unwrap_or_default()
                    })
                    .unwrap_or_default(),
                jobs: jobs.as_ref().map(|jobs| {
                    jobs.iter()
                        .map(|j| JobStatus {
                            name: j.name.clone(),
                            block: j.block,
                            attempt: j.attempt,
                            run_ids: j.run_ids.clone(),
                            scheduler_job_id: j.scheduler_job_id.clone(),
                            state: j.state,
                            detail: j.detail.clone(),
                            scheduler_state: j.scheduler_state.clone(),
                        })
                        .collect()
                }),
                id: row.id,
                name: row.name,
                state: row.state,
                reason: row.state_reason,
                scheduler,
                experiment_file: row.source_path,
                root: row.root,
                created_at: row.created_at,
                updated_at: row.updated_at,
            })
        })
        .collect::<Result<Vec<_>, optgate_store::StoreError>>()?;
    let campaigns = match &one {
        None => super::campaign::statuses(s, None)?,
        Some(_) => Vec::new(),
    };
    Ok(Response::Status(StatusReply {
        daemon,
        experiments,
        damaged,
        campaigns,
    }))
}

/// The experiment rows (all, or the one `id` names) that read, and the damaged ones apart:
/// one damaged row is listed as damaged, never an error that hides the others.
fn read_rows(
    s: &optgate_store::Store,
    id: Option<&str>,
) -> Result<(Vec<optgate_store::ExperimentRow>, Vec<DamagedExperiment>), optgate_store::StoreError>
{
    let (mut rows, mut damaged) = (Vec::new(), Vec::new());
    for row in s.experiments_each(id)? {
        match row {
            Ok(row) => rows.push(row),
            Err(d) => damaged.push(DamagedExperiment {
                id: d.id,
                name: d.name,
                problem: d.error.to_string(),
            }),
        }
    }
    Ok((rows, damaged))
}
