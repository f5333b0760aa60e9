//! The daemon's commands through the real binary: no daemon (exit 4), an invalid
//! experiment refused before it reaches the daemon with `validate`'s messages, unknown
//! ids, background start and stop, auto-start on submit, cancel, gate's exit codes,
//! `status --watch`, and every report format.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::*;

const DEADLINE: Duration = Duration::from_secs(300);

/// A small experiment with one look (`max_replicates` = `replicates`: these tests are about
/// the commands, not the looks).
fn experiment(name: &str, sleep: &str) -> String {
    format!(
        r#"name: {name}
app:
  command: [bash, -c, 'sleep {sleep}; if [ "${{X:-0}}" = 1 ]; then b=$((700 + OPTGATE_BLOCK * 7)); else b=$((1000 + OPTGATE_BLOCK * 3)); fi; for e in 1 2 3; do echo "epoch $e took $((b + e * 11)).0 s"; done']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 6
max_replicates: 6
variants:
  - name: v1
    dimension: l2_threading_model
    env: {{ X: "1" }}
"#
    )
}

#[test]
fn without_a_daemon_every_command_says_so_with_exit_4() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let exp = write_experiment(dir.path(), &experiment("nodaemon", "0"));
    for args in [
        vec!["status"],
        vec!["status", "x", "--json"],
        vec!["report", "x"],
        vec!["gate", "x"],
        vec!["cancel", "x"],
        vec!["daemon", "stop"],
        vec!["submit", exp.to_str().unwrap(), "--no-start"],
    ] {
        let o = cli(&home, &args);
        assert_eq!(o.status.code(), Some(4), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("the optgate daemon is not running"),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(stdout(&o).is_empty(), "{args:?}");
    }
}

#[test]
fn an_invalid_experiment_never_reaches_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let exp = write_experiment(
        dir.path(),
        &experiment("bad", "0").replace("\nreplicates: 6", "\nreplicates: 6\nreplicate: 7"),
    );
    let validate = cli(&home, &["validate", exp.to_str().unwrap()]);
    let submit = cli(&home, &["submit", exp.to_str().unwrap()]);
    assert_eq!(validate.status.code(), Some(2));
    assert_eq!(submit.status.code(), Some(2), "{}", stderr(&submit));
    // The same located diagnostic, word for word.
    let diag = stderr(&validate)
        .lines()
        .find(|l| l.contains("replicate"))
        .unwrap()
        .to_string();
    assert!(stderr(&submit).contains(&diag), "{}", stderr(&submit));
    assert!(stdout(&submit).is_empty());
    // Nothing was started for it.
    assert!(!home.join("sock/daemon.sock").exists());
    assert!(!home.join("daemon.pid").exists());
}

#[test]
fn the_daemon_commands_from_start_to_stop() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());

    // submit starts the daemon when none runs; stdout holds the id and nothing else.
    let fast = write_experiment(dir.path(), &experiment("fast", "0.05"));
    let o = cli(&home, &["submit", fast.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("started the daemon"), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 1, "{out:?}");
    let fast_id = out.trim().to_string();

    // A second start is told the daemon runs; a second foreground daemon is refused.
    let o = cli(&home, &["daemon"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("already running"), "{}", stderr(&o));
    let o = cli(&home, &["daemon", "--foreground"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stderr(&o).contains("another optgate daemon (pid"),
        "{}",
        stderr(&o)
    );

    // Unknown ids.
    for args in [
        vec!["status", "nope"],
        vec!["report", "nope"],
        vec!["gate", "nope"],
        vec!["cancel", "nope"],
    ] {
        let o = cli(&home, &args);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("no experiment `nope`"),
            "{}",
            stderr(&o)
        );
    }

    // --watch follows the fast experiment to its end.
    let o = cli(&home, &["status", &fast_id, "--watch"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("decided"), "{}", stdout(&o));
    let s = status(&home, &fast_id);
    assert_eq!(s["state"], "decided");
    assert_eq!(s["runs"]["done"], 12);
    assert_eq!(s["looks"], 1);
    assert_eq!(s["planned_looks"], 1);
    assert_eq!(s["decisions"][0]["decision"], "accept");
    let o = cli(&home, &["gate", &fast_id]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).starts_with("v1: accept"), "{}", stdout(&o));
    let o = cli(&home, &["gate", &fast_id, "--variant", "v1"]);
    assert_eq!(o.status.code(), Some(0));
    // A misspelt variant is an error (3, like an unknown id), never "inconclusive" (2).
    let o = cli(&home, &["gate", &fast_id, "--variant", "v2"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stderr(&o).contains("its variants are: v1"),
        "{}",
        stderr(&o)
    );

    // Every report format; JSON is the report object with metadata and provenance.
    for format in ["table", "markdown", "csv"] {
        let o = cli(&home, &["report", &fast_id, "--format", format]);
        assert_eq!(o.status.code(), Some(0), "{format}: {}", stderr(&o));
        assert!(stdout(&o).contains("v1"), "{format}");
    }
    let o = cli(&home, &["report", &fast_id, "--json"]);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["baseline"], "baseline");
    assert_eq!(report["experiment"]["name"], "fast");
    assert!(report["checklist"].as_array().unwrap().len() >= 10);
    assert_eq!(report["provenance"]["experiment_id"], fast_id.as_str());
    assert_eq!(report["provenance"]["sequential"]["planned_looks"], 1);
    assert!(
        report["sequential"].is_null(),
        "one look: the plain analysis"
    );

    // A slow experiment: no report before its first look, gate says "running", cancel
    // stops it, and gate then refuses.
    let slow = write_experiment(dir.path(), &experiment("slow", "30"));
    let o = cli(&home, &["submit", slow.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let slow_id = stdout(&o).trim().to_string();
    let o = cli(&home, &["report", &slow_id]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no report yet"), "{}", stderr(&o));
    let o = cli(&home, &["gate", &slow_id]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).contains("still"), "{}", stdout(&o));
    // Before any look, a misspelt variant is already known to be one: a pipeline that
    // waits while gate exits 2 would otherwise wait for the whole experiment.
    let o = cli(&home, &["gate", &slow_id, "--variant", "v1x"]);
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("has no variant `v1x`; its variants are: v1"),
        "{}",
        stderr(&o)
    );
    let o = cli(&home, &["cancel", &slow_id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("cancelled"), "{}", stderr(&o));
    // It says its jobs are stopped only once none is live any more.
    assert!(
        stderr(&o).contains("every job of it is stopped"),
        "{}",
        stderr(&o)
    );
    let s = status(&home, &slow_id);
    assert_eq!(s["state"], "cancelled");
    let live = |s: &Value| {
        s["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| ["submitting", "submitted"].contains(&j["state"].as_str().unwrap()))
    };
    assert!(!live(&s), "said stopped with jobs live: {s:#}");
    let o = cli(&home, &["gate", &slow_id]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("was cancelled"), "{}", stderr(&o));
    let o = cli(&home, &["cancel", &slow_id]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("already ended"), "{}", stderr(&o));
    // Its jobs are stopped: none stays live, no run is left queued.
    let t0 = Instant::now();
    loop {
        let s = status(&home, &slow_id);
        let live = s["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| ["submitting", "submitted"].contains(&j["state"].as_str().unwrap()))
            .count();
        if live == 0 && s["runs"]["queued"] == 0 {
            assert_eq!(s["runs"]["completed"], 0, "{s:#}");
            break;
        }
        assert!(t0.elapsed() < DEADLINE, "{s:#}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // The table lists both.
    let o = cli(&home, &["status"]);
    let table = stdout(&o);
    assert!(table.starts_with("ID"), "{table}");
    assert!(
        table.contains(&fast_id) && table.contains(&slow_id),
        "{table}"
    );
    // RUNS counts measured runs: the cancelled one reads 0/12, not 12/12 (B6).
    let slow_line = table.lines().find(|l| l.starts_with(&slow_id)).unwrap();
    assert!(slow_line.contains(" 0/12 (12 cancelled)"), "{table}");
    let fast_line = table.lines().find(|l| l.starts_with(&fast_id)).unwrap();
    assert!(fast_line.contains(" 12/12 "), "{table}");

    let o = cli(&home, &["daemon", "stop"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // With the daemon stopped the answers are still in its database: status, report and
    // gate read it (read-only) and say so, instead of exiting 4.
    let o = cli(&home, &["status"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains(&fast_id), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("the daemon is not running"),
        "{}",
        stderr(&o)
    );
    let s = status(&home, &fast_id);
    assert_eq!(s["state"], "decided");
    let o = cli(&home, &["status", &fast_id, "--watch"]);
    assert_eq!(o.status.code(), Some(0), "--watch ends: {}", stderr(&o));
    let o = cli(&home, &["report", &fast_id, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["variants"][0]["decision"], "accept");
    let o = cli(&home, &["gate", &fast_id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = cli(&home, &["gate", "nope"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    // Commands that need the daemon still say it is not running.
    let o = cli(&home, &["cancel", &fast_id]);
    assert_eq!(o.status.code(), Some(4));
    assert!(!home.join("sock/daemon.sock").exists());
}

/// The state directory is checked before anything in it is opened: one that other users
/// can write is refused by the daemon and by `optgate run` (they could plant a database,
/// a log link, a build); a daemon's files are private.
#[test]
fn the_state_directory_must_be_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = cli(&home, &["daemon", "--foreground"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is writable by other users (mode 777)"),
        "{}",
        stderr(&o)
    );
    assert!(
        !home.join("optgate.db").exists(),
        "opened a database anyway"
    );
    let exp = write_experiment(dir.path(), &fake_app_experiment("private", ""));
    let o = optgate()
        .args(["run", exp.to_str().unwrap(), "--quiet"])
        .env("OPTGATE_HOME", &home)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("writable by other users"),
        "{}",
        stderr(&o)
    );

    // A directory others may only read is tightened; the daemon's files are 0600.
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let _guard = StopOnDrop(home.clone());
    let o = cli(&home, &["daemon"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&home), 0o700);
    for f in ["optgate.db", "daemon.log", "daemon.pid", "daemon.lock"] {
        assert_eq!(mode(&home.join(f)), 0o600, "{f}");
    }
}

/// With no daemon, `status` and `report` read its database read-only, but only where the
/// daemon itself would open it (`StatePaths::check_for_reading`, the daemon's own check):
/// a linked `optgate.db`, one of another user, and a state directory under a directory
/// others can write are refused by the readers as by the daemon. Catches: the readers
/// opening the database without the check (link and owner), and the check not walking the
/// ancestors (the world-writable parent).
#[test]
fn readers_refuse_what_the_daemon_refuses() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("parent");
    let home = parent.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let o = cli(&home, &["daemon"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = cli(&home, &["daemon", "stop"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let readers: [&[&str]; 2] = [&["status"], &["report", "nope"]];
    let refused_by_all = |why: &str| {
        for args in readers
            .iter()
            .copied()
            .chain([&["daemon", "--foreground"][..]])
        {
            let o = cli(&home, args);
            assert_eq!(o.status.code(), Some(3), "{args:?}: {}", stderr(&o));
            assert!(stderr(&o).contains(why), "{args:?}: {}", stderr(&o));
        }
    };
    let o = cli(&home, &["status"]);
    assert_eq!(o.status.code(), Some(0), "untampered: {}", stderr(&o));

    let db = home.join("optgate.db");
    let moved = dir.path().join("moved.db");
    std::fs::rename(&db, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &db).unwrap();
    refused_by_all("is a symbolic link");
    std::fs::remove_file(&db).unwrap();
    std::fs::rename(&moved, &db).unwrap();

    // Only root can give a file to another user; CI and tests/run-all.sh run as root.
    // Elsewhere the skip must be asked for, as the paths module's tests do.
    let me = nix::unistd::getuid();
    if me.is_root() {
        nix::unistd::chown(&db, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        refused_by_all("belongs to uid 65534");
        nix::unistd::chown(&db, Some(me), None).unwrap();
    } else {
        assert!(
            std::env::var_os("OPTGATE_SKIP_AS_NOBODY").is_some_and(|v| v == "1"),
            "needs root (run tests/run-all.sh as root), or set OPTGATE_SKIP_AS_NOBODY=1"
        );
        eprintln!("SKIPPED: the foreign-owned database needs root to chown");
    }

    std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o777)).unwrap();
    refused_by_all("above the state directory, is writable by other users (mode 777)");
    std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let o = cli(&home, &["status"]);
    assert_eq!(o.status.code(), Some(0), "a sticky parent: {}", stderr(&o));
}

/// Without `max_replicates` there is one look and no budget: an experiment whose variant
/// stays inconclusive ends `decided` (its decision is "inconclusive"), not
/// `budget_exhausted`.
#[test]
fn one_look_inconclusive_is_decided_not_budget_exhausted() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    // The variant is twice as fast in some blocks and twice as slow in others.
    let yaml = r#"name: mixed
app:
  command: [bash, -c, 'f=1000; if [ "${X:-0}" = 1 ]; then case $OPTGATE_BLOCK in 1|3) f=500;; 2|4) f=2000;; *) f=1001;; esac; fi; for e in 1 2 3; do echo "epoch $e took $f.0 s"; done']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 5
max_replicates: 5
variants:
  - name: v1
    dimension: l2_threading_model
    env: { X: "1" }
"#;
    let exp = write_experiment(dir.path(), yaml);
    let id = submit(&home, &exp);
    let o = cli(&home, &["status", &id, "--watch"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = status(&home, &id);
    assert_eq!(s["state"], "decided", "{s:#}");
    assert_eq!(s["decisions"][0]["decision"], "inconclusive", "{s:#}");
    assert_eq!(s["blocks"], 5, "no block beyond the one look");
    let o = cli(&home, &["gate", &id]);
    assert_eq!(o.status.code(), Some(2), "inconclusive: {}", stdout(&o));
}

/// A job the scheduler already reported ended keeps that end when its experiment is
/// cancelled (B7): a job that finished while the daemon was stopped is listed `finished`
/// after a cancel, not `cancelled`, and its runs count as completed. (The window the fix
/// closes — a cancel landing between a poll that saw the end and its processing — is not
/// forced here; the engine's `stop_ended` is where it is handled.)
#[test]
fn a_cancel_keeps_the_end_of_jobs_that_already_finished() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let exp = write_experiment(dir.path(), &experiment("finished", "0.05"));
    let id = submit(&home, &exp);
    // Once block 1's job is submitted (a local experiment submits a block at a time), stop
    // the daemon; the local job goes on alone.
    let t0 = Instant::now();
    let (root, first) = loop {
        let s = status(&home, &id);
        let jobs = s["jobs"].as_array().cloned().unwrap_or_default();
        if let Some(j) = jobs.iter().find(|j| j["scheduler_job_id"].is_string()) {
            break (
                std::path::PathBuf::from(s["root"].as_str().unwrap()),
                j["name"].as_str().unwrap().to_string(),
            );
        }
        assert!(t0.elapsed() < DEADLINE, "{s:#}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(first.ends_with("-b001"), "{first}");
    let o = cli(&home, &["daemon", "stop"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Its runs finish while no daemon watches.
    let finished = |run: &str| root.join("runs").join(run).join("manifest.json").exists();
    while !(finished("b001-baseline") && finished("b001-v1")) {
        assert!(t0.elapsed() < DEADLINE, "runs never finished");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Start the daemon and cancel at once: the job ended before the cancel.
    let o = cli(&home, &["daemon"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = cli(&home, &["cancel", &id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    loop {
        let s = status(&home, &id);
        let jobs = s["jobs"].as_array().unwrap();
        let live = jobs
            .iter()
            .filter(|j| ["submitting", "submitted"].contains(&j["state"].as_str().unwrap()))
            .count();
        if s["state"] == "cancelled" && live == 0 && s["runs"]["queued"] == 0 {
            let j = jobs.iter().find(|j| j["name"] == first.as_str()).unwrap();
            assert_eq!(j["state"], "finished", "{j}");
            assert!(s["runs"]["completed"].as_u64().unwrap() >= 2, "{s:#}");
            break;
        }
        assert!(t0.elapsed() < DEADLINE, "{s:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A log that cannot be written never stops the daemon: with stderr on `/dev/full` and
/// debug logging, a foreground daemon keeps answering and its experiment is decided
/// (before, the subscriber's own error report panicked on the same stderr: exit 101).
#[test]
fn a_log_that_cannot_be_written_does_not_stop_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let mut daemon = optgate()
        .args(["daemon", "--foreground"])
        .env("OPTGATE_HOME", &home)
        .env("OPTGATE_LOG", "debug")
        .stdout(std::process::Stdio::null())
        .stderr(full)
        .spawn()
        .unwrap();
    let _guard = StopOnDrop(home.clone());
    let start = Instant::now();
    while cli(&home, &["status"]).status.code() != Some(0) {
        assert!(
            daemon.try_wait().unwrap().is_none(),
            "the daemon exited: {:?}",
            daemon.try_wait()
        );
        assert!(start.elapsed() < DEADLINE, "the daemon never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
    let exp = write_experiment(dir.path(), &experiment("fulllog", "0"));
    let o = cli(&home, &["submit", exp.to_str().unwrap(), "--no-start"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = stdout(&o).trim().to_string();
    let o = cli(&home, &["status", &id, "--watch"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(status(&home, &id)["state"], "decided");
    let o = cli(&home, &["daemon", "stop"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(daemon.wait().unwrap().code(), Some(0));
}

/// 300 clients that send a large request and never read a byte: the daemon holds at
/// most its connection limit at once and reads at most its limit of large requests, so
/// its memory stays bounded, and it still stops when asked.
#[test]
fn clients_that_never_read_neither_grow_nor_hold_up_the_daemon() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let o = cli(&home, &["daemon"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let pid: i32 = std::fs::read_to_string(home.join("daemon.pid"))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let rss_kib = || -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    // A submit whose experiment text is 900 KB of comment: the daemon must read all of it.
    let text = format!("# {}\n", "x".repeat(900 * 1024));
    let request =
        serde_json::json!({"submit": {"source_path": "/nowhere/exp.yaml", "source_text": text}});
    let lines = format!(
        "{}\n{}\n",
        serde_json::json!({"protocol": 1, "version": "test"}),
        request
    );
    // Open sockets of the daemon: its listener, its connections, the database's none.
    let sockets = || -> usize {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        std::fs::read_link(e.path())
                            .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
                    })
                    .count()
            })
            .unwrap_or(0)
    };
    let sockets_before = sockets();
    // Each client writes its whole request (as long as the daemon reads it, for at most
    // 5 s), then holds the connection open without reading until the test ends.
    let lines = std::sync::Arc::new(lines);
    let hold = std::sync::Arc::new(std::sync::Barrier::new(301));
    let clients: Vec<_> = (0..300)
        .map(|_| {
            let (lines, hold, socket) =
                (lines.clone(), hold.clone(), home.join("sock/daemon.sock"));
            std::thread::spawn(move || {
                let s = std::os::unix::net::UnixStream::connect(socket);
                if let Ok(mut s) = s.as_ref().map(|s| s.try_clone().unwrap()) {
                    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
                    let _ = s.write_all(lines.as_bytes());
                }
                hold.wait();
                drop(s);
            })
        })
        .collect();
    let (mut peak, mut peak_sockets) = (0, 0);
    let idle_sockets = sockets_before;
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(100));
        peak = peak.max(rss_kib());
        peak_sockets = peak_sockets.max(sockets());
    }
    eprintln!("daemon: at most {peak_sockets} open sockets with 300 clients, {idle_sockets} idle");
    // Its own (listener, signal pipes), the connection limit, and one being turned away.
    let limit = optgate_daemon::server::MAX_CONNECTIONS;
    assert!(
        peak_sockets <= idle_sockets + limit + 1,
        "{peak_sockets} sockets open at once ({idle_sockets} idle)"
    );
    assert!(peak > 0, "no RSS read for pid {pid}");
    eprintln!("daemon peak RSS with 300 clients: {} KiB", peak);
    assert!(
        peak < 100 * 1024,
        "the daemon grew to {} MiB with 300 clients",
        peak / 1024
    );
    // Still answering, and it stops while those clients hang on.
    let o = cli(&home, &["daemon", "stop"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let start = Instant::now();
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
    {
        assert!(start.elapsed() < DEADLINE, "the daemon did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
    hold.wait();
    for c in clients {
        c.join().unwrap();
    }
}

/// `optgate daemon stop` does not wait for a scheduler that hangs: with an `sbatch` on
/// PATH that never answers (it sleeps for ever), the stop ends the hung command and the
/// daemon exits (before, the call ran to its 120 s deadline and then retried with back-off
/// for minutes). The proof is the hung `sbatch` itself: gone when the daemon has exited,
/// which only a signal can do to it.
#[test]
fn daemon_stop_does_not_wait_for_a_hanging_scheduler() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let mark = dir.path().join("sbatch-called");
    let sbatch = bin.join("sbatch");
    std::fs::write(
        &sbatch,
        format!(
            "#!/bin/sh\necho $$ > '{0}.tmp'; mv '{0}.tmp' '{0}'\nexec sleep infinity\n",
            mark.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&sbatch, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut daemon = optgate()
        .args(["daemon", "--foreground"])
        .env("OPTGATE_HOME", &home)
        .env("PATH", &path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _guard = StopOnDrop(home.clone());
    let yaml = experiment("hung", "0").replace(
        "\nreplicates: 6",
        "\nscheduler: { kind: slurm, time_limit: 10m }\nreplicates: 6",
    );
    let exp = write_experiment(dir.path(), &yaml);
    let start = Instant::now();
    loop {
        let o = cli(&home, &["submit", exp.to_str().unwrap(), "--no-start"]);
        if o.status.code() == Some(0) {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "{}", stderr(&o));
        std::thread::sleep(Duration::from_millis(100));
    }
    // The hung sbatch, started by the daemon this test spawned.
    // The fake sbatch writes its pid just before it execs `sleep`: wait until the
    // process is the sleeper, not only until the pid is written.
    let not_before = proc_start_time(daemon.id() as i32).unwrap().0;
    let hung = wait_for("sbatch to be called and become `sleep`", DEADLINE, || {
        let pid = std::fs::read_to_string(&mark).ok()?.trim().parse().ok()?;
        CheckedProcess::found(pid, not_before, "sleep").ok()
    });
    let o = cli(&home, &["daemon", "stop"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let code = wait_for(
        "the daemon to exit after `daemon stop` while sbatch hangs",
        DEADLINE,
        || daemon.try_wait().unwrap(),
    )
    .code();
    let ended_by_the_stop = !hung.is_alive();
    // Never leave the sleeper behind, whatever the outcome.
    hung.signal(nix::sys::signal::Signal::SIGKILL);
    assert_eq!(code, Some(0));
    assert!(
        ended_by_the_stop,
        "the daemon exited leaving its hung sbatch running: {hung:?}"
    );
}

/// A look that fails the same way at every pass (here its samples file cannot be written:
/// a directory is in the way) ends the experiment `failed` after a bounded number of
/// attempts, with the error quoted, instead of `analysing` for ever.
#[test]
fn a_look_that_keeps_failing_ends_failed_with_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let exp = write_experiment(dir.path(), &experiment("lookfails", "0.3"));
    let id = submit(&home, &exp);
    let root = std::path::PathBuf::from(status(&home, &id)["root"].as_str().unwrap());
    // In the way of the look's samples.csv, for as long as the test runs.
    std::fs::create_dir_all(root.join("samples.csv/in-the-way")).unwrap();
    let o = cli(&home, &["status", &id, "--watch"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = status(&home, &id);
    assert_eq!(s["state"], "failed", "{s:#}");
    let reason = s["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("gave up after 5 attempts in a row") && reason.contains("samples.csv"),
        "{reason}"
    );
    assert_eq!(s["runs"]["completed"], 12, "{s:#}");
}

/// One failed run in a paired experiment under the daemon: its block is left out, the
/// experiment ends `decided` (before: `analysing` for ever, "block 3 has no partner").
#[test]
fn one_failed_run_under_the_daemon_ends_decided() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let yaml = experiment("onefaild", "0").replace(
        "command: [bash, -c, '",
        "command: [bash, -c, '[ \"$OPTGATE_RUN_ID\" = b003-v1 ] && exit 9; ",
    );
    assert!(yaml.contains("b003-v1"), "{yaml}");
    let exp = write_experiment(dir.path(), &yaml);
    let id = submit(&home, &exp);
    let o = cli(&home, &["status", &id, "--watch"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = status(&home, &id);
    assert_eq!(s["state"], "decided", "{s:#}");
    assert_eq!(s["runs"]["failed"], 1, "{s:#}");
    assert_eq!(s["decisions"][0]["decision"], "accept", "{s:#}");
    let o = cli(&home, &["report", &id, "--json"]);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let v = &report["variants"][0];
    assert_eq!(v["n_variant"], 5, "{v:#}");
    assert!(
        v["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .unwrap()
            .contains("block 3 (no complete run of 'v1')")),
        "{v:#}"
    );
}

/// `optgate run` and `optgate submit` of the same experiment give reports of the same
/// shape: the same top-level fields, the same provenance fields, the same per-variant
/// fields — both are the engine's (`optgate run` runs it in its own process), with their
/// looks and their local jobs.
#[test]
fn run_and_submit_give_reports_of_the_same_shape() {
    /// The object's keys, less those written only when the machine was measured under load
    /// (`loaded_blocks`, present when some block had a loaded run): a fact of the moment the
    /// runs ran, not of the report's shape.
    fn keys(v: &Value) -> Vec<String> {
        const PRESENT_ONLY_UNDER_LOAD: [&str; 1] = ["loaded_blocks"];
        v.as_object()
            .map(|m| {
                m.keys()
                    .filter(|k| !PRESENT_ONLY_UNDER_LOAD.contains(&k.as_str()))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let exp = write_experiment(dir.path(), &experiment("parity", "0"));
    let o = optgate()
        .args([
            "run",
            exp.to_str().unwrap(),
            "--out",
            dir.path().join("exec").to_str().unwrap(),
            "--quiet",
            "--json",
        ])
        .env("OPTGATE_HOME", &home)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ran: Value = serde_json::from_slice(&o.stdout).unwrap();
    let id = submit(&home, &exp);
    let o = cli(&home, &["status", &id, "--watch"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = cli(&home, &["report", &id, "--json"]);
    let submitted: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(keys(&ran), keys(&submitted));
    assert_eq!(keys(&ran["provenance"]), keys(&submitted["provenance"]));
    assert_eq!(
        keys(&ran["provenance"]["sequential"]),
        keys(&submitted["provenance"]["sequential"])
    );
    assert_eq!(keys(&ran["variants"][0]), keys(&submitted["variants"][0]));
    assert_eq!(
        ran["provenance"]["sequential"], submitted["provenance"]["sequential"],
        "the same looks, the same decisions at each"
    );
    // One local job per block, under the same names but for the experiment id.
    let names = |r: &Value| -> Vec<String> {
        let id = r["provenance"]["experiment_id"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(!id.is_empty());
        r["provenance"]["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["name"].as_str().unwrap().replace(&id, "ID"))
            .collect()
    };
    assert_eq!(names(&ran), names(&submitted));
    assert_eq!(names(&ran).len(), 6, "{:#}", ran["provenance"]["jobs"]);
    // The same data, the same decision.
    assert_eq!(
        ran["variants"][0]["decision"],
        submitted["variants"][0]["decision"]
    );
}
