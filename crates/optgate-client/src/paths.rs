//! Where the daemon keeps its state: `$OPTGATE_HOME`, else `$XDG_STATE_HOME/optgate`, else
//! `~/.local/state/optgate`. The directory holds the database, the daemon's lock, pid and
//! log files, the local backend's job registry, and `sock/`, a 0700 directory holding the
//! 0600 socket.

use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::PathsError;

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
    pub fn from_env() -> Result<StatePaths, PathsError> {
        let dir = state_dir_from(
            std::env::var_os("OPTGATE_HOME"),
            std::env::var_os("XDG_STATE_HOME"),
            std::env::var_os("HOME"),
        )
        .ok_or(PathsError::NoStateDir)?;
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

    /// The files optgate keeps in the state directory, besides the socket: each must be
    /// this user's, a plain file (never a link), and 0600.
    pub fn state_files(&self) -> Vec<PathBuf> {
        let db = self.db();
        let with = |suffix: &str| {
            let mut p = db.clone().into_os_string();
            p.push(suffix);
            PathBuf::from(p)
        };
        vec![
            db.clone(),
            with("-wal"),
            with("-shm"),
            self.log(),
            self.pid(),
            self.lock(),
            self.dir.join("local-runs.lock"),
        ]
    }

    /// Creates the state directory and the socket directory, both 0700 and owned by this
    /// user, and checks what is already there before anything is opened: a directory owned
    /// by someone else or writable by others is refused (they could plant a database or a
    /// link); one that others can merely read is tightened to 0700; a state file that is a
    /// link or someone else's is refused, and every state file is made 0600. Every
    /// directory above it must be this user's or root's and not writable by others unless
    /// sticky ([`check_ancestors`]).
    pub fn prepare(&self) -> Result<(), PathsError> {
        self.prepare_dir()?;
        let sock_dir = self.socket_dir();
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&sock_dir)
            .or_else(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => Ok(()),
                _ => Err(e),
            })
            .map_err(PathsError::io("create", &sock_dir))?;
        private_dir(&sock_dir, Tighten::Yes)?;
        let socket = self.socket();
        if socket.as_os_str().len() > SUN_PATH_MAX {
            return Err(PathsError::SocketPathTooLong { path: socket });
        }
        Ok(())
    }
}

impl StatePaths {
    /// The state directory alone (what `optgate run` needs for its lock): created 0700,
    /// checked as [`StatePaths::prepare`] says, its existing state files checked too.
    pub fn prepare_dir(&self) -> Result<(), PathsError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(PathsError::io("create", &self.dir))?;
        self.check(Tighten::Yes)
    }

    /// The checks [`StatePaths::prepare`] makes, changing nothing: what a command that only
    /// reads the state (`status`, `report`, `gate` while no daemon runs) does before it
    /// opens the database. It refuses exactly what the daemon refuses; what the daemon
    /// would tighten (a directory or file others can only read) it leaves as it is.
    pub fn check_for_reading(&self) -> Result<(), PathsError> {
        self.check(Tighten::No)
    }

    /// The one check behind the daemon's start and the read-only commands: the state
    /// directory's ancestors ([`check_ancestors`]), the directory itself, then each state
    /// file.
    fn check(&self, tighten: Tighten) -> Result<(), PathsError> {
        check_ancestors(&self.dir)?;
        private_dir(&self.dir, tighten)?;
        for file in self.state_files() {
            check_file(&file, tighten)?;
        }
        Ok(())
    }
}

/// Whether a check makes private what others can only read (the daemon, which owns the
/// state) or leaves it as it is (a read-only command).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tighten {
    Yes,
    No,
}

/// The rule for every directory above the state directory, to `/`: owned by this user or
/// by root, and writable by group or others only when its sticky bit is set (as `/tmp`),
/// which keeps others from renaming or removing what is not theirs. Anyone else who can
/// rename an ancestor can swap the whole state directory for one of their own. Both the
/// path as given and the path with its links resolved are walked, so a link in the path
/// is checked where it lies and where it leads.
fn check_ancestors(dir: &Path) -> Result<(), PathsError> {
    let mut seen = std::collections::BTreeSet::new();
    let resolved = std::fs::canonicalize(dir).map_err(PathsError::io("resolve", dir))?;
    let as_given = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    for path in [as_given, resolved] {
        for ancestor in path.ancestors().skip(1) {
            if seen.insert(ancestor.to_path_buf()) {
                check_ancestor(ancestor)?;
            }
        }
    }
    Ok(())
}

/// One directory above the state directory, by the rule of [`check_ancestors`].
fn check_ancestor(dir: &Path) -> Result<(), PathsError> {
    let meta = std::fs::metadata(dir).map_err(PathsError::io("inspect", dir))?;
    let me = nix::unistd::getuid().as_raw();
    if meta.uid() != me && meta.uid() != ROOT_UID {
        return Err(PathsError::NotOwner {
            path: dir.to_path_buf(),
            owner: meta.uid(),
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 && mode & STICKY == 0 {
        return Err(PathsError::AncestorWritableByOthers {
            path: dir.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

/// The owner an ancestor of the state directory may have besides this user.
const ROOT_UID: u32 = 0;
/// The sticky bit: in such a directory only an entry's owner can rename or remove it.
const STICKY: u32 = 0o1000;

/// Refuses a directory owned by another user or writable by group or others; tightens one
/// that they can only read or enter to 0700 (when asked to).
fn private_dir(dir: &Path, tighten: Tighten) -> Result<(), PathsError> {
    let meta = std::fs::metadata(dir).map_err(PathsError::io("inspect", dir))?;
    let me = nix::unistd::getuid().as_raw();
    if meta.uid() != me {
        return Err(PathsError::NotOwner {
            path: dir.to_path_buf(),
            owner: meta.uid(),
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(PathsError::StateDirWritableByOthers {
            path: dir.to_path_buf(),
            mode,
        });
    }
    if mode & 0o077 != 0 && tighten == Tighten::Yes {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(PathsError::io("restrict the permissions of", dir))?;
    }
    Ok(())
}

/// An existing state file must not be a link nor another user's; it is made 0600. A file
/// that does not exist yet is fine (it is created 0600 where it is opened).
pub fn private_file(path: &Path) -> Result<(), PathsError> {
    check_file(path, Tighten::Yes)
}

/// [`private_file`], making the file 0600 only when asked to.
fn check_file(path: &Path, tighten: Tighten) -> Result<(), PathsError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(PathsError::io("inspect", path)(e)),
    };
    if meta.file_type().is_symlink() {
        return Err(PathsError::StateFileIsLink {
            path: path.to_path_buf(),
        });
    }
    let me = nix::unistd::getuid().as_raw();
    if meta.uid() != me {
        return Err(PathsError::NotOwner {
            path: path.to_path_buf(),
            owner: meta.uid(),
        });
    }
    if meta.mode() & 0o077 != 0 && tighten == Tighten::Yes {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(PathsError::io("restrict the permissions of", path))?;
    }
    Ok(())
}

/// Opens a state file for appending or writing: created 0600, never through a link.
pub fn open_state_file(path: &Path, append: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(append)
        .write(!append)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
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
    fn a_state_directory_others_can_write_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = StatePaths::new(d.path().join("state"));
        std::fs::create_dir(&p.dir).unwrap();
        for mode in [0o777, 0o770, 0o702, 0o1777] {
            std::fs::set_permissions(&p.dir, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = p.prepare().unwrap_err();
            assert!(
                matches!(err, PathsError::StateDirWritableByOthers { mode: m, .. } if m == mode),
                "{mode:o}: {err}"
            );
            assert!(err.to_string().contains("chmod 700"), "{err}");
        }
        // Readable by others only: tightened, files included.
        std::fs::set_permissions(&p.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(p.log(), "x").unwrap();
        std::fs::set_permissions(p.log(), std::fs::Permissions::from_mode(0o644)).unwrap();
        p.prepare().unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().mode() & 0o777;
        assert_eq!(mode(&p.dir), 0o700);
        assert_eq!(mode(&p.log()), 0o600);
        let fresh = StatePaths::new(d.path().join("fresh/state"));
        fresh.prepare().unwrap();
        assert_eq!(mode(&fresh.dir), 0o700);
    }

    #[test]
    fn state_files_are_never_links() {
        let d = tempfile::tempdir().unwrap();
        let p = StatePaths::new(d.path().join("state"));
        p.prepare().unwrap();
        let target = d.path().join("elsewhere.log");
        std::fs::write(&target, "").unwrap();
        for file in [p.log(), p.db(), p.pid()] {
            std::os::unix::fs::symlink(&target, &file).unwrap();
            let err = p.prepare().unwrap_err();
            assert!(
                matches!(&err, PathsError::StateFileIsLink { path } if *path == file),
                "{err}"
            );
            // Opening it for writing does not follow the link either.
            assert!(open_state_file(&file, true).is_err());
            std::fs::remove_file(&file).unwrap();
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "");
    }

    #[test]
    fn a_state_directory_of_another_user_is_refused() {
        if !nix::unistd::getuid().is_root() {
            // Only root can make a directory someone else's; CI and tests/run-all.sh run as
            // root. Elsewhere say so explicitly, as the probe's tests do.
            assert!(
                std::env::var_os("OPTGATE_SKIP_AS_NOBODY").is_some_and(|v| v == "1"),
                "needs root (run tests/run-all.sh as root), or set OPTGATE_SKIP_AS_NOBODY=1"
            );
            eprintln!("SKIPPED: needs root to chown a directory to another user");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let p = StatePaths::new(d.path().join("state"));
        std::fs::create_dir(&p.dir).unwrap();
        std::fs::set_permissions(&p.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        nix::unistd::chown(&p.dir, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        let err = p.prepare().unwrap_err();
        assert!(
            matches!(err, PathsError::NotOwner { owner: 65534, .. }),
            "{err}"
        );
    }

    /// Catches: ancestors not checked at all, or the sticky exception missing (tempdirs
    /// live under /tmp, 1777) or too wide (any world-writable directory).
    #[test]
    fn a_parent_others_can_write_is_refused_unless_sticky() {
        let d = tempfile::tempdir().unwrap();
        let parent = d.path().join("parent");
        let p = StatePaths::new(parent.join("mid/state"));
        p.prepare().unwrap();
        for mode in [0o777, 0o775, 0o757] {
            std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(mode)).unwrap();
            for err in [p.prepare().unwrap_err(), p.check_for_reading().unwrap_err()] {
                assert!(
                    matches!(&err, PathsError::AncestorWritableByOthers { path, mode: m }
                        if *path == parent && *m == mode),
                    "{mode:o}: {err}"
                );
            }
        }
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o1777)).unwrap();
        p.prepare().unwrap();
        p.check_for_reading().unwrap();
        // Reached through a link, the directory the link lies in is checked too.
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::os::unix::fs::symlink(&p.dir, open.join("link")).unwrap();
        let linked = StatePaths::new(open.join("link"));
        assert!(matches!(
            linked.check_for_reading(),
            Err(PathsError::AncestorWritableByOthers { path, .. }) if path == open
        ));
    }

    /// Catches: the read-only check following a linked database, accepting another
    /// user's, or changing permissions (a reader must not write).
    #[test]
    fn the_read_only_check_refuses_what_prepare_refuses_and_changes_nothing() {
        let d = tempfile::tempdir().unwrap();
        let p = StatePaths::new(d.path().join("state"));
        p.prepare().unwrap();
        std::fs::write(p.db(), "").unwrap();
        std::fs::set_permissions(p.db(), std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&p.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        p.check_for_reading().unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().mode() & 0o777;
        assert_eq!((mode(&p.dir), mode(&p.db())), (0o755, 0o644));
        std::fs::set_permissions(&p.dir, std::fs::Permissions::from_mode(0o775)).unwrap();
        assert!(matches!(
            p.check_for_reading(),
            Err(PathsError::StateDirWritableByOthers { mode: 0o775, .. })
        ));
        std::fs::set_permissions(&p.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let real = d.path().join("real.db");
        std::fs::rename(p.db(), &real).unwrap();
        std::os::unix::fs::symlink(&real, p.db()).unwrap();
        assert!(matches!(
            p.check_for_reading(),
            Err(PathsError::StateFileIsLink { path }) if path == p.db()
        ));
        std::fs::remove_file(p.db()).unwrap();
        std::fs::rename(&real, p.db()).unwrap();
        if nix::unistd::getuid().is_root() {
            nix::unistd::chown(&p.db(), Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
            assert!(matches!(
                p.check_for_reading(),
                Err(PathsError::NotOwner { owner: 65534, .. })
            ));
            // A parent of another user is refused as well.
            nix::unistd::chown(&p.db(), Some(nix::unistd::ROOT), None).unwrap();
            let theirs = d.path().join("theirs");
            let under = StatePaths::new(theirs.join("state"));
            under.prepare().unwrap();
            nix::unistd::chown(&theirs, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
            assert!(matches!(
                under.check_for_reading(),
                Err(PathsError::NotOwner { owner: 65534, path }) if path == theirs
            ));
        } else {
            assert!(
                std::env::var_os("OPTGATE_SKIP_AS_NOBODY").is_some_and(|v| v == "1"),
                "needs root (run tests/run-all.sh as root), or set OPTGATE_SKIP_AS_NOBODY=1"
            );
            eprintln!("SKIPPED: needs root to chown a file to another user");
        }
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
            Err(PathsError::SocketPathTooLong { .. })
        ));
    }
}
