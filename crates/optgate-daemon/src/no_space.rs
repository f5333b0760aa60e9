//! What a lack of space is: the no-space reason and its limits, which file system is full
//! ([`Place`]) and the failed write ([`NoSpace`]). Plain data, so the error types can
//! carry it; recognising it in errors and waiting for space is `space.rs`.

use std::path::PathBuf;
use std::time::Duration;

/// How every no-space reason starts (`status`, the log, `optgate run`'s error); cleared from
/// an experiment's reason when space returns.
pub const NO_SPACE: &str = "no space left on the";

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

/// Which file system is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The daemon's (or `optgate run`'s) state directory: its database, its job registry.
    StateDir,
    /// An experiment's run root (its workdir): run files, job scripts, manifests.
    Workdir,
}

impl Place {
    pub(crate) fn words(self) -> &'static str {
        match self {
            Place::StateDir => "state directory",
            Place::Workdir => "workdir",
        }
    }
}

/// A write that failed for lack of space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoSpace {
    pub place: Place,
    /// A path on the full file system (the state directory, or the file that failed).
    pub path: PathBuf,
    /// Bytes free for unprivileged writes there now (`None`: statvfs failed).
    pub free: Option<u64>,
}

impl NoSpace {
    /// "no space left on the state directory's file system: N bytes free (PATH)".
    pub fn reason(&self) -> String {
        let free = self.free.map_or_else(
            || "free space unknown".to_string(),
            |n| format!("{n} bytes free"),
        );
        format!(
            "{NO_SPACE} {}'s file system: {free} ({})",
            self.place.words(),
            self.path.display()
        )
    }

    /// The reason an experiment shows while the engine waits for space.
    pub fn paused(&self) -> String {
        format!("{}; paused until space returns", self.reason())
    }
}
