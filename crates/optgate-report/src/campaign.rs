//! A campaign's one report: the proposal table across every stage, the chain of baselines,
//! the combined result against the stages' prediction, and the 10-dimension checklist
//! filled across the whole campaign. Built from the stage experiments' own reports
//! ([`build`], pure); rendered as markdown or JSON (a top-level `campaign` object).

use std::collections::BTreeMap;

use optgate_experiment::campaign::chain::Combined;
use optgate_experiment::campaign::{Campaign, Overridden};
use optgate_experiment::checklist::Area;
use optgate_stats::VariantAnalysis;
use serde::{Deserialize, Serialize};

use crate::Report;
use crate::checklist::{ChecklistRow, DeclaredVerdict, Verdict, checklist_of};

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

fn pct(x: Option<f64>) -> String {
    x.map_or("—".into(), |v| format!("{v:+.1} %"))
}

fn ratio(x: Option<f64>) -> String {
    x.map_or("—".into(), |v| format!("{v:.3}×"))
}

/// The report as markdown.
pub fn render_markdown(r: &CampaignReport) -> String {
    let mut s = format!("# Campaign `{}`\n\n", r.name);
    if let Some(d) = &r.description {
        s.push_str(&format!("{d}\n\n"));
    }
    let order: Vec<&str> = r.stages.iter().map(|x| x.component.as_str()).collect();
    s.push_str(&format!("Stages in the order run: {}", order.join(" → ")));
    if r.reordered {
        s.push_str(" (reordered from the file into the canonical order I/O → communication → memory → compute)");
    }
    s.push_str("\n\n## Proposals\n\n| Stage | Proposal | App Impact | System Impact | Weighted Score | Speed-up [interval] | Decision |\n|---|---|---|---|---|---|---|\n");
    for (k, st) in r.stages.iter().enumerate() {
        for v in &st.variants {
            let won = if st.winner.as_deref() == Some(v.name.as_str()) {
                " (winner)"
            } else {
                ""
            };
            s.push_str(&format!(
                "| {} {} | `{}`{won} | {} | {} | {} | {} [{}, {}] | {} |\n",
                k + 1,
                st.component,
                v.name,
                pct(v.app_impact_pct),
                pct(v.system_impact_pct),
                v.weighted_score.map_or("—".into(), |w| format!("{w:.1}")),
                ratio(v.speedup.estimate),
                ratio(v.speedup.ci_low),
                ratio(v.speedup.ci_high),
                v.decision
            ));
        }
    }
    s.push_str("\n## Chain of baselines\n\n");
    for (k, st) in r.stages.iter().enumerate() {
        s.push_str(&format!(
            "{}. **{}** (`{}`): baseline = {}. {}\n",
            k + 1,
            st.component,
            st.experiment_id,
            st.baseline,
            st.winner_reason
        ));
    }
    for o in &r.overridden {
        s.push_str(&format!(
            "\n- `{}`: {} set it to {}, {} to {}; the later stage's holds.",
            o.setting, o.earlier, o.earlier_value, o.later, o.later_value
        ));
    }
    s.push_str(&render_combined(r));
    s.push_str("\n## Checklist (across the campaign)\n\n| Dimension | Group | Verdict | Proposals / reason |\n|---|---|---|---|\n");
    for row in &r.checklist {
        let what = if row.variants.is_empty() {
            row.reason.clone().unwrap_or_default()
        } else {
            row.variants.join(", ")
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            row.title,
            row.group,
            row.verdict.label(),
            what
        ));
    }
    s
}

fn render_combined(r: &CampaignReport) -> String {
    let mut s = "\n## Combined\n\n".to_string();
    let Some(c) = &r.combined else {
        let why = r
            .no_combination
            .as_deref()
            .unwrap_or("the confirmation has not run yet");
        return s + why + "\n";
    };
    let x = &c.result;
    s.push_str(&format!(
        "The combination ({}) against the original baseline (`{}`): **{}** — speed-up {} [{}, {}]; the stages predicted {} (the product of the winners' speed-ups); interaction (measured / predicted) {} [{}, {}].\n",
        c.configuration,
        c.experiment_id,
        x.decision,
        ratio(x.speedup.estimate),
        ratio(x.speedup.ci_low),
        ratio(x.speedup.ci_high),
        ratio(x.predicted_speedup),
        ratio(x.interaction.estimate),
        ratio(x.interaction.ci_low),
        ratio(x.interaction.ci_high),
    ));
    if x.not_better_than_best_stage {
        s.push_str(&format!(
            "\n**Flag:** the combination is not better than its best single stage ({}).\n",
            ratio(x.best_stage_speedup)
        ));
    }
    s
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
