//! Reads of run directories off the engine's loop, each with a deadline: one experiment's
//! files (on a hung file system, or anything else that blocks) never hold up the others.

use std::time::Duration;

use crate::error::DaemonError;

/// How long one read of an experiment's run directories (a job's run outcomes, fail
/// fast's collection, a look, the plan of its next jobs) may take before the pass gives
/// up on it: 60 s. The experiment's pass ends in an error of its own (after
/// `MAX_EXPERIMENT_ERRORS` in a row it ends `failed`); the engine goes on with the others.
/// Run-directory files are opened without blocking, so this is the backstop for a file
/// system that stops answering.
pub const RUN_FILES_DEADLINE: Duration = Duration::from_secs(60);

/// `read` (blocking: it reads run directories of experiment `id`) on the blocking pool,
/// given up after [`RUN_FILES_DEADLINE`]; `what` names the read in the error.
pub(crate) async fn read_run_files<T: Send + 'static>(
    id: &str,
    what: &str,
    read: impl FnOnce() -> T + Send + 'static,
) -> Result<T, DaemonError> {
    read_within(RUN_FILES_DEADLINE, id, what, read).await
}

/// [`read_run_files`] with the deadline given.
async fn read_within<T: Send + 'static>(
    deadline: Duration,
    id: &str,
    what: &str,
    read: impl FnOnce() -> T + Send + 'static,
) -> Result<T, DaemonError> {
    let reading = tokio::task::spawn_blocking(move || {
        crate::failpoint::stall("read-run-files");
        read()
    });
    match tokio::time::timeout(deadline, reading).await {
        Ok(joined) => joined.map_err(crate::error::join_error),
        Err(_) => Err(DaemonError::Experiment {
            id: id.to_string(),
            message: format!(
                "reading its run directories ({what}) did not finish within {deadline:?}: a \
                 file there blocks, or its file system does not answer"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read past its deadline is the experiment's error, naming the read, while the
    /// caller goes on; one within it returns its value. Catches the deadline not applied
    /// (the call would wait for the slow read and return its value).
    #[tokio::test]
    async fn a_read_past_its_deadline_is_the_experiments_error() {
        let slow = read_within(Duration::from_millis(50), "e1", "a look", || {
            std::thread::sleep(Duration::from_secs(2));
            7
        })
        .await;
        match slow {
            Err(DaemonError::Experiment { id, message }) => {
                assert_eq!(id, "e1");
                assert!(
                    message.contains("(a look) did not finish within 50ms"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        let quick = read_within(Duration::from_secs(30), "e1", "a look", || 7).await;
        assert_eq!(quick.unwrap(), 7);
    }
}
