//! The checks of `metric` and `metrics`: one of the two, each metric's source and pattern
//! (a pattern is one value per epoch, groups `epoch` and `seconds`, or one value per run,
//! a group `value`), the list's names, its primary and its guardrails.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;

use std::path::Path;

use super::{Checker, is_safe_name};
use crate::diagnostic::{Diagnostic, Severity};
use crate::limits::{MAX_METRICS, MAX_UNIT_BYTES, quoted};
use crate::model::{ExperimentFile, MetricSource, MetricSpec};
use crate::yaml::{Location, Locator};

/// The message of a file with neither `metric` nor `metrics`.
const MISSING_METRIC: &str = "missing required key `metric` (or a `metrics:` list of several)";

/// The error of a file with neither `metric` nor `metrics`, at the top mapping's start,
/// for a file whose other problems stop it before validation.
pub(super) fn missing_metric(text: &str, path: &Path) -> Option<Diagnostic> {
    let locator = Locator::index(text);
    (!locator.has("metric") && !locator.has("metrics")).then(|| {
        Diagnostic::new(
            Severity::Error,
            path.to_path_buf(),
            // As the YAML layer places a missing top-level key: the document's start.
            Some(Location { line: 1, column: 1 }),
            "",
            MISSING_METRIC.to_string(),
        )
    })
}

/// What a metric's pattern yields per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Epochs,
    PerRun,
}

impl Checker {
    /// `metric` or `metrics` (exactly one), every metric in it, and the settings that only
    /// mean something for per-epoch metrics.
    pub(super) fn check_metrics(&mut self, f: &ExperimentFile) {
        match (&f.metric, f.metrics.is_empty()) {
            (Some(m), true) => {
                let shape = self.check_metric_spec(m, "metric");
                self.check_epoch_settings(f, shape);
            }
            (Some(_), false) => self.key_error(
                "metrics",
                "`metric` and `metrics` exclude each other: declare one metric under \
                 `metric:` or several under `metrics:`",
            ),
            (None, true) if self.locator.has("metrics") => {
                self.error("metrics", "`metrics` needs at least one metric")
            }
            (None, true) => self.push(
                Severity::Error,
                Some(Location { line: 1, column: 1 }),
                "",
                MISSING_METRIC.to_string(),
            ),
            (None, false) => self.check_metric_list(f),
        }
    }

    /// The entries of `metrics`: at most [`MAX_METRICS`], unique safe names, at most one
    /// primary, guardrails one value per run with a sound `max_regression_pct`.
    fn check_metric_list(&mut self, f: &ExperimentFile) {
        let list = &f.metrics;
        if list.len() > MAX_METRICS {
            self.error(
                "metrics",
                format!(
                    "{} metrics; at most {MAX_METRICS} (a primary and guardrails) are read from each run",
                    list.len()
                ),
            );
        }
        let primary = list.iter().position(|m| m.primary).unwrap_or(0);
        let mut names: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, m) in list.iter().enumerate() {
            let at = format!("metrics[{i}]");
            if !is_safe_name(&m.name) {
                self.error(
                    &format!("{at}.name"),
                    format!(
                        "metric name {} must be 1-64 characters of letters, digits, `_`, `-`, `.`, starting with a letter or digit",
                        quoted(&m.name)
                    ),
                );
            } else if let Some(first) = names.insert(&m.name, i) {
                self.error(
                    &format!("{at}.name"),
                    format!(
                        "metric name {} is used twice (first as metrics[{first}])",
                        quoted(&m.name)
                    ),
                );
            }
            if m.primary && i != primary {
                self.error(
                    &format!("{at}.primary"),
                    format!("only one metric can be `primary: true` (metrics[{primary}] is)"),
                );
            }
            let shape = self.check_metric_spec(&m.spec(), &at);
            if i == primary {
                self.check_epoch_settings(f, shape);
                if m.max_regression_pct.is_some() {
                    self.error(
                        &format!("{at}.max_regression_pct"),
                        "`max_regression_pct` applies to guardrails; the primary metric is gated by `compare.min_effect_pct`",
                    );
                }
                continue;
            }
            if shape == Some(Shape::Epochs) || m.source == MetricSource::Dftracer {
                self.error(
                    &at,
                    "a guardrail is one value per run: a `pattern` with a named group `(?P<value>...)`",
                );
            }
            if let Some(x) = m.max_regression_pct
                && !(x.is_finite() && x >= 0.0)
            {
                self.error(
                    &format!("{at}.max_regression_pct"),
                    format!("max_regression_pct must be a percentage ≥ 0 (got {x})"),
                );
            }
        }
    }

    /// One metric at `at` (`metric` or `metrics[i]`): its source's keys, its pattern's
    /// groups, its unit. Returns the pattern's shape when it has a sound one (traces: per
    /// epoch).
    fn check_metric_spec(&mut self, m: &MetricSpec, at: &str) -> Option<Shape> {
        if let Some(u) = &m.unit
            && (u.is_empty() || u.len() > MAX_UNIT_BYTES || u.chars().any(char::is_control))
        {
            self.error(
                &format!("{at}.unit"),
                format!(
                    "unit {} must be 1-{MAX_UNIT_BYTES} bytes of printable text",
                    quoted(u)
                ),
            );
        }
        let shape = self.check_metric_source(m, at);
        if m.cumulative {
            self.check_cumulative(m, at, shape);
        }
        shape
    }

    /// `cumulative: true` reads `seconds` as a running clock: it needs per-epoch lines of
    /// a pattern (not a figure of merit, not traces) and a time (`better: lower`; a rate
    /// per epoch is read as printed).
    fn check_cumulative(&mut self, m: &MetricSpec, at: &str, shape: Option<Shape>) {
        let why = if m.source == MetricSource::Dftracer {
            Some(
                "`cumulative` applies to a pattern's `seconds` group; traces give each epoch's time",
            )
        } else if shape == Some(Shape::PerRun) {
            Some(
                "`cumulative` applies to per-epoch metrics (groups `epoch` and `seconds`); this pattern is one value per run",
            )
        } else if m.better == crate::model::Better::Higher {
            Some(
                "`cumulative: true` reads `seconds` as a running clock, a time: it needs `better: lower` (a rate per epoch, `better: higher`, is read as printed)",
            )
        } else {
            None
        };
        if let Some(why) = why {
            self.error(&format!("{at}.cumulative"), why);
        }
    }

    /// The keys of the metric's source and its pattern's shape.
    fn check_metric_source(&mut self, m: &MetricSpec, at: &str) -> Option<Shape> {
        match m.source {
            MetricSource::Stdout | MetricSource::File => {
                let shape = match &m.pattern {
                    None => {
                        self.key_error(
                            at,
                            format!(
                                "{at} needs a `pattern` with named groups `epoch` and `seconds` (one value per epoch) or `value` (one value per run)"
                            ),
                        );
                        None
                    }
                    Some(p) => self.check_metric_pattern(p, &format!("{at}.pattern")),
                };
                self.check_file_source_keys(m, at);
                shape
            }
            MetricSource::Dftracer => {
                match &m.dir {
                    None => self.key_error(
                        at,
                        "`source: dftracer` needs `dir:` (run-relative folder holding the .pfw/.pfw.gz traces)",
                    ),
                    Some(p) => self.check_relative_path(p, &format!("{at}.dir")),
                }
                if m.pattern.is_some() {
                    self.error(
                        &format!("{at}.pattern"),
                        "`pattern` does not apply to `source: dftracer` (epochs come from the trace)",
                    );
                }
                Some(Shape::Epochs)
            }
        }
    }

    /// `file` for `source: file`, and no trace keys beside a pattern.
    fn check_file_source_keys(&mut self, m: &MetricSpec, at: &str) {
        if m.source == MetricSource::File {
            match &m.file {
                None => self.key_error(
                    at,
                    "`source: file` needs `file:` (the run-relative file to read)",
                ),
                Some(p) => self.check_relative_path(p, &format!("{at}.file")),
            }
        }
        for (k, v) in [
            ("dir", m.dir.is_some()),
            ("category", m.category.is_some()),
            ("epoch_marker", m.epoch_marker.is_some()),
        ] {
            if v {
                self.error(
                    &format!("{at}.{k}"),
                    format!("`{k}` only applies to `source: dftracer`"),
                );
            }
        }
    }

    /// A metric's pattern compiles and is one of the two shapes: groups `epoch` and
    /// `seconds` (no `value`), or a group `value` (no `epoch` or `seconds`).
    fn check_metric_pattern(&mut self, pattern: &str, path: &str) -> Option<Shape> {
        let re = match Regex::new(pattern) {
            Ok(re) => re,
            Err(e) => {
                self.error(path, super::regex_error(pattern, &e));
                return None;
            }
        };
        let names: BTreeSet<&str> = re.capture_names().flatten().collect();
        let has = |g: &str| names.contains(g);
        match (has("value"), has("epoch"), has("seconds")) {
            (true, false, false) => Some(Shape::PerRun),
            (false, true, true) => Some(Shape::Epochs),
            _ => {
                let seen = if names.is_empty() {
                    "none".to_string()
                } else {
                    names
                        .iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                self.error(
                    path,
                    format!(
                        "the pattern needs named groups `(?P<epoch>...)` and `(?P<seconds>...)` (one value per epoch) or only `(?P<value>...)` (one value per run); it has {seen}"
                    ),
                );
                None
            }
        }
    }

    /// `compare.steady_epochs` and `compare.production_epochs` are about epochs: an error
    /// beside a primary metric that is one value per run.
    fn check_epoch_settings(&mut self, f: &ExperimentFile, shape: Option<Shape>) {
        if shape != Some(Shape::PerRun) {
            return;
        }
        for (key, set) in [
            ("steady_epochs", f.compare.steady_epochs.is_some()),
            ("production_epochs", f.compare.production_epochs.is_some()),
        ] {
            if set {
                self.error(
                    &format!("compare.{key}"),
                    format!(
                        "`compare.{key}` applies to per-epoch metrics; the primary metric is one value per run (its pattern has a group `value`)"
                    ),
                );
            }
        }
    }
}
