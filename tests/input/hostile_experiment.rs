//! Hostile experiment files through the real binary, under a 2 GiB address-space limit:
//! every command that reads one (`validate`, `plan`, `run`, `submit`) refuses pipes,
//! devices, directories, oversized and deeply nested files at once with exit status 2 and
//! a short stderr; diagnostics are capped and quote values by a prefix; launch shapes never
//! wrap; NUL characters never reach a program. The hostile files are generated here.

use crate::support;

use std::path::Path;

use support::*;

/// The address-space limit of the done-when: 2 GiB.
const TWO_GIB_IN_KIB: u64 = 2 * 1024 * 1024;

/// `optgate ARGS` under an address-space limit of `cap_kib` and a 120 s timeout (a bound,
/// not a measurement: a hang or a regression to unbounded memory fails instead of the
/// machine).
fn run_bounded(args: &[&str], cap_kib: u64) -> std::process::Output {
    let c = optgate();
    let mut b = std::process::Command::new("bash");
    b.arg("-c")
        .arg(format!("ulimit -v {cap_kib}; exec timeout 120 \"$@\""))
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

/// Every command that loads an experiment file, on `path` (`out` for plan and run).
fn each_command<'a>(path: &'a str, out: &'a str) -> [Vec<&'a str>; 4] {
    [
        vec!["validate", path],
        vec!["plan", path, "--out", out],
        vec!["run", path, "--out", out, "--quiet"],
        vec!["submit", path, "--no-start"],
    ]
}

/// Runs every loading command on `path` under 2 GiB; asserts exit 2, stderr under
/// `max_stderr` bytes containing `fragment`, and returns the stderr of `validate`.
#[track_caller]
fn refused_by_every_command(path: &Path, fragment: &str, max_stderr: usize) -> String {
    refused_within(path, fragment, max_stderr, TWO_GIB_IN_KIB)
}

#[track_caller]
fn refused_within(path: &Path, fragment: &str, max_stderr: usize, cap_kib: u64) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (p, o) = (path.to_str().unwrap(), out.to_str().unwrap());
    let mut first = None;
    for args in each_command(p, o) {
        let output = run_bounded(&args, cap_kib);
        let err = stderr(&output);
        let head = &err[..err.len().min(2000)];
        assert_eq!(output.status.code(), Some(2), "{args:?}: {head}");
        assert!(err.len() < max_stderr, "{args:?}: {} bytes", err.len());
        assert!(err.contains(fragment), "{args:?}: {head}");
        assert!(!out.exists(), "{args:?} left {} behind", out.display());
        first.get_or_insert(err);
    }
    first.unwrap()
}

#[test]
fn pipes_devices_and_directories_are_refused_naming_what_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("exp.yaml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // A pipe with no writer: opening it would wait for ever (the timeout would end it).
    for (path, kind) in [
        (fifo.as_path(), "a pipe"),
        (Path::new("/dev/zero"), "a character device"),
        (dir.path(), "a directory"),
    ] {
        let err = refused_by_every_command(path, "it is not a regular file", 4096);
        assert!(err.contains(&format!("(it is {kind})")), "{err}");
    }
}

#[test]
fn an_oversized_file_is_refused_by_its_size_before_it_is_parsed() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("exp.yaml");
    // 15 MiB of a flow list: it was read whole and parsed again after the size check
    // failed (1.2 GB, 36 s); now it is refused by its size, read no further, within 512 MiB.
    let text = format!("name: x\ndescription: [{}a]\n", "a, ".repeat(5 << 20));
    std::fs::write(&p, &text).unwrap();
    let fragment = "experiment files are limited to 1048576 bytes";
    let err = refused_within(&p, fragment, 4096, TWO_GIB_IN_KIB / 4);
    assert!(err.contains(&format!("is {} bytes;", text.len())), "{err}");
}

/// Writes `yaml` as `exp.yaml` in a new temporary directory.
fn written(yaml: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = write_experiment(dir.path(), yaml);
    (dir, p)
}

#[test]
fn deep_nesting_is_refused_at_once_under_the_size_limit() {
    let base = fake_app_experiment("x", "");
    // 30,000 levels in 210 KB, and 100,000 flow mappings in `description` (500 KB): a
    // parser that sees them is quadratic (seconds to minutes); the pre-scan is linear.
    for (open, close, levels) in [("{\"a\": ", "}", 30_000), ("{a: ", "}", 100_000)] {
        let deep = base.replace(
            "replicates: 5",
            &format!(
                "replicates: 5\ndescription: {}x{}",
                open.repeat(levels),
                close.repeat(levels)
            ),
        );
        let (_dir, p) = written(&deep);
        let err = refused_by_every_command(&p, "nested deeper than 32 levels", 4096);
        assert!(err.contains("exp.yaml:7:"), "{err}");
    }
}

#[test]
fn many_bad_entries_print_a_bounded_list() {
    let entries: String = (0..500).map(|i| format!("    - /abs/{i}\n")).collect();
    let yaml = fake_app_experiment("x", "").replace(
        "replicates: 5",
        &format!("replicates: 5\ncorrectness:\n  files:\n{entries}"),
    );
    let (_dir, p) = written(&yaml);
    // Was 72 KB: one line per entry.
    // 20 shown; the other 480 errors and the checklist's warning counted.
    let err = refused_by_every_command(&p, "… and 481 more", 64 * 1024);
    assert!(err.contains("500 errors in the experiment file"), "{err}");
    assert!(err.lines().count() < 30, "{err}");
}

#[test]
fn long_values_are_quoted_by_a_prefix_once() {
    let long = "Q".to_string() + &"x".repeat(70_000);
    let base = fake_app_experiment("x", "");
    for yaml in [
        base.replace(
            "replicates: 5",
            &format!("replicates: 5\nscheduler: {{ kind: slurm, queue: '{long} y' }}"),
        ),
        // An explicit key (`?`): an implicit one may not be longer than 1024 characters.
        base.replace("env: { X: \"1\" }", &format!("env: {{ ? '{long} y' : 1 }}")),
        base.replace(
            "replicates: 5",
            &format!("replicates: 5\ncompare: {{ steady_epochs: '{long}' }}"),
        ),
    ] {
        let (_dir, p) = written(&yaml);
        let err = refused_by_every_command(&p, "Qxxxxxx", 4096);
        assert_eq!(err.matches("Qxxxxxx").count(), 1, "{err}");
        assert!(err.contains("… (700"), "{err}");
    }
    // An option `flux batch` does not know, named by its (long) name: `validate`,
    // `submit` and `plan` (whose job scripts would carry it) refuse it, and `plan` writes
    // nothing. Planted bug caught: `plan` writing the option into its job scripts.
    let yaml = base.replace(
        "replicates: 5",
        &format!("replicates: 5\nscheduler: {{ kind: flux, extra_directives: ['--{long}'] }}"),
    );
    let (dir, p) = written(&yaml);
    let out = dir.path().join("planned");
    let path = p.to_str().unwrap();
    for args in [
        vec!["validate", path],
        vec!["plan", path, "--out", out.to_str().unwrap()],
    ] {
        let output = run_bounded(&args, TWO_GIB_IN_KIB);
        let err = stderr(&output);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            &err[..err.len().min(2000)]
        );
        assert!(err.len() < 4096, "{} bytes", err.len());
        assert!(err.contains("is not an option of `flux batch`"), "{err}");
        assert!(!err.contains(&"x".repeat(200)), "quoted whole: {err}");
    }
    assert!(!out.exists(), "plan wrote {}", out.display());
}

#[test]
fn launch_shapes_past_their_maxima_are_refused_never_wrapped() {
    let base = fake_app_experiment("x", "");
    // 65536 × 65536 = 2^32: a u32 product wrapped to `srun -N 65536 -n 0`.
    for (shape, fragment) in [
        (
            "nodes: 65536, tasks_per_node: 65536",
            "tasks_per_node is 65536; at most 4096",
        ),
        (
            "nodes: 200000, tasks_per_node: 4096",
            "200000 nodes × 4096 tasks per node is more than 10000000 tasks",
        ),
    ] {
        let yaml = base.replace(
            "replicates: 5",
            &format!("replicates: 5\nscheduler: {{ kind: slurm, {shape} }}"),
        );
        let (_dir, p) = written(&yaml);
        refused_by_every_command(&p, fragment, 4096);
    }
}

#[test]
fn a_nul_character_in_args_is_refused_not_dropped() {
    // The app got `ab` for `a\0b`: the shell drops NUL bytes.
    let yaml = fake_app_experiment("x", "").replace("metric:", "  args: [ok, \"a\\0b\"]\nmetric:");
    let (_dir, p) = written(&yaml);
    let err = refused_by_every_command(&p, "a NUL character", 4096);
    assert!(err.contains("exp.yaml:4:"), "{err}");
}
