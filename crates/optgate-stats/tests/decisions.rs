//! Decision rules 1–6 and the checks around them, each on a small hand-made experiment:
//! data in, decision and reason out. Also the errors for data that cannot be paired.

use std::collections::BTreeMap;

use optgate_stats::{
    AnalysisConfig, ArmData, Better, Decision, Design, EpochWindow, RunSamples, SequentialPlan,
    StatsError, analyze, analyze_sequential,
};

/// Deterministic noise in [-1, 1].
fn wobble(i: u64) -> f64 {
    // SplitMix64's finaliser: neighbouring inputs give unrelated outputs (a plain LCG step
    // would make the differences between arms constant and hide the noise).
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    ((z >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
}

/// An arm of `n` runs: epoch 1 at `first`, later epochs at `steady`, ±`noise` relative,
/// blocks = replicate numbers. `seed` varies the noise between arms.
fn arm(name: &str, n: u32, epochs: u32, first: f64, steady: f64, noise: f64, seed: u64) -> ArmData {
    let runs = (1..=n)
        .map(|r| RunSamples {
            replicate: r,
            block: Some(r),
            epochs: (1..=epochs)
                .map(|e| {
                    let level = if e == 1 { first } else { steady };
                    let i = seed * 1_000_003 + (r as u64) * 1000 + e as u64;
                    (e, level * (1.0 + noise * wobble(i)))
                })
                .collect(),
        })
        .collect();
    ArmData {
        name: name.into(),
        runs,
        ..ArmData::default()
    }
}

fn base(n: u32) -> ArmData {
    arm("base", n, 4, 20.0, 10.0, 0.005, 1)
}

fn faster(n: u32) -> ArmData {
    arm("fast", n, 4, 19.0, 9.0, 0.005, 2)
}

#[test]
fn rule1_correctness_mismatch_rejects_even_a_fast_variant() {
    let mut v = faster(8);
    v.correctness_mismatch = Some("loss.txt differs at byte 17".into());
    let a = analyze(&base(8), &[v], &AnalysisConfig::default()).unwrap();
    let va = &a.variants[0];
    assert_eq!(va.decision, Decision::Reject);
    assert!(
        va.reason.contains("loss.txt differs at byte 17"),
        "{}",
        va.reason
    );
    assert!(va.reason.contains("changes the computation"));
    // The speed-up is still shown: fast, but wrong.
    assert!(va.speedup.estimate.unwrap() > 1.1);
}

#[test]
fn rule2_not_applicable_has_no_p_values_and_leaves_the_family() {
    let na = ArmData {
        name: "governor".into(),
        not_applicable: Some("admin-only: no write access to cpufreq on node1".into()),
        ..ArmData::default()
    };
    let a = analyze(&base(8), &[faster(8), na], &AnalysisConfig::default()).unwrap();
    let gov = &a.variants[1];
    assert_eq!(gov.decision, Decision::NotApplicable);
    assert_eq!(
        gov.reason,
        "admin-only: no write access to cpufreq on node1"
    );
    assert_eq!(gov.p_improvement, None);
    assert_eq!(gov.p_improvement_adjusted, None);
    assert_eq!(gov.speedup.estimate, None);
    // Holm over one member: adjusted = raw for the other variant.
    let f = &a.variants[0];
    assert_eq!(f.p_improvement, f.p_improvement_adjusted);
    let json = serde_json::to_value(&a).unwrap();
    assert_eq!(json["variants"][1]["decision"], "not_applicable");
    assert!(json["variants"][1]["p_improvement"].is_null());
}

#[test]
fn rule3_fewer_than_five_replicates_is_inconclusive() {
    let a = analyze(&base(4), &[faster(4)], &AnalysisConfig::default()).unwrap();
    let v = &a.variants[0];
    assert_eq!(v.decision, Decision::Inconclusive);
    assert!(
        v.reason.contains("only 4 complete replicates"),
        "{}",
        v.reason
    );
    // Still analysed: p-values and estimate are there.
    assert!(v.p_improvement.is_some() && v.speedup.estimate.is_some());
    assert_eq!(v.min_achievable_p, Some(1.0 / 16.0));
}

#[test]
fn rule3_one_epoch_means_no_steady_window() {
    let b = arm("base", 6, 1, 10.0, 10.0, 0.005, 1);
    let v = arm("v", 6, 1, 9.0, 9.0, 0.005, 2);
    let a = analyze(&b, std::slice::from_ref(&v), &AnalysisConfig::default()).unwrap();
    assert_eq!(a.variants[0].decision, Decision::Inconclusive);
    assert!(
        a.variants[0].reason.contains("no steady window"),
        "{}",
        a.variants[0].reason
    );
    // With the window set to epoch 1 it is analysable.
    let cfg = AnalysisConfig {
        steady_epochs: Some("1".parse().unwrap()),
        ..AnalysisConfig::default()
    };
    let a = analyze(&b, &[v], &cfg).unwrap();
    assert_eq!(
        a.variants[0].decision,
        Decision::Accept,
        "{}",
        a.variants[0].reason
    );
}

#[test]
fn rule3_holm_makes_five_pairs_too_few_for_two_variants() {
    // n = 5 pairs: smallest p 1/32; with two variants Holm's smallest is 2/32 > 0.05.
    let other = arm("other", 5, 4, 19.0, 9.1, 0.005, 3);
    let a = analyze(&base(5), &[faster(5), other], &AnalysisConfig::default()).unwrap();
    for v in &a.variants {
        assert_eq!(v.decision, Decision::Inconclusive);
        assert!(
            v.reason.contains("smallest reachable p-value is 0.0312"),
            "{}",
            v.reason
        );
        assert!(
            v.reason.contains("after Holm over 2 variants"),
            "{}",
            v.reason
        );
        assert_eq!(v.min_achievable_p_adjusted, Some(0.0625));
    }
}

#[test]
fn rule4_accept_and_rule5_regression() {
    let slower = arm("slow", 8, 4, 20.0, 10.5, 0.005, 3);
    let a = analyze(&base(8), &[faster(8), slower], &AnalysisConfig::default()).unwrap();
    let (f, s) = (&a.variants[0], &a.variants[1]);
    assert_eq!(f.decision, Decision::Accept, "{}", f.reason);
    assert!(f.app_impact_pct.unwrap() > 5.0);
    assert_eq!(f.breakeven_epoch, Some(1));
    assert_eq!(s.decision, Decision::Reject, "{}", s.reason);
    assert!(s.reason.contains("regression"), "{}", s.reason);
    assert!(s.speedup.ci_high.unwrap() < 1.0);
}

#[test]
fn rule6_inconclusive_says_how_many_replicates_would_decide() {
    // A 1.5 % gain in 3 % noise with 6 replicates: neither side is clear.
    let b = arm("base", 6, 3, 20.0, 10.0, 0.03, 1);
    let v = arm("v", 6, 3, 20.0, 10.0 / 1.015, 0.03, 2);
    let a = analyze(&b, &[v], &AnalysisConfig::default()).unwrap();
    let va = &a.variants[0];
    assert_eq!(va.decision, Decision::Inconclusive, "{}", va.reason);
    let n = va.replicates_to_decide.unwrap();
    assert!(n > 6);
    assert!(
        va.reason.contains(&format!("about {n} replicates per arm")),
        "{}",
        va.reason
    );
    assert!(va.mde_pct.unwrap() > 1.0);
}

#[test]
fn rule6_inconclusive_still_names_a_large_one_time_cost() {
    // Undecided steady state, but epoch 1 costs 5× (the torch.compile shape): the reason
    // must not hide the one-time cost behind "inconclusive".
    let b = arm("base", 6, 3, 20.0, 10.0, 0.03, 1);
    let v = arm("compiled", 6, 3, 100.0, 10.0 / 1.015, 0.03, 2);
    let a = analyze(&b, &[v], &AnalysisConfig::default()).unwrap();
    let va = &a.variants[0];
    assert_eq!(va.decision, Decision::Inconclusive, "{}", va.reason);
    assert!(
        va.reason.contains("meanwhile one-time epoch-1 cost +"),
        "{}",
        va.reason
    );
    assert!(va.reason.contains("App Impact -"), "{}", va.reason);
}

#[test]
fn independent_design_uses_mann_whitney() {
    let cfg = AnalysisConfig {
        design: Design::Independent,
        ..AnalysisConfig::default()
    };
    let a = analyze(&base(6), &[faster(7)], &cfg).unwrap();
    let v = &a.variants[0];
    assert_eq!(v.p_method.as_deref(), Some("exact Mann–Whitney U"));
    assert_eq!(v.decision, Decision::Accept, "{}", v.reason);
    assert!((v.min_achievable_p.unwrap() - 1.0 / 1716.0).abs() < 1e-15);
    assert_eq!((v.n_baseline, v.n_variant), (6, 7));
}

#[test]
fn better_higher_analyses_reciprocals() {
    // Throughput: the variant does 10 % more samples/s.
    let b = arm("base", 6, 4, 50.0, 100.0, 0.005, 1);
    let v = arm("v", 6, 4, 55.0, 110.0, 0.005, 2);
    let cfg = AnalysisConfig {
        better: Better::Higher,
        ..AnalysisConfig::default()
    };
    let a = analyze(&b, &[v], &cfg).unwrap();
    let va = &a.variants[0];
    assert_eq!(va.decision, Decision::Accept, "{}", va.reason);
    assert!((va.speedup.estimate.unwrap() - 1.1).abs() < 0.01);
    assert!(va.per_epoch[1].ratio.unwrap() > 1.05);
    assert!(va.first_epoch.change_pct.unwrap() < 0.0);
}

#[test]
fn system_impact_and_weighted_score() {
    let mut b = base(6);
    let mut v = faster(6);
    b.system_metric = vec![100.0, 102.0, 98.0, 101.0, 99.0, 100.0];
    v.system_metric = vec![120.0, 119.0, 121.0, 120.0, 118.0, 122.0];
    let a = analyze(&b, &[v], &AnalysisConfig::default()).unwrap();
    let va = &a.variants[0];
    assert!((va.system_impact_pct.unwrap() - 20.0).abs() < 1e-9);
    let want = 0.5 * va.app_impact_pct.unwrap() + 0.5 * 20.0;
    assert!((va.weighted_score.unwrap() - want).abs() < 1e-9);
    // Not measured: null, and the score counts it as 0.
    let a = analyze(&base(6), &[faster(6)], &AnalysisConfig::default()).unwrap();
    assert_eq!(a.variants[0].system_impact_pct, None);
    assert!(
        (a.variants[0].weighted_score.unwrap() - 0.5 * a.variants[0].app_impact_pct.unwrap()).abs()
            < 1e-12
    );
}

#[test]
fn slow_first_replicate_is_flagged_and_kept() {
    let mut b = base(8);
    for v in b.runs[0].epochs.values_mut() {
        *v *= 1.3;
    }
    let a = analyze(&b, &[faster(8)], &AnalysisConfig::default()).unwrap();
    let w = a.warnings.join("\n");
    assert!(w.contains("base: replicate 1 steady mean"), "{w}");
    assert!(w.contains("the first replicate is slow"), "{w}");
    assert!(w.contains("kept in the analysis"), "{w}");
    assert_eq!(a.variants[0].n_baseline, 8);
}

#[test]
fn a_trending_window_is_not_steady() {
    // Steady epochs creep down 1 % per epoch over 12 epochs in both arms.
    let creep = |mut a: ArmData| {
        for run in &mut a.runs {
            for (e, v) in run.epochs.iter_mut() {
                if *e > 1 {
                    *v *= 1.0 - 0.01 * (*e as f64);
                }
            }
        }
        a
    };
    let b = creep(arm("base", 8, 12, 20.0, 10.0, 0.002, 1));
    let v = creep(arm("v", 8, 12, 20.0, 9.0, 0.002, 2));
    let a = analyze(&b, &[v], &AnalysisConfig::default()).unwrap();
    let va = &a.variants[0];
    assert_eq!(va.decision, Decision::Inconclusive, "{}", va.reason);
    assert!(va.reason.contains("is not steady yet"), "{}", va.reason);
    assert!(va.reason.contains("Mann–Kendall"), "{}", va.reason);
    assert!(
        a.warnings
            .iter()
            .any(|w| w.starts_with("base: the steady window 2..12"))
    );
}

#[test]
fn pairing_errors_name_the_arm_and_run() {
    let cfg = AnalysisConfig::default();
    let mut v = faster(6);
    v.runs.pop();
    assert_eq!(
        analyze(&base(6), &[v], &cfg).unwrap_err(),
        StatsError::UnpairedRun {
            arm: "base".into(),
            other: "fast".into(),
            key: "block 6".into()
        }
    );
    let mut v = faster(6);
    v.runs[1].block = Some(1);
    assert_eq!(
        analyze(&base(6), &[v], &cfg).unwrap_err(),
        StatsError::DuplicatePairKey {
            arm: "fast".into(),
            key: "block 1".into()
        }
    );
    let mut v = faster(6);
    v.runs[2].block = None;
    assert_eq!(
        analyze(&base(6), &[v], &cfg).unwrap_err(),
        StatsError::MixedBlocks {
            arm: "fast".into(),
            replicate: 3
        }
    );
    let mut v = faster(6);
    v.runs[0].epochs.insert(2, -1.0);
    let err = analyze(&base(6), &[v], &cfg).unwrap_err();
    assert_eq!(
        err.to_string(),
        "arm 'fast', replicate 1, epoch 2: value -1 is not a positive finite number"
    );
}

#[test]
fn bad_settings_are_rejected() {
    for cfg in [
        AnalysisConfig {
            alpha: 0.0,
            ..AnalysisConfig::default()
        },
        AnalysisConfig {
            min_effect_pct: f64::NAN,
            ..AnalysisConfig::default()
        },
        AnalysisConfig {
            production_epochs: Some(0),
            ..AnalysisConfig::default()
        },
    ] {
        assert!(matches!(
            analyze(&base(6), &[faster(6)], &cfg),
            Err(StatsError::InvalidConfig(_))
        ));
    }
}

#[test]
fn epoch_windows_parse_and_print() {
    for (text, start, end, shown) in [
        ("2..", 2, None, "2.."),
        ("2..5", 2, Some(5), "2..5"),
        ("3", 3, Some(3), "3"),
        ("2..=5", 2, Some(5), "2..5"),
    ] {
        let w: EpochWindow = text.parse().unwrap();
        assert_eq!((w.start, w.end), (start, end));
        assert_eq!(w.to_string(), shown);
    }
    for bad in ["0..", "5..2", "x", ""] {
        assert!(bad.parse::<EpochWindow>().is_err(), "{bad}");
    }
}

#[test]
fn production_epochs_default_to_epochs_measured() {
    let a = analyze(&base(6), &[faster(6)], &AnalysisConfig::default()).unwrap();
    assert_eq!(a.production_epochs, 4);
    assert_eq!(a.epochs_measured, 4);
    assert_eq!(a.variants[0].steady_epochs, vec![2, 3, 4]);
    assert_eq!(a.variants[0].per_epoch.len(), 4);
}

#[test]
fn sequential_look_is_recorded() {
    let plan = SequentialPlan::equally_spaced(3, 0.05).unwrap();
    let a = analyze_sequential(
        &base(10),
        &[faster(10)],
        &AnalysisConfig::default(),
        &plan,
        2,
    )
    .unwrap();
    let seq = a.sequential.as_ref().unwrap();
    assert_eq!((seq.look, seq.planned_looks), (2, 3));
    assert_eq!(a.alpha, plan.nominal(2));
    assert!(a.alpha < 0.05);
    assert!(
        analyze_sequential(
            &base(10),
            &[faster(10)],
            &AnalysisConfig::default(),
            &plan,
            4
        )
        .is_err()
    );
}

#[test]
fn analysis_json_round_trips_without_nan() {
    let na = ArmData {
        name: "na".into(),
        not_applicable: Some("missing AVX-512".into()),
        ..ArmData::default()
    };
    let a = analyze(&base(4), &[faster(4), na], &AnalysisConfig::default()).unwrap();
    let json = serde_json::to_string(&a).unwrap();
    assert!(!json.contains("NaN") && !json.contains("Infinity"));
    let back: optgate_stats::Analysis = serde_json::from_str(&json).unwrap();
    assert_eq!(back.variants.len(), 2);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    for key in [
        "baseline",
        "design",
        "alpha",
        "min_effect_pct",
        "production_epochs",
        "variants",
    ] {
        assert!(v.get(key).is_some(), "{key}");
    }
    let _: BTreeMap<String, serde_json::Value> =
        serde_json::from_value(v["method"].clone()).unwrap();
}
