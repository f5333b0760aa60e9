//! `correctness.expect` resolved: what every run's verdict must be (words or a regex) and
//! where each run's verdicts are read — compiled once, after validation checked them.

use regex::Regex;

use crate::model::{CorrectnessSpec, ExpectSpec, MetricSource};

/// What a verdict must be.
#[derive(Debug, Clone)]
pub enum Expected {
    /// Any of these words, exactly (case and all). `in_lines` finds one of them as a whole
    /// word in a line.
    Words { words: Vec<String>, in_lines: Regex },
    /// A match of this regex anywhere in the verdict (or the line).
    Regex(Regex),
}

impl Expected {
    /// The words form; None when a word makes no regex (validation refused it).
    pub fn words(words: &[String]) -> Option<Expected> {
        let alternatives: Vec<String> = words.iter().map(|w| regex::escape(w)).collect();
        let in_lines =
            Regex::new(&format!(r"(?:^|\W)(?:{})(?:\W|$)", alternatives.join("|"))).ok()?;
        Some(Expected::Words {
            words: words.to_vec(),
            in_lines,
        })
    }

    /// Whether a captured verdict (its text, blanks around it removed) is expected.
    pub fn accepts(&self, value: &str) -> bool {
        match self {
            Expected::Words { words, .. } => words.iter().any(|w| w == value),
            Expected::Regex(re) => re.is_match(value),
        }
    }

    /// Whether one line of output says the verdict: one of the words as a whole word, or a
    /// match of the regex.
    pub fn in_line(&self, line: &str) -> bool {
        match self {
            Expected::Words { in_lines, .. } => in_lines.is_match(line),
            Expected::Regex(re) => re.is_match(line),
        }
    }

    /// How the report says it: "`PASSED`", "`PASSED` or `SUCCESSFUL`", "a match of `…`".
    pub fn describe(&self) -> String {
        match self {
            Expected::Words { words, .. } => words
                .iter()
                .map(|w| format!("`{w}`"))
                .collect::<Vec<_>>()
                .join(" or "),
            Expected::Regex(re) => format!("a match of `{}`", re.as_str()),
        }
    }
}

/// Where a run's verdicts are read.
#[derive(Debug, Clone)]
pub enum ExpectPlace {
    /// Every value `correctness.values.pattern` captures must be expected.
    Values,
    /// Every capture of `expect.pattern`'s `value` group in the source must be expected
    /// (at least one).
    Captures {
        pattern: Regex,
        source: MetricSource,
        file: Option<String>,
    },
    /// Some line of the source must say it.
    Lines {
        source: MetricSource,
        file: Option<String>,
    },
}

/// `correctness.expect`, resolved.
#[derive(Debug, Clone)]
pub struct ExpectCheck {
    pub expected: Expected,
    pub place: ExpectPlace,
}

impl ExpectCheck {
    /// The verdict check `spec` declares; None without `expect` (or when a part of it does
    /// not compile: validation refused it, with its place in the file).
    pub fn resolve(spec: &CorrectnessSpec) -> Option<ExpectCheck> {
        let (expected, place) = match spec.expect.as_ref()? {
            ExpectSpec::Words(w) => (Expected::words(w.as_slice())?, None),
            ExpectSpec::Full(m) => {
                let expected = match (&m.words, &m.regex) {
                    (Some(w), None) => Expected::words(w.as_slice())?,
                    (None, Some(r)) => Expected::Regex(Regex::new(r).ok()?),
                    _ => return None,
                };
                let source = m.source.unwrap_or_default();
                let place = match &m.pattern {
                    Some(p) => Some(ExpectPlace::Captures {
                        pattern: Regex::new(p).ok()?,
                        source,
                        file: m.file.clone(),
                    }),
                    None if m.source.is_some() || m.file.is_some() => Some(ExpectPlace::Lines {
                        source,
                        file: m.file.clone(),
                    }),
                    None => None,
                };
                (expected, place)
            }
        };
        let place = place.unwrap_or(match spec.values {
            Some(_) => ExpectPlace::Values,
            None => ExpectPlace::Lines {
                source: MetricSource::Stdout,
                file: None,
            },
        });
        Some(ExpectCheck { expected, place })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(ws: &[&str]) -> Expected {
        Expected::words(&ws.iter().map(|w| w.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn words_are_exact_as_values_and_whole_words_in_lines() {
        let e = words(&["PASSED", "OK!"]);
        assert!(e.accepts("PASSED") && e.accepts("OK!"));
        assert!(!e.accepts("passed") && !e.accepts("PASSED.") && !e.accepts("FAILED"));
        assert!(e.in_line("Residual check: PASSED"));
        assert!(e.in_line("PASSED"));
        assert!(e.in_line("result=OK! (3 s)"));
        assert!(!e.in_line("NOTPASSED"));
        assert!(!e.in_line("PASSEDX"));
        assert!(!e.in_line("passed"));
        // A word's regex characters are literal.
        let dots = words(&["a.b"]);
        assert!(dots.in_line("x a.b y") && !dots.in_line("x aXb y"));
        assert_eq!(e.describe(), "`PASSED` or `OK!`");
    }

    #[test]
    fn a_regex_matches_anywhere_unless_anchored() {
        let e = Expected::Regex(Regex::new("^(PASSED|SUCCESSFUL)$").unwrap());
        assert!(e.accepts("SUCCESSFUL") && !e.accepts("UNSUCCESSFUL"));
        let loose = Expected::Regex(Regex::new("SUCCESS").unwrap());
        assert!(loose.accepts("UNSUCCESSFUL"));
        assert_eq!(loose.describe(), "a match of `SUCCESS`");
    }
}
