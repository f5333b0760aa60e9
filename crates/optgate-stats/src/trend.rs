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
///
/// O(n log n): S counts, for each point, the earlier points below and above it (a Fenwick
/// tree over the values' ranks), not every pair — a steady window of 100,000 epochs is
/// 5·10⁹ pairs.
pub fn mann_kendall(x: &[f64]) -> Option<TrendTest> {
    if x.len() < 4 {
        return None;
    }
    let ranked = Ranked::of(x);
    let mut earlier = Fenwick::new(ranked.distinct);
    let mut s: i64 = 0;
    for (j, &r) in ranked.ranks.iter().enumerate() {
        let below = earlier.count_below(r);
        let above = j as i64 - earlier.count_below(r + 1);
        s += below - above;
        earlier.add(r, 1);
    }
    let ties: Vec<i64> = ranked.group_sizes();
    Some(trend_test(x.len(), s, tie_sum(ties.iter().copied())))
}

/// [`mann_kendall`] of every suffix: element `i` is the test of `x[i..]` (`None` where
/// fewer than 4 points are left). O(n log n) for all of them together: each step takes
/// one point out of S and out of its tie group.
pub fn mann_kendall_suffixes(x: &[f64]) -> Vec<Option<TrendTest>> {
    let n = x.len();
    if n < 4 {
        return vec![None; n];
    }
    let ranked = Ranked::of(x);
    let Some(first) = mann_kendall(x) else {
        return vec![None; n];
    };
    let mut s = first.s as i64;
    let mut left = Fenwick::new(ranked.distinct);
    for &r in &ranked.ranks {
        left.add(r, 1);
    }
    let mut group = ranked.group_sizes();
    let mut ties = tie_sum(group.iter().copied());
    let mut out = Vec::with_capacity(n);
    for (i, &r) in ranked.ranks.iter().enumerate() {
        let len = n - i;
        if len < 4 {
            out.push(None);
            continue;
        }
        out.push(Some(trend_test(len, s, ties)));
        // x[i] leaves: its pairs with every later point, and one member of its tie group.
        left.add(r, -1);
        let later = (len - 1) as i64;
        let below = left.count_below(r);
        let above = later - left.count_below(r + 1);
        s -= above - below;
        ties -= tie_term(group[r]) - tie_term(group[r] - 1);
        group[r] -= 1;
    }
    out
}

/// `t(t−1)(2t+5)` of one tie group of `t` equal values (exact: at most ~2·10¹⁶ for the
/// largest series a samples file can hold).
fn tie_term(t: i64) -> i128 {
    let t = i128::from(t);
    t * (t - 1) * (2 * t + 5)
}

fn tie_sum(groups: impl Iterator<Item = i64>) -> i128 {
    groups.map(tie_term).sum()
}

/// The test from S, the series' length and the exact tie sum.
fn trend_test(n: usize, s: i64, tie_sum: i128) -> TrendTest {
    let s = s as f64;
    let nf = n as f64;
    let var = (nf * (nf - 1.0) * (2.0 * nf + 5.0) - tie_sum as f64) / 18.0;
    let z = if var <= 0.0 || s == 0.0 {
        0.0
    } else {
        (s - s.signum()) / var.sqrt()
    };
    let p_value = (2.0 * normal::sf(z.abs())).min(1.0);
    TrendTest { s, p_value }
}

/// A series' values as dense ranks: equal values share a rank, ranks are 0-based and in
/// the values' order.
struct Ranked {
    ranks: Vec<usize>,
    distinct: usize,
}

impl Ranked {
    fn of(x: &[f64]) -> Ranked {
        let mut order: Vec<usize> = (0..x.len()).collect();
        order.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
        let mut ranks = vec![0; x.len()];
        let mut rank = 0;
        for (k, &i) in order.iter().enumerate() {
            // `==`, not the total order: -0.0 and 0.0 are one value, as for `x_j − x_i`.
            if k > 0 && x[i] != x[order[k - 1]] {
                rank += 1;
            }
            ranks[i] = rank;
        }
        let distinct = if x.is_empty() { 0 } else { rank + 1 };
        Ranked { ranks, distinct }
    }

    /// How many values have each rank.
    fn group_sizes(&self) -> Vec<i64> {
        let mut sizes = vec![0; self.distinct];
        for &r in &self.ranks {
            sizes[r] += 1;
        }
        sizes
    }
}

/// Counts of ranks present, with prefix sums in O(log n) (a Fenwick tree).
struct Fenwick {
    tree: Vec<i64>,
}

impl Fenwick {
    fn new(len: usize) -> Fenwick {
        Fenwick {
            tree: vec![0; len + 1],
        }
    }

    fn add(&mut self, rank: usize, delta: i64) {
        let mut i = rank + 1;
        while i < self.tree.len() {
            self.tree[i] += delta;
            i += i & i.wrapping_neg();
        }
    }

    /// How many present values have a rank below `rank`.
    fn count_below(&self, rank: usize) -> i64 {
        let mut i = rank.min(self.tree.len() - 1);
        let mut sum = 0;
        while i > 0 {
            sum += self.tree[i];
            i -= i & i.wrapping_neg();
        }
        sum
    }
}

/// The longest series whose Sen's slope is taken from every pairwise slope: 2048 points,
/// 2,096,128 slopes (16 MiB). Longer series (a steady window of many epochs) use
/// [`sen_slope_by_counting`]: the same median found by counting, in O(n log n) memory-light
/// steps, equal to the pairwise one up to floating-point rounding.
pub const SEN_PAIRWISE_MAX_POINTS: usize = 2048;

/// Sen's slope: the median of `(x_j − x_i)/(j − i)` over all `i < j`, per step of the
/// series. Separate from [`mann_kendall`] because it is only needed once a trend has been
/// found. `None` for fewer than 2 points.
pub fn sen_slope(x: &[f64]) -> Option<f64> {
    let n = x.len();
    if n < 2 {
        return None;
    }
    if n > SEN_PAIRWISE_MAX_POINTS {
        return Some(sen_slope_by_counting(x));
    }
    let mut slopes = Vec::with_capacity(n * (n - 1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            slopes.push((x[j] - x[i]) / (j - i) as f64);
        }
    }
    Some(median(&slopes))
}

/// Sen's slope of a series of at least 2 points without listing the n(n−1)/2 slopes: the
/// k-th smallest slope is the smallest `t` with at least k+1 slopes ≤ t, and the slopes ≤ t
/// are the pairs `i < j` with `x_j − t·j ≤ x_i − t·i` — inversions of one sequence, counted
/// by a merge sort in O(n log n). `t` is found by bisection over the floating-point
/// numbers (at most 64 counts per middle value).
pub fn sen_slope_by_counting(x: &[f64]) -> f64 {
    let n = x.len() as u64;
    let pairs = n * (n - 1) / 2;
    let (lo, hi) = x
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    // Every slope lies within ±range (a lag of 1 at most); all equal: every slope is 0.
    let range = (hi - lo).min(f64::MAX);
    if range <= 0.0 {
        return 0.0;
    }
    let upper = pairs / 2;
    let upper_slope = kth_slope(x, upper, -range, range);
    if pairs % 2 == 1 {
        upper_slope
    } else {
        0.5 * (kth_slope(x, upper - 1, -range, range) + upper_slope)
    }
}

/// The `k`-th smallest (0-based) slope, bisecting `[lo, hi]` in the order of the floats.
fn kth_slope(x: &[f64], k: u64, mut lo: f64, mut hi: f64) -> f64 {
    let mut scratch = Vec::with_capacity(x.len());
    let mut buf = Vec::with_capacity(x.len());
    let mut at_most = |t: f64| slopes_at_most(x, t, &mut scratch, &mut buf);
    if at_most(lo) > k {
        return lo;
    }
    if at_most(hi) <= k {
        return hi;
    }
    // Invariant: fewer than k+1 slopes ≤ lo, at least k+1 slopes ≤ hi.
    loop {
        let (a, b) = (ordered_bits(lo), ordered_bits(hi));
        if b - a <= 1 {
            return hi;
        }
        let mid = from_ordered_bits(a + (b - a) / 2);
        if at_most(mid) > k {
            hi = mid;
        } else {
            lo = mid;
        }
    }
}

/// How many pairs `i < j` have `(x_j − x_i)/(j − i) ≤ t`, counted as the pairs with
/// `y_i ≥ y_j` for `y_k = x_k − t·k`.
fn slopes_at_most(x: &[f64], t: f64, y: &mut Vec<f64>, buf: &mut Vec<f64>) -> u64 {
    y.clear();
    y.extend(x.iter().enumerate().map(|(k, &v)| v - t * k as f64));
    buf.clear();
    buf.resize(y.len(), 0.0);
    count_non_increasing_pairs(y, buf)
}

/// Pairs `i < j` with `y[i] ≥ y[j]`; sorts `y` (bottom-up merge sort, `buf` its scratch).
fn count_non_increasing_pairs(y: &mut [f64], buf: &mut [f64]) -> u64 {
    let n = y.len();
    let mut count = 0u64;
    let mut width = 1;
    while width < n {
        let mut start = 0;
        while start < n {
            let mid = (start + width).min(n);
            let end = (start + 2 * width).min(n);
            let (mut i, mut j, mut k) = (start, mid, start);
            while i < mid && j < end {
                if y[i] < y[j] {
                    buf[k] = y[i];
                    i += 1;
                } else {
                    // y[i..mid] are all ≥ y[i] ≥ y[j]: each is an earlier point not below.
                    count += (mid - i) as u64;
                    buf[k] = y[j];
                    j += 1;
                }
                k += 1;
            }
            buf[k..k + mid - i].copy_from_slice(&y[i..mid]);
            k += mid - i;
            buf[k..k + end - j].copy_from_slice(&y[j..end]);
            start = end;
        }
        y.copy_from_slice(buf);
        width *= 2;
    }
    count
}

/// A float's position in the order of the floats, as an unsigned integer.
fn ordered_bits(v: f64) -> u64 {
    let b = v.to_bits();
    if b >> 63 == 1 { !b } else { b | (1 << 63) }
}

fn from_ordered_bits(o: u64) -> f64 {
    f64::from_bits(if o >> 63 == 1 { o & !(1 << 63) } else { !o })
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
    use proptest::prelude::*;

    /// The definition, pair by pair (the implementation before it counted by ranks).
    fn mann_kendall_pairwise(x: &[f64]) -> Option<TrendTest> {
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
        Some(TrendTest {
            s,
            p_value: (2.0 * normal::sf(z.abs())).min(1.0),
        })
    }

    /// Series with many ties (values from a few levels) or none, with or without a trend.
    fn series() -> impl Strategy<Value = Vec<f64>> {
        (
            prop::collection::vec(0u32..50, 0..120),
            prop_oneof![Just(1u32), Just(4), Just(1000)],
            -0.5f64..0.5,
        )
            .prop_map(|(raw, levels, drift)| {
                raw.iter()
                    .enumerate()
                    .map(|(i, &r)| 10.0 + f64::from(r % levels) * 0.01 + drift * i as f64 / 100.0)
                    .collect()
            })
    }

    proptest! {
        /// Catches a wrong S (an off-by-one in the Fenwick counts, ties counted as
        /// concordant) or a wrong tie correction: the p-value would differ.
        #[test]
        fn rank_counted_mann_kendall_equals_the_pairwise_definition(x in series()) {
            prop_assert_eq!(mann_kendall(&x), mann_kendall_pairwise(&x));
        }

        /// Catches a suffix update that removes the wrong pairs or tie member.
        #[test]
        fn suffix_tests_equal_each_suffix_tested_alone(x in series()) {
            let all = mann_kendall_suffixes(&x);
            prop_assert_eq!(all.len(), x.len());
            for (i, t) in all.iter().enumerate() {
                prop_assert_eq!(*t, mann_kendall_pairwise(&x[i..]), "suffix {}", i);
            }
        }

        /// Catches a miscount in the merge sort (strict instead of ≤) or a bisection that
        /// stops at the wrong side: the counted median must be the pairwise one up to the
        /// rounding of `x_k − t·k`.
        #[test]
        fn counted_sen_slope_matches_the_pairwise_median(x in series()) {
            prop_assume!(x.len() >= 2);
            let pairwise = sen_slope(&x).unwrap();
            let counted = sen_slope_by_counting(&x);
            prop_assert!((counted - pairwise).abs() <= 1e-9 * (1.0 + pairwise.abs()),
                "counted {} pairwise {}", counted, pairwise);
        }
    }

    /// A long drifting series: the path `sen_slope` takes past the pairwise limit.
    #[test]
    fn long_series_slope_is_found_by_counting() {
        let n = SEN_PAIRWISE_MAX_POINTS + 1000;
        let x: Vec<f64> = (0..n)
            .map(|i| 10.0 + 0.001 * i as f64 + 0.05 * ((i * 7919) % 13) as f64)
            .collect();
        let slope = sen_slope(&x).unwrap();
        assert!((slope - 0.001).abs() < 1e-4, "{slope}");
        let t = mann_kendall(&x).unwrap();
        assert!(t.p_value < 1e-6 && t.s > 0.0);
    }

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
