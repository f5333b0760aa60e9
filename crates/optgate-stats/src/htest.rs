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

/// Median of an already sorted, non-empty slice.
pub(crate) fn median_sorted(v: &[f64]) -> f64 {
    let m = v.len();
    if m % 2 == 1 {
        v[m / 2]
    } else {
        0.5 * (v[m / 2 - 1] + v[m / 2])
    }
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
