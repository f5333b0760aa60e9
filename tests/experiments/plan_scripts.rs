//! `optgate validate` and `optgate plan` on the Slurm and Flux example experiments: every
//! job's batch script is written where the backend would write it, is valid bash, and gives
//! each arm its own launch line inside an allocation sized for the largest arm. No
//! scheduler is needed.

use crate::support;

use std::path::Path;
use std::process::Command;

use support::*;

fn plan(exp: &Path, out: &Path) -> std::process::Output {
    run(&[
        "plan",
        exp.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
}

fn job_scripts(out: &Path) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir(out.join("jobs"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let text = std::fs::read_to_string(e.path().join("job.sh")).unwrap();
            (name, text)
        })
        .collect();
    v.sort();
    v
}

fn bash_n(text: &str) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("job.sh");
    std::fs::write(&p, text).unwrap();
    let st = Command::new("bash").arg("-n").arg(&p).status().unwrap();
    assert!(st.success(), "bash -n failed on:\n{text}");
}

#[test]
fn the_example_experiments_validate_and_plan() {
    for name in [
        "quickstart-slurm",
        "vpic-threads-flux",
        "pecan-compile",
        "hybrid-flux",
    ] {
        let exp = repo_root().join(format!("experiments/{name}.yaml"));
        let o = run(&["validate", exp.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("plan");
        let o = plan(&exp, &out);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        let plan_json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("plan.json")).unwrap()).unwrap();
        let blocks = plan_json["blocks"].as_array().unwrap().len();
        let scripts = job_scripts(&out);
        assert_eq!(scripts.len(), blocks, "{name}: one job per block");
        for (job, text) in &scripts {
            assert!(job.starts_with(&format!("og-{name}-b")), "{job}");
            bash_n(text);
            assert!(text.contains("\"$OPTGATE_BIN\" probe --json > "), "{job}");
            // The hybrid example spans 2 nodes, one rank on each, 2 cores per rank.
            if name == "hybrid-flux" {
                assert!(text.contains("# flux: --nodes=2\n"), "{job}: {text}");
                assert!(
                    text.contains(" -- flux run -N 2 -n 2 -c 2; "),
                    "{job}: {text}"
                );
            }
        }
    }
}

#[test]
fn the_vpic_variant_gets_six_cores_per_task_and_the_baseline_one() {
    let exp = repo_root().join("experiments/vpic-threads-flux.yaml");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plan");
    assert_eq!(plan(&exp, &out).status.code(), Some(0));
    let (_, text) = &job_scripts(&out)[0];
    for line in [
        "# flux: --nodes=1\n",
        // One slot per node holding the largest arm: 16 tasks × 6 cores.
        "# flux: --nslots=1\n",
        "# flux: --cores-per-slot=96\n",
        "# flux: --time-limit=1h\n",
        "# flux: --queue=pdebug\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    let launch = |arm: &str| {
        text.lines()
            .find(|l| l.contains(&format!("-{arm}")) && l.contains("exec-run"))
            .unwrap_or_else(|| panic!("no line for {arm}:\n{text}"))
            .to_string()
    };
    assert!(launch("omp6-spread").ends_with(" -- flux run -N 1 -n 16 -c 6; og_after $?"));
    assert!(launch("baseline").ends_with(" -- flux run -N 1 -n 16 -c 1; og_after $?"));
    // The environment of the variant is in its run script, quoted, not on the launch line.
    let run_sh = std::fs::read_to_string(out.join("runs/b001-omp6-spread/run.sh")).unwrap();
    assert!(run_sh.contains("export OMP_NUM_THREADS=6\n"));
    assert!(run_sh.contains("export OMP_PROC_BIND=spread\n"));
}

#[test]
fn independent_design_plans_one_job_per_run() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = fake_app_experiment(
        "indep",
        "design: independent\nscheduler: { kind: slurm, time_limit: 5m }\n",
    );
    let exp = write_experiment(dir.path(), &yaml);
    let out = dir.path().join("plan");
    let o = plan(&exp, &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let scripts = job_scripts(&out);
    assert_eq!(scripts.len(), 10, "5 replicates x 2 arms");
    assert!(scripts.iter().any(|(n, _)| n == "og-indep-b001-v1"));
    for (_, text) in &scripts {
        assert_eq!(text.matches(" exec-run ").count(), 1);
        assert!(text.contains("#SBATCH --time=0-00:05:00\n"));
    }
}

#[test]
fn a_value_a_directive_cannot_carry_is_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = fake_app_experiment(
        "bad-directive",
        "scheduler: { kind: slurm, extra_directives: [\"--comment=two words\"] }\n",
    );
    let exp = write_experiment(dir.path(), &yaml);
    let o = plan(&exp, &dir.path().join("plan"));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--comment=two words"), "{}", stderr(&o));
}

#[test]
fn a_local_experiment_has_no_job_scripts() {
    let dir = tempfile::tempdir().unwrap();
    let exp = write_experiment(dir.path(), &fake_app_experiment("local", ""));
    let out = dir.path().join("plan");
    assert_eq!(plan(&exp, &out).status.code(), Some(0));
    assert!(!out.join("jobs").exists());
}

/// Batch scripts call the `optgate` the compute nodes can see: `$OPTGATE_BIN` when set
/// (a shared path, or a bare name their PATH resolves), else the binary that planned.
#[test]
fn job_scripts_call_the_optgate_named_by_optgate_bin() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = fake_app_experiment("bin", "scheduler: { kind: slurm }\n");
    let exp = write_experiment(dir.path(), &yaml);
    let out = dir.path().join("plan");
    let o = optgate()
        .args([
            "plan",
            exp.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .env("OPTGATE_BIN", "/shared/apps/optgate")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let scripts = job_scripts(&out);
    assert!(!scripts.is_empty());
    for (name, text) in &scripts {
        // The script names it once; every launch line calls "$OPTGATE_BIN".
        assert!(
            text.contains("\nOPTGATE_BIN=/shared/apps/optgate\n"),
            "{name}:\n{text}"
        );
        assert!(
            text.contains("\"$OPTGATE_BIN\" exec-run "),
            "{name}:\n{text}"
        );
        assert!(
            !text.contains(env!("CARGO_BIN_EXE_optgate")),
            "{name} still names the build's binary:\n{text}"
        );
    }
    // Without it: the binary that made the plan.
    let out2 = dir.path().join("plan2");
    let o = optgate()
        .args([
            "plan",
            exp.to_str().unwrap(),
            "--out",
            out2.to_str().unwrap(),
        ])
        .env_remove("OPTGATE_BIN")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (_, text) = &job_scripts(&out2)[0];
    assert!(text.contains(env!("CARGO_BIN_EXE_optgate")), "{text}");
}

/// Blocks never share a node by default: a blocked experiment's jobs ask for whole nodes,
/// and the plan says so; `scheduler.exclusive: false` is the user's choice, said too.
#[test]
fn blocked_jobs_ask_for_whole_nodes_unless_told_not_to() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, exclusive) in [
        ("scheduler: { kind: slurm }\n", true),
        ("scheduler: { kind: slurm, exclusive: false }\n", false),
        ("scheduler: { kind: flux }\n", true),
    ] {
        let exp = write_experiment(dir.path(), &fake_app_experiment("excl", extra));
        let out = tempfile::tempdir().unwrap();
        let o = plan(&exp, out.path());
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let said = stdout(&o);
        let (_, text) = &job_scripts(out.path())[0];
        let has = text.contains("#SBATCH --exclusive\n") || text.contains("# flux: --exclusive\n");
        assert_eq!(has, exclusive, "{extra}:\n{text}");
        if exclusive {
            assert!(said.contains("one block at a time per node"), "{said}");
        } else {
            assert!(said.contains("blocks may run side by side"), "{said}");
        }
    }
}

/// Every experiment file shipped in `experiments/` validates as it is — except the
/// baseline-only input of `optgate propose`, whose one error must be that it has no
/// variants yet (the error that points at propose).
#[test]
fn every_shipped_experiment_validates() {
    let mut seen = 0;
    for e in std::fs::read_dir(repo_root().join("experiments")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            let o = run(&["validate", p.to_str().unwrap()]);
            let text = std::fs::read_to_string(&p).unwrap();
            if text.contains("\nvariants:") || text.contains("\nstages:") {
                assert_eq!(o.status.code(), Some(0), "{}: {}", p.display(), stderr(&o));
            } else {
                let said = stderr(&o);
                assert_eq!(o.status.code(), Some(2), "{}: {said}", p.display());
                assert!(
                    said.contains("1 error in the experiment file")
                        && said.contains("the experiment has no variants")
                        && said.contains("optgate propose"),
                    "{}: {said}",
                    p.display()
                );
            }
            seen += 1;
        }
    }
    assert!(seen >= 6, "{seen}");
}

/// torch.compile switched as job scripts switch it: the baseline exports
/// TORCH_COMPILE_DISABLE, the variants remove it; every run's Inductor and Triton caches
/// are inside its own run directory, except the warm arm's, which share one with its
/// warm-up script.
#[test]
fn the_torch_compile_example_renders_its_switch_and_its_caches() {
    let exp = repo_root().join("experiments/pecan-torch-compile.yaml");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plan");
    let o = plan(&exp, &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let script = |run: &str, file: &str| {
        std::fs::read_to_string(out.join("runs").join(run).join(file))
            .unwrap_or_else(|e| panic!("{run}/{file}: {e}"))
    };
    let base = script("b001-baseline", "run.sh");
    assert!(
        base.contains("\nexport TORCH_COMPILE_DISABLE=1\n"),
        "{base}"
    );
    let cache = out.join("runs/b001-baseline/caches/torchinductor");
    assert!(
        base.contains(&format!(
            "\nexport TORCHINDUCTOR_CACHE_DIR={}\n",
            cache.display()
        )),
        "{base}"
    );
    let cold = script("b001-compile-cold", "run.sh");
    assert!(!cold.contains("export TORCH_COMPILE_DISABLE"), "{cold}");
    assert!(cold.contains("\nunset TORCH_COMPILE_DISABLE\n"), "{cold}");
    assert!(!out.join("runs/b001-compile-cold/warmup.sh").exists());
    let warm = script("b001-compile-warm", "run.sh");
    let shared = out.join("caches/compile-warm");
    assert!(
        warm.contains(&format!(
            "\nexport TRITON_CACHE_DIR={}\n",
            shared.join("triton").display()
        )),
        "{warm}"
    );
    let warmup = script("b001-compile-warm", "warmup.sh");
    assert!(
        warmup.contains(&format!("cd -- {} ||", shared.join("warmup").display())),
        "{warmup}"
    );
    let tuned = script("b001-max-autotune", "run.sh");
    assert!(
        tuned.contains("\nexport TORCHINDUCTOR_MAX_AUTOTUNE=1\n"),
        "{tuned}"
    );
}
