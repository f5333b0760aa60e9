//! The loader's checks one by one: each error appears for the value that breaks the rule and
//! not for the value just inside it, at the place it is about; and the resolved experiment
//! (arms, builds, limits, workdir) is what the file says.

use super::*;

const PATH: &str = "/exp/dir/exp.yaml";

/// A valid experiment; `extra` (top-level keys) goes before `variants`, which comes last so
/// that more variants can be appended; `variant` is the one variant's flow mapping body.
fn yaml_with(extra: &str, variant: &str) -> String {
    format!(
        "name: t\n\
         app:\n  command: [./app]\n\
         metric: {{ pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s' }}\n\
         {extra}\
         variants:\n  - {{ {variant} }}\n"
    )
}

const V: &str = "name: v, dimension: l2_threading_model, env: { W: \"1\" }";

fn base(extra: &str) -> String {
    yaml_with(extra, V)
}

fn load_text(text: &str) -> Result<Loaded, LoadError> {
    load_str(text, Path::new(PATH))
}

fn ok(text: &str) -> Loaded {
    match load_text(text) {
        Ok(l) => l,
        Err(e) => panic!("expected a valid experiment:\n{text}\n---\n{e}"),
    }
}

fn diagnostics(text: &str) -> Vec<Diagnostic> {
    match load_text(text) {
        Ok(l) => l.warnings,
        Err(LoadError::Invalid { diagnostics }) => diagnostics,
        Err(e) => panic!("{e}"),
    }
}

fn errors(text: &str) -> Vec<Diagnostic> {
    diagnostics(text)
        .into_iter()
        .filter(|d| d.is_error())
        .collect()
}

/// Asserts exactly one error, at `path`, whose message contains `fragment`.
#[track_caller]
fn one_error(text: &str, path: &str, fragment: &str) -> Diagnostic {
    let e = errors(text);
    assert_eq!(e.len(), 1, "expected one error for\n{text}\ngot {e:#?}");
    assert_eq!(e[0].path, path, "{e:#?}");
    assert!(
        e[0].message.contains(fragment),
        "`{}` lacks `{fragment}`",
        e[0].message
    );
    e.into_iter().next().unwrap()
}

#[track_caller]
fn no_errors(text: &str) {
    let e = errors(text);
    assert!(e.is_empty(), "unexpected errors for\n{text}\n{e:#?}");
}

fn warnings(text: &str) -> Vec<Diagnostic> {
    diagnostics(text)
        .into_iter()
        .filter(|d| !d.is_error())
        .collect()
}

#[test]
fn a_minimal_file_loads_with_only_the_checklist_warning() {
    let l = ok(&base(""));
    assert_eq!(l.warnings.len(), 1, "{:#?}", l.warnings);
    assert!(
        l.warnings[0]
            .message
            .starts_with("checklist: no verdict for 9 of the 10")
    );
    // No checklist at all: the warning is about the file, not a place in it.
    assert_eq!(l.warnings[0].path, "");
    assert_eq!(l.warnings[0].line, None);
}

#[test]
fn errors_come_first_with_the_warnings_and_a_count() {
    let text = base("replicates: 0\nseed: 3\ncompare: { alpha: 0.9 }\n");
    let Err(e) = load_text(&text) else {
        panic!("invalid file loaded")
    };
    let LoadError::Invalid { diagnostics } = &e else {
        panic!("{e}")
    };
    let sev: Vec<bool> = diagnostics.iter().map(Diagnostic::is_error).collect();
    assert_eq!(sev, [true, true, false], "{diagnostics:#?}");
    let text = e.to_string();
    assert!(
        text.ends_with("\n2 errors in the experiment file"),
        "{text}"
    );
    assert!(text.contains("replicates must be at least 1"), "{text}");
    assert!(text.contains("warning: checklist"), "{text}");

    let e = load_text(&base("replicates: 0\n")).unwrap_err().to_string();
    assert!(e.ends_with("\n1 error in the experiment file"), "{e}");
    assert!(
        e.starts_with(
            "/exp/dir/exp.yaml:5:13: error: replicates must be at least 1 (at `replicates`)"
        ),
        "{e}"
    );
}

#[test]
fn serde_messages_are_reworded() {
    let e = one_error(&base("colour: blue\n"), "", "unknown key `colour`");
    assert!(e.line.is_some());
    one_error(
        "name: t\napp: { command: {a: 1} }\nmetric: {}\nvariants: []\n",
        "",
        "a command must be a string (shell code) or a list of strings (argv)",
    );
    // Every missing key, each once, where the mapping that lacks it starts.
    let e = errors("name: t\nvariants: []\n");
    let shown: Vec<(&str, Option<usize>)> =
        e.iter().map(|d| (d.message.as_str(), d.line)).collect();
    assert_eq!(
        shown,
        [
            ("missing required key `app`", Some(1)),
            (
                "missing required key `metric` (or a `metrics:` list of several)",
                Some(1)
            )
        ]
    );
    // Other messages pass through.
    one_error(&base("replicates: many\n"), "", "invalid type");
}

#[test]
fn explain_serde_leaves_other_messages_alone() {
    assert_eq!(explain_serde("invalid type: x"), "invalid type: x");
    assert_eq!(
        explain_serde("variants[0]: missing field `name`"),
        "variants[0]: missing required key `name`"
    );
    // Rust's type names at the end of a message become words; elsewhere they stay.
    assert_eq!(
        explain_serde("invalid type: string \"a\", expected u32"),
        "invalid type: string \"a\", expected a whole number ≥ 0"
    );
    assert_eq!(
        explain_serde("invalid type: map, expected i64"),
        "invalid type: map, expected a whole number"
    );
    assert_eq!(
        explain_serde("invalid type: map, expected f64"),
        "invalid type: map, expected a number"
    );
    assert_eq!(explain_serde("expected u32 here"), "expected u32 here");
}

#[test]
fn load_reads_files_and_reports_unreadable_ones() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("e.yaml");
    std::fs::write(&p, base("")).unwrap();
    let l = load(&p).unwrap();
    assert_eq!(l.experiment.source, p);
    assert_eq!(l.experiment.workdir, dir.path());
    match load(&dir.path().join("missing.yaml")) {
        Err(LoadError::Read { path, .. }) => assert!(path.ends_with("missing.yaml")),
        other => panic!("{other:?}"),
    }
    // A directory is refused by its type, a sparse 16 MiB file by its size: neither read.
    match load(dir.path()) {
        Err(e @ LoadError::Read { .. }) => {
            assert!(
                e.to_string()
                    .ends_with("it is not a regular file (it is a directory)")
            )
        }
        other => panic!("{other:?}"),
    }
    let big = dir.path().join("big.yaml");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    match load(&big) {
        Err(LoadError::TooLarge { bytes, .. }) => assert_eq!(bytes, 16 << 20),
        other => panic!("{other:?}"),
    }
}

#[test]
fn safe_names() {
    for good in ["a", "A9", "9a", "a_b-c.d", &"x".repeat(64)] {
        assert!(is_safe_name(good), "{good}");
    }
    for bad in [
        "",
        "_a",
        "-a",
        ".a",
        "a b",
        "a/b",
        "a$",
        "é",
        &"x".repeat(65),
    ] {
        assert!(!is_safe_name(bad), "{bad}");
    }
}

#[test]
fn env_names() {
    for good in ["a", "_", "_X", "A1", "OMP_NUM_THREADS"] {
        assert!(is_env_name(good), "{good}");
    }
    for bad in ["", "1A", "A-B", "A.B", "A B", "Ä"] {
        assert!(!is_env_name(bad), "{bad}");
    }
}

#[test]
fn plain_words() {
    for good in ["a", "_a", "-a", "a.b-c_d", &"x".repeat(128)] {
        assert!(is_plain_word(good), "{good}");
    }
    for bad in ["", "a b", "a,b", "a$", &"x".repeat(129)] {
        assert!(!is_plain_word(bad), "{bad}");
    }
}

#[test]
fn durations() {
    assert_eq!(parse_duration("5"), Ok(Duration::from_secs(300)));
    assert_eq!(parse_duration(" 90s "), Ok(Duration::from_secs(90)));
    assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
    let e = parse_duration("soon").unwrap_err().to_string();
    assert!(e.starts_with("`soon` is not a duration"), "{e}");
}

#[test]
fn time_limits_resolve_and_bad_ones_are_errors() {
    let l = ok(&yaml_with(
        "scheduler: { kind: slurm, time_limit: 2h }\n",
        &format!("{V}, launcher: {{ nodes: 2 }}"),
    ));
    assert_eq!(l.experiment.run_time_limit, None);
    assert_eq!(
        l.experiment.allocation_time_limit,
        Some(Duration::from_secs(7200))
    );
    let text = base("").replace("command: [./app]", "command: [./app]\n  time_limit: 90s");
    assert_eq!(
        ok(&text).experiment.run_time_limit,
        Some(Duration::from_secs(90))
    );
    one_error(
        &text.replace("90s", "0s"),
        "app.time_limit",
        "a time limit must be longer than zero",
    );
    one_error(&text.replace("90s", "later"), "app.time_limit", "`later`");
}

#[test]
fn experiment_name() {
    one_error(
        &base("").replacen("name: t", "name: 'a b'", 1),
        "name",
        "experiment name `a b` must be",
    );
}

#[test]
fn replicates_bounds() {
    one_error(&base("replicates: 0\n"), "replicates", "at least 1");
    one_error(&base("replicates: 4\n"), "replicates", "replicates is 4");
    no_errors(&base("replicates: 5\n"));
    no_errors(&base("replicates: 2\nallow_few_replicates: true\n"));
    no_errors(&base("replicates: 5\nallow_few_replicates: true\n"));
    one_error(
        &base("replicates: 0\nallow_few_replicates: true\n"),
        "replicates",
        "at least 1",
    );
    one_error(
        &base("replicates: 6\nmax_replicates: 5\n"),
        "max_replicates",
        "max_replicates (5) is smaller than replicates (6)",
    );
    no_errors(&base("replicates: 6\nmax_replicates: 6\n"));
}

#[test]
fn compare_bounds() {
    for bad in ["0", "0.5", "-0.1", ".nan"] {
        one_error(
            &base(&format!("compare: {{ alpha: {bad} }}\n")),
            "compare.alpha",
            "alpha must be between 0 and 0.5",
        );
    }
    for good in ["0.0001", "0.49"] {
        no_errors(&base(&format!("compare: {{ alpha: {good} }}\n")));
    }
    for bad in ["-0.5", "100", ".inf", ".nan"] {
        one_error(
            &base(&format!("compare: {{ min_effect_pct: {bad} }}\n")),
            "compare.min_effect_pct",
            "min_effect_pct must be a percentage",
        );
    }
    for good in ["0", "99.9"] {
        no_errors(&base(&format!("compare: {{ min_effect_pct: {good} }}\n")));
    }
    one_error(
        &base("compare: { production_epochs: 0 }\n"),
        "compare.production_epochs",
        "at least 1",
    );
    no_errors(&base("compare: { production_epochs: 1 }\n"));
}

#[test]
fn steady_epochs_parse_or_are_errors() {
    let l = ok(&base("compare: { steady_epochs: '2..' }\n"));
    assert!(l.experiment.steady_epochs.is_some());
    assert!(ok(&base("")).experiment.steady_epochs.is_none());
    let e = errors(&base("compare: { steady_epochs: 'soon' }\n"));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].path, "compare.steady_epochs");
}

fn with_metric(metric: &str) -> String {
    base("").replace(
        "metric: { pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s' }",
        &format!("metric: {metric}"),
    )
}

const PAT: &str = "'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s'";

#[test]
fn metric_sources() {
    one_error(&with_metric("{}"), "metric", "metric needs a `pattern`");
    one_error(
        &with_metric("{ pattern: '(' }"),
        "metric.pattern",
        "invalid regular expression",
    );
    one_error(
        &with_metric("{ pattern: '(?P<epoch>\\d+) (?P<s>x)' }"),
        "metric.pattern",
        "the pattern needs named groups `(?P<epoch>...)` and `(?P<seconds>...)` (one value per epoch) or only `(?P<value>...)` (one value per run); it has `epoch`, `s`",
    );
    one_error(
        &with_metric("{ pattern: 'x' }"),
        "metric.pattern",
        "(one value per run); it has none",
    );
    no_errors(&with_metric(&format!("{{ pattern: {PAT} }}")));
    // A file source needs a run-relative file.
    one_error(
        &with_metric(&format!("{{ source: file, pattern: {PAT} }}")),
        "metric",
        "`source: file` needs `file:`",
    );
    no_errors(&with_metric(&format!(
        "{{ source: file, pattern: {PAT}, file: out/log.txt }}"
    )));
    for bad in ["''", "/abs/log", "a/../../log", ".."] {
        one_error(
            &with_metric(&format!("{{ source: file, pattern: {PAT}, file: {bad} }}")),
            "metric.file",
            "must be a path relative to the run directory",
        );
    }
    for k in ["dir", "category", "epoch_marker"] {
        one_error(
            &with_metric(&format!("{{ pattern: {PAT}, {k}: x }}")),
            &format!("metric.{k}"),
            "only applies to `source: dftracer`",
        );
    }
    // DFTracer: a directory, no pattern.
    no_errors(&with_metric("{ source: dftracer, dir: traces }"));
    no_errors(&with_metric(
        "{ source: dftracer, dir: traces, category: c, epoch_marker: e }",
    ));
    one_error(
        &with_metric("{ source: dftracer }"),
        "metric",
        "needs `dir:`",
    );
    one_error(
        &with_metric("{ source: dftracer, dir: /traces }"),
        "metric.dir",
        "relative",
    );
    one_error(
        &with_metric(&format!("{{ source: dftracer, dir: t, pattern: {PAT} }}")),
        "metric.pattern",
        "does not apply to `source: dftracer`",
    );
}

#[test]
fn system_metric_sources() {
    no_errors(&base("system_metric: { pattern: '(?P<value>\\d+)' }\n"));
    one_error(
        &base("system_metric: { pattern: '\\d+' }\n"),
        "system_metric.pattern",
        "`(?P<value>...)`",
    );
    one_error(
        &base("system_metric: { pattern: '(?P<value>\\d+)', source: file }\n"),
        "system_metric",
        "needs `file:`",
    );
    one_error(
        &base("system_metric: { pattern: '(?P<value>\\d+)', source: file, file: /x }\n"),
        "system_metric.file",
        "relative",
    );
    no_errors(&base(
        "system_metric: { pattern: '(?P<value>\\d+)', source: file, file: x }\n",
    ));
    one_error(
        &base("system_metric: { pattern: '(?P<value>\\d+)', source: dftracer }\n"),
        "system_metric.source",
        "reads stdout or a file",
    );
}

#[test]
fn correctness_checks() {
    no_errors(&base("correctness: { files: [a, b/c] }\n"));
    one_error(
        &base("correctness: { files: [a, /b] }\n"),
        "correctness.files[1]",
        "relative",
    );
    let v = "pattern: '(?P<value>\\d+)'";
    no_errors(&base(&format!(
        "correctness: {{ values: {{ {v}, rel_tol: 0, abs_tol: 0.5 }} }}\n"
    )));
    one_error(
        &base("correctness: { values: { pattern: 'x' } }\n"),
        "correctness.values.pattern",
        "`(?P<value>...)`",
    );
    for (k, bad) in [("rel_tol", "-1"), ("abs_tol", ".inf"), ("rel_tol", ".nan")] {
        one_error(
            &base(&format!(
                "correctness: {{ values: {{ {v}, {k}: {bad} }} }}\n"
            )),
            &format!("correctness.values.{k}"),
            "must be a non-negative number",
        );
    }
    one_error(
        &base(&format!(
            "correctness: {{ values: {{ {v}, source: file }} }}\n"
        )),
        "correctness.values",
        "needs `file:`",
    );
    one_error(
        &base(&format!(
            "correctness: {{ values: {{ {v}, source: file, file: ../x }} }}\n"
        )),
        "correctness.values.file",
        "relative",
    );
    no_errors(&base(&format!(
        "correctness: {{ values: {{ {v}, source: file, file: x }} }}\n"
    )));
    one_error(
        &base(&format!(
            "correctness: {{ values: {{ {v}, source: dftracer }} }}\n"
        )),
        "correctness.values.source",
        "read from stdout or a file",
    );
}

/// The three forms of `correctness.expect` resolve to the words or regex they say, read
/// where the rule says: `expect.pattern`'s captures, else lines of its own `source`, else
/// `correctness.values`' captures, else stdout's lines.
#[test]
fn expect_forms_resolve_to_what_and_where() {
    use crate::expect::{ExpectPlace, Expected};
    let verdict = |c: &str| {
        ok(&base(&format!("correctness: {c}\n")))
            .experiment
            .patterns
            .expect
            .expect("an expect check")
    };
    let v = verdict("{ expect: PASSED }");
    assert!(matches!(&v.expected, Expected::Words { words, .. } if words == &["PASSED"]));
    assert!(matches!(
        v.place,
        ExpectPlace::Lines {
            source: MetricSource::Stdout,
            file: None
        }
    ));
    let v = verdict("{ expect: [PASSED, SUCCESSFUL] }");
    assert!(v.expected.accepts("SUCCESSFUL") && !v.expected.accepts("FAILED"));
    let v = verdict("{ expect: { regex: '^OK$' }, values: { pattern: 'r (?P<value>\\S+)' } }");
    assert!(matches!(&v.expected, Expected::Regex(r) if r.as_str() == "^OK$"));
    assert!(matches!(v.place, ExpectPlace::Values));
    let v = verdict(
        "{ expect: { words: OK, pattern: 'v=(?P<value>\\w+)', source: file, file: out.txt } }",
    );
    assert!(matches!(
        &v.place,
        ExpectPlace::Captures { pattern, source: MetricSource::File, file: Some(f) }
            if pattern.as_str() == "v=(?P<value>\\w+)" && f == "out.txt"
    ));
    let v = verdict(
        "{ expect: { words: OK, source: file, file: o }, values: { pattern: '(?P<value>x)' } }",
    );
    assert!(matches!(
        v.place,
        ExpectPlace::Lines {
            source: MetricSource::File,
            ..
        }
    ));
    // The place of the `correctness` key, for errors of the experiment.
    let e = ok(&base("correctness: { expect: PASSED }\n")).experiment;
    assert_eq!(e.correctness_key_place(), format!("{PATH}:5"));
    assert!(ok(&base("")).experiment.patterns.expect.is_none());
}

#[test]
fn expect_checks_say_where() {
    let at = |c: &str, path: &str, fragment: &str| {
        one_error(&base(&format!("correctness: {c}\n")), path, fragment)
    };
    let d = at(
        "{ expect: [PASSED, ' x'] }",
        "correctness.expect[1]",
        "without blanks",
    );
    assert_eq!((d.line, d.column), (Some(5), Some(33)), "{d:?}");
    at("{ expect: '' }", "correctness.expect", "non-empty");
    at("{ expect: [] }", "correctness.expect", "at least one word");
    at(
        "{ expect: { words: [A, \"B C\\n\"] } }",
        "correctness.expect.words[1]",
        "one line",
    );
    at("{ expect: { regex: '(' } }", "correctness.expect.regex", "");
    at(
        "{ expect: { words: A, regex: B } }",
        "correctness.expect",
        "not both",
    );
    at(
        "{ expect: { pattern: '(?P<value>x)' } }",
        "correctness.expect",
        "needs `words`",
    );
    at(
        "{ expect: { words: A, pattern: 'x' } }",
        "correctness.expect.pattern",
        "`(?P<value>...)`",
    );
    at(
        "{ expect: { words: A, source: file } }",
        "correctness.expect",
        "needs `file:`",
    );
    at(
        "{ expect: { words: A, source: file, file: /o } }",
        "correctness.expect.file",
        "relative",
    );
    at(
        "{ expect: { words: A, file: o } }",
        "correctness.expect.file",
        "only with `source: file`",
    );
    at(
        "{ expect: { words: A, source: dftracer } }",
        "correctness.expect.source",
        "stdout or a file",
    );
    // Words past the regex size limit would leave the check out silently: refused.
    let many: Vec<String> = (0..4_000)
        .map(|i| format!("W{i}x{}", "y".repeat(40)))
        .collect();
    at(
        &format!("{{ expect: [{}] }}", many.join(", ")),
        "correctness.expect",
        "too many or too long",
    );
}

/// `correctness.expect` is read by its YAML shape: a problem inside it is reported where
/// it is.
#[test]
fn expect_shape_problems_say_where() {
    let at = |c: &str, path: &str, fragment: &str| {
        one_error(&base(&format!("correctness: {c}\n")), path, fragment)
    };
    let d = at(
        "{ expect: { wrds: A } }",
        "",
        "correctness.expect: unknown key `wrds`",
    );
    assert_eq!((d.line, d.column), (Some(5), Some(26)), "{d:?}");
    let d = at(
        "{ expect: 1 }",
        "",
        "expected a word, a list of words, or a mapping",
    );
    assert_eq!((d.line, d.column), (Some(5), Some(24)), "{d:?}");
    at(
        "{ expect: { words: { a: b } } }",
        "",
        "correctness.expect.words: invalid type: map, expected a word or a list",
    );
    no_errors(&base(
        "correctness: { expect: { words: [A, B], source: file, file: o/x } }\n",
    ));
}

fn slurm(scheduler: &str, variant_extra: &str) -> String {
    yaml_with(
        &format!("scheduler: {{ kind: slurm, {scheduler} }}\n"),
        &format!("{V}{variant_extra}"),
    )
}

#[test]
fn scheduler_checks() {
    for k in ["nodes", "tasks_per_node", "cpus_per_task"] {
        one_error(
            &slurm(&format!("{k}: 0"), ""),
            &format!("scheduler.{k}"),
            "must be at least 1",
        );
        no_errors(&slurm(&format!("{k}: 1"), ""));
    }
    no_errors(&slurm("nodes: 4, tasks_per_node: 8", ""));
    for k in ["queue", "account"] {
        one_error(
            &slurm(&format!("{k}: 'a b'"), ""),
            &format!("scheduler.{k}"),
            "may only contain",
        );
        no_errors(&slurm(&format!("{k}: pbatch"), ""));
    }
    no_errors(&slurm("extra_directives: ['--constraint=cpu']", ""));
    for bad in ["'constraint'", "\"--a\\nb\"", "\"--a\\rb\""] {
        one_error(
            &slurm(&format!("extra_directives: [--x, {bad}]"), ""),
            "scheduler.extra_directives[1]",
            "one option starting with `-`",
        );
    }
    // The local scheduler runs one process: nodes and tasks must be 1, cpus may be many.
    for k in ["nodes", "tasks_per_node"] {
        one_error(
            &base(&format!("scheduler: {{ {k}: 2 }}\n")),
            &format!("scheduler.{k}"),
            "must be 1",
        );
        no_errors(&base(&format!("scheduler: {{ {k}: 1 }}\n")));
    }
    no_errors(&base("scheduler: { cpus_per_task: 8 }\n"));
}

#[test]
fn launcher_checks() {
    for k in ["nodes", "tasks_per_node", "cpus_per_task"] {
        one_error(
            &slurm("", &format!(", launcher: {{ {k}: 0 }}")),
            &format!("variants[0].launcher.{k}"),
            "must be at least 1",
        );
    }
    no_errors(&slurm("", ", launcher: { nodes: 2, tasks_per_node: 4 }"));
    for k in ["nodes", "tasks_per_node"] {
        one_error(
            &base("").replace(V, &format!("{V}, launcher: {{ {k}: 2 }}")),
            &format!("variants[0].launcher.{k}"),
            "the local scheduler runs one process",
        );
        one_error(
            &base(&format!("baseline: {{ launcher: {{ {k}: 2 }} }}\n")),
            &format!("baseline.launcher.{k}"),
            "the local scheduler runs one process",
        );
    }
    no_errors(&base(
        "baseline: { launcher: { cpus_per_task: 8, nodes: 1 } }\n",
    ));
    // A NUL character is refused by the YAML layer, at the value, wherever it is.
    let e = one_error(
        &slurm("", ", launcher: { extra_args: [ok, \"a\\0b\"] }"),
        "",
        "a NUL character",
    );
    assert_eq!(e.line, Some(7), "{e:?}");
}

#[test]
fn env_and_unset_checks() {
    let e = one_error(
        &base("").replace("command: [./app]", "command: [./app]\n  env: { 1BAD: x }"),
        "app.env",
        "`1BAD` is not a valid environment variable name",
    );
    // A key error points at the key, not at its value.
    assert_eq!((e.line, e.column), (Some(4), Some(10)));
    one_error(
        &base("").replace(
            "command: [./app]",
            "command: [./app]\n  env: { OK: \"a\\0b\" }",
        ),
        "",
        "a NUL character",
    );
    one_error(
        &base("baseline: { env: { A-B: 1 } }\n"),
        "baseline.env",
        "not a valid",
    );
    one_error(
        &base("baseline: { unset: [OK, 'no way'] }\n"),
        "baseline.unset[1]",
        "`no way` is not a valid environment variable name",
    );
    one_error(
        &base("").replace(V, &format!("{V}, unset: [X, 9]")),
        "variants[0].unset[1]",
        "not a valid",
    );
}

#[test]
fn build_checks() {
    one_error(
        &base("build: { command: '  ' }\n"),
        "build.command",
        "the build command is empty",
    );
    one_error(
        &base("build: { command: [] }\n"),
        "build.command",
        "the build command is empty",
    );
    one_error(
        &base("build: { command: make, env: { 'A B': 1 } }\n"),
        "build.env",
        "not a valid",
    );
    no_errors(&base("build: { command: make }\n"));
    no_errors(&base("build: { command: [make, -j4] }\n"));
    one_error(
        &base("").replace(V, &format!("{V}, build: {{ command: [] }}")),
        "variants[0].build.command",
        "empty",
    );
}

#[test]
fn variant_checks() {
    let d = diagnostics(&base("").replace(
        "variants:\n  - { name: v, dimension: l2_threading_model, env: { W: \"1\" } }\n",
        "variants: []\n",
    ));
    let e: Vec<_> = d.iter().filter(|d| d.is_error()).collect();
    assert_eq!(e.len(), 1, "{d:#?}");
    assert_eq!(e[0].path, "variants");
    assert!(e[0].message.contains("no variants"));

    one_error(
        &base("").replace("name: v,", "name: 'v w',"),
        "variants[0].name",
        "variant name `v w` must be",
    );
    for reserved in ["baseline", "aa-control"] {
        one_error(
            &base("").replace("name: v,", &format!("name: {reserved},")),
            "variants[0].name",
            "is reserved",
        );
    }
    one_error(
        &(base("") + &format!("  - {{ {V} }}\n")).replace(
            "variants:\n",
            "variants:\n  - { name: w, env: { W: \"2\" } }\n",
        ),
        "variants[2].name",
        "duplicate variant name `v` (first used by variants[1])",
    );
    one_error(
        &base("").replace("l2_threading_model", "l9_magic"),
        "variants[0].dimension",
        "unknown dimension `l9_magic`; expected one of `l1_vectorization`, `l1_kernel_library`,",
    );
    one_error(
        &base("").replace(V, &format!("{V}, governor: 'go fast'")),
        "variants[0].governor",
        "not a governor name",
    );
    one_error(
        &base("").replace(V, &format!("{V}, governor: turbo")),
        "variants[0].governor",
        "`turbo` is not a governor name; expected one of performance, powersave, ondemand, conservative, schedutil, userspace",
    );
    no_errors(&base("").replace(V, &format!("{V}, governor: performance")));
    no_errors(&base("").replace(V, &format!("{V}, governor: schedutil")));
    one_error(
        &base("").replace(V, &format!("{V}, requires: [avx2, 'a b']")),
        "variants[0].requires[1]",
        "not a capability flag name",
    );
}

#[test]
fn variants_without_a_dimension_or_a_change_are_warned_about() {
    let w = warnings(&base("").replace(", dimension: l2_threading_model", ""));
    assert!(
        w.iter().any(
            |d| d.path == "variants[0]" && d.message.contains("names no checklist `dimension`")
        ),
        "{w:#?}"
    );
    let nothing = |w: &[Diagnostic]| w.iter().any(|d| d.message.contains("changes nothing"));
    let w = warnings(&base("").replace(", env: { W: \"1\" }", ""));
    assert!(nothing(&w), "{w:#?}");
    // Each single change is a change.
    let build = "build: { command: make }";
    for change in [
        "env: { W: \"1\" }",
        "unset: [W]",
        "launcher: { cpus_per_task: 2 }",
        build,
        "args: [--fast]",
        "governor: performance",
    ] {
        let text = base("").replace("env: { W: \"1\" }", change);
        let w = warnings(&text);
        assert!(!nothing(&w), "{change}: {w:#?}");
        no_errors(&text);
    }
}

fn all_dimensions_but(skip: &str) -> String {
    let mut s = String::from("checklist:\n");
    for d in checklist::DIMENSIONS {
        if d.id != skip {
            s.push_str(&format!(
                "  {}: {{ verdict: applicable_not_measured }}\n",
                d.id
            ));
        }
    }
    s
}

#[test]
fn checklist_checks() {
    // Every dimension has a verdict or a variant: no warning at all.
    let text = base(&all_dimensions_but("l2_threading_model"));
    assert_eq!(warnings(&text), vec![]);
    // One missing: a warning that names it and points at the checklist.
    let text = base(&all_dimensions_but("l1_vectorization").replace(
        "  l2_threading_model: { verdict: applicable_not_measured }\n",
        "",
    ));
    let w = warnings(&text);
    assert_eq!(w.len(), 1, "{w:#?}");
    assert_eq!(w[0].path, "checklist");
    assert!(w[0].line.is_some());
    assert!(
        w[0].message
            .contains("no verdict for 1 of the 10 dimensions (l1_vectorization)"),
        "{w:#?}"
    );
    // A verdict for the dimension a variant measures is ignored, with a warning.
    let text = base(&all_dimensions_but(""));
    let w = warnings(&text);
    assert_eq!(w.len(), 1, "{w:#?}");
    assert_eq!(w[0].path, "checklist.l2_threading_model");
    assert!(w[0].message.contains("measured by a variant"));

    one_error(
        &base("checklist: { l9_magic: { verdict: applicable_not_measured } }\n"),
        "checklist",
        "unknown dimension `l9_magic`",
    );
    for reason in ["", ", reason: ''"] {
        one_error(
            &base(&format!(
                "checklist: {{ l1_vectorization: {{ verdict: not_applicable{reason} }} }}\n"
            )),
            "checklist.l1_vectorization",
            "needs a `reason`",
        );
    }
    no_errors(&base(
        "checklist: { l1_vectorization: { verdict: not_applicable, reason: no loops } }\n",
    ));
}

#[test]
fn the_source_is_hashed_and_kept() {
    let text = base("");
    let e = ok(&text).experiment;
    let want: String = Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(e.source_sha256, want);
    assert_eq!(e.source_sha256.len(), 64);
    assert_eq!(e.source_text, text);
    assert_eq!(e.source, Path::new(PATH));
    assert_eq!(hex(&[0, 1, 0xab]), "0001ab");
}

#[test]
fn workdir_is_relative_to_the_file_and_normalised() {
    assert_eq!(ok(&base("")).experiment.workdir, Path::new("/exp/dir"));
    let e = ok(&base("workdir: ../src/./app/..\n")).experiment;
    assert_eq!(e.workdir, Path::new("/exp/src"));
    let e = ok(&base("workdir: /abs/x\n")).experiment;
    assert_eq!(e.workdir, Path::new("/abs/x"));
    assert_eq!(normalize(Path::new("a/./b/../c")), Path::new("a/c"));
}

#[test]
fn arms_inherit_from_the_baseline_and_apply_their_changes() {
    let text = yaml_with(
        "scheduler: { kind: slurm, nodes: 2, cpus_per_task: 4, gpus_per_task: 1 }\n\
         aa_control: true\n\
         baseline: { env: { B: b, KEEP: k }, unset: [GONE, BACK], args: [--base], launcher: { extra_args: [--bind] } }\n",
        "name: v, dimension: l2_threading_model, env: { W: w, B: over, BACK: again }, unset: [KEEP, GONE], launcher: { tasks_per_node: 3 }",
    )
    .replace("command: [./app]", "command: [./app]\n  args: [--app]\n  env: { A: a, B: app }")
        + "  - { name: u, dimension: l2_autotuning, args: [--mine], launcher: { extra_args: [--own] } }\n";
    let e = ok(&text).experiment;
    assert_eq!(e.arm_names(), ["baseline", "aa-control", "v", "u"]);
    let b = e.arm("baseline").unwrap();
    assert_eq!(b.role, ArmRole::Baseline);
    let env = |a: &Arm| -> Vec<(String, String)> {
        a.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    };
    let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(env(b), pairs(&[("A", "a"), ("B", "b"), ("KEEP", "k")]));
    assert_eq!(b.unset, ["GONE", "BACK"]);
    assert_eq!(b.args, ["--app", "--base"]);
    assert_eq!(
        b.resources,
        Resources {
            nodes: 2,
            tasks_per_node: 1,
            cpus_per_task: 4,
            gpus_per_task: 1,
            extra_args: vec!["--bind".into()],
        }
    );
    let aa = e.arm("aa-control").unwrap();
    assert_eq!(aa.role, ArmRole::AaControl);
    assert!(
        aa.description
            .as_deref()
            .unwrap()
            .starts_with("A/A control")
    );
    assert_eq!(env(aa), env(b));
    assert_eq!(aa.args, b.args);

    let v = e.arm("v").unwrap();
    assert_eq!(v.role, ArmRole::Variant);
    assert_eq!(
        env(v),
        pairs(&[("A", "a"), ("B", "over"), ("BACK", "again"), ("W", "w")])
    );
    // GONE once; KEEP newly unset; BACK set again, so no longer unset.
    assert_eq!(v.unset, ["GONE", "KEEP"]);
    assert_eq!(v.args, b.args);
    assert_eq!(v.resources.tasks_per_node, 3);
    assert_eq!(v.resources.nodes, 2);
    assert_eq!(v.resources.extra_args, ["--bind"]);
    assert_eq!(v.dimension.as_deref(), Some("l2_threading_model"));

    let u = e.arm("u").unwrap();
    // A variant's args are its whole list: `app.args` (`--app`) is not kept in front.
    assert_eq!(u.args, ["--mine"]);
    assert_eq!(u.resources.extra_args, ["--own"]);

    // Without a scheduler or launcher: one node, one task, one cpu, no gpu.
    let r = &ok(&base("")).experiment.arms[0].resources;
    assert_eq!(
        (r.nodes, r.tasks_per_node, r.cpus_per_task, r.gpus_per_task),
        (1, 1, 1, 0)
    );
    assert_eq!(ok(&base("")).experiment.arm_names(), ["baseline", "v"]);
}

#[test]
fn builds_are_shared_by_content() {
    let e = ok(&(base("build: { command: make }\n")
        + "  - { name: same, dimension: l2_autotuning, build: { command: make } }\n"
        + "  - { name: other, dimension: l1_vectorization, build: { command: make fast } }\n"))
    .experiment;
    assert_eq!(e.builds.len(), 2);
    let idx: Vec<Option<usize>> = e.arms.iter().map(|a| a.build).collect();
    assert_eq!(idx, [Some(0), Some(0), Some(0), Some(1)]);
    for b in &e.builds {
        assert!(b.id.starts_with("build-") && b.id.len() == 14, "{}", b.id);
    }
    assert_ne!(e.builds[0].id, e.builds[1].id);
    assert_eq!(
        e.builds[0].id,
        build_id(&BuildSpec {
            command: CommandSpec::Shell("make".into()),
            env: EnvMap::new()
        })
    );
    assert!(ok(&base("")).experiment.builds.is_empty());
    assert_eq!(ok(&base("")).experiment.arms[1].build, None);
}

#[test]
fn warnings_without_a_path_have_no_place_but_others_do() {
    let w = warnings(&base("").replace(", env: { W: \"1\" }", ""));
    let nothing = w
        .iter()
        .find(|d| d.message.contains("changes nothing"))
        .unwrap();
    assert_eq!(nothing.line, Some(6));
}

#[test]
fn time_limits_are_capped_at_thirty_days_without_overflow() {
    let thirty_days = Duration::from_secs(30 * 86_400);
    assert_eq!(parse_duration("43200"), Ok(thirty_days));
    assert_eq!(parse_duration("30d"), Ok(thirty_days));
    for too_long in [
        "43201",
        "30d 1s",
        "307445734561825861",
        "99999999999999999999999h",
    ] {
        let e = parse_duration(too_long).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("`{too_long}` is longer than 30 days")),
            "{too_long}: {e}"
        );
    }
    // Not a number of minutes: humantime's own error, and a long value is quoted by prefix.
    let e = parse_duration("").unwrap_err().to_string();
    assert!(e.starts_with("`` is not a duration"), "{e}");
    let e = parse_duration(&"x".repeat(100)).unwrap_err().to_string();
    assert!(e.contains("… (100 bytes)` is not a duration"), "{e}");
}

fn variants(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!("  - {{ name: v{i}, dimension: l2_threading_model, env: {{ W: \"{i}\" }} }}\n")
        })
        .collect()
}

#[test]
fn replicates_and_runs_are_capped() {
    no_errors(&base("replicates: 1000\nmax_replicates: 1000\n"));
    one_error(
        &base("replicates: 1001\n"),
        "replicates",
        "replicates is 1001; at most 1000 runs per arm",
    );
    one_error(
        &base("max_replicates: 1001\n"),
        "max_replicates",
        "max_replicates is 1001; at most 1000",
    );
    // 1000 blocks × (1 baseline + 9 variants) is exactly the limit; one more arm is not.
    let nine = base("replicates: 1000\n") + &variants(8);
    no_errors(&nine);
    one_error(
        &(base("replicates: 1000\n") + &variants(9)),
        "replicates",
        "1000 replicates × 11 arms is 11000 runs; at most 10000 runs",
    );
    one_error(
        &(base("replicates: 1000\naa_control: true\n") + &variants(8)),
        "replicates",
        "1000 replicates × 11 arms is 11000 runs",
    );
    // The budget is max_replicates when given, and the error points there.
    one_error(
        &(base("max_replicates: 1000\n") + &variants(9)),
        "max_replicates",
        "1000 replicates × 11 arms is 11000 runs",
    );
}

#[test]
fn variants_are_capped_with_one_error() {
    // 64 variants is the limit (one here plus 63).
    no_errors(&(base("") + &variants(63)));
    // 65: one error about the list, nothing per variant, and no run count on top (200 ×
    // 66 arms would be over the run limit too).
    let text = base("replicates: 200\n") + &variants(64).replace("name: v0,", "name: 'bad name',");
    let e = one_error(
        &text,
        "variants",
        "the experiment has 65 variants; at most 64",
    );
    assert_eq!(e.line, Some(6), "points at the `variants` key");
}

/// Designs that can decide. The numbers are worked by hand: paired, the
/// smallest one-sided p is 2^−n; independent 1/C(2n, n); Holm's first step multiplies by
/// the number of variants.
#[test]
fn replicates_that_cannot_reach_alpha_after_holm_are_refused() {
    const V2: &str = "  - { name: w, dimension: l1_vectorization, env: { X: \"1\" } }\n";
    const V3: &str = "  - { name: u, dimension: l3_frequency_power, env: { Y: \"1\" } }\n";
    // One variant: 1/32 = 0.03125 < 0.05 — decidable at 5.
    no_errors(&base("replicates: 5\n"));
    // Two variants: 2/32 = 0.0625 ≥ 0.05; 2/64 = 0.03125 < 0.05 → 6.
    let two = base("replicates: 5\n") + V2;
    let d = one_error(
        &two,
        "replicates",
        "replicates: 6 is the smallest number that can decide",
    );
    assert!(
        d.message
            .contains("1/2^5 = 0.03125, 0.0625 after Holm over 2 variants"),
        "{}",
        d.message
    );
    assert_eq!((d.line, d.column), (Some(5), Some(13)), "{d:?}");
    no_errors(&(base("replicates: 6\n") + V2));
    // Allowed: a warning at the same place, naming the same number.
    let allowed = base("replicates: 5\nallow_few_replicates: true\n") + V2;
    no_errors(&allowed);
    let w = warnings(&allowed);
    assert!(
        w.iter().any(|w| w.path == "replicates"
            && w.message.contains("replicates: 6 is the smallest")
            && w.message.contains("allow_few_replicates")),
        "{w:#?}"
    );
    // Three variants: 3/64 = 0.046875 < 0.05 → 6; at α = 0.025: 3/128 = 0.0234 → 7.
    let three = |extra: &str| base(extra) + V2 + V3;
    one_error(&three("replicates: 5\n"), "replicates", "replicates: 6 is");
    no_errors(&three("replicates: 6\n"));
    one_error(
        &three("replicates: 6\ncompare: { alpha: 0.025 }\n"),
        "replicates",
        "replicates: 7 is",
    );
    // Independent: 1/C(10,5) = 1/252 decides two variants at 5 per arm.
    no_errors(&(base("replicates: 5\ndesign: independent\n") + V2));
    // α = 0.005, independent, 2 variants: 2/252 ≥ 0.005, 2/924 ≈ 0.00216 < 0.005 → 6.
    one_error(
        &(base("replicates: 5\ndesign: independent\ncompare: { alpha: 0.005 }\n") + V2),
        "replicates",
        "replicates: 6 is",
    );
}

#[test]
fn replicates_not_given_default_to_the_smallest_that_can_decide() {
    const V2: &str = "  - { name: w, dimension: l1_vectorization, env: { X: \"1\" } }\n";
    const V3: &str = "  - { name: u, dimension: l3_frequency_power, env: { Y: \"1\" } }\n";
    assert_eq!(ok(&base("")).experiment.file.replicates, 5);
    assert_eq!(ok(&(base("") + V2)).experiment.file.replicates, 6);
    assert_eq!(
        ok(&(base("compare: { alpha: 0.025 }\n") + V2 + V3))
            .experiment
            .file
            .replicates,
        7
    );
    // Never below the floor of 5, even where fewer could reach α.
    assert_eq!(
        ok(&base("design: independent\n"))
            .experiment
            .file
            .replicates,
        5
    );
    // The plan follows.
    let exp = ok(&(base("") + V2)).experiment;
    assert_eq!(crate::Plan::for_experiment(&exp).blocks.len(), 6);
}

#[test]
fn smallest_deciding_replicates_by_hand() {
    use optgate_stats::Design::{Independent, Paired};
    assert_eq!(smallest_deciding_replicates(Paired, 1, 0.05), Some(5)); // 1/32
    assert_eq!(smallest_deciding_replicates(Paired, 2, 0.05), Some(6)); // 2/64
    assert_eq!(smallest_deciding_replicates(Paired, 4, 0.05), Some(7)); // 4/128
    assert_eq!(smallest_deciding_replicates(Paired, 7, 0.05), Some(8)); // 7/256 (7/128 > α)
    // 1/C(6, 3) = 1/20 = α exactly: not below it; 1/C(8, 4) = 1/70.
    assert_eq!(smallest_deciding_replicates(Independent, 1, 0.05), Some(4));
    assert_eq!(smallest_deciding_replicates(Independent, 2, 0.05), Some(4)); // 2/70
    assert_eq!(smallest_reachable_p(Paired, 5, 2), 0.0625);
    assert_eq!(smallest_reachable_p(Independent, 2, 1), 1.0 / 6.0);
    assert_eq!(smallest_reachable_p(Paired, 1, 3), 1.0);
}

#[test]
fn small_p_values_keep_their_digits() {
    assert_eq!(fmt_small_p(0.03125), "0.03125");
    assert_eq!(fmt_small_p(0.5), "0.5");
    assert_eq!(
        fmt_small_p(1e-4),
        "0.0001",
        "1e-4 itself is still a decimal"
    );
    assert_eq!(fmt_small_p(1.0 / 65536.0), "1.526e-5");
}

/// The decidability check stays out of the way of values other checks refuse, and its
/// comparisons sit exactly at their boundaries.
#[test]
fn decidability_is_checked_only_for_valid_settings_and_at_its_boundaries() {
    // An α other checks refuse: only their error, even where nothing could decide.
    one_error(
        &base("replicates: 5\ncompare: { alpha: 0 }\n"),
        "compare.alpha",
        "alpha must be between 0 and 0.5",
    );
    one_error(
        &(base("replicates: 5\ncompare: { alpha: 0.5 }\n") + &variants(15)),
        "compare.alpha",
        "alpha must be between 0 and 0.5",
    );
    // replicates 0 is refused by check_replicates alone, allowed few or not.
    let text = base("replicates: 0\nallow_few_replicates: true\n");
    one_error(&text, "replicates", "at least 1");
    assert!(
        warnings(&text).iter().all(|w| w.path != "replicates"),
        "{:#?}",
        warnings(&text)
    );
    // 1000 replicates is checked too: with an absurdly small α not even 2^-1000 is below it.
    one_error(
        &base("replicates: 1000\ncompare: { alpha: 1.0e-310 }\n"),
        "replicates",
        "no number of replicates up to 1000 can decide 1 variants at this α",
    );
    // Reaching α exactly is not below it: 2 variants × 2^-5 = 0.0625.
    one_error(
        &(base("replicates: 5\ncompare: { alpha: 0.0625 }\n") + &variants(1)),
        "replicates",
        "1/2^5 = 0.03125, 0.0625 after Holm over 2 variants — not below α = 0.0625, so no variant can ever be decided; replicates: 6 is the smallest",
    );
    // One variant: no Holm step to mention.
    let e = one_error(
        &base("replicates: 5\ncompare: { alpha: 0.03125 }\n"),
        "replicates",
        "with 1 variant the smallest reachable p-value is 1/2^5 = 0.03125 — not below α = 0.03125, so",
    );
    assert!(!e.message.contains("Holm"), "{}", e.message);
}

/// The YAML layer's size limits are inclusive: a file of exactly `MAX_FILE_BYTES`, and a
/// document of exactly `MAX_EXPANDED_NODES` nodes (a sequence and its items), still load.
#[test]
fn yaml_limits_are_inclusive() {
    use crate::yaml::{MAX_EXPANDED_NODES, MAX_FILE_BYTES, from_str};
    let text = format!("a: {}", "x".repeat(MAX_FILE_BYTES - 3));
    assert_eq!(text.len(), MAX_FILE_BYTES);
    assert!(from_str::<serde_json::Value>(&text).is_ok());
    let seq = |n: usize| format!("[{}]", vec!["x"; n].join(", "));
    let limit = MAX_EXPANDED_NODES as usize;
    assert!(from_str::<serde_json::Value>(&seq(limit - 1)).is_ok());
    let e = from_str::<serde_json::Value>(&seq(limit)).unwrap_err();
    assert!(
        e.message.contains("more than 100000 nodes"),
        "{}",
        e.message
    );
}

/// An alias used as a value is located where it is written, and the keys after it still
/// pair with their own values.
#[test]
fn aliases_are_located_as_values() {
    let loc = Locator::index("a: &x 1\nb: *x\nc: 2\n");
    let at = |line, column| Some(Location { line, column });
    assert_eq!(loc.value("b"), at(2, 4));
    assert_eq!(loc.value("c"), at(3, 4));
    assert_eq!(loc.key("c"), at(3, 1));
}

#[test]
fn isolation_resolves_per_arm_and_page_cache_needs_inputs() {
    // Defaults: cold compile caches, page cache left alone.
    let l = ok(&base(""));
    assert!(
        l.experiment
            .arms
            .iter()
            .all(|a| a.caches == CacheMode::Cold && a.page_cache == PageCacheMode::Leave)
    );
    // The experiment's setting, overridden by one arm.
    let l = ok(&yaml_with(
        "caches: warm\npage_cache: cold\ninputs: [data, /scratch/shard.h5]\n",
        "name: v, dimension: l2_threading_model, env: { W: \"1\" }, caches: cold, page_cache: warm",
    ));
    let arm = |n: &str| l.experiment.arm(n).unwrap();
    assert_eq!(arm("baseline").caches, CacheMode::Warm);
    assert_eq!(arm("baseline").page_cache, PageCacheMode::Cold);
    assert_eq!(arm("v").caches, CacheMode::Cold);
    assert_eq!(arm("v").page_cache, PageCacheMode::Warm);
    assert_eq!(
        l.experiment.inputs,
        vec![
            PathBuf::from("/exp/dir/data"),
            PathBuf::from("/scratch/shard.h5")
        ]
    );
    // Asked for without inputs: an error where it was asked, once.
    one_error(&base("page_cache: cold\n"), "page_cache", "needs `inputs:`");
    one_error(
        &yaml_with("", &format!("{V}, page_cache: drop")),
        "variants[0].page_cache",
        "`page_cache: drop` needs `inputs:`",
    );
    no_errors(&base("page_cache: leave\n"));
    // An unknown mode names the ones there are.
    let e = errors(&base("caches: lukewarm\n"));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(
        e[0].message.contains("cold") && e[0].message.contains("warm"),
        "{e:#?}"
    );
    // Too many inputs.
    let many: Vec<String> = (0..=crate::limits::MAX_INPUTS)
        .map(|i| format!("f{i}"))
        .collect();
    one_error(
        &base(&format!("inputs: [{}]\n", many.join(", "))),
        "inputs",
        "at most 256",
    );
}

/// A valid file whose keys can each be misspelt: `name`, `app.command`, `metric`,
/// `variants`, plus a misspelt key further down (`variants[0].dimenson`, or
/// `compare.alpah` after the variants).
fn file_with_typos(name: &str, command: &str, metric: &str, variants: &str) -> String {
    format!(
        "{name}: t\n\
         app:\n  {command}: [./app]\n\
         {metric}: {{ pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s' }}\n\
         {variants}:\n  - {{ name: v, dimenson: l2_threading_model }}\n\
         compare: {{ alpah: 0.05 }}\n"
    )
}

#[test]
fn a_missing_required_key_hides_nothing_after_it() {
    // Every problem of the file, each once, at its place: the misspelt key, the required
    // key it leaves missing (where the mapping that lacks it is), and the misspelt keys
    // further down.
    let dimenson = ("variants[0]: unknown key `dimenson`", 6, 16);
    let alpah = ("compare: unknown key `alpah`", 7, 12);
    let cases = [
        (
            file_with_typos("name", "comand", "metric", "variants"),
            vec![
                ("app: unknown key `comand`", 3, 3),
                ("app: missing required key `command`", 2, 1),
                dimenson,
                alpah,
            ],
        ),
        (
            file_with_typos("nmae", "command", "metric", "variants"),
            vec![
                ("unknown key `nmae`", 1, 1),
                ("missing required key `name`", 1, 1),
                dimenson,
                alpah,
            ],
        ),
        (
            file_with_typos("name", "command", "metrc", "variants"),
            vec![
                ("unknown key `metrc`", 4, 1),
                ("missing required key `metric`", 1, 1),
                dimenson,
                alpah,
            ],
        ),
        // The misspelt list is not read, so nothing inside it is reported; `variants`
        // may be absent (a baseline-only file, for `optgate propose`), and the unknown
        // key's message names it.
        (
            file_with_typos("name", "command", "metric", "variant"),
            vec![("unknown key `variant`, expected one of", 5, 1), alpah],
        ),
    ];
    for (text, expected) in cases {
        let e = errors(&text);
        let shown: Vec<String> = e.iter().map(|d| d.to_string()).collect();
        for (message, line, column) in &expected {
            assert!(
                e.iter().any(|d| d.message.starts_with(message)
                    && d.line == Some(*line)
                    && d.column == Some(*column)),
                "no `{message}` at {line}:{column} for\n{text}\n{shown:#?}"
            );
        }
        assert_eq!(e.len(), expected.len(), "{shown:#?}");
    }
}

#[test]
fn launch_shapes_are_bounded_and_their_products_never_wrap() {
    // Each field past its maximum; at the maximum it is fine.
    for (k, max) in [
        ("nodes", MAX_NODES),
        ("tasks_per_node", MAX_TASKS_PER_NODE),
        ("cpus_per_task", MAX_CPUS_PER_TASK),
        ("gpus_per_task", MAX_GPUS_PER_TASK),
    ] {
        one_error(
            &slurm(&format!("{k}: {}", max + 1), ""),
            &format!("scheduler.{k}"),
            &format!("at most {max} are accepted"),
        );
        one_error(
            &slurm("", &format!(", launcher: {{ {k}: {} }}", max + 1)),
            &format!("variants[0].launcher.{k}"),
            &format!("at most {max}"),
        );
    }
    // 65536 × 65536 is 2^32: a u32 product wraps to 0 (`srun -n 0`).
    let e = errors(&slurm("nodes: 65536, tasks_per_node: 65536", ""));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(e[0].message.contains("tasks_per_node is 65536"), "{e:#?}");
    // Within each field's maximum, the products are checked: tasks of a launch …
    one_error(
        &slurm(
            &format!("nodes: {MAX_NODES}, tasks_per_node: {MAX_TASKS_PER_NODE}"),
            "",
        ),
        "scheduler.tasks_per_node",
        "nodes × 4096 tasks per node is more than 10000000 tasks",
    );
    no_errors(&slurm("nodes: 100000, tasks_per_node: 100", ""));
    // … and CPUs of a node, at the launcher that asks for them (once for all its arms).
    one_error(
        &slurm(
            "tasks_per_node: 64",
            &format!(", launcher: {{ cpus_per_task: {MAX_CPUS_PER_TASK} }}"),
        ),
        "variants[0].launcher.cpus_per_task",
        "64 tasks per node × 4096 CPUs per task is more than 4096 CPUs",
    );
    one_error(
        &slurm("tasks_per_node: 64, cpus_per_task: 128", ""),
        "scheduler.cpus_per_task",
        "more than 4096 CPUs",
    );
    no_errors(&slurm("tasks_per_node: 64, cpus_per_task: 64", ""));
}

#[test]
fn a_nul_character_is_refused_in_args_and_commands() {
    // `a\0b` reached the app as `ab`: the shell dropped the NUL.
    for (extra, line) in [
        ("command: [./app]\n  args: [ok, \"a\\0b\"]", 4),
        ("command: \"./app \\0\"", 3),
    ] {
        let text = base("").replace("command: [./app]", extra);
        let e = one_error(&text, "", "a NUL character");
        assert_eq!(e.line, Some(line), "{e:?}");
    }
    one_error(
        &slurm("extra_directives: [\"--x\\0y\"]", ""),
        "",
        "a NUL character",
    );
    one_error(
        &base("").replace(V, &format!("{V}, args: [\"\\x00\"]")),
        "",
        "a NUL character",
    );
}

#[test]
fn many_problems_print_a_bounded_list() {
    let mut text = base("").replace("variants:", "correctness:\n  files:\nvariants:");
    let entries: String = (0..500).map(|_| "    - /abs\n").collect();
    text = text.replace("  files:\n", &format!("  files:\n{entries}"));
    let err = load_text(&text).unwrap_err();
    let LoadError::Invalid { diagnostics } = &err else {
        panic!("{err}")
    };
    // 500 errors and the checklist's warning.
    assert_eq!(diagnostics.iter().filter(|d| d.is_error()).count(), 500);
    assert_eq!(diagnostics.len(), 501);
    let shown = err.to_string();
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), MAX_DIAGNOSTICS_SHOWN + 2, "{shown}");
    assert_eq!(lines[MAX_DIAGNOSTICS_SHOWN], "… and 481 more");
    assert_eq!(
        lines[MAX_DIAGNOSTICS_SHOWN + 1],
        "500 errors in the experiment file"
    );
    assert!(shown.len() < 4096, "{} bytes", shown.len());
}

/// A value of `n` bytes whose start is recognisable.
fn long(n: usize) -> String {
    format!("Q{}", "x".repeat(n - 1))
}

#[test]
fn every_quoted_value_is_cut_to_its_prefix() {
    let v70 = long(70_000);
    let v35 = long(35_000);
    let cases = [
        slurm(&format!("queue: '{v70} y'"), ""),
        slurm(&format!("account: '{v70} y'"), ""),
        base("").replace(
            "command: [./app]",
            &format!("command: [./app]\n  env: {{ '{v35} y': 1 }}"),
        ),
        base(&format!("baseline: {{ unset: ['{v70} y'] }}\n")),
        base(&format!(
            "checklist: {{ {v70}: {{ verdict: applicable_not_measured }} }}\n"
        )),
        base("").replace("name: v,", &format!("name: '{v70} y',")),
        base("").replace("name: t\n", &format!("name: '{v70} y'\n")),
        base("").replace(V, &format!("{V}, governor: {v70}")),
        base("").replace(V, &format!("{V}, requires: ['{v70} y']")),
        base("").replace(
            "dimension: l2_threading_model",
            &format!("dimension: {v70}"),
        ),
        base(&format!("correctness: {{ files: [/{v70}] }}\n")),
        base(&format!("compare: {{ steady_epochs: '{v70}' }}\n")),
        base(&format!("app_typo_{v70}: 1\n"))
            .replace(&format!("app_typo_{v70}"), &format!("? app_typo_{v70}\n:")),
        base(&format!("description: [{v70}]\n")),
        base(&format!("scheduler: {{ kind: '{v70}' }}\n")),
        base("").replace(
            "(?P<seconds>[0-9.]+) s'",
            &format!("(?P<seconds>[0-9.]+) s{v70}('"),
        ),
        base("app_x: 1\n").replace(
            "command: [./app]",
            &format!("command: [./app]\n  env: {{ '{v35}': [1] }}"),
        ),
    ];
    for text in &cases {
        let shown = match load_text(text) {
            Ok(_) => panic!("accepted: {}", &text[..200.min(text.len())]),
            Err(e) => e.to_string(),
        };
        assert!(
            shown.len() < 2048,
            "{} bytes: {}",
            shown.len(),
            &shown[..300.min(shown.len())]
        );
        // The value is quoted at most once, by its prefix.
        assert!(shown.matches("Qxxxxx").count() <= 1, "{shown}");
        assert!(!shown.contains(&"x".repeat(200)), "{shown}");
    }
}

/// `base("")` with `metric:` replaced by `replacement` (a line or a block of lines).
fn with_metrics(replacement: &str) -> String {
    base("").replace(
        "metric: { pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s' }\n",
        replacement,
    )
}

const RATE: &str = "'rate (?P<value>[0-9.]+) GB/s'";

/// A figure of merit (a `value` group) is one value per run, with its unit and `better`;
/// a pattern with neither shape, or with both, is an error at the pattern's line and
/// column; the epoch settings beside a figure of merit are errors at theirs.
#[test]
fn a_figure_of_merit_is_a_pattern_with_a_value_group() {
    let l = ok(&with_metric(&format!(
        "{{ pattern: {RATE}, better: higher, unit: GB/s }}"
    )));
    let e = l.experiment;
    assert!(e.per_run && e.guardrails.is_empty() && e.metric_name.is_none());
    assert_eq!(e.metric.better, Better::Higher);
    assert_eq!(e.metric.unit.as_deref(), Some("GB/s"));
    assert!(e.patterns.metric.is_some());
    assert!(!ok(&base("")).experiment.per_run);
    // A results file.
    let e = ok(&with_metric(&format!(
        "{{ source: file, file: results.txt, pattern: {RATE}, better: higher }}"
    )))
    .experiment;
    assert!(e.per_run && e.metric.file.as_deref() == Some("results.txt"));
    // Both shapes at once, or a value group beside an epoch group: neither shape.
    let d = one_error(
        &with_metric("{ pattern: '(?P<value>\\d) (?P<epoch>\\d) (?P<seconds>\\d)' }"),
        "metric.pattern",
        "or only `(?P<value>...)` (one value per run); it has `epoch`, `seconds`, `value`",
    );
    assert_eq!((d.line, d.column), (Some(4), Some(20)), "{d:?}");
    let d = one_error(
        &with_metric(&format!("{{ pattern: {RATE}, unit: '' }}")),
        "metric.unit",
        "unit `` must be 1-32 bytes",
    );
    assert_eq!(d.line, Some(4));
    let d = one_error(
        &format!(
            "{}compare: {{ steady_epochs: '2..' }}\n",
            with_metric(&format!("{{ pattern: {RATE} }}"))
        ),
        "compare.steady_epochs",
        "applies to per-epoch metrics; the primary metric is one value per run",
    );
    assert_eq!(d.line, Some(7), "{d:?}");
}

/// `metrics:`: the primary is the one marked, else the first; the others are guardrails
/// in order, each with its limit; names, primaries, shapes and limits are checked where
/// they are written.
#[test]
fn a_metrics_list_has_a_primary_and_guardrails() {
    let list = format!(
        "metrics:\n\
         \x20 - {{ name: triad, pattern: {RATE}, better: higher, unit: GB/s, max_regression_pct: 5 }}\n\
         \x20 - {{ name: time, pattern: {PAT}, primary: true }}\n\
         \x20 - {{ name: gflops, source: file, file: out.txt, pattern: 'gflops (?P<value>\\S+)', better: higher }}\n"
    );
    let e = ok(&with_metrics(&list)).experiment;
    assert_eq!(e.metric_name.as_deref(), Some("time"));
    assert!(!e.per_run);
    let names: Vec<&str> = e.guardrails.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["triad", "gflops"]);
    assert_eq!(e.guardrails[0].max_regression_pct, Some(5.0));
    assert_eq!(e.guardrails[1].max_regression_pct, None);
    assert_eq!(e.guardrails[1].spec.file.as_deref(), Some("out.txt"));
    assert_eq!(e.patterns.guardrails.len(), 2);
    assert!(e.patterns.guardrails.iter().all(Option::is_some));
    // Without a marked primary, the first is, and its `max_regression_pct` is refused
    // at its place (line 5: the list's first entry).
    let unmarked: String = list
        .lines()
        .filter(|l| !l.contains("name: time"))
        .map(|l| format!("{l}\n"))
        .collect();
    let d = one_error(
        &with_metrics(&unmarked),
        "metrics[0].max_regression_pct",
        "applies to guardrails",
    );
    assert_eq!(d.line, Some(5), "{d:?}");
    let e = ok(&with_metrics(
        &unmarked.replace(", max_regression_pct: 5", ""),
    ))
    .experiment;
    assert_eq!(e.metric_name.as_deref(), Some("triad"));
    assert!(e.per_run);
    assert_eq!(e.guardrails[0].name, "gflops");
}

/// Every rule of the list, each error at its own line: both keys, names used twice or
/// unsafe, two primaries, a guardrail per epoch, a negative limit, too many entries,
/// neither key.
#[test]
fn metrics_list_errors_name_their_place() {
    let entry =
        |name: &str, extra: &str| format!("  - {{ name: {name}, pattern: {RATE}{extra} }}\n");
    let list = |entries: &[String]| format!("metrics:\n{}", entries.concat());
    let both = base("").replace(
        "variants:",
        &format!("{}variants:", list(&[entry("a", "")])),
    );
    let d = one_error(
        &both,
        "metrics",
        "`metric` and `metrics` exclude each other",
    );
    assert_eq!(d.line, Some(5), "{d:?}");
    let d = one_error(
        &with_metrics(&list(&[entry("a", ""), entry("a", "")])),
        "metrics[1].name",
        "metric name `a` is used twice (first as metrics[0])",
    );
    assert_eq!(d.line, Some(6), "{d:?}");
    one_error(
        &with_metrics(&list(&[entry("a b", "")])),
        "metrics[0].name",
        "must be 1-64 characters",
    );
    let d = one_error(
        &with_metrics(&list(&[
            entry("a", ", primary: true"),
            entry("b", ", primary: true"),
        ])),
        "metrics[1].primary",
        "only one metric can be `primary: true` (metrics[0] is)",
    );
    assert_eq!(d.line, Some(6), "{d:?}");
    let d = one_error(
        &with_metrics(&format!(
            "{}  - {{ name: t, pattern: {PAT} }}\n",
            list(&[entry("a", "")])
        )),
        "metrics[1]",
        "a guardrail is one value per run",
    );
    assert_eq!(d.line, Some(6), "{d:?}");
    one_error(
        &with_metrics(&list(&[
            entry("a", ""),
            entry("b", ", max_regression_pct: -1"),
        ])),
        "metrics[1].max_regression_pct",
        "must be a percentage ≥ 0 (got -1)",
    );
    let many: Vec<String> = (0..=MAX_METRICS)
        .map(|i| entry(&format!("m{i}"), ""))
        .collect();
    one_error(
        &with_metrics(&list(&many)),
        "metrics",
        "17 metrics; at most 16",
    );
    let d = one_error(
        &with_metrics(""),
        "",
        "missing required key `metric` (or a `metrics:`",
    );
    assert_eq!((d.line, d.column), (Some(1), Some(1)));
    one_error(
        &with_metrics("metrics: []\n"),
        "metrics",
        "needs at least one metric",
    );
}

/// `recheck:` resolves to its interval and argument vector, passed as written.
#[test]
fn a_recheck_resolves_to_its_interval_and_argv() {
    let l = ok(&base(
        "recheck:\n  every: 7d\n  notify: [/usr/bin/mail, -s, 'optgate: $x flipped', me]\n",
    ));
    let r = l.experiment.recheck.unwrap();
    assert_eq!(r.every, std::time::Duration::from_secs(7 * 86_400));
    assert_eq!(r.notify[2], "optgate: $x flipped");
    let l = ok(&base("recheck: { every: 12h }\n"));
    assert!(l.experiment.recheck.unwrap().notify.is_empty());
    assert!(ok(&base("")).experiment.recheck.is_none());
}

/// Every problem of `recheck:` at once, each at its own line and column.
#[test]
fn recheck_problems_are_located_and_reported_together() {
    let long = "x".repeat(crate::limits::MAX_NOTIFY_ARG_BYTES + 1);
    let text = base(&format!(
        "recheck:\n  every: 7 days\n  notify: ['', {long}]\n"
    ));
    let e = errors(&text);
    assert_eq!(e.len(), 3, "{e:#?}");
    assert_eq!(
        (e[0].path.as_str(), e[0].line, e[0].column),
        ("recheck.every", Some(6), Some(10))
    );
    assert!(e[0].message.contains("not an interval"), "{}", e[0].message);
    assert_eq!(e[1].path, "recheck.notify[0]");
    assert_eq!((e[1].line, e[1].column), (Some(7), Some(12)));
    assert!(e[1].message.contains("cannot be empty"));
    assert_eq!(e[2].path, "recheck.notify[1]");
    assert!(
        e[2].message.contains("4097 bytes; at most 4096"),
        "{}",
        e[2].message
    );
    one_error(
        &base("recheck: { every: 0s }\n"),
        "recheck.every",
        "shorter than 1s",
    );
    one_error(
        &base("recheck: { every: 367d }\n"),
        "recheck.every",
        "longer than 366d",
    );
    one_error(
        &base("recheck: { every: 1d, notify: [] }\n"),
        "recheck.notify",
        "must name a program",
    );
    let many = format!(
        "recheck: {{ every: 1d, notify: [{}] }}\n",
        vec!["x"; crate::limits::MAX_NOTIFY_ARGS + 1].join(", ")
    );
    one_error(&base(&many), "recheck.notify", "at most 64");
    let just = format!(
        "recheck: {{ every: 1d, notify: [{}] }}\n",
        vec!["x"; crate::limits::MAX_NOTIFY_ARGS].join(", ")
    );
    no_errors(&base(&just));
    // serde's own errors name the key in the message, at its place.
    for (text, fragment) in [
        (
            "recheck: { notify: [x] }\n",
            "recheck: missing required key `every`",
        ),
        (
            "recheck: { every: 1d, notfy: [x] }\n",
            "unknown key `notfy`",
        ),
    ] {
        let e = errors(&base(text));
        assert_eq!(e.len(), 1, "{e:#?}");
        assert!(e[0].message.contains(fragment), "{}", e[0].message);
        assert_eq!(e[0].line, Some(5), "{e:#?}");
    }
}

/// `metric.cumulative` is a running clock of a per-epoch pattern: accepted there (and
/// carried into the experiment), refused with `better: higher` (a rate is read as
/// printed), beside a figure of merit and for traces, each at the key with its line and
/// column. Planted bugs caught: the key dropped by the model, the check skipped, the
/// error placed at `metric` instead of its key.
#[test]
fn cumulative_is_a_running_clock_of_a_per_epoch_pattern() {
    let with = |body: &str| {
        format!(
            "name: t\napp:\n  command: [./app]\nmetric:\n  {body}\n  cumulative: true\n\
             variants:\n  - {{ {V} }}\n"
        )
    };
    let clock = with("pattern: 'Time = (?P<epoch>\\S+) at (?P<seconds>\\S+) s'");
    assert!(ok(&clock).experiment.metric.cumulative);
    let rate = with("pattern: 'step (?P<epoch>\\d+) (?P<seconds>\\S+)'\n  better: higher");
    let d = one_error(&rate, "metric.cumulative", "needs `better: lower`");
    assert_eq!((d.line, d.column), (Some(7), Some(15)), "{d:?}");
    one_error(
        &with("pattern: 'rate (?P<value>\\S+)'"),
        "metric.cumulative",
        "applies to per-epoch metrics",
    );
    one_error(
        &with("source: dftracer\n  dir: traces"),
        "metric.cumulative",
        "traces give each epoch's time",
    );
}

/// A kernel-library swap with no output check is warned about at the variant, naming it
/// and the `correctness` keys to add; declaring a check, or a dimension whose output may
/// change, silences it. Planted bugs caught: the warning on every dimension, or despite a
/// declared check.
#[test]
fn an_output_sensitive_variant_without_a_check_is_warned_about() {
    let kernel = "name: fast-blas, dimension: l1_kernel_library, env: { W: \"1\" }";
    let w = warnings(&yaml_with("", kernel));
    let unchecked: Vec<&Diagnostic> = w
        .iter()
        .filter(|d| d.message.contains("declares no output check"))
        .collect();
    assert_eq!(unchecked.len(), 1, "{w:#?}");
    assert_eq!(unchecked[0].path, "variants[0]");
    assert!(unchecked[0].line.is_some());
    for words in [
        "`fast-blas`",
        "`l1_kernel_library`",
        "`correctness.values`",
        "accept [output not checked]",
    ] {
        assert!(
            unchecked[0].message.contains(words),
            "{} lacks {words}",
            unchecked[0].message
        );
    }
    let checked = yaml_with(
        "correctness: { values: { pattern: 'E = (?P<value>\\S+)', rel_tol: 1e-6 } }\n",
        kernel,
    );
    assert!(
        !warnings(&checked)
            .iter()
            .any(|d| d.message.contains("declares no output check"))
    );
    assert!(
        !warnings(&base(""))
            .iter()
            .any(|d| d.message.contains("declares no output check"))
    );
}

/// An expect regex that matches the empty string passes every verdict: warned, at its key;
/// an anchored or non-empty one is not.
#[test]
fn an_expect_regex_matching_anything_is_warned() {
    for r in ["''", "'.*'", "'(OK)?'"] {
        let w = warnings(&base(&format!(
            "correctness: {{ expect: {{ regex: {r} }} }}\n"
        )));
        let hit: Vec<_> = w
            .iter()
            .filter(|d| d.path == "correctness.expect.regex")
            .collect();
        assert_eq!(hit.len(), 1, "{r}: {w:#?}");
        assert!(
            hit[0].message.contains("checks nothing"),
            "{}",
            hit[0].message
        );
    }
    for r in ["'^OK$'", "'PASS'"] {
        let w = warnings(&base(&format!(
            "correctness: {{ expect: {{ regex: {r} }} }}\n"
        )));
        assert!(
            w.iter().all(|d| d.path != "correctness.expect.regex"),
            "{r}: {w:#?}"
        );
    }
}
