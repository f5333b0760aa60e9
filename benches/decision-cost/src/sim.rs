//! The simulated app and the five designs run on it. Every design decides through the
//! daemon's own look code (`optgate_stats::analyze_at_look`, the analysis the
//! engine's report makes, + `next_after_look` for the shipped rule, `analyse_staged_look` +
//! `next_after_staged_look` for the staged one, plain `optgate_stats::analyze` for fixed n), on
//! blocks drawn once per experiment and shared by all designs (common random numbers: the
//! designs differ by their rule, not their luck).

use std::collections::BTreeMap;

use optgate_policy::decide::{
    LookSchedule, Next, StagedNext, analyse_staged_look, next_after_look, next_after_staged_look,
};
use optgate_stats::{
    AnalysisConfig, ArmData, Decision, Design, RunSamples, SequentialPlan, Spending, StagedPlan,
    analyze, analyze_at_look,
};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Epochs per run: the first one a warm-up.
pub const EPOCHS: u32 = 3;
/// The warm-up epoch takes this many times a steady epoch.
pub const WARMUP_FACTOR: f64 = 2.0;
/// A baseline steady epoch, in hours (10 minutes): a baseline run is 4 × 10 min.
pub const STEADY_EPOCH_H: f64 = 1.0 / 6.0;
/// SD of the log block effect shared by the arms of a block (3 %).
pub const BLOCK_SD: f64 = 0.03;
/// `replicates`, `max_replicates` and `min_effect_pct` of the setting.
pub const REPLICATES: u32 = 5;
pub const MAX_REPLICATES: u32 = 20;
pub const MIN_EFFECT_PCT: f64 = 1.0;
/// Blocks drawn per experiment: the largest budget of any design ([`DesignKind::StagedTuned`]);
/// the budget-20 designs use the first 20 of them.
pub const SIM_BLOCKS: u32 = 40;
/// One-sided α (`compare.alpha` default).
pub const ALPHA: f64 = 0.05;

/// A design compared by the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DesignKind {
    Fixed(u32),
    /// `sequential: obrien_fleming` (the default before the staged rule): O'Brien–Fleming looks at
    /// 5…20 blocks, every arm in every block.
    Shipped,
    /// The staged rule at budget 20 (the setting, `max_replicates: 20`):
    /// discrete-aware spending, futility, budget stop, per-variant stopping.
    Staged,
    /// The staged rule with O'Brien–Fleming spending instead of `α·t^0.3`: what futility,
    /// the budget stop and per-variant stopping give without the early looks' α.
    StagedObf,
    /// The staged rule with another budget (`max_replicates`) and spending exponent ρ (in
    /// hundredths, so the kind stays `Eq`): a larger budget adds looks after 20 blocks that
    /// win back the power the early looks cost, while most experiments still stop early.
    StagedTuned {
        max: u32,
        rho_pct: u32,
    },
}

impl DesignKind {
    /// The last three: the staged rule at larger budgets, for check 2 (tuning runs, 1
    /// variant, 3 % noise, 1000 experiments at 5 %). Budget 30 with the daemon's own ρ = 0.3
    /// (what `max_replicates: 30` gives in the daemon; its first look moves to 6 blocks);
    /// budget 30, ρ = 0.25, the smallest node-hours among those with at least fixed n = 20's
    /// power, and so the default (`max_replicates` = 6 × `replicates`, `POWER_SPENDING_RHO`); budget 40, ρ = 0.2, the largest power. The last two keep the first look at 5
    /// blocks reachable (`α·(5/max)^ρ > 2⁻⁵`).
    pub const ALL: [DesignKind; 9] = [
        DesignKind::Fixed(5),
        DesignKind::Fixed(10),
        DesignKind::Fixed(20),
        DesignKind::Shipped,
        DesignKind::Staged,
        DesignKind::StagedObf,
        DesignKind::StagedTuned {
            max: 30,
            rho_pct: 30,
        },
        DesignKind::StagedTuned {
            max: 30,
            rho_pct: 25,
        },
        DesignKind::StagedTuned {
            max: 40,
            rho_pct: 20,
        },
    ];

    pub fn label(&self) -> String {
        match self {
            DesignKind::Fixed(n) => format!("fixed n = {n}"),
            DesignKind::Shipped => "O'Brien–Fleming rule".into(),
            DesignKind::Staged => "staged, budget 20".into(),
            DesignKind::StagedObf => "staged, O'Brien–Fleming spending".into(),
            DesignKind::StagedTuned { max, rho_pct } => {
                let default = (*max, *rho_pct) == (30, 25);
                format!(
                    "staged, budget {max}, ρ = {}{}",
                    *rho_pct as f64 / 100.0,
                    if default { " (the default)" } else { "" }
                )
            }
        }
    }
}

/// One simulated experiment: `blocks[b][arm]` = the epochs of that arm's run in block b
/// (arm 0 the baseline), drawn up to the budget; a design uses a prefix.
pub struct Experiment {
    pub blocks: Vec<Vec<Vec<f64>>>,
}

/// Standard normal deviate (Box–Muller; the workspace has no distribution crate for rand 0.9).
pub fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

impl Experiment {
    /// `variants` variants, each `speedup_pct` faster in every epoch than the baseline;
    /// log-normal run noise of SD `noise`, block effect [`BLOCK_SD`].
    pub fn draw(rng: &mut ChaCha8Rng, variants: usize, speedup_pct: f64, noise: f64) -> Self {
        let blocks = (0..SIM_BLOCKS)
            .map(|_| {
                let block = (BLOCK_SD * normal(rng)).exp();
                (0..=variants)
                    .map(|arm| {
                        let speed = if arm == 0 {
                            1.0
                        } else {
                            1.0 + speedup_pct / 100.0
                        };
                        let t = STEADY_EPOCH_H * block * (noise * normal(rng)).exp() / speed;
                        (1..=EPOCHS)
                            .map(|e| if e == 1 { WARMUP_FACTOR * t } else { t })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        Experiment { blocks }
    }

    /// Arm `arm`'s runs in blocks `1..=n`.
    fn arm(&self, arm: usize, n: u32) -> ArmData {
        ArmData {
            name: if arm == 0 {
                "baseline".into()
            } else {
                format!("v{arm}")
            },
            runs: (0..n as usize)
                .map(|b| RunSamples {
                    replicate: b as u32 + 1,
                    block: Some(b as u32 + 1),
                    epochs: self.blocks[b][arm]
                        .iter()
                        .enumerate()
                        .map(|(e, v)| (e as u32 + 1, *v))
                        .collect::<BTreeMap<_, _>>(),
                })
                .collect(),
            ..ArmData::default()
        }
    }

    fn run_hours(&self, block: usize, arm: usize) -> f64 {
        self.blocks[block][arm].iter().sum()
    }
}

/// What one design did with one experiment.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Final decision per variant.
    pub decisions: Vec<Decision>,
    /// Blocks run (the baseline's runs).
    pub blocks: u32,
    /// Blocks each variant ran in (1…its last; fewer than `blocks` once it left the plan).
    pub variant_blocks: Vec<u32>,
    /// Sum of the simulated run times of every run executed, in node-hours.
    pub node_hours: f64,
}

/// The analysis settings of the setting.
pub fn config() -> AnalysisConfig {
    AnalysisConfig {
        design: Design::Paired,
        alpha: ALPHA,
        min_effect_pct: MIN_EFFECT_PCT,
        ..AnalysisConfig::default()
    }
}

/// Plans made once per variant count (each costs a numerical integration).
pub struct Plans {
    pub schedule: LookSchedule,
    pub shipped: Option<SequentialPlan>,
    pub staged: StagedPlan,
    pub staged_obf: StagedPlan,
    /// The plans of the [`DesignKind::StagedTuned`] designs, keyed by (budget, ρ in hundredths).
    pub tuned: BTreeMap<(u32, u32), StagedPlan>,
}

impl Plans {
    pub fn new(variants: usize) -> Self {
        let schedule = LookSchedule::new(REPLICATES, Some(MAX_REPLICATES));
        Plans {
            schedule,
            shipped: schedule.sequential_plan(ALPHA).expect("plan"),
            staged: StagedPlan::new(REPLICATES, MAX_REPLICATES, ALPHA, variants, Design::Paired)
                .expect("plan"),
            staged_obf: StagedPlan::with_spending(
                REPLICATES,
                MAX_REPLICATES,
                ALPHA,
                variants,
                Design::Paired,
                Spending::ObrienFleming,
            )
            .expect("plan"),
            tuned: DesignKind::ALL
                .iter()
                .filter_map(|k| match *k {
                    DesignKind::StagedTuned { max, rho_pct } => Some((
                        (max, rho_pct),
                        StagedPlan::with_spending(
                            REPLICATES,
                            max,
                            ALPHA,
                            variants,
                            Design::Paired,
                            Spending::Power(rho_pct as f64 / 100.0),
                        )
                        .expect("plan"),
                    )),
                    _ => None,
                })
                .collect(),
        }
    }
}

pub fn run_design(kind: DesignKind, exp: &Experiment, variants: usize, plans: &Plans) -> Outcome {
    match kind {
        DesignKind::Fixed(n) => fixed(exp, variants, n),
        DesignKind::Shipped => shipped(exp, variants, plans),
        DesignKind::Staged => staged(exp, variants, &plans.staged),
        DesignKind::StagedObf => staged(exp, variants, &plans.staged_obf),
        DesignKind::StagedTuned { max, rho_pct } => {
            staged(exp, variants, &plans.tuned[&(max, rho_pct)])
        }
    }
}

/// Complete runs per analysed arm: every simulated run completes.
fn counts(vars: &[ArmData], blocks: u32) -> Vec<(String, usize)> {
    std::iter::once("baseline".to_string())
        .chain(vars.iter().map(|v| v.name.clone()))
        .map(|n| (n, blocks as usize))
        .collect()
}

fn all_hours(exp: &Experiment, variants: usize, blocks: u32) -> f64 {
    (0..blocks as usize)
        .map(|b| (0..=variants).map(|a| exp.run_hours(b, a)).sum::<f64>())
        .sum()
}

fn fixed(exp: &Experiment, variants: usize, n: u32) -> Outcome {
    let vars: Vec<ArmData> = (1..=variants).map(|a| exp.arm(a, n)).collect();
    let a = analyze(&exp.arm(0, n), &vars, &config()).expect("analysis");
    Outcome {
        decisions: a.variants.iter().map(|v| v.decision).collect(),
        blocks: n,
        variant_blocks: vec![n; variants],
        node_hours: all_hours(exp, variants, n),
    }
}

/// The shipped loop: look, then one more block of every arm while a variant is open.
fn shipped(exp: &Experiment, variants: usize, plans: &Plans) -> Outcome {
    let cfg = config();
    let mut blocks = plans.schedule.first;
    loop {
        let vars: Vec<ArmData> = (1..=variants).map(|a| exp.arm(a, blocks)).collect();
        let look = plans.schedule.look_at(blocks).expect("planned look");
        let a = analyze_at_look(
            &exp.arm(0, blocks),
            &vars,
            &cfg,
            plans.shipped.as_ref().map(|p| (p, look)),
        )
        .expect("analysis");
        let counts = counts(&vars, blocks);
        match next_after_look(&a, blocks, &plans.schedule, &counts) {
            Next::Extend(k) => blocks += k,
            _ => {
                return Outcome {
                    decisions: a.variants.iter().map(|v| v.decision).collect(),
                    blocks,
                    variant_blocks: vec![blocks; variants],
                    node_hours: all_hours(exp, variants, blocks),
                };
            }
        }
    }
}

/// The staged loop: only the baseline and the open variants run in later blocks.
pub fn staged(exp: &Experiment, variants: usize, plan: &StagedPlan) -> Outcome {
    let cfg = config();
    let mut decisions = vec![Decision::Inconclusive; variants];
    let mut open: Vec<usize> = (1..=variants).collect();
    let mut retired = 0usize;
    // Blocks each variant ran in (1..=last), for the node-hours.
    let mut last_block = vec![0u32; variants + 1];
    let mut blocks = plan
        .next_look_after(plan.first.saturating_sub(1))
        .expect("a look");
    loop {
        for &a in &open {
            last_block[a] = blocks;
        }
        let vars: Vec<ArmData> = open.iter().map(|&a| exp.arm(a, blocks)).collect();
        let look = analyse_staged_look(&exp.arm(0, blocks), &vars, retired, &cfg, plan, blocks)
            .expect("analysis");
        for (v, &arm) in look.verdicts.iter().zip(&open) {
            decisions[arm - 1] = v.decision;
            retired += v.retired as usize;
        }
        let counts = counts(&vars, blocks);
        match next_after_staged_look(&look, blocks, plan, &counts) {
            StagedNext::Extend { blocks: k, arms } => {
                open.retain(|&a| arms.contains(&format!("v{a}")));
                blocks += k;
            }
            _ => break,
        }
    }
    let variant_hours: f64 = (1..=variants)
        .map(|a| {
            (0..last_block[a] as usize)
                .map(|b| exp.run_hours(b, a))
                .sum::<f64>()
        })
        .sum();
    let base_hours: f64 = (0..blocks as usize).map(|b| exp.run_hours(b, 0)).sum();
    Outcome {
        decisions,
        blocks,
        variant_blocks: last_block[1..].to_vec(),
        node_hours: base_hours + variant_hours,
    }
}

/// The report's "about N replicates per arm would likely decide it" put to the test: at the
/// first look (fixed n = 5, plain α), each inconclusive variant's predicted N; where N is
/// within the simulated budget, whether the plain analysis at N blocks of the same
/// experiment decides it (accept or reject), and the first n in 6…N at which the plain
/// analysis decides it (the blocks that actually decided, had the user added one block at a
/// time and re-analysed). The estimate aims at 80 % (`MDE_POWER`).
pub fn replicate_forecasts(exp: &Experiment, variants: usize) -> Vec<Forecast> {
    let cfg = config();
    let first = |n: u32| -> Vec<ArmData> { (1..=variants).map(|a| exp.arm(a, n)).collect() };
    let decided_at = |i: usize, n: u32| {
        let later = analyze(&exp.arm(0, n), &first(n), &cfg).expect("analysis");
        later.variants[i].decision != Decision::Inconclusive
    };
    let at_first = analyze(&exp.arm(0, REPLICATES), &first(REPLICATES), &cfg).expect("analysis");
    at_first
        .variants
        .iter()
        .enumerate()
        .filter(|(_, v)| v.decision == Decision::Inconclusive)
        .map(|(i, v)| {
            let n = v.replicates_to_decide;
            let within = n.filter(|&n| n <= MAX_REPLICATES);
            Forecast {
                n,
                decided_at_n: within.is_some_and(|n| decided_at(i, n)),
                first_decided: within
                    .and_then(|n| (REPLICATES + 1..=n).find(|&k| decided_at(i, k))),
            }
        })
        .collect()
}

/// One first-look forecast and what became of it.
#[derive(Debug, Clone, Copy)]
pub struct Forecast {
    /// The predicted N; `None` = "no realistic number of replicates would decide it".
    pub n: Option<u32>,
    /// The plain analysis at N blocks decides it (N within the budget).
    pub decided_at_n: bool,
    /// The first n in 6…N at which the plain analysis decides it.
    pub first_decided: Option<u32>,
}
