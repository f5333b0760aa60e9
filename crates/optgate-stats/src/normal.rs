//! The standard normal distribution, from `statrs`, behind three small functions so that
//! the rest of the crate reads like the formulas in STATISTICS.md.

use statrs::distribution::{ContinuousCDF, Normal};
use statrs::function::erf::erfc;

/// Φ(z), accurate in the lower tail (computed with erfc, not 1 − something).
pub fn cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// 1 − Φ(z), accurate in the upper tail.
pub fn sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// Φ⁻¹(p) for 0 < p < 1.
pub fn quantile(p: f64) -> f64 {
    // Normal::standard() cannot fail: mean 0 and sd 1 are valid parameters.
    Normal::standard().inverse_cdf(p)
}

/// φ(z), the density.
pub fn pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        assert!((cdf(0.0) - 0.5).abs() < 1e-15);
        // statrs' erfc is good to ~1e-11 relative: ample for p-values checked to 1e-9.
        assert!((sf(1.959963984540054) - 0.025).abs() < 1e-12 * 10.0);
        assert!((quantile(0.975) - 1.959963984540054).abs() < 1e-9);
        assert!((cdf(-1.0) + sf(-1.0) - 1.0).abs() < 1e-15);
    }
}
