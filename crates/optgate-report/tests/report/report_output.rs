//! The report of a samples file: what the table, Markdown, CSV and JSON renderings show,
//! the JSON round trip, the checklist, and the SVG plots. (The report itself is made by
//! `optgate_evidence::report::build_report`, which this crate cannot call; the fixture below
//! assembles the same object from its public parts, and `optgate-evidence`'s
//! `tests/samples_report.rs` checks that the builder's is that object.)

use crate::common;

use std::collections::BTreeMap;

use optgate_report::{
    AnalyzeOptions, DIMENSIONS, DeclaredVerdict, ExperimentMeta, Report, SamplesProvenance,
    VariantMeta, Verdict, build_checklist, parse_samples, render_csv, render_json, render_markdown,
    render_table, write_plots,
};
use optgate_stats::Decision;

/// Baseline, a 10 % faster variant, an unchanged one, and torch.compile (epoch 1 ×13,
/// steady 3 % slower); 6 replicates of 5 epochs.
fn report() -> Report {
    let text = common::samples_csv(
        &[
            ("base", 20.0, 10.0),
            ("omp6", 19.0, 9.0),
            ("same", 20.0, 10.0),
            ("compile", 260.0, 10.3),
        ],
        6,
        5,
        0.004,
    );
    let opts = AnalyzeOptions::new("base");
    let s = parse_samples(&text, "samples.csv", &opts.baseline, opts.design).unwrap();
    let analysis = optgate_stats::analyze(&s.baseline, &s.variants, &opts.config()).unwrap();
    let mut r = Report::new(analysis, &s.baseline, &s.variants);
    r.system_resource = s.system_resource;
    r.set_samples_provenance(&SamplesProvenance {
        samples_file: "samples.csv".into(),
        optgate_version: env!("CARGO_PKG_VERSION").into(),
    });
    r
}

#[test]
fn decisions_from_the_samples() {
    let r = report();
    let by_name = |n: &str| r.analysis.variants.iter().find(|v| v.name == n).unwrap();
    assert_eq!(
        by_name("omp6").decision,
        Decision::Accept,
        "{}",
        by_name("omp6").reason
    );
    assert_eq!(by_name("compile").decision, Decision::Reject);
    assert!(by_name("compile").reason.contains("one-time epoch-1 cost"));
    assert_ne!(by_name("same").decision, Decision::Accept);
}

#[test]
fn table_shows_every_section() {
    let r = report();
    let t = render_table(&r);
    for needle in [
        "#  Strategy",
        "Description of Optimization",
        "App Impact",
        "System Impact",
        "Weighted Score",
        "Decision",
        "0 (not measured)",
        "Speed-up [CI]",
        "min p (adj)",
        "MDE",
        "Break-even",
        "Matched per-epoch table",
        "base median [IQR]",
        "compile median [IQR]",
        "checklist: not available from a samples file",
        "samples_file: samples.csv",
        "exact Wilcoxon signed-rank",
    ] {
        assert!(t.contains(needle), "missing '{needle}' in:\n{t}");
    }
    // Sorted by Weighted Score: omp6 (faster) first, compile (one-time cost) last.
    let row = |name: &str| {
        t.lines()
            .position(|l| l.contains(&format!("  {name} ")))
            .unwrap()
    };
    assert!(
        row("omp6") < row("same") && row("same") < row("compile"),
        "{t}"
    );
}

#[test]
fn markdown_has_tables_and_reasons() {
    let md = render_markdown(&report());
    assert!(md.contains("| # | Strategy | Description of Optimization | App Impact | System Impact | Weighted Score | Decision | Reason |"));
    assert!(md.contains("## Matched per-epoch table"));
    assert!(md.contains("checklist: not available from a samples file"));
    assert!(md.contains("never breaks even"));
}

#[test]
fn csv_has_one_row_per_variant() {
    let csv = render_csv(&report());
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 4);
    assert!(lines[0].starts_with("rank,variant,decision,app_impact_pct"));
    assert!(lines[1].starts_with("1,omp6,accept,"));
}

#[test]
fn json_is_the_analysis_with_metadata_and_round_trips() {
    let r = report();
    let json = render_json(&r);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    // The Analysis fields are at the top level.
    for key in [
        "baseline",
        "design",
        "alpha",
        "min_effect_pct",
        "production_epochs",
        "variants",
        "method",
    ] {
        assert!(v.get(key).is_some(), "no top-level '{key}'");
    }
    assert_eq!(v["design"], "paired");
    assert!(v["checklist"].is_null());
    let first = &v["variants"][0];
    for key in [
        "name",
        "decision",
        "reason",
        "n_baseline",
        "n_variant",
        "steady_epochs",
        "speedup",
        "p_improvement",
        "p_improvement_adjusted",
        "p_no_worthwhile",
        "p_no_worthwhile_adjusted",
        "min_achievable_p",
        "mde_pct",
        "first_epoch",
        "app_impact_pct",
        "system_impact_pct",
        "breakeven_epoch",
        "per_epoch",
        "warnings",
    ] {
        assert!(first.get(key).is_some(), "no variant field '{key}'");
    }
    assert!(first["system_impact_pct"].is_null());
    assert_eq!(first["per_epoch"][0]["epoch"], 1);
    assert!(!json.contains("NaN"));
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
}

#[test]
fn checklist_covers_all_ten_dimensions_in_canonical_order() {
    let mut r = report();
    let dims: BTreeMap<String, String> = [
        ("omp6", "l2_compiler_runtime_flags"),
        ("compile", "l1_vectorization"),
        ("same", "l2_threading_model"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    let declared: BTreeMap<String, DeclaredVerdict> = [(
        "l1_kernel_library".to_string(),
        DeclaredVerdict {
            verdict: Verdict::NotApplicable,
            reason: Some("no BLAS/conv kernels in the model".into()),
        },
    )]
    .into_iter()
    .collect();
    let rows = build_checklist(&r.analysis, &dims, &declared);
    assert_eq!(rows.len(), 10);
    let ids: Vec<&str> = rows.iter().map(|r| r.dimension.as_str()).collect();
    assert_eq!(ids, DIMENSIONS.iter().map(|d| d.0).collect::<Vec<_>>());
    assert_eq!(rows[0].group, "I/O");
    assert_eq!(rows[1].group, "communication");
    assert_eq!(rows[2].group, "memory");
    assert_eq!(rows[9].group, "compute");
    let row = |id: &str| rows.iter().find(|r| r.dimension == id).unwrap();
    assert_eq!(
        row("l2_compiler_runtime_flags").verdict,
        Verdict::AppliedMeasured
    );
    assert_eq!(row("l1_kernel_library").verdict, Verdict::NotApplicable);
    assert_eq!(row("l3_numa_affinity").verdict, Verdict::Missing);

    r.checklist = Some(rows);
    r.experiment = Some(ExperimentMeta {
        name: "pecan-compile".into(),
        description: None,
        metric: Some("DFTracer traces in `traces`, category `compute`".into()),
        variants: vec![VariantMeta {
            name: "compile".into(),
            dimension: Some("l1_vectorization".into()),
            description: Some("torch.compile(dynamic=True) fusion".into()),
        }],
    });
    let t = render_table(&r);
    assert!(t.contains("\nmetric: DFTracer traces in `traces`, category `compute`\n"));
    assert!(
        t.contains("recommended order: I/O → communication → memory → compute"),
        "{t}"
    );
    assert!(t.contains("MISSING"));
    assert!(t.contains("torch.compile(dynamic=True) fusion [L1 algorithmic/vectorization]"));
    assert!(!t.contains("checklist: not available"));
}

#[test]
fn plots_name_the_arms_and_epochs() {
    let r = report();
    let dir = tempfile::tempdir().unwrap();
    let paths = write_plots(&r, dir.path()).unwrap();
    assert_eq!(paths.len(), r.arms.len() + 1);
    for (arm, path) in r.arms.iter().zip(&paths) {
        let svg = std::fs::read_to_string(path).unwrap();
        assert!(
            svg.starts_with("<svg") || svg.contains("<svg"),
            "{}",
            path.display()
        );
        assert!(
            svg.contains(&arm.name),
            "{} lacks the arm name",
            path.display()
        );
        assert!(svg.contains("epoch 1 (one-time)"), "{}", path.display());
        assert!(svg.contains("epochs 2–5"), "{}", path.display());
        // The steady-state panel's x axis is labelled with the word alone.
        assert!(
            svg.contains(">\nepoch\n</text>"),
            "{} lacks the x axis label",
            path.display()
        );
    }
    let speed = std::fs::read_to_string(paths.last().unwrap()).unwrap();
    for v in &r.analysis.variants {
        assert!(speed.contains(&v.name), "speed-up plot lacks {}", v.name);
    }
    assert!(speed.contains("min worthwhile effect (1%)"));
}

/// The decision's provenance is typed in this crate: written into the provenance object
/// beside what was there, under the keys the daemon's reports have always had, and read
/// back whole from a rendered report.
#[test]
fn decision_provenance_joins_the_provenance_and_reads_back() {
    use optgate_report::{DecisionProvenance, JobProvenance, LookProvenance, SequentialProvenance};
    let mut r = report();
    assert_eq!(r.decision_provenance(), None, "a samples file has no looks");
    let d = DecisionProvenance {
        experiment_id: "20261201-010203-abcd".into(),
        sequential: SequentialProvenance {
            rule: "a single look".into(),
            overall_alpha: 0.05,
            first_look_blocks: 6,
            max_blocks: 6,
            planned_looks: 1,
            looks: vec![LookProvenance {
                look: 1,
                blocks: 6,
                nominal_alpha: 0.05,
                decisions: serde_json::json!([{"variant": "omp6", "decision": "accept"}]),
            }],
        },
        jobs: vec![JobProvenance {
            name: "og-20261201-010203-abcd-b001".into(),
            block: 1,
            attempt: 1,
            scheduler_job_id: Some("og-20261201-010203-abcd-b001".into()),
            state: "finished".into(),
        }],
        compute_node_findings: vec![],
    };
    r.set_decision_provenance(&d);
    let json: serde_json::Value = serde_json::from_str(&render_json(&r)).unwrap();
    let p = &json["provenance"];
    assert_eq!(p["samples_file"], "samples.csv", "what was there stays");
    assert_eq!(p["experiment_id"], "20261201-010203-abcd");
    assert_eq!(
        p["sequential"]["looks"][0]["decisions"][0]["decision"],
        "accept"
    );
    assert!(
        p.get("compute_node_findings").is_none(),
        "left out when empty"
    );
    let back: Report = serde_json::from_value(json).unwrap();
    assert_eq!(back.decision_provenance(), Some(d));
    assert_eq!(
        back.samples_provenance().map(|p| p.samples_file).as_deref(),
        Some("samples.csv")
    );
}

/// Utilisation, when the runs had task records: the proposal table marks the arm's
/// decision, the text and Markdown reports say what each task used, and the JSON carries
/// the finding in snake_case. Catches a renderer that drops the mark or the lines.
#[test]
fn utilisation_is_marked_next_to_the_decision() {
    use optgate_report::{ArmUtilisation, UtilisationFinding};
    let mut r = report();
    assert!(
        !render_json(&r).contains("\"utilisation\""),
        "no task records, no key"
    );
    r.utilisation = Some(vec![
        ArmUtilisation {
            arm: "base".into(),
            cores_allotted: 2.0,
            cores_used: 1.0,
            threads: Some(1.0),
            runnable_threads: None,
            under_load: false,
            of: optgate_report::UseOf::Tasks,
            finding: Some(UtilisationFinding::IdleCores),
        },
        ArmUtilisation {
            arm: "omp6".into(),
            cores_allotted: 1.0,
            cores_used: 1.0,
            threads: Some(4.0),
            runnable_threads: None,
            under_load: false,
            of: optgate_report::UseOf::Tasks,
            finding: Some(UtilisationFinding::Oversubscribed),
        },
    ]);
    let t = render_table(&r);
    assert!(t.contains("accept [oversubscribed]"), "{t}");
    assert!(
        t.contains(
            "base: each task used 1.0 of 2 allotted cores, 1 thread: most allotted cores idle"
        ),
        "{t}"
    );
    let m = render_markdown(&r);
    assert!(m.contains("[oversubscribed]"), "{m}");
    assert!(
        m.contains("- base: each task used 1.0 of 2 allotted cores"),
        "{m}"
    );
    let j: serde_json::Value = serde_json::from_str(&render_json(&r)).unwrap();
    assert_eq!(j["utilisation"][0]["finding"], "idle_cores");
    assert_eq!(j["utilisation"][1]["finding"], "oversubscribed");
}

/// The staged design's simulated operating characteristics: stated in the table and the
/// Markdown (power at 2× and 5× the minimum effect, the expected blocks, that they come
/// from the simulation), kept in the JSON and read back.
#[test]
fn operating_characteristics_are_stated_and_round_trip() {
    let mut r = report();
    assert!(!render_table(&r).contains("Operating characteristics"));
    let oc = optgate_stats::operating::characteristics(5, 20, 1, 1.0, 0.03 * 2f64.sqrt())
        .expect("the issue's design is simulated");
    r.operating_characteristics = Some(oc.clone());
    for text in [render_table(&r).replace("\n  ", " "), render_markdown(&r)] {
        assert!(
            text.contains("Operating characteristics of this design (5 blocks first, at most 20, 1 variant(s))"),
            "{text}"
        );
        let p5 = oc.points.iter().find(|p| p.effect_multiple == 5.0).unwrap();
        let power = format!("{:.0}% at +5.0% (5×)", 100.0 * p5.p_accept);
        assert!(text.contains(&power), "{power} in {text}");
        assert!(text.contains("with no effect") && text.contains("From the simulation"));
    }
    let back: Report = serde_json::from_str(&render_json(&r)).unwrap();
    assert_eq!(back.operating_characteristics, Some(oc));
}

/// Epochs printed as step counters (LAMMPS's `100, 200, …`): the per-epoch table of the
/// text, Markdown and HTML reports shows each position's label beside it, the JSON holds
/// them as `epoch_labels` and reads back; without labels the table keeps its one epoch
/// column and the JSON has no `epoch_labels`. Planted bugs caught: the labels dropped by
/// a renderer, shifted by one position, or written into a report that has none.
#[test]
fn epochs_show_the_labels_the_runs_printed() {
    let plain = report();
    assert!(!render_table(&plain).contains("Printed as"));
    assert!(!render_json(&plain).contains("epoch_labels"));
    let mut r = report();
    r.epoch_labels = (1..=5).map(|s| (100 * s).to_string()).collect();
    // The rows after the per-epoch table's header (the proposal table numbers its rows too).
    let row = |text: &str, position: u32| -> String {
        let table = &text[text.find("Printed as").expect("the label column")..];
        table
            .lines()
            .find(|l| {
                let cells: Vec<&str> = l.split(['|', ' ']).filter(|c| !c.is_empty()).collect();
                cells.first() == Some(&position.to_string().as_str())
            })
            .unwrap_or_else(|| panic!("no row of epoch {position} in\n{text}"))
            .to_string()
    };
    for text in [render_table(&r), render_markdown(&r)] {
        assert!(text.contains("Printed as"), "{text}");
        for p in 1..=5u32 {
            let cells: Vec<String> = row(&text, p)
                .split(['|', ' '])
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect();
            assert_eq!(cells[1], (100 * p).to_string(), "{text}");
        }
    }
    let html = optgate_report::render_html(&r).unwrap();
    assert!(html.contains(">Printed as</th>"), "{html}");
    assert!(
        html.contains("<tr><td>3</td><th scope=\"row\">300</th>"),
        "{html}"
    );
    let json = render_json(&r);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["epoch_labels"][2], "300");
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back.epoch_labels, r.epoch_labels);
}
