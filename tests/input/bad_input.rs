//! Bad input ends with a clear message naming the place, a documented non-zero exit code,
//! and nothing left behind that a later run could mistake for data.

use crate::support;

use std::path::Path;

use support::*;

/// Validates `yaml` and returns (exit code, stderr).
fn validate(yaml: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let p = write_experiment(dir.path(), yaml);
    let o = run(&["validate", p.to_str().unwrap()]);
    (o.status.code(), stderr(&o))
}

#[test]
fn missing_file() {
    let o = run(&["validate", "/nonexistent/exp.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("cannot read experiment file /nonexistent/exp.yaml"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn invalid_yaml_points_at_line_and_column() {
    let (code, err) = validate("name: x\napp:\n  command: \"unterminated\nmetric: {}\n");
    assert_eq!(code, Some(2));
    assert!(
        err.contains("exp.yaml:5:1: error: found unexpected end of stream, while scanning a quoted scalar at line 3 column 12"),
        "{err}"
    );
}

#[test]
fn unknown_key_is_an_error_with_its_place() {
    let yaml =
        fake_app_experiment("x", "").replace("replicates: 5", "replicates: 5\nrepilcates: 6");
    let (code, err) = validate(&yaml);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("exp.yaml:7:1: error: unknown key `repilcates`"),
        "{err}"
    );
}

#[test]
fn unknown_key_inside_a_variant() {
    let yaml = fake_app_experiment("x", "    envv: { Y: 1 }\n");
    let (code, err) = validate(&yaml);
    assert_eq!(code, Some(2));
    assert!(err.contains("unknown key `envv`"), "{err}");
    assert!(err.contains("exp.yaml:11:"), "{err}");
}

#[test]
fn wrong_type() {
    let yaml = fake_app_experiment("x", "").replace("replicates: 5", "replicates: five");
    let (code, err) = validate(&yaml);
    assert_eq!(code, Some(2));
    assert!(err.contains("exp.yaml:6:13"), "{err}");
    assert!(err.contains("replicates"), "{err}");
}

#[test]
fn every_semantic_problem_is_reported_at_once() {
    let yaml = fake_app_experiment(
        "bad name!",
        "  - name: v1\n    dimension: l9_warp_drive\n    env: { \"1BAD\": x }\n",
    )
    .replace("replicates: 5", "replicates: 3");
    let (code, err) = validate(&yaml);
    assert_eq!(code, Some(2));
    // name, replicates, duplicate variant, unknown dimension, bad env name: all at once.
    assert!(
        err.contains("exp.yaml:1:7: error: experiment name `bad name!`"),
        "{err}"
    );
    assert!(
        err.contains("exp.yaml:6:13: error: replicates is 3, but at least 5"),
        "{err}"
    );
    assert!(
        err.contains(
            "exp.yaml:11:11: error: duplicate variant name `v1` (first used by variants[0])"
        ),
        "{err}"
    );
    assert!(err.contains("unknown dimension `l9_warp_drive`"), "{err}");
    assert!(
        err.contains("`1BAD` is not a valid environment variable name"),
        "{err}"
    );
    assert!(err.contains("5 errors in the experiment file"), "{err}");
}

#[test]
fn few_replicates_allowed_only_explicitly() {
    let yaml = fake_app_experiment("x", "")
        .replace("replicates: 5", "replicates: 3\nallow_few_replicates: true");
    let (code, err) = validate(&yaml);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn empty_variant_list() {
    let yaml = "name: x\napp: { command: [/bin/true] }\nmetric: { pattern: '(?P<epoch>\\d) (?P<seconds>\\d)' }\nvariants: []\n";
    let (code, err) = validate(yaml);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("exp.yaml:4:1: error: the experiment has no variants"),
        "{err}"
    );
}

#[test]
fn regex_without_the_named_groups() {
    let yaml = fake_app_experiment("x", "").replace("(?P<seconds>[0-9.]+)", "([0-9.]+)");
    let (code, err) = validate(&yaml);
    assert_eq!(code, Some(2));
    assert!(err.contains("exp.yaml:5:12: error: the pattern needs named groups `(?P<epoch>...)` and `(?P<seconds>...)` (one value per epoch) or only `(?P<value>...)` (one value per run); it has `epoch`"), "{err}");
}

fn assert_no_data(root: &Path) {
    assert!(
        !root.join("samples.csv").exists()
            || std::fs::read_to_string(root.join("samples.csv"))
                .unwrap()
                .lines()
                .count()
                == 1
    );
}

#[test]
fn crashing_workload_is_reported_and_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = fake_app_experiment("crash", "")
        .replace(
            "variants:\n  - name: v1",
            "variants:\n  - name: v1\n    args: [crash]",
        )
        .replace(
            "command: [bash, -c, 'for e",
            "command: [bash, -c, 'if [ \"$0\" = crash ]; then echo boom >&2; exit 7; fi; for e",
        );
    let (o, root) = run_experiment(dir.path(), &yaml, &[]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("b001-v1: the app exited with status 7"),
        "{err}"
    );
    // Fail fast: block 1 showed every run of v1 failing; no more were run.
    assert!(err.contains("1 run(s) failed"), "{err}");
    // The variant's failed runs are not samples.
    let csv = std::fs::read_to_string(root.join("samples.csv")).unwrap();
    assert!(!csv.contains("\nv1,"), "{csv}");
    assert!(csv.contains("\nbaseline,"), "{csv}");
}

#[test]
fn pattern_that_never_matches_fails_the_run_precisely() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = fake_app_experiment("nomatch", "").replace("epoch (?P<epoch>", "EPOCH (?P<epoch>");
    let (o, root) = run_experiment(dir.path(), &yaml, &[]);
    assert_eq!(o.status.code(), Some(3));
    let err = stderr(&o);
    assert!(
        err.contains("runs/b001-baseline/stdout: the pattern `EPOCH (?P<epoch>"),
        "{err}"
    );
    assert!(err.contains("never matched"), "{err}");
    assert_no_data(&root);
}

#[test]
fn failed_build_stops_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = fake_app_experiment("buildfail", "").replace(
        "app:\n",
        "build:\n  command: \"echo compiling; echo 'error: no such file' >&2; exit 4\"\napp:\n",
    );
    let (o, root) = run_experiment(dir.path(), &yaml, &[]);
    assert_eq!(o.status.code(), Some(3));
    let err = stderr(&o);
    assert!(err.contains("failed (exit status 4)"), "{err}");
    assert!(err.contains("error: no such file"), "{err}");
    assert!(!root.join("runs").exists());
    assert!(!root.join("samples.csv").exists());
}

#[test]
fn hostile_yaml_is_refused_cleanly() {
    // Alias bomb: each level multiplies by 9.
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let prev = (b'a' + i - 1) as char;
        let cur = (b'a' + i) as char;
        bomb.push_str(&format!("{cur}: &{cur} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
    }
    let (code, err) = validate(&bomb);
    assert_eq!(code, Some(2), "{err}");
    // Refused by the alias expansion limit, not by some later check on the expanded keys.
    assert!(err.contains("repetition limit"), "{err}");

    let deep = "name: ".to_string() + &"[".repeat(10_000) + &"]".repeat(10_000) + "\n";
    let (code, err) = validate(&deep);
    assert_eq!(code, Some(2), "{err}");
    // Refused by the depth limit, at a place on line 1, before any parser recurses.
    assert!(
        err.contains("exp.yaml:1:") && err.contains("nested deeper than 32 levels"),
        "{err}"
    );

    let huge = format!("name: x\ndescription: {}\n", "y".repeat(2 * 1024 * 1024));
    let (code, err) = validate(&huge);
    assert_eq!(code, Some(2));
    assert!(err.contains("limited to 1048576 bytes"), "{err}");
}

#[test]
fn a_run_over_its_time_limit_is_killed_and_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = fake_app_experiment("slow", "")
        .replace(
            "variants:\n  - name: v1",
            "variants:\n  - name: v1\n    args: [slow]",
        )
        .replace(
            "command: [bash, -c, 'for e",
            "time_limit: 1s\n  command: [bash, -c, 'if [ \"$0\" = slow ]; then sleep 60; fi; for e",
        );
    let (o, root) = run_experiment(dir.path(), &yaml, &[]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("b001-v1: the run exceeded its time limit and was killed"),
        "{err}"
    );
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("runs/b001-v1/manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["outcome"], "timed_out");
    assert!(
        m["elapsed_s"].as_f64().unwrap() < 60.0,
        "the run was not stopped at its limit"
    );
}

#[test]
fn a_cluster_experiment_is_not_run_on_the_login_node_by_accident() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = fake_app_experiment("onslurm", "")
        .replace("replicates: 5", "replicates: 5\nscheduler: { kind: slurm }");
    let (o, root) = run_experiment(dir.path(), &yaml, &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("is a `scheduler: slurm` experiment"), "{err}");
    assert!(err.contains("optgate submit"), "{err}");
    // One sentence, not a source line's indentation inside it (B4).
    assert!(!err.contains("  "), "runs of spaces: {err:?}");
    assert!(
        err.contains("on this machine, which on a login node"),
        "{err}"
    );
    assert!(!root.exists(), "nothing may be written");

    let (o, _) = run_experiment(dir.path(), &yaml, &["--here"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

// --- Limits (docs/LIMITS.md): each refused at validate with its place, exit 2 ---

/// `app` (or `scheduler`) `time_limit: VALUE` in an otherwise valid experiment.
fn with_time_limit(key: &str, value: &str) -> String {
    let yaml = fake_app_experiment("x", "");
    match key {
        "app" => yaml.replace("app:\n", &format!("app:\n  time_limit: \"{value}\"\n")),
        _ => yaml.replace(
            "replicates: 5",
            &format!("replicates: 5\nscheduler: {{ kind: slurm, time_limit: \"{value}\" }}"),
        ),
    }
}

#[test]
fn time_limits_past_thirty_days_are_refused_not_wrapped() {
    // 307445734561825861 minutes × 60 wraps to 44 s in u64; 2^64-1 s is no Duration a
    // deadline can be added to; 31d is merely more than a queue grants.
    for value in [
        "307445734561825861",
        "18446744073709551615s",
        "10000000000000000000s",
        "99999999999999999999999",
        "31d",
    ] {
        let (code, err) = validate(&with_time_limit("app", value));
        assert_eq!(code, Some(2), "{value}: {err}");
        assert!(
            err.contains("exp.yaml:3:15: error: `")
                && err.contains("is longer than 30 days, the longest time limit"),
            "{value}: {err}"
        );
        let (code, err) = validate(&with_time_limit("scheduler", value));
        assert_eq!(code, Some(2), "{value}: {err}");
        assert!(
            err.contains("exp.yaml:7:")
                && err.contains("is longer than 30 days")
                && err.contains("scheduler.time_limit"),
            "{value}: {err}"
        );
    }
    let (code, err) = validate(&with_time_limit("app", "30d"));
    assert_eq!(code, Some(0), "{err}");
    // A long non-duration is quoted by a short prefix only.
    let (code, err) = validate(&with_time_limit("app", &"z".repeat(100_000)));
    assert_eq!(code, Some(2));
    assert!(
        err.contains("is not a duration") && err.len() < 1000,
        "{}",
        &err[..err.len().min(2000)]
    );
}

#[test]
fn the_largest_time_limit_plans_a_slurm_job_without_overflow() {
    // 30 days per run × 2 runs per block + slack overflows nothing and is capped at what a
    // queue grants.
    let dir = tempfile::tempdir().unwrap();
    let yaml = with_time_limit("app", "30d")
        .replace("replicates: 5", "replicates: 5\nscheduler: { kind: slurm }");
    let p = write_experiment(dir.path(), &yaml);
    let out = dir.path().join("plan");
    let o = run(&["plan", p.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let script = std::fs::read_to_string(out.join("jobs/og-x-b001/job.sh")).unwrap();
    assert!(script.contains("#SBATCH --time=30-00:00:00"), "{script}");
}

#[test]
fn replicates_variants_and_runs_are_bounded() {
    let base = fake_app_experiment("x", "");
    let (code, err) = validate(&base.replace("replicates: 5", "replicates: 10000000"));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("exp.yaml:6:13: error: replicates is 10000000; at most 1000"),
        "{err}"
    );
    let (code, err) =
        validate(&base.replace("replicates: 5", "replicates: 5\nmax_replicates: 4294967295"));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("exp.yaml:7:17: error: max_replicates is 4294967295; at most 1000"),
        "{err}"
    );
    let (code, err) = validate(&base.replace("replicates: 5", "replicates: 1000"));
    assert_eq!(code, Some(0), "{err}");

    // Thousands of variants: one error, not one per variant (none of them has a dimension:
    // a check of each would add an error naming it).
    let many: String = (0..5000)
        .map(|i| format!("  - {{ name: w{i} }}\n"))
        .collect();
    let (code, err) = validate(&fake_app_experiment("x", &many));
    assert_eq!(code, Some(2), "{}", &err[..err.len().min(2000)]);
    assert!(
        err.contains("exp.yaml:7:1: error: the experiment has 5001 variants; at most 64"),
        "{}",
        &err[..err.len().min(2000)]
    );
    assert!(err.lines().count() < 10, "{} lines", err.lines().count());
    assert!(
        err.matches("error:").count() == 1 && !err.contains("w4999"),
        "{}",
        &err[..err.len().min(2000)]
    );

    // 64 variants are accepted, but not 200 blocks of their 65 arms.
    let v64: String = (1..64)
        .map(|i| format!("  - {{ name: w{i}, dimension: l2_autotuning, env: {{ Y: \"{i}\" }} }}\n"))
        .collect();
    // 64 variants need 11 blocks to reach α after Holm (64/2^11 < 0.05; the Holm sizing rule).
    let (code, err) =
        validate(&fake_app_experiment("x", &v64).replace("replicates: 5", "replicates: 11"));
    assert_eq!(code, Some(0), "{err}");
    let (code, err) =
        validate(&fake_app_experiment("x", &v64).replace("replicates: 5", "replicates: 200"));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("exp.yaml:6:13: error: 200 replicates × 65 arms is 13000 runs; at most 10000"),
        "{err}"
    );
}

/// `optgate ARGS` under a 2 GiB address-space limit and a 60 s timeout, so that a
/// regression to unbounded memory fails the test (allocation failure) instead of the machine.
fn run_bounded(args: &[&str]) -> std::process::Output {
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

/// `optgate analyze FILE --baseline baseline` on `csv` written to a temporary file.
fn analyze_text(csv: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("samples.csv");
    std::fs::write(&p, csv).unwrap();
    run_bounded(&["analyze", p.to_str().unwrap(), "--baseline", "baseline"])
}

fn samples(arms: &[&str], replicates: u32, epochs: u32) -> String {
    let mut s = String::from("variant,replicate,epoch,seconds\n");
    let mut x = 1u64;
    for arm in arms {
        for r in 1..=replicates {
            for e in 1..=epochs {
                // Distinct values (no ties), deterministic.
                x = x * 48271 % 2_147_483_647;
                s.push_str(&format!("{arm},{r},{e},{}.{x:010}\n", 1 + e));
            }
        }
    }
    s
}

#[test]
fn samples_beyond_the_replicate_and_variant_limits_are_refused() {
    // More runs per arm than an experiment may plan (the exact statistics grow as n² to n³).
    let o = analyze_text(&samples(&["baseline", "v1"], 1001, 2));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("line 2002: variant 'baseline' has more than 1000 replicates"),
        "{err}"
    );
    // At the limit it is analysed.
    let o = analyze_text(&samples(&["baseline", "v1"], 1000, 1));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    let names: Vec<String> = (0..67).map(|i| format!("v{i}")).collect();
    let mut arms: Vec<&str> = vec!["baseline"];
    arms.extend(names.iter().map(String::as_str));
    let o = analyze_text(&samples(&arms, 2, 1));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("line 134: more than 66 variants"), "{err}");
}

#[test]
fn samples_problems_are_listed_briefly() {
    // Every run has an epoch no other run has: each lacks 1999 epochs. Listing them all
    // took ~24 MB of stderr (and 2.6 GB for a 300 KB file of 10,000 runs).
    let mut csv = String::from("variant,replicate,epoch,seconds\n");
    let mut epoch = 0;
    for arm in ["baseline", "v1"] {
        for r in 1..=1000 {
            epoch += 1;
            csv.push_str(&format!("{arm},{r},{epoch},1.5\n"));
        }
    }
    let o = analyze_text(&csv);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{}", &err[..err.len().min(2000)]);
    assert!(err.len() < 8 * 1024, "{} bytes of stderr", err.len());
    assert!(
        err.contains("2000 problems in the samples file")
            && err.contains(
                "line 2: variant 'baseline', replicate 1 lacks epochs 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 … (1999 in all)"
            )
            && err.contains("… and 1980 more"),
        "{err}"
    );

    // A 10 MB field is quoted by a short prefix, not echoed.
    let csv = format!(
        "variant,replicate,epoch,seconds\nbaseline,1,1,{}x\n",
        "9".repeat(10_000_000)
    );
    let o = analyze_text(&csv);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{}", &err[..err.len().min(2000)]);
    assert!(err.len() < 1024, "{} bytes of stderr", err.len());
    assert!(
        err.contains("line 2: a field of 10000001 bytes ('9999999999"),
        "{err}"
    );
}

#[test]
fn samples_file_must_be_a_regular_file_of_bounded_size() {
    for (path, kind) in [("/dev/zero", "a character device"), ("/", "a directory")] {
        let o = run_bounded(&["analyze", path, "--baseline", "baseline"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{path}: {err}");
        assert!(
            err.contains(&format!(
                "cannot read samples file {path}: it is not a regular file (it is {kind})"
            )),
            "{err}"
        );
    }
    // A sparse file past the limit is refused by its size, before it is read.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.csv");
    std::fs::File::create(&p)
        .unwrap()
        .set_len(257 * 1024 * 1024)
        .unwrap();
    let o = run_bounded(&["analyze", p.to_str().unwrap(), "--baseline", "baseline"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{}", &err[..err.len().min(2000)]);
    assert!(
        err.contains("it is larger than 256 MiB, the limit of a samples file"),
        "{}",
        &err[..err.len().min(2000)]
    );
}

/// Every typo at once (serde stops at the first; the loader goes on past each), each at
/// its line and column, printed as compiler-style diagnostics without a second prefix.
#[test]
fn validate_reports_every_typo_at_once() {
    let yaml = "name: t\napp:\n  command: [echo]\n  timelimit: 5m\nmetric:\n  pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s'\nreplicates: 7\nseeds: 3\nvariants:\n  - name: v\n    dimension: l2_threading_model\n    env: { X: \"1\" }\n    governer: performance\n";
    let (code, err) = validate(yaml);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("exp.yaml:4:3: error: app: unknown key `timelimit`"),
        "{err}"
    );
    assert!(
        err.contains("exp.yaml:8:1: error: unknown key `seeds`"),
        "{err}"
    );
    assert!(
        err.contains("exp.yaml:13:5: error: variants[0]: unknown key `governer`"),
        "{err}"
    );
    assert!(err.contains("3 errors in the experiment file"), "{err}");
    assert!(!err.contains("optgate: error:"), "doubled prefix: {err}");
    // Rust's type names never reach the user.
    let (code, err) =
        validate("name: t\napp: { command: [echo] }\nmetric: { pattern: 'x' }\nreplicates: many\n");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("expected a whole number"), "{err}");
    assert!(!err.contains("u32"), "{err}");
}

/// A missing file says so once, with the documented exit code, for every command that
/// reads an experiment.
#[test]
fn a_missing_experiment_file_is_one_clear_line() {
    for cmd in ["validate", "run", "plan", "submit"] {
        let mut args = vec![cmd, "/nonexistent/exp.yaml"];
        if cmd == "plan" {
            args.extend(["--out", "/nonexistent/out"]);
        }
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(
            err.trim(),
            "optgate: error: cannot read experiment file /nonexistent/exp.yaml: No such file or directory (os error 2)",
            "{cmd}"
        );
    }
}

/// One complete DFTracer 2.x event line.
fn trace_event(id: u64, name: &str, cat: &str, epoch: Option<u32>) -> String {
    let args = epoch.map_or(String::new(), |e| format!(",\"args\":{{\"epoch\":{e}}}"));
    format!(
        "{{\"id\":{id},\"name\":\"{name}\",\"cat\":\"{cat}\",\"pid\":1,\"tid\":1,\"ts\":{id},\"dur\":5,\"ph\":1{args}}}\n"
    )
}

#[test]
fn trace_summary_keeps_long_and_many_names_bounded() {
    let dir = tempfile::tempdir().unwrap();
    // Names and categories of 70,000 bytes: the table's column width overflowed
    // (`Formatting argument out of range`).
    let long = dir.path().join("long.pfw");
    let name = "n".repeat(70_000);
    let cat = "c".repeat(70_000);
    std::fs::write(
        &long,
        trace_event(1, &name, "io", Some(1)) + &trace_event(2, "read", &cat, Some(1)),
    )
    .unwrap();
    let o = run_bounded(&["trace", "summary", long.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains(&format!("{}…", "n".repeat(256))), "{out}");
    assert!(!out.contains(&"n".repeat(257)), "the name is kept whole");
    assert!(out.contains(&format!("{}…", "c".repeat(256))), "{out}");

    // 100,000 categories, then 10,000 epochs of the last one: every epoch's category
    // table was as long as the file's category list (16 GB).
    let many = dir.path().join("many.pfw");
    let mut text = String::new();
    for i in 0..100_000 {
        text.push_str(&trace_event(i, "x", &format!("c{i}"), None));
    }
    for e in 1..=10_000 {
        text.push_str(&trace_event(100_000 + u64::from(e), "x", "c99999", Some(e)));
    }
    std::fs::write(&many, text).unwrap();
    let o = run_bounded(&["trace", "summary", many.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{}", &err[..err.len().min(2000)]);
    assert!(
        err.contains(
            "many.pfw:1001: more than 1000 distinct categories; events of \"c1000\" and later new categories are counted under \"(other categories)\""
        ),
        "{err}"
    );
    let out = stdout(&o);
    assert!(
        out.contains("(other categories)"),
        "{}",
        &out[..out.len().min(2000)]
    );
}

#[test]
fn trace_summary_refuses_devices_and_gzip_bombs_and_skips_long_lines() {
    let o = run_bounded(&["trace", "summary", "/dev/zero"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("/dev/zero is not a trace file: it is a character device"),
        "{}",
        stderr(&o)
    );

    let dir = tempfile::tempdir().unwrap();
    // 200 MB of zeros in ~200 KB of gzip: one "line" that was buffered whole.
    let bomb = dir.path().join("bomb.pfw.gz");
    let made = std::process::Command::new("bash")
        .arg("-c")
        .arg("head -c 200000000 /dev/zero | gzip -9 > \"$0\"")
        .arg(&bomb)
        .status()
        .unwrap();
    assert!(made.success());
    let o = run_bounded(&["trace", "summary", bomb.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the gzip stream expands more than 200 times") && err.len() < 500,
        "{err}"
    );

    // A 2 MiB line is skipped as it streams by; the events around it count.
    let long = dir.path().join("longline.pfw");
    let text = trace_event(1, "read", "posix", Some(1))
        + &"z".repeat(2 * 1024 * 1024)
        + "\n"
        + &trace_event(2, "read", "posix", Some(2));
    std::fs::write(&long, text).unwrap();
    let o = run_bounded(&["trace", "summary", long.to_str().unwrap(), "--json"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(
            "longline.pfw:2: line of 2097152 bytes, longer than the 1048576 a line may have"
        ),
        "{err}"
    );
    let j: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(j["total"]["events"], 2, "{j}");
}

/// What must exist is checked before anything runs: the workdir, and a program the app's
/// argument vector names outright (absolute path or a bare name on PATH).
#[test]
fn a_missing_workdir_or_program_is_a_preflight_error() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = fake_app_experiment("paths", "workdir: no/such/dir\n");
    let (code, err) = validate(&yaml);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("error: pre-flight: workdir "), "{err}");
    assert!(err.contains("no/such/dir does not exist"), "{err}");
    // `run` stops before creating anything under the missing workdir.
    let (o, root) = run_experiment(dir.path(), &yaml, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!root.exists());
    assert!(
        !dir.path().join("no").exists(),
        "created the missing workdir"
    );

    let yaml = fake_app_experiment("paths", "")
        .replace("command: [bash, -c,", "command: [/no/such/program, -c,");
    let (code, err) = validate(&yaml);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("app.command: `/no/such/program` is not an executable file"),
        "{err}"
    );
    let yaml = fake_app_experiment("paths", "")
        .replace("command: [bash, -c,", "command: [no-such-program-xyz, -c,");
    let (code, err) = validate(&yaml);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("app.command: `no-such-program-xyz` is not on PATH"),
        "{err}"
    );
    // On a cluster the compute node may provide it: a warning.
    let yaml = yaml.replace("replicates: 5", "replicates: 5\nscheduler: { kind: slurm }");
    let (code, err) = validate(&yaml);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("warning: pre-flight: app.command"), "{err}");
}

/// One failed run in a paired experiment is data, not a stall: its block is left out of
/// the comparison (and said), the report is printed, the failure is listed, exit 3.
#[test]
fn one_failed_run_leaves_out_its_block_and_the_report_is_printed() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = r#"name: onefail
app:
  command: [bash, -c, '[ "$OPTGATE_RUN_ID" = b003-v1 ] && { echo boom >&2; exit 9; }; for e in 1 2 3; do echo "epoch $e took 0.0$e s"; done']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 6
variants:
  - name: v1
    dimension: l2_threading_model
    env: { X: "1" }
"#;
    let (o, root) = run_experiment(dir.path(), yaml, &["--json"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let v = &report["variants"][0];
    assert_eq!(v["n_baseline"], 5, "{v:#}");
    assert_eq!(v["n_variant"], 5, "{v:#}");
    // Identical times in both arms: a decision, not a stall.
    assert_eq!(v["decision"], "reject", "{v:#}");
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains(
                "1 block(s) left out for lack of a complete pair: block 3 (no complete run of 'v1')"
            )),
        "{v:#}"
    );
    let err = stderr(&o);
    assert!(
        err.contains("b003-v1: the app exited with status 9"),
        "{err}"
    );
    assert!(root.join("report.json").exists());
}

/// A misspelt required key (`app.comand`) is reported with the key it leaves missing, and
/// hides nothing after it: the misspelt key in `variants[0]` is reported too.
#[test]
fn validate_goes_past_a_missing_required_key() {
    let yaml = fake_app_experiment("x", "    governer: performance\n")
        .replace("  command: [bash", "  comand: [bash");
    let (code, err) = validate(&yaml);
    assert_eq!(code, Some(2), "{err}");
    for expected in [
        "exp.yaml:3:3: error: app: unknown key `comand`",
        "exp.yaml:2:1: error: app: missing required key `command`",
        "exp.yaml:11:5: error: variants[0]: unknown key `governer`",
        "3 errors in the experiment file",
    ] {
        assert!(err.contains(expected), "no `{expected}` in:\n{err}");
    }
}
