//! Shared vocabulary of the rank tests: the alternative, which null distribution gave the
//! p-value, and a location estimate with its distribution-free interval.

use serde::{Deserialize, Serialize};

/// Direction of a one-sided test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Alternative {
    /// H1: the location (of `d`, or of `x − y`) is greater than 0.
    Greater,
    /// H1: it is less than 0.
    Less,
}

/// Which null distribution produced a p-value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PMethod {
    /// The exact permutation distribution of the rank statistic (no ties, no zeros).
    Exact,
    /// Normal approximation with tie and continuity correction.
    Normal,
    /// No observations left (every difference was zero): p = 1, no evidence either way.
    Degenerate,
}

/// A one-sided rank test result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankTest {
    /// W+ (sum of ranks of the positive differences) or U₁ (Mann–Whitney U of `x`).
    pub statistic: f64,
    pub p_value: f64,
    pub method: PMethod,
    /// Observations the test used (signed-rank: non-zero differences).
    pub n_used: usize,
}

/// A Hodges–Lehmann estimate with its distribution-free interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShiftEstimate {
    pub estimate: f64,
    /// Lower bound, one-sided level α; `None` when n is too small to bound it at α.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// The 1-based order statistic `k` used: bounds are `A_(k)` and `A_(M+1−k)` of the
    /// sorted `M` averages/differences.
    pub k: Option<usize>,
}

/// Median of an already sorted, non-empty slice (the reference [`median_and_bounds`] is
/// tested against).
#[cfg(test)]
pub(crate) fn median_sorted(v: &[f64]) -> f64 {
    let m = v.len();
    if m % 2 == 1 {
        v[m / 2]
    } else {
        0.5 * (v[m / 2 - 1] + v[m / 2])
    }
}

/// The median of `v` and, for an order-statistic index `k` (1-based, see [`ci_index`]), the
/// bounds `v_(k)` and `v_(M+1−k)` — as the median and indexing would give them on
/// `v` sorted by `f64::total_cmp`, but found by selection (each position selected in the
/// part right of the previous one): a few linear passes instead of a sort of the n(n+1)/2
/// Walsh averages or m·n differences. `v` (non-empty) is reordered.
pub(crate) fn median_and_bounds(v: &mut [f64], k: Option<usize>) -> (f64, Option<(f64, f64)>) {
    let m = v.len();
    let bounds = k.filter(|&k| k <= m).map(|k| (k - 1, m - k));
    let mut positions = vec![m / 2];
    if m % 2 == 0 {
        positions.push(m / 2 - 1);
    }
    if let Some((low, high)) = bounds {
        positions.extend([low, high]);
    }
    positions.sort_unstable();
    positions.dedup();
    let mut start = 0;
    for &p in &positions {
        v[start..].select_nth_unstable_by(p - start, f64::total_cmp);
        start = p + 1;
    }
    let median = if m % 2 == 1 {
        v[m / 2]
    } else {
        0.5 * (v[m / 2 - 1] + v[m / 2])
    };
    (median, bounds.map(|(low, high)| (v[low], v[high])))
}

/// Order-statistic index `k` for a one-sided bound at level `alpha`: the largest `c` with
/// `P(T ≤ c) ≤ α` under the null plus one, so `P(T ≤ k − 1) ≤ α`. `None` when even
/// `P(T ≤ 0) > α` (the bound is −∞ / +∞ at this n).
pub(crate) fn ci_index(cdf_from_zero: &[f64], alpha: f64) -> Option<usize> {
    // cdf_from_zero[c] = P(T ≤ c) for c = 0, 1, ...; increasing.
    // A relative slack of 1e-12 keeps an exactly-α tail (e.g. 1/32 at α = 0.03125) on the
    // "≤ α" side despite rounding in the DP.
    let limit = alpha * (1.0 + 1e-12);
    let mut k = None;
    for (c, &p) in cdf_from_zero.iter().enumerate() {
        if p <= limit {
            k = Some(c + 1);
        } else {
            break;
        }
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Catches a selection that starts at the wrong offset or misses the lower middle
        /// of an even count: every value must be the sorted slice's, bit for bit.
        #[test]
        fn selected_median_and_bounds_equal_the_sorted_ones(
            mut v in prop::collection::vec(prop_oneof![-3i32..3, -1000i32..1000], 1..200),
            k in prop::option::of(1usize..250),
        ) {
            let mut v: Vec<f64> = v.drain(..).map(|x| f64::from(x) / 8.0).collect();
            let mut sorted = v.clone();
            sorted.sort_by(f64::total_cmp);
            let m = sorted.len();
            let want_bounds = k.filter(|&k| k <= m).map(|k| (sorted[k - 1], sorted[m - k]));
            let (median, bounds) = median_and_bounds(&mut v, k);
            prop_assert_eq!(median.to_bits(), median_sorted(&sorted).to_bits());
            prop_assert_eq!(bounds, want_bounds);
        }
    }
}
