//! Correctness values as text: every capture of a `value` group with the line it is on
//! (a verdict word is as much a value as a checksum), and the one comparison rule — as
//! numbers within tolerance when both read as numbers, else as exact strings.

use regex::Regex;

use crate::shared::{line_of, within_tolerance};

/// One captured value: its text (surrounding blanks removed), the 1-based line it is on
/// and that whole line, for quoting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    pub text: String,
    pub line: usize,
    pub line_text: String,
}

/// The 1-based line `line` of `text` (without its end of line); empty past the end.
pub fn line_text(text: &str, line: usize) -> &str {
    text.lines().nth(line.saturating_sub(1)).unwrap_or("")
}

/// Every match of `re`'s `value` group, in order, as text (none when it never matched:
/// the caller says what that means for its check).
pub fn extract_captures(re: &Regex, text: &str) -> Vec<Captured> {
    re.captures_iter(text)
        .map(|caps| {
            let whole = caps.get(0).expect("group 0 always exists");
            let line = line_of(text, whole.start());
            Captured {
                text: caps
                    .name("value")
                    .map(|m| m.as_str().trim())
                    .unwrap_or("")
                    .to_string(),
                line,
                line_text: line_text(text, line).to_string(),
            }
        })
        .collect()
}

/// A value's number, when its text reads as one (`1.0`, `-2e3`; not `PASSED`).
pub fn as_number(text: &str) -> Option<f64> {
    text.trim().parse::<f64>().ok()
}

/// Whether the variant's value is the baseline's: within tolerance
/// ([`within_tolerance`]) when both read as numbers, else the same string exactly (case
/// and all).
pub fn same_value(
    baseline: &str,
    variant: &str,
    rel_tol: Option<f64>,
    abs_tol: Option<f64>,
) -> bool {
    match (as_number(baseline), as_number(variant)) {
        (Some(b), Some(v)) => within_tolerance(b, v, rel_tol, abs_tol),
        _ => baseline == variant,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_compare_as_numbers_and_words_as_exact_strings() {
        assert!(same_value("1.0", "1.00", None, None));
        assert!(same_value("2.5e-1", "0.25", None, None));
        assert!(!same_value("1.0", "1.1", None, None));
        assert!(same_value("1.0", "1.0000001", Some(1e-6), None));
        assert!(same_value("PASSED", "PASSED", None, None));
        assert!(!same_value("PASSED", "passed", None, None));
        assert!(!same_value("PASSED", "FAILED", Some(1.0), Some(1.0)));
        // One side a number, the other not: compared as strings, so different.
        assert!(!same_value("1.0", "1.0x", None, None));
        assert!(!same_value("1", "one", None, None));
    }

    #[test]
    fn captures_keep_their_text_and_line() {
        let re = Regex::new(r"check (?P<value>\S+)").unwrap();
        let text = "start\ncheck PASSED\nnoise\n  residual check 1.5e-3 \n";
        let got = extract_captures(&re, text);
        assert_eq!(
            got,
            vec![
                Captured {
                    text: "PASSED".into(),
                    line: 2,
                    line_text: "check PASSED".into()
                },
                Captured {
                    text: "1.5e-3".into(),
                    line: 4,
                    line_text: "  residual check 1.5e-3 ".into()
                },
            ]
        );
        assert_eq!(extract_captures(&re, "nothing\n"), []);
        assert_eq!(line_text(text, 4), "  residual check 1.5e-3 ");
        assert_eq!(line_text(text, 9), "");
    }
}
