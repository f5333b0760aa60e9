//! The step wrapper's governor path (`optgate_wrapper::step_governor`) on a fake cpufreq
//! tree the test writes, with a helper script the test writes that edits the tree's
//! `scaling_governor` files. Both are test doubles for hardware this machine lacks (it has
//! no `/sys/devices/system/cpu/cpu0/cpufreq`): applied, verified and restored through the
//! helper; a refused helper and a node without cpufreq recorded with their reasons.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use optgate_probe::governor::TuneVia;
use optgate_wrapper::step_governor::{StepGovernorPlan, begin, plan_for_run};
use optgate_wrapper::tasks::TaskIdentity;

const AVAILABLE: &str = "conservative ondemand userspace powersave performance schedutil\n";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Two CPUs, one cpufreq policy each, both under `governor`.
fn fake_node(root: &Path, governor: &str) {
    let cpu = root.join("sys/devices/system/cpu");
    write(&cpu.join("online"), "0-1\n");
    write(&root.join("proc/sys/kernel/hostname"), "fakenode\n");
    for c in 0..2 {
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

fn governor(root: &Path, cpu: u32) -> String {
    let f = root.join(format!(
        "sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"
    ));
    std::fs::read_to_string(f).unwrap().trim().to_string()
}

/// The helper protocol (`HELPER… CPU GOVERNOR`) as a script: takes the fake root first,
/// logs each call, and writes the governor into the fake tree (`exit_with` ≠ 0: refuses).
fn helper(dir: &Path, root: &Path, exit_with: i32) -> TuneVia {
    let script = dir.join("set-governor");
    let body = format!(
        "#!/bin/sh\nroot=\"$1\"; cpu=\"$2\"; gov=\"$3\"\n[ {exit_with} -eq 0 ] || {{ echo 'sudo: a password is required' >&2; exit {exit_with}; }}\necho \"$cpu $gov\" >> \"$root/../helper.log\"\nprintf '%s\\n' \"$gov\" > \"$root/sys/devices/system/cpu/cpu$cpu/cpufreq/scaling_governor\"\n"
    );
    write(&script, &body);
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    TuneVia::Helper(vec![
        script.display().to_string(),
        root.display().to_string(),
    ])
}

fn both() -> BTreeSet<u32> {
    [0, 1].into()
}

fn setup() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("node");
    fake_node(&root, "schedutil");
    (dir, root)
}

#[test]
fn the_helper_applies_the_governor_for_the_app_and_it_is_restored_after() {
    // Catches: not applying, verifying against the wrong CPUs, or not restoring.
    let (dir, root) = setup();
    let via = helper(dir.path(), &root, 0);
    let plan = StepGovernorPlan::Apply {
        target: "performance".into(),
        via: via.clone(),
    };
    let restore = dir.path().join("restore.json");
    let applied = begin(&root, &plan, &both(), &restore).expect("a governor to apply");
    // While the app would run: the target is in force on both CPUs.
    assert_eq!([governor(&root, 0), governor(&root, 1)], ["performance"; 2]);
    assert!(
        restore.exists(),
        "the previous governors were not kept for a crash"
    );
    let record = applied.finish();
    assert_eq!([governor(&root, 0), governor(&root, 1)], ["schedutil"; 2]);
    assert!(
        record.applied && record.verified && record.restored,
        "{record:?}"
    );
    assert_eq!(record.in_force, "performance");
    assert_eq!(record.reason, None);
    assert_eq!(record.via, Some(via));
    assert!(!restore.exists());
    let calls = std::fs::read_to_string(dir.path().join("helper.log")).unwrap();
    assert_eq!(
        calls,
        "0 performance\n1 performance\n1 schedutil\n0 schedutil\n"
    );
}

#[test]
fn a_refused_helper_is_recorded_with_its_reason_and_nothing_changes() {
    // Catches: a refusal recorded as applied, or the reason lost.
    let (dir, root) = setup();
    let plan = StepGovernorPlan::Apply {
        target: "performance".into(),
        via: helper(dir.path(), &root, 1),
    };
    let restore = dir.path().join("restore.json");
    let record = begin(&root, &plan, &both(), &restore).unwrap().finish();
    assert!(
        !record.applied && !record.verified && !record.restored,
        "{record:?}"
    );
    let reason = record.reason.unwrap();
    assert!(
        reason.starts_with("not applicable: the helper was refused"),
        "{reason}"
    );
    assert_eq!(record.in_force, "schedutil");
    assert_eq!(governor(&root, 0), "schedutil");
    assert!(!restore.exists());
}

#[test]
fn a_helper_that_reports_success_but_changes_nothing_is_not_verified() {
    // Catches: trusting the helper's exit status instead of reading the governor back.
    let (dir, root) = setup();
    let liar = TuneVia::Helper(vec!["/bin/true".into()]);
    let plan = StepGovernorPlan::Apply {
        target: "performance".into(),
        via: liar,
    };
    let record = begin(&root, &plan, &both(), &dir.path().join("r.json"))
        .unwrap()
        .finish();
    assert!(!record.verified, "{record:?}");
    assert_eq!(governor(&root, 1), "schedutil");
}

#[test]
fn the_plan_comes_from_run_json_and_a_node_without_cpufreq_is_not_applicable() {
    // Catches: ignoring the arm's governor in run.json, or planning under Slurm.
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let bare = dir.path().join("bare");
    write(&bare.join("sys/devices/system/cpu/online"), "0-1\n");
    write(&bare.join("proc/sys/kernel/hostname"), "fakenode\n");
    let record = serde_json::json!({
        "experiment": "e", "run_id": "b001-perf", "arm": "perf", "block": 1, "replicate": 1,
        "env_set": {}, "env_unset": [], "time_limit_s": null,
        "governor": "performance", "governor_helper": ["sudo", "-n", "set-governor"],
    });
    write(&run.join("run.json"), &record.to_string());
    let flux = TaskIdentity::from_env(|k| match k {
        "FLUX_TASK_RANK" | "FLUX_TASK_LOCAL_ID" => Some("0".into()),
        "FLUX_URI" => Some("local:///tmp/flux/local-0".into()),
        _ => None,
    });
    match plan_for_run(&run, &flux, &bare) {
        StepGovernorPlan::NotApplicable { target, reason } => {
            assert_eq!(target, "performance");
            assert!(reason.contains("no cpufreq on fakenode"), "{reason}");
        }
        other => panic!("expected not applicable, got {other:?}"),
    }
    let slurm = TaskIdentity::from_env(|k| match k {
        "SLURM_PROCID" | "SLURM_LOCALID" => Some("0".into()),
        _ => None,
    });
    assert_eq!(
        plan_for_run(&run, &slurm, &bare),
        StepGovernorPlan::ByLauncher
    );
    let second = TaskIdentity::from_env(|k| match k {
        "FLUX_TASK_RANK" | "FLUX_TASK_LOCAL_ID" => Some("1".into()),
        _ => None,
    });
    assert_eq!(
        plan_for_run(&run, &second, &bare),
        StepGovernorPlan::Nothing
    );
}

#[test]
fn a_change_left_by_a_killed_wrapper_is_undone_before_the_next_one() {
    // Catches: a leftover restore file making every later attempt refuse (RestorePending),
    // or the new change recording the leftover governor as the one to restore.
    let (dir, root) = setup();
    let via = helper(dir.path(), &root, 0);
    let plan = StepGovernorPlan::Apply {
        target: "performance".into(),
        via,
    };
    let restore = dir.path().join("restore.json");
    let first = begin(&root, &plan, &both(), &restore).unwrap();
    // The wrapper dies without restoring: its guard is never dropped, its process is gone
    // (the restore file names this process; make it name a finished one).
    std::mem::forget(first);
    let text = std::fs::read_to_string(&restore).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    v["owner_pid"] = dead.id().into();
    dead.wait().unwrap();
    std::fs::write(&restore, v.to_string()).unwrap();
    let record = begin(&root, &plan, &both(), &restore).unwrap().finish();
    assert!(
        record.applied && record.verified && record.restored,
        "{record:?}"
    );
    assert_eq!([governor(&root, 0), governor(&root, 1)], ["schedutil"; 2]);
}
