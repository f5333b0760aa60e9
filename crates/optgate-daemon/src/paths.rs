//! Where the daemon keeps its state: `$OPTGATE_HOME`, else `$XDG_STATE_HOME/optgate`, else
//! `~/.local/state/optgate`. The directory holds the database, the daemon's lock, pid and
//! log files, the local backend's job registry, and `sock/`, a 0700 directory holding the
//! 0600 socket.

use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::DaemonError;

/// The longest socket path `sockaddr_un` holds on Linux, terminating NUL excluded.
const SUN_PATH_MAX: usize = 107;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatePaths {
    pub dir: PathBuf,
}

/// The state directory from the environment's values (pure, so it can be tested).
pub fn state_dir_from(
    optgate_home: Option<OsString>,
    xdg_state_home: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    let non_empty = |v: Option<OsString>| v.filter(|s| !s.is_empty()).map(PathBuf::from);
    if let Some(dir) = non_empty(optgate_home) {
        return Some(dir);
    }
    // The XDG spec says relative values are invalid and must be ignored.
    if let Some(x) = non_empty(xdg_state_home).filter(|p| p.is_absolute()) {
        return Some(x.join("optgate"));
    }
    non_empty(home).map(|h| h.join(".local/state/optgate"))
}

impl StatePaths {
    pub fn new(dir: impl Into<PathBuf>) -> StatePaths {
        StatePaths { dir: dir.into() }
    }

    /// The state directory this process's environment names.
    pub fn from_env() -> Result<StatePaths, DaemonError> {
        let dir = state_dir_from(
            std::env::var_os("OPTGATE_HOME"),
            std::env::var_os("XDG_STATE_HOME"),
            std::env::var_os("HOME"),
        )
        .ok_or(DaemonError::NoStateDir)?;
        Ok(StatePaths::new(std::path::absolute(&dir).unwrap_or(dir)))
    }

    pub fn db(&self) -> PathBuf {
        self.dir.join("optgate.db")
    }

    pub fn socket_dir(&self) -> PathBuf {
        self.dir.join("sock")
    }

    pub fn socket(&self) -> PathBuf {
        self.socket_dir().join("daemon.sock")
    }

    pub fn lock(&self) -> PathBuf {
        self.dir.join("daemon.lock")
    }

    pub fn pid(&self) -> PathBuf {
        self.dir.join("daemon.pid")
    }

    pub fn log(&self) -> PathBuf {
        self.dir.join("daemon.log")
    }

    /// The pid the running daemon wrote, if any (for messages only: liveness is the lock).
    pub fn read_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.pid())
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Creates the state directory and the socket directory, both 0700 and owned by this
    /// user. A socket directory that others could enter is tightened, one owned by someone
    /// else is refused.
    pub fn prepare(&self) -> Result<(), DaemonError> {
        for dir in [&self.dir, &self.socket_dir()] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(DaemonError::io("create", dir))?;
        }
        let sock_dir = self.socket_dir();
        let meta = std::fs::metadata(&sock_dir).map_err(DaemonError::io("inspect", &sock_dir))?;
        let me = nix::unistd::getuid().as_raw();
        if meta.uid() != me {
            return Err(DaemonError::NotOwner {
                path: sock_dir,
                owner: meta.uid(),
            });
        }
        if meta.mode() & 0o077 != 0 {
            std::fs::set_permissions(&sock_dir, std::fs::Permissions::from_mode(0o700))
                .map_err(DaemonError::io("restrict the permissions of", &sock_dir))?;
        }
        let socket = self.socket();
        if socket.as_os_str().len() > SUN_PATH_MAX {
            return Err(DaemonError::SocketPathTooLong { path: socket });
        }
        Ok(())
    }
}

/// `path` relative to the user's home as `~/…` for messages, when it is under it.
pub fn tilde(path: &Path) -> String {
    match std::env::var_os("HOME").map(PathBuf::from) {
        Some(h) if !h.as_os_str().is_empty() && path.starts_with(&h) && h != Path::new("/") => {
            format!("~/{}", path.strip_prefix(&h).unwrap_or(path).display())
        }
        _ => path.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(s: &str) -> Option<OsString> {
        Some(OsString::from(s))
    }

    #[test]
    fn optgate_home_wins_then_xdg_then_home() {
        assert_eq!(
            state_dir_from(os("/o"), os("/x"), os("/h")),
            Some(PathBuf::from("/o"))
        );
        assert_eq!(
            state_dir_from(None, os("/x"), os("/h")),
            Some(PathBuf::from("/x/optgate"))
        );
        assert_eq!(
            state_dir_from(os(""), os("relative"), os("/h")),
            Some(PathBuf::from("/h/.local/state/optgate"))
        );
        assert_eq!(state_dir_from(None, None, None), None);
    }

    #[test]
    fn prepare_makes_a_private_socket_directory() {
        let d = tempfile::tempdir().unwrap();
        let p = StatePaths::new(d.path().join("state"));
        std::fs::create_dir_all(p.socket_dir()).unwrap();
        std::fs::set_permissions(p.socket_dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
        p.prepare().unwrap();
        let mode = std::fs::metadata(p.socket_dir()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let long = StatePaths::new(d.path().join("x".repeat(120)));
        assert!(matches!(
            long.prepare(),
            Err(DaemonError::SocketPathTooLong { .. })
        ));
    }
}
