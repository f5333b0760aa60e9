//! `report`: the latest report of an experiment, as stored with its latest look (or at its
//! end). Before the first look there is none, and the reply says how far the runs are.

use super::{HandlerResult, unknown};
use crate::context::Daemon;
use crate::protocol::{ErrorKind, ErrorReply, ReportReply, ReportRequest, Response};

pub async fn report(ctx: &Daemon, req: ReportRequest) -> HandlerResult {
    let id = req.id.clone();
    let found = ctx
        .db
        .call(move |s| {
            let Some(row) = s.experiment(&id)? else {
                return Ok(None);
            };
            let counts = s.run_counts()?.remove(&id).unwrap_or_default();
            Ok(Some((row, counts, s.report(&id)?)))
        })
        .await?;
    let Some((row, counts, report)) = found else {
        return Ok(unknown(&req.id));
    };
    match report {
        Some(text) => {
            let report =
                serde_json::from_str(&text).map_err(|e| crate::error::DaemonError::Experiment {
                    id: req.id.clone(),
                    message: format!("its stored report is not valid JSON: {e}"),
                })?;
            Ok(Response::Report(ReportReply {
                id: req.id,
                state: row.state.to_string(),
                report,
            }))
        }
        None if row.state.is_terminal() => Ok(Response::Error(ErrorReply::new(
            ErrorKind::NoReport,
            format!(
                "experiment {} ended ({}) before its first look, so it has no report{}",
                req.id,
                row.state,
                row.state_reason
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ),
        ))),
        None => Ok(Response::Error(ErrorReply::new(
            ErrorKind::NoReport,
            format!(
                "experiment {} is {} ({} of {} runs done) and has no report yet: the first comes when its first {} blocks are complete",
                req.id,
                row.state,
                counts.done(),
                counts.total,
                row.replicates
            ),
        ))),
    }
}
