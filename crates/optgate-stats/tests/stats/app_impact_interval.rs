//! The interval of App Impact against values worked out by hand: the same projection
//! T = f + (E − 1)·s as the point estimate, with the variant's steady values moved to each
//! end of the steady speed-up's interval.

use optgate_stats::{AnalysisConfig, ArmData, RunSamples, analyze};

/// Five blocks of three epochs: epoch 1 at `first`, epochs 2 and 3 at `steady[r]`.
fn arm(name: &str, first: f64, steady: [f64; 5]) -> ArmData {
    ArmData {
        name: name.into(),
        runs: steady
            .iter()
            .zip(1..)
            .map(|(&s, r)| RunSamples {
                replicate: r,
                block: Some(r),
                epochs: [(1, first), (2, s), (3, s)].into_iter().collect(),
            })
            .collect(),
        ..ArmData::default()
    }
}

#[test]
fn app_impact_interval_by_hand() {
    // Baseline: f = 2, s = 1 in every block. Variant: f = 3 (a one-time cost) and steady
    // 1.0, 0.8, 0.8, 0.8, 0.5, i.e. log speed-ups d = 0, ln 1.25 (×3), ln 2.
    //
    // Hodges–Lehmann: the 15 Walsh averages are 0, (ln 1.25)/2 ×3, (ln 2)/2, ln 1.25 ×6,
    // (ln 1.25 + ln 2)/2 ×3, ln 2; the 8th is ln 1.25, so the speed-up is 1.25. With 5
    // pairs at α = 0.05, P(W+ ≤ 0) = 1/32 ≤ α < P(W+ ≤ 1) = 2/32, so k = 1 and the
    // interval is [min, max] = [0, ln 2]: speed-up 1.25 in [1, 2].
    //
    // E = 11: T_base = 2 + 10·1 = 12 in every block.
    // Point: T_var = 3 + 10·s = 13, 11, 11, 11, 8 → median 11 → 100·(1 − 11/12) = +8.33 %.
    // Low end (speed-up 1): s·1.25 → T_var = 15.5, 13, 13, 13, 9.25 → median 13
    //   → 100·(1 − 13/12) = −8.33 %.
    // High end (speed-up 2): s·0.625 → T_var = 9.25, 8, 8, 8, 6.125 → median 8
    //   → 100·(1 − 8/12) = +33.33 %.
    let base = arm("base", 2.0, [1.0; 5]);
    let var = arm("v", 3.0, [1.0, 0.8, 0.8, 0.8, 0.5]);
    let cfg = AnalysisConfig {
        production_epochs: Some(11),
        ..AnalysisConfig::default()
    };
    let a = analyze(&base, &[var], &cfg).unwrap();
    let v = &a.variants[0];
    let close = |x: Option<f64>, want: f64| {
        let x = x.unwrap();
        assert!((x - want).abs() < 1e-9, "{x} vs {want}");
    };
    close(v.speedup.estimate, 1.25);
    close(v.speedup.ci_low, 1.0);
    close(v.speedup.ci_high, 2.0);
    close(v.app_impact_pct, 100.0 / 12.0);
    close(v.app_impact_ci_low, -100.0 / 12.0);
    close(v.app_impact_ci_high, 100.0 / 3.0);

    // In the JSON beside the point estimate.
    let json = serde_json::to_value(v).unwrap();
    assert!((json["app_impact_ci_high"].as_f64().unwrap() - 100.0 / 3.0).abs() < 1e-9);
}

#[test]
fn app_impact_interval_is_null_without_a_steady_window() {
    // Only epoch 1: no steady window, so no App Impact and no interval.
    let one = |name: &str, f: f64| ArmData {
        name: name.into(),
        runs: (1..=5)
            .map(|r| RunSamples {
                replicate: r,
                block: Some(r),
                epochs: [(1, f)].into_iter().collect(),
            })
            .collect(),
        ..ArmData::default()
    };
    let a = analyze(
        &one("base", 2.0),
        &[one("v", 2.0)],
        &AnalysisConfig::default(),
    )
    .unwrap();
    let v = &a.variants[0];
    assert_eq!(v.app_impact_pct, None);
    assert_eq!(v.app_impact_ci_low, None);
    assert_eq!(v.app_impact_ci_high, None);
}
