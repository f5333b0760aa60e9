//! `optgate cancel ID`: no new work for the experiment, its live jobs cancelled; `optgate
//! cancel R<n>`: the recurrence submits no more executions.

use anyhow::Result;

use optgate_daemon::client;
use optgate_daemon::protocol::{CancelRequest, Request, Response};

use super::daemon::{client_error, state_paths};
use crate::exit;

pub fn cancel(id: &str) -> Result<i32> {
    let paths = state_paths()?;
    let request = Request::Cancel(CancelRequest { id: id.to_string() });
    match client::call(&paths, &request).map_err(client_error)? {
        Response::Cancelled(r) if r.previous_state == r.state => {
            eprintln!(
                "optgate: experiment {} already ended ({}); nothing to cancel",
                r.id, r.state
            );
            Ok(exit::OK)
        }
        Response::RecurrenceCancelled(r) if r.previous_state == r.state => {
            eprintln!("optgate: recurrence {} was already cancelled", r.id);
            Ok(exit::OK)
        }
        Response::RecurrenceCancelled(r) => {
            eprintln!(
                "optgate: recurrence {} cancelled: no more re-submissions (an execution still \
                 running goes on; cancel it by its id to stop it)",
                r.id
            );
            Ok(exit::OK)
        }
        Response::Cancelled(r) => {
            eprintln!(
                "optgate: experiment {} cancelled (was {}); its live jobs are being stopped",
                r.id, r.previous_state
            );
            Ok(exit::OK)
        }
        other => Err(anyhow::anyhow!(
            "the daemon answered {other:?} to a cancellation"
        )),
    }
}
