//! The one place that spawns a script and waits for it: own process group (so a time limit
//! or Ctrl-C stops the whole tree), output to files, a time limit, and cancellation.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

/// How long a stopped process group gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(5);
/// How long a failed child's end waits for a cancellation already on its way. A scheduler
/// stopping a job (time limit, `scancel`) signals the launcher (`srun`) and optgate
/// together; the launcher may exit first, and its failure is then that stop, not the app's.
const CANCEL_RACE: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessEnd {
    Exited(i32),
    Signaled(i32),
    TimedOut,
    Cancelled,
}

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Runs `bash script` in `cwd` with stdout and stderr written to the given files.
pub async fn run_script(
    script: &Path,
    cwd: &Path,
    stdout: &Path,
    stderr: &Path,
    time_limit: Option<Duration>,
    cancel: &CancellationToken,
) -> Result<ProcessEnd, ProcessError> {
    let argv = vec!["bash".to_string(), script.display().to_string()];
    run_command(&argv, cwd, stdout, stderr, time_limit, cancel).await
}

/// Runs `argv` in `cwd` in its own process group with stdout and stderr written to the
/// given files; stops the whole group at the time limit or on cancellation.
pub async fn run_command(
    argv: &[String],
    cwd: &Path,
    stdout: &Path,
    stderr: &Path,
    time_limit: Option<Duration>,
    cancel: &CancellationToken,
) -> Result<ProcessEnd, ProcessError> {
    let open = |p: &Path| {
        std::fs::File::create(p).map_err(|source| ProcessError::Io {
            op: "create",
            path: p.to_path_buf(),
            source,
        })
    };
    let out = open(stdout)?;
    let err = open(stderr)?;
    let script = Path::new(argv.first().map(String::as_str).unwrap_or("bash"));
    let mut child = Command::new(script)
        .args(&argv[1..])
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| ProcessError::Io {
            op: "start",
            path: script.to_path_buf(),
            source,
        })?;
    let pgid = child.id().map(|id| Pid::from_raw(id as i32));
    let limit = async {
        match time_limit {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let stopped = tokio::select! {
        status = child.wait() => {
            let status = status.map_err(|source| ProcessError::Io { op: "wait for", path: script.to_path_buf(), source })?;
            let end = exit_of(status);
            if end != ProcessEnd::Exited(0)
                && tokio::time::timeout(CANCEL_RACE, cancel.cancelled()).await.is_ok()
            {
                return Ok(ProcessEnd::Cancelled);
            }
            return Ok(end);
        }
        _ = limit => ProcessEnd::TimedOut,
        _ = cancel.cancelled() => ProcessEnd::Cancelled,
    };
    if let Some(pg) = pgid {
        let _ = crate::signal::signal_group(pg, Signal::SIGTERM);
        if tokio::time::timeout(GRACE, child.wait()).await.is_err() {
            let _ = crate::signal::signal_group(pg, Signal::SIGKILL);
            let _ = child.wait().await;
        }
    }
    Ok(stopped)
}

fn exit_of(status: std::process::ExitStatus) -> ProcessEnd {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => ProcessEnd::Exited(c),
        (None, Some(s)) => ProcessEnd::Signaled(s),
        (None, None) => ProcessEnd::Exited(-1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The child fails because the job is being stopped, and the stop reaches us a moment
    /// after the child ended: the run is interrupted (re-planned), not failed (counted).
    #[tokio::test]
    async fn a_failure_that_races_a_cancellation_is_a_cancellation() {
        let dir = tempfile::tempdir().unwrap();
        let flag = dir.path().join("dying");
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        let f = flag.clone();
        tokio::spawn(async move {
            while !f.exists() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            c.cancel();
        });
        let argv = vec![
            "sh".to_string(),
            "-c".to_string(),
            format!("touch '{}'; exit 143", flag.display()),
        ];
        let end = run_command(
            &argv,
            dir.path(),
            &dir.path().join("out"),
            &dir.path().join("err"),
            None,
            &cancel,
        )
        .await
        .unwrap();
        assert_eq!(end, ProcessEnd::Cancelled);
    }

    #[tokio::test]
    async fn a_plain_failure_stays_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let argv = vec!["sh".to_string(), "-c".to_string(), "exit 3".to_string()];
        let end = run_command(
            &argv,
            dir.path(),
            &dir.path().join("out"),
            &dir.path().join("err"),
            None,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(end, ProcessEnd::Exited(3));
    }
}
