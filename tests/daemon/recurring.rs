//! Recurring re-checks through a real private daemon: `submit --every` submits the
//! experiment again at its interval (each execution a new experiment of the same name), a
//! decision that flips (the app reads a file the test changes between executions) runs the
//! `notify:` command with the summary on its stdin, so does a baseline that steps (once,
//! with the change point, when it becomes detectable), `cancel R<n>` stops it, and a daemon
//! stopped over several due times runs one catch-up execution when back, not one per
//! missed interval.

use crate::support;

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use support::*;

const DEADLINE: Duration = Duration::from_secs(300);

/// An experiment whose variant is faster than the baseline while the file `mode` of its
/// execution says `fast`, and identical otherwise. Each execution copies `mode_file` into
/// its own root at its first run (`<root>/mode`) and reads that copy: an execution's
/// behaviour is fixed when it starts, so the test changes `mode_file` for the next one as
/// soon as that copy exists.
fn experiment(name: &str, mode_file: &Path, recheck: &str) -> String {
    let m = mode_file.display();
    format!(
        r#"name: {name}
app:
  command: [bash, -c, 'pin="${{OPTGATE_RUN_DIR%/*/*}}/mode"; [ -e "$pin" ] || cp {m} "$pin"; if [ "${{X:-0}}" = 1 ] && [ "$(cat "$pin")" = fast ]; then b=$((700 + OPTGATE_BLOCK * 7)); else b=$((1000 + OPTGATE_BLOCK * 3)); fi; for e in 1 2 3; do echo "epoch $e took $((b + e * 11)).0 s"; done']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 5
variants:
  - name: v1
    dimension: l2_threading_model
    env: {{ X: "1" }}
{recheck}"#
    )
}

fn status_all(home: &Path) -> Value {
    let o = cli(home, &["status", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The executions of experiment `name`, oldest first.
fn executions(home: &Path, name: &str) -> Vec<Value> {
    let mut v: Vec<Value> = status_all(home)["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == name)
        .cloned()
        .collect();
    v.sort_by_key(|e| e["id"].as_str().unwrap().to_string());
    v
}

fn recurrence(home: &Path) -> Value {
    status_all(home)["recurrences"][0].clone()
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// `--every 2s`: a second execution is submitted, no earlier than its due time; the
/// variant accepted in the first and not in the second runs the notify command, whose
/// stdin is the summary (both ids, the decisions before and after, the reason), and
/// `status` shows the recurrence with its next due time and how the notify ended. Then
/// `cancel R1` stops the re-submissions. Planted bugs caught: no re-submission (no second
/// execution), flips not detected or the notify not run (no file), a wrong summary.
#[test]
fn every_resubmits_and_a_flipped_decision_runs_notify_with_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let mode = dir.path().join("mode");
    std::fs::write(&mode, "fast\n").unwrap();
    let got = dir.path().join("summary.json");
    let notify = format!(
        "recheck:\n  every: 1d\n  notify: [sh, -c, 'cat > {0}.tmp && mv {0}.tmp {0}; printf \"told\\033[2J\\n\" >&2']\n",
        got.display()
    );
    let exp = write_experiment(dir.path(), &experiment("flip", &mode, &notify));
    // --every overrides the file's 1d.
    let o = cli(&home, &["submit", exp.to_str().unwrap(), "--every", "2s"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let first = stdout(&o).trim().to_string();
    assert!(
        stderr(&o).contains("re-checked every 2s as recurrence R1"),
        "{}",
        stderr(&o)
    );
    let r = recurrence(&home);
    assert_eq!(
        (r["id"].as_str(), r["every"].as_str()),
        (Some("R1"), Some("2s"))
    );
    let anchor = r["anchor_unix"].as_i64().unwrap();
    assert_eq!(r["next_due_unix"].as_i64(), Some(anchor + 2));
    // Once the first execution has fixed its mode, the next one will run slow.
    let root = status(&home, &first)["root"].as_str().unwrap().to_string();
    wait_for("the first execution's mode", DEADLINE, || {
        Path::new(&root).join("mode").exists().then_some(())
    });
    std::fs::write(&mode, "slow\n").unwrap();

    let summary: Value = wait_for("the notify's summary", DEADLINE, || {
        let text = std::fs::read_to_string(&got).ok()?;
        Some(serde_json::from_str(&text).unwrap())
    });
    let runs = executions(&home, "flip");
    assert!(runs.len() >= 2, "{runs:#?}");
    assert_eq!(runs[0]["id"], first.as_str());
    let second = runs[1]["id"].as_str().unwrap();
    assert_eq!(summary["recurrence"], "R1");
    assert_eq!(summary["experiment"], "flip");
    assert_eq!(summary["previous"]["id"], first.as_str());
    assert_eq!(summary["latest"]["id"], second);
    assert_eq!(summary["previous"]["decisions"]["v1"], "accept");
    assert_ne!(summary["latest"]["decisions"]["v1"], "accept");
    assert_eq!(summary["flips"][0]["variant"], "v1");
    assert_eq!(summary["flips"][0]["before"], "accept");
    assert!(
        summary["reason"]
            .as_str()
            .unwrap()
            .contains("v1: accept → "),
        "{summary}"
    );
    assert_eq!(summary["change_points"], Value::Array(vec![]));

    // status: how the notify ended, with its stderr's end.
    let r = wait_for("the notify's end in status", DEADLINE, || {
        let r = recurrence(&home);
        (r["last_notify"]["state"] == "exited").then_some(r)
    });
    assert_eq!(r["last_notify"]["exit_code"], 0);
    assert_eq!(r["last_notify"]["stderr_tail"], "told\u{1b}[2J\n");
    assert_eq!(r["last_notify"]["experiment_id"], second);
    assert!(r["executions"].as_u64().unwrap() >= 2);
    let text = stdout(&cli(&home, &["status"]));
    assert!(text.contains("RECURRENCE"), "{text}");
    assert!(text.contains("exited 0: "), "{text}");
    // The notify's stderr is shown, its escape sequence escaped, never sent raw.
    assert!(
        text.contains("told\\x1b[2J") && !text.contains('\u{1b}'),
        "{text}"
    );

    // Cancelled: the recurrence stops; a second cancel says so.
    let o = cli(&home, &["cancel", "R1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("recurrence R1 cancelled"),
        "{}",
        stderr(&o)
    );
    assert_eq!(recurrence(&home)["state"], "cancelled");
    let o = cli(&home, &["cancel", "R1"]);
    assert!(stderr(&o).contains("already cancelled"), "{}", stderr(&o));
    let o = cli(&home, &["cancel", "R9"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("no recurrence `R9`"), "{}", stderr(&o));
}

/// A daemon stopped over several due times runs exactly one catch-up execution when it
/// is back, and the next due time after it is the next multiple of the interval after
/// the restart — not a missed due time (which would submit again at once, one execution
/// per missed interval). Planted bug caught: `next_due + interval` after a late run.
#[test]
fn a_daemon_down_over_several_due_times_runs_one_catch_up_execution() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let mode = dir.path().join("mode");
    std::fs::write(&mode, "fast\n").unwrap();
    let exp = write_experiment(dir.path(), &experiment("catchup", &mode, ""));
    let interval = 3;
    let o = cli(&home, &["submit", exp.to_str().unwrap(), "--every", "3s"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let anchor = recurrence(&home)["anchor_unix"].as_i64().unwrap();
    // Stopped once the first execution (and any on-time one after it) has ended.
    wait_for("an execution to end", DEADLINE, || {
        let runs = executions(&home, "catchup");
        runs.iter().all(ended).then_some(())
    });
    let o = cli(&home, &["daemon", "stop"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let before = executions(&home, "catchup").len();
    // Down over three due times at least.
    let stopped_at = unix_now();
    while unix_now() < stopped_at + 3 * interval + 1 {
        std::thread::sleep(Duration::from_millis(200));
    }
    let restarted = unix_now();
    let o = cli(&home, &["daemon"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = wait_for("the catch-up execution", DEADLINE, || {
        let r = recurrence(&home);
        (r["executions"].as_u64()? as usize > before).then_some(r)
    });
    // One execution for all the missed due times, the next due after the restart.
    assert_eq!(
        r["executions"].as_u64().unwrap() as usize,
        before + 1,
        "{r}"
    );
    let next = r["next_due_unix"].as_i64().unwrap();
    assert!(
        next > restarted,
        "next due {next} is not after the restart {restarted}: {r}"
    );
    assert!(next <= unix_now() + interval, "{r}");
    assert_eq!(
        (next - anchor) % interval,
        0,
        "the schedule lost its phase: {r}"
    );
    // The catch-up is a whole execution: it runs to its decision.
    let catch_up = r["last_experiment_id"].as_str().unwrap().to_string();
    let e = wait_for("the catch-up to end", DEADLINE, || {
        let e = status(&home, &catch_up);
        ended(&e).then_some(e)
    });
    assert_eq!(e["state"], "decided", "{e}");
}

/// `--every` is parsed strictly on the command line, before anything reaches a daemon.
#[test]
fn a_bad_interval_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let exp = write_experiment(dir.path(), &experiment("bad", &dir.path().join("mode"), ""));
    for (every, says) in [
        ("7 days", "not an interval"),
        ("0s", "shorter than 1s"),
        ("400d", "longer than 366d"),
    ] {
        let o = cli(&home, &["submit", exp.to_str().unwrap(), "--every", every]);
        assert_eq!(o.status.code(), Some(2), "{every}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{every}: {}", stderr(&o));
    }
    assert!(!home.join("daemon.pid").exists());
}

/// An experiment whose arms run at the levels of its execution's place in the recurrence:
/// the n-th execution (executions never overlap) copies line n of `levels` (`BASE VAR`
/// seconds) into its own root at its first run and reads that copy.
fn stepped(levels: &Path, recheck: &str) -> String {
    let l = levels.display();
    format!(
        r#"name: stepped
app:
  command: [bash, -c, 'root="${{OPTGATE_RUN_DIR%/*/*}}"; pin="$root/levels"; if [ ! -e "$pin" ]; then n=$(ls "$root"/../*/levels 2>/dev/null | wc -l); sed -n "$((n + 1))p" {l} > "$pin.new" && mv "$pin.new" "$pin"; fi; read base var < "$pin"; b=$base; [ "${{X:-0}}" = 1 ] && b=$var; for e in 1 2 3; do echo "epoch $e took $b s"; done']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 3
allow_few_replicates: true
variants:
  - name: omp6
    dimension: l2_threading_model
    env: {{ X: "1" }}
{recheck}"#
    )
}

/// Recurring executions whose baseline is 15 % slower from the fifth on (the variant
/// following it, so no decision flips): the notify runs once the change is detectable —
/// at the 8th execution (E-Divisive needs 4 | 4 here, `recheck::change_alerts`) — with the
/// change point in its summary (`series` baseline, `at` 5) and no flip, and not again at
/// the 9th and 10th. Planted bugs caught: `change_alerts` returning none (no notify: the
/// test times out), or every change point of the history (told at 9 and 10 again).
#[test]
fn a_baseline_shift_in_a_recurrence_runs_notify_with_the_change_point() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let levels = dir.path().join("levels");
    let base = [
        1.00, 1.02, 0.99, 1.01, 1.15, 1.17, 1.14, 1.16, 1.15, 1.16, 1.14, 1.15,
    ];
    let lines: String = base
        .iter()
        .map(|b| format!("{b:.4} {:.4}\n", b * 0.7))
        .collect();
    std::fs::write(&levels, lines).unwrap();
    let got = dir.path().join("summaries");
    let notify = format!(
        "recheck:\n  every: 1d\n  notify: [sh, -c, 'cat >> {0}; echo >> {0}']\n",
        got.display()
    );
    let exp = write_experiment(dir.path(), &stepped(&levels, &notify));
    let o = cli(&home, &["submit", exp.to_str().unwrap(), "--every", "1s"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let line: Value = wait_for("the notify's summary", DEADLINE, || {
        let text = std::fs::read_to_string(&got).ok()?;
        let first = text.lines().find(|l| !l.trim().is_empty())?;
        Some(serde_json::from_str(first).unwrap())
    });
    // The 11th submitted: the 9th and 10th were judged (in the pass that submits the next).
    let runs = wait_for("an 11th execution", DEADLINE, || {
        let runs = executions(&home, "stepped");
        (runs.len() >= 11).then_some(runs)
    });
    let o = cli(&home, &["cancel", "R1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&got).unwrap();
    let told = text.lines().filter(|l| !l.trim().is_empty()).count();
    assert_eq!(told, 1, "the change is told once:\n{text}");
    assert_eq!(line["latest"]["id"], runs[7]["id"], "{line:#}");
    assert_eq!(line["flips"], Value::Array(vec![]), "{line:#}");
    let cps = line["change_points"].as_array().unwrap();
    assert_eq!(cps.len(), 1, "{line:#}");
    assert_eq!(
        (cps[0]["series"].as_str(), cps[0]["at"].as_u64()),
        (Some("baseline"), Some(5))
    );
    assert!(
        line["reason"]
            .as_str()
            .unwrap()
            .contains("baseline: change point at execution 5"),
        "{line:#}"
    );
}
