//! Run outputs of any size and kind, end to end through the real binary: stdout larger
//! than the run's 256 MiB address-space cap is read (whole-output reads aborted the
//! reader, and through the daemon looped on restart), and a pipe left where the metric file should be ends the run
//! with a reason instead of blocking the engine forever.

use crate::support;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::*;

/// A guard against hanging forever; nothing is asserted about how long anything took.
const DEADLINE: Duration = Duration::from_secs(300);

/// `optgate ARGS` under `ulimit -v` of `cap_kib`, killed (and the test failed) past
/// [`DEADLINE`].
fn run_capped(args: &[&str], cap_kib: u64) -> Output {
    let mut c = Command::new("bash");
    c.arg("-c")
        .arg(format!("ulimit -v {cap_kib} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_optgate"))
        .args(args)
        .env("OPTGATE_HOME", private_home())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("optgate {args:?} still running after {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().unwrap()
}

fn experiment(app: &str) -> String {
    format!(
        r#"name: outputs
app:
  command: [bash, -c, '{app}']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 1
max_replicates: 1
allow_few_replicates: true
variants:
  - name: v1
    dimension: l2_threading_model
    env: {{ BIG: "1" }}
"#
    )
}

/// The variant prints 300 MB (300,000 lines of 1,000 bytes) between its epoch lines, more
/// than the 256 MiB address-space cap of the whole `optgate run`: its epochs are read in
/// bounded memory (holding the output whole, even once, would abort the process).
#[test]
fn stdout_larger_than_the_memory_cap_is_read_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let app = r#"echo "epoch 1 took 0.1 s"; if [ -n "$BIG" ]; then yes "$(printf "%0999d" 0)" | head -c 300000000; fi; echo "epoch 2 took 0.2 s"; echo "epoch 3 took 0.3 s""#;
    let exp = write_experiment(dir.path(), &experiment(app));
    let root = dir.path().join("exec");
    let o = run_capped(
        &[
            "run",
            exp.to_str().unwrap(),
            "--out",
            root.to_str().unwrap(),
            "--json",
            "--quiet",
        ],
        256 << 10,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let stdout_bytes = std::fs::metadata(root.join("runs/b001-v1/stdout"))
        .unwrap()
        .len();
    assert!(stdout_bytes > 300_000_000, "{stdout_bytes}");
    assert!(stdout_bytes > 256 << 20, "the output must exceed the cap");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let v = &report["variants"][0];
    assert_eq!(
        v["n_variant"], 1,
        "the big run's epochs were not read: {v:#}"
    );
}

/// A pipe where the metric file should be: the run fails naming it, and `optgate run`
/// ends (it blocked in `open` for ever).
#[test]
fn a_pipe_at_the_metric_file_fails_the_run_instead_of_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let app = r#"mkfifo "$OPTGATE_RUN_DIR/metric.txt"; echo ok"#;
    let yaml =
        experiment(app).replace("metric:\n", "metric:\n  source: file\n  file: metric.txt\n");
    let exp = write_experiment(dir.path(), &yaml);
    let root = dir.path().join("exec");
    let o = run_capped(
        &[
            "run",
            exp.to_str().unwrap(),
            "--out",
            root.to_str().unwrap(),
            "--quiet",
        ],
        8 << 20,
    );
    let said = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{said}");
    assert!(said.contains("metric.txt"), "{said}");
    assert!(said.contains("not a regular file"), "{said}");
}

/// A 10 GB sparse metric file (holes read as NUL bytes): refused by its size before a
/// byte is read, naming the file and the cap, under a 2 GiB cap (a 1.1 GB one aborted).
#[test]
fn a_ten_gigabyte_sparse_metric_file_is_refused_by_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let app = r#"truncate -s 10G "$OPTGATE_RUN_DIR/metric.txt"; echo ok"#;
    let yaml =
        experiment(app).replace("metric:\n", "metric:\n  source: file\n  file: metric.txt\n");
    let exp = write_experiment(dir.path(), &yaml);
    let root = dir.path().join("exec");
    let o = run_capped(
        &[
            "run",
            exp.to_str().unwrap(),
            "--out",
            root.to_str().unwrap(),
            "--quiet",
        ],
        2 << 20,
    );
    let said = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{said}");
    assert!(said.contains("metric.txt"), "{said}");
    assert!(said.contains("more than the limit of"), "{said}");
}

/// Through the daemon, a variant that leaves pipes where its task record, node record and
/// declared output file go: its runs end (the output named, not a regular file), an
/// experiment submitted after it is decided meanwhile (the engine never blocked on the
/// pipes), and `daemon stop` says stopped (it exited 3 after 60 s when the engine hung).
#[test]
fn pipes_in_a_run_directory_hold_up_nothing_under_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let plant = r#"if [ -n "$BIG" ]; then d=$OPTGATE_RUN_DIR; mkdir -p $d/tasks.attempt-1 $d/nodes.attempt-1; mkfifo $d/tasks.attempt-1/rank-0.json $d/nodes.attempt-1/$(hostname).json $d/out.dat; else echo same > $OPTGATE_RUN_DIR/out.dat; fi; echo "epoch 1 took 0.1 s""#;
    let hostile = experiment(plant)
        .replace("name: outputs", "name: pipes")
        .replace(
            "allow_few_replicates: true\n",
            "allow_few_replicates: true\ncorrectness: { files: [out.dat] }\n",
        );
    let plain = experiment(r#"echo "epoch 1 took 0.1 s""#).replace("name: outputs", "name: plain");
    let submit = |name: &str, yaml: &str| {
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&path, yaml).unwrap();
        let o = cli(&home, &["submit", path.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        stdout(&o).trim().to_string()
    };
    let (hostile_id, plain_id) = (submit("pipes", &hostile), submit("plain", &plain));
    for id in [&plain_id, &hostile_id] {
        wait_for("the experiment to end", DEADLINE, || {
            // Ended, not merely past `running`: under load a status may catch an
            // experiment still `building` (or `analysing`), which is neither.
            ended(&status(&home, id)).then_some(())
        });
    }
    assert_eq!(status(&home, &plain_id)["state"], "decided");
    let o = cli(&home, &["report", &hostile_id, "--json"]);
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(report.contains("out.dat"), "{report}");
    assert!(report.contains("not a regular file"), "{report}");
    let o = cli(&home, &["daemon", "stop"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A read of a run directory that does not return (stalled here by the `read-run-files`
/// test hook, as a hung file system would): `daemon stop` still says stopped, within its
/// wait (it waited for the pass, past `STOP_WAIT`, and exited 3).
#[test]
fn a_read_that_never_returns_does_not_hold_up_daemon_stop() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let exp = write_experiment(dir.path(), &experiment(r#"echo "epoch 1 took 0.1 s""#));
    let o = optgate()
        .args(["submit", exp.to_str().unwrap()])
        .env("OPTGATE_HOME", &home)
        .env("OPTGATE_STALL", "read-run-files:600000")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    wait_for("the read to stall", DEADLINE, || {
        let log = std::fs::read_to_string(home.join("daemon.log")).unwrap_or_default();
        log.contains("stall read-run-files").then_some(())
    });
    let o = cli(&home, &["daemon", "stop"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}
