//! One history through the real binary: an experiment executed once with `optgate run`
//! and once through the daemon appears twice in `optgate history NAME --json`, each with
//! its decisions, and `optgate status` lists both (the `run` one marked); eight real
//! `optgate run` executions whose baseline is 15 % slower from the fifth on report a
//! change point at the fifth (at = 5), and the variant's speed-up, steady over the same
//! eight, none.

use crate::support;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use support::*;

/// A fast real app: each arm prints three epochs of the seconds its file holds (the
/// baseline `base`, the variant `var`), so the test sets each execution's level.
fn experiment(name: &str, dir: &Path) -> String {
    let (base, var) = (dir.join("base"), dir.join("var"));
    format!(
        r#"name: {name}
app:
  command: [bash, -c, 'if [ "${{X:-0}}" = 1 ]; then f={var}; else f={base}; fi; b=$(cat "$f"); for e in 1 2 3; do echo "epoch $e took $b s"; done']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 3
allow_few_replicates: true
variants:
  - name: omp6
    dimension: l2_threading_model
    env: {{ X: "1" }}
"#,
        var = var.display(),
        base = base.display()
    )
}

fn set_levels(dir: &Path, base: f64, var: f64) {
    std::fs::write(dir.join("base"), format!("{base:.4}\n")).unwrap();
    std::fs::write(dir.join("var"), format!("{var:.4}\n")).unwrap();
}

fn history_json(home: &Path, name: &str) -> Value {
    let o = cli(home, &["history", name, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn run_once(home: &Path, exp: &Path, out: &Path) {
    let o = cli(
        home,
        &[
            "run",
            exp.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn a_run_and_a_daemon_execution_join_one_history() {
    let dir = tempfile::tempdir().unwrap();
    // Short enough for the daemon's socket path (a private home under the target
    // directory is not).
    let home = dir.path().join("home");
    set_levels(dir.path(), 1.0, 0.7);
    let exp = write_experiment(dir.path(), &experiment("onehistory", dir.path()));
    run_once(&home, &exp, &dir.path().join("run1"));
    let _stop = StopOnDrop(home.clone());
    let o = cli(&home, &["submit", exp.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = stdout(&o).trim().to_string();
    let ended = wait_for(
        "the daemon's execution in the history",
        Duration::from_secs(300),
        || {
            let h = history_json(&home, "onehistory");
            (h["executions"].as_array().unwrap().len() == 2).then_some(h)
        },
    );
    let execs = ended["executions"].as_array().unwrap();
    let kinds: Vec<&str> = execs.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["run", "daemon"], "{ended:#}");
    assert_eq!(execs[1]["id"], id.as_str());
    for e in execs {
        assert_eq!(e["state"], "decided", "{e:#}");
        assert_eq!(e["variants"][0]["variant"], "omp6", "{e:#}");
        assert!(e["variants"][0]["decision"].is_string(), "{e:#}");
        assert!((e["variants"][0]["speedup"].as_f64().unwrap() - 1.0 / 0.7).abs() < 1e-6);
        assert_eq!(e["baseline_median_s"].as_f64(), Some(1.0), "{e:#}");
        assert!(!e["nodes"].as_array().unwrap().is_empty(), "{e:#}");
    }
    assert_eq!(ended["change_points"], Value::Array(vec![]));
    let status = cli(&home, &["status", "--json"]);
    let s: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(s["experiments"][0]["id"], id.as_str(), "{s:#}");
    assert_eq!(s["run_executions"][0]["id"], execs[0]["id"], "{s:#}");
    let text = stdout(&cli(&home, &["status"]));
    let run_line = text
        .lines()
        .find(|l| l.contains(execs[0]["id"].as_str().unwrap()))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(run_line.contains("(optgate run)"), "{text}");
    assert!(text.lines().any(|l| l.starts_with(&id)), "{text}");
}

/// Eight real executions (3 replicates each): the baseline's level 15 % higher from the
/// fifth, the variant's following it (so its speed-up holds, within 1 %).
#[test]
fn a_baseline_fifteen_percent_slower_from_the_fifth_execution_is_a_change_point_at_five() {
    let dir = tempfile::tempdir().unwrap();
    // A new state directory each time: the history of an earlier run of this test must
    // not count.
    let home = dir.path().join("home");
    let exp = write_experiment(dir.path(), &experiment("drift", dir.path()));
    let base = [1.00, 1.02, 0.99, 1.01, 1.15, 1.17, 1.14, 1.16];
    let jitter = [0.0, 0.01, -0.01, 0.005, -0.005, 0.01, 0.0, -0.01];
    for (i, (b, j)) in base.iter().zip(jitter).enumerate() {
        set_levels(dir.path(), *b, b * 0.7 * (1.0 + j));
        run_once(&home, &exp, &dir.path().join(format!("run{i}")));
    }
    let h = history_json(&home, "drift");
    assert_eq!(h["executions"].as_array().unwrap().len(), 8, "{h:#}");
    let changes = h["change_points"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{h:#}");
    let c = &changes[0];
    assert_eq!(c["series"], "baseline");
    assert_eq!(c["at"], 5);
    assert!(c["p"].as_f64().unwrap() <= 0.05, "{c}");
    assert!((c["after"].as_f64().unwrap() / c["before"].as_f64().unwrap() - 1.15).abs() < 0.02);
    let text = stdout(&cli(&home, &["history", "drift"]));
    assert!(
        text.contains("baseline 15 % slower from execution 5 on, p = "),
        "{text}"
    );
    assert!(text.contains("omp6's speed-up unchanged"), "{text}");
}
