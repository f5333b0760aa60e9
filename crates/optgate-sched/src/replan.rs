//! What to do with a job that ended early (time limit, cancellation, node failure,
//! pre-emption): its finished runs are kept — their manifests say so — and the rest are
//! re-planned into a new job on a new allocation. A run counts as finished when its manifest
//! says completed, failed or timed out (all three are data); a run with no manifest, or
//! one that says interrupted, runs again.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::backend::{JobRun, JobSpec};
use optgate_wrapper::manifest::{ManifestError, RunManifest};

/// Whether a run with this manifest (or none) must run again.
pub fn needs_rerun(manifest: Option<&RunManifest>) -> bool {
    manifest.is_none_or(|m| !m.outcome.is_final())
}

/// The manifests of a job's runs that have one, by run id.
pub fn read_manifests(job: &JobSpec) -> Result<BTreeMap<String, RunManifest>, ManifestError> {
    let mut out = BTreeMap::new();
    for run in &job.runs {
        if let Some(m) = RunManifest::read(&run.run_dir)? {
            out.insert(run.run_id.clone(), m);
        }
    }
    Ok(out)
}

/// The runs of `job` still to do, in the job's order, given its runs' manifests.
pub fn runs_to_replan(job: &JobSpec, manifests: &BTreeMap<String, RunManifest>) -> Vec<JobRun> {
    job.runs
        .iter()
        .filter(|r| needs_rerun(manifests.get(&r.run_id)))
        .cloned()
        .collect()
}

/// The name of the `attempt`-th resubmission of a job. `+` cannot occur in optgate's own
/// names (experiment and arm names are letters, digits, `_`, `-`, `.`), so a retry can
/// never take the name of another block's or run's job, and `find_by_name` after a crash
/// finds exactly this attempt.
pub fn retry_name(original: &str, attempt: u32) -> String {
    format!("{original}+r{attempt}")
}

/// The job that finishes what `original` left undone: same allocation, only the runs whose
/// manifests are missing or interrupted, a name and directory of its own. `None` when
/// every run finished. Always re-plan from the original job (all of the block's runs), so
/// that several attempts in a row never lose a run.
pub fn replan_job(
    original: &JobSpec,
    attempt: u32,
    manifests: &BTreeMap<String, RunManifest>,
) -> Option<JobSpec> {
    let runs = runs_to_replan(original, manifests);
    if runs.is_empty() {
        return None;
    }
    let name = retry_name(&original.name, attempt);
    let dir = match original.dir.parent() {
        Some(parent) => parent.join(&name),
        None => PathBuf::from(&name),
    };
    Some(JobSpec {
        name,
        dir,
        runs,
        attempt,
        ..original.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use optgate_wrapper::manifest::{MANIFEST_SCHEMA, Outcome};
    use std::time::Duration;

    fn run(id: &str, dir: &std::path::Path) -> JobRun {
        JobRun {
            run_id: id.into(),
            arm: id.split('-').nth(1).unwrap().into(),
            block: 3,
            replicate: 3,
            run_dir: dir.join(id),
            nodes: 1,
            tasks_per_node: 1,
            cpus_per_task: 1,
            gpus_per_task: 0,
            launcher_args: vec![],
            time_limit: None,
            governor: None,
        }
    }

    fn manifest(run_id: &str, outcome: Outcome) -> RunManifest {
        RunManifest {
            schema: MANIFEST_SCHEMA,
            experiment: "e".into(),
            run_id: run_id.into(),
            arm: "a".into(),
            block: 3,
            replicate: 3,
            host: "n1".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            ended_at: "2026-01-01T00:00:01Z".into(),
            elapsed_s: 1.0,
            outcome,
            exit_code: Some(0),
            signal: None,
            env_set: Default::default(),
            env_unset: vec![],
            environment: Default::default(),
            environment_withheld: vec![],
            conditions: None,
            script: "run.sh".into(),
            scheduler_job_id: Some("7".into()),
            optgate_version: "0".into(),
            attempt: Some(1),
            step_governors: Default::default(),
            resources: None,
            isolation: None,
        }
    }

    fn job(dir: &std::path::Path) -> JobSpec {
        JobSpec {
            name: "og-e1-b003".into(),
            dir: dir.join("jobs/og-e1-b003"),
            runs: ["b003-base", "b003-omp6", "b003-compile", "b003-native"]
                .iter()
                .map(|id| run(id, dir))
                .collect(),
            nodes: 1,
            tasks_per_node: 1,
            cpus_per_task: 6,
            gpus_per_task: 0,
            time_limit: Duration::from_secs(600),
            queue: None,
            account: None,
            exclusive: false,
            extra_directives: vec![],
            optgate_bin: "/bin/optgate".into(),
            attempt: 1,
        }
    }

    #[test]
    fn finished_runs_are_kept_and_the_rest_replanned_in_order() {
        let root = std::path::Path::new("/scratch/x");
        let j = job(root);
        // A timed-out block: two runs finished (one of them failed: that is data), the
        // third was interrupted by the time limit, the fourth never started.
        let mut m = BTreeMap::new();
        m.insert(
            "b003-base".to_string(),
            manifest("b003-base", Outcome::Completed),
        );
        m.insert(
            "b003-omp6".to_string(),
            manifest("b003-omp6", Outcome::Failed),
        );
        m.insert(
            "b003-compile".to_string(),
            manifest("b003-compile", Outcome::Interrupted),
        );
        let ids: Vec<String> = runs_to_replan(&j, &m)
            .into_iter()
            .map(|r| r.run_id)
            .collect();
        assert_eq!(ids, ["b003-compile", "b003-native"]);

        let next = replan_job(&j, 1, &m).unwrap();
        assert_eq!(next.name, "og-e1-b003+r1");
        assert_eq!(next.dir, root.join("jobs/og-e1-b003+r1"));
        assert_eq!(next.runs.len(), 2);
        assert_eq!(next.cpus_per_task, 6, "the allocation is kept");

        m.insert(
            "b003-compile".to_string(),
            manifest("b003-compile", Outcome::TimedOut),
        );
        m.insert(
            "b003-native".to_string(),
            manifest("b003-native", Outcome::Completed),
        );
        assert!(replan_job(&j, 2, &m).is_none());
    }

    #[test]
    fn manifests_are_read_from_the_run_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let j = job(tmp.path());
        for r in &j.runs {
            std::fs::create_dir_all(&r.run_dir).unwrap();
        }
        manifest("b003-omp6", Outcome::Completed)
            .write(&j.runs[1].run_dir)
            .unwrap();
        let m = read_manifests(&j).unwrap();
        assert_eq!(m.keys().collect::<Vec<_>>(), ["b003-omp6"]);
        let left: Vec<String> = runs_to_replan(&j, &m)
            .into_iter()
            .map(|r| r.run_id)
            .collect();
        assert_eq!(left, ["b003-base", "b003-compile", "b003-native"]);
    }
}
