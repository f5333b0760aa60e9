//! `optgate propose`, end to end through the real binary on this machine (local runs): the
//! shipped baseline-only `experiments/propose-stencil.yaml` — an OpenMP stencil built to run
//! one thread when OMP_NUM_THREADS is unset — is measured, and the file it writes must
//! propose one thread per allotted core, cover all ten checklist dimensions with a reason,
//! validate without a warning, and, run unedited, accept that variant. A file that already
//! has the variant keeps it and gains only what is missing; an existing output is never
//! replaced without `--force`.

use crate::support;

use std::path::{Path, PathBuf};

use optgate_experiment::ExperimentFile;
use optgate_experiment::checklist::DIMENSIONS;
use support::*;

/// The shipped file, its workdir pointed at a private copy of the stencil (so its runs land
/// in the test's directory, not in the checkout) and half its sweeps, written as
/// `dir/propose-stencil.yaml`.
fn baseline_only(dir: &Path, extra: &str) -> PathBuf {
    let work = dir.join("openmp-stencil");
    std::fs::create_dir_all(&work).unwrap();
    let root = repo_root();
    std::fs::copy(
        root.join("examples/openmp-stencil/stencil.c"),
        work.join("stencil.c"),
    )
    .unwrap();
    let from = "workdir: ../examples/openmp-stencil";
    let yaml = std::fs::read_to_string(root.join("experiments/propose-stencil.yaml")).unwrap();
    assert!(
        yaml.contains(from),
        "propose-stencil.yaml changed its workdir"
    );
    // Half the sweeps per epoch: the facts (an idle core, one thread) and the 2-thread
    // variant's win do not depend on the epoch's length, and the runs take half the time.
    let sweeps = r#""--sweeps", "60""#;
    assert!(
        yaml.contains(sweeps),
        "propose-stencil.yaml changed its sweeps"
    );
    let yaml = yaml
        .replace(from, &format!("workdir: {}", work.display()))
        .replace(sweeps, r#""--sweeps", "30""#)
        + extra;
    let path = dir.join("propose-stencil.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

/// The CPUs this process (and so each local run) may use, read from `/proc/self/status`
/// (`Cpus_allowed_list: 0-1,4`), not through the product's own affinity call.
fn allowed_cpus() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    list.split(',')
        .map(|part| match part.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

fn propose(file: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["propose", file.to_str().unwrap(), "--quiet"];
    args.extend_from_slice(extra);
    run(&args)
}

fn parsed(path: &Path) -> ExperimentFile {
    let text = std::fs::read_to_string(path).unwrap();
    optgate_experiment::yaml::from_str_all(&text)
        .unwrap_or_else(|e| panic!("{} does not parse: {e:?}\n{text}", path.display()))
}

/// Every dimension has a variant or a verdict whose reason is not empty.
fn check_all_ten_covered(file: &ExperimentFile) {
    for d in DIMENSIONS {
        let by_variant = file
            .variants
            .iter()
            .any(|v| v.dimension.as_deref() == Some(d.id));
        let by_verdict = file
            .checklist
            .get(d.id)
            .is_some_and(|c| c.reason.as_deref().is_some_and(|r| !r.trim().is_empty()));
        assert!(by_variant || by_verdict, "{} is not covered", d.id);
    }
}

#[test]
fn an_idle_core_baseline_gets_one_thread_per_core_and_it_is_accepted() {
    let _machine = measuring();
    let n = allowed_cpus();
    assert!(
        n >= 2,
        "this test needs 2 or more CPUs to leave one idle (has {n})"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = baseline_only(dir.path(), "");
    let o = propose(&file, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = dir.path().join("propose-stencil.proposed.yaml");
    let proposed = parsed(&out);
    let threads = proposed
        .variants
        .iter()
        .find(|v| v.dimension.as_deref() == Some("l2_threading_model"))
        .unwrap_or_else(|| panic!("no threads variant:\n{}", stderr(&o)));
    assert_eq!(threads.env["OMP_NUM_THREADS"].0, n.to_string());
    assert_eq!(threads.env["OMP_PROC_BIND"].0, "spread");
    assert_eq!(threads.launcher.cpus_per_task, Some(n as u32));
    let description = threads.description.as_deref().unwrap_or("");
    assert!(
        description.contains(&format!("of {n} allotted cores")) && description.contains("unset"),
        "the variant does not say the fact it came from: {description}"
    );
    check_all_ten_covered(&proposed);

    let v = run(&["validate", out.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(0), "{}", stderr(&v));
    assert!(
        !stderr(&v).contains("warning"),
        "validate warns:\n{}",
        stderr(&v)
    );

    // Never over an existing file without --force; the file is left as it was.
    let before = std::fs::read(&out).unwrap();
    let again = propose(&file, &[]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(stderr(&again).contains("--force"), "{}", stderr(&again));
    assert_eq!(std::fs::read(&out).unwrap(), before);

    let r = run(&["run", out.to_str().unwrap(), "--json", "--quiet"]);
    let report: serde_json::Value =
        serde_json::from_slice(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&r)));
    let decided = report["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == threads.name.as_str())
        .unwrap();
    assert_eq!(decided["decision"], "accept", "{decided:#}");
    let said = report["experiment"]["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == threads.name.as_str())
        .and_then(|v| v["description"].as_str())
        .unwrap_or("");
    assert!(
        said.contains("allotted cores"),
        "the report lost the fact: {said}"
    );
}

#[test]
fn a_file_with_the_variant_keeps_it_and_gains_only_what_is_missing() {
    let _machine = measuring();
    let n = allowed_cpus();
    assert!(
        n >= 2,
        "this test needs 2 or more CPUs to leave one idle (has {n})"
    );
    let dir = tempfile::tempdir().unwrap();
    let mine = format!(
        "variants:\n  - name: my-threads\n    dimension: l2_threading_model\n    \
         description: mine\n    env: {{ OMP_NUM_THREADS: \"{n}\", OMP_PLACES: \"cores\", \
         OMP_PROC_BIND: \"spread\" }}\n    launcher: {{ cpus_per_task: {n} }}\n\
         checklist:\n  l2_autotuning: {{ verdict: not_applicable, reason: \"mine too\" }}\n"
    );
    let file = baseline_only(dir.path(), &mine);
    let out = dir.path().join("mine.yaml");
    std::fs::write(&out, "not mine to lose").unwrap();
    let o = propose(&file, &["-o", out.to_str().unwrap(), "--force"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("variant `my-threads` already has these settings"),
        "{}",
        stderr(&o)
    );
    let proposed = parsed(&out);
    let threads: Vec<&str> = proposed
        .variants
        .iter()
        .filter(|v| v.env.contains_key("OMP_NUM_THREADS"))
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(
        threads,
        ["my-threads"],
        "the file's variant was repeated or lost"
    );
    assert_eq!(
        proposed.checklist["l2_autotuning"].reason.as_deref(),
        Some("mine too")
    );
    assert!(
        proposed.variants.iter().any(|v| v.name == "o3-native"),
        "the missing build variant was not added"
    );
    check_all_ten_covered(&proposed);
}
