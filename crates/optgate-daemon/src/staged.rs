//! The staged rule in the engine (`compare.sequential: staged`, docs/STATISTICS.md §13a):
//! which variants left the block plan at earlier looks (from the stored looks' decisions),
//! the analysis of a look (the open variants through `decide::analyse_staged_look`, the
//! decided ones re-analysed on their own blocks and keeping their decision), and the arms
//! of the blocks added next. Pure; `engine::take_look` calls it.

use std::collections::BTreeMap;

use optgate_experiment::{AA_CONTROL, BASELINE, Plan};
use optgate_stats::{
    Analysis, AnalysisConfig, ArmData, Decision, StagedLook, StagedPlan, StatsError,
    analyze_in_family,
};
use optgate_store::LookRow;

use crate::decide::{Next, StagedNext, analyse_staged_look};
use crate::protocol::VariantDecision;

/// The variants that left the block plan at earlier looks, by name, with the decision they
/// left with (the first look that stopped each).
pub fn closed_variants(looks: &[LookRow]) -> BTreeMap<String, VariantDecision> {
    let mut closed = BTreeMap::new();
    for look in looks {
        let decisions: Vec<VariantDecision> =
            serde_json::from_str(&look.decisions).unwrap_or_default();
        for d in decisions.into_iter().filter(|d| d.stop.is_some()) {
            closed.entry(d.variant.clone()).or_insert(d);
        }
    }
    closed
}

/// The analysis at `blocks` blocks: the open variants at the staged look, then each
/// decided variant on its own blocks at the level of the look that decided it, with that
/// decision and reason kept (it is not re-tested). Variants in the order of `others`.
pub fn analyse(
    base: &ArmData,
    others: &[ArmData],
    cfg: &AnalysisConfig,
    plan: &StagedPlan,
    closed: &BTreeMap<String, VariantDecision>,
    blocks: u32,
) -> Result<(Analysis, StagedLook), StatsError> {
    let open: Vec<ArmData> = others
        .iter()
        .filter(|v| !closed.contains_key(&v.name))
        .cloned()
        .collect();
    let retired = closed.values().filter(|d| d.retired).count();
    let look = analyse_staged_look(base, &open, retired, cfg, plan, blocks)?;
    let mut analysis = look.analysis.clone();
    for v in others.iter().filter(|v| closed.contains_key(&v.name)) {
        let d = &closed[&v.name];
        let last = d.blocks.unwrap_or(blocks);
        let own = ArmData {
            runs: base
                .runs
                .iter()
                .filter(|r| r.block.is_some_and(|b| b <= last))
                .cloned()
                .collect(),
            ..base.clone()
        };
        let mut at = cfg.clone();
        at.alpha = plan
            .look_at(last)
            .map_or(cfg.alpha, |k| plan.efficacy.nominal(k));
        let mut va = analyze_in_family(&own, std::slice::from_ref(v), &at, 0)?
            .variants
            .remove(0);
        va.decision = serde_json::from_value(serde_json::Value::String(d.decision.clone()))
            .unwrap_or(Decision::Inconclusive);
        va.reason = format!(
            "{} (decided at {last} blocks; it ran in blocks 1…{last} and was not re-tested)",
            d.reason
        );
        analysis.variants.push(va);
    }
    let position = |name: &str| others.iter().position(|o| o.name == name);
    analysis.variants.sort_by_key(|v| position(&v.name));
    Ok((analysis, look))
}

/// The decisions stored with this look: every variant (in the order of `order`), the
/// ones that left with why and the blocks they ran in.
pub fn decisions(
    look: &StagedLook,
    closed: &BTreeMap<String, VariantDecision>,
    blocks: u32,
    order: &[&str],
) -> Vec<VariantDecision> {
    let mut out: Vec<VariantDecision> = look
        .verdicts
        .iter()
        .map(|v| VariantDecision {
            variant: v.name.clone(),
            decision: v.decision.to_string(),
            reason: v.reason.clone(),
            stop: v.stop,
            blocks: v.stop.map(|_| blocks),
            retired: v.retired,
        })
        .collect();
    out.extend(closed.values().cloned());
    out.sort_by_key(|d| order.iter().position(|n| *n == d.variant));
    out
}

/// What follows, as the engine's `Next`, and the variants the added blocks hold.
pub fn next(step: StagedNext) -> (Next, Option<Vec<String>>) {
    match step {
        StagedNext::Decided => (Next::Decided, None),
        StagedNext::BudgetExhausted => (Next::BudgetExhausted, None),
        StagedNext::Failed(why) => (Next::Failed(why), None),
        StagedNext::Extend { blocks, arms } => (Next::Extend(blocks), Some(arms)),
    }
}

/// Per-variant stopping: the blocks after `from` hold the baseline, the A/A control and
/// the open variants only, in the order the seed gave them (a decided variant is taken out,
/// the others keep their places relative to each other).
pub fn keep_only(plan: &mut Plan, from: u32, open: &[String]) {
    for b in plan.blocks.iter_mut().filter(|b| b.index > from) {
        b.order
            .retain(|a| a == BASELINE || a == AA_CONTROL || open.contains(a));
    }
}
