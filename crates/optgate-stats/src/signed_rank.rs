//! Wilcoxon signed-rank test and the Hodges–Lehmann estimate for paired differences.
//!
//! Semantics follow STATISTICS.md and SciPy's `wilcoxon(d, zero_method='wilcox')`:
//! zeros are dropped (Wilcox); with no ties and no zeros the p-value comes from the exact
//! null distribution of W+ (`method='exact'`), otherwise from the normal approximation
//! with tie and continuity correction (`method='asymptotic', correction=True`).

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::htest::{Alternative, PMethod, RankTest, ShiftEstimate, ci_index, median_and_bounds};
use crate::normal;
use crate::rank::{average_ranks, tie_term};

/// The fewest pairs whose distribution [`SignedRankDist::shared`] keeps: below this one is
/// cheaper to build than to look up.
pub const SHARED_MIN_N: usize = 64;

/// How many distributions [`SignedRankDist::shared`] keeps (the most recently built; at
/// most ~4 MB each at the largest n, 1000 replicates).
pub const SHARED_KEPT: usize = 4;

static SHARED: OnceLock<Mutex<Vec<Arc<SignedRankDist>>>> = OnceLock::new();

/// The cache's lock; a panic elsewhere while holding it leaves a list of whole entries.
fn lock(cache: &Mutex<Vec<Arc<SignedRankDist>>>) -> MutexGuard<'_, Vec<Arc<SignedRankDist>>> {
    cache.lock().unwrap_or_else(|e| e.into_inner())
}

/// Exact null distribution of W+ for `n` untied, non-zero differences.
#[derive(Debug, Clone)]
pub struct SignedRankDist {
    n: usize,
    /// pmf[w] = P(W+ = w), w = 0 ..= n(n+1)/2.
    pmf: Vec<f64>,
}

impl SignedRankDist {
    /// Builds the distribution by dynamic programming over the ranks: rank `i` is either
    /// in the positive set or not, each with probability 1/2. Only additions of
    /// non-negative numbers and halvings, so every entry keeps full relative precision
    /// (no 1 − x cancellation), for any n. O(n³): each row is computed from the previous
    /// one into a second buffer (a loop the compiler vectorises).
    pub fn new(n: usize) -> Self {
        let max = n * (n + 1) / 2;
        let mut pmf = vec![0.0; max + 1];
        let mut next = vec![0.0; max + 1];
        pmf[0] = 1.0;
        let mut top = 0;
        for i in 1..=n {
            top += i;
            let low = i.min(top + 1);
            // Below i, rank i cannot be in the positive set: 0.5·(p + 0).
            for (out, &p) in next[..low].iter_mut().zip(&pmf[..low]) {
                *out = 0.5 * (p + 0.0);
            }
            for ((out, &p), &with_i) in next[low..=top]
                .iter_mut()
                .zip(&pmf[low..=top])
                .zip(&pmf[..=top - low])
            {
                *out = 0.5 * (p + with_i);
            }
            std::mem::swap(&mut pmf, &mut next);
        }
        SignedRankDist { n, pmf }
    }

    /// The distribution for `n`, shared: the last few built for large `n` are kept
    /// ([`SHARED_KEPT`]), since every variant of an analysis (and each of its tests and
    /// intervals) asks for the same `n`, and at n = 1000 one costs ~10⁸ operations.
    pub fn shared(n: usize) -> Arc<SignedRankDist> {
        if n < SHARED_MIN_N {
            return Arc::new(SignedRankDist::new(n));
        }
        let cache = SHARED.get_or_init(|| Mutex::new(Vec::new()));
        if let Some(d) = lock(cache).iter().find(|d| d.n == n) {
            return Arc::clone(d);
        }
        // Built outside the lock: another thread asking for another n is not held up.
        let d = Arc::new(SignedRankDist::new(n));
        let mut kept = lock(cache);
        if !kept.iter().any(|k| k.n == n) {
            if kept.len() >= SHARED_KEPT {
                kept.remove(0);
            }
            kept.push(Arc::clone(&d));
        }
        d
    }

    pub fn n(&self) -> usize {
        self.n
    }

    /// Largest value of W+: n(n+1)/2.
    pub fn max(&self) -> usize {
        self.pmf.len() - 1
    }

    /// P(W+ ≤ w).
    pub fn cdf(&self, w: i64) -> f64 {
        if w < 0 {
            return 0.0;
        }
        let w = (w as usize).min(self.max());
        self.pmf[..=w].iter().sum()
    }

    /// P(W+ ≥ w).
    pub fn sf(&self, w: i64) -> f64 {
        if w <= 0 {
            return 1.0;
        }
        let w = w as usize;
        if w > self.max() {
            return 0.0;
        }
        // Summed from the far tail inwards: small terms first.
        self.pmf[w..].iter().rev().sum()
    }

    /// P(W+ ≤ c) for c = 0, 1, ... up to the median (enough for interval indices).
    fn lower_cdf_table(&self) -> Vec<f64> {
        let half = self.max() / 2;
        let mut acc = 0.0;
        self.pmf[..=half]
            .iter()
            .map(|p| {
                acc += p;
                acc
            })
            .collect()
    }
}

/// One-sided Wilcoxon signed-rank test of `H0: median(d) = 0` (or ≤ / ≥) against the
/// given alternative. Pass `d − δ` to test against a shifted null.
pub fn wilcoxon_signed_rank(d: &[f64], alternative: Alternative) -> RankTest {
    // Wilcox's convention: zeros carry no sign information and are dropped.
    let nonzero: Vec<f64> = d.iter().copied().filter(|v| *v != 0.0).collect();
    let n = nonzero.len();
    let had_zeros = n < d.len();
    if n == 0 {
        return RankTest {
            statistic: 0.0,
            p_value: 1.0,
            method: PMethod::Degenerate,
            n_used: 0,
        };
    }
    let abs: Vec<f64> = nonzero.iter().map(|v| v.abs()).collect();
    let (ranks, ties) = average_ranks(&abs);
    let w_plus: f64 = nonzero
        .iter()
        .zip(&ranks)
        .filter(|(v, _)| **v > 0.0)
        .map(|(_, r)| *r)
        .sum();
    let has_ties = ties.iter().any(|&t| t > 1);

    if !has_ties && !had_zeros {
        let dist = SignedRankDist::shared(n);
        // W+ is an integer here (no ties), so rounding only removes float noise.
        let w = w_plus.round() as i64;
        let p = match alternative {
            Alternative::Greater => dist.sf(w),
            Alternative::Less => dist.cdf(w),
        };
        return RankTest {
            statistic: w_plus,
            p_value: p.clamp(0.0, 1.0),
            method: PMethod::Exact,
            n_used: n,
        };
    }

    let nf = n as f64;
    let mean = nf * (nf + 1.0) * 0.25;
    let var = (nf * (nf + 1.0) * (2.0 * nf + 1.0) - tie_term(&ties) / 2.0) / 24.0;
    let se = var.sqrt();
    let p = if se > 0.0 {
        match alternative {
            // Continuity correction towards the null: half a rank-sum unit.
            Alternative::Greater => normal::sf((w_plus - mean - 0.5) / se),
            Alternative::Less => normal::cdf((w_plus - mean + 0.5) / se),
        }
    } else {
        1.0
    };
    RankTest {
        statistic: w_plus,
        p_value: p.clamp(0.0, 1.0),
        method: PMethod::Normal,
        n_used: n,
    }
}

/// Sorted Walsh averages `(d_i + d_j)/2, i ≤ j`.
pub fn walsh_averages(d: &[f64]) -> Vec<f64> {
    let mut w = walsh_averages_unsorted(d);
    w.sort_by(f64::total_cmp);
    w
}

fn walsh_averages_unsorted(d: &[f64]) -> Vec<f64> {
    let n = d.len();
    let mut w = Vec::with_capacity(n * (n + 1) / 2);
    for i in 0..n {
        for j in i..n {
            w.push(0.5 * (d[i] + d[j]));
        }
    }
    w
}

/// Hodges–Lehmann estimate of the centre of `d` (median of the Walsh averages) with the
/// distribution-free interval: each bound one-sided at level `alpha` (so the interval is
/// at level `1 − 2α`). With `M = n(n+1)/2` sorted Walsh averages `A_(1) ≤ … ≤ A_(M)`, the
/// bounds are `A_(k)` and `A_(M+1−k)` where `k − 1` is the largest `c` with
/// `P(W+ ≤ c) ≤ α` under the exact null distribution for `n` (all differences, zeros
/// included). This is the interval that inverts the exact signed-rank test.
pub fn hodges_lehmann_paired(d: &[f64], alpha: f64) -> Option<ShiftEstimate> {
    if d.is_empty() {
        return None;
    }
    let dist = SignedRankDist::shared(d.len());
    let k = ci_index(&dist.lower_cdf_table(), alpha);
    // The order statistics of the sorted averages, selected rather than sorted.
    let (estimate, bounds) = median_and_bounds(&mut walsh_averages_unsorted(d), k);
    let (ci_low, ci_high) = (bounds.map(|b| b.0), bounds.map(|b| b.1));
    Some(ShiftEstimate {
        estimate,
        ci_low,
        ci_high,
        k,
    })
}

/// Smallest one-sided p-value the exact signed-rank test can give with `n` pairs: 2⁻ⁿ.
pub fn min_p_paired(n: usize) -> f64 {
    0.5f64.powi(n as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-place recursion the distribution was built with before (one buffer, each
    /// row in descending order).
    fn pmf_in_place(n: usize) -> Vec<f64> {
        let mut pmf = vec![0.0; n * (n + 1) / 2 + 1];
        pmf[0] = 1.0;
        let mut top = 0;
        for i in 1..=n {
            top += i;
            for w in (0..=top).rev() {
                let with_i = if w >= i { pmf[w - i] } else { 0.0 };
                pmf[w] = 0.5 * (pmf[w] + with_i);
            }
        }
        pmf
    }

    /// Catches a two-buffer row that reads the wrong offset or leaves stale entries above
    /// the row's top (any p-value would move), and a cache that hands back the
    /// distribution of another n.
    #[test]
    fn two_buffer_and_shared_distributions_equal_the_in_place_recursion_bit_for_bit() {
        for n in [1, 2, 3, 7, 30, SHARED_MIN_N, 150, 151] {
            let reference = pmf_in_place(n);
            let bits = |p: &[f64]| p.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&SignedRankDist::new(n).pmf),
                bits(&reference),
                "n = {n}"
            );
            let shared = SignedRankDist::shared(n);
            assert_eq!(shared.n(), n);
            assert_eq!(bits(&shared.pmf), bits(&reference), "shared, n = {n}");
        }
        // Asked again after others: still its own n.
        assert_eq!(SignedRankDist::shared(150).n(), 150);
    }

    /// Catches a cache that keeps every n it was asked for (unbounded memory).
    #[test]
    fn shared_keeps_at_most_its_limit() {
        for n in SHARED_MIN_N..SHARED_MIN_N + 2 * SHARED_KEPT {
            assert_eq!(SignedRankDist::shared(n).n(), n);
        }
        let kept = lock(SHARED.get().expect("used above")).len();
        assert!(kept <= SHARED_KEPT, "{kept} kept");
    }

    #[test]
    fn distribution_sums_to_one_and_is_symmetric() {
        for n in [1, 5, 12, 30] {
            let d = SignedRankDist::new(n);
            let total: f64 = d.pmf.iter().sum();
            assert!((total - 1.0).abs() < 1e-12);
            let m = d.max();
            for w in 0..=m {
                assert!((d.pmf[w] - d.pmf[m - w]).abs() < 1e-15);
            }
        }
    }

    #[test]
    fn n5_tail() {
        // Textbook: P(W+ ≤ 0) = 1/32, P(W+ ≤ 1) = 2/32, P(W+ ≤ 3) = 5/32 for n = 5.
        let d = SignedRankDist::new(5);
        assert!((d.cdf(0) - 1.0 / 32.0).abs() < 1e-15);
        assert!((d.cdf(1) - 2.0 / 32.0).abs() < 1e-15);
        assert!((d.cdf(3) - 5.0 / 32.0).abs() < 1e-15);
        assert!((d.sf(15) - 1.0 / 32.0).abs() < 1e-15);
    }

    #[test]
    fn all_positive_n5_gives_min_p() {
        let t = wilcoxon_signed_rank(&[0.1, 0.2, 0.3, 0.4, 0.5], Alternative::Greater);
        assert_eq!(t.method, PMethod::Exact);
        assert!((t.p_value - min_p_paired(5)).abs() < 1e-15);
    }

    #[test]
    fn hl_interval_n5_is_min_max_walsh() {
        let d = [1.0, 2.0, 4.0, 8.0, 16.0];
        let e = hodges_lehmann_paired(&d, 0.05).unwrap();
        assert_eq!(e.k, Some(1));
        assert_eq!(e.ci_low, Some(1.0));
        assert_eq!(e.ci_high, Some(16.0));
        // n = 4: P(W+ ≤ 0) = 1/16 > 0.05, no finite bound.
        let e4 = hodges_lehmann_paired(&d[..4], 0.05).unwrap();
        assert_eq!(e4.ci_low, None);
    }
}
