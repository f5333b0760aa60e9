//! Errors that stop a summary (a path that cannot be listed or opened) and diagnostics
//! that do not (a torn line, a truncated gzip member, an unknown time unit, ...).

use std::io;
use std::path::PathBuf;

use serde::Serialize;

/// A failure that prevents summarising the requested paths at all.
///
/// Damage *inside* a trace file is never an error: it becomes a [`Diagnostic`] and the
/// rest of the file still counts, because a killed rank's trace is still worth reading.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// An operation on a path failed (stat, list a directory, open a file).
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What we were doing, e.g. "open" or "list directory".
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A directory given on the command line holds no `*.pfw` / `*.pfw.gz` file.
    #[error("no *.pfw or *.pfw.gz trace files in directory {}", path.display())]
    NoTraceFiles { path: PathBuf },
    /// `summarize_paths` was called with an empty list.
    #[error("no trace paths given")]
    NoPaths,
    /// A path that is neither a directory nor a regular file (a device, a pipe, a socket):
    /// reading it might never end.
    #[error("{} is not a trace file: it is {kind}", path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    /// A file whose text outgrew [`crate::MAX_TEXT_BYTES`] or, compressed, expanded more
    /// than [`crate::MAX_GZIP_RATIO`] times (a gzip bomb).
    #[error("{}: {reason}; the file is refused", path.display())]
    TooLarge { path: PathBuf, reason: String },
}

/// What went wrong on a line (or in a file) that was otherwise skipped or tolerated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiagnosticKind {
    /// The last line of the file is incomplete (the writer was killed mid-line).
    TornLine,
    /// A line in the middle of the file is not a JSON object.
    NotJson,
    /// A complete (`ph` X / 1) event has no usable `dur`; it is not counted.
    MissingDur,
    /// A field (`ts`, `dur`, `args.epoch`) holds something that is not a number.
    BadValue,
    /// The `CM` / `time_metric` metadata names a unit we do not know; microseconds assumed.
    UnknownTimeUnit,
    /// Valid records that are neither complete events nor metadata (counters, DFTracer's
    /// aggregated records, instant events) were not summed; reported once per file so
    /// that a trace written in aggregation mode is not silently undercounted.
    NotSummed,
    /// Reading or decompressing failed part-way (e.g. truncated gzip); what was read counts.
    ReadError,
    /// Too many diagnostics in one file: the rest are only counted.
    Suppressed,
    /// A line longer than [`crate::MAX_LINE_BYTES`]: skipped without being read whole.
    LongLine,
    /// More distinct categories, names or epochs than the limits keep.
    TooMany,
}

/// One tolerated problem, located by file and 1-based line number.
///
/// For [`DiagnosticKind::ReadError`] the line is the one that was being read when the
/// stream broke off.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostic {
    pub file: PathBuf,
    pub line: u64,
    pub kind: DiagnosticKind,
    pub message: String,
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
    }
}
