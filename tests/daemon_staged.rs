//! The staged rule through the real daemon (`compare.sequential: staged`): a variant
//! decided at the first look leaves the block plan — later blocks run the baseline and the
//! undecided variants only, the status says why and after how many blocks each variant
//! left, and the report analyses the decided variant on its own blocks.

mod support;

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
