//! Campaigns through the real binary: a campaign whose stages are listed compute, I/O,
//! memory runs them I/O, memory, compute; each stage's baseline carries the earlier
//! winners (seen in the runs' own `run.json`); a compute proposal that helps only once the
//! memory fix is in is accepted in its stage; a proposal that changes the output is
//! rejected and never becomes a baseline; the combination is accepted against the original
//! baseline with `combined` giving its speed-up and the stages' prediction.
//! The workload is purpose-built (tests/fixtures/campaign_app.sh).

use crate::campaign_common;
use crate::support;

use std::path::Path;

use campaign_common::*;

use support::*;

/// The `run.json` of one run of `arm` in a stage's root.
fn a_run_record(stage_root: &Path, arm: &str) -> serde_json::Value {
    let runs = stage_root.join("runs");
    let dir = std::fs::read_dir(&runs)
        .unwrap_or_else(|e| panic!("{}: {e}", runs.display()))
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .ends_with(&format!("-{arm}"))
        })
        .unwrap_or_else(|| panic!("no {arm} run in {}", runs.display()));
    serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap()
}

#[test]
fn a_campaign_runs_its_stages_in_order_chaining_winners_and_gates_the_combination() {
    let dir = tempfile::tempdir().unwrap();
    let home = private_home();
    let p = dir.path().join("campaign.yaml");
    std::fs::write(&p, campaign_yaml("pass", &dir.path().join("ledger"))).unwrap();
    let root = dir.path().join("out");
    let o = optgate()
        .env("OPTGATE_HOME", &home)
        .args([
            "run",
            p.to_str().unwrap(),
            "--out",
            root.to_str().unwrap(),
            "--quiet",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("canonical order: io → memory → compute"),
        "{}",
        stderr(&o)
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    check_campaign(&report["campaign"]);
    // The compute stage's baseline runs carry the I/O and memory winners, never `unsafe`.
    let base = a_run_record(&root.join("03-compute"), "baseline");
    assert_eq!(base["env_set"]["PREFETCH"], "1", "{base}");
    assert_eq!(base["env_set"]["NUMA"], "1", "{base}");
    assert!(base["env_set"].get("UNSAFE").is_none(), "{base}");
    let memory_base = a_run_record(&root.join("02-memory"), "baseline");
    assert_eq!(memory_base["env_set"]["PREFETCH"], "1", "{memory_base}");
    assert!(
        memory_base["env_set"].get("NUMA").is_none(),
        "{memory_base}"
    );
    // The confirmation's baseline is the original one; its variant every winner together.
    let original = a_run_record(&root.join("04-combined"), "baseline");
    assert!(original["env_set"].get("PREFETCH").is_none(), "{original}");
    let combined = a_run_record(&root.join("04-combined"), "combined");
    for k in ["PREFETCH", "NUMA", "VEC"] {
        assert_eq!(combined["env_set"][k], "1", "{combined}");
    }
    let md = std::fs::read_to_string(root.join("campaign-report.md")).unwrap();
    assert!(
        md.contains("| Stage | Proposal | App Impact | System Impact | Weighted Score"),
        "{md}"
    );
    assert!(md.contains("the stages predicted"), "{md}");
    // Resumed with the same --out: every stage answers from its record, none runs again.
    let again = optgate()
        .env("OPTGATE_HOME", &home)
        .args([
            "run",
            p.to_str().unwrap(),
            "--out",
            root.to_str().unwrap(),
            "--quiet",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert_eq!(o.stdout, again.stdout, "the same report from the same runs");
}

#[test]
fn validate_says_the_stages_run_in_the_canonical_order_and_places_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("campaign.yaml");
    std::fs::write(&p, campaign_yaml("pass", &dir.path().join("ledger"))).unwrap();
    let o = run(&["validate", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("stages reordered into the canonical order"),
        "{out}"
    );
    let io = out.find("1. io (stage 2 in the file").expect(&out);
    let memory = out.find("2. memory (stage 3 in the file").expect(&out);
    let compute = out.find("3. compute (stage 1 in the file").expect(&out);
    assert!(io < memory && memory < compute, "{out}");
    let bad = campaign_yaml("pass", &dir.path().join("ledger"))
        .replace("component: io", "component: disk")
        .replace("{ VEC: 1 }", "{ \"NOT A NAME\": 1 }");
    std::fs::write(&p, bad).unwrap();
    let o = run(&["validate", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("campaign.yaml:16:16: error: unknown component `disk`"),
        "{err}"
    );
    assert!(err.contains("campaign.yaml:15:"), "{err}");
    assert!(err.contains("stage 1 (compute)"), "{err}");
}
