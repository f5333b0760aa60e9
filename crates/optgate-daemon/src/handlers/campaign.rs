//! Campaigns through the daemon: `submit` of a campaign file records the campaign (the
//! engine creates its steps, `engine/campaigns.rs`) and `cancel` stops it (its current
//! step's experiment cancelled). `status` and `report` of a campaign are answered from the
//! database, `optgate_client::answers::campaign`.

use std::path::PathBuf;

use optgate_client::protocol::{Response, SubmitReply};
use optgate_experiment::campaign::{self, Campaign};
use optgate_store::{CampaignRow, CampaignState, NewCampaign};

use super::HandlerResult;
use crate::context::Daemon;
use crate::error::DaemonError;

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
pub fn stage_root(row: &CampaignRow, c: &Campaign, k: usize) -> PathBuf {
    PathBuf::from(&row.root).join(campaign::step_dir(c, k))
}
