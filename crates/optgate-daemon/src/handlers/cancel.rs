//! `cancel`: mark an experiment cancelled (committed at once, so `status` shows it and no
//! new work starts) and wake the engine, which cancels its live jobs and builds. The same
//! `cancelling::cancel_experiment` is what Ctrl-C in `optgate run` (`foreground.rs`) and
//! a campaign's cancel do: the one cancel of an experiment. `R<n>`
//! names a recurrence: cancelling it stops its re-submissions.

use optgate_client::answers::unknown;
use optgate_client::protocol::{
    CancelReply, CancelRequest, ErrorKind, ErrorReply, RecurrenceCancelReply, Response,
    parse_recurrence_name, recurrence_name,
};
use optgate_store::{ExperimentState, RecurrenceState};

use super::HandlerResult;
use super::cancelling::cancel_experiment;
use crate::context::Daemon;

/// The reason a user's `optgate cancel` records.
pub const BY_THE_USER: &str = "cancelled by the user";

pub async fn cancel(ctx: &Daemon, req: CancelRequest) -> HandlerResult {
    if let Some(n) = parse_recurrence_name(&req.id) {
        return cancel_recurrence(ctx, &req.id, n).await;
    }
    if super::campaign::cancel(ctx, &req.id, BY_THE_USER)
        .await?
        .is_some()
    {
        return Ok(Response::Cancelled(CancelReply {
            id: req.id,
            previous_state: ExperimentState::Running,
            state: ExperimentState::Cancelled,
        }));
    }
    let Some(before) = cancel_experiment(ctx, &req.id, BY_THE_USER).await? else {
        return Ok(unknown(&req.id));
    };
    let state = if before.is_terminal() {
        before
    } else {
        ExperimentState::Cancelled
    };
    Ok(Response::Cancelled(CancelReply {
        id: req.id,
        previous_state: before,
        state,
    }))
}

/// `cancel R<n>`: the recurrence submits no more executions (committed at once); the one
/// running goes on (cancel it by its id to stop it too).
async fn cancel_recurrence(ctx: &Daemon, name: &str, n: i64) -> HandlerResult {
    let Some(before) = ctx.db.call(move |s| s.cancel_recurrence(n)).await? else {
        return Ok(Response::Error(ErrorReply::new(
            ErrorKind::UnknownExperiment,
            format!("no recurrence `{name}`; `optgate status` lists them"),
        )));
    };
    tracing::info!("recurrence {name} cancelled (was {before})");
    Ok(Response::RecurrenceCancelled(RecurrenceCancelReply {
        id: recurrence_name(n),
        previous_state: before,
        state: RecurrenceState::Cancelled,
    }))
}
