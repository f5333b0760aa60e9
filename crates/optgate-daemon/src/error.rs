//! The daemon's errors (starting, serving, driving experiments); the client's (reaching
//! the daemon, the state directory) are `optgate_client`'s, wrapped here. Each names the
//! path or the peer and the operation that failed.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The state directory cannot be found, made or trusted.
    #[error(transparent)]
    Paths(#[from] optgate_client::PathsError),
    /// A read-only answer from the database (`status`, `report`) that failed.
    #[error(transparent)]
    Read(#[from] optgate_client::ReadError),
    #[error(transparent)]
    Setting(#[from] SettingError),
    #[error("{task} died {deaths} times within the restart window; the last time: {message}")]
    EngineDied {
        task: &'static str,
        deaths: u32,
        message: String,
    },
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "another optgate daemon{} is already running on {dir}; stop it with `optgate daemon stop` first",
        .pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    AlreadyRunning { dir: PathBuf, pid: Option<u32> },
    #[error(transparent)]
    Store(#[from] optgate_store::StoreError),
    #[error(transparent)]
    Sched(#[from] optgate_sched::SchedError),
    #[error("experiment {id}: {message}")]
    Experiment { id: String, message: String },
    /// A write failed for lack of space; the engine pauses, it never fails for this.
    #[error("{}", .0.reason())]
    NoSpace(optgate_client::space::NoSpace),
    /// `optgate run` waited its limit for space in vain.
    #[error(
        "gave up after waiting {}s for space ({}): {}",
        .waited.as_secs(), crate::no_space::NO_SPACE_GIVE_UP_VAR, .lack.reason()
    )]
    GaveUpOnSpace {
        waited: std::time::Duration,
        lack: optgate_client::space::NoSpace,
    },
    #[error("a database task of the daemon panicked or was cancelled: {0}")]
    Join(String),
}

impl DaemonError {
    pub fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> DaemonError {
        let path = path.to_path_buf();
        move |source| DaemonError::Io { op, path, source }
    }
}

/// A blocking task that panicked or was cancelled, as the daemon reports it.
pub fn join_error(e: tokio::task::JoinError) -> DaemonError {
    DaemonError::Join(e.to_string())
}

/// A setting of the daemon's environment that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingError {
    #[error("{var} is not UTF-8")]
    NotUtf8 { var: &'static str },
    #[error("{var}={value:?}: {source}")]
    NotADuration {
        var: &'static str,
        value: String,
        #[source]
        source: optgate_experiment::DurationError,
    },
    #[error("{var}={value:?} is under the floor of {floor:?}")]
    BelowFloor {
        var: &'static str,
        value: String,
        floor: std::time::Duration,
    },
}
