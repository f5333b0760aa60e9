//! `optgate step`, the wrapper around every task a launcher starts (`srun … optgate step
//! RUN_DIR -- APP…`): forks the app with everything passed through untouched (environment,
//! open descriptors such as `PMI_FD`, stdin/stdout/stderr), forwards the launcher's
//! signals to the app's process group, reaps it with `wait4`, writes the task's record
//! ([`crate::tasks::TaskRecord`]) atomically into the run directory, and ends as the app
//! ended (same exit status, or the same signal).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Instant;

use nix::sys::signal::{SigSet, Signal};
use nix::unistd::Pid;

use crate::tasks::{TaskEnd, TaskIdentity, TaskRecord, tasks_dir};
use crate::threads::{ThreadSampler, allowed_cpus, format_cpu_list};

/// The signals a launcher stops or pokes a step with (Slurm: SIGTERM at a time limit and
/// on `scancel`, any with `--signal`; Flux: SIGALRM/SIGHUP at a time limit, SIGTERM on
/// cancel), passed on to the app's process group.
pub const FORWARDED_SIGNALS: &[Signal] = &[
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGALRM,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("no command to run in the step")]
    NoCommand,
    #[error("cannot start {program}")]
    Start {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot wait for the app")]
    Wait(#[source] std::io::Error),
    #[error("cannot block the forwarded signals")]
    Signals(#[source] nix::Error),
}

/// The exit status for an app that could not be started, as a shell gives it: 127 when
/// there is no such program, 126 when it cannot be executed.
pub fn start_failure_status(source: &std::io::Error) -> i32 {
    match source.kind() {
        std::io::ErrorKind::NotFound => 127,
        _ => 126,
    }
}

/// How the step's app ended, and where its record went (an error: it could not be
/// written, and why).
#[derive(Debug)]
pub struct StepOutcome {
    pub record: TaskRecord,
    pub written: Result<PathBuf, std::io::Error>,
}

/// Why `optgate step` refuses its `RUN_DIR`.
#[derive(Debug, thiserror::Error)]
#[error("RUN_DIR {}: {why}", path.display())]
pub struct RunDirRefused {
    pub path: PathBuf,
    pub why: String,
}

/// Checks, before anything runs, that `run_dir` is a real folder (not a link) this process
/// may write, and that the attempt's record folders, where they exist already, are real
/// folders too: records are never written through a link to wherever it points.
pub fn check_run_dir(run_dir: &Path, attempt: u32) -> Result<(), RunDirRefused> {
    let refused = |why: String| RunDirRefused {
        path: run_dir.to_path_buf(),
        why,
    };
    crate::files::real_dir(run_dir).map_err(|e| refused(e.to_string()))?;
    nix::unistd::access(run_dir, nix::unistd::AccessFlags::W_OK)
        .map_err(|e| refused(format!("not writable ({e})")))?;
    for dir in [
        tasks_dir(run_dir, attempt),
        crate::nodes::nodes_dir(run_dir, attempt),
    ] {
        match crate::files::real_dir(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(refused(e.to_string()));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Runs `argv` as this task's app and records it in `RUN_DIR/tasks.attempt-N/`.
pub fn run_step(run_dir: &Path, attempt: u32, argv: &[String]) -> Result<StepOutcome, StepError> {
    use std::os::unix::process::CommandExt;
    let (program, args) = argv.split_first().ok_or(StepError::NoCommand)?;
    let identity = TaskIdentity::from_env(|k| std::env::var(k).ok());
    let cpus = allowed_cpus();
    // Blocked here, before any thread starts, so every thread inherits the mask and the
    // forwarder below is the only one to take them; the child's mask is emptied before
    // exec (std's spawn keeps the parent's).
    let mut forwarded = SigSet::empty();
    for s in FORWARDED_SIGNALS {
        forwarded.add(*s);
    }
    forwarded.thread_block().map_err(StepError::Signals)?;
    let started = Instant::now();
    let mut command = std::process::Command::new(program);
    command.args(args);
    // Its own group, so a forwarded signal reaches everything it started — unless stdin is
    // a terminal (`srun --pty`): a process outside the terminal's foreground group is
    // stopped when it reads it, so the app then stays in this wrapper's group and the
    // signals go to the app alone.
    let target = match std::io::stdin().is_terminal() {
        false => {
            command.process_group(0);
            ForwardTo::Group
        }
        true => ForwardTo::Process,
    };
    // SAFETY: between fork and exec only `pthread_sigmask`, async-signal-safe, runs: the
    // app starts with the mask the launcher gave this wrapper (none blocked), not ours.
    unsafe {
        command.pre_exec(|| {
            SigSet::empty()
                .thread_set_mask()
                .map_err(|e| std::io::Error::from_raw_os_error(e as i32))
        });
    }
    let child = command.spawn().map_err(|source| StepError::Start {
        program: program.clone(),
        source,
    })?;
    let pid = child.id() as i32;
    drop(child);
    let last_forwarded = Arc::new(AtomicI32::new(0));
    spawn_forwarder(
        forwarded,
        Pid::from_raw(pid),
        target,
        last_forwarded.clone(),
    );
    let sampler = ThreadSampler::start(pid);
    let (status, usage) = crate::process::wait4_blocking(pid).map_err(StepError::Wait)?;
    let wall_s = started.elapsed().as_secs_f64();
    let threads_max = sampler.stop().threads_max;
    let measured = Measured {
        cpus,
        threads_max,
        status,
        usage,
        wall_s,
        forwarded: Some(last_forwarded.load(Ordering::SeqCst)).filter(|s| *s != 0),
    };
    let record = measured.record(&identity);
    let written = write_record(run_dir, attempt, &identity, &record);
    Ok(StepOutcome { record, written })
}

/// What the wrapper saw of its app, before it becomes a record.
struct Measured {
    cpus: Vec<usize>,
    threads_max: Option<u32>,
    status: std::process::ExitStatus,
    usage: crate::process::ChildUsage,
    wall_s: f64,
    forwarded: Option<i32>,
}

impl Measured {
    fn record(self, identity: &TaskIdentity) -> TaskRecord {
        use std::os::unix::process::ExitStatusExt;
        let (end, exit_code, signal) = match (self.status.code(), self.status.signal()) {
            (Some(c), _) => (TaskEnd::Exited, Some(c), None),
            (None, s) => (TaskEnd::Signaled, None, s),
        };
        let u = self.usage;
        TaskRecord {
            scheduler: identity.scheduler,
            rank: identity.rank,
            local_rank: identity.local_rank,
            node: identity.node.clone(),
            host: crate::run::hostname(),
            step_size: identity.step_size,
            cpus_allowed: u32::try_from(self.cpus.len()).unwrap_or(u32::MAX),
            cpus_allowed_list: format_cpu_list(&self.cpus),
            threads_max: self.threads_max,
            cpu_user_s: u.user_s,
            cpu_system_s: u.system_s,
            cpu_s: u.user_s + u.system_s,
            max_rss_kib: u.max_rss_kib,
            wall_s: self.wall_s,
            end,
            exit_code,
            signal,
            forwarded_signal: self.forwarded,
        }
    }
}

/// Writes the record as `tasks.attempt-N/rank-R.json`, whole or not at all.
fn write_record(
    run_dir: &Path,
    attempt: u32,
    identity: &TaskIdentity,
    record: &TaskRecord,
) -> Result<PathBuf, std::io::Error> {
    let dir = tasks_dir(run_dir, attempt);
    crate::files::ensure_real_dir(&dir)?;
    let path = dir.join(identity.record_name(std::process::id()));
    let json = serde_json::to_vec_pretty(record).expect("task record serialises");
    crate::manifest::write_atomic(&path, &json)?;
    Ok(path)
}

/// Ends this process as the app ended: its exit status, or the same signal (default
/// action restored and unblocked first), so the launcher sees what it would have seen
/// without the wrapper.
pub fn pass_on(record: &TaskRecord) -> ! {
    if let Some(raw) = record.signal
        && let Ok(sig) = Signal::try_from(raw)
    {
        // SAFETY: restoring a default disposition; no handler runs.
        unsafe {
            let _ = nix::sys::signal::signal(sig, nix::sys::signal::SigHandler::SigDfl);
        }
        let mut only = SigSet::empty();
        only.add(sig);
        let _ = only.thread_unblock();
        let _ = nix::sys::signal::raise(sig);
        std::process::exit(128 + raw);
    }
    std::process::exit(record.exit_code.unwrap_or(1));
}

/// Where forwarded signals go: the app's own process group, or the app alone when it
/// shares the wrapper's group (stdin a terminal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ForwardTo {
    Group,
    Process,
}

/// A thread that takes the blocked `signals` and passes each on to the app `pid` (its
/// group, or the process alone).
fn spawn_forwarder(signals: SigSet, pid: Pid, target: ForwardTo, last: Arc<AtomicI32>) {
    std::thread::spawn(move || {
        while let Ok(sig) = signals.wait() {
            last.store(sig as i32, Ordering::SeqCst);
            // The app may have ended meanwhile: nothing to forward to.
            match target {
                ForwardTo::Group => drop(crate::signal::signal_group(pid, sig)),
                ForwardTo::Process => drop(nix::sys::signal::kill(pid, sig)),
            }
        }
    });
}
