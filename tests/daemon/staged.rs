//! The staged rule through the real daemon (`compare.sequential: staged`): a variant
//! decided at the first look leaves the block plan — later blocks run the baseline and the
//! undecided variants only, the status says why and after how many blocks each variant
//! left, and the report analyses the decided variant on its own blocks. And the default
//! rule (no `compare.sequential`) is that staged rule: in the issue's setting a clear
//! speed-up is decided at the first look and a null effect stops well before the budget;
//! a variant decided at the first look keeps a System Impact (on its own blocks) beside
//! one that runs on.

use crate::support;

use std::path::Path;

use support::*;

/// Three variants: `fast` is 30 % faster in every block; `same1` and `same2` about 3 %
/// faster with ±5 % per-block noise (inconclusive at first). Deterministic times from the
/// block number, so the decisions are too.
const EXPERIMENT: &str = r#"name: staged
app:
  command: [bash, -c, 'b=$((1000 + (OPTGATE_BLOCK * 37) % 50)); case "${X:-0}" in 1) v=$((b * 70 / 100));; 2) v=$((b * (92 + (OPTGATE_BLOCK * 13) % 11) / 100));; 3) v=$((b * (92 + (OPTGATE_BLOCK * 7) % 11) / 100));; *) v=$b;; esac; for e in 1 2 3; do echo "epoch $e took $((v + e)).0 s"; done']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 6
max_replicates: 9
compare:
  sequential: staged
variants:
  - name: fast
    dimension: l2_threading_model
    env: { X: "1" }
  - name: same1
    dimension: l2_threading_model
    env: { X: "2" }
  - name: same2
    dimension: l2_threading_model
    env: { X: "3" }
"#;

fn has_run(root: &Path, id: &str) -> bool {
    root.join("runs").join(id).join("manifest.json").exists()
}

#[test]
fn a_variant_decided_early_leaves_the_later_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let exp = write_experiment(dir.path(), EXPERIMENT);
    let o = cli(&home, &["submit", exp.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = stdout(&o).trim().to_string();
    let o = cli(&home, &["status", &id, "--watch"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = status(&home, &id);
    let decisions = s["decisions"].as_array().unwrap();
    let of = |name: &str| {
        decisions
            .iter()
            .find(|d| d["variant"] == name)
            .unwrap_or_else(|| panic!("{name} in {s:#}"))
            .clone()
    };
    // With three variants 3/64 is above what 6 blocks may spend: the first look is at 7,
    // and the 30 % speed-up is accepted there.
    let fast = of("fast");
    assert_eq!(fast["decision"], "accept", "{s:#}");
    assert_eq!(fast["stop"], "efficacy", "{s:#}");
    assert_eq!(fast["blocks"], 7, "{s:#}");
    let blocks = s["blocks"].as_u64().unwrap();
    eprintln!("{} after {blocks} blocks: {:#}", s["state"], s["decisions"]);
    assert!(blocks > 7, "the others went on: {s:#}");
    let root = Path::new(s["root"].as_str().unwrap());
    assert!(has_run(root, "b007-fast"));
    for b in 8..=blocks {
        assert!(
            !has_run(root, &format!("b{b:03}-fast")),
            "block {b} ran fast"
        );
        assert!(has_run(root, &format!("b{b:03}-baseline")), "block {b}");
    }
    // The report keeps fast's decision and analyses it on its 7 blocks.
    let o = cli(&home, &["report", &id, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let variants = r["variants"].as_array().unwrap();
    let v = variants.iter().find(|v| v["name"] == "fast").unwrap();
    assert_eq!(v["decision"], "accept");
    assert_eq!(v["n_variant"], 7);
    let other = variants.iter().find(|v| v["name"] == "same1").unwrap();
    assert_eq!(other["n_variant"].as_u64(), Some(blocks));
}

/// A simulated app with the noise of a shared cluster node: per block a 3 % log-normal factor
/// shared by the arms, per run a 3 % one (seeded by the experiment's seed `$1`, the block
/// and the arm: the same files give the same times), the first epoch a warm-up twice a
/// steady one; the variant is `SPEED` times faster. Prints at once (no sleeping).
const NOISY_APP: &str = r#"#!/bin/bash
awk -v s="$1" -v b="$OPTGATE_BLOCK" -v arm="$OPTGATE_ARM" -v f="${SPEED:-1}" '
function gauss(  u1, u2) { u1 = 1 - rand(); u2 = rand(); return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2) }
BEGIN {
  srand(s * 10000 + b); rand(); blk = exp(0.03 * gauss())
  srand(s * 10000 + 100 * (arm == "baseline" ? 1 : 2) + b); rand(); run = exp(0.03 * gauss())
  t = 100 * blk * run / f
  printf "epoch 1 took %.5f s\nepoch 2 took %.5f s\nepoch 3 took %.5f s\n", 2 * t, t, t
}'
"#;

/// The default sequential setting, with no `compare.sequential`: `replicates: 5`, `max_replicates: 20`,
/// one variant `SPEED` times faster, min effect 1 % (the default).
fn default_rule_experiment(app: &Path, seed: u32, speed: &str) -> String {
    format!(
        r#"name: default-rule-{seed}
app:
  command: [bash, '{}', '{seed}']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 5
max_replicates: 20
seed: {seed}
variants:
  - name: v
    dimension: l2_threading_model
    env: {{ SPEED: "{speed}" }}
"#,
        app.display()
    )
}

/// Submits the experiment of `seed` and returns its id.
fn submit_default_rule(home: &Path, dir: &Path, app: &Path, seed: u32, speed: &str) -> String {
    let sub = dir.join(format!("e{seed}"));
    std::fs::create_dir_all(&sub).unwrap();
    let exp = write_experiment(&sub, &default_rule_experiment(app, seed, speed));
    let o = cli(home, &["submit", exp.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    stdout(&o).trim().to_string()
}

/// Waits for experiment `id`'s end: (the variant's decision, the blocks it ran).
fn decision_of(home: &Path, id: &str) -> (String, u64) {
    let o = cli(home, &["status", id, "--watch"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = status(home, id);
    let d = &s["decisions"].as_array().expect("decisions")[0];
    // The report states the design's simulated operating characteristics.
    let o = cli(home, &["report", id, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let oc = &r["operating_characteristics"];
    assert_eq!(oc["max_replicates"], 20, "{r:#}");
    assert_eq!(oc["points"].as_array().map(Vec::len), Some(3), "{oc:#}");
    let o = cli(home, &["report", id]);
    assert!(
        stdout(&o).contains("Operating characteristics of this design (5 blocks first, at most 20"),
        "{}",
        stdout(&o)
    );
    (
        d["decision"].as_str().unwrap().to_string(),
        s["blocks"].as_u64().unwrap(),
    )
}

/// The default sequential design's promise: with no `compare.sequential` a 30 % speed-up is accepted at the
/// first look (5 blocks), and a null effect spends on average well under 14 of the 20
/// blocks (the O'Brien–Fleming rule needed 9 and 15.7), with no false accept.
#[test]
fn the_default_rule_decides_a_clear_speed_up_at_five_blocks_and_a_null_early() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let app = dir.path().join("app.sh");
    std::fs::write(&app, NOISY_APP).unwrap();
    // Every experiment submitted at once: the daemon runs them side by side (their times
    // come from the seed, not the clock, so the decisions do not depend on it).
    let clear: Vec<(u32, String)> = [101, 102]
        .map(|seed| {
            (
                seed,
                submit_default_rule(&home, dir.path(), &app, seed, "1.3"),
            )
        })
        .into();
    let null_ids: Vec<String> = (1..=NULL_EXPERIMENTS)
        .map(|seed| submit_default_rule(&home, dir.path(), &app, seed, "1"))
        .collect();
    for (seed, id) in &clear {
        let (decision, blocks) = decision_of(&home, id);
        eprintln!("30 %, seed {seed}: {decision} after {blocks} blocks");
        assert_eq!((decision.as_str(), blocks), ("accept", 5), "seed {seed}");
    }
    let nulls: Vec<(String, u64)> = null_ids.iter().map(|id| decision_of(&home, id)).collect();
    eprintln!("0 %: {nulls:?}");
    assert!(
        nulls.iter().all(|(d, _)| d != "accept"),
        "a false accept: {nulls:?}"
    );
    let mean = nulls.iter().map(|(_, b)| *b as f64).sum::<f64>() / nulls.len() as f64;
    eprintln!("0 %: {mean:.1} blocks on average");
    assert!(mean < 14.0, "{mean} blocks on average: {nulls:?}");
}

/// Null experiments of the test above (the issue measured 6; 12 for a steadier mean).
const NULL_EXPERIMENTS: u32 = 12;

/// System Impact for every decided variant: through the default rule (no
/// `compare.sequential`), `fast` (30 % faster) is decided at the first look and leaves the
/// block plan while `slight` (2 % faster) runs on. Both have a numeric System Impact in
/// the report, `fast`'s on the core-seconds of its own blocks — the baseline's values were
/// once left uncut to those blocks, so its system metric read "not measured for every run
/// of both arms" and its System Impact was blank exactly where the result is clearest.
#[test]
fn a_variant_decided_at_the_first_look_has_its_system_impact() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let app = dir.path().join("app.sh");
    std::fs::write(&app, NOISY_APP).unwrap();
    let yaml = format!(
        r#"name: impact-early
app:
  command: [bash, '{}', '7']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 6
max_replicates: 12
seed: 7
variants:
  - name: fast
    dimension: l2_threading_model
    env: {{ SPEED: "1.3" }}
  - name: slight
    dimension: l2_threading_model
    env: {{ SPEED: "1.02" }}
"#,
        app.display()
    );
    let exp = write_experiment(dir.path(), &yaml);
    let o = cli(&home, &["submit", exp.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = stdout(&o).trim().to_string();
    let o = cli(&home, &["status", &id, "--watch"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = status(&home, &id);
    let blocks = s["blocks"].as_u64().unwrap();
    let decision = |name: &str| {
        s["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["variant"] == name)
            .unwrap_or_else(|| panic!("{name} in {s:#}"))
            .clone()
    };
    let fast = decision("fast");
    assert_eq!(fast["decision"], "accept", "{s:#}");
    let fast_blocks = fast["blocks"].as_u64().expect("fast left the plan");
    assert!(blocks > fast_blocks, "slight ran on: {s:#}");
    let o = cli(&home, &["report", &id, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["system_resource"], "core_seconds", "{r:#}");
    for (name, runs) in [("fast", fast_blocks), ("slight", blocks)] {
        let v = r["variants"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap();
        assert_eq!(v["n_variant"].as_u64(), Some(runs), "{name}: {v:#}");
        assert!(v["system_impact_pct"].is_f64(), "{name}: {v:#}");
        let app = v["app_impact_pct"].as_f64().unwrap();
        let system = v["system_impact_pct"].as_f64().unwrap();
        let score = v["weighted_score"].as_f64().unwrap();
        assert!((score - 0.5 * (app + system)).abs() < 1e-9, "{name}: {v:#}");
        let warnings = v["warnings"].to_string();
        assert!(!warnings.contains("not measured"), "{name}: {warnings}");
    }
    let text = stdout(&cli(&home, &["report", &id]));
    assert!(!text.contains("not measured"), "{text}");
}
