//! The change-point search's error rates, measured on seeded series (counts, not times):
//! false alarms on stable series of 8 and 30 values with 3 % noise, and detections of a
//! 15 % step at the fifth of eight. docs/STATISTICS.md "Change points" quotes these counts.

use optgate_stats::change_points::{ChangePointConfig, change_points};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SERIES: usize = 1000;

/// A normal value (Box–Muller), so the test needs no distribution crate.
fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let (u, v): (f64, f64) = (rng.random::<f64>().max(1e-300), rng.random());
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// `n` values at 1.0 (times `step` from `at` on, 0-based) with 3 % noise.
fn series(rng: &mut ChaCha8Rng, n: usize, step: Option<(usize, f64)>) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let level = match step {
                Some((at, factor)) if i >= at => factor,
                _ => 1.0,
            };
            level * (1.0 + 0.03 * normal(rng))
        })
        .collect()
}

/// (series with any change point, series with one exactly at the step).
fn counts(seed: u64, n: usize, step: Option<(usize, f64)>) -> (usize, usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let cfg = ChangePointConfig::default();
    let (mut any, mut at_shift) = (0, 0);
    for _ in 0..SERIES {
        let found = change_points(&series(&mut rng, n, step), &cfg);
        any += usize::from(!found.is_empty());
        at_shift += usize::from(step.is_some_and(|(at, _)| found.iter().any(|c| c.index == at)));
    }
    (any, at_shift)
}

/// At α = 0.05 the first test of a stable series alarms about 5 % of the time: 50 of
/// 1000 expected, 3 standard deviations (±21) allowed above. A search that splits without
/// a test, or a p-value computed too small, fails this.
#[test]
fn stable_series_of_eight_and_thirty_rarely_alarm() {
    let (eight, _) = counts(8, 8, None);
    let (thirty, _) = counts(30, 30, None);
    eprintln!("false alarms: n = 8: {eight}/{SERIES}; n = 30: {thirty}/{SERIES}");
    assert!(eight <= 71, "n = 8: {eight} false alarms in {SERIES}");
    assert!(thirty <= 71, "n = 30: {thirty} false alarms in {SERIES}");
}

/// A 15 % step at the fifth of eight executions (5 noise standard deviations) is found,
/// at the fifth, in nearly every series. A search that never splits, or that splits one
/// place off, fails this.
#[test]
fn a_fifteen_percent_shift_at_the_fifth_of_eight_is_found_there() {
    let (any, at_shift) = counts(15, 8, Some((4, 1.15)));
    eprintln!("15 % step at 5 of 8: found in {any}/{SERIES}, at the fifth in {at_shift}/{SERIES}");
    assert!(
        at_shift >= 950,
        "found at the step in only {at_shift} of {SERIES}"
    );
}
