//! `report`: the latest report of an experiment or a campaign, answered from the database
//! (`optgate_client::answers::report`).

use optgate_client::answers::report::answer;
use optgate_client::protocol::ReportRequest;

use super::HandlerResult;
use crate::context::Daemon;
use crate::error::DaemonError;

pub async fn report(ctx: &Daemon, req: ReportRequest) -> HandlerResult {
    ctx.db
        .call(move |s| Ok(answer(s, req)))
        .await?
        .map_err(DaemonError::from)
}
