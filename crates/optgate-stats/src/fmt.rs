//! Numbers for people, as every report prints them: signed percentages and p-values.

/// A signed percentage with one decimal (`+9.9%`, `-3.0%`); a value that rounds to zero
/// is `0.0%`, never `-0.0%` (a sign on nothing reads as a direction).
pub fn fmt_signed_pct(v: f64) -> String {
    let s = format!("{v:+.1}");
    if s == "-0.0" || s == "+0.0" {
        "0.0%".to_string()
    } else {
        format!("{s}%")
    }
}

/// p-values for people: 4 significant digits, scientific below 1e-4.
pub fn fmt_p(p: f64) -> String {
    if p == 0.0 {
        "0".into()
    } else if p < 1e-4 {
        format!("{p:.2e}")
    } else {
        let s = format!("{p:.4}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        s.to_string()
    }
}

#[cfg(test)]
mod fmt_tests {
    use super::fmt_signed_pct;

    #[test]
    fn signed_percentages_never_show_minus_zero() {
        assert_eq!(fmt_signed_pct(-0.04), "0.0%");
        assert_eq!(fmt_signed_pct(0.04), "0.0%");
        assert_eq!(fmt_signed_pct(-0.0), "0.0%");
        assert_eq!(fmt_signed_pct(-0.05001), "-0.1%");
        assert_eq!(fmt_signed_pct(9.94), "+9.9%");
        assert_eq!(fmt_signed_pct(-45.0), "-45.0%");
    }
}
