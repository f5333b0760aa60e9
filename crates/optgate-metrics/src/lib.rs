//! Metric extraction: a run's stdout or output file in, per-epoch seconds (or plain values)
//! out. Pure functions over text; the caller reads the files. A run that yields no epochs,
//! prints epoch labels out of order or reports a non-positive time is an error that says
//! which source and line, never a silent zero.

use std::collections::BTreeMap;

use regex::Regex;

mod checked;
mod epochs;
pub use checked::{Captured, as_number, extract_captures, line_text, same_value};
pub use epochs::{EpochClock, EpochMatch, LabelledEpochs, epochs_from_matches, extract_epochs};

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

/// Epochs must run 1..=N without gaps: a gap means output was lost or the pattern missed a
/// line, and silently comparing epoch 4 with epoch 5 would break the matched comparison.
/// (Traces number their epochs themselves; a pattern's epochs are positions already.)
pub fn check_contiguous(epochs: &EpochSeconds, source_name: &str) -> Result<(), MetricError> {
    for (i, e) in epochs.keys().enumerate() {
        let want = i as u32 + 1;
        if *e != want {
            return Err(MetricError::MissingEpoch {
                source_name: source_name.to_string(),
                missing: want,
                seen: epochs
                    .keys()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    Ok(())
}

/// Every match of `re`'s `value` group, in order (correctness values, system metric).
pub fn extract_values(re: &Regex, text: &str, source_name: &str) -> Result<Vec<f64>, MetricError> {
    let mut out = Vec::new();
    for caps in re.captures_iter(text) {
        let whole = caps.get(0).expect("group 0 always exists");
        let t = caps.name("value").map(|m| m.as_str()).unwrap_or("");
        let v: f64 = t.trim().parse().map_err(|_| MetricError::NotANumber {
            source_name: source_name.to_string(),
            line: line_of(text, whole.start()),
            group: "value".into(),
            text: t.to_string(),
        })?;
        out.push(v);
    }
    if out.is_empty() {
        return Err(MetricError::NoMatch {
            source_name: source_name.to_string(),
            pattern: re.as_str().to_string(),
        });
    }
    Ok(out)
}

/// A figure of merit: the run's one value, the `value` group of `re`'s last match (a
/// benchmark may print running figures before its final one), positive and finite.
pub fn extract_value(re: &Regex, text: &str, source_name: &str) -> Result<f64, MetricError> {
    let Some(caps) = re.captures_iter(text).last() else {
        return Err(MetricError::NoMatch {
            source_name: source_name.to_string(),
            pattern: re.as_str().to_string(),
        });
    };
    let whole = caps.get(0).expect("group 0 always exists");
    let line = line_of(text, whole.start());
    let t = caps.name("value").map(|m| m.as_str()).unwrap_or("");
    let value: f64 = t.trim().parse().map_err(|_| MetricError::NotANumber {
        source_name: source_name.to_string(),
        line,
        group: "value".into(),
        text: t.to_string(),
    })?;
    if !(value.is_finite() && value > 0.0) {
        return Err(MetricError::NonPositiveValue {
            source_name: source_name.to_string(),
            line,
            value,
        });
    }
    Ok(value)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerance_rules() {
        assert!(within_tolerance(1.0, 1.0, None, None));
        assert!(!within_tolerance(1.0, 1.0 + 1e-12, None, None));
        assert!(within_tolerance(1.0, 1.0 + 1e-12, Some(1e-9), None));
        assert!(!within_tolerance(1.0, 1.1, Some(1e-3), Some(1e-3)));
        assert!(within_tolerance(0.0, 1e-10, None, Some(1e-9)));
    }

    /// A figure of merit is the last match's value; one that is not positive is an error
    /// naming its line; no match is `NoMatch`.
    #[test]
    fn a_figure_of_merit_is_the_last_value() {
        let re = Regex::new(r"rate (?P<value>\S+) GB/s").unwrap();
        let text = "warm-up\nrate 10.5 GB/s\nrate 12.3 GB/s\ndone\n";
        assert_eq!(extract_value(&re, text, "o").unwrap(), 12.3);
        let err = extract_value(&re, "x\nrate 0 GB/s\n", "o").unwrap_err();
        assert_eq!(
            err.to_string(),
            "o:2: the value 0 is not positive and finite (a figure of merit is compared as a ratio)"
        );
        let err = extract_value(&re, "x\n", "o").unwrap_err();
        assert!(matches!(err, MetricError::NoMatch { .. }), "{err}");
        let err = extract_value(&re, "rate fast GB/s\n", "o").unwrap_err();
        assert!(
            matches!(err, MetricError::NotANumber { line: 1, .. }),
            "{err}"
        );
    }

    #[test]
    fn values_in_order() {
        let re = Regex::new(r"checksum (?P<value>\S+)").unwrap();
        assert_eq!(
            extract_values(&re, "checksum 1.5\nchecksum -2e3\n", "o").unwrap(),
            vec![1.5, -2000.0]
        );
    }
}
