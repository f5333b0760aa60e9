//! Metric extraction: a run's stdout or output file in, per-epoch seconds (or plain values)
//! out. Pure functions over text; the caller reads the files. A run that yields no epochs,
//! skips an epoch, repeats one or reports a non-positive time is an error that says which
//! source and line, never a silent zero.

use std::collections::BTreeMap;

use regex::Regex;

mod checked;
pub use checked::{Captured, as_number, extract_captures, line_text, same_value};

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
        epoch: u32,
        seconds: f64,
    },
    #[error(
        "{source_name}:{line}: epoch {epoch} reported a second time (first on line {first_line})"
    )]
    DuplicateEpoch {
        source_name: String,
        line: usize,
        epoch: u32,
        first_line: usize,
    },
    #[error("{source_name}: epoch {missing} is missing (epochs seen: {seen})")]
    MissingEpoch {
        source_name: String,
        missing: u32,
        seen: String,
    },
    #[error("{source_name}:{line}: epoch numbers start at 1 (got 0)")]
    EpochZero { source_name: String, line: usize },
    #[error(
        "{source_name}:{line}: the value {value} is not positive and finite (a figure of merit is compared as a ratio)"
    )]
    NonPositiveValue {
        source_name: String,
        line: usize,
        value: f64,
    },
}

/// One value per epoch, epochs numbered from 1 without gaps.
pub type EpochSeconds = BTreeMap<u32, f64>;

/// Line number (1-based) of byte offset `at` in `text`.
pub(crate) fn line_of(text: &str, at: usize) -> usize {
    text[..at].bytes().filter(|&b| b == b'\n').count() + 1
}

/// Applies `re` (named groups `epoch` and `seconds`) to `text`; every match is one epoch.
pub fn extract_epochs(
    re: &Regex,
    text: &str,
    source_name: &str,
) -> Result<EpochSeconds, MetricError> {
    let mut out = EpochSeconds::new();
    let mut lines: BTreeMap<u32, usize> = BTreeMap::new();
    for caps in re.captures_iter(text) {
        let whole = caps.get(0).expect("group 0 always exists");
        let line = line_of(text, whole.start());
        let group = |name: &str| caps.name(name).map(|m| m.as_str()).unwrap_or("");
        let epoch_text = group("epoch");
        let epoch: u32 = epoch_text
            .trim()
            .parse()
            .map_err(|_| MetricError::NotANumber {
                source_name: source_name.to_string(),
                line,
                group: "epoch".into(),
                text: epoch_text.to_string(),
            })?;
        if epoch == 0 {
            return Err(MetricError::EpochZero {
                source_name: source_name.to_string(),
                line,
            });
        }
        let sec_text = group("seconds");
        let seconds: f64 = sec_text
            .trim()
            .parse()
            .map_err(|_| MetricError::NotANumber {
                source_name: source_name.to_string(),
                line,
                group: "seconds".into(),
                text: sec_text.to_string(),
            })?;
        if !(seconds.is_finite() && seconds > 0.0) {
            return Err(MetricError::NonPositive {
                source_name: source_name.to_string(),
                line,
                epoch,
                seconds,
            });
        }
        if let Some(first_line) = lines.insert(epoch, line) {
            return Err(MetricError::DuplicateEpoch {
                source_name: source_name.to_string(),
                line,
                epoch,
                first_line,
            });
        }
        out.insert(epoch, seconds);
    }
    check_contiguous(&out, source_name)?;
    if out.is_empty() {
        return Err(MetricError::NoMatch {
            source_name: source_name.to_string(),
            pattern: re.as_str().to_string(),
        });
    }
    Ok(out)
}

/// Epochs must run 1..=N without gaps: a gap means output was lost or the pattern missed a
/// line, and silently comparing epoch 4 with epoch 5 would break the matched comparison.
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

    fn re() -> Regex {
        Regex::new(r"epoch (?P<epoch>\d+) time (?P<seconds>[0-9.eE+-]+)").unwrap()
    }

    #[test]
    fn extracts_epochs_in_order() {
        let text = "start\nepoch 1 time 0.5\nnoise\nepoch 2 time 0.25\nepoch 3 time 2.5e-1\n";
        let e = extract_epochs(&re(), text, "stdout").unwrap();
        assert_eq!(
            e.into_iter().collect::<Vec<_>>(),
            vec![(1, 0.5), (2, 0.25), (3, 0.25)]
        );
    }

    #[test]
    fn reports_problems_precisely() {
        let err = extract_epochs(&re(), "hello\n", "runs/b001-x/stdout").unwrap_err();
        assert!(matches!(err, MetricError::NoMatch { .. }));
        assert!(err.to_string().contains("runs/b001-x/stdout"));

        let err = extract_epochs(&re(), "epoch 1 time 1\nepoch 3 time 1\n", "out").unwrap_err();
        assert_eq!(
            err.to_string(),
            "out: epoch 2 is missing (epochs seen: 1, 3)"
        );

        let err = extract_epochs(&re(), "epoch 1 time 1\nepoch 1 time 2\n", "out").unwrap_err();
        assert_eq!(
            err.to_string(),
            "out:2: epoch 1 reported a second time (first on line 1)"
        );

        let err = extract_epochs(&re(), "x\nepoch 1 time 0\n", "out").unwrap_err();
        assert!(
            matches!(err, MetricError::NonPositive { line: 2, .. }),
            "{err}"
        );

        let err = extract_epochs(&re(), "epoch 1 time 1.2.3\n", "out").unwrap_err();
        assert!(
            matches!(err, MetricError::NotANumber { line: 1, .. }),
            "{err}"
        );
    }

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
