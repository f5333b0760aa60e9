//! The engine's cancel of one experiment: what `optgate cancel`, a campaign's cancel and
//! Ctrl-C in `optgate run` all do. A leaf beside the handlers that use it (`cancel.rs`,
//! `campaign.rs`, which also cancel each other's things).

use optgate_store::ExperimentState;

use crate::context::Daemon;
use crate::error::DaemonError;

/// The engine's cancel: records experiment `id` cancelled with `reason` (its pending runs
/// with it) unless it already ended, and wakes the engine, whose next pass stops its live
/// jobs and builds and records their runs (`Engine::stop_ended`). Returns the state before
/// the call, or `None` for an unknown id.
pub async fn cancel_experiment(
    ctx: &Daemon,
    id: &str,
    reason: &str,
) -> Result<Option<ExperimentState>, DaemonError> {
    let (i, r) = (id.to_string(), reason.to_string());
    let before = ctx.db.call(move |s| s.cancel_experiment(&i, &r)).await?;
    if let Some(b) = before
        && !b.is_terminal()
    {
        tracing::info!("experiment {id} cancelled (was {b}): {reason}");
    }
    ctx.wake.notify_one();
    Ok(before)
}
