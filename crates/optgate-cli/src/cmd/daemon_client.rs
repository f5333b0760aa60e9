//! What every command that talks to the daemon shares: the state directory from the
//! environment, the daemon started in the background, and the client's errors as exit
//! codes. Client calls only (`optgate_client`); the engine is not reached from here.

use anyhow::Result;

use optgate_client::protocol::{ErrorKind, Welcome};
use optgate_client::{ClientError, StatePaths, client};

use crate::exit;

/// Starts the daemon in the background with this very binary.
pub fn start(paths: &StatePaths) -> Result<Welcome> {
    let me = std::env::current_exe()?;
    client::start_background(paths, &me).map_err(client_error)
}

pub fn state_paths() -> Result<StatePaths> {
    StatePaths::from_env().map_err(|e| exit::with_code(exit::FAILED, e))
}

/// The exit code a daemon client error means: unreachable → 4, unknown experiment → 3,
/// an invalid experiment or a report that is not ready yet → 2.
pub fn client_error(e: ClientError) -> anyhow::Error {
    let code = match &e {
        e if e.is_unreachable() => exit::NO_DAEMON,
        ClientError::VersionMismatch { .. } => exit::NO_DAEMON,
        ClientError::Refused { kind, .. } => match kind {
            ErrorKind::InvalidExperiment | ErrorKind::NoReport | ErrorKind::BadRequest => {
                exit::INVALID_INPUT
            }
            ErrorKind::ShuttingDown | ErrorKind::Refused | ErrorKind::Busy => exit::NO_DAEMON,
            ErrorKind::UnknownExperiment | ErrorKind::Internal => exit::FAILED,
        },
        _ => exit::FAILED,
    };
    exit::with_code(code, e)
}
