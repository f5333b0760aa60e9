//! Debian's LAMMPS as users run it, end to end through the real binary:
//! `experiments/lammps-melt.yaml` reads LAMMPS's own thermo lines (step counters as epoch
//! labels, the cumulative CPU column as a running clock) without a wrapper script, and
//! checks the total energy of the OPT kernels against the baseline's.

use crate::support;

use support::*;

/// `lmp` on PATH; CI installs it (`tests/run-all.sh` sets OPTGATE_REQUIRE_LAMMPS=1, so a
/// missing `lmp` fails there instead of skipping).
fn lammps_present() -> bool {
    let found = std::process::Command::new("sh")
        .args(["-c", "command -v lmp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("OPTGATE_REQUIRE_LAMMPS").is_none(),
            "OPTGATE_REQUIRE_LAMMPS is set but `lmp` is not on PATH (apt-get install lammps)"
        );
        eprintln!("skipped: `lmp` is not installed (apt-get install lammps)");
    }
    found
}

/// Each epoch's seconds as the thermo lines of `stdout` give them: the difference of the
/// `CPU` column to the previous line's (step 0's clock is 0), keyed by the printed step.
fn thermo_epochs(stdout: &str) -> Vec<(String, f64)> {
    let mut last = 0.0;
    let mut out = Vec::new();
    for line in stdout.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 6 || f.iter().any(|x| x.parse::<f64>().is_err()) {
            continue;
        }
        let clock: f64 = f[5].parse().unwrap();
        if f[0] != "0" {
            out.push((f[0].to_string(), clock - last));
        }
        last = clock;
    }
    out
}

#[test]
fn lammps_thermo_lines_are_per_epoch_metrics_and_the_energy_is_checked() {
    let _machine = support::measuring();
    if !lammps_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let workdir = repo_root().join("examples/lammps");
    let text = std::fs::read_to_string(repo_root().join("experiments/lammps-melt.yaml"))
        .unwrap()
        .replace(
            "workdir: ../examples/lammps",
            &format!("workdir: {}", workdir.display()),
        )
        .replace("max_replicates: 12", "max_replicates: 6");
    assert!(text.contains("max_replicates: 6") && !text.contains("workdir: .."));
    let (o, root) = run_experiment(dir.path(), &text, &["--json"]);
    assert_eq!(o.status.code(), Some(0), "stderr:\n{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();

    // The epochs are the printed step counters.
    let labels: Vec<String> = (1..=6).map(|i| (50 * i).to_string()).collect();
    assert_eq!(report["epoch_labels"], serde_json::json!(labels));

    // Every sample is the difference of LAMMPS's own CPU clock between two thermo lines.
    let csv = std::fs::read_to_string(root.join("samples.csv")).unwrap();
    let mut compared = 0;
    for b in 1..=6u32 {
        for arm in ["baseline", "opt-kernels"] {
            let out =
                std::fs::read_to_string(root.join(format!("runs/b{b:03}-{arm}/stdout"))).unwrap();
            let expected = thermo_epochs(&out);
            assert_eq!(
                expected.iter().map(|(l, _)| l.clone()).collect::<Vec<_>>(),
                labels
            );
            for (pos, (_, secs)) in expected.iter().enumerate() {
                let row = format!("{arm},{b},{b},{},", pos + 1);
                let line = csv
                    .lines()
                    .find(|l| l.starts_with(&row))
                    .unwrap_or_else(|| panic!("no sample {row} in\n{csv}"));
                let got: f64 = line.split(',').nth(4).unwrap().parse().unwrap();
                assert!((got - secs).abs() < 1e-6, "{row}: {got} vs thermo {secs}");
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 6 * 2 * 6);

    // The energies matched in every paired run, and the reason says so.
    let v = &report["variants"][0];
    assert_eq!(v["name"], "opt-kernels");
    assert_eq!(v["output_check"]["checked"], serde_json::json!(["values"]));
    assert!(v["output_check"]["runs"].as_u64().unwrap() >= 5, "{v:#}");
    assert!(v["correctness_mismatch"].is_null(), "{v:#}");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("equal within rel 1e-6 in 6/6 runs"),
        "{}",
        v["reason"]
    );
    assert!(!v["output_not_checked"].as_bool().unwrap_or(false));
    assert!(["accept", "reject", "inconclusive"].contains(&v["decision"].as_str().unwrap()));
    assert!(v["system_impact_pct"].is_number(), "{v:#}");
}
