//! Report features through the real binary: the A/A noise floor, a DFTracer trace as the
//! metric (with traced time per category beside wall time), the other output formats,
//! SVG plots, and `optgate analyze` on a samples file with its bad-input exit code.

use crate::support;

use support::*;

fn run_json(
    dir: &std::path::Path,
    yaml: &str,
    extra: &[&str],
) -> (Option<i32>, serde_json::Value, String, String) {
    let (o, _) = run_experiment(dir, yaml, extra);
    let out = stdout(&o);
    let json = serde_json::from_str(&out).unwrap_or(serde_json::Value::Null);
    (o.status.code(), json, out, stderr(&o))
}

#[test]
fn aa_control_is_the_noise_floor_not_a_proposal() {
    let dir = tempfile::tempdir().unwrap();
    let yaml =
        fake_app_experiment("aa", "").replace("replicates: 5", "replicates: 5\naa_control: true");
    let (code, report, _, err) = run_json(dir.path(), &yaml, &["--json"]);
    assert_eq!(code, Some(0), "{err}");
    let names: Vec<&str> = report["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["v1"]);
    assert_eq!(report["noise_floor"]["arm"], "aa-control");
    // The fake app prints identical times in every run: the A/A speed-up is exactly 1.
    assert_eq!(report["noise_floor"]["speedup"]["estimate"], 1.0);
    assert_eq!(report["noise_floor"]["min_effect_pct"], 1.0);
    assert!(
        dir.path()
            .join("exec/runs/b001-aa-control/manifest.json")
            .exists()
    );
}

/// An app that writes a DFTracer 2.x trace: per epoch e, `e` compute events of 1000·e µs
/// and one POSIX read of 500 µs, plus wall-clock lines that disagree with the trace.
const TRACING_APP: &str = r#"app:
  command: |
    mkdir -p traces
    {
      echo '{"name":"CM","cat":"dftracer","pid":1,"tid":1,"ph":4,"args":{"name":"time_metric","value":"us"}}'
      ts=1000
      for e in 1 2 3; do
        for i in $(seq 1 $e); do
          echo "{\"id\":$ts,\"name\":\"forward\",\"cat\":\"compute\",\"pid\":1,\"tid\":1,\"ts\":$ts,\"dur\":$((1000 * e * ${SCALE:-1})),\"ph\":1,\"args\":{\"epoch\":$e}}"
          ts=$((ts + 10000))
        done
        echo "{\"id\":$ts,\"name\":\"read\",\"cat\":\"POSIX\",\"pid\":1,\"tid\":1,\"ts\":$ts,\"dur\":500,\"ph\":1,\"args\":{\"epoch\":$e}}"
        ts=$((ts + 10000))
      done
    } > traces/app-1.pfw
"#;

#[test]
fn dftracer_trace_is_the_metric_and_categories_sit_beside_wall_time() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "name: traced\n{TRACING_APP}metric: {{ source: dftracer, dir: traces, category: compute }}\nreplicates: 5\n\
         variants:\n  - {{ name: half, dimension: l1_vectorization, env: {{ SCALE: 2 }} }}\n"
    );
    let (code, report, _, err) = run_json(dir.path(), &yaml, &["--json"]);
    assert_eq!(code, Some(0), "{err}");
    // Epoch e holds e compute events of e ms: 1, 4, 9 ms; the variant doubles them.
    let samples = std::fs::read_to_string(dir.path().join("exec/samples.csv")).unwrap();
    assert!(samples.contains("\nbaseline,1,1,1,0.001,"), "{samples}");
    assert!(samples.contains("\nbaseline,1,1,2,0.004,"), "{samples}");
    assert!(samples.contains("\nbaseline,1,1,3,0.009,"), "{samples}");
    assert!(samples.contains("\nhalf,1,1,3,0.018,"), "{samples}");
    let v = &report["variants"][0];
    assert!(
        (v["speedup"]["estimate"].as_f64().unwrap() - 0.5).abs() < 1e-12,
        "{v}"
    );
    assert_eq!(v["decision"], "reject");
    let b = report["breakdown"].as_array().unwrap();
    assert_eq!(b[0]["arm"], "baseline");
    assert!((b[0]["categories"]["compute"].as_f64().unwrap() - 0.014).abs() < 1e-12);
    assert!((b[0]["categories"]["POSIX"].as_f64().unwrap() - 0.0015).abs() < 1e-12);
    assert!((b[1]["categories"]["compute"].as_f64().unwrap() - 0.028).abs() < 1e-12);
    assert!(b[0]["wall_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn trace_without_epochs_fails_the_run_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "name: traced\n{}metric: {{ source: dftracer, dir: traces, category: compute }}\nreplicates: 5\n\
         variants:\n  - {{ name: v, dimension: l1_vectorization, env: {{ X: 1 }} }}\n",
        TRACING_APP.replace(r#",\"args\":{\"epoch\":$e}"#, "")
    );
    let (code, _, _, err) = run_json(dir.path(), &yaml, &[]);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("the traces hold no per-epoch `compute` events"),
        "{err}"
    );
    assert!(err.contains("DFTRACER_INC_METADATA=1"), "{err}");
}

#[test]
fn markdown_csv_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = fake_app_experiment("fmt", "");
    let plots = dir.path().join("plots");
    let (code, _, md, err) = run_json(
        dir.path(),
        &yaml,
        &["--format", "markdown", "--plot", plots.to_str().unwrap()],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(md.contains("| # | Strategy | Description of Optimization | App Impact | System Impact | Weighted Score |"), "{md}");
    let svgs: Vec<_> = std::fs::read_dir(&plots)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!svgs.is_empty());
    let all: String = svgs
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(all.contains("<svg"), "not SVG");
    assert!(
        all.contains("baseline") && all.contains("v1"),
        "plots do not name the arms"
    );

    let o = run(&[
        "analyze",
        dir.path().join("exec/samples.csv").to_str().unwrap(),
        "--baseline",
        "baseline",
        "--format",
        "csv",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let csv = stdout(&o);
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .starts_with("rank,variant,decision,app_impact_pct"),
        "{csv}"
    );
    assert!(
        csv.lines().nth(1).unwrap().starts_with("1,v1,reject,"),
        "{csv}"
    );
}

#[test]
fn analyze_bad_samples_exit_2_naming_rows() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.csv");
    std::fs::write(
        &p,
        "variant,replicate,epoch,seconds\nbase,1,1,1.0\nbase,1,1,1.1\nv,1,1,-3\n",
    )
    .unwrap();
    let o = run(&["analyze", p.to_str().unwrap(), "--baseline", "base"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    // Both problems, each at its own line: the duplicate row and the negative time.
    assert!(
        err.contains("line 3: duplicate of line 2 (variant 'base', replicate 1"),
        "{err}"
    );
    assert!(
        err.contains("line 4: seconds '-3' is not a positive number"),
        "{err}"
    );

    let o = run(&["analyze", p.to_str().unwrap(), "--baseline", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nope"), "{}", stderr(&o));
}

/// A change that rounds to nothing prints as `0.0%`, never `-0.0%` (B9): a sign on zero
/// reads as a direction.
#[test]
fn a_change_that_rounds_to_zero_has_no_sign() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.csv");
    let mut csv = String::from("variant,replicate,epoch,seconds\n");
    for r in 1..=7 {
        for e in 1..=4 {
            let base = 10.0 + r as f64 * 0.01 + e as f64 * 0.001;
            csv.push_str(&format!("base,{r},{e},{base}\n"));
            // 0.03 % slower: App Impact ≈ -0.03 %.
            csv.push_str(&format!("v,{r},{e},{}\n", base * 1.0003));
        }
    }
    std::fs::write(&p, csv).unwrap();
    let o = run(&["analyze", p.to_str().unwrap(), "--baseline", "base"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(!out.contains("-0.0%"), "{out}");
    assert!(out.contains("0.0%"), "{out}");
    let json = run(&[
        "analyze",
        p.to_str().unwrap(),
        "--baseline",
        "base",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let app = v["variants"][0]["app_impact_pct"].as_f64().unwrap();
    assert!(
        app < 0.0 && app > -0.05,
        "the data make a tiny negative change: {app}"
    );
}

/// A variant whose description is long, as in a real experiment file.
const LONG_DESCRIPTION: &str = "bind each OpenMP thread to its own core with OMP_PROC_BIND=close and \
     OMP_PLACES=cores, so that no thread migrates between sockets during the timed epochs";

/// The plain-text report fits the terminal it is shown on (`COLUMNS`): tables wrap their
/// long cells, prose wraps onto indented lines; the JSON keeps every text whole.
#[test]
fn the_table_fits_80_columns_and_the_json_keeps_everything_whole() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = fake_app_experiment("wide", "").replace(
        "    env: {",
        &format!("    description: {LONG_DESCRIPTION}\n    env: {{"),
    );
    let p = write_experiment(dir.path(), &yaml);
    let root = dir.path().join("exec");
    let o = optgate()
        .args([
            "run",
            p.to_str().unwrap(),
            "--out",
            root.to_str().unwrap(),
            "--quiet",
        ])
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let long: Vec<&str> = out.lines().filter(|l| l.chars().count() > 80).collect();
    assert!(long.is_empty(), "lines over 80 columns: {long:#?}\n{out}");
    // The proposal table is still there with every word of the description.
    let table = out
        .split("Proposal table")
        .nth(1)
        .and_then(|t| t.split("\nDecisions").next())
        .unwrap();
    let words: Vec<&str> = table.split_whitespace().collect();
    for w in LONG_DESCRIPTION.split_whitespace() {
        assert!(words.contains(&w), "'{w}' is missing from:\n{table}");
    }

    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap();
    let desc = json["experiment"]["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "v1")
        .unwrap()["description"]
        .clone();
    assert_eq!(desc, LONG_DESCRIPTION);
    let reason = json["variants"][0]["reason"].as_str().unwrap();
    assert!(out.contains(&reason[..20]), "{out}");
}

/// App Impact has an interval (in the JSON) and the table marks the figures whose
/// interval includes 0 with `~`, under a legend: here a variant that is faster in every
/// run and one that changes nothing.
#[test]
fn app_impact_has_an_interval_and_noise_is_marked() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = r#"name: marks
app:
  command: [bash, -c, 'for e in 1 2 3; do echo "epoch $e took 0.${F:-2}$e s"; done']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 6
variants:
  - { name: fast, dimension: l2_threading_model, env: { F: "1" } }
  - { name: same, dimension: l1_vectorization, env: { X: "1" } }
"#;
    let (code, report, _, err) = run_json(dir.path(), yaml, &["--json"]);
    assert_eq!(code, Some(0), "{err}");
    let variant = |name: &str| {
        report["variants"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap()
            .clone()
    };
    for name in ["fast", "same"] {
        let v = variant(name);
        let (lo, app, hi) = (
            v["app_impact_ci_low"].as_f64().unwrap(),
            v["app_impact_pct"].as_f64().unwrap(),
            v["app_impact_ci_high"].as_f64().unwrap(),
        );
        assert!(lo <= app && app <= hi, "{name}: {lo} {app} {hi}");
    }
    assert!(variant("fast")["app_impact_ci_low"].as_f64().unwrap() > 0.0);

    // The same execution again, as a table.
    let o = optgate()
        .args([
            "run",
            dir.path().join("exp.yaml").to_str().unwrap(),
            "--out",
            dir.path().join("exec").to_str().unwrap(),
            "--quiet",
        ])
        .output()
        .unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let row = |name: &str| {
        out.lines()
            .find(|l| {
                l.starts_with(|c: char| c.is_ascii_digit()) && l.contains(&format!("  {name}  "))
            })
            .unwrap_or_else(|| panic!("no row of {name} in:\n{out}"))
            .to_string()
    };
    // The App Impact cell (#, strategy, description, App Impact, …): System Impact, the
    // CPU time these tiny runs happen to use, may be marked either way.
    let app_cell = |row: &str| -> String {
        row.split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .nth(3)
            .unwrap_or_default()
            .to_string()
    };
    let fast = row("fast");
    let same = row("same");
    assert!(
        app_cell(&fast).starts_with('+') && !app_cell(&fast).contains('~'),
        "{fast}"
    );
    assert_eq!(app_cell(&same), "0.0%~", "{same}");
    assert!(
        out.contains("\n~ interval includes 0: could be noise\n"),
        "{out}"
    );
}

/// Every run records how busy its node was (load average around it, CPU steal, online
/// CPUs) from `/proc`, so the report can flag runs measured under interference.
#[test]
fn runs_record_the_node_conditions_they_ran_under() {
    let dir = tempfile::tempdir().unwrap();
    let (o, root) = run_experiment(dir.path(), &fake_app_experiment("busy", ""), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    for e in std::fs::read_dir(root.join("runs")).unwrap() {
        let m: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(e.unwrap().path().join("manifest.json")).unwrap(),
        )
        .unwrap();
        let c = &m["conditions"];
        assert_eq!(c["online_cpus"].as_u64(), Some(cpus), "{m:#}");
        assert!(
            c["load_avg_start"].as_f64().is_some_and(|l| l >= 0.0),
            "{c}"
        );
        assert!(c["load_avg_end"].as_f64().is_some_and(|l| l >= 0.0), "{c}");
        assert!(
            c["steal_pct"].is_null()
                || c["steal_pct"]
                    .as_f64()
                    .is_some_and(|s| (0.0..=100.0).contains(&s)),
            "{c}"
        );
    }
}
