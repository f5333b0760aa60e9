//! Campaigns through the daemon: `submit` of a campaign file records the campaign (the
//! engine creates its steps, `engine/campaigns.rs`), `status` lists each with its current
//! stage, `report` assembles the campaign report from its steps' stored reports, and
//! `cancel` stops it (its current step's experiment cancelled).

use std::path::{Path, PathBuf};

use optgate_experiment::campaign::{self, Campaign};
use optgate_store::{CampaignRow, CampaignState, NewCampaign, Store, StoreError};

use super::HandlerResult;
use crate::context::Daemon;
use crate::error::DaemonError;
use crate::protocol::{
    CampaignReportReply, CampaignStatus, ErrorKind, ErrorReply, Response, SubmitReply,
};

/// Records a submitted campaign (its text already validated) and wakes the engine, which
/// creates its first stage's experiment.
pub async fn submit(ctx: &Daemon, c: Campaign) -> HandlerResult {
    let first = campaign::load_generated(&c.stage_text(0, &Default::default()), &c.source)
        .map_err(|e| DaemonError::Experiment {
            id: c.name.clone(),
            message: e.to_string(),
        })?
        .experiment;
    let (id, root) = loop {
        let id = crate::ids::new_id();
        let root = first.workdir.join("optgate-runs").join(&c.name).join(&id);
        if !root.exists() {
            break (id, root);
        }
    };
    let new = NewCampaign {
        id: id.clone(),
        name: c.name.clone(),
        source_path: c.source.display().to_string(),
        source_text: c.source_text.clone(),
        root: root.display().to_string(),
    };
    ctx.db.call(move |s| s.insert_campaign(&new)).await?;
    tracing::info!(
        "campaign {id} (`{}`) submitted; runs under {}",
        c.name,
        root.display()
    );
    ctx.wake.notify_one();
    Ok(Response::Submitted(SubmitReply {
        id,
        root,
        recurrence: None,
    }))
}

/// The campaign recorded in `row`, parsed again from its stored text.
pub fn parse(row: &CampaignRow) -> Result<Campaign, String> {
    campaign::load_str(&row.source_text, Path::new(&row.source_path)).map_err(|e| e.to_string())
}

/// Each campaign's status line; the current step named from its experiment's name.
pub fn statuses(s: &Store, only: Option<&str>) -> Result<Vec<CampaignStatus>, StoreError> {
    let mut out = Vec::new();
    for row in s.campaigns()? {
        if only.is_some_and(|id| id != row.id) {
            continue;
        }
        let stages = parse(&row).map_or(0, |c| c.stages.len());
        let current = match row.steps.len() {
            0 => None,
            k if k > stages => Some("confirmation".to_string()),
            k => {
                let name = s
                    .experiment(&row.steps[k - 1])?
                    .map(|e| e.name)
                    .unwrap_or_default();
                let comp = name.rsplit('-').next().unwrap_or_default().to_string();
                Some(format!("stage {k}/{stages} ({comp})"))
            }
        };
        out.push(CampaignStatus {
            id: row.id,
            name: row.name,
            state: row.state,
            reason: row.state_reason,
            stages: stages as u32,
            current,
            experiments: row.steps,
            campaign_file: row.source_path,
            root: row.root,
        });
    }
    Ok(out)
}

/// The campaign report of campaign `row`, from its steps' stored reports (a step still
/// running contributes its latest look's report only once it has ended).
pub fn report(s: &Store, row: CampaignRow) -> HandlerResult {
    let c = match parse(&row) {
        Ok(c) => c,
        Err(why) => return Ok(Response::Error(ErrorReply::new(ErrorKind::Internal, why))),
    };
    let mut steps = Vec::new();
    for id in &row.steps {
        let ended = s.experiment(id)?.is_some_and(|e| e.state.is_terminal());
        let Some(text) = s.report(id)?.filter(|_| ended) else {
            break;
        };
        let rep: optgate_report::Report =
            serde_json::from_str(&text).map_err(|e| DaemonError::Experiment {
                id: id.clone(),
                message: format!("its stored report is not valid JSON: {e}"),
            })?;
        steps.push((id.clone(), rep));
    }
    Ok(Response::CampaignReport(Box::new(CampaignReportReply {
        id: row.id,
        state: row.state,
        report: optgate_report::campaign::assemble(&c, &steps),
    })))
}

/// Cancels campaign `id`: the campaign is recorded cancelled first (so the engine creates
/// no further step), then its current step's experiment is cancelled as `cancel` does.
/// `None`: no such campaign.
pub async fn cancel(ctx: &Daemon, id: &str, reason: &str) -> Result<Option<()>, DaemonError> {
    let (i, r) = (id.to_string(), reason.to_string());
    let row = ctx
        .db
        .call(move |s| {
            let Some(row) = s.campaign(&i)? else {
                return Ok(None);
            };
            if row.state == CampaignState::Running {
                s.set_campaign_state(&i, CampaignState::Cancelled, Some(&r))?;
            }
            Ok(Some(row))
        })
        .await?;
    let Some(row) = row else { return Ok(None) };
    if let Some(current) = row.steps.last() {
        super::cancelling::cancel_experiment(ctx, current, reason).await?;
    }
    Ok(Some(()))
}

/// Where a campaign's step `k` runs.
pub fn step_root(row: &CampaignRow, c: &Campaign, k: usize) -> PathBuf {
    PathBuf::from(&row.root).join(campaign::step_dir(c, k))
}
