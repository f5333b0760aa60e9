//! `report` from the database: the latest report of an experiment, as stored with its
//! latest look (or at its end), or a campaign's report from its steps'. Before the first
//! look there is none, and the reply says how far the runs are.

use super::unknown;
use crate::error::ReadError;
use crate::protocol::{ErrorKind, ErrorReply, ReportReply, ReportRequest, Response};

/// The report reply from the database alone (the daemon's answer, and the CLI's from a
/// stopped daemon's database).
pub fn answer(s: &optgate_store::Store, req: ReportRequest) -> Result<Response, ReadError> {
    let id = req.id.clone();
    if let Some(c) = s.campaign(&id)? {
        return super::campaign::report(s, c);
    }
    let Some(row) = s.experiment(&id)? else {
        return Ok(unknown(&req.id));
    };
    let counts = s.run_counts_of(&id)?;
    let report = s.report(&id)?;
    match report {
        Some(text) => {
            let report = serde_json::from_str(&text).map_err(|e| ReadError::Experiment {
                id: req.id.clone(),
                message: format!("its stored report is not valid JSON: {e}"),
            })?;
            Ok(Response::Report(ReportReply {
                id: req.id,
                state: row.state,
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
