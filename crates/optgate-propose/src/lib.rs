//! From measured facts to proposals: every one of the ten checklist dimensions walked by a
//! pure rule (`rules`) over the baseline's [`Facts`], merged with what the experiment file
//! already has ([`propose`]), and written into its text (`render`). Running the baseline
//! and writing the file are `optgate propose`'s (the CLI); nothing here does I/O.

pub mod facts;
pub mod outcome;
pub mod render;
pub mod rules;
pub mod text;

use std::collections::BTreeSet;

use optgate_experiment::checklist::{Area, DIMENSIONS};

pub use facts::{Facts, Launcher, LauncherKind, NodeFacts, TraceTimes, Usage};
pub use outcome::{Outcome, ProposedVariant, ProposedVerdict, Settings};

/// How many times `optgate propose` runs the baseline to measure it (the median of their
/// tasks is the utilisation the rules read).
pub const PROBE_RUNS: u32 = 3;

/// What the file already has, which a proposal must not repeat.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Existing {
    /// Variants already in the file: names and settings.
    pub variants: Vec<(String, Option<String>, Settings)>,
    /// Dimensions with a `checklist:` verdict already.
    pub verdicts: BTreeSet<String>,
}

impl Existing {
    fn covers(&self, dimension: &str) -> bool {
        self.verdicts.contains(dimension)
            || self
                .variants
                .iter()
                .any(|(_, d, _)| d.as_deref() == Some(dimension))
    }
}

/// What propose adds to the file, and what it left out and why.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Proposal {
    pub variants: Vec<ProposedVariant>,
    pub verdicts: Vec<ProposedVerdict>,
    /// Proposals not added (a duplicate, or the dimension has a verdict already), with why.
    pub left_out: Vec<String>,
    /// `Some` when the trace says I/O or communication dominates: the output is a campaign
    /// whose stages follow the canonical order; the dominant area and its share.
    pub campaign: Option<(Area, f64)>,
}

/// Every rule's outcome, one per dimension, in the checklist's numbering.
pub fn outcomes(facts: &Facts) -> Vec<Outcome> {
    let [io, comm] = rules::overlap(facts);
    let mut all = vec![
        rules::threads(facts),
        rules::binding(facts),
        rules::governor(facts),
        rules::build_flags(facts),
        rules::capability(facts),
        io,
        comm,
    ];
    for d in DIMENSIONS {
        if !all.iter().any(|o| o.dimension() == d.id) {
            all.push(rules::by_hand(d.id));
        }
    }
    let order = |o: &Outcome| DIMENSIONS.iter().position(|d| d.id == o.dimension());
    all.sort_by_key(order);
    all
}

/// The rules' outcomes merged with `existing`: a variant is added unless one in the file
/// has the same settings or its dimension has a verdict there (the file's word stands); a
/// name already taken gets a suffix; a verdict is added only for a dimension no variant
/// (old or new) and no verdict covers.
pub fn propose(facts: &Facts, existing: &Existing) -> Proposal {
    let mut p = Proposal {
        campaign: rules::campaign_order(facts),
        ..Proposal::default()
    };
    let mut names: BTreeSet<String> = existing.variants.iter().map(|v| v.0.clone()).collect();
    let all = outcomes(facts);
    for o in &all {
        let Outcome::Variant(v) = o else { continue };
        if existing.verdicts.contains(v.dimension) {
            p.left_out.push(format!(
                "{}: the file's checklist has a verdict for {}; remove it to get this proposal ({})",
                v.name, v.dimension, v.figure
            ));
        } else if let Some((name, _, _)) = existing
            .variants
            .iter()
            .find(|(_, _, s)| v.same_settings(s))
        {
            p.left_out.push(format!(
                "{}: variant `{name}` already has these settings",
                v.name
            ));
        } else {
            let mut v = v.clone();
            v.name = free_name(&v.name, &names);
            names.insert(v.name.clone());
            p.variants.push(v);
        }
    }
    for o in all {
        let Outcome::Verdict(v) = o else { continue };
        let by_new = p.variants.iter().any(|n| n.dimension == v.dimension);
        if !existing.covers(v.dimension) && !by_new {
            p.verdicts.push(v);
        }
    }
    // An uncovered dimension whose variant was left out still needs its verdict.
    for d in DIMENSIONS {
        let covered = existing.covers(d.id)
            || p.variants.iter().any(|v| v.dimension == d.id)
            || p.verdicts.iter().any(|v| v.dimension == d.id);
        if !covered {
            p.verdicts.push(ProposedVerdict {
                dimension: d.id,
                verdict: optgate_experiment::Verdict::ApplicableNotMeasured,
                reason: "its proposal repeats a variant already in the file".into(),
                figure: None,
            });
        }
    }
    if !existing.variants.is_empty() {
        p.campaign = None; // a file with variants stays one experiment
    }
    p
}

/// `name`, or `name-2`, `name-3`, … when it is taken.
fn free_name(name: &str, taken: &BTreeSet<String>) -> String {
    (1..)
        .map(|i| {
            if i == 1 {
                name.to_string()
            } else {
                format!("{name}-{i}")
            }
        })
        .find(|n| !taken.contains(n))
        .expect("an unbounded range has a free name")
}

#[cfg(test)]
mod tests;
