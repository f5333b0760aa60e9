//! Mann–Whitney U test and the Hodges–Lehmann shift for two independent samples.
//!
//! Semantics follow STATISTICS.md and `scipy.stats.mannwhitneyu`: `U₁ = R₁ − m(m+1)/2`
//! from the average ranks of `x` in the pooled sample; exact null distribution when there
//! are no ties (`method='exact'`), otherwise the normal approximation with tie correction
//! and continuity correction (`method='asymptotic', use_continuity=True`).

use crate::htest::{Alternative, PMethod, RankTest, ShiftEstimate, ci_index, median_and_bounds};
use crate::normal;
use crate::rank::{average_ranks, tie_term};

/// Largest `m + n` for which the exact counts are built: C(125, 62) < 2¹²⁷ fits in i128.
/// Beyond that (more than ~60 replicates per arm) the normal approximation is used even
/// without ties, and the result says so.
pub const EXACT_MAX_TOTAL: usize = 125;

/// Exact null distribution of U for sample sizes `m` and `n` (no ties).
#[derive(Debug, Clone)]
pub struct MannWhitneyDist {
    m: usize,
    n: usize,
    /// pmf[u] = P(U = u), u = 0 ..= m·n.
    pmf: Vec<f64>,
}

impl MannWhitneyDist {
    /// `None` when `m + n > EXACT_MAX_TOTAL`.
    ///
    /// The counts of U are the coefficients of the Gaussian binomial coefficient
    /// `[m+n choose k]_q = Π_{i=1..k} (1 − q^{n'+i}) / (1 − q^i)` with `k = min(m, n)`,
    /// `n' = max(m, n)`. Each step multiplies by `(1 − q^{n'+i})` and divides by
    /// `(1 − q^i)`; after step `i` the polynomial is `[n'+i choose i]_q`, whose integer
    /// coefficients are exact in i128 up to the bound above.
    pub fn new(m: usize, n: usize) -> Option<Self> {
        if m + n > EXACT_MAX_TOTAL {
            return None;
        }
        let (k, big) = if m <= n { (m, n) } else { (n, m) };
        let top = m * n;
        let mut c = vec![0i128; top + 1];
        c[0] = 1;
        for i in 1..=k {
            let a = big + i;
            // Multiply by (1 − q^a): descending so c[j − a] is the old coefficient.
            for j in (a..=top).rev() {
                c[j] -= c[j - a];
            }
            // Divide by (1 − q^i), i.e. multiply by 1 + q^i + q^{2i} + …: ascending.
            for j in i..=top {
                c[j] += c[j - i];
            }
        }
        let total: i128 = c.iter().sum();
        let total_f = total as f64;
        let pmf = c.iter().map(|&v| v as f64 / total_f).collect();
        Some(MannWhitneyDist { m, n, pmf })
    }

    pub fn sizes(&self) -> (usize, usize) {
        (self.m, self.n)
    }

    /// P(U ≤ u).
    pub fn cdf(&self, u: i64) -> f64 {
        if u < 0 {
            return 0.0;
        }
        let u = (u as usize).min(self.pmf.len() - 1);
        self.pmf[..=u].iter().sum()
    }

    /// P(U ≥ u).
    pub fn sf(&self, u: i64) -> f64 {
        if u <= 0 {
            return 1.0;
        }
        let u = u as usize;
        if u >= self.pmf.len() {
            return 0.0;
        }
        self.pmf[u..].iter().rev().sum()
    }

    fn lower_cdf_table(&self) -> Vec<f64> {
        let half = (self.pmf.len() - 1) / 2;
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

/// One-sided Mann–Whitney U test of `x` against `y`: `Greater` is H1 "x tends to be
/// larger than y". Pass `y + δ` to test a shifted null.
pub fn mann_whitney_u(x: &[f64], y: &[f64], alternative: Alternative) -> RankTest {
    let (m, n) = (x.len(), y.len());
    if m == 0 || n == 0 {
        return RankTest {
            statistic: 0.0,
            p_value: 1.0,
            method: PMethod::Degenerate,
            n_used: 0,
        };
    }
    let pooled: Vec<f64> = x.iter().chain(y.iter()).copied().collect();
    let (ranks, ties) = average_ranks(&pooled);
    let r1: f64 = ranks[..m].iter().sum();
    let mf = m as f64;
    let nf = n as f64;
    let u1 = r1 - mf * (mf + 1.0) / 2.0;
    let has_ties = ties.iter().any(|&t| t > 1);

    if !has_ties && let Some(dist) = MannWhitneyDist::new(m, n) {
        let u = u1.round() as i64;
        let p = match alternative {
            Alternative::Greater => dist.sf(u),
            Alternative::Less => dist.cdf(u),
        };
        return RankTest {
            statistic: u1,
            p_value: p.clamp(0.0, 1.0),
            method: PMethod::Exact,
            n_used: m + n,
        };
    }

    let total = mf + nf;
    let mu = mf * nf / 2.0;
    let s = (mf * nf / 12.0 * ((total + 1.0) - tie_term(&ties) / (total * (total - 1.0)))).sqrt();
    let p = if s > 0.0 {
        match alternative {
            Alternative::Greater => normal::sf((u1 - mu - 0.5) / s),
            // SciPy uses U₂ = mn − U₁ with the upper tail; the same number.
            Alternative::Less => normal::sf((mf * nf - u1 - mu - 0.5) / s),
        }
    } else {
        1.0
    };
    RankTest {
        statistic: u1,
        p_value: p.clamp(0.0, 1.0),
        method: PMethod::Normal,
        n_used: m + n,
    }
}

/// Sorted pairwise differences `x_i − y_j`.
pub fn pairwise_differences(x: &[f64], y: &[f64]) -> Vec<f64> {
    let mut d = pairwise_differences_unsorted(x, y);
    d.sort_by(f64::total_cmp);
    d
}

fn pairwise_differences_unsorted(x: &[f64], y: &[f64]) -> Vec<f64> {
    let mut d = Vec::with_capacity(x.len() * y.len());
    for xi in x {
        for yj in y {
            d.push(xi - yj);
        }
    }
    d
}

/// Hodges–Lehmann shift `median(x_i − y_j)` with the distribution-free interval, each
/// bound one-sided at `alpha`: with the `M = m·n` sorted differences `D_(1) ≤ … ≤ D_(M)`
/// the bounds are `D_(k)` and `D_(M+1−k)` where `k − 1` is the largest `c` with
/// `P(U ≤ c) ≤ α` under the exact Mann–Whitney null distribution. When `m + n` exceeds
/// [`EXACT_MAX_TOTAL`], `k` comes from the normal approximation of U instead.
pub fn hodges_lehmann_shift(x: &[f64], y: &[f64], alpha: f64) -> Option<ShiftEstimate> {
    if x.is_empty() || y.is_empty() {
        return None;
    }
    let (m, n) = (x.len(), y.len());
    let k = match MannWhitneyDist::new(m, n) {
        Some(dist) => ci_index(&dist.lower_cdf_table(), alpha),
        None => {
            let (mf, nf) = (m as f64, n as f64);
            let mu = mf * nf / 2.0;
            let s = (mf * nf * (mf + nf + 1.0) / 12.0).sqrt();
            let c = (mu + normal::quantile(alpha) * s - 0.5).floor();
            (c >= 0.0).then(|| c as usize + 1)
        }
    };
    // The order statistics of the sorted differences, selected rather than sorted.
    let (estimate, bounds) = median_and_bounds(&mut pairwise_differences_unsorted(x, y), k);
    let (ci_low, ci_high) = (bounds.map(|b| b.0), bounds.map(|b| b.1));
    Some(ShiftEstimate {
        estimate,
        ci_low,
        ci_high,
        k,
    })
}

/// Smallest one-sided p-value the exact test can give with `m` and `n`: 1 / C(m+n, m).
pub fn min_p_unpaired(m: usize, n: usize) -> f64 {
    // Product form keeps this finite in f64 far beyond the exact-table range.
    let (k, total) = (m.min(n), m + n);
    let mut c = 1.0f64;
    for i in 1..=k {
        c = c * (total - k + i) as f64 / i as f64;
    }
    1.0 / c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dist_small_case() {
        // m = n = 2: U ∈ {0,1,2,2,3,4} over C(4,2) = 6 arrangements.
        let d = MannWhitneyDist::new(2, 2).unwrap();
        let expect = [1.0, 1.0, 2.0, 1.0, 1.0].map(|c| c / 6.0);
        for (a, b) in d.pmf.iter().zip(expect) {
            assert!((a - b).abs() < 1e-15);
        }
    }

    #[test]
    fn dist_sums_to_one() {
        for (m, n) in [(5, 5), (3, 11), (30, 30), (60, 65)] {
            let d = MannWhitneyDist::new(m, n).unwrap();
            let total: f64 = d.pmf.iter().sum();
            assert!((total - 1.0).abs() < 1e-12, "{m} {n}");
        }
        assert!(MannWhitneyDist::new(63, 63).is_none());
    }

    #[test]
    fn min_p() {
        assert!((min_p_unpaired(5, 5) - 1.0 / 252.0).abs() < 1e-15);
        let x = [10.0, 11.0, 12.0, 13.0, 14.0];
        let y = [1.0, 2.0, 3.0, 4.0, 5.0];
        let t = mann_whitney_u(&x, &y, Alternative::Greater);
        assert_eq!(t.method, PMethod::Exact);
        assert!((t.p_value - 1.0 / 252.0).abs() < 1e-15);
    }
}
