//! The engine's campaign step, at the start of each pass: a running campaign whose last
//! step's experiment has ended gets its next step — the next stage's experiment (its
//! baseline carrying the winners replayed from the stored reports), the confirmation, or
//! its end. The step and its experiment are one transaction
//! (`Store::insert_campaign_stage`), committed before anything runs, so a daemon killed at
//! any moment resumes the campaign where it was: a finished stage is never run again (its
//! step is recorded) and a running one resumes as any experiment does.

use std::path::Path;

use optgate_client::answers::campaign::parse;
use optgate_experiment::campaign::{self, CampaignNext};
use optgate_store::{CampaignRow, CampaignState, ExperimentState};

use super::Engine;
use crate::error::DaemonError;
use crate::handlers::campaign::stage_root;

/// What a campaign's steps say now, read from the store.
enum Standing {
    /// Its last step is still running.
    Busy,
    /// Its last step was cancelled (so is the campaign), with the reason.
    Cancelled(String),
    /// A stage ended without a report to pick a winner from.
    Broken(String),
    /// The ended steps' reports' variants, in step order.
    Ended(Vec<Vec<optgate_stats::VariantAnalysis>>),
}

impl Engine {
    /// Advances every running campaign by at most one step. Returns whether anything
    /// changed.
    pub(super) async fn advance_campaigns(&mut self) -> Result<bool, DaemonError> {
        let rows = self.ctx.db.call(|s| s.campaigns()).await?;
        let mut changed = false;
        for row in rows
            .into_iter()
            .filter(|r| r.state == CampaignState::Running)
        {
            changed |= self.advance_campaign(row).await?;
        }
        Ok(changed)
    }

    async fn advance_campaign(&mut self, row: CampaignRow) -> Result<bool, DaemonError> {
        let c = match parse(&row) {
            Ok(c) => c,
            Err(why) => {
                return self
                    .end_campaign(&row.id, CampaignState::Failed, &why)
                    .await;
            }
        };
        let steps = row.steps.clone();
        let standing = self.ctx.db.call(move |s| standing(s, &steps)).await?;
        let reports = match standing {
            Standing::Busy => return Ok(false),
            Standing::Cancelled(why) => {
                return self
                    .end_campaign(&row.id, CampaignState::Cancelled, &why)
                    .await;
            }
            Standing::Broken(why) => {
                return self
                    .end_campaign(&row.id, CampaignState::Failed, &why)
                    .await;
            }
            Standing::Ended(r) => r,
        };
        let lists: Vec<&[optgate_stats::VariantAnalysis]> =
            reports.iter().map(Vec::as_slice).collect();
        let k = row.steps.len();
        let text = match campaign::advance(&c, &lists).1 {
            CampaignNext::Stage(_, t) | CampaignNext::Confirmation(t) => t,
            CampaignNext::NoCombination(why) => {
                return self
                    .end_campaign(&row.id, CampaignState::Finished, &why)
                    .await;
            }
            CampaignNext::Finished => {
                let why = "the confirmation ended";
                return self
                    .end_campaign(&row.id, CampaignState::Finished, why)
                    .await;
            }
        };
        let exp = match campaign::load_generated(&text, Path::new(&row.source_path)) {
            Ok(l) => l.experiment,
            Err(e) => {
                let why = format!("step {} does not load: {e}", k + 1);
                return self
                    .end_campaign(&row.id, CampaignState::Failed, &why)
                    .await;
            }
        };
        let id = format!("{}-{}", row.id, k + 1);
        let root = stage_root(&row, &c, k);
        let step = Some((row.id.clone(), k as u32));
        crate::handlers::submit::record_new_stage(&self.ctx, &exp, &id, &root, exp.kind, step)
            .await?;
        tracing::info!("campaign {}: step {} is experiment {id}", row.id, k + 1);
        Ok(true)
    }

    async fn end_campaign(
        &self,
        id: &str,
        state: CampaignState,
        why: &str,
    ) -> Result<bool, DaemonError> {
        tracing::info!("campaign {id} {state}: {why}");
        let (i, w) = (id.to_string(), why.to_string());
        self.ctx
            .db
            .call(move |s| s.set_campaign_state(&i, state, Some(&w)))
            .await?;
        Ok(true)
    }
}

/// The campaign's steps as the store has them.
fn standing(
    s: &optgate_store::Store,
    steps: &[String],
) -> Result<Standing, optgate_store::StoreError> {
    let mut reports = Vec::new();
    for (k, id) in steps.iter().enumerate() {
        let Some(e) = s.experiment(id)? else {
            return Ok(Standing::Broken(format!(
                "step {} ({id}) is not recorded",
                k + 1
            )));
        };
        if !e.state.is_terminal() {
            return Ok(Standing::Busy);
        }
        if e.state == ExperimentState::Cancelled {
            let why = e.state_reason.unwrap_or_else(|| "cancelled".into());
            return Ok(Standing::Cancelled(format!(
                "step {} ({id}) was cancelled: {why}",
                k + 1
            )));
        }
        let parsed = s
            .report(id)?
            .and_then(|t| serde_json::from_str::<optgate_report::Report>(&t).ok());
        let Some(r) = parsed else {
            let why = e.state_reason.unwrap_or_else(|| e.state.to_string());
            return Ok(Standing::Broken(format!(
                "step {} ({id}) ended ({}) without a report: {why}",
                k + 1,
                e.state
            )));
        };
        reports.push(r.analysis.variants);
    }
    Ok(Standing::Ended(reports))
}
