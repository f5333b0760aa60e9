//! Governor control on fake cpufreq trees the tests write themselves (modelled on the
//! GB10 capture: `cpuN/cpufreq` symlinks to `cpufreq/policyN`): tunability, the guard's
//! restore on `restore()`, drop and panic, roll-back of a half-done change, the
//! privileged helper, and recovery with `restore_from_file` after a SIGKILL.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use optgate_probe::governor::{
    CpuSelection, GovernorError, GovernorGuard, NO_CPUFREQ, Tunability, TuneVia, governor_in_force,
    restore_from_file, tunability,
};

const CHILD_MODE: &str = "OPTGATE_PROBE_TEST_CHILD";
const CHILD_ROOT: &str = "OPTGATE_PROBE_TEST_ROOT";
const CHILD_RESTORE: &str = "OPTGATE_PROBE_TEST_RESTORE";
/// Exit status of a child that cannot do its job for reasons of the environment.
const CHILD_SKIP: i32 = 77;

const AVAILABLE: &str = "conservative ondemand userspace powersave performance schedutil \n";

/// Writes a four-CPU tree under `root`. `policies` gives, per policy, its CPUs and
/// its current governor; each CPU's `cpufreq` is a symlink to its policy directory.
fn fake_tree(root: &Path, policies: &[(&[u32], &str)]) {
    let cpu = root.join("sys/devices/system/cpu");
    let all: Vec<u32> = policies
        .iter()
        .flat_map(|(c, _)| c.iter().copied())
        .collect();
    let online = optgate_probe::format_cpulist(&all);
    common::write(&cpu.join("online"), &format!("{online}\n"));
    common::write(&root.join("proc/sys/kernel/hostname"), "fakenode\n");
    let mut cpuinfo = String::new();
    for (n, &(cpus, governor)) in policies.iter().enumerate() {
        let first = cpus[0];
        let pol = cpu.join(format!("cpufreq/policy{first}"));
        let list = optgate_probe::format_cpulist(cpus);
        common::write(&pol.join("scaling_governor"), &format!("{governor}\n"));
        common::write(&pol.join("scaling_available_governors"), AVAILABLE);
        common::write(&pol.join("scaling_driver"), "cppc_cpufreq\n");
        common::write(&pol.join("cpuinfo_min_freq"), "338000\n");
        common::write(
            &pol.join("cpuinfo_max_freq"),
            &format!("{}\n", 2808000 + n as u64 * 1000),
        );
        common::write(&pol.join("related_cpus"), &format!("{list}\n"));
        for &c in cpus {
            let dir = cpu.join(format!("cpu{c}"));
            common::write(&dir.join("topology/physical_package_id"), "0\n");
            common::write(&dir.join("topology/core_id"), &format!("{c}\n"));
            common::write(
                &dir.join("topology/thread_siblings_list"),
                &format!("{c}\n"),
            );
            std::os::unix::fs::symlink(format!("../cpufreq/policy{first}"), dir.join("cpufreq"))
                .unwrap();
            cpuinfo.push_str(&format!(
                "processor\t: {c}\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd87\n\n"
            ));
        }
    }
    common::write(&root.join("proc/cpuinfo"), &cpuinfo);
    common::write(&root.join("proc/meminfo"), "MemTotal:       1024 kB\n");
}

fn per_cpu_tree(root: &Path) {
    fake_tree(
        root,
        &[
            (&[0], "schedutil"),
            (&[1], "schedutil"),
            (&[2], "powersave"),
            (&[3], "ondemand"),
        ],
    );
}

fn gov(root: &Path, policy: u32) -> String {
    std::fs::read_to_string(root.join(format!(
        "sys/devices/system/cpu/cpufreq/policy{policy}/scaling_governor"
    )))
    .unwrap()
    .trim()
    .to_string()
}

fn govs(root: &Path, policies: &[u32]) -> Vec<String> {
    policies.iter().map(|&p| gov(root, p)).collect()
}

#[test]
fn tunable_and_probed_on_a_writable_tree() {
    let dir = tempfile::tempdir().unwrap();
    per_cpu_tree(dir.path());
    assert_eq!(
        tunability(dir.path(), None),
        Tunability::Tunable {
            via: TuneVia::Sysfs
        }
    );
    let p = optgate_probe::probe(dir.path()).unwrap();
    assert_eq!(p.hostname.as_deref(), Some("fakenode"));
    assert_eq!(
        p.cpufreq.governors,
        vec!["ondemand", "powersave", "schedutil"]
    );
    assert_eq!(p.cpufreq.policies.len(), 4);
    assert!(p.cpufreq.governor_writable);
}

#[test]
fn guard_records_and_restores_on_restore() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("node");
    per_cpu_tree(&root);
    let restore_file = dir.path().join("gov.restore");
    let mut guard = GovernorGuard::set(
        &root,
        "performance",
        &CpuSelection::AllOnline,
        &restore_file,
    )
    .unwrap();
    assert_eq!(govs(&root, &[0, 1, 2, 3]), ["performance"; 4]);
    let changes = guard.changes().to_vec();
    assert_eq!(changes.len(), 4);
    assert_eq!(
        changes
            .iter()
            .map(|c| (c.policy.as_str(), c.previous.as_str(), c.new.as_str()))
            .collect::<Vec<_>>(),
        [
            ("policy0", "schedutil", "performance"),
            ("policy1", "schedutil", "performance"),
            ("policy2", "powersave", "performance"),
            ("policy3", "ondemand", "performance")
        ]
    );
    // Provenance: the changes serialise with old and new.
    let json = serde_json::to_value(&changes).unwrap();
    assert_eq!(json[2]["previous"], "powersave");
    assert_eq!(json[2]["new"], "performance");
    assert_eq!(json[2]["cpus"], serde_json::json!([2]));
    assert!(
        restore_file.is_file(),
        "the restore file exists while the change is held"
    );
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&restore_file).unwrap()).unwrap();
    assert_eq!(record["owner_pid"], std::process::id());
    assert_eq!(record["changes"][2]["previous"], "powersave");
    assert_eq!(record["changes"].as_array().unwrap().len(), 4);
    guard.restore().unwrap();
    assert_eq!(
        govs(&root, &[0, 1, 2, 3]),
        ["schedutil", "schedutil", "powersave", "ondemand"]
    );
    assert!(!restore_file.exists());
    // Restoring twice (and dropping after) changes nothing.
    guard.restore().unwrap();
    std::fs::write(
        root.join("sys/devices/system/cpu/cpufreq/policy0/scaling_governor"),
        "userspace",
    )
    .unwrap();
    drop(guard);
    assert_eq!(
        gov(&root, 0),
        "userspace",
        "a restored guard must not write again on drop"
    );
}

#[test]
fn guard_restores_on_drop_and_on_panic() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("node");
    per_cpu_tree(&root);
    let restore_file = dir.path().join("gov.restore");
    {
        let _guard = GovernorGuard::set(
            &root,
            "performance",
            &CpuSelection::AllOnline,
            &restore_file,
        )
        .unwrap();
        assert_eq!(gov(&root, 3), "performance");
    }
    assert_eq!(
        govs(&root, &[0, 1, 2, 3]),
        ["schedutil", "schedutil", "powersave", "ondemand"]
    );
    assert!(!restore_file.exists());

    let (root2, file2) = (root.clone(), restore_file.clone());
    let result = std::panic::catch_unwind(move || {
        let _guard =
            GovernorGuard::set(&root2, "userspace", &CpuSelection::AllOnline, &file2).unwrap();
        assert_eq!(gov(&root2, 2), "userspace");
        panic!("the benchmark failed");
    });
    assert!(result.is_err());
    assert_eq!(
        govs(&root, &[0, 1, 2, 3]),
        ["schedutil", "schedutil", "powersave", "ondemand"]
    );
    assert!(!restore_file.exists());
}

#[test]
fn shared_policies_change_once_and_selection_is_respected() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("node");
    fake_tree(&root, &[(&[0, 1], "powersave"), (&[2, 3], "schedutil")]);
    let restore_file = dir.path().join("gov.restore");
    let p = optgate_probe::probe(&root).unwrap();
    assert_eq!(
        p.cpufreq
            .policies
            .iter()
            .map(|x| x.cpus.as_str())
            .collect::<Vec<_>>(),
        ["0-1", "2-3"]
    );
    {
        let guard = GovernorGuard::set(
            &root,
            "performance",
            &CpuSelection::AllOnline,
            &restore_file,
        )
        .unwrap();
        let cpus: Vec<Vec<u32>> = guard.changes().iter().map(|c| c.cpus.clone()).collect();
        assert_eq!(cpus, [vec![0, 1], vec![2, 3]]);
    }
    {
        let guard = GovernorGuard::set(
            &root,
            "performance",
            &CpuSelection::Only(vec![3]),
            &restore_file,
        )
        .unwrap();
        assert_eq!(guard.changes().len(), 1);
        assert_eq!(guard.changes()[0].policy, "policy2");
        assert_eq!(guard.changes()[0].cpus, vec![3]);
        assert_eq!(govs(&root, &[0, 2]), ["powersave", "performance"]);
    }
    assert_eq!(govs(&root, &[0, 2]), ["powersave", "schedutil"]);
}

#[test]
fn refusals_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("node");
    per_cpu_tree(&root);
    let restore_file = dir.path().join("gov.restore");
    let before = govs(&root, &[0, 1, 2, 3]);

    let err =
        GovernorGuard::set(&root, "turbo", &CpuSelection::AllOnline, &restore_file).unwrap_err();
    assert!(
        matches!(&err, GovernorError::Unavailable { target, .. } if target == "turbo"),
        "{err}"
    );
    assert!(!restore_file.exists());

    let err = GovernorGuard::set(
        &root,
        "performance",
        &CpuSelection::Only(vec![7]),
        &restore_file,
    )
    .unwrap_err();
    assert!(
        matches!(err, GovernorError::NoCpufreq { cpu: 7, .. }),
        "{err}"
    );

    // An undone earlier change: its file holds the true originals and must not be lost.
    std::fs::write(&restore_file, "{}").unwrap();
    let err = GovernorGuard::set(
        &root,
        "performance",
        &CpuSelection::AllOnline,
        &restore_file,
    )
    .unwrap_err();
    assert!(matches!(err, GovernorError::RestorePending { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&restore_file).unwrap(), "{}");
    assert_eq!(govs(&root, &[0, 1, 2, 3]), before);
}

#[test]
fn half_done_change_is_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("node");
    per_cpu_tree(&root);
    let restore_file = dir.path().join("gov.restore");
    // policy3's governor swallows writes and reads back empty, as a driver that ignores
    // the request would: the change is detected as not applied.
    let last = root.join("sys/devices/system/cpu/cpufreq/policy3/scaling_governor");
    std::fs::remove_file(&last).unwrap();
    std::os::unix::fs::symlink("/dev/null", &last).unwrap();
    let err = GovernorGuard::set(
        &root,
        "performance",
        &CpuSelection::AllOnline,
        &restore_file,
    )
    .unwrap_err();
    assert!(
        matches!(&err, GovernorError::NotApplied { expected, .. } if expected == "performance"),
        "{err}"
    );
    assert_eq!(
        govs(&root, &[0, 1, 2]),
        ["schedutil", "schedutil", "powersave"]
    );
    assert!(
        !restore_file.exists(),
        "a fully rolled-back change leaves no restore file"
    );
}

#[test]
fn restore_file_edge_cases() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.restore");
    assert!(restore_from_file(&missing).unwrap().is_empty());

    let bad = dir.path().join("bad.restore");
    std::fs::write(&bad, "not json").unwrap();
    assert!(matches!(
        restore_from_file(&bad),
        Err(GovernorError::RestoreFileInvalid { .. })
    ));
    assert!(
        bad.exists(),
        "an unreadable record is kept for a person to look at"
    );

    // The owner is alive (this very process): its guard will restore, not us.
    let root = dir.path().join("node");
    per_cpu_tree(&root);
    let restore_file = dir.path().join("gov.restore");
    let mut guard = GovernorGuard::set(
        &root,
        "performance",
        &CpuSelection::AllOnline,
        &restore_file,
    )
    .unwrap();
    let err = restore_from_file(&restore_file).unwrap_err();
    assert!(
        matches!(err, GovernorError::OwnerAlive { pid, .. } if pid == std::process::id()),
        "{err}"
    );
    assert_eq!(gov(&root, 0), "performance");
    guard.restore().unwrap();
    assert_eq!(gov(&root, 0), "schedutil");
}

#[test]
fn helper_makes_the_change_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("node");
    per_cpu_tree(&root);
    let restore_file = dir.path().join("gov.restore");
    let log = dir.path().join("helper.log");
    let helper = dir.path().join("set-governor");
    // The protocol: HELPER... CPU GOVERNOR. This one takes the tree root first, and
    // fails unless the restore file was written before it was asked to change anything.
    std::fs::write(
        &helper,
        "#!/bin/sh\nroot=\"$1\"; cpu=\"$2\"; gov=\"$3\"\n[ -f \"$root/../gov.restore\" ] || exit 3\necho \"$cpu $gov\" >> \"$root/../helper.log\"\nprintf '%s\\n' \"$gov\" > \"$root/sys/devices/system/cpu/cpu$cpu/cpufreq/scaling_governor\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let via = TuneVia::Helper(vec![
        helper.display().to_string(),
        root.display().to_string(),
    ]);
    {
        let guard = GovernorGuard::set_via(
            &root,
            "performance",
            &CpuSelection::Only(vec![1, 2]),
            &restore_file,
            &via,
        )
        .unwrap();
        assert_eq!(guard.changes().len(), 2);
        assert_eq!(
            govs(&root, &[0, 1, 2, 3]),
            ["schedutil", "performance", "performance", "ondemand"]
        );
    }
    assert_eq!(
        govs(&root, &[0, 1, 2, 3]),
        ["schedutil", "schedutil", "powersave", "ondemand"]
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    // Set 1 then 2; restore in reverse order.
    assert_eq!(
        calls,
        "1 performance\n2 performance\n2 powersave\n1 schedutil\n"
    );

    let failing = TuneVia::Helper(vec!["/bin/false".to_string()]);
    let err = GovernorGuard::set_via(
        &root,
        "performance",
        &CpuSelection::AllOnline,
        &restore_file,
        &failing,
    )
    .unwrap_err();
    assert!(matches!(err, GovernorError::Helper { .. }), "{err}");
    assert!(!restore_file.exists());
}

/// Runs this test binary again as a child doing `mode` (see `child_entry`).
fn child(mode: &str, root: &Path, restore_file: &Path) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "governor::child_entry",
        "--ignored",
        "--test-threads=1",
        "--nocapture",
    ])
    .env(CHILD_MODE, mode)
    .env(CHILD_ROOT, root)
    .env(CHILD_RESTORE, restore_file)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd
}

#[test]
fn sigkilled_holder_is_undone_by_restore_from_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("node");
    per_cpu_tree(&root);
    let restore_file = dir.path().join("gov.restore");
    let mut holder = child("hold_guard", &root, &restore_file).spawn().unwrap();
    let ready = restore_file.with_extension("ready");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready.exists() {
        if let Some(status) = holder.try_wait().unwrap() {
            let out = holder.wait_with_output().unwrap();
            panic!(
                "child exited early ({status}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(Instant::now() < deadline, "child never took the guard");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(govs(&root, &[0, 1, 2, 3]), ["performance"; 4]);

    holder.kill().unwrap(); // SIGKILL: no unwinding, no Drop.
    let status = holder.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert_eq!(
        govs(&root, &[0, 1, 2, 3]),
        ["performance"; 4],
        "nothing restored by the killed process"
    );
    assert!(restore_file.is_file());

    let undone = restore_from_file(&restore_file).unwrap();
    assert_eq!(undone.len(), 4);
    assert_eq!(undone[3].previous, "ondemand");
    assert_eq!(
        govs(&root, &[0, 1, 2, 3]),
        ["schedutil", "schedutil", "powersave", "ondemand"]
    );
    assert!(!restore_file.exists());
    // Start-up recovery runs every time; with nothing left it does nothing.
    assert!(restore_from_file(&restore_file).unwrap().is_empty());
}

#[test]
fn no_write_access_is_admin_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("node");
    per_cpu_tree(&root);
    for p in 0..4 {
        let f = root.join(format!(
            "sys/devices/system/cpu/cpufreq/policy{p}/scaling_governor"
        ));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o444)).unwrap();
    }
    if !nix::unistd::geteuid().is_root() {
        check_admin_only(&root, &nix::unistd::geteuid().to_string());
        return;
    }
    // Root may write anything; ask as `nobody` instead, in a child process.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = match child("admin_only", &root, Path::new("/nonexistent"))
        .uid(65534)
        .gid(65534)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            common::missing_external(
                &format!(
                    "cannot run the test binary as uid 65534 (nobody): {e}: run the tests \
                     as a non-root user, or as root from a checkout nobody can traverse"
                ),
                "OPTGATE_SKIP_AS_NOBODY",
            );
            return;
        }
    };
    if out.status.code() == Some(CHILD_SKIP) {
        common::missing_external(
            &format!(
                "uid 65534 (nobody) cannot read the test tree in {}: run the tests as a \
                 non-root user, or with a TMPDIR nobody can traverse",
                dir.path().display()
            ),
            "OPTGATE_SKIP_AS_NOBODY",
        );
        return;
    }
    assert!(
        out.status.success(),
        "child as nobody failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the child ran its checks"
    );
}

fn check_admin_only(root: &Path, uid: &str) {
    match tunability(root, None) {
        Tunability::NotTunable { reason } => {
            assert!(
                reason.starts_with("admin-only: no write access to cpufreq on fakenode ("),
                "{reason}"
            );
            assert!(
                reason.ends_with(&format!("scaling_governor is not writable by uid {uid})")),
                "{reason}"
            );
        }
        other => panic!("expected admin-only, got {other:?}"),
    }
    let helper = vec!["/bin/true".to_string()];
    assert_eq!(
        tunability(root, Some(&helper)),
        Tunability::Tunable {
            via: TuneVia::Helper(helper.clone())
        }
    );
    let missing = vec!["optgate-no-such-helper".to_string()];
    match tunability(root, Some(&missing)) {
        Tunability::NotTunable { reason } => assert!(
            reason.contains("helper `optgate-no-such-helper` was not found"),
            "{reason}"
        ),
        other => panic!("expected not tunable, got {other:?}"),
    }
    let p = optgate_probe::probe(root).unwrap();
    assert!(!p.cpufreq.governor_writable);
    assert!(p.cpufreq.policies.iter().all(|x| !x.governor_writable));
}

/// Not a test of its own: the body of the child processes above, selected by
/// environment. Run directly (`--ignored`) it has nothing to do and returns.
#[test]
#[ignore = "run as a child process by the tests above"]
fn child_entry() {
    let Ok(mode) = std::env::var(CHILD_MODE) else {
        return;
    };
    let root = PathBuf::from(std::env::var_os(CHILD_ROOT).unwrap());
    let restore_file = PathBuf::from(std::env::var_os(CHILD_RESTORE).unwrap());
    match mode.as_str() {
        "hold_guard" => {
            let _guard = GovernorGuard::set(
                &root,
                "performance",
                &CpuSelection::AllOnline,
                &restore_file,
            )
            .unwrap();
            std::fs::write(restore_file.with_extension("ready"), "").unwrap();
            // Wait to be killed; give up after a minute so a broken parent leaks nothing.
            std::thread::sleep(Duration::from_secs(60));
        }
        "admin_only" => {
            if std::fs::read_to_string(root.join("proc/cpuinfo")).is_err() {
                std::process::exit(CHILD_SKIP);
            }
            check_admin_only(&root, &nix::unistd::geteuid().to_string());
        }
        other => panic!("unknown child mode {other}"),
    }
}

#[test]
fn the_governor_in_force_is_read_for_the_given_cpus_only() {
    let tmp = tempfile::tempdir().unwrap();
    fake_tree(
        tmp.path(),
        &[(&[0, 1], "performance"), (&[2, 3], "powersave")],
    );
    let cpus = |l: &str| optgate_probe::parse_cpulist(l).unwrap();
    assert_eq!(governor_in_force(tmp.path(), &cpus("0-1")), "performance");
    assert_eq!(governor_in_force(tmp.path(), &cpus("2")), "powersave");
    assert_eq!(
        governor_in_force(tmp.path(), &cpus("1-2")),
        "performance,powersave"
    );
    // A CPU without cpufreq (here: one the tree does not have) counts as `none`.
    assert_eq!(
        governor_in_force(tmp.path(), &cpus("3-4")),
        "none,powersave"
    );
    let bare = tempfile::tempdir().unwrap();
    assert_eq!(governor_in_force(bare.path(), &cpus("0-3")), NO_CPUFREQ);
    assert_eq!(
        governor_in_force(bare.path(), &Default::default()),
        NO_CPUFREQ
    );
}
