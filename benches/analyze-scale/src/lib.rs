//! The inputs of the analyze-scale benchmark (`benches/scale.rs`) and the code it is
//! measured against: the quadratic trend checks `optgate analyze` used before (kept here,
//! verbatim in what they compute, as the baseline), so both run in the same session.

use optgate_stats::trend::TrendTest;

/// Rows of the samples file at the limits: 2 arms × 5 replicates × `epochs` epochs
/// (100,000 epochs: 1,000,000 rows, `samples_csv::MAX_ROWS`). Seeded noise of ~2 % per
/// epoch, the variant 10 % faster; `drift` adds a slow-down of that fraction across the
/// run to the variant, so its steady window trends (Sen's slope and the search for a
/// trend-free start run too).
pub fn samples_csv(epochs: u32, drift: f64) -> String {
    let mut out = String::with_capacity(epochs as usize * 10 * 26);
    out.push_str("variant,replicate,epoch,seconds,block\n");
    let mut i = 0u64;
    for (arm, factor) in [("baseline", 1.0), ("v01", 0.9)] {
        for replicate in 1..=5u32 {
            for epoch in 1..=epochs {
                i += 1;
                let level = if epoch == 1 { 16.0 } else { 10.0 * factor };
                let slow = if arm == "v01" {
                    1.0 + drift * f64::from(epoch) / f64::from(epochs)
                } else {
                    1.0
                };
                let seconds = level * slow * (1.0 + 0.02 * wobble(i));
                out.push_str(&format!(
                    "{arm},{replicate},{epoch},{seconds:.6},{replicate}\n"
                ));
            }
        }
    }
    out
}

/// Deterministic noise in [-1, 1] (SplitMix64's finaliser).
pub fn wobble(i: u64) -> f64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    ((z >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
}

/// A series of `n` per-epoch medians around 10 s with `drift` across it.
pub fn series(n: usize, drift: f64) -> Vec<f64> {
    (0..n)
        .map(|i| 10.0 * (1.0 + drift * i as f64 / n as f64) * (1.0 + 0.02 * wobble(i as u64)))
        .collect()
}

/// Mann–Kendall S over every pair, as `optgate_stats::trend::mann_kendall` computed it
/// before (O(n²)); the p-value from it exactly as there.
pub fn mann_kendall_pairwise(x: &[f64]) -> Option<TrendTest> {
    let n = x.len();
    if n < 4 {
        return None;
    }
    let mut s = 0.0f64;
    for i in 0..n {
        for j in i + 1..n {
            let diff = x[j] - x[i];
            if diff > 0.0 {
                s += 1.0;
            } else if diff < 0.0 {
                s -= 1.0;
            }
        }
    }
    let mut sorted = x.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut tie_sum = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && sorted[j] == sorted[i] {
            j += 1;
        }
        let t = (j - i) as f64;
        tie_sum += t * (t - 1.0) * (2.0 * t + 5.0);
        i = j;
    }
    let nf = n as f64;
    let var = (nf * (nf - 1.0) * (2.0 * nf + 5.0) - tie_sum) / 18.0;
    let z = if var <= 0.0 || s == 0.0 {
        0.0
    } else {
        (s - s.signum()) / var.sqrt()
    };
    let p_value = (2.0 * optgate_stats::normal::sf(z.abs())).min(1.0);
    Some(TrendTest { s, p_value })
}

/// The steady-window trend check as `optgate analyze` ran it before, per arm: the whole
/// window's test, then — when it trends — a new pairwise test of every later start until
/// one is trend-free (O(n²) without a trend, O(n³) with one).
pub fn window_trend_pairwise(series: &[f64], alpha: f64) -> Option<usize> {
    let mk = mann_kendall_pairwise(series)?;
    if mk.p_value >= alpha {
        return None;
    }
    (1..series.len().saturating_sub(3))
        .find(|&i| mann_kendall_pairwise(&series[i..]).is_some_and(|t| t.p_value >= alpha))
}

/// The same check as `optgate analyze` runs it now: every start's test from one
/// O(n log n) pass.
pub fn window_trend_counted(series: &[f64], alpha: f64) -> Option<usize> {
    let suffixes = optgate_stats::trend::mann_kendall_suffixes(series);
    let mk = suffixes.first().copied().flatten()?;
    if mk.p_value >= alpha {
        return None;
    }
    (1..series.len().saturating_sub(3)).find(|&i| suffixes[i].is_some_and(|t| t.p_value >= alpha))
}

/// The steady epochs missing in some run, as found before: a scan of the window for each
/// epoch (O(n²)).
pub fn left_out_scan(wanted: &[u32], steady: &[u32]) -> Vec<u32> {
    wanted
        .iter()
        .copied()
        .filter(|e| !steady.contains(e))
        .collect()
}

/// The same as found now: a binary search of the sorted window.
pub fn left_out_search(wanted: &[u32], steady: &[u32]) -> Vec<u32> {
    wanted
        .iter()
        .copied()
        .filter(|e| steady.binary_search(e).is_err())
        .collect()
}
