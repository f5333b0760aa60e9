//! Loading an experiment file: read, parse, then check everything a parser cannot, and
//! return every problem at once (each with file, line and column) or the resolved
//! experiment plus its warnings.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use regex::Regex;
use sha2::{Digest, Sha256};

use crate::checklist;
use crate::diagnostic::{Diagnostic, Severity};
use crate::limits::*;
use crate::model::*;
use crate::resolved::*;
use crate::yaml::{self, Location, Locator};

mod recheck;

/// Why an experiment could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The error is part of the message, not a `source`: printed as a chain it would say
    /// "No such file or directory" twice.
    #[error("cannot read experiment file {path}: {error}")]
    Read {
        path: PathBuf,
        error: crate::read::ReadError,
    },
    /// Past [`yaml::MAX_FILE_BYTES`] by its metadata (or its read, when it grew): said in
    /// the words of the same limit on a text ([`yaml::check_text_limits`]).
    #[error(
        "experiment file {path} is {bytes} bytes; experiment files are limited to {} bytes",
        yaml::MAX_FILE_BYTES
    )]
    TooLarge { path: PathBuf, bytes: u64 },
    #[error("{}", render_diagnostics(.diagnostics))]
    Invalid { diagnostics: Vec<Diagnostic> },
}

/// The first [`MAX_DIAGNOSTICS_SHOWN`] diagnostics (errors come first), one line "… and N
/// more" for the rest, and the count of errors.
fn render_diagnostics(diagnostics: &[Diagnostic]) -> String {
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let mut s: Vec<String> = diagnostics
        .iter()
        .take(MAX_DIAGNOSTICS_SHOWN)
        .map(|d| d.to_string())
        .collect();
    if let Some(more) = diagnostics.len().checked_sub(MAX_DIAGNOSTICS_SHOWN)
        && more > 0
    {
        s.push(format!("… and {more} more"));
    }
    s.push(format!(
        "{errors} error{} in the experiment file",
        if errors == 1 { "" } else { "s" }
    ));
    s.join("\n")
}

/// A valid experiment and the warnings found on the way.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub experiment: Experiment,
    pub warnings: Vec<Diagnostic>,
}

/// Reads and validates the experiment file at `path`: a regular file (a pipe or a device
/// is refused before it is opened) of at most [`yaml::MAX_FILE_BYTES`], checked before it
/// is read, and read no further than that.
pub fn load(path: &Path) -> Result<Loaded, LoadError> {
    let (text, abs) = read_file_text(path)?;
    load_str(&text, &abs)
}

/// The text of the file at `path` (a regular file within `yaml::MAX_FILE_BYTES`, its size
/// checked before it is read) and its absolute path: what an experiment's and a campaign's
/// loader read.
pub(crate) fn read_file_text(path: &Path) -> Result<(String, std::path::PathBuf), LoadError> {
    let limit = yaml::MAX_FILE_BYTES as u64;
    let text = crate::read::read_regular_text(path, limit).map_err(|error| match error {
        crate::read::ReadError::TooLarge { bytes, .. } => LoadError::TooLarge {
            path: path.to_path_buf(),
            bytes,
        },
        error => LoadError::Read {
            path: path.to_path_buf(),
            error,
        },
    })?;
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    Ok((text, abs))
}

/// Validates `text` as if read from `path` (which is used for messages and to resolve a
/// relative `workdir`).
pub fn load_str(text: &str, path: &Path) -> Result<Loaded, LoadError> {
    let file: ExperimentFile = yaml::from_str_all(text).map_err(|errors| {
        let mut diagnostics: Vec<Diagnostic> = errors
            .into_iter()
            .map(|e| {
                Diagnostic::new(
                    Severity::Error,
                    path.to_path_buf(),
                    e.location,
                    "",
                    explain_serde(&e.message),
                )
            })
            .collect();
        // `metric` is optional to serde (`metrics` may stand for it): its absence is told
        // here too, so that a file with other problems hides nothing.
        diagnostics.extend(metrics::missing_metric(text, path));
        LoadError::Invalid { diagnostics }
    })?;
    let mut checker = Checker {
        file: path.to_path_buf(),
        locator: Locator::index(text),
        diagnostics: Vec::new(),
    };
    let experiment = checker.resolve(file, text, path);
    let (errors, warnings): (Vec<_>, Vec<_>) =
        checker.diagnostics.into_iter().partition(|d| d.is_error());
    if errors.is_empty() {
        Ok(Loaded {
            experiment,
            warnings,
        })
    } else {
        let mut all = errors;
        all.extend(warnings);
        Err(LoadError::Invalid { diagnostics: all })
    }
}

/// Rewords serde's messages where a person would not understand them, and cuts the values
/// they quote whole to their prefix.
fn explain_serde(message: &str) -> String {
    let m = reword_serde(message);
    // serde puts the YAML path first (`app.env.KEY: …`); a long key makes a long path.
    let m = match m.split_once(": ") {
        Some((path, rest)) if path.len() > MAX_PATH_SHOWN && !path.contains(' ') => {
            format!("{}: {rest}", cut_at(path, MAX_PATH_SHOWN))
        }
        _ => m,
    };
    shorten_quoted(&m)
}

fn reword_serde(message: &str) -> String {
    let m = message.replace("unknown field", "unknown key");
    if m.contains("data did not match any variant of untagged enum CommandSpec") {
        return m.replace(
            "data did not match any variant of untagged enum CommandSpec",
            "a command must be a string (shell code) or a list of strings (argv)",
        );
    }
    if m.contains("missing field") {
        return m.replacen("missing field", "missing required key", 1);
    }
    // Rust's type names mean nothing to someone writing YAML.
    let mut m = m;
    for (rust, words) in [
        ("expected u8", "expected a whole number ≥ 0"),
        ("expected u16", "expected a whole number ≥ 0"),
        ("expected u32", "expected a whole number ≥ 0"),
        ("expected u64", "expected a whole number ≥ 0"),
        ("expected usize", "expected a whole number ≥ 0"),
        ("expected i32", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected f32", "expected a number"),
        ("expected f64", "expected a number"),
    ] {
        if m.ends_with(rust) {
            m = m.replace(rust, words);
        }
    }
    m
}

/// Names of experiments and variants: they become directory names, job names and
/// environment values, so they are restricted to a safe alphabet.
pub fn is_safe_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
}

pub fn is_env_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// The Linux cpufreq governors a variant may ask for (`governor:`). The name reaches
/// `srun --cpu-freq=` on Slurm and `scaling_governor` locally, so nothing else is accepted.
pub const CPUFREQ_GOVERNORS: [&str; 6] = [
    "performance",
    "powersave",
    "ondemand",
    "conservative",
    "schedutil",
    "userspace",
];

/// Words that go into scheduler directives verbatim (queue, account, governor, flags).
fn is_plain_word(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
}

/// Why a time limit was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DurationError {
    #[error(
        "`{quoted}` is longer than {} days, the longest time limit optgate accepts (no queue grants more)",
        MAX_TIME_LIMIT.as_secs() / 86_400
    )]
    TooLong { quoted: String },
    #[error("`{quoted}` is not a duration like `90s`, `30m` or `2h` ({why})")]
    NotADuration {
        quoted: String,
        why: humantime::DurationError,
    },
}

/// A time limit: `90s`, `10m`, `2h`, `1d 12h`, or a bare number of minutes; never zero-checked
/// here, but never longer than [`MAX_TIME_LIMIT`] (checked without overflow, so a huge
/// number is refused rather than wrapped to a short limit).
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let t = s.trim();
    let too_long = || DurationError::TooLong {
        quoted: quote_prefix(t),
    };
    let d = if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        // A bare number is minutes, as in Slurm's and Flux's time limits.
        match t.parse::<u64>().ok().and_then(|m| m.checked_mul(60)) {
            Some(secs) => Duration::from_secs(secs),
            None => return Err(too_long()),
        }
    } else {
        humantime::parse_duration(t).map_err(|e| match e {
            humantime::DurationError::NumberOverflow => too_long(),
            e => DurationError::NotADuration {
                quoted: quote_prefix(t),
                why: e,
            },
        })?
    };
    if d > MAX_TIME_LIMIT {
        return Err(too_long());
    }
    Ok(d)
}

/// A p-value with up to 6 significant digits (1/32 is 0.03125, not 0.0312).
fn fmt_small_p(p: f64) -> String {
    if p < 1e-4 {
        return format!("{p:.3e}");
    }
    let s = format!("{p:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The smallest one-sided p-value the exact test can give with `n` replicates per arm,
/// after Holm's first step over `family` variants: `family · 2^−n` (paired signed-rank) or
/// `family / C(2n, n)` (Mann–Whitney, `n` per arm), at most 1.
pub fn smallest_reachable_p(design: optgate_stats::Design, n: u32, family: usize) -> f64 {
    let n = n as usize;
    let p = match design {
        optgate_stats::Design::Paired => optgate_stats::signed_rank::min_p_paired(n),
        optgate_stats::Design::Independent => optgate_stats::mann_whitney::min_p_unpaired(n, n),
    };
    (p * family.max(1) as f64).min(1.0)
}

/// The smallest `replicates` (at least 1, at most [`MAX_REPLICATES`]) whose
/// [`smallest_reachable_p`] is below `alpha`; `None` when none is.
pub fn smallest_deciding_replicates(
    design: optgate_stats::Design,
    family: usize,
    alpha: f64,
) -> Option<u32> {
    (1..=MAX_REPLICATES).find(|&n| smallest_reachable_p(design, n, family) < alpha)
}

struct Checker {
    file: PathBuf,
    locator: Locator,
    diagnostics: Vec<Diagnostic>,
}

impl Checker {
    fn push(
        &mut self,
        severity: Severity,
        location: Option<Location>,
        path: &str,
        message: String,
    ) {
        self.diagnostics.push(Diagnostic::new(
            severity,
            self.file.clone(),
            location,
            path,
            message,
        ));
    }

    fn error(&mut self, path: &str, message: impl Into<String>) {
        let loc = self.locator.value(path);
        self.push(Severity::Error, loc, path, message.into());
    }

    fn warning(&mut self, path: &str, message: impl Into<String>) {
        // An empty path is about the file as a whole: no place to point at.
        let loc = if path.is_empty() {
            None
        } else {
            self.locator.value(path)
        };
        self.push(Severity::Warning, loc, path, message.into());
    }

    /// An error about a key itself (an unknown dimension, a bad variable name): points at
    /// the key rather than its value.
    fn key_error(&mut self, path: &str, message: impl Into<String>) {
        let loc = self.locator.key(path);
        self.push(Severity::Error, loc, path, message.into());
    }

    fn resolve(&mut self, mut file: ExperimentFile, text: &str, path: &Path) -> Experiment {
        self.check_file(&mut file);
        let run_time_limit = self.duration(file.app.time_limit.as_deref(), "app.time_limit");
        let allocation_time_limit =
            self.duration(file.scheduler.time_limit.as_deref(), "scheduler.time_limit");
        let steady_epochs = self.steady_epochs(&file);
        let recheck = self.recheck(file.recheck.as_ref());
        let base_dir = path.parent().unwrap_or(Path::new("."));
        let workdir = match &file.workdir {
            Some(w) => base_dir.join(w),
            None => base_dir.to_path_buf(),
        };
        let workdir = normalize(&workdir);
        let (arms, builds) = resolve_arms(&file);
        self.check_launch_shapes(&file, &arms);
        let inputs = file
            .inputs
            .iter()
            .map(|i| normalize(&workdir.join(i)))
            .collect();
        let source_sha256 = hex(&Sha256::digest(text.as_bytes()));
        let patterns = crate::resolved::Patterns::compile(&file);
        let (metric, metric_name, guardrails) = crate::resolved::split_metrics(&file);
        Experiment {
            per_run: metric.is_per_run(),
            metric,
            metric_name,
            guardrails,
            patterns,
            kind: file.scheduler.kind,
            design: file.design,
            replicates: file.replicates,
            max_replicates: file
                .max_replicates
                .unwrap_or_else(|| default_max_replicates(file.replicates, file_arms(&file)))
                .max(file.replicates),
            seed: file.seed,
            alpha: file.compare.alpha,
            sequential: file.compare.sequential,
            source: path.to_path_buf(),
            source_sha256,
            source_text: text.to_string(),
            governor_helper: file.preflight.governor_helper.clone(),
            allow_oversubscription: file.preflight.allow_oversubscription,
            description: file.description.clone(),
            app_command: file.app.command.clone(),
            system_metric: file.system_metric.clone(),
            correctness: file.correctness.clone(),
            correctness_at: self.locator.key("correctness"),
            min_effect_pct: file.compare.min_effect_pct,
            production_epochs: file.compare.production_epochs,
            allocation: crate::resolved::Allocation::resolve(&file.scheduler, file.design),
            max_resubmits: file.scheduler.max_resubmits,
            checklist: file.checklist.clone(),
            recheck,
            file,
            workdir,
            arms,
            builds,
            run_time_limit,
            allocation_time_limit,
            steady_epochs,
            inputs,
        }
    }

    /// Every check of the file that needs no resolved value; `check_decidable` may settle
    /// what the file leaves open, hence `&mut`.
    fn check_file(&mut self, file: &mut ExperimentFile) {
        if !is_safe_name(&file.name) {
            self.error(
                "name",
                format!(
                    "experiment name {} must be 1-64 characters of letters, digits, `_`, `-`, `.`, starting with a letter or digit",
                    quoted(&file.name)
                ),
            );
        }
        self.check_decidable(file);
        self.check_replicates(file);
        self.check_compare(file);
        self.check_metric(file);
        self.check_correctness(file);
        self.check_scheduler(&file.scheduler);
        self.check_env(&file.app.env, "app.env");
        if let Some(b) = &file.build {
            self.check_build(b, "build");
        }
        self.check_arm_spec(&file.baseline, "baseline");
        self.check_variants(file);
        self.check_checklist(file);
        self.check_isolation(file);
    }

    /// `compare.steady_epochs`, parsed (an error, quoting its prefix, when it is no window).
    fn steady_epochs(&mut self, file: &ExperimentFile) -> Option<optgate_stats::EpochWindow> {
        match &file.compare.steady_epochs {
            None => None,
            Some(s) => match s.parse::<optgate_stats::EpochWindow>() {
                Ok(r) => Some(r),
                Err(e) => {
                    let message = e.to_string().replacen(s.as_str(), &quote_prefix(s), 1);
                    self.error("compare.steady_epochs", message);
                    None
                }
            },
        }
    }

    /// `page_cache` other than `leave` needs `inputs`; inputs are paths, at most
    /// [`crate::limits::MAX_INPUTS`].
    fn check_isolation(&mut self, f: &ExperimentFile) {
        let arms = std::iter::once(("baseline".to_string(), f.baseline.page_cache)).chain(
            f.variants
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("variants[{i}]"), v.page_cache)),
        );
        let mut asked = f
            .page_cache
            .filter(|m| *m != PageCacheMode::Leave)
            .map(|m| ("page_cache".to_string(), m));
        for (path, mode) in arms {
            if let Some(m) = mode.filter(|m| *m != PageCacheMode::Leave) {
                asked = asked.or(Some((format!("{path}.page_cache"), m)));
            }
        }
        if let Some((path, mode)) = asked
            && f.inputs.is_empty()
        {
            let word = serde_json::to_value(mode)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            self.error(
                &path,
                format!(
                    "`page_cache: {word}` needs `inputs:`, the files (or folders) whose page cache to manage"
                ),
            );
        }
        if f.inputs.len() > crate::limits::MAX_INPUTS {
            self.error(
                "inputs",
                format!(
                    "{} inputs; at most {} (name folders instead of their files)",
                    f.inputs.len(),
                    crate::limits::MAX_INPUTS
                ),
            );
        }
        for (i, p) in f.inputs.iter().enumerate() {
            if p.trim().is_empty() || p.contains('\0') {
                self.error(&format!("inputs[{i}]"), "an input must be a path");
            }
        }
    }

    fn duration(&mut self, value: Option<&str>, path: &str) -> Option<Duration> {
        let v = value?;
        match parse_duration(v) {
            Ok(d) if d.is_zero() => {
                self.error(path, "a time limit must be longer than zero");
                None
            }
            Ok(d) => Some(d),
            Err(e) => {
                self.error(path, e.to_string());
                None
            }
        }
    }

    fn check_replicates(&mut self, f: &ExperimentFile) {
        if f.replicates == 0 {
            self.error("replicates", "replicates must be at least 1");
        } else if f.replicates < MIN_REPLICATES && !f.allow_few_replicates {
            self.error(
                "replicates",
                format!(
                    "replicates is {}, but at least {MIN_REPLICATES} per arm are needed to decide anything; \
                     set `allow_few_replicates: true` to run fewer anyway (the result will be inconclusive)",
                    f.replicates
                ),
            );
        }
        for (key, n) in [
            ("replicates", Some(f.replicates)),
            ("max_replicates", f.max_replicates),
        ] {
            if let Some(n) = n
                && n > MAX_REPLICATES
            {
                self.error(
                    key,
                    format!(
                        "{key} is {n}; at most {MAX_REPLICATES} runs per arm are accepted (exact tests decide with far fewer)"
                    ),
                );
            }
        }
        // Runs the experiment may plan: the budget's blocks × arms, counted without overflow.
        let blocks = u64::from(f.max_replicates.unwrap_or(f.replicates).max(f.replicates));
        let arms = (f.variants.len() as u64)
            .saturating_add(1)
            .saturating_add(u64::from(f.aa_control));
        let runs = blocks.saturating_mul(arms);
        if runs > MAX_RUNS
            && blocks <= u64::from(MAX_REPLICATES)
            && f.variants.len() <= MAX_VARIANTS
        {
            let key = if f.max_replicates.is_some() {
                "max_replicates"
            } else {
                "replicates"
            };
            self.error(
                key,
                format!(
                    "{blocks} replicates × {arms} arms is {runs} runs; at most {MAX_RUNS} runs are accepted in one experiment"
                ),
            );
        }
        if let Some(m) = f.max_replicates
            && m < f.replicates
        {
            self.error(
                "max_replicates",
                format!(
                    "max_replicates ({m}) is smaller than replicates ({})",
                    f.replicates
                ),
            );
        }
    }

    /// "Designs that can decide": with `replicates` blocks and the variants of the file, the
    /// smallest p-value the exact test can give, times the Holm family size (Holm's first
    /// step), must be below α, else no variant can ever be decided at the first look. A
    /// `replicates` given is refused (a warning with `allow_few_replicates: true`), naming
    /// the smallest number that can decide; a `replicates` not given becomes that number.
    fn check_decidable(&mut self, f: &mut ExperimentFile) {
        let alpha = f.compare.alpha;
        if !(alpha > 0.0 && alpha < 0.5) || f.variants.is_empty() || f.variants.len() > MAX_VARIANTS
        {
            return; // reported by check_compare / check_variants
        }
        let design = f.design.stats();
        let family = f.variants.len();
        let needed = smallest_deciding_replicates(design, family, alpha);
        let given = self.locator.has("replicates");
        if !given {
            if let Some(n) = needed {
                f.replicates = n.max(MIN_REPLICATES);
            }
            return;
        }
        let n = f.replicates;
        if n == 0 || n > MAX_REPLICATES || (n < MIN_REPLICATES && !f.allow_few_replicates) {
            return; // check_replicates said why
        }
        let reach = smallest_reachable_p(design, n, family);
        if reach < alpha {
            return;
        }
        let min_p = reach / family as f64;
        let holm = if family > 1 {
            format!(", {} after Holm over {family} variants", fmt_small_p(reach))
        } else {
            String::new()
        };
        let test = match design {
            optgate_stats::Design::Paired => format!("1/2^{n}"),
            optgate_stats::Design::Independent => format!("1/C({}, {n})", 2 * n),
        };
        let min_p = fmt_small_p(min_p);
        let fix = match needed {
            Some(k) => format!("replicates: {k} is the smallest number that can decide"),
            None => format!(
                "no number of replicates up to {MAX_REPLICATES} can decide {family} variants at this α"
            ),
        };
        let msg = format!(
            "replicates is {n}: with {family} variant{} the smallest reachable p-value is {test} = {min_p}{holm} — not below α = {alpha}, so no variant can ever be decided; {fix}",
            if family == 1 { "" } else { "s" },
        );
        if f.allow_few_replicates {
            self.warning(
                "replicates",
                format!("{msg} (allowed by `allow_few_replicates: true`: every variant will be inconclusive)"),
            );
        } else {
            self.error(
                "replicates",
                format!("{msg}, or set `allow_few_replicates: true` to run these anyway"),
            );
        }
    }

    fn check_compare(&mut self, f: &ExperimentFile) {
        let c = &f.compare;
        if !(c.alpha > 0.0 && c.alpha < 0.5) {
            self.error(
                "compare.alpha",
                format!("alpha must be between 0 and 0.5 (got {})", c.alpha),
            );
        }
        if !(c.min_effect_pct.is_finite() && c.min_effect_pct >= 0.0 && c.min_effect_pct < 100.0) {
            self.error(
                "compare.min_effect_pct",
                format!(
                    "min_effect_pct must be a percentage in [0, 100) (got {})",
                    c.min_effect_pct
                ),
            );
        }
        if c.production_epochs == Some(0) {
            self.error(
                "compare.production_epochs",
                "production_epochs must be at least 1",
            );
        }
    }

    fn check_regex(&mut self, pattern: &str, path: &str, groups: &[&str]) {
        match Regex::new(pattern) {
            Err(e) => self.error(path, regex_error(pattern, &e)),
            Ok(re) => {
                let names: BTreeSet<&str> = re.capture_names().flatten().collect();
                for g in groups {
                    if !names.contains(g) {
                        self.error(
                            path,
                            format!(
                                "the pattern needs a named group `(?P<{g}>...)`; it has {}",
                                if names.is_empty() {
                                    "none".to_string()
                                } else {
                                    names
                                        .iter()
                                        .map(|n| format!("`{n}`"))
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                }
                            ),
                        );
                    }
                }
            }
        }
    }

    fn check_relative_path(&mut self, p: &str, path: &str) {
        let pp = Path::new(p);
        if p.is_empty() || pp.is_absolute() || pp.components().any(|c| c.as_os_str() == "..") {
            self.error(
                path,
                format!(
                    "{} must be a path relative to the run directory, without `..`",
                    quoted(p)
                ),
            );
        }
    }

    fn check_metric(&mut self, f: &ExperimentFile) {
        self.check_metrics(f);
        if let Some(s) = &f.system_metric {
            self.check_regex(&s.pattern, "system_metric.pattern", &["value"]);
            match (s.source, &s.file) {
                (MetricSource::File, None) => {
                    self.key_error("system_metric", "`source: file` needs `file:`")
                }
                (MetricSource::File, Some(p)) => self.check_relative_path(p, "system_metric.file"),
                (MetricSource::Dftracer, _) => self.error(
                    "system_metric.source",
                    "system_metric reads stdout or a file",
                ),
                _ => {}
            }
        }
    }

    fn check_correctness(&mut self, f: &ExperimentFile) {
        let Some(c) = &f.correctness else { return };
        self.check_expect(c);
        for (i, p) in c.files.iter().enumerate() {
            self.check_relative_path(p, &format!("correctness.files[{i}]"));
        }
        if let Some(v) = &c.values {
            self.check_regex(&v.pattern, "correctness.values.pattern", &["value"]);
            for (name, tol) in [("rel_tol", v.rel_tol), ("abs_tol", v.abs_tol)] {
                if let Some(t) = tol
                    && !(t.is_finite() && t >= 0.0)
                {
                    self.error(
                        &format!("correctness.values.{name}"),
                        format!("{name} must be a non-negative number (got {t})"),
                    );
                }
            }
            match (v.source, &v.file) {
                (MetricSource::File, None) => {
                    self.key_error("correctness.values", "`source: file` needs `file:`")
                }
                (MetricSource::File, Some(p)) => {
                    self.check_relative_path(p, "correctness.values.file")
                }
                (MetricSource::Dftracer, _) => self.error(
                    "correctness.values.source",
                    "correctness values are read from stdout or a file",
                ),
                _ => {}
            }
        }
    }

    /// `nodes`, `tasks_per_node`, `cpus_per_task` (at least 1) and `gpus_per_task` within
    /// their documented maxima ([`MAX_NODES`] …).
    fn check_shape_fields(&mut self, path: &str, fields: [(&str, Option<u32>); 4]) {
        for (k, v) in fields {
            let Some(n) = v else { continue };
            let max = match k {
                "nodes" => MAX_NODES,
                "tasks_per_node" => MAX_TASKS_PER_NODE,
                "cpus_per_task" => MAX_CPUS_PER_TASK,
                _ => MAX_GPUS_PER_TASK,
            };
            if n == 0 && k != "gpus_per_task" {
                self.error(&format!("{path}.{k}"), format!("{k} must be at least 1"));
            } else if n > max {
                self.error(
                    &format!("{path}.{k}"),
                    format!("{k} is {n}; at most {max} are accepted"),
                );
            }
        }
    }

    /// Each arm's launch as it will run (its launcher's settings over the scheduler's):
    /// its tasks (`nodes` × `tasks_per_node`, at most [`MAX_TASKS`]) and its CPUs per node
    /// (`tasks_per_node` × `cpus_per_task`, at most [`MAX_CPUS_PER_NODE`]), multiplied
    /// without overflow. One error per place, however many arms share it.
    fn check_launch_shapes(&mut self, f: &ExperimentFile, arms: &[Arm]) {
        let mut reported = BTreeSet::new();
        for arm in arms {
            let r = &arm.resources;
            let fields = [r.nodes, r.tasks_per_node, r.cpus_per_task];
            let maxima = [MAX_NODES, MAX_TASKS_PER_NODE, MAX_CPUS_PER_TASK];
            if fields.iter().zip(maxima).any(|(&n, max)| n == 0 || n > max) {
                continue; // each field's own error says why
            }
            let launcher = match arm.role {
                ArmRole::Variant => f
                    .variants
                    .iter()
                    .position(|v| v.name == arm.name)
                    .map(|i| (format!("variants[{i}].launcher"), &f.variants[i].launcher)),
                _ => Some(("baseline.launcher".to_string(), &f.baseline.launcher)),
            };
            let place = |key: &str, set: bool| match &launcher {
                Some((p, _)) if set => format!("{p}.{key}"),
                _ => format!("scheduler.{key}"),
            };
            let l = launcher.as_ref().map(|(_, l)| *l);
            let tasks = u64::from(r.nodes).checked_mul(u64::from(r.tasks_per_node));
            if tasks.is_none_or(|t| t > MAX_TASKS) {
                let at = place(
                    "tasks_per_node",
                    l.is_some_and(|l| l.tasks_per_node.is_some()),
                );
                let message = format!(
                    "{} nodes × {} tasks per node is more than {MAX_TASKS} tasks, the most one launch may have",
                    r.nodes, r.tasks_per_node
                );
                if reported.insert((at.clone(), message.clone())) {
                    self.error(&at, message);
                }
            }
            let cpus = u64::from(r.tasks_per_node).checked_mul(u64::from(r.cpus_per_task));
            if cpus.is_none_or(|c| c > MAX_CPUS_PER_NODE) {
                let at = place(
                    "cpus_per_task",
                    l.is_some_and(|l| l.cpus_per_task.is_some()),
                );
                let message = format!(
                    "{} tasks per node × {} CPUs per task is more than {MAX_CPUS_PER_NODE} CPUs, the most one node may be asked for",
                    r.tasks_per_node, r.cpus_per_task
                );
                if reported.insert((at.clone(), message.clone())) {
                    self.error(&at, message);
                }
            }
        }
    }

    fn check_scheduler(&mut self, s: &SchedulerSpec) {
        self.check_shape_fields(
            "scheduler",
            [
                ("nodes", s.nodes),
                ("tasks_per_node", s.tasks_per_node),
                ("cpus_per_task", s.cpus_per_task),
                ("gpus_per_task", s.gpus_per_task),
            ],
        );
        for (k, v) in [("queue", &s.queue), ("account", &s.account)] {
            if let Some(v) = v
                && !is_plain_word(v)
            {
                self.error(
                    &format!("scheduler.{k}"),
                    format!(
                        "{k} {} may only contain letters, digits, `_`, `-`, `.`",
                        quoted(v)
                    ),
                );
            }
        }
        for (i, d) in s.extra_directives.iter().enumerate() {
            if d.contains('\n') || d.contains('\r') || !d.starts_with('-') {
                self.error(
                    &format!("scheduler.extra_directives[{i}]"),
                    "an extra directive is one option starting with `-` on a single line, e.g. `--constraint=cpu`",
                );
            }
        }
        if s.kind == SchedulerKind::Local {
            for (k, v) in [("nodes", s.nodes), ("tasks_per_node", s.tasks_per_node)] {
                if matches!(v, Some(n) if n > 1) {
                    self.error(
                        &format!("scheduler.{k}"),
                        format!(
                            "the local scheduler runs one process on this machine; {k} must be 1"
                        ),
                    );
                }
            }
        }
    }

    fn check_env(&mut self, env: &EnvMap, path: &str) {
        for k in env.keys() {
            if !is_env_name(k) {
                // Located at the key, shown at the map: the key is quoted once, cut.
                let loc = self.locator.key(&format!("{path}.{k}"));
                self.push(
                    Severity::Error,
                    loc,
                    path,
                    format!(
                        "{} is not a valid environment variable name (letters, digits, `_`, not starting with a digit)",
                        quoted(k)
                    ),
                );
            }
        }
    }

    fn check_launcher(&mut self, l: &LauncherSpec, path: &str, kind: SchedulerKind) {
        self.check_shape_fields(
            path,
            [
                ("nodes", l.nodes),
                ("tasks_per_node", l.tasks_per_node),
                ("cpus_per_task", l.cpus_per_task),
                ("gpus_per_task", l.gpus_per_task),
            ],
        );
        for (k, v) in [
            ("nodes", l.nodes),
            ("tasks_per_node", l.tasks_per_node),
            ("cpus_per_task", l.cpus_per_task),
        ] {
            if kind == SchedulerKind::Local && k != "cpus_per_task" && matches!(v, Some(n) if n > 1)
            {
                self.error(
                    &format!("{path}.{k}"),
                    format!("the local scheduler runs one process on this machine; {k} must be 1"),
                );
            }
        }
    }

    fn check_build(&mut self, b: &BuildSpec, path: &str) {
        match &b.command {
            CommandSpec::Shell(s) if s.trim().is_empty() => {
                self.error(&format!("{path}.command"), "the build command is empty")
            }
            CommandSpec::Argv(v) if v.is_empty() => {
                self.error(&format!("{path}.command"), "the build command is empty")
            }
            _ => {}
        }
        self.check_env(&b.env, &format!("{path}.env"));
    }

    fn check_arm_spec(&mut self, a: &ArmSpec, path: &str) {
        self.check_env(&a.env, &format!("{path}.env"));
        self.check_unset(&a.unset, path);
        self.check_governor_and_requires(a.governor.as_deref(), &a.requires, path);
        self.check_launcher(
            &a.launcher,
            &format!("{path}.launcher"),
            SchedulerKind::Local,
        );
    }

    fn check_unset(&mut self, unset: &[String], path: &str) {
        for (i, u) in unset.iter().enumerate() {
            if !is_env_name(u) {
                self.error(
                    &format!("{path}.unset[{i}]"),
                    format!("{} is not a valid environment variable name", quoted(u)),
                );
            }
        }
    }

    /// Checks the variants list: its size, then each variant in turn.
    fn check_variants(&mut self, f: &ExperimentFile) {
        if f.variants.is_empty() {
            self.key_error(
                "variants",
                "the experiment has no variants: list at least one proposal to compare with the baseline, or let `optgate propose FILE` measure the baseline and write them",
            );
        }
        if f.variants.len() > MAX_VARIANTS {
            // One error, not one per variant: the rest of the list is not checked.
            self.key_error(
                "variants",
                format!(
                    "the experiment has {} variants; at most {MAX_VARIANTS} are accepted (each is an arm of every block)",
                    f.variants.len()
                ),
            );
            return;
        }
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, v) in f.variants.iter().enumerate() {
            let p = format!("variants[{i}]");
            self.check_variant_name(v, i, &p, &mut seen);
            self.check_env(&v.env, &format!("{p}.env"));
            self.check_unset(&v.unset, &p);
            self.check_launcher(&v.launcher, &format!("{p}.launcher"), f.scheduler.kind);
            if let Some(b) = &v.build {
                self.check_build(b, &format!("{p}.build"));
            }
            self.check_variant_dimension(v, &p);
            self.check_variant_governor_and_requires(v, &p);
            self.warn_if_variant_changes_nothing(v, &p);
            self.warn_if_output_unchecked(f, v, &p);
        }
    }

    /// A variant of a dimension whose safety rests on unchanged output, in an experiment
    /// that declares no `correctness` check: its acceptance would say nothing about the
    /// result it computes.
    fn warn_if_output_unchecked(&mut self, f: &ExperimentFile, v: &VariantSpec, p: &str) {
        let Some(d) = v.dimension.as_deref() else {
            return;
        };
        let declared = f.correctness.as_ref().is_some_and(|c| c.declares_a_check());
        if checklist::output_must_match(d) && !declared {
            self.warning(
                p,
                format!(
                    "variant {} is a `{d}` change, safe only when the output is unchanged, and the experiment declares no output check: add `correctness.values` (a printed result compared within `rel_tol`), `correctness.files` (files that must be byte-identical) or `correctness.expect` (the verdict every run prints); without one an acceptance is shown `accept [output not checked]`",
                    quoted(&v.name)
                ),
            );
        }
    }

    /// A variant's name: safe, not reserved, not used by an earlier variant.
    fn check_variant_name<'f>(
        &mut self,
        v: &'f VariantSpec,
        i: usize,
        p: &str,
        seen: &mut BTreeMap<&'f str, usize>,
    ) {
        if !is_safe_name(&v.name) {
            self.error(
                &format!("{p}.name"),
                format!(
                    "variant name {} must be 1-64 characters of letters, digits, `_`, `-`, `.`, starting with a letter or digit",
                    quoted(&v.name)
                ),
            );
        } else if v.name == BASELINE || v.name == AA_CONTROL {
            self.error(
                &format!("{p}.name"),
                format!("`{}` is reserved for an arm optgate adds itself", v.name),
            );
        }
        if let Some(first) = seen.insert(&v.name, i) {
            self.error(
                &format!("{p}.name"),
                format!(
                    "duplicate variant name {} (first used by variants[{first}])",
                    quoted(&v.name)
                ),
            );
        }
    }

    /// A variant's checklist dimension: missing is a warning, unknown an error.
    fn check_variant_dimension(&mut self, v: &VariantSpec, p: &str) {
        match &v.dimension {
            None => self.warning(
                p,
                format!(
                    "variant {} names no checklist `dimension`; the report cannot place it",
                    quoted(&v.name)
                ),
            ),
            Some(d) if checklist::dimension(d).is_none() => self.error(
                &format!("{p}.dimension"),
                format!(
                    "unknown dimension {}; expected one of {}",
                    quoted(d),
                    dimension_list()
                ),
            ),
            _ => {}
        }
    }

    fn check_variant_governor_and_requires(&mut self, v: &VariantSpec, p: &str) {
        self.check_governor_and_requires(v.governor.as_deref(), &v.requires, p);
    }

    fn check_governor_and_requires(
        &mut self,
        governor: Option<&str>,
        requires: &[String],
        p: &str,
    ) {
        if let Some(g) = governor
            && !CPUFREQ_GOVERNORS.contains(&g)
        {
            self.error(
                &format!("{p}.governor"),
                format!(
                    "{} is not a governor name; expected one of {}",
                    quoted(g),
                    CPUFREQ_GOVERNORS.join(", ")
                ),
            );
        }
        for (j, r) in requires.iter().enumerate() {
            if !is_plain_word(r) {
                self.error(
                    &format!("{p}.requires[{j}]"),
                    format!("{} is not a capability flag name", quoted(r)),
                );
            }
        }
    }

    fn warn_if_variant_changes_nothing(&mut self, v: &VariantSpec, p: &str) {
        let changes_nothing = v.env.is_empty()
            && v.unset.is_empty()
            && v.launcher == LauncherSpec::default()
            && v.build.is_none()
            && v.args.is_none()
            && v.governor.is_none()
            && v.caches.is_none()
            && v.page_cache.is_none();
        if changes_nothing {
            self.warning(
                p,
                format!(
                    "variant {} changes nothing relative to the baseline",
                    quoted(&v.name)
                ),
            );
        }
    }

    fn check_checklist(&mut self, f: &ExperimentFile) {
        let missing: Vec<&str> = checklist::DIMENSIONS
            .iter()
            .map(|d| d.id)
            .filter(|id| {
                !f.checklist.contains_key(*id)
                    && !f
                        .variants
                        .iter()
                        .any(|v| v.dimension.as_deref() == Some(id))
            })
            .collect();
        if !missing.is_empty() {
            let path = if f.checklist.is_empty() {
                ""
            } else {
                "checklist"
            };
            self.warning(
                path,
                format!(
                    "checklist: no verdict for {} of the 10 dimensions ({}); give each a `checklist:` entry (`applicable_not_measured` or `not_applicable` with a reason) — the report shows them as missing",
                    missing.len(),
                    missing.join(", ")
                ),
            );
        }
        for (k, e) in &f.checklist {
            let p = format!("checklist.{k}");
            if checklist::dimension(k).is_none() {
                // Located at the key, shown at `checklist`: the key is quoted once, cut.
                let loc = self.locator.key(&p);
                self.push(
                    Severity::Error,
                    loc,
                    "checklist",
                    format!(
                        "unknown dimension {}; expected one of {}",
                        quoted(k),
                        dimension_list()
                    ),
                );
                continue;
            }
            if e.verdict == Verdict::NotApplicable && e.reason.as_deref().is_none_or(str::is_empty)
            {
                self.error(&p, "a `not_applicable` verdict needs a `reason`");
            }
            if f.variants
                .iter()
                .any(|v| v.dimension.as_deref() == Some(k.as_str()))
            {
                self.warning(
                    &p,
                    format!(
                        "dimension `{k}` is measured by a variant; its checklist entry is ignored"
                    ),
                );
            }
        }
    }
}

/// A regex's error without the whole pattern that the regex crate's message repeats: the
/// pattern's prefix and the message's own last line ("error: unclosed group").
fn regex_error(pattern: &str, e: &regex::Error) -> String {
    let text = e.to_string();
    let why = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .trim_start_matches("error: ");
    format!(
        "invalid regular expression {}: {}",
        quoted(pattern),
        cut_at(why, 2 * QUOTE_PREFIX + 40)
    )
}

fn dimension_list() -> String {
    checklist::DIMENSIONS
        .iter()
        .map(|d| format!("`{}`", d.id))
        .collect::<Vec<_>>()
        .join(", ")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Build ids are derived from the build's content so the same build gets the same
/// directory in every run of the experiment.
fn build_id(spec: &BuildSpec) -> String {
    let json = serde_json::to_string(spec).unwrap_or_default();
    let digest = Sha256::digest(json.as_bytes());
    format!("build-{}", &hex(&digest)[..8])
}

/// Arms of every block: the baseline, the variants and the A/A control when asked for.
fn file_arms(f: &ExperimentFile) -> u64 {
    (f.variants.len() as u64) + 1 + u64::from(f.aa_control)
}

fn resolve_arms(f: &ExperimentFile) -> (Vec<Arm>, Vec<Build>) {
    let mut builds: Vec<Build> = Vec::new();
    let default_build = intern_build(&mut builds, f.build.as_ref());
    let baseline = baseline_arm(f, default_build);
    let mut arms = vec![baseline.clone()];
    if f.aa_control {
        arms.push(Arm {
            name: AA_CONTROL.to_string(),
            role: ArmRole::AaControl,
            description: Some(
                "A/A control: identical to the baseline; its speed-up is the noise floor".into(),
            ),
            ..baseline.clone()
        });
    }
    // Past the limit the experiment is refused anyway; resolving only the first
    // MAX_VARIANTS keeps that refusal as quick as the limit is small.
    for v in f.variants.iter().take(MAX_VARIANTS) {
        let build = match &v.build {
            Some(b) => intern_build(&mut builds, Some(b)),
            None => default_build,
        };
        arms.push(variant_arm(f, &baseline, v, build));
    }
    (arms, builds)
}

/// The index of `spec` in `builds`, adding it when no build with its id is there yet;
/// `None` when there is no build.
fn intern_build(builds: &mut Vec<Build>, spec: Option<&BuildSpec>) -> Option<usize> {
    let spec = spec?;
    let id = build_id(spec);
    if let Some(i) = builds.iter().position(|b| b.id == id) {
        return Some(i);
    }
    builds.push(Build {
        id,
        spec: spec.clone(),
    });
    Some(builds.len() - 1)
}

/// An arm's resources: its launcher's settings, else the scheduler's, else the defaults.
fn arm_resources(s: &SchedulerSpec, l: &LauncherSpec) -> Resources {
    Resources {
        nodes: l.nodes.or(s.nodes).unwrap_or(1),
        tasks_per_node: l.tasks_per_node.or(s.tasks_per_node).unwrap_or(1),
        cpus_per_task: l.cpus_per_task.or(s.cpus_per_task).unwrap_or(1),
        gpus_per_task: l.gpus_per_task.or(s.gpus_per_task).unwrap_or(0),
        extra_args: l.extra_args.clone(),
    }
}

/// The app's environment with `arm_env` applied on top.
fn merged_env(f: &ExperimentFile, arm_env: &EnvMap) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = f
        .app
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in arm_env {
        env.insert(k.clone(), v.0.clone());
    }
    env
}

fn baseline_arm(f: &ExperimentFile, default_build: Option<usize>) -> Arm {
    let base = &f.baseline;
    Arm {
        name: BASELINE.to_string(),
        role: ArmRole::Baseline,
        description: base.description.clone(),
        dimension: None,
        env: merged_env(f, &base.env),
        unset: base.unset.clone(),
        resources: arm_resources(&f.scheduler, &base.launcher),
        args: f.app.args.iter().chain(&base.args).cloned().collect(),
        build: default_build,
        governor: base.governor.clone(),
        requires: base.requires.clone(),
        caches: base.caches.or(f.caches).unwrap_or_default(),
        page_cache: base.page_cache.or(f.page_cache).unwrap_or_default(),
    }
}

/// A variant starts from the baseline arm and applies its own changes on top.
fn variant_arm(f: &ExperimentFile, baseline: &Arm, v: &VariantSpec, build: Option<usize>) -> Arm {
    let (env, unset) = variant_env(baseline, &f.baseline.unset, v);
    let launcher = variant_launcher(&f.baseline.launcher, &v.launcher);
    Arm {
        name: v.name.clone(),
        role: ArmRole::Variant,
        description: v.description.clone(),
        dimension: v.dimension.clone(),
        env,
        unset,
        resources: arm_resources(&f.scheduler, &launcher),
        // A variant's `args` are its whole argument list: they replace `app.args` and
        // the baseline's, never extend them (appending ran the baseline's settings
        // followed by the variant's, and most programs read the first ones).
        args: match &v.args {
            Some(a) => a.clone(),
            None => baseline.args.clone(),
        },
        build,
        governor: v.governor.clone().or_else(|| baseline.governor.clone()),
        requires: {
            let mut r = baseline.requires.clone();
            r.extend(
                v.requires
                    .iter()
                    .filter(|x| !baseline.requires.contains(x))
                    .cloned(),
            );
            r
        },
        caches: v.caches.or(f.caches).unwrap_or_default(),
        page_cache: v.page_cache.or(f.page_cache).unwrap_or_default(),
    }
}

/// A variant's environment and unset list: the baseline's with the variant's settings
/// and removals applied; a name set again is no longer unset.
fn variant_env(
    baseline: &Arm,
    base_unset: &[String],
    v: &VariantSpec,
) -> (BTreeMap<String, String>, Vec<String>) {
    let mut env = baseline.env.clone();
    for (k, val) in &v.env {
        env.insert(k.clone(), val.0.clone());
    }
    let mut unset = base_unset.to_vec();
    for u in &v.unset {
        env.remove(u);
        if !unset.contains(u) {
            unset.push(u.clone());
        }
    }
    unset.retain(|u| !env.contains_key(u));
    (env, unset)
}

/// The baseline's launcher with the variant's launcher settings on top.
fn variant_launcher(base: &LauncherSpec, vl: &LauncherSpec) -> LauncherSpec {
    let mut launcher = base.clone();
    launcher.nodes = vl.nodes.or(launcher.nodes);
    launcher.tasks_per_node = vl.tasks_per_node.or(launcher.tasks_per_node);
    launcher.cpus_per_task = vl.cpus_per_task.or(launcher.cpus_per_task);
    launcher.gpus_per_task = vl.gpus_per_task.or(launcher.gpus_per_task);
    if !vl.extra_args.is_empty() {
        launcher.extra_args = vl.extra_args.clone();
    }
    launcher
}

mod expect;
mod metrics;

#[cfg(test)]
mod tests;
