//! The rank tests, Hodges–Lehmann intervals and whole analyses against reference values
//! computed independently with SciPy (`tests/fixtures/make_reference.py`, committed JSON).
//! p-values must agree to 1e-9 absolute, estimates and bounds to 1e-9 relative.

use optgate_stats::{
    Alternative, AnalysisConfig, ArmData, Design, PMethod, hodges_lehmann_paired,
    hodges_lehmann_shift, mann_whitney_u, wilcoxon_signed_rank,
};
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    scipy: String,
    signed_rank: Vec<SignedRankCase>,
    mann_whitney: Vec<MannWhitneyCase>,
    analyses: Vec<AnalysisCase<ExpectedVariant>>,
    /// Experiments shaped for the planning numbers (a one-time cost repaid after many
    /// epochs, Holm families of 2 and 3, replicate estimates above the floor).
    planning: Vec<AnalysisCase<PlanningVariant>>,
}

#[derive(Deserialize)]
struct Hl {
    estimate: f64,
    k: Option<usize>,
    ci_low: Option<f64>,
    ci_high: Option<f64>,
}

#[derive(Deserialize)]
struct SignedRankCase {
    id: String,
    d: Vec<f64>,
    delta: f64,
    alpha: f64,
    method: String,
    statistic: f64,
    p_greater: f64,
    p_less: f64,
    hl: Hl,
}

#[derive(Deserialize)]
struct MannWhitneyCase {
    id: String,
    x: Vec<f64>,
    y: Vec<f64>,
    delta: f64,
    alpha: f64,
    method: String,
    statistic: f64,
    p_greater: f64,
    p_less: f64,
    hl: Hl,
}

#[derive(Deserialize)]
struct AnalysisCase<E> {
    id: String,
    design: Design,
    alpha: f64,
    min_effect_pct: f64,
    baseline: ArmData,
    variants: Vec<ArmData>,
    expected: Vec<E>,
}

#[derive(Deserialize)]
struct ExpectedSpeedup {
    estimate: f64,
    ci_low: f64,
    ci_high: f64,
}

#[derive(Deserialize)]
struct ExpectedVariant {
    name: String,
    p_method: String,
    p_improvement: f64,
    p_no_worthwhile: f64,
    p_improvement_adjusted: f64,
    p_no_worthwhile_adjusted: f64,
    speedup: ExpectedSpeedup,
    first_epoch_change_pct: f64,
    first_epoch_baseline_s: f64,
    first_epoch_variant_s: f64,
    app_impact_pct: f64,
    #[serde(flatten)]
    planning: ExpectedPlanning,
}

/// The reference script's minimum detectable effect, replicates that would likely decide
/// and break-even epoch (see `add_planning` in make_reference.py).
#[derive(Deserialize)]
struct ExpectedPlanning {
    mde_pct: f64,
    replicates_to_decide: Option<u32>,
    breakeven_epoch: Option<u32>,
    family: usize,
}

#[derive(Deserialize)]
struct PlanningVariant {
    name: String,
    #[serde(flatten)]
    planning: ExpectedPlanning,
}

fn fixture() -> Fixture {
    let text = include_str!("../fixtures/scipy_reference.json");
    serde_json::from_str(text).expect("fixture parses")
}

fn close_abs(id: &str, what: &str, got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-9,
        "{id}: {what}: got {got:e}, SciPy {want:e}"
    );
}

fn close_rel(id: &str, what: &str, got: f64, want: f64) {
    let tol = 1e-9 * want.abs().max(1e-300);
    assert!(
        (got - want).abs() <= tol || got == want,
        "{id}: {what}: got {got:e}, reference {want:e}"
    );
}

fn method_name(m: PMethod) -> &'static str {
    match m {
        PMethod::Exact => "exact",
        PMethod::Normal => "asymptotic",
        PMethod::Degenerate => "degenerate",
    }
}

fn check_hl(id: &str, got: optgate_stats::ShiftEstimate, want: &Hl) {
    close_rel(id, "HL estimate", got.estimate, want.estimate);
    assert_eq!(got.k, want.k, "{id}: order statistic k");
    match (got.ci_low, want.ci_low) {
        (Some(g), Some(w)) => close_rel(id, "ci_low", g, w),
        (g, w) => assert_eq!(g, w, "{id}: ci_low"),
    }
    match (got.ci_high, want.ci_high) {
        (Some(g), Some(w)) => close_rel(id, "ci_high", g, w),
        (g, w) => assert_eq!(g, w, "{id}: ci_high"),
    }
}

#[test]
fn fixture_covers_what_the_contract_asks() {
    let f = fixture();
    assert!(!f.scipy.is_empty());
    let ns: Vec<usize> = f.signed_rank.iter().map(|c| c.d.len()).collect();
    assert!(ns.contains(&5) && ns.contains(&30));
    assert!(f.signed_rank.iter().any(|c| c.id.contains("ties")));
    assert!(f.signed_rank.iter().any(|c| c.id.contains("zeros")));
    assert!(f.signed_rank.iter().any(|c| c.method == "exact"));
    assert!(f.mann_whitney.iter().any(|c| c.method == "asymptotic"));
    assert!(f.analyses.len() >= 2);
}

#[test]
fn wilcoxon_signed_rank_matches_scipy() {
    for c in fixture().signed_rank {
        let shifted: Vec<f64> = c.d.iter().map(|v| v - c.delta).collect();
        let g = wilcoxon_signed_rank(&shifted, Alternative::Greater);
        let l = wilcoxon_signed_rank(&shifted, Alternative::Less);
        assert_eq!(method_name(g.method), c.method, "{}: method", c.id);
        close_abs(&c.id, "W+", g.statistic, c.statistic);
        close_abs(&c.id, "p greater", g.p_value, c.p_greater);
        close_abs(&c.id, "p less", l.p_value, c.p_less);
    }
}

#[test]
fn hodges_lehmann_paired_matches_reference() {
    for c in fixture().signed_rank {
        let e = hodges_lehmann_paired(&c.d, c.alpha).unwrap();
        check_hl(&c.id, e, &c.hl);
    }
}

#[test]
fn mann_whitney_matches_scipy() {
    for c in fixture().mann_whitney {
        let ys: Vec<f64> = c.y.iter().map(|v| v + c.delta).collect();
        let g = mann_whitney_u(&c.x, &ys, Alternative::Greater);
        let l = mann_whitney_u(&c.x, &ys, Alternative::Less);
        assert_eq!(method_name(g.method), c.method, "{}: method", c.id);
        close_abs(&c.id, "U1", g.statistic, c.statistic);
        close_abs(&c.id, "p greater", g.p_value, c.p_greater);
        close_abs(&c.id, "p less", l.p_value, c.p_less);
    }
}

#[test]
fn hodges_lehmann_shift_matches_reference() {
    for c in fixture().mann_whitney {
        let e = hodges_lehmann_shift(&c.x, &c.y, c.alpha).unwrap();
        check_hl(&c.id, e, &c.hl);
    }
}

#[test]
fn whole_analyses_match_reference() {
    for case in fixture().analyses {
        let a = optgate_stats::analyze(&case.baseline, &case.variants, &cfg_of(&case)).unwrap();
        assert_eq!(a.variants.len(), case.expected.len());
        for (v, e) in a.variants.iter().zip(&case.expected) {
            let id = format!("{}/{}", case.id, e.name);
            assert_eq!(v.name, e.name);
            check_variant(&id, v, e);
        }
    }
}

/// One variant of a whole analysis against the reference: its p-method, the four
/// p-values, the speed-up and its interval, the first epoch and App Impact.
fn check_variant(id: &str, v: &optgate_stats::VariantAnalysis, e: &ExpectedVariant) {
    let method = v.p_method.as_deref().unwrap();
    assert_eq!(
        method.starts_with("exact"),
        e.p_method == "exact",
        "{id}: {method}"
    );
    close_abs(
        id,
        "p_improvement",
        v.p_improvement.unwrap(),
        e.p_improvement,
    );
    close_abs(
        id,
        "p_no_worthwhile",
        v.p_no_worthwhile.unwrap(),
        e.p_no_worthwhile,
    );
    close_abs(
        id,
        "p_improvement_adjusted",
        v.p_improvement_adjusted.unwrap(),
        e.p_improvement_adjusted,
    );
    close_abs(
        id,
        "p_no_worthwhile_adjusted",
        v.p_no_worthwhile_adjusted.unwrap(),
        e.p_no_worthwhile_adjusted,
    );
    close_rel(
        id,
        "speed-up",
        v.speedup.estimate.unwrap(),
        e.speedup.estimate,
    );
    close_rel(
        id,
        "speed-up low",
        v.speedup.ci_low.unwrap(),
        e.speedup.ci_low,
    );
    close_rel(
        id,
        "speed-up high",
        v.speedup.ci_high.unwrap(),
        e.speedup.ci_high,
    );
    close_rel(
        id,
        "first-epoch change",
        v.first_epoch.change_pct.unwrap(),
        e.first_epoch_change_pct,
    );
    close_rel(
        id,
        "first-epoch baseline",
        v.first_epoch.baseline_s.unwrap(),
        e.first_epoch_baseline_s,
    );
    close_rel(
        id,
        "first-epoch variant",
        v.first_epoch.variant_s.unwrap(),
        e.first_epoch_variant_s,
    );
    close_rel(
        id,
        "App Impact",
        v.app_impact_pct.unwrap(),
        e.app_impact_pct,
    );
}

fn cfg_of<E>(case: &AnalysisCase<E>) -> AnalysisConfig {
    AnalysisConfig {
        design: case.design,
        alpha: case.alpha,
        min_effect_pct: case.min_effect_pct,
        ..AnalysisConfig::default()
    }
}

fn check_planning(id: &str, v: &optgate_stats::VariantAnalysis, want: &ExpectedPlanning) {
    // The normal quantiles come from different libraries (statrs, SciPy): 1e-9 relative
    // in the quantile is far below 1e-7 relative in the MDE.
    let mde = v.mde_pct.unwrap();
    assert!(
        (mde - want.mde_pct).abs() <= 1e-7 * want.mde_pct.abs(),
        "{id}: MDE: got {mde}, reference {}",
        want.mde_pct
    );
    assert_eq!(
        v.replicates_to_decide, want.replicates_to_decide,
        "{id}: replicates to decide"
    );
    assert_eq!(v.breakeven_epoch, want.breakeven_epoch, "{id}: break-even");
}

#[test]
fn planning_numbers_of_whole_analyses_match_reference() {
    for case in fixture().analyses {
        let a = optgate_stats::analyze(&case.baseline, &case.variants, &cfg_of(&case)).unwrap();
        for (v, e) in a.variants.iter().zip(&case.expected) {
            assert_eq!(e.planning.family, case.variants.len());
            check_planning(&format!("{}/{}", case.id, e.name), v, &e.planning);
        }
    }
}

#[test]
fn planning_sets_match_reference() {
    let cases = fixture().planning;
    // The sets exercise what they are for: break-even after several epochs, never and at
    // epoch 1; replicate estimates above the floor and "no realistic n"; families 2 and 3.
    let all: Vec<&ExpectedPlanning> = cases
        .iter()
        .flat_map(|c| c.expected.iter().map(|e| &e.planning))
        .collect();
    assert!(all.iter().any(|p| p.breakeven_epoch.is_some_and(|n| n > 5)));
    assert!(all.iter().any(|p| p.breakeven_epoch == Some(1)));
    assert!(all.iter().any(|p| p.breakeven_epoch.is_none()));
    assert!(all.iter().any(|p| p.replicates_to_decide.is_none()));
    assert!(
        all.iter()
            .any(|p| p.replicates_to_decide.is_some_and(|n| n > 20))
    );
    assert!(all.iter().any(|p| p.family == 2) && all.iter().any(|p| p.family == 3));
    for case in &cases {
        let a = optgate_stats::analyze(&case.baseline, &case.variants, &cfg_of(case)).unwrap();
        assert_eq!(a.variants.len(), case.expected.len(), "{}", case.id);
        for (v, e) in a.variants.iter().zip(&case.expected) {
            assert_eq!(v.name, e.name);
            assert_eq!(e.planning.family, case.variants.len());
            check_planning(&format!("{}/{}", case.id, e.name), v, &e.planning);
        }
    }
}

/// An arm with one value per run, `value(d_i)` for block i, and a guardrail `g` on the
/// same values.
fn figure_of_merit_arm(name: &str, d: &[f64], value: &dyn Fn(f64) -> f64) -> ArmData {
    let mut a = ArmData {
        name: name.into(),
        ..ArmData::default()
    };
    for (i, d) in d.iter().enumerate() {
        a.runs.push(optgate_stats::RunSamples {
            replicate: i as u32 + 1,
            block: Some(i as u32 + 1),
            epochs: std::collections::BTreeMap::from([(1, value(*d))]),
        });
    }
    let values = a.runs.iter().map(|r| r.epochs[&1]).collect();
    a.guardrails.insert("g".into(), values);
    a
}

/// A paired, per-run, higher-is-better analysis at the case's α and δ (as a percentage),
/// with guardrail `g` higher-is-better too.
fn figure_of_merit_config(c: &SignedRankCase) -> AnalysisConfig {
    AnalysisConfig {
        design: Design::Paired,
        alpha: c.alpha,
        min_effect_pct: 100.0 * (c.delta.exp() - 1.0),
        better: optgate_stats::Better::Higher,
        per_run: true,
        guardrails: vec![optgate_stats::GuardrailSpec {
            name: "g".into(),
            better: optgate_stats::Better::Higher,
            ..Default::default()
        }],
        ..AnalysisConfig::default()
    }
}

/// A figure of merit (one value per run, higher is better) is the same exact test on the
/// per-run values: runs built so that the log ratio of block i is SciPy's `d_i` (baseline
/// 1, variant `exp(d_i)`) give SciPy's p-value and Hodges–Lehmann interval, App Impact is
/// `100·(exp(HL) − 1)`, and a guardrail on the same values has the same change and
/// interval. Continuous cases only (the test's δ is passed as a percentage, whose round
/// trip could split ties at zero).
#[test]
fn a_figure_of_merit_is_the_signed_rank_test_on_its_values() {
    let mut checked = 0;
    for c in fixture().signed_rank {
        if !c.id.contains("continuous") {
            continue;
        }
        let base = figure_of_merit_arm("baseline", &c.d, &|_| 1.0);
        let var = figure_of_merit_arm("v", &c.d, &|d| d.exp());
        let a = optgate_stats::analyze(&base, &[var], &figure_of_merit_config(&c)).unwrap();
        let v = &a.variants[0];
        close_abs(
            &c.id,
            "p improvement",
            v.p_improvement.unwrap(),
            c.p_greater,
        );
        close_abs(
            &c.id,
            "p no worthwhile",
            v.p_no_worthwhile.unwrap(),
            c.p_less,
        );
        let pct = |g: f64| 100.0 * (g.exp() - 1.0);
        close_rel(
            &c.id,
            "speed-up",
            v.speedup.estimate.unwrap(),
            c.hl.estimate.exp(),
        );
        close_rel(
            &c.id,
            "App Impact",
            v.app_impact_pct.unwrap(),
            pct(c.hl.estimate),
        );
        let g = &v.guardrails[0];
        close_rel(
            &c.id,
            "guardrail",
            g.impact_pct.unwrap(),
            pct(c.hl.estimate),
        );
        for (got, want) in [
            (v.app_impact_ci_low, c.hl.ci_low),
            (v.app_impact_ci_high, c.hl.ci_high),
            (g.impact_ci_low, c.hl.ci_low),
            (g.impact_ci_high, c.hl.ci_high),
        ] {
            match (got, want) {
                (Some(g), Some(w)) => close_rel(&c.id, "interval end", g, pct(w)),
                (g, w) => assert_eq!(g.is_some(), w.is_some(), "{}: interval end", c.id),
            }
        }
        checked += 1;
    }
    assert!(checked >= 10, "{checked} cases");
}
