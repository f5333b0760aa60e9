//! Reads DFTracer traces (`.pfw`, `.pfw.gz`; 2023, 2024 and current 2.x NDJSON) and sums
//! event counts and durations per category, name and epoch, for files and whole runs.
//!
//! ```no_run
//! use optgate_dftracer::{AggregateOptions, epoch_seconds, summarize_paths};
//! let opts = AggregateOptions { category: Some("compute".into()), ..Default::default() };
//! let summary = summarize_paths(&["traces/".into()], &opts)?;
//! for (epoch, secs) in epoch_seconds(&summary, Some("compute")) {
//!     println!("epoch {epoch}: {secs:.3} s of compute over all ranks");
//! }
//! # Ok::<(), optgate_dftracer::TraceError>(())
//! ```
//!
//! What this crate guarantees:
//! * damage inside a file (torn last line, truncated gzip, non-JSON line, an event
//!   without `dur`, an unknown time unit) never fails the call: it is reported as a
//!   [`Diagnostic`] with file and line, and everything else still counts;
//! * only complete events (`ph` `"X"` or `1`, or no `ph` but a `dur`) are summed;
//!   metadata records are read for the time unit and otherwise only counted;
//! * durations are in seconds, converted with each file's own `time_metric`.
//!
//! It does no printing and no logging; [`render_table`] returns text.

mod aggregate;
mod error;
mod event;
mod fast;
mod inflate;
pub mod limits;
mod reader;
mod render;
mod scan;

pub use aggregate::{
    Aggregate, AggregateOptions, EpochStat, FileSummary, Stat, TimeUnit, TraceFormat, TraceSummary,
    epoch_seconds,
};
pub use error::{Diagnostic, DiagnosticKind, TraceError};
pub use limits::{
    GZIP_RATIO_FREE_BYTES, MAX_CATEGORIES, MAX_EPOCHS, MAX_GZIP_RATIO, MAX_KEY_BYTES,
    MAX_LINE_BYTES, MAX_NAMES, MAX_PAIRS, MAX_TEXT_BYTES, OTHER_CATEGORIES, OTHER_NAMES,
};
pub use reader::{expand_paths, summarize_paths, summarize_reader};
pub use render::render_table;

/// The line scanner and the event it fills, exposed only so the crate's tests can check
/// the scanner against their independent `serde_json` oracle (`tests/dftracer/
/// serde_oracle.rs`), and the inflater for the benchmarks. Not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use crate::event::{Number, RawEvent, Val};
    pub use crate::fast::{MAX_FAST_LINE, scan_fast, scan_fast_as};
    pub use crate::scan::{ScanError, scan_into, scan_strict};

    /// The reader's fast gzip inflater (igzip where built, else zlib-rs), for
    /// `examples/inflate_compare.rs`: feeds the text of `input` to `f`.
    pub fn with_fast_gzip<T>(
        input: impl std::io::BufRead,
        f: impl FnOnce(&mut dyn std::io::Read) -> T,
    ) -> T {
        crate::inflate::with_gzip(input, crate::inflate::Inflater::Fast, f)
    }
}
