//! The socket protocol between `optgate` and its daemon: JSON, one object per line.
//!
//! A connection carries one exchange: the client sends a [`Hello`] with its protocol
//! version, the daemon answers with a [`Welcome`] (or an error and closes when the versions
//! differ), the client sends one [`Request`], the daemon answers with one [`Response`] and
//! closes. The hello line is at most [`MAX_HELLO_BYTES`] and must arrive within
//! [`HANDSHAKE_TIMEOUT`]; a request line is at most [`MAX_REQUEST_BYTES`] and must arrive
//! within [`REQUEST_TIMEOUT`]. The status and report replies are the documented JSON of
//! `optgate status --json` and `optgate report --format json`.
//!
//! Bump [`PROTOCOL_VERSION`] for any change an older peer would misread (a renamed or
//! removed field, a new required one); new optional fields need no bump.

use optgate_policy::staged::VariantDecision;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

// The typed words of the protocol, re-exported so that clients match on them.
pub use optgate_experiment::SchedulerKind;
pub use optgate_stats::Decision;
use optgate_store::RunCounts;
pub use optgate_store::{ExperimentState, JobRecordState, RecurrenceState};

pub const PROTOCOL_VERSION: u32 = 1;
/// Largest request line the daemon reads (an experiment file travels inside `submit`).
pub const MAX_REQUEST_BYTES: usize = 1 << 20;
/// Largest reply line the client reads (reports with thousands of runs' provenance).
pub const MAX_REPLY_BYTES: usize = 256 << 20;
/// How long the daemon waits for the request line after its welcome. The CLI sends it at
/// once; a client that trickles it or says nothing is dropped when this has passed.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest hello line the daemon reads: a protocol number and a version string.
pub const MAX_HELLO_BYTES: usize = 4 * 1024;
/// How long the daemon waits for a whole hello line from the moment it accepts the
/// connection. Silent or trickling clients are dropped when it passes; until then they
/// hold a connection (of the daemon's `server::MAX_CONNECTIONS`, 256), not a request slot.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The client's first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    /// The client's optgate version, for the daemon's log.
    pub version: String,
}

/// The daemon's answer to [`Hello`] when it speaks the same protocol.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    pub protocol: u32,
    pub version: String,
    pub pid: u32,
    pub state_dir: PathBuf,
}

/// The daemon's answer to [`Hello`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HelloReply {
    Welcome(Welcome),
    Error(ErrorReply),
}

/// Everything a client can ask. One handler per variant (`handlers/`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Request {
    /// Start a new experiment.
    Submit(SubmitRequest),
    /// Where every experiment (or one) stands.
    Status(StatusRequest),
    /// The latest report of an experiment.
    Report(ReportRequest),
    /// Stop an experiment: no new work, live jobs cancelled.
    Cancel(CancelRequest),
    /// Stop the daemon (jobs keep running; a restarted daemon picks them up).
    Shutdown(ShutdownRequest),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitRequest {
    /// Absolute path of the experiment file (resolves a relative `workdir`, names it in
    /// messages and provenance).
    pub source_path: PathBuf,
    /// The file's text as the client read and validated it.
    pub source_text: String,
    /// `--every`: submit it again at this interval (`7d`, `12h`; overrides the file's
    /// `recheck.every`). Absent: the file's `recheck:` decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct StatusRequest {
    /// One experiment (with its jobs), or the experiment list.
    pub id: Option<String>,
    /// The list's page: the newest `limit` experiments (all when absent, as a client from
    /// before paging asks). Ignored with `id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportRequest {
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequest {
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ShutdownRequest {}

/// The daemon's answer to a [`Request`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response {
    Submitted(SubmitReply),
    Status(StatusReply),
    Report(ReportReply),
    CampaignReport(Box<CampaignReportReply>),
    Cancelled(CancelReply),
    /// `cancel R<n>`: the recurrence stops re-submitting.
    RecurrenceCancelled(RecurrenceCancelReply),
    ShuttingDown,
    Error(ErrorReply),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitReply {
    pub id: String,
    /// The experiment's run-directory root.
    pub root: PathBuf,
    /// When it recurs: its recurrence (`R<n>`) and next due time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recurrence: Option<Box<RecurrenceStatus>>,
}

/// `optgate status --json`: stable; fields are only ever added.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusReply {
    pub daemon: DaemonInfo,
    pub experiments: Vec<ExperimentStatus>,
    /// Experiments whose database row cannot be read (a damaged scheduler kind or state):
    /// listed apart so that one damaged row does not hide the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub damaged: Vec<DamagedExperiment>,
    /// `optgate run` executions (kind `run`), oldest first: they ran in their own process
    /// and joined the history when they ended (`optgate history NAME`).
    #[serde(default)]
    pub run_executions: Vec<optgate_store::Execution>,
    /// Recurring re-checks (`optgate submit --every`), oldest first; only in the list of
    /// every experiment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recurrences: Vec<RecurrenceStatus>,
    /// How many older experiments the page left out (`status --limit`); 0 when it shows
    /// them all.
    #[serde(default)]
    pub more: u64,
    /// Campaigns, each with its current stage; their step experiments are in
    /// `experiments` too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub campaigns: Vec<CampaignStatus>,
}

/// A recurrence as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecurrenceStatus {
    /// `R<n>`: what `optgate cancel` takes.
    pub id: String,
    pub name: String,
    /// The interval, `7d`, and in seconds.
    pub every: String,
    pub interval_secs: u64,
    /// active or cancelled.
    pub state: RecurrenceState,
    /// Due times are `anchor + k × interval` (seconds since 1970).
    pub anchor_unix: i64,
    /// The next due time (RFC 3339, UTC) and in seconds since 1970. Past while the latest
    /// execution still runs: the next one is submitted when it ends.
    pub next_due_at: String,
    pub next_due_unix: i64,
    pub executions: u32,
    pub last_experiment_id: Option<String>,
    pub notify: Vec<String>,
    /// The latest notify (or flip without a `notify:` command), with how it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_notify: Option<NotifyOutcome>,
    /// Why it did not submit (its stored file no longer loads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// `R<n>`: how a recurrence is named to users (`optgate cancel R3`).
pub fn recurrence_name(id: i64) -> String {
    format!("R{id}")
}

/// The number of a recurrence name `R<n>` (or `r<n>`); `None` for anything else
/// (experiment ids start with a digit).
pub fn parse_recurrence_name(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['R', 'r'])?;
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&n| n > 0)
}

/// How a notify ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyState {
    /// Something changed but the recurrence has no `notify:` command.
    NoCommand,
    /// Started; its end is not recorded yet (or the daemon stopped while it ran).
    Started,
    /// It exited (its status in `exit_code`) or was ended by a signal of its own.
    Exited,
    /// It ran past the daemon's `notify::NOTIFY_TIMEOUT` and its process group was killed.
    TimedOut,
    /// It could not be started (no such program, not executable, …).
    NotStarted,
}

/// What `status` shows of a notify, recorded with the execution it was for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotifyOutcome {
    /// The execution whose end called for it.
    pub experiment_id: String,
    /// The summary's one-sentence reason.
    pub reason: String,
    pub state: NotifyState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The end of its stderr (lossy UTF-8).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr_tail: String,
    /// Why it could not be started, or that it was killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl NotifyOutcome {
    pub fn new(experiment_id: &str, reason: &str, state: NotifyState) -> NotifyOutcome {
        NotifyOutcome {
            experiment_id: experiment_id.to_string(),
            reason: reason.to_string(),
            state,
            exit_code: None,
            signal: None,
            stderr_tail: String::new(),
            detail: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecurrenceCancelReply {
    pub id: String,
    pub previous_state: RecurrenceState,
    pub state: RecurrenceState,
}

/// One campaign in `status --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CampaignStatus {
    pub id: String,
    pub name: String,
    pub state: optgate_store::CampaignState,
    pub reason: Option<String>,
    /// How many stages it has (the confirmation comes after them).
    pub stages: u32,
    /// The current (or last) step: `stage 2/3 (memory)` or `confirmation`; none before the
    /// first step is created.
    pub current: Option<String>,
    /// The steps' experiment ids, in order.
    pub experiments: Vec<String>,
    pub campaign_file: String,
    pub root: String,
}

/// `optgate report CAMPAIGN-ID`: the campaign report from its steps' stored reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignReportReply {
    pub id: String,
    pub state: optgate_store::CampaignState,
    pub report: optgate_report::campaign::CampaignReport,
}

/// An experiment whose stored row is damaged: its id, its name and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DamagedExperiment {
    pub id: String,
    pub name: String,
    pub problem: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonInfo {
    pub pid: u32,
    pub version: String,
    pub protocol: u32,
    pub state_dir: PathBuf,
    pub started_at: String,
    /// Long request lines (submits past the small-request size) being read right now, of
    /// the daemon's fixed number of slots for them; 0 from a daemon that predates it.
    #[serde(default)]
    pub long_requests_reading: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentStatus {
    pub id: String,
    pub name: String,
    /// planned, building, running, analysing, decided, budget_exhausted, failed, cancelled.
    pub state: ExperimentState,
    /// Why it is in this state (failures, cancellation), when there is something to say.
    pub reason: Option<String>,
    pub scheduler: SchedulerKind,
    pub experiment_file: String,
    pub root: String,
    pub created_at: String,
    pub updated_at: String,
    pub runs: RunCountsJson,
    /// Blocks planned so far, and the most the budget (`max_replicates`) allows.
    pub blocks: u32,
    pub max_blocks: u32,
    /// Looks taken so far, and looks planned by the sequential rule.
    pub looks: u32,
    pub planned_looks: u32,
    /// The decisions of the latest look (empty before the first).
    pub decisions: Vec<VariantDecision>,
    /// Only when one experiment was asked for: its scheduler jobs.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub jobs: Option<Vec<JobStatus>>,
}

/// Run counts as they appear in `status --json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RunCountsJson {
    pub total: u32,
    /// completed + failed + cancelled.
    pub done: u32,
    pub completed: u32,
    pub failed: u32,
    pub cancelled: u32,
    /// In a job that is submitted or running.
    pub queued: u32,
    /// Not yet handed to a job.
    pub pending: u32,
}

impl From<RunCounts> for RunCountsJson {
    fn from(c: RunCounts) -> Self {
        RunCountsJson {
            total: c.total,
            done: c.done(),
            completed: c.completed,
            failed: c.failed,
            cancelled: c.cancelled,
            queued: c.queued,
            pending: c.pending,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobStatus {
    pub name: String,
    pub block: u32,
    pub attempt: u32,
    pub run_ids: Vec<String>,
    pub scheduler_job_id: Option<String>,
    /// submitting, submitted, finished, cancelled.
    pub state: JobRecordState,
    pub detail: Option<String>,
    /// What the scheduler last said of the job (pending, running, completed, failed,
    /// cancelled, timeout, lost, refused, unknown); absent before the first poll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_state: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportReply {
    pub id: String,
    pub state: ExperimentState,
    /// The `optgate-report` object (the same JSON `optgate run --json` prints).
    pub report: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelReply {
    pub id: String,
    /// The state before the request; a finished experiment is left as it was.
    pub previous_state: ExperimentState,
    pub state: ExperimentState,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    pub kind: ErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Malformed, oversized or late request, or an unknown protocol version.
    BadRequest,
    /// The peer is another user.
    Refused,
    /// The experiment file does not validate.
    InvalidExperiment,
    UnknownExperiment,
    /// The experiment has no report yet (no look taken).
    NoReport,
    /// The daemon is stopping and takes no new work.
    ShuttingDown,
    /// The daemon is serving as many connections as it may; try again shortly.
    Busy,
    /// The daemon could not do it (database, file system).
    Internal,
}

impl ErrorReply {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ErrorReply {
        ErrorReply {
            kind,
            message: message.into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("the line is longer than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("the peer closed the connection")]
    Closed,
    #[error("not valid JSON for this message: {0}")]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads one line of JSON, at most `limit` bytes.
pub async fn read_frame<T, R>(reader: &mut R, limit: usize) -> Result<T, FrameError>
where
    T: serde::de::DeserializeOwned,
    R: AsyncBufRead + Unpin,
{
    let mut buf = Vec::new();
    let mut limited = (&mut *reader).take(limit as u64 + 1);
    let n = limited.read_until(b'\n', &mut buf).await?;
    if n == 0 {
        return Err(FrameError::Closed);
    }
    if buf.len() > limit {
        return Err(FrameError::TooLarge { limit });
    }
    Ok(serde_json::from_slice(&buf)?)
}

/// Reads on into `buf` until it holds a whole line (ending in `\n`, or the peer's end of
/// stream) or more than `limit` bytes in all; says which. Called again with a larger
/// `limit`, it goes on where it stopped.
pub async fn read_line_upto<R>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    limit: usize,
) -> Result<LineRead, FrameError>
where
    R: AsyncBufRead + Unpin,
{
    loop {
        if buf.last() == Some(&b'\n') {
            return Ok(LineRead::Whole);
        }
        if buf.len() > limit {
            return Ok(LineRead::Longer);
        }
        let room = (limit + 1 - buf.len()) as u64;
        let n = (&mut *reader).take(room).read_until(b'\n', buf).await?;
        if n == 0 {
            return Ok(if buf.is_empty() {
                LineRead::Closed
            } else {
                LineRead::Whole
            });
        }
    }
}

/// How far [`read_line_upto`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineRead {
    /// The buffer holds a whole line.
    Whole,
    /// The line is longer than the limit asked for (the buffer holds limit + 1 bytes).
    Longer,
    /// The peer closed before sending anything.
    Closed,
}

/// Parses one frame [`read_line_upto`] read whole.
pub fn parse_frame<T: serde::de::DeserializeOwned>(line: &[u8]) -> Result<T, FrameError> {
    Ok(serde_json::from_slice(line)?)
}

/// Writes one line of JSON and flushes it.
pub async fn write_frame<T, W>(writer: &mut W, msg: &T) -> Result<(), FrameError>
where
    T: Serialize,
    W: AsyncWrite + Unpin,
{
    let mut line = serde_json::to_vec(msg)?;
    line.push(b'\n');
    writer.write_all(&line).await?;
    writer.flush().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_have_a_readable_json_form() {
        let r = Request::Status(StatusRequest {
            id: Some("x".into()),
            ..Default::default()
        });
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"status":{"id":"x"}}"#
        );
        let back: Request = serde_json::from_str(r#"{"shutdown":{}}"#).unwrap();
        assert_eq!(back, Request::Shutdown(ShutdownRequest {}));
        assert_eq!(
            serde_json::to_string(&Response::ShuttingDown).unwrap(),
            r#""shutting_down""#
        );
    }

    #[test]
    fn recurrence_names_round_trip_and_experiment_ids_are_not_names() {
        assert_eq!(recurrence_name(3), "R3");
        assert_eq!(parse_recurrence_name("R3"), Some(3));
        assert_eq!(parse_recurrence_name("r12"), Some(12));
        for no in [
            "R",
            "R0",
            "R-1",
            "R1x",
            "20261202-041500-ab12",
            "X1",
            "R99999999999999999999",
        ] {
            assert_eq!(parse_recurrence_name(no), None, "{no}");
        }
    }

    #[tokio::test]
    async fn frames_over_the_limit_are_refused() {
        let data = format!("{}\n", serde_json::to_string(&"x".repeat(100)).unwrap());
        let mut r = tokio::io::BufReader::new(data.as_bytes());
        assert!(matches!(
            read_frame::<String, _>(&mut r, 50).await,
            Err(FrameError::TooLarge { limit: 50 })
        ));
        let mut r = tokio::io::BufReader::new(data.as_bytes());
        assert_eq!(
            read_frame::<String, _>(&mut r, 500).await.unwrap().len(),
            100
        );
        let mut empty = tokio::io::BufReader::new(&b""[..]);
        assert!(matches!(
            read_frame::<String, _>(&mut empty, 50).await,
            Err(FrameError::Closed)
        ));
    }
}
