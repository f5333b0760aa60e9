//! A full file system, as the engine meets it: recognising ENOSPC (or a full quota) in its
//! errors, which file system it is (the state directory's or an experiment's workdir), and
//! the lack it waits on ([`SpaceWatch`]); what a lack is, with its reason and the bytes
//! free, is `optgate_client::space`. The engine never fails an experiment for lack of
//! space: it pauses (every state change waits) and goes on by itself when space returns.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use optgate_client::PathsError;
use optgate_client::space::{NoSpace, Place, bytes_free};

use crate::error::DaemonError;

pub use crate::no_space::{MAX_NO_SPACE_RETRIES, NO_SPACE_GIVE_UP, NO_SPACE_GIVE_UP_VAR};

/// The give-up limit of `optgate run` from `value` (`$OPTGATE_NO_SPACE_GIVE_UP`): the
/// default when unset or empty, an error naming the variable when it is not a duration.
pub fn no_space_give_up(
    value: Option<std::ffi::OsString>,
) -> Result<Duration, crate::error::SettingError> {
    use crate::error::SettingError;
    let var = NO_SPACE_GIVE_UP_VAR;
    let Some(v) = value.filter(|v| !v.is_empty()) else {
        return Ok(NO_SPACE_GIVE_UP);
    };
    let text = v.to_str().ok_or(SettingError::NotUtf8 { var })?;
    optgate_experiment::parse_duration(text).map_err(|source| SettingError::NotADuration {
        var,
        value: text.to_string(),
        source,
    })
}

/// Whether `e` is ENOSPC or EDQUOT.
pub fn is_no_space_io(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::StorageFull
        || matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// Whether any error in `e`'s chain is a lack of space.
pub fn chain_is_no_space(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && is_no_space_io(io)
        {
            return true;
        }
        if matches!(
            err.downcast_ref::<optgate_store::StoreError>(),
            Some(optgate_store::StoreError::Full { .. })
        ) {
            return true;
        }
        next = err.source();
    }
    false
}

/// The lack of space `e` is, if it is one: a database error is the state directory's;
/// a file under `state_dir` too; any other file the workdir's.
pub fn no_space_in(e: &DaemonError, state_dir: &Path) -> Option<NoSpace> {
    let store_full = matches!(
        e,
        DaemonError::Store(optgate_store::StoreError::Full { .. })
    );
    if let DaemonError::NoSpace(n) = e {
        return Some(n.clone());
    }
    // (A transparent variant's `source` skips the store error itself: asked by name.)
    if !store_full && !chain_is_no_space(e) {
        return None;
    }
    let path = match e {
        DaemonError::Io { path, .. } if !store_full => path.clone(),
        DaemonError::Paths(PathsError::Io { path, .. }) => path.clone(),
        DaemonError::Sched(optgate_sched::SchedError::Io { path, .. }) => path.clone(),
        _ => state_dir.to_path_buf(),
    };
    let place = if path.starts_with(state_dir) {
        Place::StateDir
    } else {
        Place::Workdir
    };
    Some(NoSpace {
        place,
        free: bytes_free(&path),
        path,
    })
}

/// What the engine knows now of a full file system: the lack it last met and since when
/// (the first pass that met it). Shared, so `status` and `optgate run` can read it while
/// the database itself cannot be written.
#[derive(Debug, Default)]
pub struct SpaceWatch(Mutex<Option<(Instant, NoSpace)>>);

impl SpaceWatch {
    /// Records a lack of space (keeping when it was first met).
    pub fn full(&self, lack: NoSpace) {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let since = g.as_ref().map_or_else(Instant::now, |(s, _)| *s);
        *g = Some((since, lack));
    }

    /// A pass wrote what it had to: space is back.
    pub fn clear(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .is_some()
    }

    /// The lack of space now, and for how long it has lasted.
    pub fn now(&self) -> Option<(Duration, NoSpace)> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|(since, lack)| (since.elapsed(), lack.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enospc() -> std::io::Error {
        std::io::Error::from_raw_os_error(libc::ENOSPC)
    }

    /// ENOSPC on a file under the state directory is the state directory's, elsewhere the
    /// workdir's; another error is none. Catches a classifier that calls every I/O error a
    /// full disk (the experiment would pause for ever on a permission error) or that looks
    /// only at the outer error.
    #[test]
    fn enospc_is_told_apart_and_placed() {
        let state = Path::new("/s/state");
        let e = DaemonError::Io {
            op: "write",
            path: "/s/state/x".into(),
            source: enospc(),
        };
        assert_eq!(no_space_in(&e, state).unwrap().place, Place::StateDir);
        let e = DaemonError::Sched(optgate_sched::SchedError::Io {
            op: "write the run files of",
            path: "/w/root/jobs/j".into(),
            source: enospc(),
        });
        let lack = no_space_in(&e, state).unwrap();
        assert_eq!(lack.place, Place::Workdir);
        assert_eq!(lack.path, Path::new("/w/root/jobs/j"));
        // The database's own "disk is full" (SQLITE_FULL) is the state directory's.
        let e = DaemonError::Store(optgate_store::StoreError::Full {
            op: "record",
            path: "/s/state/optgate.db".into(),
            source: rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(13), None),
        });
        assert_eq!(no_space_in(&e, state).unwrap().place, Place::StateDir);
        let e = DaemonError::Io {
            op: "write",
            path: "/w/x".into(),
            source: std::io::Error::from_raw_os_error(libc::EACCES),
        };
        assert_eq!(no_space_in(&e, state), None);
    }

    #[test]
    fn the_give_up_limit_defaults_to_two_minutes_and_reads_durations() {
        assert_eq!(no_space_give_up(None), Ok(Duration::from_secs(120)));
        assert_eq!(
            no_space_give_up(Some("3s".into())),
            Ok(Duration::from_secs(3))
        );
        let e = no_space_give_up(Some("soon".into()))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("OPTGATE_NO_SPACE_GIVE_UP=\"soon\": "), "{e}");
    }

    #[test]
    fn the_watch_keeps_when_the_lack_began_until_cleared() {
        let w = SpaceWatch::default();
        assert!(w.now().is_none());
        let lack = NoSpace {
            place: Place::Workdir,
            path: "/w".into(),
            free: Some(0),
        };
        w.full(lack.clone());
        std::thread::sleep(Duration::from_millis(20));
        w.full(lack.clone());
        // Counted from the first: a watch that restarts its clock would read ~0 here.
        assert!(w.now().unwrap().0 >= Duration::from_millis(20));
        assert!(w.clear());
        assert!(w.now().is_none());
        assert!(!w.clear());
    }
}
