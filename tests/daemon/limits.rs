//! The daemon under hostile clients and faults, through the real binary: silent and
//! trickling connections never keep `optgate status` out, a deeply nested submission is
//! refused before it is parsed, `daemon stop` returns only once the process is gone while
//! no second daemon starts beside a stopping one, and `status` lists the experiments of a
//! database with a damaged row.

use crate::support;

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use support::*;

const DEADLINE: Duration = Duration::from_secs(60);

/// The sockets the process `pid` has open.
fn open_sockets(pid: i32) -> usize {
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
}

/// Whether the daemon still holds `stream` open: nothing to read yet, and no end of
/// stream (a refusal or a timeout would have written a line and closed).
fn held_open(stream: &UnixStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let open = matches!((&*stream).read(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock);
    stream.set_nonblocking(false).unwrap();
    open
}

/// A daemon started in the background for `home`, checked to be this build's binary.
fn start_daemon(home: &Path) -> CheckedProcess {
    let o = cli(home, &["daemon"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    CheckedProcess::daemon_of(home)
}

/// 100 clients that connect and say nothing and 100 that send one byte at a time (spaces,
/// which never end a line) are all held by the daemon while `optgate status` is answered:
/// they cost connections, not what a request needs. Planted bugs caught: a connection
/// limit that counts them with the request slots (16: the rest are turned away, and status
/// waits until the first are dropped), or no deadline before the hello (the last check).
#[test]
fn status_answers_while_silent_and_trickling_clients_hold_connections() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let daemon = start_daemon(&home);
    let socket = home.join("sock/daemon.sock");
    let silent: Vec<UnixStream> = (0..100)
        .map(|_| UnixStream::connect(&socket).unwrap())
        .collect();
    let trickling: Vec<UnixStream> = (0..100)
        .map(|_| UnixStream::connect(&socket).unwrap())
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let trickler = {
        let streams: Vec<UnixStream> = trickling.iter().map(|s| s.try_clone().unwrap()).collect();
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for mut s in &streams {
                    let _ = s.write_all(b" ");
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    // Every one of them accepted: the daemon holds them (and its listener), not the
    // listen queue.
    wait_for("the daemon to accept 200 clients", DEADLINE, || {
        (open_sockets(daemon.pid) > 200).then_some(())
    });
    let t0 = std::time::Instant::now();
    let o = cli(&home, &["status"]);
    eprintln!("status with 200 clients connected: {:?}", t0.elapsed());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("no experiments"), "{}", stdout(&o));
    let dropped = silent
        .iter()
        .chain(&trickling)
        .filter(|s| !held_open(s))
        .count();
    assert_eq!(
        dropped, 0,
        "the daemon dropped or turned away {dropped} of 200 clients before status was answered"
    );
    // They do not hold on for ever: the handshake deadline drops every one.
    wait_for("the daemon to drop the silent clients", DEADLINE, || {
        silent.iter().all(|s| !held_open(s)).then_some(())
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    trickler.join().unwrap();
    let mut reply = String::new();
    let mut first = &silent[0];
    first.read_to_string(&mut reply).unwrap();
    assert!(reply.contains("no complete hello within"), "{reply}");
}

/// One raw exchange with the daemon of `home`: hello, then `request`; the reply line.
fn exchange(home: &Path, request: &serde_json::Value) -> serde_json::Value {
    let mut s = UnixStream::connect(home.join("sock/daemon.sock")).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let hello = serde_json::json!({"protocol": 1, "version": "test"});
    writeln!(s, "{hello}\n{request}").unwrap();
    let mut lines = std::io::BufReader::new(s);
    let mut read = || {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut lines, &mut line).unwrap();
        serde_json::from_str::<serde_json::Value>(&line).unwrap()
    };
    let welcome = read();
    assert!(welcome.get("welcome").is_some(), "{welcome}");
    read()
}

/// A submission nesting 100,000 lists (200 KB, under the request limit) is refused as
/// nested too deep before any parser sees it, and the daemon stops at once afterwards.
/// Planted bug caught: no pre-parse check (the reply is the loader's, after ~50 s of CPU,
/// or none within the client's deadline).
#[test]
fn a_deeply_nested_submission_is_refused_before_parsing() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let daemon = start_daemon(&home);
    for text in ["[".repeat(100_000), "- ".repeat(100_000)] {
        let request = serde_json::json!({"submit": {
            "source_path": dir.path().join("deep.yaml"), "source_text": text}});
        let reply = exchange(&home, &request);
        let error = &reply["error"];
        assert_eq!(error["kind"], "invalid_experiment", "{reply}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains("refused before parsing"), "{message}");
        assert!(message.len() < 4096, "{} bytes", message.len());
    }
    let o = cli(&home, &["daemon", "stop"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        !daemon.is_alive(),
        "`daemon stop` returned 0 with {daemon:?} running"
    );
}

/// A child this test spawned, killed if the test ends before it has.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// `daemon stop` returns only when the daemon's process is gone, and while it exits (held
/// up here at its last step by `OPTGATE_STALL`) a second daemon on the same state
/// directory is refused. Planted bugs caught: "stopped" said on the socket or the lock
/// alone (the recorded process is still alive when stop returns), and the lock released
/// before the process ends (the second daemon starts).
#[test]
fn daemon_stop_waits_for_the_process_and_no_second_daemon_starts_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let mut first = optgate()
        .args(["daemon", "--foreground"])
        .env("OPTGATE_HOME", &home)
        .env("OPTGATE_STALL", "exiting:8000")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let daemon = CheckedProcess::daemon_of(&home);
    assert_eq!(daemon.pid, first.id() as i32);
    // Answered by the daemon itself (pid 0 is the database read while none runs).
    wait_for("the daemon to answer", DEADLINE, || {
        let o = cli(&home, &["status", "--json"]);
        let json: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
        (json["daemon"]["pid"] == daemon.pid).then_some(())
    });
    let mut stop = optgate()
        .args(["daemon", "stop"])
        .env("OPTGATE_HOME", &home)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The daemon has stopped serving (its socket is gone) and is still exiting.
    wait_for("the daemon to stop serving", DEADLINE, || {
        (!home.join("sock/daemon.sock").exists()).then_some(())
    });
    assert!(daemon.is_alive(), "the stall did not hold the daemon");
    let mut second = KillOnDrop(
        optgate()
            .args(["daemon", "--foreground"])
            .env("OPTGATE_HOME", &home)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let second_code = wait_for("the second daemon to give up", DEADLINE, || {
        second.0.try_wait().unwrap()
    });
    let mut second_err = String::new();
    let pipe = second.0.stderr.take();
    pipe.unwrap().read_to_string(&mut second_err).unwrap();
    assert_eq!(second_code.code(), Some(3), "{second_err}");
    assert!(
        second_err.contains("another optgate daemon"),
        "{second_err}"
    );
    let stop_code = wait_for("`daemon stop` to return", DEADLINE, || {
        stop.try_wait().unwrap()
    });
    let still_alive = daemon.is_alive();
    let mut stop_err = String::new();
    stop.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stop_err)
        .unwrap();
    assert_eq!(stop_code.code(), Some(0), "{stop_err}");
    assert!(stop_err.contains("daemon stopped"), "{stop_err}");
    assert!(
        !still_alive,
        "`daemon stop` returned 0 with {daemon:?} running"
    );
    assert_eq!(first.wait().unwrap().code(), Some(0));
}

/// Two experiments in a stopped daemon's database, one with a scheduler kind this optgate
/// does not know (a damaged row): `optgate status` lists the good one and shows the other
/// as damaged, saying why; `status ID` of the damaged one does too. Planted bug caught:
/// one damaged row failing the whole listing (as `Store::experiments` does).
#[test]
fn status_lists_the_others_when_one_row_is_damaged() {
    use optgate_store::{NewExperiment, SchedulerKind, Store};
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    optgate_client::StatePaths::new(&home).prepare().unwrap();
    let db = home.join("optgate.db");
    let mut store = Store::open(&db).unwrap();
    for (id, name) in [("e-good", "good"), ("e-bad", "bad")] {
        let e = NewExperiment {
            id: id.into(),
            name: name.into(),
            source_path: "/x/exp.yaml".into(),
            source_text: "name: x\n".into(),
            source_sha256: "ab".repeat(32),
            root: format!("/x/optgate-runs/{id}"),
            scheduler: SchedulerKind::Local,
            replicates: 5,
            max_replicates: 5,
        };
        store.insert_experiment(&e, &[], &[]).unwrap();
    }
    drop(store);
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(
        "PRAGMA ignore_check_constraints = ON; \
         UPDATE experiments SET scheduler = 'lcoal' WHERE id = 'e-bad'",
    )
    .unwrap();
    drop(c);
    let o = cli(&home, &["status"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let row = |id: &str| {
        out.lines()
            .find(|l| l.starts_with(id))
            .unwrap_or("")
            .to_string()
    };
    assert!(row("e-good").contains("planned"), "{out}");
    assert!(row("e-bad").contains("damaged"), "{out}");
    assert!(
        out.contains("damaged: e-bad:") && out.contains("`lcoal`"),
        "{out}"
    );
    let o = cli(&home, &["status", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["experiments"].as_array().unwrap().len(), 1, "{json}");
    assert_eq!(json["damaged"][0]["id"], "e-bad", "{json}");
    let o = cli(&home, &["status", "e-bad"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("damaged: e-bad:"), "{}", stdout(&o));
    // gate of the damaged row says it is damaged (exit 3), not that it does not exist.
    let o = cli(&home, &["gate", "e-bad"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("`e-bad` (bad) is damaged in the database")
            && stderr(&o).contains("`lcoal`"),
        "{}",
        stderr(&o)
    );
    // History rows with malformed JSON: an `optgate run` execution and e-good's own. Each
    // is listed as damaged (its value quoted only in part); neither fails `status`.
    let mut store = Store::open_for_history(&db).unwrap();
    for (id, kind) in [
        ("r-bad", optgate_store::ExecutionKind::Run),
        ("e-good", optgate_store::ExecutionKind::Daemon),
    ] {
        store.record_execution(&execution_row(id, kind)).unwrap();
    }
    drop(store);
    let junk = format!("[{{\"variant\": {}", "9".repeat(5000));
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("UPDATE executions SET variants = ?1", [&junk])
        .unwrap();
    let o = cli(&home, &["status", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let damaged: Vec<&str> = json["damaged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert!(damaged.contains(&"r-bad"), "{json}");
    let problem = json["damaged"].to_string();
    assert!(
        problem.contains("executions.variants") && problem.len() < 4000,
        "{problem}"
    );
    for args in [&["status", "e-good"][..], &["gate", "e-good"]] {
        let o = cli(&home, args);
        // e-good is planned: status shows it (0), gate says still planned (2).
        assert!(
            matches!(o.status.code(), Some(0 | 2)),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(stdout(&o).contains("e-good"), "{args:?}: {}", stdout(&o));
    }
}

/// An execution row of `kind` for id `id`, with no variants yet.
fn execution_row(id: &str, kind: optgate_store::ExecutionKind) -> optgate_store::Execution {
    optgate_store::Execution {
        id: id.into(),
        name: "good".into(),
        kind,
        source_path: "/x/exp.yaml".into(),
        ended_at: "2026-01-01T00:01:00Z".into(),
        ..optgate_store::fixtures::execution()
    }
}

/// Five experiments in a stopped daemon's database, created e5 first and e1 last (so the
/// newest-first order is not the ids'): `status --limit 2` lists e1 then e2 and counts the
/// three others on a line below; `--json` gives the same page and `more: 3`; `--all` and
/// the default page (50) list all five, with no such line; `--limit 0` is refused.
/// Planted bugs caught: the page oldest first or by id, the limit ignored, the hint
/// missing or miscounted.
#[test]
fn status_lists_a_page_newest_first_and_counts_the_rest() {
    use optgate_store::{BlockRow, NewExperiment, NewRun, SchedulerKind, Store};
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    optgate_client::StatePaths::new(&home).prepare().unwrap();
    let mut store = Store::open(&home.join("optgate.db")).unwrap();
    let blocks = [BlockRow {
        index: 1,
        order: vec!["baseline".into()],
    }];
    let runs = [NewRun {
        run_id: "b001-baseline".into(),
        block: 1,
        arm: "baseline".into(),
        position: 0,
    }];
    for i in (1..=5).rev() {
        let e = NewExperiment {
            id: format!("e{i}"),
            name: format!("exp{i}"),
            source_path: "/x/exp.yaml".into(),
            source_text: "name: x\n".into(),
            source_sha256: "ab".repeat(32),
            root: format!("/x/optgate-runs/e{i}"),
            scheduler: SchedulerKind::Local,
            replicates: 5,
            max_replicates: 5,
        };
        store.insert_experiment(&e, &blocks, &runs).unwrap();
        // Creation times a few milliseconds apart (they are stored to the millisecond).
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    drop(store);
    let ids = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.starts_with('e'))
            .map(|l| l.split_whitespace().next().unwrap().to_string())
            .collect()
    };
    let o = cli(&home, &["status", "--limit", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(ids(&out), ["e1", "e2"], "{out}");
    assert!(out.contains("0/1"), "the page's run counts: {out}");
    assert!(
        out.contains("… 3 more older experiments: `--all` shows every one"),
        "{out}"
    );
    let o = cli(&home, &["status", "--limit", "2", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let shown: Vec<&str> = json["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(shown, ["e1", "e2"], "{json}");
    assert_eq!(json["more"], 3, "{json}");
    for args in [&["status", "--all"][..], &["status"][..]] {
        let out = stdout(&cli(&home, args));
        assert_eq!(ids(&out), ["e1", "e2", "e3", "e4", "e5"], "{args:?}: {out}");
        assert!(!out.contains("more older"), "{args:?}: {out}");
    }
    let o = cli(&home, &["status", "--limit", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
