//! The staged sequential rule: per-variant stopping with an efficacy boundary that respects
//! the exact tests' discreteness, a futility boundary spent the same way, and a stop when
//! the remaining budget very likely cannot decide a variant. Pure; the daemon's look loop
//! (`optgate-daemon`'s `decide.rs`) drives it, and `benches/decision-cost` measures it.
//!
//! At each planned look only the variants still open are analysed (decisions are final);
//! a variant leaves the block plan when it is accepted, rejected (by the analysis' own
//! rules or the futility boundary), or stopped because the budget cannot decide it.
//! Variants that left without an acceptance stay in the Holm family (see
//! [`crate::analyze_in_family`]); accepted ones leave it (Holm's step-down).

use serde::{Deserialize, Serialize};

use crate::analysis::{Analysis, Decision, MIN_REPLICATES, SequentialLook, analyze_in_family};
use crate::error::StatsError;
use crate::mann_whitney::min_p_unpaired;
use crate::memo::Memo;
use crate::model::{AnalysisConfig, ArmData, Design};
use crate::normal;
use crate::sequential::{POWER_SPENDING_RHO, SequentialPlan, Spending};
use crate::signed_rank::min_p_paired;

/// Overall level of the futility boundary: the probability, over all looks, of rejecting
/// a variant whose true steady speed-up is exactly `min_effect_pct` (the futility test's
/// null). Futility stops are non-binding: they only turn "go on" into "reject", so they
/// cannot raise the false-accept rate; this β bounds the power they cost at the worthwhile
/// effect itself (and far less above it).
pub const FUTILITY_BETA: f64 = 0.1;

/// A variant is stopped as "the budget cannot decide" when the predictive probability
/// that the last look decides it (accept or reject) is below this. 5 %: a variant stopped
/// here would, 19 times out of 20 or more, have spent the whole budget to end
/// inconclusive. Measured (`benches/decision-cost`, 1 variant, 3 % noise): at 5 % it
/// costs no power against no budget stop (90.7 % both), at 0 % it cuts the blocks spent
/// from 17.1 to 11.9; at 10 % it cost 1.7 points of power at 5 %.
pub const BUDGET_DECIDE_PROBABILITY: f64 = 0.05;

/// Power the analysis' MDE is computed for (`analysis::MDE_POWER`), needed to read the
/// observed spread back out of the MDE.
const MDE_POWER: f64 = 0.8;

/// Why a variant left the block plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// Accepted: the Holm-adjusted `p_improvement` crossed the efficacy boundary.
    Efficacy,
    /// Rejected by the futility boundary: the worthwhile effect has become implausible.
    Futility,
    /// Decided by the analysis' own rules (reject by rules 1, 4′, 5, 5′; not applicable;
    /// failed).
    Analysis,
    /// Inconclusive, stopped early: even the whole budget would very likely not decide it.
    BudgetCannotDecide,
    /// Inconclusive at the last planned look.
    BudgetExhausted,
}

/// What a staged plan is made from, in [`StagedPlan::with_spending`]'s order: first and
/// last blocks, α, variants, design, spending.
type StagedDesign = (u32, u32, f64, usize, Design, Spending);

/// The planned looks of a staged experiment and their two boundaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagedPlan {
    /// Blocks at the first possible look (`replicates`).
    pub first: u32,
    /// Blocks at the last look (`max_replicates`).
    pub max: u32,
    /// Efficacy boundary over the looks at `first..=max` blocks; a look whose nominal level
    /// is 0 is not taken.
    pub efficacy: SequentialPlan,
    /// Futility boundary (level [`FUTILITY_BETA`]) over the same looks, for the Holm-adjusted
    /// `p_no_worthwhile`.
    pub futility: SequentialPlan,
}

impl StagedPlan {
    /// The plan for `variants` variants (the Holm family at the start) over `first..=max`
    /// blocks at overall level `alpha`, spending by `α·t^ρ` with [`POWER_SPENDING_RHO`].
    pub fn new(
        first: u32,
        max: u32,
        alpha: f64,
        variants: usize,
        design: Design,
    ) -> Result<Self, StatsError> {
        let spending = Spending::Power(POWER_SPENDING_RHO);
        Self::with_spending(first, max, alpha, variants, design, spending)
    }

    /// [`StagedPlan::new`] with another spending function for both boundaries (the
    /// benchmark compares O'Brien–Fleming spending under the same staged rule). Remembered
    /// per process ([`crate::memo`]): the same parameters give the same plan.
    pub fn with_spending(
        first: u32,
        max: u32,
        alpha: f64,
        variants: usize,
        design: Design,
        spending: Spending,
    ) -> Result<Self, StatsError> {
        static PLANS: Memo<StagedDesign, StagedPlan> = Memo::new();
        let key = (first, max, alpha, variants, design, spending);
        PLANS.get_or_try(key, || Self::integrate(key))
    }

    /// [`StagedPlan::with_spending`] computed afresh (it remembers what this returns).
    fn integrate(
        (first, max, alpha, variants, design, spending): StagedDesign,
    ) -> Result<Self, StatsError> {
        let first = first.max(1);
        let max = max.max(first);
        let blocks: Vec<u32> = (first..=max).collect();
        let fractions: Vec<f64> = blocks.iter().map(|&n| n as f64 / max as f64).collect();
        // The smallest Holm-adjusted p-value reachable at each look; below MIN_REPLICATES
        // rule 3a decides nothing at all.
        let floor = |k: usize| -> f64 {
            let n = blocks[k] as usize;
            if n < MIN_REPLICATES {
                return f64::INFINITY;
            }
            let min_p = match design {
                Design::Paired => min_p_paired(n),
                Design::Independent => min_p_unpaired(n, n),
            };
            (variants.max(1) as f64 * min_p).min(1.0)
        };
        let efficacy = SequentialPlan::with_spending(&fractions, alpha, spending, &floor)?;
        // Futility only at the looks efficacy takes, so a look is one analysis.
        let fut_floor = |k: usize| {
            if efficacy.nominal_alpha[k] > 0.0 {
                floor(k)
            } else {
                f64::INFINITY
            }
        };
        let futility =
            SequentialPlan::with_spending(&fractions, FUTILITY_BETA, spending, &fut_floor)?;
        Ok(StagedPlan {
            first,
            max,
            efficacy,
            futility,
        })
    }

    /// The look (1-based among all of `first..=max`) taken at `blocks` blocks, if one is.
    pub fn look_at(&self, blocks: u32) -> Option<u32> {
        if !(self.first..=self.max).contains(&blocks) {
            return None;
        }
        let look = blocks - self.first + 1;
        (self.efficacy.nominal(look) > 0.0).then_some(look)
    }

    /// The block count of the next look after `blocks`, if any is left.
    pub fn next_look_after(&self, blocks: u32) -> Option<u32> {
        ((blocks + 1).max(self.first)..=self.max).find(|&b| self.look_at(b).is_some())
    }

    /// Block counts of every look taken.
    pub fn look_blocks(&self) -> Vec<u32> {
        (self.first..=self.max)
            .filter(|&b| self.look_at(b).is_some())
            .collect()
    }
}

/// What a look concluded about one variant analysed at it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub name: String,
    pub decision: Decision,
    /// Why the variant left the block plan; `None` = it stays for the next look.
    pub stop: Option<Stop>,
    /// It left without an acceptance but with p-values: its hypothesis was not rejected,
    /// so Holm's family keeps it — count it in `retired` at every later look.
    pub retired: bool,
    pub reason: String,
}

/// One look of the staged rule: the analysis of the open variants and a verdict on each.
#[derive(Debug, Clone, PartialEq)]
pub struct StagedLook {
    pub analysis: Analysis,
    pub verdicts: Vec<Verdict>,
}

/// The look at `blocks` blocks over the variants still open (`open`: every one has a run
/// in each of those blocks, as the baseline has), with `retired` variants that left
/// earlier without an acceptance still counted by Holm.
pub fn analyze_staged(
    baseline: &ArmData,
    open: &[ArmData],
    retired: usize,
    cfg: &AnalysisConfig,
    plan: &StagedPlan,
    blocks: u32,
) -> Result<StagedLook, StatsError> {
    let look = plan.look_at(blocks).ok_or_else(|| {
        StatsError::InvalidConfig(format!("no look is planned at {blocks} blocks"))
    })?;
    let nominal = plan.efficacy.nominal(look);
    let mut at_look = cfg.clone();
    at_look.alpha = nominal;
    let mut analysis = analyze_in_family(baseline, open, &at_look, retired)?;
    analysis.sequential = Some(SequentialLook {
        look,
        planned_looks: plan.efficacy.fractions.len() as u32,
        overall_alpha: plan.efficacy.alpha,
        nominal_alpha: nominal,
        rule: plan.efficacy.rule.clone(),
    });
    let family = analysis
        .variants
        .iter()
        .filter(|v| v.p_improvement.is_some())
        .count()
        + retired;
    let verdicts = analysis
        .variants
        .iter()
        .map(|v| verdict(v, &analysis, plan, look, blocks, family))
        .collect();
    Ok(StagedLook { analysis, verdicts })
}

/// The verdict on one analysed variant, the rules in order: the analysis' own decision,
/// the futility boundary, the end of the budget, the budget that cannot decide.
fn verdict(
    v: &crate::analysis::VariantAnalysis,
    analysis: &Analysis,
    plan: &StagedPlan,
    look: u32,
    blocks: u32,
    family: usize,
) -> Verdict {
    let done = |decision, stop, reason: String| Verdict {
        name: v.name.clone(),
        decision,
        stop: Some(stop),
        retired: decision != Decision::Accept && v.p_improvement.is_some(),
        reason,
    };
    match v.decision {
        Decision::Accept => return done(Decision::Accept, Stop::Efficacy, v.reason.clone()),
        Decision::Inconclusive => {}
        other => return done(other, Stop::Analysis, v.reason.clone()),
    }
    let futility = plan.futility.nominal(look);
    if let Some(p) = v.p_no_worthwhile_adjusted.filter(|&p| p < futility) {
        return done(
            Decision::Reject,
            Stop::Futility,
            format!(
                "the worthwhile effect ({:+.1}%) has become implausible: adjusted p_no_worthwhile {} < futility level {} at look {look} ({blocks} blocks; β = {} over all looks)",
                analysis.min_effect_pct,
                crate::fmt::fmt_p(p),
                crate::fmt::fmt_p(futility),
                plan.futility.alpha
            ),
        );
    }
    if blocks >= plan.max {
        return done(
            Decision::Inconclusive,
            Stop::BudgetExhausted,
            v.reason.clone(),
        );
    }
    if let Some(prob) = decide_probability(v, analysis, plan, family) {
        if prob < BUDGET_DECIDE_PROBABILITY {
            return done(
                Decision::Inconclusive,
                Stop::BudgetCannotDecide,
                format!(
                    "the budget cannot decide it: with the spread observed, {} blocks would decide it with probability {:.0}% (< {:.0}%); {}",
                    plan.max,
                    100.0 * prob,
                    100.0 * BUDGET_DECIDE_PROBABILITY,
                    v.reason
                ),
            );
        }
    }
    Verdict {
        name: v.name.clone(),
        decision: Decision::Inconclusive,
        stop: None,
        retired: false,
        reason: v.reason.clone(),
    }
}

/// Predictive probability (flat prior on the log speed-up, normal theory with the rank
/// tests' efficiency `3/π`) that the last look, at `plan.max` blocks, accepts or rejects
/// the variant, given its estimate and spread now. `None` without an estimate or spread.
///
/// The spread is read back from the analysis' MDE (`mde = exp(δ + z·σ_e/√n) − 1` with
/// `z = z_{1−α/m} + z_{0.8}`, σ_e the sample SD of the log differences times √(π/3)), so it
/// is exactly the spread the report's planning numbers use.
pub fn decide_probability(
    v: &crate::analysis::VariantAnalysis,
    analysis: &Analysis,
    plan: &StagedPlan,
    family: usize,
) -> Option<f64> {
    let delta = (1.0 + analysis.min_effect_pct / 100.0).ln();
    let m = family.max(1) as f64;
    let est = v.speedup.estimate?.ln();
    let n = v.n_baseline.min(v.n_variant) as f64;
    let z_mde = normal::quantile(1.0 - analysis.alpha / m) + normal::quantile(MDE_POWER);
    let se_now = ((1.0 + v.mde_pct? / 100.0).ln() - delta) / z_mde;
    if !(se_now > 0.0 && n >= 2.0) {
        return None;
    }
    let last = plan.efficacy.fractions.len() as u32;
    let z_acc = normal::quantile(1.0 - plan.efficacy.nominal(last) / m);
    let z_fut = normal::quantile(1.0 - plan.futility.nominal(last) / m);
    let at_last = LastLook {
        blocks: plan.max as f64,
        z_accept: z_acc,
        z_futility: z_fut,
    };
    predictive_decide(est - delta, se_now * n.sqrt(), n, &at_last)
}

/// The last look's size and z boundaries, for [`predictive_decide`].
struct LastLook {
    blocks: f64,
    z_accept: f64,
    z_futility: f64,
}

/// P(the last look's mean of the log differences, minus δ, is beyond a boundary), given
/// `gap` = estimate − δ now, per-pair SD `sigma` and `n` pairs, under a flat prior on the
/// true effect: the final mean is `N(gap, σ²(N − n)/(N n))` around δ.
fn predictive_decide(gap: f64, sigma: f64, n: f64, last: &LastLook) -> Option<f64> {
    let big_n = last.blocks;
    let se_final = sigma / big_n.sqrt();
    // The future blocks' mean is unknown around the current estimate, and so is the true
    // effect (flat prior): both spreads add up to this.
    let sd_pred = sigma * ((big_n - n).max(0.0) / (big_n * n)).sqrt();
    if sd_pred <= 0.0 {
        return None;
    }
    let p_acc = normal::cdf((gap - last.z_accept * se_final) / sd_pred);
    let p_rej = normal::cdf((-last.z_futility * se_final - gap) / sd_pred);
    Some((p_acc + p_rej).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The remembered plan is the one each parameter asks for: asked one after another,
    /// designs differing in one parameter each get their own plan, equal to a fresh
    /// integration. Planted bug caught: a memo key that leaves a parameter out.
    #[test]
    fn each_parameter_of_a_remembered_plan_counts() {
        let obf = Spending::ObrienFleming;
        let power = Spending::Power(POWER_SPENDING_RHO);
        // Short designs (few looks, cheap to integrate).
        let designs = [
            (5, 8, 0.05, 1, Design::Paired, power),
            (6, 8, 0.05, 1, Design::Paired, power),
            (5, 9, 0.05, 1, Design::Paired, power),
            (5, 8, 0.01, 1, Design::Paired, power),
            (5, 8, 0.05, 3, Design::Paired, power),
            (5, 8, 0.05, 3, Design::Independent, power),
            (5, 8, 0.05, 1, Design::Paired, obf),
        ];
        let fresh: Vec<StagedPlan> = designs
            .iter()
            .map(|&design| StagedPlan::integrate(design).unwrap())
            .collect();
        // Each row after the first differs from the first (the design row from the one
        // before it, with the same three variants) in one parameter, and so in its plan.
        for (row, like) in [(1, 0), (2, 0), (3, 0), (4, 0), (5, 4), (6, 0)] {
            assert_ne!(
                fresh[row], fresh[like],
                "rows {row} and {like} have one plan"
            );
        }
        for _ in 0..2 {
            for (&(first, max, alpha, variants, design, spending), fresh) in
                designs.iter().zip(&fresh)
            {
                let remembered =
                    StagedPlan::with_spending(first, max, alpha, variants, design, spending);
                assert_eq!(
                    &remembered.unwrap(),
                    fresh,
                    "{first} {max} {alpha} {variants}"
                );
            }
        }
        let fractions = [0.25, 0.5, 1.0];
        for alpha in [0.05, 0.025, 0.05] {
            let remembered = SequentialPlan::obrien_fleming(&fractions, alpha).unwrap();
            assert_eq!(remembered.alpha, alpha);
            let fresh = SequentialPlan::with_spending(&fractions, alpha, obf, &|_| 0.0);
            assert_eq!(remembered, fresh.unwrap());
        }
        let other = SequentialPlan::obrien_fleming(&[0.5, 1.0], 0.05).unwrap();
        assert_eq!(other.fractions, vec![0.5, 1.0]);
    }

    #[test]
    fn the_first_look_at_five_blocks_can_decide_one_variant() {
        let plan = StagedPlan::new(5, 20, 0.05, 1, Design::Paired).unwrap();
        assert_eq!(plan.look_at(5), Some(1));
        assert!(plan.efficacy.nominal(1) > 1.0 / 32.0);
        // After the first look spent most of α, the share of 6 blocks would give a level
        // below 2⁻⁶: that look is left out and its share goes to 7 blocks.
        let expect: Vec<u32> = std::iter::once(5).chain(7..=20).collect();
        assert_eq!(plan.look_blocks(), expect);
        assert_eq!(plan.next_look_after(5), Some(7));
        let spent: f64 = plan.efficacy.spent.iter().sum();
        assert!((spent - 0.05).abs() < 1e-9, "{spent}");
    }

    #[test]
    fn the_independent_design_uses_the_mann_whitney_floor() {
        // 5 + 5 runs reach 1/252, so even three variants (3/252) can decide at 5 blocks.
        let plan = StagedPlan::new(5, 20, 0.05, 3, Design::Independent).unwrap();
        assert_eq!(plan.look_at(5), Some(1));
        // Below MIN_REPLICATES no look is planned at all.
        let early = StagedPlan::new(3, 20, 0.05, 1, Design::Paired).unwrap();
        assert_eq!(early.look_at(3), None);
        assert_eq!(early.look_at(4), None);
        assert!(early.next_look_after(0).unwrap() >= 5);
    }

    /// The closed form against a direct simulation of its model: the true effect drawn
    /// from the posterior, the remaining blocks from it, the final mean compared with the
    /// boundaries.
    #[test]
    fn predictive_probability_matches_a_simulation_of_its_model() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let mut gauss = || {
            let u1: f64 = 1.0 - rng.random::<f64>();
            let u2: f64 = rng.random();
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        };
        let last = LastLook {
            blocks: 20.0,
            z_accept: 2.46,
            z_futility: 2.11,
        };
        for (gap, sigma, n) in [(0.0, 0.05, 5.0), (0.01, 0.04, 8.0), (-0.02, 0.08, 12.0)] {
            let closed = predictive_decide(gap, sigma, n, &last).unwrap();
            let sims = 200_000;
            let se_final = sigma / last.blocks.sqrt();
            let hits = (0..sims)
                .filter(|_| {
                    let theta = gap + sigma / n.sqrt() * gauss();
                    let rest = last.blocks - n;
                    let future = theta + sigma / rest.sqrt() * gauss();
                    let fin = (n * gap + rest * future) / last.blocks;
                    fin >= last.z_accept * se_final || fin <= -last.z_futility * se_final
                })
                .count();
            let sim = hits as f64 / sims as f64;
            assert!(
                (sim - closed).abs() < 0.005,
                "{gap} {sigma} {n}: {sim} vs {closed}"
            );
        }
    }

    #[test]
    fn looks_the_exact_test_cannot_reach_are_left_out_and_their_alpha_kept() {
        // Three variants: 3/32 and 3/64 are above what 5 and 6 blocks may spend.
        let plan = StagedPlan::new(5, 20, 0.05, 3, Design::Paired).unwrap();
        assert_eq!(plan.look_at(5), None);
        assert_eq!(plan.look_at(6), None);
        assert_eq!(plan.next_look_after(4), Some(7));
        assert!(plan.efficacy.nominal(3) > 3.0 / 128.0);
        let spent: f64 = plan.efficacy.spent.iter().sum();
        assert!((spent - 0.05).abs() < 1e-9, "{spent}");
        let fut: f64 = plan.futility.spent.iter().sum();
        assert!((fut - FUTILITY_BETA).abs() < 1e-9, "{fut}");
    }
}
