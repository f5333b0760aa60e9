//! The scheduler trait every backend implements (local, Slurm, Flux) and the job it is
//! given. A job is one block (blocked design: every arm once, back to back, on one
//! allocation) or one run (independent design). The daemon only ever talks to this trait.
//!
//! Contract:
//! * `submit` is the only call that creates work. The job's `name` carries the experiment
//!   and block/run id, so after a crash between submitting and recording the job id,
//!   `find_by_name` finds the job instead of it being submitted twice.
//! * `poll` is one batched query for all the jobs given, whatever their number.
//! * Whether a run completed, and how, comes from the run manifests on disk first; the
//!   scheduler's state only explains failures (timeout, node failure, pre-emption…).
//! * Backends never touch the daemon's database.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use optgate_experiment::SchedulerKind;
use serde::{Deserialize, Serialize};

/// A scheduler's job id as text (`1234`, `ƒM7Zq9AKHno`, a local pid-based id).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub String);

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One run inside a job, in the order the job runs them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRun {
    pub run_id: String,
    pub arm: String,
    pub block: u32,
    pub replicate: u32,
    /// The run's directory, holding its rendered `run.sh`.
    pub run_dir: PathBuf,
    /// The arm's launcher resources for this run's launch line.
    pub nodes: u32,
    pub tasks_per_node: u32,
    pub cpus_per_task: u32,
    pub gpus_per_task: u32,
    pub launcher_args: Vec<String>,
    /// Wall-clock limit of this run alone.
    pub time_limit: Option<Duration>,
    /// The cpufreq governor the arm asks for (one of
    /// [`optgate_experiment::load::CPUFREQ_GOVERNORS`]): Slurm applies it to the run's step
    /// (`srun --cpu-freq=`); Flux has no equivalent.
    #[serde(default)]
    pub governor: Option<String>,
}

/// What a backend is asked to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// `og-<experiment id>-<block or run id>`: unique per piece of work, safe everywhere.
    pub name: String,
    /// The job's own directory: its script, output files, `probe.json`, job-id file.
    pub dir: PathBuf,
    pub runs: Vec<JobRun>,
    /// The allocation (the largest shape any run needs).
    pub nodes: u32,
    pub tasks_per_node: u32,
    pub cpus_per_task: u32,
    pub gpus_per_task: u32,
    /// The allocation's time limit.
    pub time_limit: Duration,
    pub queue: Option<String>,
    pub account: Option<String>,
    pub exclusive: bool,
    pub extra_directives: Vec<String>,
    /// The optgate binary the job calls on the compute node (`probe`, `exec-run`).
    pub optgate_bin: PathBuf,
    /// Which attempt of the block's work this job is (1 for the first job, 2 for the first
    /// resubmission, …), passed to each `exec-run` so a stale attempt never overwrites a
    /// newer one's record.
    pub attempt: u32,
}

/// What the scheduler says about a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", content = "detail", rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for resources (PENDING, CONFIGURING, DEPEND, PRIORITY, SCHED…).
    Pending,
    Running,
    /// Ended normally as far as the scheduler knows; the manifests tell the runs' story.
    Completed,
    /// Ended with a failure the scheduler attributes to the job (FAILED, non-zero exit).
    Failed(String),
    Cancelled,
    /// Killed at its time limit.
    Timeout,
    /// Lost to the system: node failure, pre-emption, boot failure… (the detail says
    /// which). Such a job may be resubmitted. (Out of memory is `Failed`: the app's own
    /// memory use, which a resubmission would repeat.)
    Lost(String),
    /// The scheduler accepted the job, then found its request cannot be granted as written
    /// (Flux: exception `alloc`, "unsatisfiable request"). Resubmitting would repeat it:
    /// the runs fail with this reason at once.
    Refused(String),
    /// The scheduler no longer knows the job (finished and forgotten, or never existed).
    Unknown,
}

impl JobState {
    /// One word for the state (`pending`, `running`, `completed`, …), as `optgate status`
    /// shows what the scheduler said of a job.
    pub fn word(&self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Failed(_) => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Timeout => "timeout",
            JobState::Lost(_) => "lost",
            JobState::Refused(_) => "refused",
            JobState::Unknown => "unknown",
        }
    }

    pub fn is_finished(&self) -> bool {
        !matches!(self, JobState::Pending | JobState::Running)
    }
}

/// A failed scheduler command: what ran, its exit status, and what it printed.
#[derive(Debug, thiserror::Error)]
pub enum SchedError {
    #[error("`{command}` failed (exit status {status}): {stderr}{}", if .stdout.is_empty() { String::new() } else { format!(" (stdout: {})", .stdout) })]
    Command {
        command: String,
        status: String,
        stdout: String,
        stderr: String,
    },
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot parse {what} from `{text}`")]
    Parse { what: &'static str, text: String },
    /// optgate is shutting down: the command was stopped (or not started). Whether it took
    /// effect is unknown, as after a transient failure; the next start reconciles.
    #[error("`{command}` stopped: optgate is shutting down")]
    Stopped { command: String },
    /// A value the job script cannot carry faithfully (directive lines are read by the
    /// scheduler, not a shell, so they cannot be quoted): refused rather than mangled.
    #[error("cannot write {field} `{value}` into a job script: {reason}")]
    Unrepresentable {
        field: String,
        value: String,
        reason: String,
    },
}

/// What a failed scheduler command means for whoever called it: decided by
/// [`SchedError::class`] from how the command failed (a spawn error's kind, the status of a
/// command optgate stopped at its deadline) and from whole messages the Slurm and Flux
/// clients print, never from single words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// Worth retrying with back-off: a busy or restarting controller, a timed-out RPC, a
    /// command optgate itself stopped at its deadline.
    Transient,
    /// Every command fails the same way until someone starts the scheduler or fixes the
    /// environment (the client is not installed; Flux has no broker at `FLUX_URI`): shown,
    /// and asked again at the longest interval, never retried in a loop.
    Unreachable,
    /// The scheduler refused the request (an unknown partition, a limit, a bad account)
    /// or optgate could not make it (an unwritable job directory, a value a job script
    /// cannot carry): asking again would be refused the same way.
    Rejected,
    /// optgate is shutting down: whether the command took effect is unknown, as after a
    /// transient failure; the next start reconciles.
    Stopped,
}

/// Messages (compared case-insensitively, as whole phrases) of a scheduler that is busy,
/// restarting or briefly unreachable: the Slurm 22.05 client library's own strings
/// (`libslurmfull`: `slurm_errno.c` and the submission retry loop), and the POSIX errno
/// texts both clients print for a socket that failed.
pub const TRANSIENT_MESSAGES: &[&str] = &[
    // Slurm.
    "socket timed out on send/recv operation",
    "unable to contact slurm controller",
    "zero bytes were transmitted or received",
    "communication connection failure",
    "slurm temporarily unable to accept job",
    "slurm job queue full",
    "job creation temporarily disabled",
    "unable to create job record, try again",
    // errno texts (EAGAIN, ECONNREFUSED, ECONNRESET, ETIMEDOUT, ENOTCONN).
    "resource temporarily unavailable",
    "connection refused",
    "connection reset by peer",
    "connection timed out",
    "transport endpoint is not connected",
];

/// Messages of a scheduler that cannot be reached at all: Flux's client with no broker
/// at `FLUX_URI` (`Unable to connect to Flux: broker socket … was not found`).
pub const UNREACHABLE_MESSAGES: &[&str] = &["unable to connect to flux"];

/// The services a Flux instance registers while it starts (its modules load one by one
/// after the broker answers) and registers again when a module restarts. Until then the
/// broker answers every request for them with `No service matching <topic> is
/// registered` (flux-core 0.88.0, `src/broker/broker.c`, `broker_request_sendmsg_new`:
/// `"No service matching %s is registered"`): a starting or restarting instance, asked
/// again after a pause.
pub const FLUX_STARTUP_SERVICES: &[&str] = &[
    "job-ingest",
    "job-manager",
    "job-list",
    "job-info",
    "kvs",
    "sched",
    "feasibility",
    "resource",
];

/// Whether `stderr` holds the broker's whole `No service matching <topic> is registered`
/// answer for a topic of one of [`FLUX_STARTUP_SERVICES`] (`job-ingest.submit`, …).
fn flux_service_not_yet_registered(stderr: &str) -> bool {
    const BEFORE: &str = "no service matching ";
    const AFTER: &str = " is registered";
    let s = stderr.to_ascii_lowercase();
    s.match_indices(BEFORE).any(|(at, _)| {
        let rest = &s[at + BEFORE.len()..];
        let Some((topic, _)) = rest.split_once(AFTER) else {
            return false;
        };
        let service = topic.split('.').next().unwrap_or("");
        !topic.contains(char::is_whitespace)
            && topic.contains('.')
            && FLUX_STARTUP_SERVICES.contains(&service)
    })
}

/// How [`crate::command`] fills `status` for a command it stopped at its deadline.
pub const TIMED_OUT_STATUS: &str = "timed out";

impl SchedError {
    /// See [`FailureClass`].
    pub fn class(&self) -> FailureClass {
        let says = |stderr: &str, table: &[&str]| {
            let s = stderr.to_ascii_lowercase();
            table.iter().any(|m| s.contains(m))
        };
        match self {
            SchedError::Stopped { .. } => FailureClass::Stopped,
            SchedError::Spawn { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                FailureClass::Unreachable
            }
            SchedError::Command { stderr, .. } if says(stderr, UNREACHABLE_MESSAGES) => {
                FailureClass::Unreachable
            }
            SchedError::Command { status, .. } if status.starts_with(TIMED_OUT_STATUS) => {
                FailureClass::Transient
            }
            SchedError::Command { stderr, .. }
                if says(stderr, TRANSIENT_MESSAGES) || flux_service_not_yet_registered(stderr) =>
            {
                FailureClass::Transient
            }
            SchedError::Command { .. }
            | SchedError::Spawn { .. }
            | SchedError::Io { .. }
            | SchedError::Parse { .. }
            | SchedError::Unrepresentable { .. } => FailureClass::Rejected,
        }
    }

    /// [`FailureClass::Unreachable`].
    pub fn is_unreachable(&self) -> bool {
        self.class() == FailureClass::Unreachable
    }

    /// [`FailureClass::Stopped`].
    pub fn is_stopped(&self) -> bool {
        self.class() == FailureClass::Stopped
    }

    /// Worth retrying with back-off ([`FailureClass::Transient`]); a command stopped at
    /// shutdown counts too (its effect is unknown, never a refusal), but is not retried.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.class(),
            FailureClass::Transient | FailureClass::Stopped
        )
    }
}

/// A scheduler backend. Calls block (they run scheduler commands); the daemon calls them
/// from a blocking task.
pub trait Scheduler: Send + Sync {
    /// Which scheduler this backend submits to (its name, `as_str`, is for logs).
    fn kind(&self) -> SchedulerKind;

    /// Writes the job's script into `job.dir` and submits it.
    fn submit(&self, job: &JobSpec) -> Result<JobId, SchedError>;

    /// The state of every job in `ids`, in one batched query. Jobs the scheduler no longer
    /// knows are `Unknown`.
    fn poll(&self, ids: &[JobId]) -> Result<BTreeMap<JobId, JobState>, SchedError>;

    /// Jobs of this user whose name is in `names` (reconciliation after a crash): pending,
    /// running, or ended but still remembered by the scheduler; the newest when several
    /// share a name (for Slurm and Flux: the highest id, [`crate::lookup::newest_by_name`]).
    fn find_by_name(&self, names: &[String]) -> Result<BTreeMap<String, JobId>, SchedError>;

    fn cancel(&self, ids: &[JobId]) -> Result<(), SchedError>;
}

#[cfg(test)]
mod class_tests {
    use super::*;
    use FailureClass::*;

    fn failed(status: &str, stderr: &str) -> SchedError {
        SchedError::Command {
            command: "sbatch job.sh".into(),
            status: status.into(),
            stdout: String::new(),
            stderr: stderr.into(),
        }
    }

    /// Scheduler clients' failures as printed (exit status, stderr) and the class each one
    /// has: known messages decide it, not loose words such as "socket" or "timeout".
    const CLASSED_MESSAGES: &[(&str, &str, FailureClass)] = &[
        // Slurm clients' own words, as printed.
        (
            "1",
            "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation",
            Transient,
        ),
        (
            "1",
            "squeue: error: Unable to contact slurm controller (connect failure)",
            Transient,
        ),
        (
            "1",
            "sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying",
            Transient,
        ),
        (
            "1",
            "flux-job: ERROR: Resource temporarily unavailable",
            Transient,
        ),
        ("timed out after 30s, killed", "", Transient),
        // A Flux instance still starting (or a module restarting): the broker's answer.
        (
            "1",
            "flux-batch: ERROR: No service matching job-ingest.submit is registered",
            Transient,
        ),
        (
            "1",
            "flux-jobs: ERROR: [Errno 38] No service matching job-list.list is registered",
            Transient,
        ),
        // The same words for a service no instance registers at start-up: a refusal.
        (
            "1",
            "flux-batch: ERROR: No service matching mything.submit is registered",
            Rejected,
        ),
        (
            "1",
            "flux-batch: ERROR: no service matching job-ingest is registered",
            Rejected,
        ),
        (
            "1",
            "flux-job: ERROR: Unable to connect to Flux: broker socket /run/flux/local was not found",
            Unreachable,
        ),
        (
            "1",
            "sbatch: error: Batch job submission failed: Invalid partition name specified",
            Rejected,
        ),
        // A refusal that merely mentions a socket or a timeout is still a refusal: the
        // words that once made it "transient" are not the scheduler saying it is busy.
        (
            "1",
            "sbatch: error: --time: invalid timeout value for partition socket_test",
            Rejected,
        ),
        (
            "1",
            "sbatch: error: Batch job submission failed: Requested time limit is invalid (missing or exceeds some limit)",
            Rejected,
        ),
    ];

    #[test]
    fn each_failure_has_its_class_from_known_messages_not_loose_words() {
        for &(status, stderr, class) in CLASSED_MESSAGES {
            assert_eq!(failed(status, stderr).class(), class, "{stderr}");
        }
        let missing = SchedError::Spawn {
            command: "sbatch".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert_eq!(missing.class(), Unreachable);
        let denied = SchedError::Spawn {
            command: "sbatch".into(),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        assert_eq!(denied.class(), Rejected);
        let stopped = SchedError::Stopped {
            command: "sbatch".into(),
        };
        assert_eq!(stopped.class(), Stopped);
        assert!(stopped.is_transient() && !stopped.is_unreachable());
    }
}
