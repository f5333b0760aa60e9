//! The 10-dimension compute-optimization checklist (from the reference skill text) and
//! the verdict of each dimension for one experiment. A dimension without a verdict is
//! shown as missing, never left out.

use std::collections::BTreeMap;

use optgate_stats::{Analysis, Decision};
use serde::{Deserialize, Serialize};

/// The 10 dimensions as `(id, title)` in the checklist's canonical order, I/O →
/// communication → memory → compute (the recommended application order). The list itself
/// lives in `optgate_experiment::checklist`, so the ids a report shows are the ids an
/// experiment file accepts.
pub static DIMENSIONS: std::sync::LazyLock<Vec<(&'static str, &'static str)>> =
    std::sync::LazyLock::new(|| {
        optgate_experiment::checklist::report_order()
            .into_iter()
            .map(|d| (d.id, d.title))
            .collect()
    });

/// The recommended application order, printed with the checklist.
pub const APPLICATION_ORDER: &str = "I/O → communication → memory → compute";

/// Which part of the application order a dimension belongs to.
pub fn dimension_group(id: &str) -> &'static str {
    use optgate_experiment::checklist::{Area, dimension};
    match dimension(id).map(|d| d.area) {
        Some(Area::Io) => "I/O",
        Some(Area::Communication) => "communication",
        Some(Area::Memory) => "memory",
        Some(Area::Compute) => "compute",
        None => "unknown",
    }
}

/// Whether `id` is one of the 10 dimensions.
pub fn is_dimension(id: &str) -> bool {
    optgate_experiment::checklist::dimension(id).is_some()
}

/// Title of a dimension id, if it is one.
pub fn dimension_title(id: &str) -> Option<&'static str> {
    optgate_experiment::checklist::dimension(id).map(|d| d.title)
}

/// The verdict of one dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A variant of this dimension ran and was measured.
    AppliedMeasured,
    ApplicableNotMeasured,
    NotApplicable,
    /// Nobody gave a verdict: shown, never left out.
    Missing,
}

impl Verdict {
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::AppliedMeasured => "applied & measured",
            Verdict::ApplicableNotMeasured => "applicable, not measured",
            Verdict::NotApplicable => "not applicable",
            Verdict::Missing => "MISSING",
        }
    }
}

/// A verdict declared in the experiment file for a dimension no variant covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeclaredVerdict {
    pub verdict: Verdict,
    pub reason: Option<String>,
}

/// One row of the checklist.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChecklistRow {
    pub dimension: String,
    pub title: String,
    /// I/O, communication, memory or compute.
    pub group: String,
    pub verdict: Verdict,
    pub reason: Option<String>,
    /// Variants of this dimension, with their decisions.
    pub variants: Vec<String>,
}

/// The checklist of an experiment: every dimension in canonical order, then any
/// dimension id that is not one of the 10 (so a typo shows up instead of vanishing).
/// `variant_dimensions` maps variant name → dimension id; `declared` maps dimension id →
/// the verdict the experiment file gives. A dimension with variants is *applied &
/// measured* unless every one of its variants was not applicable, in which case it is
/// *not applicable* with their reasons.
pub fn build_checklist(
    analysis: &Analysis,
    variant_dimensions: &BTreeMap<String, String>,
    declared: &BTreeMap<String, DeclaredVerdict>,
) -> Vec<ChecklistRow> {
    checklist_of(&analysis.variants, variant_dimensions, declared)
}

/// [`build_checklist`] over a list of variants (a campaign's, across its stages).
pub fn checklist_of(
    variants_analysed: &[optgate_stats::VariantAnalysis],
    variant_dimensions: &BTreeMap<String, String>,
    declared: &BTreeMap<String, DeclaredVerdict>,
) -> Vec<ChecklistRow> {
    let mut ids: Vec<String> = DIMENSIONS.iter().map(|(d, _)| d.to_string()).collect();
    for id in variant_dimensions.values().chain(declared.keys()) {
        if !ids.contains(id) {
            ids.push(id.clone());
        }
    }
    ids.into_iter()
        .map(|id| {
            let variants: Vec<_> = variants_analysed
                .iter()
                .filter(|v| variant_dimensions.get(&v.name) == Some(&id))
                .collect();
            let title = dimension_title(&id)
                .unwrap_or("(not one of the 10 dimensions)")
                .to_string();
            let group = dimension_group(&id).to_string();
            let names = variants
                .iter()
                .map(|v| format!("{} ({})", v.name, v.decision))
                .collect();
            let (verdict, reason) = if !variants.is_empty() {
                if variants
                    .iter()
                    .all(|v| v.decision == Decision::NotApplicable)
                {
                    let why = variants
                        .iter()
                        .map(|v| format!("{}: {}", v.name, v.reason))
                        .collect::<Vec<_>>()
                        .join("; ");
                    (Verdict::NotApplicable, Some(why))
                } else {
                    (Verdict::AppliedMeasured, None)
                }
            } else if let Some(d) = declared.get(&id) {
                (d.verdict, d.reason.clone())
            } else {
                (
                    Verdict::Missing,
                    Some("no variant and no declared verdict".into()),
                )
            };
            ChecklistRow {
                dimension: id,
                title,
                group,
                verdict,
                reason,
                variants: names,
            }
        })
        .collect()
}
