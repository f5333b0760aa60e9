//! Shared test data: small samples files written out in full, and a generator of
//! deterministic samples text for bigger cases.

/// Deterministic pseudo-noise in [-1, 1] (no RNG dependency needed for fixtures).
pub fn wobble(i: u64) -> f64 {
    // SplitMix64's finaliser: neighbouring inputs give unrelated outputs (a plain LCG step
    // would make the differences between arms constant and hide the noise).
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    ((z >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
}

/// A samples CSV: `arms` = (name, epoch-1 level, steady level), `reps` replicates,
/// `epochs` epochs, ±`noise` relative noise, blocks = replicate numbers.
pub fn samples_csv(arms: &[(&str, f64, f64)], reps: u32, epochs: u32, noise: f64) -> String {
    let mut out = String::from("variant,block,replicate,epoch,seconds\n");
    let mut i = 0u64;
    for (name, first, steady) in arms {
        for r in 1..=reps {
            for e in 1..=epochs {
                i += 1;
                let level = if e == 1 { *first } else { *steady };
                let v = level * (1.0 + noise * wobble(i));
                out.push_str(&format!("{name},{r},{r},{e},{v:.6}\n"));
            }
        }
    }
    out
}
