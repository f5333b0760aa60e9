//! What the server's handlers and the engine share: the database (behind a mutex, used
//! from blocking tasks), the state paths, the engine's wake-up, the backends, and facts
//! about this daemon.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use optgate_client::StatePaths;
use optgate_client::protocol::{DaemonInfo, PROTOCOL_VERSION};
use optgate_experiment::SchedulerKind;
use optgate_sched::Scheduler;
use optgate_store::{Store, StoreError};

use crate::error::{DaemonError, SettingError};

/// The database, shared. Calls run on tokio's blocking pool: SQLite calls block, and an
/// fsync at commit must never stall the runtime's workers.
#[derive(Clone)]
pub struct Db(Arc<Mutex<Store>>);

impl Db {
    pub fn new(store: Store) -> Db {
        Db(Arc::new(Mutex::new(store)))
    }

    pub async fn call<R, F>(&self, f: F) -> Result<R, DaemonError>
    where
        F: FnOnce(&mut Store) -> Result<R, StoreError> + Send + 'static,
        R: Send + 'static,
    {
        let inner = self.0.clone();
        tokio::task::spawn_blocking(move || {
            // A panic while holding the lock cannot leave a transaction half-done (SQLite
            // rolls back an unfinished one), so the store is still usable.
            let mut store = inner.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut store)
        })
        .await
        .map_err(crate::error::join_error)?
        .map_err(DaemonError::from)
    }
}

/// Makes the backend of one scheduler kind: the real factory, or a test's in-process fake.
pub type BackendFactory =
    Arc<dyn Fn(SchedulerKind, &std::path::Path) -> Arc<dyn Scheduler> + Send + Sync>;

/// One backend per scheduler kind, made on first use by the factory. This is the engine's
/// seam: the daemon gets the real backends ([`Backends::new`]); the control-loop tests give
/// it an in-process fake ([`Backends::with_factory`]).
pub struct Backends {
    made: Mutex<BTreeMap<String, Arc<dyn Scheduler>>>,
    factory: BackendFactory,
}

impl Backends {
    /// The real backends; cancelling `stop` ends their scheduler commands in flight.
    pub fn new(stop: CancellationToken) -> Backends {
        Backends::with_factory(Arc::new(move |kind, state_dir| {
            optgate_sched::factory::backend_for(kind, state_dir, stop.clone())
        }))
    }

    /// Backends made by `factory`.
    pub fn with_factory(factory: BackendFactory) -> Backends {
        Backends {
            made: Mutex::default(),
            factory,
        }
    }

    pub fn get(&self, kind: SchedulerKind, state_dir: &std::path::Path) -> Arc<dyn Scheduler> {
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        made.entry(kind.to_string())
            .or_insert_with(|| (self.factory)(kind, state_dir))
            .clone()
    }
}

/// Shared by every task of the daemon.
pub struct Daemon {
    pub paths: StatePaths,
    pub db: Db,
    /// Wakes the engine early (a submission, a cancellation).
    pub wake: Notify,
    pub backends: Backends,
    /// The optgate binary jobs call (`exec-run`, `probe`): this daemon's own executable.
    pub optgate_bin: PathBuf,
    pub started_at: String,
    /// Cancelled to stop the daemon (SIGTERM, SIGINT, `optgate daemon stop`).
    pub shutdown: CancellationToken,
    /// How long a running experiment may wait for a scheduler that cannot be reached
    /// before it ends `failed` ([`UNREACHABLE_GIVE_UP`], or `$OPTGATE_UNREACHABLE_GIVE_UP`).
    pub unreachable_give_up: std::time::Duration,
    /// Crash points armed in this process (tests; empty otherwise). Shared, so a test that
    /// hands them to `optgate run`'s engine can still ask whether one fired.
    pub failpoints: std::sync::Arc<crate::failpoint::Failpoints>,
    /// A file system the engine found full, and since when (`status` shows it; `optgate
    /// run` gives up after [`crate::space::NO_SPACE_GIVE_UP`]).
    pub space: crate::space::SpaceWatch,
}

/// How long a running experiment waits for its scheduler to answer again (`cannot reach
/// the … scheduler`) before it ends `failed` with the last such error: long enough to ride
/// out a controller restart or a maintenance window, short enough that an experiment
/// pointed at a scheduler that is gone does not wait for ever. Counted from the first pass
/// that could not reach it, by this daemon process (a restart starts the count again).
pub const UNREACHABLE_GIVE_UP: std::time::Duration = std::time::Duration::from_secs(3600);

/// The variable that overrides [`UNREACHABLE_GIVE_UP`]: a duration such as `90s`, `10m`,
/// `2h` (the experiment file's syntax).
pub const UNREACHABLE_GIVE_UP_VAR: &str = "OPTGATE_UNREACHABLE_GIVE_UP";

/// The give-up limit from `value` (`$OPTGATE_UNREACHABLE_GIVE_UP`): the default when unset
/// or empty, an error naming the variable when it is not a duration.
pub fn unreachable_give_up(
    value: Option<std::ffi::OsString>,
) -> Result<std::time::Duration, SettingError> {
    let var = UNREACHABLE_GIVE_UP_VAR;
    let Some(v) = value.filter(|v| !v.is_empty()) else {
        return Ok(UNREACHABLE_GIVE_UP);
    };
    let text = v.to_str().ok_or(SettingError::NotUtf8 { var })?;
    optgate_experiment::parse_duration(text).map_err(|source| SettingError::NotADuration {
        var,
        value: text.to_string(),
        source,
    })
}

impl Daemon {
    pub fn info(&self) -> DaemonInfo {
        DaemonInfo {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            protocol: PROTOCOL_VERSION,
            state_dir: self.paths.dir.clone(),
            started_at: self.started_at.clone(),
            long_requests_reading: crate::large_requests::reading(),
        }
    }

    pub fn backend(&self, kind: SchedulerKind) -> Arc<dyn Scheduler> {
        self.backends.get(kind, &self.paths.dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_give_up_limit_defaults_to_an_hour_and_reads_durations() {
        assert_eq!(unreachable_give_up(None), Ok(UNREACHABLE_GIVE_UP));
        assert_eq!(UNREACHABLE_GIVE_UP, Duration::from_secs(3600));
        assert_eq!(
            unreachable_give_up(Some("".into())),
            Ok(UNREACHABLE_GIVE_UP)
        );
        assert_eq!(
            unreachable_give_up(Some("3s".into())),
            Ok(Duration::from_secs(3))
        );
        assert_eq!(
            unreachable_give_up(Some("2h".into())),
            Ok(Duration::from_secs(7200))
        );
        let e = unreachable_give_up(Some("soon".into()))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("OPTGATE_UNREACHABLE_GIVE_UP=\"soon\": "),
            "{e}"
        );
    }
}
