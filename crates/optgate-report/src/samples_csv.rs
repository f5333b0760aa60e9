//! Parsing of a samples file (`variant,replicate,epoch,seconds` plus an optional `block`
//! and the per-run resource columns optgate writes,
//! header required, any column order) into arms for the statistics. Validation collects
//! every problem with the file's line numbers (the header is line 1) instead of stopping
//! at the first.
//!
//! Nothing here is sized or indexed by a number from the file: replicate, epoch and block
//! numbers are map keys, so memory follows the rows the file holds, and the limits below
//! bound those (see `docs/LIMITS.md`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use optgate_stats::{ArmData, Design, RunSamples};
use thiserror::Error;

/// The columns a samples file may have. The last three are what optgate records per run
/// beside the samples (CPU seconds, peak RSS in KiB, joules; repeated on each of the run's
/// rows, empty where not measured). `optgate analyze` compares `energy_j` (when every run
/// has it) or else `cpu_s` as System Impact, so a run root's `samples.csv` re-analyses to
/// the same report; `max_rss_kib` is carried but not compared.
///
/// This is also the order [`write_samples`] writes them in (the order of the files optgate
/// has always written).
pub const COLUMNS: [&str; 8] = [
    "variant",
    "replicate",
    "block",
    "epoch",
    "seconds",
    "cpu_s",
    "max_rss_kib",
    "energy_j",
];
const REQUIRED: [&str; 4] = ["variant", "replicate", "epoch", "seconds"];

/// The largest samples file read: 256 MiB. The whole text is held in memory while it is
/// parsed; a real file (every epoch of every run as one short row) is a few megabytes.
pub const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// The most data rows: 1,000,000 (e.g. 66 arms × 1000 runs × 15 epochs). Each row is kept
/// in maps until the file is validated; parsing stops at the first row past the limit.
pub const MAX_ROWS: usize = 1_000_000;

/// The longest field: 256 bytes. A variant name, a number or a column name is short; a
/// longer field is refused, quoted by its first [`QUOTE_PREFIX`] bytes only.
pub const MAX_FIELD_BYTES: usize = 256;

/// The most runs (distinct replicate numbers) of one arm: as many as an experiment may
/// plan per arm ([`optgate_experiment::MAX_REPLICATES`]). The rank statistics hold
/// n(n+1)/2 Walsh averages and n₁·n₂ differences, so n must stay in the thousands.
pub const MAX_REPLICATES: usize = optgate_experiment::MAX_REPLICATES as usize;

/// The most arms (distinct variants, the baseline included): the baseline, the A/A
/// control and [`optgate_experiment::MAX_VARIANTS`] variants, as in an experiment.
pub const MAX_ARMS: usize = optgate_experiment::MAX_VARIANTS + 2;

/// The most problems listed; the rest are counted in one line, "… and N more".
pub const MAX_PROBLEMS_SHOWN: usize = 20;

/// The most numbers (missing epochs, line ranges) listed in one problem.
pub const MAX_LISTED: usize = 10;

/// A value quoted in a message the way the experiment loader quotes one: escaped, cut to
/// its [`QUOTE_PREFIX`] bytes with the full length when longer.
pub use optgate_experiment::limits::{QUOTE_PREFIX, quote_prefix};

/// One thing wrong with a samples file, by what it concerns; each kind writes its own
/// messages ([`fmt::Display`]), so every message is written from its variant's own fields.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    Header(HeaderProblem),
    Limit(LimitProblem),
    Row(RowProblem),
    File(FileProblem),
    Runs(RunsProblem),
}

/// A problem with the header line (line 1).
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderProblem {
    /// No header line.
    Empty,
    MissingColumn {
        column: &'static str,
    },
    UnknownColumn {
        column: String,
    },
    DuplicateColumn {
        column: String,
    },
}

impl From<HeaderProblem> for Problem {
    fn from(p: HeaderProblem) -> Problem {
        Problem::Header(p)
    }
}

/// A size limit reached while reading.
#[derive(Debug, Clone, PartialEq)]
pub enum LimitProblem {
    /// A field longer than [`MAX_FIELD_BYTES`] (`prefix` is its first bytes).
    LongField {
        line: usize,
        bytes: usize,
        prefix: String,
    },
    /// More than [`MAX_ROWS`] data rows: parsing stopped at `line`.
    TooManyRows { line: usize },
    /// More than [`MAX_ARMS`] variants; `line` is the first row of one too many.
    TooManyArms { line: usize },
    /// A variant with more than [`MAX_REPLICATES`] runs; `line` is the first row past it.
    TooManyReplicates { line: usize, variant: String },
    /// Problems not listed, past [`MAX_PROBLEMS_SHOWN`].
    More { count: usize },
}

impl From<LimitProblem> for Problem {
    fn from(p: LimitProblem) -> Problem {
        Problem::Limit(p)
    }
}

/// A problem within one data row.
#[derive(Debug, Clone, PartialEq)]
pub enum RowProblem {
    FieldCount {
        line: usize,
        expected: usize,
        found: usize,
    },
    UnterminatedQuote {
        line: usize,
    },
    EmptyVariant {
        line: usize,
    },
    /// A replicate, epoch or block that is not a non-negative integer (epoch: ≥ 1).
    BadInteger {
        line: usize,
        column: &'static str,
        value: String,
    },
    /// A `cpu_s` or `energy_j` that is not a number ≥ 0 (empty means not measured).
    BadResource {
        line: usize,
        column: &'static str,
        value: String,
    },
    BadSeconds {
        line: usize,
        value: String,
    },
    Duplicate {
        line: usize,
        first_line: usize,
        variant: String,
        replicate: u32,
        epoch: u32,
    },
}

impl From<RowProblem> for Problem {
    fn from(p: RowProblem) -> Problem {
        Problem::Row(p)
    }
}

/// A problem with the file's set of variants as a whole.
#[derive(Debug, Clone, PartialEq)]
pub enum FileProblem {
    NoData,
    /// Only the baseline is in the file: nothing to compare.
    NoVariants {
        baseline: String,
    },
    UnknownBaseline {
        baseline: String,
        known: Vec<String>,
    },
}

impl From<FileProblem> for Problem {
    fn from(p: FileProblem) -> Problem {
        Problem::File(p)
    }
}

/// A problem with one variant's runs (replicates, epochs, blocks, pairing).
#[derive(Debug, Clone, PartialEq)]
pub enum RunsProblem {
    TooFewReplicates {
        variant: String,
        replicates: usize,
        lines: Vec<usize>,
    },
    MissingEpochs {
        variant: String,
        replicate: u32,
        /// The first [`MAX_LISTED`] missing epochs.
        missing: Vec<u32>,
        /// How many are missing in all.
        missing_count: usize,
        lines: Vec<usize>,
    },
    /// Rows of one run disagree on the block (or some leave it empty).
    InconsistentBlock {
        variant: String,
        replicate: u32,
        lines: Vec<usize>,
    },
    /// Two runs of one variant claim the same block.
    SharedBlock {
        variant: String,
        block: u32,
        lines: Vec<usize>,
    },
    /// Paired design: a block (or replicate number, without blocks) that some arms have
    /// and others lack.
    Unpaired {
        key: String,
        present_in: Vec<String>,
        missing_in: Vec<String>,
        lines: Vec<usize>,
    },
}

impl From<RunsProblem> for Problem {
    fn from(p: RunsProblem) -> Problem {
        Problem::Runs(p)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Header(p) => p.fmt(f),
            Problem::Limit(p) => p.fmt(f),
            Problem::Row(p) => p.fmt(f),
            Problem::File(p) => p.fmt(f),
            Problem::Runs(p) => p.fmt(f),
        }
    }
}

impl fmt::Display for HeaderProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderProblem::Empty => write!(
                f,
                "the file is empty: a header line naming the columns {} is required",
                REQUIRED.join(",")
            ),
            HeaderProblem::MissingColumn { column } => {
                write!(f, "line 1: the header has no '{column}' column")
            }
            HeaderProblem::UnknownColumn { column } => write!(
                f,
                "line 1: unknown column '{}' (allowed: {})",
                quote_prefix(column),
                COLUMNS.join(", ")
            ),
            HeaderProblem::DuplicateColumn { column } => {
                write!(f, "line 1: column '{}' appears twice", quote_prefix(column))
            }
        }
    }
}

impl fmt::Display for LimitProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitProblem::LongField {
                line,
                bytes,
                prefix,
            } => write!(
                f,
                "line {line}: a field of {bytes} bytes ('{prefix}…'); fields are at most \
             {MAX_FIELD_BYTES} bytes"
            ),
            LimitProblem::TooManyRows { line } => write!(
                f,
                "line {line}: more than {MAX_ROWS} data rows; the rest of the file was not read"
            ),
            LimitProblem::TooManyArms { line } => write!(
                f,
                "line {line}: more than {MAX_ARMS} variants (the baseline included); rows of \
             further variants were not read"
            ),
            LimitProblem::TooManyReplicates { line, variant } => write!(
                f,
                "line {line}: variant '{}' has more than {MAX_REPLICATES} replicates; its \
             further runs were not read",
                quote_prefix(variant)
            ),
            LimitProblem::More { count } => write!(f, "… and {count} more"),
        }
    }
}

impl fmt::Display for RowProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowProblem::FieldCount {
                line,
                expected,
                found,
            } => write!(f, "line {line}: {found} fields, the header has {expected}"),
            RowProblem::UnterminatedQuote { line } => {
                write!(f, "line {line}: a quoted field is not closed")
            }
            RowProblem::EmptyVariant { line } => write!(f, "line {line}: the variant is empty"),
            RowProblem::BadInteger {
                line,
                column,
                value,
            } => {
                let what = if *column == "epoch" {
                    "an epoch number (1, 2, ...)"
                } else {
                    "a whole number ≥ 0"
                };
                write!(
                    f,
                    "line {line}: {column} '{}' is not {what}",
                    quote_prefix(value)
                )
            }
            RowProblem::BadResource {
                line,
                column,
                value,
            } => write!(
                f,
                "line {line}: {column} '{}' is not a number ≥ 0 (leave it empty when not measured)",
                quote_prefix(value)
            ),
            RowProblem::BadSeconds { line, value } => write!(
                f,
                "line {line}: seconds '{}' is not a positive number",
                quote_prefix(value)
            ),
            RowProblem::Duplicate {
                line,
                first_line,
                variant,
                replicate,
                epoch,
            } => write!(
                f,
                "line {line}: duplicate of line {first_line} (variant '{}', replicate \
             {replicate}, epoch {epoch})",
                quote_prefix(variant)
            ),
        }
    }
}

impl fmt::Display for FileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileProblem::NoData => write!(f, "the file has a header but no data rows"),
            FileProblem::NoVariants { baseline } => write!(
                f,
                "the file holds only the baseline '{}': there is no variant to compare",
                quote_prefix(baseline)
            ),
            FileProblem::UnknownBaseline { baseline, known } => write!(
                f,
                "baseline '{}' is not a variant in the file (it has: {})",
                quote_prefix(baseline),
                known
                    .iter()
                    .map(|k| quote_prefix(k))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

impl fmt::Display for RunsProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunsProblem::TooFewReplicates {
                variant,
                replicates,
                lines,
            } => write!(
                f,
                "{}: variant '{}' has {replicates} replicate{}; at least 2 are needed \
             (5 for a decision)",
                lines_text(lines),
                quote_prefix(variant),
                if *replicates == 1 { "" } else { "s" }
            ),
            RunsProblem::MissingEpochs {
                variant,
                replicate,
                missing,
                missing_count,
                lines,
            } => {
                let mut list = missing
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ");
                if *missing_count > missing.len() {
                    list += &format!(" … ({missing_count} in all)");
                }
                write!(
                    f,
                    "{}: variant '{}', replicate {replicate} lacks epoch{} {list} that other \
                 runs have",
                    lines_text(lines),
                    quote_prefix(variant),
                    if *missing_count == 1 { "" } else { "s" },
                )
            }
            RunsProblem::InconsistentBlock {
                variant,
                replicate,
                lines,
            } => write!(
                f,
                "{}: variant '{}', replicate {replicate}: its rows do not all name \
             the same block",
                lines_text(lines),
                quote_prefix(variant)
            ),
            RunsProblem::SharedBlock {
                variant,
                block,
                lines,
            } => write!(
                f,
                "{}: variant '{}' has more than one replicate in block {block}",
                lines_text(lines),
                quote_prefix(variant)
            ),
            RunsProblem::Unpaired {
                key,
                present_in,
                missing_in,
                lines,
            } => write!(
                f,
                "{}: paired design, but {key} is in {} and not in {} (use --design \
             independent if the runs were not blocked)",
                lines_text(lines),
                quoted_list(present_in),
                quoted_list(missing_in)
            ),
        }
    }
}

fn quoted_list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("'{}'", quote_prefix(n)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "line 4", "lines 4–6, 9": line numbers as compact ranges; at most [`MAX_LISTED`] ranges,
/// then "… (N lines)".
pub fn lines_text(lines: &[usize]) -> String {
    let mut v = lines.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}–{}", v[i], v[j])
        });
        i = j + 1;
    }
    let word = if v.len() == 1 { "line" } else { "lines" };
    if parts.len() > MAX_LISTED {
        parts.truncate(MAX_LISTED);
        return format!("{word} {} … ({} lines)", parts.join(", "), v.len());
    }
    format!("{word} {}", parts.join(", "))
}

/// Why a samples file could not be analysed.
#[derive(Debug, Error)]
pub enum SamplesError {
    /// The file has problems: the first [`MAX_PROBLEMS_SHOWN`] found, then a
    /// [`LimitProblem::More`] counting the rest.
    #[error("{origin}: {} problem{} in the samples file:\n{}", problem_count(.problems),
        if problem_count(.problems) == 1 { "" } else { "s" },
        .problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid {
        origin: String,
        problems: Vec<Problem>,
    },
    /// The file cannot be read, is not a regular file, or is larger than
    /// [`MAX_FILE_BYTES`].
    #[error("cannot read samples file {path}: {reason}")]
    Read { path: String, reason: String },
    /// The data parsed but the statistics refused it (e.g. an invalid alpha).
    #[error("{origin}: {error}")]
    Stats {
        origin: String,
        #[source]
        error: optgate_stats::StatsError,
    },
}

/// Problems in the order found, as [`SamplesError::Invalid`] shows them.
fn problem_count(problems: &[Problem]) -> usize {
    problems
        .iter()
        .map(|p| match p {
            Problem::Limit(LimitProblem::More { count }) => *count,
            _ => 1,
        })
        .sum()
}

/// The problems found so far: the first [`MAX_PROBLEMS_SHOWN`] kept, the rest counted.
#[derive(Debug, Default)]
struct Problems {
    shown: Vec<Problem>,
    more: usize,
}

impl Problems {
    fn push(&mut self, p: impl Into<Problem>) {
        let p = p.into();
        if self.shown.len() < MAX_PROBLEMS_SHOWN {
            self.shown.push(p);
        } else {
            self.more += 1;
        }
    }

    /// Whether the next problem will be shown (worth building in detail).
    fn shows_next(&self) -> bool {
        self.shown.len() < MAX_PROBLEMS_SHOWN
    }

    fn is_empty(&self) -> bool {
        self.shown.is_empty() && self.more == 0
    }

    fn into_vec(mut self) -> Vec<Problem> {
        if self.more > 0 {
            self.shown
                .push(LimitProblem::More { count: self.more }.into());
        }
        self.shown
    }
}

/// One row of a samples file: a run's epoch and the run's resources.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRow<'a> {
    pub variant: &'a str,
    pub replicate: u32,
    pub epoch: u32,
    pub seconds: f64,
    pub block: Option<u32>,
    pub cpu_s: Option<f64>,
    pub max_rss_kib: Option<u64>,
    pub energy_j: Option<f64>,
}

impl SampleRow<'_> {
    /// The field of `column` (one of [`COLUMNS`]), empty where not measured.
    fn field(&self, column: &str) -> String {
        let text = |v: Option<String>| v.unwrap_or_default();
        match column {
            "variant" => csv_field(self.variant),
            "replicate" => self.replicate.to_string(),
            "epoch" => self.epoch.to_string(),
            "seconds" => self.seconds.to_string(),
            "block" => text(self.block.map(|b| b.to_string())),
            "cpu_s" => text(self.cpu_s.map(|c| c.to_string())),
            "max_rss_kib" => text(self.max_rss_kib.map(|r| r.to_string())),
            "energy_j" => text(self.energy_j.map(|e| e.to_string())),
            _ => String::new(),
        }
    }
}

/// A field quoted where [`split_fields`] would otherwise split or trim it.
fn csv_field(value: &str) -> String {
    if value.contains([',', '"']) || value.trim() != value {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value.to_string()
    }
}

/// The samples file of `rows`: a header of [`COLUMNS`], then one line per row with its
/// fields in that order — the order [`parse_samples`] reads them by.
pub fn write_samples<'a>(rows: impl IntoIterator<Item = SampleRow<'a>>) -> String {
    let mut s = COLUMNS.join(",");
    s.push('\n');
    for row in rows {
        let fields: Vec<String> = COLUMNS.iter().map(|c| row.field(c)).collect();
        s.push_str(&fields.join(","));
        s.push('\n');
    }
    s
}

/// Reads the samples file at `path`: a regular file (not a directory, device or pipe) of at
/// most [`MAX_FILE_BYTES`], as UTF-8 text ([`optgate_experiment::read::read_regular_text`]:
/// the size is checked before reading, and the read itself is bounded).
pub fn read_samples_file(path: &Path) -> Result<String, SamplesError> {
    use optgate_experiment::read::{ReadError, read_regular_text};
    read_regular_text(path, MAX_FILE_BYTES).map_err(|e| SamplesError::Read {
        path: path.display().to_string(),
        reason: match e {
            ReadError::TooLarge { .. } => format!(
                "it is larger than {} MiB, the limit of a samples file",
                MAX_FILE_BYTES / (1024 * 1024)
            ),
            other => other.to_string(),
        },
    })
}

/// Rows of one run, as read.
#[derive(Debug, Clone, Default)]
struct RunRows {
    epochs: BTreeMap<u32, (f64, usize)>,
    blocks: BTreeMap<Option<u32>, Vec<usize>>,
    lines: Vec<usize>,
    /// The run's resources, from its first row (optgate repeats them on every row).
    cpu_s: Option<f64>,
    energy_j: Option<f64>,
}

/// A parsed and validated samples file.
#[derive(Debug, Clone, PartialEq)]
pub struct Samples {
    pub baseline: ArmData,
    /// In the order of their first row.
    pub variants: Vec<ArmData>,
    /// What the arms' `system_metric` holds: energy when every run has `energy_j`, else
    /// core-seconds when every run has `cpu_s`, else nothing (no System Impact).
    pub system_resource: Option<crate::model::SystemResource>,
    /// Whether the file has a block column.
    pub has_blocks: bool,
}

/// Splits one line into fields: commas separate, double quotes may enclose a field and
/// `""` inside quotes is a quote. Whitespace around unquoted fields is trimmed.
fn split_fields(line: &str) -> Option<Vec<String>> {
    // Fast path: machine-written files rarely quote anything.
    if !line.contains('"') {
        return Some(line.split(',').map(|f| f.trim().to_string()).collect());
    }
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut in_quotes = false;
    let mut quoted = false;
    while let Some(c) = chars.next() {
        if in_quotes {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    cur.push('"');
                    chars.next();
                } else {
                    in_quotes = false;
                }
            } else {
                cur.push(c);
            }
        } else if c == '"' && cur.trim().is_empty() {
            in_quotes = true;
            quoted = true;
            cur.clear();
        } else if c == ',' {
            fields.push(if quoted {
                std::mem::take(&mut cur)
            } else {
                cur.trim().to_string()
            });
            cur.clear();
            quoted = false;
        } else if !(quoted && c.is_whitespace()) {
            cur.push(c);
        }
    }
    if in_quotes {
        return None;
    }
    fields.push(if quoted { cur } else { cur.trim().to_string() });
    Some(fields)
}

/// Parses and validates a samples file. `baseline` names the baseline arm; `design`
/// decides whether runs must pair up across arms.
pub fn parse_samples(
    text: &str,
    origin: &str,
    baseline: &str,
    design: Design,
) -> Result<Samples, SamplesError> {
    let invalid = |problems: Problems| SamplesError::Invalid {
        origin: origin.to_string(),
        problems: problems.into_vec(),
    };
    let one = |p: Problem| {
        let mut ps = Problems::default();
        ps.push(p);
        invalid(ps)
    };
    let mut problems = Problems::default();
    // Line numbers are 1-based file lines; blank lines and '#' comments are skipped.
    let mut lines = text
        .trim_start_matches('\u{feff}')
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'));

    let Some((header_line, header)) = lines.next() else {
        return Err(one(HeaderProblem::Empty.into()));
    };
    let Some(names) = split_fields(header) else {
        return Err(one(
            RowProblem::UnterminatedQuote { line: header_line }.into()
        ));
    };
    let col = column_map(&names, &mut problems);
    if !problems.is_empty() {
        return Err(invalid(problems));
    }
    let has_blocks = col.contains_key("block");
    let header = Header {
        fields: names.len(),
        col,
        has_blocks,
    };
    let mut arms = ArmRows::default();
    let mut any_row = false;
    for (rows, (line, raw)) in lines.enumerate() {
        any_row = true;
        if rows >= MAX_ROWS {
            problems.push(LimitProblem::TooManyRows { line });
            return Err(invalid(problems));
        }
        if let Some(row) = header.row(line, raw, &mut problems) {
            arms.add(row, line, &mut problems);
        }
    }
    if !any_row {
        return Err(one(FileProblem::NoData.into()));
    }
    arms.check_baseline(baseline, &mut problems);
    arms.check_runs(&mut problems);
    let every_run_has_block = has_blocks && arms.runs().all(|r| run_block(r).is_some());
    if design == Design::Paired && problems.is_empty() {
        arms.check_pairing(every_run_has_block, &mut problems);
    }
    if !problems.is_empty() {
        return Err(invalid(problems));
    }
    Ok(arms.into_samples(baseline, every_run_has_block, has_blocks))
}

/// Each known column's position in the header; unknown, duplicate and missing columns
/// are problems.
fn column_map(names: &[String], problems: &mut Problems) -> BTreeMap<&'static str, usize> {
    let mut col: BTreeMap<&'static str, usize> = BTreeMap::new();
    for (i, name) in names.iter().enumerate() {
        let lower = name.to_ascii_lowercase();
        match COLUMNS.iter().find(|c| **c == lower) {
            Some(c) => {
                if col.insert(c, i).is_some() {
                    problems.push(HeaderProblem::DuplicateColumn {
                        column: name.clone(),
                    });
                }
            }
            None => problems.push(HeaderProblem::UnknownColumn {
                column: name.clone(),
            }),
        }
    }
    for c in REQUIRED {
        if !col.contains_key(c) {
            problems.push(HeaderProblem::MissingColumn { column: c });
        }
    }
    col
}

/// What the header says about every row: how many fields, which is which.
struct Header {
    fields: usize,
    col: BTreeMap<&'static str, usize>,
    has_blocks: bool,
}

/// One valid data row.
struct Row {
    variant: String,
    replicate: u32,
    epoch: u32,
    block: Option<u32>,
    seconds: f64,
    cpu_s: Option<f64>,
    energy_j: Option<f64>,
}

impl Header {
    /// The row on `line`, or None with its problems pushed.
    fn row(&self, line: usize, raw: &str, problems: &mut Problems) -> Option<Row> {
        let Some(fields) = split_fields(raw) else {
            problems.push(RowProblem::UnterminatedQuote { line });
            return None;
        };
        if let Some(long) = fields.iter().find(|f| f.len() > MAX_FIELD_BYTES) {
            let mut end = QUOTE_PREFIX;
            while !long.is_char_boundary(end) {
                end -= 1;
            }
            problems.push(LimitProblem::LongField {
                line,
                bytes: long.len(),
                prefix: long[..end].escape_debug().to_string(),
            });
            return None;
        }
        if fields.len() != self.fields {
            problems.push(RowProblem::FieldCount {
                line,
                expected: self.fields,
                found: fields.len(),
            });
            return None;
        }
        self.values(line, &fields, problems)
    }

    /// The typed values of a row of the right shape, or None with its problems pushed.
    fn values(&self, line: usize, fields: &[String], problems: &mut Problems) -> Option<Row> {
        let col = &self.col;
        let variant = fields[col["variant"]].clone();
        if variant.is_empty() {
            problems.push(RowProblem::EmptyVariant { line });
        }
        let int = |column: &'static str, min: u32, problems: &mut Problems| {
            let value = &fields[col[column]];
            match value.parse::<u32>() {
                Ok(v) if v >= min => Some(v),
                _ => {
                    problems.push(RowProblem::BadInteger {
                        line,
                        column,
                        value: value.clone(),
                    });
                    None
                }
            }
        };
        let replicate = int("replicate", 0, problems);
        let epoch = int("epoch", 1, problems);
        let block = if self.has_blocks && !fields[col["block"]].is_empty() {
            int("block", 0, problems).map(Some)
        } else {
            Some(None)
        };
        let seconds_text = &fields[col["seconds"]];
        let seconds = match seconds_text.parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Some(v),
            _ => {
                problems.push(RowProblem::BadSeconds {
                    line,
                    value: seconds_text.clone(),
                });
                None
            }
        };
        let cpu_s = self.resource(line, fields, "cpu_s", problems);
        let energy_j = self.resource(line, fields, "energy_j", problems);
        if variant.is_empty() {
            return None;
        }
        Some(Row {
            variant,
            replicate: replicate?,
            epoch: epoch?,
            block: block?,
            seconds: seconds?,
            cpu_s: cpu_s?,
            energy_j: energy_j?,
        })
    }

    /// A per-run resource column: optional, empty when not measured; None when bad.
    fn resource(
        &self,
        line: usize,
        fields: &[String],
        column: &'static str,
        problems: &mut Problems,
    ) -> Option<Option<f64>> {
        let Some(text) = self.col.get(column).map(|&i| &fields[i]) else {
            return Some(None);
        };
        if text.is_empty() {
            return Some(None);
        }
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Some(Some(v)),
            _ => {
                problems.push(RowProblem::BadResource {
                    line,
                    column,
                    value: text.clone(),
                });
                None
            }
        }
    }
}

/// The block a run is in: None when it has none or more than one.
fn run_block(run: &RunRows) -> Option<u32> {
    if run.blocks.len() == 1 {
        *run.blocks.keys().next()?
    } else {
        None
    }
}

/// The rows read so far: variant → replicate → rows, variants in order of first row.
#[derive(Default)]
struct ArmRows {
    order: Vec<String>,
    arms: BTreeMap<String, BTreeMap<u32, RunRows>>,
    too_many_arms: bool,
    too_many_replicates: BTreeSet<String>,
}

impl ArmRows {
    fn runs(&self) -> impl Iterator<Item = &RunRows> {
        self.arms.values().flat_map(|r| r.values())
    }

    /// Adds the row on `line` to its run, unless it is past a limit or a duplicate.
    fn add(&mut self, row: Row, line: usize, problems: &mut Problems) {
        let variant = row.variant;
        if !self.arms.contains_key(&variant) {
            if self.arms.len() >= MAX_ARMS {
                if !self.too_many_arms {
                    self.too_many_arms = true;
                    problems.push(LimitProblem::TooManyArms { line });
                }
                return;
            }
            self.order.push(variant.clone());
            self.arms.insert(variant.clone(), BTreeMap::new());
        }
        let Some(runs) = self.arms.get_mut(&variant) else {
            return;
        };
        if !runs.contains_key(&row.replicate) && runs.len() >= MAX_REPLICATES {
            if self.too_many_replicates.insert(variant.clone()) {
                problems.push(LimitProblem::TooManyReplicates { line, variant });
            }
            return;
        }
        let run = runs.entry(row.replicate).or_default();
        if run.lines.is_empty() {
            run.cpu_s = row.cpu_s;
            run.energy_j = row.energy_j;
        }
        if let Some(&(_, first_line)) = run.epochs.get(&row.epoch) {
            problems.push(RowProblem::Duplicate {
                line,
                first_line,
                variant,
                replicate: row.replicate,
                epoch: row.epoch,
            });
            return;
        }
        run.epochs.insert(row.epoch, (row.seconds, line));
        run.blocks.entry(row.block).or_default().push(line);
        run.lines.push(line);
    }

    /// The baseline is among the arms, and is not the only one.
    fn check_baseline(&self, baseline: &str, problems: &mut Problems) {
        if !self.arms.is_empty() && !self.arms.contains_key(baseline) {
            problems.push(FileProblem::UnknownBaseline {
                baseline: baseline.to_string(),
                known: self.order.clone(),
            });
        } else if self.order.len() == 1 {
            problems.push(FileProblem::NoVariants {
                baseline: baseline.to_string(),
            });
        }
    }

    /// Per arm: enough replicates, complete epochs, one block per run.
    fn check_runs(&self, problems: &mut Problems) {
        let all_epochs: BTreeSet<u32> =
            self.runs().flat_map(|r| r.epochs.keys().copied()).collect();
        for name in &self.order {
            let runs = &self.arms[name];
            if runs.len() < 2 {
                problems.push(RunsProblem::TooFewReplicates {
                    variant: name.clone(),
                    replicates: runs.len(),
                    lines: runs
                        .values()
                        .flat_map(|r| r.lines.iter().copied())
                        .collect(),
                });
            }
            for (&replicate, run) in runs {
                check_run(name, replicate, run, &all_epochs, problems);
            }
        }
    }

    /// Paired design: every block (or replicate number) in every arm, once per arm.
    fn check_pairing(&self, every_run_has_block: bool, problems: &mut Problems) {
        let mut keys: BTreeMap<u32, BTreeMap<&str, Vec<usize>>> = BTreeMap::new();
        for name in &self.order {
            let mut seen: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
            for (&replicate, run) in &self.arms[name] {
                let key = if every_run_has_block {
                    run_block(run).unwrap_or(replicate)
                } else {
                    replicate
                };
                seen.entry(key)
                    .or_default()
                    .extend(run.lines.iter().copied());
                keys.entry(key)
                    .or_default()
                    .entry(name.as_str())
                    .or_default()
                    .extend(run.lines.iter().copied());
            }
            if every_run_has_block {
                self.check_shared_blocks(name, seen, problems);
            }
        }
        if problems.is_empty() {
            let kind = if every_run_has_block {
                "block"
            } else {
                "replicate"
            };
            self.check_unpaired(kind, &keys, problems);
        }
    }

    /// No two runs of arm `name` in one block (`seen`: block → the lines of its runs). The
    /// runs per block are counted once (not once per block: 1000 runs would be 10⁶ looks).
    fn check_shared_blocks(
        &self,
        name: &str,
        seen: BTreeMap<u32, Vec<usize>>,
        problems: &mut Problems,
    ) {
        let mut runs_in_block: BTreeMap<u32, usize> = BTreeMap::new();
        for block in self.arms[name].values().filter_map(run_block) {
            *runs_in_block.entry(block).or_default() += 1;
        }
        for (block, lines) in seen {
            if runs_in_block.get(&block).is_some_and(|&runs| runs > 1) {
                problems.push(RunsProblem::SharedBlock {
                    variant: name.to_string(),
                    block,
                    lines,
                });
            }
        }
    }

    /// Every `kind` key (block or replicate) of `keys` present in every arm.
    fn check_unpaired(
        &self,
        kind: &str,
        keys: &BTreeMap<u32, BTreeMap<&str, Vec<usize>>>,
        problems: &mut Problems,
    ) {
        for (key, present) in keys {
            if present.len() == self.order.len() {
                continue;
            }
            let missing_in: Vec<String> = self
                .order
                .iter()
                .filter(|n| !present.contains_key(n.as_str()))
                .cloned()
                .collect();
            problems.push(RunsProblem::Unpaired {
                key: format!("{kind} {key}"),
                present_in: present.keys().map(|s| s.to_string()).collect(),
                missing_in,
                lines: present.values().flatten().copied().collect(),
            });
        }
    }

    /// The validated rows as [`Samples`], with System Impact's resource: energy where
    /// every run has it, else core-seconds.
    fn into_samples(self, baseline: &str, every_run_has_block: bool, has_blocks: bool) -> Samples {
        let every_run = |has: &dyn Fn(&RunRows) -> bool| self.runs().all(has);
        let system_resource = if every_run(&|r| r.energy_j.is_some_and(|e| e > 0.0)) {
            Some(crate::model::SystemResource::Energy)
        } else if every_run(&|r| r.cpu_s.is_some_and(|c| c > 0.0)) {
            Some(crate::model::SystemResource::CoreSeconds)
        } else {
            None
        };
        let system_value = |run: &RunRows| match system_resource {
            Some(crate::model::SystemResource::Energy) => run.energy_j,
            Some(crate::model::SystemResource::CoreSeconds) => run.cpu_s,
            _ => None,
        };
        let to_arm = |name: &str| -> ArmData {
            let runs = self.arms[name]
                .iter()
                .map(|(&replicate, run)| RunSamples {
                    replicate,
                    block: if every_run_has_block {
                        run_block(run)
                    } else {
                        None
                    },
                    epochs: run.epochs.iter().map(|(&e, &(s, _))| (e, s)).collect(),
                })
                .collect();
            ArmData {
                name: name.to_string(),
                runs,
                // One value per run, in the runs' order, or none.
                system_metric: self.arms[name]
                    .values()
                    .map(system_value)
                    .collect::<Option<Vec<f64>>>()
                    .unwrap_or_default(),
                ..ArmData::default()
            }
        };
        Samples {
            system_resource,
            baseline: to_arm(baseline),
            variants: self
                .order
                .iter()
                .filter(|n| n.as_str() != baseline)
                .map(|n| to_arm(n))
                .collect(),
            has_blocks,
        }
    }
}

/// One run's epochs are all of the file's epochs, and it sits in one block.
fn check_run(
    name: &str,
    replicate: u32,
    run: &RunRows,
    all_epochs: &BTreeSet<u32>,
    problems: &mut Problems,
) {
    // A run's epochs are among all epochs: the count is a subtraction, and the epochs
    // themselves are looked up only for a problem that is shown.
    let missing_count = all_epochs.len() - run.epochs.len();
    if missing_count > 0 {
        if problems.shows_next() {
            let missing: Vec<u32> = all_epochs
                .iter()
                .copied()
                .filter(|e| !run.epochs.contains_key(e))
                .take(MAX_LISTED)
                .collect();
            problems.push(RunsProblem::MissingEpochs {
                variant: name.to_string(),
                replicate,
                missing,
                missing_count,
                lines: run.lines.clone(),
            });
        } else {
            problems.more += 1;
        }
    }
    if run.blocks.len() > 1 {
        problems.push(RunsProblem::InconsistentBlock {
            variant: name.to_string(),
            replicate,
            lines: run.lines.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_quotes() {
        assert_eq!(
            split_fields(r#" a , "b,c" ,"d""e",f"#).unwrap(),
            vec!["a", "b,c", "d\"e", "f"]
        );
        assert!(split_fields(r#"a,"b"#).is_none());
    }

    #[test]
    fn line_ranges() {
        assert_eq!(lines_text(&[9, 4, 5, 6]), "lines 4–6, 9");
        assert_eq!(lines_text(&[3]), "line 3");
    }

    #[test]
    fn written_samples_read_back_as_the_same_rows() {
        let row = |variant, replicate, epoch, seconds, block, energy_j| SampleRow {
            variant,
            replicate,
            epoch,
            seconds,
            block,
            cpu_s: Some(1.25 * f64::from(replicate + 1)),
            max_rss_kib: Some(2048),
            energy_j,
        };
        let mut rows = Vec::new();
        for (variant, scale) in [("base", 1.0), ("v,\"odd\"", 0.5)] {
            for replicate in 0..3 {
                for epoch in 1..=2 {
                    let seconds = scale * f64::from(epoch) + 0.1 * f64::from(replicate);
                    let energy = Some(10.0 + f64::from(replicate));
                    rows.push(row(
                        variant,
                        replicate,
                        epoch,
                        seconds,
                        Some(replicate + 7),
                        energy,
                    ));
                }
            }
        }
        let text = write_samples(rows.clone());
        assert!(text.starts_with(&COLUMNS.join(",")), "{text}");
        let samples = parse_samples(&text, "t", "base", Design::Paired).unwrap();
        assert!(samples.has_blocks);
        assert_eq!(
            samples.system_resource,
            Some(crate::model::SystemResource::Energy)
        );
        // Every row comes back: variant, replicate, block, epoch, seconds, energy.
        let mut read = Vec::new();
        for arm in std::iter::once(&samples.baseline).chain(&samples.variants) {
            for (run, energy) in arm.runs.iter().zip(&arm.system_metric) {
                for (&epoch, &seconds) in &run.epochs {
                    read.push(SampleRow {
                        variant: rows.iter().find(|r| r.variant == arm.name).unwrap().variant,
                        replicate: run.replicate,
                        epoch,
                        seconds,
                        block: run.block,
                        cpu_s: Some(1.25 * f64::from(run.replicate + 1)),
                        max_rss_kib: Some(2048),
                        energy_j: Some(*energy),
                    });
                }
            }
        }
        assert_eq!(read, rows);
    }
}
