//! What `optgate run` sets up before its engine starts (`crate::foreground` runs it): the
//! run root checked (a resumed root keeps its plan; a root holding something else is
//! refused), the machine's local-runs lock waited for, and the signals that interrupt the
//! execution through the engine's own cancel.

use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use optgate_client::StatePaths;
use optgate_evidence::Layout;
use optgate_experiment::{Experiment, Plan};

use crate::error::DaemonError;

/// Why a run root cannot take this execution.
#[derive(Debug, thiserror::Error)]
pub enum RootRefused {
    #[error("{} is not empty and holds no optgate experiment; choose a new --out directory", .0.display())]
    NotEmpty(PathBuf),
    #[error(
        "{} holds a different version of this experiment; its runs cannot be mixed with the current file's. Choose a new --out directory",
        .0.display()
    )]
    OtherVersion(PathBuf),
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a valid plan: {detail}", path.display())]
    BadPlan { path: PathBuf, detail: String },
}

impl RootRefused {
    /// Whether the user chose the wrong root (as opposed to a file that cannot be read).
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            RootRefused::NotEmpty(_) | RootRefused::OtherVersion(_)
        )
    }
}

/// Resuming: a root that already holds this experiment keeps its plan (and its recorded
/// order); a root that holds another experiment, or other files, is refused rather than
/// mixed. A new root gets the experiment's first plan.
pub fn plan_for_root(exp: &Experiment, layout: &Layout) -> Result<Plan, RootRefused> {
    let unreadable = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RootRefused::Unreadable { path, source }
    };
    let copy = layout.experiment_copy();
    if !copy.exists() {
        let has_files = match std::fs::read_dir(&layout.root) {
            Ok(mut entries) => entries.next().is_some(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(unreadable(&layout.root)(e)),
        };
        return match has_files {
            true => Err(RootRefused::NotEmpty(layout.root.clone())),
            false => Ok(Plan::for_experiment(exp)),
        };
    }
    let old = std::fs::read_to_string(&copy).map_err(unreadable(&copy))?;
    if old != exp.source_text {
        return Err(RootRefused::OtherVersion(layout.root.clone()));
    }
    let plan_path = layout.plan();
    let text = std::fs::read_to_string(&plan_path).map_err(unreadable(&plan_path))?;
    serde_json::from_str(&text).map_err(|e| RootRefused::BadPlan {
        path: plan_path,
        detail: e.to_string(),
    })
}

/// The machine-wide lock of local runs (the one the daemon's local jobs take). When a
/// daemon job holds it, `on_wait` is told its path and this waits until it is free, so the
/// user knows why nothing runs; it is not kept: each job of the execution takes it for its
/// own runs. Returns the lock file's path.
pub fn wait_for_local_runs(on_wait: impl FnOnce(&Path)) -> Result<PathBuf, DaemonError> {
    use nix::fcntl::{Flock, FlockArg};
    let state = StatePaths::from_env()?;
    state.prepare_dir()?;
    let path = optgate_sched::local_backend::LocalBackend::new(&state.dir)
        .lock_file()
        .to_path_buf();
    let lock_error = |e: nix::errno::Errno| DaemonError::Io {
        op: "lock",
        path: path.clone(),
        source: std::io::Error::from(e),
    };
    let open = || {
        optgate_client::paths::open_state_file(&path, false).map_err(|source| DaemonError::Io {
            op: "open",
            path: path.clone(),
            source,
        })
    };
    match Flock::lock(open()?, FlockArg::LockExclusiveNonblock) {
        Ok(_free) => {}
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            on_wait(&path);
            Flock::lock(open()?, FlockArg::LockExclusive).map_err(|(_, e)| lock_error(e))?;
        }
        Err((_, e)) => return Err(lock_error(e)),
    }
    Ok(path)
}

/// Ctrl-C, `kill`, `timeout` or a closed terminal cancel `interrupt` (after `on_signal`):
/// the runs live in a detached local job, so each of these must stop it through the engine
/// (it would otherwise go on without optgate).
pub async fn interrupt_on_signals(interrupt: CancellationToken, on_signal: impl FnOnce()) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
    on_signal();
    interrupt.cancel();
}
