//! Tests for mutants of signed_rank.rs, mann_whitney.rs, sequential.rs and rank.rs that the
//! rest of the suite did not catch (docs/MUTANTS.md, optgate-stats, second run). Every
//! expected value is worked out by hand from the definitions or computed independently
//! with mpmath (30 digits): never read back from this crate. Tolerances allow for the
//! normal quantile this crate uses (statrs), which is off by about 5e-11 relative at
//! z_{0.975}; the spending function inherits that.

use optgate_stats::mann_whitney::MannWhitneyDist;
use optgate_stats::signed_rank::SignedRankDist;
use optgate_stats::{
    Alternative, PMethod, SequentialPlan, hodges_lehmann_shift, mann_whitney_u, obf_spending,
    sequential_alpha,
};

fn close(what: &str, got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got:e}, want {want:e} (tolerance {tol:e})"
    );
}

// ---------------------------------------------------------------- signed rank

#[test]
fn signed_rank_distribution_size_and_tails_outside_the_range() {
    // n = 7: W+ ranges over 0 ..= 28; each pmf entry is a multiple of 2⁻⁷, so the sums
    // below are exact.
    let d = SignedRankDist::new(7);
    assert_eq!(d.n(), 7);
    assert_eq!(d.max(), 28);
    assert_eq!(d.cdf(-1), 0.0);
    assert_eq!(d.cdf(0), 1.0 / 128.0);
    assert_eq!(d.cdf(28), 1.0);
    assert_eq!(d.cdf(1000), 1.0);
    assert_eq!(d.sf(-3), 1.0);
    assert_eq!(d.sf(0), 1.0);
    assert_eq!(d.sf(28), 1.0 / 128.0);
    assert_eq!(d.sf(29), 0.0);
    assert_eq!(d.sf(1000), 0.0);
    assert_eq!(SignedRankDist::new(3).n(), 3);
}

// ---------------------------------------------------------------- Mann–Whitney

#[test]
fn mann_whitney_distribution_sizes_and_tails_outside_the_range() {
    // m = 3, n = 4: U ranges over 0 ..= 12, P(U = 0) = P(U = 12) = 1 / C(7, 3) = 1/35.
    let d = MannWhitneyDist::new(3, 4).unwrap();
    assert_eq!(d.sizes(), (3, 4));
    assert_eq!(MannWhitneyDist::new(4, 3).unwrap().sizes(), (4, 3));
    assert_eq!(MannWhitneyDist::new(1, 2).unwrap().sizes(), (1, 2));
    assert_eq!(d.cdf(-1), 0.0);
    close("P(U ≤ 0)", d.cdf(0), 1.0 / 35.0, 1e-15);
    close("P(U ≤ 12)", d.cdf(12), 1.0, 1e-15);
    close("P(U ≤ 1000)", d.cdf(1000), 1.0, 1e-15);
    assert_eq!(d.sf(-1), 1.0);
    assert_eq!(d.sf(0), 1.0);
    close("P(U ≥ 12)", d.sf(12), 1.0 / 35.0, 1e-15);
    assert_eq!(d.sf(13), 0.0);
    assert_eq!(d.sf(1000), 0.0);
}

#[test]
fn mann_whitney_with_an_empty_sample_is_degenerate() {
    for (x, y) in [(&[][..], &[1.0, 2.0][..]), (&[1.0, 2.0][..], &[][..])] {
        for alt in [Alternative::Greater, Alternative::Less] {
            let t = mann_whitney_u(x, y, alt);
            assert_eq!(t.method, PMethod::Degenerate);
            assert_eq!((t.p_value, t.n_used, t.statistic), (1.0, 0, 0.0));
        }
    }
}

#[test]
fn mann_whitney_counts_both_samples() {
    // n_used is m + n: 3 + 4 = 7, without ties (exact) and with them (normal).
    let t = mann_whitney_u(
        &[1.0, 2.0, 3.0],
        &[4.0, 5.0, 6.0, 7.0],
        Alternative::Greater,
    );
    assert_eq!((t.method, t.n_used), (PMethod::Exact, 7));
    let t = mann_whitney_u(&[1.0, 2.0, 2.0], &[2.0, 3.0, 4.0, 5.0], Alternative::Less);
    assert_eq!((t.method, t.n_used), (PMethod::Normal, 7));
}

#[test]
fn shift_estimate_needs_both_samples() {
    assert!(hodges_lehmann_shift(&[], &[1.0, 2.0], 0.05).is_none());
    assert!(hodges_lehmann_shift(&[1.0, 2.0], &[], 0.05).is_none());
    assert!(hodges_lehmann_shift(&[], &[], 0.05).is_none());
}

/// m = n = 63 (m + n = 126, beyond the exact table): k − 1 = ⌊mn/2 + z_α·s − 1/2⌋ with
/// s² = mn(m+n+1)/12, i.e. μ = 1984.5, s = 204.951823607…; k and the order statistics of
/// the 3969 differences x_i − y_j computed with mpmath and Python floats.
#[test]
fn shift_interval_beyond_the_exact_table_uses_the_normal_order_statistic() {
    let x: Vec<f64> = (0..63).map(|i| i as f64).collect();
    let y: Vec<f64> = (0..63).map(|j| 0.61803398875 * j as f64 + 0.1).collect();
    assert!(MannWhitneyDist::new(63, 63).is_none());
    let cases = [
        (0.05, 1647, 6.380266573749996, 17.101626123750002),
        (0.01, 1508, 4.178640449999996, 19.303252247499998),
        (0.2, 1812, 8.998300562499995, 14.483592135),
        // α = Φ((1 − μ)/s): μ + z_α·s − 1/2 = 1/2, so c = 0 and k = 1: the extreme
        // differences.
        (1.8719186445486082e-22, 1, -38.418107302500005, 61.9),
    ];
    for (alpha, k, low, high) in cases {
        let e = hodges_lehmann_shift(&x, &y, alpha).unwrap();
        assert_eq!(e.k, Some(k), "alpha {alpha}");
        close("ci_low", e.ci_low.unwrap(), low, 1e-12);
        close("ci_high", e.ci_high.unwrap(), high, 1e-12);
        close("estimate", e.estimate, 11.740946348749997, 1e-12);
    }
    // Far below: c < 0, no finite bound.
    let e = hodges_lehmann_shift(&x, &y, 1e-30).unwrap();
    assert_eq!((e.k, e.ci_low, e.ci_high), (None, None, None));
}

// ---------------------------------------------------------------- sequential

#[test]
fn sequential_plans_refuse_alpha_outside_the_open_interval() {
    for alpha in [0.0, -0.1, 0.5, 0.7, f64::NAN] {
        assert!(
            SequentialPlan::obrien_fleming(&[1.0], alpha).is_err(),
            "{alpha}"
        );
        assert!(SequentialPlan::equally_spaced(3, alpha).is_err(), "{alpha}");
        assert_eq!(sequential_alpha(1, 3, alpha), 0.0, "{alpha}");
    }
    assert!(SequentialPlan::obrien_fleming(&[1.0], 0.499).is_ok());
    assert!(SequentialPlan::obrien_fleming(&[1.0], 1e-6).is_ok());
}

#[test]
fn sequential_plans_refuse_fractions_that_do_not_rise_strictly_from_above_0_to_1() {
    for fractions in [
        &[][..],
        &[0.5, 0.5, 1.0],
        &[0.6, 0.4, 1.0],
        &[0.0, 1.0],
        &[-0.5, 1.0],
        &[0.5, 0.9],
        &[0.5, 1.0 + 1e-9],
        &[0.5, 1.0, 1.0],
    ] {
        assert!(
            SequentialPlan::obrien_fleming(fractions, 0.05).is_err(),
            "{fractions:?}"
        );
    }
    assert!(SequentialPlan::obrien_fleming(&[0.5, 1.0], 0.05).is_ok());
}

#[test]
fn spending_function_at_its_edges() {
    // α(t) = 2 − 2Φ(z_{1−α/2}/√t): 0 for t ≤ 0, α at t = 1 (and t is capped at 1).
    assert_eq!(obf_spending(0.0, 0.05), 0.0);
    assert_eq!(obf_spending(-1.0, 0.05), 0.0);
    close("α(1)", obf_spending(1.0, 0.05), 0.05, 1e-10);
    close("α(2)", obf_spending(2.0, 0.05), 0.05, 1e-10);
    // mpmath: 2 − 2Φ(z_{0.9875}/√0.5).
    close(
        "α(0.5)",
        obf_spending(0.5, 0.025),
        0.0015253227579889089,
        1e-12,
    );
}

/// Two looks: Z₁ and Z₂ are standard normal with correlation √t₁. c₁ = z_{1−α(t₁)} in
/// closed form; c₂ solves ∫_{−∞}^{c₁} φ(z)·Q((c₂ − √t₁·z)/√(1 − t₁)) dz = α − α(t₁),
/// computed with mpmath quadrature and root finding (30 digits).
#[test]
fn two_look_boundaries_match_the_bivariate_normal() {
    let cases = [
        (
            0.5,
            0.025,
            0.0015253227579889089,
            2.9625880427275668,
            1.9685956406374352,
            0.024499771789662677,
        ),
        (
            0.3,
            0.05,
            0.00034571958016904396,
            3.3929513546734777,
            1.6459895116397843,
            0.049882959201915,
        ),
    ];
    for (t1, alpha, spent1, c1, c2, nominal2) in cases {
        let plan = SequentialPlan::obrien_fleming(&[t1, 1.0], alpha).unwrap();
        close("spent 1", plan.spent[0], spent1, 1e-12);
        close("spent 2", plan.spent[1], alpha - spent1, 1e-10);
        close("c1", plan.z_boundaries[0].unwrap(), c1, 1e-8);
        close("c2", plan.z_boundaries[1].unwrap(), c2, 1e-7);
        close("nominal 1", plan.nominal(1), spent1, 1e-12);
        close("nominal 2", plan.nominal(2), nominal2, 1e-9);
    }
}

/// A first look so early that it can spend nothing (α(0.001) underflows to 0): its
/// boundary is +∞, all the mass continues, and the second look is a plain one-sided test
/// at α: c₂ = z_{0.975} = 1.959963984540054.
#[test]
fn a_look_that_spends_nothing_passes_all_its_mass_on() {
    let plan = SequentialPlan::obrien_fleming(&[0.001, 1.0], 0.025).unwrap();
    assert_eq!(plan.spent[0], 0.0);
    assert_eq!(plan.z_boundaries[0], None);
    assert_eq!(plan.nominal(1), 0.0);
    close("c2", plan.z_boundaries[1].unwrap(), 1.959963984540054, 1e-7);
    close("nominal 2", plan.nominal(2), 0.025, 1e-9);
}

#[test]
fn looks_outside_the_plan_and_zero_planned_looks() {
    let plan = SequentialPlan::equally_spaced(3, 0.05).unwrap();
    assert_eq!(plan.nominal(0), 0.0);
    assert_eq!(plan.nominal(4), 0.0);
    assert_eq!(sequential_alpha(0, 3, 0.05), 0.0);
    assert_eq!(sequential_alpha(4, 3, 0.05), 0.0);
    // Zero planned looks means one look at the whole α.
    let one = SequentialPlan::equally_spaced(0, 0.05).unwrap();
    assert_eq!(one.fractions, vec![1.0]);
    close("single look", one.nominal(1), 0.05, 1e-9);
    close("single look", sequential_alpha(1, 0, 0.05), 0.05, 1e-9);
}
