//! The pure part of the daemon's decision loop: which looks the sequential design plans,
//! the analysis at a look, and what follows it (decided, more blocks, budget exhausted,
//! failed). No I/O, so the rule can be simulated (see the A/A test below).
//!
//! Looks: the first when `replicates` blocks are complete, then one after each added block,
//! up to `max_replicates` blocks. With `max_replicates` unset (or equal to `replicates`)
//! there is exactly one look, analysed at the experiment's α. With more, the Lan–DeMets
//! O'Brien–Fleming spending rule of `optgate-stats` sets each look's nominal level over
//! the information fractions `n_k / max_replicates`, so the false-accept rate over all
//! looks stays at α.

use optgate_experiment::{AA_CONTROL, BASELINE, Experiment, SequentialRule};
use optgate_stats::{
    Analysis, AnalysisConfig, ArmData, Decision, SequentialPlan, StagedLook, StagedPlan,
    StatsError, Stop, analyze_staged,
};

/// The planned looks, in blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookSchedule {
    /// Blocks at the first look (`replicates`).
    pub first: u32,
    /// Blocks at the last look (`max_replicates`, at least `first`).
    pub max: u32,
}

impl LookSchedule {
    pub fn new(replicates: u32, max_replicates: Option<u32>) -> LookSchedule {
        let first = replicates.max(1);
        LookSchedule {
            first,
            max: max_replicates.unwrap_or(first).max(first),
        }
    }

    pub fn planned_looks(&self) -> u32 {
        self.max - self.first + 1
    }

    /// The look taken when `blocks` blocks are complete (1-based), if one is planned then.
    pub fn look_at(&self, blocks: u32) -> Option<u32> {
        (self.first..=self.max)
            .contains(&blocks)
            .then(|| blocks - self.first + 1)
    }

    /// The spending plan, or `None` for a single look (then the plain analysis applies).
    pub fn sequential_plan(&self, alpha: f64) -> Result<Option<SequentialPlan>, StatsError> {
        if self.planned_looks() == 1 {
            return Ok(None);
        }
        let fractions: Vec<f64> = (self.first..=self.max)
            .map(|n| n as f64 / self.max as f64)
            .collect();
        SequentialPlan::obrien_fleming(&fractions, alpha).map(Some)
    }
}

/// What follows a look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Every variant has a final decision.
    Decided,
    /// Add this many blocks and look again.
    Extend(u32),
    /// Some variant is inconclusive and the budget is spent.
    BudgetExhausted,
    /// No decision can ever come (no data for an arm that needs it).
    Failed(String),
}

/// What follows a look at `blocks` complete blocks. `complete_runs` gives, per arm that
/// should have run (not-applicable arms excluded), how many of its runs completed.
pub fn next_after_look(
    analysis: &Analysis,
    blocks: u32,
    schedule: &LookSchedule,
    complete_runs: &[(String, usize)],
) -> Next {
    let failed = analysis
        .variants
        .iter()
        .filter(|v| v.decision == Decision::Failed)
        .map(|v| v.name.as_str());
    if let Some(why) = no_data(complete_runs, failed) {
        return Next::Failed(why);
    }
    let open = analysis
        .variants
        .iter()
        .any(|v| v.decision == Decision::Inconclusive);
    if !open || schedule.planned_looks() == 1 {
        // Without `max_replicates` there is one look and no budget to exhaust: an
        // inconclusive variant is that experiment's answer.
        Next::Decided
    } else if blocks < schedule.max {
        Next::Extend(1)
    } else {
        Next::BudgetExhausted
    }
}

/// Why the experiment cannot go on: an arm that should have run has no complete run and
/// is not a variant decided `failed` (its app failed in every run, an answer about that
/// variant); `None` when every arm has data.
fn no_data<'a>(
    complete_runs: &[(String, usize)],
    failed_variants: impl Iterator<Item = &'a str>,
) -> Option<String> {
    let failed: Vec<&str> = failed_variants.collect();
    let empty: Vec<String> = complete_runs
        .iter()
        .filter(|(a, n)| *n == 0 && !failed.contains(&a.as_str()))
        .map(|(a, _)| format!("`{a}`"))
        .collect();
    (!empty.is_empty()).then(|| {
        format!(
            "no run of {} completed, so nothing can be compared; the failed runs' stderr says why",
            empty.join(", ")
        )
    })
}

/// The staged rule's look at `blocks` blocks (`optgate_stats::stopping`): only the
/// variants still in the block plan (`open`) are analysed; `retired` counts those that
/// left without an acceptance (`Verdict::retired`), which Holm keeps in the family. Make the plan once per
/// experiment with [`StagedPlan::new`].
pub fn analyse_staged_look(
    baseline: &ArmData,
    open: &[ArmData],
    retired: usize,
    cfg: &AnalysisConfig,
    plan: &StagedPlan,
    blocks: u32,
) -> Result<StagedLook, StatsError> {
    analyze_staged(baseline, open, retired, cfg, plan, blocks)
}

/// The staged plan an experiment asks for: `compare.sequential: staged` with a budget
/// above `replicates`; `None` otherwise (the rule of §13, or a single look). The Holm
/// family at the start is the proposals: every arm but the baseline and the A/A control.
pub fn staged_plan(exp: &Experiment) -> Result<Option<StagedPlan>, StatsError> {
    let schedule = LookSchedule::new(exp.replicates, Some(exp.max_replicates));
    if exp.sequential != SequentialRule::Staged || schedule.planned_looks() == 1 {
        return Ok(None);
    }
    let proposals = exp
        .arms
        .iter()
        .filter(|a| a.name != BASELINE && a.name != AA_CONTROL)
        .count();
    StagedPlan::new(
        schedule.first,
        schedule.max,
        exp.alpha,
        proposals,
        exp.design.stats(),
    )
    .map(Some)
}

/// What follows a look of the staged rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StagedNext {
    /// Every variant has left the block plan with a decision (or stopped inconclusive
    /// because the budget could not decide it).
    Decided,
    /// Add `blocks` blocks holding the baseline and only these variants, then look again.
    Extend { blocks: u32, arms: Vec<String> },
    /// Some variant was still inconclusive at the last planned look.
    BudgetExhausted,
    /// No decision can ever come (no data for an arm that needs it).
    Failed(String),
}

/// What follows a staged look at `blocks` blocks. `complete_runs`: per arm analysed at this
/// look (baseline and open variants), how many of its runs completed.
pub fn next_after_staged_look(
    look: &StagedLook,
    blocks: u32,
    plan: &StagedPlan,
    complete_runs: &[(String, usize)],
) -> StagedNext {
    let failed = look
        .verdicts
        .iter()
        .filter(|v| v.decision == Decision::Failed)
        .map(|v| v.name.as_str());
    if let Some(why) = no_data(complete_runs, failed) {
        return StagedNext::Failed(why);
    }
    let open: Vec<String> = look
        .verdicts
        .iter()
        .filter(|v| v.stop.is_none())
        .map(|v| v.name.clone())
        .collect();
    if open.is_empty() {
        let exhausted = look
            .verdicts
            .iter()
            .any(|v| v.stop == Some(Stop::BudgetExhausted));
        return if exhausted {
            StagedNext::BudgetExhausted
        } else {
            StagedNext::Decided
        };
    }
    match plan.next_look_after(blocks) {
        Some(next) => StagedNext::Extend {
            blocks: next - blocks,
            arms: open,
        },
        None => StagedNext::BudgetExhausted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use optgate_stats::{Design, RunSamples, analyze_at_look as at_look};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::collections::BTreeMap;

    #[test]
    fn looks_run_from_replicates_to_the_budget() {
        let s = LookSchedule::new(5, Some(8));
        assert_eq!(s.planned_looks(), 4);
        assert_eq!(s.look_at(5), Some(1));
        assert_eq!(s.look_at(8), Some(4));
        assert_eq!(s.look_at(4), None);
        let plan = s.sequential_plan(0.05).unwrap().unwrap();
        assert_eq!(plan.fractions, vec![5.0 / 8.0, 6.0 / 8.0, 7.0 / 8.0, 1.0]);
        let one = LookSchedule::new(5, None);
        assert_eq!(one.planned_looks(), 1);
        assert!(one.sequential_plan(0.05).unwrap().is_none());
        assert_eq!(LookSchedule::new(5, Some(3)).max, 5);
    }

    fn arm(name: &str, runs: &[Vec<f64>]) -> ArmData {
        ArmData {
            name: name.into(),
            runs: runs
                .iter()
                .enumerate()
                .map(|(i, epochs)| RunSamples {
                    replicate: i as u32 + 1,
                    block: Some(i as u32 + 1),
                    epochs: epochs
                        .iter()
                        .enumerate()
                        .map(|(e, v)| (e as u32 + 1, *v))
                        .collect::<BTreeMap<_, _>>(),
                })
                .collect(),
            not_applicable: None,
            failed: None,
            correctness_mismatch: None,
            system_metric: vec![],
            guardrails: Default::default(),
            load: vec![],
        }
    }

    /// One run of 3 epochs: a block effect shared by the arms of the block, noise per run.
    fn run(rng: &mut ChaCha8Rng, block_effect: f64, speed: f64) -> Vec<f64> {
        let noise: f64 = (rng.random::<f64>() - 0.5) * 0.04;
        let t = block_effect * (1.0 + noise) / speed;
        vec![t * 3.0, t, t]
    }

    /// Runs the daemon's loop on simulated blocks until it stops; returns whether any
    /// variant was accepted and how many looks were taken.
    fn simulate(
        rng: &mut ChaCha8Rng,
        speed: f64,
        schedule: &LookSchedule,
        plan: Option<&SequentialPlan>,
        cfg: &AnalysisConfig,
    ) -> (bool, u32) {
        let mut base = Vec::new();
        let mut var = Vec::new();
        let mut blocks = 0;
        loop {
            while blocks < schedule.first || base.len() < blocks as usize {
                let b = 1.0 + rng.random::<f64>() * 0.2;
                base.push(run(rng, b, 1.0));
                var.push(run(rng, b, speed));
                blocks = blocks.max(base.len() as u32);
            }
            let look = schedule.look_at(blocks).unwrap();
            let a = at_look(
                &arm("baseline", &base),
                &[arm("v", &var)],
                cfg,
                plan.map(|p| (p, look)),
            )
            .unwrap();
            if a.variants[0].decision == Decision::Accept {
                return (true, look);
            }
            let counts = [
                ("baseline".to_string(), base.len()),
                ("v".to_string(), var.len()),
            ];
            match next_after_look(&a, blocks, schedule, &counts) {
                Next::Extend(n) => blocks += n,
                _ => return (false, look),
            }
        }
    }

    fn config() -> AnalysisConfig {
        AnalysisConfig {
            design: Design::Paired,
            alpha: 0.05,
            // The null's boundary: the hardest case for the false-accept rate.
            min_effect_pct: 0.0,
            ..AnalysisConfig::default()
        }
    }

    /// A/A experiments through the daemon's loop, every look taken until it stops: the
    /// false-accept rate stays at α or below (within Monte-Carlo error), where testing
    /// each look at α would not.
    #[test]
    fn sequential_aa_experiments_keep_the_false_accept_rate_at_alpha() {
        let schedule = LookSchedule::new(6, Some(14));
        let cfg = config();
        let plan = schedule.sequential_plan(cfg.alpha).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(20260401);
        let sims = 1000;
        let mut accepted = 0;
        let mut looks_taken = 0;
        for _ in 0..sims {
            let (acc, looks) = simulate(&mut rng, 1.0, &schedule, plan.as_ref(), &cfg);
            accepted += acc as u32;
            looks_taken += looks;
        }
        let rate = accepted as f64 / sims as f64;
        let mc_sd = (0.05f64 * 0.95 / sims as f64).sqrt();
        assert!(
            rate <= 0.05 + 3.0 * mc_sd,
            "false-accept rate {rate} over {sims} A/A experiments"
        );
        // Most experiments went through several looks: the rule was really exercised.
        assert!(looks_taken as f64 / sims as f64 > 4.0, "{looks_taken}");
        // Testing every look at α instead inflates the rate well past α on the same kind
        // of data: the test can tell a spending rule from none.
        let naive = (0..sims)
            .filter(|_| simulate(&mut rng, 1.0, &schedule, None, &cfg).0)
            .count() as f64
            / sims as f64;
        eprintln!(
            "A/A through the daemon's loop: false-accept {rate:.4} with alpha spending, {naive:.4} testing each look at alpha"
        );
        assert!(naive > 0.05 + 3.0 * mc_sd, "naive rate {naive}");
    }

    /// The same loop finds a real 5 % speed-up, so the rule above is not trivially quiet.
    #[test]
    fn a_real_speed_up_is_accepted_through_the_loop() {
        let schedule = LookSchedule::new(6, Some(14));
        let cfg = config();
        let plan = schedule.sequential_plan(cfg.alpha).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let accepted = (0..40)
            .filter(|_| simulate(&mut rng, 1.05, &schedule, plan.as_ref(), &cfg).0)
            .count();
        assert!(accepted >= 36, "{accepted} of 40");
    }

    /// Rule 5′ through the loop: a variant whose one-time cost no steady speed-up in its
    /// interval can repay is rejected at the first look, and the daemon adds no block for it
    /// (before: inconclusive, one more block per look up to the budget).
    #[test]
    fn a_variant_that_cannot_be_accepted_gets_no_more_blocks() {
        // 10 of at most 14 blocks: the first look's nominal level (≈ 0.01) leaves the
        // intervals finite (at 6 of 14, 0.0028 < 2^-6, they are unbounded and rule 5′ waits).
        let schedule = LookSchedule::new(10, Some(14));
        let cfg = config();
        let plan = schedule.sequential_plan(cfg.alpha).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let (mut base, mut var) = (Vec::new(), Vec::new());
        for _ in 0..10 {
            let b = 1.0 + rng.random::<f64>() * 0.2;
            base.push(run(&mut rng, b, 1.0));
            let mut v = run(&mut rng, b, 1.0);
            v[0] *= 4.0; // epoch 1 four times slower, steady state equal
            var.push(v);
        }
        let a = at_look(
            &arm("baseline", &base),
            &[arm("v", &var)],
            &cfg,
            plan.as_ref().map(|p| (p, 1)),
        )
        .unwrap();
        let v = &a.variants[0];
        assert_eq!(v.decision, Decision::Reject, "{}", v.reason);
        assert!(
            v.reason.starts_with("acceptance is impossible"),
            "{}",
            v.reason
        );
        let counts = [("baseline".to_string(), 10), ("v".to_string(), 10)];
        assert_eq!(next_after_look(&a, 10, &schedule, &counts), Next::Decided);
    }

    /// The sequential A/A loop again, counting how many experiments rule 5′ ended early: the
    /// false-accept rate stays at α (the rule only rejects), and the looks it saves are
    /// measured.
    #[test]
    fn futility_stops_keep_the_sequential_false_accept_rate() {
        let schedule = LookSchedule::new(6, Some(14));
        let cfg = config();
        let plan = schedule.sequential_plan(cfg.alpha).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(20261130);
        let sims = 1000;
        let (mut accepted, mut futile, mut looks) = (0u32, 0u32, 0u32);
        for _ in 0..sims {
            let (mut base, mut var) = (Vec::new(), Vec::new());
            let mut blocks = 0u32;
            loop {
                while base.len() < blocks.max(schedule.first) as usize {
                    let b = 1.0 + rng.random::<f64>() * 0.2;
                    base.push(run(&mut rng, b, 1.0));
                    var.push(run(&mut rng, b, 1.0));
                }
                blocks = base.len() as u32;
                let look = schedule.look_at(blocks).unwrap();
                let a = at_look(
                    &arm("baseline", &base),
                    &[arm("v", &var)],
                    &cfg,
                    plan.as_ref().map(|p| (p, look)),
                )
                .unwrap();
                let v = &a.variants[0];
                let counts = [
                    ("baseline".to_string(), base.len()),
                    ("v".to_string(), var.len()),
                ];
                match next_after_look(&a, blocks, &schedule, &counts) {
                    Next::Extend(n) => blocks += n,
                    _ => {
                        accepted += (v.decision == Decision::Accept) as u32;
                        futile += v.reason.starts_with("acceptance is impossible") as u32;
                        looks += look;
                        break;
                    }
                }
            }
        }
        let rate = accepted as f64 / sims as f64;
        let mc_sd = (0.05f64 * 0.95 / sims as f64).sqrt();
        eprintln!(
            "sequential A/A with rule 5': false-accept {rate:.4}, stopped by rule 5' {:.4}, {:.2} looks on average",
            futile as f64 / sims as f64,
            looks as f64 / sims as f64
        );
        assert!(rate <= 0.05 + 3.0 * mc_sd, "false-accept rate {rate}");
    }

    /// D2: a variant whose app crashed in every run is decided `failed` with the runs'
    /// reason; the experiment is decided (not failed), and no block is added for it.
    #[test]
    fn a_variant_that_failed_every_run_is_decided_failed() {
        let schedule = LookSchedule::new(5, Some(8));
        let base: Vec<Vec<f64>> = (0..5)
            .map(|i| vec![3.0, 1.0 + i as f64 * 0.01, 1.0])
            .collect();
        let mut v = arm("v", &[]);
        v.failed = Some("5 of 5 run(s) failed — run b1-v: the app exited with status 139".into());
        let a = optgate_stats::analyze(&arm("baseline", &base), &[v], &config()).unwrap();
        let va = &a.variants[0];
        assert_eq!(va.decision, Decision::Failed);
        assert_eq!(va.decision.as_str(), "failed");
        assert!(
            va.reason.contains("exited with status 139"),
            "{}",
            va.reason
        );
        assert_eq!(va.p_improvement, None);
        let counts = [("baseline".to_string(), 5), ("v".to_string(), 0)];
        assert_eq!(next_after_look(&a, 5, &schedule, &counts), Next::Decided);
        let json = serde_json::to_value(va).unwrap();
        assert_eq!(json["decision"], "failed");
    }

    /// Per-variant stopping: a variant accepted at the first look leaves the block plan;
    /// the next blocks hold the baseline and the undecided variant only, and the plan
    /// jumps over a look the exact test could not reach.
    #[test]
    fn a_decided_variant_leaves_the_block_plan() {
        let cfg = AnalysisConfig::default();
        let plan = StagedPlan::new(5, 20, cfg.alpha, 2, optgate_stats::Design::Paired).unwrap();
        // With 2 variants 2/32 is above what 5 blocks may spend: the first look is at 6.
        assert_eq!(plan.next_look_after(0), Some(6));
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let (mut base, mut fast, mut same) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..6 {
            let b = 1.0 + rng.random::<f64>() * 0.2;
            base.push(run(&mut rng, b, 1.0));
            fast.push(run(&mut rng, b, 1.3));
            same.push(run(&mut rng, b, 1.0));
        }
        let open = [arm("fast", &fast), arm("same", &same)];
        let look = analyse_staged_look(&arm("baseline", &base), &open, 0, &cfg, &plan, 6).unwrap();
        assert_eq!(look.verdicts[0].decision, Decision::Accept);
        assert_eq!(look.verdicts[0].stop, Some(Stop::Efficacy));
        assert_eq!(look.verdicts[1].stop, None, "{}", look.verdicts[1].reason);
        let counts = [
            ("baseline".to_string(), 6),
            ("fast".to_string(), 6),
            ("same".to_string(), 6),
        ];
        let next = plan.next_look_after(6).unwrap();
        assert_eq!(
            next_after_staged_look(&look, 6, &plan, &counts),
            StagedNext::Extend {
                blocks: next - 6,
                arms: vec!["same".to_string()]
            }
        );
    }

    /// When every analysed variant has left the plan, the experiment is decided; a variant
    /// still inconclusive at the last look makes it budget-exhausted.
    #[test]
    fn a_staged_experiment_ends_when_no_variant_is_open() {
        let cfg = AnalysisConfig::default();
        let plan = StagedPlan::new(5, 8, cfg.alpha, 1, optgate_stats::Design::Paired).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        let (mut base, mut var) = (Vec::new(), Vec::new());
        for _ in 0..8 {
            let b = 1.0 + rng.random::<f64>() * 0.2;
            base.push(run(&mut rng, b, 1.0));
            var.push(run(&mut rng, b, 1.0));
        }
        let look = analyse_staged_look(
            &arm("baseline", &base),
            &[arm("v", &var)],
            0,
            &cfg,
            &plan,
            8,
        )
        .unwrap();
        let counts = [("baseline".to_string(), 8), ("v".to_string(), 8)];
        let expected = match look.verdicts[0].stop {
            Some(Stop::BudgetExhausted) => StagedNext::BudgetExhausted,
            Some(_) => StagedNext::Decided,
            None => panic!("the last look leaves no variant open"),
        };
        assert_eq!(next_after_staged_look(&look, 8, &plan, &counts), expected);
        let none = [("baseline".to_string(), 0), ("v".to_string(), 8)];
        assert!(matches!(
            next_after_staged_look(&look, 8, &plan, &none),
            StagedNext::Failed(m) if m.contains("`baseline`")
        ));
    }

    #[test]
    fn an_arm_without_data_fails_the_experiment() {
        let schedule = LookSchedule::new(5, None);
        let a = optgate_stats::analyze(&arm("baseline", &[]), &[arm("v", &[])], &config()).unwrap();
        let next = next_after_look(&a, 5, &schedule, &[("baseline".into(), 0), ("v".into(), 5)]);
        assert!(matches!(next, Next::Failed(m) if m.contains("`baseline`")));
        // One look (no max_replicates): inconclusive is the decision, not a spent budget.
        assert_eq!(
            next_after_look(&a, 5, &schedule, &[("baseline".into(), 5), ("v".into(), 5)]),
            Next::Decided
        );
        // With a budget, an inconclusive variant at its end has exhausted it.
        let with_budget = LookSchedule::new(5, Some(8));
        assert_eq!(
            next_after_look(
                &a,
                8,
                &with_budget,
                &[("baseline".into(), 8), ("v".into(), 8)]
            ),
            Next::BudgetExhausted
        );
        assert_eq!(
            next_after_look(
                &a,
                6,
                &with_budget,
                &[("baseline".into(), 6), ("v".into(), 6)]
            ),
            Next::Extend(1)
        );
    }

    /// An experiment of two proposals and the A/A control, with `extra` top-level keys.
    fn experiment(extra: &str) -> Experiment {
        let text = format!(
            "name: p\napp: {{ command: [./app] }}\n\
             metric: {{ pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s' }}\n\
             replicates: 6\naa_control: true\n{extra}variants:\n\
             \x20 - {{ name: v1, dimension: l2_threading_model, env: {{ X: '1' }} }}\n\
             \x20 - {{ name: v2, dimension: l2_threading_model, env: {{ X: '2' }} }}\n"
        );
        optgate_experiment::load_str(&text, std::path::Path::new("/exp/p.yaml"))
            .unwrap_or_else(|e| panic!("{text}\n{e}"))
            .experiment
    }

    /// The staged plan exists only for `sequential: staged` with a budget above
    /// `replicates`, and its Holm family is the proposals: neither the baseline nor the
    /// A/A control. The plans for 1, 2 and 4 arms differ, so a family that counted the
    /// A/A control or the baseline, or only one of them, fails here; so does a plan made
    /// for the spending rule or for a single look.
    #[test]
    fn the_staged_plan_is_for_the_staged_rule_with_a_budget_over_the_proposals() {
        let staged = experiment("max_replicates: 20\ncompare: { sequential: staged }\n");
        let plan = staged_plan(&staged)
            .unwrap()
            .expect("staged, with a budget");
        let with = |family: usize| StagedPlan::new(6, 20, 0.05, family, Design::Paired).unwrap();
        assert_eq!(plan, with(2));
        assert_ne!(plan, with(1));
        assert_ne!(plan, with(4));
        let independent = experiment(
            "max_replicates: 20\ncompare: { sequential: staged }\ndesign: independent\n",
        );
        let plan = staged_plan(&independent).unwrap().unwrap();
        assert_eq!(
            plan,
            StagedPlan::new(6, 20, 0.05, 2, Design::Independent).unwrap()
        );
        let single = experiment("max_replicates: 6\ncompare: { sequential: staged }\n");
        assert_eq!(staged_plan(&single).unwrap(), None);
        let spending = experiment("max_replicates: 20\ncompare: { sequential: obrien_fleming }\n");
        assert_eq!(staged_plan(&spending).unwrap(), None);
    }

    /// With neither `compare.sequential` nor `max_replicates` an experiment adapts: the
    /// staged rule over the default budget of 6 × `replicates` blocks.
    #[test]
    fn by_default_the_staged_rule_runs_over_six_times_replicates() {
        let default = experiment("");
        assert_eq!(default.max_replicates, 36);
        assert_eq!(
            staged_plan(&default).unwrap(),
            Some(StagedPlan::new(6, 36, 0.05, 2, Design::Paired).unwrap())
        );
    }

    /// A variant decided `failed` at a staged look (its app failed in every run) is an
    /// answer, not missing data: with the baseline and the other variant complete, what
    /// follows is not `Failed`. Reading the failed variants the wrong way round reports it
    /// as an arm without data and fails the experiment.
    #[test]
    fn a_staged_variant_that_failed_every_run_does_not_fail_the_experiment() {
        let cfg = AnalysisConfig::default();
        let plan = StagedPlan::new(5, 20, cfg.alpha, 2, Design::Paired).unwrap();
        let first = plan.next_look_after(0).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(13);
        let (mut base, mut same) = (Vec::new(), Vec::new());
        for _ in 0..first {
            let b = 1.0 + rng.random::<f64>() * 0.2;
            base.push(run(&mut rng, b, 1.0));
            same.push(run(&mut rng, b, 1.0));
        }
        let mut broken = arm("broken", &[]);
        broken.failed = Some("6 of 6 run(s) failed — run b1-broken: exit 139".into());
        let open = [broken, arm("same", &same)];
        let look =
            analyse_staged_look(&arm("baseline", &base), &open, 0, &cfg, &plan, first).unwrap();
        assert_eq!(look.verdicts[0].decision, Decision::Failed);
        let counts = [
            ("baseline".to_string(), first as usize),
            ("broken".to_string(), 0),
            ("same".to_string(), first as usize),
        ];
        let next = next_after_staged_look(&look, first, &plan, &counts);
        assert!(!matches!(next, StagedNext::Failed(_)), "{next:?}");
    }
}
