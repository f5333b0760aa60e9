//! What every extractor of this crate shares: the error of a metric that cannot be read
//! (each naming the source, line and text), per-epoch seconds, the line a match is on, and
//! the one tolerance rule for correctness values.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetricError {
    #[error("{source_name}: the pattern `{pattern}` never matched (expected one line per epoch)")]
    NoMatch {
        source_name: String,
        pattern: String,
    },
    #[error("{source_name}:{line}: `{text}` is not a number for group `{group}`")]
    NotANumber {
        source_name: String,
        line: usize,
        group: String,
        text: String,
    },
    #[error(
        "{source_name}:{line}: epoch {epoch} took {seconds} s; times must be positive and finite"
    )]
    NonPositive {
        source_name: String,
        line: usize,
        /// The epoch's label as printed.
        epoch: String,
        seconds: f64,
    },
    #[error(
        "{source_name}:{line}: epoch {epoch} reported a second time (first on line {first_line})"
    )]
    DuplicateEpoch {
        source_name: String,
        line: usize,
        epoch: String,
        first_line: usize,
    },
    #[error(
        "{source_name}:{line}: epoch {epoch} follows epoch {previous} (line {previous_line}); epoch labels must be strictly increasing"
    )]
    NotIncreasing {
        source_name: String,
        line: usize,
        epoch: String,
        previous: String,
        previous_line: usize,
    },
    #[error(
        "{source_name}:{line}: the running clock reads {seconds} s at epoch {epoch}, not after the {previous} s of epoch {previous_epoch} (line {previous_line}); with `metric.cumulative: true` each epoch's time is the clock's advance, which must be positive"
    )]
    ClockNotAdvancing {
        source_name: String,
        line: usize,
        epoch: String,
        seconds: f64,
        previous_epoch: String,
        previous: f64,
        previous_line: usize,
    },
    #[error("{source_name}: epoch {missing} is missing (epochs seen: {seen})")]
    MissingEpoch {
        source_name: String,
        missing: u32,
        seen: String,
    },
    #[error(
        "{source_name}:{line}: the value {value} is not positive and finite (a figure of merit is compared as a ratio)"
    )]
    NonPositiveValue {
        source_name: String,
        line: usize,
        value: f64,
    },
}

/// One value per epoch, by position: 1 is the first epoch the run printed, without gaps.
pub type EpochSeconds = BTreeMap<u32, f64>;

/// Line number (1-based) of byte offset `at` in `text`.
pub(crate) fn line_of(text: &str, at: usize) -> usize {
    text[..at].bytes().filter(|&b| b == b'\n').count() + 1
}

/// Whether `variant` is within tolerance of `baseline`: `|a - b| <= abs_tol` or
/// `|a - b| <= rel_tol * max(|a|, |b|)`; with neither tolerance given, equality is exact.
pub fn within_tolerance(
    baseline: f64,
    variant: f64,
    rel_tol: Option<f64>,
    abs_tol: Option<f64>,
) -> bool {
    if baseline == variant {
        return true;
    }
    let diff = (baseline - variant).abs();
    let abs_ok = abs_tol.is_some_and(|t| diff <= t);
    let rel_ok = rel_tol.is_some_and(|t| diff <= t * baseline.abs().max(variant.abs()));
    abs_ok || rel_ok
}
