//! The read-only answers to `status` and `report`, from the database alone: what the
//! running daemon replies (its handlers call these) and what `optgate` reads from a
//! stopped daemon's database ([`crate::client::call_or_read`]). Queries over
//! `optgate-store` and renderings of `optgate-report`; no engine state, no writes.

pub mod campaign;
pub mod recurrence;
pub mod report;
pub mod status;

use crate::protocol::{ErrorKind, ErrorReply, Response};

/// The reply for an experiment id the daemon does not know.
pub fn unknown(id: &str) -> Response {
    Response::Error(ErrorReply::new(
        ErrorKind::UnknownExperiment,
        format!("no experiment `{id}`; `optgate status` lists them"),
    ))
}
