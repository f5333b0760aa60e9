//! The client side's errors: the state directory refused or unusable ([`PathsError`]), the
//! daemon not reached or refusing ([`ClientError`]), and a read-only answer from the
//! database that failed ([`ReadError`]). Each names the path or the socket and the
//! operation that failed.

use std::path::{Path, PathBuf};

use crate::protocol::ErrorKind;

/// The state directory cannot be found, made or trusted.
#[derive(Debug, thiserror::Error)]
pub enum PathsError {
    #[error(
        "no state directory: set OPTGATE_HOME (or XDG_STATE_HOME or HOME) to where the daemon may keep its state"
    )]
    NoStateDir,
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
}

impl PathsError {
    pub fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> PathsError {
        let path = path.to_path_buf();
        move |source| PathsError::Io { op, path, source }
    }
}

/// A read-only answer from the database (`status`, `report`, `history`) that failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Refused by the state directory's checks, as the daemon would refuse it.
    #[error(transparent)]
    Paths(#[from] PathsError),
    #[error(transparent)]
    Store(#[from] optgate_store::StoreError),
    /// A stored row the answer cannot use (a report that is not valid JSON).
    #[error("experiment {id}: {message}")]
    Experiment { id: String, message: String },
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
    Unreadable(Box<ReadError>),
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
