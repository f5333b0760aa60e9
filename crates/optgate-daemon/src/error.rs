//! The daemon's errors (starting, serving, driving experiments) and the client's (reaching
//! the daemon). Each names the path or the peer and the operation that failed.

use std::path::{Path, PathBuf};

use crate::protocol::ErrorKind;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(
        "no state directory: set OPTGATE_HOME (or XDG_STATE_HOME or HOME) to where the daemon may keep its state"
    )]
    NoStateDir,
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
    #[error("{path} belongs to uid {owner}, not to you; refusing to keep optgate's state there")]
    NotOwner { path: PathBuf, owner: u32 },
    #[error(
        "the state directory {path} is writable by other users (mode {mode:o}): they could plant \
         a database, a log link or a build; refusing to use it. Run `chmod 700 {path}` or set \
         OPTGATE_HOME to a private directory"
    )]
    StateDirWritableByOthers { path: PathBuf, mode: u32 },
    #[error(
        "{path}, above the state directory, is writable by other users (mode {mode:o}) and \
         not sticky: they could rename the state directory and put one of their own in its \
         place; refusing to use it. Run `chmod go-w {path}` or set OPTGATE_HOME to a \
         directory under private ones"
    )]
    AncestorWritableByOthers { path: PathBuf, mode: u32 },
    #[error(
        "{path} is a symbolic link; optgate's state files are never followed through links \
         (another user may have planted it). Remove it, or set OPTGATE_HOME elsewhere"
    )]
    StateFileIsLink { path: PathBuf },
    #[error(
        "the socket path {path} is too long for a Unix socket (at most 107 bytes); set OPTGATE_HOME to a shorter directory"
    )]
    SocketPathTooLong { path: PathBuf },
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
    NoSpace(crate::no_space::NoSpace),
    /// `optgate run` waited its limit for space in vain.
    #[error(
        "gave up after waiting {}s for space ({}): {}",
        .waited.as_secs(), crate::no_space::NO_SPACE_GIVE_UP_VAR, .lack.reason()
    )]
    GaveUpOnSpace {
        waited: std::time::Duration,
        lack: crate::no_space::NoSpace,
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

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "the optgate daemon is not running (no one answers on {socket}); start it with `optgate daemon`"
    )]
    NotRunning { socket: PathBuf },
    #[error("cannot {op} the daemon's socket {socket}: {source}")]
    Io {
        op: &'static str,
        socket: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the daemon at {socket} closed the connection without answering")]
    Closed { socket: PathBuf },
    #[error("the daemon answered something that is not optgate's protocol: {0}")]
    Protocol(String),
    #[error(
        "the running daemon speaks protocol version {daemon} (optgate {daemon_version}) and this optgate speaks {client}; restart it with `optgate daemon stop && optgate daemon`"
    )]
    VersionMismatch {
        daemon: u32,
        daemon_version: String,
        client: u32,
    },
    /// The daemon understood the request and refused it.
    #[error("{message}")]
    Refused { kind: ErrorKind, message: String },
    #[error("cannot start the daemon: {0}")]
    Start(String),
    /// No daemon answered and its database could not be read: refused by the state
    /// directory's checks (as the daemon would refuse it), or unreadable.
    #[error("the daemon is not running, and its database cannot be read: {0}")]
    Unreadable(Box<DaemonError>),
}

impl ClientError {
    /// The connection was dropped during the handshake (reset, broken pipe, closed
    /// before the daemon's hello): the daemon died as it was asked.
    pub fn is_dropped_handshake(&self) -> bool {
        matches!(self, ClientError::Closed { .. })
            || matches!(
                self,
                ClientError::Io { source, .. } if matches!(
                    source.kind(),
                    std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::BrokenPipe
                        | std::io::ErrorKind::UnexpectedEof
                )
            )
    }

    /// The daemon cannot be reached at all (as opposed to refusing a request).
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            ClientError::NotRunning { .. } | ClientError::Io { .. } | ClientError::Start(_)
        )
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
}
