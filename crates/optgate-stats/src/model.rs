//! Input types of the analysis: what was measured per arm, and how to compare it.
//! These are plain data; validation happens in `analyze`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::StatsError;

/// How the runs of the arms relate to each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Design {
    /// Blocked design: block `b` holds one run of every arm; compare within blocks.
    #[default]
    Paired,
    /// Arms ran independently of each other.
    Independent,
}

impl fmt::Display for Design {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Design::Paired => "paired",
            Design::Independent => "independent",
        })
    }
}

impl FromStr for Design {
    type Err = StatsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            // "blocked" is the experiment file's name for the same design.
            "paired" | "blocked" => Ok(Design::Paired),
            "independent" | "unpaired" => Ok(Design::Independent),
            other => Err(StatsError::InvalidConfig(format!(
                "design '{other}': expected 'paired' or 'independent'"
            ))),
        }
    }
}

/// Which direction of the metric is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Times: smaller is better. Analysed as they are.
    #[default]
    Lower,
    /// Rates (samples/s, GB/s): larger is better. Analysed as reciprocals, so that every
    /// internal number is a "time per unit" and a speed-up above 1 is still an improvement.
    Higher,
}

impl fmt::Display for Better {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Better::Lower => "lower",
            Better::Higher => "higher",
        })
    }
}

impl FromStr for Better {
    type Err = StatsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "lower" => Ok(Better::Lower),
            "higher" => Ok(Better::Higher),
            other => Err(StatsError::InvalidConfig(format!(
                "better '{other}': expected 'lower' or 'higher'"
            ))),
        }
    }
}

/// One complete run (replicate) of one arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RunSamples {
    /// Replicate number within the arm; pairs runs when `block` is absent.
    pub replicate: u32,
    /// Block of a blocked (paired) design; pairs runs across arms when present.
    pub block: Option<u32>,
    /// Epoch number (1-based) to its value (seconds for `better: lower`).
    pub epochs: BTreeMap<u32, f64>,
}

/// Everything known about one arm (the baseline or one variant).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ArmData {
    pub name: String,
    /// Complete runs only.
    pub runs: Vec<RunSamples>,
    /// Why this variant could not be tried (no p-values are computed), e.g.
    /// "admin-only: no write access to cpufreq on node1".
    pub not_applicable: Option<String>,
    /// Every planned run of this arm failed (none completed): why, from the runs' exit
    /// status and stderr. A variant with this and no complete run is decided `failed`.
    pub failed: Option<String>,
    /// The first differing output file or value: the variant changed the computation.
    pub correctness_mismatch: Option<String>,
    /// The system metric (core-seconds, energy, or the user's throughput, bandwidth...):
    /// one value per run of `runs`, in the same order; empty = not measured. Values that
    /// do not cover every run are not compared (the analysis warns).
    pub system_metric: Vec<f64>,
    /// Each guardrail metric (`AnalysisConfig::guardrails`, by name): one value per run of
    /// `runs`, in the same order. A guardrail whose values do not cover every run of both
    /// arms gets no estimate (the analysis warns).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub guardrails: BTreeMap<String, Vec<f64>>,
    /// The machine's load per CPU each run of `runs` was measured at (1-minute load
    /// average over online CPUs), in the same order; empty = not known. A replicate drift
    /// that follows it is put down to the load, not to a cache.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub load: Vec<f64>,
}

impl ArmData {
    /// This arm in blocks `1..=last` only: its runs of those blocks with their system
    /// metric and guardrail values, which are one per run and so are kept in step with the
    /// runs (a value list that did not cover every run becomes empty: still not compared). A
    /// variant decided at an early look is analysed against the baseline of its own blocks
    /// this way, its System Impact and guardrails on the same runs as its speed-up.
    pub fn up_to_block(&self, last: u32) -> ArmData {
        self.in_blocks(|b| b <= last)
    }

    /// This arm without the runs of `blocks` (and their system metric and guardrail
    /// values): a decision is checked without the blocks measured under load this way.
    pub fn without_blocks(&self, blocks: &std::collections::BTreeSet<u32>) -> ArmData {
        self.in_blocks(|b| !blocks.contains(&b))
    }

    /// This arm's runs whose block satisfies `keep` (a run with no block is dropped), with
    /// the per-run value lists cut in step.
    pub fn in_blocks(&self, keep_block: impl Fn(u32) -> bool) -> ArmData {
        let kept: Vec<bool> = self
            .runs
            .iter()
            .map(|r| r.block.is_some_and(&keep_block))
            .collect();
        let keep = |values: &Vec<f64>| -> Vec<f64> {
            if values.len() != kept.len() {
                return Vec::new();
            }
            values
                .iter()
                .zip(&kept)
                .filter(|(_, k)| **k)
                .map(|(v, _)| *v)
                .collect()
        };
        ArmData {
            runs: self
                .runs
                .iter()
                .zip(&kept)
                .filter(|(_, k)| **k)
                .map(|(r, _)| r.clone())
                .collect(),
            system_metric: keep(&self.system_metric),
            guardrails: self
                .guardrails
                .iter()
                .map(|(name, values)| (name.clone(), keep(values)))
                .collect(),
            load: keep(&self.load),
            ..self.clone()
        }
    }
}

/// A secondary metric that can only veto: its change is estimated and reported, and a
/// variant that would be accepted is rejected when the change's whole interval is a
/// regression beyond `max_regression_pct` (docs/STATISTICS.md, "Guardrails").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct GuardrailSpec {
    pub name: String,
    pub better: Better,
    /// The values' unit, as the report shows it (`GB/s`).
    pub unit: Option<String>,
    /// The largest regression, in percent of the baseline, that is tolerated; `None`:
    /// reported only, never a veto.
    pub max_regression_pct: Option<f64>,
}

/// A window of epochs, inclusive at both ends: `2..` (2 to last), `2..5`, `3` (only 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EpochWindow {
    pub start: u32,
    /// Inclusive end; `None` = up to the last epoch measured.
    pub end: Option<u32>,
}

impl Default for EpochWindow {
    /// The contract's default steady window: every epoch but the first.
    fn default() -> Self {
        EpochWindow {
            start: 2,
            end: None,
        }
    }
}

impl EpochWindow {
    /// The window of a figure of merit: its one value per run, held as epoch 1.
    pub const PER_RUN: EpochWindow = EpochWindow {
        start: 1,
        end: Some(1),
    };

    /// Whether epoch `e` lies in the window.
    pub fn contains(&self, e: u32) -> bool {
        e >= self.start && self.end.is_none_or(|end| e <= end)
    }
}

impl fmt::Display for EpochWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.end {
            None => write!(f, "{}..", self.start),
            Some(end) if end == self.start => write!(f, "{}", self.start),
            Some(end) => write!(f, "{}..{}", self.start, end),
        }
    }
}

impl FromStr for EpochWindow {
    type Err = StatsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| {
            StatsError::InvalidConfig(format!(
                "steady epochs '{s}': {why} (expected e.g. '2..', '2..5' or '3'; epochs are 1-based)"
            ))
        };
        let parse_epoch = |t: &str| -> Result<u32, StatsError> {
            let e: u32 = t.trim().parse().map_err(|_| bad("not an epoch number"))?;
            if e == 0 {
                return Err(bad("epoch 0 does not exist"));
            }
            Ok(e)
        };
        let s_trim = s.trim();
        let window = match s_trim.split_once("..") {
            None => {
                let e = parse_epoch(s_trim)?;
                EpochWindow {
                    start: e,
                    end: Some(e),
                }
            }
            Some((a, b)) => {
                // Accept Rust's inclusive spelling "2..=5" as well.
                let b = b.strip_prefix('=').unwrap_or(b);
                let start = if a.trim().is_empty() {
                    1
                } else {
                    parse_epoch(a)?
                };
                let end = if b.trim().is_empty() {
                    None
                } else {
                    Some(parse_epoch(b)?)
                };
                EpochWindow { start, end }
            }
        };
        if let Some(end) = window.end
            && end < window.start
        {
            return Err(bad("the end is before the start"));
        }
        Ok(window)
    }
}

impl Serialize for EpochWindow {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for EpochWindow {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// How to compare the arms. Defaults are those of `optgate analyze`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnalysisConfig {
    pub design: Design,
    /// One-sided level of each test; confidence intervals are at `1 − 2α`.
    pub alpha: f64,
    /// Smallest steady-state speed-up worth having, in percent.
    pub min_effect_pct: f64,
    /// Steady window; `None` = every epoch but the first.
    pub steady_epochs: Option<EpochWindow>,
    /// Epochs of the real production job; `None` = the number of epochs measured.
    pub production_epochs: Option<u32>,
    /// Direction of the per-epoch metric.
    pub better: Better,
    /// Direction of the per-run system metric (`Lower` for resources used).
    pub system_better: Better,
    /// The primary metric is one value per run (a figure of merit), held as epoch 1 of
    /// each run: no epoch-1 effect, break-even or per-epoch table; App Impact is the
    /// relative change of the value, oriented by `better`.
    #[serde(default)]
    pub per_run: bool,
    /// The primary metric's unit, as the report shows it (`GB/s`); `None`: seconds for
    /// epoch metrics, nothing for per-run values.
    #[serde(default)]
    pub unit: Option<String>,
    /// Secondary metrics that can veto an acceptance (values in `ArmData::guardrails`).
    #[serde(default)]
    pub guardrails: Vec<GuardrailSpec>,
}

impl Default for AnalysisConfig {
    fn default() -> Self {
        AnalysisConfig {
            design: Design::Paired,
            alpha: 0.05,
            min_effect_pct: 1.0,
            steady_epochs: None,
            production_epochs: None,
            better: Better::Lower,
            system_better: Better::Higher,
            per_run: false,
            unit: None,
            guardrails: Vec::new(),
        }
    }
}
