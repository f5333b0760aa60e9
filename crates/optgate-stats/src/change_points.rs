//! Change points in a history (one value per execution, oldest first): E-Divisive means
//! (Matteson & James, 2014; the method MongoDB's performance CI runs) — the energy
//! statistic's best split of a segment, kept only when a permutation test with a fixed
//! seed finds it significant, then the same on each side (divisive bisection) until a
//! split is not significant. By default each segment's values are replaced by their ranks
//! before the statistic is taken ([`ChangePointConfig::ranks`]): one outlying execution then
//! neither hides a step nor makes one, and a short history keeps its power (measured in
//! `tests/change_point_rates.rs`, quoted in docs/STATISTICS.md "Change points"). Pure: no
//! I/O, no clock; the same series gives the same answer.

use serde::{Deserialize, Serialize};

/// Significance level of each split's permutation test (docs/STATISTICS.md "Change points").
pub const CHANGE_POINT_ALPHA: f64 = 0.05;
/// Permutations per test: p is a multiple of 1/1000, so its Monte-Carlo error near α = 0.05
/// is about ±0.007 (with 199 it was ±0.015, and a clear step in eight values, whose exact p
/// is 2/70 ≈ 0.029, was missed one time in eight).
pub const CHANGE_POINT_PERMUTATIONS: u32 = 999;
/// Fewest executions on each side of a split: one execution alone is no level.
pub const MIN_SEGMENT: usize = 2;
/// The longest series searched (its last values): the search costs O(n²) per permutation,
/// so 500 executions take about a second per test.
pub const MAX_CHANGE_POINT_SERIES: usize = 500;

/// How the search runs; [`ChangePointConfig::default`] is what `optgate history` uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangePointConfig {
    pub alpha: f64,
    pub permutations: u32,
    pub min_segment: usize,
    pub seed: u64,
    /// The statistic on each segment's ranks (average ranks for ties) instead of its values.
    pub ranks: bool,
}

impl Default for ChangePointConfig {
    fn default() -> Self {
        ChangePointConfig {
            alpha: CHANGE_POINT_ALPHA,
            permutations: CHANGE_POINT_PERMUTATIONS,
            min_segment: MIN_SEGMENT,
            seed: 0x6f70_7467_6174_6521,
            ranks: true,
        }
    }
}

/// A change: from `index` (0-based, the first value at the new level) on, the series sits
/// at `after` (the median of its segment) instead of `before` (the previous segment's).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ChangePoint {
    pub index: usize,
    pub before: f64,
    pub after: f64,
    /// The permutation test's p-value, `(1 + #{permuted ≥ observed}) / (permutations + 1)`.
    pub p: f64,
}

/// The energy statistic `Q̂ = m·k/(m+k) · (2/(m·k) Σ|a−b| − Σ_{i<j}|aᵢ−aⱼ|/C(m,2) −
/// Σ_{i<j}|bᵢ−bⱼ|/C(k,2))` of the split of `left` (m values) from `right` (k values),
/// with exponent 1; a side of one value has no within term.
pub fn energy_statistic(left: &[f64], right: &[f64]) -> f64 {
    let (m, k) = (left.len() as f64, right.len() as f64);
    if left.is_empty() || right.is_empty() {
        return 0.0;
    }
    let between: f64 = left
        .iter()
        .flat_map(|a| right.iter().map(move |b| (a - b).abs()))
        .sum();
    let within = |xs: &[f64]| -> f64 {
        let n = xs.len() as f64;
        if xs.len() < 2 {
            return 0.0;
        }
        let s: f64 = (0..xs.len())
            .flat_map(|i| (i + 1..xs.len()).map(move |j| (i, j)))
            .map(|(i, j)| (xs[i] - xs[j]).abs())
            .sum();
        s / (n * (n - 1.0) / 2.0)
    };
    m * k / (m + k) * (2.0 * between / (m * k) - within(left) - within(right))
}

/// The best split of `xs` (each side at least `min_segment` long) by the energy statistic,
/// as `(τ, Q̂)` with `xs[..τ]` on the left, in O(n²): the within and between sums move
/// one value from the right side to the left at each step.
pub fn best_split(xs: &[f64], min_segment: usize) -> Option<(usize, f64)> {
    let n = xs.len();
    let min = min_segment.max(1);
    if n < 2 * min {
        return None;
    }
    let d = |i: usize, j: usize| (xs[i] - xs[j]).abs();
    let total: f64 = (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .map(|(i, j)| d(i, j))
        .sum();
    let (mut within_left, mut within_right) = (0.0, total);
    let mut best: Option<(usize, f64)> = None;
    for tau in 1..n - min + 1 {
        // Value tau - 1 leaves the right side for the left.
        let v = tau - 1;
        within_left += (0..v).map(|i| d(i, v)).sum::<f64>();
        within_right -= (v + 1..n).map(|j| d(v, j)).sum::<f64>();
        if tau < min {
            continue;
        }
        let (m, k) = (tau as f64, (n - tau) as f64);
        let between = total - within_left - within_right;
        let mean_pair = |s: f64, c: f64| {
            if c < 2.0 {
                0.0
            } else {
                s / (c * (c - 1.0) / 2.0)
            }
        };
        let e = 2.0 * between / (m * k) - mean_pair(within_left, m) - mean_pair(within_right, k);
        let q = m * k / (m + k) * e;
        if best.is_none_or(|(_, b)| q > b) {
            best = Some((tau, q));
        }
    }
    best
}

/// SplitMix64: a small seeded generator, so the permutations are the same on every run.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..=bound` (bound < 2³², so the modulo bias is below 2⁻³²).
    fn up_to(&mut self, bound: usize) -> usize {
        (self.next() % (bound as u64 + 1)) as usize
    }
}

/// The permutation p-value of `observed`, the best split's statistic of `xs`: the share of
/// shuffles of `xs` whose best split is at least as large (the observed one counted too).
fn permutation_p(xs: &[f64], observed: f64, cfg: &ChangePointConfig, rng: &mut SplitMix) -> f64 {
    let mut shuffled = xs.to_vec();
    let mut at_least = 0u32;
    for _ in 0..cfg.permutations {
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, rng.up_to(i));
        }
        let q = best_split(&shuffled, cfg.min_segment).map_or(f64::NEG_INFINITY, |(_, q)| q);
        // A relative tolerance: a permutation equal to the observed split up to rounding
        // counts as at least as large.
        if q >= observed - 1e-12 * observed.abs().max(1.0) {
            at_least += 1;
        }
    }
    f64::from(1 + at_least) / f64::from(cfg.permutations + 1)
}

/// The change points of `series` (0-based indices of each new level's first value),
/// in order. Non-finite values, and values before the last [`MAX_CHANGE_POINT_SERIES`],
/// are the caller's to leave out: a series with one is searched as given up to its first.
pub fn change_points(series: &[f64], cfg: &ChangePointConfig) -> Vec<ChangePoint> {
    let usable = series.iter().take_while(|v| v.is_finite()).count();
    let start = usable.saturating_sub(MAX_CHANGE_POINT_SERIES);
    let xs = &series[start..usable];
    // Segments still open to a split, as [from, to) ranges; the found splits with their p.
    let mut open = vec![(0usize, xs.len())];
    let mut found: Vec<(usize, f64)> = Vec::new();
    let mut rng = SplitMix(cfg.seed);
    let values = |a: usize, b: usize| -> Vec<f64> {
        match cfg.ranks {
            true => crate::rank::average_ranks(&xs[a..b]).0,
            false => xs[a..b].to_vec(),
        }
    };
    loop {
        // The segment whose best split is largest is tested first (Matteson & James).
        let best = open
            .iter()
            .enumerate()
            .filter_map(|(i, &(a, b))| best_split(&values(a, b), cfg.min_segment).map(|s| (i, s)))
            .max_by(|x, y| x.1.1.total_cmp(&y.1.1));
        let Some((i, (tau, q))) = best else { break };
        let (a, b) = open[i];
        let p = permutation_p(&values(a, b), q, cfg, &mut rng);
        if p > cfg.alpha {
            break;
        }
        found.push((a + tau, p));
        open.swap_remove(i);
        open.push((a, a + tau));
        open.push((a + tau, b));
    }
    if found.is_empty() {
        return Vec::new();
    }
    found.sort_by_key(|&(at, _)| at);
    levels(xs, &found)
        .into_iter()
        .map(|c| ChangePoint {
            index: c.index + start,
            ..c
        })
        .collect()
}

/// Each split with the medians of the segments on either side of it.
fn levels(xs: &[f64], splits: &[(usize, f64)]) -> Vec<ChangePoint> {
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(splits.iter().map(|s| s.0))
        .chain(std::iter::once(xs.len()))
        .collect();
    let medians: Vec<f64> = bounds
        .windows(2)
        .map(|w| crate::trend::median(&xs[w[0]..w[1]]))
        .collect();
    splits
        .iter()
        .enumerate()
        .map(|(i, &(index, p))| ChangePoint {
            index,
            before: medians[i],
            after: medians[i + 1],
            p,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The O(n²) running sums give the statistic of its definition at every split.
    #[test]
    fn the_best_split_is_the_definitions_maximum() {
        let xs = [1.0, 1.2, 0.9, 1.1, 2.0, 2.2, 1.9, 2.1, 2.05];
        let (tau, q) = best_split(&xs, 2).unwrap();
        let direct = (2..=xs.len() - 2)
            .map(|t| (t, energy_statistic(&xs[..t], &xs[t..])))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        assert_eq!(tau, direct.0);
        assert!((q - direct.1).abs() < 1e-12, "{q} vs {}", direct.1);
        assert_eq!(tau, 4);
    }

    #[test]
    fn too_short_a_series_has_no_split() {
        assert_eq!(best_split(&[1.0, 2.0, 3.0], 2), None);
        assert!(change_points(&[1.0, 2.0, 3.0], &ChangePointConfig::default()).is_empty());
        assert!(change_points(&[], &ChangePointConfig::default()).is_empty());
    }
}
