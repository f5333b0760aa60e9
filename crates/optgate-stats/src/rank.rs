//! Ranking with ties (average ranks) and the tie-group sizes the normal approximations
//! need. Ties are exact floating-point equality, as in SciPy's `rankdata`.

/// Average ranks (1-based) of `x` and the sizes of the tie groups (groups of size 1
/// included). NaN must not occur (callers validate their data).
pub fn average_ranks(x: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let n = x.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut ranks = vec![0.0; n];
    let mut ties = Vec::new();
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        // -0.0 and 0.0 compare equal here (==), unlike total_cmp; callers never pass
        // both because the signed-rank test ranks absolute values of non-zero numbers.
        while j < n && x[order[j]] == x[order[i]] {
            j += 1;
        }
        // Positions i..j (0-based) share the average of ranks i+1..=j.
        let avg = (i + 1 + j) as f64 / 2.0;
        for &k in &order[i..j] {
            ranks[k] = avg;
        }
        ties.push(j - i);
        i = j;
    }
    (ranks, ties)
}

/// Σ (t³ − t) over tie groups: the tie term of both normal approximations.
pub fn tie_term(ties: &[usize]) -> f64 {
    ties.iter()
        .map(|&t| {
            let t = t as f64;
            t * t * t - t
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_with_ties() {
        let (r, t) = average_ranks(&[3.0, 1.0, 3.0, 2.0]);
        assert_eq!(r, vec![3.5, 1.0, 3.5, 2.0]);
        let mut t = t;
        t.sort();
        assert_eq!(t, vec![1, 1, 2]);
        assert_eq!(tie_term(&t), 6.0);
    }
}
