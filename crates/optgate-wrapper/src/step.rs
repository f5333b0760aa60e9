//! `optgate step`, the wrapper around every task a launcher starts (`srun … optgate step
//! RUN_DIR -- APP…`): forks the app with everything passed through untouched (environment,
//! open descriptors such as `PMI_FD`, stdin/stdout/stderr), forwards the launcher's
//! signals to the app's process group, reaps it with `wait4`, writes the task's record
//! ([`crate::tasks::TaskRecord`]) atomically into the run directory, and ends as the app
//! ended (same exit status, or the same signal).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, Signal};
use nix::unistd::Pid;

use crate::tasks::{TaskEnd, TaskIdentity, TaskRecord, format_cpu_list, tasks_dir};

/// How often the app's threads are counted (`/proc/PID/stat` of the app and each of its
/// descendants). Threads that live shorter than this may be missed.
pub const THREAD_SAMPLE_INTERVAL: Duration = Duration::from_millis(100);

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
    std::fs::create_dir_all(&dir)?;
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

/// Counts the threads of the app's tree every [`THREAD_SAMPLE_INTERVAL`]: `optgate step`
/// for a task, and the run wrapper for a run without a launcher (the same sampler, so a
/// local run's figures mean what a task's do).
pub(crate) struct ThreadSampler {
    stop: Arc<AtomicBool>,
    most: Arc<AtomicU32>,
    runnable: Arc<std::sync::Mutex<Vec<u32>>>,
    thread: std::thread::JoinHandle<()>,
}

/// What the samples of a tree's threads found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampledThreads {
    /// The most threads one process of the tree had at any sample (None: no sample saw it).
    pub threads_max: Option<u32>,
    /// The median over the samples of the tree's runnable threads (state `R`, running or
    /// waiting for a CPU: the cores the tree asked for, whatever it got); None: no sample.
    pub runnable_median: Option<f64>,
}

impl ThreadSampler {
    pub(crate) fn start(root: i32) -> ThreadSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let most = Arc::new(AtomicU32::new(0));
        let runnable = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (s, m, r) = (stop.clone(), most.clone(), runnable.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                if let Some(sample) = sample_tree(root) {
                    m.fetch_max(sample.most_threads, Ordering::SeqCst);
                    if let Ok(mut v) = r.lock() {
                        v.push(sample.runnable);
                    }
                }
                std::thread::park_timeout(THREAD_SAMPLE_INTERVAL);
            }
        });
        ThreadSampler {
            stop,
            most,
            runnable,
            thread,
        }
    }

    /// Stops sampling and says what the samples found.
    pub(crate) fn stop(self) -> SampledThreads {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.thread().unpark();
        let _ = self.thread.join();
        let runnable = self.runnable.lock().map(|v| v.clone()).unwrap_or_default();
        SampledThreads {
            threads_max: Some(self.most.load(Ordering::SeqCst)).filter(|n| *n > 0),
            runnable_median: median_count(runnable),
        }
    }
}

/// The median of sample counts (None when there are none).
fn median_count(mut v: Vec<u32>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let n = v.len();
    Some(if n % 2 == 1 {
        f64::from(v[n / 2])
    } else {
        0.5 * (f64::from(v[n / 2 - 1]) + f64::from(v[n / 2]))
    })
}

/// One sample of a tree: the most threads of one process, the runnable threads of all.
struct TreeSample {
    most_threads: u32,
    runnable: u32,
}

/// One sample of the app's tree (`root` and its descendants, found through
/// `/proc/PID/task/TID/children`): the most threads any one process has now, from each
/// one's `/proc/PID/stat`, and how many of all their threads are runnable, from each
/// thread's `/proc/PID/task/TID/stat`. The cost is the tree's size, not the node's
/// process count. None when no process of the tree was seen (it ended).
fn sample_tree(root: i32) -> Option<TreeSample> {
    let mut seen = std::collections::HashSet::new();
    let mut todo = vec![root];
    let mut most = None;
    let mut runnable = 0;
    while let Some(pid) = todo.pop() {
        if !seen.insert(pid) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(n) = threads_of(&stat) {
            most = most.max(Some(n));
        }
        let (children, running) = threads_children_and_runnable(pid);
        todo.extend(children);
        runnable += running;
    }
    most.map(|most_threads| TreeSample {
        most_threads,
        runnable,
    })
}

/// The children of every thread of `pid`, and how many of its threads are runnable.
fn threads_children_and_runnable(pid: i32) -> (Vec<i32>, u32) {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return (Vec::new(), 0);
    };
    let mut children = Vec::new();
    let mut runnable = 0;
    for t in threads.flatten() {
        if let Ok(stat) = std::fs::read_to_string(t.path().join("stat"))
            && state_of(&stat) == Some("R")
        {
            runnable += 1;
        }
        if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
            children.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    (children, runnable)
}

/// The state letter of a `/proc/…/stat` line (after the command's closing parenthesis).
pub fn state_of(stat: &str) -> Option<&str> {
    stat.rsplit_once(')')?.1.split_whitespace().next()
}

/// The thread count of a live process's `/proc/PID/stat` line: after the command's
/// closing parenthesis, field 3 is the state, 20 the thread count. None for a zombie.
pub fn threads_of(stat: &str) -> Option<u32> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if matches!(fields.first(), Some(&"Z") | Some(&"X")) {
        return None;
    }
    fields.get(17)?.parse().ok()
}

/// The CPUs this process may run on (`sched_getaffinity`): the step's, not the node's.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is plain data the kernel fills in; the size passed is its own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|c| libc::CPU_ISSET(*c, &set))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_count_comes_from_after_the_command_name() {
        // A command name with spaces and a parenthesis, as /proc shows it.
        let stat = "4242 (my (app) x) S 1 4240 4240 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 6 0 \
                    123 4096 100 18446744073709551615";
        assert_eq!(threads_of(stat), Some(6));
        let zombie = "4243 (a) Z 1 4240 4240 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0";
        assert_eq!(threads_of(zombie), None);
        assert_eq!(threads_of("garbage"), None);
    }

    #[test]
    fn this_process_is_allowed_at_least_one_cpu() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        assert!(cpus.len() <= std::thread::available_parallelism().unwrap().get());
    }
}
