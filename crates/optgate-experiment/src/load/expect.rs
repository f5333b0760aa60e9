//! The checks of `correctness.expect`: at least one word, each a plain token; `words` or
//! `regex` (not both) in the mapping form; its own `pattern` (with a `value` group),
//! `source` and `file` as the other readers of run output have them.

use super::Checker;
use crate::limits::quoted;
use crate::model::{CorrectnessSpec, ExpectMap, ExpectSpec, MetricSource, OneOrMore};

impl Checker {
    pub(super) fn check_expect(&mut self, c: &CorrectnessSpec) {
        match &c.expect {
            None => {}
            Some(ExpectSpec::Words(w)) => self.check_words(w, "correctness.expect"),
            Some(ExpectSpec::Full(m)) => self.check_expect_map(m),
        }
    }

    /// A word is what a run prints as its verdict: not empty, no blanks around it (values
    /// are compared with theirs removed) and on one line.
    fn check_words(&mut self, words: &OneOrMore, path: &str) {
        if words.as_slice().is_empty() {
            self.error(path, "`expect` needs at least one word");
        }
        if crate::expect::Expected::words(words.as_slice()).is_none() {
            self.error(
                path,
                "the expected words are too many or too long to search for (the regex they make is past its size limit)",
            );
        }
        for (i, w) in words.as_slice().iter().enumerate() {
            let at = match words {
                OneOrMore::One(_) => path.to_string(),
                OneOrMore::More(_) => format!("{path}[{i}]"),
            };
            if w.is_empty() || w.trim() != w || w.contains(['\n', '\r']) {
                self.error(
                    &at,
                    format!(
                        "an expected word must be non-empty, on one line, without blanks around it (got {})",
                        quoted(w)
                    ),
                );
            }
        }
    }

    /// A regex that matches the empty string (`''`, `.*`, `x?`) is found in every verdict,
    /// even a run that printed nothing: it checks nothing, which is legal but never meant.
    fn warn_if_matches_anything(&mut self, r: &str) {
        if regex::Regex::new(r).is_ok_and(|re| re.is_match("")) {
            self.warning(
                "correctness.expect.regex",
                format!(
                    "{} matches the empty string, so every run's verdict passes, even an empty one: it checks nothing; anchor it or give the words the run prints",
                    quoted(r)
                ),
            );
        }
    }

    fn check_expect_map(&mut self, m: &ExpectMap) {
        const AT: &str = "correctness.expect";
        match (&m.words, &m.regex) {
            (Some(w), None) => self.check_words(w, "correctness.expect.words"),
            (None, Some(r)) => {
                self.check_regex(r, "correctness.expect.regex", &[]);
                self.warn_if_matches_anything(r);
            }
            (Some(_), Some(_)) => self.key_error(AT, "give `words` or `regex`, not both"),
            (None, None) => self.key_error(
                AT,
                "`expect` needs `words` (the verdict words) or `regex` (what a verdict must match)",
            ),
        }
        if let Some(p) = &m.pattern {
            self.check_regex(p, "correctness.expect.pattern", &["value"]);
        }
        match (m.source.unwrap_or_default(), &m.file) {
            (MetricSource::File, None) => self.key_error(AT, "`source: file` needs `file:`"),
            (MetricSource::File, Some(p)) => self.check_relative_path(p, "correctness.expect.file"),
            (MetricSource::Dftracer, _) => self.error(
                "correctness.expect.source",
                "verdicts are read from stdout or a file",
            ),
            (MetricSource::Stdout, Some(_)) => self.error(
                "correctness.expect.file",
                "`file:` is read only with `source: file`",
            ),
            (MetricSource::Stdout, None) => {}
        }
    }
}
