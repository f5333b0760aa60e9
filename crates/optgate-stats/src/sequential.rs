//! The sequential rule for adding replicates: a Lan–DeMets alpha-spending boundary of
//! O'Brien–Fleming type, turned into the nominal one-sided level to use at each look.
//!
//! Why: the daemon looks again each time it adds blocks. Testing every look at α inflates
//! the false-accept rate (five looks ≈ 2–3× α). Spending α over the planned looks keeps the
//! overall rate at α. Use: at look `k` of `K`, run [`crate::analyze`] with
//! `alpha = sequential_alpha(k, K, α)` (or [`crate::analyze_sequential`], which does that
//! and records the plan in the report). Confidence intervals at `1 − 2·alpha_k` are then
//! repeated confidence intervals.
//!
//! Method. The spending function is `α(t) = 2 − 2Φ(z_{1−α/2} / √t)` (Lan & DeMets 1983),
//! `t` the information fraction (replicates at this look / replicates at the last look).
//! Look `k` may spend `α(t_k) − α(t_{k−1})`. The z boundaries `c_k` solve
//! `P(Z_1 < c_1, …, Z_{k−1} < c_{k−1}, Z_k ≥ c_k) = α(t_k) − α(t_{k−1})` under the null,
//! where `Z_k = B(t_k)/√t_k` for a standard Brownian motion `B` (the canonical joint
//! distribution of the test statistics at the looks). The probabilities are computed by
//! the recursive numerical integration of Armitage, McPherson & Rowe (1969), Simpson's
//! rule on a fine grid, and each `c_k` by bisection. The nominal level at look `k` is
//! `1 − Φ(c_k)`: accept at that look only when the (Holm-adjusted) one-sided p-value is
//! below it. Futility stops (reject for "cannot reach min effect") do not spend α: they
//! can only lower the false-accept rate (non-binding futility).
//!
//! The same recursion serves other spending functions ([`Spending`]) and can leave out a
//! look whose nominal level would not exceed a floor — the smallest p-value the exact test
//! reaches there — keeping its share of α for the next look kept
//! ([`SequentialPlan::with_spending`]; the staged rule of [`crate::stopping`] uses both).
//!
//! Rank tests are only asymptotically normal and their exact p-values are discrete and
//! conservative; the simulation test `sequential_aa_false_accept` checks that the rule
//! still holds with the exact Wilcoxon test at small n.

use serde::{Deserialize, Serialize};

use crate::error::StatsError;
use crate::memo::Memo;
use crate::normal;

/// Grid points of the numerical integration (odd, for Simpson's rule).
const GRID: usize = 801;
/// The continuation region is cut at this many standard deviations below 0; the mass
/// beyond (< 1e-15) is negligible.
const LOWER_SD: f64 = 8.0;

/// Lan–DeMets O'Brien–Fleming-type spending function: the one-sided α spent by
/// information fraction `t` (0 at t = 0, `alpha` at t = 1).
pub fn obf_spending(t: f64, alpha: f64) -> f64 {
    if t <= 0.0 {
        return 0.0;
    }
    let t = t.min(1.0);
    let z = normal::quantile(1.0 - alpha / 2.0);
    2.0 * normal::sf(z / t.sqrt())
}

/// Exponent `ρ` of the power-family spending function `α·t^ρ` of the staged rule
/// (`crate::stopping`). Small enough that the default plan of 5…30 blocks spends more
/// than 2⁻⁵ of α = 0.05 at its first look (0.05·(5/30)^0.25 = 0.0319 > 1/32), so an
/// obvious effect is decided at 5 blocks as a fixed n = 5 design would (5…20 blocks: 0.0354);
/// the rest is spread over the later looks nearly evenly (Pocock-like), which is what stops
/// moderate effects early. `benches/decision-cost`: with a budget of 30 the cheapest
/// exponent with fixed n = 20's power (0.3 moves the first look to 6 blocks, 0.2 costs
/// more node-hours).
pub const POWER_SPENDING_RHO: f64 = 0.25;

/// How α is spent over the information fraction `t`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Spending {
    /// Lan–DeMets O'Brien–Fleming type: `2 − 2Φ(z_{1−α/2}/√t)`.
    ObrienFleming,
    /// Power family `α·t^ρ` (Kim & DeMets).
    Power(f64),
}

impl Spending {
    /// Cumulative α spent by fraction `t`.
    pub fn spent(&self, t: f64, alpha: f64) -> f64 {
        match *self {
            Spending::ObrienFleming => obf_spending(t, alpha),
            Spending::Power(rho) if t > 0.0 => alpha * t.min(1.0).powf(rho),
            Spending::Power(_) => 0.0,
        }
    }

    fn rule_text(&self) -> String {
        match self {
            Spending::ObrienFleming => {
                "Lan–DeMets alpha spending, O'Brien–Fleming type α(t) = 2 − 2Φ(z_{1−α/2}/√t); \
                 boundaries by recursive numerical integration (Armitage–McPherson–Rowe)"
                    .to_string()
            }
            Spending::Power(rho) => format!(
                "alpha spending α·t^{rho} (power family), looks the exact test cannot reach \
                 left out and their α spent later; boundaries by recursive numerical \
                 integration (Armitage–McPherson–Rowe)"
            ),
        }
    }
}

/// A planned set of looks and their boundaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequentialPlan {
    /// Overall one-sided false-accept rate over all looks.
    pub alpha: f64,
    /// Information fraction of each look, increasing, the last one 1.
    pub fractions: Vec<f64>,
    /// α spent at each look (increments of the spending function).
    pub spent: Vec<f64>,
    /// z boundary of each look (`+∞` is written as `None` where nothing can be spent).
    pub z_boundaries: Vec<Option<f64>>,
    /// Nominal one-sided level of each look: `1 − Φ(c_k)`.
    pub nominal_alpha: Vec<f64>,
    /// Human-readable name of the rule, for the report.
    pub rule: String,
}

impl SequentialPlan {
    /// `looks` equally spaced looks (fractions k/K), e.g. adding the same number of blocks
    /// before each look.
    pub fn equally_spaced(looks: u32, alpha: f64) -> Result<Self, StatsError> {
        let k = looks.max(1);
        let fractions: Vec<f64> = (1..=k).map(|i| i as f64 / k as f64).collect();
        Self::obrien_fleming(&fractions, alpha)
    }

    /// Looks at the given information fractions (e.g. `n_k / n_max`).
    /// Remembered per process ([`crate::memo`]): the same looks give the same plan.
    pub fn obrien_fleming(fractions: &[f64], alpha: f64) -> Result<Self, StatsError> {
        static PLANS: Memo<(Vec<f64>, f64), SequentialPlan> = Memo::new();
        PLANS.get_or_try((fractions.to_vec(), alpha), || {
            Self::with_spending(fractions, alpha, Spending::ObrienFleming, &|_| 0.0)
        })
    }

    /// Looks at the given information fractions, spending α by `spending`; look `k` is
    /// dropped from the plan (nominal level 0, nothing spent, its share left for the later
    /// looks) when its nominal level would not exceed `floor(k)` (0-based `k`): the
    /// smallest p-value the exact test can reach at that look, below which the look could
    /// never decide anything.
    pub fn with_spending(
        fractions: &[f64],
        alpha: f64,
        spending: Spending,
        floor: &dyn Fn(usize) -> f64,
    ) -> Result<Self, StatsError> {
        check_plan(fractions, alpha)?;
        let mut spent = Vec::with_capacity(fractions.len());
        let mut z_boundaries = Vec::with_capacity(fractions.len());
        let mut nominal_alpha = Vec::with_capacity(fractions.len());
        // Cumulative α spent by the looks kept so far (a dropped look spends nothing).
        let mut prev_spend = 0.0;
        let mut prev_t = 0.0;
        // Sub-density of S = B(t) on the continuation region of the previous look:
        // (grid points, density values, Simpson weights).
        let mut density: Option<Density> = None;
        for (k, &t) in fractions.iter().enumerate() {
            let target = (spending.spent(t, alpha) - prev_spend).max(0.0);
            let dt = t - prev_t;
            let mut c = boundary(density.as_ref(), t, dt, target);
            if c.is_some_and(|c| normal::sf(c) <= floor(k)) {
                c = None;
            }
            if c.is_some() {
                prev_spend = spending.spent(t, alpha);
                spent.push(target);
            } else {
                spent.push(0.0);
            }
            z_boundaries.push(c);
            nominal_alpha.push(c.map_or(0.0, normal::sf));
            density = Some(continuation_density(density.as_ref(), t, dt, c));
            prev_t = t;
        }
        Ok(SequentialPlan {
            alpha,
            fractions: fractions.to_vec(),
            spent,
            z_boundaries,
            nominal_alpha,
            rule: spending.rule_text(),
        })
    }

    /// Nominal one-sided level at `look` (1-based). Looks beyond the plan get 0: the
    /// whole α has been spent.
    pub fn nominal(&self, look: u32) -> f64 {
        if look == 0 {
            return 0.0;
        }
        self.nominal_alpha
            .get(look as usize - 1)
            .copied()
            .unwrap_or(0.0)
    }
}

fn check_plan(fractions: &[f64], alpha: f64) -> Result<(), StatsError> {
    if !(alpha > 0.0 && alpha < 0.5) {
        return Err(StatsError::InvalidConfig(format!(
            "sequential alpha {alpha} must be in (0, 0.5)"
        )));
    }
    if fractions.is_empty()
        || fractions.windows(2).any(|w| w[1] <= w[0])
        || fractions[0] <= 0.0
        || (fractions[fractions.len() - 1] - 1.0).abs() > 1e-12
    {
        return Err(StatsError::InvalidConfig(format!(
            "information fractions {fractions:?} must increase strictly from above 0 to 1"
        )));
    }
    Ok(())
}

/// Sub-density of `B(t)` on the previous look's continuation region: (grid, values,
/// Simpson weights); `None` before the first look.
type Density = (Vec<f64>, Vec<f64>, Vec<f64>);

/// The z boundary at fraction `t` that a path still running after the previous look
/// crosses with probability `target`; `None` where nothing is to be spent.
fn boundary(density: Option<&Density>, t: f64, dt: f64, target: f64) -> Option<f64> {
    if target <= 1e-300 {
        return None;
    }
    let sd = dt.sqrt();
    // Probability of crossing at this look with z boundary c.
    let cross = |c: f64| -> f64 {
        let b = c * t.sqrt();
        match density {
            None => normal::sf(b / sd),
            Some((u, f, w)) => u
                .iter()
                .zip(f)
                .zip(w)
                .map(|((u, f), w)| w * f * normal::sf((b - u) / sd))
                .sum(),
        }
    };
    // cross() decreases in c; bracket then bisect.
    let (mut lo, mut hi) = (-10.0f64, 40.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if cross(mid) > target {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-10 {
            break;
        }
    }
    Some(0.5 * (lo + hi))
}

/// Sub-density on the continuation region (−8√t, c√t) of this look, for the next look
/// (a look without a boundary continues everywhere).
fn continuation_density(density: Option<&Density>, t: f64, dt: f64, c: Option<f64>) -> Density {
    let sd = dt.sqrt();
    let upper = c.unwrap_or(LOWER_SD + 40.0) * t.sqrt();
    let lower = -LOWER_SD * t.sqrt();
    let (grid, weights) = simpson_grid(lower, upper.max(lower + 1e-9));
    let values: Vec<f64> = match density {
        None => grid.iter().map(|s| normal::pdf(s / sd) / sd).collect(),
        Some((u, f, w)) => grid
            .iter()
            .map(|s| {
                u.iter()
                    .zip(f)
                    .zip(w)
                    .map(|((u, f), w)| w * f * normal::pdf((s - u) / sd) / sd)
                    .sum()
            })
            .collect(),
    };
    (grid, values, weights)
}

fn simpson_grid(lower: f64, upper: f64) -> (Vec<f64>, Vec<f64>) {
    let h = (upper - lower) / (GRID - 1) as f64;
    let grid = (0..GRID).map(|i| lower + h * i as f64).collect();
    let weights = (0..GRID)
        .map(|i| {
            let w = if i == 0 || i == GRID - 1 {
                1.0
            } else if i % 2 == 1 {
                4.0
            } else {
                2.0
            };
            w * h / 3.0
        })
        .collect();
    (grid, weights)
}

/// Nominal one-sided level for look `look` (1-based) of `planned_looks` equally spaced
/// looks with overall level `alpha` (Lan–DeMets O'Brien–Fleming type; see the module
/// docs). Returns 0 for look 0, looks beyond the plan, or an invalid `alpha`.
pub fn sequential_alpha(look: u32, planned_looks: u32, alpha: f64) -> f64 {
    match SequentialPlan::equally_spaced(planned_looks, alpha) {
        Ok(plan) => plan.nominal(look),
        Err(_) => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_look_is_plain_alpha() {
        assert!((sequential_alpha(1, 1, 0.05) - 0.05).abs() < 1e-9);
    }

    #[test]
    fn matches_published_obf_boundaries() {
        // Lan–DeMets O'Brien–Fleming, 5 equally spaced looks, one-sided 0.025: the
        // boundaries tabulated in the group-sequential literature (e.g. Jennison &
        // Turnbull; gsDesign's sfLDOF) are 4.877, 3.357, 2.680, 2.290, 2.031.
        let plan = SequentialPlan::equally_spaced(5, 0.025).unwrap();
        let expect = [4.877, 3.357, 2.680, 2.290, 2.031];
        for (c, e) in plan.z_boundaries.iter().zip(expect) {
            assert!((c.unwrap() - e).abs() < 2e-3, "{c:?} vs {e}");
        }
    }

    #[test]
    fn nominal_levels_increase_and_stay_below_alpha() {
        let plan = SequentialPlan::equally_spaced(5, 0.05).unwrap();
        assert!(plan.nominal_alpha.windows(2).all(|w| w[0] < w[1]));
        assert!(plan.nominal_alpha.iter().all(|&a| a < 0.05));
        assert!((plan.spent.iter().sum::<f64>() - 0.05).abs() < 1e-9);
        assert_eq!(plan.nominal(6), 0.0);
    }
}
