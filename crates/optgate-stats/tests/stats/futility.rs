//! Rule 5′: a variant whose App Impact stays ≤ 0 even at the upper end of its
//! interval cannot be accepted, so it is rejected instead of staying inconclusive. Checked on
//! a hand-made case, as a boundary (the decision follows the interval's upper end and
//! nothing else), and by seeded simulation: A/A false accepts stay at α or below with the
//! rule in place, and how often it fires when the truth is exactly "no impact" or a real
//! gain.

use std::collections::BTreeMap;

use optgate_stats::{
    AnalysisConfig, ArmData, Decision, RunSamples, analyze, hodges_lehmann_paired,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn gauss(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Paired blocks: block, run and epoch noise of `sd` each (log scale). The variant's steady
/// epochs are `1/speedup` of the baseline's, its epoch 1 `first_factor` times.
fn experiment(
    rng: &mut ChaCha8Rng,
    n: u32,
    epochs: u32,
    speedup: f64,
    first_factor: f64,
    sd: f64,
) -> (ArmData, ArmData) {
    let mut arms = [ArmData::default(), ArmData::default()];
    arms[0].name = "baseline".into();
    arms[1].name = "variant".into();
    for b in 1..=n {
        let block = sd * gauss(rng);
        for (i, arm) in arms.iter_mut().enumerate() {
            let run = sd * gauss(rng);
            let mut e_map = BTreeMap::new();
            for e in 1..=epochs {
                let level = match (e, i) {
                    (1, 0) => 12.0,
                    (1, _) => 12.0 * first_factor,
                    (_, 0) => 10.0,
                    _ => 10.0 / speedup,
                };
                e_map.insert(e, level * (block + run + sd * gauss(rng)).exp());
            }
            arm.runs.push(RunSamples {
                replicate: b,
                block: Some(b),
                epochs: e_map,
            });
        }
    }
    let [b, v] = arms;
    (b, v)
}

const IMPOSSIBLE: &str = "acceptance is impossible";

#[test]
fn a_one_time_cost_no_steady_gain_can_repay_is_rejected_not_inconclusive() {
    // Epoch 1 five times slower, steady state equal, 4 epochs measured: over 4 production
    // epochs no speed-up inside the interval repays 48 s of extra first epoch.
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let (b, v) = experiment(&mut rng, 6, 4, 1.0, 5.0, 0.02);
    let a = analyze(&b, std::slice::from_ref(&v), &AnalysisConfig::default()).unwrap();
    let va = &a.variants[0];
    assert_eq!(va.decision, Decision::Reject, "{}", va.reason);
    assert!(va.reason.starts_with(IMPOSSIBLE), "{}", va.reason);
    assert!(
        va.reason.contains("one-time epoch-1 cost +"),
        "{}",
        va.reason
    );
    // The projection by hand: T = f + 3·s per run, medians; the variant's epoch 1 alone
    // adds ≈ 48 s to ≈ 42 s, so App Impact ≈ −114 %.
    let t = |arm: &ArmData| {
        let mut v: Vec<f64> = arm
            .runs
            .iter()
            .map(|r| r.epochs[&1] + 3.0 * (r.epochs[&2] + r.epochs[&3] + r.epochs[&4]) / 3.0)
            .collect();
        v.sort_by(f64::total_cmp);
        (v[2] + v[3]) / 2.0
    };
    let by_hand = 100.0 * (1.0 - t(&v) / t(&b));
    assert!((va.app_impact_pct.unwrap() - by_hand).abs() < 1e-9);
    assert!(by_hand < -100.0, "{by_hand}");
    // Rule 5′'s bound by hand: the baseline's median epoch 1 and steady value, the variant
    // at the upper ends of the 90 % intervals of the paired log speed-ups (Hodges–Lehmann).
    let upper = |e: &dyn Fn(&RunSamples) -> f64| {
        let d: Vec<f64> = b
            .runs
            .iter()
            .zip(&v.runs)
            .map(|(x, y)| e(x).ln() - e(y).ln())
            .collect();
        hodges_lehmann_paired(&d, 0.05).unwrap().ci_high.unwrap()
    };
    let steady = |r: &RunSamples| (r.epochs[&2] + r.epochs[&3] + r.epochs[&4]) / 3.0;
    let first = |r: &RunSamples| r.epochs[&1];
    let med = |f: &dyn Fn(&RunSamples) -> f64| {
        let mut x: Vec<f64> = b.runs.iter().map(f).collect();
        x.sort_by(f64::total_cmp);
        (x[2] + x[3]) / 2.0
    };
    let (fb, sb) = (med(&first), med(&steady));
    let (us, uf) = (upper(&steady), upper(&first));
    let best_by_hand =
        100.0 * (1.0 - (fb * (-uf).exp() + 3.0 * sb * (-us).exp()) / (fb + 3.0 * sb));
    assert!((va.app_impact_best.unwrap() - best_by_hand).abs() < 1e-9);
    assert!(best_by_hand <= 0.0);
    // The same data over 10 000 production epochs: the cost may be repaid — no rule 5′.
    let cfg = AnalysisConfig {
        production_epochs: Some(10_000),
        ..AnalysisConfig::default()
    };
    let a = analyze(&b, &[v], &cfg).unwrap();
    assert!(!a.variants[0].reason.starts_with(IMPOSSIBLE));
}

/// The rule is exactly "App Impact's best case (`app_impact_best`) ≤ 0 where the result
/// would otherwise be inconclusive": over many random experiments, every rule-5′ rejection
/// has a non-positive bound, and no inconclusive result has one.
#[test]
fn the_rule_follows_the_upper_end_of_the_app_impact_interval() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (mut fired, mut open) = (0, 0);
    for i in 0..400 {
        let speedup = 0.97 + 0.06 * rng.random::<f64>();
        let first = if i % 2 == 0 {
            1.0
        } else {
            1.0 + rng.random::<f64>()
        };
        let (b, v) = experiment(&mut rng, 6, 4, speedup, first, 0.03);
        let a = analyze(&b, &[v], &AnalysisConfig::default()).unwrap();
        let va = &a.variants[0];
        let high = va.app_impact_best;
        if va.reason.starts_with(IMPOSSIBLE) {
            fired += 1;
            assert_eq!(va.decision, Decision::Reject);
            assert!(high.unwrap() <= 0.0, "{:?}: {}", high, va.reason);
        }
        if va.decision == Decision::Inconclusive {
            open += 1;
            assert!(high.is_none_or(|h| h > 0.0), "{high:?}: {}", va.reason);
        }
    }
    assert!(fired > 20 && open > 20, "fired {fired}, open {open}");
}

/// A/A (identical arms, `min_effect_pct: 0`, the null's boundary), one look at n = 10: the
/// false-accept rate with rule 5′ in place stays at α or below; rule 5′ rejects an A/A
/// variant (true App Impact exactly 0) at a rate that is also measured here.
#[test]
fn aa_false_accepts_stay_at_alpha_with_the_futility_rule() {
    let cfg = AnalysisConfig {
        min_effect_pct: 0.0,
        ..AnalysisConfig::default()
    };
    let mut rng = ChaCha8Rng::seed_from_u64(20261130);
    let sims = 1000;
    let (mut accepted, mut futile, mut inconclusive) = (0, 0, 0);
    for _ in 0..sims {
        let (b, v) = experiment(&mut rng, 10, 4, 1.0, 1.0, 0.02);
        let a = analyze(&b, &[v], &cfg).unwrap();
        let va = &a.variants[0];
        accepted += (va.decision == Decision::Accept) as u32;
        futile += va.reason.starts_with(IMPOSSIBLE) as u32;
        inconclusive += (va.decision == Decision::Inconclusive) as u32;
    }
    let se = (0.05f64 * 0.95 / sims as f64).sqrt();
    let (acc, fut) = (accepted as f64 / sims as f64, futile as f64 / sims as f64);
    eprintln!(
        "A/A n=10, 1000 experiments: accepted {acc:.3}, rule 5′ rejected {fut:.3}, inconclusive {:.3}",
        inconclusive as f64 / sims as f64
    );
    assert!(acc <= 0.05 + 3.0 * se, "false accepts {acc}");
    // At a true App Impact of exactly 0 the interval's upper end is below 0 about as often
    // as a one-sided bound misses: not more than α (+ Monte-Carlo error).
    assert!(fut <= 0.05 + 3.0 * se, "rule 5′ on A/A {fut}");
}

/// A real 5 % steady gain with no one-time cost is never stopped by rule 5′.
#[test]
fn a_real_gain_is_never_rejected_by_the_futility_rule() {
    let mut rng = ChaCha8Rng::seed_from_u64(77);
    for _ in 0..300 {
        let (b, v) = experiment(&mut rng, 6, 4, 1.05, 1.0, 0.02);
        let a = analyze(&b, &[v], &AnalysisConfig::default()).unwrap();
        assert!(
            !a.variants[0].reason.starts_with(IMPOSSIBLE),
            "{}",
            a.variants[0].reason
        );
    }
}
