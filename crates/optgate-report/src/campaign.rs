//! A campaign's one report: the proposal table across every stage, the chain of baselines,
//! the combined result against the stages' prediction, and the 10-dimension checklist
//! filled across the whole campaign. Built from the stage experiments' own reports
//! ([`build`], pure); rendered as JSON here (a top-level `campaign` object) and in every
//! other format by [`crate::campaign_formats`].

use std::collections::BTreeMap;

use optgate_experiment::campaign::chain::Combined;
use optgate_experiment::campaign::{Campaign, Overridden};
use optgate_experiment::checklist::Area;
use optgate_stats::VariantAnalysis;
use serde::{Deserialize, Serialize};

use crate::checklist::{ChecklistRow, DeclaredVerdict, Verdict, checklist_of};
use crate::model::Report;

/// One stage as it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageReport {
    pub component: Area,
    pub description: Option<String>,
    /// The stage experiment's id (the daemon's) or its folder under the campaign's root (`optgate run`).
    pub experiment_id: String,
    /// What the stage's baseline carried.
    pub baseline: String,
    pub winner: Option<String>,
    pub winner_reason: String,
    /// The stage report's list of variants.
    pub variants: Vec<VariantAnalysis>,
}

/// The confirmation's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CombinedReport {
    pub experiment_id: String,
    /// What the combined configuration is.
    pub configuration: String,
    #[serde(flatten)]
    pub result: Combined,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignReport {
    pub name: String,
    pub description: Option<String>,
    /// The stages ran in another order than the file lists them.
    pub reordered: bool,
    /// In the order run.
    pub stages: Vec<StageReport>,
    /// Settings two winners made; the later stage's holds.
    pub overridden: Vec<Overridden>,
    /// Absent while the campaign has not reached its confirmation, or when no stage had a
    /// winner (then `no_combination` says so).
    pub combined: Option<CombinedReport>,
    pub no_combination: Option<String>,
    pub checklist: Vec<ChecklistRow>,
}

/// The JSON form: `{"campaign": {...}}`.
#[derive(Serialize, Deserialize)]
pub struct CampaignJson {
    pub campaign: CampaignReport,
}

/// The campaign report from its stages (each with its experiment id, its report, what its
/// baseline carried, its winner and why) and, when it ran, the confirmation.
pub fn build(
    campaign: &Campaign,
    stages: Vec<(
        String,
        &Report,
        String,
        optgate_experiment::campaign::StageOutcome,
    )>,
    overridden: Vec<Overridden>,
    combined: Option<CombinedReport>,
    no_combination: Option<String>,
) -> CampaignReport {
    let mut all: Vec<VariantAnalysis> = Vec::new();
    let mut dims: BTreeMap<String, String> = BTreeMap::new();
    let mut out = Vec::new();
    for (k, (id, report, baseline, outcome)) in stages.into_iter().enumerate() {
        let stage = &campaign.stages[k];
        for v in &report.analysis.variants {
            let key = format!("{}/{}", stage.component, v.name);
            let dim = report
                .experiment
                .as_ref()
                .and_then(|m| m.variants.iter().find(|x| x.name == v.name))
                .and_then(|x| x.dimension.clone());
            if let Some(d) = dim {
                dims.insert(key.clone(), d);
            }
            all.push(VariantAnalysis {
                name: key,
                ..v.clone()
            });
        }
        out.push(StageReport {
            component: stage.component,
            description: stage.description.clone(),
            experiment_id: id,
            baseline,
            winner: outcome.winner,
            winner_reason: outcome.reason,
            variants: report.analysis.variants.clone(),
        });
    }
    CampaignReport {
        name: campaign.name.clone(),
        description: campaign
            .shared
            .get("description")
            .and_then(|d| d.as_str())
            .map(str::to_string),
        reordered: campaign.reordered,
        stages: out,
        overridden,
        combined,
        no_combination,
        checklist: checklist(campaign, all, &dims),
    }
}

/// The checklist over every stage's variants: a dimension any stage measured is applied &
/// measured; the rest take the campaign's declared verdict, or are missing.
fn checklist(
    campaign: &Campaign,
    variants: Vec<VariantAnalysis>,
    dims: &BTreeMap<String, String>,
) -> Vec<ChecklistRow> {
    let declared: BTreeMap<String, DeclaredVerdict> = campaign
        .shared
        .get("checklist")
        .and_then(|c| c.as_object())
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| {
                    let verdict = match v.get("verdict")?.as_str()? {
                        "not_applicable" => Verdict::NotApplicable,
                        _ => Verdict::ApplicableNotMeasured,
                    };
                    let reason = v.get("reason").and_then(|r| r.as_str()).map(str::to_string);
                    Some((k.clone(), DeclaredVerdict { verdict, reason }))
                })
                .collect()
        })
        .unwrap_or_default();
    checklist_of(&variants, dims, &declared)
}

/// The report as JSON: a top-level `campaign` object.
pub fn render_json(r: &CampaignReport) -> String {
    let wrapped = CampaignJson {
        campaign: r.clone(),
    };
    serde_json::to_string_pretty(&wrapped).unwrap_or_default() + "\n"
}

/// The campaign report from the reports of the steps that ended, in step order (each with
/// its experiment id): the stages', then the confirmation's when it ran. The chain is
/// replayed from them ([`optgate_experiment::campaign::replay`]).
pub fn assemble(campaign: &Campaign, steps: &[(String, Report)]) -> CampaignReport {
    use optgate_experiment::campaign::{COMBINED, NO_COMBINATION, replay};
    let n = campaign.stages.len().min(steps.len());
    let lists: Vec<&[VariantAnalysis]> = steps[..n]
        .iter()
        .map(|(_, r)| r.analysis.variants.as_slice())
        .collect();
    let r = replay(campaign, &lists);
    let stages = steps[..n]
        .iter()
        .zip(r.baselines.iter().zip(&r.outcomes))
        .map(|((id, rep), (b, o))| (id.clone(), rep, b.clone(), o.clone()))
        .collect();
    let confirmation = steps.get(campaign.stages.len()).and_then(|(id, rep)| {
        let v = rep.analysis.variants.iter().find(|v| v.name == COMBINED)?;
        Some(CombinedReport {
            experiment_id: id.clone(),
            configuration: r.chain.describe(),
            result: optgate_experiment::campaign::chain::combine(v, &r.speedups),
        })
    });
    let none = (n == campaign.stages.len() && r.chain.winners.is_empty())
        .then(|| NO_COMBINATION.to_string());
    build(
        campaign,
        stages,
        r.chain.overridden.clone(),
        confirmation,
        none,
    )
}
