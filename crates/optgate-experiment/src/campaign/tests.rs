//! The campaign's pure parts: its shape and located diagnostics, the run order, the chain
//! of baselines, the winner and conflict rules and the combined result.

use std::path::Path;

use optgate_stats::{Decision, VariantAnalysis};

use super::chain::{combine, variant_settings};
use super::*;
use crate::model::VariantSpec;

const CAMPAIGN: &str = r#"name: pass
app:
  command: ./app
  env: { BASE: 1, DROPME: x }
metric:
  pattern: 'epoch (?P<epoch>\d+) (?P<seconds>[0-9.]+)'
replicates: 5
seed: 7
stages:
  - component: compute
    description: vectorise
    replicates: 6
    variants:
      - { name: vec, dimension: l1_vectorization, env: { VEC: 1 } }
  - component: io
    variants:
      - { name: prefetch, dimension: l1_io_overlap, env: { PREFETCH: 1, SHARED: io } }
  - component: memory
    variants:
      - { name: numa, dimension: l3_numa_affinity, env: { SHARED: mem }, unset: [DROPME] }
"#;

fn campaign() -> Campaign {
    load_str(CAMPAIGN, Path::new("/x/c.yaml")).expect("valid campaign")
}

fn variant(c: &Campaign, k: usize, name: &str) -> VariantSpec {
    c.stage_variant(k, name).expect("variant")
}

fn origin(c: &Campaign, k: usize, v: &str) -> Origin {
    Origin {
        stage: k,
        component: c.stages[k].component,
        variant: v.into(),
    }
}

/// The chain after the I/O and memory winners.
fn io_and_memory(c: &Campaign) -> Chain {
    let mut chain = Chain::default();
    chain.add_winner(origin(c, 0, "prefetch"), &variant(c, 0, "prefetch"));
    chain.add_winner(origin(c, 1, "numa"), &variant(c, 1, "numa"));
    chain
}

#[test]
fn stages_run_in_the_canonical_order_whatever_the_file_order() {
    let c = campaign();
    let order: Vec<Area> = c.stages.iter().map(|s| s.component).collect();
    assert_eq!(order, vec![Area::Io, Area::Memory, Area::Compute]);
    assert!(c.reordered);
    assert_eq!(c.stages[2].file_index, 0);
    assert_eq!(c.stage_name(2), "pass-3-compute");
}

#[test]
fn the_compute_stage_baseline_carries_the_earlier_winners() {
    let c = campaign();
    let chain = io_and_memory(&c);
    let text = c.stage_text(2, &chain);
    let loaded = load_generated(&text, &c.source).expect("the stage experiment is valid");
    let exp = loaded.experiment;
    assert_eq!(exp.file.name, "pass-3-compute");
    assert_eq!(exp.replicates, 6, "the stage's own override");
    let base = &exp.arms[0];
    assert_eq!(base.env.get("PREFETCH").map(String::as_str), Some("1"));
    assert_eq!(
        base.env.get("SHARED").map(String::as_str),
        Some("mem"),
        "later stage wins"
    );
    assert_eq!(base.env.get("BASE").map(String::as_str), Some("1"));
    assert!(
        !base.env.contains_key("DROPME"),
        "the memory winner's unset holds"
    );
    assert!(base.unset.contains(&"DROPME".to_string()));
    let vec = &exp.arms[1];
    assert_eq!(vec.env.get("VEC").map(String::as_str), Some("1"));
    assert_eq!(vec.env.get("PREFETCH").map(String::as_str), Some("1"));
    assert!(!vec.env.contains_key("DROPME"));
}

#[test]
fn a_setting_two_winners_make_goes_to_the_later_stage_and_is_shown() {
    let c = campaign();
    let chain = io_and_memory(&c);
    assert_eq!(chain.overridden.len(), 1);
    let o = &chain.overridden[0];
    assert_eq!(o.setting, "env.SHARED");
    assert_eq!(
        (o.earlier.component, o.later.component),
        (Area::Io, Area::Memory)
    );
    assert!(
        chain
            .describe()
            .contains("`env.SHARED` of io `prefetch` overridden by memory `numa`")
    );
}

#[test]
fn the_first_stage_runs_the_campaign_baseline_unchanged() {
    let c = campaign();
    let exp = load_generated(&c.stage_text(0, &Chain::default()), &c.source)
        .unwrap()
        .experiment;
    assert_eq!(exp.replicates, 5);
    assert!(!exp.arms[0].env.contains_key("PREFETCH"));
    assert!(exp.arms[0].env.contains_key("DROPME"));
    // The other stages' dimensions have a verdict, so the stage's checklist is not missing them.
    assert!(exp.file.checklist.contains_key("l1_vectorization"));
}

#[test]
fn the_confirmation_is_the_combination_against_the_original_baseline() {
    let c = campaign();
    let mut chain = io_and_memory(&c);
    chain.add_winner(origin(&c, 2, "vec"), &variant(&c, 2, "vec"));
    let exp = load_generated(&c.confirmation_text(&chain), &c.source)
        .unwrap()
        .experiment;
    assert_eq!(exp.file.name, "pass-combined");
    assert_eq!(exp.seed, 7 + CONFIRMATION_SEED_OFFSET, "fresh blocks");
    assert_eq!(exp.arms.len(), 2);
    let (base, comb) = (&exp.arms[0], &exp.arms[1]);
    assert!(!base.env.contains_key("PREFETCH") && base.env.contains_key("DROPME"));
    assert_eq!(comb.name, COMBINED);
    for (k, v) in [("PREFETCH", "1"), ("SHARED", "mem"), ("VEC", "1")] {
        assert_eq!(comb.env.get(k).map(String::as_str), Some(v), "{k}");
    }
    assert!(!comb.env.contains_key("DROPME"));
}

#[test]
fn every_setting_kind_a_winner_makes_reaches_the_next_baseline() {
    let c = campaign();
    let v: VariantSpec = serde_json::from_value(serde_json::json!({
        "name": "all", "args": ["--fast"], "governor": "performance",
        "requires": ["avx2"], "caches": "warm", "build": {"command": "make fast"},
        "launcher": {"cpus_per_task": 2}
    }))
    .unwrap();
    assert_eq!(variant_settings(&v).len(), 6);
    let mut chain = Chain::default();
    chain.add_winner(origin(&c, 0, "all"), &v);
    let exp = load_generated(&c.stage_text(1, &chain), &c.source)
        .unwrap()
        .experiment;
    let base = &exp.arms[0];
    assert_eq!(base.args, vec!["--fast".to_string()]);
    assert_eq!(base.governor.as_deref(), Some("performance"));
    assert_eq!(base.requires, vec!["avx2".to_string()]);
    assert_eq!(base.caches, crate::model::CacheMode::Warm);
    assert_eq!(base.resources.cpus_per_task, 2);
    assert!(base.build.is_some());
    let numa = &exp.arms[1];
    assert_eq!(numa.governor.as_deref(), Some("performance"));
    assert_eq!(numa.args, vec!["--fast".to_string()]);
}

fn analysis(name: &str, decision: Decision, score: f64, speedup: f64) -> VariantAnalysis {
    serde_json::from_value(serde_json::json!({
        "name": name, "decision": decision, "reason": "r", "n_baseline": 5, "n_variant": 5,
        "steady_epochs": [], "speedup": {"estimate": speedup, "ci_low": speedup * 0.9, "ci_high": speedup * 1.1},
        "first_epoch": {}, "weighted_score": score, "per_epoch": [], "warnings": []
    }))
    .expect("analysis")
}

#[test]
fn the_winner_is_the_accepted_variant_with_the_best_weighted_score() {
    let mut wrong = analysis("wrong", Decision::Accept, 90.0, 3.0);
    wrong.correctness_mismatch = Some("final value 2 vs 1".into());
    let vs = vec![
        analysis("rejected", Decision::Reject, 99.0, 4.0),
        wrong,
        analysis("good", Decision::Accept, 20.0, 1.3),
        analysis("better", Decision::Accept, 25.0, 1.2),
    ];
    let out = pick_winner(&vs);
    assert_eq!(out.winner.as_deref(), Some("better"));
    assert!(out.reason.contains("of 2 accepted"), "{}", out.reason);
}

#[test]
fn a_tie_goes_to_the_larger_speedup_then_the_first_listed() {
    let vs = vec![
        analysis("a", Decision::Accept, 20.0, 1.2),
        analysis("b", Decision::Accept, 20.0, 1.3),
        analysis("c", Decision::Accept, 20.0, 1.3),
    ];
    let out = pick_winner(&vs);
    assert_eq!(out.winner.as_deref(), Some("b"));
    assert!(out.reason.contains("tied with"), "{}", out.reason);
}

#[test]
fn no_accepted_variant_passes_the_baseline_on_with_the_reason() {
    let vs = vec![
        analysis("a", Decision::Inconclusive, 20.0, 1.2),
        analysis("b", Decision::Reject, 1.0, 0.9),
    ];
    let out = pick_winner(&vs);
    assert_eq!(out.winner, None);
    assert!(
        out.reason.contains("`a` inconclusive, `b` reject"),
        "{}",
        out.reason
    );
}

#[test]
fn combined_gives_the_prediction_and_the_interaction() {
    let conf = analysis(COMBINED, Decision::Accept, 40.0, 1.5);
    let c = combine(&conf, &[1.2, 1.25]);
    assert_eq!(c.decision, Decision::Accept);
    let p = c.predicted_speedup.unwrap();
    assert!((p - 1.5).abs() < 1e-12);
    assert!((c.interaction.estimate.unwrap() - 1.0).abs() < 1e-12);
    assert!((c.interaction.ci_low.unwrap() - 0.9).abs() < 1e-12);
    assert!(!c.not_better_than_best_stage);
    let weak = combine(
        &analysis(COMBINED, Decision::Accept, 5.0, 1.1),
        &[1.2, 1.05],
    );
    assert!(weak.not_better_than_best_stage);
}

#[test]
fn every_problem_of_a_campaign_is_reported_at_once_in_its_file() {
    let text = r#"name: pass
app: { command: ./app }
metric: { pattern: 'epoch (?P<epoch>\d+) (?P<seconds>[0-9.]+)' }
variants: []
stages:
  - component: disk
    variants: [{ name: a, env: { OK: 1 } }]
  - component: memory
    baseline: { env: { X: 1 } }
    variants: [{ name: b }]
"#;
    let Err(LoadError::Invalid { diagnostics }) = load_str(text, Path::new("/x/c.yaml")) else {
        panic!("invalid");
    };
    let at: Vec<(Option<usize>, &str)> = diagnostics
        .iter()
        .map(|d| (d.line, d.message.as_str()))
        .collect();
    assert!(
        at.iter()
            .any(|(l, m)| *l == Some(4) && m.contains("top-level `variants`")),
        "{at:?}"
    );
    assert!(
        at.iter()
            .any(|(l, m)| *l == Some(6) && m.contains("unknown component `disk`")),
        "{at:?}"
    );
    assert!(
        at.iter()
            .any(|(l, m)| *l == Some(9) && m.contains("cannot set `baseline`")),
        "{at:?}"
    );
}

#[test]
fn a_stage_experiment_problem_is_placed_in_the_stage() {
    let text = r#"name: pass
app: { command: ./app }
metric: { pattern: 'epoch (?P<epoch>\d+) (?P<seconds>[0-9.]+)' }
stages:
  - component: io
    variants:
      - name: a
        env: { OK: 1 }
  - component: compute
    replicates: 0
    variants:
      - name: b
        env: { "BAD NAME": 1 }
"#;
    let Err(LoadError::Invalid { diagnostics }) = load_str(text, Path::new("/x/c.yaml")) else {
        panic!("invalid");
    };
    let bad = diagnostics
        .iter()
        .find(|d| d.message.contains("BAD NAME"))
        .unwrap_or_else(|| panic!("{diagnostics:?}"));
    assert_eq!(bad.line, Some(13), "{bad}");
    assert!(bad.message.starts_with("stage 2 (compute)"), "{bad}");
    assert!(bad.path.starts_with("stages[1].variants[0]"), "{bad}");
    let reps = diagnostics
        .iter()
        .find(|d| d.path == "stages[1].replicates");
    assert_eq!(reps.and_then(|d| d.line), Some(10), "{diagnostics:?}");
}

#[test]
fn a_plain_experiment_is_not_a_campaign() {
    assert!(is_campaign_text(CAMPAIGN));
    assert!(!is_campaign_text("name: x\nvariants: []\n"));
    assert!(!is_campaign_text(": : :"));
}

#[test]
fn the_next_stage_follows_the_replayed_chain_to_the_confirmation_or_its_absence() {
    let c = campaign();
    let io = [analysis("prefetch", Decision::Accept, 20.0, 1.25)];
    let memory = [analysis("numa", Decision::Reject, -5.0, 0.9)];
    let r = replay(&c, &[&io, &memory]);
    assert_eq!(r.outcomes[1].winner, None);
    assert_eq!(r.speedups, vec![1.25]);
    let CampaignNext::Stage(2, text) = next_stage(&c, &r, 2) else {
        panic!("the compute stage is next");
    };
    assert!(
        text.contains("PREFETCH") && !text.contains("NUMA: '1'"),
        "{text}"
    );
    let compute = [analysis("vec", Decision::Inconclusive, 1.0, 1.01)];
    let r = replay(&c, &[&io, &memory, &compute]);
    assert!(matches!(
        next_stage(&c, &r, 3),
        CampaignNext::Confirmation(_)
    ));
    assert_eq!(next_stage(&c, &r, 4), CampaignNext::Finished);
    let none = [analysis("prefetch", Decision::Reject, 1.0, 1.0)];
    let r = replay(&c, &[&none, &memory, &compute]);
    assert!(matches!(
        next_stage(&c, &r, 3),
        CampaignNext::NoCombination(_)
    ));
}
