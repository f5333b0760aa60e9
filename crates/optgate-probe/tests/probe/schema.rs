//! Keeps PROBE_JSON.md honest: every key the JSON form can contain must be described
//! there, and the schema version it names must be the crate's.

use optgate_probe::{CoreKind, Gpu, NumaNode, SCHEMA_VERSION, probe_live};

fn keys(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                // `env` holds variable names, not schema keys.
                if k != "env" {
                    keys(v, out);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| keys(i, out)),
        _ => {}
    }
}

#[test]
fn every_json_key_is_documented() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/PROBE_JSON.md")).unwrap();
    let mut p = probe_live();
    // Make sure the optional parts are present so their keys are seen.
    p.core_kinds.push(CoreKind {
        name: "performance".into(),
        basis: "pmu".into(),
        cpus: "0".into(),
        physical_cores: 1,
        hardware_threads: 1,
        max_khz: None,
        base_khz: None,
    });
    p.numa.push(NumaNode {
        id: 9,
        cpus: String::new(),
        memory_total_bytes: None,
    });
    p.gpus.push(Gpu {
        vendor: "nvidia".into(),
        index: 0,
        name: "NVIDIA GB10".into(),
        memory_total_bytes: None,
        driver_version: Some("580.126.09".into()),
    });
    p.cpufreq.policies.push(optgate_probe::CpufreqPolicy {
        name: "policy0".into(),
        cpus: "0".into(),
        governor: None,
        available_governors: vec![],
        driver: None,
        min_khz: None,
        max_khz: None,
        scaling_min_khz: None,
        scaling_max_khz: None,
        base_khz: None,
        governor_writable: false,
    });
    let mut all = Vec::new();
    keys(&serde_json::to_value(&p).unwrap(), &mut all);
    all.sort();
    all.dedup();
    assert!(all.len() > 60, "{all:?}");
    let missing: Vec<&String> = all
        .iter()
        .filter(|k| !doc.contains(&format!("`{k}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "PROBE_JSON.md does not describe {missing:?}"
    );
    assert!(doc.contains(&format!("currently `{SCHEMA_VERSION}`")));
}
