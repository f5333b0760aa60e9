//! Ctrl-C during `optgate run` stops the current run through the engine's own cancel,
//! keeps the finished ones, says so, and `--out` of the same directory resumes without
//! running a finished run again; `optgate run`'s engine runs under the daemon's supervisor.

use crate::support;

use std::time::Duration;

use support::*;

#[test]
fn ctrl_c_keeps_finished_runs_and_resume_completes_without_rerunning() {
    interrupted_then_resumed(nix::sys::signal::Signal::SIGINT);
}

/// `kill` (or `timeout`) stops `optgate run` the same way: its local job, which would
/// otherwise go on alone, is stopped and the interrupted run says so.
#[test]
fn sigterm_stops_the_runs_like_ctrl_c() {
    interrupted_then_resumed(nix::sys::signal::Signal::SIGTERM);
}

fn interrupted_then_resumed(signal: nix::sys::signal::Signal) {
    let dir = tempfile::tempdir().unwrap();
    // Each run appends its id to a shared log, so re-runs would show up as duplicates.
    let log = dir.path().join("ran.log");
    let yaml = format!(
        "name: intr\napp:\n  command: 'echo \"$OPTGATE_RUN_ID\" >> {0}; if [ $(wc -l < {0}) -eq 3 ]; then while :; do sleep 0.05; done; fi; for e in 1 2 3; do echo \"epoch $e took 0.0$e s\"; done'\n\
         metric: {{ pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s' }}\nreplicates: 5\n\
         variants:\n  - {{ name: v, dimension: l2_threading_model, env: {{ X: 1 }} }}\n",
        log.display()
    );
    let p = write_experiment(dir.path(), &yaml);
    let out = dir.path().join("exec");
    let child = optgate()
        .args([
            "run",
            p.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The third run never finishes by itself (its app waits forever; a re-run of it later
    // finds 4+ lines and goes on), so at the interrupt exactly two runs have finished,
    // however slowly this machine runs. Wait until it has started, then interrupt like a
    // terminal would.
    let mut waited = 0;
    while std::fs::read_to_string(&log)
        .map(|t| t.lines().count())
        .unwrap_or(0)
        < 3
    {
        std::thread::sleep(Duration::from_millis(20));
        waited += 1;
        assert!(waited < 1500, "runs never started");
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted. Kept 2 finished run(s)"), "{err}");
    assert!(err.contains(&format!("--out {}", out.display())), "{err}");
    assert!(
        !out.join("samples.csv").exists(),
        "an interrupted execution wrote samples"
    );
    // The interrupted run left a manifest saying so; it is not data.
    let interrupted: Vec<_> = std::fs::read_dir(out.join("runs"))
        .unwrap()
        .filter_map(|e| {
            let m = std::fs::read_to_string(e.unwrap().path().join("manifest.json")).ok()?;
            m.contains("\"interrupted\"").then_some(())
        })
        .collect();
    assert_eq!(interrupted.len(), 1);
    interrupt_went_through_the_engines_cancel(&out);

    let o = run(&[
        "run",
        p.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ran = std::fs::read_to_string(&log).unwrap();
    let mut ids: Vec<&str> = ran.lines().collect();
    // 10 planned runs; the interrupted one ran twice, every other exactly once.
    assert_eq!(ids.len(), 11, "{ran}");
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 10, "{ran}");
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(report["variants"][0]["n_variant"], 5);
}

/// `optgate run` and the daemon's local jobs take the same machine-wide lock, so their
/// timings never compete: a run waits while the lock is held.
#[test]
fn run_waits_for_the_machine_wide_lock_of_local_runs() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("state");
    std::fs::create_dir_all(&home).unwrap();
    let log = dir.path().join("ran.log");
    let yaml = fake_app_experiment("locked", "").replace(
        "command: [bash, -c, 'for e",
        &format!("command: [bash, -c, 'echo x >> {}; for e", log.display()),
    );
    let p = write_experiment(dir.path(), &yaml);
    // Hold the lock the way a daemon job does (flock(1) on the same file).
    // --no-fork: flock execs sleep itself, so killing it releases the lock at once.
    let mut holder = std::process::Command::new("flock")
        .arg("--no-fork")
        .arg(home.join("local-runs.lock"))
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    // Wait (for an event, not a duration) until the holder has the lock.
    let mut waited = 0;
    while !lock_is_held(&home.join("local-runs.lock")) {
        std::thread::sleep(Duration::from_millis(20));
        waited += 1;
        assert!(waited < 1500, "flock never took the lock");
    }
    let out = dir.path().join("exec");
    let mut child = optgate()
        .args([
            "run",
            p.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ])
        .env("OPTGATE_HOME", &home)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // optgate says it is waiting once its non-blocking attempt has failed: from then on
    // it holds nothing and must not run. Read stderr up to that line, then check.
    let mut err_pipe = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut err_pipe, &mut line).unwrap();
        assert!(n > 0, "optgate ended without waiting for the lock: {seen}");
        seen.push_str(&line);
        if line.contains("waiting for the daemon's local runs to finish") {
            break;
        }
    }
    assert!(!log.exists(), "a run started while the lock was held");
    holder.kill().unwrap();
    holder.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err_pipe, &mut rest).unwrap();
    let status = child.wait().unwrap();
    let err = seen + &rest;
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 10);
}

/// Whether another process holds an exclusive flock on `path` (a non-blocking attempt fails).
fn lock_is_held(path: &std::path::Path) -> bool {
    use nix::fcntl::{Flock, FlockArg};
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
        Ok(_released_on_drop) => false,
        Err(_) => true,
    }
}

/// The interrupt is the daemon's cancel, carried out by the engine: the execution's
/// database holds the experiment cancelled with the interrupt's reason, the stopped job
/// closed by the engine's cancel path (its own wording), and every run that had not
/// finished cancelled with that reason (which is what a resume reopens) — the two finished
/// ones kept. A Ctrl-C handled beside the engine (runs sent back to pending by hand, the
/// experiment left `running`, the job closed with another detail) fails here.
fn interrupt_went_through_the_engines_cancel(root: &std::path::Path) {
    use optgate_store::{ExperimentState, JobRecordState, RunState, Store};
    let store = Store::open_read_only(&root.join(".optgate/optgate.db")).unwrap();
    let exps = store.experiments().unwrap();
    assert_eq!(exps.len(), 1);
    let e = &exps[0];
    assert_eq!(e.state, ExperimentState::Cancelled);
    assert_eq!(
        e.state_reason.as_deref(),
        Some(optgate_daemon::foreground::INTERRUPTED)
    );
    let runs = store.runs(&e.id).unwrap();
    let completed = runs
        .iter()
        .filter(|r| r.state == RunState::Completed)
        .count();
    assert_eq!(completed, 2, "{runs:?}");
    for r in runs.iter().filter(|r| r.state != RunState::Completed) {
        assert_eq!(r.state, RunState::Cancelled, "{r:?}");
        assert_eq!(
            r.detail.as_deref(),
            Some(optgate_daemon::foreground::INTERRUPTED),
            "{r:?}"
        );
    }
    let jobs = store.jobs(&e.id).unwrap();
    let stopped: Vec<_> = jobs
        .iter()
        .filter(|j| j.state == JobRecordState::Cancelled)
        .collect();
    assert_eq!(stopped.len(), 1, "{jobs:?}");
    assert_eq!(
        stopped[0].detail.as_deref(),
        Some("stopped: the experiment is cancelled"),
        "{jobs:?}"
    );
    assert!(jobs.iter().all(|j| !j.state.is_live()), "{jobs:?}");
}

/// `optgate run`'s engine is the daemon's, under the daemon's supervisor: an engine that
/// panics mid-way (right after the second job's end is recorded) is started again,
/// reconciles, and the execution ends with every run counted once. Without the supervisor
/// the execution would wait for an engine that is gone: the bounded wait fails the test.
#[test]
fn the_engine_of_run_is_started_again_after_it_panics() {
    use optgate_daemon::foreground::{End, Options, run};
    let dir = tempfile::tempdir().unwrap();
    let p = write_experiment(dir.path(), &fake_app_experiment("supervised", ""));
    let exp = optgate_experiment::load(&p).unwrap().experiment;
    let failpoints = std::sync::Arc::new(optgate_daemon::failpoint::Failpoints::default());
    failpoints.arm("after-job-end", 2);
    let root = dir.path().join("exec");
    let opts = Options {
        root: root.clone(),
        machine_lock: dir.path().join("local-runs.lock"),
        optgate_bin: env!("CARGO_BIN_EXE_optgate").into(),
        settings: Default::default(),
        failpoints: failpoints.clone(),
        no_space_give_up: optgate_daemon::space::NO_SPACE_GIVE_UP,
        history: None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let interrupt = tokio_util::sync::CancellationToken::new();
    let end = runtime
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(300), run(&exp, opts, |_| {}, interrupt)).await
        })
        .expect("the execution never ended: its engine died and nothing started it again")
        .unwrap();
    assert!(failpoints.fired(), "the engine never reached the point");
    let End::Finished {
        row, failed_runs, ..
    } = end
    else {
        panic!("{end:?}")
    };
    assert!(
        row.state.is_terminal()
            && !matches!(
                row.state,
                optgate_store::ExperimentState::Failed | optgate_store::ExperimentState::Cancelled
            ),
        "{row:?}"
    );
    assert!(failed_runs.is_empty(), "{failed_runs:?}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["variants"][0]["n_variant"], 5);
}
