//! What a lack of space is, as plain data: which file system is full ([`Place`]), the
//! failed write ([`NoSpace`]) with the reason every message gives, and the bytes free
//! there. Recognising it in errors and waiting for space are the daemon's (`space.rs`).

use std::path::{Path, PathBuf};

/// How every no-space reason starts (`status`, the log, `optgate run`'s error); cleared from
/// an experiment's reason when space returns.
pub const NO_SPACE: &str = "no space left on the";

/// Which file system is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The daemon's (or `optgate run`'s) state directory: its database, its job registry.
    StateDir,
    /// An experiment's run root (its workdir): run files, job scripts, manifests.
    Workdir,
}

impl Place {
    fn words(self) -> &'static str {
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

/// Bytes available to unprivileged writers on the file system holding `path` (or the
/// nearest ancestor that exists).
pub fn bytes_free(path: &Path) -> Option<u64> {
    let existing = path.ancestors().find(|p| p.exists())?;
    let st = nix::sys::statvfs::statvfs(existing).ok()?;
    Some(st.blocks_available() as u64 * st.fragment_size() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_names_the_place_and_the_free_bytes() {
        let lack = NoSpace {
            place: Place::StateDir,
            path: "/s".into(),
            free: Some(4096),
        };
        assert_eq!(
            lack.reason(),
            "no space left on the state directory's file system: 4096 bytes free (/s)"
        );
        assert!(lack.paused().ends_with("(/s); paused until space returns"));
    }
}
