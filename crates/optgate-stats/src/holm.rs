//! Holm's step-down adjustment of a family of p-values (one family per experiment and
//! per hypothesis direction). Missing p-values are not members of the family.

/// Holm-adjusted p-values, in the input order: with the `m` present p-values sorted
/// ascending, `adj_(i) = max_{j ≤ i} min(1, (m − j + 1) · p_(j))`.
pub fn holm(p: &[Option<f64>]) -> Vec<Option<f64>> {
    holm_in_family(p, 0)
}

/// Holm over a family of the present p-values plus `extra` members without a p-value here
/// (hypotheses tested earlier and not rejected): they rank last, so each present p-value's
/// multiplier grows by `extra`.
pub fn holm_in_family(p: &[Option<f64>], extra: usize) -> Vec<Option<f64>> {
    let mut present: Vec<(usize, f64)> = p
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.map(|v| (i, v)))
        .collect();
    let m = present.len() + extra;
    // Stable sort: equal p-values keep their input order, so results are deterministic.
    present.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut out = vec![None; p.len()];
    let mut running = 0.0f64;
    for (rank, (i, v)) in present.into_iter().enumerate() {
        let adj = ((m - rank) as f64 * v).min(1.0);
        running = running.max(adj);
        out[i] = Some(running);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn textbook_example() {
        // p = (0.01, 0.04, 0.03, None) → sorted 0.01, 0.03, 0.04 with m = 3:
        // 0.03, max(0.03, 0.06) = 0.06, max(0.06, 0.04) = 0.06.
        let adj = holm(&[Some(0.01), Some(0.04), Some(0.03), None]);
        let v: Vec<f64> = adj.iter().flatten().copied().collect();
        assert!((v[0] - 0.03).abs() < 1e-15);
        assert!((v[1] - 0.06).abs() < 1e-15);
        assert!((v[2] - 0.06).abs() < 1e-15);
        assert_eq!(adj[3], None);
    }

    #[test]
    fn extra_members_rank_last() {
        // Two present of a family of four: multipliers 4 and 3, as if the two retired
        // members had the largest p-values.
        let adj = holm_in_family(&[Some(0.02), Some(0.01)], 2);
        assert!((adj[1].unwrap() - 0.04).abs() < 1e-15);
        assert!((adj[0].unwrap() - 0.06).abs() < 1e-15);
        assert_eq!(holm_in_family(&[Some(0.01)], 0), holm(&[Some(0.01)]));
    }

    #[test]
    fn capped_at_one() {
        assert_eq!(holm(&[Some(0.6), Some(0.7)]), vec![Some(1.0), Some(1.0)]);
    }
}
