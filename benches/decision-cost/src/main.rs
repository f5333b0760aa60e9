//! The decision-cost benchmark: for fixed n = 5, 10, 20, the daemon's sequential rule as
//! shipped and the staged rule, the error rates, blocks and node-hours per experiment on a
//! simulated app, written to `RESULTS.md` with two SVG plots (see `benches/decision-cost/run.sh`),
//! with the calibration of the report's replicate forecast and check 2's frontier (`frontier`).
//!
//! Usage: `optgate-decision-cost [OUT_DIR] [REPS] [REPS_AT_ZERO] [REPS_OTHER]` (defaults:
//! this folder, 1000, 2000, 300). Seeded: the same arguments give the same file.

mod frontier;
mod oc;
mod report;
mod sim;
mod svg;

use std::path::PathBuf;
use std::time::Instant;

use optgate_stats::Decision;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use sim::{DesignKind, Experiment, Plans};

/// Seed of the whole benchmark; each cell derives its own from it.
const SEED: u64 = 20261130;
/// True steady-state speed-ups, in percent: 0, ½·min effect, min effect, 2, 5, 10, 30.
pub const EFFECTS_PCT: [f64; 7] = [0.0, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0];
/// SD of the log-normal per-run noise: 1 %, 3 %, 8 %.
pub const NOISES: [f64; 3] = [0.01, 0.03, 0.08];
/// Variants per experiment.
pub const VARIANT_COUNTS: [usize; 2] = [1, 3];
/// Experiments per cell away from 0 % and at 0 % (where the false-accept rate is read, so
/// its standard error must be small next to α).
const DEFAULT_REPS: usize = 1000;
const DEFAULT_REPS_AT_ZERO: usize = 2000;
/// Experiments in the cells no check reads (every effect but 0 % outside the 5 % and 30 %
/// cells at 3 % noise): fewer, so the run with nine designs stays near 5 minutes; their
/// rates carry a standard error of at most 2.9 points (√(0.25/300)).
const DEFAULT_REPS_OTHER: usize = 300;

/// Experiments per cell of the operating-characteristics table (`oc.rs`): P(accept) to
/// within ±2.9 points (√(0.25/300)), a mean of blocks to a few tenths.
const DEFAULT_OC_REPS: usize = 300;

/// Whether a cell is read by the checks (and so gets the full count).
fn checked(noise: f64, effect: f64) -> bool {
    effect == 0.0 || (noise == 0.03 && (effect == CURVE_EFFECT_PCT || effect == 30.0))
}

/// What one design did over the experiments of one cell.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub experiments: usize,
    /// Variant decisions (experiments × variants).
    pub verdicts: usize,
    pub accept: usize,
    pub reject: usize,
    pub inconclusive: usize,
    /// Experiments with at least one variant accepted.
    pub any_accept: usize,
    pub blocks: Vec<u32>,
    /// Blocks per variant (experiments × variants), for the mean blocks a variant ran in.
    pub variant_blocks: Vec<u32>,
    pub hours: Vec<f64>,
}

impl Tally {
    fn add(&mut self, o: &sim::Outcome) {
        self.experiments += 1;
        self.verdicts += o.decisions.len();
        let count = |d: Decision| o.decisions.iter().filter(|&&x| x == d).count();
        self.accept += count(Decision::Accept);
        self.reject += count(Decision::Reject);
        self.inconclusive += o.decisions.len() - count(Decision::Accept) - count(Decision::Reject);
        self.any_accept += (count(Decision::Accept) > 0) as usize;
        self.blocks.push(o.blocks);
        self.variant_blocks.extend(&o.variant_blocks);
        self.hours.push(o.node_hours);
    }
}

/// One cell: (variants, noise, effect) → a tally per design, in `DesignKind::ALL` order.
pub struct Cell {
    pub variants: usize,
    pub noise: f64,
    pub effect_pct: f64,
    pub tallies: Vec<Tally>,
    /// Fixed n = 5…20 on the same experiments (only where [`CURVE_EFFECT_PCT`] is
    /// simulated): the fixed design of equal power for each sequential one.
    pub fixed_curve: Vec<(u32, Tally)>,
    /// The first look's replicate forecasts ([`sim::replicate_forecasts`]).
    pub forecasts: Forecasts,
}

/// How the report's "about N replicates would likely decide it" fared in one cell.
#[derive(Debug, Clone, Default)]
pub struct Forecasts {
    /// Inconclusive variants at the first look.
    pub inconclusive: usize,
    /// Of those, with a forecast N within the budget (`max_replicates`).
    pub within_budget: usize,
    /// Of those, decided by the plain analysis at N blocks.
    pub decided: usize,
    /// Of those, decided by the plain analysis at some n in 6…N.
    pub decided_by: usize,
    /// Sum of the first deciding n of those, for their mean.
    pub first_sum: u64,
    /// Every forecast within the budget, for the calibration by forecast N.
    pub records: Vec<sim::Forecast>,
    /// Forecasts N (within the budget), for their mean.
    pub n_sum: u64,
}

/// The effect at which the benchmark compares the sequential designs with the fixed
/// design of equal power (the 5 %).
pub const CURVE_EFFECT_PCT: f64 = 5.0;

fn run_cell(variants: usize, noise: f64, effect: f64, reps: usize, plans: &Plans) -> Cell {
    let seed =
        SEED ^ (variants as u64) << 40 ^ ((noise * 1000.0) as u64) << 24 ^ (effect * 100.0) as u64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut tallies = vec![Tally::default(); DesignKind::ALL.len()];
    let curve_ns: Vec<u32> = if effect == CURVE_EFFECT_PCT {
        (sim::REPLICATES..=sim::MAX_REPLICATES).collect()
    } else {
        Vec::new()
    };
    let mut fixed_curve: Vec<(u32, Tally)> =
        curve_ns.iter().map(|&n| (n, Tally::default())).collect();
    let mut forecasts = Forecasts::default();
    for _ in 0..reps {
        let exp = Experiment::draw(&mut rng, variants, effect, noise);
        for f in sim::replicate_forecasts(&exp, variants) {
            forecasts.inconclusive += 1;
            if let Some(n) = f.n.filter(|&n| n <= sim::MAX_REPLICATES) {
                forecasts.within_budget += 1;
                forecasts.decided += f.decided_at_n as usize;
                forecasts.n_sum += n as u64;
                if let Some(k) = f.first_decided {
                    forecasts.decided_by += 1;
                    forecasts.first_sum += k as u64;
                }
                forecasts.records.push(f);
            }
        }
        for (kind, tally) in DesignKind::ALL.iter().zip(&mut tallies) {
            tally.add(&sim::run_design(*kind, &exp, variants, plans));
        }
        for (n, tally) in &mut fixed_curve {
            tally.add(&sim::run_design(
                DesignKind::Fixed(*n),
                &exp,
                variants,
                plans,
            ));
        }
    }
    Cell {
        variants,
        noise,
        effect_pct: effect,
        tallies,
        fixed_curve,
        forecasts,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let out = args
        .get(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let reps: usize = args
        .get(2)
        .map_or(DEFAULT_REPS, |s| s.parse().expect("REPS"));
    let reps_zero: usize = args
        .get(3)
        .map_or(DEFAULT_REPS_AT_ZERO, |s| s.parse().expect("REPS_AT_ZERO"));
    let reps_other: usize = args
        .get(4)
        .map_or(DEFAULT_REPS_OTHER, |s| s.parse().expect("REPS_OTHER"));
    let started = Instant::now();
    // DECISION_COST_FRONTIER=1: only check 2's frontier, printed (for tuning).
    if std::env::var_os("DECISION_COST_FRONTIER").is_some() {
        eprintln!("fixed n = 20 power: {:.4}", frontier::fixed_20_power());
        for p in frontier::search() {
            eprintln!("{p:?} ratio {:.3}", p.ratio());
        }
        eprintln!("{:.1} s", started.elapsed().as_secs_f64());
        return;
    }
    // The default design's operating characteristics for the report (`oc.rs`), OC_REPS
    // experiments per cell; DECISION_COST_OC=1: only that table.
    let oc_reps: usize = std::env::var("OC_REPS")
        .ok()
        .map_or(DEFAULT_OC_REPS, |s| s.parse().expect("OC_REPS"));
    let t = Instant::now();
    let oc_text = oc::write(oc_reps).expect("write the operating-characteristics table");
    eprintln!(
        "operating characteristics: {oc_reps} experiments per cell in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    if std::env::var_os("DECISION_COST_OC").is_some() {
        return;
    }
    let mut cells = Vec::new();
    // DECISION_COST_ONLY=1: only the setting (1 variant, 3 % noise) at 0, 5 and
    // 30 % (the cells the checks read), for tuning; RESULTS.md then has holes and is not
    // written.
    let only = std::env::var_os("DECISION_COST_ONLY").is_some();
    for &variants in &VARIANT_COUNTS {
        let plans = Plans::new(variants);
        for &noise in &NOISES {
            for &effect in &EFFECTS_PCT {
                if only && (variants != 1 || noise != 0.03 || ![0.0, 5.0, 30.0].contains(&effect)) {
                    continue;
                }
                let n = match (effect == 0.0, checked(noise, effect)) {
                    (true, _) => reps_zero,
                    (false, true) => reps,
                    (false, false) => reps_other,
                };
                let t = Instant::now();
                cells.push(run_cell(variants, noise, effect, n, &plans));
                eprintln!(
                    "{variants} variant(s), noise {:.0}%, effect {effect}%: {n} experiments in {:.1} s",
                    noise * 100.0,
                    t.elapsed().as_secs_f64()
                );
            }
        }
    }
    if only {
        report::print_cells(&cells);
        return;
    }
    let t = Instant::now();
    let front = report::Frontier {
        points: frontier::search(),
        fixed_20_power: frontier::fixed_20_power(),
    };
    eprintln!(
        "check 2's frontier: {} rules in {:.1} s",
        front.points.len(),
        t.elapsed().as_secs_f64()
    );
    let elapsed = started.elapsed().as_secs_f64();
    let plans = [Plans::new(1), Plans::new(3)];
    let counts = report::Counts {
        checked: reps,
        zero: reps_zero,
        other: reps_other,
    };
    report::write(&out, &cells, &plans, &front, counts, elapsed, &oc_text)
        .expect("write RESULTS.md");
    eprintln!(
        "wrote {} in {elapsed:.0} s",
        out.join("RESULTS.md").display()
    );
}
