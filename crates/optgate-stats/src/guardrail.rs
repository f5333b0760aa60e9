//! Guardrail metrics and figures of merit: the change of a per-run value in percent of the
//! baseline, oriented so that positive is better, with its interval; and the veto rule by
//! which a guardrail that regressed beyond its limit turns an acceptance into a rejection
//! (docs/STATISTICS.md, "Guardrails").

use serde::{Deserialize, Serialize};

use crate::fmt::fmt_signed_pct;
use crate::htest::ShiftEstimate;
use crate::mann_whitney::hodges_lehmann_shift;
use crate::model::{Better, Design, GuardrailSpec};
use crate::signed_rank::hodges_lehmann_paired;

/// One guardrail of one variant, as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardrailResult {
    pub name: String,
    #[serde(default)]
    pub unit: Option<String>,
    pub better: Better,
    /// Change of the guardrail's value in percent of the baseline's, positive = better
    /// (a rate 30 % lower, or a time 30 % longer, is −30 %); null when not measured for
    /// every compared run.
    pub impact_pct: Option<f64>,
    /// Its interval at `1 − 2α`; null where an end is unbounded at this n.
    pub impact_ci_low: Option<f64>,
    pub impact_ci_high: Option<f64>,
    /// The regression tolerated, in percent; null: reported only.
    pub max_regression_pct: Option<f64>,
    /// The whole interval lies beyond the tolerated regression: `impact_ci_high <
    /// −max_regression_pct`. Such a guardrail vetoes an acceptance.
    pub regressed: bool,
}

/// The change in percent, positive = better, of a log speed-up `g = ln t_base − ln t_var`
/// of values made "lower is better" (rates as reciprocals): for a time `100·(1 − e^(−g))`,
/// the share saved; for a rate `100·(e^g − 1)`, the gain (a 20 % higher rate is +20 %).
/// Increasing in `g` for both, so an interval's ends map to the ends.
pub fn oriented_change_pct(g: f64, better: Better) -> f64 {
    match better {
        Better::Lower => 100.0 * (1.0 - (-g).exp()),
        Better::Higher => 100.0 * (g.exp() - 1.0),
    }
}

/// The change and its interval from the estimate of `g` (see [`oriented_change_pct`]).
pub fn oriented_change(est: &ShiftEstimate, better: Better) -> (f64, (Option<f64>, Option<f64>)) {
    let f = |g: f64| oriented_change_pct(g, better);
    (f(est.estimate), (est.ci_low.map(f), est.ci_high.map(f)))
}

/// Whether the whole interval is a regression beyond the limit: its upper end (the most
/// favourable change the data allow at level α, one-sided) is below `−max_regression_pct`.
/// No limit, or an unbounded upper end, is never a regression.
pub fn regressed(impact_ci_high: Option<f64>, max_regression_pct: Option<f64>) -> bool {
    matches!((impact_ci_high, max_regression_pct), (Some(h), Some(m)) if h < -m)
}

/// One guardrail compared between aligned per-run values of the baseline and the variant
/// (paired: `base[i]` and `var[i]` are one block), at the analysis' level `alpha`: the
/// same Hodges–Lehmann estimate and distribution-free interval as the primary metric's.
/// `None` values (not measured for every run) give no estimate.
pub fn compare_guardrail(
    spec: &GuardrailSpec,
    design: Design,
    values: Option<(&[f64], &[f64])>,
    alpha: f64,
) -> GuardrailResult {
    let lower = |v: &f64| match spec.better {
        Better::Lower => v.ln(),
        Better::Higher => -v.ln(),
    };
    let est = values.and_then(|(base, var)| {
        let x: Vec<f64> = base.iter().map(lower).collect();
        let y: Vec<f64> = var.iter().map(lower).collect();
        match design {
            Design::Paired => {
                let d: Vec<f64> = x.iter().zip(&y).map(|(b, v)| b - v).collect();
                hodges_lehmann_paired(&d, alpha)
            }
            Design::Independent => hodges_lehmann_shift(&x, &y, alpha),
        }
    });
    let (impact, (lo, hi)) = match est {
        Some(e) => {
            let (p, ci) = oriented_change(&e, spec.better);
            (Some(p), ci)
        }
        None => (None, (None, None)),
    };
    GuardrailResult {
        name: spec.name.clone(),
        unit: spec.unit.clone(),
        better: spec.better,
        impact_pct: impact,
        impact_ci_low: lo,
        impact_ci_high: hi,
        max_regression_pct: spec.max_regression_pct,
        regressed: regressed(hi, spec.max_regression_pct),
    }
}

/// The reason an acceptance is vetoed: the first guardrail that regressed beyond its
/// limit, named; `None` when none did.
pub fn veto_reason(guardrails: &[GuardrailResult], level: f64) -> Option<String> {
    let g = guardrails.iter().find(|g| g.regressed)?;
    let pct = |v: Option<f64>| v.map_or("n/a".to_string(), fmt_signed_pct);
    Some(format!(
        "guardrail {} regressed: {} ({level:.0}% CI {} to {}), the whole interval beyond \
         its limit of −{}%",
        g.name,
        pct(g.impact_pct),
        pct(g.impact_ci_low),
        pct(g.impact_ci_high),
        g.max_regression_pct.unwrap_or_default()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(better: Better, max: Option<f64>) -> GuardrailSpec {
        GuardrailSpec {
            name: "stream".into(),
            better,
            unit: Some("GB/s".into()),
            max_regression_pct: max,
        }
    }

    /// Orientation: a rate 20 % higher is +20 %, a time 20 % shorter is +20 %, and each
    /// the other way is negative (a sign flipped, or a rate treated as a time, fails).
    #[test]
    fn the_change_is_oriented_by_better() {
        // Rate 10 → 12: t = 1/v, g = ln(1/10) − ln(1/12) = ln 1.2.
        let g = (1.2f64).ln();
        assert!((oriented_change_pct(g, Better::Higher) - 20.0).abs() < 1e-9);
        // Time 10 → 8: g = ln 10 − ln 8.
        let g = (10.0f64 / 8.0).ln();
        assert!((oriented_change_pct(g, Better::Lower) - 20.0).abs() < 1e-9);
        // Rate 10 → 7: −30 %; time 10 → 13: −30 %.
        assert!((oriented_change_pct((0.7f64).ln(), Better::Higher) + 30.0).abs() < 1e-9);
        assert!((oriented_change_pct((10.0f64 / 13.0).ln(), Better::Lower) + 30.0).abs() < 1e-9);
    }

    /// The guardrail's values in their own orientation: a rate 30 % lower in every block
    /// is −30 % with an interval around it; with a limit of 10 % it regressed, with 40 %
    /// or no limit it did not.
    #[test]
    fn a_guardrail_that_regressed_beyond_its_limit_is_flagged() {
        let base: Vec<f64> = (0..8).map(|b| 10.0 + 0.1 * b as f64).collect();
        let var: Vec<f64> = base
            .iter()
            .enumerate()
            .map(|(i, v)| v * (0.7 + 0.002 * i as f64))
            .collect();
        let vals = Some((base.as_slice(), var.as_slice()));
        let r = compare_guardrail(
            &spec(Better::Higher, Some(10.0)),
            Design::Paired,
            vals,
            0.05,
        );
        let pct = r.impact_pct.unwrap();
        assert!((pct + 29.3).abs() < 0.5, "{pct}");
        assert!(r.impact_ci_low.unwrap() <= pct && pct <= r.impact_ci_high.unwrap());
        assert!(r.regressed, "{r:?}");
        let loose = compare_guardrail(
            &spec(Better::Higher, Some(40.0)),
            Design::Paired,
            vals,
            0.05,
        );
        assert!(!loose.regressed);
        let none = compare_guardrail(&spec(Better::Higher, None), Design::Paired, vals, 0.05);
        assert!(!none.regressed);
        // The same numbers as times: about 29 % less time is an improvement, never a regression.
        let t = compare_guardrail(&spec(Better::Lower, Some(10.0)), Design::Paired, vals, 0.05);
        assert!(t.impact_pct.unwrap() > 25.0 && !t.regressed, "{t:?}");
        assert!(
            veto_reason(std::slice::from_ref(&r), 90.0)
                .unwrap()
                .starts_with("guardrail stream regressed")
        );
        assert_eq!(veto_reason(&[loose, none, t], 90.0), None);
    }

    /// The rule's edges: the upper end must be strictly below −limit; an unbounded end or
    /// no limit never vetoes.
    #[test]
    fn the_veto_needs_the_whole_interval_beyond_the_limit() {
        assert!(regressed(Some(-10.1), Some(10.0)));
        assert!(!regressed(Some(-10.0), Some(10.0)));
        assert!(!regressed(Some(-9.0), Some(10.0)));
        assert!(!regressed(None, Some(10.0)));
        assert!(!regressed(Some(-50.0), None));
    }
}
