//! `optgate step`, the wrapper around every launched task, under the real one-node Slurm
//! (`srun -n2`) and one-broker Flux (`flux run -n2`) of `tests/run-all.sh`, and without a
//! launcher: each task leaves its record (rank, node, CPUs, CPU time, how it ended), the
//! app's exit status, signals, stdin/stdout and PMI descriptor pass through, a launcher's
//! stop signal reaches the app's group and its task still leaves a record, and a run under
//! a launcher has `tasks` in its manifest and their totals as `resources`.
//!
//! Without Slurm or Flux these tests FAIL with instructions; they never pass by skipping.
//! The tasks of one node share its cores: timings here are functional, not performance.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::*;

const OPTGATE: &str = env!("CARGO_BIN_EXE_optgate");

/// A few hundred ms of shell arithmetic: CPU time well above the clock's tick.
const BURN: &str = "i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done";

/// `launcher… optgate step DIR --attempt 1 -- app…`, its output captured.
fn launch(launcher: &[&str], dir: &Path, app: &[&str]) -> Output {
    let mut argv: Vec<String> = launcher.iter().map(|s| s.to_string()).collect();
    argv.extend([OPTGATE, "step"].map(String::from));
    argv.extend([
        dir.display().to_string(),
        "--attempt".into(),
        "1".into(),
        "--".into(),
    ]);
    argv.extend(app.iter().map(|s| s.to_string()));
    Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The task records of attempt 1, by rank.
fn records(dir: &Path) -> BTreeMap<u64, Value> {
    let tasks = dir.join("tasks.attempt-1");
    std::fs::read_dir(&tasks)
        .unwrap_or_else(|e| panic!("no task records in {}: {e}", tasks.display()))
        .map(|e| {
            let v: Value =
                serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap();
            (v["rank"].as_u64().unwrap(), v)
        })
        .collect()
}

/// What every record of a two-task step must say.
fn check_two_tasks(r: &BTreeMap<u64, Value>, scheduler: &str) {
    assert_eq!(r.keys().copied().collect::<Vec<_>>(), vec![0, 1], "{r:#?}");
    for t in r.values() {
        assert_eq!(t["scheduler"], scheduler, "{t:#}");
        assert_eq!(t["step_size"], 2, "{t:#}");
        assert!(t["node"].as_str().is_some_and(|n| !n.is_empty()), "{t:#}");
        let cpus = t["cpus_allowed"].as_u64().unwrap();
        assert!(cpus >= 1, "{t:#}");
        assert!(t["cpu_s"].as_f64().unwrap() > 0.0, "{t:#}");
        assert!(t["max_rss_kib"].as_u64().unwrap() > 0, "{t:#}");
        assert!(t["wall_s"].as_f64().unwrap() > 0.0, "{t:#}");
        assert!(t["threads_max"].as_u64().unwrap() >= 1, "{t:#}");
    }
}

/// Planted bugs caught: records keyed by pid (one per task lost), the exit status not
/// passed on (srun exits 0), the rank's environment not read (no `scheduler`/`node`),
/// CPU time of the wrapper instead of the app (≈ 0).
#[test]
fn under_srun_each_task_leaves_its_record_and_the_exit_status_passes_through() {
    require_slurm();
    let dir = tempfile::tempdir().unwrap();
    let app = format!("{BURN}; echo task $SLURM_PROCID; [ $SLURM_PROCID = 1 ] && exit 3; exit 0");
    let o = launch(&["srun", "-n2"], dir.path(), &["bash", "-c", &app]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("task 0") && out.contains("task 1"), "{out}");
    let r = records(dir.path());
    check_two_tasks(&r, "slurm");
    assert_eq!(
        (r[&0]["end"].as_str(), r[&0]["exit_code"].as_i64()),
        (Some("exited"), Some(0))
    );
    assert_eq!(
        (r[&1]["end"].as_str(), r[&1]["exit_code"].as_i64()),
        (Some("exited"), Some(3))
    );
    // Slurm's name for the node, as the task saw it.
    let node = Command::new("srun")
        .args(["-n1", "printenv", "SLURMD_NODENAME"])
        .output()
        .unwrap();
    assert_eq!(r[&0]["node"].as_str(), Some(stdout(&node).trim()));
}

/// Planted bugs caught: PMI_FD closed or not inherited by the app (MPI could not start),
/// the rank not read from Flux's variables, the broker rank not parsed from FLUX_URI.
#[test]
fn under_flux_run_each_task_leaves_its_record_and_pmi_passes_through() {
    require_flux();
    let dir = tempfile::tempdir().unwrap();
    let app = format!(
        "{BURN}; test -e /proc/$$/fd/$PMI_FD && echo \"pmi $PMI_RANK of $PMI_SIZE open\"; exit 0"
    );
    let o = launch(&["flux", "run", "-n2"], dir.path(), &["bash", "-c", &app]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("pmi 0 of 2 open") && out.contains("pmi 1 of 2 open"),
        "{out}"
    );
    let r = records(dir.path());
    check_two_tasks(&r, "flux");
    let broker = Command::new("flux")
        .args(["getattr", "rank"])
        .output()
        .unwrap();
    assert_eq!(r[&1]["node"].as_str(), Some(stdout(&broker).trim()));
}

/// Slurm's PMI2 hands each task an open descriptor too.
#[test]
fn under_srun_mpi_pmi2_the_pmi_descriptor_reaches_the_app() {
    require_slurm();
    let dir = tempfile::tempdir().unwrap();
    let app = "test -e /proc/$$/fd/$PMI_FD && echo \"pmi2 $PMI_RANK open\"";
    let o = launch(
        &["srun", "--mpi=pmi2", "-n2"],
        dir.path(),
        &["bash", "-c", app],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("pmi2 0 open") && out.contains("pmi2 1 open"),
        "{out}"
    );
}

/// Flux stops a step at its time limit with SIGALRM to each task: the wrapper passes it to
/// the app's group, the app dies of it, and the task's record says so. Planted bugs
/// caught: the signal not forwarded (the app sleeps on until Flux's SIGKILL and no record
/// is left), the child left with the wrapper's blocked mask (same), the record written
/// only for an app that exited.
#[test]
fn a_task_stopped_at_its_time_limit_still_leaves_its_record_marked_so() {
    require_flux();
    let dir = tempfile::tempdir().unwrap();
    let o = launch(
        &["flux", "run", "-t", "3s", "-n2"],
        dir.path(),
        &["sleep", "300"],
    );
    assert!(!o.status.success(), "{}", stderr(&o));
    let r = records(dir.path());
    assert_eq!(r.len(), 2, "{r:#?}");
    let alrm = nix::sys::signal::Signal::SIGALRM as i64;
    for t in r.values() {
        assert_eq!(t["end"], "signaled", "{t:#}");
        assert_eq!(t["signal"].as_i64(), Some(alrm), "{t:#}");
        assert_eq!(t["forwarded_signal"].as_i64(), Some(alrm), "{t:#}");
    }
}

/// Without a launcher (this test spawns the wrapper): a SIGTERM to the wrapper reaches the
/// app's whole group (the app's own child too), the wrapper then dies of the same signal,
/// and the record says the app was killed by it. Stdin reaches the app. Planted bugs
/// caught: the signal sent to the app's pid only (its child survives), the wrapper exiting
/// 0 or 143 instead of dying of the signal, stdin not passed.
#[test]
fn a_signal_to_the_wrapper_reaches_the_apps_group_and_is_passed_on() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("child.pid");
    let app = format!(
        "read line; echo \"got $line\"; sleep 300 & echo $! > {}; wait",
        pidfile.display()
    );
    let mut child = Command::new(OPTGATE)
        .args([
            "step",
            dir.path().to_str().unwrap(),
            "--",
            "bash",
            "-c",
            &app,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let wrapper_pid = child.id();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let sleeper: i32 = wait_for("the app's child", Duration::from_secs(30), || {
        std::fs::read_to_string(&pidfile).ok()?.trim().parse().ok()
    });
    let wrapper = CheckedProcess::found(wrapper_pid as i32, own_start_time(), "step").unwrap();
    assert!(wrapper.signal(nix::sys::signal::Signal::SIGTERM));
    let out = child.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGTERM), "{:?}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "got hello\n");
    let running = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().starts_with(['Z', 'X']))
            })
            .is_some_and(|zombie| !zombie)
    };
    wait_for(
        "the app's child to be gone",
        Duration::from_secs(30),
        || (!running(sleeper)).then_some(()),
    );
    let rec: Value = serde_json::from_slice(
        &std::fs::read(
            dir.path()
                .join("tasks.attempt-1")
                .join(format!("pid-{wrapper_pid}.json")),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(rec["end"], "signaled", "{rec:#}");
    assert_eq!(
        rec["signal"].as_i64(),
        Some(libc::SIGTERM as i64),
        "{rec:#}"
    );
    assert_eq!(
        rec["forwarded_signal"].as_i64(),
        Some(libc::SIGTERM as i64),
        "{rec:#}"
    );
}

/// A run directory as `optgate-sched` renders one: `run.json` and `run.sh` burning CPU.
fn run_dir(tmp: &Path) -> PathBuf {
    let dir = tmp.join("b001-baseline");
    std::fs::create_dir_all(&dir).unwrap();
    let record = serde_json::json!({
        "experiment": "e", "run_id": "b001-baseline", "arm": "baseline", "block": 1,
        "replicate": 1, "env_set": {}, "env_unset": [], "time_limit_s": 120.0,
    });
    std::fs::write(dir.join("run.json"), record.to_string()).unwrap();
    std::fs::write(
        dir.join("run.sh"),
        format!("{BURN}\necho epoch 1 took 1.0 s\n"),
    )
    .unwrap();
    dir
}

/// `optgate exec-run DIR -- launcher…`, as a job script calls it; the manifest it wrote.
fn exec_run(dir: &Path, launcher: &[&str]) -> Value {
    let o = optgate()
        .args(["exec-run", dir.to_str().unwrap(), "--attempt", "1", "--"])
        .args(launcher)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

/// The manifest of a run under a launcher: two `tasks`, and `resources` their totals.
/// Planted bugs caught: tasks not gathered (resources stay null: "not measured"), one
/// task's CPU time taken for the run's, RSS summed instead of the peak.
fn check_manifest(m: &Value) {
    let tasks = m["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("no tasks: {m:#}"));
    assert_eq!(tasks.len(), 2, "{m:#}");
    let cpu: Vec<f64> = tasks.iter().map(|t| t["cpu_s"].as_f64().unwrap()).collect();
    assert!(cpu.iter().all(|c| *c > 0.0), "{m:#}");
    let r = &m["resources"];
    let total = r["cpu_user_s"].as_f64().unwrap() + r["cpu_system_s"].as_f64().unwrap();
    assert!((total - cpu.iter().sum::<f64>()).abs() < 1e-6, "{m:#}");
    let peak = tasks
        .iter()
        .map(|t| t["max_rss_kib"].as_u64().unwrap())
        .max();
    assert_eq!(r["max_rss_kib"].as_u64(), peak, "{m:#}");
    assert_eq!(m["outcome"], "completed", "{m:#}");
}

#[test]
fn a_run_under_srun_has_its_tasks_and_their_totals_in_its_manifest() {
    require_slurm();
    let tmp = tempfile::tempdir().unwrap();
    check_manifest(&exec_run(&run_dir(tmp.path()), &["srun", "-n2"]));
}

#[test]
fn a_run_under_flux_run_has_its_tasks_and_their_totals_in_its_manifest() {
    require_flux();
    let tmp = tempfile::tempdir().unwrap();
    check_manifest(&exec_run(&run_dir(tmp.path()), &["flux", "run", "-n2"]));
}

/// Two arms of two tasks each, on `kind`; the variant is faster, and burns the same CPU.
/// Every task burns; rank 0 alone prints the epochs.
fn two_task_experiment(name: &str, kind: &str) -> String {
    format!(
        r#"name: {name}
app:
  command: [bash, -c, '{BURN}; [ "${{SLURM_PROCID:-${{FLUX_TASK_RANK:-0}}}}" = 0 ] || exit 0; if [ "${{X:-0}}" = 1 ]; then b=700; else b=1000; fi; for e in 1 2 3; do echo "epoch $e took $((b + OPTGATE_BLOCK + e)).0 s"; done']
  time_limit: 2m
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler: {{ kind: {kind}, time_limit: 10m, tasks_per_node: 2 }}
replicates: 5
variants:
  - name: v1
    dimension: l2_threading_model
    env: {{ X: "1" }}
"#
    )
}

/// The daemon runs a two-task experiment on `kind` to its end; System Impact is a
/// number (it was "not measured" under every launcher before `optgate step`), and every
/// run's manifest has its two tasks. Planted bug caught: exec-run not putting
/// `optgate step` inside the launcher (no tasks, no resources, no System Impact).
fn system_impact_is_measured_under(kind: &str) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let exp = write_experiment(
        dir.path(),
        &two_task_experiment(&format!("step-{kind}"), kind),
    );
    let o = cli(&home, &["submit", exp.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = stdout(&o).trim().to_string();
    let s = wait_for("the experiment to end", Duration::from_secs(600), || {
        let s = status(&home, &id);
        ["decided", "failed", "budget_exhausted", "cancelled"]
            .contains(&s["state"].as_str().unwrap_or(""))
            .then_some(s)
    });
    assert_eq!(s["state"], "decided", "{s:#}");
    let root = PathBuf::from(s["root"].as_str().unwrap());
    for b in 1..=5 {
        for arm in ["baseline", "v1"] {
            let path = root.join(format!("runs/b{b:03}-{arm}/manifest.json"));
            let m: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            check_manifest(&m);
        }
    }
    let o = cli(&home, &["report", &id, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let v = &report["variants"][0];
    assert!(v["system_impact_pct"].as_f64().is_some(), "{v:#}");
}

#[test]
fn system_impact_is_measured_under_slurm() {
    require_slurm();
    system_impact_is_measured_under("slurm");
}

#[test]
fn system_impact_is_measured_under_flux() {
    require_flux();
    system_impact_is_measured_under("flux");
}

/// The most threads of the app are counted at `threads::THREAD_SAMPLE_INTERVAL` (100 ms):
/// an app holding 4 extra threads for 1.5 s is seen with 5 (its main thread too), not the
/// 1 of the shell around it. Planted bugs caught: an interval past the threads' life (1,
/// the first sample only), the shell's threads counted instead of its child's, the
/// wrapper's own threads counted, threads summed over the tree (6).
#[test]
fn the_most_threads_of_the_app_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let app = "import threading, time\n\
               ts = [threading.Thread(target=time.sleep, args=(1.5,)) for _ in range(4)]\n\
               [t.start() for t in ts]\n[t.join() for t in ts]\n";
    let o = optgate()
        .env_remove("SLURM_PROCID")
        .env_remove("FLUX_TASK_RANK")
        .args(["step", dir.path().to_str().unwrap(), "--", "bash", "-c"])
        // `; true`: bash waits for python rather than becoming it, so the app is a
        // descendant of the process the wrapper started.
        .arg(format!("python3 -c '{app}'; true"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let tasks = dir.path().join("tasks.attempt-1");
    let file = std::fs::read_dir(&tasks)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let rec: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    assert_eq!(rec["threads_max"].as_u64(), Some(5), "{rec:#}");
    assert_eq!(
        rec["rank"],
        Value::Null,
        "no launcher names a rank here: {rec:#}"
    );
}

/// `scancel` of a running `srun -n2` step: Slurm's SIGTERM reaches each task, the app dies
/// of it and each task still leaves its record, marked `signaled` with SIGTERM. Planted
/// bugs caught: the record written only for an app that exited; the wrapper dying of the
/// SIGTERM itself (no record at all).
#[test]
fn a_cancelled_srun_step_leaves_every_tasks_record_marked_so() {
    require_slurm();
    let dir = tempfile::tempdir().unwrap();
    let name = format!("og-step-cancel-{}", std::process::id());
    let app = format!(
        "touch {}/started.$SLURM_PROCID; exec sleep 300",
        dir.path().display()
    );
    let mut argv = vec![
        "srun".to_string(),
        format!("--job-name={name}"),
        "-n2".into(),
    ];
    argv.extend([
        OPTGATE.to_string(),
        "step".into(),
        dir.path().display().to_string(),
    ]);
    argv.extend(["--".into(), "bash".into(), "-c".into(), app]);
    let srun = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("both tasks to start", Duration::from_secs(120), || {
        (0..2)
            .all(|r| dir.path().join(format!("started.{r}")).exists())
            .then_some(())
    });
    let o = Command::new("scancel")
        .args(["--name", &name])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = srun.wait_with_output().unwrap();
    assert!(!o.status.success(), "{}", stderr(&o));
    let r = records(dir.path());
    assert_eq!(r.keys().copied().collect::<Vec<_>>(), vec![0, 1], "{r:#?}");
    for t in r.values() {
        assert_eq!(t["end"], "signaled", "{t:#}");
        assert_eq!(t["signal"].as_i64(), Some(libc::SIGTERM as i64), "{t:#}");
    }
}

/// An app that cannot start ends the task as a shell would (127: no such program, 126: not
/// executable), with the reason on stderr and no record, since nothing ran. Planted bugs
/// caught: optgate's own failure status (3) passed to the launcher, a record of a task
/// that never ran.
#[test]
fn an_app_that_cannot_start_exits_as_a_shell_would() {
    let dir = tempfile::tempdir().unwrap();
    let step = |app: &str| {
        optgate()
            .args(["step", dir.path().to_str().unwrap(), "--", app])
            .output()
            .unwrap()
    };
    let missing = step("/no/such/app");
    assert_eq!(missing.status.code(), Some(127), "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("cannot start /no/such/app"),
        "{}",
        stderr(&missing)
    );
    let plain = dir.path().join("not-executable");
    std::fs::write(&plain, "data").unwrap();
    let refused = step(plain.to_str().unwrap());
    assert_eq!(refused.status.code(), Some(126), "{}", stderr(&refused));
    assert!(!dir.path().join("tasks.attempt-1").exists());
}

/// `optgate step` refuses a RUN_DIR that is a link, or whose task-record folder is one,
/// before the app starts (exit 2, nothing written where the link points); a `run.json`
/// planted as a pipe does not block it. Needs no launcher. Planted bugs caught: the
/// records written through the linked folder (a file appears in the target), `run.json`
/// opened as it is (the step hangs in `open` until the test's own timeout kills it).
#[test]
fn a_run_dir_that_is_a_link_is_refused_and_a_planted_pipe_does_not_block() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    let target = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&real).unwrap();
    std::fs::create_dir_all(&target).unwrap();
    let linked = tmp.path().join("linked");
    std::os::unix::fs::symlink(&real, &linked).unwrap();
    let step = |dir: &Path, app: &str| {
        let mut child = optgate()
            .args(["step", dir.to_str().unwrap(), "--", "sh", "-c", app])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A blocked step never exits: bounded, so the test fails instead of hanging.
        for _ in 0..600 {
            if child.try_wait().unwrap().is_some() {
                return child.wait_with_output().unwrap();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        panic!("optgate step did not end: {:?}", child.wait_with_output());
    };
    let out = step(&linked, "echo ran");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is a symbolic link"),
        "{}",
        stderr(&out)
    );
    assert!(String::from_utf8_lossy(&out.stdout).is_empty());
    std::os::unix::fs::symlink(&target, real.join("tasks.attempt-1")).unwrap();
    let out = step(&real, "echo ran");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    std::fs::remove_file(real.join("tasks.attempt-1")).unwrap();
    let made = Command::new("mkfifo")
        .arg(real.join("run.json"))
        .status()
        .unwrap();
    assert!(made.success());
    let out = step(&real, "echo ran");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(real.join("tasks.attempt-1").read_dir().unwrap().count() == 1);
}

/// On a terminal (`srun --pty`; here util-linux's `script` gives the wrapper one) the app
/// reads stdin: it stays in the terminal's foreground group, where a read is not stopped.
/// Planted bug caught: the app always in a group of its own (stopped by SIGTTIN at its
/// first read, so it never answers).
#[test]
fn on_a_terminal_the_app_can_read_stdin() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let line = format!(
        "{OPTGATE} step {} -- bash -c 'read x; echo got $x'",
        dir.path().display()
    );
    /// The `script` this test started, killed if the test fails while it runs.
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = KillOnDrop(
        Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("util-linux's `script` runs"),
    );
    let mut stdin = child.0.stdin.take().unwrap();
    stdin.write_all(b"hi\n").unwrap();
    let ended = wait_for(
        "the app on the terminal to end",
        Duration::from_secs(30),
        || child.0.try_wait().unwrap(),
    );
    drop(stdin);
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.0.stdout.take().unwrap(), &mut out).unwrap();
    assert!(ended.success(), "{ended:?}: {out}");
    assert!(out.contains("got hi"), "{out}");
}

/// The node's record (`nodes.attempt-1/<host>[+<node>].json`, written by the first task of the
/// node, here the only one) carries the RAPL energy around the app: from a fixture sysfs
/// root whose counter the app itself advances (a double for RAPL hardware, which this
/// build machine lacks: it has no /sys/class/powercap), and a reason when the counters
/// cannot be read. Planted bugs caught: the record not rewritten after the app (no
/// energy), the counters read twice before the app (0 J), a missing counter read as 0 J.
#[test]
fn the_nodes_record_has_the_energy_around_its_app() {
    let node_record = |dir: &Path| -> Value {
        let nodes = dir.join("nodes.attempt-1");
        let file = std::fs::read_dir(&nodes)
            .unwrap_or_else(|e| panic!("{}: {e}", nodes.display()))
            .next()
            .unwrap()
            .unwrap()
            .path();
        serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap()
    };
    let step = |dir: &Path, root: &Path, app: &str| {
        optgate()
            .env_remove("SLURM_PROCID")
            .env_remove("FLUX_TASK_RANK")
            .env("OPTGATE_SYSFS_ROOT", root)
            .args(["step", dir.to_str().unwrap(), "--", "bash", "-c", app])
            .output()
            .unwrap()
    };
    let root = tempfile::tempdir().unwrap();
    let zone = root.path().join("sys/class/powercap/intel-rapl:0");
    std::fs::create_dir_all(&zone).unwrap();
    std::fs::write(zone.join("energy_uj"), "1000000\n").unwrap();
    std::fs::write(zone.join("max_energy_range_uj"), "262143328850\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let advance = format!("echo 3500000 > {}", zone.join("energy_uj").display());
    let o = step(dir.path(), root.path(), &advance);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rec = node_record(dir.path());
    assert_eq!(rec["energy_j"].as_f64(), Some(2.5), "{rec:#}");
    assert_eq!(rec["energy_unmeasured"], Value::Null, "{rec:#}");

    let bare = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let o = step(dir.path(), bare.path(), "true");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rec = node_record(dir.path());
    assert_eq!(rec["energy_j"], Value::Null, "{rec:#}");
    assert_eq!(rec["energy_unmeasured"], "rapl_unreadable", "{rec:#}");
}
