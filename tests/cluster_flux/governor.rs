//! A governor variant under the real one-broker Flux of `tests/run-all.sh`: `flux run -n2
//! optgate step RUN_DIR -- APP` applies the arm's governor once per node (the task with
//! `FLUX_TASK_LOCAL_ID` 0), the app runs under it, and it is restored after; the node's
//! `governor-step.attempt-N.<host>.json` says applied / verified / restored. The cpufreq tree is a
//! fake one the test writes under `OPTGATE_SYSFS_ROOT` — a test double for hardware this
//! machine lacks (no `/sys/devices/system/cpu/cpu0/cpufreq`); the helper path itself is
//! covered in `crates/optgate-wrapper/tests/wrapper/step_governor.rs`.
//!
//! Without Flux this test FAILS with instructions; it never passes by skipping.

use std::path::Path;
use std::process::{Command, Stdio};

const OPTGATE: &str = env!("CARGO_BIN_EXE_optgate");
const AVAILABLE: &str = "conservative ondemand userspace powersave performance schedutil\n";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A fake cpufreq tree with this machine's online CPUs, each its own policy, all under
/// `governor`.
fn fake_node(root: &Path, governor: &str) {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let cpus = optgate_probe::parse_cpulist(online.trim()).unwrap();
    let cpu = root.join("sys/devices/system/cpu");
    write(&cpu.join("online"), &online);
    write(&root.join("proc/sys/kernel/hostname"), "fakenode\n");
    for c in cpus {
        let pol = cpu.join(format!("cpufreq/policy{c}"));
        write(&pol.join("scaling_governor"), &format!("{governor}\n"));
        write(&pol.join("scaling_available_governors"), AVAILABLE);
        std::fs::create_dir_all(cpu.join(format!("cpu{c}"))).unwrap();
        std::os::unix::fs::symlink(
            format!("../cpufreq/policy{c}"),
            cpu.join(format!("cpu{c}/cpufreq")),
        )
        .unwrap();
    }
}

#[test]
fn under_flux_run_the_first_task_of_the_node_applies_the_governor_and_restores_it() {
    // Catches: no governor applied in a Flux step, applied after the app started, applied
    // by both tasks, or not restored.
    let flux_up = Command::new("flux")
        .args(["getattr", "size"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        flux_up,
        "this test needs a Flux instance: run `eval \"$(schedulers/flux/setup-one-node.sh)\"` \
         (tests/run-all.sh does)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("node");
    fake_node(&root, "schedutil");
    let run = tmp.path().join("run");
    let record = serde_json::json!({
        "experiment": "e", "run_id": "b001-perf", "arm": "perf", "block": 1, "replicate": 1,
        "env_set": {}, "env_unset": [], "time_limit_s": null,
        "governor": "performance", "governor_helper": ["sudo", "-n", "optgate-governor"],
    });
    write(&run.join("run.json"), &record.to_string());
    // Each task writes the governor its app ran under.
    let app = format!(
        "cat {}/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor > {}/seen.$FLUX_TASK_RANK",
        root.display(),
        run.display()
    );
    let out = Command::new("flux")
        .args(["run", "-n2", OPTGATE, "step"])
        .arg(&run)
        .args(["--attempt", "1", "--", "sh", "-c", &app])
        .env("OPTGATE_SYSFS_ROOT", &root)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = std::fs::read_to_string(run.join("seen.0")).unwrap();
    assert_eq!(
        seen.trim(),
        "performance",
        "rank 0's app did not run under it"
    );
    let gov0 = root.join("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
    assert_eq!(std::fs::read_to_string(gov0).unwrap().trim(), "schedutil");
    let records: Vec<_> = std::fs::read_dir(&run)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("governor-step.attempt-1.")
        })
        .collect();
    assert_eq!(
        records.len(),
        1,
        "one record per node, from local rank 0 alone"
    );
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(records[0].path()).unwrap()).unwrap();
    assert_eq!(r["target"], "performance");
    assert_eq!(
        [&r["applied"], &r["verified"], &r["restored"]],
        [&serde_json::Value::Bool(true); 3],
        "{r}"
    );
    assert_eq!(r["in_force"], "performance");
    assert!(r["reason"].is_null(), "{r}");
    // The governor in force the step read (after applying) is what the look judges.
    let host = r["host"].as_str().unwrap();
    let in_force = std::fs::read_to_string(run.join(format!("step-governor.{host}"))).unwrap();
    assert_eq!(in_force.trim(), "performance");
}
