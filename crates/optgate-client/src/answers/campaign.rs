//! A campaign from the database: its status line with its current stage, and the campaign
//! report assembled from its steps' stored reports.

use std::path::Path;

use optgate_experiment::campaign::{self, Campaign};
use optgate_store::{CampaignRow, Store, StoreError};

use crate::error::ReadError;
use crate::protocol::{CampaignReportReply, CampaignStatus, ErrorKind, ErrorReply, Response};

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
pub fn report(s: &Store, row: CampaignRow) -> Result<Response, ReadError> {
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
            serde_json::from_str(&text).map_err(|e| ReadError::Experiment {
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
