//! What the campaign tests share (tests/campaigns/foreground.rs, tests/campaigns/daemon.rs): the
//! campaign over the purpose-built workload tests/fixtures/campaign_app.sh and the checks
//! its report must pass, however it was run.

use std::path::PathBuf;

use super::support::repo_root;

pub fn app() -> PathBuf {
    repo_root().join("tests/fixtures/campaign_app.sh")
}

/// The campaign, its stages listed out of the canonical order.
/// Each run appends its run directory to `ledger`.
pub fn campaign_yaml(name: &str, ledger: &std::path::Path) -> String {
    format!(
        r#"name: {name}
description: a PECAN-style pass over a purpose-built workload
app:
  command: [bash, "{app}"]
  env: {{ CAMPAIGN_LEDGER: "{ledger}" }}
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
correctness:
  values: {{ pattern: 'result (?P<value>\d+)' }}
seed: 3
stages:
  - component: compute
    description: vectorise the kernel
    variants:
      - {{ name: vec, dimension: l1_vectorization, env: {{ VEC: 1 }} }}
  - component: io
    description: prefetch the inputs
    variants:
      - {{ name: prefetch, dimension: l1_io_overlap, env: {{ PREFETCH: 1 }} }}
  - component: memory
    description: memory placement
    variants:
      - {{ name: unsafe, dimension: l2_compiler_runtime_flags, env: {{ UNSAFE: 1 }} }}
      - {{ name: numa, dimension: l3_numa_affinity, env: {{ NUMA: 1 }} }}
checklist:
  l1_kernel_library: {{ verdict: not_applicable, reason: "a shell workload" }}
  l2_threading_model: {{ verdict: not_applicable, reason: "a shell workload" }}
  l2_autotuning: {{ verdict: not_applicable, reason: "a shell workload" }}
  l3_frequency_power: {{ verdict: not_applicable, reason: "a shell workload" }}
  l3_hardware_capability: {{ verdict: not_applicable, reason: "a shell workload" }}
  comm_overlap: {{ verdict: not_applicable, reason: "one process" }}
"#,
        app = app().display(),
        ledger = ledger.display()
    )
}

pub fn check_campaign(c: &serde_json::Value) {
    let stages = c["stages"].as_array().expect("stages");
    let order: Vec<&str> = stages
        .iter()
        .map(|s| s["component"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["io", "memory", "compute"], "{c:#}");
    let winners: Vec<&str> = stages
        .iter()
        .map(|s| s["winner"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(winners, ["prefetch", "numa", "vec"], "{c:#}");
    let memory = &stages[1]["variants"];
    let unsafe_v = memory
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "unsafe")
        .unwrap();
    assert_eq!(unsafe_v["decision"], "reject", "{unsafe_v}");
    assert!(unsafe_v["correctness_mismatch"].is_string(), "{unsafe_v}");
    assert_eq!(stages[2]["variants"][0]["decision"], "accept", "{c:#}");
    let combined = &c["combined"];
    assert_eq!(combined["decision"], "accept", "{combined}");
    // 1 / (0.8 · 0.8 · 0.85) = 1.84 by construction, measured and predicted.
    let measured = combined["speedup"]["estimate"].as_f64().unwrap();
    let predicted = combined["predicted_speedup"].as_f64().unwrap();
    assert!((1.75..1.95).contains(&measured), "{combined}");
    assert!((1.75..1.95).contains(&predicted), "{combined}");
    assert!(combined["speedup"]["ci_low"].as_f64().unwrap() <= measured);
    assert!(combined["speedup"]["ci_high"].as_f64().unwrap() >= measured);
    let interaction = combined["interaction"]["estimate"].as_f64().unwrap();
    assert!((0.95..1.05).contains(&interaction), "{combined}");
}
