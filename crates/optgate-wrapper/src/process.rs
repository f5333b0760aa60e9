//! The one place that spawns a script and waits for it: own process group (so a time limit
//! or Ctrl-C stops the whole tree), output to files, a time limit, and cancellation.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio_util::sync::CancellationToken;

/// How long a stopped process group gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(5);
/// How long a failed child's end waits for a cancellation already on its way. A scheduler
/// stopping a job (time limit, `scancel`) signals the launcher (`srun`) and optgate
/// together; the launcher may exit first, and its failure is then that stop, not the app's.
const CANCEL_RACE: Duration = Duration::from_secs(1);
/// How long a SIGKILLed group is given to disappear before the run's end is recorded.
const KILL_SETTLE: Duration = Duration::from_secs(2);
/// How often a stopped group is checked for members left behind during [`GRACE`].
const GROUP_POLL: Duration = Duration::from_millis(50);

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
    run_command(&argv, cwd, stdout, stderr, time_limit, cancel)
        .await
        .map(|f| f.end)
}

/// CPU time and peak memory of a child and every descendant it waited for, as the kernel
/// accounted them when the child was reaped (`wait4`'s `struct rusage`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChildUsage {
    pub user_s: f64,
    pub system_s: f64,
    /// The largest resident set of any one process of the tree (not their sum), KiB.
    pub max_rss_kib: u64,
}

/// How a command ended, and what it used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Finished {
    pub end: ProcessEnd,
    /// None only when the wait itself failed after the child ended.
    pub usage: Option<ChildUsage>,
    /// What the samples of the command's tree's threads found (None: not sampled, such as
    /// a run stopped before it started).
    pub threads: Option<crate::threads::SampledThreads>,
}

/// Kills the group if the future that started it is dropped before the child was reaped
/// (a task aborted mid-run): the run's processes never outlive the code that owns them.
struct GroupGuard {
    pgid: Pid,
    reaped: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = crate::signal::signal_group(self.pgid, Signal::SIGKILL);
        }
    }
}

/// Waits for `pid` with `wait4`, retrying on EINTR. Blocking: run it on a blocking thread.
pub(crate) fn wait4_blocking(pid: i32) -> std::io::Result<(std::process::ExitStatus, ChildUsage)> {
    use std::os::unix::process::ExitStatusExt;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `rusage` is plain data the kernel fills in; both pointers are valid for
        // the duration of the call.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            return Ok((
                std::process::ExitStatus::from_raw(status),
                ChildUsage {
                    user_s: secs(usage.ru_utime),
                    system_s: secs(usage.ru_stime),
                    // Linux reports ru_maxrss in KiB.
                    max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
                },
            ));
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Runs `argv` in `cwd` in its own process group with stdout and stderr written to the
/// given files; stops the whole group at the time limit or on cancellation, and reports
/// the tree's CPU time and peak memory.
///
/// The child is reaped with `wait4` on a blocking thread rather than through tokio's
/// child handle, because only `wait4` returns the reaped tree's `rusage`; per child, not
/// per process (`RUSAGE_CHILDREN` would mix runs of the same process).
pub async fn run_command(
    argv: &[String],
    cwd: &Path,
    stdout: &Path,
    stderr: &Path,
    time_limit: Option<Duration>,
    cancel: &CancellationToken,
) -> Result<Finished, ProcessError> {
    use std::os::unix::process::CommandExt;
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
    let child = std::process::Command::new(script)
        .args(&argv[1..])
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|source| ProcessError::Io {
            op: "start",
            path: script.to_path_buf(),
            source,
        })?;
    let pid = child.id() as i32;
    // The std handle is not used again: the blocking thread below reaps the child.
    drop(child);
    let sampler = crate::threads::ThreadSampler::start(pid);
    let (end, usage) = reap_or_stop(pid, script, time_limit, cancel).await?;
    Ok(Finished {
        end,
        usage,
        threads: Some(sampler.stop()),
    })
}

/// Waits for the started child `pid` (group leader of its own group) to end, or stops its
/// group at the time limit or on cancellation; how it ended and what the tree used.
async fn reap_or_stop(
    pid: i32,
    script: &Path,
    time_limit: Option<Duration>,
    cancel: &CancellationToken,
) -> Result<(ProcessEnd, Option<ChildUsage>), ProcessError> {
    let mut guard = GroupGuard {
        pgid: Pid::from_raw(pid),
        reaped: false,
    };
    let mut waiter = tokio::task::spawn_blocking(move || wait4_blocking(pid));
    let wait_err = |source: std::io::Error| ProcessError::Io {
        op: "wait for",
        path: script.to_path_buf(),
        source,
    };
    let joined = |r: Result<std::io::Result<_>, tokio::task::JoinError>| {
        r.unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())))
    };
    let limit = async {
        match time_limit {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let stopped = tokio::select! {
        r = &mut waiter => {
            guard.reaped = true;
            let (status, usage) = joined(r).map_err(wait_err)?;
            let end = exit_of(status);
            if end != ProcessEnd::Exited(0)
                && tokio::time::timeout(CANCEL_RACE, cancel.cancelled()).await.is_ok()
            {
                return Ok((ProcessEnd::Cancelled, Some(usage)));
            }
            return Ok((end, Some(usage)));
        }
        _ = limit => ProcessEnd::TimedOut,
        _ = cancel.cancelled() => ProcessEnd::Cancelled,
    };
    let usage = stop_group(guard.pgid, &mut waiter).await;
    guard.reaped = true;
    Ok((stopped, joined(Ok(usage)).ok().map(|(_, u)| u)))
}

/// Stops a run's process group: SIGTERM, then SIGKILL once [`GRACE`] has passed if any
/// process of the group is still there — whether or not the child itself (the wrapper
/// script) has ended, since an app that ignores SIGTERM may outlive the script that
/// started it. Returns the child's wait result.
async fn stop_group(
    pgid: Pid,
    waiter: &mut tokio::task::JoinHandle<std::io::Result<(std::process::ExitStatus, ChildUsage)>>,
) -> std::io::Result<(std::process::ExitStatus, ChildUsage)> {
    let _ = crate::signal::signal_group(pgid, Signal::SIGTERM);
    let deadline = tokio::time::Instant::now() + GRACE;
    let mut reaped = tokio::time::timeout_at(deadline, &mut *waiter).await.ok();
    while crate::signal::group_exists(pgid) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(GROUP_POLL).await;
    }
    if crate::signal::group_exists(pgid) {
        let _ = crate::signal::signal_group(pgid, Signal::SIGKILL);
        // SIGKILL is delivered when each process is next scheduled; wait briefly so that
        // the next run does not start beside a process that is still dying.
        let killed_by = tokio::time::Instant::now() + KILL_SETTLE;
        while group_has_running_member(pgid) && tokio::time::Instant::now() < killed_by {
            tokio::time::sleep(GROUP_POLL).await;
        }
    }
    if reaped.is_none() {
        reaped = Some(waiter.await);
    }
    reaped
        .expect("waited above")
        .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())))
}

/// Whether a process of group `pgid` is still running (not a zombie waiting for a parent
/// to reap it — with the wrapper gone, its orphans' parent is init or a subreaper).
fn group_has_running_member(pgid: Pid) -> bool {
    if !crate::signal::group_exists(pgid) {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().any(|e| {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            return false;
        };
        // After the command's closing parenthesis: state, ppid, pgrp.
        let mut fields = stat
            .rsplit_once(')')
            .map(|(_, r)| r)
            .unwrap_or("")
            .split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|p| p.parse::<i32>().ok());
        pgrp == Some(pgid.as_raw()) && !matches!(state, Some("Z" | "X"))
    })
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

    /// `argv` run in `dir`, its output in `dir/out` and `dir/err`.
    async fn run_in(
        dir: &tempfile::TempDir,
        argv: &[String],
        time_limit: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Finished {
        let p = dir.path();
        run_command(argv, p, &p.join("out"), &p.join("err"), time_limit, cancel)
            .await
            .unwrap()
    }

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
        let end = run_in(&dir, &argv, None, &cancel).await;
        assert_eq!(end.end, ProcessEnd::Cancelled);
    }

    #[tokio::test]
    async fn a_plain_failure_stays_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let argv = vec!["sh".to_string(), "-c".to_string(), "exit 3".to_string()];
        let end = run_in(&dir, &argv, None, &CancellationToken::new()).await;
        assert_eq!(end.end, ProcessEnd::Exited(3));
    }

    /// The tree's CPU time is the child's and its waited-for descendants': two processes
    /// that each burn CPU for a while count together.
    #[tokio::test]
    async fn the_usage_covers_the_whole_tree() {
        let dir = tempfile::tempdir().unwrap();
        let burn = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done";
        let argv = vec![
            "bash".to_string(),
            "-c".to_string(),
            format!("( {burn} ) & ( {burn} ) & wait"),
        ];
        let f = run_in(&dir, &argv, None, &CancellationToken::new()).await;
        assert_eq!(f.end, ProcessEnd::Exited(0));
        let u = f.usage.unwrap();
        // Each loop is a few hundred ms of shell arithmetic; both are counted, and bash's
        // own RSS is a few MiB.
        assert!(u.user_s + u.system_s > 0.05, "{u:?}");
        assert!(u.max_rss_kib > 1000, "{u:?}");
    }

    /// An app that ignores SIGTERM and outlives the wrapper that started it is still
    /// killed once the grace period is over: the time limit applies to the group.
    #[tokio::test]
    async fn a_process_that_ignores_sigterm_is_killed_after_the_grace_period() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("app.pid");
        // The wrapper exits on SIGTERM at once; its child ignores SIGTERM.
        let argv = vec![
            "bash".to_string(),
            "-c".to_string(),
            format!(
                "bash -c 'trap \"\" TERM; echo $$ > {}; while :; do sleep 0.05; done' & wait",
                pidfile.display()
            ),
        ];
        let f = run_in(
            &dir,
            &argv,
            Some(Duration::from_millis(500)),
            &CancellationToken::new(),
        )
        .await;
        assert_eq!(f.end, ProcessEnd::TimedOut);
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Gone (or a zombie of init's, about to be reaped): no longer running. run_command
        // waited for that before returning.
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let running = state
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next())
            .is_some_and(|st| st != "Z" && st != "X");
        assert!(!running, "the app outlived its time limit: {state}");
    }
}
