//! Which job attempt owns a run directory: each attempt claims the run before it starts it
//! and commits its record only while it still holds the claim, so a stale attempt (a lost
//! job whose wrapper outlived it) never overwrites a newer attempt's manifest or output.
//!
//! The claim is the file `claim` (the attempt number, one line), read and changed only
//! under an exclusive `flock` on it. It is only ever raised, never lowered.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use crate::manifest::RunManifest;

/// The claim file of a run directory.
pub const CLAIM_FILE: &str = "claim";

/// What an attempt found when it asked for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The run is this attempt's (the claim now holds its number).
    Held,
    /// A newer attempt claimed the run: this one must not start it.
    Superseded { by: u32 },
    /// A final manifest is there already: the run is done.
    Finished,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot {op} {path}: {source}")]
pub struct ClaimError {
    op: &'static str,
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

/// The claim file, locked exclusively until dropped.
pub struct ClaimLock {
    file: Flock<File>,
    path: PathBuf,
}

impl ClaimLock {
    /// Opens (creating) and locks the claim file of `run_dir`; blocks while another attempt
    /// holds the lock (only for the moments it reads, claims or commits).
    pub fn take(run_dir: &Path) -> Result<ClaimLock, ClaimError> {
        let path = run_dir.join(CLAIM_FILE);
        let err = |op, source| ClaimError {
            op,
            path: path.clone(),
            source,
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| err("open", e))?;
        let file = Flock::lock(file, FlockArg::LockExclusive)
            .map_err(|(_, errno)| err("lock", std::io::Error::from(errno)))?;
        Ok(ClaimLock { file, path })
    }

    /// The attempt holding the run; 0 when none claimed it yet (or the file is not a
    /// number: a claim optgate did not write counts as none).
    pub fn holder(&mut self) -> Result<u32, ClaimError> {
        let mut text = String::new();
        self.file
            .seek(SeekFrom::Start(0))
            .and_then(|_| self.file.read_to_string(&mut text))
            .map_err(|source| self.error("read", source))?;
        Ok(text.trim().parse().unwrap_or(0))
    }

    fn set(&mut self, attempt: u32) -> Result<(), ClaimError> {
        let f: &mut File = &mut self.file;
        f.set_len(0)
            .and_then(|_| f.seek(SeekFrom::Start(0)))
            .and_then(|_| f.write_all(format!("{attempt}\n").as_bytes()))
            .and_then(|_| f.sync_all())
            .map_err(|source| self.error("write", source))
    }

    fn error(&self, op: &'static str, source: std::io::Error) -> ClaimError {
        ClaimError {
            op,
            path: self.path.clone(),
            source,
        }
    }
}

/// The rule for the holder a run's claim file names, `holder`, and an attempt that asks for
/// the run: a newer or equal attempt takes it (a requeued job repeats its attempt), an
/// older one is superseded. Pure.
pub fn may_hold(holder: u32, attempt: u32) -> Claim {
    if attempt >= holder {
        Claim::Held
    } else {
        Claim::Superseded { by: holder }
    }
}

/// Whether a manifest already in `run_dir` ends the run (completed, failed or timed out).
fn finished(run_dir: &Path) -> bool {
    matches!(RunManifest::read(run_dir), Ok(Some(m)) if m.outcome.is_final())
}

/// Claims `run_dir` for `attempt` before the run starts: refused when a final manifest is
/// there or a newer attempt holds the run; otherwise the claim is raised to `attempt`.
pub fn claim(run_dir: &Path, attempt: u32) -> Result<Claim, ClaimError> {
    let mut lock = ClaimLock::take(run_dir)?;
    if finished(run_dir) {
        return Ok(Claim::Finished);
    }
    let answer = may_hold(lock.holder()?, attempt);
    if answer == Claim::Held {
        lock.set(attempt)?;
    }
    Ok(answer)
}

/// Runs `commit` (which puts the attempt's output and manifest in place) only if `attempt`
/// still holds `run_dir` and no final manifest is there, all under the claim's lock, so no
/// other attempt claims or commits in between. Returns what was found when refused.
pub fn commit_if_held<E>(
    run_dir: &Path,
    attempt: u32,
    commit: impl FnOnce() -> Result<(), E>,
) -> Result<Result<Claim, E>, ClaimError> {
    let mut lock = ClaimLock::take(run_dir)?;
    let holder = lock.holder()?;
    if holder != attempt {
        return Ok(Ok(Claim::Superseded { by: holder }));
    }
    if finished(run_dir) {
        return Ok(Ok(Claim::Finished));
    }
    Ok(commit().map(|()| Claim::Held))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_raised_never_lowered() {
        assert_eq!(may_hold(0, 1), Claim::Held);
        assert_eq!(may_hold(1, 2), Claim::Held);
        // A requeued job runs its attempt again.
        assert_eq!(may_hold(2, 2), Claim::Held);
        assert_eq!(may_hold(2, 1), Claim::Superseded { by: 2 });
    }

    #[test]
    fn an_older_attempt_cannot_claim_or_commit_after_a_newer_one_claimed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        assert_eq!(claim(dir, 1).unwrap(), Claim::Held);
        assert_eq!(claim(dir, 2).unwrap(), Claim::Held);
        assert_eq!(claim(dir, 1).unwrap(), Claim::Superseded { by: 2 });
        // The claim file was not lowered by the refused attempt.
        assert_eq!(
            std::fs::read_to_string(dir.join(CLAIM_FILE)).unwrap(),
            "2\n"
        );
        let mut ran = false;
        let r = commit_if_held::<()>(dir, 1, || {
            ran = true;
            Ok(())
        });
        assert_eq!(r.unwrap(), Ok(Claim::Superseded { by: 2 }));
        assert!(!ran, "a superseded attempt's commit must not run");
        let r = commit_if_held::<()>(dir, 2, || Ok(()));
        assert_eq!(r.unwrap(), Ok(Claim::Held));
    }

    #[test]
    fn nothing_claims_or_commits_over_a_final_manifest() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        assert_eq!(claim(dir, 3).unwrap(), Claim::Held);
        let m = crate::manifest::fixture_manifest(crate::manifest::Outcome::Completed);
        m.write(dir).unwrap();
        assert_eq!(claim(dir, 4).unwrap(), Claim::Finished);
        let r = commit_if_held::<()>(dir, 3, || panic!("must not commit"));
        assert_eq!(r.unwrap(), Ok(Claim::Finished));
        // An interrupted manifest is not final: a later attempt takes the run.
        let m = crate::manifest::fixture_manifest(crate::manifest::Outcome::Interrupted);
        m.write(dir).unwrap();
        assert_eq!(claim(dir, 4).unwrap(), Claim::Held);
    }

    #[test]
    fn a_claim_file_optgate_did_not_write_counts_as_none() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(CLAIM_FILE), "junk").unwrap();
        assert_eq!(claim(tmp.path(), 1).unwrap(), Claim::Held);
    }
}
