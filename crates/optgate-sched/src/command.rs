//! The small, separate runner of scheduler commands (`sbatch`, `squeue`, `flux` …): spawn
//! with a chosen environment, capture stdout and stderr, stop a command that hangs, and
//! turn a failure into a [`SchedError`] that carries the command, its exit status, stdout
//! and stderr. Transient failures are retried with exponential back-off, logged.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::backend::SchedError;
use crate::shell::join;

/// One command to run: program, arguments, working directory, environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// The child's whole environment; `None` inherits this process's.
    pub env: Option<BTreeMap<OsString, OsString>>,
}

impl Invocation {
    pub fn new<I, S>(program: &str, args: I) -> Invocation
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Invocation {
            program: program.to_string(),
            args: args.into_iter().map(Into::into).collect(),
            cwd: None,
            env: None,
        }
    }

    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Invocation {
        self.cwd = Some(dir.into());
        self
    }

    pub fn env(mut self, env: BTreeMap<OsString, OsString>) -> Invocation {
        self.env = Some(env);
        self
    }

    /// The command as a person would type it, for errors and logs.
    pub fn display(&self) -> String {
        let mut words = vec![self.program.clone()];
        words.extend(self.args.iter().cloned());
        join(&words)
    }
}

/// What a finished command printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Output {
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// Whether stderr holds at least one line and every non-blank line `says` something
    /// (a cancel of jobs that already ended fails with only such lines, and is fine).
    pub fn stderr_only_says(&self, says: impl Fn(&str) -> bool) -> bool {
        let mut lines = self
            .stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .peekable();
        lines.peek().is_some() && lines.all(says)
    }

    /// `Ok(self)` on exit 0, else the error that says everything about the failure.
    pub fn check(self, inv: &Invocation) -> Result<Output, SchedError> {
        if self.success() {
            Ok(self)
        } else {
            Err(self.into_error(inv))
        }
    }

    pub fn into_error(self, inv: &Invocation) -> SchedError {
        SchedError::Command {
            command: inv.display(),
            status: match self.code {
                Some(c) => c.to_string(),
                None => "killed by a signal".to_string(),
            },
            stdout: self.stdout.trim().to_string(),
            stderr: self.stderr.trim().to_string(),
        }
    }
}

/// Runs commands. The real one spawns processes; tests and benchmarks substitute fakes
/// that answer with quoted scheduler output and count calls.
pub trait CommandRunner: Send + Sync {
    /// Runs the command to the end. `Err` only when it cannot be started or was stopped at
    /// its deadline; a non-zero exit is an `Ok(Output)` for the caller to judge.
    fn run(&self, inv: &Invocation) -> Result<Output, SchedError>;

    /// Waits `d` before a retry; false when the wait was cut short because optgate is
    /// stopping (no retry then).
    fn pause(&self, d: Duration) -> bool {
        std::thread::sleep(d);
        true
    }
}

/// Spawns the command for real, with stdin closed and a deadline (a hung `squeue` must
/// not hang the daemon), and stops it at once when `stop` is cancelled (the daemon is
/// shutting down: `optgate daemon stop` must not wait for a scheduler that hangs).
#[derive(Debug, Clone)]
pub struct SystemRunner {
    pub deadline: Duration,
    pub stop: Option<CancellationToken>,
}

/// How long one scheduler command may run before it is killed: 120 s. `squeue`, `sbatch`
/// and `flux jobs` answer in well under a second from a healthy controller.
pub const COMMAND_DEADLINE: Duration = Duration::from_secs(120);

impl Default for SystemRunner {
    fn default() -> Self {
        SystemRunner {
            deadline: COMMAND_DEADLINE,
            stop: None,
        }
    }
}

impl SystemRunner {
    /// A runner whose commands (and retry pauses) end as soon as `stop` is cancelled.
    pub fn stoppable(stop: CancellationToken) -> SystemRunner {
        SystemRunner {
            stop: Some(stop),
            ..SystemRunner::default()
        }
    }

    fn stopping(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.is_cancelled())
    }
}

impl CommandRunner for SystemRunner {
    fn pause(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        while Instant::now() < until {
            if self.stopping() {
                return false;
            }
            std::thread::sleep((until - Instant::now()).min(STOP_CHECK));
        }
        !self.stopping()
    }

    fn run(&self, inv: &Invocation) -> Result<Output, SchedError> {
        if self.stopping() {
            return Err(SchedError::Stopped {
                command: inv.display(),
            });
        }
        let mut child = spawn_invocation(inv)?;
        // Drain both pipes on their own threads so a chatty command cannot block on a full
        // pipe while we wait for it.
        let out = drain_pipe(
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let err = drain_pipe(
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let status = self.wait_or_kill(&mut child, inv)?;
        let stdout = out.join().unwrap_or_default();
        let stderr = err.join().unwrap_or_default();
        match status {
            Some(status) => Ok(Output {
                code: status.code(),
                stdout,
                stderr,
            }),
            None => Err(SchedError::Command {
                command: inv.display(),
                status: format!(
                    "{} after {:?}, killed",
                    crate::backend::TIMED_OUT_STATUS,
                    self.deadline
                ),
                stdout: stdout.trim().to_string(),
                stderr: stderr.trim().to_string(),
            }),
        }
    }
}

impl SystemRunner {
    /// Waits for `child` to exit: its status, or `None` when it ran past the deadline and
    /// was killed; `Stopped` when optgate began stopping meanwhile (the child is killed).
    fn wait_or_kill(
        &self,
        child: &mut Child,
        inv: &Invocation,
    ) -> Result<Option<ExitStatus>, SchedError> {
        let started = Instant::now();
        let mut pause = Duration::from_millis(2);
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return Ok(Some(status)),
                Ok(None) if self.stopping() => {
                    // Our own child, by its handle: nothing else is signalled.
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(SchedError::Stopped {
                        command: inv.display(),
                    });
                }
                Ok(None) if started.elapsed() >= self.deadline => {
                    // Our own child, by its handle: nothing else is signalled.
                    let _ = child.kill();
                    let _ = child.wait();
                    return Ok(None);
                }
                Ok(None) => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                Err(source) => {
                    return Err(SchedError::Spawn {
                        command: inv.display(),
                        source,
                    });
                }
            }
        }
    }
}

/// Starts `inv` with its stdin closed and its stdout and stderr piped.
fn spawn_invocation(inv: &Invocation) -> Result<Child, SchedError> {
    let mut cmd = Command::new(&inv.program);
    cmd.args(&inv.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = &inv.cwd {
        cmd.current_dir(dir);
    }
    if let Some(env) = &inv.env {
        cmd.env_clear().envs(env);
    }
    cmd.spawn().map_err(|source| SchedError::Spawn {
        command: inv.display(),
        source,
    })
}

/// Reads `pipe` to its end on a thread of its own; the thread returns what it read.
fn drain_pipe(pipe: Option<Box<dyn Read + Send>>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// How often a running command and a retry pause check whether optgate is stopping.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// How often and how patiently a transient failure is retried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = no retry).
    pub attempts: u32,
    /// The pause before the second attempt; each later pause doubles.
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 5,
            first_delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No pauses: for tests and benchmarks.
    pub fn immediate(attempts: u32) -> RetryPolicy {
        RetryPolicy {
            attempts,
            first_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
        }
    }

    /// The pause after failed attempt `n` (1-based): `first_delay · 2^(n-1)`, capped.
    pub fn delay_after(&self, n: u32) -> Duration {
        let factor = 2u32.saturating_pow(n.saturating_sub(1));
        self.first_delay
            .checked_mul(factor)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }

    /// Runs `op` until it succeeds, fails for good, or the attempts are spent. Only
    /// [`SchedError::is_transient`] errors are retried; each retry is logged.
    pub fn run<T>(
        &self,
        what: &str,
        op: impl FnMut() -> Result<T, SchedError>,
    ) -> Result<T, SchedError> {
        self.run_pausing(
            what,
            &|d| {
                std::thread::sleep(d);
                true
            },
            op,
        )
    }

    /// [`run`](Self::run) with `pause` between attempts; a pause that returns false (optgate
    /// is stopping) ends the retries with the last error.
    pub fn run_pausing<T>(
        &self,
        what: &str,
        pause: &dyn Fn(Duration) -> bool,
        mut op: impl FnMut() -> Result<T, SchedError>,
    ) -> Result<T, SchedError> {
        let mut attempt = 1;
        loop {
            match op() {
                Ok(v) => return Ok(v),
                Err(e) if e.is_transient() && attempt < self.attempts && !e.is_stopped() => {
                    let delay = self.delay_after(attempt);
                    tracing::warn!(
                        what,
                        attempt,
                        of = self.attempts,
                        pause_s = delay.as_secs_f64(),
                        error = %e,
                        "transient scheduler error; retrying"
                    );
                    if !pause(delay) {
                        return Err(e);
                    }
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Runs `inv` through `runner` with retries; a non-zero exit is an error.
pub fn run_checked(
    runner: &dyn CommandRunner,
    retry: &RetryPolicy,
    inv: &Invocation,
) -> Result<Output, SchedError> {
    retry.run_pausing(&inv.program, &|d| runner.pause(d), || {
        runner.run(inv)?.check(inv)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn a_failure_carries_command_status_stdout_and_stderr() {
        let inv = Invocation::new(
            "sh",
            ["-c", "echo out; echo 'sbatch: error: nope' >&2; exit 3"],
        );
        let err = SystemRunner::default()
            .run(&inv)
            .unwrap()
            .check(&inv)
            .unwrap_err();
        match &err {
            SchedError::Command {
                command,
                status,
                stdout,
                stderr,
            } => {
                assert_eq!(
                    command,
                    "sh -c 'echo out; echo '\\''sbatch: error: nope'\\'' >&2; exit 3'"
                );
                assert_eq!(status, "3");
                assert_eq!(stdout, "out");
                assert_eq!(stderr, "sbatch: error: nope");
            }
            other => panic!("unexpected {other:?}"),
        }
        let text = err.to_string();
        assert!(
            text.contains("exit status 3") && text.contains("stdout: out"),
            "{text}"
        );
    }

    #[test]
    fn a_missing_program_is_a_spawn_error_and_not_retried() {
        let inv = Invocation::new("/nonexistent/sbatch", ["--parsable"]);
        let err = SystemRunner::default().run(&inv).unwrap_err();
        assert!(matches!(err, SchedError::Spawn { .. }));
        assert!(!err.is_transient());
    }

    #[test]
    fn the_environment_is_exactly_the_one_given() {
        let mut env = BTreeMap::new();
        env.insert(OsString::from("PATH"), OsString::from("/usr/bin:/bin"));
        env.insert(OsString::from("ONLY_ME"), OsString::from("a b$c"));
        let inv = Invocation::new("env", Vec::<String>::new()).env(env);
        let out = SystemRunner::default().run(&inv).unwrap();
        let mut lines: Vec<&str> = out.stdout.lines().collect();
        lines.sort();
        assert_eq!(lines, ["ONLY_ME=a b$c", "PATH=/usr/bin:/bin"]);
    }

    #[test]
    fn a_hung_command_is_stopped_at_its_deadline_as_a_transient_error() {
        let runner = SystemRunner {
            deadline: Duration::from_millis(200),
            stop: None,
        };
        let err = runner.run(&Invocation::new("sleep", ["30"])).unwrap_err();
        assert!(err.is_transient(), "{err}");
        assert!(err.to_string().contains("timed out"), "{err}");
    }

    /// Stopping ends a hung command at once (not at its deadline), ends a retry pause,
    /// and no retry follows: `optgate daemon stop` never waits for a scheduler.
    #[test]
    fn stopping_ends_a_hung_command_and_its_retries() {
        let stop = CancellationToken::new();
        let runner = SystemRunner::stoppable(stop.clone());
        let s = stop.clone();
        let stopper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            s.cancel();
        });
        let policy = RetryPolicy {
            attempts: 5,
            first_delay: Duration::from_secs(3600),
            max_delay: Duration::from_secs(3600),
        };
        let inv = Invocation::new("sleep", ["3600"]);
        let err = run_checked(&runner, &policy, &inv).unwrap_err();
        stopper.join().unwrap();
        assert!(err.is_stopped(), "{err}");
        assert!(
            err.is_transient(),
            "its effect is unknown, never a refusal: {err}"
        );
        // A stopped runner starts nothing, and its pauses return at once.
        assert!(runner.run(&inv).unwrap_err().is_stopped());
        assert!(!runner.pause(Duration::from_secs(3600)));
    }

    #[test]
    fn back_off_doubles_up_to_the_cap() {
        let p = RetryPolicy {
            attempts: 10,
            first_delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(60),
        };
        let d: Vec<u64> = (1..=7).map(|n| p.delay_after(n).as_secs()).collect();
        assert_eq!(d, [2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(p.delay_after(200), Duration::from_secs(60));
    }

    /// Answers with a scripted sequence of results and counts calls.
    struct Scripted(Mutex<Vec<Result<Output, SchedError>>>, Mutex<u32>);

    impl CommandRunner for Scripted {
        fn run(&self, _: &Invocation) -> Result<Output, SchedError> {
            *self.1.lock().unwrap() += 1;
            self.0.lock().unwrap().remove(0)
        }
    }

    fn failed(stderr: &str) -> Result<Output, SchedError> {
        Ok(Output {
            code: Some(1),
            stdout: String::new(),
            stderr: stderr.into(),
        })
    }

    #[test]
    fn transient_failures_are_retried_and_permanent_ones_are_not() {
        let ok = || {
            Ok(Output {
                code: Some(0),
                stdout: "42\n".into(),
                stderr: String::new(),
            })
        };
        let inv = Invocation::new("sbatch", ["--parsable", "job.sh"]);
        let r = Scripted(
            Mutex::new(vec![
                failed(
                    "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation",
                ),
                failed(
                    "sbatch: error: slurm_persist_conn_open_without_init: failed to open persistent connection to host:localhost:6819: Connection refused",
                ),
                ok(),
            ]),
            Mutex::new(0),
        );
        let out = run_checked(&r, &RetryPolicy::immediate(5), &inv).unwrap();
        assert_eq!(out.stdout, "42\n");
        assert_eq!(*r.1.lock().unwrap(), 3);

        let r = Scripted(
            Mutex::new(vec![
                failed(
                    "sbatch: error: Batch job submission failed: Invalid partition name specified",
                ),
                ok(),
            ]),
            Mutex::new(0),
        );
        let err = run_checked(&r, &RetryPolicy::immediate(5), &inv).unwrap_err();
        assert!(err.to_string().contains("Invalid partition"), "{err}");
        assert_eq!(*r.1.lock().unwrap(), 1, "a rejected submission was retried");
    }

    #[test]
    fn retries_stop_when_the_attempts_are_spent() {
        let inv = Invocation::new("squeue", ["--me"]);
        let r = Scripted(
            Mutex::new(
                (0..5)
                    .map(|_| failed("squeue: error: Socket timed out on send/recv operation"))
                    .collect(),
            ),
            Mutex::new(0),
        );
        assert!(run_checked(&r, &RetryPolicy::immediate(3), &inv).is_err());
        assert_eq!(*r.1.lock().unwrap(), 3);
    }
}
