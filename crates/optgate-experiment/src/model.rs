//! The experiment file as typed data: what a user writes, with serde's unknown-key
//! rejection on every struct so that a typo is an error and never silently ignored.
//! Field documentation here is the reference for `docs/EXPERIMENT.md`.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// The whole experiment file.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExperimentFile {
    /// Safe-alphabet name; used in directory and job names.
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// Where runs happen; relative paths are taken from the experiment file's folder.
    #[serde(default)]
    pub workdir: Option<String>,
    /// Run once per distinct build before any run (on the login node).
    #[serde(default)]
    pub build: Option<BuildSpec>,
    pub app: AppSpec,
    /// The one metric of each run; exactly one of `metric` and `metrics` is given.
    #[serde(default)]
    pub metric: Option<MetricSpec>,
    /// Several metrics of each run: the primary (the one marked `primary: true`, else the
    /// first) is gated, the others are guardrails.
    #[serde(default)]
    pub metrics: Vec<NamedMetricSpec>,
    #[serde(default)]
    pub system_metric: Option<SystemMetricSpec>,
    #[serde(default)]
    pub correctness: Option<CorrectnessSpec>,
    #[serde(default)]
    pub scheduler: SchedulerSpec,
    #[serde(default)]
    pub design: Design,
    /// Blocks (runs per arm) at the first look. Not given: the smallest number whose exact
    /// test can reach α after Holm over the variants, at least 5 (set by the loader).
    #[serde(default = "default_replicates")]
    pub replicates: u32,
    /// Allows `replicates` below 5, or too few to reach α after Holm (a warning instead of
    /// an error); the report then says the result cannot be decided.
    #[serde(default)]
    pub allow_few_replicates: bool,
    /// Budget for adding replicates while the answer is inconclusive (daemon).
    #[serde(default)]
    pub max_replicates: Option<u32>,
    #[serde(default = "default_seed")]
    pub seed: u64,
    #[serde(default)]
    pub compare: CompareSpec,
    /// Adds an arm identical to the baseline whose "speed-up" is the noise floor.
    #[serde(default)]
    pub aa_control: bool,
    #[serde(default)]
    pub preflight: PreflightSpec,
    /// How replicates are kept from helping each other: compile caches (`cold`: one per
    /// run, the default; `warm`: one per arm, warmed by an untimed run first).
    #[serde(default)]
    pub caches: Option<CacheMode>,
    /// The page cache of the `inputs` before each run: `leave` (default), `cold`, `warm`,
    /// `drop`.
    #[serde(default)]
    pub page_cache: Option<PageCacheMode>,
    /// Input files (or folders) whose page cache `page_cache` manages, relative to the
    /// working directory.
    #[serde(default)]
    pub inputs: Vec<String>,
    #[serde(default)]
    pub baseline: ArmSpec,
    /// Absent in a baseline-only file (`optgate propose` reads one); `validate` and `run`
    /// still need at least one.
    #[serde(default)]
    pub variants: Vec<VariantSpec>,
    /// A verdict for every checklist dimension not covered by a variant.
    #[serde(default)]
    pub checklist: BTreeMap<String, ChecklistEntry>,
    /// Re-check the experiment at an interval through the daemon (`optgate submit`), and
    /// run a command when a decision flips.
    #[serde(default)]
    pub recheck: Option<RecheckSpec>,
}

/// `recheck:`: the daemon submits the experiment again every `every` (`optgate submit`
/// only; `--every` on the command line overrides it), each execution a new experiment of
/// the same name, and runs `notify` when a decision flips.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RecheckSpec {
    /// The interval: a whole number and one unit, `s`, `m`, `h` or `d` (`7d`, `12h`).
    pub every: String,
    /// An argument vector (no shell), run when an execution ends whose decision flipped
    /// against the previous execution, given the summary as JSON on stdin.
    #[serde(default)]
    pub notify: Option<Vec<String>>,
}

pub const MIN_REPLICATES: u32 = 5;

fn default_replicates() -> u32 {
    MIN_REPLICATES
}

fn default_seed() -> u64 {
    1
}

/// A command is either shell code written by the experiment's author (run by `bash -c`
/// semantics, inside the generated script) or an argument vector whose every element is
/// quoted when rendered.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum CommandSpec {
    Shell(String),
    Argv(Vec<String>),
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BuildSpec {
    pub command: CommandSpec,
    #[serde(default)]
    pub env: EnvMap,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AppSpec {
    pub command: CommandSpec,
    /// Arguments appended to the command, each quoted.
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: EnvMap,
    /// Wall-clock limit of one run, e.g. `10m`; the run is killed and marked failed after it.
    #[serde(default)]
    pub time_limit: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum MetricSource {
    #[default]
    Stdout,
    File,
    Dftracer,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    #[default]
    Lower,
    Higher,
}

/// How one run yields one value per epoch (a pattern with groups `epoch` and `seconds`,
/// or traces) or one value per run (a figure of merit: a pattern with a group `value`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct MetricSpec {
    #[serde(default)]
    pub source: MetricSource,
    /// Regex with named groups `epoch` and `seconds`, or with a group `value` (one value
    /// per run, its last match) (stdout and file sources).
    #[serde(default)]
    pub pattern: Option<String>,
    /// Run-relative file the pattern is applied to (`source: file`).
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub better: Better,
    /// Run-relative directory holding `.pfw`/`.pfw.gz` traces (`source: dftracer`).
    #[serde(default)]
    pub dir: Option<String>,
    /// Trace category to sum (e.g. `compute`); all categories when absent.
    #[serde(default)]
    pub category: Option<String>,
    /// Event name whose intervals delimit epochs, when events carry no `args.epoch`.
    #[serde(default)]
    pub epoch_marker: Option<String>,
    /// The values' unit, shown in the report (`GB/s`); seconds for epoch times.
    #[serde(default)]
    pub unit: Option<String>,
    /// The `seconds` group is a running clock (OpenFOAM's `ExecutionTime`, LAMMPS's `CPU`
    /// column): each epoch's time is its advance since the previous epoch's reading.
    #[serde(default)]
    pub cumulative: bool,
}

impl MetricSpec {
    /// Whether this metric is one value per run: a pattern with a group `value` (and
    /// none named `epoch`). Validation holds every pattern to one of the two shapes.
    pub fn is_per_run(&self) -> bool {
        self.pattern.as_deref().is_some_and(|p| {
            regex::Regex::new(p).is_ok_and(|re| {
                let names: Vec<&str> = re.capture_names().flatten().collect();
                names.contains(&"value") && !names.contains(&"epoch")
            })
        })
    }
}

/// One entry of `metrics:`: a metric as `metric:` declares it, with its name, whether it
/// is the primary, and (guardrails) the regression it tolerates.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NamedMetricSpec {
    /// Safe-alphabet name, unique in the list; the report names the guardrail by it.
    pub name: String,
    /// The gated metric; without any `primary: true`, the first entry is.
    #[serde(default)]
    pub primary: bool,
    /// A guardrail's tolerated regression in percent of the baseline: a variant whose
    /// change of this metric has its whole interval beyond it is rejected. Absent: the
    /// guardrail is reported only.
    #[serde(default)]
    pub max_regression_pct: Option<f64>,
    #[serde(default)]
    pub source: MetricSource,
    #[serde(default)]
    pub pattern: Option<String>,
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub better: Better,
    #[serde(default)]
    pub unit: Option<String>,
    #[serde(default)]
    pub dir: Option<String>,
    #[serde(default)]
    pub category: Option<String>,
    #[serde(default)]
    pub epoch_marker: Option<String>,
    #[serde(default)]
    pub cumulative: bool,
}

impl NamedMetricSpec {
    /// The metric itself, as `metric:` would declare it.
    pub fn spec(&self) -> MetricSpec {
        MetricSpec {
            source: self.source,
            pattern: self.pattern.clone(),
            file: self.file.clone(),
            better: self.better,
            dir: self.dir.clone(),
            category: self.category.clone(),
            epoch_marker: self.epoch_marker.clone(),
            unit: self.unit.clone(),
            cumulative: self.cumulative,
        }
    }
}

/// An optional throughput/bandwidth/utilisation value per run (System Impact).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SystemMetricSpec {
    #[serde(default)]
    pub source: MetricSource,
    /// Regex with a named group `value`.
    pub pattern: String,
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default = "better_higher")]
    pub better: Better,
}

fn better_higher() -> Better {
    Better::Higher
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct CorrectnessSpec {
    /// Run-relative files that must be byte-identical to the baseline's in the same block.
    #[serde(default)]
    pub files: Vec<String>,
    #[serde(default)]
    pub values: Option<CorrectnessValues>,
    /// The verdict every run of every arm must print (`expect`).
    #[serde(default)]
    pub expect: Option<ExpectSpec>,
}

impl CorrectnessSpec {
    /// Whether it declares any check at all (`correctness: {}` declares none).
    pub fn declares_a_check(&self) -> bool {
        !self.files.is_empty() || self.values.is_some() || self.expect.is_some()
    }
}

/// `correctness.expect`: a word, a list of words (any of them), or a mapping with `words`
/// or `regex` and, optionally, where to look (`pattern`, `source`, `file`).
/// Read by its YAML shape (a string, a list, a mapping), so that a problem inside it is
/// reported at its own place, not as "no variant matched" at `correctness`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(untagged)]
pub enum ExpectSpec {
    Words(OneOrMore),
    Full(ExpectMap),
}

/// One word or a list of them.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(untagged)]
pub enum OneOrMore {
    One(String),
    More(Vec<String>),
}

/// Deserialises `T` by the shape of the YAML value: a string or a list become words
/// (`words`), a mapping goes to `map` (None: a mapping is not allowed here).
struct ByShape<T> {
    expecting: &'static str,
    words: fn(OneOrMore) -> T,
    map: Option<fn(ExpectMap) -> T>,
}

impl<'de, T> serde::de::Visitor<'de> for ByShape<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.expecting)
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<T, E> {
        Ok((self.words)(OneOrMore::One(s.to_string())))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        let words = Vec::<String>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
        Ok((self.words)(OneOrMore::More(words)))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        let Some(to) = self.map else {
            return Err(serde::de::Error::invalid_type(
                serde::de::Unexpected::Map,
                &self,
            ));
        };
        Ok(to(ExpectMap::deserialize(
            serde::de::value::MapAccessDeserializer::new(map),
        )?))
    }
}

impl<'de> Deserialize<'de> for ExpectSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ByShape {
            expecting: "a word, a list of words, or a mapping with `words` or `regex`",
            words: ExpectSpec::Words,
            map: Some(ExpectSpec::Full),
        })
    }
}

impl<'de> Deserialize<'de> for OneOrMore {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ByShape {
            expecting: "a word or a list of words",
            words: |w| w,
            map: None,
        })
    }
}

impl OneOrMore {
    pub fn as_slice(&self) -> &[String] {
        match self {
            OneOrMore::One(w) => std::slice::from_ref(w),
            OneOrMore::More(ws) => ws,
        }
    }
}

/// The mapping form of `correctness.expect`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExpectMap {
    #[serde(default)]
    pub words: Option<OneOrMore>,
    /// A regex a verdict must match (unanchored: anchor it with `^…$` for the whole value).
    #[serde(default)]
    pub regex: Option<String>,
    /// Regex with a named group `value`: the verdicts are its captures.
    #[serde(default)]
    pub pattern: Option<String>,
    #[serde(default)]
    pub source: Option<MetricSource>,
    #[serde(default)]
    pub file: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CorrectnessValues {
    /// Regex with a named group `value`; every match is compared in order.
    pub pattern: String,
    #[serde(default)]
    pub source: MetricSource,
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub rel_tol: Option<f64>,
    #[serde(default)]
    pub abs_tol: Option<f64>,
}

/// Which scheduler runs an experiment's jobs. Its names (`as_str`) are those of the
/// experiment file's `scheduler.kind` and of the daemon's database (`experiments.scheduler`,
/// held to them by a CHECK constraint): renaming one needs a database migration.
#[derive(
    Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum SchedulerKind {
    #[default]
    Local,
    Slurm,
    Flux,
}

impl SchedulerKind {
    pub const ALL: [SchedulerKind; 3] = [
        SchedulerKind::Local,
        SchedulerKind::Slurm,
        SchedulerKind::Flux,
    ];

    /// The name in experiment files, the database and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            SchedulerKind::Local => "local",
            SchedulerKind::Slurm => "slurm",
            SchedulerKind::Flux => "flux",
        }
    }

    /// The kind named `name` exactly (`local`, `slurm`, `flux`); `None` for any other text.
    pub fn parse(name: &str) -> Option<SchedulerKind> {
        SchedulerKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for SchedulerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The allocation every arm shares, and the default launcher resources.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct SchedulerSpec {
    #[serde(default)]
    pub kind: SchedulerKind,
    #[serde(default)]
    pub nodes: Option<u32>,
    #[serde(default)]
    pub tasks_per_node: Option<u32>,
    #[serde(default)]
    pub cpus_per_task: Option<u32>,
    #[serde(default)]
    pub gpus_per_task: Option<u32>,
    /// Allocation time limit (`30m`, `2h`); derived from the plan when absent.
    #[serde(default)]
    pub time_limit: Option<String>,
    /// Slurm partition or Flux queue.
    #[serde(default, alias = "partition")]
    pub queue: Option<String>,
    /// Slurm account or Flux bank.
    #[serde(default, alias = "bank")]
    pub account: Option<String>,
    /// Whole nodes for each job. Unset: yes for the blocked design (so no two blocks —
    /// nor anyone else's jobs — share a node while they are timed), no for the
    /// independent design. `false` lets blocks run side by side; the plan says so and the
    /// report flags runs that overlapped.
    #[serde(default)]
    pub exclusive: Option<bool>,
    /// Extra directive lines' arguments, e.g. `--constraint=cpu` (quoted as one word each).
    #[serde(default)]
    pub extra_directives: Vec<String>,
    /// How many times a job lost to the system (node failure, pre-emption) is resubmitted.
    #[serde(default = "default_resubmits")]
    pub max_resubmits: u32,
}

fn default_resubmits() -> u32 {
    2
}

/// Per-arm launcher resources; anything unset falls back to `scheduler`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct LauncherSpec {
    #[serde(default)]
    pub nodes: Option<u32>,
    #[serde(default)]
    pub tasks_per_node: Option<u32>,
    #[serde(default)]
    pub cpus_per_task: Option<u32>,
    #[serde(default)]
    pub gpus_per_task: Option<u32>,
    /// Extra launcher arguments, e.g. `--cpu-bind=cores` (each quoted).
    #[serde(default)]
    pub extra_args: Vec<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Design {
    #[default]
    Blocked,
    Independent,
}

impl Design {
    /// The statistics' design: blocked runs are compared as pairs within their block.
    pub fn stats(self) -> optgate_stats::Design {
        match self {
            Design::Blocked => optgate_stats::Design::Paired,
            Design::Independent => optgate_stats::Design::Independent,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CompareSpec {
    /// Matched window, e.g. `2..` (default: every epoch but the first), `2..5`, `3`.
    #[serde(default)]
    pub steady_epochs: Option<String>,
    /// Epochs of the production job, to amortise one-time costs.
    #[serde(default)]
    pub production_epochs: Option<u32>,
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// Smallest speed-up worth having, in percent.
    #[serde(default = "default_min_effect")]
    pub min_effect_pct: f64,
    /// The daemon's rule for adding blocks (docs/STATISTICS.md §13, §13a).
    #[serde(default)]
    pub sequential: SequentialRule,
}

/// How the daemon looks again while some variant is inconclusive.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum SequentialRule {
    /// O'Brien–Fleming spending, a look after every block, every arm in every block.
    ObrienFleming,
    /// The staged rule (the default): looks only where the exact test can decide,
    /// futility, a stop when the budget cannot decide, and per-variant stopping (decided
    /// variants leave the later blocks). `benches/decision-cost`: at fixed n = 20's power
    /// it spends 0.56× its node-hours, O'Brien–Fleming 0.64×.
    #[default]
    Staged,
}

impl Default for CompareSpec {
    fn default() -> Self {
        CompareSpec {
            steady_epochs: None,
            production_epochs: None,
            alpha: default_alpha(),
            min_effect_pct: default_min_effect(),
            sequential: SequentialRule::default(),
        }
    }
}

fn default_alpha() -> f64 {
    0.05
}

fn default_min_effect() -> f64 {
    1.0
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct PreflightSpec {
    /// Turns over-subscription from an error into a warning.
    #[serde(default)]
    pub allow_oversubscription: bool,
    /// Privileged helper that sets the governor, e.g. `[sudo, -n, cpupower, frequency-set, -g]`
    /// (the governor name is appended).
    #[serde(default)]
    pub governor_helper: Option<Vec<String>>,
}

/// What the baseline changes relative to `app` (usually nothing).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct ArmSpec {
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub env: EnvMap,
    #[serde(default)]
    pub unset: Vec<String>,
    #[serde(default)]
    pub launcher: LauncherSpec,
    #[serde(default)]
    pub args: Vec<String>,
    /// CPU governor for the baseline's runs (a campaign's stage baseline carries an
    /// earlier winner's); variants keep it unless they set their own.
    #[serde(default)]
    pub governor: Option<String>,
    /// Capability flags the node must have for every arm (a campaign's stage baseline
    /// carries an earlier winner's); variants add theirs.
    #[serde(default)]
    pub requires: Vec<String>,
    /// This arm's compile caches; the experiment's `caches` when absent.
    #[serde(default)]
    pub caches: Option<CacheMode>,
    /// This arm's page-cache handling; the experiment's `page_cache` when absent.
    #[serde(default)]
    pub page_cache: Option<PageCacheMode>,
}

/// Where a run's compile caches live and what happens to the page cache of its inputs:
/// the run wrapper's own types (`optgate_wrapper::manifest`), so the file's words, the run
/// spec's and the manifest's are one enum each.
pub use optgate_wrapper::manifest::{CacheMode, PageCacheMode};

/// One proposal to test against the baseline.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// One of the 10 checklist dimensions (see `checklist::DIMENSIONS`).
    #[serde(default)]
    pub dimension: Option<String>,
    #[serde(default)]
    pub env: EnvMap,
    /// Environment variables removed for this arm.
    #[serde(default)]
    pub unset: Vec<String>,
    #[serde(default)]
    pub launcher: LauncherSpec,
    /// Replaces the experiment's build for this arm (e.g. `-O3 -march=native`).
    #[serde(default)]
    pub build: Option<BuildSpec>,
    /// The arm's whole argument list: replaces `app.args` and the baseline's.
    #[serde(default)]
    pub args: Option<Vec<String>>,
    /// CPU governor to set for this arm's runs only (restored afterwards).
    #[serde(default)]
    pub governor: Option<String>,
    /// Capability flags the node must have (as `optgate probe` reports them).
    #[serde(default)]
    pub requires: Vec<String>,
    /// This arm's compile caches; the experiment's `caches` when absent.
    #[serde(default)]
    pub caches: Option<CacheMode>,
    /// This arm's page-cache handling; the experiment's `page_cache` when absent.
    #[serde(default)]
    pub page_cache: Option<PageCacheMode>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    ApplicableNotMeasured,
    NotApplicable,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChecklistEntry {
    pub verdict: Verdict,
    #[serde(default)]
    pub reason: Option<String>,
}

/// Environment variables; YAML scalars of any kind (`6`, `true`, `spread`) become strings,
/// so `OMP_NUM_THREADS: 6` works as a user expects.
pub type EnvMap = BTreeMap<String, EnvValue>;

#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(transparent)]
pub struct EnvValue(pub String);

impl<'de> Deserialize<'de> for EnvValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Scalar {
            S(String),
            I(i64),
            U(u64),
            F(f64),
            B(bool),
        }
        let v = Scalar::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "an environment value must be a string, number or boolean, not a list, map or null",
            )
        })?;
        Ok(EnvValue(match v {
            Scalar::S(s) => s,
            Scalar::I(i) => i.to_string(),
            Scalar::U(u) => u.to_string(),
            Scalar::F(f) => f.to_string(),
            Scalar::B(b) => b.to_string(),
        }))
    }
}

impl EnvValue {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}
