//! The fuzz harness's inputs in the normal suite (stable toolchain, seconds): every seed of
//! `fuzz/seeds/<target>/` and every minimised crash of `fuzz/regressions/<target>/` goes
//! through the real binary's input surface (`optgate validate`, `optgate analyze`,
//! `optgate trace summary`) under a 2 GiB address-space limit and a 60 s timeout, and must
//! end cleanly: exit 0 or 2, never a panic (101), a signal or a timeout. A crash input
//! must be refused or summarised with a short message. See README.md, "Fuzzing".

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;

use support::*;

/// The files of `fuzz/<kind>/<target>/`, sorted (none if the folder does not exist).
fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = repo_root().join("fuzz").join(kind).join(target);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// `optgate ARGS` under a 2 GiB address-space limit and a 60 s timeout.
fn run_bounded(args: &[&str]) -> Output {
    let c = optgate();
    let mut b = std::process::Command::new("bash");
    b.arg("-c")
        .arg("ulimit -v 2097152; exec timeout 60 \"$@\"")
        .arg("bash")
        .arg(c.get_program())
        .args(args);
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => b.env(k, v),
            None => b.env_remove(k),
        };
    }
    b.output().expect("bash starts")
}

/// Exit 0 or 2, no panic, and (for 2) a message of at most `max_lines` lines.
fn assert_clean(o: &Output, input: &Path, max_lines: usize) {
    let err = stderr(o);
    assert!(
        matches!(o.status.code(), Some(0 | 2)),
        "{}: exit {:?}\n{err}",
        input.display(),
        o.status
    );
    assert!(!err.contains("panicked"), "{}: {err}", input.display());
    if o.status.code() == Some(2) {
        assert!(
            err.lines().count() <= max_lines,
            "{}: {} lines of errors\n{err}",
            input.display(),
            err.lines().count()
        );
    }
}

#[test]
fn experiment_inputs_validate_or_are_refused_cleanly() {
    let mut n = 0;
    for input in inputs("seeds", "experiment_load")
        .into_iter()
        .chain(inputs("regressions", "experiment_load"))
    {
        // Copied into a folder of its own: a relative `workdir` resolves there.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("exp.yaml");
        std::fs::copy(&input, &p).unwrap();
        let o = run_bounded(&["validate", p.to_str().unwrap()]);
        // At most 20 diagnostics, their total line and the pre-flight's lines.
        assert_clean(&o, &input, 40);
        n += 1;
    }
    assert!(n >= 5, "only {n} experiment inputs under fuzz/");
}

/// The baseline a samples input names in its first line (`# baseline=NAME ...`, as the
/// fuzz target reads it), else `baseline`.
fn baseline_of(text: &str) -> String {
    text.lines()
        .next()
        .and_then(|l| l.strip_prefix('#'))
        .and_then(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("baseline="))
        })
        .unwrap_or("baseline")
        .to_string()
}

#[test]
fn samples_inputs_are_analysed_or_refused_cleanly() {
    let mut n = 0;
    for input in inputs("seeds", "samples_csv")
        .into_iter()
        .chain(inputs("regressions", "samples_csv"))
    {
        let text = String::from_utf8_lossy(&std::fs::read(&input).unwrap()).into_owned();
        let baseline = baseline_of(&text);
        let o = run_bounded(&["analyze", input.to_str().unwrap(), "--baseline", &baseline]);
        assert_clean(&o, &input, 25);
        n += 1;
    }
    assert!(n >= 5, "only {n} samples inputs under fuzz/");
}

#[test]
fn trace_inputs_are_summarised() {
    let mut n = 0;
    for input in inputs("seeds", "trace_summary")
        .into_iter()
        .chain(inputs("regressions", "trace_summary"))
    {
        for extra in [&[][..], &["--epoch-marker", "epoch", "--json"][..]] {
            let mut args = vec!["trace", "summary", input.to_str().unwrap()];
            args.extend_from_slice(extra);
            let o = run_bounded(&args);
            // Damage inside a trace is a diagnostic, never a failure.
            assert_eq!(
                o.status.code(),
                Some(0),
                "{}: {:?}\n{}",
                input.display(),
                o.status,
                stderr(&o)
            );
        }
        n += 1;
    }
    assert!(n >= 5, "only {n} trace inputs under fuzz/");
}

/// Every record input of `run_records` (task records; node records behind a leading `N`),
/// planted in a run directory and read back as the product reads them: a record that
/// passes every rule, or a problem naming the file it came from.
#[test]
fn record_inputs_are_measured_or_refused_naming_the_file() {
    use optgate_wrapper::{nodes, tasks};
    let mut n = 0;
    for input in inputs("seeds", "run_records")
        .into_iter()
        .chain(inputs("regressions", "run_records"))
    {
        let data = std::fs::read(&input).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (folder, file, bytes) = match data.split_first() {
            Some((b'N', rest)) => ("nodes.attempt-1", "h.json", rest),
            _ => ("tasks.attempt-1", "rank-0.json", &data[..]),
        };
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
        std::fs::write(dir.path().join(folder).join(file), bytes).unwrap();
        let refused = if folder.starts_with("nodes") {
            nodes::read_records(dir.path(), 1).map(|r| {
                r.iter().for_each(|n| nodes::check_node(n).unwrap());
            })
        } else {
            tasks::read_records(dir.path(), 1).map(|r| {
                r.iter().for_each(|t| tasks::check_task(t).unwrap());
            })
        };
        if let Err(p) = &refused {
            assert!(p.file.ends_with(file), "{}: {p}", input.display());
        }
        let name = input.file_name().unwrap().to_string_lossy().into_owned();
        let planted = ["negative", "huge", "outside", "cut"];
        if planted.iter().any(|w| name.contains(w)) {
            assert!(
                !matches!(refused, Ok(())),
                "{name}: a planted record was believed"
            );
        }
        n += 1;
    }
    assert!(n >= 8, "only {n} record inputs under fuzz/");
}
