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

impl SchedError {
    /// The scheduler cannot be reached at all: its command is missing (`flux`/`sbatch` not
    /// on PATH), or Flux has no broker at `FLUX_URI` (`Unable to connect to Flux: broker
    /// socket … was not found`). Every command fails the same way until someone starts the
    /// scheduler or fixes the environment, so such an error is never retried in a loop
    /// (not [`is_transient`](Self::is_transient)); the daemon shows it and asks again at
    /// its next pass.
    pub fn is_unreachable(&self) -> bool {
        match self {
            SchedError::Spawn { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
            SchedError::Command { stderr, .. } => stderr
                .to_ascii_lowercase()
                .contains("unable to connect to flux"),
            _ => false,
        }
    }

    /// Stopped because optgate is shutting down.
    pub fn is_stopped(&self) -> bool {
        matches!(self, SchedError::Stopped { .. })
    }

    /// Worth retrying with back-off (a busy controller, a timed-out RPC), as opposed to a
    /// rejected submission or an unreachable scheduler. A command stopped at shutdown
    /// counts as transient (its effect is unknown, never a refusal), but is not retried.
    pub fn is_transient(&self) -> bool {
        if self.is_unreachable() {
            return false;
        }
        match self {
            SchedError::Stopped { .. } => true,
            SchedError::Command { stderr, status, .. } => {
                let s = stderr.to_ascii_lowercase();
                // A command optgate itself stopped after its deadline (see `command.rs`).
                status.contains("timed out")
                    || s.contains("timed out")
                    || s.contains("timeout")
                    || s.contains("try again")
                    || s.contains("temporarily")
                    || s.contains("connection refused")
                    || s.contains("rate limit")
                    || s.contains("resource temporarily unavailable")
                    || s.contains("socket")
                    // Slurm clients when slurmctld is restarting or unreachable.
                    || s.contains("unable to contact slurm controller")
                    || s.contains("connect failure")
                    || s.contains("connection reset")
            }
            SchedError::Spawn { .. } | SchedError::Io { .. } => false,
            SchedError::Parse { .. } | SchedError::Unrepresentable { .. } => false,
        }
    }
}

/// A scheduler backend. Calls block (they run scheduler commands); the daemon calls them
/// from a blocking task.
pub trait Scheduler: Send + Sync {
    /// `local`, `slurm` or `flux`, for logs and the database.
    fn kind(&self) -> &'static str;

    /// Writes the job's script into `job.dir` and submits it.
    fn submit(&self, job: &JobSpec) -> Result<JobId, SchedError>;

    /// The state of every job in `ids`, in one batched query. Jobs the scheduler no longer
    /// knows are `Unknown`.
    fn poll(&self, ids: &[JobId]) -> Result<BTreeMap<JobId, JobState>, SchedError>;

    /// Jobs of this user whose name is in `names` (reconciliation after a crash): pending,
    /// running, or ended but still remembered by the scheduler; the newest when several
    /// share a name.
    fn find_by_name(&self, names: &[String]) -> Result<BTreeMap<String, JobId>, SchedError>;

    fn cancel(&self, ids: &[JobId]) -> Result<(), SchedError>;
}
