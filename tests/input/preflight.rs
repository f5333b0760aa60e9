//! Pre-flight and honesty checks through the real binary: over-subscription, a governor
//! variant on a machine where it cannot be tuned (for real) and where it can (a writable
//! fake cpufreq tree, restored even when optgate is killed), a missing hardware capability,
//! and a variant that changes the program's answer.

use crate::support;

use std::path::Path;
use std::process::Command;

use support::*;

const METRIC: &str = "metric: { pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s' }\n";
const APP: &str = "app:\n  command: 'for e in 1 2 3; do echo \"epoch $e took 0.0$e s\"; done'\n";

fn exp_with(variants: &str, extra: &str) -> String {
    format!("name: pf\n{APP}{METRIC}replicates: 5\n{extra}variants:\n{variants}")
}

fn validate(yaml: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let p = write_experiment(dir.path(), yaml);
    let o = run(&["validate", p.to_str().unwrap()]);
    (o.status.code(), stderr(&o) + &stdout(&o))
}

#[test]
fn thread_count_above_cpus_per_task_is_an_error_unless_allowed() {
    let v = "  - { name: omp4, dimension: l2_threading_model, env: { OMP_NUM_THREADS: 4 } }\n";
    let (code, out) = validate(&exp_with(v, ""));
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("error: pre-flight: arm `omp4`: OMP_NUM_THREADS=4 threads per task but cpus_per_task is 1"), "{out}");

    let (code, out) = validate(&exp_with(
        v,
        "preflight: { allow_oversubscription: true }\n",
    ));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("warning: pre-flight: arm `omp4`"), "{out}");
}

#[test]
fn more_cpus_than_the_node_has_is_an_error() {
    // The most CPUs a task may ask for (MAX_CPUS_PER_TASK), more than any test machine has.
    let v = "  - { name: wide, dimension: l2_threading_model, launcher: { cpus_per_task: 4096 }, env: { OMP_NUM_THREADS: 4096 } }\n";
    let (code, out) = validate(&exp_with(v, ""));
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("1 task(s) per node × 4096 cpus per task = 4096 CPUs, but"),
        "{out}"
    );
    assert!(out.contains("over-subscribed"), "{out}");
}

#[test]
fn cpus_per_task_without_a_thread_variable_is_a_warning_with_the_reason() {
    let v = "  - { name: c2, dimension: l2_threading_model, launcher: { cpus_per_task: 2 } }\n";
    let (code, out) = validate(&exp_with(v, ""));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("cpus_per_task is 2 but no thread-count variable (OMP_NUM_THREADS, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS) is set: the runtime may use one thread per rank"), "{out}");
}

/// Runs `yaml` with `--json` and returns (exit code, report, stderr).
fn run_json(
    dir: &Path,
    yaml: &str,
    env: &[(&str, &str)],
) -> (Option<i32>, serde_json::Value, String) {
    let p = write_experiment(dir, yaml);
    let root = dir.join("exec");
    let o = optgate()
        .args([
            "run",
            p.to_str().unwrap(),
            "--out",
            root.to_str().unwrap(),
            "--json",
            "--quiet",
        ])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let report = serde_json::from_str(&stdout(&o)).unwrap_or(serde_json::Value::Null);
    (o.status.code(), report, stderr(&o))
}

fn variant<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap()
}

#[test]
fn governor_variant_on_this_machine_is_not_applicable_and_the_rest_goes_on() {
    let cpufreq = Path::new("/sys/devices/system/cpu/cpu0/cpufreq");
    if cpufreq.exists() {
        panic!(
            "this test expects a machine without cpufreq (like the CI's VM); {} exists",
            cpufreq.display()
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let v = "  - { name: perf-gov, dimension: l3_frequency_power, governor: performance }\n  - { name: other, dimension: l2_threading_model, env: { X: 1 } }\n";
    // Two variants at 5 blocks cannot reach α after Holm: allowed here,
    // where one of them turns out not applicable and the other is decided alone — at one
    // look of 5 blocks (`max_replicates: 5`; by default the staged rule would plan its
    // first look where two variants can reach α).
    let (code, report, err) = run_json(
        dir.path(),
        &exp_with(v, "allow_few_replicates: true\nmax_replicates: 5\n"),
        &[],
    );
    assert_eq!(code, Some(0), "{err}");
    let g = variant(&report, "perf-gov");
    assert_eq!(g["decision"], "not_applicable");
    assert!(
        g["reason"].as_str().unwrap().contains("no cpufreq on"),
        "{g}"
    );
    assert!(
        g["reason"]
            .as_str()
            .unwrap()
            .contains("cpu0/cpufreq does not exist"),
        "{g}"
    );
    // No run of the not-applicable arm happened; the other variant was decided on 5 replicates.
    assert!(!dir.path().join("exec/runs/b001-perf-gov").exists());
    let o = variant(&report, "other");
    assert_ne!(o["decision"], "not_applicable");
    assert_eq!(o["n_variant"], 5);
}

#[test]
fn missing_hardware_capability_makes_the_variant_not_applicable() {
    let dir = tempfile::tempdir().unwrap();
    let v = "  - { name: needs-sme, dimension: l3_hardware_capability, env: { X: 1 }, requires: [sme2_warp] }\n  - { name: other, dimension: l2_threading_model, env: { X: 2 } }\n";
    // Two variants at 5 blocks cannot reach α after Holm: allowed here,
    // where one of them turns out not applicable and the other is decided alone.
    let (code, report, err) = run_json(
        dir.path(),
        &exp_with(v, "allow_few_replicates: true\n"),
        &[],
    );
    assert_eq!(code, Some(0), "{err}");
    let n = variant(&report, "needs-sme");
    assert_eq!(n["decision"], "not_applicable");
    let reason = n["reason"].as_str().unwrap();
    assert!(
        reason.contains("`sme2_warp` is not available on"),
        "{reason}"
    );
    assert_ne!(variant(&report, "other")["decision"], "not_applicable");
}

/// A writable cpufreq tree for one CPU, with the real /proc/cpuinfo beside it.
fn fake_cpufreq_root(dir: &Path, governor: &str) -> std::path::PathBuf {
    let root = dir.join("fakeroot");
    let cpu = root.join("sys/devices/system/cpu");
    std::fs::create_dir_all(cpu.join("cpu0/cpufreq")).unwrap();
    std::fs::create_dir_all(cpu.join("cpu0/topology")).unwrap();
    std::fs::create_dir_all(root.join("proc")).unwrap();
    std::fs::copy("/proc/cpuinfo", root.join("proc/cpuinfo")).unwrap();
    std::fs::write(cpu.join("online"), "0\n").unwrap();
    std::fs::write(cpu.join("possible"), "0\n").unwrap();
    for (f, v) in [
        ("physical_package_id", "0"),
        ("core_id", "0"),
        ("thread_siblings_list", "0"),
        ("core_cpus_list", "0"),
    ] {
        std::fs::write(cpu.join("cpu0/topology").join(f), format!("{v}\n")).unwrap();
    }
    let freq = cpu.join("cpu0/cpufreq");
    std::fs::write(freq.join("scaling_governor"), format!("{governor}\n")).unwrap();
    std::fs::write(
        freq.join("scaling_available_governors"),
        "performance powersave\n",
    )
    .unwrap();
    std::fs::write(freq.join("scaling_driver"), "acpi-cpufreq\n").unwrap();
    std::fs::write(freq.join("cpuinfo_min_freq"), "1000000\n").unwrap();
    std::fs::write(freq.join("cpuinfo_max_freq"), "3000000\n").unwrap();
    std::fs::write(freq.join("affected_cpus"), "0\n").unwrap();
    std::fs::write(freq.join("related_cpus"), "0\n").unwrap();
    root
}

fn governor_of(root: &Path) -> String {
    std::fs::read_to_string(root.join("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"))
        .unwrap()
        .trim()
        .to_string()
}

/// An app that records the governor it saw (and its pid), then optionally sleeps.
fn governor_app(root: &Path, sleep_s: &str) -> String {
    format!(
        "app:\n  command: 'echo $$ > pid; cat {}/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor > governor-seen; if [ \"$OPTGATE_ARM\" = perf-gov ]; then sleep {sleep_s}; fi; for e in 1 2 3; do echo \"epoch $e took 0.0$e s\"; done'\n",
        root.display()
    )
}

#[test]
fn tunable_governor_is_set_for_its_arm_only_and_restored() {
    let dir = tempfile::tempdir().unwrap();
    let root = fake_cpufreq_root(dir.path(), "powersave");
    let yaml = format!(
        "name: gov\n{}{METRIC}replicates: 5\nvariants:\n  - {{ name: perf-gov, dimension: l3_frequency_power, governor: performance }}\n",
        governor_app(&root, "0")
    );
    let (code, report, err) = run_json(
        dir.path(),
        &yaml,
        &[("OPTGATE_SYSFS_ROOT", root.to_str().unwrap())],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_ne!(variant(&report, "perf-gov")["decision"], "not_applicable");
    let runs = dir.path().join("exec/runs");
    for b in 1..=5 {
        let seen = |arm: &str| {
            std::fs::read_to_string(runs.join(format!("b00{b}-{arm}/governor-seen"))).unwrap()
        };
        assert_eq!(seen("perf-gov").trim(), "performance");
        assert_eq!(seen("baseline").trim(), "powersave");
        let changes: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(runs.join(format!("b00{b}-perf-gov/governor.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(changes[0]["previous"], "powersave");
        assert_eq!(changes[0]["new"], "performance");
    }
    assert_eq!(governor_of(&root), "powersave");
}

#[test]
fn governor_is_restored_after_optgate_is_killed_mid_run() {
    let dir = tempfile::tempdir().unwrap();
    let root = fake_cpufreq_root(dir.path(), "powersave");
    let yaml = format!(
        "name: govkill\n{}{METRIC}replicates: 5\nseed: 3\nvariants:\n  - {{ name: perf-gov, dimension: l3_frequency_power, governor: performance }}\n",
        governor_app(&root, "30")
    );
    let p = write_experiment(dir.path(), &yaml);
    let out = dir.path().join("exec");
    let mut child = optgate()
        .args([
            "run",
            p.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ])
        .env("OPTGATE_SYSFS_ROOT", &root)
        .spawn()
        .unwrap();
    // What the run starts begins no earlier than its `optgate run`.
    let not_before = proc_start_time(child.id() as i32).unwrap().0;
    let long = std::time::Duration::from_secs(30);
    wait_for(
        "the governor arm running with the governor changed",
        long,
        || (governor_of(&root) == "performance").then_some(()),
    );
    // ... and its app has started (it writes its pid first).
    let running_pid_file = || {
        std::fs::read_dir(out.join("runs")).ok()?.find_map(|e| {
            let d = e.ok()?.path();
            let pid = d.join("pid");
            (d.to_string_lossy().ends_with("perf-gov")
                && pid.exists()
                && !d.join("manifest.json").exists())
            .then_some(pid)
        })
    };
    let pid_file = wait_for("the governor arm's app to start", long, running_pid_file);
    child.kill().unwrap();
    child.wait().unwrap();
    // The run wrapper runs in the execution's local job (its own session), which outlives
    // optgate: kill it too, as a node crash would, so that nothing restores the governor.
    kill_local_jobs(&out);
    // The app (its own process group) outlives them; stop it like a user would.
    let app = app_of(&pid_file, not_before);
    // Forget the killed app's pid file so that only a new run is found below.
    std::fs::remove_file(&pid_file).unwrap();
    assert!(
        app.signal_group(nix::sys::signal::Signal::SIGKILL),
        "{app:?}"
    );
    app.wait_gone("the killed app to end");
    assert_eq!(
        governor_of(&root),
        "performance",
        "SIGKILL cannot run destructors"
    );
    assert!(out.join("governor-restore.json").exists());

    // Resuming puts the governor back before anything else. Proof: the next governor run
    // records the governor it found, and that must be the original one, not the leftover.
    // The killed run's directory holds no manifest; the resumed execution re-runs it.
    let mut resumed = optgate()
        .args([
            "run",
            p.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ])
        .env("OPTGATE_SYSFS_ROOT", &root)
        .spawn()
        .unwrap();
    let not_before = proc_start_time(resumed.id() as i32).unwrap().0;
    let pid_file = wait_for(
        "the resumed execution to start a governor run",
        long,
        running_pid_file,
    );
    let changes: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(pid_file.parent().unwrap().join("governor.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        changes[0]["previous"], "powersave",
        "the leftover governor was not restored first"
    );
    resumed.kill().unwrap();
    resumed.wait().unwrap();
    kill_local_jobs(&out);
    // The app of the resumed run (started since `resumed`), if it still runs.
    let app = app_of(&pid_file, not_before);
    app.signal_group(nix::sys::signal::Signal::SIGKILL);
}

/// The app whose pid its run's `pid` file holds (`echo $$ > pid` creates the file before
/// it writes: waited for), checked to be that run's script started since `not_before`.
fn app_of(pid_file: &Path, not_before: u64) -> CheckedProcess {
    let pid = wait_for(
        &format!("a pid in {}", pid_file.display()),
        std::time::Duration::from_secs(5),
        || std::fs::read_to_string(pid_file).ok()?.trim().parse().ok(),
    );
    let script = pid_file.with_file_name("run.sh");
    CheckedProcess::found(pid, not_before, &script.display().to_string()).unwrap()
}

/// SIGKILL to the process group of every local job of the execution in `out` that still
/// runs (each job script leads its own group; `job.pid` holds its pid and start time,
/// checked before the signal), then waits for each to end.
fn kill_local_jobs(out: &Path) {
    let Ok(jobs) = std::fs::read_dir(out.join("jobs")) else {
        return;
    };
    for job in jobs {
        let text = std::fs::read_to_string(job.unwrap().path().join("job.pid")).unwrap_or_default();
        let mut it = text.split_whitespace().map(str::parse);
        if let (Some(Ok(pid)), Some(Ok(start))) = (it.next(), it.next())
            && let Some(job) = CheckedProcess::recorded(pid as i32, start)
        {
            job.signal_group(nix::sys::signal::Signal::SIGKILL);
            job.wait_gone("a killed local job to end");
        }
    }
}

#[test]
fn a_variant_that_changes_the_output_is_rejected_naming_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = "name: wrong\napp:\n  command: 'for e in 1 2 3; do echo \"epoch $e took 0.0$e s\"; done; echo \"final loss ${LOSS:-0.25}\"'\n"
        .to_string()
        + METRIC
        + "correctness:\n  values: { pattern: 'final loss (?P<value>[0-9.]+)', rel_tol: 1e-6 }\nreplicates: 5\nallow_few_replicates: true\nvariants:\n  - { name: lossy, dimension: l1_vectorization, env: { LOSS: \"0.26\" } }\n  - { name: same, dimension: l2_threading_model, env: { X: 1 } }\n";
    let (code, report, err) = run_json(dir.path(), &yaml, &[]);
    assert_eq!(code, Some(0), "{err}");
    let l = variant(&report, "lossy");
    assert_eq!(l["decision"], "reject");
    let reason = l["reason"].as_str().unwrap();
    assert!(reason.contains("changes the computation"), "{reason}");
    assert!(
        reason.contains("checked value #1 is 0.26 where the baseline has 0.25"),
        "{reason}"
    );
    assert!(
        !variant(&report, "same")["reason"]
            .as_str()
            .unwrap()
            .contains("changes the computation")
    );
}

#[test]
fn o3_native_checksum_is_judged_by_what_the_compiler_really_does() {
    // Ground truth first: build both ways outside optgate and compare the result files.
    let dir = tempfile::tempdir().unwrap();
    let src = repo_root().join("examples/openmp-stencil/stencil.c");
    let truth = |flags: &[&str], name: &str| -> Vec<u8> {
        let bin = dir.path().join(name);
        let st = Command::new("cc")
            .args(flags)
            .arg("-fopenmp")
            .arg(&src)
            .arg("-o")
            .arg(&bin)
            .arg("-lm")
            .status()
            .unwrap();
        assert!(st.success());
        let wd = dir.path().join(format!("{name}-wd"));
        std::fs::create_dir_all(&wd).unwrap();
        let st = Command::new(&bin)
            .args(["--n", "256", "--epochs", "2", "--sweeps", "20"])
            .env("OMP_NUM_THREADS", "1")
            .current_dir(&wd)
            .output()
            .unwrap();
        assert!(st.status.success());
        std::fs::read(wd.join("result.txt")).unwrap()
    };
    let identical = truth(&["-O2"], "o2") == truth(&["-O3", "-march=native"], "o3n");

    let yaml = format!(
        "name: native\nworkdir: {}\nbuild:\n  command: cc -O2 -fopenmp stencil.c -o \"$OPTGATE_BUILD_DIR/stencil\" -lm\n\
         app:\n  command: '\"$OPTGATE_BUILD_DIR/stencil\"'\n  args: [--n, \"256\", --epochs, \"2\", --sweeps, \"20\"]\n  env: {{ OMP_NUM_THREADS: 1 }}\n\
         metric: {{ pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s' }}\n\
         correctness: {{ files: [result.txt] }}\nreplicates: 5\n\
         variants:\n  - name: o3-native\n    dimension: l1_vectorization\n    build: {{ command: cc -O3 -march=native -fopenmp stencil.c -o \"$OPTGATE_BUILD_DIR/stencil\" -lm }}\n",
        src.parent().unwrap().display()
    );
    let (code, report, err) = run_json(dir.path(), &yaml, &[]);
    assert_eq!(code, Some(0), "{err}");
    let v = variant(&report, "o3-native");
    let reason = v["reason"].as_str().unwrap();
    if identical {
        assert!(!reason.contains("changes the computation"), "{reason}");
    } else {
        assert_eq!(v["decision"], "reject");
        assert!(
            reason.contains("`result.txt` differs from the baseline's"),
            "{reason}"
        );
    }
}

/// The daemon's local runs change the governor through the same run wrapper as `optgate
/// run` (before, the daemon accepted a governor variant and measured it under whatever
/// governor the node had): each governor run saw `performance`, each baseline run
/// `powersave`, and the node is left as it was.
#[test]
fn the_daemon_sets_a_governor_variant_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let root = fake_cpufreq_root(dir.path(), "powersave");
    let home = dir.path().join("home");
    let yaml = format!(
        "name: govd\n{}{METRIC}replicates: 5\nvariants:\n  - {{ name: perf-gov, dimension: l3_frequency_power, governor: performance }}\n",
        governor_app(&root, "0")
    );
    let p = write_experiment(dir.path(), &yaml);
    let mut daemon = optgate()
        .args(["daemon", "--foreground"])
        .env("OPTGATE_HOME", &home)
        .env("OPTGATE_SYSFS_ROOT", &root)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _guard = StopOnDrop(home.clone());
    // The daemon takes the submission once its socket is up.
    let id = wait_for(
        "the daemon to accept the submission",
        std::time::Duration::from_secs(300),
        || {
            let o = cli(&home, &["submit", p.to_str().unwrap(), "--no-start"]);
            (o.status.code() == Some(0)).then(|| stdout(&o).trim().to_string())
        },
    );
    let o = cli(&home, &["status", &id, "--watch"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = status(&home, &id);
    assert_eq!(s["state"], "decided", "{s:#}");
    assert_eq!(s["runs"]["completed"], 10, "{s:#}");
    let runs = std::path::PathBuf::from(s["root"].as_str().unwrap()).join("runs");
    for b in 1..=5 {
        let seen = |arm: &str| {
            std::fs::read_to_string(runs.join(format!("b{b:03}-{arm}/governor-seen")))
                .unwrap()
                .trim()
                .to_string()
        };
        assert_eq!(seen("perf-gov"), "performance", "block {b}");
        assert_eq!(seen("baseline"), "powersave", "block {b}");
        assert!(
            runs.join(format!("b{b:03}-perf-gov/governor.json"))
                .exists()
        );
    }
    assert_eq!(governor_of(&root), "powersave");
    let o = cli(&home, &["daemon", "stop"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    daemon.wait().unwrap();
}
