//! The documented exit codes of `optgate` (also listed in the README and `optgate --help`).

/// Finished; for `gate`: the variant was accepted.
pub const OK: i32 = 0;
/// `gate`: the variant was rejected.
pub const REJECTED: i32 = 1;
/// Invalid input: command-line usage, the experiment file, a samples file.
/// For `gate`: inconclusive or still running.
pub const INVALID_INPUT: i32 = 2;
/// The work failed: a build failed, runs failed, an I/O error, an unknown experiment id.
/// For `gate`: a variant was decided `failed` (its app failed in every run).
pub const FAILED: i32 = 3;
/// The daemon is not running or cannot be reached.
pub const NO_DAEMON: i32 = 4;
/// Stopped by Ctrl-C (128 + SIGINT).
pub const INTERRUPTED: i32 = 130;

/// An error that knows its exit code. Errors without one exit with [`FAILED`].
#[derive(Debug)]
pub struct ExitError {
    pub code: i32,
    pub error: anyhow::Error,
}

impl std::fmt::Display for ExitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

impl std::error::Error for ExitError {}

pub fn with_code(code: i32, error: impl Into<anyhow::Error>) -> anyhow::Error {
    anyhow::Error::new(ExitError {
        code,
        error: error.into(),
    })
}

/// The exit code an error chain asks for.
pub fn code_of(err: &anyhow::Error) -> i32 {
    err.chain()
        .find_map(|e| e.downcast_ref::<ExitError>().map(|x| x.code))
        .unwrap_or(FAILED)
}

/// The experiment file's diagnostics when that is what the error is: they print as they
/// are, each line with its own `FILE:LINE:COL: error:` prefix.
pub fn diagnostics_of(err: &anyhow::Error) -> Option<&optgate_experiment::LoadError> {
    err.chain()
        .find_map(|e| e.downcast_ref::<ExitError>())
        .and_then(|x| x.error.downcast_ref::<optgate_experiment::LoadError>())
        .filter(|e| matches!(e, optgate_experiment::LoadError::Invalid { .. }))
}
