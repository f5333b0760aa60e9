//! The only way optgate signals a process group: `killpg` on a group it started, never a
//! `kill` with a negative number and never a group that could be everyone's.
//!
//! Why a module for one call: `kill(-1, …)` (and `killpg` of 0 or 1) reaches every process
//! the caller may signal, and as root that is the whole machine. Each caller passes a pgid
//! it created (a child spawned as its own group leader) or read back from a file it wrote;
//! this function refuses the values that would widen the signal beyond that group.

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Why a process group was not signalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignalError {
    /// 0, 1 or a negative number: `killpg` would reach this process's own group or every
    /// process on the machine.
    #[error("refusing to signal process group {0}: not a group optgate started")]
    NotAGroup(i32),
    /// optgate's own group: the caller would signal itself (and its parent shell).
    #[error("refusing to signal process group {0}: it is optgate's own")]
    OwnGroup(i32),
    #[error("cannot signal process group {pgid}: {errno}")]
    Failed { pgid: i32, errno: Errno },
}

/// Sends `signal` to process group `pgid`, a group the caller started. Refuses 0, 1,
/// negative numbers and optgate's own group.
pub fn signal_group(pgid: Pid, signal: Signal) -> Result<(), SignalError> {
    let raw = pgid.as_raw();
    if raw <= 1 {
        return Err(SignalError::NotAGroup(raw));
    }
    if raw == nix::unistd::getpgrp().as_raw() {
        return Err(SignalError::OwnGroup(raw));
    }
    killpg(pgid, signal).map_err(|errno| SignalError::Failed { pgid: raw, errno })
}

/// Whether process group `pgid` (one the caller started) still has a member: `killpg`
/// with no signal. False for the values [`signal_group`] refuses.
pub fn group_exists(pgid: Pid) -> bool {
    let raw = pgid.as_raw();
    if raw <= 1 || raw == nix::unistd::getpgrp().as_raw() {
        return false;
    }
    // EPERM: members exist but belong to someone else (a setuid app); still there.
    matches!(killpg(pgid, None), Ok(()) | Err(Errno::EPERM))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_groups_that_would_reach_other_processes() {
        for raw in [-1, 0, 1, -12345] {
            assert_eq!(
                signal_group(Pid::from_raw(raw), Signal::SIGKILL),
                Err(SignalError::NotAGroup(raw))
            );
        }
        let own = nix::unistd::getpgrp();
        assert_eq!(
            signal_group(own, Signal::SIGKILL),
            Err(SignalError::OwnGroup(own.as_raw()))
        );
    }

    #[test]
    fn signals_a_group_it_started() {
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = Pid::from_raw(child.id() as i32);
        signal_group(pgid, Signal::SIGKILL).unwrap();
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    }
}
