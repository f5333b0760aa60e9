//! `optgate daemon [--foreground]` and `optgate daemon stop`: the one command that runs
//! the daemon itself (`optgate_daemon::lifecycle`); stopping it is a client's call.

use std::time::Duration;

use anyhow::{Context, Result};

use optgate_client::protocol::{ErrorKind, Request, Response, ShutdownRequest};
use optgate_client::{ClientError, StatePaths, client};
use optgate_daemon::DaemonError;

use super::daemon_client::{client_error, start, state_paths};
use crate::exit;

/// How long `daemon stop` waits for the daemon to finish its database writes and exit.
const STOP_WAIT: Duration = Duration::from_secs(60);

pub fn daemon(foreground: bool, stop: bool) -> Result<i32> {
    let paths = state_paths()?;
    if stop {
        return stop_daemon(&paths);
    }
    if foreground {
        return match optgate_daemon::lifecycle::run_foreground(&paths) {
            Ok(()) => Ok(exit::OK),
            Err(e @ DaemonError::AlreadyRunning { .. }) => Err(exit::with_code(exit::FAILED, e)),
            Err(e) => Err(e.into()),
        };
    }
    match client::ping(&paths) {
        Ok(w) => {
            errln!(
                "optgate: the daemon is already running (pid {}, state in {})",
                w.pid,
                w.state_dir.display()
            );
            Ok(exit::OK)
        }
        Err(ClientError::NotRunning { .. }) => {
            let w = start(&paths)?;
            errln!(
                "optgate: daemon started (pid {}); state in {}, log {}",
                w.pid,
                w.state_dir.display(),
                paths.log().display()
            );
            Ok(exit::OK)
        }
        Err(e) => Err(client_error(e)),
    }
}

/// `optgate daemon stop`: asks the daemon to stop, then waits (at most [`STOP_WAIT`]) until
/// its process is gone — not only its socket or its lock — before it says "stopped" (exit
/// 0). A daemon still running then is named with what it is doing, exit 3.
fn stop_daemon(paths: &StatePaths) -> Result<i32> {
    // Found before the stop: the pid file goes away as the daemon exits.
    let process = client::DaemonProcess::of(paths);
    // A stop does not queue behind clients holding every connection: a busy daemon gets
    // SIGTERM instead, which stops it the same way.
    match client::call_waiting(
        paths,
        &Request::Shutdown(ShutdownRequest {}),
        std::time::Duration::ZERO,
    ) {
        Ok(Response::ShuttingDown) => {}
        Ok(other) => {
            return Err(anyhow::anyhow!(
                "the daemon answered {other:?} to a stop request"
            ));
        }
        Err(ClientError::Refused {
            kind: ErrorKind::Busy,
            ..
        }) => terminate_busy_daemon(paths)?,
        Err(e) => return Err(client_error(e)),
    }
    if client::wait_until_stopped(paths, process.as_ref(), STOP_WAIT) {
        errln!(
            "optgate: daemon stopped; running jobs carry on and are picked up at the next start"
        );
        return Ok(exit::OK);
    }
    let what = match process.filter(|p| p.is_running()) {
        Some(p) => p.describe(),
        None => format!("the process holding {}", paths.lock().display()),
    };
    Err(exit::with_code(
        exit::FAILED,
        anyhow::anyhow!(
            "the daemon was asked to stop but is still running after {} s: {what}; see {}",
            STOP_WAIT.as_secs(),
            paths.log().display()
        ),
    ))
}

/// SIGTERM to the daemon of `paths` (its pid file names it; its lock proves it runs, and
/// its command line that the pid is still an optgate daemon, not a reused pid).
fn terminate_busy_daemon(paths: &StatePaths) -> Result<()> {
    let pid = paths
        .read_pid()
        .filter(|_| optgate_client::client::is_locked(paths))
        .context("the daemon is busy and its pid file names no running daemon")?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let words: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let is_daemon =
        words.iter().any(|w| w.ends_with(b"optgate")) && words.iter().any(|w| *w == b"daemon");
    anyhow::ensure!(
        is_daemon,
        "the daemon is busy and pid {pid} (from {}) is not an optgate daemon",
        paths.pid().display()
    );
    errln!("optgate: the daemon is busy serving clients; stopping it with SIGTERM (pid {pid})");
    let pid = i32::try_from(pid).context("pid out of range")?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .with_context(|| format!("cannot signal the daemon (pid {pid})"))
}
