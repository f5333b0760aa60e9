//! Metric extraction: a run's stdout or output file in, per-epoch seconds (or plain values)
//! out. Pure functions over text; the caller reads the files. A run that yields no epochs,
//! prints epoch labels out of order or reports a non-positive time is an error that says
//! which source and line, never a silent zero.

use regex::Regex;

mod checked;
mod epochs;
mod shared;
pub use checked::{Captured, as_number, extract_captures, line_text, same_value};
pub use epochs::{EpochClock, EpochMatch, LabelledEpochs, epochs_from_matches, extract_epochs};
pub(crate) use shared::line_of;
pub use shared::{EpochSeconds, MetricError, within_tolerance};

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
