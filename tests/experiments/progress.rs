//! What a new user sees while `optgate run` works, through the real binary with stderr
//! captured (a pipe, as under `nohup` or in a CI log): one progress line per finished run,
//! none with `--quiet`; the count of runs a resumed execution already has; the checklist
//! warning in full from `validate` only.

use crate::support;

use std::path::Path;

use support::*;

/// The progress lines of `optgate run`'s stderr.
fn progress_lines(err: &str) -> Vec<&str> {
    err.lines()
        .filter(|l| l.starts_with("optgate: run ") && l.contains(" (block "))
        .collect()
}

/// `optgate run EXP --out DIR` without `--quiet`, with `extra` arguments.
fn run_loud(dir: &Path, extra: &[&str]) -> std::process::Output {
    let exp = dir.join("exp.yaml");
    let root = dir.join("exec");
    let mut args = vec![
        "run",
        exp.to_str().unwrap(),
        "--out",
        root.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn piped_run_prints_one_progress_line_per_run_and_quiet_none() {
    let dir = tempfile::tempdir().unwrap();
    write_experiment(dir.path(), &fake_app_experiment("prog", ""));
    let o = run_loud(dir.path(), &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let lines = progress_lines(&err);
    // 2 arms × 5 replicates, in the recorded order, each with its block, arm and time.
    assert_eq!(lines.len(), 10, "{err}");
    for (i, l) in lines.iter().enumerate() {
        let prefix = format!("optgate: run {}/10 done (block {}, arm ", i + 1, i / 2 + 1);
        assert!(l.starts_with(&prefix), "line {i}: {l}\n{err}");
        assert!(
            l.contains(", arm baseline, ") || l.contains(", arm v1, "),
            "{l}"
        );
        assert!(l.contains(" s)"), "{l}");
        // Every run but the last says how long the rest will take.
        assert_eq!(l.contains("; ETA "), i < 9, "{l}");
    }
    assert!(!err.contains("resuming"), "a new execution: {err}");

    let quiet = tempfile::tempdir().unwrap();
    write_experiment(quiet.path(), &fake_app_experiment("prog", ""));
    let o = run_loud(quiet.path(), &["--quiet"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(progress_lines(&err), Vec::<&str>::new(), "{err}");
}

#[test]
fn resuming_says_how_many_runs_were_already_done() {
    let dir = tempfile::tempdir().unwrap();
    // Block 5's first run waits until the file `go` exists: interrupted there, the
    // execution has 8 runs done and 2 to go.
    let go = dir.path().join("go");
    let yaml = fake_app_experiment("resume", "").replace(
        "command: [bash, -c, 'for e",
        &format!(
            "command: [bash, -c, 'if [ \"$OPTGATE_BLOCK\" = 5 ]; then touch {0}.waiting; while [ ! -e {0} ]; do sleep 0.05; done; fi; for e",
            go.display()
        ),
    );
    assert!(yaml.contains("waiting"), "{yaml}");
    write_experiment(dir.path(), &yaml);
    let exp = dir.path().join("exp.yaml");
    let root = dir.path().join("exec");
    let child = optgate()
        .args([
            "run",
            exp.to_str().unwrap(),
            "--out",
            root.to_str().unwrap(),
        ])
        .arg("--quiet")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let waiting = dir.path().join("go.waiting");
    let mut waited = 0;
    while !waiting.exists() {
        std::thread::sleep(std::time::Duration::from_millis(20));
        waited += 1;
        assert!(waited < 3000, "block 5 never started");
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let first = child.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(130), "{}", stderr(&first));
    std::fs::write(&go, "").unwrap();
    let again = run_loud(dir.path(), &[]);
    let err = stderr(&again);
    assert_eq!(again.status.code(), Some(0), "{err}");
    assert!(
        err.contains("optgate: resuming: 8 of 10 runs already done\n"),
        "{err}"
    );
    // Only the two runs left run, counted on from the eight.
    let lines = progress_lines(&err);
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with("optgate: run 9/10 done (block 5, "),
        "{err}"
    );
    assert!(
        lines[1].starts_with("optgate: run 10/10 done (block 5, "),
        "{err}"
    );
}

#[test]
fn the_checklist_warning_is_in_full_from_validate_only() {
    let dir = tempfile::tempdir().unwrap();
    let exp = write_experiment(dir.path(), &fake_app_experiment("chk", ""));
    let exp = exp.to_str().unwrap();
    let full = "checklist: no verdict for 9 of the 10 dimensions (l1_vectorization, ";

    let v = run(&["validate", exp]);
    assert_eq!(v.status.code(), Some(0), "{}", stderr(&v));
    assert!(stderr(&v).contains(full), "{}", stderr(&v));

    // `run` and `submit`: one short line naming the count and `validate --strict`.
    let r = run_loud(dir.path(), &["--quiet"]);
    let short = format!(
        "optgate: checklist: no verdict for 9 of the 10 dimensions; `optgate validate --strict {exp}` lists them\n"
    );
    for (what, err) in [
        ("run", stderr(&r)),
        // No daemon here and --no-start: the submission fails after loading the file.
        ("submit", stderr(&run(&["submit", exp, "--no-start"]))),
    ] {
        assert!(!err.contains(full), "{what}: {err}");
        assert_eq!(err.matches("no verdict").count(), 1, "{what}: {err}");
        assert!(err.contains(&short), "{what}: {err}");
    }

    let p = run(&[
        "plan",
        exp,
        "--out",
        dir.path().join("plan").to_str().unwrap(),
    ]);
    assert_eq!(p.status.code(), Some(0), "{}", stderr(&p));
    assert!(!stderr(&p).contains("no verdict"), "{}", stderr(&p));
}
