//! Starting and stopping the daemon: one daemon per state directory (an exclusive `flock`
//! held for the daemon's life), a stale socket from a crashed daemon removed safely (only
//! once the lock proves no daemon serves it), the socket created 0600 (umask around
//! `bind`, before `listen`), signals and `daemon stop` turned into one cancellation, and
//! the server and engine awaited before exit. Work still on the blocking pool (a parse past
//! its deadline) gets [`EXIT_GRACE`], then the process exits without it; the lock is held
//! until the process is gone, so no second daemon ever runs beside a stopping one.

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use nix::fcntl::{Flock, FlockArg};
use nix::sys::stat::{Mode, umask};
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use optgate_client::StatePaths;
use optgate_store::Store;

use crate::context::{Backends, Daemon, Db};
use crate::error::DaemonError;
use crate::{engine, server};

/// Held for the daemon's life: the lock on `daemon.lock`, and the pid file.
pub struct InstanceLock {
    _lock: Flock<File>,
    paths: StatePaths,
}

impl InstanceLock {
    /// Takes the state directory's lock, or says which daemon holds it.
    pub fn acquire(paths: &StatePaths) -> Result<InstanceLock, DaemonError> {
        let path = paths.lock();
        let file = optgate_client::paths::open_state_file(&path, false)
            .map_err(DaemonError::io("open", &path))?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
            if errno == nix::errno::Errno::EWOULDBLOCK {
                DaemonError::AlreadyRunning {
                    dir: paths.dir.clone(),
                    pid: paths.read_pid(),
                }
            } else {
                DaemonError::Io {
                    op: "lock",
                    path: path.clone(),
                    source: errno.into(),
                }
            }
        })?;
        let pid_path = paths.pid();
        optgate_wrapper::manifest::write_atomic(
            &pid_path,
            format!("{}\n", std::process::id()).as_bytes(),
        )
        .map_err(DaemonError::io("write", &pid_path))?;
        Ok(InstanceLock {
            _lock: lock,
            paths: paths.clone(),
        })
    }
}

impl InstanceLock {
    /// Removes the pid file and keeps the lock until this process exits (the kernel
    /// releases it with the last descriptor): a daemon started meanwhile is refused, not
    /// run beside this one while it finishes exiting.
    pub fn hold_until_exit(self) {
        let this = std::mem::ManuallyDrop::new(self);
        if this.paths.read_pid() == Some(std::process::id()) {
            let _ = std::fs::remove_file(this.paths.pid());
        }
    }
}

/// How long the daemon, once its server and engine have stopped, waits for work still on
/// tokio's blocking pool (a database call, a parse past its deadline) before it exits
/// without it. SQLite rolls back a transaction cut short.
pub const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

impl Drop for InstanceLock {
    fn drop(&mut self) {
        if self.paths.read_pid() == Some(std::process::id()) {
            let _ = std::fs::remove_file(self.paths.pid());
        }
    }
}

/// Removes a stale socket and binds a new one, 0600 from the start. Call with the
/// instance lock held (then no live daemon can own the old socket) and before any other
/// thread starts (the umask is process-wide).
pub fn bind_socket(paths: &StatePaths) -> Result<std::os::unix::net::UnixListener, DaemonError> {
    let socket = paths.socket();
    match std::fs::remove_file(&socket) {
        Ok(()) => tracing::info!(
            "removed the stale socket {} of a daemon that died",
            socket.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(DaemonError::io("remove the stale socket", &socket)(e)),
    }
    let old = umask(Mode::from_bits_truncate(0o177));
    let bound = std::os::unix::net::UnixListener::bind(&socket);
    umask(old);
    let listener = bound.map_err(DaemonError::io("bind", &socket))?;
    // Belt and braces: the mode does not depend on the umask having worked.
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
        .map_err(DaemonError::io("restrict the permissions of", &socket))?;
    listener
        .set_nonblocking(true)
        .map_err(DaemonError::io("configure", &socket))?;
    Ok(listener)
}

/// Runs the daemon in this process until SIGTERM, SIGINT or `optgate daemon stop`.
pub fn run_foreground(paths: &StatePaths) -> Result<(), DaemonError> {
    paths.prepare()?;
    let lock = InstanceLock::acquire(paths)?;
    let listener = bind_socket(paths)?;
    let store = Store::open(&paths.db())?;
    // SQLite creates its files with the process's umask: make them private now that they
    // exist (the checks in `prepare` already refused links and other owners).
    for file in paths.state_files() {
        optgate_client::paths::private_file(&file)?;
    }
    let optgate_bin = optgate_sched::batch::optgate_for_jobs(
        std::env::var_os(optgate_sched::batch::OPTGATE_BIN_VAR),
        std::env::current_exe().map_err(DaemonError::io(
            "find the optgate binary",
            std::path::Path::new("/proc/self/exe"),
        ))?,
    );
    let unreachable_give_up = crate::context::unreachable_give_up(std::env::var_os(
        crate::context::UNREACHABLE_GIVE_UP_VAR,
    ))?;
    let settings =
        engine::EngineSettings::from_cluster_poll(std::env::var_os(engine::CLUSTER_POLL_VAR))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("optgate-daemon")
        .enable_all()
        .build()
        .map_err(DaemonError::io("start the async runtime for", &paths.dir))?;
    let result = runtime.block_on(async {
        let shutdown = CancellationToken::new();
        let ctx = Arc::new(Daemon {
            paths: paths.clone(),
            db: Db::new(store),
            wake: tokio::sync::Notify::new(),
            backends: Backends::new(shutdown.clone()),
            optgate_bin,
            started_at: optgate_wrapper::run::now_rfc3339(),
            shutdown: shutdown.clone(),
            unreachable_give_up,
            failpoints: Default::default(),
            space: Default::default(),
        });
        let listener = UnixListener::from_std(listener)
            .map_err(DaemonError::io("listen on", &paths.socket()))?;
        tracing::info!(
            "optgate daemon {} (pid {}) serving {}",
            env!("CARGO_PKG_VERSION"),
            std::process::id(),
            paths.socket().display()
        );
        let tasks = TaskTracker::new();
        tasks.spawn(wait_for_signals(shutdown.clone()));
        tasks.spawn(server::serve(listener, ctx.clone(), shutdown.clone()));
        // The engine under its supervisor: started again if it dies, and if it keeps
        // dying the daemon stops with the reason instead of answering as if all were well.
        let (c, stop) = (ctx.clone(), shutdown.clone());
        let engine = tasks.spawn(crate::supervise::supervise(
            "the engine",
            move || engine::run_with(c.clone(), stop.clone(), settings.clone()),
            shutdown.clone(),
            crate::supervise::RESTART_DELAY,
        ));
        tasks.close();
        tasks.wait().await;
        engine.await.map_err(crate::error::join_error)?
    });
    runtime.shutdown_timeout(EXIT_GRACE);
    let _ = std::fs::remove_file(paths.socket());
    crate::failpoint::stall("exiting");
    tracing::info!(
        "optgate daemon stopped; running jobs carry on and are picked up at the next start"
    );
    lock.hold_until_exit();
    result
}

async fn wait_for_signals(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!(
            "cannot install signal handlers; stop the daemon with `optgate daemon stop`"
        );
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: stopping"),
        _ = int.recv() => tracing::info!("SIGINT: stopping"),
        _ = shutdown.cancelled() => return,
    }
    shutdown.cancel();
}
