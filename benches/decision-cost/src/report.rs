//! `RESULTS.md` and its two SVG plots from the simulated cells: the acceptance checks of
//! the staged rule computed from the numbers, the plans' nominal levels, a table per setting.

use std::fmt::Write as _;
use std::path::Path;

use crate::frontier::{self, Point, Test};
use crate::sim::{self, DesignKind, Plans};
use crate::svg::{Figure, Panel, render};
use crate::{CURVE_EFFECT_PCT, Cell, EFFECTS_PCT, NOISES, Tally, VARIANT_COUNTS};

/// Index of a design in `DesignKind::ALL` (and so in `Cell::tallies`).
const FIXED_20: usize = 2;
const SHIPPED: usize = 3;
const STAGED: usize = 4;
const STAGED_OBF: usize = 5;
/// The staged rule at larger budgets (`DesignKind::StagedTuned`), candidates for check 2.
const STAGED_TUNED: [usize; 3] = [6, 7, 8];
/// The measured mean blocks at 0 % through the daemon under the O'Brien–Fleming rule.
const DAEMON_ZERO_BLOCKS: f64 = 19.8;

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len().max(1) as f64
}

fn se_mean(x: &[f64]) -> f64 {
    let m = mean(x);
    let n = x.len().max(2) as f64;
    (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0) / n).sqrt()
}

fn rate(k: usize, n: usize) -> f64 {
    k as f64 / n.max(1) as f64
}

fn se_rate(k: usize, n: usize) -> f64 {
    let p = rate(k, n);
    (p * (1.0 - p) / n.max(1) as f64).sqrt()
}

fn p95(blocks: &[u32]) -> u32 {
    let mut b = blocks.to_vec();
    b.sort_unstable();
    b[((0.95 * b.len() as f64).ceil() as usize).clamp(1, b.len()) - 1]
}

fn blocks_f(t: &Tally) -> Vec<f64> {
    t.blocks.iter().map(|&b| b as f64).collect()
}

fn cell(cells: &[Cell], variants: usize, noise: f64, effect: f64) -> &Cell {
    cells
        .iter()
        .find(|c| c.variants == variants && c.noise == noise && c.effect_pct == effect)
        .expect("simulated cell")
}

fn pct(p: f64) -> String {
    format!("{:.1}", 100.0 * p)
}

/// Experiments per cell: in the cells the checks read away from 0 %, at 0 %, elsewhere.
#[derive(Debug, Clone, Copy)]
pub struct Counts {
    pub checked: usize,
    pub zero: usize,
    pub other: usize,
}

/// Check 2's frontier ([`frontier`]): the calibrated rules and fixed n = 20's power in the
/// same model.
pub struct Frontier {
    pub points: Vec<Point>,
    pub fixed_20_power: f64,
}

pub fn write(
    dir: &Path,
    cells: &[Cell],
    plans: &[Plans; 2],
    front: &Frontier,
    counts: Counts,
    elapsed_s: f64,
    oc_text: &str,
) -> std::io::Result<()> {
    let mut s = String::new();
    header(&mut s, counts, elapsed_s);
    checks(&mut s, cells, plans, front);
    crate::oc::section(&mut s, oc_text);
    frontier_table(&mut s, front);
    plan_tables(&mut s, plans);
    forecast_table(&mut s, cells);
    for &variants in &VARIANT_COUNTS {
        for &noise in &NOISES {
            table(&mut s, cells, variants, noise);
        }
    }
    let _ = writeln!(
        s,
        "## Plots\n\n![P(accept) against the true effect](oc.svg)\n\n![Expected node-hours per experiment against the true effect](cost.svg)\n"
    );
    std::fs::write(dir.join("oc.svg"), plot(cells, Metric::Accept))?;
    std::fs::write(dir.join("cost.svg"), plot(cells, Metric::Hours))?;
    std::fs::write(dir.join("RESULTS.md"), s)
}

fn header(s: &mut String, counts: Counts, elapsed_s: f64) {
    let Counts {
        checked: reps,
        zero: reps_zero,
        other,
    } = counts;
    let _ = writeln!(
        s,
        "# Decision cost: fixed and sequential designs on a simulated app\n\n\
         Made by `benches/decision-cost/run.sh` (the `optgate-decision-cost` binary), seeded, in \
         {elapsed_s:.0} s. Every design decides through the engine's own decision code (`optgate-policy`): fixed n through \
         `optgate_stats::analyze`, the O'Brien–Fleming rule through `optgate_stats::analyze_sequential` at the look's level (as the engine's `build_report`) + `decide::next_after_look`, \
         the staged rule through `decide::analyse_staged_look` + `next_after_staged_look`. All designs \
         see the same simulated blocks (common random numbers).\n\n\
         **Simulated app.** {epochs} epochs per run, the first {warm}× a steady epoch (warm-up); a \
         baseline steady epoch is 10 min, so a baseline run is 40 min = 0.67 node-hours. Each run's \
         times carry one log-normal factor (SD 1 %, 3 % or 8 %: the noise level), each block one \
         factor shared by its arms (SD {block:.0} %). A variant is faster by the true speed-up in \
         every epoch. `replicates: {r}`, `max_replicates: {mx}` (30 or 40 for the \"staged, budget\" designs), `min_effect_pct: {me}`, α = {a} \
         one-sided, Holm over the variants (1 or 3, all with the same true speed-up).\n\n\
         **Numbers.** {reps_zero} experiments per cell at 0 %, {reps} at 5 % and 30 % with 3 % \
         noise (the cells the checks read), {other} in every other cell. P(accept), P(reject), \
         P(inconclusive) are per variant (experiments × variants decisions); \"any accepted\" is per \
         experiment (the family-wise false-accept rate where the effect is below `min_effect_pct`). \
         Node-hours = the sum of the simulated run times of every run executed (with per-variant \
         stopping, a later block holds fewer runs, and the blocks a variant ran in fall below the \
         experiment's blocks). Monte-Carlo standard errors: √(p(1−p)/n) for \
         rates (0 observed in n: below 3/n with 95 % confidence), SD/√n for means.\n",
        epochs = sim::EPOCHS,
        warm = sim::WARMUP_FACTOR,
        block = 100.0 * sim::BLOCK_SD,
        r = sim::REPLICATES,
        mx = sim::MAX_REPLICATES,
        me = sim::MIN_EFFECT_PCT,
        a = sim::ALPHA,
    );
}

/// The issue's "done when", from the numbers.
fn checks(s: &mut String, cells: &[Cell], plans: &[Plans; 2], front: &Frontier) {
    let _ = writeln!(s, "## The issue's checks\n");
    // 1. False accepts at 0 % for every design and setting.
    let mut worst = (0.0, 0.0, String::new());
    for c in cells.iter().filter(|c| c.effect_pct == 0.0) {
        for (kind, t) in DesignKind::ALL.iter().zip(&c.tallies) {
            let r = rate(t.any_accept, t.experiments);
            if r >= worst.0 {
                worst = (
                    r,
                    se_rate(t.any_accept, t.experiments),
                    format!(
                        "{}, {} variant(s), noise {:.0} %",
                        kind.label(),
                        c.variants,
                        100.0 * c.noise
                    ),
                );
            }
        }
    }
    let ok = |b: bool| if b { "**yes**" } else { "**no**" };
    let _ = writeln!(
        s,
        "1. At 0 % the false-accept rate is ≤ α for every design: {} — the highest, {} % ± {} % \
         ({}), against α = 5 %. At the null's boundary (true speed-up = `min_effect_pct` = 1 %) \
         P(accept) is in the tables below.",
        ok(worst.0 <= sim::ALPHA),
        pct(worst.0),
        pct(worst.1),
        worst.2
    );
    for (i, &variants) in VARIANT_COUNTS.iter().enumerate() {
        check_power_cost(s, cells, &plans[i], variants, i + 2);
    }
    issue_setting(s, cells);
    let _ = writeln!(
        s,
        "**Why check 2 does not pass with a budget of 20 together with check 4.** Deciding a 30 % \
         speed-up at 5 blocks needs a first-look level above 2⁻⁵ = 0.03125, the smallest p the exact \
         signed-rank test reaches with 5 pairs; at the null's boundary that look then spends 1/32 \
         of the false-accept rate whatever else the rule does, and only α − 1/32 = 0.019 is left \
         for every later look. Fixed n = 20 tests once at 0.05. With 3 % noise a 5 % speed-up gives \
         fixed n = 20 about 98 % power; at one-sided 0.019, 20 blocks give about 96 % — an upper \
         bound on the power of any rule that can accept at 5 blocks and stops by 20. Without the \
         5-block look (the O'Brien–Fleming rule) the power is fixed n = 20's, but a 30 % \
         speed-up waits for 9 blocks. Tuning runs (1 variant, 3 % noise, 300 experiments, budget \
         stop off) of the budget-20 staged rule with other spending exponents: ρ = 0.5 — power \
         93.3 %, a 30 % speed-up at 6 blocks; ρ = 1 — 96.0 %, at 7 blocks; ρ = 0.3 (the exponent before \
         the default moved to budget 30) 90.7 %, at 5 blocks.\n\n\
         **A larger budget** (looks after block 20) restores the power, and a 30 % speed-up is \
         still accepted at 5 blocks (α·(5/max)^ρ > 2⁻⁵ needs ρ ≤ 0.25 at max 30, ≤ 0.2 at max \
         40), but the experiments that need the later looks cost more than the early stops save: \
         every configuration tried with at least fixed n = 20's power costs more than half its \
         node-hours. Tuning runs (1 variant, 3 % noise, 1000 experiments at 5 %, 2000 at 0 %, \
         seeded, a separate random stream from this file's; node-hours as a fraction of fixed \
         n = 20's): budget 25, ρ = 0.25 — 96.3 %, 0.54; budget 30, ρ = 0.25 — 98.5 %, 0.56; \
         budget 30, ρ = 0.2 — 98.3 %, 0.57; budget 35, ρ = 0.22 — 99.6 %, 0.57; budget 40, \
         ρ = 0.2 — 99.8 %, 0.59 (fixed n = 20: 98.1 %). With 400 experiments at 5 %: budget 30, \
         ρ = 0.3 (first look at 6 blocks) — 98.8 %, 0.60; budget 40, ρ = 0.3 — 99.5 %, 0.61; \
         budget 60, ρ = 0.15 — 100 %, 0.64; ρ = 0.1 at budget 25 / 30 / 40 — 90.8 / 96.8 / 99.2 %, \
         0.61 / 0.64 / 0.66 (fixed n = 20: 98.2 %). The futility β (0.1, `FUTILITY_BETA`) only \
         turns \"go on\" into \"reject\" and hardly acts at 5 %. The fair cost comparison is \
         therefore at equal power, below.\n"
    );
    frontier_summary(s, front);
    equal_power(s, cells);
}

/// The cheapest rule of each test with at least fixed n = 20's power in the frontier's
/// model, or the most powerful one when none reaches it.
fn cheapest(front: &Frontier, test: Test) -> Option<&Point> {
    front
        .points
        .iter()
        .filter(|p| p.test == test && p.power >= front.fixed_20_power && p.holds_alpha())
        .min_by(|a, b| a.ratio().total_cmp(&b.ratio()))
}

/// The paragraph that says why check 2 fails, from the frontier's numbers.
fn frontier_summary(s: &mut String, front: &Frontier) {
    let line = |test: Test| match cheapest(front, test) {
        Some(p) => format!(
            "{} — **{:.3}** (budget {}, {}, Δ = {}, power {} %, false accept at the boundary {} %)",
            test.label(),
            p.ratio(),
            p.max,
            if p.every == 1 {
                "a look at every block".to_string()
            } else {
                format!("a look every {} blocks", p.every)
            },
            p.delta,
            pct(p.power),
            pct(p.alpha_boundary)
        ),
        None => format!("{} — none reaches it", test.label()),
    };
    let _ = writeln!(
        s,
        "**What limits it: the noise must be estimated.** The frontier below calibrates, for \
         three tests (the signed-rank test with and without the 5-block look check 4 needs), \
         rules with a look at every block or every second one ({budgets:?} blocks of budget, \
         Wang–Tsiatis shapes Δ = {deltas:?}, a binding futility stop) so that the false-accept \
         rate at the null's boundary is exactly α, and measures them at the 5 % speed-up in a \
         model with exactly this setting's paired differences. The cheapest node-hours (as a \
         fraction of fixed n = 20's) with at least fixed n = 20's power ({} % in that model): \
         {}; {}; {}; {}. The known-noise z-test is where the issue's Wald SPRT estimate (6–7 pairs) \
         comes from; a test that must estimate the noise from 5–10 pairs pays for it in exactly \
         the looks where a sequential rule saves, and the exact rank test additionally pays for \
         its discreteness (no p below 2⁻ⁿ: the 5-block look alone spends 1/32 of α at the \
         boundary) and its 3/π efficiency. Half the node-hours at fixed \
         n = 20's power is out of reach for the rank test, with or without that look, and at the edge (within Monte-Carlo \
         error, with no margin for the futility and budget stops) for a paired t-test, which \
         would also give up the rank test's validity for any noise shape.\n",
        pct(front.fixed_20_power),
        line(Test::SignedRank),
        line(Test::SignedRankFrom6),
        line(Test::PairedT),
        line(Test::KnownSigma),
        budgets = frontier::BUDGETS,
        deltas = frontier::DELTAS,
    );
}

/// Every calibrated rule of the frontier.
fn frontier_table(s: &mut String, front: &Frontier) {
    let (check_paths, paths) = frontier::PATHS;
    let _ = writeln!(
        s,
        "## Check 2's frontier: what a look rule can reach at the 5 % speed-up\n\n\
         Model: one variant, 3 % noise, the paired log differences `d` i.i.d. normal with SD \
         √2 · 3 % (the block effect cancels in the pair), so `x = (d − δ)/σ_d ~ N(gap, 1)`, gap \
         = 0.92 at 5 %, 0 at the null's boundary (1 %), −0.23 at 0 %. Looks at 5 blocks, then \
         every block or every second block (\"every\"), and at the budget; the first look (5 blocks) at level 2⁻⁵ for the signed-rank test \
         (accept when all 5 differences exceed δ; \"no look at 5 blocks\": none there, the \
         shape's level from 6 blocks on) and 0.002 for the others (a 30 % speed-up still \
         passes); later looks at the nominal level `1 − Φ(z·(n/10)^(Δ−½))` — Δ = 0.5 \
         Pocock, larger Δ a falling boundary — with `z` calibrated by bisection so that the \
         false-accept rate at the null's boundary is at most α (binding futility in place: \
         reject when the one-sided p of \"below the worthwhile effect\" is under \
         {fut}); that rate re-measured on {check_paths} independent paths, the others on \
         {paths}. Node-hours ratio = E[blocks]/20 (every block costs the same in expectation). \
         Fixed n = 20 (exact signed-rank, α) in this model: {} %.\n\n\
         | test | every | budget | Δ | level at 10 blocks | false accept at 1 % | at 0 % | power at 5 % | E[blocks] at 5 % | ratio | E[blocks] at 0 % |\n\
         |---|---|---|---|---|---|---|---|---|---|---|",
        pct(front.fixed_20_power),
        fut = frontier::FUTILITY_LEVEL,
    );
    for p in &front.points {
        let bold = p.power >= front.fixed_20_power && p.holds_alpha();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.4} | {} % ± {} % | {} % | {} % ± {} % | {:.2} | {}{:.3}{} | {:.1} |",
            p.test.label(),
            p.every,
            p.max,
            p.delta,
            p.level_at_ref,
            pct(p.alpha_boundary),
            pct((p.alpha_boundary * (1.0 - p.alpha_boundary) / check_paths as f64).sqrt()),
            pct(p.alpha_zero),
            pct(p.power),
            pct((p.power * (1.0 - p.power) / paths as f64).sqrt()),
            p.blocks,
            if bold { "**" } else { "" },
            p.ratio(),
            if bold { "**" } else { "" },
            p.blocks_zero,
        );
    }
    let _ = writeln!(
        s,
        "\nBold: at least fixed n = 20's power in this model, with the re-measured false-accept \
         rate at most two standard errors above α. The daemon's staged rule is the \
         signed-rank row's kind with power spending instead of these shapes and a non-binding \
         futility boundary.\n"
    );
}

/// Check 2 (and its 3-variant twin): each staged design at 5 %, 3 % noise against fixed
/// n = 20, passing when one has at least its power with at most half its node-hours; the
/// larger budgets with their false-accept rate and cost at 0 % in the same setting.
fn check_power_cost(s: &mut String, cells: &[Cell], plans: &Plans, variants: usize, item: usize) {
    let c = cell(cells, variants, 0.03, 5.0);
    let zero = cell(cells, variants, 0.03, 0.0);
    let f = &c.tallies[FIXED_20];
    let pf = rate(f.accept, f.verdicts);
    let fixed_h = mean(&f.hours);
    let _ = writeln!(
        s,
        "{item}. 5 % speed-up, 3 % noise, {variants} variant(s); fixed n = 20 accepts {} % ± {} % with \
         {fixed_h:.2} node-hours. Asked: power at least that with at most half its node-hours.\n",
        pct(pf),
        pct(se_rate(f.accept, f.verdicts)),
    );
    // (power ≥ fixed 20's, ratio, label) of each staged design, for the verdict.
    let mut passing: Vec<(f64, String)> = Vec::new();
    let mut best_at_power: Option<(f64, String)> = None;
    for d in [STAGED, STAGED_OBF].into_iter().chain(STAGED_TUNED) {
        let g = &c.tallies[d];
        let pg = rate(g.accept, g.verdicts);
        let ratio = mean(&g.hours) / fixed_h;
        let kind = DesignKind::ALL[d];
        let label = match kind {
            DesignKind::Staged => "staged, budget 20".to_string(),
            DesignKind::StagedObf => "staged, O'Brien–Fleming spending, budget 20".to_string(),
            k => k.label(),
        };
        let first = match kind {
            DesignKind::Staged => Some(&plans.staged),
            DesignKind::StagedTuned { max, rho_pct } => plans.tuned.get(&(max, rho_pct)),
            _ => None,
        }
        .map_or(String::new(), |p| {
            let look = p
                .next_look_after(p.first.saturating_sub(1))
                .unwrap_or(p.first);
            format!(
                "; first look at {look} blocks (level {:.4})",
                p.efficacy.nominal(look - p.first + 1)
            )
        });
        let z = &zero.tallies[d];
        let at_zero = format!(
            "; at 0 %: false accept {} % ± {} %, {:.1} blocks, {:.2} node-hours ({:.2}× fixed n = 20)",
            pct(rate(z.any_accept, z.experiments)),
            pct(se_rate(z.any_accept, z.experiments)),
            mean(&blocks_f(z)),
            mean(&z.hours),
            mean(&z.hours) / mean(&zero.tallies[FIXED_20].hours)
        );
        let _ = writeln!(
            s,
            "   - {label}: {} % ± {} %, {:.2} ± {:.2} node-hours, ratio **{ratio:.2}**{first}{at_zero}.",
            pct(pg),
            pct(se_rate(g.accept, g.verdicts)),
            mean(&g.hours),
            se_mean(&g.hours),
        );
        if pg >= pf {
            if best_at_power.as_ref().is_none_or(|(r, _)| ratio < *r) {
                best_at_power = Some((ratio, label.clone()));
            }
            if ratio <= 0.5 {
                passing.push((ratio, label));
            }
        }
    }
    let verdict = match passing.first() {
        Some((r, l)) => format!("**yes** — {l}, ratio {r:.2}"),
        None => match best_at_power {
            Some((r, l)) => format!(
                "**no** — the cheapest staged design with at least fixed n = 20's power is {l}, at \
                 {r:.2}× its node-hours"
            ),
            None => "**no** — no staged design reaches fixed n = 20's power".to_string(),
        },
    };
    let _ = writeln!(s, "\n   Passed: {verdict}.\n");
}

/// Each sequential design against the smallest fixed n with at least its power, on the
/// same experiments: the node-hours ratio "at equal power".
fn equal_power(s: &mut String, cells: &[Cell]) {
    let _ = writeln!(
        s,
        "**At equal power** ({CURVE_EFFECT_PCT} % speed-up): each sequential design against the \
         smallest fixed n (5…20, on the same experiments) whose power is at least its own.\n"
    );
    let _ = writeln!(
        s,
        "| setting | design | power | E[node-hours] | fixed n of equal power | its power | its node-hours | ratio |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    for c in cells.iter().filter(|c| !c.fixed_curve.is_empty()) {
        for d in [SHIPPED, STAGED, STAGED_OBF]
            .into_iter()
            .chain(STAGED_TUNED)
        {
            let t = &c.tallies[d];
            let power = rate(t.accept, t.verdicts);
            let twin = c
                .fixed_curve
                .iter()
                .find(|(_, f)| rate(f.accept, f.verdicts) >= power);
            // Above fixed n = 20's power (the larger budgets) there is no twin: no ratio.
            let (n, fp, fh) = match twin {
                Some((n, f)) => (
                    n.to_string(),
                    format!("{} %", pct(rate(f.accept, f.verdicts))),
                    mean(&f.hours),
                ),
                None => ("none ≤ 20".into(), "—".into(), f64::NAN),
            };
            let _ = writeln!(
                s,
                "| {} variant(s), noise {:.0} % | {} | {} % | {:.2} | {n} | {fp} | {} | {} |",
                c.variants,
                100.0 * c.noise,
                DesignKind::ALL[d].label(),
                pct(power),
                mean(&t.hours),
                if fh.is_nan() {
                    "—".into()
                } else {
                    format!("{fh:.2}")
                },
                if fh.is_nan() {
                    "—".into()
                } else {
                    format!("{:.2}", mean(&t.hours) / fh)
                }
            );
        }
    }
    s.push('\n');
}

fn issue_setting(s: &mut String, cells: &[Cell]) {
    let big = &cell(cells, 1, 0.03, 30.0).tallies[STAGED];
    let first = big.blocks.iter().filter(|&&b| b == sim::REPLICATES).count();
    let zero = cell(cells, 1, 0.03, 0.0);
    let (st, sh) = (&zero.tallies[STAGED], &zero.tallies[SHIPPED]);
    let _ = writeln!(
        s,
        "4. The issue's setting (1 variant, 3 % noise): a 30 % speed-up is accepted by the staged rule \
         in {} % of experiments, all of them at the first look (5 blocks) in {} of {}; at 0 % the staged \
         rule spends {:.1} ± {:.1} blocks (the O'Brien–Fleming rule here: {:.1}; through the real daemon \
         the daemon measured {DAEMON_ZERO_BLOCKS} for it) with a false-accept rate of {} % ± {} %.\n",
        pct(rate(big.accept, big.verdicts)),
        first,
        big.experiments,
        mean(&blocks_f(st)),
        se_mean(&blocks_f(st)),
        mean(&blocks_f(sh)),
        pct(rate(st.any_accept, st.experiments)),
        pct(se_rate(st.any_accept, st.experiments)),
    );
}

/// A short line per cell and design on stderr (the tuning mode of `main`).
pub fn print_cells(cells: &[Cell]) {
    for c in cells {
        for (kind, t) in DesignKind::ALL.iter().zip(&c.tallies) {
            eprintln!(
                "{:>5}% {:<22} acc {:>5} rej {:>5} blocks {:>5.1} p95 {:>2} hours {:>6.2}",
                c.effect_pct,
                kind.label(),
                pct(rate(t.accept, t.verdicts)),
                pct(rate(t.reject, t.verdicts)),
                mean(&blocks_f(t)),
                p95(&t.blocks),
                mean(&t.hours)
            );
        }
    }
}

fn plan_tables(s: &mut String, plans: &[Plans; 2]) {
    let _ = writeln!(
        s,
        "## The plans (one-sided nominal levels per look)\n\n\
         O'Brien–Fleming rule: spending over every block count 5…20 (looks below the exact \
         test's smallest p cannot decide). Staged: α·t^{} spending, looks the exact test cannot \
         reach left out (—), futility boundary on the Holm-adjusted `p_no_worthwhile` spent the \
         same way at β = {}.\n\n| blocks | O'Brien–Fleming | staged, 1 variant: efficacy / futility | \
         staged, 3 variants: efficacy / futility | 2⁻ⁿ |\n|---|---|---|---|---|",
        optgate_stats::sequential::POWER_SPENDING_RHO,
        optgate_stats::stopping::FUTILITY_BETA
    );
    let lvl = |v: f64| {
        if v > 0.0 {
            format!("{v:.5}")
        } else {
            "—".into()
        }
    };
    for blocks in sim::REPLICATES..=sim::MAX_REPLICATES {
        let look = blocks - sim::REPLICATES + 1;
        let shipped = plans[0].shipped.as_ref().map_or(0.0, |p| p.nominal(look));
        let staged = |p: &Plans| {
            format!(
                "{} / {}",
                lvl(p.staged.efficacy.nominal(look)),
                lvl(p.staged.futility.nominal(look))
            )
        };
        let _ = writeln!(
            s,
            "| {blocks} | {} | {} | {} | {:.2e} |",
            lvl(shipped),
            staged(&plans[0]),
            staged(&plans[1]),
            0.5f64.powi(blocks as i32)
        );
    }
    s.push('\n');
}

/// Forecast N bins of the calibration by forecast (inclusive ranges, within the budget).
const FORECAST_BINS: [(u32, u32); 3] = [(6, 8), (9, 12), (13, 20)];
/// Share decided at N that the forecast's 80 % aim (`MDE_POWER`) counts as calibrated:
/// within this of 80 %.
const CALIBRATED_WITHIN: f64 = 0.05;
/// The forecast aims at this power.
const FORECAST_AIM: f64 = 0.8;

/// Calibration of the report's replicate forecast at the first look (5 blocks): per cell,
/// then by the forecast N itself (what a reader of one report can see).
fn forecast_table(s: &mut String, cells: &[Cell]) {
    let _ = writeln!(
        s,
        "## Is \"about N replicates would likely decide it\" calibrated?\n\n\
         At the first look (5 blocks, plain α) every inconclusive variant's forecast N \
         (`replicates_to_decide`, aimed at 80 % power from the current estimate and spread); \
         where N ≤ {mx}, whether the plain analysis of the same experiment at N blocks decides it \
         (accept or reject), whether it decides at some n in 6…N (one block added at a time, \
         each re-analysed at plain α: not a valid sequential test, only where a decision \
         would first show), and the mean of that first n. Calibrated would be about 80 % \
         decided at N.\n\n\
         | variants | noise | true speed-up | inconclusive at 5 | forecast N ≤ {mx} | mean N | decided at N | decided at some n ≤ N | mean first n |\n\
         |---|---|---|---|---|---|---|---|---|",
        mx = sim::MAX_REPLICATES
    );
    let (mut all_within, mut all_decided) = (0usize, 0usize);
    for c in cells {
        let f = &c.forecasts;
        all_within += f.within_budget;
        all_decided += f.decided;
        if f.within_budget == 0 {
            continue;
        }
        let _ = writeln!(
            s,
            "| {} | {:.0} % | {} % | {} | {} | {:.1} | {} % ± {} % | {} % | {} |",
            c.variants,
            100.0 * c.noise,
            c.effect_pct,
            f.inconclusive,
            f.within_budget,
            f.n_sum as f64 / f.within_budget as f64,
            pct(rate(f.decided, f.within_budget)),
            pct(se_rate(f.decided, f.within_budget)),
            pct(rate(f.decided_by, f.within_budget)),
            if f.decided_by == 0 {
                "—".to_string()
            } else {
                format!("{:.1}", f.first_sum as f64 / f.decided_by as f64)
            }
        );
    }
    let _ = writeln!(
        s,
        "\nOver all cells: {} % ± {} % of {all_within} forecasts within the budget were decided at N.\n",
        pct(rate(all_decided, all_within)),
        pct(se_rate(all_decided, all_within))
    );
    forecast_by_n(s, cells);
}

/// The forecasts pooled by their own N, per true effect (over noise levels and variant
/// counts): whether the number a report prints can be read as "likely to decide", and for
/// which true effects.
fn forecast_by_n(s: &mut String, cells: &[Cell]) {
    let _ = writeln!(
        s,
        "**By the forecast N** (the cells of a true speed-up pooled over noise levels and \
         variant counts): the share decided at N, with the number of forecasts in brackets.\n\n\
         | true speed-up | all N ≤ {mx} | {} |\n|---|---|{}",
        FORECAST_BINS
            .iter()
            .map(|(a, b)| format!("N = {a}…{b}"))
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(FORECAST_BINS.len()),
        mx = sim::MAX_REPLICATES
    );
    let cell_text = |recs: &[&sim::Forecast]| -> String {
        if recs.is_empty() {
            return "—".into();
        }
        let k = recs.iter().filter(|f| f.decided_at_n).count();
        format!(
            "{} % ± {} % ({})",
            pct(rate(k, recs.len())),
            pct(se_rate(k, recs.len())),
            recs.len()
        )
    };
    // True effects whose pooled share reaches the aim (within the tolerance or above), and
    // those that fall short.
    let (mut holds, mut short) = (Vec::new(), Vec::new());
    for &effect in &EFFECTS_PCT {
        let recs: Vec<&sim::Forecast> = cells
            .iter()
            .filter(|c| c.effect_pct == effect)
            .flat_map(|c| &c.forecasts.records)
            .collect();
        let mut row = format!("| {effect} % | {} |", cell_text(&recs));
        for &(lo, hi) in &FORECAST_BINS {
            let bin: Vec<&sim::Forecast> = recs
                .iter()
                .copied()
                .filter(|f| f.n.is_some_and(|n| (lo..=hi).contains(&n)))
                .collect();
            let _ = write!(row, " {} |", cell_text(&bin));
        }
        let _ = writeln!(s, "{row}");
        if recs.is_empty() {
            continue;
        }
        let r = rate(recs.iter().filter(|f| f.decided_at_n).count(), recs.len());
        let entry = format!("{effect} % ({} %)", pct(r));
        if r >= FORECAST_AIM - CALIBRATED_WITHIN {
            holds.push(entry);
        } else {
            short.push(entry);
        }
    }
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    let _ = writeln!(
        s,
        "\nThe forecast reaches its 80 % aim (within {} points, or above) at true speed-ups of \
         {}, and falls short at {}. It is calibrated only where the true speed-up is well \
         beyond the worthwhile effect; near or below it, the distance of the estimate from δ \
         that it extrapolates is mostly noise. A report may print it as a planning figure \
         (\"at a true speed-up equal to today's estimate, about N replicates per arm would \
         decide it with 80 % probability\"), not as \"would likely decide it\".\n",
        100.0 * CALIBRATED_WITHIN,
        list(&holds),
        list(&short),
    );
}

fn table(s: &mut String, cells: &[Cell], variants: usize, noise: f64) {
    let _ = writeln!(
        s,
        "## {variants} variant(s), noise {:.0} %\n\n| true speed-up | design | P(accept) | P(reject) | \
         P(inconclusive) | any accepted | E[blocks] | P95 blocks | E[blocks a variant ran in] | \
         E[node-hours] | vs fixed 20 |\n\
         |---|---|---|---|---|---|---|---|---|---|---|",
        100.0 * noise
    );
    for &effect in &EFFECTS_PCT {
        let c = cell(cells, variants, noise, effect);
        let ref_hours = mean(&c.tallies[FIXED_20].hours);
        for (kind, t) in DesignKind::ALL.iter().zip(&c.tallies) {
            let se = |k| pct(se_rate(k, t.verdicts));
            let _ = writeln!(
                s,
                "| {effect} % | {} | {} ± {} | {} ± {} | {} | {} | {:.1} | {} | {:.1} | {:.2} ± {:.2} | {:.2} |",
                kind.label(),
                pct(rate(t.accept, t.verdicts)),
                se(t.accept),
                pct(rate(t.reject, t.verdicts)),
                se(t.reject),
                pct(rate(t.inconclusive, t.verdicts)),
                pct(rate(t.any_accept, t.experiments)),
                mean(&blocks_f(t)),
                p95(&t.blocks),
                mean(
                    &t.variant_blocks
                        .iter()
                        .map(|&b| b as f64)
                        .collect::<Vec<_>>()
                ),
                mean(&t.hours),
                se_mean(&t.hours),
                mean(&t.hours) / ref_hours
            );
        }
    }
    s.push('\n');
}

#[derive(Clone, Copy)]
enum Metric {
    Accept,
    Hours,
}

fn plot(cells: &[Cell], metric: Metric) -> String {
    let value = |t: &Tally| match metric {
        Metric::Accept => rate(t.accept, t.verdicts),
        Metric::Hours => mean(&t.hours),
    };
    let mut panels = Vec::new();
    for &variants in &VARIANT_COUNTS {
        for &noise in &NOISES {
            let series: Vec<Vec<f64>> = (0..DesignKind::ALL.len())
                .map(|d| {
                    EFFECTS_PCT
                        .iter()
                        .map(|&e| value(&cell(cells, variants, noise, e).tallies[d]))
                        .collect()
                })
                .collect();
            let y_max = match metric {
                Metric::Accept => 1.0,
                Metric::Hours => series.iter().flatten().fold(0.0f64, |a, &b| a.max(b)) * 1.1,
            };
            panels.push(Panel {
                title: format!("{variants} variant(s), noise {:.0} %", 100.0 * noise),
                series,
                y_max,
            });
        }
    }
    let ticks: Vec<String> = EFFECTS_PCT.iter().map(|e| format!("{e}")).collect();
    let legend: Vec<String> = DesignKind::ALL.iter().map(|k| k.label()).collect();
    let (title, y_label, reference) = match metric {
        Metric::Accept => (
            "Operating characteristic: P(accept) per variant",
            "P(accept)",
            Some((sim::ALPHA, "α")),
        ),
        Metric::Hours => (
            "Cost: expected node-hours per experiment",
            "node-hours",
            None,
        ),
    };
    render(&Figure {
        title,
        y_label,
        x_label: "true steady speed-up (%)",
        x_ticks: &ticks,
        legend: &legend,
        columns: NOISES.len(),
        panels,
        reference,
    })
}
