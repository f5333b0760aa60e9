//! Stability checks: Mann–Kendall trend test with Sen's slope (is the steady window
//! steady?) and median-absolute-deviation outlier flags (never removes anything).

use crate::normal;

/// Mann–Kendall trend test of a series in time order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrendTest {
    /// S = Σ_{i<j} sign(x_j − x_i).
    pub s: f64,
    /// Two-sided p-value, normal approximation with tie and continuity correction.
    pub p_value: f64,
}

/// Mann–Kendall with tie-corrected variance `[n(n−1)(2n+5) − Σ t(t−1)(2t+5)]/18` and a
/// continuity correction of 1 on S. `None` for fewer than 4 points: with 3 the smallest
/// two-sided p-value is 1/3, so the test could never flag anything.
pub fn mann_kendall(x: &[f64]) -> Option<TrendTest> {
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
    let p_value = (2.0 * normal::sf(z.abs())).min(1.0);
    Some(TrendTest { s, p_value })
}

/// Sen's slope: the median of `(x_j − x_i)/(j − i)` over all `i < j`, per step of the
/// series. Separate from [`mann_kendall`] because it sorts O(n²) slopes and is only
/// needed once a trend has been found. `None` for fewer than 2 points.
pub fn sen_slope(x: &[f64]) -> Option<f64> {
    let n = x.len();
    if n < 2 {
        return None;
    }
    let mut slopes = Vec::with_capacity(n * (n - 1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            slopes.push((x[j] - x[i]) / (j - i) as f64);
        }
    }
    Some(median(&slopes))
}

/// Threshold on the modified z-score (Iglewicz & Hoaglin).
pub const OUTLIER_Z: f64 = 3.5;

/// Modified z-scores `0.6745 (x − median) / MAD`. When the MAD is 0 (more than half the
/// values identical) the mean absolute deviation scaled by 1.253314 stands in, as
/// Iglewicz & Hoaglin suggest; when that is 0 too, every score is 0.
pub fn modified_z_scores(x: &[f64]) -> Vec<f64> {
    if x.is_empty() {
        return Vec::new();
    }
    let med = median(x);
    let dev: Vec<f64> = x.iter().map(|v| (v - med).abs()).collect();
    let mad = median(&dev);
    if mad > 0.0 {
        return x.iter().map(|v| 0.6745 * (v - med) / mad).collect();
    }
    let mean_ad = dev.iter().sum::<f64>() / dev.len() as f64;
    if mean_ad > 0.0 {
        x.iter().map(|v| (v - med) / (1.253314 * mean_ad)).collect()
    } else {
        vec![0.0; x.len()]
    }
}

/// Median of a non-empty slice. Selection, not a full sort: medians of every epoch of
/// every arm are the bulk of an analysis's work.
pub fn median(x: &[f64]) -> f64 {
    let mut v = x.to_vec();
    let m = v.len();
    let (_, &mut upper, _) = v.select_nth_unstable_by(m / 2, f64::total_cmp);
    if m % 2 == 1 {
        upper
    } else {
        // The lower middle is the largest of the elements left of the upper middle.
        let lower = v[..m / 2].iter().copied().fold(f64::NEG_INFINITY, f64::max);
        0.5 * (lower + upper)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotone_series_is_a_trend() {
        let x: Vec<f64> = (0..20).map(|i| 10.0 - 0.1 * i as f64).collect();
        let t = mann_kendall(&x).unwrap();
        assert_eq!(t.s, -190.0);
        assert!(t.p_value < 1e-6);
        assert!((sen_slope(&x).unwrap() + 0.1).abs() < 1e-12);
    }

    #[test]
    fn flat_series_has_no_trend() {
        let t = mann_kendall(&[1.0, 1.0, 1.0, 1.0, 1.0]).unwrap();
        assert_eq!(t.p_value, 1.0);
        assert!(mann_kendall(&[1.0, 2.0, 3.0]).is_none());
    }

    #[test]
    fn outlier_is_flagged() {
        let z = modified_z_scores(&[10.0, 10.1, 9.9, 10.05, 9.95, 14.0]);
        assert!(z[5] > OUTLIER_Z);
        assert!(z[..5].iter().all(|v| v.abs() < OUTLIER_Z));
    }
}
