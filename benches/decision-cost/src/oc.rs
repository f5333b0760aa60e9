//! The default design's operating characteristics for the report: the staged rule
//! (`replicates: 5`, budgets 30 — the default — and 20, 1…3 variants) over a grid of noise
//! levels given in units of the minimum effect, at true speed-ups of 0, 1, 2 and 5 × the
//! minimum effect: P(accept) per variant and the expected blocks. Written as
//! `crates/optgate-stats/data/operating_characteristics.csv`, which optgate-stats embeds
//! (`operating.rs`) and reads at the observed noise.

use std::fmt::Write as _;
use std::path::Path;

use optgate_stats::{Decision, Design, StagedPlan};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::sim::{self, Experiment};

/// Noise levels: SD of the per-block log ratios / ln(1 + min effect). The setting
/// (3 % run noise, 1 %) is √2·0.03/ln 1.01 = 4.26.
pub const NOISE_RATIOS: [f64; 8] = [0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0];
/// True speed-ups in multiples of the minimum effect (`sim::MIN_EFFECT_PCT`).
pub const MULTIPLES: [f64; 4] = [0.0, 1.0, 2.0, 5.0];
/// (replicates, max_replicates) of the designs tabled: the default budget, and 20.
pub const DESIGNS: [(u32, u32); 2] = [(5, 30), (5, 20)];
pub const VARIANTS: [usize; 3] = [1, 2, 3];
const SEED: u64 = 20261202;

/// The table's text, `reps` experiments per cell.
pub fn table(reps: usize) -> String {
    let mut out = String::from(
        "replicates,max_replicates,variants,noise_ratio,effect_multiple,p_accept,mean_blocks,experiments\n",
    );
    let delta = (1.0 + sim::MIN_EFFECT_PCT / 100.0).ln();
    for (first, max) in DESIGNS {
        for variants in VARIANTS {
            let plan =
                StagedPlan::new(first, max, sim::ALPHA, variants, Design::Paired).expect("plan");
            for (i, &ratio) in NOISE_RATIOS.iter().enumerate() {
                // Per-run log-normal SD whose paired difference has SD ratio·δ.
                let noise = ratio * delta / 2f64.sqrt();
                for (j, &m) in MULTIPLES.iter().enumerate() {
                    let seed =
                        SEED ^ (max as u64) << 32 ^ (variants as u64) << 24 ^ (i << 8 | j) as u64;
                    let mut rng = ChaCha8Rng::seed_from_u64(seed);
                    let (mut accepts, mut blocks) = (0usize, 0u64);
                    for _ in 0..reps {
                        let exp =
                            Experiment::draw(&mut rng, variants, m * sim::MIN_EFFECT_PCT, noise);
                        let o = sim::staged(&exp, variants, &plan);
                        accepts += o
                            .decisions
                            .iter()
                            .filter(|&&d| d == Decision::Accept)
                            .count();
                        blocks += o.blocks as u64;
                    }
                    let p = accepts as f64 / (reps * variants) as f64;
                    let b = blocks as f64 / reps as f64;
                    let _ = writeln!(
                        out,
                        "{first},{max},{variants},{ratio},{m},{p:.4},{b:.2},{reps}"
                    );
                }
            }
        }
    }
    out
}

/// Write the table where optgate-stats embeds it.
pub fn write(reps: usize) -> std::io::Result<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../crates/optgate-stats/data/operating_characteristics.csv");
    let text = table(reps);
    std::fs::write(path, &text)?;
    Ok(text)
}

/// RESULTS.md's section on the table: one variant, both budgets, every noise level.
pub fn section(s: &mut String, text: &str) {
    let cells = optgate_stats::operating::parse(text).expect("the table just written");
    let reps = cells.first().map_or(0, |c| c.experiments);
    let _ = writeln!(
        s,
        "## The default design's operating characteristics (what the report shows)\n\n\
         The staged rule, `replicates: 5`, budget 30 (the default) and 20, over a grid of noise \
         levels: the SD of the per-block log ratios in units of ln(1 + `min_effect_pct`) (the \
         issue's 3 % run noise at 1 % is 4.26), true speed-ups of 0, 1, 2 and 5 × `min_effect_pct`; \
         {reps} experiments per cell (P(accept) ± 2.9 points at most), 1–3 variants in \
         `crates/optgate-stats/data/operating_characteristics.csv`, which the report reads at the \
         observed noise. One variant here: P(accept) / E[blocks].\n\n\
         | budget | noise / min effect | 0 × | 1 × | 2 × | 5 × |\n|---|---|---|---|---|---|"
    );
    for (first, max) in DESIGNS {
        for ratio in NOISE_RATIOS {
            let at = |m: f64| {
                cells
                    .iter()
                    .find(|c| {
                        (c.replicates, c.max_replicates, c.variants) == (first, max, 1)
                            && c.noise_ratio == ratio
                            && c.effect_multiple == m
                    })
                    .map_or("—".to_string(), |c| {
                        format!("{:.1} % / {:.1}", 100.0 * c.p_accept, c.mean_blocks)
                    })
            };
            let _ = writeln!(
                s,
                "| {max} | {ratio} | {} | {} | {} | {} |",
                at(0.0),
                at(1.0),
                at(2.0),
                at(5.0)
            );
        }
    }
    s.push('\n');
}
