//! The client side, for the CLI: connect, handshake, one request, one response — plain
//! blocking I/O, no runtime needed — the answers from the database while no daemon runs
//! ([`call_or_read`], [`read_history`]), starting the daemon in the background, and
//! whether one runs.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{ClientError, ReadError};
use crate::history::History;
use crate::paths::StatePaths;
use crate::protocol::{
    DaemonInfo, ErrorKind, Hello, HelloReply, MAX_REPLY_BYTES, PROTOCOL_VERSION, Request, Response,
    Welcome,
};

/// How long the client waits for the daemon's answer.
const REPLY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a background start may take before the daemon must answer.
const START_TIMEOUT: Duration = Duration::from_secs(30);

fn io_err(op: &'static str, paths: &StatePaths) -> impl FnOnce(std::io::Error) -> ClientError {
    let socket = paths.socket();
    move |source| ClientError::Io { op, socket, source }
}

fn send<T: Serialize>(w: &mut UnixStream, msg: &T, paths: &StatePaths) -> Result<(), ClientError> {
    let mut line = serde_json::to_vec(msg).expect("protocol messages serialise");
    line.push(b'\n');
    w.write_all(&line).map_err(io_err("write to", paths))
}

fn receive<T: DeserializeOwned>(
    r: &mut BufReader<UnixStream>,
    paths: &StatePaths,
) -> Result<T, ClientError> {
    let mut buf = Vec::new();
    let n = r
        .by_ref()
        .take(MAX_REPLY_BYTES as u64 + 1)
        .read_until(b'\n', &mut buf)
        .map_err(io_err("read from", paths))?;
    if n == 0 {
        return Err(ClientError::Closed {
            socket: paths.socket(),
        });
    }
    if buf.len() > MAX_REPLY_BYTES {
        return Err(ClientError::Protocol(format!(
            "the answer is longer than {MAX_REPLY_BYTES} bytes"
        )));
    }
    serde_json::from_slice(&buf).map_err(|e| ClientError::Protocol(e.to_string()))
}

/// How long a client keeps trying while the daemon says it is busy (holding its
/// connection limit): longer than the daemon waits for a silent client's hello and
/// request lines together, so a connection frees up within it.
pub const BUSY_RETRY_FOR: Duration = Duration::from_secs(15);
/// The pause between two tries while the daemon is busy.
const BUSY_RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Connects and does the handshake, trying again for up to `busy_wait` while the daemon
/// is busy.
fn connect(
    paths: &StatePaths,
) -> Result<(UnixStream, BufReader<UnixStream>, Welcome), ClientError> {
    connect_waiting(paths, BUSY_RETRY_FOR)
}

fn connect_waiting(
    paths: &StatePaths,
    busy_wait: Duration,
) -> Result<(UnixStream, BufReader<UnixStream>, Welcome), ClientError> {
    let until = Instant::now() + busy_wait;
    loop {
        match connect_once(paths) {
            Err(ClientError::Refused {
                kind: ErrorKind::Busy,
                ..
            }) if Instant::now() < until => std::thread::sleep(BUSY_RETRY_PAUSE),
            // A daemon dying (killed) while it still held its socket dropped the
            // handshake: nothing was asked yet, so ask again; once it is gone the socket
            // refuses and the answer is NotRunning.
            Err(e) if e.is_dropped_handshake() && Instant::now() < until => {
                std::thread::sleep(BUSY_RETRY_PAUSE)
            }
            other => return other,
        }
    }
}

fn connect_once(
    paths: &StatePaths,
) -> Result<(UnixStream, BufReader<UnixStream>, Welcome), ClientError> {
    let socket = paths.socket();
    let mut stream = match UnixStream::connect(&socket) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            // No socket, or one left by a daemon that died: nobody is serving.
            return Err(ClientError::NotRunning { socket });
        }
        Err(source) => {
            return Err(ClientError::Io {
                op: "connect to",
                socket,
                source,
            });
        }
    };
    stream
        .set_read_timeout(Some(REPLY_TIMEOUT))
        .map_err(io_err("configure", paths))?;
    let reader = BufReader::new(stream.try_clone().map_err(io_err("use", paths))?);
    let mut reader = reader;
    let sent = send(
        &mut stream,
        &Hello {
            protocol: PROTOCOL_VERSION,
            version: env!("CARGO_PKG_VERSION").to_string(),
        },
        paths,
    );
    // A daemon that turns the connection away (busy) writes why and closes at once, so
    // the hello may meet a closed socket: its reason is still there to read.
    if let Err(e) = sent {
        return match receive::<HelloReply>(&mut reader, paths) {
            Ok(HelloReply::Error(r)) => Err(ClientError::Refused {
                kind: r.kind,
                message: r.message,
            }),
            _ => Err(e),
        };
    }
    match receive::<HelloReply>(&mut reader, paths)? {
        HelloReply::Welcome(w) if w.protocol == PROTOCOL_VERSION => Ok((stream, reader, w)),
        HelloReply::Welcome(w) => Err(ClientError::VersionMismatch {
            daemon: w.protocol,
            daemon_version: w.version,
            client: PROTOCOL_VERSION,
        }),
        HelloReply::Error(e) => Err(ClientError::Refused {
            kind: e.kind,
            message: e.message,
        }),
    }
}

/// Whether a daemon answers, and who it is.
pub fn ping(paths: &StatePaths) -> Result<Welcome, ClientError> {
    connect(paths).map(|(_, _, w)| w)
}

/// Sends one request. A refusal by the daemon (`Response::Error`) is returned as
/// [`ClientError::Refused`]. While the daemon is busy it tries again for up to
/// [`BUSY_RETRY_FOR`].
pub fn call(paths: &StatePaths, request: &Request) -> Result<Response, ClientError> {
    call_waiting(paths, request, BUSY_RETRY_FOR)
}

/// [`call`], waiting at most `busy_wait` for a busy daemon.
pub fn call_waiting(
    paths: &StatePaths,
    request: &Request,
    busy_wait: Duration,
) -> Result<Response, ClientError> {
    let (mut stream, mut reader, _) = connect_waiting(paths, busy_wait)?;
    send(&mut stream, request, paths)?;
    match receive::<Response>(&mut reader, paths)? {
        Response::Error(e) => Err(ClientError::Refused {
            kind: e.kind,
            message: e.message,
        }),
        other => Ok(other),
    }
}

/// Where an answer came from: the running daemon, or its database read while none runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Daemon,
    /// No daemon answered; the database was read read-only (it is as the daemon left it).
    Database,
}

/// Like [`call`], but a status or report request that finds no daemon is answered from
/// the state directory's database, read-only, when there is one: the answer is there even
/// while the daemon is stopped. Other requests, and a missing database, keep the
/// `NotRunning` error.
pub fn call_or_read(
    paths: &StatePaths,
    request: &Request,
) -> Result<(Response, Source), ClientError> {
    match call(paths, request) {
        Err(ClientError::NotRunning { socket }) if paths.db().exists() => {
            let read = match request {
                Request::Status(r) => read_offline(paths, |store, info| {
                    Ok(crate::answers::status::answer(store, r.clone(), info)?)
                }),
                Request::Report(r) => read_offline(paths, |store, _| {
                    crate::answers::report::answer(store, r.clone())
                }),
                _ => return Err(ClientError::NotRunning { socket }),
            };
            match read {
                Ok(Response::Error(e)) => Err(ClientError::Refused {
                    kind: e.kind,
                    message: e.message,
                }),
                Ok(r) => Ok((r, Source::Database)),
                Err(e) => Err(ClientError::Unreadable(Box::new(e))),
            }
        }
        other => other.map(|r| (r, Source::Daemon)),
    }
}

/// Answers from the state directory's database opened read-only, as a stopped daemon.
fn read_offline(
    paths: &StatePaths,
    answer: impl FnOnce(&optgate_store::Store, DaemonInfo) -> Result<Response, ReadError>,
) -> Result<Response, ReadError> {
    // What the daemon would refuse to open, a reader refuses too: a link, another user's
    // file, a directory others can write.
    paths.check_for_reading()?;
    let store = optgate_store::Store::open_read_only(&paths.db())?;
    let info = DaemonInfo {
        // No daemon: pid 0 and no start time say so in the JSON.
        pid: 0,
        version: env!("CARGO_PKG_VERSION").to_string(),
        protocol: PROTOCOL_VERSION,
        state_dir: paths.dir.clone(),
        started_at: String::new(),
        long_requests_reading: 0,
    };
    answer(&store, info)
}

/// The history of experiment `name` from the state directory's database, read-only
/// (the daemon running or not: WAL readers never block it), with its change points;
/// empty when there is no database yet.
pub fn read_history(paths: &StatePaths, name: &str) -> Result<History, ReadError> {
    if !paths.db().exists() {
        return Ok(crate::history::history_of(Vec::new()));
    }
    paths.check_for_reading()?;
    let store = optgate_store::Store::open_read_only(&paths.db())?;
    Ok(crate::history::history_of_rows(
        store.executions_by_name_each(name)?,
    ))
}

/// Starts `optgate daemon --foreground` detached (own session, output appended to the
/// daemon's log) and waits until it answers. `optgate` is the binary to run.
pub fn start_background(paths: &StatePaths, optgate: &Path) -> Result<Welcome, ClientError> {
    let start_err = |what: String| ClientError::Start(what);
    paths.prepare().map_err(|e| start_err(e.to_string()))?;
    let log_path = paths.log();
    let log = crate::paths::open_state_file(&log_path, true)
        .map_err(|e| start_err(format!("cannot open {}: {e}", log_path.display())))?;
    let log2 = log
        .try_clone()
        .map_err(|e| start_err(format!("cannot open {}: {e}", log_path.display())))?;
    let mut cmd = Command::new(optgate);
    cmd.args(["daemon", "--foreground"])
        .env("OPTGATE_HOME", &paths.dir)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2);
    if std::env::var_os("OPTGATE_LOG").is_none() && std::env::var_os("RUST_LOG").is_none() {
        cmd.env("OPTGATE_LOG", "info");
    }
    // SAFETY: setsid is async-signal-safe. Its own session keeps the daemon alive when the
    // terminal that started it closes.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    // Only what this start appends to the log is its reason (older lines are not).
    let log_start = std::fs::metadata(&log_path).map_or(0, |m| m.len());
    let mut child = cmd
        .spawn()
        .map_err(|e| start_err(format!("cannot run {}: {e}", optgate.display())))?;
    let t0 = Instant::now();
    loop {
        match ping(paths) {
            Ok(w) => return Ok(w),
            Err(ClientError::NotRunning { .. }) => {}
            Err(e) => return Err(e),
        }
        if let Ok(Some(status)) = child.try_wait() {
            // It may have lost a race with another start: then that daemon answers.
            if let Ok(w) = ping(paths) {
                return Ok(w);
            }
            return Err(start_err(format!(
                "it exited ({status}); {}",
                start_output(&log_path, log_start, 10)
            )));
        }
        if t0.elapsed() > START_TIMEOUT {
            return Err(start_err(format!(
                "it did not answer within {} s; see {}",
                START_TIMEOUT.as_secs(),
                log_path.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A running process named by its pid and its start time (field 22 of `/proc/PID/stat`),
/// so that a pid reused by another process is never taken for the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DaemonProcess {
    pub pid: u32,
    pub start_time: u64,
}

/// Start time of `pid` and whether it still runs (not a zombie); `None` when there is no
/// such process.
fn proc_start_time(pid: u32) -> Option<(u64, bool)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last `)`.
    let fields: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    Some((fields.get(19)?.parse().ok()?, !matches!(state, 'Z' | 'X')))
}

impl DaemonProcess {
    /// The daemon the pid file of `paths` names, while it runs.
    pub fn of(paths: &StatePaths) -> Option<DaemonProcess> {
        let pid = paths.read_pid()?;
        let (start_time, running) = proc_start_time(pid)?;
        running.then_some(DaemonProcess { pid, start_time })
    }

    /// Whether this very process still runs (a zombie has exited).
    pub fn is_running(&self) -> bool {
        proc_start_time(self.pid) == Some((self.start_time, true))
    }

    /// What the process is, for a message: pid, command line, state and thread count.
    pub fn describe(&self) -> String {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", self.pid))
            .map(|b| {
                String::from_utf8_lossy(&b)
                    .replace('\0', " ")
                    .trim()
                    .to_string()
            })
            .unwrap_or_default();
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
                .unwrap_or_else(|| "?".to_string())
        };
        format!(
            "pid {} (`{cmdline}`, state {}, {} threads)",
            self.pid,
            field("State:"),
            field("Threads:")
        )
    }
}

/// Whether a daemon holds the state directory's lock right now.
pub fn is_locked(paths: &StatePaths) -> bool {
    let Ok(file) = File::open(paths.lock()) else {
        return false;
    };
    Flock::lock(file, FlockArg::LockSharedNonblock).is_err()
}

/// Waits up to `limit` until the daemon on `paths` has exited: its lock is free and
/// `process` (the daemon as found before the stop, if it was) no longer runs.
pub fn wait_until_stopped(
    paths: &StatePaths,
    process: Option<&DaemonProcess>,
    limit: Duration,
) -> bool {
    let t0 = Instant::now();
    loop {
        let gone = !is_locked(paths) && !process.is_some_and(|p| p.is_running());
        if gone {
            return true;
        }
        if t0.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What a failed start wrote to the log past byte `start` (its last `lines` lines); when it
/// wrote nothing, why that may be (a full file system says so, with its free bytes).
fn start_output(path: &Path, start: u64, lines: usize) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let new = String::from_utf8_lossy(text.get(start as usize..).unwrap_or_default());
    let v: Vec<&str> = new.lines().rev().take(lines).collect();
    if !v.is_empty() {
        let tail = v.into_iter().rev().collect::<Vec<_>>().join("\n");
        return format!("the end of {}:\n{tail}", path.display());
    }
    match crate::space::bytes_free(path) {
        Some(0) => crate::space::NoSpace {
            place: crate::space::Place::StateDir,
            path: path.parent().unwrap_or(path).to_path_buf(),
            free: Some(0),
        }
        .reason(),
        _ => format!("it wrote nothing to {}", path.display()),
    }
}

#[cfg(test)]
mod start_output_tests {
    use super::*;

    /// A failed start quotes only what it appended to the log, never older lines; with
    /// nothing appended it says so. Catches the old tail of the whole log (an earlier
    /// daemon's lines read as this start's reason).
    #[test]
    fn only_the_lines_of_this_start_are_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("daemon.log");
        std::fs::write(&log, "old line 1\nold line 2\n").unwrap();
        let start = std::fs::metadata(&log).unwrap().len();
        assert_eq!(
            start_output(&log, start, 10),
            format!("it wrote nothing to {}", log.display())
        );
        std::fs::write(&log, "old line 1\nold line 2\nnew: cannot bind\n").unwrap();
        let said = start_output(&log, start, 10);
        assert!(said.ends_with(":\nnew: cannot bind"), "{said}");
        assert!(!said.contains("old line"), "{said}");
    }
}

#[cfg(test)]
mod dropped_handshake_tests {
    use super::*;

    /// A listener that takes one connection and drops it unread (as a daemon killed with
    /// SIGKILL does while its socket is still open), then goes away: the client sees a
    /// reset, asks again and finds no daemon — never an I/O error for a daemon that died.
    #[test]
    fn a_daemon_dying_during_the_handshake_reads_as_not_running() {
        let dir = tempfile::tempdir().unwrap();
        let paths = StatePaths::new(dir.path());
        std::fs::create_dir_all(paths.socket().parent().unwrap()).unwrap();
        let listener = std::os::unix::net::UnixListener::bind(paths.socket()).unwrap();
        let dying = std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            drop(conn);
            drop(listener);
        });
        let answer = ping(&paths);
        dying.join().unwrap();
        assert!(
            matches!(answer, Err(ClientError::NotRunning { .. })),
            "{answer:?}"
        );
    }
}
