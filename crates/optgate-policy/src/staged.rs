//! The staged rule in the engine (`compare.sequential: staged`, docs/STATISTICS.md §13a):
//! which variants left the block plan at earlier looks (from the stored looks' decisions),
//! the analysis of a look (the open variants through `decide::analyse_staged_look`, the
//! decided ones re-analysed on their own blocks and keeping their decision), and the arms
//! of the blocks added next. Pure; the daemon's `look::take_look` calls it.

use std::collections::BTreeMap;

use optgate_experiment::{AA_CONTROL, BASELINE, Plan};
use optgate_stats::{
    Analysis, AnalysisConfig, ArmData, StagedLook, StagedPlan, StatsError, analyze_in_family,
};
use serde::{Deserialize, Serialize};

use crate::decide::{Next, StagedNext, analyse_staged_look};

/// The decision a look recorded for one variant (stored with the look, shown by `status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariantDecision {
    pub variant: String,
    /// accept, reject, inconclusive, not_applicable, failed.
    pub decision: optgate_stats::Decision,
    pub reason: String,
    /// Staged rule only: why the variant left the block plan (absent while it is open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<optgate_stats::Stop>,
    /// Staged rule only: the blocks it ran in (1…this) once it left the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<u32>,
    /// Staged rule only: it left without an acceptance and stays in Holm's family.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retired: bool,
}

/// The variants that left the block plan at earlier looks, by name, with the decision they
/// left with (the first look that stopped each): `looks` gives each earlier look's
/// decisions, oldest first.
pub fn closed_variants(
    looks: impl IntoIterator<Item = Vec<VariantDecision>>,
) -> BTreeMap<String, VariantDecision> {
    let mut closed = BTreeMap::new();
    for decisions in looks {
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
        let own = base.up_to_block(last);
        let mut at = cfg.clone();
        at.alpha = plan
            .look_at(last)
            .map_or(cfg.alpha, |k| plan.efficacy.nominal(k));
        let mut va = analyze_in_family(&own, std::slice::from_ref(v), &at, 0)?
            .variants
            .remove(0);
        va.decision = d.decision;
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
            decision: v.decision,
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

#[cfg(test)]
mod tests {
    use super::*;
    use optgate_experiment::PlannedBlock;
    use optgate_stats::{Decision, Stop};

    fn decision(variant: &str, stop: Option<Stop>, blocks: Option<u32>) -> VariantDecision {
        VariantDecision {
            variant: variant.into(),
            decision: if stop == Some(Stop::Efficacy) {
                Decision::Accept
            } else {
                Decision::Inconclusive
            },
            reason: String::new(),
            stop,
            blocks,
            retired: stop.is_some() && stop != Some(Stop::Efficacy),
        }
    }

    /// The first look that stopped a variant is the one that counts; open ones are not
    /// closed; a look row of the O'Brien–Fleming rule (no `stop`) closes nothing.
    #[test]
    fn closed_variants_come_from_the_first_stopping_look() {
        let looks = [
            vec![
                decision("fast", Some(Stop::Efficacy), Some(7)),
                decision("slow", None, None),
            ],
            vec![
                decision("fast", Some(Stop::Efficacy), Some(7)),
                decision("slow", Some(Stop::Futility), Some(8)),
            ],
        ];
        let closed = closed_variants(looks.clone());
        assert_eq!(closed["fast"].blocks, Some(7));
        assert_eq!(closed["slow"].stop, Some(Stop::Futility));
        assert!(closed["slow"].retired && !closed["fast"].retired);
        assert!(!closed_variants(looks[..1].to_vec()).contains_key("slow"));
        let shipped = r#"[{"variant":"v","decision":"accept","reason":"r"}]"#;
        let old: Vec<VariantDecision> = serde_json::from_str(shipped).unwrap();
        assert!(closed_variants([old]).is_empty());
    }

    /// `blocks` blocks of 3 epochs; `speed(b)` is the arm's speed-up in block `b`.
    fn arm(name: &str, blocks: u32, speed: impl Fn(u32) -> f64) -> ArmData {
        optgate_stats::fixtures::blocked_arm(name, blocks, |b| (1.0 + 0.01 * b as f64) / speed(b))
    }

    /// Holm's family at a staged look: a variant that left without an acceptance (retired,
    /// here by futility) still counts, so the open variant's adjusted p is twice its raw p;
    /// one that left accepted does not count (Holm's step-down), so the adjusted p is the
    /// raw one. The raw p comes from a one-variant analysis at the same level. Dropping the
    /// retired variants from the family (`retired` = 0 anywhere from here to
    /// `holm_in_family`) tests the open ones at too liberal a level and fails this.
    #[test]
    fn retired_variants_stay_in_holms_family_accepted_ones_leave_it() {
        let cfg = AnalysisConfig::default();
        let plan = StagedPlan::new(5, 20, cfg.alpha, 2, optgate_stats::Design::Paired).unwrap();
        let blocks = plan
            .next_look_after(plan.next_look_after(0).unwrap())
            .unwrap();
        let first = blocks - 1;
        let base = arm("baseline", blocks, |_| 1.0);
        // Faster in every block but one, by varying amounts: a raw p well inside (0, 1/2).
        let open = arm("open", blocks, |b| {
            if b == 3 {
                0.99
            } else {
                1.05 + 0.005 * b as f64
            }
        });
        let left = arm("left", first, |_| 1.0);
        let mut at = cfg.clone();
        at.alpha = plan.efficacy.nominal(plan.look_at(blocks).unwrap());
        let raw = optgate_stats::analyze_in_family(&base, std::slice::from_ref(&open), &at, 0)
            .unwrap()
            .variants[0]
            .p_improvement
            .unwrap();
        assert!(raw > 0.0 && raw < 0.4, "raw p {raw}");
        let adjusted = |stop: Stop| {
            let mut d = decision("left", Some(stop), Some(first));
            d.decision = if stop == Stop::Efficacy {
                Decision::Accept
            } else {
                Decision::Reject
            };
            let closed = BTreeMap::from([("left".to_string(), d)]);
            let others = [open.clone(), left.clone()];
            let (analysis, look) = analyse(&base, &others, &cfg, &plan, &closed, blocks).unwrap();
            assert_eq!(look.verdicts.len(), 1, "only the open variant is re-tested");
            assert_eq!(analysis.variants[0].name, "open");
            analysis.variants[0].p_improvement_adjusted.unwrap()
        };
        let with_retired = adjusted(Stop::Futility);
        assert!(
            (with_retired - 2.0 * raw).abs() < 1e-12,
            "retired variant left Holm's family: adjusted {with_retired}, raw {raw}"
        );
        let with_accepted = adjusted(Stop::Efficacy);
        assert!(
            (with_accepted - raw).abs() < 1e-12,
            "an accepted variant stayed in Holm's family: adjusted {with_accepted}, raw {raw}"
        );
    }

    /// A variant that left the plan is re-analysed on its own blocks only: the baseline's
    /// runs after the look that decided it are not compared with it (here in the
    /// independent design, where every baseline run would count). Re-analysing it on the
    /// whole baseline fails this.
    #[test]
    fn a_decided_variant_is_compared_with_the_baseline_of_its_own_blocks() {
        let cfg = AnalysisConfig {
            design: optgate_stats::Design::Independent,
            ..AnalysisConfig::default()
        };
        let plan =
            StagedPlan::new(6, 20, cfg.alpha, 2, optgate_stats::Design::Independent).unwrap();
        let first = plan.next_look_after(0).unwrap();
        let blocks = plan.next_look_after(first).unwrap();
        // Core-seconds per run (10 for the baseline, 5 for `left`) and a guardrail, one
        // value per run: `left` is compared on its own blocks' values.
        let mut base = arm("baseline", blocks, |_| 1.0);
        base.system_metric = vec![10.0; blocks as usize];
        base.guardrails = BTreeMap::from([("bw".to_string(), vec![2.0; blocks as usize])]);
        let open = arm("open", blocks, |_| 1.02);
        let mut left = arm("left", first, |_| 1.5);
        left.system_metric = vec![5.0; first as usize];
        left.guardrails = BTreeMap::from([("bw".to_string(), vec![2.0; first as usize])]);
        let cfg = AnalysisConfig {
            guardrails: vec![optgate_stats::GuardrailSpec {
                name: "bw".into(),
                ..Default::default()
            }],
            system_better: optgate_stats::Better::Lower,
            ..cfg
        };
        let mut d = decision("left", Some(Stop::Efficacy), Some(first));
        d.reason = "accepted".into();
        let closed = BTreeMap::from([("left".to_string(), d)]);
        let others = [open, left];
        let (analysis, look) = analyse(&base, &others, &cfg, &plan, &closed, blocks).unwrap();
        let names: Vec<&str> = analysis.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["open", "left"]);
        let left = &analysis.variants[1];
        assert_eq!(left.n_baseline, first as usize, "{left:?}");
        assert_eq!(left.n_variant, first as usize);
        assert_eq!(left.decision, Decision::Accept);
        assert!(
            left.reason.starts_with("accepted (decided at "),
            "{}",
            left.reason
        );
        assert_eq!(analysis.variants[0].n_baseline, blocks as usize);
        // Half the baseline's core-seconds: System Impact +50 %, as for the open variant
        // measured in every block; the guardrail estimated too (both were "not measured
        // for every run" when the baseline's values were not cut to the variant's blocks).
        let saved = left.system_impact_pct.unwrap_or_else(|| panic!("{left:?}"));
        assert!((saved - 50.0).abs() < 1e-9, "{saved}");
        let (score, app) = (left.weighted_score.unwrap(), left.app_impact_pct.unwrap());
        assert!((score - (0.5 * app + 25.0)).abs() < 1e-9, "{score} {app}");
        assert_eq!(left.guardrails[0].impact_pct, Some(0.0), "{left:?}");
        assert!(
            !left.warnings.iter().any(|w| w.contains("not measured")),
            "{:?}",
            left.warnings
        );
        // The decisions stored with the look: every variant in the given order, the one
        // that left with the blocks it ran in, the open one with this look's blocks only if
        // it left now (a sort that ignored the order puts the open variant first).
        let stored = decisions(&look, &closed, blocks, &["left", "open"]);
        let names: Vec<&str> = stored.iter().map(|d| d.variant.as_str()).collect();
        assert_eq!(names, ["left", "open"]);
        assert_eq!(
            (stored[0].stop, stored[0].blocks),
            (Some(Stop::Efficacy), Some(first))
        );
        assert_eq!(stored[1].blocks, stored[1].stop.map(|_| blocks));
    }

    /// Standard normal deviate (Box–Muller).
    fn gauss(rng: &mut rand_chacha::ChaCha8Rng) -> f64 {
        use rand::Rng;
        let u1: f64 = 1.0 - rng.random::<f64>();
        let u2: f64 = rng.random();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// One A/A experiment through the engine's staged loop (`analyse`, the stored
    /// `decisions`, `next_after_staged_look`; a decided variant keeps only the blocks it ran in):
    /// `variants` arms identical to the baseline, `noise` log-normal per run over a 3 %
    /// block effect. Returns whether any variant was accepted and how many retired.
    fn staged_aa_experiment(
        rng: &mut rand_chacha::ChaCha8Rng,
        variants: usize,
        noise: f64,
        cfg: &AnalysisConfig,
        plan: &StagedPlan,
    ) -> (bool, usize) {
        let names: Vec<String> = (1..=variants).map(|v| format!("v{v}")).collect();
        let mut arms: Vec<ArmData> = std::iter::once("baseline".to_string())
            .chain(names.iter().cloned())
            .map(|name| ArmData {
                name,
                ..ArmData::default()
            })
            .collect();
        let order: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut closed: BTreeMap<String, VariantDecision> = BTreeMap::new();
        let mut blocks = plan.next_look_after(0).unwrap();
        loop {
            while (arms[0].runs.len() as u32) < blocks {
                let b = arms[0].runs.len() as u32 + 1;
                let shared = 0.03 * gauss(rng);
                for arm in arms.iter_mut() {
                    if closed.contains_key(&arm.name) {
                        continue;
                    }
                    let t = (shared + noise * gauss(rng)).exp();
                    arm.runs.push(optgate_stats::fixtures::block_run(b, t));
                }
            }
            let (_, look) = analyse(&arms[0], &arms[1..], cfg, plan, &closed, blocks).unwrap();
            if look.verdicts.iter().any(|v| v.decision == Decision::Accept) {
                return (true, closed.values().filter(|d| d.retired).count());
            }
            for d in decisions(&look, &closed, blocks, &order) {
                if d.stop.is_some() {
                    closed.entry(d.variant.clone()).or_insert(d);
                }
            }
            let counts: Vec<(String, usize)> = arms
                .iter()
                .filter(|a| !closed.contains_key(&a.name) || a.name == "baseline")
                .map(|a| (a.name.clone(), a.runs.len()))
                .collect();
            match crate::decide::next_after_staged_look(&look, blocks, plan, &counts) {
                crate::decide::StagedNext::Extend { blocks: more, .. } => blocks += more,
                _ => return (false, closed.values().filter(|d| d.retired).count()),
            }
        }
    }

    /// The staged rule's familywise false-accept rate with retired variants, through the
    /// engine's loop: 6 A/A variants at the null's boundary with 8 % noise, so most leave
    /// early (futility, or the budget cannot decide them) and the few left open are the
    /// ones whose estimates ran furthest from zero. The rate of experiments with any
    /// variant accepted stays at α: under H0 the accepts are Binomial(n, ≤ α), and the
    /// bound is the one-sided 99.9 % binomial limit at α (normal approximation with
    /// continuity). Seeded; about a second (optgate-stats is optimised in dev).
    #[test]
    fn staged_aa_false_accept_rate_with_retired_variants_stays_at_alpha() {
        use rand::SeedableRng;
        let cfg = AnalysisConfig {
            design: optgate_stats::Design::Paired,
            alpha: 0.05,
            min_effect_pct: 0.0,
            ..AnalysisConfig::default()
        };
        let variants = 6;
        let plan =
            StagedPlan::new(5, 20, cfg.alpha, variants, optgate_stats::Design::Paired).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(20261201);
        let experiments = 1500usize;
        let (mut accepted, mut retired) = (0usize, 0usize);
        for _ in 0..experiments {
            let (any, r) = staged_aa_experiment(&mut rng, variants, 0.08, &cfg, &plan);
            accepted += any as usize;
            retired += r;
        }
        let n = experiments as f64;
        let limit = cfg.alpha * n + 3.09 * (n * cfg.alpha * (1.0 - cfg.alpha)).sqrt() + 0.5;
        eprintln!(
            "staged A/A, {variants} variants: {accepted} of {experiments} accepted (limit {limit:.1}), {:.2} retired per experiment",
            retired as f64 / n
        );
        // Retirement really happened, so Holm's family was exercised.
        assert!(
            retired as f64 / n > 2.0,
            "{retired} retired in {experiments}"
        );
        assert!(
            (accepted as f64) <= limit,
            "false-accept rate {} above alpha {}: {accepted} of {experiments}",
            accepted as f64 / n,
            cfg.alpha
        );
    }

    /// Later blocks lose the decided variants and keep everyone else in the seeded order.
    #[test]
    fn later_blocks_keep_only_the_open_arms() {
        let order = |arms: &[&str]| arms.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let mut plan = Plan {
            experiment: "e".into(),
            seed: 1,
            design: optgate_experiment::Design::Blocked,
            arms: order(&["baseline", "fast", "same", AA_CONTROL]),
            blocks: (1..=3)
                .map(|index| PlannedBlock {
                    index,
                    order: order(&["same", AA_CONTROL, "fast", "baseline"]),
                })
                .collect(),
        };
        keep_only(&mut plan, 1, &["same".to_string()]);
        assert_eq!(plan.blocks[0].order.len(), 4, "block 1 is not touched");
        for b in &plan.blocks[1..] {
            assert_eq!(b.order, order(&["same", AA_CONTROL, "baseline"]));
        }
    }
}
