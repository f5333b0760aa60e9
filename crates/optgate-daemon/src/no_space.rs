//! The limits of waiting for space: how long `optgate run` waits, the variable that sets
//! it, and the extra attempts a run gets. Plain constants, so the error types can name
//! them; what a lack of space is lives in `optgate_client::space`, recognising it in
//! errors and waiting for space in `space.rs`.

use std::time::Duration;

/// How long `optgate run` waits for space to return before it gives up (exit 3), counted
/// from the first pass that found its file system full: 2 minutes. The daemon waits for
/// ever (its experiments stay paused, the reason in `status`).
pub const NO_SPACE_GIVE_UP: Duration = Duration::from_secs(120);

/// The variable that overrides [`NO_SPACE_GIVE_UP`] (a duration: `90s`, `10m`).
pub const NO_SPACE_GIVE_UP_VAR: &str = "OPTGATE_NO_SPACE_GIVE_UP";

/// How many attempts more than `scheduler.max_resubmits` allows a run gets when its
/// wrapper could not record it for lack of space (`optgate_wrapper::manifest::NO_SPACE_MARK`):
/// 3. Bounded, so an app that fills the disk itself cannot run for ever.
pub const MAX_NO_SPACE_RETRIES: u32 = 3;
