//! What a rule says about its dimension: a variant to run, or a checklist verdict — each
//! with the measured figure that led to it, for the YAML comment beside it.

use std::collections::BTreeMap;

use optgate_experiment::Verdict;

/// A variant a rule proposes. `description` says the fact; `figure` quotes the number.
#[derive(Debug, Clone, PartialEq)]
pub struct ProposedVariant {
    pub name: String,
    pub dimension: &'static str,
    pub description: String,
    pub figure: String,
    pub env: BTreeMap<String, String>,
    /// `launcher.cpus_per_task` (under a launcher only).
    pub cpus_per_task: Option<u32>,
    /// A rebuilt `build.command`.
    pub build: Option<String>,
    pub governor: Option<String>,
}

impl ProposedVariant {
    /// Whether it changes the same settings to the same values as `other` (names and
    /// words aside): then one of them is a duplicate.
    pub fn same_settings(&self, other: &Settings) -> bool {
        self.env == other.env
            && self.cpus_per_task == other.cpus_per_task
            && self.build == other.build
            && self.governor == other.governor
    }
}

/// The settings of a variant already in the file, to compare proposals with.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Settings {
    pub env: BTreeMap<String, String>,
    pub cpus_per_task: Option<u32>,
    pub build: Option<String>,
    pub governor: Option<String>,
}

/// A verdict for a dimension no variant covers, with its reason and figure.
#[derive(Debug, Clone, PartialEq)]
pub struct ProposedVerdict {
    pub dimension: &'static str,
    pub verdict: Verdict,
    pub reason: String,
    pub figure: Option<String>,
}

/// What one rule concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Variant(ProposedVariant),
    Verdict(ProposedVerdict),
}

impl Outcome {
    pub fn dimension(&self) -> &'static str {
        match self {
            Outcome::Variant(v) => v.dimension,
            Outcome::Verdict(v) => v.dimension,
        }
    }

    /// A verdict built from its parts.
    pub fn verdict(
        dimension: &'static str,
        verdict: Verdict,
        reason: impl Into<String>,
        figure: Option<String>,
    ) -> Outcome {
        Outcome::Verdict(ProposedVerdict {
            dimension,
            verdict,
            reason: reason.into(),
            figure,
        })
    }
}
