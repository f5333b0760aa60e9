//! `cancel`: mark an experiment cancelled (committed at once, so `status` shows it and no
//! new work starts) and wake the engine, which cancels its live jobs and builds.

use super::{HandlerResult, unknown};
use crate::context::Daemon;
use crate::protocol::{CancelReply, CancelRequest, Response};

pub async fn cancel(ctx: &Daemon, req: CancelRequest) -> HandlerResult {
    let id = req.id.clone();
    let before = ctx
        .db
        .call(move |s| s.cancel_experiment(&id, "cancelled by the user"))
        .await?;
    let Some(before) = before else {
        return Ok(unknown(&req.id));
    };
    ctx.wake.notify_one();
    let state = if before.is_terminal() {
        before
    } else {
        tracing::info!("experiment {} cancelled (was {before})", req.id);
        optgate_store::ExperimentState::Cancelled
    };
    Ok(Response::Cancelled(CancelReply {
        id: req.id,
        previous_state: before,
        state,
    }))
}
