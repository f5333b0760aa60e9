//! The rows of the database as Rust types, and the state enums with their stored names.
//! The stored names are part of the database format: renaming one needs a migration.

use serde::{Deserialize, Serialize};

pub use optgate_experiment::SchedulerKind;

macro_rules! stored_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vm])* $variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The name stored in the database and shown to users.
            pub fn as_str(&self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            pub fn parse(s: &str) -> Option<$name> {
                match s { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use stored_enum;

stored_enum! {
    /// Where an experiment stands. planned → building → running → analysing → one of the
    /// four ends; analysing may go back to running when blocks are added.
    ExperimentState {
        /// Accepted by the daemon; nothing has started.
        Planned => "planned",
        /// Builds run on the login node.
        Building => "building",
        /// Blocks are submitted or running.
        Running => "running",
        /// Every planned block finished; the daemon is taking a look.
        Analysing => "analysing",
        /// Every variant has a decision (accept, reject or not applicable).
        Decided => "decided",
        /// Some variant is still inconclusive and no replicates are left to add.
        BudgetExhausted => "budget_exhausted",
        /// A build failed, or no arm can produce data.
        Failed => "failed",
        Cancelled => "cancelled",
    }
}

impl ExperimentState {
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            ExperimentState::Decided
                | ExperimentState::BudgetExhausted
                | ExperimentState::Failed
                | ExperimentState::Cancelled
        )
    }
}

stored_enum! {
    /// Where one planned run stands, as far as the daemon has recorded.
    RunState {
        /// Not yet handed to a job.
        Pending => "pending",
        /// Part of a job that is being submitted or is live.
        Queued => "queued",
        /// Its manifest says it completed (exit status 0).
        Completed => "completed",
        /// Its manifest says it failed, or it was lost more often than the resubmit limit.
        Failed => "failed",
        /// The experiment was cancelled before the run finished.
        Cancelled => "cancelled",
    }
}

impl RunState {
    /// Finished for good: the run is never handed to a job again.
    pub fn is_done(&self) -> bool {
        matches!(
            self,
            RunState::Completed | RunState::Failed | RunState::Cancelled
        )
    }
}

stored_enum! {
    /// A scheduler job as the daemon knows it.
    JobRecordState {
        /// Recorded before `submit` is called: the scheduler may or may not have the job.
        /// After a crash, reconciliation looks it up by name before anything is submitted.
        Submitting => "submitting",
        /// The scheduler accepted it; `scheduler_job_id` is known.
        Submitted => "submitted",
        /// Ended, and its runs' outcomes have been recorded.
        Finished => "finished",
        /// Stopped because the experiment was cancelled.
        Cancelled => "cancelled",
    }
}

impl JobRecordState {
    pub fn is_live(&self) -> bool {
        matches!(self, JobRecordState::Submitting | JobRecordState::Submitted)
    }
}

/// What `submit` records about a new experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct NewExperiment {
    pub id: String,
    pub name: String,
    pub source_path: String,
    pub source_text: String,
    pub source_sha256: String,
    /// The run-directory root (`<workdir>/optgate-runs/<name>/<id>`).
    pub root: String,
    pub scheduler: SchedulerKind,
    pub replicates: u32,
    pub max_replicates: u32,
}

/// An experiment row that cannot be read ([`crate::Store::experiments_each`]): its id and
/// name, and why.
#[derive(Debug)]
pub struct DamagedExperimentRow {
    pub id: String,
    pub name: String,
    pub error: Box<crate::error::StoreError>,
}

/// One page of the experiment list ([`crate::Store::experiments_page`]): its rows, newest
/// first (a damaged one apart, as in `experiments_each`), and the number of experiments in
/// all.
#[derive(Debug)]
pub struct ExperimentPage {
    pub rows: Vec<Result<ExperimentRow, DamagedExperimentRow>>,
    pub total: u64,
}

/// An experiment without its (large) source text and report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExperimentRow {
    pub id: String,
    pub name: String,
    pub source_path: String,
    pub source_sha256: String,
    pub root: String,
    pub scheduler: SchedulerKind,
    pub state: ExperimentState,
    pub state_reason: Option<String>,
    pub replicates: u32,
    pub max_replicates: u32,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockRow {
    pub index: u32,
    pub order: Vec<String>,
}

/// A run to record with its block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    pub run_id: String,
    pub block: u32,
    pub arm: String,
    pub position: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunRow {
    pub run_id: String,
    pub block: u32,
    pub arm: String,
    pub position: u32,
    pub state: RunState,
    pub detail: Option<String>,
}

/// How many runs of an experiment are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RunCounts {
    pub total: u32,
    pub pending: u32,
    pub queued: u32,
    pub completed: u32,
    pub failed: u32,
    pub cancelled: u32,
}

impl RunCounts {
    /// Runs that finished for good (completed, failed or cancelled).
    pub fn done(&self) -> u32 {
        self.completed + self.failed + self.cancelled
    }

    pub(crate) fn add(&mut self, state: RunState, n: u32) {
        self.total += n;
        match state {
            RunState::Pending => self.pending += n,
            RunState::Queued => self.queued += n,
            RunState::Completed => self.completed += n,
            RunState::Failed => self.failed += n,
            RunState::Cancelled => self.cancelled += n,
        }
    }
}

/// A job to record before it is submitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    pub block: u32,
    pub name: String,
    pub attempt: u32,
    pub run_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobRow {
    pub id: i64,
    pub experiment_id: String,
    pub block: u32,
    pub name: String,
    pub attempt: u32,
    pub run_ids: Vec<String>,
    pub scheduler_job_id: Option<String>,
    pub state: JobRecordState,
    pub detail: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// What the scheduler last said of the job while it was submitted (`pending`,
    /// `running`, …); None before the first poll.
    pub scheduler_state: Option<String>,
}

/// The outcome of one run, as read from its manifest (or decided by the daemon).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunUpdate {
    pub run_id: String,
    pub state: RunState,
    pub detail: Option<String>,
}

/// One look of the sequential design.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LookRow {
    pub look: u32,
    /// Blocks analysed at this look.
    pub blocks: u32,
    /// The one-sided level the decisions used at this look.
    pub nominal_alpha: f64,
    /// `{variant: decision}` as JSON text.
    pub decisions: String,
    pub created_at: String,
}

/// What follows a look, recorded in the same transaction as the look itself.
#[derive(Debug, Clone, PartialEq)]
pub enum AfterLook {
    /// Add these blocks (and their runs) and go back to running.
    Extend {
        blocks: Vec<BlockRow>,
        runs: Vec<NewRun>,
    },
    /// End in `state` (decided, budget exhausted, failed).
    Finish {
        state: ExperimentState,
        reason: Option<String>,
    },
}

stored_enum! {
    /// Whether a recurrence still submits its experiment again.
    RecurrenceState {
        /// Re-submitted at each due time.
        Active => "active",
        /// Stopped by `optgate cancel R<n>`; its executions stay as they are.
        Cancelled => "cancelled",
    }
}

/// A recurrence to record with its first execution ([`crate::Store::start_recurrence`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRecurrence {
    pub name: String,
    pub source_path: String,
    pub source_text: String,
    pub interval_secs: u64,
    /// Due times are `anchor_at + k × interval_secs` (seconds since 1970).
    pub anchor_at: i64,
    pub next_due_at: i64,
    /// The notify argument vector (empty: none).
    pub notify: Vec<String>,
}

/// A recurrence as stored, with its latest execution's state (its text apart:
/// [`crate::Store::recurrence_text`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RecurrenceRow {
    pub id: i64,
    pub name: String,
    pub source_path: String,
    pub interval_secs: u64,
    pub anchor_at: i64,
    pub next_due_at: i64,
    pub notify: Vec<String>,
    pub state: RecurrenceState,
    pub detail: Option<String>,
    pub last_experiment_id: Option<String>,
    /// The latest execution's state (`None`: its row is gone).
    pub last_state: Option<ExperimentState>,
    /// Executions so far.
    pub executions: u32,
    /// The latest notify's outcome (JSON as the daemon wrote it).
    pub last_notify: Option<String>,
    pub created_at: String,
}

/// An execution of a recurrence that ended and whose end was not yet judged for a notify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnjudgedExecution {
    pub recurrence_id: i64,
    pub seq: u32,
    pub experiment_id: String,
    /// The execution before it in the recurrence (`None` for the first).
    pub previous_experiment_id: Option<String>,
}
