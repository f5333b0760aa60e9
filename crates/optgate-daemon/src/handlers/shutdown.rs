//! `shutdown`: stop the daemon. The engine finishes the database writes of its current
//! pass; jobs keep running under their scheduler (local jobs stay detached) and a
//! restarted daemon picks them up through reconciliation.

use optgate_client::protocol::{Response, ShutdownRequest};

use super::HandlerResult;
use crate::context::Daemon;

pub async fn shutdown(ctx: &Daemon, _req: ShutdownRequest) -> HandlerResult {
    tracing::info!("stop requested over the socket");
    ctx.shutdown.cancel();
    Ok(Response::ShuttingDown)
}
